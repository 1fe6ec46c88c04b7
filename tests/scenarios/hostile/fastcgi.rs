//! Hostile: fastcgi (tests to come).
