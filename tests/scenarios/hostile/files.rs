//! Hostile: files (tests to come).
