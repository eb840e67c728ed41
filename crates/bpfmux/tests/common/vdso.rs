//! Where a process's vDSO is (shared by host tests through `#[path]`).

/// `[start, end)` of the vDSO of process `pid` ("self" for this one), read
/// from its maps file.
pub fn vdso_range(pid: &str) -> (u64, u64) {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let line = maps
        .lines()
        .find(|l| l.ends_with("[vdso]"))
        .expect("a vDSO");
    let (s, e) = line
        .split_whitespace()
        .next()
        .unwrap()
        .split_once('-')
        .unwrap();
    (
        u64::from_str_radix(s, 16).unwrap(),
        u64::from_str_radix(e, 16).unwrap(),
    )
}
