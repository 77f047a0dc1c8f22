//! [`KvClient`]: the store's client over SMT for Rust programs, in the
//! `redis` crate's terms.
//!
//! A program written against the `redis` crate keeps its code: `KvClient`
//! implements [`redis::ConnectionLike`], so every typed command of
//! [`redis::Commands`] (`get`, `set`, `incr`, `lpush`, `zadd`, `expire`…),
//! [`redis::cmd`] and [`redis::pipe`] run over SMT as they do over a
//! `redis::Connection`, with the same replies converted by the same
//! [`redis::FromRedisValue`] impls and the same errors
//! ([`redis::RedisError::code`] is `WRONGTYPE`, `NOAUTH`…). Only the way
//! to connect differs:
//!
//! ```no_run
//! use smt_kv::kv_client::KvClient;
//! use smt_kv::redis::Commands;
//!
//! # fn main() -> redis::RedisResult<()> {
//! let ca = std::fs::read_to_string("kv-certs/ca.pem")?;
//! let mut kv = KvClient::connect("localhost:6381", &ca)?;
//! let () = kv.set("greeting", "hello")?;
//! let greeting: String = kv.get("greeting")?;
//! let visits: i64 = kv.incr("visits", 1)?;
//! let () = kv.lpush("recent", "ada")?;
//! let recent: Vec<String> = kv.lrange("recent", 0, 9)?;
//! let (a, b): (String, i64) = redis::pipe().get("greeting").incr("visits", 1).query(&mut kv)?;
//! # let _ = (greeting, visits, recent, a, b);
//! # Ok(()) }
//! ```
//!
//! | `redis` crate | `KvClient` |
//! |---|---|
//! | `redis::Client::open("rediss://host:port")?.get_connection()?` | `KvClient::connect("host:port", &ca_pem)?` (TLS 1.3 inside SMT, the certificate checked against `host`) |
//! | `redis://:password@host` | `.with_password("password")` |
//! | `con.set_read_timeout(..)` | `.with_timeout(..)` (the SMT call's deadline) |
//! | `use redis::Commands; con.get("k")` | the same, on the `KvClient` |
//! | `redis::pipe()…query(&mut con)` | the same: the whole pipeline is one SMT message |
//! | `cmd.query_async(&mut con).await` (aio) | `kv.query_async(&cmd).await` |
//! | a connection per thread | `kv.clone()` per thread: clones share one endpoint |
//!
//! **One message, one session.** Each SMT request message is a session of
//! its own at the server (`docs/apps.md`), so there is no connection
//! state to keep: a password is sent as `AUTH` at the head of every
//! message (inside SMT's encryption, like the rest), `SELECT` only knows
//! database 0, and MULTI/EXEC, WATCH and pub/sub, which the store does
//! not serve anyway, would not survive between messages.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use redis::{Cmd, ConnectionLike, ErrorKind, FromRedisValue, RedisError, RedisResult, Value};

use crate::client::{endpoint_config, local_for, Host};
use crate::resp::reply;

/// A client of the store's SMT front end: see the module docs.
#[derive(Clone)]
pub struct KvClient {
    endpoint: smt::Endpoint,
    server: SocketAddr,
    /// `AUTH <password>` in RESP, sent ahead of every message's commands.
    auth: Option<Vec<u8>>,
    timeout: Option<Duration>,
    /// No call has found the endpoint closed.
    open: bool,
}

impl std::fmt::Debug for KvClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        f.debug_struct("KvClient")
            .field("server", &self.server)
            .field("local_addr", &self.endpoint.local_addr())
            .field("password", &self.auth.as_ref().map(|_| ".."))
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl KvClient {
    /// Opens an endpoint of its own (its own UDP port and background
    /// thread) whose TLS handshakes trust `ca_pem`, for `server`
    /// (`HOST:PORT`, HOST a name or an IP address; a name is what the
    /// certificate must carry, and is sent as SNI). On a loopback address
    /// the endpoint takes the loopback interface's MTU, as the server's
    /// does ([`crate::client::endpoint_config`]).
    pub fn connect(server: &str, ca_pem: &str) -> RedisResult<Self> {
        let host = Host::parse(server)?;
        let local = local_for(host.datagram_addr());
        let endpoint = smt::Endpoint::bind(local, endpoint_config(local)).map_err(smt_error)?;
        let tls = smt_tls::TlsClient::new(ca_pem.as_bytes(), None).map_err(|e| {
            RedisError::from((
                ErrorKind::InvalidClientConfig,
                "unusable CA certificate",
                e.to_string(),
            ))
        })?;
        endpoint.set_tls_client(tls).map_err(smt_error)?;
        Self::with_endpoint(endpoint, server)
    }

    /// A client on an endpoint the caller has set up (its configuration,
    /// TLS client or PSK, tickets), which other clients and other uses
    /// may share. `server` is looked up as [`smt::Endpoint::resolve`]
    /// does.
    pub fn with_endpoint(endpoint: smt::Endpoint, server: &str) -> RedisResult<Self> {
        let server = endpoint.resolve(server).map_err(smt_error)?;
        Ok(Self {
            endpoint,
            server,
            auth: None,
            timeout: None,
            open: true,
        })
    }

    /// Sends `AUTH password` with every message (the server's
    /// `--requirepass`).
    pub fn with_password(mut self, password: impl AsRef<[u8]>) -> Self {
        let mut auth = Vec::new();
        reply::command(&mut auth, &[b"AUTH", password.as_ref()]);
        self.auth = Some(auth);
        self
    }

    /// Gives every call this deadline instead of the endpoint's default
    /// (`EndpointConfig::call_timeout`). A call past it fails with an I/O
    /// error of kind `TimedOut` ([`RedisError::is_timeout`]); the command
    /// may have run.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The endpoint the calls go through.
    pub fn endpoint(&self) -> &smt::Endpoint {
        &self.endpoint
    }

    /// The server's address.
    pub fn server(&self) -> SocketAddr {
        self.server
    }

    /// Runs `cmd` without blocking the thread (any async runtime): the
    /// async twin of `cmd.query(&mut client)`.
    pub async fn query_async<T: FromRedisValue>(&self, cmd: &Cmd) -> RedisResult<T> {
        let message = self.message(&cmd.get_packed_command());
        let response = self
            .endpoint
            .call_async_with(self.server, message, self.options())
            .await
            .map_err(smt_error)?;
        let value = self.replies(&response, 1)?.pop().unwrap_or(Value::Nil);
        Ok(redis::from_redis_value(value.extract_error()?)?)
    }

    /// `AUTH` (if any) and then the packed commands, as one message.
    fn message(&self, packed: &[u8]) -> Vec<u8> {
        match &self.auth {
            Some(auth) => [auth.as_slice(), packed].concat(),
            None => packed.to_vec(),
        }
    }

    fn options(&self) -> smt::CallOptions {
        match self.timeout {
            Some(t) => smt::CallOptions::new().timeout(t),
            None => smt::CallOptions::new(),
        }
    }

    /// Sends one message and returns `count` replies.
    fn call(&mut self, packed: &[u8], count: usize) -> RedisResult<Vec<Value>> {
        let message = self.message(packed);
        let response = self
            .endpoint
            .call_with(self.server, message, self.options())
            .map_err(|e| {
                self.open &= !matches!(e, smt::Error::Closed);
                smt_error(e)
            })?;
        self.replies(&response, count)
    }

    /// Splits a response into `count` replies, after AUTH's (whose error
    /// is the call's).
    fn replies(&self, response: &[u8], count: usize) -> RedisResult<Vec<Value>> {
        let mut at = 0;
        if self.auth.is_some() {
            if let Value::ServerError(e) = next_reply(response, &mut at)? {
                return Err(e.into());
            }
        }
        let values = (0..count)
            .map(|_| next_reply(response, &mut at))
            .collect::<RedisResult<Vec<_>>>()?;
        if at != response.len() {
            return Err(malformed("more replies than commands"));
        }
        Ok(values)
    }
}

/// The reply at `*at`, which moves past it.
fn next_reply(response: &[u8], at: &mut usize) -> RedisResult<Value> {
    let rest = &response[*at..];
    let len = match crate::resp::Value::parse(rest) {
        Ok(Some((_, len))) => len,
        Ok(None) => return Err(malformed("fewer replies than commands")),
        Err(e) => return Err(malformed(e.0)),
    };
    *at += len;
    redis::parse_redis_value(&rest[..len])
}

fn malformed(why: &'static str) -> RedisError {
    RedisError::from((ErrorKind::Parse, "malformed SMT response", why.to_owned()))
}

/// An SMT failure as the `redis` crate reports I/O failures, so that
/// `is_timeout` and `is_connection_dropped` answer as for a socket.
fn smt_error(e: smt::Error) -> RedisError {
    let kind = match &e {
        smt::Error::Timeout { .. } => io::ErrorKind::TimedOut,
        smt::Error::Closed => io::ErrorKind::NotConnected,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, e).into()
}

impl ConnectionLike for KvClient {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        Ok(self.call(cmd, 1)?.pop().unwrap_or(Value::Nil))
    }

    /// A pipeline: one message, whose replies after the first `offset`
    /// are returned (a failed one among those is the pipeline's error).
    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let mut values = self.call(cmd, offset + count)?;
        let rest = values.split_off(offset);
        for skipped in values {
            skipped.extract_error()?;
        }
        Ok(rest)
    }

    fn get_db(&self) -> i64 {
        0
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        self.open
    }
}
