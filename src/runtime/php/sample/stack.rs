//! The PHP call stack of a running php-cgi worker, read from outside: walk
//! `EG(current_execute_data)` → `prev_execute_data`, innermost frame first, and format each
//! frame like a slowlog line (`level3() /srv/slow.php:2`, `Foo->bar() /srv/x.php:10`,
//! `Foo::make() ...`, `usleep() (internal)`, `{main}() /srv/slow.php:5`).
//!
//! Each frame shows its own function and where that function is now: for user code the file
//! and the line of its current opline (the line of the call it is in), for C functions
//! `(internal)`. (php-fpm's slowlog prints the same facts shifted by one: each function with
//! the file:line it was called from, and no class and no `{main}` line.) `->` marks a call
//! with `$this`, `::` a static one, as in PHP's own backtraces. A closure is `{closure}`
//! (PHP 8.4 names closures `{closure:FILE:LINE}` itself, and that name is kept).
//!
//! The worker is not stopped: a frame may return while it is read. The walk is bounded by
//! `depth` and by a visited set, every pointer is checked, every string must carry the
//! zend_string type tag, and anything unreadable ends the walk with what was read so far.

use std::fmt;

use super::offsets::{self, Offsets};
use super::remote::{ReadError, Remote, field_u32, field_u64, plausible_struct};

/// Longest function, class or file name kept (bytes; longer ones are cut).
pub const NAME_LIMIT: usize = 256;

/// Where a frame is executing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// PHP code: the file of the function and the line of its current opline (0 if unknown).
    User { file: String, line: u32 },
    /// A C function (`sleep`, `array_map`, ...).
    Internal,
}

/// One frame of the stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// `level3`, `{closure}`, `{main}` (the script itself), `include`/`require_once`/`eval`...
    pub function: String,
    /// The class of a method (`func->common.scope->name`).
    pub class: Option<String>,
    /// Called without `$this` (shown as `Class::method`, else `Class->method`).
    pub is_static: bool,
    pub location: Location,
}

impl fmt::Display for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(class) = &self.class {
            write!(f, "{class}{}", if self.is_static { "::" } else { "->" })?;
        }
        match &self.location {
            Location::User { file, line } => write!(f, "{}() {file}:{line}", self.function),
            Location::Internal => write!(f, "{}() (internal)", self.function),
        }
    }
}

/// Why the walk stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackEnd {
    /// Reached the outermost frame.
    Complete,
    /// `depth` frames were read and there are more.
    DepthLimit,
    /// A frame pointed back to one already seen (a torn read).
    Loop,
    /// A pointer or string could not be read or made no sense (the request moved on, or the
    /// offsets do not fit this build).
    Unreadable,
}

/// The stack of one worker, innermost frame first. Empty when the worker runs no PHP code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack {
    pub frames: Vec<Frame>,
    pub end: StackEnd,
}

impl fmt::Display for Stack {
    /// One frame per line, slowlog style.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for frame in &self.frames {
            writeln!(f, "{frame}")?;
        }
        Ok(())
    }
}

/// Walks the frames from `first` (the worker's `current_execute_data`). Errors only when the
/// process cannot be read at all; a fault mid-walk ends the stack with `Unreadable`.
pub fn walk(remote: &Remote, o: &Offsets, first: u64, depth: usize) -> Result<Stack, ReadError> {
    let mut frames = Vec::new();
    let mut seen: Vec<u64> = Vec::new();
    let mut ex = first;
    // NULL-func frames are skipped without printing: bound the steps, not just the frames.
    let max_steps = depth.saturating_mul(2).saturating_add(16);
    let end = loop {
        if ex == 0 {
            break StackEnd::Complete;
        }
        if frames.len() >= depth {
            break StackEnd::DepthLimit;
        }
        if seen.len() >= max_steps || seen.contains(&ex) {
            break StackEnd::Loop;
        }
        seen.push(ex);
        match frame(remote, o, ex) {
            Ok((frame, prev)) => {
                frames.extend(frame);
                ex = prev;
            }
            Err(ReadError::Fault(_)) => break StackEnd::Unreadable,
            Err(e @ ReadError::Process(_)) if frames.is_empty() => return Err(e),
            Err(ReadError::Process(_)) => break StackEnd::Unreadable,
        }
    };
    Ok(Stack { frames, end })
}

/// Reads the frame at `ex`: the frame (None for a frame without a function) and the next
/// (outer) frame's address.
fn frame(remote: &Remote, o: &Offsets, ex: u64) -> Result<(Option<Frame>, u64), ReadError> {
    let fault = ReadError::Fault(ex);
    if !plausible_struct(ex) {
        return Err(fault);
    }
    let mut block = [0u8; 64];
    let need = [
        o.ex_opline,
        o.ex_func,
        o.ex_this_type_info,
        o.ex_prev_execute_data,
    ]
    .into_iter()
    .max()
    .unwrap_or(0)
        + 8;
    let block = block.get_mut(..need as usize).ok_or(fault)?;
    remote.read_exact(ex, block)?;
    let opline = field_u64(block, o.ex_opline).ok_or(fault)?;
    let func = field_u64(block, o.ex_func).ok_or(fault)?;
    let call_info = field_u32(block, o.ex_this_type_info).ok_or(fault)?;
    let prev = field_u64(block, o.ex_prev_execute_data).ok_or(fault)?;
    if func == 0 {
        return Ok((None, prev));
    }
    if !plausible_struct(func) {
        return Err(ReadError::Fault(func));
    }

    // The start of zend_function: type, common.function_name, common.scope, and for user
    // code op_array.filename. An internal function is shorter: read what is there.
    let mut fblock = [0u8; 256];
    let fneed = [o.func_type, o.func_name, o.func_scope, o.op_array_filename]
        .into_iter()
        .max()
        .unwrap_or(0)
        + 8;
    let fblock = fblock.get_mut(..fneed as usize).ok_or(fault)?;
    let got = remote.read_partial(func, fblock)?;
    let fblock = &fblock[..got];
    let kind = *fblock
        .get(o.func_type as usize)
        .ok_or(ReadError::Fault(func))?;
    let name_ptr = field_u64(fblock, o.func_name).ok_or(ReadError::Fault(func))?;
    let scope = field_u64(fblock, o.func_scope).ok_or(ReadError::Fault(func))?;
    let user = match kind {
        offsets::ZEND_INTERNAL_FUNCTION => false,
        2 | 4 => true, // ZEND_USER_FUNCTION, ZEND_EVAL_CODE
        _ => return Err(ReadError::Fault(func)),
    };

    let function = if name_ptr != 0 {
        zend_string(remote, o, name_ptr)?
    } else if !user {
        "???".to_owned()
    } else if call_info & offsets::ZEND_CALL_TOP_CODE == offsets::ZEND_CALL_TOP_CODE {
        "{main}".to_owned()
    } else {
        include_kind(remote, o, prev).to_owned()
    };
    let class = match scope {
        0 => None,
        scope if plausible_struct(scope) => {
            Some(zend_string(remote, o, remote.read_u64(scope + o.ce_name)?)?)
        }
        scope => return Err(ReadError::Fault(scope)),
    };
    let location = if user {
        let file_ptr = field_u64(fblock, o.op_array_filename).ok_or(ReadError::Fault(func))?;
        let file = zend_string(remote, o, file_ptr)?;
        let line = if plausible_struct(opline) {
            remote.read_u32(opline + o.op_lineno).unwrap_or(0)
        } else {
            0
        };
        Location::User { file, line }
    } else {
        Location::Internal
    };
    let is_static = call_info & 0xff != u32::from(offsets::IS_OBJECT);
    Ok((
        Some(Frame {
            function,
            class,
            is_static,
            location,
        }),
        prev,
    ))
}

/// An included file's frame has no function name: the caller's current opline says whether
/// it is an include, a require or an eval.
fn include_kind(remote: &Remote, o: &Offsets, caller: u64) -> &'static str {
    const UNKNOWN: &str = "[INCLUDE_OR_EVAL]";
    if !plausible_struct(caller) {
        return UNKNOWN;
    }
    let Ok(opline) = remote.read_u64(caller + o.ex_opline) else {
        return UNKNOWN;
    };
    if !plausible_struct(opline) {
        return UNKNOWN;
    }
    let mut op = [0u8; 32];
    let Some(op) = op.get_mut(..(o.op_opcode.max(o.op_extended_value + 4) + 1) as usize) else {
        return UNKNOWN;
    };
    if remote.read_exact(opline, op).is_err()
        || op.get(o.op_opcode as usize) != Some(&offsets::ZEND_INCLUDE_OR_EVAL)
    {
        return UNKNOWN;
    }
    match field_u32(op, o.op_extended_value) {
        Some(offsets::ZEND_EVAL) => "eval",
        Some(offsets::ZEND_INCLUDE) => "include",
        Some(offsets::ZEND_INCLUDE_ONCE) => "include_once",
        Some(offsets::ZEND_REQUIRE) => "require",
        Some(offsets::ZEND_REQUIRE_ONCE) => "require_once",
        _ => UNKNOWN,
    }
}

/// A `zend_string` at `addr`, cut at [`NAME_LIMIT`]; a block without the string type tag or
/// with an absurd length is a fault (torn read or wrong offsets).
pub fn zend_string(remote: &Remote, o: &Offsets, addr: u64) -> Result<String, ReadError> {
    if !plausible_struct(addr) {
        return Err(ReadError::Fault(addr));
    }
    let header = o.str_val as usize;
    let mut buf = vec![0u8; header + NAME_LIMIT];
    let got = remote.read_partial(addr, &mut buf)?;
    let type_info = field_u32(&buf[..got], 4).ok_or(ReadError::Fault(addr))?;
    let len = field_u64(&buf[..got], o.str_len).ok_or(ReadError::Fault(addr))?;
    if type_info & 0xf != u32::from(offsets::IS_STRING) || len > (1 << 31) || got < header {
        return Err(ReadError::Fault(addr));
    }
    let take = (len as usize).min(NAME_LIMIT).min(got - header);
    Ok(String::from_utf8_lossy(&buf[header..header + take]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, class: Option<&str>, is_static: bool, location: Location) -> Frame {
        Frame {
            function: function.into(),
            class: class.map(Into::into),
            is_static,
            location,
        }
    }

    #[test]
    fn formats_like_a_slowlog() {
        let user = |line| Location::User {
            file: "/srv/x.php".into(),
            line,
        };
        assert_eq!(
            frame("level3", None, true, user(2)).to_string(),
            "level3() /srv/x.php:2"
        );
        assert_eq!(
            frame("bar", Some("Foo"), false, user(10)).to_string(),
            "Foo->bar() /srv/x.php:10"
        );
        assert_eq!(
            frame("make", Some("Foo"), true, user(3)).to_string(),
            "Foo::make() /srv/x.php:3"
        );
        assert_eq!(
            frame("sleep", None, true, Location::Internal).to_string(),
            "sleep() (internal)"
        );
        let stack = Stack {
            frames: vec![frame("{main}", None, true, user(5))],
            end: StackEnd::Complete,
        };
        assert_eq!(stack.to_string(), "{main}() /srv/x.php:5\n");
    }

    #[test]
    fn a_garbage_pointer_ends_the_walk() {
        let me = Remote {
            pid: nix::unistd::Pid::this(),
        };
        let o = &offsets::TABLE[2].offsets;
        // A fake frame in our own memory whose func points nowhere readable.
        let mut ex = [0u64; 8];
        ex[(o.ex_func / 8) as usize] = 0x10_0000_0000_0008;
        std::hint::black_box(&mut ex);
        let stack = walk(&me, o, ex.as_ptr() as u64, 20).unwrap();
        assert_eq!((stack.frames.len(), stack.end), (0, StackEnd::Unreadable));
        // A frame that is its own parent, with no function: a loop, not a hang.
        let mut ex = [0u64; 8];
        let addr = ex.as_ptr() as u64;
        ex[(o.ex_prev_execute_data / 8) as usize] = addr;
        std::hint::black_box(&mut ex);
        assert_eq!(walk(&me, o, addr, 20).unwrap().end, StackEnd::Loop);
        assert_eq!(
            walk(&me, o, 0, 20).unwrap(),
            Stack {
                frames: vec![],
                end: StackEnd::Complete
            }
        );
    }
}
