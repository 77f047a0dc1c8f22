//! QUIC with quinn (rustls on aws-lc-rs, TLS_AES_128_GCM_SHA256): a new
//! bidirectional stream per request, or one persistent stream per slot
//! carrying length-prefixed messages.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{Connection, Endpoint, TransportConfig, VarInt};

use super::framed::{serve_frames, StreamSlot};
use super::{check_echo, size_buffers, spawn_server, ServerThread, Slot};

/// Room for every slot's stream and a megabyte message on each.
fn transport() -> Arc<TransportConfig> {
    let mut t = TransportConfig::default();
    t.max_concurrent_bidi_streams(VarInt::from_u32(4096))
        .stream_receive_window(VarInt::from_u32(16 << 20))
        .receive_window(VarInt::from_u32(1 << 30))
        .send_window(1 << 30);
    Arc::new(t)
}

fn socket() -> io::Result<UdpSocket> {
    let s = UdpSocket::bind("127.0.0.1:0")?;
    size_buffers(&s)?;
    Ok(s)
}

fn configs() -> io::Result<(quinn::ServerConfig, quinn::ClientConfig)> {
    let (sc, cc) = super::tls::configs(b"smt-bench")?;
    let sc = QuicServerConfig::try_from(sc).map_err(io::Error::other)?;
    let cc = QuicClientConfig::try_from(cc).map_err(io::Error::other)?;
    let mut server_config = quinn::ServerConfig::with_crypto(Arc::new(sc));
    server_config.transport_config(transport());
    let mut client_config = quinn::ClientConfig::new(Arc::new(cc));
    client_config.transport_config(transport());
    Ok((server_config, client_config))
}

/// An endpoint on the current tokio runtime (its driver task runs there).
fn endpoint(server: Option<quinn::ServerConfig>) -> io::Result<Endpoint> {
    Endpoint::new(
        quinn::EndpointConfig::default(),
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
async fn start(framed: bool) -> io::Result<(ServerThread, Endpoint, Connection)> {
    let (server_config, client_config) = configs()?;
    let (addr_tx, addr_rx) = std::sync::mpsc::channel::<io::Result<SocketAddr>>();
    let server = spawn_server("quic-echo", move || async move {
        let server = match endpoint(Some(server_config)) {
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
    let mut client = endpoint(None)?;
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
    let (server, endpoint, conn) = start(false).await?;
    let slots = (0..n)
        .map(|_| StreamPerRpc {
            conn: conn.clone(),
            buf: Vec::new(),
            _endpoint: endpoint.clone(),
        })
        .collect();
    Ok((server, slots))
}

/// QUIC, one persistent stream per slot, `n` slots on one connection.
pub async fn start_persistent(n: usize) -> io::Result<(ServerThread, Vec<PersistentSlot>)> {
    let (server, _endpoint, conn) = start(true).await?;
    let mut slots = Vec::with_capacity(n);
    for _ in 0..n {
        let (send, recv) = conn.open_bi().await.map_err(io::Error::other)?;
        slots.push(StreamSlot::new(recv, send));
    }
    Ok((server, slots))
}
