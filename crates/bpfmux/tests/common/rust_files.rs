//! The Rust sources under a directory, for the tests that read the crate's
//! own code (shared through `#[path]`).

use std::fs;
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, in path order, into `out`.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}
