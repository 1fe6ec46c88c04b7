//! The master's own code once it is up. No other process maps the `drover` binary, so
//! every page of it the master has mapped counts whole in its PSS, and the kernel maps
//! code in 64 KiB windows around each page run: once starting has run its once-only code
//! (the configuration's parser and checks, binding, the first spawns), almost all of the
//! binary stays mapped. [`release_code`] asks the kernel to reclaim the binary's read-only
//! mappings (`MADV_PAGEOUT`) once every pool is ready and after each reload: what the loop
//! runs next is faulted back in (from the page cache or the file), what ran once is not.
//! docs/ARCHITECTURE.md ("The master's memory") has the figures.

use std::ffi::{c_int, c_void};

/// Reclaims the pages of drover's own read-only segments (code, read-only data): they
/// hold nothing the process wrote, so reclaiming them loses nothing; a later use faults
/// them back in. A kernel without `MADV_PAGEOUT` (before 5.4) refuses it, and nothing
/// changes: there is nothing to report.
pub fn release_code() {
    // SAFETY: the callback only reads the program headers the loader passes it, for the
    // duration of the call, and `madvise`s ranges of this process's own mappings.
    unsafe {
        libc::dl_iterate_phdr(Some(page_out_segments), std::ptr::null_mut());
    }
}

/// `dl_iterate_phdr`'s callback: for the main program (the first object, which has no
/// name), `MADV_PAGEOUT` over each loadable segment that is not writable; then stops.
unsafe extern "C" fn page_out_segments(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    _data: *mut c_void,
) -> c_int {
    // SAFETY: the loader passes a valid `dl_phdr_info` for the duration of the call.
    let info = unsafe { &*info };
    // SAFETY: `dlpi_phdr` points to `dlpi_phnum` program headers of the loaded object.
    let headers =
        unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
    let page = page_size();
    for header in headers {
        if header.p_type != libc::PT_LOAD || header.p_flags & libc::PF_W != 0 {
            continue;
        }
        let Some(start) = usize::try_from(info.dlpi_addr + header.p_vaddr).ok() else {
            continue;
        };
        let end = start + usize::try_from(header.p_memsz).unwrap_or(0);
        let (start, end) = (start / page * page, end.div_ceil(page) * page);
        // SAFETY: a range of this process's own read-only mapping of its binary; paging
        // it out changes no byte of it. A failure (an older kernel) changes nothing.
        unsafe {
            libc::madvise(start as *mut c_void, end - start, libc::MADV_PAGEOUT);
        }
    }
    // The first object is the program itself: stop there.
    1
}

fn page_size() -> usize {
    // SAFETY: sysconf only reads a constant of the system.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}
