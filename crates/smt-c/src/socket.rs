//! One open endpoint as C sees it: a [`LocalEndpoint`] plus the numbers C
//! names calls and requests by. Safe Rust only; `lib.rs` converts the C
//! arguments and calls in here.
//!
//! Why `LocalEndpoint` and not the threaded `Endpoint`: a C program that
//! owns a socket drives it from its own thread (a blocking loop or its
//! epoll loop), as with Homa's socket. `LocalEndpoint` is exactly that: its
//! UDP socket is the descriptor to poll, and the thread inside `smt_recv`
//! receives, runs the timers and transmits, with no thread of the library's
//! own and no hand-off between threads per message (smt-kv serves SMT from
//! its event loop the same way: `docs/apps.md`). The threaded face would
//! add a background thread behind the C program's back.

use std::collections::HashMap;
use std::ffi::c_int;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use smt::keys::{AeadAlgorithm, PskClient, TrafficKey};
use smt::ticket::{KeyPool, ReplayCache, StaticKey, Ticket, ZeroRttServer};
use smt::tls::{ServerName, TlsClient, TlsServer};
use smt::{
    Bytes, CallId, CallOptions, EndpointConfig, LocalEndpoint, LocalEvent, RequestId, Role,
    ServerAcceptor,
};

use crate::error::{
    code_of, Failure, SMT_ERR_AGAIN, SMT_ERR_CONFIG, SMT_ERR_FILE, SMT_ERR_INVALID,
    SMT_ERR_TOO_LARGE, SMT_ERR_UNKNOWN_ID,
};

/// The longest message `smt_send` and `smt_reply` take (64 MiB); set on
/// every endpoint libsmt opens, so both sides of a C deployment agree.
pub const SMT_MAX_MESSAGE_LEN: usize = 64 << 20;

/// The most calls one handle has outstanding at once:
/// `smt_send` refuses more with `SMT_ERR_TOO_MANY_CALLS`.
pub const SMT_MAX_OUTSTANDING_CALLS: usize = 16_384;

/// The shortest pre-shared key `smt_set_psk` takes (32 bytes).
pub const SMT_MIN_PSK_LEN: usize = 32;

/// How long `smt_close` lets answers already given reach their clients
/// (and their acknowledgements come back), as `Endpoint::close` does.
const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// How often a closing endpoint checks whether it is done.
const CLOSE_STEP: Duration = Duration::from_millis(2);

/// 0-RTT hellos remembered against replay, and ephemeral keys kept ready
/// for forward-secret replies (the values `smt server` uses).
const REPLAY_CACHE_ENTRIES: usize = 100_000;
const KEY_POOL_SIZE: usize = 64;

/// What `smt_recv` hands over.
#[derive(Debug)]
pub enum Delivery {
    Request {
        id: u64,
        peer: SocketAddr,
        data: Bytes,
    },
    Response {
        id: u64,
        peer: SocketAddr,
        data: Bytes,
    },
    Failed {
        id: u64,
        peer: SocketAddr,
        code: c_int,
        message: String,
    },
}

/// What an id names: one of our calls, or a request waiting for our answer.
#[derive(Debug)]
enum Pending {
    Call { call: CallId, peer: SocketAddr },
    Request(RequestId),
}

/// An endpoint opened by `smt_open`.
#[derive(Debug)]
pub struct Socket {
    endpoint: LocalEndpoint,
    /// The next id handed out (calls and requests share the space, so an
    /// id names one thing on a handle).
    next_id: u64,
    pending: HashMap<u64, Pending>,
    /// The id of each outstanding call.
    calls: HashMap<CallId, u64>,
    /// The options of calls sent from now on (`smt_set_call_timeout`).
    call_options: CallOptions,
    server: ServerSide,
}

/// What the server side answers; the acceptor is rebuilt from it whenever a
/// setter changes one part, so setting TLS keeps the PSK and the reverse.
#[derive(Default)]
struct ServerSide {
    tls: Option<TlsServer>,
    zero_rtt: Option<Arc<ZeroRttServer>>,
    psk: Option<Vec<u8>>,
}

impl std::fmt::Debug for ServerSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSide")
            .field("tls", &self.tls.is_some())
            .field("zero_rtt", &self.zero_rtt.is_some())
            .field("psk", &self.psk.is_some())
            .finish()
    }
}

impl Socket {
    /// Binds a UDP socket on `addr`.
    pub fn open(addr: SocketAddr) -> Result<Self, Failure> {
        let mut config = EndpointConfig::default();
        config
            .set_max_outstanding_calls(SMT_MAX_OUTSTANDING_CALLS)
            .protocol_mut()
            .set_max_message_len(SMT_MAX_MESSAGE_LEN as u64);
        Ok(Self {
            endpoint: LocalEndpoint::bind(addr, config)?,
            next_id: 1,
            pending: HashMap::new(),
            calls: HashMap::new(),
            call_options: CallOptions::new(),
            server: ServerSide::default(),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.endpoint.local_addr()
    }

    // ---- keys ----

    /// Installs a session with `peer` from raw traffic keys: client-to-server
    /// key and IV, then server-to-client key and IV (AES-128-GCM: 56 bytes,
    /// AES-256-GCM: 88).
    pub fn install_keys(
        &mut self,
        peer: SocketAddr,
        role: Role,
        keys: &[u8],
    ) -> Result<(), Failure> {
        let algorithm = match keys.len() {
            56 => AeadAlgorithm::Aes128Gcm,
            88 => AeadAlgorithm::Aes256Gcm,
            n => {
                return Err(Failure::new(
                    SMT_ERR_INVALID,
                    format!(
                        "keys are {n} bytes; give 56 (AES-128-GCM: key 16 + IV 12 per direction) \
                         or 88 (AES-256-GCM: key 32 + IV 12 per direction), client-to-server first"
                    ),
                ))
            }
        };
        let (c2s, s2c) = keys.split_at(keys.len() / 2);
        let session = smt::keys::session(
            role,
            &traffic_key(algorithm, c2s)?,
            &traffic_key(algorithm, s2c)?,
        );
        self.endpoint
            .install_session(peer, session)
            .map_err(|e| Failure::new(code_of(&e), format!("cannot install these keys: {e}")))
    }

    /// Calls to peers without a session run the PSK nonce exchange, and
    /// this endpoint answers it.
    pub fn set_psk(&mut self, key: &[u8]) -> Result<(), Failure> {
        if key.len() < SMT_MIN_PSK_LEN {
            return Err(Failure::new(
                SMT_ERR_INVALID,
                format!(
                    "the pre-shared key is {} bytes; at least {SMT_MIN_PSK_LEN} random bytes are needed",
                    key.len()
                ),
            ));
        }
        self.endpoint
            .set_psk_client(PskClient::new(key, AeadAlgorithm::Aes128Gcm));
        self.server.psk = Some(key.to_vec());
        self.install_acceptor();
        Ok(())
    }

    /// Answers TLS 1.3 handshakes with this certificate chain and key;
    /// with `client_ca`, clients must present a certificate it issued.
    pub fn set_tls_server(
        &mut self,
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
    ) -> Result<(), Failure> {
        let (cert, key) = (read(cert, "certificate")?, read(key, "private key")?);
        let ca = client_ca.map(|p| read(p, "client CA")).transpose()?;
        let tls = TlsServer::new(&cert, &key, ca.as_deref()).map_err(config)?;
        self.server.tls = Some(tls);
        self.install_acceptor();
        Ok(())
    }

    /// Calls to peers without a session run a TLS 1.3 handshake, trusting
    /// the CA certificates in `ca`; `client_auth` is a certificate and key
    /// to present when a server asks for one.
    pub fn set_tls_client(
        &mut self,
        ca: &Path,
        client_auth: Option<(&Path, &Path)>,
    ) -> Result<(), Failure> {
        let ca = read(ca, "CA certificate")?;
        let auth = client_auth
            .map(|(c, k)| {
                Ok::<_, Failure>((read(c, "client certificate")?, read(k, "client key")?))
            })
            .transpose()?;
        let auth = auth.as_ref().map(|(c, k)| (c.as_slice(), k.as_slice()));
        let client = TlsClient::new(&ca, auth).map_err(config)?;
        self.endpoint.set_tls_client(client);
        Ok(())
    }

    /// TLS handshakes with `peer` check its certificate against `name`
    /// (otherwise against its IP address).
    pub fn set_server_name(&mut self, peer: SocketAddr, name: &str) -> Result<(), Failure> {
        let name = ServerName::try_from(name.to_owned()).map_err(|_| {
            Failure::new(
                SMT_ERR_INVALID,
                format!("{name:?} is not a DNS name or IP address"),
            )
        })?;
        self.endpoint.set_server_name(peer, name);
        Ok(())
    }

    /// Looks up `HOST:PORT` (blocking, with the system's resolver) and
    /// names the address for TLS.
    pub fn resolve(&mut self, server: &str) -> Result<SocketAddr, Failure> {
        self.endpoint.resolve(server).map_err(|e| {
            let code = match &e {
                smt::Error::Io(io) if io.kind() == std::io::ErrorKind::InvalidInput => {
                    crate::error::SMT_ERR_ADDRESS
                }
                other => code_of(other),
            };
            Failure::new(code, format!("cannot resolve {server:?}: {e}"))
        })
    }

    /// The next session with `peer` starts with 0-RTT from the SMT-ticket
    /// in `ticket` (base64, as `smt ticket issue` writes it), verified
    /// against the CA in `ca` and the name `name`.
    pub fn set_zero_rtt_ticket(
        &mut self,
        peer: SocketAddr,
        ticket: &Path,
        ca: &Path,
        name: &str,
        forward_secrecy: bool,
    ) -> Result<(), Failure> {
        let ticket = read_ticket(ticket)?;
        let ca_pem = read(ca, "CA certificate")?;
        let ca_der = smt::tls::certificates_der(&ca_pem).map_err(config)?;
        let Some(ca_der) = ca_der.first() else {
            return Err(Failure::new(
                SMT_ERR_CONFIG,
                format!("{} holds no certificate", ca.display()),
            ));
        };
        let verified = ticket
            .verify(ca_der, name, SystemTime::now())
            .map_err(|e| {
                Failure::new(
                    SMT_ERR_CONFIG,
                    format!("the ticket for {name} is refused: {e}"),
                )
            })?;
        self.endpoint
            .set_zero_rtt_ticket(peer, verified, forward_secrecy);
        Ok(())
    }

    /// Answers 0-RTT hellos for `ticket` with its static key (64 hex
    /// digits, as `smt ticket issue` writes OUT-static.key).
    pub fn set_zero_rtt_server(&mut self, static_key: &Path, ticket: &Path) -> Result<(), Failure> {
        let text = String::from_utf8(read(static_key, "static key")?).unwrap_or_default();
        let bad = |why: String| {
            Failure::new(
                SMT_ERR_CONFIG,
                format!("{}: {why} (expected 64 hex digits, as `smt ticket issue` writes OUT-static.key)", static_key.display()),
            )
        };
        let bytes = hex::decode(text.trim()).map_err(|_| bad("not hex".into()))?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|_| bad("not 32 bytes".into()))?;
        let key = StaticKey::from_bytes(&bytes).map_err(|e| bad(e.to_string()))?;
        let ticket = read_ticket(ticket)?;
        let server = ZeroRttServer::new(
            key,
            ticket,
            Arc::new(KeyPool::new(KEY_POOL_SIZE)),
            ReplayCache::new(REPLAY_CACHE_ENTRIES),
        )
        .map_err(|e| {
            Failure::new(
                SMT_ERR_CONFIG,
                format!("the ticket and the static key do not belong together: {e}"),
            )
        })?;
        self.server.zero_rtt = Some(Arc::new(server));
        self.install_acceptor();
        Ok(())
    }

    fn install_acceptor(&mut self) {
        let s = &self.server;
        let mut acceptor = ServerAcceptor::new(s.tls.clone(), s.zero_rtt.clone());
        if let Some(psk) = &s.psk {
            acceptor = acceptor.with_psk(psk, AeadAlgorithm::Aes128Gcm);
        }
        self.endpoint.set_handshake_acceptor(Box::new(acceptor));
    }

    // ---- messages ----

    /// Calls sent from now on fail with `SMT_ERR_TIMEOUT` when their
    /// response is not complete `timeout` after they were sent (handshake
    /// included); `None`: no deadline of their own.
    pub fn set_call_timeout(&mut self, timeout: Option<Duration>) {
        self.call_options = match timeout {
            Some(t) => CallOptions::new().timeout(t),
            None => CallOptions::new().no_timeout(),
        };
    }

    /// Starts a call; its request leaves before this returns (or once a
    /// handshake started now has installed keys).
    pub fn send(&mut self, peer: SocketAddr, data: &[u8]) -> Result<u64, Failure> {
        check_len(data.len())?;
        let call = self
            .endpoint
            .call_with(peer, data, self.call_options)
            .map_err(|e| Failure::new(code_of(&e), format!("cannot call {peer}: {e}")))?;
        let id = self.new_id();
        self.pending.insert(id, Pending::Call { call, peer });
        self.calls.insert(call, id);
        self.endpoint.flush()?;
        Ok(id)
    }

    /// The next request, response or failed call; `SMT_ERR_AGAIN` at once
    /// when `blocking` is false and none is ready.
    pub fn recv(&mut self, blocking: bool) -> Result<Delivery, Failure> {
        let timeout = if blocking { None } else { Some(Duration::ZERO) };
        loop {
            let Some(event) = self.endpoint.poll(timeout)? else {
                return Err(Failure::new(SMT_ERR_AGAIN, "no message ready yet"));
            };
            if let Some(delivery) = self.deliver(event) {
                return Ok(delivery);
            }
        }
    }

    /// Answers request `id`; the response leaves before this returns.
    /// A message over the limit is refused before anything happens (the
    /// request stays unanswered); any later failure ends the request.
    pub fn reply(&mut self, id: u64, data: &[u8]) -> Result<(), Failure> {
        check_len(data.len())?;
        let Some(&Pending::Request(request)) = self.pending.get(&id) else {
            return Err(unknown(id, "request"));
        };
        // Sent or not, the request is over: a response the engine refuses
        // abandons it (its client hears SMT_ERR_ABANDONED).
        self.pending.remove(&id);
        self.endpoint.respond(request, data).map_err(|e| {
            Failure::new(
                code_of(&e),
                format!(
                    "cannot answer request {id} (its client is told it will get no answer): {e}"
                ),
            )
        })?;
        self.endpoint.flush()?;
        Ok(())
    }

    /// Gives up on call `id` (no message will report it; its server is
    /// told to stop) or drops request `id` unanswered (its client's call
    /// fails at once with `SMT_ERR_ABANDONED`; the request is never
    /// executed twice).
    pub fn abort(&mut self, id: u64) -> Result<(), Failure> {
        match self.pending.remove(&id) {
            Some(Pending::Call { call, .. }) => {
                self.calls.remove(&call);
                self.endpoint.cancel(call);
            }
            Some(Pending::Request(request)) => self.endpoint.abandon(request),
            None => return Err(unknown(id, "call or request")),
        }
        // The peer hears of it now (ABANDONED or RPC_UNKNOWN), not at the
        // next smt_recv, which a client-only program may never make.
        self.endpoint.flush()?;
        Ok(())
    }

    // ---- for an application's own event loop ----

    pub fn fd(&self) -> RawFd {
        self.endpoint.as_fd().as_raw_fd()
    }

    /// Milliseconds until `smt_recv` must run even if the descriptor stays
    /// quiet (rounded up, so the caller never wakes early and spins); -1:
    /// no timer.
    pub fn timeout_ms(&self) -> c_int {
        match self.endpoint.timeout() {
            None => -1,
            Some(t) => {
                let ms = t.as_nanos().div_ceil(1_000_000);
                c_int::try_from(ms).unwrap_or(c_int::MAX)
            }
        }
    }

    pub fn wants_writable(&self) -> bool {
        self.endpoint.wants_writable()
    }

    /// Lets answers already given finish (at most [`CLOSE_GRACE`]) after
    /// cancelling our calls and dropping unanswered requests, then closes
    /// the socket. The acknowledgements still waiting for their delay
    /// leave when the endpoint is dropped (`LocalEndpoint`'s `Drop`), so
    /// the servers of the calls just completed free them at once.
    pub fn close(mut self) {
        for (_, pending) in self.pending.drain() {
            match pending {
                Pending::Call { call, .. } => self.endpoint.cancel(call),
                Pending::Request(request) => self.endpoint.abandon(request),
            }
        }
        let _ = self.endpoint.flush();
        let end = Instant::now() + CLOSE_GRACE;
        while self.endpoint.in_flight() != (0, 0) {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            // `poll` returns on events only, and an acknowledgement is
            // none: look again at least every `CLOSE_STEP`.
            match self.endpoint.poll(Some(CLOSE_STEP.min(left))) {
                Ok(Some(LocalEvent::Request { request, .. })) => self.endpoint.abandon(request),
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }

    // ---- internals ----

    fn new_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// An event as C sees it; `None` for one nobody waits for.
    fn deliver(&mut self, event: LocalEvent) -> Option<Delivery> {
        match event {
            LocalEvent::Request { request, data } => {
                let id = self.new_id();
                self.pending.insert(id, Pending::Request(request));
                Some(Delivery::Request {
                    id,
                    peer: request.peer(),
                    data,
                })
            }
            LocalEvent::Response { call, data } => {
                let (id, peer) = self.finish(call)?;
                Some(Delivery::Response { id, peer, data })
            }
            LocalEvent::Failed { call, error } => {
                let (id, peer) = self.finish(call)?;
                Some(Delivery::Failed {
                    id,
                    peer,
                    code: code_of(&error),
                    message: format!("call {id} to {peer} failed: {error}"),
                })
            }
            _ => None,
        }
    }

    fn finish(&mut self, call: CallId) -> Option<(u64, SocketAddr)> {
        let id = self.calls.remove(&call)?;
        match self.pending.remove(&id)? {
            Pending::Call { peer, .. } => Some((id, peer)),
            Pending::Request(_) => None,
        }
    }
}

fn traffic_key(algorithm: AeadAlgorithm, half: &[u8]) -> Result<TrafficKey, Failure> {
    let (key, iv) = half.split_at(half.len() - 12);
    // NOTE(unwrap): `split_at` left exactly 12 bytes.
    let iv: [u8; 12] = iv.try_into().expect("12-byte IV");
    TrafficKey::new(algorithm, key, iv).map_err(|e| Failure::new(SMT_ERR_INVALID, e.to_string()))
}

fn check_len(len: usize) -> Result<(), Failure> {
    if len > SMT_MAX_MESSAGE_LEN {
        return Err(Failure::new(
            SMT_ERR_TOO_LARGE,
            format!(
                "the message is {len} bytes, more than SMT_MAX_MESSAGE_LEN ({SMT_MAX_MESSAGE_LEN}): \
                 split it into several calls"
            ),
        ));
    }
    Ok(())
}

fn unknown(id: u64, what: &str) -> Failure {
    Failure::new(
        SMT_ERR_UNKNOWN_ID,
        format!("no outstanding {what} has id {id} on this handle (already answered, aborted, or never handed out)"),
    )
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| {
        Failure::new(
            SMT_ERR_FILE,
            format!("cannot read the {what} {}: {e}", path.display()),
        )
    })
}

fn read_ticket(path: &Path) -> Result<Ticket, Failure> {
    let text = String::from_utf8(read(path, "ticket")?).unwrap_or_default();
    Ticket::from_base64(text.trim()).map_err(|e| {
        Failure::new(
            SMT_ERR_CONFIG,
            format!("{} is not an SMT-ticket: {e}", path.display()),
        )
    })
}

fn config(e: smt::tls::TlsConfigError) -> Failure {
    Failure::new(SMT_ERR_CONFIG, e.to_string())
}
