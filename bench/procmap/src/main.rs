//! PROCMAP_QUERY vs text `/proc/<pid>/maps`, bpfmux's normalizer vs
//! blazesym's, on the same inputs in the same run.
//!
//! Cases:
//! (a) 5 code addresses of a real process (this one), VMAs uncached, build
//!     IDs off and on — the case behind the seed's 50 µs → 10 µs;
//! (b) a few thousand addresses in a helper process with hundreds of VMAs —
//!     the seed's batch case. (b1) stack-like: addresses concentrated in a
//!     few code VMAs; (b2) worst case: spread over every code VMA.
//!
//! Each case runs four normalizers round-robin (so machine noise hits all
//! alike) and reports per-call medians. Usage: `procmap-bench [--quick]
//! [--out FILE]`; `procmap-bench helper N` is the mapping helper process.

use std::fmt::Write as _;
use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use blazesym::normalize::{NormalizeOpts, Normalizer as BlazeNormalizer};
use bpfmux::normalize::{Backend, Normalizer, Options, VmaFilter};

const PAGE: usize = 4096;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("helper") {
        let n = args.get(1).context("helper N")?.parse()?;
        return helper(n);
    }
    let quick = args.iter().any(|a| a == "--quick");
    let out = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1).cloned());

    let mut rows = Vec::new();
    let me = std::process::id();
    let five = five_code_addrs();
    for build_ids in [false, true] {
        rows.push(run_case(
            "(a) 5 addrs, own process",
            me,
            &five,
            build_ids,
            quick,
        )?);
    }
    let helper = Helper::spawn(640)?;
    // Addresses in a few code VMAs (a profile of a program and a few
    // libraries), in more, and in every code VMA (worst case for the ioctl:
    // one query per VMA).
    let cases: [(&'static str, Option<usize>); 3] = [
        ("(b1) batch, 5 hot code VMAs", Some(5)),
        ("(b2) batch, 20 hot code VMAs", Some(20)),
        ("(b3) batch, all code VMAs", None),
    ];
    for (name, hot) in cases {
        let addrs = batch_addrs(helper.pid, hot)?;
        for build_ids in [false, true] {
            rows.push(run_case(name, helper.pid, &addrs, build_ids, quick)?);
        }
    }
    let vmas = Normalizer::new(Options {
        cache: false,
        build_ids: false,
        ..Options::default()
    })
    .mappings(helper.pid, VmaFilter::ALL)?
    .len();
    drop(helper);

    let report = render(&rows, vmas, quick);
    print!("{report}");
    if let Some(path) = out {
        std::fs::write(&path, &report).with_context(|| format!("writing {path}"))?;
        eprintln!("wrote {path}");
    }
    Ok(())
}

struct Row {
    case: &'static str,
    addrs: usize,
    build_ids: bool,
    /// bpfmux text, bpfmux ioctl, blazesym maps, blazesym ioctl (median ns).
    ns: [f64; 4],
    /// Distinct VMAs the addresses fall in.
    touched: usize,
    /// Addresses blazesym (maps, ioctl) reported as unknown.
    blaze_unknown: [usize; 2],
    ours_unresolved: usize,
}

const IMPLS: [&str; 4] = [
    "bpfmux text",
    "bpfmux ioctl",
    "blazesym maps",
    "blazesym ioctl",
];

fn run_case(
    case: &'static str,
    pid: u32,
    addrs: &[u64],
    build_ids: bool,
    quick: bool,
) -> Result<Row> {
    let mut addrs = addrs.to_vec();
    addrs.sort_unstable();
    // VMAs uncached, build IDs (when on) not cached: every call does the
    // full work, like the seed's "uncached_maps" benchmark.
    let opts = |backend| Options {
        backend,
        build_ids,
        cache: false,
    };
    let mut ours_text = Normalizer::new(opts(Backend::Text));
    let mut ours_ioctl = Normalizer::new(opts(Backend::ProcmapQuery));
    let blaze = |procmap| {
        BlazeNormalizer::builder()
            .enable_procmap_query(procmap)
            .enable_vma_caching(false)
            .enable_build_ids(build_ids)
            .enable_build_id_caching(false)
            .build()
    };
    let blaze_maps = blaze(false);
    let blaze_ioctl = blaze(true);
    let bopts = NormalizeOpts {
        sorted_addrs: true,
        ..Default::default()
    };
    let bpid = blazesym::Pid::from(pid);

    // bpfmux uses the code-only filter (what symbolization asks for);
    // blazesym filters r-or-x VMAs. All addresses here are in r-x VMAs, so
    // both resolve every address; check that they agree before timing.
    let a = ours_text.normalize(pid, &addrs, VmaFilter::EXEC)?;
    let b = ours_ioctl.normalize(pid, &addrs, VmaFilter::EXEC)?;
    if a != b {
        bail!("{case}: bpfmux text and ioctl disagree");
    }
    let mut blaze_unknown = [0; 2];
    for (k, (name, bz)) in [("maps", &blaze_maps), ("ioctl", &blaze_ioctl)]
        .into_iter()
        .enumerate()
    {
        let out = bz.normalize_user_addrs_opts(bpid, &addrs, &bopts)?;
        let mut unknown = 0;
        for (i, (off, meta)) in out.outputs.iter().enumerate() {
            if let Some(blazesym::normalize::UserMeta::Unknown(u)) = out.meta.get(*meta) {
                if unknown == 0 {
                    eprintln!(
                        "{case}: blazesym {name} could not normalize {:#x}: {u:?}",
                        addrs[i]
                    );
                }
                unknown += 1;
                continue;
            }
            let ours = a.addrs[i].resolved.map(|r| r.file_offset);
            if ours.is_some() && ours != Some(*off) {
                bail!(
                    "{case}: blazesym {name} offset {off:#x} != bpfmux {ours:?} for {:#x}",
                    addrs[i]
                );
            }
        }
        blaze_unknown[k] = unknown;
    }
    let touched = a.mappings.len();

    let mut calls: [Box<dyn FnMut()>; 4] = [
        Box::new(|| {
            black_box(ours_text.normalize(pid, &addrs, VmaFilter::EXEC).ok());
        }),
        Box::new(|| {
            black_box(ours_ioctl.normalize(pid, &addrs, VmaFilter::EXEC).ok());
        }),
        Box::new(|| {
            black_box(
                blaze_maps
                    .normalize_user_addrs_opts(bpid, &addrs, &bopts)
                    .ok(),
            );
        }),
        Box::new(|| {
            black_box(
                blaze_ioctl
                    .normalize_user_addrs_opts(bpid, &addrs, &bopts)
                    .ok(),
            );
        }),
    ];
    let (rounds, budget) = if quick {
        (5, Duration::from_millis(40))
    } else {
        (30, Duration::from_millis(250))
    };
    let mut samples: [Vec<f64>; 4] = Default::default();
    // Warm-up.
    for c in calls.iter_mut() {
        let t = Instant::now();
        while t.elapsed() < budget / 2 {
            c();
        }
    }
    // Round-robin blocks of timed calls.
    for _ in 0..rounds {
        for (i, c) in calls.iter_mut().enumerate() {
            let t0 = Instant::now();
            while t0.elapsed() < budget / 4 {
                let t = Instant::now();
                c();
                samples[i].push(t.elapsed().as_nanos() as f64);
            }
        }
    }
    let ns = samples.map(|mut s| median(&mut s));
    eprintln!(
        "{case} build_ids={build_ids}: {}",
        IMPLS
            .iter()
            .zip(ns)
            .map(|(n, v)| format!("{n} {:.1}µs", v / 1e3))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let ours_unresolved = a.addrs.iter().filter(|x| x.resolved.is_none()).count();
    Ok(Row {
        case,
        addrs: addrs.len(),
        build_ids,
        ns,
        touched,
        blaze_unknown,
        ours_unresolved,
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

/// Five code addresses of this process: two in the executable, three in libc.
fn five_code_addrs() -> Vec<u64> {
    vec![
        main as *const () as usize as u64,
        run_case as *const () as usize as u64,
        libc::getpid as *const () as usize as u64,
        libc::malloc as *const () as usize as u64,
        libc::write as *const () as usize as u64,
    ]
}

/// 3244 addresses (the seed's batch size) spread over `hot` code VMAs
/// picked evenly across the helper's, or over all of them.
fn batch_addrs(pid: u32, hot: Option<usize>) -> Result<Vec<u64>> {
    let code = Normalizer::new(Options {
        cache: false,
        build_ids: false,
        ..Options::default()
    })
    .mappings(pid, VmaFilter::EXEC)?;
    if code.len() < 40 {
        bail!("helper has only {} code VMAs", code.len());
    }
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let vmas: Vec<_> = match hot {
        Some(k) => code.iter().step_by(code.len() / k).take(k).collect(),
        None => code.iter().collect(),
    };
    Ok((0..3244)
        .map(|_| {
            let m = vmas[(next() % vmas.len() as u64) as usize];
            m.start + next() % (m.end - m.start)
        })
        .collect())
}

/// A process with `n` one-page file mappings (of its own executable),
/// alternating r-- and r-x with one-page gaps.
struct Helper {
    child: Child,
    pid: u32,
    _stdin: ChildStdin,
}

impl Helper {
    fn spawn(n: usize) -> Result<Self> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["helper", &n.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take().context("stdin")?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().context("stdout")?).read_line(&mut line)?;
        if line.trim() != "READY" {
            bail!("helper failed: {line:?}");
        }
        Ok(Self {
            pid: child.id(),
            child,
            _stdin: stdin,
        })
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn helper(n: usize) -> Result<()> {
    let exe = std::fs::File::open("/proc/self/exe")?;
    let pages = (exe.metadata()?.len() as usize / PAGE).max(1);
    // SAFETY: mmap/munmap of memory this helper owns.
    unsafe {
        let span = 2 * n * PAGE;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        let base = libc::mmap(std::ptr::null_mut(), span, libc::PROT_NONE, flags, -1, 0);
        if base == libc::MAP_FAILED {
            bail!("reserve");
        }
        libc::munmap(base, span);
        for i in 0..n {
            let prot = if i % 2 == 0 {
                libc::PROT_READ
            } else {
                libc::PROT_READ | libc::PROT_EXEC
            };
            let at = (base as usize + 2 * i * PAGE) as *mut libc::c_void;
            let off = ((i % pages) * PAGE) as libc::off_t;
            let flags = libc::MAP_PRIVATE | libc::MAP_FIXED_NOREPLACE;
            if libc::mmap(at, PAGE, prot, flags, exe.as_raw_fd(), off) != at {
                bail!("mmap {i}");
            }
        }
    }
    println!("READY");
    std::io::stdout().flush()?;
    let mut s = String::new();
    let _ = std::io::stdin().read_line(&mut s);
    Ok(())
}

fn render(rows: &[Row], helper_vmas: usize, quick: bool) -> String {
    let us = |ns: f64| format!("{:.1}", ns / 1e3);
    let x = |a: f64, b: f64| format!("{:.1}×", a / b);
    let mut s = String::new();
    let _ = writeln!(s, "# PROCMAP_QUERY benchmark: address normalization\n");
    let _ = writeln!(
        s,
        "Generated by `bench/procmap/run.sh{}`.\n",
        if quick { " --quick" } else { "" }
    );
    let _ = writeln!(s, "- kernel: {}", read_trim("/proc/sys/kernel/osrelease"));
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "- cpu: {cpu}, {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let _ = writeln!(s, "- load average at end: {}", read_trim("/proc/loadavg"));
    let _ = writeln!(
        s,
        "- blazesym 0.2.7 (Normalizer, VMA and build-ID caching off)"
    );
    let _ = writeln!(s, "- helper process for (b): {helper_vmas} VMAs\n");
    let _ = writeln!(
        s,
        "Medians per normalize call, µs (lower is better). \"text/ioctl\" = how much faster the \
         ioctl path is; \"blz/bpfmux\" = blazesym time ÷ bpfmux time (≥ 1.0× means bpfmux is as \
         fast or faster).\n"
    );
    let _ = writeln!(
        s,
        "| case | addrs | VMAs hit | build IDs | bpfmux text | bpfmux ioctl | bpfmux text/ioctl | blazesym maps | blazesym ioctl | blazesym maps/ioctl | blz/bpfmux text | blz/bpfmux ioctl |"
    );
    let _ = writeln!(
        s,
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in rows {
        let [ot, oi, bt, bi] = r.ns;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.case,
            r.addrs,
            r.touched,
            if r.build_ids { "on" } else { "off" },
            us(ot),
            us(oi),
            x(ot, oi),
            us(bt),
            us(bi),
            x(bt, bi),
            x(bt, ot),
            x(bi, oi),
        );
    }
    let _ = writeln!(
        s,
        "\nTargets: ioctl ≥ 5× text on (a), ≥ 40× on (b); bpfmux ≥ blazesym on every row. \
         bpfmux normalizes with the code-only filter (`VmaFilter::EXEC`, the kernel skips \
         non-code VMAs); blazesym uses its own r-or-x filter. Where both resolve an address they \
         agree on the file offset (checked before timing)."
    );
    for r in rows.iter().filter(|r| r.blaze_unknown != [0, 0]) {
        let _ = writeln!(
            s,
            "\n- {} (build IDs {}): blazesym left {} (maps) / {} (ioctl) of {} addresses unknown \
             (reason MissingSyms); bpfmux left {} unresolved.",
            r.case,
            if r.build_ids { "on" } else { "off" },
            r.blaze_unknown[0],
            r.blaze_unknown[1],
            r.addrs,
            r.ours_unresolved
        );
    }
    s
}

fn read_trim(p: &str) -> String {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
