//! elfbind on a library gcc builds here: a function calling another exported function
//! through the PLT, and a global read through the GOT. The bound copy still loads and
//! runs (dlopen from a C program), its call and loads are direct (decoded), the bytes it
//! changed are the sites', and a symbol the executable interposes stays interposed when
//! the executable's [`elfbind::interposers`] are kept.

use std::path::{Path, PathBuf};
use std::process::Command;

use elfbind::{Keep, SiteKind};
use iced_x86::{Decoder, DecoderOptions, Mnemonic, OpKind};
use object::{Object, ObjectSymbol};

const LIBRARY: &str = r#"
int counter = 41;
int add(int a, int b) { return a + b + counter; }
int compute(int x) { return add(x, 1) * 2; }
int *counter_addr(void) { return &counter; }
"#;

/// Loads the library named by argv[1] and prints compute(1), and whether the address
/// counter_addr() returns is the one dlsym finds. It defines add() itself, exported
/// (-rdynamic), which interposes the library's where the library's calls are not direct.
const PROGRAM: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
int add(int a, int b) { return 1000; }
int main(int argc, char **argv) {
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    int (*compute)(int) = dlsym(lib, "compute");
    int *(*counter_addr)(void) = dlsym(lib, "counter_addr");
    int *counter = dlsym(lib, "counter");
    printf("%d %d\n", compute(1), counter_addr() == counter);
    return 0;
}
"#;

struct Built {
    _dir: tempfile::TempDir,
    library: PathBuf,
    program: PathBuf,
}

/// The library and the program, or `None` (with the reason printed) without gcc.
fn build() -> Option<Built> {
    let dir = tempfile::tempdir().unwrap();
    let (library, program) = (dir.path().join("libt.so"), dir.path().join("main"));
    std::fs::write(dir.path().join("lib.c"), LIBRARY).unwrap();
    std::fs::write(dir.path().join("main.c"), PROGRAM).unwrap();
    let gcc = |args: &[&str]| {
        Command::new("gcc")
            .current_dir(dir.path())
            .args(args)
            .status()
    };
    match gcc(&["-O2", "-fPIC", "-shared", "-o", "libt.so", "lib.c"]) {
        Ok(status) => assert!(status.success(), "gcc failed on the library"),
        Err(e) => {
            println!("skipped: gcc cannot run ({e})");
            return None;
        }
    }
    let status = gcc(&["-O2", "-rdynamic", "-o", "main", "main.c", "-ldl"]).unwrap();
    assert!(status.success(), "gcc failed on the program");
    Some(Built {
        _dir: dir,
        library,
        program,
    })
}

fn run(program: &Path, library: &Path) -> String {
    let out = Command::new(program).arg(library).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn write_bound(built: &Built, name: &str, keep: &Keep) -> (PathBuf, Vec<u8>, elfbind::Analysis) {
    let source = std::fs::read(&built.library).unwrap();
    let (bound, analysis) = elfbind::bind(&source, keep).unwrap();
    let path = built.library.with_file_name(name);
    std::fs::write(&path, &bound).unwrap();
    (path, bound, analysis)
}

/// The address of the library's dynamic symbol `name`.
fn symbol(data: &[u8], name: &str) -> (u64, u64) {
    let file = object::File::parse(data).unwrap();
    let sym = file
        .dynamic_symbols()
        .find(|sym| sym.name() == Ok(name))
        .unwrap_or_else(|| panic!("no symbol {name}"));
    (sym.address(), sym.size())
}

/// The instructions of the function `name` in `data`: (mnemonic, branch target or
/// RIP-relative address).
fn decode(data: &[u8], name: &str) -> Vec<(Mnemonic, u64)> {
    let file = object::File::parse(data).unwrap();
    let (address, size) = symbol(data, name);
    let code = object::read::ObjectSection::data_range(
        &file.section_by_name(".text").unwrap(),
        address,
        size,
    )
    .unwrap()
    .unwrap();
    Decoder::with_ip(64, code, address, DecoderOptions::NONE)
        .into_iter()
        .map(|i| {
            let target = if i.op_count() == 1 && i.op0_kind() == OpKind::NearBranch64 {
                i.near_branch_target()
            } else if i.is_ip_rel_memory_operand() {
                i.ip_rel_memory_address()
            } else {
                0
            };
            (i.mnemonic(), target)
        })
        .collect()
}

#[test]
fn a_bound_library_runs_with_its_calls_and_loads_direct() {
    let Some(built) = build() else { return };
    // As gcc linked it: the program's add() interposes the library's.
    assert_eq!(run(&built.program, &built.library), "2000 1");

    let (path, bound, analysis) = write_bound(&built, "libt-bound.so", &Keep::new());
    // compute's call of add, and the loads of counter's GOT slot in add and counter_addr.
    assert_eq!(analysis.count(SiteKind::Branch), 1, "{analysis:?}");
    assert_eq!(analysis.count(SiteKind::Load), 2, "{analysis:?}");
    assert!(
        analysis.summary().starts_with("1 calls bound directly"),
        "{}",
        analysis.summary()
    );
    // Bound: the library's own add() runs, 2 * (1 + 1 + 41).
    assert_eq!(run(&built.program, &path), "86 1");

    let (add, _) = symbol(&bound, "add");
    let (counter, _) = symbol(&bound, "counter");
    let compute = decode(&bound, "compute");
    assert!(
        compute
            .iter()
            .any(|(m, target)| matches!(m, Mnemonic::Call | Mnemonic::Jmp) && *target == add),
        "compute does not branch to add at {add:#x}: {compute:x?}"
    );
    assert_eq!(decode(&bound, "counter_addr")[0], (Mnemonic::Lea, counter));
    assert!(decode(&bound, "add").contains(&(Mnemonic::Lea, counter)));

    // Every byte that changed belongs to a site.
    let source = std::fs::read(&built.library).unwrap();
    assert_eq!(source.len(), bound.len());
    for (at, (a, b)) in source.iter().zip(&bound).enumerate() {
        if a != b {
            let file = object::File::parse(source.as_slice()).unwrap();
            let text = file.section_by_name(".text").unwrap();
            let (offset, _) = object::read::ObjectSection::file_range(&text).unwrap();
            let address = object::read::ObjectSection::address(&text) + (at as u64 - offset);
            assert!(
                analysis
                    .sites
                    .iter()
                    .any(|site| address >= site.address && address < site.address + site.len as u64),
                "byte {at:#x} changed outside the sites"
            );
        }
    }
}

#[test]
fn what_the_executable_interposes_stays_interposed() {
    let Some(built) = build() else { return };
    let keep = elfbind::interposers(&std::fs::read(&built.program).unwrap()).unwrap();
    assert!(
        keep.contains(b"add".as_slice()),
        "the program exports add()"
    );
    let (path, _, analysis) = write_bound(&built, "libt-kept.so", &keep);
    assert_eq!(analysis.count(SiteKind::Branch), 0, "{analysis:?}");
    assert_eq!(analysis.count(SiteKind::Load), 2, "{analysis:?}");
    assert!(analysis.kept.contains("add"));
    assert_eq!(run(&built.program, &path), "2000 1");
}

#[test]
fn a_library_keeps_its_build_id_and_says_what_it_was_made_from() {
    let Some(built) = build() else { return };
    let (path, mut bound, analysis) = write_bound(&built, "libt-marked.so", &Keep::new());
    let id = elfbind::mark::build_id(&built.library).unwrap();
    let marker = elfbind::mark::Marker {
        source: built.library.clone(),
        build_id: id.clone().unwrap_or_default(),
        copy_build_id: None,
        soname: String::new(),
        summary: analysis.summary(),
    };
    bound.extend(marker.encode().unwrap());
    std::fs::write(&path, &bound).unwrap();
    assert_eq!(elfbind::mark::build_id(&path).unwrap(), id);
    let file = std::fs::File::open(&path).unwrap();
    assert_eq!(elfbind::mark::Marker::read(&file).unwrap(), Some(marker));
    // The loader does not mind the trailer.
    assert_eq!(run(&built.program, &path), "86 1");
}
