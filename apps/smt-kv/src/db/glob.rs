//! Glob-style patterns as Redis matches them (`SCAN ... MATCH`, `CONFIG
//! GET`): `*` any run of bytes, `?` any byte, `[abc]`, `[^abc]`, `[a-z]`
//! (a reversed range is swapped), `\` quotes the next byte. An unclosed `[`
//! is a class running to the end of the pattern.
//!
//! The pattern is compiled to tokens, then matched with the two-pointer
//! method (backtracking only to the last `*`): time is bounded by
//! pattern × string, never exponential in the number of stars.

/// One element of a compiled pattern.
#[derive(Debug)]
enum Token {
    /// Any run of bytes, possibly empty.
    Star,
    /// Any one byte.
    Any,
    /// One byte in (or, negated, not in) a set of inclusive ranges.
    Class {
        negated: bool,
        ranges: Vec<(u8, u8)>,
    },
    /// This byte.
    Literal(u8),
}

/// A compiled pattern.
#[derive(Debug)]
pub struct Glob {
    tokens: Vec<Token>,
    nocase: bool,
}

impl Glob {
    /// Compiles `pattern`; `nocase` compares ASCII letters without case.
    pub fn new(pattern: &[u8], nocase: bool) -> Self {
        Self {
            tokens: compile(pattern),
            nocase,
        }
    }

    /// Whether the whole of `s` matches.
    pub fn matches(&self, s: &[u8]) -> bool {
        let (mut t, mut i) = (0, 0);
        // The last star seen, and the string position it has consumed to.
        let mut star: Option<(usize, usize)> = None;
        while i < s.len() {
            match self.tokens.get(t) {
                Some(Token::Star) => {
                    star = Some((t, i));
                    t += 1;
                }
                Some(token) if self.one(token, s[i]) => {
                    t += 1;
                    i += 1;
                }
                _ => match star {
                    // Let the last star swallow one more byte and retry.
                    Some((st, si)) => {
                        star = Some((st, si + 1));
                        t = st + 1;
                        i = si + 1;
                    }
                    None => return false,
                },
            }
        }
        self.tokens[t..]
            .iter()
            .all(|tok| matches!(tok, Token::Star))
    }

    /// Whether a one-byte token matches `b`.
    fn one(&self, token: &Token, b: u8) -> bool {
        let fold = |x: u8| {
            if self.nocase {
                x.to_ascii_lowercase()
            } else {
                x
            }
        };
        match token {
            Token::Star => false,
            Token::Any => true,
            Token::Literal(l) => fold(*l) == fold(b),
            Token::Class { negated, ranges } => {
                let hit = ranges
                    .iter()
                    .any(|&(lo, hi)| (fold(lo)..=fold(hi)).contains(&fold(b)));
                hit != *negated
            }
        }
    }
}

fn compile(p: &[u8]) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            b'*' => {
                if !matches!(tokens.last(), Some(Token::Star)) {
                    tokens.push(Token::Star);
                }
            }
            b'?' => tokens.push(Token::Any),
            b'[' => {
                let (token, end) = class(p, i + 1);
                tokens.push(token);
                i = end;
            }
            b'\\' if i + 1 < p.len() => {
                i += 1;
                tokens.push(Token::Literal(p[i]));
            }
            b => tokens.push(Token::Literal(b)),
        }
        i += 1;
    }
    tokens
}

/// A class whose body starts at `i`: the token and the index of its `]`
/// (or the pattern's last byte when unclosed).
fn class(p: &[u8], mut i: usize) -> (Token, usize) {
    let negated = p.get(i) == Some(&b'^');
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    while i < p.len() && p[i] != b']' {
        if p[i] == b'\\' && i + 1 < p.len() {
            i += 1;
            ranges.push((p[i], p[i]));
        } else if i + 2 < p.len() && p[i + 1] == b'-' {
            let (a, b) = (p[i], p[i + 2]);
            ranges.push((a.min(b), a.max(b)));
            i += 2;
        } else {
            ranges.push((p[i], p[i]));
        }
        i += 1;
    }
    (
        Token::Class { negated, ranges },
        i.min(p.len().saturating_sub(1)),
    )
}

#[cfg(test)]
mod tests {
    use super::Glob;

    fn m(p: &str, s: &str) -> bool {
        Glob::new(p.as_bytes(), false).matches(s.as_bytes())
    }

    #[test]
    fn stars_marks_classes_and_escapes() {
        assert!(m("*", ""));
        assert!(m("user*", "user123"));
        assert!(!m("user*", "use"));
        assert!(m("a*b*c", "aXXbYYc"));
        assert!(!m("a*b*c", "aXXbYY"));
        assert!(m("h?llo", "hello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("h[z-a]llo", "hbllo"));
        assert!(m(r"h\*llo", "h*llo"));
        assert!(!m(r"h\*llo", "hallo"));
        assert!(m("[abc", "c"));
        assert!(Glob::new(b"SAVE", true).matches(b"save"));
    }

    #[test]
    fn many_stars_stay_fast() {
        let pattern = "a*".repeat(50) + "b";
        assert!(!m(&pattern, &"a".repeat(5000)));
    }
}
