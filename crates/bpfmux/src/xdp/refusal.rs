//! Why [`super::attach`] or [`super::detach`] will not act, and what
//! [`super::list`] finds wrong with a set: typed, so that a tool can say in
//! its own words how to get past them (its option for another engine, its
//! command that detaches). The library's own words name no tool but
//! `xdp-loader`, libxdp's.

use std::io;
use std::path::PathBuf;

use serde::{Serialize, Serializer};

/// An [`super::attach`] or [`super::detach`] the library refuses, or a
/// kernel refusal it can explain. The error a call returns is this one
/// where it refused, found with `downcast_ref` on its chain.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// A program after one that continues on no return code could never run.
    #[error(
        "program {} ({program}) can never run: program {} ({blocker}) continues on no return \
         code; drop the programs after it or give it actions",
        .index + 1,
        .index
    )]
    NeverRuns {
        /// The program that continues on nothing, from 0; the one after
        /// it can never run.
        index: usize,
        /// The one after it, as given.
        program: String,
        /// The program that continues on nothing, as given.
        blocker: String,
    },
    /// Native mode asked for on a driver without it.
    #[error("the driver of {iface} has no native XDP")]
    NoNativeXdp {
        /// The interface.
        iface: String,
        /// What the kernel said.
        #[source]
        source: io::Error,
    },
    /// libxdp's dispatcher runs on the interface, and another engine was
    /// asked for.
    #[error(
        "{iface} runs libxdp's dispatcher (program {prog_id}: {programs}); add to it with the \
         libxdp engine, or remove it first: xdp-loader unload {iface} --all"
    )]
    LibxdpRuns {
        /// The interface.
        iface: String,
        /// libxdp's dispatcher.
        prog_id: u32,
        /// The programs in it, as a list of names.
        programs: String,
    },
    /// bpfmux's set runs in libxdp's dispatcher, and another engine was
    /// asked for.
    #[error(
        "bpfmux's set on {iface} runs in libxdp's dispatcher; attach with the libxdp engine, \
         or detach the set first"
    )]
    OursInLibxdp {
        /// The interface.
        iface: String,
    },
    /// The libxdp engine was asked for where bpfmux's set runs on another.
    #[error(
        "the set on {iface} runs on the {engine} engine, not in libxdp's dispatcher; detach \
         it first, then attach with the libxdp engine"
    )]
    NotInLibxdp {
        /// The interface.
        iface: String,
        /// The engine the set runs on (or `bpfmux's` when unknown).
        engine: String,
    },
    /// The record of the interface's set cannot be read.
    #[error("the state of {iface} is unreadable ({detail}); detach the set first")]
    StateUnreadable {
        /// The interface.
        iface: String,
        /// Why, as read.
        detail: String,
    },
    /// libxdp's dispatcher has no room for the set.
    #[error(
        "libxdp's dispatcher runs at most {max} programs: {iface} has {others} of other \
         tools{}, and this set has {new}",
        if *.replaced == 0 { String::new() } else { format!(" and bpfmux's {replaced} (until the new set is in)") }
    )]
    LibxdpFull {
        /// The interface.
        iface: String,
        /// What the dispatcher holds at most.
        max: usize,
        /// Other tools' programs there.
        others: usize,
        /// bpfmux's programs there, of the set being replaced.
        replaced: usize,
        /// Programs of the new set.
        new: usize,
    },
    /// Detach found libxdp's dispatcher with none of bpfmux's programs.
    #[error(
        "{iface} runs libxdp's dispatcher (program {prog_id}: {programs}), with no program of \
         bpfmux's; remove it with xdp-loader unload {iface} --all"
    )]
    OnlyTheirs {
        /// The interface.
        iface: String,
        /// libxdp's dispatcher.
        prog_id: u32,
        /// The programs in it, as a list of names.
        programs: String,
    },
    /// The kernel chain calls' dispatcher slots are all taken (ENOSPC).
    #[error(
        "each program that owns a chain holds one of the kernel XDP dispatcher's 48 slots, \
         and none is free"
    )]
    NoChainSlot {
        /// What the kernel said.
        #[source]
        source: io::Error,
    },
    /// A multi-buffer (`xdp.frags`) program.
    #[error(
        "program {program} in {} is an xdp.frags program; multi-buffer XDP is not supported yet",
        .path.display()
    )]
    Frags {
        /// The program.
        program: String,
        /// Its object file.
        path: PathBuf,
    },
}

/// What [`super::list`] finds wrong with a set: the record against the
/// kernel. Serialized as its text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// State without an XDP link: left over.
    #[error("state without an XDP link (leftover)")]
    Leftover,
    /// The interface is gone; the state stays until pruned
    /// ([`super::prune_stale`]).
    #[error("the interface is gone")]
    InterfaceGone,
    /// A program of bpfmux's set is no longer in libxdp's dispatcher.
    #[error(
        "program {program} (id {prog_id}) is no longer in libxdp's dispatcher (removed by \
         another tool?)"
    )]
    NotInDispatcher {
        /// The program's name.
        program: String,
        /// Its id.
        prog_id: u32,
        /// The interface, as recorded.
        iface: String,
    },
    /// libxdp's dispatcher is gone from the interface.
    #[error("libxdp's dispatcher is gone from the interface (removed by another tool?)")]
    DispatcherGone {
        /// The interface, as recorded.
        iface: String,
    },
    /// Anything else, as text.
    #[error("{0}")]
    Other(String),
}

impl Serialize for Problem {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
