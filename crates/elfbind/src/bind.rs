//! The rewriter: finds, in an x86-64 shared library, the calls through its PLT and the loads
//! from its GOT that name a symbol the library defines itself, and makes them direct, as
//! `ld -Bsymbolic` would have bound them at link time.
//!
//! - A `call`, `jmp` or `jcc` with a 32-bit displacement whose target is a PLT entry
//!   (`.plt`, `.plt.sec`, `.plt.got`) for such a symbol gets the definition as its target:
//!   same opcode, same length, a new displacement.
//! - A `mov r64, [rip+disp32]` that loads a GOT slot filled by `R_X86_64_GLOB_DAT` for such
//!   a symbol becomes `lea r64, [rip+disp32']` of the definition (opcode 8B to 8D, same
//!   length): the linker's `GOTPCRELX` relaxation.
//!
//! Instructions are found by decoding each function linearly from its start over its size:
//! the functions of `.symtab` (else `.dynsym`) and every FDE of `.eh_frame`, which covers the
//! static functions a stripped library no longer names. Nothing is found by scanning bytes.
//! A function in which the decoder meets bytes it cannot read binds nothing: no site in its
//! range is rewritten, and [`Analysis::undecodable`] and [`Analysis::dropped`] count them.
//!
//! Which symbols: defined in a section of the library, global or weak, default visibility,
//! `STT_FUNC` (calls) or `STT_FUNC`/`STT_OBJECT` (loads); never TLS, never an IFUNC, never
//! one the caller says must stay interposable ([`Keep`]: what the executable defines,
//! copy-relocates or takes the canonical address of, and what a library loaded before this
//! one defines; see [`interposers`] and [`exports`]). The relocations stay: the loader
//! still fills the PLT's and the GOT's slots, which nothing bound reads any more.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use gimli::UnwindSection;
use iced_x86::{Code, Decoder, DecoderOptions, Instruction, OpKind};
use object::LittleEndian as LE;
use object::elf;
use object::read::elf::{
    FileHeader, Rela as _, SectionHeader, SectionTable, Sym as _, SymbolTable,
};

type Header = elf::FileHeader64<LE>;

/// The names of the symbols whose calls and loads must stay as they are (interposable).
pub type Keep = HashSet<Vec<u8>>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read the ELF file: {0}")]
    Parse(#[from] object::read::Error),
    #[error("cannot read .eh_frame: {0}")]
    EhFrame(#[from] gimli::Error),
    #[error("{0}")]
    Unsupported(&'static str),
}

/// What a bound site was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SiteKind {
    /// `call`, `jmp` or `jcc` (rel32) to a PLT entry.
    Branch,
    /// `mov r64, [rip+disp32]` of a GOT slot.
    Load,
}

/// One instruction to make direct.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// The instruction's address (its first byte).
    pub address: u64,
    pub len: usize,
    pub kind: SiteKind,
    /// The symbol it reaches, and where the library defines it.
    pub symbol: String,
    pub definition: u64,
}

/// What [`analyze`] found: the sites it binds and what it leaves.
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    /// Every site to bind, by address.
    pub sites: Vec<Site>,
    /// PLT entries that name a symbol bound here, and the others.
    pub plt_bound: usize,
    pub plt_left: usize,
    /// GLOB_DAT GOT slots of a symbol bound here (loads of them are bound), and the others.
    pub got_bound: usize,
    pub got_left: usize,
    /// Branches to a PLT entry and GOT loads left as they are (the symbol is not the
    /// library's own, is kept interposable, or the instruction has no same-length direct form).
    pub branches_left: usize,
    pub loads_left: usize,
    /// Symbols that could have been bound but are kept (in [`Keep`]), by name.
    pub kept: BTreeSet<String>,
    /// The functions (address ranges) decoded.
    pub functions: usize,
    /// Functions with an instruction the decoder cannot read (data in code, an
    /// instruction newer than the decoder): what follows it cannot be trusted to be in
    /// step, so no site inside such a function's range is bound. How many functions, and
    /// how many sites found elsewhere fell inside them and were dropped.
    pub undecodable: usize,
    pub dropped: usize,
}

impl Analysis {
    /// The sites of one kind.
    pub fn count(&self, kind: SiteKind) -> usize {
        self.sites.iter().filter(|site| site.kind == kind).count()
    }

    /// One line: what was bound and what was left.
    pub fn summary(&self) -> String {
        format!(
            "{} calls bound directly ({} of {} PLT entries no longer used), {} GOT loads made \
             direct ({} of {} GLOB_DAT slots); left: {} calls and {} loads of symbols not \
             bound, {} symbols kept interposable",
            self.count(SiteKind::Branch),
            self.plt_bound,
            self.plt_bound + self.plt_left,
            self.count(SiteKind::Load),
            self.got_bound,
            self.got_bound + self.got_left,
            self.branches_left,
            self.loads_left,
            self.kept.len(),
        ) + &if self.undecodable == 0 {
            String::new()
        } else {
            format!(
                "; {} functions not decodable to their end, {} sites in them left",
                self.undecodable, self.dropped
            )
        }
    }
}

/// The library with every site of [`analyze`] made direct, and the analysis. Every other
/// byte is the source's.
pub fn bind(data: &[u8], keep: &Keep) -> Result<(Vec<u8>, Analysis), Error> {
    let analysis = analyze(data, keep)?;
    let layout = Layout::parse(data)?;
    let mut out = data.to_vec();
    for site in &analysis.sites {
        let offset = layout
            .offset(site.address, site.len)
            .ok_or(Error::Unsupported("a site outside the file's sections"))?;
        let rel = i64::try_from(site.definition).ok().and_then(|definition| {
            let next = i64::try_from(site.address + site.len as u64).ok()?;
            i32::try_from(definition - next).ok()
        });
        let rel = rel.ok_or(Error::Unsupported(
            "a displacement that does not fit in 32 bits",
        ))?;
        let bytes = &mut out[offset..offset + site.len];
        if site.kind == SiteKind::Load {
            bytes[1] = 0x8D; // mov r64, m64 (8B) -> lea r64, m (8D); REX.W and ModRM stay.
        }
        bytes[site.len - 4..].copy_from_slice(&rel.to_le_bytes());
    }
    Ok((out, analysis))
}

/// Where each allocated section of the file is, by address.
struct Layout {
    /// (address, size, file offset) of the sections with contents.
    sections: Vec<(u64, u64, u64)>,
}

impl Layout {
    fn parse(data: &[u8]) -> Result<Layout, Error> {
        let header = Header::parse(data)?;
        let endian = header.endian()?;
        let sections = header.sections(endian, data)?;
        Ok(Layout {
            sections: sections
                .iter()
                .filter(|s| {
                    s.sh_type(endian) != elf::SHT_NOBITS
                        && s.sh_flags(endian).0 & elf::SHF_ALLOC.0 != 0
                })
                .map(|s| (s.sh_addr(endian), s.sh_size(endian), s.sh_offset(endian)))
                .collect(),
        })
    }

    /// The file offset of `len` bytes at `address`, when one section holds them all.
    fn offset(&self, address: u64, len: usize) -> Option<usize> {
        let (start, _, offset) = self
            .sections
            .iter()
            .find(|(start, size, _)| address >= *start && address + len as u64 <= start + size)?;
        usize::try_from(offset + (address - start)).ok()
    }
}

/// A dynamic symbol as the rules see it.
#[derive(Debug, Clone)]
struct Dynamic {
    name: String,
    value: u64,
    /// Defined here, global or weak, default visibility: another object may interpose it.
    interposable_definition: bool,
    kind: elf::SymbolType,
}

impl Dynamic {
    /// Whether a branch to its PLT entry may go to the definition.
    fn binds_calls(&self) -> bool {
        self.interposable_definition && self.kind == elf::STT_FUNC
    }

    /// Whether a load of its GOT slot may become the definition's address.
    fn binds_loads(&self) -> bool {
        self.interposable_definition && (self.kind == elf::STT_FUNC || self.kind == elf::STT_OBJECT)
    }
}

fn dynamic_symbols(endian: LE, symbols: &SymbolTable<'_, Header>) -> Result<Vec<Dynamic>, Error> {
    symbols
        .symbols()
        .iter()
        .map(|sym| {
            let name = String::from_utf8_lossy(sym.name(endian, symbols.strings())?).into_owned();
            let bind = sym.st_bind();
            Ok(Dynamic {
                name,
                value: sym.st_value(endian),
                interposable_definition: !sym.st_shndx(endian).is_special()
                    && (bind == elf::STB_GLOBAL || bind == elf::STB_WEAK)
                    && sym.st_visibility() == elf::STV_DEFAULT,
                kind: sym.st_type(),
            })
        })
        .collect()
}

/// Finds the sites [`bind`] rewrites; changes nothing.
pub fn analyze(data: &[u8], keep: &Keep) -> Result<Analysis, Error> {
    let header = Header::parse(data)?;
    let endian = header.endian()?;
    if header.e_machine(endian) != elf::EM_X86_64 || header.e_type(endian) != elf::ET_DYN {
        return Err(Error::Unsupported("not an x86-64 shared library"));
    }
    let sections = header.sections(endian, data)?;
    let dynsym = sections.symbols(endian, data, elf::SHT_DYNSYM)?;
    if dynsym.is_empty() {
        return Err(Error::Unsupported("no dynamic symbols"));
    }
    let symbols = dynamic_symbols(endian, &dynsym)?;
    let mut analysis = Analysis::default();
    // What may be bound: the rules, less what the caller keeps.
    let allowed = |sym: &Dynamic, calls: bool, analysis: &mut Analysis| {
        let by_rules = if calls {
            sym.binds_calls()
        } else {
            sym.binds_loads()
        };
        if by_rules && keep.contains(sym.name.as_bytes()) {
            analysis.kept.insert(sym.name.clone());
            return false;
        }
        by_rules
    };

    let (jump_slots, glob_dat) = got_slots(
        endian,
        dynamic_relas(endian, data, &sections, &dynsym)?,
        symbols.len(),
    );
    // The GOT slots whose loads become the definition's address.
    let mut got_bound: HashMap<u64, usize> = HashMap::new();
    for (slot, sym) in &glob_dat {
        if allowed(&symbols[*sym], false, &mut analysis) {
            analysis.got_bound += 1;
            got_bound.insert(*slot, *sym);
        } else {
            analysis.got_left += 1;
        }
    }

    // The PLT entries, and the symbol each one jumps to.
    let plt = plt_entries(endian, data, &sections, &jump_slots, &glob_dat)?;
    let mut plt_bound = BTreeMap::new();
    for (entry, sym) in &plt {
        if allowed(&symbols[*sym], true, &mut analysis) {
            analysis.plt_bound += 1;
            plt_bound.insert(*entry, *sym);
        } else {
            analysis.plt_left += 1;
        }
    }

    let scan = Scan {
        symbols: &symbols,
        plt: &plt,
        plt_bound: &plt_bound,
        glob_dat: &glob_dat,
        got_bound: &got_bound,
    };
    scan.functions(function_ranges(endian, data, &sections)?, &mut analysis);
    Ok(analysis)
}

/// The dynamic relocations' GOT slots that the loader fills with a symbol (of the
/// `symbols` dynamic symbols; none with an addend): the PLT's (`JUMP_SLOT`), and the
/// others (`GLOB_DAT`), each by slot address.
fn got_slots(
    endian: LE,
    relas: Vec<&elf::Rela64<LE>>,
    symbols: usize,
) -> (HashMap<u64, usize>, HashMap<u64, usize>) {
    let (mut jump_slots, mut glob_dat) = (HashMap::new(), HashMap::new());
    for rela in relas {
        let (kind, sym) = (
            rela.r_type(endian, false),
            rela.r_sym(endian, false) as usize,
        );
        if sym == 0 || sym >= symbols || rela.r_addend(endian) != 0 {
            continue;
        }
        if kind == elf::R_X86_64_JUMP_SLOT {
            jump_slots.insert(rela.r_offset(endian), sym);
        } else if kind == elf::R_X86_64_GLOB_DAT {
            glob_dat.insert(rela.r_offset(endian), sym);
        }
    }
    (jump_slots, glob_dat)
}

/// Removes the sites inside any of `ranges`; how many.
fn drop_inside(sites: &mut BTreeMap<u64, Site>, ranges: &[std::ops::Range<u64>]) -> usize {
    let before = sites.len();
    sites.retain(|address, _| !ranges.iter().any(|range| range.contains(address)));
    before - sites.len()
}

/// What [`analyze`] knows when it decodes a function: the symbols, the PLT entries and
/// GOT slots, and which of them are bound.
struct Scan<'a> {
    symbols: &'a [Dynamic],
    plt: &'a BTreeMap<u64, usize>,
    plt_bound: &'a BTreeMap<u64, usize>,
    glob_dat: &'a HashMap<u64, usize>,
    got_bound: &'a HashMap<u64, usize>,
}

/// What one function holds.
#[derive(Debug, Default, PartialEq, Eq)]
struct Found {
    sites: Vec<Site>,
    branches_left: usize,
    loads_left: usize,
}

impl Scan<'_> {
    /// Scans every function of `ranges` into `analysis`: its sites, the branches and loads
    /// left, and the functions not decodable to their end with the sites dropped in them.
    fn functions(&self, ranges: Vec<Function<'_>>, analysis: &mut Analysis) {
        analysis.functions = ranges.len();
        let mut sites = BTreeMap::new();
        let mut undecodable = Vec::new();
        for Function { start, code } in ranges {
            match self.function(start, code) {
                Some(found) => {
                    analysis.branches_left += found.branches_left;
                    analysis.loads_left += found.loads_left;
                    sites.extend(found.sites.into_iter().map(|site| (site.address, site)));
                }
                None => undecodable.push(start..start + code.len() as u64),
            }
        }
        // A function's range may be scanned twice (its symbol and its FDE) or overlap
        // another's: a site inside an undecodable one is dropped whoever found it.
        analysis.undecodable = undecodable.len();
        analysis.dropped = drop_inside(&mut sites, &undecodable);
        analysis.sites = sites.into_values().collect();
    }

    /// The sites of the function at `start` whose bytes are `code`, decoded to its end;
    /// `None` when an instruction cannot be decoded (bytes it does not know, or one cut by
    /// the function's end).
    fn function(&self, start: u64, code: &[u8]) -> Option<Found> {
        let mut found = Found::default();
        let mut instruction = Instruction::default();
        let mut decoder = Decoder::with_ip(64, code, start, DecoderOptions::NONE);
        while decoder.can_decode() {
            decoder.decode_out(&mut instruction);
            if instruction.is_invalid() {
                return None;
            }
            let at = (instruction.ip() - start) as usize;
            let bytes = &code[at..at + instruction.len()];
            if let Some(target) = rel32_branch_target(&instruction, bytes) {
                if let Some(sym) = self.plt_bound.get(&target) {
                    let sym = &self.symbols[*sym];
                    found.sites.push(site(&instruction, SiteKind::Branch, sym));
                } else if self.plt.contains_key(&target) {
                    found.branches_left += 1;
                }
            } else if instruction.code() == Code::Mov_r64_rm64
                && instruction.is_ip_rel_memory_operand()
                && let Some(slot) = Some(instruction.ip_rel_memory_address())
                && self.glob_dat.contains_key(&slot)
            {
                match self.got_bound.get(&slot) {
                    Some(sym) if is_plain_rip_load(bytes) => {
                        found
                            .sites
                            .push(site(&instruction, SiteKind::Load, &self.symbols[*sym]));
                    }
                    _ => found.loads_left += 1,
                }
            }
        }
        Some(found)
    }
}

fn site(instruction: &Instruction, kind: SiteKind, sym: &Dynamic) -> Site {
    Site {
        address: instruction.ip(),
        len: instruction.len(),
        kind,
        symbol: sym.name.clone(),
        definition: sym.value,
    }
}

/// The target of a near `call`, `jmp` or `jcc` whose last four bytes are its displacement
/// (E8, E9 or 0F 8x, with any prefix); `None` for any other instruction (rel8 forms,
/// indirect branches).
pub fn rel32_branch_target(instruction: &Instruction, bytes: &[u8]) -> Option<u64> {
    // call, jmp and jcc to an address (not through a register or memory).
    let near = instruction.op_count() == 1 && instruction.op0_kind() == OpKind::NearBranch64;
    let len = bytes.len();
    if !near || len < 5 {
        return None;
    }
    let opcode = bytes[len - 5];
    let rel32 = opcode == 0xE8
        || opcode == 0xE9
        || (len >= 6 && bytes[len - 6] == 0x0F && opcode & 0xF0 == 0x80);
    rel32.then(|| instruction.near_branch_target())
}

/// `REX.W 8B /r` with a RIP-relative ModRM (mod 00, r/m 101) and nothing else: the form
/// whose opcode can become `lea`'s (8D) in place.
fn is_plain_rip_load(bytes: &[u8]) -> bool {
    bytes.len() == 7 && bytes[0] & 0xF8 == 0x48 && bytes[1] == 0x8B && bytes[2] & 0xC7 == 0x05
}

/// Every PLT entry (its address) that jumps through a GOT slot the loader fills with a
/// symbol, and that symbol's index. An entry is found by decoding it: the indirect
/// `jmp [rip+disp32]` it holds names its slot (`.plt`'s first entry, and `.plt`'s entries
/// when `.plt.sec` holds the jumps, name none).
fn plt_entries(
    endian: LE,
    data: &[u8],
    sections: &SectionTable<'_, Header>,
    jump_slots: &HashMap<u64, usize>,
    glob_dat: &HashMap<u64, usize>,
) -> Result<BTreeMap<u64, usize>, Error> {
    let mut entries = BTreeMap::new();
    for section in sections.iter() {
        let name = sections.section_name(endian, section)?;
        if !matches!(name, b".plt" | b".plt.sec" | b".plt.got") {
            continue;
        }
        let code = section.data(endian, data)?;
        let addr = section.sh_addr(endian);
        let size = match section.sh_entsize(endian) {
            0 => 16,
            n => n as usize,
        };
        for (i, entry) in code.chunks(size).enumerate() {
            let start = addr + (i * size) as u64;
            let mut decoder = Decoder::with_ip(64, entry, start, DecoderOptions::NONE);
            for instruction in &mut decoder {
                if instruction.code() == Code::Jmp_rm64 && instruction.is_ip_rel_memory_operand() {
                    let slot = instruction.ip_rel_memory_address();
                    // .plt.got's entries jump through GLOB_DAT slots (functions whose
                    // address is taken too).
                    let sym = jump_slots
                        .get(&slot)
                        .or_else(|| (name == b".plt.got").then(|| glob_dat.get(&slot)).flatten());
                    if let Some(sym) = sym {
                        entries.insert(start, *sym);
                    }
                    break;
                }
            }
        }
    }
    Ok(entries)
}

/// A function to decode: its address and its bytes.
struct Function<'data> {
    start: u64,
    code: &'data [u8],
}

/// The functions to decode, from `.symtab` (else `.dynsym`) and
/// `.eh_frame`, inside executable sections other than the PLT's, each once.
fn function_ranges<'data>(
    endian: LE,
    data: &'data [u8],
    sections: &SectionTable<'data, Header>,
) -> Result<Vec<Function<'data>>, Error> {
    // (address, end, contents) of the executable sections that hold functions.
    let mut code = Vec::new();
    for section in sections.iter() {
        let name = sections.section_name(endian, section)?;
        if section.sh_flags(endian).0 & elf::SHF_EXECINSTR.0 == 0
            || section.sh_type(endian) != elf::SHT_PROGBITS
            || name.starts_with(b".plt")
        {
            continue;
        }
        let addr = section.sh_addr(endian);
        code.push((
            addr,
            addr + section.sh_size(endian),
            section.data(endian, data)?,
        ));
    }
    let mut ranges = BTreeSet::new();
    let mut symbols = sections.symbols(endian, data, elf::SHT_SYMTAB)?;
    if symbols.is_empty() {
        symbols = sections.symbols(endian, data, elf::SHT_DYNSYM)?;
    }
    for sym in symbols.symbols() {
        let (value, size) = (sym.st_value(endian), sym.st_size(endian));
        if sym.st_type() == elf::STT_FUNC && size > 0 && !sym.st_shndx(endian).is_special() {
            ranges.insert((value, value + size));
        }
    }
    if let Some(section) = sections.section_by_name(endian, b".eh_frame") {
        let (_, section) = section;
        let bytes = section.data(endian, data)?;
        let eh_frame = gimli::EhFrame::new(bytes, gimli::LittleEndian);
        let mut bases = gimli::BaseAddresses::default().set_eh_frame(section.sh_addr(endian));
        if let Some((_, text)) = sections.section_by_name(endian, b".text") {
            bases = bases.set_text(text.sh_addr(endian));
        }
        if let Some((_, got)) = sections.section_by_name(endian, b".got") {
            bases = bases.set_got(got.sh_addr(endian));
        }
        let mut entries = eh_frame.entries(&bases);
        while let Some(entry) = entries.next()? {
            if let gimli::CieOrFde::Fde(partial) = entry {
                let fde = partial
                    .parse(|section, bases, offset| section.cie_from_offset(bases, offset))?;
                if fde.len() > 0 {
                    ranges.insert((fde.initial_address(), fde.initial_address() + fde.len()));
                }
            }
        }
    }
    Ok(ranges
        .into_iter()
        .filter_map(|(start, end)| {
            let (addr, _, bytes) = code
                .iter()
                .find(|(addr, stop, _)| start >= *addr && end <= *stop)?;
            let from = (start - addr) as usize;
            Some(Function {
                start,
                code: &bytes[from..from + (end - start) as usize],
            })
        })
        .collect())
}

/// The byte order, the sections and the dynamic symbol table (empty without `.dynsym`) of
/// the ELF file `data`.
fn dynamic_symbol_table(data: &[u8]) -> Result<DynamicSymbolTable<'_>, Error> {
    let header = Header::parse(data)?;
    let endian = header.endian()?;
    let sections = header.sections(endian, data)?;
    let dynsym = sections.symbols(endian, data, elf::SHT_DYNSYM)?;
    Ok((endian, sections, dynsym))
}

type DynamicSymbolTable<'data> = (LE, SectionTable<'data, Header>, SymbolTable<'data, Header>);

/// The names an executable makes interposable for the libraries it loads: the dynamic
/// symbols it defines (a copy-relocated variable among them), and the functions it takes
/// the canonical address of (undefined, with the address of its own PLT entry as value).
pub fn interposers(executable: &[u8]) -> Result<Keep, Error> {
    let (endian, sections, dynsym) = dynamic_symbol_table(executable)?;
    let mut keep = Keep::new();
    for sym in dynsym.symbols() {
        let defined = !sym.st_shndx(endian).is_special();
        let canonical_plt = !defined && sym.st_type() == elf::STT_FUNC && sym.st_value(endian) != 0;
        if defined || canonical_plt {
            keep.insert(sym.name(endian, dynsym.strings())?.to_vec());
        }
    }
    // A COPY relocation's symbol is defined in the executable's .bss, so already above;
    // named again so that an executable whose symbol table says otherwise is still safe.
    for rela in dynamic_relas(endian, executable, &sections, &dynsym)? {
        if rela.r_type(endian, false) == elf::R_X86_64_COPY {
            let sym = dynsym.symbol(object::SymbolIndex(rela.r_sym(endian, false) as usize))?;
            keep.insert(sym.name(endian, dynsym.strings())?.to_vec());
        }
    }
    Ok(keep)
}

/// The RELA entries of the sections that relocate against `dynsym` (`.rela.dyn`,
/// `.rela.plt`): what the loader does at load time.
fn dynamic_relas<'data>(
    endian: LE,
    data: &'data [u8],
    sections: &SectionTable<'data, Header>,
    dynsym: &SymbolTable<'data, Header>,
) -> Result<Vec<&'data elf::Rela64<LE>>, Error> {
    let mut relas = Vec::new();
    for section in sections.iter() {
        if let Some((entries, link)) = section.rela(endian, data)?
            && link == dynsym.section()
        {
            relas.extend(entries);
        }
    }
    Ok(relas)
}

/// The dynamic symbols a library defines (global or weak): those of a library loaded
/// before the one bound would win over the bound one's own, so they are kept.
pub fn exports(library: &[u8]) -> Result<Keep, Error> {
    let (endian, _, dynsym) = dynamic_symbol_table(library)?;
    let mut keep = Keep::new();
    for sym in dynsym.symbols() {
        let bind = sym.st_bind();
        if !sym.st_shndx(endian).is_special() && (bind == elf::STB_GLOBAL || bind == elf::STB_WEAK)
        {
            keep.insert(sym.name(endian, dynsym.strings())?.to_vec());
        }
    }
    Ok(keep)
}

/// The SONAME of a shared library, if it has one.
pub fn soname(library: &[u8]) -> Result<Option<Vec<u8>>, Error> {
    let header = Header::parse(library)?;
    let endian = header.endian()?;
    let sections = header.sections(endian, library)?;
    for section in sections.iter() {
        let Some((dynamic, link)) = section.dynamic(endian, library)? else {
            continue;
        };
        let strings = sections.strings(endian, library, link)?;
        for entry in dynamic {
            if entry.d_tag.get(endian) == elf::DT_SONAME {
                let name = strings
                    .get(entry.d_val.get(endian) as u32)
                    .map_err(|()| Error::Unsupported("a SONAME outside .dynstr"))?;
                return Ok(Some(name.to_vec()));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A library with one bound symbol, `add` at 0x3000, whose PLT entry is at 0x1000,
    /// and a PLT entry at 0x1010 for a symbol not bound.
    fn scan_with(test: impl FnOnce(&Scan<'_>)) {
        let symbols = vec![Dynamic {
            name: "add".into(),
            value: 0x3000,
            interposable_definition: true,
            kind: elf::STT_FUNC,
        }];
        let plt = BTreeMap::from([(0x1000, 0), (0x1010, 0)]);
        let plt_bound = BTreeMap::from([(0x1000, 0)]);
        let (glob_dat, got_bound) = (HashMap::new(), HashMap::new());
        test(&Scan {
            symbols: &symbols,
            plt: &plt,
            plt_bound: &plt_bound,
            glob_dat: &glob_dat,
            got_bound: &got_bound,
        });
    }

    /// `call rel32` at `at` to `target`.
    fn call(at: u64, target: u64) -> Vec<u8> {
        let rel = i32::try_from(target as i64 - (at as i64 + 5)).unwrap();
        let mut bytes = vec![0xE8];
        bytes.extend(rel.to_le_bytes());
        bytes
    }

    #[test]
    fn a_function_decoded_to_its_end_gives_its_sites() {
        scan_with(|scan| {
            // call add@plt; call other@plt; ret
            let mut code = call(0x2000, 0x1000);
            code.extend(call(0x2005, 0x1010));
            code.push(0xC3);
            let found = scan.function(0x2000, &code).unwrap();
            assert_eq!(found.branches_left, 1);
            assert_eq!(
                found.sites,
                vec![Site {
                    address: 0x2000,
                    len: 5,
                    kind: SiteKind::Branch,
                    symbol: "add".into(),
                    definition: 0x3000,
                }]
            );
        });
    }

    #[test]
    fn an_undecodable_instruction_drops_the_functions_sites_and_is_counted() {
        scan_with(|scan| {
            // call add@plt; then 06 (push es: no such instruction in 64-bit mode); ret
            let mut code = call(0x2000, 0x1000);
            code.extend([0x06, 0xC3]);
            assert_eq!(scan.function(0x2000, &code), None);
            // An instruction cut by the function's end is no better.
            assert_eq!(scan.function(0x2000, &call(0x2000, 0x1000)[..3]), None);
        });
        // Another scan of the same bytes (its FDE, say) found the site: dropped, counted.
        let site = |address| Site {
            address,
            len: 5,
            kind: SiteKind::Branch,
            symbol: "add".into(),
            definition: 0x3000,
        };
        let mut sites = BTreeMap::from([(0x2000, site(0x2000)), (0x2010, site(0x2010))]);
        let ranges = vec![0x2000..0x2007, 0x3000..0x3010];
        assert_eq!(drop_inside(&mut sites, &ranges), 1);
        assert_eq!(sites.keys().copied().collect::<Vec<_>>(), vec![0x2010]);
        let analysis = Analysis {
            undecodable: 1,
            dropped: 1,
            ..Analysis::default()
        };
        assert!(
            analysis
                .summary()
                .ends_with("; 1 functions not decodable to their end, 1 sites in them left"),
            "{}",
            analysis.summary()
        );
    }
}
