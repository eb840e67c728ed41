//! libxdp's multiprog dispatcher, through the system's `libxdp.so.1`
//! (Debian: `libxdp1`), loaded at run time.
//!
//! libxdp (and `xdp-loader`, and every program built on libxdp) runs several
//! XDP programs on an interface through its own dispatcher: up to ten
//! programs ordered by *run priority*, each with the set of actions after
//! which the next one runs, the dispatcher and its freplace links pinned
//! under `<bpffs>/xdp/dispatch-<ifindex>-<dispatcher id>/`, changes
//! serialized by a lock on `<bpffs>/xdp`. bpfmux's `libxdp` engine adds and
//! removes its programs through libxdp itself, so both tools share one
//! dispatcher, one set of pins and one lock, and each one's listing shows
//! the other's programs.
//!
//! The library is opened with `dlopen` rather than linked: it brings its own
//! libbpf (the system's), which stays apart from the one bpfmux links
//! statically, and bpfmux keeps running (with this engine unavailable) on
//! machines without libxdp. Only program descriptors and ids cross between
//! the two libbpfs.
//!
//! Why libxdp itself and not bpfmux speaking its protocol: the dispatcher
//! that runs the packets would be libxdp's either way (its layout and
//! version are what the other tools read), so the per-packet cost is the
//! same, and `bench/xdp` measures it equal to bpfmux's own dispatcher within
//! the noise, and the attach time through libxdp within a few percent of
//! bpfmux's own (README, "Sharing an interface with libxdp"). A second
//! implementation of the pins, the lock and the dispatcher versions would
//! buy nothing measurable and would have to follow every libxdp release.
//! What libxdp's API does not offer: replacing a set in one swap (bpfmux
//! adds the new programs, then removes the old ones), and keeping a program
//! running across a replacement.

use std::ffi::{c_char, c_int, c_long, c_uint, c_void, CStr, CString};
use std::path::Path;
use std::sync::OnceLock;

use serde::Serialize;

use super::action::ActionSet;
use super::Mode;

/// The programs one libxdp dispatcher runs at most (libxdp's
/// `MAX_DISPATCHER_ACTIONS`).
pub const MAX_PROGS: usize = 10;
/// The run priority libxdp gives a program that names none.
pub const DEFAULT_PRIO: u32 = 50;
/// libxdp's chain-call actions cover the five XDP actions.
const LAST_ACTION: u32 = 4; // XDP_REDIRECT

/// What went wrong with libxdp.
#[derive(Clone, Debug, thiserror::Error)]
pub enum LibxdpError {
    /// `libxdp.so.1` could not be loaded.
    #[error(
        "libxdp is not available ({0}); install it (Debian: libxdp1, and xdp-tools for \
         xdp-loader)"
    )]
    NotInstalled(String),
    /// The library is too old for bpfmux.
    #[error("libxdp.so.1 has no {0} (bpfmux needs libxdp 1.2 or later)")]
    TooOld(&'static str),
    /// A libxdp call failed.
    #[error("{what}: {message}")]
    Call {
        /// What bpfmux asked libxdp to do.
        what: String,
        /// The negative errno libxdp returned.
        code: i32,
        /// libxdp's text for it.
        message: String,
    },
    /// libxdp could not use its dispatcher here and attached the program
    /// alone (what it does where the kernel refuses freplace).
    #[error(
        "libxdp attached the program without its dispatcher (the kernel refused libxdp's \
         freplace programs: BPF trampolines are not allowed here), so no other program could \
         share the interface; it was taken off again"
    )]
    NoDispatcher,
    /// libxdp could not load its dispatcher: its freplace programs need
    /// BPF trampolines, which this kernel refuses.
    #[error(
        "{what}: {message} (libxdp's dispatcher needs BPF trampolines for its freplace \
         programs, which this kernel refuses)"
    )]
    NeedsTrampolines {
        /// What bpfmux asked libxdp to do.
        what: String,
        /// The negative errno libxdp returned.
        code: i32,
        /// libxdp's text for it.
        message: String,
    },
    /// A chain-on set libxdp cannot express.
    #[error(
        "libxdp's dispatcher chains on the five XDP actions only (aborted, drop, pass, tx, \
         redirect), not on {0}"
    )]
    Actions(ActionSet),
}

impl LibxdpError {
    /// The errno of a failed call, if it was one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            LibxdpError::Call { code, .. } | LibxdpError::NeedsTrampolines { code, .. } => {
                Some(-code)
            }
            _ => None,
        }
    }
}

type Result<T> = std::result::Result<T, LibxdpError>;

/// `struct xdp_program_opts` of libxdp 1.2+ (libxdp.h).
#[repr(C)]
struct ProgramOpts {
    sz: usize,
    obj: *mut c_void,
    opts: *mut c_void,
    prog_name: *const c_char,
    find_filename: *const c_char,
    open_filename: *const c_char,
    pin_path: *const c_char,
    id: u32,
    fd: c_int,
}

type Prog = c_void;
type Multiprog = c_void;

/// The functions bpfmux calls, resolved once.
struct Lib {
    get_error: unsafe extern "C" fn(*const c_void) -> c_long,
    strerror: unsafe extern "C" fn(c_int, *mut c_char, usize) -> c_int,
    create: unsafe extern "C" fn(*mut ProgramOpts) -> *mut Prog,
    close: unsafe extern "C" fn(*mut Prog),
    name: unsafe extern "C" fn(*const Prog) -> *const c_char,
    id: unsafe extern "C" fn(*const Prog) -> u32,
    run_prio: unsafe extern "C" fn(*const Prog) -> c_uint,
    set_run_prio: unsafe extern "C" fn(*mut Prog, c_uint) -> c_int,
    chain_enabled: unsafe extern "C" fn(*const Prog, c_uint) -> bool,
    set_chain: unsafe extern "C" fn(*mut Prog, c_uint, bool) -> c_int,
    attach_multi: unsafe extern "C" fn(*mut *mut Prog, usize, c_int, c_uint, c_uint) -> c_int,
    detach_multi: unsafe extern "C" fn(*mut *mut Prog, usize, c_int, c_uint, c_uint) -> c_int,
    mp_get: unsafe extern "C" fn(c_int) -> *mut Multiprog,
    mp_next: unsafe extern "C" fn(*const Prog, *const Multiprog) -> *mut Prog,
    mp_close: unsafe extern "C" fn(*mut Multiprog),
    mp_detach: unsafe extern "C" fn(*mut Multiprog) -> c_int,
    mp_mode: unsafe extern "C" fn(*const Multiprog) -> c_uint,
    mp_main: unsafe extern "C" fn(*const Multiprog) -> *mut Prog,
    mp_is_legacy: unsafe extern "C" fn(*const Multiprog) -> bool,
    /// libxdp's libbpf (the system's libbpf.so.1, not bpfmux's): libxdp
    /// loads every program of an object it opens, so bpfmux opens the
    /// object with the same libbpf and turns the others' autoload off.
    obj_open: unsafe extern "C" fn(*const c_char, *const c_void) -> *mut c_void,
    obj_next_prog: unsafe extern "C" fn(*const c_void, *mut c_void) -> *mut c_void,
    obj_close: unsafe extern "C" fn(*mut c_void),
    prog_name: unsafe extern "C" fn(*const c_void) -> *const c_char,
    prog_set_autoload: unsafe extern "C" fn(*mut c_void, bool) -> c_int,
}

extern "C" {
    fn vdprintf(fd: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int;
}

/// libxdp's libbpf prints its info messages too by default (about every
/// ELF section it does not know, for instance); bpfmux shows its warnings
/// only, which include the verifier's log of a refused program. The
/// `va_list` argument arrives as a pointer on the ABIs bpfmux runs on
/// (x86-64, arm64) and goes on to vdprintf unchanged.
unsafe extern "C" fn libbpf_warnings(level: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int {
    const LIBBPF_WARN: c_int = 0;
    if level != LIBBPF_WARN {
        return 0;
    }
    // SAFETY: libbpf's format string and its arguments, as received.
    unsafe { vdprintf(2, fmt, ap) }
}

// SAFETY: plain function pointers into a library that is never unloaded.
unsafe impl Send for Lib {}
// SAFETY: as above; libxdp's calls take their own lock where they change state.
unsafe impl Sync for Lib {}

fn open_lib() -> Result<Lib> {
    let name = c"libxdp.so.1";
    // SAFETY: NUL-terminated name; the handle is kept for the process's life.
    let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        // SAFETY: dlerror returns a NUL-terminated string or NULL.
        let why = unsafe {
            let e = libc::dlerror();
            if e.is_null() {
                "dlopen failed".to_string()
            } else {
                CStr::from_ptr(e).to_string_lossy().into_owned()
            }
        };
        return Err(LibxdpError::NotInstalled(why));
    }
    macro_rules! sym {
        ($name:literal, $t:ty) => {{
            let c = concat!($name, "\0");
            // SAFETY: valid handle, NUL-terminated name.
            let p = unsafe { libc::dlsym(h, c.as_ptr().cast()) };
            if p.is_null() {
                return Err(LibxdpError::TooOld($name));
            }
            // SAFETY: the symbol is the libxdp.h function of this name, whose C
            // signature the field's type spells out.
            unsafe { std::mem::transmute::<*mut c_void, $t>(p) }
        }};
    }
    // libbpf.so.1 is loaded already, as libxdp's dependency: this finds
    // that very copy.
    // SAFETY: NUL-terminated name; the handle is kept for the process's life.
    let bpf = unsafe { libc::dlopen(c"libbpf.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if bpf.is_null() {
        return Err(LibxdpError::NotInstalled(
            "libbpf.so.1, libxdp's libbpf, did not load".into(),
        ));
    }
    fn libbpf_sym<T: Copy>(bpf: *mut c_void, name: &'static CStr) -> Result<T> {
        // SAFETY: valid handle, NUL-terminated name.
        let p = unsafe { libc::dlsym(bpf, name.as_ptr()) };
        if p.is_null() {
            return Err(LibxdpError::TooOld(
                name.to_str().unwrap_or("a libbpf function"),
            ));
        }
        assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
        // SAFETY: T is the function pointer type of the libbpf function of
        // this name (a pointer-sized fn type, checked above).
        Ok(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
    }
    type SetPrint = unsafe extern "C" fn(*const c_void) -> *const c_void;
    let set_print: SetPrint = libbpf_sym(bpf, c"libbpf_set_print")?;
    // SAFETY: a callback with libbpf_print_fn_t's signature.
    unsafe { set_print(libbpf_warnings as *const c_void) };
    Ok(Lib {
        get_error: sym!(
            "libxdp_get_error",
            unsafe extern "C" fn(*const c_void) -> c_long
        ),
        strerror: sym!(
            "libxdp_strerror",
            unsafe extern "C" fn(c_int, *mut c_char, usize) -> c_int
        ),
        create: sym!(
            "xdp_program__create",
            unsafe extern "C" fn(*mut ProgramOpts) -> *mut Prog
        ),
        close: sym!("xdp_program__close", unsafe extern "C" fn(*mut Prog)),
        name: sym!(
            "xdp_program__name",
            unsafe extern "C" fn(*const Prog) -> *const c_char
        ),
        id: sym!("xdp_program__id", unsafe extern "C" fn(*const Prog) -> u32),
        run_prio: sym!(
            "xdp_program__run_prio",
            unsafe extern "C" fn(*const Prog) -> c_uint
        ),
        set_run_prio: sym!(
            "xdp_program__set_run_prio",
            unsafe extern "C" fn(*mut Prog, c_uint) -> c_int
        ),
        chain_enabled: sym!(
            "xdp_program__chain_call_enabled",
            unsafe extern "C" fn(*const Prog, c_uint) -> bool
        ),
        set_chain: sym!(
            "xdp_program__set_chain_call_enabled",
            unsafe extern "C" fn(*mut Prog, c_uint, bool) -> c_int
        ),
        attach_multi: sym!(
            "xdp_program__attach_multi",
            unsafe extern "C" fn(*mut *mut Prog, usize, c_int, c_uint, c_uint) -> c_int
        ),
        detach_multi: sym!(
            "xdp_program__detach_multi",
            unsafe extern "C" fn(*mut *mut Prog, usize, c_int, c_uint, c_uint) -> c_int
        ),
        mp_get: sym!(
            "xdp_multiprog__get_from_ifindex",
            unsafe extern "C" fn(c_int) -> *mut Multiprog
        ),
        mp_next: sym!(
            "xdp_multiprog__next_prog",
            unsafe extern "C" fn(*const Prog, *const Multiprog) -> *mut Prog
        ),
        mp_close: sym!("xdp_multiprog__close", unsafe extern "C" fn(*mut Multiprog)),
        mp_detach: sym!(
            "xdp_multiprog__detach",
            unsafe extern "C" fn(*mut Multiprog) -> c_int
        ),
        mp_mode: sym!(
            "xdp_multiprog__attach_mode",
            unsafe extern "C" fn(*const Multiprog) -> c_uint
        ),
        mp_main: sym!(
            "xdp_multiprog__main_prog",
            unsafe extern "C" fn(*const Multiprog) -> *mut Prog
        ),
        obj_open: libbpf_sym(bpf, c"bpf_object__open_file")?,
        obj_next_prog: libbpf_sym(bpf, c"bpf_object__next_program")?,
        obj_close: libbpf_sym(bpf, c"bpf_object__close")?,
        prog_name: libbpf_sym(bpf, c"bpf_program__name")?,
        prog_set_autoload: libbpf_sym(bpf, c"bpf_program__set_autoload")?,
        mp_is_legacy: sym!(
            "xdp_multiprog__is_legacy",
            unsafe extern "C" fn(*const Multiprog) -> bool
        ),
    })
}

fn lib() -> Result<&'static Lib> {
    static LIB: OnceLock<Result<Lib>> = OnceLock::new();
    LIB.get_or_init(open_lib).as_ref().map_err(Clone::clone)
}

/// Why libxdp cannot be used here; None when it can.
pub fn unavailable() -> Option<LibxdpError> {
    lib().err()
}

impl Lib {
    fn error(&self, what: impl Into<String>, code: c_int) -> LibxdpError {
        let code = if code > 0 { -code } else { code };
        let mut buf = [0 as c_char; 256];
        // SAFETY: writable buffer of the given size; libxdp NUL-terminates it.
        let message = unsafe {
            if (self.strerror)(code, buf.as_mut_ptr(), buf.len()) == 0 {
                CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
            } else {
                std::io::Error::from_raw_os_error(-code).to_string()
            }
        };
        LibxdpError::Call {
            what: what.into(),
            code,
            message,
        }
    }

    /// libxdp's error for a returned pointer (0: fine).
    fn ptr_error(&self, p: *const c_void) -> c_int {
        // SAFETY: libxdp_get_error accepts any pointer libxdp returned.
        let e = unsafe { (self.get_error)(p) };
        if e == 0 && p.is_null() {
            -libc::ENOENT
        } else {
            e as c_int
        }
    }
}

/// One program of a libxdp dispatcher, whoever attached it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Component {
    /// The program's name.
    pub name: String,
    /// Its id in the kernel.
    pub prog_id: u32,
    /// Its run priority: lower runs first.
    pub run_prio: u32,
    /// The actions after which the next program runs.
    pub chain_on: ActionSet,
    /// Whether bpfmux attached it.
    pub bpfmux: bool,
}

/// A libxdp dispatcher on an interface.
#[derive(Clone, Debug, Serialize)]
pub struct Dispatcher {
    /// The dispatcher program the interface runs.
    pub prog_id: u32,
    /// native, generic or offload.
    pub mode: String,
    /// Its programs in run order.
    pub components: Vec<Component>,
}

/// A multiprog handle, closed on drop.
struct Mp {
    lib: &'static Lib,
    ptr: *mut Multiprog,
}

impl Drop for Mp {
    fn drop(&mut self) {
        // SAFETY: a valid multiprog from xdp_multiprog__get_from_ifindex.
        unsafe { (self.lib.mp_close)(self.ptr) }
    }
}

impl Mp {
    /// libxdp's dispatcher on `ifindex`; None when the interface runs no XDP
    /// program or one that is not libxdp's dispatcher.
    fn get(lib: &'static Lib, ifindex: u32) -> Result<Option<Mp>> {
        Ok(Self::get_any(lib, ifindex)?.filter(|mp| !mp.is_legacy()))
    }

    /// What libxdp finds on `ifindex`: its dispatcher, or a single program
    /// without one ("legacy"); None when the interface runs nothing.
    fn get_any(lib: &'static Lib, ifindex: u32) -> Result<Option<Mp>> {
        // SAFETY: plain call; the result is checked with libxdp_get_error.
        let ptr = unsafe { (lib.mp_get)(ifindex as c_int) };
        let err = lib.ptr_error(ptr);
        if err == -libc::ENOENT {
            return Ok(None);
        }
        if err != 0 {
            return Err(lib.error(
                format!("read libxdp's dispatcher on ifindex {ifindex}"),
                err,
            ));
        }
        Ok(Some(Mp { lib, ptr }))
    }

    fn is_legacy(&self) -> bool {
        // SAFETY: valid multiprog.
        unsafe { (self.lib.mp_is_legacy)(self.ptr) }
    }

    /// The program the interface runs: the dispatcher, or the legacy one.
    fn main_prog(&self) -> *mut Prog {
        // SAFETY: valid multiprog; the program lives as long as it does.
        unsafe { (self.lib.mp_main)(self.ptr) }
    }

    fn progs(&self) -> Vec<*mut Prog> {
        let mut out = vec![];
        let mut p: *mut Prog = std::ptr::null_mut();
        loop {
            // SAFETY: p is NULL or a program of this multiprog.
            p = unsafe { (self.lib.mp_next)(p, self.ptr) };
            if p.is_null() {
                return out;
            }
            out.push(p);
        }
    }
}

fn component(lib: &Lib, p: *const Prog, ours: &[u32]) -> Component {
    // SAFETY: p is a valid program of a live multiprog or one we created.
    unsafe {
        let name = (lib.name)(p);
        let prog_id = (lib.id)(p);
        let mut chain = 0u32;
        for a in 0..=LAST_ACTION {
            if (lib.chain_enabled)(p, a) {
                chain |= 1 << a;
            }
        }
        Component {
            name: if name.is_null() {
                String::new()
            } else {
                CStr::from_ptr(name).to_string_lossy().into_owned()
            },
            prog_id,
            run_prio: (lib.run_prio)(p),
            chain_on: if chain == (1 << (LAST_ACTION + 1)) - 1 {
                ActionSet::ANY
            } else {
                ActionSet(chain)
            },
            bpfmux: ours.contains(&prog_id),
        }
    }
}

fn mode_name(mode: c_uint) -> String {
    match mode {
        1 => "native",
        2 => "generic",
        3 => "offload",
        _ => "unknown",
    }
    .to_string()
}

fn attach_mode(mode: Mode) -> c_uint {
    match mode {
        Mode::Auto => 0,    // XDP_MODE_UNSPEC: native if the driver has it
        Mode::Native => 1,  // XDP_MODE_NATIVE
        Mode::Generic => 2, // XDP_MODE_SKB
    }
}

/// The libxdp dispatcher on `ifindex`, every program in run order (those
/// whose id is in `ours` marked as bpfmux's); None when there is none.
pub fn dispatcher(ifindex: u32, ours: &[u32]) -> Result<Option<Dispatcher>> {
    let lib = lib()?;
    let Some(mp) = Mp::get(lib, ifindex)? else {
        return Ok(None);
    };
    let main = mp.main_prog();
    // SAFETY: valid multiprog.
    let mode = unsafe { (lib.mp_mode)(mp.ptr) };
    let prog_id = if main.is_null() {
        0
    } else {
        // SAFETY: valid program.
        unsafe { (lib.id)(main) }
    };
    Ok(Some(Dispatcher {
        prog_id,
        mode: mode_name(mode),
        components: mp
            .progs()
            .iter()
            .map(|&p| component(lib, p, ours))
            .collect(),
    }))
}

/// One program for [`attach`]: where it is, where it runs, when the next runs.
pub struct NewProg<'a> {
    /// Its object file.
    pub object: &'a Path,
    /// Its function name in the object.
    pub program: &'a str,
    /// Its run priority.
    pub run_prio: u32,
    /// The actions after which the next program runs.
    pub chain_on: ActionSet,
}

/// Programs created through libxdp, closed on drop (closing does not detach
/// what libxdp attached: its pins hold that).
struct Progs {
    lib: &'static Lib,
    ptrs: Vec<*mut Prog>,
    /// The objects they came from (libxdp does not own them), closed after
    /// the programs: libxdp holds its own descriptors of what it loaded.
    objs: Vec<*mut c_void>,
}

impl Drop for Progs {
    fn drop(&mut self) {
        for &p in &self.ptrs {
            // SAFETY: created by xdp_program__create, closed once.
            unsafe { (self.lib.close)(p) }
        }
        for &o in &self.objs {
            // SAFETY: opened by bpf_object__open_file, closed once.
            unsafe { (self.lib.obj_close)(o) }
        }
    }
}

/// Opens `path` with libxdp's libbpf, to load only `program` of it.
fn open_only(lib: &Lib, path: &CStr, program: &str) -> std::result::Result<*mut c_void, c_int> {
    // SAFETY: NUL-terminated path, default options.
    let obj = unsafe { (lib.obj_open)(path.as_ptr(), std::ptr::null()) };
    if obj.is_null() {
        return Err(-std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL));
    }
    let mut p: *mut c_void = std::ptr::null_mut();
    loop {
        // SAFETY: p is NULL or a program of obj.
        p = unsafe { (lib.obj_next_prog)(obj, p) };
        if p.is_null() {
            return Ok(obj);
        }
        // SAFETY: a program of the open object; its name is NUL-terminated.
        unsafe {
            let me = CStr::from_ptr((lib.prog_name)(p)).to_bytes() == program.as_bytes();
            (lib.prog_set_autoload)(p, me);
        }
    }
}

/// Checks that libxdp can express `chain_on` (before anything is loaded).
pub fn check_actions(chain_on: ActionSet) -> Result<()> {
    if chain_on != ActionSet::ANY && chain_on.actions().any(|a| a > LAST_ACTION) {
        return Err(LibxdpError::Actions(chain_on));
    }
    Ok(())
}

/// Loads `progs` through libxdp and adds them to libxdp's dispatcher on
/// `ifindex` (creating one if the interface runs no XDP program) in one
/// atomic swap of the dispatcher; returns their program ids in the order
/// given. On an error nothing was added.
pub fn attach(ifindex: u32, mode: Mode, progs: &[NewProg<'_>]) -> Result<Vec<u32>> {
    let lib = lib()?;
    let mut created = Progs {
        lib,
        ptrs: Vec::with_capacity(progs.len()),
        objs: Vec::with_capacity(progs.len()),
    };
    for np in progs {
        check_actions(np.chain_on)?;
        let what = || format!("open {} in {} with libxdp", np.program, np.object.display());
        let path = CString::new(np.object.as_os_str().as_encoded_bytes())
            .map_err(|_| lib.error(what(), -libc::EINVAL))?;
        let name = CString::new(np.program).map_err(|_| lib.error(what(), -libc::EINVAL))?;
        let obj = open_only(lib, &path, np.program).map_err(|code| lib.error(what(), code))?;
        created.objs.push(obj);
        let mut opts = ProgramOpts {
            sz: std::mem::size_of::<ProgramOpts>(),
            obj,
            opts: std::ptr::null_mut(),
            prog_name: name.as_ptr(),
            find_filename: std::ptr::null(),
            open_filename: std::ptr::null(),
            pin_path: std::ptr::null(),
            id: 0,
            fd: 0,
        };
        // SAFETY: sized opts with valid strings that outlive the call.
        let p = unsafe { (lib.create)(&mut opts) };
        let err = lib.ptr_error(p);
        if err != 0 {
            return Err(lib.error(what(), err));
        }
        created.ptrs.push(p);
        // SAFETY: a program we created and have not loaded yet.
        unsafe {
            let rc = (lib.set_run_prio)(p, np.run_prio);
            if rc != 0 {
                return Err(lib.error(format!("set the run priority of {}", np.program), rc));
            }
            for a in 0..=LAST_ACTION {
                let rc = (lib.set_chain)(p, a, np.chain_on.contains(a));
                if rc != 0 {
                    return Err(lib.error(format!("set the chain actions of {}", np.program), rc));
                }
            }
        }
    }
    // SAFETY: valid programs, count matches.
    let rc = unsafe {
        (lib.attach_multi)(
            created.ptrs.as_mut_ptr(),
            created.ptrs.len(),
            ifindex as c_int,
            attach_mode(mode),
            0,
        )
    };
    if rc != 0 {
        let e = lib.error("add the programs to libxdp's dispatcher", rc);
        return Err(match e {
            // libxdp's own words for this are warnings on stderr.
            LibxdpError::Call {
                what,
                code,
                message,
            } if rc == -libc::EOPNOTSUPP || rc == -libc::EPERM => LibxdpError::NeedsTrampolines {
                what,
                code,
                message,
            },
            e => e,
        });
    }
    // SAFETY: loaded programs.
    let ids: Vec<u32> = created
        .ptrs
        .iter()
        .map(|&p| unsafe { (lib.id)(p) })
        .collect();
    if Mp::get(lib, ifindex)?.is_none() {
        // libxdp fell back to attaching the one program alone.
        detach(ifindex, &ids)?;
        return Err(LibxdpError::NoDispatcher);
    }
    Ok(ids)
}

/// Removes the programs `ids` from libxdp's dispatcher on `ifindex` in one
/// swap (the whole dispatcher and its pins when nothing else is left in it;
/// the program itself where libxdp attached one without a dispatcher).
/// Ids that are no longer there are skipped; returns the ids removed.
pub fn detach(ifindex: u32, ids: &[u32]) -> Result<Vec<u32>> {
    let lib = lib()?;
    let Some(mp) = Mp::get_any(lib, ifindex)? else {
        return Ok(vec![]);
    };
    let candidates = if mp.is_legacy() {
        vec![mp.main_prog()]
    } else {
        mp.progs()
    };
    let mut pick: Vec<*mut Prog> = candidates
        .into_iter()
        // SAFETY: programs of the live multiprog.
        .filter(|&p| !p.is_null() && ids.contains(&unsafe { (lib.id)(p) }))
        .collect();
    if pick.is_empty() {
        return Ok(vec![]);
    }
    // SAFETY: programs of the live multiprog.
    let removed = pick.iter().map(|&p| unsafe { (lib.id)(p) }).collect();
    // SAFETY: valid programs (only their ids are read), count matches; mode
    // UNSPEC: whatever mode the dispatcher runs in.
    let rc = unsafe { (lib.detach_multi)(pick.as_mut_ptr(), pick.len(), ifindex as c_int, 0, 0) };
    drop(mp);
    if rc != 0 {
        return Err(lib.error("remove programs from libxdp's dispatcher", rc));
    }
    Ok(removed)
}

/// Removes libxdp's whole dispatcher from `ifindex`, with every program in
/// it and its pins (what `xdp-loader unload --all` does). Returns the
/// programs that ran in it; None when there was no dispatcher.
pub fn detach_all(ifindex: u32) -> Result<Option<Dispatcher>> {
    let lib = lib()?;
    let Some(before) = dispatcher(ifindex, &[])? else {
        return Ok(None);
    };
    let Some(mp) = Mp::get(lib, ifindex)? else {
        return Ok(None);
    };
    // SAFETY: valid multiprog.
    let rc = unsafe { (lib.mp_detach)(mp.ptr) };
    if rc != 0 {
        return Err(lib.error("remove libxdp's dispatcher", rc));
    }
    Ok(Some(before))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_five_actions_chain() {
        assert!(check_actions(ActionSet::DEFAULT).is_ok());
        assert!(check_actions(ActionSet::ANY).is_ok());
        assert!(check_actions("drop,tx,redirect".parse().unwrap()).is_ok());
        let e = check_actions("pass,9".parse().unwrap()).unwrap_err();
        assert!(e.to_string().contains("five XDP actions"), "{e}");
    }
}
