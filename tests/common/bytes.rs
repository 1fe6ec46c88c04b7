//! Test payloads and their digests, for uploads and downloads checked end to end.

use std::process::Command;

use super::Site;

/// Incompressible, reproducible bytes (xorshift from `seed`).
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The hex digest of `bytes` by a coreutils tool (`md5sum`, `sha256sum`): std has none.
pub fn digest(site: &Site, tool: &str, bytes: &[u8]) -> String {
    let path = site.path().join(format!("{tool}-input.bin"));
    std::fs::write(&path, bytes).expect("write bytes to hash");
    let out = Command::new(tool)
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("run {tool}: {e}"));
    let text = String::from_utf8(out.stdout).unwrap_or_else(|_| panic!("{tool} output"));
    text.split_whitespace()
        .next()
        .unwrap_or_else(|| panic!("no digest from {tool}"))
        .to_string()
}
