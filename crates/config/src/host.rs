//! What loading asks of the machine it runs on: whether drover-php can run PHP here (a
//! `[php]` pool without `runtime` runs on it where it can). Finding out runs drover-php,
//! and loading runs no program itself: the program that loads gives the probe once, at
//! start ([`probe_php_with`]; `drover` and `drover-admin` give
//! `runtime::php::embed::usable`, which asks once per process).

use std::sync::OnceLock;

/// Whether drover-php can run PHP here: `Ok` with the line naming PHP (`PHP 8.2.36
/// (embed)`), or why not.
pub type PhpProbe = fn() -> Result<&'static str, &'static str>;

static PHP: OnceLock<PhpProbe> = OnceLock::new();

/// Gives the loader its drover-php probe; the first call wins.
pub fn probe_php_with(probe: PhpProbe) {
    let _ = PHP.set(probe);
}

/// The probe's answer; without a probe, drover-php counts as not usable.
pub(super) fn php_usable() -> Result<&'static str, &'static str> {
    match PHP.get() {
        Some(probe) => probe(),
        None => {
            Err("drover-php was not asked (the program loading the configuration gave no probe)")
        }
    }
}
