//! Strict parsing of command-line values: addresses, seconds, errnos. Anything
//! the forms below do not describe exactly is an error naming the value,
//! so a typo never turns into a different address or a huge wait.

/// An address: hexadecimal digits, optionally after `0x`/`0X`, nothing else
/// (no sign, no other radix prefix, no spaces, at most 16 digits of value).
/// Unprefixed digits starting `0b` are refused: they read as binary.
pub fn parse_addr(s: &str) -> Result<u64, String> {
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    let bad = |why: &str| Err(format!("{s:?} is not an address: {why}"));
    if digits.len() == s.len() && (s.starts_with("0b") || s.starts_with("0B")) {
        return bad("a binary prefix; addresses are hexadecimal (write 0x0b... if meant)");
    }
    if digits.is_empty() {
        return bad("no hexadecimal digits (expected e.g. 0x7f3a12345678)");
    }
    // from_str_radix would take a leading '+': check the digits ourselves.
    if let Some(c) = digits.chars().find(|c| !c.is_ascii_hexdigit()) {
        return bad(&format!(
            "{c:?} is not a hexadecimal digit (expected e.g. 0x7f3a12345678)"
        ));
    }
    match u64::from_str_radix(digits, 16) {
        Ok(v) => Ok(v),
        Err(_) => bad("more than 64 bits"),
    }
}

/// Longest `--duration` (a year): `Instant + Duration` must not overflow.
pub const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

/// Seconds as a decimal number (`5`, `0.5`, `1e-3`), finite, 0 to a year.
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    // f64's parser also takes "nan", "inf", "infinity" and a leading '+'.
    if !s
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-'))
    {
        return Err(format!("{s:?} is not a number of seconds"));
    }
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(0.0..=MAX_SECONDS).contains(&v) {
        return Err(format!(
            "{s} seconds is out of range (0 to {MAX_SECONDS} seconds, a year)"
        ));
    }
    Ok(v)
}

/// Seconds between updates: like [`parse_seconds`], at least a millisecond.
pub fn parse_interval(s: &str) -> Result<f64, String> {
    let v = parse_seconds(s)?;
    if v < 1e-3 {
        return Err(format!("{s} seconds is too short (at least 0.001)"));
    }
    Ok(v)
}

/// An errno: its name in any case (`ENOMEM`, `eio`, the kernel's own such
/// as `ENOTSUPP`), or its number (`12`, `-12`), 1 to 4095.
pub fn parse_errno(s: &str) -> Result<i32, String> {
    use bpfmux::trace::errors::{errno_by_name, errno_name};
    if let Some(e) = errno_by_name(s) {
        return Ok(e);
    }
    let n: i32 = s
        .trim_start_matches('-')
        .parse()
        .map_err(|_| format!("{s}: neither an errno name (ENOMEM) nor a number"))?;
    if errno_name(n).is_none() && !(1..=4095).contains(&n) {
        return Err(format!("{s}: not an error number (1 to 4095)"));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_hex_forms() {
        assert_eq!(parse_addr("0x10"), Ok(16));
        assert_eq!(parse_addr("0XfF"), Ok(255));
        assert_eq!(parse_addr("ff"), Ok(255));
        assert_eq!(parse_addr("0xffffffffffffffff"), Ok(u64::MAX));
        assert_eq!(parse_addr("0x0000000000000000001"), Ok(1));
        assert_eq!(parse_addr("0x0b101"), Ok(0xb101));
    }

    #[test]
    fn rejects_what_is_not_an_address() {
        for s in [
            "",
            "0x",
            "0xzz",
            "+10",
            "0x+10",
            "-1",
            "0x-1",
            "0b101",
            "0o17",
            " 10",
            "10 ",
            "1_000",
            "0x1ffffffffffffffff",
            "0x0x10",
            "１０",
        ] {
            let e = parse_addr(s).expect_err(s);
            assert!(e.contains("not an address"), "{s}: {e}");
        }
    }

    #[test]
    fn seconds_are_finite_and_bounded() {
        assert_eq!(parse_seconds("0"), Ok(0.0));
        assert_eq!(parse_seconds("2.5"), Ok(2.5));
        assert_eq!(parse_seconds("1e-3"), Ok(0.001));
        for s in [
            "nan", "NaN", "inf", "-inf", "infinity", "1e308", "-1", "+5", "", " 1", "1s", "0x10",
            "31536001",
        ] {
            assert!(parse_seconds(s).is_err(), "{s}");
        }
        assert!(parse_interval("0").is_err());
        assert!(parse_interval("0.0001").is_err());
        assert_eq!(parse_interval("0.5"), Ok(0.5));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Every u64 printed in hex (any case, with 0x, or without where
        /// that does not read as binary) parses back.
        #[test]
        fn hex_round_trips(v: u64, upper: bool, prefix: bool) {
            let digits = if upper { format!("{v:X}") } else { format!("{v:x}") };
            let prefix = prefix || digits.to_ascii_lowercase().starts_with("0b");
            let s = if prefix { format!("0x{digits}") } else { digits };
            prop_assert_eq!(parse_addr(&s), Ok(v));
        }

        /// Arbitrary text never panics; what parses is exactly hex digits
        /// after an optional 0x and has that value.
        #[test]
        fn arbitrary_text_is_strict(s in "\\PC{0,24}") {
            if let Ok(v) = parse_addr(&s) {
                let d = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(&s);
                prop_assert!(!d.is_empty() && d.chars().all(|c| c.is_ascii_hexdigit()));
                prop_assert!(d.len() < s.len() || !s.to_ascii_lowercase().starts_with("0b"));
                prop_assert_eq!(u64::from_str_radix(d, 16).ok(), Some(v));
            }
        }

        /// Whatever parses as seconds is finite and in range.
        #[test]
        fn seconds_never_escape_the_range(s in "[-+0-9.eEinfa]{0,12}") {
            if let Ok(v) = parse_seconds(&s) {
                prop_assert!(v.is_finite() && (0.0..=MAX_SECONDS).contains(&v));
            }
        }
    }
}
