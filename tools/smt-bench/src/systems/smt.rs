//! SMT: two endpoints in this process, keys installed directly (the
//! handshake is not what these workloads measure), an echo server on one
//! thread doing accept + respond (on a tokio runtime of its own).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use smt::{Bytes, Endpoint, EndpointConfig, Role, SessionKeys};
use smt_proto::crypto::{NullCipher, PacketCipher};

use super::{check_echo, link, ServerThread, Slot, System, SOCKET_BUFFER};

/// A handle on the client endpoint; SMT needs no connection per slot.
#[derive(Debug)]
pub struct SmtSlot {
    client: Endpoint,
    server: SocketAddr,
    /// The only slot in use: call with the blocking API. One blocked
    /// thread woken by a futex is cheaper than a tokio runtime woken
    /// through its eventfd (measured with `examples/smt_client_styles.rs`:
    /// ~1.6x the rate at one outstanding; with 32 outstanding the async
    /// tasks win, so they drive every concurrent run).
    alone: bool,
}

impl SmtSlot {
    /// A slot calling `server` through `client`.
    pub(crate) fn new(client: Endpoint, server: SocketAddr) -> Self {
        Self {
            client,
            server,
            alone: false,
        }
    }

    /// The client endpoint and the server's address.
    pub fn parts(&self) -> (Endpoint, SocketAddr) {
        (self.client.clone(), self.server)
    }
}

impl Slot for SmtSlot {
    async fn call(&mut self, request: &'static [u8]) -> io::Result<usize> {
        // The harness's request bytes are static: shared with the
        // endpoint, which seals straight from them (no copy).
        let shared = Bytes::from_static(request);
        let response = if self.alone {
            self.client.call(self.server, shared)
        } else {
            self.client.call_async(self.server, shared).await
        };
        check_echo(request.len(), response.map_err(io::Error::other)?.len())
    }

    fn set_alone(&mut self, alone: bool) {
        self.alone = alone;
    }
}

/// The echo server: an accept loop on a current-thread tokio runtime of
/// its own, as quinn's server runs and as a tokio application would
/// serve: the task awaiting `accept_async` drives the endpoint on the
/// runtime's reactor itself, so a request is received, answered and sent
/// on this one thread (a blocking `accept` on a busy server waited for
/// the background thread to receive for it: a thread hand-off per batch).
async fn echo_loop(server: Endpoint) {
    while let Ok(mut req) = server.accept_async().await {
        // The request's own buffer goes back as the response: no copy,
        // as an echo server on SMT would do it.
        let data = req.take_data();
        let _ = req.respond(data);
    }
}

/// The link MTU of `smt-aes-9k`: jumbo frames, common in datacenters.
pub const JUMBO_MTU: usize = 9000;

pub(crate) fn config(system: System) -> EndpointConfig {
    let mut c = EndpointConfig::default();
    c.socket_mut()
        .set_recv_buffer(SOCKET_BUFFER)
        .set_send_buffer(SOCKET_BUFFER)
        .set_gro(!matches!(
            system,
            System::SmtAesNoGro | System::SmtNullNoGro
        ));
    if system == System::SmtRaw {
        c.socket_mut().set_mode(smt::Mode::RawIp {
            protocol: smt::DEFAULT_IP_PROTOCOL,
        });
    }
    c.set_busy_poll(system == System::SmtBusyPoll);
    if system == System::SmtAesJumbo {
        c.set_mtu(Some(JUMBO_MTU));
    }
    if system.at_link_mtu() {
        let mtu = link::route_mtu(link::LOOPBACK);
        // The grant window follows the datagram size by default.
        c.set_mtu(Some(mtu));
    }
    if system == System::SmtAesOffload {
        c.set_offload(Some(smt::offload::OffloadConfig::default()));
    }
    c
}

pub(crate) fn keys(system: System) -> (SessionKeys, SessionKeys) {
    if matches!(system, System::SmtNull | System::SmtNullNoGro) {
        let c2s: Arc<dyn PacketCipher> = Arc::new(NullCipher);
        let s2c: Arc<dyn PacketCipher> = Arc::new(NullCipher);
        return (
            SessionKeys::new(Role::Client, c2s.clone(), s2c.clone()),
            SessionKeys::new(Role::Server, s2c, c2s),
        );
    }
    smt::keys::fresh_session_pair(smt::keys::AeadAlgorithm::Aes128Gcm)
}

/// The offload engine's counters of each endpoint, one note line each
/// (nothing without offload).
fn offload_report(system: System, ends: &[(&str, Endpoint)]) -> Vec<String> {
    let counters = ends
        .iter()
        .filter_map(|(name, ep)| Some((name, ep.offload_counters().ok()??)));
    counters
        .map(|(name, c)| {
            let all = c.to_string().trim_end().replace('\n', ", ");
            format!("{} {name} offload engine: {all}", system.name())
        })
        .collect()
}

/// Binds both endpoints, installs keys and starts the echo thread.
pub fn start(system: System, slots: usize) -> io::Result<(ServerThread, Vec<SmtSlot>)> {
    let any = link::LOOPBACK;
    let cfg = config(system);
    let server = Endpoint::bind(any, cfg.clone()).map_err(io::Error::other)?;
    let client = Endpoint::bind(any, cfg).map_err(io::Error::other)?;
    let (ck, sk) = keys(system);
    client
        .install_session(server.local_addr(), ck)
        .map_err(io::Error::other)?;
    server
        .install_session(client.local_addr(), sk)
        .map_err(io::Error::other)?;
    let echo = server.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let thread = std::thread::Builder::new()
        .name("smt-echo".into())
        .spawn(move || runtime.block_on(echo_loop(echo)))?;
    let server_addr = server.local_addr();
    let server_ends = server.clone();
    let closing = client.clone();
    let stop = Box::new(move || {
        closing.close();
        server.close();
    });
    let slots = (0..slots)
        .map(|_| SmtSlot::new(client.clone(), server_addr))
        .collect();
    let ends = [("client", client.clone()), ("server", server_ends)];
    let report = Box::new(move || {
        let mut lines = offload_report(system, &ends);
        lines.extend(system.at_link_mtu().then(|| link::note(system.name(), any)));
        lines
    });
    Ok((ServerThread::new(stop, thread).with_report(report), slots))
}
