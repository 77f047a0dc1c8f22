//! A test service and endpoints for the smt-rpc tests: real SMT endpoints
//! on loopback, each test on its own tokio runtime.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{Endpoint, EndpointConfig};
use smt_rpc::{CancelReason, Code, Metadata, Method, Request, Response, Router, Status};
use tokio::sync::mpsc;

/// Longest any single wait may take before it is a bug (a descheduled
/// thread on a busy machine is not one).
pub const GENEROUS: Duration = Duration::from_secs(20);

pub const ECHO: Method<String, String> = Method::new("test.Echo/Echo");
pub const FAIL: Method<String, ()> = Method::new("test.Echo/Fail");
/// Holds the request until the caller gives up, the deadline passes or
/// `ms` pass; answers the milliseconds it waited.
pub const HOLD: Method<u64, u64> = Method::new("test.Echo/Hold");
pub const WHOAMI: Method<(), Caller> = Method::new("test.Echo/WhoAmI");

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Caller {
    pub peer: String,
    pub session: u64,
    pub certificate: Option<Vec<u8>>,
    pub server_name: Option<String>,
}

/// What a `HOLD` handler saw.
#[derive(Clone, Debug)]
pub struct Held {
    /// The deadline's distance when the handler started.
    pub remaining: Option<Duration>,
    /// Why it stopped early, if it did.
    pub reason: Option<CancelReason>,
}

pub fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A client and a server endpoint with a session between them.
pub fn pair() -> (Endpoint, Endpoint) {
    let client = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    let server = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    connect(&client, &server);
    (client, server)
}

pub fn connect(client: &Endpoint, server: &Endpoint) {
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
}

/// The test service; every `HOLD` handler reports what it saw to `held`.
pub fn router(held: mpsc::UnboundedSender<Held>) -> Router {
    Router::new()
        .unary(ECHO, |req: Request<String>| async move {
            let mut metadata = Metadata::new();
            if let Some(v) = req.metadata().get("x-ping") {
                metadata.insert("x-pong", v.to_vec())?;
            }
            let text = req.into_message();
            Ok(Response::new(text).with_metadata(metadata))
        })
        .unwrap()
        .unary(FAIL, |req: Request<String>| async move {
            let mut trailers = Metadata::new();
            trailers.insert("x-retry-after", "never")?;
            Err::<(), _>(
                Status::new(Code::FailedPrecondition, req.into_message())
                    .with_details(&b"\x08\x01"[..])
                    .with_metadata(trailers),
            )
        })
        .unwrap()
        .unary(HOLD, move |req: Request<u64>| {
            let held = held.clone();
            async move {
                let ctx = req.context().clone();
                let remaining = ctx.remaining();
                let started = std::time::Instant::now();
                let ms = *req.message();
                tokio::select! {
                    () = ctx.cancelled() => {}
                    () = tokio::time::sleep(Duration::from_millis(ms)) => {}
                }
                let reason = ctx.cancel_reason();
                let _ = held.send(Held { remaining, reason });
                Ok(started.elapsed().as_millis() as u64)
            }
        })
        .unwrap()
        .unary(WHOAMI, |req: Request<()>| async move {
            let ctx = req.context();
            let session = ctx
                .session()
                .ok_or_else(|| Status::internal("no session"))?;
            Ok(Caller {
                peer: session.peer().to_string(),
                session: session.id().get(),
                certificate: session.peer_certificate().map(<[u8]>::to_vec),
                server_name: session.server_name().map(str::to_owned),
            })
        })
        .unwrap()
}

/// A current-thread runtime with timers.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}
