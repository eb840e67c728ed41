//! Raw kernel interfaces that libbpf(-rs) does not wrap (yet): the 7.2+
//! tracing_multi link, the series' XDP chain commands, plus the rtnetlink
//! bits the XDP probe needs.

pub mod bpf;
pub mod bpf_ops;
pub mod chain;
pub mod kcore;
pub mod netlink;
pub mod sched;
