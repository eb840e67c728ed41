pub mod features;
pub mod maps;
pub mod sym;
pub mod xdp;
