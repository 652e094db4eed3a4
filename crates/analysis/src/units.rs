//! Values users type on the command line for the analyses (durations, addresses), parsed with
//! errors that say what was expected.

/// `10us`, `1.5ms`, `2s`, `250ns` or a plain number of nanoseconds.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (num, scale) = [
        ("ns", 1.0),
        ("us", 1e3),
        ("µs", 1e3),
        ("ms", 1e6),
        ("s", 1e9),
    ]
    .iter()
    .find_map(|(suffix, scale)| t.strip_suffix(suffix).map(|n| (n, *scale)))
    .unwrap_or((t, 1.0));
    match num.trim().parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok((v * scale).round() as u64),
        _ => Err(format!(
            "`{text}` is not a duration (examples: 250ns, 10us, 1.5ms, 2s)"
        )),
    }
}

/// A hexadecimal (`0x…`) or decimal address.
pub fn parse_address(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => t.parse(),
    };
    parsed.map_err(|_| format!("`{text}` is not an address (hex like 0x55d0c0a4b040, or decimal)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_unit_or_are_nanoseconds() {
        assert_eq!(parse_duration("250ns"), Ok(250));
        assert_eq!(parse_duration("10us"), Ok(10_000));
        assert_eq!(parse_duration("10µs"), Ok(10_000));
        assert_eq!(parse_duration("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_duration(" 2s "), Ok(2_000_000_000));
        assert_eq!(parse_duration("42"), Ok(42));
        for bad in ["", "ms", "-1ms", "1e999s", "NaN", "ten"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains("is not a duration"), "{bad}: {e}");
        }
    }

    #[test]
    fn addresses_are_hex_or_decimal() {
        assert_eq!(parse_address("0x55d0c0a4b040"), Ok(0x55d0_c0a4_b040));
        assert_eq!(parse_address("0XfF"), Ok(255));
        assert_eq!(parse_address("4096"), Ok(4096));
        for bad in ["0x", "0xzz", "-1", "x10"] {
            let e = parse_address(bad).unwrap_err();
            assert!(e.contains("is not an address"), "{bad}: {e}");
        }
    }
}
