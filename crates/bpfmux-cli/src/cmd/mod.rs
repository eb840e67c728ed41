pub mod features;
pub mod inject;
pub mod maps;
pub mod report;
pub mod sym;
pub mod trace;
pub mod xdp;
