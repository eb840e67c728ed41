//! Function patterns as the user writes them: `vfs_read` (exact),
//! `vfs_*` / `tcp_?e*` / `ext4_[rw]*` (glob), `nf_conntrack:nf_ct_*`
//! (module-qualified; the module `vmlinux` means the kernel image).

use std::fmt;
use std::str::FromStr;

/// Where a function lives: the kernel image or one module.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// The kernel image.
    Vmlinux,
    /// A loaded module, by name.
    Module(String),
}

impl Scope {
    /// The module's name, `None` for vmlinux.
    pub fn module(&self) -> Option<&str> {
        match self {
            Scope::Vmlinux => None,
            Scope::Module(m) => Some(m),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Vmlinux => f.write_str("vmlinux"),
            Scope::Module(m) => f.write_str(m),
        }
    }
}

/// A function pattern: an exact name or a glob (`*`, `?`, `[...]`),
/// optionally `module:` in front.
///
/// ```
/// use bpfmux::trace::{Pattern, Scope};
///
/// let p: Pattern = "ext4:ext4_*".parse().unwrap();
/// assert!(p.matches(&Scope::Module("ext4".into()), "ext4_read"));
/// assert!(!p.matches(&Scope::Vmlinux, "ext4_read"));
/// assert!(!p.is_exact() && "vfs_read".parse::<Pattern>().unwrap().is_exact());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pattern {
    /// `None`: any scope (kernel image first, then modules).
    pub scope: Option<Scope>,
    /// The function part: a name or a glob.
    pub name: String,
}

/// Why a pattern does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PatternError {
    /// Nothing given.
    #[error("empty function pattern")]
    Empty,
    /// `:name` without a module.
    #[error("pattern {0:?}: empty module name before ':'")]
    EmptyModule(String),
    /// `module:` without a name.
    #[error("pattern {0:?}: empty function name after ':'")]
    EmptyName(String),
    /// A wildcard in the module part.
    #[error("pattern {0:?}: only the function part may use wildcards")]
    GlobModule(String),
    /// A `[` without its `]`.
    #[error("pattern {0:?}: unterminated '[' class")]
    OpenClass(String),
}

impl FromStr for Pattern {
    type Err = PatternError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(PatternError::Empty);
        }
        let (scope, name) = match s.split_once(':') {
            None => (None, s),
            Some(("", _)) => return Err(PatternError::EmptyModule(s.into())),
            Some((_, "")) => return Err(PatternError::EmptyName(s.into())),
            Some((m, _)) if is_glob(m) => return Err(PatternError::GlobModule(s.into())),
            Some(("vmlinux", n)) => (Some(Scope::Vmlinux), n),
            Some((m, n)) => (Some(Scope::Module(m.into())), n),
        };
        if is_glob(name) && !class_closed(name) {
            return Err(PatternError::OpenClass(s.into()));
        }
        Ok(Pattern {
            scope,
            name: name.into(),
        })
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.scope {
            Some(s) => write!(f, "{s}:{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

impl Pattern {
    /// An exact name goes to the kernel as it is: no listing is read for it.
    pub fn is_exact(&self) -> bool {
        !is_glob(&self.name)
    }

    /// Whether the function `name` in `scope` matches.
    pub fn matches(&self, scope: &Scope, name: &str) -> bool {
        if self.scope.as_ref().is_some_and(|s| s != scope) {
            return false;
        }
        glob_match(self.name.as_bytes(), name.as_bytes())
    }
}

fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// Every `[` opens a class that ends, by the matcher's own reading (a `]`
/// right after `[` or `[!` is a member, not the end).
fn class_closed(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'[' {
            i += 1;
            continue;
        }
        match class_match(&b[i..], 0) {
            Some((_, len)) => i += len,
            None => return false,
        }
    }
    true
}

/// Shell-style match of the whole name: `*` any run, `?` one byte, `[abc]`,
/// `[a-z]`, `[!x]` one byte of (not) the class. Iterative with one backtrack
/// point, so a pattern costs O(len(pattern) * len(name)) at worst.
pub fn glob_match(pat: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pat.len() {
            match pat[p] {
                b'*' => {
                    star = Some((p, n));
                    p += 1;
                    continue;
                }
                b'?' => {
                    p += 1;
                    n += 1;
                    continue;
                }
                b'[' => {
                    if let Some((hit, len)) = class_match(&pat[p..], name[n]) {
                        if hit {
                            p += len;
                            n += 1;
                            continue;
                        }
                    }
                }
                c if c == name[n] => {
                    p += 1;
                    n += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, sn)) => {
                p = sp + 1;
                n = sn + 1;
                star = Some((sp, sn + 1));
            }
            None => return false,
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

/// `[...]` at the start of `pat`: (does `c` match, length of the class).
fn class_match(pat: &[u8], c: u8) -> Option<(bool, usize)> {
    let mut i = 1;
    let negate = matches!(pat.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    while i < pat.len() && (pat[i] != b']' || first) {
        first = false;
        if i + 2 < pat.len() && pat[i + 1] == b'-' && pat[i + 2] != b']' {
            hit |= (pat[i]..=pat[i + 2]).contains(&c);
            i += 3;
        } else {
            hit |= pat[i] == c;
            i += 1;
        }
    }
    (i < pat.len()).then_some((hit != negate, i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, n: &str) -> bool {
        glob_match(p.as_bytes(), n.as_bytes())
    }

    #[test]
    fn globs() {
        assert!(m("vfs_*", "vfs_read"));
        assert!(m("vfs_*", "vfs_"));
        assert!(!m("vfs_*", "xvfs_read"));
        assert!(m("*read*", "vfs_readv"));
        assert!(m("*_read", "vfs_read"));
        assert!(!m("*_read", "vfs_readv"));
        assert!(m("tcp_?endmsg", "tcp_sendmsg"));
        assert!(!m("tcp_?endmsg", "tcp_endmsg"));
        assert!(m("ext4_[rw]*", "ext4_write_begin"));
        assert!(!m("ext4_[rw]*", "ext4_map_blocks"));
        assert!(m("a[a-c]z", "abz"));
        assert!(!m("a[!a-c]z", "abz"));
        assert!(m("a[!a-c]z", "adz"));
        assert!(m("*a*b*c", "xxaxxbxxc"));
        assert!(!m("*a*b*c", "xxaxxbxxcd"));
        assert!(m("exact", "exact"));
        assert!(!m("exact", "exactly"));
        assert!(m("**", ""));
    }

    #[test]
    fn parses_scopes() {
        let p: Pattern = "vfs_read".parse().unwrap();
        assert_eq!((p.scope.clone(), p.is_exact()), (None, true));
        let p: Pattern = "kvm:kvm_*".parse().unwrap();
        assert_eq!(p.scope, Some(Scope::Module("kvm".into())));
        assert!(!p.is_exact());
        assert!(p.matches(&Scope::Module("kvm".into()), "kvm_set_msr"));
        assert!(!p.matches(&Scope::Vmlinux, "kvm_set_msr"));
        let p: Pattern = "vmlinux:vfs_*".parse().unwrap();
        assert!(p.matches(&Scope::Vmlinux, "vfs_open"));
        let any: Pattern = "vfs_*".parse().unwrap();
        assert!(any.matches(&Scope::Module("x".into()), "vfs_open"));
    }

    #[test]
    fn rejects_bad_patterns() {
        assert_eq!("".parse::<Pattern>(), Err(PatternError::Empty));
        assert!(matches!(
            ":x".parse::<Pattern>(),
            Err(PatternError::EmptyModule(_))
        ));
        assert!(matches!(
            "m:".parse::<Pattern>(),
            Err(PatternError::EmptyName(_))
        ));
        assert!(matches!(
            "k*:x".parse::<Pattern>(),
            Err(PatternError::GlobModule(_))
        ));
        assert!(matches!(
            "a[bc".parse::<Pattern>(),
            Err(PatternError::OpenClass(_))
        ));
        // "[]" does not close: a ']' first in a class is a member.
        for open in ["x[]", "x[!]", "[]a"] {
            assert!(
                matches!(open.parse::<Pattern>(), Err(PatternError::OpenClass(_))),
                "{open}"
            );
        }
        assert!("x[]]".parse::<Pattern>().is_ok());
        assert!(m("x[]]", "x]"));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        /// Plain recursive shell matching, for small inputs.
        fn reference(p: &[u8], n: &[u8]) -> bool {
            match p.first() {
                None => n.is_empty(),
                Some(b'*') => (0..=n.len()).any(|k| reference(&p[1..], &n[k..])),
                Some(b'?') => !n.is_empty() && reference(&p[1..], &n[1..]),
                Some(b'[') => match (n.first(), class_match(p, n.first().copied().unwrap_or(0))) {
                    (Some(_), Some((hit, len))) => hit && reference(&p[len..], &n[1..]),
                    // An unclosed '[' is a literal.
                    (Some(&c), None) => c == b'[' && reference(&p[1..], &n[1..]),
                    (None, _) => false,
                },
                Some(&c) => n.first() == Some(&c) && reference(&p[1..], &n[1..]),
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(3000))]

            /// Any text: a pattern or an error, never a panic; what parses
            /// prints back as written.
            #[test]
            fn parse_never_panics_and_round_trips(s in "\\PC{0,40}") {
                if let Ok(p) = s.parse::<Pattern>() {
                    prop_assert_eq!(p.to_string(), s.clone());
                    let _ = p.matches(&Scope::Vmlinux, &s);
                }
            }

            /// On every pattern the parser accepts (literals, `*`, `?` and
            /// classes, `]` and `!` and `-` included), the matcher agrees
            /// with plain recursive matching.
            #[test]
            fn glob_matches_like_the_reference(
                parts in proptest::collection::vec(
                    prop_oneof!["[ab!\\[\\]-]", Just("*".to_string()), Just("?".to_string()),
                                "\\[!?[ab\\]-]{1,3}\\]"],
                    0..5,
                ),
                n in "[ab\\[\\]!-]{0,8}",
            ) {
                let p = parts.concat();
                if p.parse::<Pattern>().is_ok() {
                    prop_assert_eq!(
                        glob_match(p.as_bytes(), n.as_bytes()),
                        reference(p.as_bytes(), n.as_bytes()),
                        "pattern {:?} name {:?}", p, n
                    );
                }
            }

            /// An exact name matches only itself.
            #[test]
            fn exact_names_match_only_themselves(a in "[a-z_0-9]{1,12}", b in "[a-z_0-9]{1,12}") {
                let p: Pattern = a.parse().unwrap();
                prop_assert!(p.is_exact());
                prop_assert_eq!(p.matches(&Scope::Vmlinux, &b), a == b);
                prop_assert!(p.matches(&Scope::Vmlinux, &a));
            }
        }
    }
}
