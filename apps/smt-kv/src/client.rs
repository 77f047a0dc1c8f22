//! Blocking clients of the store over each transport, for the YCSB
//! runner and the tests: send a command, wait for its reply.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;

use rustls::crypto::aws_lc_rs;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};

use crate::resp::value::BadReply;
use crate::resp::{reply, Value};

/// A transport to the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Transport {
    /// RESP over plain TCP.
    Tcp,
    /// RESP over TLS 1.3 over TCP.
    Tls,
    /// RESP commands in SMT request messages.
    Smt,
}

impl Transport {
    /// Every transport, in the order tables list them.
    pub const ALL: [Transport; 3] = [Transport::Smt, Transport::Tls, Transport::Tcp];

    /// The name in tables and plots.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tcp => "TCP",
            Self::Tls => "TLS/TCP",
            Self::Smt => "SMT",
        }
    }
}

/// A call failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientError {
    /// The socket failed or the server closed the connection.
    Io(io::Error),
    /// TLS configuration or handshake failed.
    Tls(String),
    /// The SMT call failed.
    Smt(smt::Error),
    /// The server's reply is not RESP.
    BadReply(BadReply),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "I/O error: {e}"),
            Self::Tls(e) => write!(f, "TLS: {e}"),
            Self::Smt(e) => write!(f, "SMT: {e}"),
            Self::BadReply(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

impl From<smt::Error> for ClientError {
    fn from(e: smt::Error) -> Self {
        Self::Smt(e)
    }
}

impl From<BadReply> for ClientError {
    fn from(e: BadReply) -> Self {
        Self::BadReply(e)
    }
}

type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

enum Link {
    Tcp(TcpStream),
    Tls(Box<TlsStream>),
    /// Its own endpoint (its own UDP socket), as each TCP client has its
    /// own connection. Caller-driven: a call is sent, and its response
    /// received and opened, on the calling thread, as a blocking TCP
    /// client does its I/O (a threaded `Endpoint` would add a hand-off to
    /// its driver thread and back to every request).
    Smt {
        endpoint: smt::LocalEndpoint,
        server: SocketAddr,
    },
}

/// One client: a connection (TCP, TLS) or an SMT endpoint.
pub struct Client {
    link: Link,
    request: Vec<u8>,
    input: Vec<u8>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.link {
            Link::Tcp(_) => Transport::Tcp,
            Link::Tls(_) => Transport::Tls,
            Link::Smt { .. } => Transport::Smt,
        };
        f.debug_struct("Client")
            .field("transport", &kind)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connects over `transport`; TLS and SMT verify the server's
    /// certificate against `ca_pem` and its IP address.
    pub fn connect(
        transport: Transport,
        server: SocketAddr,
        ca_pem: &str,
    ) -> Result<Self, ClientError> {
        Self::connect_to(transport, &server.to_string(), ca_pem)
    }

    /// Connects to `server`, `HOST:PORT` where HOST is a name or an IP
    /// address. TLS and SMT verify the server's certificate against
    /// `ca_pem` and HOST (a name is also sent as SNI). TCP and TLS try the
    /// name's addresses in turn; SMT, which has no connection to refuse,
    /// takes its first IPv4 address (else its first).
    pub fn connect_to(
        transport: Transport,
        server: &str,
        ca_pem: &str,
    ) -> Result<Self, ClientError> {
        let host = Host::parse(server)?;
        let link = match transport {
            Transport::Tcp => Link::Tcp(tcp(&host)?),
            Transport::Tls => Link::Tls(Box::new(tls(&host, ca_pem)?)),
            Transport::Smt => smt_link(&host, ca_pem)?,
        };
        Ok(Self {
            link,
            request: Vec::new(),
            input: Vec::new(),
        })
    }

    /// Sends one command and waits for its reply.
    pub fn call(&mut self, args: &[&[u8]]) -> Result<Value, ClientError> {
        self.request.clear();
        reply::command(&mut self.request, args);
        match &mut self.link {
            Link::Tcp(s) => stream_call(s, &self.request, &mut self.input),
            Link::Tls(s) => stream_call(s.as_mut(), &self.request, &mut self.input),
            Link::Smt { endpoint, server } => {
                let reply = smt_call(endpoint, *server, &self.request)?;
                match Value::parse(&reply)? {
                    Some((value, len)) if len == reply.len() => Ok(value),
                    _ => Err(BadReply("an SMT response must hold exactly one reply").into()),
                }
            }
        }
    }

    /// Sends `AUTH password`, then the command: the command's reply, or
    /// AUTH's error. Over SMT both go in one message (each message is a
    /// session of its own); over a stream the connection stays
    /// authenticated.
    pub fn call_authenticated(
        &mut self,
        password: &[u8],
        args: &[&[u8]],
    ) -> Result<Value, ClientError> {
        let Link::Smt { endpoint, server } = &mut self.link else {
            return match self.call(&[b"AUTH", password])? {
                error @ Value::Error(_) => Ok(error),
                _ => self.call(args),
            };
        };
        self.request.clear();
        reply::command(&mut self.request, &[b"AUTH", password]);
        reply::command(&mut self.request, args);
        let reply = smt_call(endpoint, *server, &self.request)?;
        let malformed = || BadReply("an SMT response must hold one reply per command");
        let (auth, len) = Value::parse(&reply)?.ok_or_else(malformed)?;
        if let Value::Error(_) = auth {
            return Ok(auth);
        }
        match Value::parse(&reply[len..])? {
            Some((value, n)) if len + n == reply.len() => Ok(value),
            _ => Err(malformed().into()),
        }
    }

    /// Sends raw bytes (for tests): over SMT, one message whose whole
    /// response is returned; over a stream, the bytes, then whatever
    /// arrives until `until` ends the input or the server closes.
    pub fn raw(
        &mut self,
        bytes: &[u8],
        until: impl Fn(&[u8]) -> bool,
    ) -> Result<Vec<u8>, ClientError> {
        match &mut self.link {
            Link::Tcp(s) => {
                send_raw(s, bytes)?;
                read_until(|input| read_more(s, input), until)
            }
            Link::Tls(s) => {
                send_raw(s.as_mut(), bytes)?;
                read_until(|input| read_tls_more(s, input), until)
            }
            Link::Smt { endpoint, server } => Ok(smt_call(endpoint, *server, bytes)?.to_vec()),
        }
    }
}

/// A server named as `HOST:PORT`, looked up.
#[derive(Debug)]
pub struct Host {
    /// The name or IP address, as given (without IPv6 brackets).
    pub name: String,
    /// Its addresses, in the resolver's order.
    pub addrs: Vec<SocketAddr>,
}

impl Host {
    /// Looks up `server`: an IP socket address, or `HOST:PORT` through
    /// the system resolver. A malformed `server` is an
    /// `io::ErrorKind::InvalidInput` error that says what is expected.
    pub fn parse(server: &str) -> io::Result<Self> {
        if let Ok(addr) = server.parse::<SocketAddr>() {
            return Ok(Self {
                name: addr.ip().to_string(),
                addrs: vec![addr],
            });
        }
        let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
        let (host, port) = server.rsplit_once(':').ok_or_else(|| {
            invalid(format!(
                "{server:?} is not HOST:PORT (a host name or IP address, a colon and a port)"
            ))
        })?;
        let port: u16 = port
            .parse()
            .map_err(|_| invalid(format!("{server:?}: {port:?} is not a port number")))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let addrs: Vec<SocketAddr> = (host, port).to_socket_addrs()?.collect();
        if addrs.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{host} has no address"),
            ));
        }
        Ok(Self {
            name: host.to_owned(),
            addrs,
        })
    }

    /// The address a datagram client uses: the first IPv4 one, else the
    /// first.
    pub fn datagram_addr(&self) -> SocketAddr {
        self.addrs
            .iter()
            .find(|a| a.is_ipv4())
            .copied()
            .unwrap_or(self.addrs[0])
    }

    /// The name TLS verifies the certificate against.
    fn server_name(&self) -> Result<ServerName<'static>, ClientError> {
        match self.name.parse::<IpAddr>() {
            Ok(ip) => Ok(ServerName::IpAddress(ip.into())),
            Err(_) => ServerName::try_from(self.name.clone())
                .map_err(|e| ClientError::Tls(format!("{:?}: {e}", self.name))),
        }
    }
}

fn tcp(host: &Host) -> io::Result<TcpStream> {
    let s = TcpStream::connect(&host.addrs[..])?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// The client side of the TLS front end: TLS 1.3, AES-GCM (SMT's suites).
pub fn tls_client_config(ca_pem: &str) -> Result<Arc<rustls::ClientConfig>, ClientError> {
    let bad = |e: &dyn fmt::Display| ClientError::Tls(e.to_string());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
    }
    let provider = rustls::crypto::CryptoProvider {
        cipher_suites: vec![
            aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256,
            aws_lc_rs::cipher_suite::TLS13_AES_256_GCM_SHA384,
        ],
        ..aws_lc_rs::default_provider()
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| bad(&e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

fn tls(host: &Host, ca_pem: &str) -> Result<TlsStream, ClientError> {
    let config = tls_client_config(ca_pem)?;
    let conn = rustls::ClientConnection::new(config, host.server_name()?)
        .map_err(|e| ClientError::Tls(e.to_string()))?;
    let mut stream = rustls::StreamOwned::new(conn, tcp(host)?);
    // Finish the handshake now, so that the first call's latency is a
    // call's, not a handshake's.
    while stream.conn.is_handshaking() {
        stream
            .conn
            .complete_io(&mut stream.sock)
            .map_err(|e| ClientError::Tls(e.to_string()))?;
    }
    Ok(stream)
}

fn smt_link(host: &Host, ca_pem: &str) -> Result<Link, ClientError> {
    let server = host.datagram_addr();
    let local = local_for(server);
    let mut endpoint = smt::LocalEndpoint::bind(local, endpoint_config(local))?;
    let tls = smt_tls::TlsClient::new(ca_pem.as_bytes(), None)
        .map_err(|e| ClientError::Tls(e.to_string()))?;
    endpoint.set_tls_client(tls);
    if let Ok(name) = host.server_name() {
        endpoint.set_server_name(server, name);
    }
    Ok(Link::Smt { endpoint, server })
}

/// The SMT endpoint configuration for a socket bound to `local`: the
/// defaults, with the loopback interface's MTU when `local` is a
/// loopback address. The kernel's TCP moves loopback data in segments of
/// that MTU (64 KiB), where SMT's default of 1500 bytes splits a 4 KiB
/// message into three datagrams, each received, opened and reassembled on
/// its own: about a fifth of SMT's instructions per 4 KiB YCSB read
/// (`docs/benchmarks.md`).
pub fn endpoint_config(local: SocketAddr) -> smt::EndpointConfig {
    let mut config = smt::EndpointConfig::default();
    if local.ip().is_loopback() {
        if let Some(mtu) = smt::EndpointConfig::loopback_mtu() {
            config.set_mtu(Some(mtu));
        }
    }
    config
}

/// Where a client endpoint for `server` binds: the same loopback address
/// for a server on this machine, else any address of its family.
pub fn local_for(server: SocketAddr) -> SocketAddr {
    let ip = match server.ip() {
        ip if ip.is_loopback() => ip,
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
    };
    SocketAddr::new(ip, 0)
}

/// One call on a caller-driven endpoint: sends `request` and polls until
/// its outcome. A client serves nobody, so a request that reaches it is
/// abandoned (its caller fails at once instead of at a timeout).
fn smt_call(
    endpoint: &mut smt::LocalEndpoint,
    server: SocketAddr,
    request: &[u8],
) -> Result<bytes::Bytes, smt::Error> {
    let id = endpoint.call(server, request)?;
    loop {
        match endpoint.poll(None)? {
            Some(smt::LocalEvent::Response { call, data }) if call == id => return Ok(data),
            Some(smt::LocalEvent::Failed { call, error }) if call == id => return Err(error),
            Some(smt::LocalEvent::Request { request, .. }) => endpoint.abandon(request),
            Some(_) | None => {}
        }
    }
}

fn stream_call(
    stream: &mut impl ReadWrite,
    request: &[u8],
    input: &mut Vec<u8>,
) -> Result<Value, ClientError> {
    stream.write_all(request)?;
    stream.flush()?;
    loop {
        if let Some((value, len)) = Value::parse(input)? {
            input.drain(..len);
            return Ok(value);
        }
        read_more(stream, input)?;
    }
}

/// Sends bytes that the server may refuse: it may close before taking
/// all of them, and what it answered is still there to read.
fn send_raw(stream: &mut impl Write, bytes: &[u8]) -> Result<(), ClientError> {
    match stream.write_all(bytes).and_then(|()| stream.flush()) {
        Ok(()) => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Reads until `until` holds for the input or the server closes.
fn read_until(
    mut read: impl FnMut(&mut Vec<u8>) -> io::Result<()>,
    until: impl Fn(&[u8]) -> bool,
) -> Result<Vec<u8>, ClientError> {
    let mut input = Vec::new();
    while !until(&input) {
        match read(&mut input) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(input)
}

/// Reads TLS records without first flushing what is left to send (which
/// `StreamOwned` would try, and fail on, after the server hung up).
fn read_tls_more(stream: &mut TlsStream, input: &mut Vec<u8>) -> io::Result<()> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match stream.conn.reader().read(&mut chunk) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                input.extend_from_slice(&chunk[..n]);
                return Ok(());
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        if stream.conn.read_tls(&mut stream.sock)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        stream
            .conn
            .process_new_packets()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    }
}

fn read_more(stream: &mut impl Read, input: &mut Vec<u8>) -> io::Result<()> {
    let mut chunk = [0u8; 16 * 1024];
    match stream.read(&mut chunk)? {
        0 => Err(io::ErrorKind::UnexpectedEof.into()),
        n => {
            input.extend_from_slice(&chunk[..n]);
            Ok(())
        }
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_endpoint_takes_the_loopback_mtu_and_others_the_default() {
        let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let config = endpoint_config(loopback);
        let default_mtu = smt::EndpointConfig::default().mtu();
        let lo = smt::EndpointConfig::loopback_mtu();
        assert_eq!(config.mtu(), lo.or(default_mtu));
        config.validate(loopback).unwrap();
        let any: SocketAddr = "0.0.0.0:0".parse().unwrap();
        assert_eq!(endpoint_config(any).mtu(), default_mtu);
    }
}
