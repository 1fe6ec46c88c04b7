//! Hostile: slowloris (tests to come).
