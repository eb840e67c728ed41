//! Filters compiled into the trace program: which calls are recorded,
//! decided in the kernel before anything is counted or sent.
//!
//! A filter is an expression over one call of a traced function:
//!
//! ```text
//! filter  := or
//! or      := and ( "||" and )*
//! and     := unary ( "&&" unary )*
//! unary   := "!" unary | "(" or ")" | test
//! test    := value [ "&" number ] [ cmp literal ]
//! value   := "ret" | "errno" | "latency" | NAME
//! cmp     := "==" | "!=" | "<" | "<=" | ">" | ">=" | "^="
//! literal := number | duration | ERRNO | "true" | "false" | string
//! string  := '"' ( any character but '"' and '\' | '\"' | '\\' )* '"'
//! ```
//!
//! - `ret`: the return value, as the function's BTF type says (a signed
//!   type compares signed, a 32-bit one is sign- or zero-extended first).
//! - `errno`: the error a return value carries: `-ret` when the function
//!   returns a signed integer or a pointer (`ERR_PTR`) and the value is
//!   -4095..-1, else 0 (a NULL pointer carries none). Compared with a
//!   number or a name (`errno == EINVAL`, `errno == 2`).
//! - `latency`: the call's duration, compared with a duration: a number
//!   and a unit, `ns`, `us`, `ms` or `s` (`latency > 1ms`, `latency >=
//!   1.5ms`).
//! - `NAME`: an argument of the traced function by its BTF parameter name,
//!   any of its (up to 12) argument slots, the 7th and later (passed on
//!   the stack) too, of integer, enum (compared as a 32-bit int), bool,
//!   pointer (compared as an unsigned 64-bit number; a negative number is
//!   its two's complement, so `ret == -2` is `ERR_PTR(-ENOENT)`) or string
//!   type. Signed types compare signed.
//! - Strings: a `char *` or `const char *` argument compares with a string
//!   literal, and only with one: `filename == "/etc/passwd"` (equal),
//!   `filename != "/tmp/x"` (not equal), `filename ^= "/etc/"` (starts
//!   with). The program reads the string at the call, from user memory when
//!   the pointer is below the kernel's half of the address space (a
//!   `__user` one), else from kernel memory, as `--args` reads strings; a
//!   NULL or unreadable string equals nothing and starts with nothing (so
//!   `!=` passes it). A literal is at most 63 bytes
//!   ([`MAX_STRING_LITERAL`]): the program compares at most 64 bytes, the
//!   literal's and, for `==` and `!=`, its NUL, and reads more of the
//!   string than that, so a longer string never equals a literal by being
//!   cut. A filter has at most [`MAX_STRING_LITERALS`] different literals.
//!   `\"` and `\\` are a quote and a backslash in a literal; its other
//!   characters are their UTF-8 bytes. A string argument alone tests that
//!   it is not NULL (`filename && ...`); compared with a number it is an
//!   error, as are a string compared with anything but a `char *`
//!   argument, a mask on a string, `<`, `<=`, `>` or `>=` on strings, and
//!   `^=` with anything but a string.
//! - `value & mask` tests the bits of a mask: alone it is true when any of
//!   them is set (`flags & 0x80`); with a comparison, the masked value is
//!   compared (`flags & 0x3 == 0x1`).
//! - A value alone is true when it is not zero (`errno`, `!ret`); `latency`
//!   needs a comparison.
//! - Numbers: decimal, `0x` hexadecimal, a leading `-`. A number outside
//!   the range of the argument's type in some function is an error naming
//!   it, as is a literal of the wrong kind (a duration for `count`, an errno
//!   name for `ret`, a string for `count`, a number for `filename`).
//!
//! `!` binds tighter than `&&`, which binds tighter than `||`. Errors
//! ([`FilterError`]) give the column of the offending token and what was
//! expected there; [`FilterError::pointer`] draws a caret under it.
//!
//! # Functions that differ
//!
//! The functions of one run have different parameters. A name resolves per
//! function to its own argument slot, size and signedness: the slot where
//! the engine's program finds it ([`crate::trace::Proto::arg_places`]: a
//! trampoline program in declared order, a struct passed by value taking
//! two slots; a kprobe program the six argument registers, then the stack
//! above the return address). A function that lacks an argument the filter
//! names (or has it where the filter cannot read it: past the 12 slots, or
//! a struct passed by value) never passes the filter, whatever the rest of
//! it says; [`CompiledFilter::lacking`] lists them and why. A name no
//! selected function has is an error.
//!
//! # Where the filter is decided
//!
//! The expression's top-level `&&` terms that read only arguments are
//! checked at the function's entry; a call they reject is not counted,
//! timed or sent anywhere. The other terms (the return value, errno,
//! latency) are checked at the exit: with such a term, the programs count
//! a call, take its stacks and send its entry event when it returns (so a
//! call's entry and exit events come together), and every run needs the
//! exit side of the calls. With error chains the filter decides which
//! failing calls start a chain; with the call graph, which calls count
//! under their path; the callers in a chain or a path are every traced
//! caller, passed or not.
//!
//! # Which engines
//!
//! | filter | engines |
//! |---|---|
//! | arguments only (strings and the 7th and later arguments too) | every engine, counts with entry programs only |
//! | `ret`, `errno`, `latency` | every engine with an exit side: fsession.multi or fexit.multi (global), fsession.multi (tracing-multi, Linux 7.3+), kprobe.session (kprobe-multi, 6.10+), fexit (fentry-each) |
//! | an argument in the same `\|\|` or `!` as a `ret`, `errno` or `latency` term, or arguments captured with such a filter | arguments read at the exit: the trampoline engines (global, tracing-multi, fentry-each), not kprobe-multi |
//!
//! # The compiled form
//!
//! Each side becomes a postfix program of at most [`MAX_OPS`] operations
//! in the BPF object's read-only data, set before load: tests push one
//! bit, `!`, `&&` and `||` work on the top of that stack of bits. The BPF
//! program runs it in a bounded loop (at most [`MAX_OPS`] turns) that the
//! verifier walks once per operation, reading each one as constants, so
//! it follows one path through each; the tests compute their outcome
//! without a branch, which keeps the verifier's work linear in their
//! number.
//! A map holds, per function, where each named argument (and `ret`) is and
//! how to widen it ([`MAX_VARS`] of them at most). A string test reads the
//! string its pointer argument points at into the program's stack and
//! compares it with one of the literals in read-only data, 8 bytes at a
//! time, without a branch either; which helper reads it (user or kernel
//! memory) is the one branch.

use std::fmt;
use std::time::Duration;

use super::btf::{Format, Proto, ValueKind, MAX_TRAMPOLINE_ARGS};
use super::errors::{errno_by_name, errno_name, RetClass};
use super::program::{
    FilterCode, FilterStr, FILTER_MAX_OPS, FILTER_MAX_STRS, FILTER_MAX_VARS, FILTER_STR_LEN,
};
use super::select::Func;

/// Most operations per side of a call (`TRACE_FILTER_MAX_OPS`, trace.h).
pub const MAX_OPS: usize = FILTER_MAX_OPS;
/// Most values read per function: named arguments and `ret` (`TRACE_FILTER_MAX_VARS`).
pub const MAX_VARS: usize = FILTER_MAX_VARS;
/// Argument slots a filter reads: all a trampoline saves, the 7th and later
/// (on the stack) included; a kprobe program reads the same slots from the
/// registers and the stack.
pub const MAX_ARG: usize = MAX_TRAMPOLINE_ARGS;
/// Different string literals in one filter (`TRACE_FILTER_MAX_STRS`).
pub const MAX_STRING_LITERALS: usize = FILTER_MAX_STRS;
/// Bytes of a string literal at most: the program compares at most
/// 64 bytes, the literal's and its NUL.
pub const MAX_STRING_LITERAL: usize = FILTER_STR_LEN - 1;

// Encodings shared with trace.h (struct trace_filter_op, trace_filter_func).
const FOP_TEST: u8 = 1;
const FOP_NOT: u8 = 2;
const FOP_AND: u8 = 3;
const FOP_OR: u8 = 4;
const FOP_STR: u8 = 5;
const FSRC_ERRNO: u8 = 8;
const FSRC_LATENCY: u8 = 9;
const FVAR_PRESENT: u8 = 0x80;
const FVAR_SIGNED: u8 = 0x40;
const FVAR_SIZE_SHIFT: u8 = 4;
const FVAR_SLOT_MASK: u8 = 0xf;
const FVAR_RET: u8 = 0xf;
/// The largest errno (`MAX_ERRNO`).
const MAX_ERRNO: i128 = 4095;

/// Characters of the filter text: where a token starts (0-based) and how
/// many it spans.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Span {
    start: usize,
    len: usize,
}

/// A filter that cannot be parsed or compiled: where, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: {kind}")]
pub struct FilterError {
    /// The filter's text.
    pub text: String,
    /// Column of the offending token (1-based, in characters).
    pub column: usize,
    /// How many characters it spans (at least 1).
    pub width: usize,
    /// What is wrong.
    pub kind: FilterErrorKind,
}

/// What is wrong with a filter.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FilterErrorKind {
    /// Not the grammar: what was expected there, and what was found.
    #[error("expected {expected}, found {found}")]
    Syntax {
        /// What would have been right.
        expected: String,
        /// The token there (or `the end`).
        found: String,
    },
    /// A `(` that is never closed.
    #[error("this `(` is never closed")]
    Unclosed,
    /// A `)` with no `(` before it.
    #[error("`)` without a matching `(`")]
    Unopened,
    /// No selected function has a parameter of this name.
    #[error("unknown argument `{name}`: no selected function has it ({known})")]
    UnknownArgument {
        /// The name.
        name: String,
        /// Some functions' parameters, to choose from.
        known: String,
    },
    /// The functions that have it have it where a filter cannot read it.
    #[error("argument `{name}` cannot be read: {why}")]
    Unreadable {
        /// The name.
        name: String,
        /// Why, in one function.
        why: String,
    },
    /// A value of the wrong kind for what it is compared with.
    #[error("type mismatch: {0}")]
    TypeMismatch(String),
    /// A number outside the range of what it is compared with.
    #[error("out of range: {0}")]
    OutOfRange(String),
    /// Right, but not implemented yet.
    #[error("{0} not supported yet")]
    NotSupported(&'static str),
    /// More than the program holds.
    #[error("too complex: {0}")]
    TooComplex(String),
    /// An argument tested together with the return value, errno or
    /// latency (in one `||` or `!`) must be read at the function's exit,
    /// which the chosen engine cannot.
    #[error("this test reads argument `{0}` at the function's exit (it is in one `||` or `!` with ret, errno or latency), which engine kprobe-multi cannot")]
    ArgumentAtExit(String),
}

impl FilterError {
    fn at(text: &str, span: Span, kind: FilterErrorKind) -> Self {
        Self {
            text: text.to_string(),
            column: span.start + 1,
            width: span.len.max(1),
            kind,
        }
    }

    /// The filter's text and, under it, carets under the offending token:
    /// two lines, each indented by `indent`.
    pub fn pointer(&self, indent: &str) -> String {
        format!(
            "{indent}{}\n{indent}{}{}",
            self.text,
            " ".repeat(self.column - 1),
            "^".repeat(self.width)
        )
    }
}

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cmp {
    Eq = 0,
    Ne = 1,
    Lt = 2,
    Le = 3,
    Gt = 4,
    Ge = 5,
    /// A string starts with the literal (`^=`).
    Prefix = 6,
    /// A string does not start with the literal (`!(s ^= lit)`).
    NotPrefix = 7,
}

impl Cmp {
    fn from_sym(s: &str) -> Option<Cmp> {
        Some(match s {
            "==" => Cmp::Eq,
            "!=" => Cmp::Ne,
            "<" => Cmp::Lt,
            "<=" => Cmp::Le,
            ">" => Cmp::Gt,
            ">=" => Cmp::Ge,
            "^=" => Cmp::Prefix,
            _ => return None,
        })
    }

    fn sym(self) -> &'static str {
        match self {
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
            Cmp::Prefix => "^=",
            Cmp::NotPrefix => "!^=",
        }
    }

    /// The comparison that is true exactly when this one is false.
    fn negated(self) -> Cmp {
        match self {
            Cmp::Eq => Cmp::Ne,
            Cmp::Ne => Cmp::Eq,
            Cmp::Lt => Cmp::Ge,
            Cmp::Ge => Cmp::Lt,
            Cmp::Le => Cmp::Gt,
            Cmp::Gt => Cmp::Le,
            Cmp::Prefix => Cmp::NotPrefix,
            Cmp::NotPrefix => Cmp::Prefix,
        }
    }
}

// ---------------------------------------------------------------- lexing

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Ident(String),
    /// A number or a duration as written (with its `-` and unit).
    Num(String),
    Str(String),
    Sym(&'static str),
    End,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    span: Span,
}

impl Token {
    /// How an error names it.
    fn found(&self, text: &[char]) -> String {
        match self.tok {
            Tok::End => "the end".into(),
            _ => {
                let s: String = text[self.span.start..self.span.start + self.span.len]
                    .iter()
                    .collect();
                format!("`{s}`")
            }
        }
    }
}

const SYMS: [&str; 13] = [
    "&&", "||", "==", "!=", "<=", ">=", "^=", "<", ">", "!", "&", "(", ")",
];

fn lex(text: &str) -> Result<Vec<Token>, FilterError> {
    let c: Vec<char> = text.chars().collect();
    let err =
        |start: usize, len: usize, kind| Err(FilterError::at(text, Span { start, len }, kind));
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let start = i;
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
            continue;
        }
        let tok = if ch.is_ascii_alphabetic() || ch == '_' {
            while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            Tok::Ident(c[start..i].iter().collect())
        } else if ch.is_ascii_digit()
            || (ch == '-' && c.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            i += 1;
            while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '.' || c[i] == '_') {
                i += 1;
            }
            Tok::Num(c[start..i].iter().collect())
        } else if ch == '"' {
            let mut s = String::new();
            i += 1;
            loop {
                match c.get(i) {
                    None => {
                        return err(
                            start,
                            i - start,
                            FilterErrorKind::Syntax {
                                expected: "a closing `\"`".into(),
                                found: "the end".into(),
                            },
                        )
                    }
                    Some('"') => break,
                    Some('\\') if matches!(c.get(i + 1), Some('"' | '\\')) => {
                        s.push(c[i + 1]);
                        i += 2;
                    }
                    Some(&x) => {
                        s.push(x);
                        i += 1;
                    }
                }
            }
            i += 1;
            Tok::Str(s)
        } else if let Some(sym) = SYMS.iter().find(|s| {
            let s: Vec<char> = s.chars().collect();
            c[i..].starts_with(&s)
        }) {
            i += sym.len();
            Tok::Sym(sym)
        } else {
            let (expected, len) = match (ch, c.get(i + 1)) {
                ('=', _) => ("`==` (a comparison)", 1),
                ('|', _) => ("`||` (or)", 1),
                ('^', _) => ("`^=` (starts with)", 1),
                ('-', _) => ("a number after `-`", 1),
                _ => ("a test, an operator or a value", 1),
            };
            return err(
                start,
                len,
                FilterErrorKind::Syntax {
                    expected: expected.into(),
                    found: format!("`{ch}`"),
                },
            );
        };
        out.push(Token {
            tok,
            span: Span {
                start,
                len: i - start,
            },
        });
    }
    out.push(Token {
        tok: Tok::End,
        span: Span {
            start: c.len(),
            len: 1,
        },
    });
    Ok(out)
}

// ---------------------------------------------------------------- parsing

/// What a test reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Operand {
    Ret,
    Errno,
    Latency,
    Arg(String),
}

impl Operand {
    fn name(&self) -> &str {
        match self {
            Operand::Ret => "ret",
            Operand::Errno => "errno",
            Operand::Latency => "latency",
            Operand::Arg(n) => n,
        }
    }
}

/// A literal, its kind checked against the operand where it can be
/// without the functions (errno names are numbers by now).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    Int(i128),
    Ns(u64),
    Bool(bool),
    Str(String),
}

/// One comparison of a value of the call with a literal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Test {
    what: Operand,
    span: Span,
    mask: Option<u64>,
    cmp: Cmp,
    value: Value,
    value_span: Span,
    /// A value alone (`flags`, `!ret`): not zero, no literal written.
    bare: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Expr {
    Test(Test),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

impl Expr {
    fn tests(&self) -> Vec<&Test> {
        match self {
            Expr::Test(t) => vec![t],
            Expr::Not(e) => e.tests(),
            Expr::And(a, b) | Expr::Or(a, b) => {
                let mut v = a.tests();
                v.extend(b.tests());
                v
            }
        }
    }

    /// Reads only arguments: decidable at the entry.
    fn at_entry(&self) -> bool {
        self.tests()
            .iter()
            .all(|t| matches!(t.what, Operand::Arg(_)))
    }

    /// The top-level `&&` terms.
    fn conjuncts(self) -> Vec<Expr> {
        match self {
            Expr::And(a, b) => {
                let mut v = a.conjuncts();
                v.extend(b.conjuncts());
                v
            }
            e => vec![e],
        }
    }
}

struct Parser<'a> {
    text: &'a str,
    chars: Vec<char>,
    toks: Vec<Token>,
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> &Token {
        &self.toks[self.i.min(self.toks.len() - 1)]
    }

    fn next(&mut self) -> Token {
        let t = self.peek().clone();
        if self.i < self.toks.len() - 1 {
            self.i += 1;
        }
        t
    }

    fn is_sym(&self, s: &str) -> bool {
        matches!(self.peek().tok, Tok::Sym(x) if x == s)
    }

    fn error(&self, span: Span, kind: FilterErrorKind) -> FilterError {
        FilterError::at(self.text, span, kind)
    }

    fn expected(&self, t: &Token, expected: &str) -> FilterError {
        self.error(
            t.span,
            FilterErrorKind::Syntax {
                expected: expected.into(),
                found: t.found(&self.chars),
            },
        )
    }

    /// `sub (sym sub)*`, joined from the left.
    fn chain(
        &mut self,
        sym: &str,
        sub: fn(&mut Self) -> Result<Expr, FilterError>,
        join: fn(Box<Expr>, Box<Expr>) -> Expr,
    ) -> Result<Expr, FilterError> {
        let mut e = sub(self)?;
        while self.is_sym(sym) {
            self.next();
            e = join(Box::new(e), Box::new(sub(self)?));
        }
        Ok(e)
    }

    fn or(&mut self) -> Result<Expr, FilterError> {
        self.chain("||", Self::and, Expr::Or)
    }

    fn and(&mut self) -> Result<Expr, FilterError> {
        self.chain("&&", Self::unary, Expr::And)
    }

    fn unary(&mut self) -> Result<Expr, FilterError> {
        let t = self.next();
        match &t.tok {
            Tok::Sym("!") => Ok(Expr::Not(Box::new(self.unary()?))),
            Tok::Sym("(") => {
                let e = self.or()?;
                let close = self.next();
                match close.tok {
                    Tok::Sym(")") => Ok(e),
                    Tok::End => Err(self.error(t.span, FilterErrorKind::Unclosed)),
                    _ => Err(self.expected(&close, "`)`, `&&` or `||`")),
                }
            }
            Tok::Ident(name) => self.test(name.clone(), t.span),
            _ => Err(self.expected(
                &t,
                "a test (e.g. `ret < 0`, `errno == EINVAL`, `latency > 1ms`, `count > 4096`)",
            )),
        }
    }

    fn test(&mut self, name: String, span: Span) -> Result<Expr, FilterError> {
        let what = match name.as_str() {
            "ret" => Operand::Ret,
            "errno" => Operand::Errno,
            "latency" => Operand::Latency,
            _ => Operand::Arg(name),
        };
        let mut mask = None;
        if self.is_sym("&") {
            let amp = self.next();
            if matches!(what, Operand::Errno | Operand::Latency) {
                return Err(self.error(
                    amp.span,
                    FilterErrorKind::TypeMismatch(format!(
                        "a mask (`&`) applies to arguments and ret, not to {}",
                        what.name()
                    )),
                ));
            }
            let t = self.next();
            mask = Some(match self.literal(&t)? {
                Value::Int(m) if (0..=i128::from(u64::MAX)).contains(&m) => m as u64,
                _ => {
                    return Err(self.expected(&t, "a mask: a number from 0 to 2^64-1 (e.g. `0x80`)"))
                }
            });
        }
        let op = self.peek().clone();
        let cmp = match &op.tok {
            Tok::Sym(s) => Cmp::from_sym(s),
            _ => None,
        };
        let Some(cmp) = cmp else {
            // A value alone: true when not zero.
            if what == Operand::Latency {
                return Err(self.error(
                    span,
                    FilterErrorKind::TypeMismatch(
                        "latency needs a comparison with a duration (e.g. `latency > 1ms`)".into(),
                    ),
                ));
            }
            return Ok(Expr::Test(Test {
                what,
                span,
                mask,
                cmp: Cmp::Ne,
                value: Value::Int(0),
                value_span: span,
                bare: true,
            }));
        };
        self.next();
        let t = self.next();
        if t.tok == Tok::End {
            return Err(self.expected(&t, &format!("a value after `{}`", cmp.sym())));
        }
        let value = self.literal(&t)?;
        self.check_builtin(&what, &value, t.span)?;
        self.check_string(&value, mask, cmp, op.span, t.span)?;
        Ok(Expr::Test(Test {
            what,
            span,
            mask,
            cmp,
            value,
            value_span: t.span,
            bare: false,
        }))
    }

    /// What a string literal takes, and what `^=` takes: checked before
    /// the functions are known (whether the argument is a `char *` is
    /// checked per function when compiled).
    fn check_string(
        &self,
        v: &Value,
        mask: Option<u64>,
        cmp: Cmp,
        cmp_span: Span,
        span: Span,
    ) -> Result<(), FilterError> {
        let mismatch = |at: Span, m: String| Err(self.error(at, FilterErrorKind::TypeMismatch(m)));
        let written = || -> String {
            self.chars[span.start..span.start + span.len]
                .iter()
                .collect()
        };
        match v {
            Value::Str(_) if mask.is_some() => mismatch(
                span,
                "a mask (`&`) applies to numbers; a string compares whole (`==`, `!=`) or by \
                 its start (`^=`)"
                    .into(),
            ),
            Value::Str(_) if !matches!(cmp, Cmp::Eq | Cmp::Ne | Cmp::Prefix) => mismatch(
                cmp_span,
                format!(
                    "strings compare with `==`, `!=` or `^=` (starts with), not `{}`",
                    cmp.sym()
                ),
            ),
            Value::Str(s) if s.len() > MAX_STRING_LITERAL => Err(self.error(
                span,
                FilterErrorKind::OutOfRange(format!(
                    "a string literal is at most {MAX_STRING_LITERAL} bytes (the kernel \
                     compares {FILTER_STR_LEN} with its NUL); this one is {}",
                    s.len()
                )),
            )),
            Value::Str(_) => Ok(()),
            _ if cmp == Cmp::Prefix => mismatch(
                span,
                format!(
                    "`^=` (starts with) compares a string argument with a string literal \
                     (`filename ^= \"/etc/\"`), not `{}`",
                    written()
                ),
            ),
            _ => Ok(()),
        }
    }

    fn literal(&self, t: &Token) -> Result<Value, FilterError> {
        let bad_number = || {
            self.expected(
                t,
                "a number (4096, 0x80, -1) or a duration (10ms; units ns, us, ms, s)",
            )
        };
        match &t.tok {
            Tok::Num(s) => {
                if let Some(ns) = parse_ns(s) {
                    return Ok(Value::Ns(ns));
                }
                parse_int(s).map(Value::Int).ok_or_else(bad_number)
            }
            Tok::Str(s) => Ok(Value::Str(s.clone())),
            Tok::Ident(s) if s == "true" => Ok(Value::Bool(true)),
            Tok::Ident(s) if s == "false" => Ok(Value::Bool(false)),
            Tok::Ident(s) if s.len() > 1 && s.starts_with('E') => match errno_by_name(s) {
                Some(e) if s.bytes().all(|b| !b.is_ascii_lowercase()) => {
                    Ok(Value::Int(i128::from(e)))
                }
                _ => Err(self.expected(t, "an errno name (EINVAL, ENOENT, ...)")),
            },
            _ => Err(self.expected(
                t,
                "a value: a number, a duration (10ms), an errno name, true, false or a string",
            )),
        }
    }

    /// What `ret`, `errno` and `latency` take, checked before the functions
    /// are known (arguments are checked per function when compiled).
    fn check_builtin(&self, what: &Operand, v: &Value, span: Span) -> Result<(), FilterError> {
        let written = || -> String {
            self.chars[span.start..span.start + span.len]
                .iter()
                .collect()
        };
        let errno_name_literal = matches!(self.chars.get(span.start), Some('E'));
        let mismatch = |m: String| Err(self.error(span, FilterErrorKind::TypeMismatch(m)));
        match (what, v) {
            (Operand::Latency, Value::Ns(_)) => Ok(()),
            (Operand::Latency, Value::Int(_)) if !errno_name_literal => mismatch(format!(
                "latency is a duration: write a unit (`{}ms`; ns, us, ms, s)",
                written()
            )),
            (Operand::Latency, _) => mismatch(format!(
                "latency is a duration (e.g. `10ms`), not `{}`",
                written()
            )),
            (_, Value::Ns(_)) => mismatch(format!(
                "`{}` is a duration; only latency compares with one",
                written()
            )),
            (Operand::Errno, Value::Int(e)) if (0..=MAX_ERRNO).contains(e) => Ok(()),
            (Operand::Errno, Value::Int(e)) if (-MAX_ERRNO..0).contains(e) => Err(self.error(
                span,
                FilterErrorKind::OutOfRange(format!(
                    "errno is positive (`errno == {}`; or `ret == {e}`)",
                    -e
                )),
            )),
            (Operand::Errno, Value::Int(_)) => Err(self.error(
                span,
                FilterErrorKind::OutOfRange(format!("errno is 0 to {MAX_ERRNO}")),
            )),
            (Operand::Errno, _) => mismatch(format!(
                "errno compares with a number or an errno name (EINVAL), not `{}`",
                written()
            )),
            (_, Value::Int(e)) if errno_name_literal => mismatch(format!(
                "`{}` is an errno name: compare errno with it (`errno == {}`), or ret with \
                 a number (`ret == -{e}`)",
                written(),
                written()
            )),
            (Operand::Ret, Value::Str(_)) => {
                mismatch("ret is a number; a string compares only with a `char *` argument".into())
            }
            _ => Ok(()),
        }
    }
}

/// A decimal or `0x` hexadecimal integer with an optional leading `-`.
fn parse_int(s: &str) -> Option<i128> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    let v = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(h) if !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            u64::from_str_radix(h, 16).ok()?
        }
        Some(_) => return None,
        None if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
            digits.parse::<u64>().ok()?
        }
        None => return None,
    };
    let v = i128::from(v);
    Some(if neg { -v } else { v })
}

/// `10ms`, `1.5us`, `2s`, `100ns`: nanoseconds, `None` if not a duration
/// (or not a whole number of nanoseconds, or more than 2^64-1).
fn parse_ns(s: &str) -> Option<u64> {
    let (num, unit) = ["ns", "us", "ms", "s"]
        .iter()
        .find_map(|u| s.strip_suffix(u).map(|n| (n, *u)))?;
    let per: u64 = match unit {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        _ => 1_000_000_000,
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) || (num.contains('.') && frac.is_empty()) {
        return None;
    }
    let mut ns = int.parse::<u64>().ok()?.checked_mul(per)?;
    // The fraction, digit by digit: it must come out whole.
    let mut scale = per;
    for d in frac.bytes() {
        if !scale.is_multiple_of(10) {
            return None;
        }
        scale /= 10;
        ns = ns.checked_add(u64::from(d - b'0') * scale)?;
    }
    Some(ns)
}

/// A duration as `--min-latency`-style options take it: a number and a
/// unit (`ns`, `us`, `ms`, `s`), e.g. `10ms` or `1.5us`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    parse_ns(s.trim()).map(Duration::from_nanos)
}

// ---------------------------------------------------------------- filters

/// A filter as written, parsed and checked as far as it can be without
/// the functions ([`Filter::parse`]), and a latency floor; the program form
/// comes when the functions are known ([`crate::trace::plan`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    /// The text as written (empty for a latency floor alone).
    text: String,
    expr: Option<Expr>,
    /// Calls shorter than this are not recorded.
    min_latency: Option<u64>,
}

impl Filter {
    /// Parses a filter; its syntax and the kinds of values `ret`, `errno`
    /// and `latency` are compared with are checked now, arguments when the
    /// functions are known.
    pub fn parse(text: &str) -> Result<Filter, FilterError> {
        let toks = lex(text)?;
        let mut p = Parser {
            text,
            chars: text.chars().collect(),
            toks,
            i: 0,
        };
        let expr = p.or()?;
        let t = p.next();
        match t.tok {
            Tok::End => {}
            Tok::Sym(")") => return Err(p.error(t.span, FilterErrorKind::Unopened)),
            _ => return Err(p.expected(&t, "`&&`, `||` or the end")),
        }
        Ok(Filter {
            text: text.to_string(),
            expr: Some(expr),
            min_latency: None,
        })
    }

    /// Only calls that take at least `d` (`latency >= d`).
    pub fn min_latency(d: Duration) -> Filter {
        Filter {
            text: String::new(),
            expr: None,
            min_latency: Some(0),
        }
        .and_min_latency(d)
    }

    /// This filter, and only calls that take at least `d`.
    pub fn and_min_latency(mut self, d: Duration) -> Filter {
        self.min_latency = Some(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        self
    }

    /// The filter as the summary shows it: the text, and the latency floor.
    pub fn text(&self) -> String {
        let floor = self
            .min_latency
            .map(|ns| format!("latency >= {}", fmt_ns(ns)));
        match (&self.expr, floor) {
            (Some(Expr::Or(..)), Some(f)) => format!("({}) && {f}", self.text),
            (Some(_), Some(f)) => format!("{} && {f}", self.text),
            (_, Some(f)) => f,
            (_, None) => self.text.clone(),
        }
    }

    /// Whether part of it is decided at a function's exit: the return
    /// value, errno or latency (the run then needs the exit side).
    pub fn needs_exit(&self) -> bool {
        self.min_latency.is_some() || self.expr.as_ref().is_some_and(|e| !e.at_entry())
    }

    /// Whether it reads arguments at a function's exit: a top-level `&&`
    /// term that tests arguments and the return value, errno or latency
    /// together.
    pub fn reads_args_at_exit(&self) -> bool {
        self.exit_arg().is_some()
    }

    /// The first argument tested in a term decided at the exit, and where.
    fn exit_arg(&self) -> Option<(Span, String)> {
        let terms = self.expr.clone()?.conjuncts();
        terms
            .iter()
            .filter(|c| !c.at_entry())
            .flat_map(Expr::tests)
            .find_map(|t| match &t.what {
                Operand::Arg(n) => Some((t.span, n.clone())),
                _ => None,
            })
    }

    /// The program form for `funcs` (what [`crate::trace::plan`] does
    /// with the selection): every name resolved per function, every literal
    /// checked against each function's type. `trampoline`: the engine's
    /// programs are trampoline ones (every engine but kprobe-multi), which
    /// find arguments in declared order and read them at a function's exit
    /// too; kprobe-multi's find them in registers, then on the stack, and
    /// only at the entry.
    pub fn compile(&self, funcs: &[Func], trampoline: bool) -> Result<CompiledFilter, FilterError> {
        let err = |span: Span, kind| FilterError::at(&self.text, span, kind);
        if let (false, Some((span, name))) = (trampoline, self.exit_arg()) {
            return Err(err(span, FilterErrorKind::ArgumentAtExit(name)));
        }
        let mut terms = self.expr.clone().map_or_else(Vec::new, Expr::conjuncts);
        if let Some(ns) = self.min_latency {
            terms.push(Expr::Test(Test {
                what: Operand::Latency,
                span: Span::default(),
                mask: None,
                cmp: Cmp::Ge,
                value: Value::Ns(ns),
                value_span: Span::default(),
                bare: false,
            }));
        }
        let (entry, exit): (Vec<Expr>, Vec<Expr>) = terms.into_iter().partition(Expr::at_entry);
        let tests: Vec<&Test> = entry.iter().chain(&exit).flat_map(Expr::tests).collect();
        // Where a value is first read.
        let first = |what: &Operand| {
            tests
                .iter()
                .find(|t| t.what == *what)
                .map_or(Span::default(), |t| t.span)
        };
        // Variables: each argument name and ret once, in the order written.
        let mut names: Vec<Operand> = Vec::new();
        for t in &tests {
            if matches!(t.what, Operand::Arg(_) | Operand::Ret) && !names.contains(&t.what) {
                names.push(t.what.clone());
            }
        }
        if names.len() > MAX_VARS {
            return Err(err(
                first(&names[MAX_VARS]),
                FilterErrorKind::TooComplex(format!(
                    "{} arguments and ret read; at most {MAX_VARS}",
                    names.len()
                )),
            ));
        }
        // Where each function has each variable, or why it has not.
        let places: Vec<Vec<Result<Place, String>>> = funcs
            .iter()
            .map(|f| {
                names
                    .iter()
                    .map(|n| place(&f.proto, n, !trampoline))
                    .collect()
            })
            .collect();
        for (k, name) in names.iter().enumerate() {
            if places.iter().all(|p| p[k].is_err()) {
                return Err(err(first(name), no_function_has(name, funcs, &places, k)));
            }
        }
        // Each test's literal against each function that has its value.
        for t in &tests {
            let Some(k) = names.iter().position(|n| *n == t.what) else {
                continue;
            };
            for (f, p) in funcs.iter().zip(&places) {
                if let Ok(place) = &p[k] {
                    check_value(t, place, f).map_err(|kind| err(t.value_span, kind))?;
                }
            }
        }
        let errno = tests.iter().any(|t| t.what == Operand::Errno);
        if errno
            && funcs
                .iter()
                .all(|f| RetClass::of(f.proto.ret) == RetClass::None)
        {
            return Err(err(
                first(&Operand::Errno),
                FilterErrorKind::TypeMismatch(format!(
                    "no selected function returns an error code (a signed integer or a \
                     pointer), so errno is always 0 ({} returns {})",
                    funcs.first().map_or(String::new(), Func::display_name),
                    funcs.first().map_or("", |f| kind_name(f.proto.ret))
                )),
            ));
        }
        // The string literals, each once (the same bytes compared whole
        // and as a prefix are two).
        let mut strs: Vec<FilterStr> = Vec::new();
        for t in &tests {
            if let Value::Str(v) = &t.value {
                let lit = FilterStr {
                    bytes: v.as_bytes().to_vec(),
                    prefix: matches!(t.cmp, Cmp::Prefix | Cmp::NotPrefix),
                };
                if !strs.contains(&lit) {
                    if strs.len() == MAX_STRING_LITERALS {
                        return Err(err(
                            t.value_span,
                            FilterErrorKind::TooComplex(format!(
                                "more than {MAX_STRING_LITERALS} different string literals"
                            )),
                        ));
                    }
                    strs.push(lit);
                }
            }
        }
        let side = |terms: &[Expr], what: &str| -> Result<Vec<Op>, FilterError> {
            let mut ops = Vec::new();
            for (i, t) in terms.iter().enumerate() {
                emit(t, false, &names, &strs, &mut ops);
                if i > 0 {
                    ops.push(Op::And);
                }
            }
            if ops.len() > MAX_OPS {
                let span = terms
                    .first()
                    .and_then(|t| t.tests().first().map(|t| t.span))
                    .unwrap_or_default();
                return Err(err(
                    span,
                    FilterErrorKind::TooComplex(format!(
                        "{} operations at the {what}; at most {MAX_OPS}",
                        ops.len()
                    )),
                ));
            }
            Ok(ops)
        };
        let entry_ops = side(&entry, "entry")?;
        let exit_ops = side(&exit, "exit")?;
        let vars = if names.is_empty() {
            Vec::new()
        } else {
            places
                .iter()
                .map(|p| {
                    let mut v = [0u8; MAX_VARS];
                    for (d, place) in v.iter_mut().zip(p) {
                        *d = place.as_ref().map_or(0, Place::descriptor);
                    }
                    v
                })
                .collect()
        };
        let lacking = places
            .iter()
            .enumerate()
            .filter_map(|(index, p)| {
                p.iter().find_map(|r| r.as_ref().err()).map(|why| Lacking {
                    index,
                    why: why.clone(),
                })
            })
            .collect();
        Ok(CompiledFilter {
            text: self.text(),
            errno,
            names: names.iter().map(|n| n.name().to_string()).collect(),
            entry: entry_ops,
            exit: exit_ops,
            vars,
            strs,
            lacking,
        })
    }
}

/// Nanoseconds as a filter would write them: the largest unit that keeps
/// the number whole.
fn fmt_ns(ns: u64) -> String {
    for (unit, per) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
        if ns >= per && ns.is_multiple_of(per) {
            return format!("{}{unit}", ns / per);
        }
    }
    format!("{ns}ns")
}

/// The error for a variable no function has.
fn no_function_has(
    name: &Operand,
    funcs: &[Func],
    places: &[Vec<Result<Place, String>>],
    k: usize,
) -> FilterErrorKind {
    match name {
        Operand::Ret => FilterErrorKind::TypeMismatch(format!(
            "ret: no selected function returns a value ({} returns void)",
            funcs.first().map_or(String::new(), Func::display_name)
        )),
        Operand::Arg(n) => {
            // Some function has the name, where it cannot be read.
            let unreadable = funcs.iter().zip(places).find_map(|(f, p)| {
                f.proto.params.iter().any(|q| q.name == *n).then(|| {
                    format!(
                        "{} in {}",
                        p[k].as_ref().err().cloned().unwrap_or_default(),
                        f.display_name()
                    )
                })
            });
            match unreadable {
                Some(why) => FilterErrorKind::Unreadable {
                    name: n.clone(),
                    why,
                },
                None => FilterErrorKind::UnknownArgument {
                    name: n.clone(),
                    known: known_params(funcs),
                },
            }
        }
        _ => FilterErrorKind::TypeMismatch(format!("{} is not a variable", name.name())),
    }
}

/// `f(a, b, c); g(x); ... and N more` for the first functions.
fn known_params(funcs: &[Func]) -> String {
    const SHOWN: usize = 3;
    let mut parts: Vec<String> = funcs
        .iter()
        .take(SHOWN)
        .map(|f| {
            let params: Vec<&str> = f.proto.params.iter().map(|p| p.name.as_str()).collect();
            format!("{}({})", f.display_name(), params.join(", "))
        })
        .collect();
    if funcs.len() > SHOWN {
        parts.push(format!("and {} more", funcs.len() - SHOWN));
    }
    parts.join("; ")
}

/// Where a function has a variable: its argument slot (or the return
/// value), size in bytes and signedness, and whether it is a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Place {
    slot: u8,
    kind: ValueKind,
    bytes: u8,
    signed: bool,
    /// A `char *` argument: compared with string literals.
    string: bool,
}

impl Place {
    fn descriptor(&self) -> u8 {
        let log2 = self.bytes.trailing_zeros() as u8;
        FVAR_PRESENT
            | if self.signed { FVAR_SIGNED } else { 0 }
            | (log2 << FVAR_SIZE_SHIFT)
            | (self.slot & FVAR_SLOT_MASK)
    }

    /// The literals it takes: (low, high). A pointer takes a negative
    /// number as its two's complement (`ret == -2`: `ERR_PTR(-ENOENT)`).
    fn range(&self) -> (i128, i128) {
        let bits = u32::from(self.bytes) * 8;
        if self.kind == ValueKind::Bool {
            (0, 1)
        } else if self.kind == ValueKind::Pointer {
            (i128::from(i64::MIN), i128::from(u64::MAX))
        } else if self.signed {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        } else {
            (0, (1i128 << bits) - 1)
        }
    }

    /// How messages name what it is.
    fn kind_name(&self) -> &'static str {
        if self.string {
            "a string (`char *`)"
        } else {
            kind_name(self.kind)
        }
    }
}

/// How a kind is named in messages.
fn kind_name(k: ValueKind) -> &'static str {
    match k {
        ValueKind::Void => "void",
        ValueKind::Signed(8) => "a signed 8-bit integer",
        ValueKind::Signed(16) => "a signed 16-bit integer",
        ValueKind::Signed(32) => "a signed 32-bit integer",
        ValueKind::Signed(64) => "a signed 64-bit integer",
        ValueKind::Unsigned(8) => "an unsigned 8-bit integer",
        ValueKind::Unsigned(16) => "an unsigned 16-bit integer",
        ValueKind::Unsigned(32) => "an unsigned 32-bit integer",
        ValueKind::Unsigned(64) => "an unsigned 64-bit integer",
        ValueKind::Signed(_) | ValueKind::Unsigned(_) => "an integer of an odd size",
        ValueKind::Bool => "a bool",
        ValueKind::Pointer => "a pointer",
        ValueKind::Enum => "an enum (compared as a 32-bit int)",
        ValueKind::Aggregate => "a struct or union passed by value",
    }
}

/// Where `proto` has `name` (an argument, or the return value), or why a
/// filter cannot read it there: the argument's slot as a kprobe program
/// (`kprobe`) or a trampoline program finds it.
fn place(proto: &Proto, name: &Operand, kprobe: bool) -> Result<Place, String> {
    let (slot, kind, string) = match name {
        Operand::Ret if proto.ret == ValueKind::Void => return Err("returns void".into()),
        Operand::Ret => (FVAR_RET, proto.ret, false),
        Operand::Arg(n) => {
            let i = proto
                .params
                .iter()
                .position(|p| p.name == *n)
                .ok_or_else(|| format!("no argument `{n}`"))?;
            let p = &proto.params[i];
            let at = proto.arg_places(kprobe)[i];
            if at.slot >= MAX_ARG && p.kind != ValueKind::Aggregate {
                return Err(format!(
                    "`{n}` is in argument slot {} (filters read slots 1 to {MAX_ARG})",
                    at.slot + 1
                ));
            }
            let string = matches!(p.format, Format::Str { .. });
            (at.slot as u8, p.kind, string)
        }
        _ => return Err(format!("{} is not a variable", name.name())),
    };
    let (bytes, signed) = match kind {
        ValueKind::Signed(b @ (8 | 16 | 32 | 64)) => (b / 8, true),
        ValueKind::Unsigned(b @ (8 | 16 | 32 | 64)) => (b / 8, false),
        ValueKind::Bool => (1, false),
        ValueKind::Pointer => (8, false),
        ValueKind::Enum => (4, true),
        k => {
            return Err(format!(
                "`{}` is {} (filters compare integers, enums, bools, pointers and strings)",
                name.name(),
                kind_name(k)
            ))
        }
    };
    Ok(Place {
        slot,
        kind,
        bytes,
        signed,
        string,
    })
}

/// Whether test `t`'s literal suits the variable as function `f` has it.
fn check_value(t: &Test, p: &Place, f: &Func) -> Result<(), FilterErrorKind> {
    let name = t.what.name();
    let what = || format!("`{name}` is {} in {}", p.kind_name(), f.display_name());
    match &t.value {
        Value::Str(_) if p.string => Ok(()),
        Value::Str(_) => Err(FilterErrorKind::TypeMismatch(format!(
            "{}; a string compares only with a `char *` argument",
            what()
        ))),
        // Alone, a string argument is tested for NULL.
        _ if p.string && !t.bare => Err(FilterErrorKind::TypeMismatch(format!(
            "{}: compare it with a string (`{name} == \"...\"`, `{name} ^= \"...\"`)",
            what()
        ))),
        Value::Bool(_) if p.kind != ValueKind::Bool => Err(FilterErrorKind::TypeMismatch(format!(
            "{}; true and false compare with a bool",
            what()
        ))),
        Value::Int(v) => {
            let (lo, hi) = p.range();
            if (lo..=hi).contains(v) {
                Ok(())
            } else {
                Err(FilterErrorKind::OutOfRange(format!(
                    "{v} is not a value of `{name}`: {} ({lo} to {hi})",
                    what()
                )))
            }
        }
        _ => Ok(()),
    }
}

/// Appends the postfix form of `e` (negated with `not`); string literals
/// are indexes into `strs`.
fn emit(e: &Expr, not: bool, names: &[Operand], strs: &[FilterStr], ops: &mut Vec<Op>) {
    match e {
        Expr::Test(t) => {
            let src = match &t.what {
                Operand::Errno => FSRC_ERRNO,
                Operand::Latency => FSRC_LATENCY,
                other => names.iter().position(|n| n == other).unwrap_or(0) as u8,
            };
            let cmp = if not { t.cmp.negated() } else { t.cmp };
            let value = match &t.value {
                Value::Int(v) => *v as i64 as u64,
                Value::Ns(n) => *n,
                Value::Bool(b) => u64::from(*b),
                Value::Str(v) => {
                    let prefix = matches!(cmp, Cmp::Prefix | Cmp::NotPrefix);
                    let lit = strs
                        .iter()
                        .position(|l| l.prefix == prefix && l.bytes == v.as_bytes())
                        .unwrap_or(0) as u8;
                    ops.push(Op::Str {
                        src,
                        lit,
                        not: matches!(cmp, Cmp::Ne | Cmp::NotPrefix),
                    });
                    return;
                }
            };
            ops.push(Op::Test {
                src,
                mask: t.mask.unwrap_or(u64::MAX),
                cmp,
                value,
            });
        }
        Expr::Not(inner) => emit(inner, !not, names, strs, ops),
        Expr::And(a, b) | Expr::Or(a, b) => {
            emit(a, false, names, strs, ops);
            emit(b, false, names, strs, ops);
            ops.push(if matches!(e, Expr::And(..)) {
                Op::And
            } else {
                Op::Or
            });
            if not {
                ops.push(Op::Not);
            }
        }
    }
}

/// One operation of a side's program (`struct trace_filter_op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// Push `(value(src) & mask) cmp value`.
    Test {
        src: u8,
        mask: u64,
        cmp: Cmp,
        value: u64,
    },
    /// Push whether the string `value(src)` points at matches literal
    /// `lit` (equal to it, or starts with it: the literal says), negated
    /// with `not`.
    Str {
        src: u8,
        lit: u8,
        not: bool,
    },
    Not,
    And,
    Or,
}

impl Op {
    /// (kind, src, cmp, mask, value) as trace.h lays them out.
    pub(crate) fn encode(self) -> (u8, u8, u8, u64, u64) {
        match self {
            Op::Test {
                src,
                mask,
                cmp,
                value,
            } => (FOP_TEST, src, cmp as u8, mask, value),
            Op::Str { src, lit, not } => {
                let cmp = if not { Cmp::Ne } else { Cmp::Eq };
                (FOP_STR, src, cmp as u8, 0, u64::from(lit))
            }
            Op::Not => (FOP_NOT, 0, 0, 0, 0),
            Op::And => (FOP_AND, 0, 0, 0, 0),
            Op::Or => (FOP_OR, 0, 0, 0, 0),
        }
    }
}

/// A function the filter never passes, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lacking {
    /// Index in the selection.
    pub index: usize,
    /// What it lacks (`no argument \`count\``).
    pub why: String,
}

/// A filter in the program's form, for one function set.
#[derive(Clone, Debug)]
pub struct CompiledFilter {
    text: String,
    /// The variables, by index: argument names, `ret`.
    names: Vec<String>,
    pub(crate) entry: Vec<Op>,
    pub(crate) exit: Vec<Op>,
    /// Per function, each variable's descriptor (empty: none read).
    pub(crate) vars: Vec<[u8; MAX_VARS]>,
    /// The string literals, by index.
    pub(crate) strs: Vec<FilterStr>,
    /// Reads errno: the cookie carries the return class.
    pub(crate) errno: bool,
    lacking: Vec<Lacking>,
}

impl CompiledFilter {
    /// The filter as written (with a latency floor).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Functions it never passes: they lack an argument it names (or have
    /// it where it cannot be read).
    pub fn lacking(&self) -> &[Lacking] {
        &self.lacking
    }

    /// Whether part of it is decided at the exit (calls are then counted
    /// when they return).
    pub fn at_exit(&self) -> bool {
        !self.exit.is_empty()
    }

    /// What the BPF object takes.
    pub(crate) fn code(&self) -> FilterCode {
        FilterCode {
            entry: self.entry.iter().map(|o| o.encode()).collect(),
            exit: self.exit.iter().map(|o| o.encode()).collect(),
            vars: self.vars.clone(),
            strs: self.strs.clone(),
        }
    }

    /// The two sides' programs, one operation a line (`count > 4096`,
    /// `and`): what `-v`-style detail shows.
    pub fn listing(&self) -> (Vec<String>, Vec<String>) {
        let show = |ops: &[Op]| ops.iter().map(|o| self.op_text(o)).collect();
        (show(&self.entry), show(&self.exit))
    }

    fn op_text(&self, op: &Op) -> String {
        match *op {
            Op::Test {
                src,
                mask,
                cmp,
                value,
            } => {
                let name = match src {
                    FSRC_ERRNO => "errno",
                    FSRC_LATENCY => "latency",
                    k => self.names.get(usize::from(k)).map_or("?", String::as_str),
                };
                let mask = if mask == u64::MAX {
                    String::new()
                } else {
                    format!(" & {mask:#x}")
                };
                let value = match src {
                    FSRC_LATENCY => fmt_ns(value),
                    FSRC_ERRNO => {
                        errno_name(value as i32).map_or_else(|| value.to_string(), str::to_string)
                    }
                    _ if (value as i64) < 0 => (value as i64).to_string(),
                    _ => value.to_string(),
                };
                format!("{name}{mask} {} {value}", cmp.sym())
            }
            Op::Str { src, lit, not } => {
                let name = self.names.get(usize::from(src)).map_or("?", String::as_str);
                let (text, prefix) = self
                    .strs
                    .get(usize::from(lit))
                    .map_or((String::from("?"), false), |l| {
                        (super::output::quote(&l.bytes), l.prefix)
                    });
                match (prefix, not) {
                    (false, false) => format!("{name} == {text}"),
                    (false, true) => format!("{name} != {text}"),
                    (true, false) => format!("{name} ^= {text}"),
                    (true, true) => format!("!({name} ^= {text})"),
                }
            }
            Op::Not => "not".into(),
            Op::And => "and".into(),
            Op::Or => "or".into(),
        }
    }
}

impl fmt::Display for CompiledFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

// ---------------------------------------------------------------- model

/// What one call offers the filter, as the BPF program sees it: raw
/// argument slots, the cookie's return class, the function's descriptors,
/// the literals, and the memory strings are read from.
#[cfg(test)]
pub(crate) struct Call<'a> {
    pub args: [u64; MAX_ARG],
    pub ret: u64,
    pub latency: u64,
    pub class: RetClass,
    pub vars: &'a [u8; MAX_VARS],
    pub strs: &'a [FilterStr],
    /// The string a pointer points at (its bytes without the NUL); `None`:
    /// unreadable.
    pub memory: &'a dyn Fn(u64) -> Option<Vec<u8>>,
}

/// trace.bpf.c `filter_str`: the string read with its bound (the bytes
/// after its NUL are whatever the stack held, zeros when the read failed),
/// compared word by word under the literal's masks.
#[cfg(test)]
fn str_model(lit: &FilterStr, p: u64, memory: &dyn Fn(u64) -> Option<Vec<u8>>) -> u64 {
    const READ: usize = FILTER_STR_LEN + 8;
    let mut buf = [0xa5u8; READ];
    let n: i64 = match (p != 0).then(|| memory(p)).flatten() {
        Some(bytes) => {
            let k = bytes.len().min(READ - 1);
            buf[..k].copy_from_slice(&bytes[..k]);
            buf[k] = 0;
            k as i64 + 1
        }
        None => {
            buf = [0; READ];
            -14
        }
    };
    let (words, masks) = lit.words();
    let mut diff = 0u64;
    for i in 0..FILTER_STR_LEN / 8 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&buf[8 * i..8 * i + 8]);
        diff |= (u64::from_ne_bytes(w) ^ words[i]) & masks[i];
    }
    let nonzero = |x: u64| (x.wrapping_neg() | x) >> 63;
    (nonzero(diff) ^ 1) & (((n as u64) >> 63) ^ 1) & nonzero(n as u64)
}

/// The BPF program's evaluator (trace.bpf.c `filter_run`), step for step:
/// the same widening, the same branch-free comparisons, the same stack of
/// bits. `kprobe_exit`: a kprobe program at the exit, which reads no
/// argument.
#[cfg(test)]
pub(crate) fn run_model(ops: &[Op], c: &Call<'_>, at_exit: bool, kprobe_exit: bool) -> bool {
    fn nonzero(x: u64) -> u64 {
        (x.wrapping_neg() | x) >> 63
    }
    fn ult(a: u64, b: u64) -> u64 {
        let d = a.wrapping_sub(b);
        ((!a & b) | ((!a | b) & d)) >> 63
    }
    fn pick(c: u64, a: u64, b: u64) -> u64 {
        let m = c.wrapping_neg();
        (a & m) | (b & !m)
    }
    fn errno(class: RetClass, ret: u64) -> u64 {
        let class = (class.cookie_bits() >> crate::trace::errors::COOKIE_RET_SHIFT) & 3;
        let is_int = nonzero(class ^ 1) ^ 1;
        let v = pick(is_int, ret as u32 as i32 as i64 as u64, ret);
        let err = ult(v.wrapping_add(4095), 4095) & nonzero(class);
        v.wrapping_neg() & err.wrapping_neg()
    }
    // No program on this side: it passes every call.
    if ops.is_empty() {
        return true;
    }
    let (mut s, mut missing) = (0u64, 0u64);
    for op in ops.iter().take(MAX_OPS) {
        let (kind, src, cmp, mask, b) = op.encode();
        s = match kind {
            FOP_NOT => s ^ 1,
            FOP_STR => {
                let d = u64::from(c.vars[usize::from(src) & (MAX_VARS - 1)]);
                missing |= ((d & u64::from(FVAR_PRESENT)) >> 7) ^ 1;
                let slot = (d & u64::from(FVAR_SLOT_MASK)) as usize;
                let p = if kprobe_exit {
                    0
                } else {
                    c.args.get(slot).copied().unwrap_or(0)
                };
                let bit = c
                    .strs
                    .get(b as usize)
                    .map_or(0, |l| str_model(l, p, c.memory));
                (s << 1) | (bit ^ u64::from(cmp == Cmp::Ne as u8))
            }
            FOP_AND => (s >> 1) & (!1u64 | (s & 1)),
            FOP_OR => (s >> 1) | (s & 1),
            _ => {
                let mut sgn = 0;
                let v = match src {
                    FSRC_LATENCY => c.latency,
                    FSRC_ERRNO => errno(c.class, c.ret),
                    k => {
                        let d = u64::from(c.vars[usize::from(k) & (MAX_VARS - 1)]);
                        missing |= ((d & u64::from(FVAR_PRESENT)) >> 7) ^ 1;
                        let slot = d & u64::from(FVAR_SLOT_MASK);
                        let mut v = if kprobe_exit {
                            0
                        } else {
                            // bpf_get_func_arg() of a slot past the arguments: 0.
                            c.args.get(slot as usize).copied().unwrap_or(0)
                        };
                        if at_exit {
                            v = pick(nonzero(slot ^ u64::from(FVAR_RET)) ^ 1, c.ret, v);
                        }
                        let shift = 64 - (8u64 << ((d >> FVAR_SIZE_SHIFT) & 3));
                        sgn = (d & u64::from(FVAR_SIGNED)) >> 6;
                        let v = v << shift;
                        pick(sgn, ((v as i64) >> shift) as u64, v >> shift)
                    }
                } & mask;
                let (mut x, mut y) = (v, b);
                let bit = if cmp == Cmp::Eq as u8 {
                    nonzero(x ^ y) ^ 1
                } else if cmp == Cmp::Ne as u8 {
                    nonzero(x ^ y)
                } else {
                    if cmp == Cmp::Gt as u8 || cmp == Cmp::Le as u8 {
                        std::mem::swap(&mut x, &mut y);
                    }
                    let flip = sgn << 63;
                    let t = ult(x ^ flip, y ^ flip);
                    if cmp == Cmp::Le as u8 || cmp == Cmp::Ge as u8 {
                        t ^ 1
                    } else {
                        t
                    }
                };
                (s << 1) | bit
            }
        };
    }
    s & 1 & (missing ^ 1) == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::btf::Param;
    use crate::trace::pattern::Scope;
    use crate::trace::program::{Entry, ObjectConfig, TraceObject};
    use libbpf_rs::libbpf_sys;
    use proptest::prelude::*;

    fn func(name: &str, params: &[(&str, ValueKind)], ret: ValueKind) -> Func {
        Func {
            scope: Scope::Vmlinux,
            name: name.into(),
            btf_id: 1,
            proto: Proto {
                params: params
                    .iter()
                    .map(|(n, k)| Param {
                        name: (*n).into(),
                        kind: *k,
                        slots: 1,
                        format: Default::default(),
                    })
                    .collect(),
                ret,
                ret_format: Default::default(),
            },
            exact: true,
            addr: None,
        }
    }

    use ValueKind::{Aggregate, Bool, Enum, Pointer, Signed, Unsigned, Void};

    /// vfs_read-like, do_getpgid-like, a void one without `count`.
    fn funcs() -> Vec<Func> {
        vec![
            func(
                "vfs_read",
                &[
                    ("file", Pointer),
                    ("buf", Pointer),
                    ("count", Unsigned(64)),
                    ("pos", Pointer),
                ],
                Signed(64),
            ),
            func(
                "find_task",
                &[
                    ("vnr", Signed(32)),
                    ("flags", Unsigned(32)),
                    ("count", Signed(32)),
                ],
                Pointer,
            ),
            func(
                "notify",
                &[("on", Bool), ("how", Enum), ("flags", Unsigned(32))],
                Void,
            ),
        ]
    }

    fn compile(text: &str) -> Result<CompiledFilter, FilterError> {
        Filter::parse(text)?.compile(&funcs(), true)
    }

    fn listing(text: &str) -> (Vec<String>, Vec<String>) {
        compile(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .listing()
    }

    fn strs(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn tests_compile_to_postfix_per_side() {
        assert_eq!(listing("ret < 0"), (vec![], strs(&["ret < 0"])));
        assert_eq!(
            listing("errno == EINVAL"),
            (vec![], strs(&["errno == EINVAL"]))
        );
        assert_eq!(listing("errno == 2"), (vec![], strs(&["errno == ENOENT"])));
        assert_eq!(
            listing("count > 4096 && flags & 0x80"),
            (strs(&["count > 4096", "flags & 0x80 != 0", "and"]), vec![])
        );
        assert_eq!(
            listing("flags & 0x3 == 0x1 || vnr <= -5"),
            (strs(&["flags & 0x3 == 1", "vnr <= -5", "or"]), vec![])
        );
        // Top-level && terms go to the side that can decide them.
        assert_eq!(
            listing("count > 1 && ret == 0 && (flags & 1 || !vnr)"),
            (
                strs(&["count > 1", "flags & 0x1 != 0", "vnr == 0", "or", "and"]),
                strs(&["ret == 0"])
            )
        );
        // An argument in one || with an exit value: read at the exit.
        assert_eq!(
            listing("!(count > 4096 || ret < 0)"),
            (vec![], strs(&["count > 4096", "ret < 0", "or", "not"]))
        );
        // ! of a test is its opposite comparison; !! cancels.
        assert_eq!(listing("!count"), (strs(&["count == 0"]), vec![]));
        assert_eq!(listing("!(vnr < 3)"), (strs(&["vnr >= 3"]), vec![]));
        assert_eq!(listing("!!(vnr >= 3)"), (strs(&["vnr >= 3"]), vec![]));
        assert_eq!(
            listing("latency > 1ms && latency <= 1.5s"),
            (vec![], strs(&["latency > 1ms", "latency <= 1500ms", "and"]))
        );
        assert_eq!(
            listing("on == true || how == 3"),
            (strs(&["on == 1", "how == 3", "or"]), vec![])
        );
    }

    #[test]
    fn a_latency_floor_is_one_more_exit_term() {
        let ms = Duration::from_millis(10);
        let f = Filter::parse("count > 5").unwrap().and_min_latency(ms);
        assert!(f.needs_exit() && !f.reads_args_at_exit());
        assert_eq!(f.text(), "count > 5 && latency >= 10ms");
        let c = f.compile(&funcs(), false).unwrap();
        assert_eq!(
            c.listing(),
            (strs(&["count > 5"]), strs(&["latency >= 10ms"]))
        );
        let f = Filter::parse("count > 5 || vnr < 0")
            .unwrap()
            .and_min_latency(ms);
        assert_eq!(f.text(), "(count > 5 || vnr < 0) && latency >= 10ms");
        let f = Filter::min_latency(Duration::from_micros(1500));
        assert_eq!(f.text(), "latency >= 1500us");
        assert_eq!(
            f.compile(&funcs(), false).unwrap().listing(),
            (vec![], strs(&["latency >= 1500us"]))
        );
        assert!(!Filter::parse("count > 5").unwrap().needs_exit());
    }

    #[test]
    fn names_resolve_per_function() {
        let c = compile("count > 4096 && flags & 0x80 && ret != 0").unwrap();
        // Variables: count, flags, ret.
        let d = |slot: u8, bytes: u8, signed: bool| {
            FVAR_PRESENT
                | if signed { FVAR_SIGNED } else { 0 }
                | ((bytes.trailing_zeros() as u8) << FVAR_SIZE_SHIFT)
                | slot
        };
        assert_eq!(c.vars.len(), 3);
        assert_eq!(
            c.vars[0][..3],
            [d(2, 8, false), 0, d(FVAR_RET, 8, true)],
            "vfs_read: count is its third argument, no flags, returns long"
        );
        assert_eq!(
            c.vars[1][..3],
            [d(2, 4, true), d(1, 4, false), d(FVAR_RET, 8, false)],
            "find_task: count is a signed int, flags unsigned, returns a pointer"
        );
        assert_eq!(c.vars[2][..3], [0, d(2, 4, false), 0]);
        assert!(c.vars.iter().all(|v| v[3..] == [0; MAX_VARS - 3]));
        let lacking: Vec<(usize, &str)> = c
            .lacking()
            .iter()
            .map(|l| (l.index, l.why.as_str()))
            .collect();
        assert_eq!(
            lacking,
            [(0, "no argument `flags`"), (2, "no argument `count`")]
        );
        // Nothing read per function: no variables at all.
        let c = compile("errno == EINVAL && latency > 1us").unwrap();
        assert!(c.vars.is_empty() && c.errno && c.lacking().is_empty());
        assert!(!compile("count > 1").unwrap().errno);
    }

    /// (filter, column, width, the error's text)
    fn bad(text: &str) -> (usize, usize, String) {
        match compile(text) {
            Ok(c) => panic!("{text:?} compiled: {:?}", c.listing()),
            Err(e) => {
                assert_eq!(e.text, text);
                (e.column, e.width, e.kind.to_string())
            }
        }
    }

    #[test]
    fn syntax_errors_point_at_the_token() {
        let cases: &[(&str, usize, usize, &str)] = &[
            ("", 1, 1, "expected a test (e.g. `ret < 0`, `errno == EINVAL`, `latency > 1ms`, `count > 4096`), found the end"),
            ("count >", 8, 1, "expected a value after `>`, found the end"),
            ("(count > 1", 1, 1, "this `(` is never closed"),
            ("(count > 1 ret", 12, 3, "expected `)`, `&&` or `||`, found `ret`"),
            ("count > 1)", 10, 1, "`)` without a matching `(`"),
            ("count = 1", 7, 1, "expected `==` (a comparison), found `=`"),
            ("count > 1 | ret", 11, 1, "expected `||` (or), found `|`"),
            ("count 5", 7, 1, "expected `&&`, `||` or the end, found `5`"),
            ("count > 1 &&", 13, 1, "expected a test (e.g. `ret < 0`, `errno == EINVAL`, `latency > 1ms`, `count > 4096`), found the end"),
            ("count > 0x", 9, 2, "expected a number (4096, 0x80, -1) or a duration (10ms; units ns, us, ms, s), found `0x`"),
            ("count > 12abc", 9, 5, "expected a number (4096, 0x80, -1) or a duration (10ms; units ns, us, ms, s), found `12abc`"),
            ("errno == EFOO", 10, 4, "expected an errno name (EINVAL, ENOENT, ...), found `EFOO`"),
            ("count > 1 $", 11, 1, "expected a test, an operator or a value, found `$`"),
            ("buf == \"abc", 8, 4, "expected a closing `\"`, found the end"),
            ("count > ret", 9, 3, "expected a value: a number, a duration (10ms), an errno name, true, false or a string, found `ret`"),
            ("count & -1", 9, 2, "expected a mask: a number from 0 to 2^64-1 (e.g. `0x80`), found `-1`"),
            ("() || ret", 2, 1, "expected a test (e.g. `ret < 0`, `errno == EINVAL`, `latency > 1ms`, `count > 4096`), found `)`"),
            ("ret == - 1", 8, 1, "expected a number after `-`, found `-`"),
            ("name ^ \"x\"", 6, 1, "expected `^=` (starts with), found `^`"),
            ("name == \"/etc/passwd", 9, 12, "expected a closing `\"`, found the end"),
        ];
        each_fails_so(cases);
    }

    /// Each filter fails to compile at its column and width, saying so.
    fn each_fails_so(cases: &[(&str, usize, usize, &str)]) {
        for &(text, col, width, msg) in cases {
            assert_eq!(bad(text), (col, width, msg.to_string()), "{text:?}");
        }
    }

    #[test]
    fn type_errors_point_at_the_value() {
        let cases: &[(&str, usize, usize, &str)] = &[
            ("latency > 5", 11, 1, "type mismatch: latency is a duration: write a unit (`5ms`; ns, us, ms, s)"),
            ("latency", 1, 7, "type mismatch: latency needs a comparison with a duration (e.g. `latency > 1ms`)"),
            ("latency == EINVAL", 12, 6, "type mismatch: latency is a duration (e.g. `10ms`), not `EINVAL`"),
            ("count > 1ms", 9, 3, "type mismatch: `1ms` is a duration; only latency compares with one"),
            ("ret == EINVAL", 8, 6, "type mismatch: `EINVAL` is an errno name: compare errno with it (`errno == EINVAL`), or ret with a number (`ret == -22`)"),
            ("errno == -22", 10, 3, "out of range: errno is positive (`errno == 22`; or `ret == -22`)"),
            ("errno == 5000", 10, 4, "out of range: errno is 0 to 4095"),
            ("errno & 1", 7, 1, "type mismatch: a mask (`&`) applies to arguments and ret, not to errno"),
            ("ret == \"x\"", 8, 3, "type mismatch: ret is a number; a string compares only with a `char *` argument"),
            ("count == \"x\"", 10, 3, "type mismatch: `count` is an unsigned 64-bit integer in vfs_read; a string compares only with a `char *` argument"),
            ("buf == \"/etc/passwd\"", 8, 13, "type mismatch: `buf` is a pointer in vfs_read; a string compares only with a `char *` argument"),
            ("count > -1", 9, 2, "out of range: -1 is not a value of `count`: `count` is an unsigned 64-bit integer in vfs_read (0 to 18446744073709551615)"),
            ("vnr == 3000000000", 8, 10, "out of range: 3000000000 is not a value of `vnr`: `vnr` is a signed 32-bit integer in find_task (-2147483648 to 2147483647)"),
            ("on == 2", 7, 1, "out of range: 2 is not a value of `on`: `on` is a bool in notify (0 to 1)"),
            ("count == true", 10, 4, "type mismatch: `count` is an unsigned 64-bit integer in vfs_read; true and false compare with a bool"),
            ("ret == -9223372036854775809", 8, 20, "out of range: -9223372036854775809 is not a value of `ret`: `ret` is a signed 64-bit integer in vfs_read (-9223372036854775808 to 9223372036854775807)"),
            ("ret == 18446744073709551615", 8, 20, "out of range: 18446744073709551615 is not a value of `ret`: `ret` is a signed 64-bit integer in vfs_read (-9223372036854775808 to 9223372036854775807)"),
        ];
        each_fails_so(cases);
    }

    #[test]
    fn names_no_function_has_are_errors() {
        assert_eq!(
            bad("cnt > 4096 && ret < 0"),
            (
                1,
                3,
                "unknown argument `cnt`: no selected function has it (vfs_read(file, buf, \
                 count, pos); find_task(vnr, flags, count); notify(on, how, flags))"
                    .to_string()
            )
        );
        let wide = func(
            "do_mmap",
            &[
                ("file", Pointer),
                ("addr", Unsigned(64)),
                ("len", Unsigned(64)),
                ("prot", Unsigned(64)),
                ("flags", Unsigned(64)),
                ("vm_flags", Unsigned(64)),
                ("pgoff", Unsigned(64)),
            ],
            Unsigned(64),
        );
        let after = func(
            "f",
            &[
                ("range", Aggregate),
                ("n", Signed(32)),
                ("big", Signed(128)),
            ],
            Unsigned(8),
        );
        let e = |text: &str, funcs: &[Func]| {
            let e = Filter::parse(text)
                .unwrap()
                .compile(funcs, true)
                .unwrap_err();
            (e.column, e.kind.to_string())
        };
        // The 7th argument, on the stack: slot 6 for either kind of program.
        for trampoline in [true, false] {
            let c = Filter::parse("len > 0 && pgoff > 0")
                .unwrap()
                .compile(std::slice::from_ref(&wide), trampoline)
                .unwrap();
            assert_eq!(c.vars[0][1] & FVAR_SLOT_MASK, 6);
        }
        // After a struct passed by value (two slots): a trampoline finds
        // `n` in slot 2, a kprobe program in the register after the struct.
        let mut after = after;
        after.proto.params[0].slots = 2;
        let slot = |trampoline| {
            let c = Filter::parse("n == 1")
                .unwrap()
                .compile(std::slice::from_ref(&after), trampoline)
                .unwrap();
            c.vars[0][0] & FVAR_SLOT_MASK
        };
        assert_eq!((slot(true), slot(false)), (2, 2));
        assert_eq!(
            e("range == 1", std::slice::from_ref(&after)),
            (
                1,
                "argument `range` cannot be read: `range` is a struct or union passed by \
                 value (filters compare integers, enums, bools, pointers and strings) in f"
                    .into()
            )
        );
        // Past the 12 slots: six 16-byte structs take them all.
        let past: Vec<(String, ValueKind)> = (0..6)
            .map(|i| (format!("s{i}"), Aggregate))
            .chain([("last".to_string(), Signed(32))])
            .collect();
        let past: Vec<(&str, ValueKind)> = past.iter().map(|(n, k)| (n.as_str(), *k)).collect();
        let mut past = func("past", &past, Void);
        for p in &mut past.proto.params[..6] {
            p.slots = 2;
        }
        assert_eq!(
            e("last == 1", std::slice::from_ref(&past)),
            (
                1,
                "argument `last` cannot be read: `last` is in argument slot 13 (filters read \
                 slots 1 to 12) in past"
                    .into()
            )
        );
        assert_eq!(
            e("errno == EINVAL", std::slice::from_ref(&after)),
            (
                1,
                "type mismatch: no selected function returns an error code (a signed \
                 integer or a pointer), so errno is always 0 (f returns an unsigned 8-bit \
                 integer)"
                    .into()
            )
        );
        let void = func("g", &[("x", Signed(32))], Void);
        assert_eq!(
            e("x > 1 && ret > 0", &[void]),
            (
                10,
                "type mismatch: ret: no selected function returns a value (g returns void)".into()
            )
        );
        // One function has it: the others never pass, and are named.
        let h = func("h", &[("last", Unsigned(64))], Void);
        let c = Filter::parse("last > 0")
            .unwrap()
            .compile(&[past, h, wide], true)
            .unwrap();
        assert_eq!(
            c.lacking(),
            [
                Lacking {
                    index: 0,
                    why: "`last` is in argument slot 13 (filters read slots 1 to 12)".into()
                },
                Lacking {
                    index: 2,
                    why: "no argument `last`".into()
                }
            ]
        );
    }

    #[test]
    fn the_program_has_room_for_so_much() {
        // 9 tests and 8 ands: 17 operations at the entry.
        let long = (0..9)
            .map(|i| format!("count != {i}"))
            .collect::<Vec<_>>()
            .join(" && ");
        assert_eq!(
            bad(&long),
            (
                1,
                5,
                "too complex: 17 operations at the entry; at most 16".to_string()
            )
        );
        // 8 of each fit.
        let fits = (0..8)
            .map(|i| format!("count != {i}"))
            .collect::<Vec<_>>()
            .join(" && ");
        assert_eq!(compile(&fits).unwrap().listing().0.len(), 15);
        let many: Vec<(String, ValueKind)> =
            (0..6).map(|i| (format!("a{i}"), Signed(32))).collect();
        let params: Vec<(&str, ValueKind)> = many.iter().map(|(n, k)| (n.as_str(), *k)).collect();
        let f1 = func("f1", &params, Signed(32));
        let f2 = func(
            "f2",
            &[("b0", Signed(32)), ("b1", Signed(32)), ("b2", Signed(32))],
            Void,
        );
        let text = "a0 || a1 || a2 || a3 || a4 || a5 || b0 || b1 || b2";
        let e = Filter::parse(text)
            .unwrap()
            .compile(&[f1, f2], true)
            .unwrap_err();
        assert_eq!(
            (e.column, e.kind.to_string()),
            (
                49,
                "too complex: 9 arguments and ret read; at most 8".into()
            )
        );
    }

    #[test]
    fn kprobe_engines_read_no_argument_at_exit() {
        let f = Filter::parse("vnr == 5 && (count > 4096 || ret == 0)").unwrap();
        assert!(f.reads_args_at_exit());
        let e = f.compile(&funcs(), false).unwrap_err();
        assert_eq!(
            (e.column, e.width),
            (14, 5),
            "points at the argument read at the exit"
        );
        assert!(matches!(e.kind, FilterErrorKind::ArgumentAtExit(ref n) if n == "count"));
        // Split by &&: the argument is decided at the entry.
        let f = Filter::parse("vnr == 5 && ret == 0").unwrap();
        assert!(!f.reads_args_at_exit());
        assert_eq!(
            f.compile(&funcs(), false).unwrap().listing(),
            (strs(&["vnr == 5"]), strs(&["ret == 0"]))
        );
    }

    /// do_sys_openat2-like (a user string), a kernel-string one, and
    /// vfs_read and friends (no string).
    fn string_funcs() -> Vec<Func> {
        let mut open = func(
            "do_sys_openat2",
            &[("dfd", Signed(32)), ("filename", Pointer), ("how", Pointer)],
            Signed(64),
        );
        open.proto.params[1].format = Format::Str { user: true };
        let mut k = func(
            "getname_kernel",
            &[("filename", Pointer), ("len", Unsigned(64))],
            Pointer,
        );
        k.proto.params[0].format = Format::Str { user: false };
        let mut v = vec![open, k];
        v.extend(funcs());
        v
    }

    fn string_compile(text: &str) -> Result<CompiledFilter, FilterError> {
        Filter::parse(text)?.compile(&string_funcs(), true)
    }

    #[test]
    fn strings_compare_in_the_kernel() {
        let listing = |text: &str| {
            string_compile(text)
                .unwrap_or_else(|e| panic!("{text}: {e}"))
                .listing()
        };
        assert_eq!(
            listing("filename == \"/etc/passwd\" && dfd < 0"),
            (
                strs(&["filename == \"/etc/passwd\"", "dfd < 0", "and"]),
                vec![]
            )
        );
        assert_eq!(
            listing("!(filename ^= \"/etc/\") || filename != \"/tmp/x\""),
            (
                strs(&["!(filename ^= \"/etc/\")", "filename != \"/tmp/x\"", "or"]),
                vec![]
            )
        );
        // With the return value: at the exit on trampolines.
        assert_eq!(
            listing("filename ^= \"/etc/\" && ret < 0"),
            (strs(&["filename ^= \"/etc/\""]), strs(&["ret < 0"]))
        );
        // Alone: not NULL.
        assert_eq!(listing("!filename"), (strs(&["filename == 0"]), vec![]));
        // One literal per bytes and kind: the same text whole and as a prefix is two.
        let c =
            string_compile("filename == \"/etc\" || filename != \"/etc\" || filename ^= \"/etc\"")
                .unwrap();
        assert_eq!(
            c.strs,
            [
                FilterStr {
                    bytes: b"/etc".to_vec(),
                    prefix: false
                },
                FilterStr {
                    bytes: b"/etc".to_vec(),
                    prefix: true
                }
            ]
        );
        assert_eq!(c.code().strs, c.strs);
        // The longest literal fits; where `filename` is in each function.
        let longest = "x".repeat(MAX_STRING_LITERAL);
        let c = string_compile(&format!("filename == \"{longest}\"")).unwrap();
        assert_eq!(c.strs[0].bytes.len(), 63);
        assert_eq!(c.vars[0][0] & FVAR_SLOT_MASK, 1);
        assert_eq!(c.vars[1][0] & FVAR_SLOT_MASK, 0);
        assert_eq!(
            c.lacking().iter().map(|l| l.index).collect::<Vec<_>>(),
            [2, 3, 4]
        );
        // Escapes.
        let c = string_compile(r#"filename == "a\"b\\c""#).unwrap();
        assert_eq!(c.strs[0].bytes, br#"a"b\c"#);
    }

    #[test]
    fn string_literals_compare_eight_bytes_at_a_time() {
        let lit = |b: &[u8], prefix| FilterStr {
            bytes: b.to_vec(),
            prefix,
        };
        let (w, m) = lit(b"/etc/passwd", false).words();
        assert_eq!(w[0], u64::from_ne_bytes(*b"/etc/pas"));
        assert_eq!(w[1], u64::from_ne_bytes(*b"swd\0\0\0\0\0"));
        assert_eq!(w[2..], [0; 6]);
        // Equality compares the NUL after the bytes too, a prefix does not.
        assert_eq!(
            m[..2],
            [
                u64::MAX,
                u64::from_ne_bytes([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0])
            ]
        );
        let (_, m) = lit(b"/etc/passwd", true).words();
        assert_eq!(m[1], u64::from_ne_bytes([0xff, 0xff, 0xff, 0, 0, 0, 0, 0]));
        let (_, m) = lit(b"", true).words();
        assert_eq!(m, [0; 8], "an empty prefix: every string starts with it");
        let (_, m) = lit(&[b'x'; 63], false).words();
        assert_eq!(m, [u64::MAX; 8]);
    }

    #[test]
    fn string_errors_point_at_the_token() {
        let too_long = format!("filename == \"{}\"", "x".repeat(64));
        let cases: &[(&str, usize, usize, &str)] = &[
            ("filename == 5", 13, 1, "type mismatch: `filename` is a string (`char *`) in do_sys_openat2: compare it with a string (`filename == \"...\"`, `filename ^= \"...\"`)"),
            ("dfd > 0 && filename != -1", 24, 2, "type mismatch: `filename` is a string (`char *`) in do_sys_openat2: compare it with a string (`filename == \"...\"`, `filename ^= \"...\"`)"),
            ("dfd == \"x\"", 8, 3, "type mismatch: `dfd` is a signed 32-bit integer in do_sys_openat2; a string compares only with a `char *` argument"),
            ("how ^= \"/\"", 8, 3, "type mismatch: `how` is a pointer in do_sys_openat2; a string compares only with a `char *` argument"),
            ("filename < \"b\"", 10, 1, "type mismatch: strings compare with `==`, `!=` or `^=` (starts with), not `<`"),
            ("filename >= \"b\"", 10, 2, "type mismatch: strings compare with `==`, `!=` or `^=` (starts with), not `>=`"),
            ("dfd ^= 5", 8, 1, "type mismatch: `^=` (starts with) compares a string argument with a string literal (`filename ^= \"/etc/\"`), not `5`"),
            ("filename & 1 == \"x\"", 17, 3, "type mismatch: a mask (`&`) applies to numbers; a string compares whole (`==`, `!=`) or by its start (`^=`)"),
            ("ret ^= \"x\"", 8, 3, "type mismatch: ret is a number; a string compares only with a `char *` argument"),
            ("errno == \"x\"", 10, 3, "type mismatch: errno compares with a number or an errno name (EINVAL), not `\"x\"`"),
            ("latency != \"1ms\"", 12, 5, "type mismatch: latency is a duration (e.g. `10ms`), not `\"1ms\"`"),
            (&too_long, 13, 66, "out of range: a string literal is at most 63 bytes (the kernel compares 64 with its NUL); this one is 64"),
            ("filename == \"a\" || filename == \"b\" || filename == \"c\" || filename == \"d\" || filename == \"e\"", 89, 3, "too complex: more than 4 different string literals"),
            ("filenme == \"/etc\"", 1, 7, "unknown argument `filenme`: no selected function has it (do_sys_openat2(dfd, filename, how); getname_kernel(filename, len); vfs_read(file, buf, count, pos); and 2 more)"),
        ];
        for &(text, col, width, msg) in cases {
            let got = match string_compile(text) {
                Ok(c) => panic!("{text:?} compiled: {:?}", c.listing()),
                Err(e) => (e.column, e.width, e.kind.to_string()),
            };
            assert_eq!(got, (col, width, msg.to_string()), "{text:?}");
        }
        // The same name, a string in one function and an integer in another.
        let mut mixed = string_funcs();
        mixed.push(func("h", &[("filename", Signed(32))], Void));
        let e = Filter::parse("filename ^= \"/etc\"")
            .unwrap()
            .compile(&mixed, true)
            .unwrap_err();
        assert_eq!(
            (e.column, e.kind.to_string()),
            (
                13,
                "type mismatch: `filename` is a signed 32-bit integer in h; a string compares \
                 only with a `char *` argument"
                    .into()
            )
        );
    }

    #[test]
    fn the_pointer_draws_a_caret_under_the_token() {
        let e = compile("count > 1 && cnt < 5").unwrap_err();
        assert_eq!(e.to_string().split(':').next(), Some("column 14"));
        assert_eq!(
            e.pointer("  "),
            "  count > 1 && cnt < 5\n               ^^^"
        );
        let e = compile("(ret < 0").unwrap_err();
        assert_eq!(e.pointer(""), "(ret < 0\n^");
    }

    #[test]
    fn durations_are_whole_nanoseconds() {
        assert_eq!(parse_ns("10ms"), Some(10_000_000));
        assert_eq!(parse_ns("1.5us"), Some(1_500));
        assert_eq!(parse_ns("2s"), Some(2_000_000_000));
        assert_eq!(parse_ns("0.000000001s"), Some(1));
        assert_eq!(parse_ns("7ns"), Some(7));
        assert_eq!(parse_ns("1.5ns"), None);
        assert_eq!(parse_ns("1.ms"), None);
        assert_eq!(parse_ns(".5ms"), None);
        assert_eq!(parse_ns("10"), None);
        assert_eq!(parse_ns("-1ms"), None);
        assert_eq!(parse_ns("99999999999999999999s"), None);
        assert_eq!(parse_duration(" 20ms"), Some(Duration::from_millis(20)));
        assert_eq!(parse_int("0x80"), Some(128));
        assert_eq!(parse_int("-0x10"), Some(-16));
        assert_eq!(parse_int("18446744073709551615"), Some(u64::MAX.into()));
        assert_eq!(parse_int("18446744073709551616"), None);
        assert_eq!(parse_int("1_000"), None);
    }

    // ------------------------------------------------------ the model

    /// Raw register values of one call, as the BPF program reads them.
    #[derive(Clone, Debug)]
    struct Raw {
        args: [u64; MAX_ARG],
        ret: u64,
        latency: u64,
    }

    /// The value of `kind` in a 64-bit register whose upper bits are
    /// whatever the caller left there.
    fn typed(raw: u64, kind: ValueKind) -> i128 {
        match kind {
            Signed(8) => i128::from(raw as i8),
            Signed(16) => i128::from(raw as i16),
            Signed(32) | Enum => i128::from(raw as i32),
            Signed(64) => i128::from(raw as i64),
            Unsigned(8) | Bool => i128::from(raw as u8),
            Unsigned(16) => i128::from(raw as u16),
            Unsigned(32) => i128::from(raw as u32),
            _ => i128::from(raw),
        }
    }

    /// The filter's meaning, straight from the tree, with native
    /// comparisons on exact integers: the BPF evaluator must agree.
    fn meaning(f: &Filter, func: &Func, r: &Raw) -> bool {
        fn value(t: &Test, func: &Func, r: &Raw) -> Option<i128> {
            let (raw, kind) = match &t.what {
                Operand::Latency => return Some(i128::from(r.latency)),
                Operand::Errno => {
                    return Some(match RetClass::of(func.proto.ret).failure(r.ret) {
                        Some(crate::trace::errors::Failure::Errno(e)) => i128::from(e),
                        _ => 0,
                    })
                }
                Operand::Ret if func.proto.ret == Void => return None,
                Operand::Ret => (r.ret, func.proto.ret),
                Operand::Arg(n) => {
                    let i = func.proto.params.iter().position(|p| p.name == *n)?;
                    let at = func.proto.arg_places(false)[i];
                    if at.slot >= MAX_ARG || func.proto.params[i].kind == Aggregate {
                        return None;
                    }
                    (r.args[at.slot], func.proto.params[i].kind)
                }
            };
            let v = typed(raw, kind);
            Some(match t.mask {
                None => v,
                // The mask applies to the two's complement of the value;
                // the result keeps the type's signedness.
                Some(m) => {
                    let bits = (v as i64 as u64) & m;
                    if matches!(kind, Signed(_) | Enum) {
                        i128::from(bits as i64)
                    } else {
                        i128::from(bits)
                    }
                }
            })
        }
        fn eval(e: &Expr, func: &Func, r: &Raw) -> Option<bool> {
            Some(match e {
                Expr::Test(t) => {
                    let v = value(t, func, r)?;
                    if let Value::Str(lit) = &t.value {
                        // NULL or unreadable: equal to nothing, starts with nothing.
                        let s = memory(v as u64);
                        let lit = lit.as_bytes();
                        return Some(match t.cmp {
                            Cmp::Eq => s.is_some_and(|s| s == lit),
                            Cmp::Ne => s.is_none_or(|s| s != lit),
                            Cmp::Prefix => s.is_some_and(|s| s.starts_with(lit)),
                            _ => s.is_none_or(|s| !s.starts_with(lit)),
                        });
                    }
                    let pointer = match &t.what {
                        Operand::Ret => func.proto.ret == Pointer,
                        Operand::Arg(n) => func
                            .proto
                            .params
                            .iter()
                            .any(|p| p.name == *n && p.kind == Pointer),
                        _ => false,
                    };
                    let lit = match &t.value {
                        // Two's complement, compared unsigned.
                        Value::Int(i) if pointer && *i < 0 => *i + (1i128 << 64),
                        Value::Int(i) => *i,
                        Value::Ns(n) => i128::from(*n),
                        Value::Bool(b) => i128::from(*b),
                        Value::Str(_) => return None,
                    };
                    match t.cmp {
                        Cmp::Eq => v == lit,
                        Cmp::Ne => v != lit,
                        Cmp::Lt => v < lit,
                        Cmp::Le => v <= lit,
                        Cmp::Gt => v > lit,
                        Cmp::Ge => v >= lit,
                        Cmp::Prefix | Cmp::NotPrefix => return None,
                    }
                }
                Expr::Not(e) => !eval(e, func, r)?,
                // Both sides: a missing name anywhere fails the filter.
                Expr::And(a, b) => {
                    let (a, b) = (eval(a, func, r)?, eval(b, func, r)?);
                    a && b
                }
                Expr::Or(a, b) => {
                    let (a, b) = (eval(a, func, r)?, eval(b, func, r)?);
                    a || b
                }
            })
        }
        let floor = f.min_latency.is_none_or(|ns| r.latency >= ns);
        let expr = f.expr.as_ref().map_or(Some(true), |e| eval(e, func, r));
        expr.unwrap_or(false) && floor
    }

    /// Both sides of the compiled filter on one call, through the model of
    /// the BPF evaluator.
    fn compiled_passes(c: &CompiledFilter, i: usize, func: &Func, r: &Raw, kprobe: bool) -> bool {
        let none = [0u8; MAX_VARS];
        let call = Call {
            args: r.args,
            ret: r.ret,
            latency: r.latency,
            class: RetClass::of(func.proto.ret),
            vars: c.vars.get(i).unwrap_or(&none),
            strs: &c.strs,
            memory: &memory,
        };
        run_model(&c.entry, &call, false, false) && run_model(&c.exit, &call, true, kprobe)
    }

    const FILTERS: &[&str] = &[
        "count > 4096",
        "count <= 4096 && count >= 7",
        "vnr < 0",
        "vnr == -5 || vnr == 127",
        "b > 200 || b & 0x81 == 0x80",
        "c < -100 || c == 127 || c & 0x40",
        "w == 0xffff || w < 3",
        "!(vnr >= -1)",
        "flags & 0x80",
        "flags & 0x80000003 == 0x80000001",
        "flags & 0xffffffff00000000",
        "ret < 0",
        "ret > -4096 && ret != 0",
        "ret == 0",
        "errno == ESRCH",
        "errno",
        "!errno && ret",
        "errno > 11 || errno < 3",
        "latency >= 10ms",
        "latency < 1us || latency > 1s",
        "count > 5 && (ret < 0 || latency > 2ms)",
        "!(count > 5 || errno == EINVAL)",
        "on && how == -1",
        "on == false || how > 7",
        "buf == 0 || file != 0",
        "pos > 0x7fffffffffffffff",
        // Strings, and arguments on the stack.
        "name == \"/etc/passwd\"",
        "name != \"/etc/passwd\" && dfd < 0",
        "name ^= \"/etc/\"",
        "!(name ^= \"/etc/\") || other == \"\"",
        "name == \"/etc/passwd\" || name ^= \"/etc/passwd\" || name ^= \"/tmp\"",
        "!(name != \"/tmp/x\" && other ^= \"\")",
        "name && !other",
        "name == \"0123456789012345678901234567890123456789012345678901234567890ab\"",
        "name ^= \"0123456789012345678901234567890123456789012345678901234567890ab\"",
        "pgoff == 5 && seventh < -1",
        "tenth & 0xff == 0x7f || name == \"/tmp/x\"",
    ];

    /// Strings at known pointers (user and kernel ones), the rest
    /// unreadable: what [`Call::memory`] reads in the model.
    const STRINGS: &[(u64, &str)] = &[
        (0x1000, "/etc/passwd"),
        (0x1008, "/etc/passwd2"),
        (0x1010, "/etc/"),
        (0x1018, "/etc"),
        (0x1020, ""),
        (0xffff_8880_0000_1000, "/tmp/x"),
        (0xffff_8880_0000_1008, "/etc/passwd"),
        // 63 bytes: the longest literal, whole.
        (
            0xffff_8880_0000_1010,
            "0123456789012345678901234567890123456789012345678901234567890ab",
        ),
        // 64 and 100 bytes starting with it: equal to no literal.
        (
            0xffff_8880_0000_1018,
            "0123456789012345678901234567890123456789012345678901234567890abc",
        ),
        (
            0xffff_8880_0000_1020,
            "0123456789012345678901234567890123456789012345678901234567890ab\
             0123456789012345678901234567890123456",
        ),
    ];

    fn memory(p: u64) -> Option<Vec<u8>> {
        STRINGS
            .iter()
            .find(|(at, _)| *at == p)
            .map(|(_, s)| s.as_bytes().to_vec())
    }

    /// Functions of every kind the filters above read.
    fn model_funcs() -> Vec<Func> {
        let mut v = funcs();
        v.push(func(
            "small",
            &[
                ("count", Signed(16)),
                ("b", Unsigned(8)),
                ("c", Signed(8)),
                ("w", Unsigned(16)),
                ("vnr", Signed(32)),
                ("flags", Unsigned(32)),
            ],
            Signed(32),
        ));
        v.push(func(
            "wide",
            &[
                ("count", Signed(64)),
                ("vnr", Signed(64)),
                ("flags", Unsigned(64)),
            ],
            Unsigned(32),
        ));
        v.push(func("flag", &[("on", Bool), ("how", Enum)], Bool));
        // Strings, and twelve arguments (six on the stack).
        let mut open = func(
            "open",
            &[
                ("dfd", Signed(32)),
                ("name", Pointer),
                ("a2", Unsigned(64)),
                ("a3", Unsigned(64)),
                ("a4", Unsigned(64)),
                ("other", Pointer),
                ("pgoff", Unsigned(64)),
                ("seventh", Signed(64)),
                ("a8", Unsigned(64)),
                ("tenth", Unsigned(16)),
                ("a10", Unsigned(64)),
                ("a11", Unsigned(64)),
            ],
            Signed(32),
        );
        for i in [1, 5] {
            open.proto.params[i].format = Format::Str { user: false };
        }
        v.push(open);
        // The same names elsewhere, other slots, a string that is not one.
        let mut short = func(
            "short",
            &[("other", Pointer), ("name", Pointer), ("dfd", Signed(64))],
            Void,
        );
        for i in [0, 1] {
            short.proto.params[i].format = Format::Str { user: true };
        }
        v.push(short);
        v
    }

    fn raw() -> impl Strategy<Value = Raw> {
        // Mostly edges: small numbers, errnos, sign bits, garbage above 32 bits.
        let word = prop_oneof![
            any::<u64>(),
            (-4100i64..4100).prop_map(|v| v as u64),
            (0u64..=0xffff_ffff, any::<u32>()).prop_map(|(lo, hi)| lo | (u64::from(hi) << 32)),
            (-4100i32..4100, any::<u32>())
                .prop_map(|(lo, hi)| u64::from(lo as u32) | (u64::from(hi) << 32)),
            Just(0x8000_0000_0000_0000u64),
            Just(0x7fff_ffffu64),
            Just(0x80u64),
            Just(4096u64),
            Just(4097u64),
        ];
        let latency = prop_oneof![
            any::<u64>(),
            0u64..3_000_000,
            Just(10_000_000u64),
            Just(9_999_999u64),
            Just(1_000u64),
            Just(999u64),
        ];
        // Pointers at strings, and NULL, for the string arguments.
        let strings: Vec<u64> = STRINGS.iter().map(|(p, _)| *p).chain([0]).collect();
        let arg = prop_oneof![word.clone(), proptest::sample::select(strings)];
        (proptest::array::uniform12(arg), word, latency).prop_map(|(args, ret, latency)| Raw {
            args,
            ret,
            latency,
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// The model of the BPF evaluator (postfix ops, stack of bits,
        /// branch-free comparisons, per-function widening) means what the
        /// expression means, on every function of every kind: compiled for
        /// all of them at once (per-function variables, functions lacking
        /// one) where the literals suit them all, and for each alone.
        #[test]
        fn the_evaluator_means_what_the_expression_says(r in raw()) {
            let funcs = model_funcs();
            for text in FILTERS {
                for floor in [None, Some(Duration::from_millis(10))] {
                    let mut f = Filter::parse(text).unwrap();
                    if let Some(d) = floor {
                        f = f.and_min_latency(d);
                    }
                    let mut compiled = 0;
                    for kprobe in [false, true] {
                        let check = |c: &CompiledFilter, i: usize, func: &Func| {
                            (compiled_passes(c, i, func, &r, kprobe), meaning(&f, func, &r))
                        };
                        if let Ok(c) = f.compile(&funcs, !kprobe) {
                            compiled += 1;
                            for (i, func) in funcs.iter().enumerate() {
                                let (got, want) = check(&c, i, func);
                                prop_assert_eq!(got, want, "{} (floor {:?}, kprobe {}) on {} \
                                    of all, {:?}", text, floor, kprobe, func.name, r);
                            }
                        }
                        for func in &funcs {
                            if let Ok(c) = f.compile(std::slice::from_ref(func), !kprobe) {
                                compiled += 1;
                                let (got, want) = check(&c, 0, func);
                                prop_assert_eq!(got, want, "{} (floor {:?}, kprobe {}) on {} \
                                    alone, {:?}", text, floor, kprobe, func.name, r);
                            }
                        }
                    }
                    prop_assert!(compiled >= 3, "{} compiled only {} times", text, compiled);
                }
            }
        }
    }

    #[test]
    fn widening_ignores_what_the_caller_left_above() {
        let funcs = model_funcs();
        let f = Filter::parse("vnr < 0").unwrap();
        let c = f.compile(&funcs, true).unwrap();
        let find_task = 1;
        let mut r = Raw {
            args: [0; MAX_ARG],
            ret: 0,
            latency: 0,
        };
        // int -5 in edi, garbage in the upper half of rdi.
        r.args[0] = 0xdead_beef_ffff_fffb;
        assert!(compiled_passes(&c, find_task, &funcs[find_task], &r, false));
        // 0x7fffffff is positive as an int, whatever is above it.
        r.args[0] = 0xffff_ffff_7fff_ffff;
        assert!(!compiled_passes(
            &c,
            find_task,
            &funcs[find_task],
            &r,
            false
        ));
        // errno: -3 in eax of an int function, -3 of a long one, ERR_PTR, NULL.
        let c = Filter::parse("errno == ESRCH")
            .unwrap()
            .compile(&funcs, true)
            .unwrap();
        let small = 3;
        r.ret = 0x0000_0000_ffff_fffd;
        assert!(compiled_passes(&c, small, &funcs[small], &r, false));
        assert!(
            !compiled_passes(&c, 0, &funcs[0], &r, false),
            "a long: not -3"
        );
        r.ret = -3i64 as u64;
        assert!(compiled_passes(&c, 0, &funcs[0], &r, false));
        assert!(
            compiled_passes(&c, find_task, &funcs[find_task], &r, false),
            "ERR_PTR(-ESRCH)"
        );
        r.ret = 0;
        assert!(
            !compiled_passes(&c, find_task, &funcs[find_task], &r, false),
            "NULL"
        );
        // A function without the name never passes, even under a `!`.
        let c = Filter::parse("!(flags & 1)")
            .unwrap()
            .compile(&funcs, true)
            .unwrap();
        r.args = [0; MAX_ARG];
        assert!(
            !compiled_passes(&c, 0, &funcs[0], &r, false),
            "vfs_read has no flags"
        );
        assert!(compiled_passes(&c, find_task, &funcs[find_task], &r, false));
    }

    /// Whether a failed load is the kernel refusing BPF to us, not the
    /// verifier refusing the program.
    fn not_permitted(errno: Option<i32>) -> bool {
        matches!(errno, Some(libc::EPERM | libc::ENOSYS | libc::EOPNOTSUPP))
    }

    /// The kprobe entry points, with filters of every kind and the options
    /// they combine with, go through the running kernel's verifier: these
    /// hosts refuse trampolines, not kprobe programs (the trampoline ones
    /// load in the guest checks). Skipped, saying so, where the kernel
    /// loads no BPF program for us at all.
    #[test]
    fn kprobe_programs_with_filters_pass_the_verifier() {
        let funcs = [
            func(
                "vfs_read",
                &[("file", Pointer), ("buf", Pointer), ("count", Unsigned(64))],
                Signed(64),
            ),
            func("find_task", &[("vnr", Signed(32)), ("how", Enum)], Pointer),
            {
                let mut f = func(
                    "do_mmap_like",
                    &[
                        ("name", Pointer),
                        ("a1", Unsigned(64)),
                        ("a2", Unsigned(64)),
                        ("a3", Unsigned(64)),
                        ("a4", Unsigned(64)),
                        ("a5", Unsigned(64)),
                        ("pgoff", Unsigned(64)),
                        ("tag", Pointer),
                    ],
                    Signed(32),
                );
                f.proto.params[0].format = Format::Str { user: true };
                f.proto.params[7].format = Format::Str { user: false };
                f
            },
        ];
        let filters = [
            "name == \"/etc/passwd\"",
            "pgoff == 5 && tag ^= \"/etc/\"",
            // Four literals, strings on the stack, sixteen operations.
            "name != \"a\" && !(name ^= \"b\") && (tag == \"c\" || tag ^= \"d\") && pgoff > 3 \
             && name && count != 1 && vnr != 2",
            "(name == \"/etc/passwd\" || pgoff == 7) && ret < 0",
            "count > 4096",
            "vnr < 0 || how & 0x3 == 2",
            "errno == ESRCH",
            "ret < 0 && latency > 1ms",
            "count > 1 && vnr == 3 && how != 4 && !(ret == 0 || errno == EINVAL) && latency < 1s",
            // 16 operations at the entry: the most a side holds.
            "count != 1 && count != 2 && count != 3 && count != 4 && count != 5 && count != 6 \
             && count != 7 && count != 8",
        ];
        // (latency, capture, stacks, errors, graph)
        let options = [
            (false, false, false, false, false),
            (true, true, false, false, false),
            (true, false, true, true, true),
        ];
        let mut loaded = 0;
        for text in filters {
            let f = Filter::parse(text).unwrap();
            let code = f.compile(&funcs, false).unwrap().code();
            for (latency, capture, stacks, errors, graph) in options {
                let exit = f.needs_exit() || latency || capture || errors || graph;
                let cfg = ObjectConfig {
                    nr_funcs: funcs.len(),
                    latency,
                    capture,
                    kstack: stacks,
                    ustack: stacks,
                    errors,
                    graph,
                    filter: Some(code.clone()),
                    ..Default::default()
                };
                let (entry, attach) = if exit {
                    (Entry::KprobeSession, libbpf_sys::BPF_TRACE_KPROBE_SESSION)
                } else {
                    (Entry::KprobeEntry, libbpf_sys::BPF_TRACE_KPROBE_MULTI)
                };
                let obj = match TraceObject::load(&cfg, &[entry]) {
                    Ok(o) => o,
                    Err(crate::trace::Error::Kernel { step, source })
                        if not_permitted(source.raw_os_error()) =>
                    {
                        eprintln!(
                            "skipped: this kernel makes no BPF map for us ({step}: {source})"
                        );
                        return;
                    }
                    Err(e) => panic!("{text}: {}", crate::error_text(&e)),
                };
                match obj.load_prog(entry, attach, None, 0) {
                    Ok(_) => loaded += 1,
                    Err(e) if not_permitted(e.errno()) => {
                        eprintln!("skipped: this kernel loads no kprobe program for us ({e})");
                        return;
                    }
                    Err(e) => panic!(
                        "{text} ({entry:?}, latency {latency}, capture {capture}, stacks \
                         {stacks}, errors {errors}, graph {graph}): the verifier said {e}"
                    ),
                }
            }
        }
        assert_eq!(loaded, filters.len() * options.len());
    }
}
