//! Hostile: reload (tests to come).
