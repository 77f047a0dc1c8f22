//! The request parser: turns the bytes a client sent into commands, one at
//! a time, and says when the input is malformed.
//!
//! Two forms, told apart by the first byte as Redis does:
//!
//! ```text
//! multibulk   *<count>\r\n  then <count> times  $<len>\r\n<len bytes>\r\n
//! inline      words separated by spaces, "quoted" or 'quoted', up to \n
//! ```
//!
//! Redis's quirks, kept because clients (and the differential test) see
//! them: a line is searched for its `\r` (multibulk) or `\n` (inline) only
//! up to the first NUL byte, as C's `strchr` does, so an inline command
//! holding a NUL waits until the inline limit is reached; the two bytes
//! after a line's `\r` and after a bulk's data are skipped unchecked; a
//! count of zero or less is an empty command, silently consumed.
//!
//! Memory is bounded by the caller's buffer limit: the parser never
//! allocates from a length the client claims, only records where the
//! arguments lie in bytes already received. It resumes where it stopped,
//! so a large command arriving in many reads is not re-parsed from its
//! start each time.

use std::ops::Range;

use super::inline;
use crate::num::parse_i64;

/// Redis's `PROTO_INLINE_MAX_SIZE`: the longest inline command, and the
/// longest `*<count>` or `$<len>` line, that may be waited for.
pub const INLINE_MAX: usize = 64 * 1024;

/// Limits on what one client may send.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The largest bulk argument (Redis's `proto-max-bulk-len`).
    pub max_bulk_len: u64,
    /// The most unprocessed input kept for one client (Redis's
    /// `client-query-buffer-limit`); the caller enforces it.
    pub query_buffer_limit: usize,
}

impl Default for Limits {
    /// Redis's defaults: 512 MiB per argument, 1 GiB per client.
    fn default() -> Self {
        Self {
            max_bulk_len: 512 << 20,
            query_buffer_limit: 1 << 30,
        }
    }
}

/// The client sent something that is not RESP. Every variant is the
/// client's fault; each gets an error reply and the connection closes.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtocolError {
    /// `*` followed by something that is not a count (or above `i32::MAX`).
    InvalidMultibulkLength,
    /// `$` followed by something that is not a length in `0..=max_bulk_len`.
    InvalidBulkLength,
    /// Where a `$<len>` line belongs, another byte.
    ExpectedDollar(u8),
    /// An inline command with an unterminated or ill-placed quote.
    UnbalancedQuotes,
    /// No `\n` within [`INLINE_MAX`] bytes of an inline command.
    TooBigInline,
    /// No `\r` within [`INLINE_MAX`] bytes after `*`.
    TooBigMultibulkCount,
    /// No `\r` within [`INLINE_MAX`] bytes after a `$`.
    TooBigBulkCount,
    /// The input ended inside a command (an SMT message, or a stream the
    /// client closed). Redis never sees this case; the words are ours.
    Truncated,
}

impl ProtocolError {
    /// The error reply's text, after `-ERR `: Redis's own words. Bytes,
    /// since Redis echoes an unexpected byte as it is.
    pub fn message(&self) -> Vec<u8> {
        let what: &[u8] = match self {
            Self::InvalidMultibulkLength => b"invalid multibulk length",
            Self::InvalidBulkLength => b"invalid bulk length",
            Self::ExpectedDollar(got) => {
                return [&b"Protocol error: expected '$', got '"[..], &[*got], b"'"].concat();
            }
            Self::UnbalancedQuotes => b"unbalanced quotes in request",
            Self::TooBigInline => b"too big inline request",
            Self::TooBigMultibulkCount => b"too big mbulk count string",
            Self::TooBigBulkCount => b"too big bulk count string",
            Self::Truncated => b"truncated command at end of input",
        };
        [&b"Protocol error: "[..], what].concat()
    }
}

/// What one parsing step found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A command whose arguments [`RequestParser::args`] gives; it ends
    /// `len` bytes into the input.
    Command {
        /// Bytes of input the command took.
        len: usize,
    },
    /// An empty command (a blank line, `*0`): consume `len` bytes, reply
    /// nothing.
    Empty {
        /// Bytes of input to consume.
        len: usize,
    },
    /// The command is not complete yet.
    NeedMore,
}

/// Where the parser stands in the current command.
#[derive(Clone, Copy, Debug)]
enum State {
    /// Between commands.
    Idle,
    /// Inside a multibulk command: arguments still expected, the offset
    /// of the next unread byte, and the length of the bulk whose data is
    /// awaited (after its `$<len>` line was read).
    Multibulk {
        remaining: u32,
        pos: usize,
        bulk: Option<usize>,
    },
}

/// Arguments of the current command: ranges into the input (multibulk),
/// or bytes of their own (inline, whose quotes and escapes are decoded).
#[derive(Debug, Default)]
struct Argv {
    ranges: Vec<Range<usize>>,
    owned: Vec<Vec<u8>>,
}

/// A resumable request parser for one client. Call [`RequestParser::step`]
/// with the unconsumed input (always starting at the current command's
/// first byte) after every read.
#[derive(Debug)]
pub struct RequestParser {
    limits: Limits,
    state: State,
    argv: Argv,
}

impl RequestParser {
    /// A parser at the start of a command, refusing input beyond `limits`.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            state: State::Idle,
            argv: Argv::default(),
        }
    }

    /// Parses on from where the last call stopped. `input` must begin
    /// with the current command and may have grown since. Bounded work:
    /// one pass over the bytes not yet examined.
    pub fn step(&mut self, input: &[u8]) -> Result<Step, ProtocolError> {
        if let State::Idle = self.state {
            self.argv.ranges.clear();
            self.argv.owned.clear();
            match input.first() {
                None => return Ok(Step::NeedMore),
                Some(b'*') => {
                    if let Some(step) = self.multibulk_header(input)? {
                        return Ok(step);
                    }
                }
                Some(_) => return self.inline(input),
            }
        }
        self.multibulk_body(input)
    }

    /// The current command's arguments (valid after [`Step::Command`]),
    /// borrowing from the same `input`.
    pub fn args<'a>(&'a self, input: &'a [u8]) -> Vec<&'a [u8]> {
        if self.argv.owned.is_empty() {
            self.argv.ranges.iter().map(|r| &input[r.clone()]).collect()
        } else {
            self.argv.owned.iter().map(Vec::as_slice).collect()
        }
    }

    /// Whether a command has been started but not finished: the input
    /// ending now would cut it short.
    pub fn is_mid_command(&self) -> bool {
        matches!(self.state, State::Multibulk { .. })
    }

    /// The `*<count>\r\n` line. `None` when a command follows; a step
    /// when it is all there is (waiting, or an empty command).
    fn multibulk_header(&mut self, input: &[u8]) -> Result<Option<Step>, ProtocolError> {
        let Some(cr) = find_before_nul(input, b'\r') else {
            return if input.len() > INLINE_MAX {
                Err(ProtocolError::TooBigMultibulkCount)
            } else {
                Ok(Some(Step::NeedMore))
            };
        };
        if cr + 2 > input.len() {
            return Ok(Some(Step::NeedMore));
        }
        let count = parse_i64(&input[1..cr])
            .filter(|&n| n <= i64::from(i32::MAX))
            .ok_or(ProtocolError::InvalidMultibulkLength)?;
        let pos = cr + 2;
        if count <= 0 {
            return Ok(Some(Step::Empty { len: pos }));
        }
        self.state = State::Multibulk {
            // NOTE(unwrap): 0 < count <= i32::MAX was checked just above.
            remaining: u32::try_from(count).unwrap(),
            pos,
            bulk: None,
        };
        Ok(None)
    }

    /// `$<len>\r\n<data>\r\n` arguments until the count is reached or the
    /// input runs out.
    fn multibulk_body(&mut self, input: &[u8]) -> Result<Step, ProtocolError> {
        let State::Multibulk {
            mut remaining,
            mut pos,
            mut bulk,
        } = self.state
        else {
            return Ok(Step::NeedMore);
        };
        while remaining > 0 {
            let len = match bulk {
                Some(len) => len,
                None => match self.bulk_header(input, pos)? {
                    Some((len, data)) => {
                        pos = data;
                        len
                    }
                    None => break,
                },
            };
            bulk = Some(len);
            // Saturating: `max_bulk_len` is the operator's to set, up to
            // u64::MAX.
            if input.len() - pos < len.saturating_add(2) {
                break;
            }
            self.argv.ranges.push(pos..pos + len);
            pos += len + 2;
            bulk = None;
            remaining -= 1;
        }
        if remaining == 0 {
            self.state = State::Idle;
            return Ok(Step::Command { len: pos });
        }
        self.state = State::Multibulk {
            remaining,
            pos,
            bulk,
        };
        Ok(Step::NeedMore)
    }

    /// A `$<len>\r\n` line at `pos`: the length and where the data starts,
    /// or `None` while the line is incomplete.
    fn bulk_header(
        &self,
        input: &[u8],
        pos: usize,
    ) -> Result<Option<(usize, usize)>, ProtocolError> {
        let rest = &input[pos..];
        let Some(cr) = find_before_nul(rest, b'\r') else {
            return if rest.len() > INLINE_MAX {
                Err(ProtocolError::TooBigBulkCount)
            } else {
                Ok(None)
            };
        };
        if cr + 2 > rest.len() {
            return Ok(None);
        }
        if rest[0] != b'$' {
            return Err(ProtocolError::ExpectedDollar(rest[0]));
        }
        let len = parse_i64(&rest[1..cr])
            .and_then(|n| u64::try_from(n).ok())
            .filter(|&n| n <= self.limits.max_bulk_len)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or(ProtocolError::InvalidBulkLength)?;
        Ok(Some((len, pos + cr + 2)))
    }

    /// One inline command: a line split into words.
    fn inline(&mut self, input: &[u8]) -> Result<Step, ProtocolError> {
        let Some(newline) = find_before_nul(input, b'\n') else {
            return if input.len() > INLINE_MAX {
                Err(ProtocolError::TooBigInline)
            } else {
                Ok(Step::NeedMore)
            };
        };
        let line = &input[..newline];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let words = inline::split(line).ok_or(ProtocolError::UnbalancedQuotes)?;
        let len = newline + 1;
        if words.is_empty() {
            return Ok(Step::Empty { len });
        }
        self.argv.owned = words;
        Ok(Step::Command { len })
    }
}

/// The first `byte` in `input`, searching only up to the first NUL, as C's
/// `strchr` does on Redis's NUL-terminated query buffer.
fn find_before_nul(input: &[u8], byte: u8) -> Option<usize> {
    input
        .iter()
        .position(|&b| b == byte || b == 0)
        .filter(|&i| input[i] == byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut p = RequestParser::new(Limits::default());
        let mut at = 0;
        let mut out = Vec::new();
        loop {
            match p.step(&input[at..])? {
                Step::Command { len } => {
                    out.push(p.args(&input[at..]).iter().map(|a| a.to_vec()).collect());
                    at += len;
                }
                Step::Empty { len } => at += len,
                Step::NeedMore => return Ok(out),
            }
        }
    }

    fn words(c: &[&str]) -> Vec<Vec<u8>> {
        c.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn multibulk_and_inline_commands_in_one_stream() {
        let got =
            parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n\r\n*0\r\nset a 'b c'\n").unwrap();
        assert_eq!(
            got,
            vec![
                words(&["GET", "k"]),
                words(&["PING"]),
                words(&["set", "a", "b c"])
            ]
        );
    }

    #[test]
    fn a_command_split_across_reads_resumes() {
        let whole = b"*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$5\r\nworld\r\n";
        let mut p = RequestParser::new(Limits::default());
        for cut in 0..whole.len() {
            assert_eq!(p.step(&whole[..cut]).unwrap(), Step::NeedMore, "at {cut}");
        }
        assert_eq!(p.step(whole).unwrap(), Step::Command { len: whole.len() });
        assert_eq!(p.args(whole), vec![&b"SET"[..], b"hello", b"world"]);
    }

    #[test]
    fn bad_lengths_are_protocol_errors() {
        let cases: [(&[u8], ProtocolError); 6] = [
            (b"*abc\r\n", ProtocolError::InvalidMultibulkLength),
            (b"*2147483648\r\n", ProtocolError::InvalidMultibulkLength),
            (
                b"*1\r\n$1099511627776\r\n",
                ProtocolError::InvalidBulkLength,
            ),
            (b"*1\r\n$-1\r\n", ProtocolError::InvalidBulkLength),
            (
                b"*1\r\n*1\r\n$4\r\nPING\r\n",
                ProtocolError::ExpectedDollar(b'*'),
            ),
            (b"set \"a\r\n", ProtocolError::UnbalancedQuotes),
        ];
        for (input, want) in cases {
            assert_eq!(
                parse_all(input),
                Err(want),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn a_claimed_length_allocates_nothing_until_the_bytes_arrive() {
        let mut p = RequestParser::new(Limits::default());
        let input = b"*1\r\n$536870912\r\nabc";
        assert_eq!(p.step(input).unwrap(), Step::NeedMore);
        assert!(p.is_mid_command());
    }

    #[test]
    fn long_lines_without_terminator_are_refused_past_the_inline_limit() {
        let mut line = vec![b'x'; INLINE_MAX];
        assert_eq!(parse_all(&line), Ok(vec![]));
        line.push(b'x');
        assert_eq!(parse_all(&line), Err(ProtocolError::TooBigInline));
        let mut count = b"*".to_vec();
        count.extend(std::iter::repeat_n(b'1', INLINE_MAX));
        assert_eq!(parse_all(&count), Err(ProtocolError::TooBigMultibulkCount));
    }

    #[test]
    fn an_inline_nul_hides_the_line_end_as_in_redis() {
        assert_eq!(parse_all(b"\x00\r\nPING\r\n"), Ok(vec![]));
    }
}
