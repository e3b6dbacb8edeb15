//! The static TLS layout of this process, read from glibc at run time.
//!
//! Nothing here is hard-coded. The sizes come from the dynamic linker
//! (`_dl_get_tls_static_info`) and from the descriptors glibc exports for
//! `libthread_db` (`_thread_db_sizeof_pthread`, `_thread_db_pthread_tid`,
//! `_thread_db_pthread_dtvp`); each module's block and image from
//! `dl_iterate_phdr`; errno's slot from `__errno_location`; the rseq area from
//! `__rseq_offset`/`__rseq_size`; the per-thread key block from the thread's own
//! `specific[0]` (glibc points it at `specific_1stblock`). Where a piece is
//! missing or does not add up, `probe` returns the reason and goroutines keep
//! the OS thread's thread pointer (`super::supported` is false).
//!
//! x86-64 is variant II: the TCB (`struct pthread`) sits at the thread pointer
//! and every module's static block below it, at `tp - offset`.

use std::ffi::{c_int, c_void, CStr};
use std::ptr;

/// A range of bytes below the thread pointer: `[tp - off, tp - off + len)`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Below {
    pub(super) off: usize,
    pub(super) len: usize,
}

#[derive(Debug)]
pub(super) struct Layout {
    /// `sizeof(struct pthread)`: bytes from the thread pointer up.
    pub(super) tcb: usize,
    /// Alignment of the thread pointer.
    pub(super) align: usize,
    /// The executable's block, initialised from its image for each goroutine.
    pub(super) exe: (Below, &'static [u8]),
    /// Every other module's static block (the C library's first): the OS
    /// thread's, carried along at every switch (errno's four bytes excepted).
    pub(super) os_blocks: Vec<Below>,
    /// errno, below the thread pointer: the goroutine's own.
    pub(super) errno: usize,
    /// Offsets above the thread pointer of the DTV pointer and the kernel tid.
    pub(super) dtv: usize,
    pub(super) tid: usize,
    /// The rseq area the kernel updates (offset above the thread pointer, size).
    pub(super) rseq: Option<(usize, usize)>,
    /// `specific_1stblock` and `specific` (the pthread key tables), above the
    /// thread pointer: cleared in each goroutine's copy.
    pub(super) keys: (usize, usize),
    /// glibc's key registry, `__pthread_keys` (`{seq, destr}` per key): a
    /// goroutine's key destructors run at its end as at a thread's exit.
    pub(super) pthread_keys: usize,
    /// Offset from the thread pointer of `vthread`'s own `HOST` slot.
    pub(super) host: isize,
    /// Bytes of a goroutine's area: its TCB, the blocks in use below it and
    /// alignment slack (not the surplus: that is stack).
    pub(super) area: usize,
}

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const std::ffi::c_char) -> *mut c_void;
}
const RTLD_DEFAULT: *mut c_void = ptr::null_mut();

fn sym(name: &CStr) -> *mut c_void {
    // SAFETY: a NUL-terminated name; RTLD_DEFAULT searches the global scope.
    unsafe { dlsym(RTLD_DEFAULT, name.as_ptr()) }
}

/// A `db_desc_t` (`uint32_t[3]`: field size in bits, element count, offset).
fn desc(name: &CStr) -> Result<[u32; 3], String> {
    let p = sym(name) as *const [u32; 3];
    if p.is_null() {
        return Err(format!("glibc does not export {}", name.to_string_lossy()));
    }
    // SAFETY: glibc's descriptors are `const uint32_t[3]`.
    Ok(unsafe { *p })
}

struct Module {
    /// The main program (`dl_iterate_phdr` reports it first).
    main: bool,
    tls_data: usize,
    memsz: usize,
    filesz: usize,
    image: usize,
}

struct Modules {
    calls: usize,
    list: Vec<Module>,
}

unsafe extern "C" fn each_module(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut c_void,
) -> c_int {
    // SAFETY: dl_iterate_phdr hands a valid info; `data` is our `Modules`.
    let (info, out) = unsafe { (&*info, &mut *(data as *mut Modules)) };
    let main = out.calls == 0;
    out.calls += 1;
    if info.dlpi_tls_modid == 0 || info.dlpi_phdr.is_null() {
        return 0;
    }
    // SAFETY: dlpi_phnum headers at dlpi_phdr.
    let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    for ph in phdrs.iter().filter(|ph| ph.p_type == libc::PT_TLS) {
        out.list.push(Module {
            main,
            tls_data: info.dlpi_tls_data as usize,
            memsz: ph.p_memsz as usize,
            filesz: ph.p_filesz as usize,
            image: info.dlpi_addr as usize + ph.p_vaddr as usize,
        });
    }
    0
}

/// Read the layout on the calling thread, whose thread pointer is its own.
pub(super) fn probe(host_tp: usize, host: isize) -> Result<Layout, String> {
    let static_info = sym(c"_dl_get_tls_static_info");
    if static_info.is_null() {
        return Err("the dynamic linker does not export _dl_get_tls_static_info".into());
    }
    let (mut size, mut align) = (0usize, 0usize);
    // SAFETY: `void _dl_get_tls_static_info(size_t *, size_t *)`.
    unsafe {
        let f: unsafe extern "C" fn(*mut usize, *mut usize) = std::mem::transmute(static_info);
        f(&mut size, &mut align);
    }
    let tcb_size = sym(c"_thread_db_sizeof_pthread") as *const u32;
    if tcb_size.is_null() {
        return Err("glibc does not export _thread_db_sizeof_pthread".into());
    }
    // SAFETY: a `const uint32_t`.
    let tcb = unsafe { *tcb_size } as usize;
    let align = align.max(64);
    if tcb == 0 || size <= tcb || !align.is_power_of_two() {
        return Err(format!(
            "static TLS of {size} bytes with a TCB of {tcb} does not add up"
        ));
    }
    // The static area below the thread pointer: what glibc reserves beside the TCB.
    let below = size - tcb;
    let tid = desc(c"_thread_db_pthread_tid")?;
    let dtv = desc(c"_thread_db_pthread_dtvp")?;
    if tid[0] != 32 || dtv[0] != 64 {
        return Err("unexpected tid or dtv field size in glibc's descriptors".into());
    }
    let keys = desc(c"_thread_db_pthread_specific").ok().and_then(|d| {
        // SAFETY: `specific` is an array of pointers in our own TCB; its first
        // entry points at `specific_1stblock`, inside the TCB.
        let first = unsafe { *((host_tp + d[2] as usize) as *const usize) };
        let off = first.checked_sub(host_tp)?;
        // The descriptor covers the whole array (2048 bits, one element, on
        // 2.36): glibc's 32 level-2 pointers.
        let bytes = (d[0] as usize / 8) * d[1] as usize;
        (bytes == 32 * 8 && d[2] as usize + bytes <= tcb && off < d[2] as usize)
            .then_some((off, d[2] as usize))
    });
    let rseq = {
        let off = sym(c"__rseq_offset") as *const isize;
        let len = sym(c"__rseq_size") as *const u32;
        if off.is_null() || len.is_null() {
            None
        } else {
            // SAFETY: glibc's `const ptrdiff_t __rseq_offset`, `const unsigned int __rseq_size`.
            let (off, len) = unsafe { (*off, *len as usize) };
            (off > 0 && len > 0 && off as usize + len <= tcb).then_some((off as usize, len))
        }
    };

    let mut mods = Modules {
        calls: 0,
        list: Vec::new(),
    };
    // SAFETY: our callback only reads the headers and writes `mods`.
    unsafe { libc::dl_iterate_phdr(Some(each_module), &mut mods as *mut _ as *mut c_void) };
    let lo = host_tp - below;
    let mut exe = None;
    let mut os = Vec::new();
    for m in &mods.list {
        if m.memsz == 0 {
            continue;
        }
        if m.tls_data < lo || m.tls_data + m.memsz > host_tp {
            // Dynamic TLS (a module loaded later): reached through the DTV,
            // which stays the OS thread's.
            continue;
        }
        let b = Below {
            off: host_tp - m.tls_data,
            len: m.memsz,
        };
        if m.main {
            if m.filesz > m.memsz {
                return Err("the executable's TLS image is larger than its block".into());
            }
            // SAFETY: the executable's PT_TLS image, mapped for the process's life.
            let image = unsafe { std::slice::from_raw_parts(m.image as *const u8, m.filesz) };
            exe = Some((b, image));
        } else {
            os.push(b);
        }
    }
    // SAFETY: no preconditions.
    let errno_at = unsafe { libc::__errno_location() } as usize;
    if errno_at < lo || errno_at >= host_tp {
        return Err("errno is not in static TLS".into());
    }
    let errno = host_tp - errno_at;
    if !os.iter().any(|b| b.off >= errno && b.off - b.len < errno) {
        return Err("errno is not inside the C library's TLS block".into());
    }
    // Only the C library's block is carried between areas. Another module's
    // static block may be reached through the DTV (general-dynamic code),
    // which points at the OS thread's own copy: an area's snapshot of it would
    // be stale, and copying it back would undo what was written through the
    // DTV. Such a process keeps goroutines on the OS thread's TLS.
    if os.len() != 1 {
        return Err(format!(
            "{} shared objects have static TLS (only the C library's can follow an OS thread)",
            os.len()
        ));
    }
    let Some(exe) = exe else {
        return Err("the executable has no TLS block".into());
    };
    let b = exe.0;
    if b.off > below {
        return Err("the executable's TLS block lies outside static TLS".into());
    }
    // Our own thread-locals must be the executable's (not a cdylib's in a host
    // program, or a dynamically linked std's).
    let host_off = (-host) as usize;
    if host >= 0 || host_off > b.off || b.off - host_off + 8 > b.len {
        return Err("gosched's thread-locals are not in the executable's TLS block".into());
    }
    let Some(keys) = keys else {
        return Err("the pthread key tables were not found in the TCB".into());
    };
    let pthread_keys = sym(c"__pthread_keys");
    if pthread_keys.is_null() {
        return Err("glibc does not export __pthread_keys".into());
    }
    // The area ends where the lowest block starts: the static TLS surplus below
    // it (space glibc keeps for modules loaded later with static TLS, which
    // areas do not support) is the top of the goroutine's stack, so a small
    // goroutine touches one page for both.
    let used = os.iter().map(|o| o.off).chain([b.off]).max().unwrap_or(0);
    let area = used.div_ceil(16) * 16 + tcb.div_ceil(64) * 64 + align;
    super::tp::probe();
    Ok(Layout {
        tcb,
        align,
        exe,
        os_blocks: os,
        errno,
        dtv: dtv[2] as usize,
        tid: tid[2] as usize,
        rseq,
        keys,
        pthread_keys: pthread_keys as usize,
        host,
        area,
    })
}
