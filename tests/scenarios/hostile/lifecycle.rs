//! Hostile: lifecycle (tests to come).
