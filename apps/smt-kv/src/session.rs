//! One client's command stream: parse, execute, reply. Shared by the
//! stream front ends (a TCP or TLS connection is one session) and the SMT
//! front end (each request message is a session of its own, which ends
//! with the message: so with a password, a message starts with `AUTH`).

use crate::cmd::{self, After, ClientState, Store};
use crate::db::UnixMs;
use crate::resp::{reply, Limits, ProtocolError, RequestParser, Step};

/// Why a run of commands stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Every complete command was executed; the rest needs more input.
    NeedMore,
    /// The output reached the caller's limit: write it out, then run again
    /// (the client is not read from meanwhile, so memory stays bounded).
    OutputFull,
    /// Close after writing the output: `QUIT`, or a protocol error whose
    /// reply is already in the output.
    Close,
}

/// A client's parser state between reads, and what the server knows of
/// it (authentication).
#[derive(Debug)]
pub struct Session {
    parser: RequestParser,
    client: ClientState,
}

impl Session {
    /// A fresh client session (not yet authenticated) parsing within
    /// `limits`.
    pub fn new(limits: Limits) -> Self {
        Self {
            parser: RequestParser::new(limits),
            client: ClientState::default(),
        }
    }

    /// Executes the complete commands at the front of `input`, replies
    /// appended to `out`, until `out` holds `out_limit` bytes or the input
    /// runs out. Returns the bytes consumed and why it stopped.
    pub fn run(
        &mut self,
        input: &[u8],
        store: &mut Store,
        now: UnixMs,
        out: &mut Vec<u8>,
        out_limit: usize,
    ) -> (usize, Stop) {
        let mut consumed = 0;
        while out.len() < out_limit {
            let rest = &input[consumed..];
            match self.parser.step(rest) {
                Ok(Step::Command { len }) => {
                    let args = self.parser.args(rest);
                    let after = cmd::execute(store, &mut self.client, &args, now, out);
                    consumed += len;
                    if after == After::Close {
                        return (consumed, Stop::Close);
                    }
                }
                Ok(Step::Empty { len }) => consumed += len,
                Ok(Step::NeedMore) => return (consumed, Stop::NeedMore),
                Err(e) => {
                    refuse(store, out, &e);
                    return (consumed, Stop::Close);
                }
            }
        }
        (consumed, Stop::OutputFull)
    }

    /// The input ended (the client closed its side, or an SMT message
    /// ended) with `pending` bytes not yet a complete command. Redis's
    /// inline form ends at a newline, so only a started multibulk command
    /// (or a partial inline line) is cut short; say so.
    pub fn end_of_input(&self, pending: usize, store: &mut Store, out: &mut Vec<u8>) {
        if pending > 0 || self.parser.is_mid_command() {
            refuse(store, out, &ProtocolError::Truncated);
        }
    }
}

/// Replies to a protocol error in Redis's words.
fn refuse(store: &mut Store, out: &mut Vec<u8>, e: &ProtocolError) {
    store.stats.protocol_errors += 1;
    tracing::debug!(error = ?e, "protocol error from a client");
    let mut text = b"ERR ".to_vec();
    text.extend_from_slice(&e.message());
    reply::error(out, &text);
}

/// Runs one SMT request message as a complete session: the reply is what
/// Redis would write to a connection that sent these bytes and closed.
pub fn run_message(message: &[u8], store: &mut Store, now: UnixMs, limits: Limits) -> Vec<u8> {
    let mut out = Vec::new();
    run_message_into(message, store, now, limits, &mut out);
    out
}

/// [`run_message`] with the reply appended to `out`: a server that
/// answers message after message reuses one buffer instead of growing a
/// fresh one, by doubling, for every reply.
pub fn run_message_into(
    message: &[u8],
    store: &mut Store,
    now: UnixMs,
    limits: Limits,
    out: &mut Vec<u8>,
) {
    let mut session = Session::new(limits);
    let (consumed, stop) = session.run(message, store, now, out, usize::MAX);
    if stop == Stop::NeedMore {
        session.end_of_input(message.len() - consumed, store, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(input: &[u8]) -> Vec<u8> {
        run_message(input, &mut Store::default(), 0, Limits::default())
    }

    #[test]
    fn a_message_holds_one_command_and_gets_its_reply() {
        assert_eq!(message(b"*1\r\n$4\r\nPING\r\n"), b"+PONG\r\n");
        assert_eq!(message(b"PING\r\nPING\r\n"), b"+PONG\r\n+PONG\r\n");
        assert_eq!(message(b""), b"");
    }

    #[test]
    fn with_a_password_each_message_authenticates_on_its_own() {
        let mut store = Store::default();
        store.settings.requirepass = Some(cmd::Password::new(b"pw".to_vec()));
        let mut run = |m: &[u8]| run_message(m, &mut store, 0, Limits::default());
        assert_eq!(run(b"AUTH pw\r\nSET k v\r\n"), b"+OK\r\n+OK\r\n");
        assert_eq!(run(b"GET k\r\n"), b"-NOAUTH Authentication required.\r\n");
        assert_eq!(run(b"AUTH pw\r\nGET k\r\n"), b"+OK\r\n$1\r\nv\r\n");
    }

    #[test]
    fn a_truncated_message_gets_an_error() {
        let reply = message(b"*2\r\n$3\r\nGET\r\n$1\r\n");
        assert_eq!(
            reply,
            b"-ERR Protocol error: truncated command at end of input\r\n"
        );
        assert_eq!(
            message(b"PING"),
            b"-ERR Protocol error: truncated command at end of input\r\n"
        );
    }

    #[test]
    fn output_limit_pauses_a_pipeline() {
        let mut store = Store::default();
        let mut s = Session::new(Limits::default());
        let input = b"PING\r\nPING\r\nPING\r\n";
        let mut out = Vec::new();
        let (n, stop) = s.run(input, &mut store, 0, &mut out, 1);
        assert_eq!((n, stop), (6, Stop::OutputFull));
        out.clear();
        let (m, stop) = s.run(&input[n..], &mut store, 0, &mut out, 1024);
        assert_eq!((m, stop), (12, Stop::NeedMore));
    }

    /// Runs `input` delivered in `chunks` (cut points) with an output
    /// limit, as a connection does, until it stops for good.
    fn run_chunked(input: &[u8], cuts: &[usize], out_limit: usize) -> (Vec<u8>, bool) {
        let mut store = Store::default();
        let mut session = Session::new(Limits::default());
        let (mut buffer, mut out, mut sent) = (Vec::new(), Vec::new(), Vec::new());
        let mut at = 0;
        for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
            buffer.extend_from_slice(&input[at..cut.max(at)]);
            at = cut.max(at);
            loop {
                let (n, stop) = session.run(&buffer, &mut store, 0, &mut out, out_limit);
                buffer.drain(..n);
                sent.append(&mut out);
                match stop {
                    Stop::OutputFull => continue,
                    Stop::NeedMore => break,
                    Stop::Close => return (sent, true),
                }
            }
        }
        session.end_of_input(buffer.len(), &mut store, &mut sent);
        (sent, false)
    }

    /// Random streams built from valid commands, malformed fragments and
    /// noise give the same replies however they are cut into reads and
    /// however small the output limit, and never panic.
    #[test]
    fn replies_do_not_depend_on_how_input_is_cut() {
        use crate::ycsb::zipf::Rng;
        const PIECES: &[&[u8]] = &[
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n",
            b"PING\r\n",
            b"INCR n\r\n",
            b"HSET h f 'v w'\r\n",
            b"HGETALL h\r\n",
            b"*0\r\n",
            b"\r\n",
            b"*1\r\n$4\r\nPINGxy",
            b"*abc\r\n",
            b"*1\r\n$-5\r\n",
            b"*1\r\n*1\r\n",
            b"SET \"k\r\n",
            b"\x00\xff\x01",
            b"$",
            b"*",
            b"\r",
            b"\n",
        ];
        let mut rng = Rng::new(0xc0ffee);
        for _ in 0..2000 {
            let input: Vec<u8> = (0..rng.below(12))
                .flat_map(|_| {
                    PIECES[rng.below(PIECES.len() as u64) as usize]
                        .iter()
                        .copied()
                })
                .collect();
            let whole = run_chunked(&input, &[], usize::MAX);
            let mut cuts: Vec<usize> = (0..rng.below(6))
                .map(|_| rng.below(input.len() as u64 + 1) as usize)
                .collect();
            cuts.sort_unstable();
            let limit = 1 + rng.below(64) as usize;
            let chunked = run_chunked(&input, &cuts, limit);
            assert_eq!(
                chunked,
                whole,
                "input {:?} cut at {cuts:?}",
                input.escape_ascii().to_string()
            );
        }
    }
}
