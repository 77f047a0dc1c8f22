//! The systems under test. Each one starts a server on its own thread and
//! hands the client a set of *slots*: one slot carries one outstanding RPC
//! at a time (an SMT endpoint handle, a pooled connection, a share of one
//! pipelined connection, a QUIC stream). Workloads drive slots and never
//! see the transport.

pub mod batched;
pub mod floor;
pub mod framed;
pub mod link;
pub mod quic;
pub mod smt;
pub mod smt_local;
pub mod tls;
pub mod workers;

use std::io;
use std::sync::OnceLock;
use std::thread::JoinHandle;

/// Socket buffer size for every system (SO_SNDBUF and SO_RCVBUF).
pub const SOCKET_BUFFER: usize = 8 << 20;

/// The most outstanding RPCs any workload uses: the slots each system opens.
pub const MAX_SLOTS: usize = 150;

/// One outstanding RPC at a time: send a request, wait for its response.
#[allow(async_fn_in_trait)] // used with concrete types on one thread
pub trait Slot: 'static {
    /// Sends `request` and returns the response's length. The server
    /// echoes, so a length other than the request's is an error.
    async fn call(&mut self, request: &'static [u8]) -> io::Result<usize>;

    /// Told before a closed loop whether this slot is the only one in use
    /// (one RPC at a time). A system may then block the client thread
    /// instead of waking it through the runtime, if that is faster.
    fn set_alone(&mut self, _alone: bool) {}
}

/// Every system this tool knows, in table order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum System {
    /// `smt-aes`: SMT over UDP, AES-128-GCM, keys installed.
    SmtAes,
    /// `smt-null`: SMT with the null cipher (the unencrypted baseline).
    SmtNull,
    /// `smt-raw`: SMT over raw IP (protocol 253); needs CAP_NET_RAW.
    SmtRaw,
    /// `smt-aes-nogro`: as `smt-aes`, UDP GRO off.
    SmtAesNoGro,
    /// `smt-null-nogro`: as `smt-null`, UDP GRO off.
    SmtNullNoGro,
    /// `smt-aes-busy`: as `smt-aes`, drivers busy-poll.
    SmtBusyPoll,
    /// `smt-aes-local`: through the caller-driven `LocalEndpoint`.
    SmtLocal,
    /// `smt-aes-link`: as `smt-aes`, at the link's MTU (`systems::link`).
    SmtAesLink,
    /// `smt-aes-local-link`: as `smt-aes-local`, at the link's MTU.
    SmtLocalLink,
    /// `tcp-pool`: plain TCP, one request outstanding per connection.
    TcpPool,
    /// `tls-pool`: TLS 1.3 over TCP, pooled like `tcp-pool`.
    TlsPool,
    /// `tls-pipe`: one TLS connection, requests pipelined, writes
    /// coalesced.
    TlsPipelined,
    /// `tls-pipe-naive`: one TLS connection, each request written and
    /// flushed on its own.
    TlsPipelinedNaive,
    /// `quic-stream`: QUIC, a new stream per request.
    QuicStreamPerRpc,
    /// `quic-persist`: QUIC, one persistent stream per slot.
    QuicPersistent,
    /// `quic-persist-link`: as `quic-persist`, at the link's MTU.
    QuicPersistentLink,
    /// `udp-floor`: bare UDP ping-pong.
    UdpFloor,
    /// `tcp-floor`: bare TCP ping-pong.
    TcpFloor,
    /// `smt-workers-1` (opt-in): worker server, one shard thread.
    SmtWorkers1,
    /// `smt-workers-2` (opt-in): one peer's messages over two shards.
    SmtWorkers2,
    /// `smt-aes-9k` (opt-in): a 9000-byte link MTU.
    SmtAesJumbo,
    /// `smt-aes-offload` (opt-in): the TLS offload engine model.
    SmtAesOffload,
}

impl System {
    /// The systems a run measures by default, in table order.
    pub const ALL: [System; 18] = [
        System::SmtAes,
        System::SmtAesLink,
        System::SmtNull,
        System::SmtRaw,
        System::SmtAesNoGro,
        System::SmtNullNoGro,
        System::SmtBusyPoll,
        System::SmtLocal,
        System::SmtLocalLink,
        System::TcpPool,
        System::TlsPool,
        System::TlsPipelined,
        System::TlsPipelinedNaive,
        System::QuicStreamPerRpc,
        System::QuicPersistent,
        System::QuicPersistentLink,
        System::UdpFloor,
        System::TcpFloor,
    ];

    /// Systems run only when named in `--systems`: the worker shape
    /// (`systems/workers.rs`) measures scaling over cores, which the
    /// default run's one pinned CPU cannot show.
    pub const OPT_IN: [System; 4] = [
        System::SmtWorkers1,
        System::SmtWorkers2,
        System::SmtAesJumbo,
        System::SmtAesOffload,
    ];

    /// Short name used in tables, files and `--systems`.
    pub fn name(self) -> &'static str {
        match self {
            Self::SmtAes => "smt-aes",
            Self::SmtNull => "smt-null",
            Self::SmtRaw => "smt-raw",
            Self::SmtAesNoGro => "smt-aes-nogro",
            Self::SmtNullNoGro => "smt-null-nogro",
            Self::SmtBusyPoll => "smt-aes-busy",
            Self::SmtLocal => "smt-aes-local",
            Self::SmtAesLink => "smt-aes-link",
            Self::SmtLocalLink => "smt-aes-local-link",
            Self::TcpPool => "tcp-pool",
            Self::TlsPool => "tls-pool",
            Self::TlsPipelined => "tls-pipe",
            Self::TlsPipelinedNaive => "tls-pipe-naive",
            Self::QuicStreamPerRpc => "quic-stream",
            Self::QuicPersistent => "quic-persist",
            Self::QuicPersistentLink => "quic-persist-link",
            Self::UdpFloor => "udp-floor",
            Self::TcpFloor => "tcp-floor",
            Self::SmtWorkers1 => "smt-workers-1",
            Self::SmtAesJumbo => "smt-aes-9k",
            Self::SmtWorkers2 => "smt-workers-2",
            Self::SmtAesOffload => "smt-aes-offload",
        }
    }

    /// One line for the legend.
    pub fn describe(self) -> &'static str {
        match self {
            Self::SmtAes => {
                "SMT over UDP, AES-128-GCM (keys installed, no handshake), 1500-byte link MTU (Ethernet)"
            }
            Self::SmtAesLink => {
                "as smt-aes, at the link's MTU: loopback's (64 KiB), the segment size TCP gets there; grant window 8 datagrams"
            }
            Self::SmtLocalLink => "as smt-aes-local, at the link's MTU (loopback's, 64 KiB); grant window 8 datagrams",
            Self::SmtNull => "SMT over UDP, null cipher (the unencrypted Homa-style baseline)",
            Self::SmtRaw => "SMT in raw-IP mode (protocol 253), AES-128-GCM; needs CAP_NET_RAW",
            Self::SmtAesNoGro => "SMT AES-128-GCM with UDP receive offload (GRO) off",
            Self::SmtNullNoGro => "SMT null cipher with UDP receive offload (GRO) off",
            Self::SmtBusyPoll => "SMT AES-128-GCM, drivers busy-poll (rtt only, unpinned only)",
            Self::SmtLocal => {
                "SMT AES-128-GCM through the caller-driven LocalEndpoint (no driver thread)"
            }
            Self::TcpPool => "plain TCP, a pool of C connections, one request outstanding on each",
            Self::TlsPool => "TLS 1.3 (rustls) over TCP, pooled like tcp-pool",
            Self::TlsPipelined => {
                "TLS 1.3 (rustls) over ONE TCP connection, C requests pipelined, writes coalesced (every ready request in one write, a batch of responses in one write)"
            }
            Self::TlsPipelinedNaive => {
                "TLS 1.3 (rustls) over ONE TCP connection, C requests pipelined, each written and flushed on its own"
            }
            Self::QuicStreamPerRpc => "QUIC (quinn), a new bidirectional stream per request",
            Self::QuicPersistent => {
                "QUIC (quinn), one persistent stream per outstanding slot, quinn's default MTU (1200 up to 1452 by discovery)"
            }
            Self::QuicPersistentLink => {
                "as quic-persist, at the link's MTU: loopback's (64 KiB) as initial MTU, discovery bound and max_udp_payload_size; Cubic's initial window 2 datagrams (RFC 9002), GSO off"
            }
            Self::UdpFloor => "bare UDP ping-pong, blocking sockets (rtt, ≤ 64 KiB)",
            Self::TcpFloor => "bare TCP ping-pong, blocking sockets (rtt)",
            Self::SmtWorkers1 => {
                "SMT AES-128-GCM, worker server with 1 shard thread behind a dispatcher (opt-in)"
            }
            Self::SmtAesJumbo => {
                "SMT AES-128-GCM with a 9000-byte link MTU, as on jumbo-frame networks (opt-in; loopback's own MTU is 65536, which TCP uses)"
            }
            Self::SmtWorkers2 => {
                "SMT AES-128-GCM, worker server: one peer's messages over 2 shard threads (opt-in)"
            }
            Self::SmtAesOffload => {
                "SMT AES-128-GCM with TLS offload: the smt-offload engine model seals (a worker thread per transmit queue, 2 queues) and opens (receive contexts), standing in for a NIC on the same cores (opt-in; docs/offload.md)"
            }
        }
    }

    /// The system named `name` (default or opt-in), if any.
    pub fn by_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .chain(Self::OPT_IN)
            .find(|s| s.name() == name)
    }

    /// Whether it is one of the SMT variants `systems::smt` starts.
    pub fn is_smt(self) -> bool {
        matches!(
            self,
            Self::SmtAes
                | Self::SmtNull
                | Self::SmtRaw
                | Self::SmtAesNoGro
                | Self::SmtNullNoGro
                | Self::SmtBusyPoll
                | Self::SmtLocal
                | Self::SmtAesLink
                | Self::SmtLocalLink
                | Self::SmtWorkers1
                | Self::SmtWorkers2
                | Self::SmtAesJumbo
                | Self::SmtAesOffload
        )
    }

    /// Latency-only variants: the floors (one socket, blocking) and busy
    /// polling (it exists to show the best latency, not throughput).
    pub fn rtt_only(self) -> bool {
        matches!(self, Self::UdpFloor | Self::TcpFloor | Self::SmtBusyPoll)
    }

    /// Whether the mixed (open-loop) workload runs. Not for the
    /// caller-driven endpoint: its slots share one endpoint through a
    /// polling hand-off that suits closed loops, and the open loop's
    /// arrival timer starves behind it (most arrivals would be served
    /// late, measuring the harness rather than SMT).
    pub fn runs_mixed(self) -> bool {
        !self.rtt_only() && !self.is_local()
    }

    /// Whether it runs through the caller-driven `LocalEndpoint`.
    pub fn is_local(self) -> bool {
        matches!(self, Self::SmtLocal | Self::SmtLocalLink)
    }

    /// Whether it takes the link's MTU (`systems::link`) instead of its
    /// transport's default.
    pub fn at_link_mtu(self) -> bool {
        matches!(
            self,
            Self::SmtAesLink | Self::SmtLocalLink | Self::QuicPersistentLink
        )
    }

    /// The largest message the system can carry (the UDP floor sends one
    /// datagram).
    pub fn max_size(self) -> usize {
        match self {
            Self::UdpFloor => floor::MAX_UDP,
            _ => usize::MAX,
        }
    }
}

/// Lines a system adds to the run's notes before it stops (its own
/// counters).
type Report = Box<dyn Fn() -> Vec<String> + Send>;

/// A server running on its own thread; `stop` ends it and joins it.
pub struct ServerThread {
    stop: Option<Box<dyn FnOnce() + Send>>,
    thread: Option<JoinHandle<()>>,
    report: Option<Report>,
}

impl std::fmt::Debug for ServerThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerThread").finish_non_exhaustive()
    }
}

impl ServerThread {
    /// A server on `thread`; `stop` asks it to return.
    pub fn new(stop: Box<dyn FnOnce() + Send>, thread: JoinHandle<()>) -> Self {
        Self {
            stop: Some(stop),
            thread: Some(thread),
            report: None,
        }
    }

    /// Adds lines to the run's notes when the measurements are done.
    pub fn with_report(mut self, report: Report) -> Self {
        self.report = Some(report);
        self
    }

    /// The system's own lines for the notes (none by default).
    pub fn report(&self) -> Vec<String> {
        self.report.as_ref().map(|r| r()).unwrap_or_default()
    }

    /// Stops the server and waits for its thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Request bytes for every size: one shared buffer, so no request is
/// allocated or filled during a run.
pub fn payload(size: usize) -> &'static [u8] {
    static BUF: OnceLock<Vec<u8>> = OnceLock::new();
    let buf = BUF.get_or_init(|| {
        (0..crate::dist::MAX_MESSAGE)
            .map(|i| (i * 7 + 3) as u8)
            .collect()
    });
    &buf[..size.min(buf.len())]
}

/// The response had the wrong length: the server or transport misbehaved.
pub fn check_echo(sent: usize, got: usize) -> io::Result<usize> {
    if sent == got {
        return Ok(got);
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        format!("echo of {sent} bytes came back with {got}"),
    ))
}

/// Starts a current-thread tokio runtime on a new thread for a server;
/// `serve` runs until the returned stop function is called.
pub fn spawn_server<F, Fut>(name: &str, serve: F) -> io::Result<ServerThread>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => return eprintln!("server runtime: {e}"),
            };
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                tokio::select! {
                    _ = serve() => {}
                    _ = rx => {}
                }
            });
        })?;
    Ok(ServerThread::new(
        Box::new(move || {
            let _ = tx.send(());
        }),
        thread,
    ))
}

/// The socket buffers every system gets (forced past the sysctl cap when
/// privileged, like SMT's own sockets).
pub fn size_buffers<S: std::os::fd::AsFd>(socket: &S) -> io::Result<()> {
    smt_udp::size_buffers(socket, SOCKET_BUFFER, SOCKET_BUFFER).map(|_| ())
}
