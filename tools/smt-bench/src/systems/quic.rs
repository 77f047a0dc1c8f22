//! QUIC with quinn (rustls on aws-lc-rs, TLS_AES_128_GCM_SHA256): a new
//! bidirectional stream per request, or one persistent stream per slot
//! carrying length-prefixed messages; at quinn's default MTU or at the
//! link's (`quic-persist-link`).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;

use quinn::congestion::CubicConfig;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{Connection, Endpoint, MtuDiscoveryConfig, TransportConfig, VarInt};

use super::framed::{serve_frames, StreamSlot};
use super::{check_echo, link, size_buffers, spawn_server, ServerThread, Slot};

/// The largest UDP payload quinn accepts as a setting.
const QUINN_MAX_UDP_PAYLOAD: usize = 65_527;

/// The smallest: QUIC's minimum (RFC 9000 § 14).
const QUINN_MIN_UDP_PAYLOAD: usize = 1200;

/// Which MTU a QUIC system uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mtu {
    /// quinn's defaults: 1200 bytes of UDP payload at first, up to 1452
    /// by MTU discovery, 1472 accepted from the peer.
    Default,
    /// The link's (`systems::link`): quinn starts at it, accepts it from
    /// its peer and never probes above it, as SMT's `-link` systems use
    /// it. No discovery climb, so the first RPCs already use it, as SMT's
    /// configured MTU is used from the first packet.
    Link,
}

impl Mtu {
    /// The UDP payload size set on both ends, if not quinn's default.
    fn udp_payload(self) -> Option<u16> {
        let Mtu::Link = self else { return None };
        let payload = link::udp_payload(link::route_mtu(link::LOOPBACK), link::LOOPBACK.ip());
        u16::try_from(payload.clamp(QUINN_MIN_UDP_PAYLOAD, QUINN_MAX_UDP_PAYLOAD)).ok()
    }
}

/// Room for every slot's stream and a megabyte message on each, and the
/// MTU.
fn transport(mtu: Mtu) -> Arc<TransportConfig> {
    let mut t = TransportConfig::default();
    t.max_concurrent_bidi_streams(VarInt::from_u32(4096))
        .stream_receive_window(VarInt::from_u32(16 << 20))
        .receive_window(VarInt::from_u32(1 << 30))
        .send_window(1 << 30);
    if let Some(payload) = mtu.udp_payload() {
        let mut discovery = MtuDiscoveryConfig::default();
        discovery.upper_bound(payload);
        // quinn does not bound a GSO batch by the 64 KiB one UDP send
        // can carry: the kernel refuses batches of 64 KiB datagrams
        // (EMSGSIZE), quinn counts them lost, takes that for a black hole
        // and falls back to 1,200 bytes (measured: 8 failed sendmsg, path
        // MTU 1,200 at the end). At this MTU one datagram fills a send
        // anyway, as in SMT's driver (`smt_udp::GsoBatch`).
        t.initial_mtu(payload)
            .mtu_discovery_config(Some(discovery))
            .enable_segmentation_offload(false)
            .congestion_controller_factory(Arc::new(cubic_for(payload)));
    }
    Arc::new(t)
}

/// quinn's congestion controller (Cubic, its default) with the initial
/// window RFC 9002 § 7.2 recommends for `mtu`: min(10 × mtu, max(2 ×
/// mtu, 14,720)). quinn's default window is computed for 1,200-byte
/// datagrams (14,720 bytes), and it sends nothing while the window cannot
/// hold one datagram of the current MTU: with 64 KiB datagrams not even
/// the handshake's first packet would leave.
fn cubic_for(mtu: u16) -> CubicConfig {
    let mtu = u64::from(mtu);
    let mut cubic = CubicConfig::default();
    cubic.initial_window((2 * mtu).max(RFC9002_INITIAL_WINDOW).min(10 * mtu));
    cubic
}

/// RFC 9002 § 7.2's floor on the initial window, in bytes.
const RFC9002_INITIAL_WINDOW: u64 = 14_720;

/// quinn's endpoint settings: the largest datagram it takes from its
/// peer (advertised as `max_udp_payload_size`), raised for the link MTU.
fn endpoint_config(mtu: Mtu) -> io::Result<quinn::EndpointConfig> {
    let mut c = quinn::EndpointConfig::default();
    if let Some(payload) = mtu.udp_payload() {
        c.max_udp_payload_size(payload).map_err(io::Error::other)?;
    }
    Ok(c)
}

fn socket() -> io::Result<UdpSocket> {
    let s = UdpSocket::bind("127.0.0.1:0")?;
    size_buffers(&s)?;
    Ok(s)
}

fn configs(mtu: Mtu) -> io::Result<(quinn::ServerConfig, quinn::ClientConfig)> {
    let (sc, cc) = super::tls::configs(b"smt-bench")?;
    let sc = QuicServerConfig::try_from(sc).map_err(io::Error::other)?;
    let cc = QuicClientConfig::try_from(cc).map_err(io::Error::other)?;
    let mut server_config = quinn::ServerConfig::with_crypto(Arc::new(sc));
    server_config.transport_config(transport(mtu));
    let mut client_config = quinn::ClientConfig::new(Arc::new(cc));
    client_config.transport_config(transport(mtu));
    Ok((server_config, client_config))
}

/// An endpoint on the current tokio runtime (its driver task runs there).
fn endpoint(server: Option<quinn::ServerConfig>, mtu: Mtu) -> io::Result<Endpoint> {
    Endpoint::new(
        endpoint_config(mtu)?,
        server,
        socket()?,
        Arc::new(quinn::TokioRuntime),
    )
}

/// The server side of one stream: a whole request (to the stream's end)
/// answered on the same stream, or framed messages until the peer closes.
async fn serve_stream(mut send: quinn::SendStream, mut recv: quinn::RecvStream, framed: bool) {
    if framed {
        let _ = serve_frames(recv, send).await;
        return;
    }
    if let Ok(data) = recv.read_to_end(crate::dist::MAX_MESSAGE).await {
        let _ = send.write_all(&data).await;
        let _ = send.finish();
    }
}

async fn serve_connection(conn: Connection, framed: bool) {
    while let Ok((send, recv)) = conn.accept_bi().await {
        tokio::task::spawn_local(serve_stream(send, recv, framed));
    }
}

/// Starts the server on its own thread (its endpoint must live on that
/// thread's runtime) and connects a client from the current runtime.
async fn start(framed: bool, mtu: Mtu) -> io::Result<(ServerThread, Endpoint, Connection)> {
    let (server_config, client_config) = configs(mtu)?;
    let (addr_tx, addr_rx) = std::sync::mpsc::channel::<io::Result<SocketAddr>>();
    let server = spawn_server("quic-echo", move || async move {
        let server = match endpoint(Some(server_config), mtu) {
            Ok(s) => s,
            Err(e) => return drop(addr_tx.send(Err(e))),
        };
        let _ = addr_tx.send(server.local_addr());
        while let Some(incoming) = server.accept().await {
            tokio::task::spawn_local(async move {
                if let Ok(conn) = incoming.await {
                    serve_connection(conn, framed).await;
                }
            });
        }
    })?;
    let addr = addr_rx
        .recv()
        .map_err(|_| io::Error::other("QUIC server thread ended"))??;
    let mut client = endpoint(None, mtu)?;
    client.set_default_client_config(client_config);
    let conn = client
        .connect(addr, "127.0.0.1")
        .map_err(io::Error::other)?
        .await
        .map_err(io::Error::other)?;
    Ok((server, client, conn))
}

/// A slot opening a new stream per request.
#[derive(Debug)]
pub struct StreamPerRpc {
    conn: Connection,
    buf: Vec<u8>,
    _endpoint: Endpoint,
}

impl Slot for StreamPerRpc {
    async fn call(&mut self, request: &'static [u8]) -> io::Result<usize> {
        let (mut send, mut recv) = self.conn.open_bi().await.map_err(io::Error::other)?;
        send.write_all(request).await.map_err(io::Error::other)?;
        send.finish().map_err(io::Error::other)?;
        let mut got = 0;
        self.buf.resize(64 << 10, 0);
        while let Some(n) = recv.read(&mut self.buf).await.map_err(io::Error::other)? {
            got += n;
        }
        check_echo(request.len(), got)
    }
}

/// A persistent QUIC stream, one per slot.
pub type PersistentSlot = StreamSlot<quinn::RecvStream, quinn::SendStream>;

/// QUIC, a stream per request, `n` slots on one connection.
pub async fn start_stream_per_rpc(n: usize) -> io::Result<(ServerThread, Vec<StreamPerRpc>)> {
    let (server, endpoint, conn) = start(false, Mtu::Default).await?;
    let slots = (0..n)
        .map(|_| StreamPerRpc {
            conn: conn.clone(),
            buf: Vec::new(),
            _endpoint: endpoint.clone(),
        })
        .collect();
    Ok((server, slots))
}

/// QUIC, one persistent stream per slot, `n` slots on one connection, at
/// the MTU `mtu`.
pub async fn start_persistent(
    n: usize,
    mtu: Mtu,
) -> io::Result<(ServerThread, Vec<PersistentSlot>)> {
    let (mut server, _endpoint, conn) = start(true, mtu).await?;
    if mtu == Mtu::Link {
        let note = link::note("quic-persist-link", link::LOOPBACK);
        let path = conn.clone();
        server = server.with_report(Box::new(move || {
            let used = path.stats().path.current_mtu;
            vec![format!("{note}; quinn's path MTU at the end: {used} B")]
        }));
    }
    let mut slots = Vec::with_capacity(n);
    for _ in 0..n {
        let (send, recv) = conn.open_bi().await.map_err(io::Error::other)?;
        slots.push(StreamSlot::new(recv, send));
    }
    Ok((server, slots))
}
