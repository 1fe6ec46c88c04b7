//! Just enough ELF64 (little-endian) to sample php-cgi: the machine, the first `PT_LOAD`
//! (for the load bias), named symbols of `.dynsym` (present even in stripped binaries), and
//! the PHP version string from `.rodata`. Reads only the headers and those sections, with
//! every size bounded; a malformed file gives an error, never a panic.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::offsets::Arch;

/// What the sampler needs from one binary.
#[derive(Debug, Clone)]
pub struct ElfInfo {
    pub arch: Option<Arch>,
    /// `p_vaddr - p_offset` of the first `PT_LOAD`, page-aligned: subtract it from the run-time
    /// address of the file's first mapping (minus that mapping's offset) to get the load bias.
    pub first_load_delta: u64,
    /// The wanted symbols that `.dynsym` defines: name → (value, size).
    pub symbols: HashMap<String, (u64, u64)>,
    /// (major, minor, patch) from `X-Powered-By: PHP/x.y.z`, else (8, minor, 0) from
    /// `Zend Engine v4.minor`.
    pub php_version: Option<(u32, u32, u32)>,
}

#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    #[error("reading the binary: {0}")]
    Io(#[from] std::io::Error),
    #[error("not a 64-bit little-endian ELF file")]
    NotElf64,
    #[error("malformed ELF: {0}")]
    Malformed(&'static str),
}

const MAX_SECTION: u64 = 64 << 20;
const SHT_PROGBITS: u32 = 1;
const SHT_DYNSYM: u32 = 11;
const PT_LOAD: u32 = 1;
const EM_X86_64: u16 = 62;
const EM_AARCH64: u16 = 183;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn read_at(file: &File, offset: u64, len: u64) -> Result<Vec<u8>, ElfError> {
    if len > MAX_SECTION {
        return Err(ElfError::Malformed("section too large"));
    }
    let mut buf = vec![0; len as usize];
    file.read_exact_at(&mut buf, offset)?;
    Ok(buf)
}

struct Section {
    name: u32,
    kind: u32,
    offset: u64,
    size: u64,
    link: u32,
}

/// Reads `path` and looks up `wanted` in its dynamic symbol table.
pub fn inspect(path: &Path, wanted: &[&str]) -> Result<ElfInfo, ElfError> {
    let file = File::open(path)?;
    let header = read_at(&file, 0, 64)?;
    if header[..4] != *b"\x7fELF" || header[4] != 2 || header[5] != 1 {
        return Err(ElfError::NotElf64);
    }
    let bad = ElfError::Malformed;
    let machine = u16_at(&header, 18).ok_or(bad("header"))?;
    let arch = match machine {
        EM_X86_64 => Some(Arch::X86_64),
        EM_AARCH64 => Some(Arch::Aarch64),
        _ => None,
    };
    let (phoff, shoff) = (
        u64_at(&header, 32).ok_or(bad("header"))?,
        u64_at(&header, 40).ok_or(bad("header"))?,
    );
    let phentsize = u64::from(u16_at(&header, 54).ok_or(bad("header"))?);
    let phnum = u64::from(u16_at(&header, 56).ok_or(bad("header"))?);
    let shentsize = u64::from(u16_at(&header, 58).ok_or(bad("header"))?);
    let shnum = u64::from(u16_at(&header, 60).ok_or(bad("header"))?);
    let shstrndx = usize::from(u16_at(&header, 62).ok_or(bad("header"))?);
    if phentsize < 56 || shentsize < 64 {
        return Err(bad("entry sizes"));
    }

    let phdrs = read_at(&file, phoff, phentsize * phnum)?;
    let first_load = (0..phnum as usize)
        .map(|i| i * phentsize as usize)
        .find(|&at| u32_at(&phdrs, at) == Some(PT_LOAD))
        .ok_or(bad("no PT_LOAD"))?;
    let p_offset = u64_at(&phdrs, first_load + 8).ok_or(bad("phdr"))?;
    let p_vaddr = u64_at(&phdrs, first_load + 16).ok_or(bad("phdr"))?;
    // Mappings start on page boundaries: round both down to 4 KiB (every page size is a
    // multiple of it, and a segment's vaddr and offset agree modulo the page size).
    let first_load_delta = (p_vaddr & !0xfff).wrapping_sub(p_offset & !0xfff);

    let shdrs = read_at(&file, shoff, shentsize * shnum)?;
    let sections: Vec<Section> = (0..shnum as usize)
        .map(|i| i * shentsize as usize)
        .map(|at| {
            Some(Section {
                name: u32_at(&shdrs, at)?,
                kind: u32_at(&shdrs, at + 4)?,
                offset: u64_at(&shdrs, at + 24)?,
                size: u64_at(&shdrs, at + 32)?,
                link: u32_at(&shdrs, at + 40)?,
            })
        })
        .collect::<Option<_>>()
        .ok_or(bad("section headers"))?;

    let symbols = match sections.iter().find(|s| s.kind == SHT_DYNSYM) {
        Some(dynsym) => {
            let strtab = sections
                .get(dynsym.link as usize)
                .ok_or(bad("dynsym link"))?;
            let syms = read_at(&file, dynsym.offset, dynsym.size)?;
            let strs = read_at(&file, strtab.offset, strtab.size)?;
            find_symbols(&syms, &strs, wanted)
        }
        None => HashMap::new(),
    };

    let rodata = sections.get(shstrndx).and_then(|shstr| {
        let names = read_at(&file, shstr.offset, shstr.size).ok()?;
        sections
            .iter()
            .find(|s| s.kind == SHT_PROGBITS && c_str(&names, s.name as usize) == Some(b".rodata"))
    });
    let php_version = match rodata {
        Some(s) => php_version(&read_at(&file, s.offset, s.size)?),
        None => None,
    };
    Ok(ElfInfo {
        arch,
        first_load_delta,
        symbols,
        php_version,
    })
}

fn c_str(bytes: &[u8], at: usize) -> Option<&[u8]> {
    let rest = bytes.get(at..)?;
    Some(&rest[..rest.iter().position(|&b| b == 0)?])
}

fn find_symbols(syms: &[u8], strs: &[u8], wanted: &[&str]) -> HashMap<String, (u64, u64)> {
    let mut found = HashMap::new();
    for sym in syms.chunks_exact(24) {
        let (Some(name), Some(shndx), Some(value), Some(size)) = (
            u32_at(sym, 0),
            u16_at(sym, 6),
            u64_at(sym, 8),
            u64_at(sym, 16),
        ) else {
            continue;
        };
        if shndx == 0 || value == 0 {
            continue; // undefined (imported)
        }
        let Some(name) = c_str(strs, name as usize) else {
            continue;
        };
        if let Some(w) = wanted.iter().find(|w| w.as_bytes() == name) {
            found.insert((*w).to_owned(), (value, size));
        }
    }
    found
}

/// The PHP version compiled into the binary: `SAPI_PHP_VERSION_HEADER` is in every SAPI.
pub fn php_version(rodata: &[u8]) -> Option<(u32, u32, u32)> {
    if let Some(rest) = after(rodata, b"X-Powered-By: PHP/") {
        let mut parts = rest.split(|&b| !b.is_ascii_digit()).take(3).map(number);
        if let (Some(Some(major)), Some(Some(minor)), Some(Some(patch))) =
            (parts.next(), parts.next(), parts.next())
        {
            return Some((major, minor, patch));
        }
    }
    // Zend Engine 4.N ships with PHP 8.N.
    let rest = after(rodata, b"Zend Engine v4.")?;
    let minor = number(rest.split(|&b| !b.is_ascii_digit()).next()?)?;
    Some((8, minor, 0))
}

fn after<'a>(haystack: &'a [u8], needle: &[u8]) -> Option<&'a [u8]> {
    let at = haystack.windows(needle.len()).position(|w| w == needle)?;
    let rest = &haystack[at + needle.len()..];
    Some(&rest[..rest.len().min(16)])
}

fn number(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() || digits.len() > 4 {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_strings() {
        assert_eq!(
            php_version(b"..\0X-Powered-By: PHP/8.2.36\0.."),
            Some((8, 2, 36))
        );
        assert_eq!(
            php_version(b"X-Powered-By: PHP/8.4.0RC1\0"),
            Some((8, 4, 0))
        );
        assert_eq!(
            php_version(b"\0Zend Engine v4.3.1, Copyright"),
            Some((8, 3, 0))
        );
        assert_eq!(php_version(b"X-Powered-By: PHP/\0"), None);
        assert_eq!(php_version(b"nothing here"), None);
    }

    #[test]
    fn not_elf() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x");
        std::fs::write(&path, b"#!/bin/sh\n".repeat(10)).unwrap();
        assert!(matches!(inspect(&path, &["x"]), Err(ElfError::NotElf64)));
    }
}
