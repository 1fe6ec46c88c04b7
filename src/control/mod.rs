//! The control plane's building blocks: the status data model and its renderers, the
//! control socket's HTTP server and the pools' `status_listen` servers. `drover ctl`, the
//! client, is drover-admin's (crates/admin/src/ctl).
//!
//! The master owns the data and applies commands; this module only speaks HTTP. A request
//! that needs the master becomes a [`ControlRequest`], sent with a oneshot for the
//! [`ControlReply`] over the channel made by [`channel`]. The master answers from its loop:
//!
//! ```text
//! drover ctl ──HTTP/unix──▶ server task ──(ControlRequest, oneshot)──▶ master loop
//! nginx/Prometheus ──HTTP──▶ status task ─┘            ◀──ControlReply──┘
//! ```
//!
//! | route                              | request to the master               | answer |
//! |------------------------------------|-------------------------------------|--------|
//! | `GET /ping`                        | none (the server answers)           | `pong`, text/plain |
//! | `GET /livez`                       | `Live` (the loop answers in time)   | `ok`, or 503 |
//! | `GET /readyz?verbose`              | `Ready`                             | `ok`, or 503 and the failed checks ([`health`]) |
//! | `GET /status?pool=&format=&full`   | `Status { pool }`                   | text, JSON or OpenMetrics |
//! | `GET /metrics?pool=&full`          | `Status { pool }`                   | Prometheus text, or OpenMetrics by `Accept` |
//! | `GET /config?pool=`                | `Config { pool }`                   | the reply's text, text/plain |
//! | `POST /pools/NAME/set` `K=V` lines | `Set { pool, changes }`             | `{"message": ...}` |
//! | `POST /reload?pool=&changed`       | `Reload { pool, changed }`          | `{"message": ...}` |
//! | `POST /pools/NAME/workers` `+N/-N` | `Workers { pool, delta }`           | `{"message": ...}` |
//!
//! Every error is its HTTP status with `{"error": "..."}`. A `status_listen` server answers
//! only `/ping`, `/status` and `/metrics`, for its own pool; `health_listen` only `/ping`,
//! `/livez` and `/readyz`.
//!
//! - `request`: what the servers ask the master and what it answers, over [`channel`].
//! - [`model`]: what the status shows, as plain data.
//! - [`render`]: text (php-fpm's layout), JSON (php-fpm's keys), OpenMetrics and
//!   Prometheus text.
//! - [`server`]: binding the sockets and serving them on the master's runtime.

pub mod health;
pub mod model;
mod openmetrics;
pub mod render;
mod request;
mod route;
pub mod server;

/// Status fixtures for tests, here and in drover-admin (its client is tested against
/// [`server`] there, with feature `test-fixtures`).
#[cfg(any(test, feature = "test-fixtures"))]
#[doc(hidden)]
pub mod fixture;

pub use model::{
    BackoffStatus, Limits, MemoryStatus, PoolStatus, QueueStatus, Recycled, WorkerStatus,
};
pub use request::{ControlReply, ControlRequest, Envelope, Format, ToMaster, channel};
pub use server::{ControlSocket, HealthSocket, Served, StatusSocket};
