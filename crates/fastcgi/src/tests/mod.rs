//! Connection-level tests: a web server's side of the conversation is played from bytes
//! (built by hand, independently of the codec under test where it matters), and the
//! answer is parsed back into records.

mod control;
mod decoder;
mod errors;
mod fuzz;
mod interop;
mod requests;
mod support;
