//! The library speaks for itself, not as the `bpfmux` command: no string
//! literal in its sources names a verb of the CLI (`bpfmux trace`, ...), one
//! of its `--options`, its `-v`/`-vv` hints or the key that stops it
//! (`Ctrl-C`). What the CLI adds to the library's words (its prefix, which
//! option shows more, how to undo a refusal) is the CLI's own: see
//! `trace::Hint` and the refusals of `xdp::Error`.
//!
//! The rule, precisely:
//! - Only string literals count (`"..."`, raw and byte strings), in every
//!   `.rs` file under `src/`, test modules included: those are what the
//!   library can print or return. Comments, rustdoc included, are not
//!   looked at: documentation may show how the CLI uses the library.
//! - `bpfmux VERB`, VERB any of the CLI's verbs (the files of its `cmd/`).
//! - `--word` starting a token, unless its clause (the text since the last
//!   `(`, `;`, `,` or `` ` ``) names `xdp-loader`: the library may tell
//!   how to undo something with that tool.
//! - `-v` or `-vv` as a token, and `Ctrl-C`.

use std::fs;
use std::path::Path;

#[path = "common/rust_files.rs"]
mod files;
use files::rust_files;

/// The CLI's verbs: `crates/bpfmux-cli/src/cmd/VERB.rs`.
fn verbs() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bpfmux-cli/src/cmd");
    let mut v: Vec<String> = fs::read_dir(&dir)
        .expect("the CLI's cmd/ directory")
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let verb = name.strip_suffix(".rs")?;
            (verb != "mod").then(|| verb.to_string())
        })
        .collect();
    v.sort();
    v
}

/// The string literals of a Rust source, each with its line, `\` line
/// continuations joined as the compiler joins them.
fn literals(src: &str) -> Vec<(usize, String)> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
            }
        } else if ch == '\'' {
            // A char literal ('x', '\n', '"'), else a lifetime or label.
            if at(i + 1) == '\\' {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
            }
        } else if ch == 'r'
            && matches!(at(i + 1), '"' | '#')
            && !i.checked_sub(1).is_some_and(|p| ident(c[p]))
        {
            // r"..." or r#"..."#: ends at a quote and as many #.
            let start = line;
            let mut j = i + 1;
            let mut hashes = 0;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            if at(j) != '"' {
                i += 1;
                continue;
            }
            j += 1;
            let mut text = String::new();
            while j < c.len() {
                if c[j] == '"' && (1..=hashes).all(|k| at(j + k) == '#') {
                    j += 1 + hashes;
                    break;
                }
                line += usize::from(c[j] == '\n');
                text.push(c[j]);
                j += 1;
            }
            out.push((start, text));
            i = j;
        } else if ch == '"' {
            let start = line;
            let mut j = i + 1;
            let mut text = String::new();
            while j < c.len() && c[j] != '"' {
                if c[j] == '\\' {
                    if at(j + 1) == '\n' {
                        // A continuation: the newline and the next line's
                        // leading white space are not in the string.
                        j += 1;
                        while at(j).is_whitespace() {
                            line += usize::from(c[j] == '\n');
                            j += 1;
                        }
                        continue;
                    }
                    text.push(c[j]);
                    j += 1;
                }
                line += usize::from(c.get(j) == Some(&'\n'));
                if let Some(&x) = c.get(j) {
                    text.push(x);
                }
                j += 1;
            }
            out.push((start, text));
            i = j + 1;
        } else {
            i += 1;
        }
    }
    out
}

fn ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// What in `s` names the CLI, if anything.
fn cli_names(s: &str, verbs: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for v in verbs {
        if s.contains(&format!("bpfmux {v}")) {
            found.push(format!("bpfmux {v}"));
        }
    }
    if s.contains("Ctrl-C") {
        found.push("Ctrl-C".into());
    }
    let b = s.as_bytes();
    for (k, _) in s.match_indices('-') {
        let token_start = k == 0 || matches!(b[k - 1], b' ' | b'(' | b'`' | b'\'' | b'\t');
        if !token_start {
            continue;
        }
        let rest = &s[k..];
        let word: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if word.starts_with("--") && word[2..].starts_with(|c: char| c.is_ascii_lowercase()) {
            let clause = s[..k]
                .rfind(['(', ';', ',', '`'])
                .map_or(&s[..k], |p| &s[p..k]);
            if !clause.contains("xdp-loader") {
                found.push(word);
            }
        } else if word == "-v" || word == "-vv" {
            found.push(word);
        }
    }
    found
}

#[test]
fn the_rule_catches_what_it_should() {
    let verbs = ["trace".to_string(), "xdp".to_string()];
    let bad = [
        "bpfmux trace: 3 functions",
        "run `bpfmux xdp detach eth0` first",
        "try --mode generic",
        "(--chain-on none)",
        "... 3 more (-vv lists all)",
        "2 dropped (-v: why)",
        "attached; Ctrl-C to stop",
    ];
    for s in bad {
        assert!(!cli_names(s, &verbs).is_empty(), "{s}");
    }
    let fine = [
        "bpfmux keeps its state in bpffs",
        "remove it first: xdp-loader unload eth0 --all",
        "r--p 00000000",
        "a[!a-c]z",
        "-ENOENT",
        "x86-64",
    ];
    for s in fine {
        assert_eq!(cli_names(s, &verbs), Vec::<String>::new(), "{s}");
    }
}

#[test]
fn literals_are_read_as_the_compiler_reads_them() {
    let src = "let a = 'x'; // \"not this\"\n/* \"nor this\" */ f::<'a>(\"one \\\n    two\", r#\"raw \"q\"\"#, '\"');";
    let lits: Vec<String> = literals(src).into_iter().map(|(_, s)| s).collect();
    assert_eq!(lits, ["one two", "raw \"q\""]);
}

#[test]
fn no_library_string_names_the_cli() {
    let verbs = verbs();
    assert!(
        verbs.iter().any(|v| v == "trace") && verbs.iter().any(|v| v == "xdp"),
        "{verbs:?}"
    );
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(
        files.len() > 20,
        "{} files under {}",
        files.len(),
        src.display()
    );
    let mut bad = Vec::new();
    for f in &files {
        let text = fs::read_to_string(f).expect("readable source");
        for (line, s) in literals(&text) {
            let names = cli_names(&s, &verbs);
            if !names.is_empty() {
                let rel = f.strip_prefix(&src).unwrap_or(f);
                bad.push(format!("{}:{line}: {names:?} in {s:?}", rel.display()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "library strings that name the CLI:\n{}",
        bad.join("\n")
    );
}
