//! Reading replies, for clients: the YCSB runner and the tests.

use crate::num::parse_i64;

/// A RESP2 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// A simple string (`+OK`), without the CRLF.
    Simple(Vec<u8>),
    /// An error (`-ERR ...`), its text without the `-` and CRLF.
    Error(Vec<u8>),
    /// An integer (`:1`).
    Integer(i64),
    /// A bulk string (`$3` + bytes).
    Bulk(Vec<u8>),
    /// The null bulk string (`$-1`): no such key.
    Nil,
    /// An array (`*N`) of replies.
    Array(Vec<Value>),
    /// The null array (`*-1`).
    NilArray,
}

/// Replies nest no deeper than this (ours nest one level); deeper input
/// is refused instead of recursing on a server's say-so.
const MAX_DEPTH: usize = 8;

/// A reply that is not RESP2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadReply(pub &'static str);

impl std::fmt::Display for BadReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed reply: {}", self.0)
    }
}

impl std::error::Error for BadReply {}

impl Value {
    /// Parses one reply from the front of `input`: the value and its
    /// length, `Ok(None)` if more bytes are needed.
    pub fn parse(input: &[u8]) -> Result<Option<(Value, usize)>, BadReply> {
        parse_at(input, 0, 0)
    }

    /// The text of a simple or error reply, or the bytes of a bulk one.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Self::Simple(b) | Self::Error(b) | Self::Bulk(b) => Some(b),
            _ => None,
        }
    }
}

fn parse_at(input: &[u8], at: usize, depth: usize) -> Result<Option<(Value, usize)>, BadReply> {
    if depth > MAX_DEPTH {
        return Err(BadReply("nested too deeply"));
    }
    let Some(line_end) = find_crlf(input, at) else {
        return Ok(None);
    };
    let Some(&kind) = input.get(at) else {
        return Ok(None);
    };
    let line = &input[at + 1..line_end];
    let next = line_end + 2;
    let number = || parse_i64(line).ok_or(BadReply("bad number"));
    Ok(Some(match kind {
        b'+' => (Value::Simple(line.to_vec()), next),
        b'-' => (Value::Error(line.to_vec()), next),
        b':' => (Value::Integer(number()?), next),
        b'$' => match number()? {
            -1 => (Value::Nil, next),
            len => {
                let len = usize::try_from(len).map_err(|_| BadReply("negative length"))?;
                // Checked: the length is the server's claim.
                let end = next.checked_add(len).ok_or(BadReply("length too large"))?;
                if input.len() < end.saturating_add(2) {
                    return Ok(None);
                }
                (Value::Bulk(input[next..end].to_vec()), end + 2)
            }
        },
        b'*' => match number()? {
            -1 => (Value::NilArray, next),
            len => {
                let len = usize::try_from(len).map_err(|_| BadReply("negative length"))?;
                let mut items = Vec::with_capacity(len.min(1024));
                let mut pos = next;
                for _ in 0..len {
                    let Some((item, end)) = parse_at(input, pos, depth + 1)? else {
                        return Ok(None);
                    };
                    items.push(item);
                    pos = end;
                }
                (Value::Array(items), pos)
            }
        },
        _ => return Err(BadReply("unknown type byte")),
    }))
}

fn find_crlf(input: &[u8], from: usize) -> Option<usize> {
    input
        .get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|i| from + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_replies_parse_and_partial_ones_wait() {
        let input = b"*3\r\n$1\r\na\r\n$-1\r\n*1\r\n:5\r\n+OK\r\n";
        let (v, len) = Value::parse(input).unwrap().unwrap();
        assert_eq!(Value::parse(b"$9223372036854775807\r\n").unwrap(), None);
        assert_eq!(
            v,
            Value::Array(vec![
                Value::Bulk(b"a".to_vec()),
                Value::Nil,
                Value::Array(vec![Value::Integer(5)])
            ])
        );
        assert_eq!(&input[len..], b"+OK\r\n");
        for cut in 0..len {
            assert_eq!(Value::parse(&input[..cut]).unwrap(), None, "cut {cut}");
        }
    }
}
