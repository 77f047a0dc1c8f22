//! Pipelining with coalesced writes, as HTTP/2 and gRPC clients do: the
//! client gathers every request that is ready (from every outstanding
//! slot) into one write and one flush, so TLS seals a whole batch in one
//! record (up to 16 KiB each); the server reads whatever has arrived,
//! answers every complete request in it, and writes all the responses in
//! one write and one flush. Same framing as [`super::framed`].
//!
//! The client is two tasks on the caller's runtime, a writer and a
//! reader, plus slots that queue a frame and wait for their response.
//! Responses come back in request order, so a FIFO of waiting slots says
//! whose each response is.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

use super::framed::frame_len;
use super::{check_echo, Slot};

/// Free space offered to each read; the buffer grows past it only to hold
/// one large frame whole.
const READ_CHUNK: usize = 64 << 10;

/// Reading stops and the batch is answered once this much is buffered
/// (four full TLS records), even if more has arrived, so a stream of large
/// messages does not hold back the answers to requests read before them.
const BATCH_BYTES: usize = 64 << 10;

/// A read buffer that yields complete length-prefixed frames.
#[derive(Debug, Default)]
struct Frames {
    buf: Vec<u8>,
    /// Unconsumed bytes are `buf[start..end]`.
    start: usize,
    end: usize,
}

impl Frames {
    /// The body of the next complete frame, consumed, as a range of `buf`.
    fn next_frame(&mut self) -> io::Result<Option<Range<usize>>> {
        let have = &self.buf[self.start..self.end];
        let Some(len) = have.first_chunk::<4>() else {
            return Ok(None);
        };
        let n = frame_len(u32::from_le_bytes(*len))?;
        if have.len() < 4 + n {
            return Ok(None);
        }
        let body = self.start + 4..self.start + 4 + n;
        self.start = body.end;
        Ok(Some(body))
    }

    /// Moves the unconsumed bytes to the front and makes room for a read.
    fn make_room(&mut self) {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < READ_CHUNK {
            self.buf.resize(self.end + READ_CHUNK, 0);
        }
    }

    /// Waits for at least one byte, then takes whatever else is already
    /// readable (up to `BATCH_BYTES`). Returns false at end of stream.
    async fn fill<R: AsyncRead + Unpin>(&mut self, r: &mut R) -> io::Result<bool> {
        self.make_room();
        if self.read_some(r, true).await? == 0 {
            return Ok(false);
        }
        while self.end - self.start < BATCH_BYTES {
            self.make_room();
            if self.read_some(r, false).await? == 0 {
                break;
            }
        }
        Ok(true)
    }

    /// One read into the free space; with `wait` false, 0 when nothing is
    /// readable right now (as well as at end of stream).
    async fn read_some<R: AsyncRead + Unpin>(
        &mut self,
        r: &mut R,
        wait: bool,
    ) -> io::Result<usize> {
        let free = &mut self.buf[self.end..];
        let n = poll_fn(|cx| {
            let mut rb = ReadBuf::new(free);
            match Pin::new(&mut *r).poll_read(cx, &mut rb) {
                Poll::Ready(r) => Poll::Ready(r.map(|()| rb.filled().len())),
                Poll::Pending if wait => Poll::Pending,
                Poll::Pending => Poll::Ready(Ok(0)),
            }
        })
        .await?;
        self.end += n;
        Ok(n)
    }
}

/// Echoes frames until the peer closes: every complete request of a read
/// batch is answered, then all the responses go out in one write and one
/// flush.
pub async fn serve_batches<R, W>(mut read: R, mut write: W) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut frames = Frames::default();
    let mut out = Vec::with_capacity(READ_CHUNK);
    while frames.fill(&mut read).await? {
        while let Some(body) = frames.next_frame()? {
            let body = &frames.buf[body];
            out.extend_from_slice(&(body.len() as u32).to_le_bytes());
            out.extend_from_slice(body);
        }
        if !out.is_empty() {
            write.write_all(&out).await?;
            write.flush().await?;
            out.clear();
        }
    }
    write.shutdown().await
}

/// Where one slot's response lands. A slot has one call outstanding at a
/// time, so each slot reuses one.
#[derive(Default)]
struct Reply {
    /// The call's number and its response's length, or the connection's
    /// error. A response to an abandoned call (timed out) has an older
    /// number and is ignored.
    done: Cell<Option<(u64, Result<usize, io::ErrorKind>)>>,
    waker: Cell<Option<Waker>>,
    body: RefCell<Vec<u8>>,
}

impl Reply {
    fn finish(&self, call: u64, result: Result<&[u8], io::ErrorKind>) {
        let result = result.map(|body| {
            let mut mine = self.body.borrow_mut();
            mine.clear();
            mine.extend_from_slice(body);
            body.len()
        });
        self.done.set(Some((call, result)));
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }
}

/// What the slots and the two tasks share.
#[derive(Default)]
struct Shared {
    /// Frames not yet handed to the writer, in call order.
    outgoing: RefCell<Vec<u8>>,
    /// Calls queued or written and not yet answered, in call order.
    waiting: RefCell<VecDeque<(Rc<Reply>, u64)>>,
    /// The writer, parked until there is something to write.
    writer: Cell<Option<Waker>>,
    /// Set when the connection failed: calls fail at once.
    broken: Cell<Option<io::ErrorKind>>,
    /// Set when every slot is gone: the writer closes the connection.
    closed: Cell<bool>,
}

impl Shared {
    fn wake_writer(&self) {
        if let Some(w) = self.writer.take() {
            w.wake();
        }
    }

    /// Fails every waiting call and every later one.
    fn fail(&self, kind: io::ErrorKind) {
        self.broken.set(Some(kind));
        let waiting = std::mem::take(&mut *self.waiting.borrow_mut());
        for (reply, call) in waiting {
            reply.finish(call, Err(kind));
        }
        self.wake_writer();
    }
}

/// Writes every queued frame in one write and one flush, then waits for
/// more; after the last slot is gone, closes the connection.
async fn write_batches<W: AsyncWrite + Unpin>(shared: Rc<Shared>, mut write: W) {
    let mut batch = Vec::new();
    loop {
        poll_fn(|cx| {
            if !shared.outgoing.borrow().is_empty()
                || shared.closed.get()
                || shared.broken.get().is_some()
            {
                return Poll::Ready(());
            }
            shared.writer.set(Some(cx.waker().clone()));
            Poll::Pending
        })
        .await;
        std::mem::swap(&mut batch, &mut *shared.outgoing.borrow_mut());
        if batch.is_empty() {
            let _ = write.shutdown().await;
            return;
        }
        let written = async {
            write.write_all(&batch).await?;
            write.flush().await
        }
        .await;
        batch.clear();
        if let Err(e) = written {
            return shared.fail(e.kind());
        }
    }
}

/// Reads responses until the connection fails or ends, then fails every
/// call still waiting.
async fn read_responses<R: AsyncRead + Unpin>(shared: Rc<Shared>, mut read: R) {
    let kind = match deliver_responses(&shared, &mut read).await {
        Ok(()) => io::ErrorKind::UnexpectedEof,
        Err(e) => e.kind(),
    };
    shared.fail(kind);
}

/// Hands each response to the oldest waiting call.
async fn deliver_responses<R: AsyncRead + Unpin>(shared: &Shared, read: &mut R) -> io::Result<()> {
    let mut frames = Frames::default();
    while frames.fill(read).await? {
        while let Some(body) = frames.next_frame()? {
            let Some((reply, call)) = shared.waiting.borrow_mut().pop_front() else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a response nobody asked for",
                ));
            };
            reply.finish(call, Ok(&frames.buf[body]));
        }
    }
    Ok(())
}

/// The slots' handle on the connection: when the last slot drops it, the
/// writer closes the connection (and the reader then sees it end).
struct Client {
    shared: Rc<Shared>,
}

impl Drop for Client {
    fn drop(&mut self) {
        self.shared.closed.set(true);
        self.shared.wake_writer();
    }
}

/// A share of one connection whose writes are coalesced.
pub struct BatchedSlot {
    client: Rc<Client>,
    reply: Rc<Reply>,
    /// Calls made so far: the number of the latest.
    calls: u64,
}

impl std::fmt::Debug for BatchedSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchedSlot")
            .field("calls", &self.calls)
            .finish_non_exhaustive()
    }
}

/// `n` slots sharing one connection; spawns the writer and reader tasks
/// on the current `LocalSet`.
pub fn batched<R, W>(read: R, write: W, n: usize) -> Vec<BatchedSlot>
where
    R: AsyncRead + Unpin + 'static,
    W: AsyncWrite + Unpin + 'static,
{
    let shared = Rc::new(Shared::default());
    tokio::task::spawn_local(write_batches(shared.clone(), write));
    tokio::task::spawn_local(read_responses(shared.clone(), read));
    let client = Rc::new(Client { shared });
    (0..n)
        .map(|_| BatchedSlot {
            client: client.clone(),
            reply: Rc::default(),
            calls: 0,
        })
        .collect()
}

impl BatchedSlot {
    /// Queues the request's frame and its place in the response order.
    fn queue(&mut self, request: &[u8]) -> io::Result<u64> {
        let shared = &self.client.shared;
        if let Some(kind) = shared.broken.get() {
            return Err(kind.into());
        }
        self.calls += 1;
        {
            let mut out = shared.outgoing.borrow_mut();
            out.extend_from_slice(&(request.len() as u32).to_le_bytes());
            out.extend_from_slice(request);
        }
        shared
            .waiting
            .borrow_mut()
            .push_back((self.reply.clone(), self.calls));
        shared.wake_writer();
        Ok(self.calls)
    }
}

impl Slot for BatchedSlot {
    async fn call(&mut self, request: &'static [u8]) -> io::Result<usize> {
        let call = self.queue(request)?;
        let reply = &self.reply;
        let n = poll_fn(|cx| match reply.done.take() {
            Some((c, result)) if c == call => Poll::Ready(result),
            _ => {
                reply.waker.set(Some(cx.waker().clone()));
                Poll::Pending
            }
        })
        .await?;
        check_echo(request.len(), n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames_of(bytes: &[u8]) -> Frames {
        Frames {
            buf: bytes.to_vec(),
            start: 0,
            end: bytes.len(),
        }
    }

    #[test]
    fn complete_frames_come_out_and_a_partial_one_waits() {
        let mut f = frames_of(&[2, 0, 0, 0, b'h', b'i', 0, 0, 0, 0, 3, 0, 0, 0, b'a']);
        let first = f.next_frame().expect("valid length").expect("complete");
        assert_eq!(&f.buf[first], b"hi");
        let empty = f.next_frame().expect("valid length").expect("complete");
        assert!(empty.is_empty());
        assert_eq!(f.next_frame().expect("valid length"), None);
        f.make_room();
        assert_eq!(&f.buf[f.start..f.end], &[3, 0, 0, 0, b'a']);
    }

    #[test]
    fn an_oversized_length_is_an_error() {
        let mut f = frames_of(&u32::MAX.to_le_bytes());
        assert!(f.next_frame().is_err());
    }
}
