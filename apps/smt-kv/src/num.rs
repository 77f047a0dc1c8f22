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
    // Not `write!`: its formatting machinery cost ~220 instructions a
    // number (callgrind, YCSB C 64 B: ~18 numbers per read, the lengths
    // of a reply's array and bulk strings); `itoa` writes the digits
    // without it.
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Parses a float as Redis's `string2d` does (`strtod`, then checks):
/// the whole string, no leading white space, not NaN, and not a finite
/// number too large or too small to be anything but infinity or zero
/// (`1e400`, `1e-400`). `inf`, `-inf`, `+inf` and `infinity` (any case)
/// are scores. Hexadecimal floats, which C's `strtod` also reads, are not.
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    // Rust's parser refuses white space and trailing bytes, as the
    // checks after strtod do.
    let text = std::str::from_utf8(s).ok()?;
    let value: f64 = text.parse().ok()?;
    let unsigned = text.trim_start_matches(['+', '-']);
    let literal_infinity = unsigned.starts_with(['i', 'I']);
    if value.is_nan() || (value.is_infinite() && !literal_infinity) {
        return None;
    }
    let mantissa = unsigned.split(['e', 'E']).next().unwrap_or("");
    let underflow = value == 0.0 && mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b));
    (!underflow).then_some(value)
}

/// Appends `d` as Redis 7.0 writes a score in RESP2: C's `%.17g`
/// (17 significant digits, trailing zeros dropped, an exponent below
/// 1e-4 and from 1e17 on), and `inf` / `-inf`.
pub fn push_f64(out: &mut Vec<u8>, d: f64) {
    use std::io::Write;
    const DIGITS: i32 = 17;
    if d.is_infinite() {
        out.extend_from_slice(if d > 0.0 { b"inf" } else { b"-inf" });
        return;
    }
    // The exponent %e would print with 17 significant digits decides
    // between the two forms, as C specifies for %g.
    let sci = format!("{d:.16e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..DIGITS).contains(&exp) {
        let decimals = usize::try_from(DIGITS - 1 - exp).unwrap_or(0);
        let fixed = format!("{d:.decimals$}");
        out.extend_from_slice(strip_fraction_zeros(&fixed).as_bytes());
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        // Writing into a Vec cannot fail.
        let _ = write!(
            out,
            "{}e{sign}{:02}",
            strip_fraction_zeros(mantissa),
            exp.unsigned_abs()
        );
    }
}

/// `1.2500` → `1.25`, `3.000` → `3`: %g's trailing-zero removal.
fn strip_fraction_zeros(s: &str) -> &str {
    if !s.contains('.') {
        return s;
    }
    s.trim_end_matches('0').trim_end_matches('.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_written_as_redis_writes_them_and_read_back() {
        for n in [0, 1, -1, 9, 10, -10, 12_345, i64::MAX, i64::MIN] {
            let mut out = b"x".to_vec();
            push_i64(&mut out, n);
            assert_eq!(out, format!("x{n}").into_bytes());
            assert_eq!(parse_i64(&out[1..]), Some(n));
        }
    }

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

    #[test]
    fn floats_are_read_as_string2d_does() {
        for (s, want) in [
            (&b"1"[..], Some(1.0)),
            (b"-1.5", Some(-1.5)),
            (b"+.5", Some(0.5)),
            (b"1e3", Some(1000.0)),
            (b"inf", Some(f64::INFINITY)),
            (b"-INF", Some(f64::NEG_INFINITY)),
            (b"+infinity", Some(f64::INFINITY)),
            (b"1e-310", Some(1e-310)),
            (b"0e-999", Some(0.0)),
            (b"nan", None),
            (b"1e400", None),
            (b"1e-400", None),
            (b" 1", None),
            (b"1 ", None),
            (b"", None),
            (b"1x", None),
            (b"0x10", None),
        ] {
            assert_eq!(parse_f64(s), want, "{:?}", String::from_utf8_lossy(s));
        }
    }

    #[test]
    fn floats_are_written_as_printf_17g() {
        let show = |d: f64| {
            let mut out = Vec::new();
            push_f64(&mut out, d);
            String::from_utf8(out).unwrap()
        };
        for (d, want) in [
            (3.0, "3"),
            (-0.0, "-0"),
            (1.1, "1.1000000000000001"),
            (0.1, "0.10000000000000001"),
            (123.456, "123.456"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (1.5e300, "1.5000000000000001e+300"),
            (1e-4, "0.0001"),
            (1e-5, "1.0000000000000001e-05"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (9007199254740993.0, "9007199254740992"),
        ] {
            assert_eq!(show(d), want, "{d:e}");
        }
    }
}
