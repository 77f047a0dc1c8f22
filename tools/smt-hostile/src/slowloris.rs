//! The metrics listener's attacker: TCP connections to `smt server
//! --metrics` that never finish a request. Half send nothing; the other
//! half send a request head one byte a second and never end it
//! (slowloris). A connection the server closes is opened again at once, so
//! the attacker keeps its number up for as long as it runs.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Connections held at once (four times the listener's limit of 64).
pub const CONNECTIONS: usize = 256;
/// A slowloris sends one byte per this.
const BYTE_EVERY: Duration = Duration::from_secs(1);

/// What the attacker did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    /// Connections opened (the first ones and every reopening).
    pub opened: u64,
    /// Connections the server closed or reset.
    pub closed_by_server: u64,
    /// Connection attempts refused or failed.
    pub refused: u64,
    /// Header bytes sent.
    pub bytes: u64,
    pub elapsed: Duration,
}

struct Held {
    stream: Option<TcpStream>,
    slow: bool,
    sent: usize,
}

const HEAD: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: smt-hostile\r\nX-Slow: ";

/// Holds [`CONNECTIONS`] hostile connections to `metrics` until `duration`
/// passes or `stop` is set.
pub fn run(metrics: SocketAddr, duration: Duration, stop: &AtomicBool) -> Tally {
    let start = Instant::now();
    let mut tally = Tally::default();
    let mut held: Vec<Held> = (0..CONNECTIONS)
        .map(|i| Held {
            stream: None,
            slow: i % 2 == 1,
            sent: 0,
        })
        .collect();
    while !stop.load(Ordering::Relaxed) && start.elapsed() < duration {
        for h in &mut held {
            keep_up(h, metrics, &mut tally);
        }
        let pause = Instant::now() + BYTE_EVERY;
        while Instant::now() < pause && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    tally.elapsed = start.elapsed();
    tally
}

/// Reopens a closed connection, or moves an open one on: a slowloris
/// sends its next byte; an idle one only checks that it is still open.
fn keep_up(h: &mut Held, metrics: SocketAddr, tally: &mut Tally) {
    if h.stream.is_none() {
        match TcpStream::connect_timeout(&metrics, Duration::from_millis(200)) {
            Ok(s) => {
                let _ = s.set_nonblocking(true);
                h.stream = Some(s);
                h.sent = 0;
                tally.opened += 1;
            }
            Err(_) => {
                tally.refused += 1;
                return;
            }
        }
    }
    let Some(s) = h.stream.as_mut() else {
        return;
    };
    let open = if h.slow {
        let byte = HEAD.get(h.sent).copied().unwrap_or(b'a');
        let ok = s.write_all(&[byte]).is_ok();
        h.sent += usize::from(ok);
        tally.bytes += u64::from(ok);
        ok && still_open(s)
    } else {
        still_open(s)
    };
    if !open {
        h.stream = None;
        tally.closed_by_server += 1;
    }
}

/// False once the server closed (end of stream) or reset the connection;
/// whatever it answered is read and thrown away.
fn still_open(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 512];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return false,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
}
