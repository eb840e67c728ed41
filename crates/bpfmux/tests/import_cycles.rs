//! No module imports in a circle: among the children of any module (the
//! top-level modules of a crate included), the paths each child's files
//! name (`use crate::...`, `use super::...`, inline `crate::a::b`) must not
//! form a cycle. A child may use its parent and its own children; siblings
//! depend on each other one way only.
//!
//! Checks both crates of the workspace.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// A module path, e.g. `["xdp", "engine", "dispatcher"]`; empty: the crate root.
type ModPath = Vec<String>;

#[path = "common/rust_files.rs"]
mod files;
use files::rust_files;

/// The module a file is: `src/xdp/engine/mod.rs` → `xdp::engine`.
fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).expect("file under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

/// Code without comments or string literals (enough for paths in `use`
/// lines and expressions; doc examples are comments).
fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let code = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        let mut in_str = false;
        let mut prev = ' ';
        for c in code.chars() {
            if c == '"' && prev != '\\' {
                in_str = !in_str;
            } else if !in_str {
                out.push(c);
            }
            prev = c;
        }
        out.push('\n');
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path a file names from `crate::` or `super::`, resolved to
/// absolute segments (the last segments may be items, not modules).
fn named_paths(module: &ModPath, is_mod_file: bool, code: &str) -> Vec<ModPath> {
    let mut out = Vec::new();
    // `super` of a non-mod file is its parent module; of mod.rs, the
    // grandparent (mod.rs *is* the module).
    let _ = is_mod_file;
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let at_word = i == 0 || !is_ident(chars[i - 1]) && chars[i - 1] != ':';
        let rest: String = chars[i..chars.len().min(i + 7)].iter().collect();
        let (base, skip) = if at_word && rest.starts_with("crate::") {
            (Vec::new(), 7)
        } else if at_word && rest.starts_with("super::") {
            let mut b = module.clone();
            b.pop();
            (b, 7)
        } else {
            i += 1;
            continue;
        };
        let mut j = i + skip;
        let mut path = base;
        let mut seg = String::new();
        loop {
            while j < chars.len() && is_ident(chars[j]) {
                seg.push(chars[j]);
                j += 1;
            }
            if seg == "super" {
                path.pop();
            } else if !seg.is_empty() && seg != "self" {
                path.push(std::mem::take(&mut seg));
            }
            seg.clear();
            if j + 1 < chars.len() && chars[j] == ':' && chars[j + 1] == ':' {
                j += 2;
                if j < chars.len() && chars[j] == '{' {
                    // `use crate::a::{b, c::d}`: each first segment of the group.
                    let end = chars[j..].iter().position(|&c| c == '}').map(|k| j + k);
                    let inner: String = chars[j + 1..end.unwrap_or(chars.len())].iter().collect();
                    for item in inner.split(',') {
                        let mut p = path.clone();
                        for s in item.trim().split("::") {
                            let s: String = s.chars().take_while(|&c| is_ident(c)).collect();
                            if s.is_empty() || s == "self" {
                                break;
                            }
                            p.push(s);
                        }
                        out.push(p);
                    }
                    break;
                }
                continue;
            }
            break;
        }
        out.push(path);
        i = j.max(i + 1);
    }
    out
}

/// The cycles among siblings, as `parent: a -> b -> a` lines.
fn cycles(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut modules: BTreeSet<ModPath> = BTreeSet::new();
    let mut refs: Vec<(ModPath, ModPath)> = Vec::new();
    for f in &files {
        let m = module_of(src, f);
        let text = fs::read_to_string(f).expect("readable source");
        let is_mod = f.file_name().is_some_and(|n| n == "mod.rs");
        for p in named_paths(&m, is_mod, &strip(&text)) {
            refs.push((m.clone(), p));
        }
        modules.insert(m);
    }
    // parent → (child → children it depends on)
    let mut graphs: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (from, to) in &refs {
        // The longest common prefix: the parent whose children the edge joins.
        let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
        if common >= from.len() || common >= to.len() {
            // A module using its ancestor or its own descendants.
            continue;
        }
        let parent: ModPath = from[..common].to_vec();
        let target_child: ModPath = to[..=common].to_vec();
        if !modules.contains(&target_child) {
            // An item of the parent (e.g. `super::Mode`), not a module.
            continue;
        }
        graphs
            .entry(parent)
            .or_default()
            .entry(from[common].clone())
            .or_default()
            .insert(to[common].clone());
    }
    let mut found = Vec::new();
    for (parent, g) in &graphs {
        let mut seen: BTreeSet<Vec<String>> = BTreeSet::new();
        for start in g.keys() {
            let mut stack = vec![(start.clone(), vec![start.clone()])];
            while let Some((node, path)) = stack.pop() {
                for next in g.get(&node).into_iter().flatten() {
                    if next == start {
                        let mut key = path.clone();
                        key.sort();
                        if seen.insert(key) {
                            let name = if parent.is_empty() {
                                "crate".to_string()
                            } else {
                                parent.join("::")
                            };
                            found.push(format!("{name}: {} -> {start}", path.join(" -> ")));
                        }
                    } else if !path.contains(next) {
                        let mut p = path.clone();
                        p.push(next.clone());
                        stack.push((next.clone(), p));
                    }
                }
            }
        }
    }
    found
}

#[test]
fn no_module_imports_in_a_circle() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut all = Vec::new();
    for krate in ["bpfmux", "bpfmux-cli"] {
        let src = crates.join(krate).join("src");
        assert!(src.is_dir(), "{}", src.display());
        all.extend(cycles(&src).into_iter().map(|c| format!("{krate}: {c}")));
    }
    assert!(all.is_empty(), "import cycles:\n{}", all.join("\n"));
}

#[test]
fn the_checker_sees_a_cycle() {
    let dir = std::env::temp_dir().join(format!("bpfmux-cycles-{}", std::process::id()));
    let src = dir.join("src");
    fs::create_dir_all(src.join("a")).unwrap();
    fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    fs::write(src.join("a/mod.rs"), "mod x;\nuse crate::b::Thing;\n").unwrap();
    fs::write(
        src.join("a/x.rs"),
        "use super::super::c;\nfn f() { crate::b::g(); }\n",
    )
    .unwrap();
    fs::write(src.join("b.rs"), "use crate::a::x::Other; // crate::c\n").unwrap();
    fs::write(
        src.join("c.rs"),
        "/// crate::a\nconst S: &str = \"crate::a\";\n",
    )
    .unwrap();
    let found = cycles(&src);
    fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found, ["crate: a -> b -> a"]);
}
