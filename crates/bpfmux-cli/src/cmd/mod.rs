pub mod features;
pub mod inject;
pub mod maps;
pub mod sym;
pub mod trace;
pub mod xdp;
