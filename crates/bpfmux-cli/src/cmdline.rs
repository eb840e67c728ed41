//! `bpfmux trace -c COMMAND`: how a command line becomes one exec.
//!
//! A simple command (words, with `'...'`, `"..."` and `\` quoting) is split
//! into words the way a POSIX shell splits it and exec-ed directly, its name
//! looked up in PATH the way execvp(3) does. The traced process is then the
//! command from its first call, as with `bpftrace -c`: no shell starts first.
//! Anything else a shell would interpret (a list or pipeline, a redirection,
//! an expansion, a glob, an assignment, a reserved word) keeps `/bin/sh -c`,
//! and [`Prepared::shell`] says why, for the caller to tell the user.

use std::ffi::{CString, OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Why a command line needs a shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NeedsShell {
    /// A list, pipeline, subshell, background job or compound command: the
    /// shell runs it as given and stays, so its children have pids of their own.
    List(String),
    /// Shell syntax inside one simple command (redirection, expansion, glob,
    /// assignment, tilde, comment): `exec` keeps one process, but the shell
    /// starts it, and its own startup calls are counted as well.
    Syntax(String),
}

/// A simple command: variable assignments in front, then its words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Simple {
    /// `NAME=value` words before the command name: its environment.
    pub assign: Vec<(String, String)>,
    /// The command name and its arguments (at least the name).
    pub words: Vec<String>,
}

/// What a command line is, before anything runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Split {
    Simple(Simple),
    Shell(NeedsShell),
}

/// Reserved words of the POSIX shell: a command starting with one (unquoted)
/// is a compound command.
const RESERVED: &[&str] = &[
    "!", "{", "}", "case", "do", "done", "elif", "else", "esac", "fi", "for", "if", "in", "then",
    "until", "while",
];

fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f == '_' || f.is_ascii_alphabetic())
        && c.all(|x| x == '_' || x.is_ascii_alphanumeric())
}

/// The word being read and what came before it.
#[derive(Default)]
struct Words {
    cmd: Simple,
    cur: String,
    /// A word has begun (an empty quoted word '' is still a word).
    in_word: bool,
    /// Something in the current word was quoted.
    quoted: bool,
    /// Where the current word's name ends when it is an assignment
    /// (`NAME=`, the name unquoted, before the command name).
    assign_at: Option<usize>,
}

impl Words {
    fn push(&mut self, c: char) {
        self.cur.push(c);
        self.in_word = true;
    }

    fn push_quoted(&mut self, c: char) {
        self.push(c);
        self.quoted = true;
    }

    /// A quote opens: the word exists even if the quotes stay empty.
    fn begin_quote(&mut self) {
        self.in_word = true;
        self.quoted = true;
    }

    /// Before the command name: an unquoted `NAME=` starts an assignment.
    fn equals(&mut self) {
        if self.cmd.words.is_empty() && !self.quoted && is_name(&self.cur) {
            self.assign_at.get_or_insert(self.cur.len());
        }
        self.push('=');
    }

    /// Ends the current word; an unquoted reserved word in command position
    /// is returned as an error: it makes a compound command.
    fn finish(&mut self) -> Result<(), String> {
        if !self.in_word {
            return Ok(());
        }
        let w = std::mem::take(&mut self.cur);
        if self.cmd.words.is_empty() && !self.quoted && RESERVED.contains(&w.as_str()) {
            return Err(format!("the reserved word '{w}'"));
        }
        match self.assign_at.take() {
            Some(at) => self
                .cmd
                .assign
                .push((w[..at].to_string(), w[at + 1..].to_string())),
            None => self.cmd.words.push(w),
        }
        self.in_word = false;
        self.quoted = false;
        Ok(())
    }
}

/// Splits a command line into words like `sh` does for a simple command, or
/// says why it needs a shell. Errors: an unterminated quote, no command.
pub fn split(cmd: &str) -> Result<Split, String> {
    let mut w = Words::default();
    // The first shell feature seen; a list found later still wins, because
    // `exec` in front of a list would run only its first command.
    let mut syntax: Option<&str> = None;
    let mut chars = cmd.chars().peekable();
    let list = |what: String| Ok(Split::Shell(NeedsShell::List(what)));

    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if let Err(what) = w.finish() {
                    return list(what);
                }
            }
            '\n' => return list("a newline".into()),
            ';' | '&' | '|' | '(' | ')' => return list(format!("'{c}'")),
            '<' | '>' => {
                syntax.get_or_insert("a redirection");
            }
            '$' | '`' => {
                syntax.get_or_insert("an expansion");
            }
            '*' | '?' | '[' => {
                syntax.get_or_insert("a glob");
            }
            // At a word's start, or a value's (`A=~/x`): a home directory.
            '~' if !w.in_word || (w.assign_at.is_some() && w.cur.ends_with('=')) => {
                syntax.get_or_insert("a tilde");
            }
            '#' if !w.in_word => {
                syntax.get_or_insert("a comment");
            }
            '=' => w.equals(),
            '\\' => match chars.next() {
                // A line continuation: nothing.
                Some('\n') => {}
                Some(n) => w.push_quoted(n),
                // A lone backslash at the very end stays itself (as in dash).
                None => w.push('\\'),
            },
            '\'' => {
                w.begin_quote();
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => w.push(ch),
                        None => return Err("unterminated ' quote".into()),
                    }
                }
            }
            '"' => {
                w.begin_quote();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.peek().copied() {
                            Some(n @ ('$' | '`' | '"' | '\\')) => {
                                chars.next();
                                w.push(n);
                            }
                            Some('\n') => {
                                chars.next();
                            }
                            _ => w.push('\\'),
                        },
                        Some(ch @ ('$' | '`')) => {
                            syntax.get_or_insert("an expansion");
                            w.push(ch);
                        }
                        Some(ch) => w.push(ch),
                        None => return Err("unterminated \" quote".into()),
                    }
                }
            }
            other => w.push(other),
        }
    }
    if let Err(what) = w.finish() {
        return list(what);
    }
    if let Some(what) = syntax {
        // `exec A=1 cmd` would run a program named "A=1": the shell runs
        // the line as it is.
        if !w.cmd.assign.is_empty() {
            return list(format!("an assignment with {what}"));
        }
        return Ok(Split::Shell(NeedsShell::Syntax(what.into())));
    }
    if w.cmd.words.is_empty() {
        return Err("no command".into());
    }
    Ok(Split::Simple(w.cmd))
}

/// Where execvp(3) finds `name`.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    Found(PathBuf),
    /// Found, but not an executable file (a directory, no permission).
    NotExecutable(PathBuf),
    NotFound,
}

/// execvp's search path when PATH is unset (glibc's `_CS_PATH`).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

fn executable(p: &Path) -> bool {
    let Ok(c) = CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path; access only reads it.
    p.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
}

/// Looks `name` up like execvp(3): a name with a '/' is the path itself;
/// otherwise each PATH entry in order (an empty one is the current
/// directory), the first executable file winning.
pub fn find_in_path(name: &str, path: Option<&OsStr>) -> Lookup {
    if name.is_empty() {
        return Lookup::NotFound;
    }
    let candidates: Vec<PathBuf> = if name.contains('/') {
        vec![PathBuf::from(name)]
    } else {
        path.unwrap_or(OsStr::new(DEFAULT_PATH))
            .as_bytes()
            .split(|&b| b == b':')
            .map(|dir| {
                let dir = if dir.is_empty() { b"." as &[u8] } else { dir };
                Path::new(OsStr::from_bytes(dir)).join(name)
            })
            .collect()
    };
    let mut denied = None;
    for c in candidates {
        if executable(&c) {
            return Lookup::Found(c);
        }
        if denied.is_none() && c.exists() {
            denied = Some(c);
        }
    }
    denied.map_or(Lookup::NotFound, Lookup::NotExecutable)
}

/// A command that cannot run, with the status a shell would give it
/// (127 not found, 126 not executable, 2 a syntax error).
#[derive(Debug)]
pub struct CommandError {
    pub status: i32,
    msg: String,
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for CommandError {}

/// Everything the forked child needs, made before the fork: it only calls
/// execve on these.
#[derive(Debug)]
pub struct Prepared {
    pub path: CString,
    pub argv: Vec<CString>,
    /// For a file the kernel cannot exec (ENOEXEC: a script without `#!`):
    /// `/bin/sh PATH ARGS...`, as execvp does. Empty when already a shell.
    pub script_argv: Vec<CString>,
    pub env: Vec<CString>,
    /// Set when the command runs under `/bin/sh -c`.
    pub shell: Option<NeedsShell>,
}

pub const SHELL: &str = "/bin/sh";

/// `NAME=value` entries: the environment with the command's assignments
/// replacing or adding variables.
fn env_entries(
    vars: impl Iterator<Item = (OsString, OsString)>,
    assign: &[(String, String)],
) -> Result<Vec<CString>, CommandError> {
    let mut env: Vec<(OsString, OsString)> = vars
        .filter(|(k, _)| !assign.iter().any(|(a, _)| OsStr::new(a) == k))
        .collect();
    env.extend(assign.iter().map(|(k, v)| (k.into(), v.into())));
    env.into_iter()
        .map(|(k, v)| {
            let mut kv = k.into_vec();
            kv.push(b'=');
            kv.extend(v.into_vec());
            cstring(kv)
        })
        .collect()
}

fn cstring(s: impl Into<Vec<u8>>) -> Result<CString, CommandError> {
    CString::new(s).map_err(|_| CommandError {
        status: 2,
        msg: "-c: the command contains a NUL byte".into(),
    })
}

/// Splits `cmd`, finds its program in PATH and builds argv and environment.
pub fn prepare(cmd: &str) -> Result<Prepared, CommandError> {
    let split = split(cmd).map_err(|why| CommandError {
        status: 2,
        msg: format!("-c {cmd:?}: {why}"),
    })?;
    let simple = match split {
        Split::Simple(c) => c,
        Split::Shell(why) => {
            let script = match why {
                NeedsShell::List(_) => cmd.to_string(),
                // One simple command: the shell is replaced by it (same pid).
                NeedsShell::Syntax(_) => format!("exec {cmd}"),
            };
            return Ok(Prepared {
                path: cstring(SHELL)?,
                argv: vec![cstring("sh")?, cstring("-c")?, cstring(script)?],
                script_argv: Vec::new(),
                env: env_entries(std::env::vars_os(), &[])?,
                shell: Some(why),
            });
        }
    };
    let env = env_entries(std::env::vars_os(), &simple.assign)?;
    let words = simple.words;
    let name = &words[0];
    // `PATH=... cmd` looks cmd up in the new PATH, as shells do.
    let path_var: Option<OsString> = match simple.assign.iter().rev().find(|(k, _)| k == "PATH") {
        Some((_, v)) => Some(v.into()),
        None => std::env::var_os("PATH"),
    };
    let path = match find_in_path(name, path_var.as_deref()) {
        Lookup::Found(p) => p,
        Lookup::NotExecutable(p) => {
            return Err(CommandError {
                status: 126,
                msg: format!("-c: {name}: {} is not an executable file", p.display()),
            })
        }
        Lookup::NotFound => {
            return Err(CommandError {
                status: 127,
                msg: format!(
                    "-c: {name}: command not found{}",
                    if name.contains('/') {
                        ""
                    } else {
                        " in PATH (-c runs the command without a shell: no builtins, \
                         functions or aliases)"
                    }
                ),
            })
        }
    };
    let argv = words
        .iter()
        .map(|w| cstring(w.as_bytes()))
        .collect::<Result<Vec<_>, _>>()?;
    let path = cstring(path.into_os_string().into_vec())?;
    let mut script_argv = vec![cstring(SHELL)?, path.clone()];
    script_argv.extend(argv.iter().skip(1).cloned());
    Ok(Prepared {
        path,
        argv,
        script_argv,
        env,
        shell: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn simple(cmd: &str) -> Simple {
        match split(cmd) {
            Ok(Split::Simple(c)) => c,
            other => panic!("{cmd:?}: {other:?}"),
        }
    }

    fn words(cmd: &str) -> Vec<String> {
        let c = simple(cmd);
        assert!(c.assign.is_empty(), "{cmd:?}: {c:?}");
        c.words
    }

    fn list(cmd: &str) -> bool {
        matches!(split(cmd), Ok(Split::Shell(NeedsShell::List(_))))
    }

    fn syntax(cmd: &str) -> bool {
        matches!(split(cmd), Ok(Split::Shell(NeedsShell::Syntax(_))))
    }

    #[test]
    fn simple_commands_split_like_sh() {
        assert_eq!(words("ls -l /"), ["ls", "-l", "/"]);
        assert_eq!(words("  a\t b  "), ["a", "b"]);
        assert_eq!(words("a 'b c' \"d e\" f\\ g"), ["a", "b c", "d e", "f g"]);
        assert_eq!(words("a '' \"\""), ["a", "", ""]);
        assert_eq!(words("a'b'\"c\"d"), ["abcd"]);
        assert_eq!(words(r#"a "x\"y\\z\n""#), ["a", r#"x"y\z\n"#]);
        assert_eq!(words(r"a 'x\y'"), ["a", r"x\y"]);
        assert_eq!(words("a \\\nb"), ["a", "b"]);
        assert_eq!(words("a b\\"), ["a", "b\\"]);
        // Quoted shell characters are plain characters.
        assert_eq!(
            words(r#"grep 'a|b;c' "*.rs" \$HOME x=1"#),
            ["grep", "a|b;c", "*.rs", "$HOME", "x=1"]
        );
        // Literal where a shell takes them literally too.
        assert_eq!(words("a b#c d~e f=g"), ["a", "b#c", "d~e", "f=g"]);
        assert_eq!(words("'if' x"), ["if", "x"]);
        assert_eq!(words("'A=1' x"), ["A=1", "x"]);
        assert_eq!(words("A\\=1 x"), ["A=1", "x"]);
        assert_eq!(words("=1 x"), ["=1", "x"]);
    }

    #[test]
    fn assignments_become_the_environment() {
        let c = simple("LANG=C A='x y' B= cmd C=3");
        let kv = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(c.assign, [kv("LANG", "C"), kv("A", "x y"), kv("B", "")]);
        assert_eq!(c.words, ["cmd", "C=3"]);
        assert!(split("A=1").is_err(), "assignments alone are no command");
        let env = env_entries(
            [("A".into(), "old".into()), ("Z".into(), "z".into())].into_iter(),
            &[kv("A", "new"), kv("N", "n")],
        )
        .unwrap();
        assert_eq!(env, [c"Z=z", c"A=new", c"N=n"].map(CString::from));
    }

    #[test]
    fn lists_keep_the_shell() {
        for c in [
            "a; b",
            "a && b",
            "a | b",
            "a &",
            "(a)",
            "a\nb",
            "if true; then a; fi",
            "! a",
            "{ a; }",
            "while x",
            "a $(b)",
            "A=1 ls *.rs",
            "A=~/x b",
        ] {
            assert!(list(c), "{c:?}: {:?}", split(c));
        }
    }

    #[test]
    fn shell_syntax_is_noticed() {
        for c in [
            "a > f",
            "a <f",
            "a $HOME",
            "a \"$HOME\"",
            "a `b`",
            "ls *.rs",
            "ls a?",
            "ls [ab]",
            "cd ~",
            "a #x",
        ] {
            assert!(syntax(c), "{c:?}: {:?}", split(c));
        }
        // A list after the first syntax still makes a list (no `exec`).
        assert!(list("a > f; b"));
    }

    #[test]
    fn errors() {
        assert!(split("").is_err());
        assert!(split("   ").is_err());
        assert!(split("a 'b").is_err());
        assert!(split("a \"b").is_err());
    }

    #[test]
    fn path_lookup_follows_execvp() {
        let d = std::env::temp_dir().join(format!("bpfmux-cmdline-{}", std::process::id()));
        let (bin, other) = (d.join("bin"), d.join("other"));
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        let write = |p: &Path, mode: u32| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::write(p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        write(&other.join("tool"), 0o755);
        write(&bin.join("plain"), 0o644);
        std::fs::create_dir_all(bin.join("adir")).unwrap();
        let path = std::env::join_paths([&bin, &other]).unwrap();
        assert_eq!(
            find_in_path("tool", Some(&path)),
            Lookup::Found(other.join("tool"))
        );
        // Root may read a 0644 file, but not execute it.
        assert_eq!(
            find_in_path("plain", Some(&path)),
            Lookup::NotExecutable(bin.join("plain"))
        );
        assert_eq!(
            find_in_path("adir", Some(&path)),
            Lookup::NotExecutable(bin.join("adir"))
        );
        assert_eq!(find_in_path("nope", Some(&path)), Lookup::NotFound);
        assert_eq!(find_in_path("", Some(&path)), Lookup::NotFound);
        // A name with a slash is not searched for.
        let tool = other.join("tool");
        let tool_s = tool.to_str().unwrap();
        assert_eq!(
            find_in_path(tool_s, Some(OsStr::new("/nonexistent"))),
            Lookup::Found(tool.clone())
        );
        assert_eq!(
            find_in_path("tool/", Some(&path)),
            Lookup::NotFound,
            "tool/ is a relative path, not a name"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn prepare_builds_argv_and_refuses_unknown_commands() {
        let p = prepare("sh -c 'exit 3'").unwrap();
        assert!(p.shell.is_none());
        assert!(p.path.to_bytes().ends_with(b"/sh"), "{:?}", p.path);
        assert_eq!(p.argv, [c"sh", c"-c", c"exit 3"].map(CString::from));
        assert_eq!(p.script_argv[0].to_bytes(), SHELL.as_bytes());
        assert_eq!(&p.script_argv[2..], &p.argv[1..]);
        let e = prepare("no-such-command-bpfmux x").unwrap_err();
        assert_eq!(e.status, 127);
        assert!(e
            .to_string()
            .contains("no-such-command-bpfmux: command not found"));
        let s = prepare("echo a > /dev/null").unwrap();
        assert_eq!(s.path.to_bytes(), SHELL.as_bytes());
        assert_eq!(s.argv[2].to_bytes(), b"exec echo a > /dev/null");
        let l = prepare("true; false").unwrap();
        assert_eq!(l.argv[2].to_bytes(), b"true; false");
        assert_eq!(prepare("a 'b").unwrap_err().status, 2);
    }

    proptest! {
        /// Words quoted for a shell split back into the same words.
        #[test]
        fn quoted_words_round_trip(ws in proptest::collection::vec("[ -~\t]{0,12}", 1..6)) {
            let quoted: Vec<String> = ws
                .iter()
                .map(|w| format!("'{}'", w.replace('\'', r"'\''")))
                .collect();
            prop_assert_eq!(words(&quoted.join(" ")), ws);
        }
    }
}
