//! Recordings (`bpfmux trace --record FILE`, `bpfmux report FILE`): what a
//! run reports, kept in a file that prints the same tables, stacks, graphs
//! and error chains later, on this machine or another one.
//!
//! A [`Writer`] given to [`super::Session::record_to`] writes the file as
//! the run goes: its header once everything is attached, each error chain
//! as it comes, every stack counted and the summary at the end. Nothing in
//! it is symbolized: user frames are kept as *file + file offset* (the file
//! by path, ELF build ID and load segments, normalized while the process
//! was there: see [`super::stacks`]), kernel frames as addresses with the
//! part of the kernel's symbol table they fall in and the kernel's build
//! ID. [`Replay::read`] reads a file back and [`Replay::resolve`] names its
//! frames where it is read: user frames from the binary at its recorded
//! path if it is there with the same build ID, else from its debug file by
//! build ID (`DIR/.build-id/xx/yyyy.debug` of each [`SymbolSources`]
//! directory); kernel frames from the recorded symbols. The result is the
//! [`Summary`] and [`ErrorChain`]s a live run gives its [`super::Report`].
//!
//! # Kernel frames are recorded as the run printed them
//!
//! A live run drops the tracer's own frames from kernel stacks and starts
//! them at the traced function ([`super::stacks`], "Kernel stacks start at
//! the traced function"), by the address ranges of that code in kallsyms
//! while it was attached: ranges that exist only on the recording machine,
//! during the run. So the writer records a stack's kernel frames as the
//! live run prints them — the addresses kept, the traced function's own
//! address (`name+0x0`) first — and the symbols of those addresses only; a
//! report names them as they are and drops nothing: it prints what the
//! live run printed.
//!
//! # Format, version 1
//!
//! JSON lines (UTF-8, one object per line), gzip-compressed when the file
//! name ends in `.gz` (read back either way: the gzip magic decides). Each
//! object has a `type`:
//!
//! | `type` | when | fields |
//! |---|---|---|
//! | `header` | first line, always | `format` (`"bpfmux-recording"`), `version` (1), `bpfmux` (its version), `created_unix_s`, `host` (`hostname`, `machine`, `kernel_release`, `kernel_build_id`), `engine`, `exit_side`, `options` (`latency`, `stacks`, `errors`, `graph`, `capture`, `null_returns`, `filter`, `patterns`, `excludes`), `functions` (the traced set, `module:name` for modules) |
//! | `object` | before the first frame in it | `id`, `path` (as the process mapped it), `build_id` (hex, absent when the file has none), `segments` (`[file offset, file size, virtual address]` of each PT_LOAD) |
//! | `ksym` | before the first frame in it | `start`, `end` (hex), `name`, `module` (absent: vmlinux), `kind` (`function`, `data`) |
//! | `chain` | each error chain, as it came | as `--errors --json` prints a chain, with `wall_unix_ns`, `kernel` (the addresses printed, see above) and `user` (frames) in place of the symbolized stacks, and `ret` / `ret_unsigned` per call |
//! | `stack` | each stack counted, at the end, busiest first | `function`, `pid`, `count`, `kernel` (as in `chain`), `user` |
//! | `summary` | at the end | `summary` (the `--json` summary, without `stacks`), `latency`, `fields` (the caller's own: `command_exit`, ...) |
//! | `end` | last line | `lines` (lines before it) |
//!
//! Addresses are strings, `"0xffffffff81234567"` (no JSON reader loses
//! bits of them). A user frame is `{"addr": "0x…", "place": P, …}` with `P`
//! one of `file` (with `object`, `offset`: the file offset), `vdso` (with
//! `offset` and `size`: the vDSO image's), `anonymous`, `unmapped` and
//! `unknown` (the process was gone before it was normalized).
//!
//! Readers refuse a header whose `format` is not `bpfmux-recording` or
//! whose `version` is not one they read, and a file without its `end` line
//! (the run did not finish writing it); they ignore fields and line types
//! they do not know, so a later version 1 writer can add both.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::engine::{EngineKind, ExitSide};
use super::errors::{ChainCall, ChainRecord, ErrorChain, NullReturns, RetValue};
use super::events::{self, Stacks};
use super::program::TraceObject;
use super::stacks::{
    at_frame, caller_offset, caller_place, frames_text, kernel_frames, lines, Mechanism, Stack,
    StackFrame, UserStacks,
};
use super::summary::{StackSummary, Summary, TOP_STACKS};
use super::Tracer;
use crate::normalize::capture::{CaptureCache, FileId, Frame, Place};
use crate::symbolize::debuginfod::{Debuginfod, Fetched, Kind};
use crate::symbolize::elf_table::file_has_dwarf;
use crate::symbolize::{KernelSpan, KernelSymbolizer, SymResult, SymbolKind, UserSymbolizer};

/// The header's `format`.
pub const FORMAT: &str = "bpfmux-recording";
/// The format version this code writes and reads.
pub const VERSION: u32 = 1;

/// Why a recording could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The file could not be created, written or read (what the system
    /// said is the error's source, not repeated in its message).
    #[error("{}", path.display())]
    Io {
        /// The recording.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// Its first line is no recording header.
    #[error("not a bpfmux recording (its first line is no `{FORMAT}` header)")]
    NotARecording,
    /// Written in a format version this code does not read.
    #[error(
        "recording format version {found}: this bpfmux reads version {VERSION} only \
         (a bpfmux of the recording's version reads it)"
    )]
    Version {
        /// The file's version.
        found: u64,
    },
    /// A line is not what its type says.
    #[error("line {line}")]
    Line {
        /// 1-based.
        line: usize,
        /// What the JSON reader said.
        #[source]
        source: serde_json::Error,
    },
    /// The file ends before its `end` line: the run that wrote it did not
    /// finish (killed), or the file was cut.
    #[error(
        "truncated after {lines} lines: no `end` line (the run writing it did not finish, \
         or the file was cut short)"
    )]
    Truncated {
        /// Complete lines read.
        lines: usize,
    },
}

/// Addresses as `"0x…"` strings.
mod hex {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{v:#x}"))
    }

    pub fn parse<E: Error>(t: &str) -> Result<u64, E> {
        let digits = t
            .strip_prefix("0x")
            .ok_or_else(|| E::custom(format!("{t:?} is no 0x address")))?;
        u64::from_str_radix(digits, 16).map_err(E::custom)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        parse(&String::deserialize(d)?)
    }
}

/// Lists of addresses as `"0x…"` strings.
mod hex_list {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u64], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|a| format!("{a:#x}")))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|t| super::hex::parse(t))
            .collect()
    }
}

/// The machine a recording was made on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    /// Its name.
    pub hostname: String,
    /// `uname -m`.
    pub machine: String,
    /// `uname -r`.
    pub kernel_release: String,
    /// The running kernel's build ID (`/sys/kernel/notes`), hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_build_id: Option<String>,
}

impl Host {
    /// This machine.
    pub fn this() -> Self {
        // SAFETY: an all-zero utsname is valid; uname fills it.
        let mut u: libc::utsname = unsafe { std::mem::zeroed() };
        // SAFETY: see above.
        let ok = unsafe { libc::uname(&mut u) } == 0;
        let text = |f: &[libc::c_char]| {
            let b: Vec<u8> = f
                .iter()
                .take_while(|&&c| c != 0)
                .map(|&c| c as u8)
                .collect();
            String::from_utf8_lossy(&b).into_owned()
        };
        let (hostname, machine, kernel_release) = if ok {
            (text(&u.nodename), text(&u.machine), text(&u.release))
        } else {
            Default::default()
        };
        Self {
            hostname,
            machine,
            kernel_release,
            kernel_build_id: crate::normalize::kernel_build_id()
                .ok()
                .flatten()
                .map(|b| b.to_string()),
        }
    }
}

/// What the run was asked to do.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedOptions {
    /// Latency histograms.
    pub latency: bool,
    /// Stacks counted (kernel and user).
    pub stacks: bool,
    /// Error chains.
    pub errors: bool,
    /// The call graph.
    pub graph: bool,
    /// Per-call events (not recorded in version 1).
    pub capture: bool,
    /// With `errors`: `explained` or `all`.
    pub null_returns: String,
    /// The filter, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// The patterns traced.
    pub patterns: Vec<String>,
    /// The patterns left out.
    #[serde(default)]
    pub excludes: Vec<String>,
}

/// A recording's first line.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// The bpfmux version that wrote it.
    pub bpfmux: String,
    /// When the run was attached, seconds since the epoch.
    pub created_unix_s: u64,
    /// Where.
    pub host: Host,
    /// The engine.
    pub engine: EngineKind,
    /// How it saw exits.
    pub exit_side: ExitSide,
    /// What was asked.
    pub options: RecordedOptions,
    /// The functions attached (`module:name` for modules).
    pub functions: Vec<String>,
}

/// A file user frames are in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedObject {
    /// Its number in the recording.
    pub id: u32,
    /// The name the process mapped it by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Its ELF build ID, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
    /// Its PT_LOAD segments: file offset, file size, virtual address.
    #[serde(default)]
    pub segments: Vec<[u64; 3]>,
}

/// Where a recorded user frame was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "place", rename_all = "kebab-case")]
pub enum RecordedPlace {
    /// In object `object`, at file offset `offset`.
    File {
        /// [`RecordedObject::id`].
        object: u32,
        /// Offset in the file.
        offset: u64,
    },
    /// In the vDSO.
    Vdso {
        /// Offset in its image.
        offset: u64,
        /// The image's size.
        size: u64,
    },
    /// In an executable mapping no file backs.
    Anonymous,
    /// In no executable mapping.
    Unmapped,
    /// Not normalized (the process was gone).
    Unknown,
}

/// A user frame as recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedFrame {
    /// The address as captured.
    #[serde(with = "hex")]
    pub addr: u64,
    /// Where it was.
    #[serde(flatten)]
    pub place: RecordedPlace,
}

/// A kernel symbol as recorded (see [`KernelSpan`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct WireSpan {
    #[serde(with = "hex")]
    start: u64,
    #[serde(with = "hex")]
    end: u64,
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    module: Option<String>,
    kind: SymbolKind,
}

/// One call of a recorded chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedCall {
    /// `name`, or `module:name`.
    pub function: String,
    /// What it returned, signed (absent: its exit not seen, or unsigned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ret: Option<i64>,
    /// What it returned, unsigned (a pointer, an unsigned integer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ret_unsigned: Option<u64>,
    /// The failure its return value says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// From entry to return.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<u64>,
}

/// An error chain as recorded: [`ErrorChain`] with its stacks unsymbolized.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedChain {
    /// `CLOCK_MONOTONIC` ns of the outermost return.
    pub ts_ns: u64,
    /// When it was received, ns since the epoch.
    pub wall_unix_ns: u64,
    /// The process.
    pub pid: u32,
    /// The thread.
    pub tid: u32,
    /// The thread's name.
    pub comm: String,
    /// The failing function.
    pub function: String,
    /// `ENOENT`, ..., `NULL`.
    pub error: String,
    /// The errno.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<i32>,
    /// Outermost first.
    pub calls: Vec<RecordedCall>,
    /// Calls nested too deep to keep.
    #[serde(default)]
    pub overflow: u32,
    /// Kernel frames at the failing return, as the run printed them (see
    /// the module docs).
    #[serde(with = "hex_list")]
    pub kernel: Vec<u64>,
    /// User frames at the failing return.
    #[serde(default)]
    pub user: Vec<RecordedFrame>,
}

/// A stack as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedStack {
    /// The traced function.
    pub function: String,
    /// The process.
    pub pid: u32,
    /// Calls through it.
    pub count: u64,
    /// Kernel frames, innermost first, as the run printed them (see the
    /// module docs).
    #[serde(with = "hex_list")]
    pub kernel: Vec<u64>,
    /// User frames, innermost first.
    #[serde(default)]
    pub user: Vec<RecordedFrame>,
}

/// The summary line.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct RecordedSummary {
    summary: Summary,
    latency: bool,
    #[serde(default)]
    fields: serde_json::Map<String, Value>,
}

/// Any line after the header.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
enum Line {
    Object(RecordedObject),
    Ksym(WireSpan),
    Chain(RecordedChain),
    Stack(RecordedStack),
    Summary(Box<RecordedSummary>),
    End,
    #[serde(other)]
    Other,
}

/// A line written, with its type.
#[derive(Serialize)]
struct Tagged<'a, T> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(flatten)]
    body: T,
}

/// What a finished recording holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Error chains.
    pub chains: u64,
    /// Stacks.
    pub stacks: u64,
    /// Files of user frames.
    pub objects: u64,
    /// Kernel symbols.
    pub kernel_symbols: u64,
    /// Lines in all.
    pub lines: u64,
}

/// Writes a recording as a run goes (see the module docs).
pub struct Writer {
    path: PathBuf,
    out: Box<dyn Write + Send>,
    gzip: Option<GzEncoder<BufWriter<File>>>,
    objects: HashMap<FileId, u32>,
    spans: HashSet<u64>,
    written: Written,
}

impl Writer {
    /// Creates `path` (gzip-compressed when it ends in `.gz`); nothing is
    /// written before [`super::Session::record_to`].
    pub fn create(path: &Path) -> Result<Self, RecordingError> {
        let file = File::create(path).map_err(|source| RecordingError::Io {
            path: path.into(),
            source,
        })?;
        let buf = BufWriter::new(file);
        let gz = path.extension().is_some_and(|e| e == "gz");
        let (out, gzip): (Box<dyn Write + Send>, _) = if gz {
            (
                Box::new(io::sink()),
                Some(GzEncoder::new(buf, flate2::Compression::default())),
            )
        } else {
            (Box::new(buf), None)
        };
        Ok(Self {
            path: path.into(),
            out,
            gzip,
            objects: HashMap::new(),
            spans: HashSet::new(),
            written: Written::default(),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, source: io::Error) -> RecordingError {
        RecordingError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn line<T: Serialize>(&mut self, kind: &str, body: T) -> Result<(), RecordingError> {
        let mut text = serde_json::to_string(&Tagged { kind, body })
            .map_err(|e| self.io(io::Error::other(e)))?;
        text.push('\n');
        let r = match &mut self.gzip {
            Some(g) => g.write_all(text.as_bytes()),
            None => self.out.write_all(text.as_bytes()),
        };
        r.map_err(|e| self.io(e))?;
        self.written.lines += 1;
        Ok(())
    }

    /// The header, from the attached tracer.
    pub(crate) fn header(&mut self, t: &Tracer) -> Result<(), RecordingError> {
        self.write_header(&Header::of(t))
    }

    /// Writes `header`: the first line.
    pub fn write_header(&mut self, header: &Header) -> Result<(), RecordingError> {
        self.line("header", header)?;
        self.flush()
    }
}

impl Header {
    /// When the run was recorded, in local time: `YYYY-MM-DD HH:MM:SS`.
    pub fn created_local(&self) -> String {
        super::report::local_time(UNIX_EPOCH + Duration::from_secs(self.created_unix_s), true)
    }

    /// The header of a run of `t`, on this machine, now.
    pub(crate) fn of(t: &Tracer) -> Self {
        let o = &t.opts;
        let functions = t
            .selection
            .funcs
            .iter()
            .zip(&t.attached)
            .filter(|(_, a)| **a)
            .map(|(f, _)| f.display_name())
            .collect();
        Header {
            format: FORMAT.into(),
            version: VERSION,
            bpfmux: env!("CARGO_PKG_VERSION").into(),
            created_unix_s: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs(),
            host: Host::this(),
            engine: t.engine,
            exit_side: t.exit,
            options: RecordedOptions {
                latency: o.latency,
                stacks: o.kstack || o.ustack,
                errors: o.errors,
                graph: o.graph,
                capture: o.capture,
                null_returns: match o.null_returns {
                    NullReturns::Explained => "explained",
                    NullReturns::All => "all",
                }
                .into(),
                filter: t.filter().map(|f| f.text().to_string()),
                patterns: o.patterns.iter().map(ToString::to_string).collect(),
                excludes: o.excludes.iter().map(ToString::to_string).collect(),
            },
            functions,
        }
    }
}

impl Writer {
    fn flush(&mut self) -> Result<(), RecordingError> {
        let r = match &mut self.gzip {
            Some(g) => g.flush(),
            None => self.out.flush(),
        };
        r.map_err(|e| self.io(e))
    }

    /// The kernel symbols of `addrs` not written yet.
    fn kernel(
        &mut self,
        addrs: &[u64],
        ksyms: Option<&KernelSymbolizer>,
    ) -> Result<(), RecordingError> {
        let Some(k) = ksyms else { return Ok(()) };
        for &a in addrs {
            let Some(s) = k.span(a) else { continue };
            if self.spans.insert(s.start) {
                self.written.kernel_symbols += 1;
                let w = WireSpan {
                    start: s.start,
                    end: s.end,
                    name: s.name,
                    module: s.module,
                    kind: s.kind,
                };
                self.line("ksym", &w)?;
            }
        }
        Ok(())
    }

    /// User frames as recorded, their files written first.
    fn user(
        &mut self,
        frames: &[Frame],
        cache: &CaptureCache,
    ) -> Result<Vec<RecordedFrame>, RecordingError> {
        let mut out = Vec::with_capacity(frames.len());
        for f in frames {
            let place = match f.place {
                Place::File { file, offset } => RecordedPlace::File {
                    object: self.object(file, cache)?,
                    offset,
                },
                Place::Vdso { offset, size } => RecordedPlace::Vdso { offset, size },
                Place::Anonymous => RecordedPlace::Anonymous,
                Place::Unmapped => RecordedPlace::Unmapped,
                Place::Unknown => RecordedPlace::Unknown,
            };
            out.push(RecordedFrame {
                addr: f.addr,
                place,
            });
        }
        Ok(out)
    }

    fn object(&mut self, file: FileId, cache: &CaptureCache) -> Result<u32, RecordingError> {
        if let Some(&id) = self.objects.get(&file) {
            return Ok(id);
        }
        let id = self.objects.len() as u32;
        self.objects.insert(file, id);
        let f = cache.file(file);
        let segments = f
            .and_then(|f| f.path().ok())
            .and_then(|p| crate::symbolize::elf_table::load_segments(&p).ok())
            .unwrap_or_default()
            .into_iter()
            .map(|(o, s, v)| [o, s, v])
            .collect();
        let o = RecordedObject {
            id,
            path: f
                .and_then(|f| f.name())
                .map(|n| n.to_string_lossy().into_owned()),
            build_id: f.and_then(|f| f.build_id()).map(|b| b.to_string()),
            segments,
        };
        self.written.objects += 1;
        self.line("object", &o)?;
        Ok(id)
    }

    /// An error chain, as it was reported (`chain`) from its record
    /// (`raw`): its kernel stack read again from the programs' map and
    /// left as the report printed it (with the session's symbol table and
    /// [`Mechanism`]: see the module docs), its user stack as `ustacks`
    /// normalized it for the report.
    pub(crate) fn chain(
        &mut self,
        raw: &ChainRecord,
        chain: &ErrorChain,
        obj: &TraceObject,
        ustacks: &UserStacks,
        kernel: (Option<&KernelSymbolizer>, &Mechanism),
    ) -> Result<(), RecordingError> {
        let addrs = raw
            .kstack
            .and_then(|id| events::stack_addrs(obj, id).ok())
            .unwrap_or_default();
        let failing = raw.frames.get(raw.failed).map(|f| f.func);
        let printed = printed_kernel(kernel, failing, &addrs);
        let user = raw
            .ustack
            .and_then(|id| ustacks.chain_frames(raw.tgid, id))
            .unwrap_or_default();
        self.write_chain(chain, &printed, user, ustacks.cache(), kernel.0)
    }

    /// Writes an error chain as it was reported (`chain`), with its kernel
    /// frames (`kernel`: the addresses as the report printed them, named
    /// with `ksyms`; see the module docs) and its user frames as `cache`
    /// normalized them.
    pub fn write_chain(
        &mut self,
        chain: &ErrorChain,
        kernel: &[u64],
        user: &[Frame],
        cache: &CaptureCache,
        ksyms: Option<&KernelSymbolizer>,
    ) -> Result<(), RecordingError> {
        self.kernel(kernel, ksyms)?;
        let user = self.user(user, cache)?;
        let kernel = kernel.to_vec();
        let calls = chain
            .calls
            .iter()
            .map(|c| RecordedCall {
                function: c.function.clone(),
                ret: match c.ret {
                    Some(RetValue::Signed(v)) => Some(v),
                    _ => None,
                },
                ret_unsigned: match c.ret {
                    Some(RetValue::Unsigned(v)) => Some(v),
                    _ => None,
                },
                error: c.error.clone(),
                duration_ns: c.duration_ns,
            })
            .collect();
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let r = RecordedChain {
            ts_ns: chain.ts_ns,
            wall_unix_ns: u64::try_from(wall.as_nanos()).unwrap_or(u64::MAX),
            pid: chain.pid,
            tid: chain.tid,
            comm: chain.comm.clone(),
            function: chain.function.clone(),
            error: chain.error.clone(),
            errno: chain.errno,
            calls,
            overflow: chain.overflow,
            kernel,
            user,
        };
        self.written.chains += 1;
        self.line("chain", &r)?;
        // A run killed later still leaves every chain so far readable.
        self.flush()
    }

    /// The end: every stack counted (`read`, busiest first; kernel frames
    /// left as the summary prints them, with the session's symbol table
    /// and [`Mechanism`]), the summary and the caller's `fields`, the `end`
    /// line.
    pub(crate) fn finish(
        mut self,
        t: &Tracer,
        read: Option<&Stacks>,
        ustacks: &mut UserStacks,
        (ksyms, mech): (Option<&KernelSymbolizer>, &Mechanism),
        summary: &Summary,
        fields: &[(String, Value)],
    ) -> Result<Written, RecordingError> {
        if let Some(read) = read {
            ustacks.new_round();
            for (k, count) in &read.counts {
                let addrs = |id: Option<u32>| id.and_then(|i| read.addrs.get(&i));
                let raw = addrs(k.kstack).map_or(&[][..], Vec::as_slice);
                let kernel = printed_kernel((ksyms, mech), Some(k.func), raw);
                let user = match (k.ustack, addrs(k.ustack)) {
                    (Some(id), Some(a)) if !a.is_empty() => {
                        ustacks.normalized(k.tgid, id, a).to_vec()
                    }
                    _ => Vec::new(),
                };
                let function = t
                    .selection
                    .funcs
                    .get(k.func)
                    .map_or_else(|| format!("#{}", k.func), |f| f.display_name());
                let stack = (function.as_str(), k.tgid, *count);
                self.write_stack(stack, &kernel, &user, ustacks.cache(), ksyms)?;
            }
        }
        self.write_end(summary, fields)
    }

    /// Writes a stack: `(function, pid, count)`, its kernel frames (the
    /// addresses as the run printed them, named with `ksyms`; see the
    /// module docs) and its user frames as `cache` normalized them.
    pub fn write_stack(
        &mut self,
        (function, pid, count): (&str, u32, u64),
        kernel: &[u64],
        user: &[Frame],
        cache: &CaptureCache,
        ksyms: Option<&KernelSymbolizer>,
    ) -> Result<(), RecordingError> {
        self.kernel(kernel, ksyms)?;
        let user = self.user(user, cache)?;
        let s = RecordedStack {
            function: function.into(),
            pid,
            count,
            kernel: kernel.to_vec(),
            user,
        };
        self.written.stacks += 1;
        self.line("stack", &s)
    }

    /// Writes the summary with the caller's own `fields` and the `end`
    /// line: the recording is complete.
    pub fn write_end(
        mut self,
        summary: &Summary,
        fields: &[(String, Value)],
    ) -> Result<Written, RecordingError> {
        let mut summary = summary.clone();
        // Symbolized where the recording is read, from the stack lines.
        summary.stacks = None;
        let s = RecordedSummary {
            latency: summary.latency,
            summary,
            fields: fields.iter().cloned().collect(),
        };
        self.line("summary", &s)?;
        let lines = self.written.lines;
        self.line("end", serde_json::json!({ "lines": lines }))?;
        let r = match self.gzip.take() {
            Some(g) => g.finish().and_then(|mut b| b.flush()),
            None => self.out.flush(),
        };
        r.map_err(|e| self.io(e))?;
        Ok(self.written)
    }
}

/// The addresses of the kernel frames a live run prints for the stack
/// `addrs` of a call of the selection's function `func` (see
/// [`kernel_frames`]): what a recording keeps of it.
pub(crate) fn printed_kernel(
    (ksyms, mech): (Option<&KernelSymbolizer>, &Mechanism),
    func: Option<usize>,
    addrs: &[u64],
) -> Vec<u64> {
    kernel_frames(ksyms, mech, func, addrs)
        .iter()
        .map(|f| f.addr)
        .collect()
}

/// A recording read back.
#[derive(Clone, Debug)]
pub struct Replay {
    /// Its first line.
    pub header: Header,
    /// Files of user frames, by id.
    pub objects: HashMap<u32, RecordedObject>,
    spans: Vec<WireSpan>,
    /// Error chains, in the order they came.
    pub chains: Vec<RecordedChain>,
    /// Stacks, busiest first.
    pub stacks: Vec<RecordedStack>,
    summary: RecordedSummary,
}

impl Replay {
    /// Reads the recording at `path`.
    pub fn open(path: &Path) -> Result<Self, RecordingError> {
        let io = |source| RecordingError::Io {
            path: path.into(),
            source,
        };
        let f = File::open(path).map_err(io)?;
        Self::read(f).map_err(|e| match e {
            RecordingError::Io { source, .. } => io(source),
            e => e,
        })
    }

    /// Reads a recording (gzip-compressed or not).
    pub fn read(r: impl Read) -> Result<Self, RecordingError> {
        let mut r = BufReader::new(r);
        let gz = r
            .fill_buf()
            .map_err(|source| RecordingError::Io {
                path: PathBuf::new(),
                source,
            })?
            .starts_with(&[0x1f, 0x8b]);
        if gz {
            Self::read_lines(BufReader::new(MultiGzDecoder::new(r)))
        } else {
            Self::read_lines(r)
        }
    }

    fn read_lines(r: impl BufRead) -> Result<Self, RecordingError> {
        let mut lines = r.split(b'\n');
        let mut n = 0usize;
        let mut next = |n: &mut usize| -> Result<Option<Vec<u8>>, RecordingError> {
            match lines.next() {
                None => Ok(None),
                // A cut gzip stream ends in an error: the file is truncated.
                Some(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    Err(RecordingError::Truncated { lines: *n })
                }
                Some(Err(source)) => Err(RecordingError::Io {
                    path: PathBuf::new(),
                    source,
                }),
                Some(Ok(l)) => {
                    *n += 1;
                    Ok(Some(l))
                }
            }
        };
        let first = next(&mut n)?.ok_or(RecordingError::NotARecording)?;
        let v: Value = serde_json::from_slice(&first).map_err(|_| RecordingError::NotARecording)?;
        if v.get("type").and_then(Value::as_str) != Some("header")
            || v.get("format").and_then(Value::as_str) != Some(FORMAT)
        {
            return Err(RecordingError::NotARecording);
        }
        match v.get("version").and_then(Value::as_u64) {
            Some(v) if v == u64::from(VERSION) => {}
            found => {
                return Err(RecordingError::Version {
                    found: found.unwrap_or(0),
                })
            }
        }
        let header: Header =
            serde_json::from_value(v).map_err(|source| RecordingError::Line { line: 1, source })?;
        let mut objects = HashMap::new();
        let (mut spans, mut chains, mut stacks) = (Vec::new(), Vec::new(), Vec::new());
        let mut summary = None;
        loop {
            let Some(l) = next(&mut n)? else {
                return Err(RecordingError::Truncated {
                    lines: n.saturating_sub(0),
                });
            };
            if l.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let line: Line = match serde_json::from_slice(&l) {
                Ok(line) => line,
                // A last line cut in the middle.
                Err(e) if e.is_eof() => return Err(RecordingError::Truncated { lines: n - 1 }),
                Err(source) => return Err(RecordingError::Line { line: n, source }),
            };
            match line {
                Line::Object(o) => {
                    objects.insert(o.id, o);
                }
                Line::Ksym(s) => spans.push(s),
                Line::Chain(c) => chains.push(c),
                Line::Stack(s) => stacks.push(s),
                Line::Summary(s) => summary = Some(*s),
                Line::End => break,
                Line::Other => {}
            }
        }
        let summary = summary.ok_or(RecordingError::Truncated { lines: n })?;
        Ok(Self {
            header,
            objects,
            spans,
            chains,
            stacks,
            summary,
        })
    }

    /// The caller's own summary fields (`command_exit`, ...).
    pub fn fields(&self) -> Vec<(String, Value)> {
        self.summary
            .fields
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Names the frames where the recording is read, from `sources`.
    pub fn resolve(&self, sources: &SymbolSources) -> Resolved {
        // Recorded as printed: named, nothing dropped (no mechanism).
        let mech = Mechanism::default();
        let ksyms = KernelSymbolizer::from_spans(self.spans.iter().map(|s| KernelSpan {
            start: s.start,
            end: s.end,
            name: s.name.clone(),
            module: s.module.clone(),
            kind: s.kind,
        }));
        let mut ids: Vec<u32> = self.objects.keys().copied().collect();
        ids.sort_unstable();
        let found: HashMap<u32, Found> = ids
            .iter()
            .map(|id| (*id, sources.find(&self.objects[id])))
            .collect();
        let mut user = UserNames::new(self, &found);
        let all = self
            .chains
            .iter()
            .map(|c| &c.user[..])
            .chain(self.stacks.iter().map(|s| &s.user[..]));
        user.prepare(all);
        let stacks: Vec<Stack> = self
            .stacks
            .iter()
            .map(|s| Stack {
                function: s.function.clone(),
                pid: s.pid,
                count: s.count,
                kernel: kernel_frames(Some(&ksyms), &mech, None, &s.kernel),
                user: user.frames(&s.user),
            })
            .collect();
        let chains = self
            .chains
            .iter()
            .map(|c| {
                let chain = ErrorChain {
                    kind: "error",
                    ts_ns: c.ts_ns,
                    pid: c.pid,
                    tid: c.tid,
                    comm: c.comm.clone(),
                    function: c.function.clone(),
                    error: c.error.clone(),
                    errno: c.errno,
                    calls: c
                        .calls
                        .iter()
                        .map(|k| ChainCall {
                            function: k.function.clone(),
                            ret: k
                                .ret
                                .map(RetValue::Signed)
                                .or(k.ret_unsigned.map(RetValue::Unsigned)),
                            error: k.error.clone(),
                            duration_ns: k.duration_ns,
                        })
                        .collect(),
                    overflow: c.overflow,
                    kernel_stack: lines(&kernel_frames(Some(&ksyms), &mech, None, &c.kernel)),
                    user_stack: frames_text(&user.frames(&c.user)),
                };
                (chain, UNIX_EPOCH + Duration::from_nanos(c.wall_unix_ns))
            })
            .collect();
        let mut summary = self.summary.summary.clone();
        summary.latency = self.summary.latency;
        summary.stacks = self.header.options.stacks.then(|| {
            stacks
                .iter()
                .take(TOP_STACKS)
                .map(StackSummary::from)
                .collect()
        });
        let objects = ids
            .into_iter()
            .filter_map(|id| {
                let o = self.objects.get(&id)?;
                Some(ObjectSource {
                    path: o.path.clone(),
                    build_id: o.build_id.clone(),
                    found: found.get(&id)?.clone(),
                })
            })
            .collect();
        Resolved {
            chains,
            stacks,
            summary,
            objects,
        }
    }
}

/// Where [`Replay::resolve`] looks for the files of user frames.
#[derive(Clone, Debug)]
pub struct SymbolSources {
    /// Directories with a `.build-id/xx/yyyy.debug` tree, in order.
    pub debug_dirs: Vec<PathBuf>,
    /// Whether a file still at its recorded path (with the recorded build
    /// ID) is used.
    pub paths: bool,
    /// debuginfod servers, asked last: for the debug file of a file found
    /// without DWARF, and for a file found nowhere (its debug file, else
    /// the file itself).
    pub debuginfod: Option<Debuginfod>,
}

impl Default for SymbolSources {
    fn default() -> Self {
        Self {
            debug_dirs: vec![PathBuf::from("/usr/lib/debug")],
            paths: true,
            debuginfod: None,
        }
    }
}

impl SymbolSources {
    fn find(&self, o: &RecordedObject) -> Found {
        let mut why = Vec::new();
        let id = o.build_id.as_deref().filter(|id| id.len() > 2);
        if let (true, Some(p)) = (self.paths, &o.path) {
            let here = File::open(p)
                .ok()
                .and_then(|f| crate::normalize::read_build_id(&f).ok())
                .flatten()
                .map(|b| b.to_string());
            match (&o.build_id, here) {
                (Some(want), Some(got)) if *want == got => {
                    // Its DWARF from debuginfod when neither it nor a
                    // local debug file has any.
                    if let (Some(d), Some(id)) = (&self.debuginfod, id) {
                        if !file_has_dwarf(Path::new(p)) && self.local_debug_file(id).is_none() {
                            if let Ok(fetched) = d.fetch(id, Kind::Debuginfo) {
                                return Found::Debuginfod(fetched, Kind::Debuginfo);
                            }
                        }
                    }
                    return Found::Binary(p.into());
                }
                (Some(_), Some(got)) => why.push(format!("{p} has build ID {got}")),
                (None, _) if Path::new(p).is_file() => return Found::Binary(p.into()),
                _ => why.push(format!("{p} is not here")),
            }
        }
        let Some(id) = id else {
            why.push("no build ID recorded".into());
            return Found::Missing(why.join("; "));
        };
        // A debug file places file offsets through the segments recorded
        // from the file; a file the capture knew by build ID alone has none.
        let kinds: &[Kind] = if o.segments.is_empty() {
            why.push("no segments recorded, so no debug file can place its offsets".into());
            &[Kind::Executable]
        } else {
            if let Some(f) = self.local_debug_file(id) {
                return Found::DebugFile(f);
            }
            for d in &self.debug_dirs {
                why.push(format!("no {}", debug_file_in(d, id).display()));
            }
            &[Kind::Debuginfo, Kind::Executable]
        };
        if let Some(d) = &self.debuginfod {
            for &kind in kinds {
                match d.fetch(id, kind) {
                    Ok(fetched) => return Found::Debuginfod(fetched, kind),
                    Err(e) => why.push(format!("debuginfod {}: {e}", kind.as_str())),
                }
            }
        }
        Found::Missing(why.join("; "))
    }

    /// The first debug file of build ID `id` in the debug directories.
    fn local_debug_file(&self, id: &str) -> Option<PathBuf> {
        self.debug_dirs
            .iter()
            .map(|d| debug_file_in(d, id))
            .find(|f| f.is_file())
    }
}

/// `DIR/.build-id/xx/yyyy.debug` of build ID `id` (longer than 2).
fn debug_file_in(dir: &Path, id: &str) -> PathBuf {
    dir.join(".build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]))
}

/// Where the frames of a recorded file were named from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// The file itself, at its recorded path.
    Binary(PathBuf),
    /// Its debug file, by build ID.
    DebugFile(PathBuf),
    /// From debuginfod (a server or the client's cache): its debug file or
    /// the file itself.
    Debuginfod(Fetched, Kind),
    /// Neither: its frames are addresses (why).
    Missing(String),
}

/// A recorded file and where its frames were named from.
#[derive(Clone, Debug)]
pub struct ObjectSource {
    /// As the process mapped it.
    pub path: Option<String>,
    /// Its build ID.
    pub build_id: Option<String>,
    /// Where.
    pub found: Found,
}

/// A recording with its frames named: what a live run reports.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The error chains and when each came.
    pub chains: Vec<(ErrorChain, SystemTime)>,
    /// Every stack, busiest first (what profiles are made of).
    pub stacks: Vec<Stack>,
    /// The summary, its busiest stacks named here.
    pub summary: Summary,
    /// The files of user frames and where they were found.
    pub objects: Vec<ObjectSource>,
}

/// User frames named once per file and offset.
struct UserNames<'a> {
    replay: &'a Replay,
    found: &'a HashMap<u32, Found>,
    usyms: UserSymbolizer,
    names: HashMap<(u32, u64), SymResult>,
}

impl<'a> UserNames<'a> {
    fn new(replay: &'a Replay, found: &'a HashMap<u32, Found>) -> Self {
        Self {
            replay,
            found,
            usyms: UserSymbolizer::default(),
            names: HashMap::new(),
        }
    }

    /// Looks up every file frame of `stacks` (each innermost first), one
    /// batch per file, where the live run looks them up (callers one byte
    /// back: [`caller_offset`]).
    fn prepare<'f>(&mut self, stacks: impl Iterator<Item = &'f [RecordedFrame]>) {
        let mut by_object: HashMap<u32, Vec<u64>> = HashMap::new();
        for frames in stacks {
            for (i, f) in frames.iter().enumerate() {
                if let RecordedPlace::File { object, offset } = f.place {
                    by_object
                        .entry(object)
                        .or_default()
                        .push(caller_offset(i, offset));
                }
            }
        }
        for (id, mut offsets) in by_object {
            offsets.sort_unstable();
            offsets.dedup();
            let o = self.replay.objects.get(&id);
            let name = PathBuf::from(o.and_then(|o| o.path.clone()).unwrap_or_default());
            let module = Some(name.clone());
            let results = match (o, self.found.get(&id)) {
                (
                    Some(_),
                    Some(
                        Found::Binary(p)
                        | Found::Debuginfod(Fetched { file: p, .. }, Kind::Executable),
                    ),
                ) => self.usyms.symbolize_file(p, &name, &offsets),
                (
                    Some(o),
                    Some(
                        Found::DebugFile(d)
                        | Found::Debuginfod(Fetched { file: d, .. }, Kind::Debuginfo),
                    ),
                ) => {
                    let segments: Vec<(u64, u64, u64)> = o
                        .segments
                        .iter()
                        .map(|&[f, size, v]| (f, size, v))
                        .collect();
                    self.usyms
                        .symbolize_offsets_in_debug_file(d, &segments, &name, &offsets)
                }
                (_, found) => {
                    let reason = match found {
                        Some(Found::Missing(why)) => why.clone(),
                        _ => "the file is not in the recording".into(),
                    };
                    offsets
                        .iter()
                        .map(|&off| SymResult::NoSymbol {
                            module: module.clone(),
                            file_offset: off,
                            reason: reason.clone(),
                        })
                        .collect()
                }
            };
            for (off, r) in offsets.into_iter().zip(results) {
                self.names.insert((id, off), r);
            }
        }
    }

    /// Frames named as a live run names them.
    fn frames(&mut self, frames: &[RecordedFrame]) -> Vec<StackFrame> {
        let others: Vec<Frame> = frames
            .iter()
            .enumerate()
            .filter_map(|(i, f)| {
                let place = match f.place {
                    RecordedPlace::File { .. } => return None,
                    RecordedPlace::Vdso { offset, size } => Place::Vdso { offset, size },
                    RecordedPlace::Anonymous => Place::Anonymous,
                    RecordedPlace::Unmapped => Place::Unmapped,
                    RecordedPlace::Unknown => Place::Unknown,
                };
                Some(Frame {
                    addr: f.addr,
                    place: caller_place(i, place),
                })
            })
            .collect();
        // The vDSO and unnamed places, as the live symbolizer names them.
        let mut named_others = if others.is_empty() {
            Vec::new()
        } else {
            self.usyms
                .symbolize_captured(&CaptureCache::default(), &others)
        }
        .into_iter();
        frames
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let r = match f.place {
                    RecordedPlace::File { object, offset } => {
                        self.names.get(&(object, caller_offset(i, offset))).cloned()
                    }
                    _ => named_others.next().flatten(),
                };
                StackFrame::new(f.addr, r.map(|r| at_frame(i, r)))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
