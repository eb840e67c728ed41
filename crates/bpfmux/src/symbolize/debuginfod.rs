//! A debuginfod client: an ELF file's debug file (or the file itself) by
//! its build ID, from the servers a user names, kept in a local cache.
//!
//! debuginfod servers answer `GET URL/buildid/ID/debuginfo` and
//! `GET URL/buildid/ID/executable` with the file, or 404. The client reads
//! what the elfutils client reads from the environment:
//!
//! | variable | meaning |
//! | --- | --- |
//! | `DEBUGINFOD_URLS` | servers, separated by spaces, asked in order |
//! | `DEBUGINFOD_CACHE_PATH` | the cache (else `$XDG_CACHE_HOME/debuginfod_client`, else `~/.cache/debuginfod_client`) |
//! | `DEBUGINFOD_TIMEOUT` | seconds to connect and to get an answer (default 90) |
//! | `DEBUGINFOD_MAXSIZE` | files larger than this many bytes are not downloaded |
//!
//! The cache has the elfutils client's layout (`CACHE/ID/debuginfo`,
//! `CACHE/ID/executable`), so the two share what they downloaded. A file
//! is written to a temporary name, checked to be an ELF file with the
//! asked build ID, and only then renamed into place: a cache entry is
//! always whole and right. A server that cannot be reached is not asked
//! again by the same client, so a dead server costs one timeout per run,
//! not one per file.
//!
//! ```no_run
//! use bpfmux::symbolize::debuginfod::{Debuginfod, Kind};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let Some(client) = Debuginfod::from_env()? else {
//!     eprintln!("DEBUGINFOD_URLS is not set");
//!     return Ok(());
//! };
//! let got = client.fetch("3f5e1c8a0d2b4e6f8a9b0c1d2e3f405162738495", Kind::Debuginfo)?;
//! println!("{} ({})", got.file.display(), got.server.as_deref().unwrap_or("cached"));
//! # Ok(())
//! # }
//! ```
//!
//! Servers at `https://` URLs need the crate's `https` feature (rustls);
//! a build without it refuses them when the client is made, saying so.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Seconds to connect and to get an answer, unless `DEBUGINFOD_TIMEOUT`
/// says otherwise (the elfutils client's default).
const DEFAULT_TIMEOUT_S: u64 = 90;

/// The body of an answer may take this many times the timeout.
const BODY_TIMEOUTS: u32 = 20;

/// Which file of a build ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The separate debug file (DWARF and the full symbol table).
    Debuginfo,
    /// The executable or library itself.
    Executable,
}

impl Kind {
    /// Its name in URLs and in the cache.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Debuginfo => "debuginfo",
            Kind::Executable => "executable",
        }
    }
}

/// A file the client has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    /// Where it is, in the cache.
    pub file: PathBuf,
    /// The server it was downloaded from now (`None`: it was in the cache).
    pub server: Option<String>,
}

/// Why the client has no file for a build ID, or cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum DebuginfodError {
    /// A URL in `DEBUGINFOD_URLS` the client cannot use.
    #[error("DEBUGINFOD_URLS: {url}: {why}")]
    BadUrl {
        /// The URL.
        url: String,
        /// Why.
        why: String,
    },
    /// A variable that should hold a number does not.
    #[error("{name}={value}: not a number")]
    BadNumber {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
    },
    /// Neither a cache path nor a home directory is known.
    #[error("no cache directory: set DEBUGINFOD_CACHE_PATH, XDG_CACHE_HOME or HOME")]
    NoCache,
    /// The build ID is not a hexadecimal string.
    #[error("{0:?} is not a build ID")]
    BadBuildId(String),
    /// No server has it; each server's answer, in order.
    #[error("{}", .answers.join("; "))]
    NotFound {
        /// `URL: what it answered` per server.
        answers: Vec<String>,
    },
    /// The cache could not be written.
    #[error("debuginfod cache {}: {source}", .path.display())]
    Cache {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

/// A debuginfod client (see the module docs).
#[derive(Clone, Debug)]
pub struct Debuginfod {
    urls: Vec<String>,
    cache: PathBuf,
    max_size: Option<u64>,
    agent: ureq::Agent,
    /// Indexes of servers that could not be reached: not asked again.
    dead: Arc<Mutex<HashSet<usize>>>,
}

impl Debuginfod {
    /// The client `DEBUGINFOD_URLS` and the other variables describe (see
    /// the module docs); `None` when `DEBUGINFOD_URLS` names no server.
    pub fn from_env() -> Result<Option<Self>, DebuginfodError> {
        let urls = std::env::var("DEBUGINFOD_URLS").unwrap_or_default();
        let urls: Vec<String> = urls.split_whitespace().map(str::to_string).collect();
        if urls.is_empty() {
            return Ok(None);
        }
        let cache = match std::env::var_os("DEBUGINFOD_CACHE_PATH").filter(|p| !p.is_empty()) {
            Some(p) => PathBuf::from(p),
            None => default_cache().ok_or(DebuginfodError::NoCache)?,
        };
        let timeout = env_number("DEBUGINFOD_TIMEOUT")?.unwrap_or(DEFAULT_TIMEOUT_S);
        let max_size = env_number("DEBUGINFOD_MAXSIZE")?.filter(|&n| n > 0);
        Self::new(urls, cache, Duration::from_secs(timeout), max_size).map(Some)
    }

    /// A client of `urls` (asked in order) that keeps its files in `cache`,
    /// waits `timeout` to connect and for each answer, and downloads no
    /// file larger than `max_size` bytes.
    pub fn new(
        urls: Vec<String>,
        cache: PathBuf,
        timeout: Duration,
        max_size: Option<u64>,
    ) -> Result<Self, DebuginfodError> {
        let urls = urls
            .into_iter()
            .map(|u| check_url(&u).map(|()| u.trim_end_matches('/').to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(timeout))
            .timeout_recv_response(Some(timeout))
            .timeout_recv_body(Some(timeout * BODY_TIMEOUTS))
            .user_agent(concat!("bpfmux/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Ok(Self {
            urls,
            cache,
            max_size,
            agent,
            dead: Arc::default(),
        })
    }

    /// The servers, in the order they are asked.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// The cache directory.
    pub fn cache(&self) -> &Path {
        &self.cache
    }

    /// The `kind` file of `build_id` (hexadecimal): from the cache, or
    /// downloaded from the first server that has it into the cache.
    pub fn fetch(&self, build_id: &str, kind: Kind) -> Result<Fetched, DebuginfodError> {
        let id = build_id.to_ascii_lowercase();
        if id.len() < 2 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(DebuginfodError::BadBuildId(build_id.to_string()));
        }
        let dir = self.cache.join(&id);
        let file = dir.join(kind.as_str());
        if file.is_file() {
            return Ok(Fetched { file, server: None });
        }
        let mut answers = Vec::new();
        for (i, url) in self.urls.iter().enumerate() {
            if self.is_dead(i) {
                answers.push(format!("{url}: not reached earlier in this run"));
                continue;
            }
            let uri = format!("{url}/buildid/{id}/{}", kind.as_str());
            match self.download(&uri, &id, &dir, &file) {
                Ok(()) => {
                    return Ok(Fetched {
                        file,
                        server: Some(url.clone()),
                    })
                }
                Err(Failure::Cache(e)) => return Err(e),
                Err(Failure::Answer(why)) => answers.push(format!("{url}: {why}")),
                Err(Failure::Unreachable(why)) => {
                    self.dead
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(i);
                    answers.push(format!("{url}: {why}"));
                }
            }
        }
        Err(DebuginfodError::NotFound { answers })
    }

    fn is_dead(&self, i: usize) -> bool {
        self.dead
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&i)
    }

    /// Downloads `uri` into `file` (in `dir`), checked to be ELF with build ID `id`.
    fn download(&self, uri: &str, id: &str, dir: &Path, file: &Path) -> Result<(), Failure> {
        let resp = self.agent.get(uri).call().map_err(|e| match e {
            ureq::Error::StatusCode(s) => Failure::Answer(format!("HTTP {s}")),
            e => Failure::Unreachable(describe(&e)),
        })?;
        let status = resp.status();
        if status == 404 {
            return Err(Failure::Answer("not there (HTTP 404)".into()));
        }
        if !status.is_success() {
            return Err(Failure::Answer(format!("HTTP {status}")));
        }
        fs::create_dir_all(dir).map_err(|source| cache_error(dir, source))?;
        let tmp = dir.join(format!(".{}.{}.tmp", kind_of(file), std::process::id()));
        let copied = (|| {
            let mut out = File::create(&tmp).map_err(|e| cache_error(&tmp, e))?;
            let limit = self.max_size.unwrap_or(u64::MAX);
            let mut body = resp.into_body().into_with_config().limit(limit).reader();
            io::copy(&mut body, &mut out).map_err(|e| {
                Failure::Answer(match self.max_size {
                    Some(n) if e.to_string().contains("limit") => {
                        format!("larger than DEBUGINFOD_MAXSIZE={n}")
                    }
                    _ => format!("while downloading: {e}"),
                })
            })?;
            out.sync_all().map_err(|e| cache_error(&tmp, e))?;
            match elf_build_id(&tmp) {
                Some(got) if got == id => Ok(()),
                Some(got) => Err(Failure::Answer(format!("sent a file with build ID {got}"))),
                None => Err(Failure::Answer(
                    "sent a file that is not ELF with a build ID".into(),
                )),
            }
        })();
        if let Err(e) = copied {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        fs::rename(&tmp, file).map_err(|e| {
            let _ = fs::remove_file(&tmp);
            cache_error(file, e)
        })
    }
}

/// Why one server gave no file.
enum Failure {
    /// It answered, without the file.
    Answer(String),
    /// It could not be reached (or did not answer in time).
    Unreachable(String),
    /// The cache could not be written: no server would help.
    Cache(DebuginfodError),
}

fn cache_error(path: &Path, source: io::Error) -> Failure {
    Failure::Cache(DebuginfodError::Cache {
        path: path.to_path_buf(),
        source,
    })
}

fn kind_of(file: &Path) -> String {
    file.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// ureq's error, said the way a user reads it.
fn describe(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Io(io) => match io.kind() {
            io::ErrorKind::ConnectionRefused => "connection refused".into(),
            _ => io.to_string(),
        },
        ureq::Error::Timeout(t) => format!("no answer in time ({t})"),
        ureq::Error::HostNotFound => "host not found".into(),
        e => e.to_string(),
    }
}

/// The GNU build ID of the ELF file at `path`, hexadecimal.
fn elf_build_id(path: &Path) -> Option<String> {
    use object::Object;
    let f = File::open(path).ok()?;
    // SAFETY: the file is ours (a temporary name in the cache) and not
    // changed while mapped.
    let map = unsafe { memmap2::Mmap::map(&f) }.ok()?;
    let obj = object::File::parse(&*map).ok()?;
    let id = obj.build_id().ok()??;
    Some(id.iter().map(|b| format!("{b:02x}")).collect())
}

fn check_url(url: &str) -> Result<(), DebuginfodError> {
    let bad = |why: &str| DebuginfodError::BadUrl {
        url: url.to_string(),
        why: why.to_string(),
    };
    if url.starts_with("http://") {
        Ok(())
    } else if url.starts_with("https://") {
        if cfg!(feature = "https") {
            Ok(())
        } else {
            Err(bad(
                "https:// needs a build with the `https` feature (this one has http:// only)",
            ))
        }
    } else {
        Err(bad("not an http:// or https:// URL"))
    }
}

fn env_number(name: &'static str) -> Result<Option<u64>, DebuginfodError> {
    match std::env::var(name) {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| DebuginfodError::BadNumber { name, value: v }),
        Err(_) => Ok(None),
    }
}

fn default_cache() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|p| !p.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("debuginfod_client"))
}

#[cfg(test)]
pub(crate) mod tests;
