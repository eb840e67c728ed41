//! Does one text read ever beat one ioctl per VMA? A batch that touches k
//! of the helper's VMAs costs about k queries through PROCMAP_QUERY, while
//! the text file always prints every VMA; this measures both as k grows to
//! every VMA (filter: all VMAs, so the kernel skips none).

use std::hint::black_box;

use anyhow::Result;
use bpfmux::normalize::{Backend, Normalizer, Options, VmaFilter};

use crate::timing::{medians, Budget};

pub struct Point {
    /// VMAs the addresses fall in.
    pub hot: usize,
    /// PROCMAP_QUERY calls per normalize call.
    pub queries: u64,
    pub text_ns: f64,
    pub ioctl_ns: f64,
}

/// `batch(hot)`: the batch's addresses spread over `hot` of the VMAs
/// (`None`: all of them).
pub fn measure(
    pid: u32,
    batch: impl Fn(Option<usize>) -> Result<Vec<u64>>,
    hots: &[Option<usize>],
    budget: Budget,
) -> Result<Vec<Point>> {
    // Warm on both sides: only the per-call VMA work differs.
    let opts = |backend| Options {
        backend,
        build_ids: false,
        cache: false,
        keep_maps_open: true,
    };
    let mut out = Vec::new();
    for &hot in hots {
        let mut addrs = batch(hot)?;
        addrs.sort_unstable();
        let mut text = Normalizer::new(opts(Backend::Text));
        let mut ioctl = Normalizer::new(opts(Backend::ProcmapQuery));
        let a = text.normalize(pid, &addrs, VmaFilter::ALL)?;
        let before = ioctl.kernel_calls().queries;
        let b = ioctl.normalize(pid, &addrs, VmaFilter::ALL)?;
        let queries = ioctl.kernel_calls().queries - before;
        anyhow::ensure!(a == b, "text and ioctl disagree on the crossover batch");
        let mut t = || {
            black_box(text.normalize(pid, &addrs, VmaFilter::ALL).ok());
        };
        let mut i = || {
            black_box(ioctl.normalize(pid, &addrs, VmaFilter::ALL).ok());
        };
        let m = medians(&mut [&mut t, &mut i], budget);
        out.push(Point {
            hot: b.mappings.len(),
            queries,
            text_ns: m[0],
            ioctl_ns: m[1],
        });
    }
    Ok(out)
}
