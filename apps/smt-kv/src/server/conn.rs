//! A TCP or TLS-over-TCP client connection: its buffers, its session, and
//! non-blocking reads and writes under edge-triggered readiness.
//!
//! With edge-triggered readiness a source must be read until it would
//! block, or the loop must remember that it has not been. `readable`
//! records that; a connection that stopped early (its read budget was
//! spent, or its output is too full to accept more commands) reports
//! [`Progress::MoreWork`] and the loop comes back to it.

use std::io::{self, Read, Write};
use std::sync::Arc;

use mio::net::TcpStream;

use crate::cmd::Store;
use crate::db::UnixMs;
use crate::resp::Limits;
use crate::session::{Session, Stop};

/// Reads from one connection per turn of the loop, so that one busy
/// client cannot starve the others: a client that sends its next request
/// as soon as it has a reply would otherwise keep the loop reading it
/// (bytes alone are no bound: small requests are many).
const READS_PER_TURN: usize = 4;
/// Stop executing a client's commands while this much of its output is
/// unsent (pipelined replies wait in the input instead of in memory).
const OUTPUT_HIGH: usize = 256 * 1024;
/// Read granularity (Redis reads 16 KiB at a time).
const READ_CHUNK: usize = 16 * 1024;
/// Buffers grown past this (a large value went through) shrink back when
/// empty.
const KEEP_CAPACITY: usize = 1 << 20;

/// What a connection needs after a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Progress {
    /// Waiting for readiness.
    Idle,
    /// Has work left that no readiness event will announce.
    MoreWork,
    /// Finished: deregister and drop it.
    Closed,
}

/// A connection's transport.
enum Transport {
    Plain,
    Tls(Box<rustls::ServerConnection>),
}

pub(super) struct Conn {
    stream: TcpStream,
    transport: Transport,
    session: Session,
    query_limit: usize,
    input: Vec<u8>,
    output: Vec<u8>,
    written: usize,
    /// No read has returned `WouldBlock` since the last readiness event.
    readable: bool,
    /// The client has not closed its side.
    open: bool,
    /// Readiness said the client closed its side: read on to the end
    /// (its FIN may sit behind the data of a short read, and raises no
    /// further edge).
    hung_up: bool,
    /// Close once the output is written.
    closing: bool,
    /// TLS: close_notify has been queued after the last reply.
    notified: bool,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("peer", &self.stream.peer_addr().ok())
            .field("tls", &matches!(self.transport, Transport::Tls(_)))
            .finish_non_exhaustive()
    }
}

impl Conn {
    pub(super) fn plain(stream: TcpStream, limits: Limits) -> Self {
        Self::new(stream, Transport::Plain, limits)
    }

    pub(super) fn tls(
        stream: TcpStream,
        config: &Arc<rustls::ServerConfig>,
        limits: Limits,
    ) -> io::Result<Self> {
        let tls = rustls::ServerConnection::new(config.clone()).map_err(io::Error::other)?;
        Ok(Self::new(stream, Transport::Tls(Box::new(tls)), limits))
    }

    fn new(stream: TcpStream, transport: Transport, limits: Limits) -> Self {
        Self {
            stream,
            transport,
            session: Session::new(limits),
            query_limit: limits.query_buffer_limit,
            input: Vec::new(),
            output: Vec::new(),
            written: 0,
            readable: true,
            open: true,
            hung_up: false,
            closing: false,
            notified: false,
        }
    }

    pub(super) fn stream_mut(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// Readiness was reported: reading may succeed again (`hung_up`: the
    /// client also closed its side).
    pub(super) fn mark_readable(&mut self, hung_up: bool) {
        self.readable = true;
        self.hung_up |= hung_up;
    }

    /// Does what can be done now: execute buffered commands, write
    /// replies, read more, until blocked, finished or out of budget.
    pub(super) fn turn(&mut self, store: &mut Store, now: UnixMs) -> Progress {
        match self.try_turn(store, now) {
            Ok(progress) => progress,
            Err(e) => {
                tracing::debug!(error = %e, "client connection failed");
                Progress::Closed
            }
        }
    }

    fn try_turn(&mut self, store: &mut Store, now: UnixMs) -> io::Result<Progress> {
        let mut reads = READS_PER_TURN;
        loop {
            let stop = self.execute(store, now);
            let flushed = self.flush()?;
            if self.closing {
                return Ok(if flushed {
                    Progress::Closed
                } else {
                    Progress::Idle
                });
            }
            if stop == Stop::OutputFull {
                // Blocked on the client reading its replies: the writable
                // edge brings us back. With the socket already drained, go
                // on, within the budget (replies count as work too).
                if !flushed {
                    return Ok(Progress::Idle);
                }
                reads = reads.saturating_sub(1);
                if reads == 0 {
                    return Ok(Progress::MoreWork);
                }
                continue;
            }
            if !self.open {
                self.session
                    .end_of_input(self.input.len(), store, &mut self.output);
                self.closing = true;
                continue;
            }
            if !self.readable {
                return Ok(Progress::Idle);
            }
            if reads == 0 {
                return Ok(Progress::MoreWork);
            }
            self.read()?;
            reads -= 1;
            if self.input.len() > self.query_limit {
                // Redis closes such a client without a reply.
                tracing::debug!(
                    bytes = self.input.len(),
                    "client query buffer limit reached"
                );
                return Ok(Progress::Closed);
            }
        }
    }

    /// Executes what the input holds; the consumed bytes are dropped.
    fn execute(&mut self, store: &mut Store, now: UnixMs) -> Stop {
        if self.closing {
            return Stop::Close;
        }
        let (consumed, stop) =
            self.session
                .run(&self.input, store, now, &mut self.output, OUTPUT_HIGH);
        self.input.drain(..consumed);
        if self.input.is_empty() && self.input.capacity() > KEEP_CAPACITY {
            self.input = Vec::new();
        }
        if stop == Stop::Close {
            self.closing = true;
        }
        stop
    }

    /// Reads what is available (one chunk for TCP, one TLS read for TLS)
    /// into the input.
    fn read(&mut self) -> io::Result<()> {
        let result = match &mut self.transport {
            Transport::Plain => read_chunk(&mut self.stream, &mut self.input),
            Transport::Tls(tls) => read_tls(tls, &mut self.stream, &mut self.input),
        };
        match result? {
            ReadResult::Data => {}
            ReadResult::Drained if self.hung_up => {}
            ReadResult::Drained | ReadResult::WouldBlock => self.readable = false,
            ReadResult::Eof => self.open = false,
        }
        Ok(())
    }

    /// Writes as much output as the socket takes; `true` when all of it
    /// (and, for TLS, every pending record) is gone.
    fn flush(&mut self) -> io::Result<bool> {
        let done = match &mut self.transport {
            Transport::Plain => write_plain(&mut self.stream, &self.output, &mut self.written)?,
            Transport::Tls(tls) => {
                let mut done = write_tls(tls, &mut self.stream, &self.output, &mut self.written)?;
                if done && self.closing && !self.notified {
                    // A clean TLS close after the last reply, so the client
                    // can tell the end from a cut connection.
                    tls.send_close_notify();
                    self.notified = true;
                    done = write_tls(tls, &mut self.stream, &[], &mut 0)?;
                }
                done
            }
        };
        if self.written == self.output.len() {
            self.output.clear();
            self.written = 0;
            if self.output.capacity() > KEEP_CAPACITY {
                self.output = Vec::new();
            }
        }
        Ok(done && self.output.is_empty())
    }
}

enum ReadResult {
    /// Bytes arrived; there may be more.
    Data,
    /// Bytes arrived, fewer than asked for: the socket is empty now, and
    /// Linux raises a new edge when more arrive (the shortcut tokio takes
    /// for TCP too), which saves a read that would fail with `WouldBlock`.
    Drained,
    Eof,
    WouldBlock,
}

fn read_chunk(stream: &mut TcpStream, input: &mut Vec<u8>) -> io::Result<ReadResult> {
    let len = input.len();
    input.resize(len + READ_CHUNK, 0);
    let result = stream.read(&mut input[len..]);
    let n = *result.as_ref().unwrap_or(&0);
    input.truncate(len + n);
    match result {
        Ok(0) => Ok(ReadResult::Eof),
        Ok(n) if n < READ_CHUNK => Ok(ReadResult::Drained),
        Ok(_) => Ok(ReadResult::Data),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(ReadResult::WouldBlock),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(ReadResult::Data),
        Err(e) => Err(e),
    }
}

/// One `read_tls`, then every record it completed, decrypted into `input`.
/// A TLS error is answered with its alert before the connection closes.
fn read_tls(
    tls: &mut rustls::ServerConnection,
    stream: &mut TcpStream,
    input: &mut Vec<u8>,
) -> io::Result<ReadResult> {
    let read = match tls.read_tls(stream) {
        Ok(0) => return Ok(ReadResult::Eof),
        Ok(_) => ReadResult::Data,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => ReadResult::WouldBlock,
        Err(e) if e.kind() == io::ErrorKind::Interrupted => ReadResult::Data,
        Err(e) => return Err(e),
    };
    let state = match tls.process_new_packets() {
        Ok(state) => state,
        Err(e) => {
            let _ = tls.write_tls(stream);
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
    };
    let plaintext = state.plaintext_bytes_to_read();
    let closed = state.peer_has_closed();
    if plaintext > 0 {
        let len = input.len();
        input.resize(len + plaintext, 0);
        tls.reader().read_exact(&mut input[len..])?;
    }
    Ok(if closed { ReadResult::Eof } else { read })
}

fn write_plain(stream: &mut TcpStream, output: &[u8], written: &mut usize) -> io::Result<bool> {
    while *written < output.len() {
        match stream.write(&output[*written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => *written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Hands plaintext to rustls (which takes a bounded amount at a time) and
/// sends its records.
fn write_tls(
    tls: &mut rustls::ServerConnection,
    stream: &mut TcpStream,
    output: &[u8],
    written: &mut usize,
) -> io::Result<bool> {
    loop {
        let accepted = match output.get(*written..) {
            Some(rest) if !rest.is_empty() => tls.writer().write(rest)?,
            _ => 0,
        };
        *written += accepted;
        while tls.wants_write() {
            match tls.write_tls(stream) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if *written == output.len() {
            return Ok(true);
        }
        if accepted == 0 {
            // rustls takes nothing more before the handshake ends; the
            // next read event resumes the write.
            return Ok(false);
        }
    }
}
