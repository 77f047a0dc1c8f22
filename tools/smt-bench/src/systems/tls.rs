//! TCP and TLS 1.3 over TCP: a pool of connections, or one pipelined
//! connection (writes coalesced, or one write per request). The server is
//! one thread with a task per connection.

use std::io;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::Arc;

use rustls::crypto::aws_lc_rs as provider;
use rustls::{ClientConfig, ServerConfig};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::batched::{batched, serve_batches, BatchedSlot};
use super::framed::{pipelined, serve_frames, PipelinedSlot, StreamSlot};
use super::{size_buffers, spawn_server, ServerThread};

/// The one cipher suite every encrypted system uses.
fn provider_aes128() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::CryptoProvider {
        cipher_suites: vec![provider::cipher_suite::TLS13_AES_128_GCM_SHA256],
        ..provider::default_provider()
    })
}

/// Server and client configurations restricted to TLS 1.3 with
/// TLS_AES_128_GCM_SHA256, with a throwaway CA naming 127.0.0.1.
pub fn configs(alpn: &[u8]) -> io::Result<(ServerConfig, ClientConfig)> {
    let err = |e: &dyn std::fmt::Display| io::Error::other(e.to_string());
    let ca = smt_tls::certs::Ca::generate("smt-bench CA").map_err(|e| err(&e))?;
    let cert = ca.issue(&["127.0.0.1"], false).map_err(|e| err(&e))?;
    let chain: Vec<CertificateDer<'static>> = cert
        .chain_der()
        .into_iter()
        .map(|c| CertificateDer::from(c.to_vec()))
        .collect();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_der().to_vec()));
    let mut server = ServerConfig::builder_with_provider(provider_aes128())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| err(&e))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| err(&e))?;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(ca.cert_der().to_vec()))
        .map_err(|e| err(&e))?;
    let mut client = ClientConfig::builder_with_provider(provider_aes128())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| err(&e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    server.alpn_protocols = vec![alpn.to_vec()];
    client.alpn_protocols = vec![alpn.to_vec()];
    Ok((server, client))
}

/// A listener with the shared buffer sizes (accepted sockets inherit them).
fn listener() -> io::Result<StdListener> {
    let l = StdListener::bind("127.0.0.1:0")?;
    size_buffers(&l)?;
    l.set_nonblocking(true)?;
    Ok(l)
}

async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpSocket::new_v4()?;
    size_buffers(&s)?;
    let s = s.connect(addr).await?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// How the server answers the requests of one connection.
#[derive(Clone, Copy, Debug)]
enum Serve {
    /// Frame by frame, flushing when no further request is buffered.
    Frames,
    /// Every complete request of a read batch, answered in one write.
    Batches,
}

async fn serve<R, W>(how: Serve, r: R, w: W) -> io::Result<()>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    match how {
        Serve::Frames => serve_frames(r, w).await,
        Serve::Batches => serve_batches(r, w).await,
    }
}

fn server(listener: StdListener, tls: Option<TlsAcceptor>, how: Serve) -> io::Result<ServerThread> {
    spawn_server("tcp-echo", move || async move {
        let Ok(listener) = TcpListener::from_std(listener) else {
            return;
        };
        while let Ok((sock, _)) = listener.accept().await {
            let _ = sock.set_nodelay(true);
            let tls = tls.clone();
            tokio::task::spawn_local(async move {
                match tls {
                    None => {
                        let (r, w) = sock.into_split();
                        let _ = serve(how, r, w).await;
                    }
                    Some(acceptor) => {
                        if let Ok(stream) = acceptor.accept(sock).await {
                            let (r, w) = tokio::io::split(stream);
                            let _ = serve(how, r, w).await;
                        }
                    }
                }
            });
        }
    })
}

/// A pooled plain TCP connection.
pub type TcpSlot = StreamSlot<tokio::net::tcp::OwnedReadHalf, tokio::net::tcp::OwnedWriteHalf>;
type TlsStream = tokio_rustls::client::TlsStream<TcpStream>;
/// A pooled TLS connection.
pub type TlsSlot = StreamSlot<tokio::io::ReadHalf<TlsStream>, tokio::io::WriteHalf<TlsStream>>;
/// The one TLS connection, requests pipelined, each written on its own.
pub type TlsPipeNaiveSlot =
    PipelinedSlot<tokio::io::ReadHalf<TlsStream>, tokio::io::WriteHalf<TlsStream>>;
/// The one TLS connection, requests pipelined, writes coalesced.
pub type TlsPipeSlot = BatchedSlot;

/// Plain TCP, `n` connections.
pub async fn start_tcp_pool(n: usize) -> io::Result<(ServerThread, Vec<TcpSlot>)> {
    let l = listener()?;
    let addr = l.local_addr()?;
    let server = server(l, None, Serve::Frames)?;
    let mut slots = Vec::with_capacity(n);
    for _ in 0..n {
        let (r, w) = connect(addr).await?.into_split();
        slots.push(StreamSlot::new(r, w));
    }
    Ok((server, slots))
}

async fn tls_setup(how: Serve) -> io::Result<(ServerThread, TlsConnector, SocketAddr)> {
    let (sc, cc) = configs(b"smt-bench")?;
    let l = listener()?;
    let addr = l.local_addr()?;
    let server = server(l, Some(TlsAcceptor::from(Arc::new(sc))), how)?;
    Ok((server, TlsConnector::from(Arc::new(cc)), addr))
}

async fn tls_connect(connector: &TlsConnector, addr: SocketAddr) -> io::Result<TlsStream> {
    let name = ServerName::try_from("127.0.0.1").map_err(io::Error::other)?;
    connector.connect(name, connect(addr).await?).await
}

/// TLS 1.3 over TCP, `n` connections.
pub async fn start_tls_pool(n: usize) -> io::Result<(ServerThread, Vec<TlsSlot>)> {
    let (server, connector, addr) = tls_setup(Serve::Frames).await?;
    let mut slots = Vec::with_capacity(n);
    for _ in 0..n {
        let (r, w) = tokio::io::split(tls_connect(&connector, addr).await?);
        slots.push(StreamSlot::new(r, w));
    }
    Ok((server, slots))
}

/// TLS 1.3 over one TCP connection, `n` slots pipelining on it, as an
/// HTTP/2 or gRPC client does: every request ready at the moment goes out
/// in one write, and the server answers a batch in one write.
pub async fn start_tls_pipelined(n: usize) -> io::Result<(ServerThread, Vec<TlsPipeSlot>)> {
    let (server, connector, addr) = tls_setup(Serve::Batches).await?;
    let (r, w) = tokio::io::split(tls_connect(&connector, addr).await?);
    Ok((server, batched(r, w, n)))
}

/// TLS 1.3 over one TCP connection, `n` slots pipelining on it, each
/// request written and flushed on its own (one record and one send each).
pub async fn start_tls_pipelined_naive(
    n: usize,
) -> io::Result<(ServerThread, Vec<TlsPipeNaiveSlot>)> {
    let (server, connector, addr) = tls_setup(Serve::Frames).await?;
    let (r, w) = tokio::io::split(tls_connect(&connector, addr).await?);
    Ok((server, pipelined(r, w, n)))
}
