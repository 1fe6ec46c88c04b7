//! What a bound copy says of itself, readable with the standard library alone (the master
//! reads it at a pool's start, and links no ELF parser): the build-id of an ELF file, from
//! its `PT_NOTE` segments, and the marker the caller of `bind` appends after the last
//! byte of the copy, which names the library it was made from.
//!
//! The marker is a trailer past everything the ELF headers point at: the loader never maps
//! it. It records the source's build-id (which is how the master tells a copy that is
//! stale) and the copy's own: `drover-php --bind-direct` gives the copy a build-id of its
//! own ([`own_build_id`]), so that a core dump of a process on the copy, or debuginfod, does
//! not take its rewritten code for the source's.
//! Its layout: [`MAGIC`], `key=value` lines, their length as a little-endian u32, [`MAGIC`].

use std::fs::File;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Opens and closes the marker; the final `1` is its version.
pub const MAGIC: &[u8; 16] = b"\0drover-elfbind1";

/// The most the marker's lines may take (a path and a few counts).
const MAX_TEXT: u32 = 16 * 1024;

/// The most of an ELF file's program headers and notes that [`build_id`] reads.
const MAX_NOTES: u64 = 64 * 1024;

/// What a bound copy records of the library it was made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// The library the copy was made from, as the program that loaded it found it.
    pub source: PathBuf,
    /// The source's build-id in hex.
    pub build_id: String,
    /// The copy's own build-id in hex ([`own_build_id`]); `None` in a copy made before
    /// copies had their own, whose `.note.gnu.build-id` is then the source's.
    pub copy_build_id: Option<String>,
    /// The source's SONAME (empty if none): the name the copy is also found by in its
    /// folder (a symlink), since it is the name programs linked to the source ask for.
    pub soname: String,
    /// What was bound, one line (`Analysis::summary`).
    pub summary: String,
}

impl Marker {
    /// The trailer to append to the copy. `None` if a field holds a newline, which the
    /// line format cannot carry.
    pub fn encode(&self) -> Option<Vec<u8>> {
        let mut text = Vec::new();
        let copy_build_id = self.copy_build_id.as_ref().map(|id| ("copy-build-id", id));
        for (key, value) in [
            ("source", self.source.as_os_str().as_bytes()),
            ("build-id", self.build_id.as_bytes()),
            ("soname", self.soname.as_bytes()),
            ("summary", self.summary.as_bytes()),
        ]
        .into_iter()
        .chain(copy_build_id.map(|(key, id)| (key, id.as_bytes())))
        {
            if value.contains(&b'\n') {
                return None;
            }
            text.extend_from_slice(key.as_bytes());
            text.push(b'=');
            text.extend_from_slice(value);
            text.push(b'\n');
        }
        let len = u32::try_from(text.len())
            .ok()
            .filter(|len| *len <= MAX_TEXT)?;
        let mut out = Vec::with_capacity(text.len() + 36);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&text);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(MAGIC);
        Some(out)
    }

    /// The marker at the end of `file`: `None` when it has none (a library as its linker
    /// wrote it, or a copy of one), or one that does not parse.
    pub fn read(file: &File) -> io::Result<Option<Marker>> {
        let size = file.metadata()?.len();
        let tail_len = MAGIC.len() as u64 + 4;
        if size < tail_len + MAGIC.len() as u64 {
            return Ok(None);
        }
        let mut tail = [0u8; 20];
        file.read_exact_at(&mut tail, size - tail_len)?;
        if &tail[4..] != MAGIC {
            return Ok(None);
        }
        let len = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
        if len > MAX_TEXT || u64::from(len) + tail_len + MAGIC.len() as u64 > size {
            return Ok(None);
        }
        let mut body = vec![0u8; MAGIC.len() + len as usize];
        let at = size - tail_len - body.len() as u64;
        file.read_exact_at(&mut body, at)?;
        let Some(text) = body.strip_prefix(MAGIC.as_slice()) else {
            return Ok(None);
        };
        Ok(Self::parse(text))
    }

    fn parse(text: &[u8]) -> Option<Marker> {
        let (mut source, mut build_id, mut copy_build_id) = (None, None, None);
        let (mut soname, mut summary) = (String::new(), String::new());
        for line in text.split(|b| *b == b'\n').filter(|line| !line.is_empty()) {
            let at = line.iter().position(|b| *b == b'=')?;
            let (key, value) = (&line[..at], &line[at + 1..]);
            match key {
                b"source" => {
                    source = Some(PathBuf::from(std::ffi::OsString::from_vec(value.to_vec())))
                }
                b"build-id" => build_id = Some(String::from_utf8(value.to_vec()).ok()?),
                b"copy-build-id" => copy_build_id = Some(String::from_utf8(value.to_vec()).ok()?),
                b"soname" => soname = String::from_utf8_lossy(value).into_owned(),
                b"summary" => summary = String::from_utf8_lossy(value).into_owned(),
                _ => {}
            }
        }
        Some(Marker {
            source: source?,
            build_id: build_id?,
            copy_build_id,
            soname,
            summary,
        })
    }
}

/// The GNU build-id of the ELF file at `path`, in hex: `None` when it has none. Reads the
/// ELF header, the program headers and the `PT_NOTE` segments only (bounded), as the
/// loader would find them.
pub fn build_id(path: &Path) -> io::Result<Option<String>> {
    build_id_of(&File::open(path)?)
}

/// [`build_id`] of an open file.
pub fn build_id_of(file: &File) -> io::Result<Option<String>> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let mut header = [0u8; 64];
    file.read_exact_at(&mut header, 0)
        .map_err(|_| invalid("too short for an ELF header"))?;
    // ELF64, little-endian: what elfbind binds (x86-64).
    if &header[..4] != b"\x7fELF" || header[4] != 2 || header[5] != 1 {
        return Err(invalid("not a 64-bit little-endian ELF file"));
    }
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
    let u32_at =
        |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or([0; 4]));
    let u64_at =
        |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
    let (phoff, phentsize, phnum) = (
        u64_at(&header, 32),
        u16_at(&header, 54),
        u16_at(&header, 56),
    );
    let table = u64::from(phentsize) * u64::from(phnum);
    if phentsize < 56 || table > MAX_NOTES {
        return Err(invalid("unexpected program headers"));
    }
    let mut phdrs = vec![0u8; table as usize];
    file.read_exact_at(&mut phdrs, phoff)?;
    for phdr in phdrs.chunks_exact(usize::from(phentsize)) {
        const PT_NOTE: u32 = 4;
        if u32_at(phdr, 0) != PT_NOTE {
            continue;
        }
        let (offset, size) = (u64_at(phdr, 8), u64_at(phdr, 32));
        if size > MAX_NOTES {
            continue;
        }
        let mut notes = vec![0u8; size as usize];
        file.read_exact_at(&mut notes, offset)?;
        if let Some(id) = gnu_build_id(&notes) {
            return Ok(Some(hex(id)));
        }
    }
    Ok(None)
}

/// Gives the ELF file `data` (a bound copy, its marker not appended yet) a build-id of
/// its own, in place: its `NT_GNU_BUILD_ID` note's descriptor (same length, where its
/// `PT_NOTE` segment and its `.note.gnu.build-id` section both read it) becomes a digest of
/// the whole file as it is, so that the same source bound the same way gets the same id
/// and a copy never has its source's. Returns the new id in hex, `None` when the file has
/// no build-id note (nothing changed).
pub fn own_build_id(data: &mut [u8]) -> Option<String> {
    let at = build_id_at(data)?;
    // Three 64-bit FNV-1a digests from different starting points, folded over the old id:
    // an identifier, not a checksum anyone must trust.
    let mut digests = [
        0xcbf2_9ce4_8422_2325_u64,
        0x8422_2325_cbf2_9ce4,
        0x9e37_79b9_7f4a_7c15,
    ];
    for byte in data.iter() {
        for digest in &mut digests {
            *digest = (*digest ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    let stream: Vec<u8> = digests.iter().flat_map(|d| d.to_le_bytes()).collect();
    for (i, byte) in data[at.clone()].iter_mut().enumerate() {
        *byte ^= stream[i % stream.len()] ^ 0x5a;
    }
    Some(hex(&data[at]))
}

/// Where the descriptor of `data`'s build-id note is, in the file (read from its
/// `PT_NOTE` segments, as [`build_id_of`] reads them).
fn build_id_at(data: &[u8]) -> Option<std::ops::Range<usize>> {
    const PT_NOTE: u32 = 4;
    let u16_at = |at: usize| Some(u16::from_le_bytes(data.get(at..at + 2)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |at: usize| {
        let bytes = data.get(at..at.checked_add(8)?)?;
        usize::try_from(u64::from_le_bytes(bytes.try_into().ok()?)).ok()
    };
    if data.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let (phoff, phentsize, phnum) = (u64_at(32)?, usize::from(u16_at(54)?), u16_at(56)?);
    if phentsize < 56 {
        return None;
    }
    for i in 0..usize::from(phnum) {
        let phdr = phoff.checked_add(i * phentsize)?;
        if u32_at(phdr)? != PT_NOTE {
            continue;
        }
        let (offset, size) = (u64_at(phdr + 8)?, u64_at(phdr + 32)?);
        let notes = data.get(offset..offset.checked_add(size)?)?;
        if let Some(id) = gnu_build_id(notes) {
            // The descriptor's place within `notes`, from the slice `gnu_build_id` gave.
            let start = offset + (id.as_ptr() as usize - notes.as_ptr() as usize);
            return Some(start..start + id.len());
        }
    }
    None
}

/// The descriptor of the `NT_GNU_BUILD_ID` note among `notes` (a note segment's bytes).
fn gnu_build_id(mut notes: &[u8]) -> Option<&[u8]> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let align4 = |n: usize| n.div_ceil(4) * 4;
    while notes.len() >= 12 {
        let word = |at: usize| u32::from_le_bytes(notes[at..at + 4].try_into().unwrap_or([0; 4]));
        let (namesz, descsz, kind) = (word(0) as usize, word(4) as usize, word(8));
        let name_end = 12 + align4(namesz);
        let desc_end = name_end.checked_add(align4(descsz))?;
        if desc_end > notes.len() {
            return None;
        }
        if kind == NT_GNU_BUILD_ID && &notes[12..12 + namesz] == b"GNU\0" {
            return Some(&notes[name_end..name_end + descsz]);
        }
        notes = &notes[desc_end..];
    }
    None
}

/// `bytes` in lowercase hex, as `readelf -n` prints a build-id.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn a_marker_reads_back_from_the_end_of_a_file() {
        let marker = Marker {
            source: "/usr/lib/libphp8.2.so".into(),
            build_id: "d02f1005".into(),
            copy_build_id: Some("5a5a".into()),
            soname: "libphp.so".into(),
            summary: "29858 calls".into(),
        };
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"\x7fELF and the rest of a library")
            .unwrap();
        file.write_all(&marker.encode().unwrap()).unwrap();
        assert_eq!(Marker::read(&file).unwrap(), Some(marker));
    }

    #[test]
    fn a_file_without_a_marker_has_none() {
        let mut file = tempfile::tempfile().unwrap();
        assert_eq!(Marker::read(&file).unwrap(), None);
        file.write_all(&[0u8; 100]).unwrap();
        assert_eq!(Marker::read(&file).unwrap(), None);
        // A trailing MAGIC with a length that does not fit is no marker either.
        file.write_all(&u32::MAX.to_le_bytes()).unwrap();
        file.write_all(MAGIC).unwrap();
        assert_eq!(Marker::read(&file).unwrap(), None);
    }

    #[test]
    fn a_newline_cannot_be_encoded() {
        let marker = Marker {
            source: "/tmp/a\nb".into(),
            build_id: String::new(),
            copy_build_id: None,
            soname: String::new(),
            summary: String::new(),
        };
        assert_eq!(marker.encode(), None);
    }

    #[test]
    fn a_marker_of_a_copy_without_its_own_build_id_reads_back() {
        let marker = Marker {
            source: "/usr/lib/libphp8.2.so".into(),
            build_id: "d02f1005".into(),
            copy_build_id: None,
            soname: String::new(),
            summary: String::new(),
        };
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&marker.encode().unwrap()).unwrap();
        assert_eq!(Marker::read(&file).unwrap(), Some(marker));
    }

    #[test]
    fn a_copy_gets_a_build_id_of_its_own_that_its_notes_say() {
        let exe = std::env::current_exe().unwrap();
        let Some(id) = build_id(&exe).unwrap() else {
            println!("skipped: {} has no build-id", exe.display());
            return;
        };
        let mut data = std::fs::read(&exe).unwrap();
        let original = data.clone();
        let own = own_build_id(&mut data).expect("a build-id note");
        assert_ne!(own, id);
        assert_eq!(own.len(), id.len());
        // Only the id's bytes changed, and the note reads the new one.
        let changed = data.iter().zip(&original).filter(|(a, b)| a != b).count();
        assert!(changed > 0 && changed <= id.len() / 2, "{changed}");
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(&data).unwrap();
        assert_eq!(build_id(file.path()).unwrap(), Some(own.clone()));
        // The same bytes get the same id.
        let mut again = original.clone();
        assert_eq!(own_build_id(&mut again), Some(own));
        // No ELF, no id.
        assert_eq!(own_build_id(&mut b"not an ELF file".to_vec()), None);
    }

    #[test]
    fn the_build_id_of_this_test_binary_is_readelfs() {
        // Rust binaries on Linux carry a GNU build-id (the linker's --build-id).
        let exe = std::env::current_exe().unwrap();
        let Some(id) = build_id(&exe).unwrap() else {
            println!("skipped: {} has no build-id", exe.display());
            return;
        };
        let out = std::process::Command::new("readelf")
            .arg("-n")
            .arg(&exe)
            .output();
        match out {
            Ok(out) => assert!(
                String::from_utf8_lossy(&out.stdout).contains(&format!("Build ID: {id}")),
                "{id}"
            ),
            Err(e) => println!("readelf not run ({e}); build-id {id}"),
        }
    }
}
