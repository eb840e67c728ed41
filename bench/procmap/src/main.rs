//! PROCMAP_QUERY vs text `/proc/<pid>/maps`, bpfmux's normalizer vs
//! blazesym's, on the same inputs in the same run.
//!
//! Cases:
//! (a) 5 code addresses of a real process (this one), VMAs uncached, build
//!     IDs off and on — the case behind the seed's 50 µs → 10 µs;
//! (b) 3244 addresses in a helper process with hundreds of VMAs — the
//!     seed's batch case: in 5 code VMAs, in 20, and in every code VMA.
//!
//! Each case runs bpfmux cold (maps file opened per call, like the seed's
//! "uncached_maps"), bpfmux warm (maps file kept open per pid; VMAs and
//! build IDs still asked for on every call) and blazesym, all round-robin
//! (so machine noise hits all alike), and reports per-call medians. Two
//! more sections: where the time of one call goes (kernel floors measured
//! with raw syscalls), and whether one text read beats many ioctls when a
//! batch touches most VMAs. Usage: `procmap-bench [--quick] [--out FILE]`;
//! `procmap-bench helper N` is the mapping helper process.

mod crossover;
mod floors;
mod helper;
mod report;
mod timing;

use std::hint::black_box;

use anyhow::{bail, Context, Result};
use blazesym::normalize::{NormalizeOpts, Normalizer as BlazeNormalizer};
use bpfmux::normalize::{Backend, KernelCalls, Normalizer, Options, VmaFilter};

use helper::Helper;
use timing::{medians, Budget};

/// The seed's batch size.
const BATCH: usize = 3244;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("helper") {
        let n = args.get(1).context("helper N")?.parse()?;
        return helper::run(n);
    }
    let quick = args.iter().any(|a| a == "--quick");
    let out = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1).cloned());
    let budget = Budget::new(quick);
    let load_before = report::read_trim("/proc/loadavg");

    let mut rows = Vec::new();
    let me = std::process::id();
    let five = five_code_addrs();
    for build_ids in [false, true] {
        rows.push(run_case(
            "(a) 5 addrs, own process",
            me,
            &five,
            build_ids,
            budget,
        )?);
    }
    let helper = Helper::spawn(640)?;
    let cases: [(&'static str, Option<usize>); 3] = [
        ("(b1) batch, 5 hot code VMAs", Some(5)),
        ("(b2) batch, 20 hot code VMAs", Some(20)),
        ("(b3) batch, all code VMAs", None),
    ];
    let mut helper_probe = 0;
    for (name, hot) in cases {
        let addrs = batch_addrs(helper.pid, VmaFilter::EXEC, hot)?;
        helper_probe = addrs[0];
        for build_ids in [false, true] {
            rows.push(run_case(name, helper.pid, &addrs, build_ids, budget)?);
        }
    }
    let vmas = plain_normalizer()
        .mappings(helper.pid, VmaFilter::ALL)?
        .len();
    eprintln!("floors: raw syscall costs");
    let floors = [
        floors::measure("own process", me, five[0], budget)?,
        floors::measure("helper", helper.pid, helper_probe, budget)?,
    ];
    eprintln!("crossover: text vs ioctl as a batch touches more VMAs");
    let hots = [Some(5), Some(40), Some(160), Some(320), None];
    let crossover = crossover::measure(
        helper.pid,
        |hot| batch_addrs(helper.pid, VmaFilter::ALL, hot),
        &hots,
        budget,
    )?;
    drop(helper);

    let text = report::render(&report::Report {
        rows: &rows,
        helper_vmas: vmas,
        crossover: &crossover,
        floors: &floors,
        quick,
        load_before,
    });
    print!("{text}");
    if let Some(path) = out {
        std::fs::write(&path, &text).with_context(|| format!("writing {path}"))?;
        eprintln!("wrote {path}");
    }
    Ok(())
}

/// One case measured: every contender, one build-ID setting.
pub struct Row {
    /// The case's name.
    pub case: &'static str,
    /// Addresses per call.
    pub addrs: usize,
    /// Whether build IDs were read.
    pub build_ids: bool,
    /// Median ns per call, indexed like [`CONTENDERS`].
    pub ns: Vec<f64>,
    /// Kernel calls of one bpfmux ioctl call, cold and warm.
    pub cold_calls: KernelCalls,
    /// The same, warm.
    pub warm_calls: KernelCalls,
    /// Distinct VMAs the addresses fall in.
    pub touched: usize,
    /// Addresses blazesym (maps, ioctl) reported as unknown.
    pub blaze_unknown: [usize; 2],
    /// Addresses bpfmux left unresolved.
    pub ours_unresolved: usize,
}

/// The normalizers compared, in column order.
pub const CONTENDERS: [&str; 6] = [
    "bpfmux text cold",
    "bpfmux ioctl cold",
    "bpfmux text warm",
    "bpfmux ioctl warm",
    "blazesym maps",
    "blazesym ioctl",
];

fn plain_normalizer() -> Normalizer {
    Normalizer::new(Options {
        cache: false,
        build_ids: false,
        keep_maps_open: false,
        ..Options::default()
    })
}

fn run_case(
    case: &'static str,
    pid: u32,
    addrs: &[u64],
    build_ids: bool,
    budget: Budget,
) -> Result<Row> {
    let mut addrs = addrs.to_vec();
    addrs.sort_unstable();
    // VMAs and build IDs never cached: every call does the full work, like
    // the seed's "uncached_maps" benchmark. Warm only keeps the maps file
    // open between calls.
    let opts = |backend, keep_maps_open| Options {
        backend,
        build_ids,
        cache: false,
        keep_maps_open,
    };
    let mut text_cold = Normalizer::new(opts(Backend::Text, false));
    let mut ioctl_cold = Normalizer::new(opts(Backend::ProcmapQuery, false));
    let mut text_warm = Normalizer::new(opts(Backend::Text, true));
    let mut ioctl_warm = Normalizer::new(opts(Backend::ProcmapQuery, true));
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
    // both resolve every address; check that everyone agrees before timing.
    let a = text_cold.normalize(pid, &addrs, VmaFilter::EXEC)?;
    let cold_calls = one_call_calls(&mut ioctl_cold, |n| {
        n.normalize(pid, &addrs, VmaFilter::EXEC)
    })?;
    // First warm call opens the file; the second shows a warm call's work.
    ioctl_warm.normalize(pid, &addrs, VmaFilter::EXEC)?;
    let warm_calls = one_call_calls(&mut ioctl_warm, |n| {
        n.normalize(pid, &addrs, VmaFilter::EXEC)
    })?;
    for (name, n) in [
        ("ioctl cold", &mut ioctl_cold),
        ("text warm", &mut text_warm),
        ("ioctl warm", &mut ioctl_warm),
    ] {
        if n.normalize(pid, &addrs, VmaFilter::EXEC)? != a {
            bail!("{case}: bpfmux text cold and {name} disagree");
        }
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

    let ours = |n: &mut Normalizer| {
        black_box(n.normalize(pid, &addrs, VmaFilter::EXEC).ok());
    };
    let theirs = |b: &BlazeNormalizer| {
        black_box(b.normalize_user_addrs_opts(bpid, &addrs, &bopts).ok());
    };
    let ns = medians(
        &mut [
            &mut || ours(&mut text_cold),
            &mut || ours(&mut ioctl_cold),
            &mut || ours(&mut text_warm),
            &mut || ours(&mut ioctl_warm),
            &mut || theirs(&blaze_maps),
            &mut || theirs(&blaze_ioctl),
        ],
        budget,
    );
    eprintln!(
        "{case} build_ids={build_ids}: {}",
        CONTENDERS
            .iter()
            .zip(&ns)
            .map(|(n, v)| format!("{n} {:.1}µs", v / 1e3))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(Row {
        case,
        addrs: addrs.len(),
        build_ids,
        ns,
        cold_calls,
        warm_calls,
        touched: a.mappings.len(),
        blaze_unknown,
        ours_unresolved: a.addrs.iter().filter(|x| x.resolved.is_none()).count(),
    })
}

/// Kernel calls `call` made.
fn one_call_calls<T>(
    n: &mut Normalizer,
    call: impl FnOnce(&mut Normalizer) -> Result<T, bpfmux::normalize::NormalizeError>,
) -> Result<KernelCalls> {
    let b = n.kernel_calls();
    call(n)?;
    let a = n.kernel_calls();
    Ok(KernelCalls {
        opens: a.opens - b.opens,
        queries: a.queries - b.queries,
        build_id_queries: a.build_id_queries - b.build_id_queries,
        text_reads: a.text_reads - b.text_reads,
    })
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

/// `BATCH` addresses spread over `hot` of the VMAs passing `filter`,
/// picked evenly across them, or over all of them.
fn batch_addrs(pid: u32, filter: VmaFilter, hot: Option<usize>) -> Result<Vec<u64>> {
    let vmas = plain_normalizer().mappings(pid, filter)?;
    if vmas.len() < 40 {
        bail!("helper has only {} VMAs", vmas.len());
    }
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let picked: Vec<_> = match hot {
        Some(k) => vmas.iter().step_by(vmas.len() / k).take(k).collect(),
        None => vmas.iter().collect(),
    };
    Ok((0..BATCH)
        .map(|_| {
            let m = picked[(next() % picked.len() as u64) as usize];
            m.start + next() % (m.end - m.start)
        })
        .collect())
}
