//! systemd integration: `Type=notify` readiness and stop notices. Outside systemd
//! (`NOTIFY_SOCKET` unset) every call is a no-op.

use sd_notify::NotifyState;

/// Every pool is up: systemd may consider the unit started.
pub fn ready(status: &str) {
    notify(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// A graceful or fast stop has begun.
pub fn stopping() {
    notify(&[NotifyState::Stopping]);
}

pub fn status(status: &str) {
    notify(&[NotifyState::Status(status)]);
}

fn notify(states: &[NotifyState]) {
    // A failed notify is not worth stopping for: systemd would time the unit out and say so.
    if let Err(err) = sd_notify::notify(states) {
        tracing::debug!("sd_notify failed: {err}");
    }
}
