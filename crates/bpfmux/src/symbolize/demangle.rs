//! Symbol names as people read them: C++ (Itanium) and Rust names
//! demangled, clone parts included (`f.cold`, `f.part.0`, `f.isra.0`,
//! `f.constprop.0` come out as c++filt writes them: `f() [clone .cold]`).
//!
//! Only names that start as mangled names do (`_Z`, Rust's `_R`) are
//! handed to a demangler: demanglers accept more than that, and would turn
//! the C function `u8_xxxxxxx` into `_xxxxxxx` (read as a vendor type).

use std::borrow::Cow;

/// `name` demangled, or as it is when it is not a mangled name. A version
/// or PLT tail (`@plt`, `@@GLIBC_2.2.5`) is kept after the demangled name.
pub fn demangle(name: &str) -> Cow<'_, str> {
    let (base, tail) = name.split_at(name.find('@').unwrap_or(name.len()));
    if !(base.starts_with("_Z") || base.starts_with("_R")) {
        return Cow::Borrowed(name);
    }
    // Rust first: its legacy names are valid C++ names too, and the C++
    // reading keeps the hash.
    if let Ok(d) = rustc_demangle::try_demangle(base) {
        return Cow::Owned(format!("{d:#}{tail}"));
    }
    let cpp = base
        .starts_with("_Z")
        .then(|| cpp_demangle::Symbol::new(base).ok()?.demangle().ok())
        .flatten();
    match cpp {
        Some(d) => Cow::Owned(d + tail),
        None => Cow::Borrowed(name),
    }
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn mangled_names_and_their_clones() {
        let cases = [
            ("_ZN2hb12parse_numberEPKc", "hb::parse_number(char const*)"),
            (
                "_ZN2hb12parse_numberEPKc.cold",
                "hb::parse_number(char const*) [clone .cold]",
            ),
            ("_Z3fooi.part.0", "foo(int) [clone .part.0]"),
            ("_Z3fooi.isra.0", "foo(int) [clone .isra.0]"),
            ("_Z3fooi.constprop.0", "foo(int) [clone .constprop.0]"),
            ("_Z3fooi@plt", "foo(int)@plt"),
            ("_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write"),
            ("_RNvCs1234_7mycrate3foo", "mycrate::foo"),
        ];
        for (m, want) in cases {
            assert_eq!(demangle(m), want, "{m}");
        }
    }

    #[test]
    fn plain_names_stay_as_they_are() {
        for n in [
            "u8_xxxxxxx",
            "main",
            "_start",
            "__restore_rt",
            "memcpy@plt",
            "_Znot_mangled",
            "_Z",
            "S_xxx",
            "Z3fooi",
        ] {
            assert_eq!(demangle(n), n);
        }
    }
}
