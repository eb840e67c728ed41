//! A scratch directory for a test, removed on drop (shared by the host
//! tests of both crates through `#[path]`).

use std::path::PathBuf;

/// A fresh directory under the temporary directory, named after `tag` and
/// this process.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("bpfmux-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
