//! The physical floor: bare UDP and TCP ping-pong with blocking sockets on
//! two threads, no protocol, no encryption, no runtime. Only the `rtt`
//! workload uses them (one slot).

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

use super::{check_echo, size_buffers, ServerThread, Slot};

/// The largest UDP payload on IPv4 (the limit of one GSO send too).
pub const MAX_UDP: usize = smt_udp::MAX_GSO_PAYLOAD;

/// A blocking UDP socket connected to the echo thread.
#[derive(Debug)]
pub struct UdpSlot {
    socket: UdpSocket,
    buf: Vec<u8>,
}

impl Slot for UdpSlot {
    async fn call(&mut self, request: &'static [u8]) -> io::Result<usize> {
        self.socket.send(request)?;
        let n = self.socket.recv(&mut self.buf)?;
        check_echo(request.len(), n)
    }
}

/// UDP ping-pong; an empty datagram stops the echo thread.
pub fn start_udp() -> io::Result<(ServerThread, Vec<UdpSlot>)> {
    let server = UdpSocket::bind("127.0.0.1:0")?;
    let client = UdpSocket::bind("127.0.0.1:0")?;
    size_buffers(&server)?;
    size_buffers(&client)?;
    client.connect(server.local_addr()?)?;
    // A lost datagram must not hang the run.
    client.set_read_timeout(Some(Duration::from_secs(2)))?;
    let stopper = UdpSocket::bind("127.0.0.1:0")?;
    stopper.connect(server.local_addr()?)?;
    let thread = std::thread::Builder::new()
        .name("udp-echo".into())
        .spawn(move || {
            let mut buf = vec![0u8; MAX_UDP];
            while let Ok((n, from)) = server.recv_from(&mut buf) {
                if n == 0 {
                    return;
                }
                let _ = server.send_to(&buf[..n], from);
            }
        })?;
    let stop = Box::new(move || {
        let _ = stopper.send(&[]);
    });
    let slot = UdpSlot {
        socket: client,
        buf: vec![0u8; MAX_UDP],
    };
    Ok((ServerThread::new(stop, thread), vec![slot]))
}

/// A blocking TCP connection to the echo thread, length-prefixed frames.
#[derive(Debug)]
pub struct TcpFloorSlot {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Slot for TcpFloorSlot {
    async fn call(&mut self, request: &'static [u8]) -> io::Result<usize> {
        self.buf.clear();
        self.buf
            .extend_from_slice(&(request.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(request);
        self.stream.write_all(&self.buf)?;
        let n = read_frame(&mut self.stream, &mut self.buf)?;
        check_echo(request.len(), n)
    }
}

fn read_frame(s: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let n = u32::from_le_bytes(len) as usize;
    if n > crate::dist::MAX_MESSAGE {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "frame too long"));
    }
    buf.resize(n, 0);
    s.read_exact(buf)?;
    Ok(n)
}

fn echo_frames(mut s: TcpStream) -> io::Result<()> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    loop {
        let n = read_frame(&mut s, &mut buf)?;
        out.clear();
        out.extend_from_slice(&(n as u32).to_le_bytes());
        out.extend_from_slice(&buf);
        s.write_all(&out)?;
    }
}

/// TCP ping-pong on one connection; the echo thread ends when the client
/// closes it.
pub fn start_tcp() -> io::Result<(ServerThread, Vec<TcpFloorSlot>)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    size_buffers(&listener)?;
    let client = TcpStream::connect(listener.local_addr()?)?;
    client.set_nodelay(true)?;
    client.set_read_timeout(Some(Duration::from_secs(5)))?;
    let (server, _) = listener.accept()?;
    server.set_nodelay(true)?;
    let closer = client.try_clone()?;
    let thread = std::thread::Builder::new()
        .name("tcp-echo".into())
        .spawn(move || {
            let _ = echo_frames(server);
        })?;
    let stop = Box::new(move || {
        let _ = closer.shutdown(std::net::Shutdown::Both);
    });
    let slot = TcpFloorSlot {
        stream: client,
        buf: Vec::new(),
    };
    Ok((ServerThread::new(stop, thread), vec![slot]))
}
