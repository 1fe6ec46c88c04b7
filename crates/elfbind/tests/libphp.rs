//! elfbind on Debian's libphp8.2.so (skipped, saying so, where it is not installed): the
//! branches it binds are exactly those `objdump -d` shows going to `name@plt` for a symbol
//! the library defines, and the GOT loads exactly the `mov` of such a symbol's GLOB_DAT
//! slot into a 64-bit register. Prints the counts (BENCHMARKS.md quotes them).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::process::Command;

use elfbind::{Keep, SiteKind};
use iced_x86::{Decoder, DecoderOptions, OpKind};
use object::read::elf::{ElfFile64, FileHeader, Sym};
use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationFlags};

const LIBPHP: &str = "/usr/lib/libphp8.2.so";

fn libphp() -> Option<Vec<u8>> {
    let path = std::env::var("ELFBIND_LIBPHP").unwrap_or_else(|_| LIBPHP.to_owned());
    match std::fs::read(&path) {
        Ok(data) => Some(data),
        Err(e) => {
            println!("skipped: {path}: {e} (install libphp8.2-embed)");
            None
        }
    }
}

/// The names the rules bind, computed here on their own: defined, global or weak, default
/// visibility, and a function (`functions`) or a function or a variable.
fn bindable(data: &[u8], functions: bool) -> BTreeSet<String> {
    let file: ElfFile64<'_> = ElfFile64::parse(data).unwrap();
    let endian = file.endian();
    let table = file.elf_header().sections(endian, data).unwrap();
    let dynsym = table
        .symbols(endian, data, object::elf::SHT_DYNSYM)
        .unwrap();
    dynsym
        .symbols()
        .iter()
        .filter(|sym| {
            let kind = sym.st_type();
            !sym.st_shndx(endian).is_special()
                && matches!(
                    sym.st_bind(),
                    object::elf::STB_GLOBAL | object::elf::STB_WEAK
                )
                && sym.st_visibility() == object::elf::STV_DEFAULT
                && (kind == object::elf::STT_FUNC
                    || (!functions && kind == object::elf::STT_OBJECT))
        })
        .map(|sym| {
            String::from_utf8_lossy(sym.name(endian, dynsym.strings()).unwrap()).into_owned()
        })
        .collect()
}

/// The GLOB_DAT slots and their symbols' names.
fn glob_dat(data: &[u8]) -> HashMap<u64, String> {
    let file = object::File::parse(data).unwrap();
    let dynsym = file.dynamic_symbol_table().unwrap();
    file.dynamic_relocations()
        .unwrap()
        .filter_map(|(offset, reloc)| {
            let RelocationFlags::Elf { r_type } = reloc.flags() else {
                return None;
            };
            let object::RelocationTarget::Symbol(index) = reloc.target() else {
                return None;
            };
            (r_type == object::elf::R_X86_64_GLOB_DAT).then(|| {
                (
                    offset,
                    dynsym
                        .symbol_by_index(index)
                        .unwrap()
                        .name()
                        .unwrap()
                        .to_owned(),
                )
            })
        })
        .collect()
}

/// What objdump shows: the branches to `name@plt` and the `mov ...(%rip),%r64` loads,
/// with the address they go to (from its `# ADDR` comment), outside the PLT's sections.
struct Objdump {
    branches: BTreeMap<u64, String>,
    loads: BTreeMap<u64, u64>,
}

fn objdump(path: &str) -> Option<Objdump> {
    let out = match Command::new("objdump")
        .args(["-d", "-w", "--no-show-raw-insn", path])
        .output()
    {
        Ok(out) if out.status.success() => out,
        other => {
            println!("skipped: objdump cannot run: {other:?}");
            return None;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let (mut branches, mut loads) = (BTreeMap::new(), BTreeMap::new());
    let mut in_plt = false;
    for line in text.lines() {
        if let Some(section) = line.strip_prefix("Disassembly of section ") {
            in_plt = section.starts_with(".plt");
            continue;
        }
        let Some((address, rest)) = line.trim_start().split_once(":\t") else {
            continue;
        };
        let Ok(address) = u64::from_str_radix(address, 16) else {
            continue;
        };
        if in_plt {
            continue;
        }
        let mut fields = rest.split_whitespace();
        let (Some(mnemonic), Some(operands)) = (fields.next(), fields.next()) else {
            continue;
        };
        let target = rest
            .split_once('<')
            .and_then(|(_, name)| name.strip_suffix('>'));
        if mnemonic.starts_with('j') || mnemonic.starts_with("call") {
            if let Some(name) = target.and_then(|t| t.strip_suffix("@plt")) {
                branches.insert(address, name.to_owned());
            }
        } else if mnemonic == "mov"
            && let Some((source, destination)) = operands.split_once(',')
            && source.ends_with("(%rip)")
            && is_r64(destination)
            && let Some((_, comment)) = rest.split_once("# ")
            && let Some(slot) = comment.split_whitespace().next()
            && let Ok(slot) = u64::from_str_radix(slot, 16)
        {
            loads.insert(address, slot);
        }
    }
    Some(Objdump { branches, loads })
}

fn is_r64(register: &str) -> bool {
    let name = register.trim_start_matches('%');
    name.starts_with('r') && !name.ends_with(['d', 'w', 'b']) && !name.starts_with("rip")
}

/// The branches into the PLT's sections in the function `name`.
fn plt_branches(data: &[u8], name: &str) -> usize {
    let file = object::File::parse(data).unwrap();
    let plt: Vec<(u64, u64)> = file
        .sections()
        .filter(|s| s.name().is_ok_and(|n| n.starts_with(".plt")))
        .map(|s| (s.address(), s.address() + s.size()))
        .collect();
    let sym = file
        .dynamic_symbols()
        .find(|s| s.name() == Ok(name))
        .unwrap();
    let text = file.section_by_name(".text").unwrap();
    let code = text.data_range(sym.address(), sym.size()).unwrap().unwrap();
    Decoder::with_ip(64, code, sym.address(), DecoderOptions::NONE)
        .into_iter()
        .filter(|i| i.op_count() == 1 && i.op0_kind() == OpKind::NearBranch64)
        .filter(|i| {
            plt.iter()
                .any(|(a, b)| (*a..*b).contains(&i.near_branch_target()))
        })
        .count()
}

#[test]
fn libphp_sites_are_the_ones_objdump_shows() {
    let Some(data) = libphp() else { return };
    let Some(shown) = objdump(LIBPHP) else { return };
    let analysis = elfbind::analyze(&data, &Keep::new()).unwrap();
    println!("{LIBPHP}: {}", analysis.summary());
    println!("functions decoded: {}", analysis.functions);

    let functions = bindable(&data, true);
    let expected: BTreeMap<u64, String> = shown
        .branches
        .iter()
        .filter(|(_, name)| functions.contains(*name))
        .map(|(a, n)| (*a, n.clone()))
        .collect();
    let found: BTreeMap<u64, String> = analysis
        .sites
        .iter()
        .filter(|site| site.kind == SiteKind::Branch)
        .map(|site| (site.address, site.symbol.clone()))
        .collect();
    let missing: Vec<_> = expected
        .iter()
        .filter(|(a, _)| !found.contains_key(*a))
        .take(20)
        .collect();
    let extra: Vec<_> = found
        .iter()
        .filter(|(a, _)| !expected.contains_key(*a))
        .take(20)
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "objdump only: {missing:x?}\nelfbind only: {extra:x?}"
    );
    assert_eq!(found, expected);

    let slots = glob_dat(&data);
    let variables = bindable(&data, false);
    let expected: BTreeSet<u64> = shown
        .loads
        .iter()
        .filter(|(_, slot)| slots.get(slot).is_some_and(|name| variables.contains(name)))
        .map(|(address, _)| *address)
        .collect();
    let found: BTreeSet<u64> = analysis
        .sites
        .iter()
        .filter(|site| site.kind == SiteKind::Load)
        .map(|site| site.address)
        .collect();
    let missing: Vec<_> = expected.difference(&found).take(20).collect();
    let extra: Vec<_> = found.difference(&expected).take(20).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "objdump only: {missing:x?}\nelfbind only: {extra:x?}"
    );
    println!(
        "{} branches and {} loads, as objdump shows them",
        analysis.count(SiteKind::Branch),
        analysis.count(SiteKind::Load)
    );
}

#[test]
fn libphp_bound_keeps_one_plt_call_in_execute_ex_and_every_other_byte() {
    let Some(data) = libphp() else { return };
    let (bound, analysis) = elfbind::bind(&data, &Keep::new()).unwrap();
    let (before, after) = (
        plt_branches(&data, "execute_ex"),
        plt_branches(&bound, "execute_ex"),
    );
    println!("execute_ex: {before} branches into the PLT, {after} once bound");
    assert!(after < before / 10, "{before} -> {after}");

    // Every byte that changed is inside a site: the copy is the library otherwise.
    assert_eq!(data.len(), bound.len());
    let file = object::File::parse(data.as_slice()).unwrap();
    let sections: Vec<(u64, u64, u64)> = file
        .sections()
        .filter_map(|s| {
            s.file_range()
                .map(|(offset, size)| (offset, size, s.address()))
        })
        .collect();
    let mut changed = 0;
    for (at, _) in data
        .iter()
        .zip(&bound)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
    {
        let at = at as u64;
        let (offset, _, address) = sections
            .iter()
            .find(|(offset, size, _)| (*offset..offset + size).contains(&at))
            .unwrap_or_else(|| panic!("byte {at:#x} changed outside every section"));
        let address = address + (at - offset);
        // The sites are in address order: the last one starting at or before the byte.
        let index = analysis
            .sites
            .partition_point(|site| site.address <= address);
        let site = index.checked_sub(1).map(|i| &analysis.sites[i]);
        assert!(
            site.is_some_and(|site| address < site.address + site.len as u64),
            "byte {at:#x} ({address:#x}) changed outside the sites"
        );
        changed += 1;
    }
    println!(
        "{changed} bytes changed, all in the {} sites",
        analysis.sites.len()
    );
}
