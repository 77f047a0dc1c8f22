//! Numbers as Redis reads and writes them.
//!
//! Redis is strict about integers in arguments and stored values: no sign
//! other than a leading `-`, no leading zeros, no spaces, at most 20
//! characters. Clients see exactly which strings count as numbers (an
//! `INCR` on `"01"` fails), so the rules are reproduced here rather than
//! borrowed from `str::parse`, which accepts `+1` and `007`.

/// The longest decimal `i64`, with its sign: `-9223372036854775808`.
const MAX_I64_CHARS: usize = 20;

/// Parses a strict decimal `i64`: `0`, or an optional `-` then a digit
/// 1–9 then digits, in range. Anything else is `None`.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > MAX_I64_CHARS {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    if !matches!(digits.first(), Some(b'1'..=b'9')) {
        return None;
    }
    let magnitude = parse_digits(digits)?;
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// Digits only, into a `u64` without overflow.
fn parse_digits(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |acc, &d| {
        if !d.is_ascii_digit() {
            return None;
        }
        acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// Parses a `SCAN` cursor the way C's `strtoul` does and Redis then
/// checks it: an optional sign (`-` wraps around, as in C), decimal digits,
/// nothing after them, no leading white space, no overflow. The empty
/// string is cursor 0, as in Redis.
pub fn parse_cursor(s: &[u8]) -> Option<u64> {
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, s),
    };
    if digits.is_empty() {
        // strtoul read nothing: only the empty string ends there.
        return s.is_empty().then_some(0);
    }
    let value = parse_digits(digits)?;
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

/// Appends `n` in decimal.
pub fn push_i64(out: &mut Vec<u8>, n: i64) {
    use std::io::Write;
    // Writing into a Vec cannot fail.
    let _ = write!(out, "{n}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_integers_follow_redis() {
        for (s, want) in [
            (&b"0"[..], Some(0)),
            (b"-1", Some(-1)),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"9223372036854775808", None),
            (b"-0", None),
            (b"01", None),
            (b"+1", None),
            (b" 1", None),
            (b"1 ", None),
            (b"", None),
            (b"-", None),
            (b"1e3", None),
            (b"000000000000000000001", None),
        ] {
            assert_eq!(parse_i64(s), want, "{:?}", String::from_utf8_lossy(s));
        }
    }

    #[test]
    fn cursors_follow_strtoul() {
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b"007"), Some(7));
        assert_eq!(parse_cursor(b"+5"), Some(5));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"+"), None);
        assert_eq!(parse_cursor(b" 1"), None);
        assert_eq!(parse_cursor(b"1x"), None);
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
    }
}
