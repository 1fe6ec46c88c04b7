//! Hostile: body (tests to come).
