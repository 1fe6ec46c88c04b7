//! Arbitrary text as drover.toml and as a pool file, through the loader drover runs on its
//! files (`drover::config::load_texts`): every input is either a configuration or located
//! errors, never a panic; a configuration renders as `drover -t` prints it.
//!
//! Input: drover.toml's text, a NUL, then pools.d/www.toml's text. Without a NUL the whole
//! input is the pool file, beside an empty drover.toml.

#![no_main]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (main, pool) = match data.iter().position(|&b| b == 0) {
        Some(nul) => (&data[..nul], &data[nul + 1..]),
        None => (&b""[..], data),
    };
    let dir = Path::new("/nonexistent/drover-fuzz");
    let main_path = dir.join("drover.toml");
    let files: BTreeMap<PathBuf, String> = [
        (
            main_path.clone(),
            String::from_utf8_lossy(main).into_owned(),
        ),
        (
            dir.join("pools.d/www.toml"),
            String::from_utf8_lossy(pool).into_owned(),
        ),
    ]
    .into_iter()
    .collect();
    let Ok(config) = drover::config::load_texts(&main_path, &files) else {
        return;
    };
    let _ = config.render();
});
