//! Parsing addresses given on the command line.

/// Hexadecimal, with or without `0x`.
pub fn parse_addr(s: &str) -> Result<u64, String> {
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    u64::from_str_radix(digits, 16).map_err(|e| format!("{s:?} is not a hexadecimal address: {e}"))
}

#[cfg(test)]
mod tests {
    use super::parse_addr;

    #[test]
    fn parses_hex_forms() {
        assert_eq!(parse_addr("0x10"), Ok(16));
        assert_eq!(parse_addr("ff"), Ok(255));
        assert!(parse_addr("0xzz").is_err());
        assert!(parse_addr("").is_err());
        assert!(parse_addr("0x1ffffffffffffffff").is_err());
    }
}
