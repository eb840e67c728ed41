//! What one call costs at the least: the kernel work it cannot avoid,
//! measured with raw syscalls on the target process's maps file (per-query
//! cost grows a little with the number of VMAs, so each case is priced
//! with its own process's numbers).

use std::fs::File;
use std::hint::black_box;
use std::io::{Read, Seek, SeekFrom};

use anyhow::{Context, Result};
use bpfmux::normalize::procmap_query::{self, QueryBuf, Want};

use crate::timing::{medians, Budget};

/// Median nanoseconds of the pieces a normalize call is made of.
pub struct Floors {
    pub process: &'static str,
    pub open_close: f64,
    pub query_bare: f64,
    pub query_named: f64,
    pub query_named_build_id: f64,
    pub text_read: f64,
    pub text_bytes: usize,
}

/// `addr`: a code address of process `pid` (the query target).
pub fn measure(process: &'static str, pid: u32, addr: u64, budget: Budget) -> Result<Floors> {
    let path = format!("/proc/{pid}/maps");
    let maps = File::open(&path).with_context(|| format!("opening {path}"))?;
    let mut buf = QueryBuf::default();
    let mut text = Vec::with_capacity(64 * 1024);
    let flags = procmap_query::VMA_EXECUTABLE | procmap_query::COVERING_OR_NEXT_VMA;
    let want = |name, build_id| Want { name, build_id };
    // Check once that the query works and finds the address.
    let found = procmap_query::query(&maps, addr, flags, want(true, true), &mut buf)?
        .context("no VMA for the probe address")?;
    anyhow::ensure!(found.contains(addr), "probe address not covered");

    let mut open_close = || {
        black_box(File::open(&path).ok());
    };
    let query = |w: Want, buf: &mut QueryBuf| {
        black_box(procmap_query::query(&maps, addr, flags, w, buf).ok());
    };
    let mut q_bare = || query(want(false, false), &mut buf);
    let mut buf2 = QueryBuf::default();
    let mut q_named = || query(want(true, false), &mut buf2);
    let mut buf3 = QueryBuf::default();
    let mut q_bid = || query(want(true, true), &mut buf3);
    let mut text_read = || {
        let mut f = &maps;
        text.clear();
        black_box(
            f.seek(SeekFrom::Start(0))
                .and_then(|_| f.read_to_end(&mut text))
                .ok(),
        );
    };
    let m = medians(
        &mut [
            &mut open_close,
            &mut q_bare,
            &mut q_named,
            &mut q_bid,
            &mut text_read,
        ],
        budget,
    );
    let mut f = &maps;
    let mut all = Vec::new();
    f.seek(SeekFrom::Start(0))?;
    f.read_to_end(&mut all)?;
    Ok(Floors {
        process,
        open_close: m[0],
        query_bare: m[1],
        query_named: m[2],
        query_named_build_id: m[3],
        text_read: m[4],
        text_bytes: all.len(),
    })
}
