//! Length-prefixed messages over a byte stream (TCP, TLS, a QUIC stream):
//! a 4-byte little-endian length, then the message. The echo server and
//! the two ways a client shares streams between slots.

use std::io;
use std::rc::Rc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::Mutex;

use super::{check_echo, Slot};

/// Longer frames are refused: a corrupt length must not allocate gigabytes.
const MAX_FRAME: usize = 16 << 20;

pub(super) fn frame_len(n: u32) -> io::Result<usize> {
    let n = n as usize;
    if n > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "frame too long"));
    }
    Ok(n)
}

/// Echoes frames until the peer closes. Responses are flushed when no
/// further request is already buffered, so a pipelined burst is answered
/// in a few large writes.
pub async fn serve_frames<R, W>(read: R, write: W) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut r = BufReader::with_capacity(64 << 10, read);
    let mut w = BufWriter::with_capacity(64 << 10, write);
    let mut buf = Vec::new();
    loop {
        let n = match r.read_u32_le().await {
            Ok(n) => frame_len(n)?,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return w.shutdown().await,
            Err(e) => return Err(e),
        };
        buf.resize(n, 0);
        r.read_exact(&mut buf).await?;
        w.write_u32_le(n as u32).await?;
        w.write_all(&buf).await?;
        if r.buffer().is_empty() {
            w.flush().await?;
        }
    }
}

/// Writes one frame: header and message in one buffer, so a small request
/// is one segment (TCP_NODELAY is on).
async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    scratch: &mut Vec<u8>,
    request: &[u8],
) -> io::Result<()> {
    scratch.clear();
    scratch.extend_from_slice(&(request.len() as u32).to_le_bytes());
    scratch.extend_from_slice(request);
    w.write_all(scratch).await?;
    w.flush().await
}

/// Reads one frame into `scratch`, returning its length.
async fn read_frame<R: AsyncRead + Unpin>(r: &mut R, scratch: &mut Vec<u8>) -> io::Result<usize> {
    let n = frame_len(r.read_u32_le().await?)?;
    scratch.resize(n, 0);
    r.read_exact(scratch).await?;
    Ok(n)
}

/// A stream of its own: a pooled connection or a persistent QUIC stream.
#[derive(Debug)]
pub struct StreamSlot<R, W> {
    read: BufReader<R>,
    write: W,
    scratch: Vec<u8>,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> StreamSlot<R, W> {
    /// A slot over one stream's two halves, reading through a 64 KiB
    /// buffer.
    pub fn new(read: R, write: W) -> Self {
        Self {
            read: BufReader::with_capacity(64 << 10, read),
            write,
            scratch: Vec::new(),
        }
    }
}

impl<R: AsyncRead + Unpin + 'static, W: AsyncWrite + Unpin + 'static> Slot for StreamSlot<R, W> {
    async fn call(&mut self, request: &'static [u8]) -> io::Result<usize> {
        write_frame(&mut self.write, &mut self.scratch, request).await?;
        let n = read_frame(&mut self.read, &mut self.scratch).await?;
        check_echo(request.len(), n)
    }
}

/// One connection shared by every slot, requests pipelined.
struct Pipe<R, W> {
    write: Mutex<W>,
    read: Mutex<BufReader<R>>,
}

/// A share of one pipelined connection. Responses come back in request
/// order, and tokio's mutexes are FIFO: a slot queues for the read side
/// in the same poll that releases the write side, so the read queue has
/// the order of the writes and each slot reads exactly its own response.
pub struct PipelinedSlot<R, W> {
    pipe: Rc<Pipe<R, W>>,
    scratch: Vec<u8>,
}

impl<R, W> std::fmt::Debug for PipelinedSlot<R, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelinedSlot").finish_non_exhaustive()
    }
}

/// `n` slots sharing one connection.
pub fn pipelined<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    read: R,
    write: W,
    n: usize,
) -> Vec<PipelinedSlot<R, W>> {
    let pipe = Rc::new(Pipe {
        write: Mutex::new(write),
        read: Mutex::new(BufReader::with_capacity(256 << 10, read)),
    });
    (0..n)
        .map(|_| PipelinedSlot {
            pipe: pipe.clone(),
            scratch: Vec::new(),
        })
        .collect()
}

impl<R: AsyncRead + Unpin + 'static, W: AsyncWrite + Unpin + 'static> Slot for PipelinedSlot<R, W> {
    async fn call(&mut self, request: &'static [u8]) -> io::Result<usize> {
        let scratch = &mut self.scratch;
        let mut reader = {
            let mut w = self.pipe.write.lock().await;
            write_frame(&mut *w, scratch, request).await?;
            // Queue for the read side before releasing the write side.
            let reader = self.pipe.read.lock();
            drop(w);
            reader.await
        };
        let n = read_frame(&mut *reader, scratch).await?;
        check_echo(request.len(), n)
    }
}
