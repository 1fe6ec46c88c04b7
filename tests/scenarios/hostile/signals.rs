//! Hostile: signals (tests to come).
