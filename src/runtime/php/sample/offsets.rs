//! The struct offsets the sampler reads, per PHP minor version and architecture (non-ZTS
//! builds, 64-bit little-endian only), and the few engine constants it needs.
//!
//! Provenance of every row (see [`TABLE`]):
//! - 8.2 x86_64: verified by `offsetof` against the php8.2-dev headers of this machine (the
//!   `headers` test re-checks it on every run where `cc` and the headers exist).
//! - 8.2 aarch64: verified by cross-compiling the same headers with `aarch64-linux-gnu-gcc`
//!   (the same test does it when that compiler is installed).
//! - 8.1, 8.3, 8.4 (both arches): NOT verified against a real build here. Derived from the
//!   public headers' struct definitions; only `zend_op_array.filename` differs from 8.2:
//!   - 8.1: the common part of `zend_op_array` ends after `attributes` (56); `T` and
//!     `run_time_cache` follow `cache_size`/`last_var` → `filename` at 144.
//!   - 8.2: `T` and `run_time_cache` join the common part (`T` at 56, padding, cache at 64)
//!     → `filename` at 152 (verified).
//!   - 8.3: the common part swaps them (`run_time_cache` at 56, `T` at 64) and the hole closes
//!     → `filename` at 144.
//!   - 8.4: the common part gains `doc_comment` (64) and `prop_info` (80, property hooks)
//!     → `filename` at 168; `doc_comment` no longer follows `line_end`.
//!
//!   Every other field is identical in 8.1–8.4: the prefix of `zend_executor_globals` up to
//!   `current_execute_data` (two zvals, `symtable_cache[32]`, two pointers, two HashTables,
//!   `bailout`, two ints, five pointers, `vm_stack_page_size`) has not changed since 8.0;
//!   `zend_execute_data`, `zend_op`, `zend_string`, the start of `zend_function` and of
//!   `zend_class_entry` are unchanged since 7.4; `sapi_request_info` is unchanged, and 8.4
//!   only appends `request_parse_body_context` to `sapi_globals_struct`.
//! - The arches differ only in `sapi_globals_struct.global_request_time`: it follows a
//!   `zend_stat_t` (`struct stat`), 144 bytes on x86_64 and 128 on aarch64.
//!
//! A wrong row cannot make the sampler panic: every pointer read is checked, every string
//! must carry the zend_string type tag, and a stack walk that meets garbage stops.

/// The machine a php-cgi binary was built for, from its ELF header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arch {
    X86_64,
    Aarch64,
}

impl Arch {
    /// The architecture this drover runs on (`None` elsewhere: no table rows).
    pub fn host() -> Option<Arch> {
        if cfg!(target_arch = "x86_64") {
            Some(Arch::X86_64)
        } else if cfg!(target_arch = "aarch64") {
            Some(Arch::Aarch64)
        } else {
            None
        }
    }
}

/// Byte offsets of the fields the sampler reads. Names follow the C field paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offsets {
    /// `zend_executor_globals.current_execute_data`
    pub eg_current_execute_data: u64,
    /// `zend_execute_data.opline`
    pub ex_opline: u64,
    /// `zend_execute_data.func`
    pub ex_func: u64,
    /// `zend_execute_data.This.u1.type_info` (Z_TYPE(This) in the low byte, call info above)
    pub ex_this_type_info: u64,
    /// `zend_execute_data.prev_execute_data`
    pub ex_prev_execute_data: u64,
    /// `zend_function.type` (u8)
    pub func_type: u64,
    /// `zend_function.common.function_name`
    pub func_name: u64,
    /// `zend_function.common.scope`
    pub func_scope: u64,
    /// `zend_function.op_array.filename`
    pub op_array_filename: u64,
    /// `zend_op.extended_value` (u32)
    pub op_extended_value: u64,
    /// `zend_op.lineno` (u32)
    pub op_lineno: u64,
    /// `zend_op.opcode` (u8)
    pub op_opcode: u64,
    /// `zend_string.gc.u.type_info` is at 4; `zend_string.len`
    pub str_len: u64,
    /// `zend_string.val`
    pub str_val: u64,
    /// `zend_class_entry.name`
    pub ce_name: u64,
    /// `sapi_globals_struct.request_info.request_method`
    pub sg_request_method: u64,
    /// `sapi_globals_struct.request_info.query_string`
    pub sg_query_string: u64,
    /// `sapi_globals_struct.request_info.content_length`
    pub sg_content_length: u64,
    /// `sapi_globals_struct.request_info.path_translated`
    pub sg_path_translated: u64,
    /// `sapi_globals_struct.request_info.request_uri`
    pub sg_request_uri: u64,
    /// `sapi_globals_struct.global_request_time` (double; 0 until PHP computes it)
    pub sg_global_request_time: u64,
}

impl Offsets {
    /// Bytes of `executor_globals` the sampler needs: the symbol must be at least this big.
    pub fn eg_needed(&self) -> u64 {
        self.eg_current_execute_data + 8
    }

    /// Bytes of `sapi_globals` read in one go for a sample.
    pub fn sg_needed(&self) -> u64 {
        [
            self.sg_request_method,
            self.sg_query_string,
            self.sg_content_length,
            self.sg_path_translated,
            self.sg_request_uri,
            self.sg_global_request_time,
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
            + 8
    }

    /// Every field as (C expression for `offsetof`/constant, value in this row): what the
    /// headers test compiles and compares.
    pub fn c_checks(&self) -> Vec<(&'static str, u64)> {
        vec![
            (
                "offsetof(zend_executor_globals, current_execute_data)",
                self.eg_current_execute_data,
            ),
            ("offsetof(zend_execute_data, opline)", self.ex_opline),
            ("offsetof(zend_execute_data, func)", self.ex_func),
            (
                "offsetof(zend_execute_data, This.u1.type_info)",
                self.ex_this_type_info,
            ),
            (
                "offsetof(zend_execute_data, prev_execute_data)",
                self.ex_prev_execute_data,
            ),
            ("offsetof(zend_function, type)", self.func_type),
            (
                "offsetof(zend_function, common.function_name)",
                self.func_name,
            ),
            ("offsetof(zend_function, common.scope)", self.func_scope),
            (
                "offsetof(zend_function, op_array.filename)",
                self.op_array_filename,
            ),
            ("offsetof(zend_op, extended_value)", self.op_extended_value),
            ("offsetof(zend_op, lineno)", self.op_lineno),
            ("offsetof(zend_op, opcode)", self.op_opcode),
            ("offsetof(zend_string, len)", self.str_len),
            ("offsetof(zend_string, val)", self.str_val),
            ("offsetof(zend_class_entry, name)", self.ce_name),
            (
                "offsetof(sapi_globals_struct, request_info.request_method)",
                self.sg_request_method,
            ),
            (
                "offsetof(sapi_globals_struct, request_info.query_string)",
                self.sg_query_string,
            ),
            (
                "offsetof(sapi_globals_struct, request_info.content_length)",
                self.sg_content_length,
            ),
            (
                "offsetof(sapi_globals_struct, request_info.path_translated)",
                self.sg_path_translated,
            ),
            (
                "offsetof(sapi_globals_struct, request_info.request_uri)",
                self.sg_request_uri,
            ),
            (
                "offsetof(sapi_globals_struct, global_request_time)",
                self.sg_global_request_time,
            ),
            ("IS_STRING", IS_STRING as u64),
            ("IS_OBJECT", IS_OBJECT as u64),
            ("ZEND_INTERNAL_FUNCTION", ZEND_INTERNAL_FUNCTION as u64),
            ("ZEND_CALL_TOP_CODE", ZEND_CALL_TOP_CODE as u64),
            ("ZEND_INCLUDE_OR_EVAL", ZEND_INCLUDE_OR_EVAL as u64),
            ("ZEND_EVAL", ZEND_EVAL as u64),
            ("ZEND_INCLUDE", ZEND_INCLUDE as u64),
            ("ZEND_INCLUDE_ONCE", ZEND_INCLUDE_ONCE as u64),
            ("ZEND_REQUIRE", ZEND_REQUIRE as u64),
            ("ZEND_REQUIRE_ONCE", ZEND_REQUIRE_ONCE as u64),
        ]
    }
}

/// `zval` type tags (low byte of `u1.type_info`, low nibble of a refcounted `gc.u.type_info`).
pub const IS_STRING: u8 = 6;
pub const IS_OBJECT: u8 = 8;
/// `zend_function.type` of a C function; user code is 2 (function) or 4 (eval).
pub const ZEND_INTERNAL_FUNCTION: u8 = 1;
/// Call-info bits in `This.u1.type_info`: code (not a function) at the top of the VM stack.
pub const ZEND_CALL_TOP_CODE: u32 = (1 << 16) | (1 << 17);
/// The opcode that starts an include/require/eval frame, and its `extended_value` kinds.
pub const ZEND_INCLUDE_OR_EVAL: u8 = 73;
pub const ZEND_EVAL: u32 = 1 << 0;
pub const ZEND_INCLUDE: u32 = 1 << 1;
pub const ZEND_INCLUDE_ONCE: u32 = 1 << 2;
pub const ZEND_REQUIRE: u32 = 1 << 3;
pub const ZEND_REQUIRE_ONCE: u32 = 1 << 4;

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub minor: u32,
    pub arch: Arch,
    /// Checked against a real build's headers (see the module docs); false = derived only.
    pub verified: bool,
    pub offsets: Offsets,
}

/// The row for PHP 8.`minor` on `arch`, if the table has one.
pub fn lookup(major: u32, minor: u32, arch: Arch) -> Option<&'static Row> {
    if major != 8 {
        return None;
    }
    TABLE
        .iter()
        .find(|row| row.minor == minor && row.arch == arch)
}

const fn row(minor: u32, arch: Arch, verified: bool, op_array_filename: u64) -> Row {
    Row {
        minor,
        arch,
        verified,
        offsets: Offsets {
            eg_current_execute_data: 488,
            ex_opline: 0,
            ex_func: 24,
            ex_this_type_info: 40,
            ex_prev_execute_data: 48,
            func_type: 0,
            func_name: 8,
            func_scope: 16,
            op_array_filename,
            op_extended_value: 20,
            op_lineno: 24,
            op_opcode: 28,
            str_len: 16,
            str_val: 24,
            ce_name: 8,
            // sapi_globals_struct: server_context (8), then sapi_request_info at 8.
            sg_request_method: 8,
            sg_query_string: 16,
            sg_content_length: 32,
            sg_path_translated: 40,
            sg_request_uri: 48,
            // After sapi_headers (168..248), read_post_bytes, two flags, then zend_stat_t at
            // 264: 144 bytes on x86_64, 128 on aarch64; then 3 pointers, a long, int + bool.
            sg_global_request_time: match arch {
                Arch::X86_64 => 440,
                Arch::Aarch64 => 424,
            },
        },
    }
}

/// PHP 8.1–8.4, non-ZTS, x86_64 and aarch64. `verified` says which rows were checked against
/// real headers; the module docs say how the others were derived.
pub static TABLE: [Row; 8] = [
    row(1, Arch::X86_64, false, 144),
    row(1, Arch::Aarch64, false, 144),
    row(2, Arch::X86_64, true, 152),
    row(2, Arch::Aarch64, true, 152),
    row(3, Arch::X86_64, false, 144),
    row(3, Arch::Aarch64, false, 144),
    row(4, Arch::X86_64, false, 168),
    row(4, Arch::Aarch64, false, 168),
];
