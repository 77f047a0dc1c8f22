//! Splitting an inline command into words, with Redis's quoting rules
//! (those of `redis-cli` and of `sdssplitargs`):
//!
//! - words are separated by white space; an unquoted word also ends at
//!   `\r` or `\t`, and a `"` or `'` inside it opens a quoted part;
//! - in `"double quotes"`: `\xHH` is a byte, `\n \r \t \b \a` the control
//!   characters, `\` before anything else that character;
//! - in `'single quotes'`: only `\'` is an escape;
//! - a closing quote must be followed by white space or the end of the
//!   line; an unclosed quote makes the whole line invalid.

/// White space as C's `isspace` sees it.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The words of `line`, or `None` for unbalanced quotes.
pub fn split(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut words = Vec::new();
    let mut at = 0;
    loop {
        while line.get(at).is_some_and(|&b| is_space(b)) {
            at += 1;
        }
        if at >= line.len() {
            return Some(words);
        }
        let (word, next) = word(line, at)?;
        words.push(word);
        at = next;
    }
}

/// Where a word's scanner stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Double,
    Single,
}

/// One word starting at `at`: its bytes and where scanning resumes.
fn word(line: &[u8], mut at: usize) -> Option<(Vec<u8>, usize)> {
    let mut out = Vec::new();
    let mut quote = Quote::None;
    loop {
        let Some(&b) = line.get(at) else {
            // The line ended: fine outside quotes, unbalanced inside.
            return (quote == Quote::None).then_some((out, at));
        };
        match quote {
            Quote::None => match b {
                b' ' | b'\r' | b'\t' => return Some((out, at + 1)),
                b'"' => quote = Quote::Double,
                b'\'' => quote = Quote::Single,
                _ => out.push(b),
            },
            Quote::Double => match (b, line.get(at + 1).copied()) {
                (b'\\', Some(b'x')) if hex_byte(line.get(at + 2..at + 4)).is_some() => {
                    out.extend(hex_byte(line.get(at + 2..at + 4)));
                    at += 3;
                }
                (b'\\', Some(escaped)) => {
                    out.push(unescape(escaped));
                    at += 1;
                }
                (b'"', next) => return closing_quote(out, next, at),
                _ => out.push(b),
            },
            Quote::Single => match (b, line.get(at + 1).copied()) {
                (b'\\', Some(b'\'')) => {
                    out.push(b'\'');
                    at += 1;
                }
                (b'\'', next) => return closing_quote(out, next, at),
                _ => out.push(b),
            },
        }
        at += 1;
    }
}

/// A closing quote at `at` ends the word if white space or the end of the
/// line follows it.
fn closing_quote(word: Vec<u8>, next: Option<u8>, at: usize) -> Option<(Vec<u8>, usize)> {
    match next {
        Some(b) if !is_space(b) => None,
        _ => Some((word, at + 1)),
    }
}

fn unescape(b: u8) -> u8 {
    match b {
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'b' => 0x08,
        b'a' => 0x07,
        other => other,
    }
}

/// Two hex digits as a byte.
fn hex_byte(digits: Option<&[u8]>) -> Option<u8> {
    let mut byte = [0u8; 1];
    hex::decode_to_slice(digits?, &mut byte).ok()?;
    Some(byte[0])
}

#[cfg(test)]
mod tests {
    use super::split;

    fn ok(line: &str) -> Vec<String> {
        split(line.as_bytes())
            .unwrap()
            .into_iter()
            .map(|w| String::from_utf8(w).unwrap())
            .collect()
    }

    #[test]
    fn words_quotes_and_escapes() {
        assert_eq!(ok("  set  k   v "), ["set", "k", "v"]);
        assert_eq!(ok(r#"set "a b" 'c d'"#), ["set", "a b", "c d"]);
        assert_eq!(ok(r#"echo "\x41\n\q" 'it\'s'"#), ["echo", "A\nq", "it's"]);
        assert_eq!(ok(r#"echo ab"cd""#), ["echo", "abcd"]);
        assert_eq!(ok(r#"echo "\xZZ""#), ["echo", "xZZ"]);
        assert_eq!(ok("a\rb\tc"), ["a", "b", "c"]);
        assert!(ok(" \t ").is_empty());
    }

    #[test]
    fn unbalanced_quotes_are_refused() {
        for bad in [r#"set "a"#, "set 'a", r#"set "a"b"#, "set 'a'b", r#"x "\"#] {
            assert!(split(bad.as_bytes()).is_none(), "{bad}");
        }
    }
}
