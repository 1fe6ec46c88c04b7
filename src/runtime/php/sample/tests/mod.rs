//! Tests of the sampler against this machine's PHP: the offsets table against the real
//! headers ([`headers`]), and a live php-cgi sampled while idle and while running a request
//! ([`live`], with a hand-built FastCGI client in [`fcgi`]). Each skips, saying why, when
//! what it needs (cc, php8.x-dev headers, php-cgi) is not installed.

mod fcgi;
mod headers;
mod live;

use std::path::PathBuf;

/// The first `name` on PATH.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Runs `program args` and returns its trimmed stdout, or None if it failed.
fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[test]
fn finds_the_first_mapping_of_the_binary() {
    let maps = "\
55d0c6a00000-55d0c6adc000 r--p 00000000 fd:01 1314 /usr/bin/php-cgi8.2
55d0c6add000-55d0c6de4000 r-xp 000dd000 fd:01 1314 /usr/bin/php-cgi8.2
7f1c2a000000-7f1c2a022000 r--p 00000000 fd:01 2000 /usr/lib/x86_64-linux-gnu/libc.so.6
";
    let dev = (0xfd << 8) | 0x01; // glibc's makedev(0xfd, 1)
    let lines = || maps.lines().map(String::from);
    assert_eq!(
        super::first_mapping(lines(), dev, 1314),
        Some((0x55d0_c6a0_0000, 0))
    );
    assert_eq!(
        super::first_mapping(lines(), dev, 2000),
        Some((0x7f1c_2a00_0000, 0))
    );
    assert_eq!(super::first_mapping(lines(), dev + 1, 1314), None);
    assert_eq!(super::first_mapping(lines(), dev, 9), None);
}
