//! The mechanisms that run several XDP programs as one: each engine turns a
//! set of programs into one head program for the interface's XDP link.
//! Whatever the engine, the set is described by the same record, so `list`
//! shows the same picture.

pub mod direct;
pub mod dispatcher;
pub mod kernel_chain;

use std::os::fd::OwnedFd;
use std::path::Path;

use super::{invalid, Result};

use super::program::Resolved;
use super::state::{ProgRecord, SetRecord};
use super::EngineKind;
use direct::Direct;
use dispatcher::Dispatcher;
use kernel_chain::KernelChain;

/// The user's choice on the command line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EngineChoice {
    /// One program: direct; several: kernel chain calls when this kernel
    /// has them, else the dispatcher.
    #[default]
    Auto,
    /// bpfmux's freplace dispatcher.
    Dispatcher,
    /// The series' kernel chain calls (an error where the kernel lacks them).
    KernelChain,
    /// libxdp's multiprog dispatcher, shared with xdp-loader and every
    /// other libxdp user (an error where libxdp.so.1 is missing). `Auto`
    /// picks it by itself where libxdp's dispatcher already runs.
    Libxdp,
}

/// The set that is live now, for engines that can keep its programs.
pub struct Previous<'a> {
    pub record: &'a SetRecord,
    pub generation: &'a Path,
}

/// Everything an engine loaded for a set. Nothing of it sees traffic until
/// the caller points the interface's XDP link at `head`; dropping it
/// unloads everything.
pub struct Built {
    /// The program the XDP link will run.
    pub head: OwnedFd,
    /// Objects to pin in the generation directory, by file name: what must
    /// outlive this process for the set to keep working.
    pub pins: Vec<(String, OwnedFd)>,
    /// The set in run order (prog ids filled in).
    pub progs: Vec<ProgRecord>,
    /// How many programs kept running from the previous set.
    pub kept: usize,
}

pub trait Engine {
    fn kind(&self) -> EngineKind;

    /// Why this engine cannot run a set of `n` programs here; None if it can.
    fn unavailable(&self, n: usize) -> Option<String>;

    /// Loads the set without making it visible to traffic.
    fn build(&self, set: &[Resolved], previous: Option<Previous<'_>>) -> Result<Built>;

    /// Compares a committed generation with what the kernel runs; returns
    /// the differences (empty = consistent).
    fn check(&self, record: &SetRecord, generation: &Path) -> Vec<String>;
}

/// bpfmux's own engine of this kind; None for libxdp, whose dispatcher
/// libxdp builds (see `xdp::libxdp`).
pub fn engine(kind: EngineKind) -> Option<Box<dyn Engine>> {
    match kind {
        EngineKind::Direct => Some(Box::new(Direct)),
        EngineKind::Dispatcher => Some(Box::new(Dispatcher)),
        EngineKind::KernelChain => Some(Box::new(KernelChain)),
        EngineKind::Libxdp => None,
    }
}

/// Picks bpfmux's own engine for a set of `n` programs, or says why none
/// fits. (The caller has sent libxdp's cases to `xdp::libxdp`.)
pub fn choose(choice: EngineChoice, n: usize) -> Result<Box<dyn Engine>> {
    let pick = |kind: EngineKind| -> Result<Box<dyn Engine>> {
        let Some(e) = engine(kind) else {
            invalid!("the {kind} engine is libxdp's, not one bpfmux builds");
        };
        match e.unavailable(n) {
            None => Ok(e),
            Some(why) => invalid!("{kind} engine: {why}"),
        }
    };
    match choice {
        EngineChoice::Dispatcher => pick(EngineKind::Dispatcher),
        EngineChoice::KernelChain => pick(EngineKind::KernelChain),
        EngineChoice::Libxdp => pick(EngineKind::Libxdp),
        EngineChoice::Auto if n == 1 => pick(EngineKind::Direct),
        EngineChoice::Auto => {
            if let Some(chain) = engine(EngineKind::KernelChain) {
                if chain.unavailable(n).is_none() {
                    return Ok(chain);
                }
            }
            pick(EngineKind::Dispatcher)
        }
    }
}
