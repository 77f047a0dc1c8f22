//! An RPC layer over SMT: services with named methods, typed messages,
//! status codes with details, metadata, the caller's deadline and a
//! cancellation signal at the handler, the caller's identity on every
//! request, client and server as `tower::Service`s, graceful shutdown,
//! and a client that balances over replicas and re-resolves their names.
//!
//! SMT already gives each RPC what HTTP/2 streams give gRPC: one
//! encrypted, authenticated request and response, a per-call timeout,
//! and cancel-on-drop that reaches the server. This crate adds the
//! envelope (method, caller's timeout, metadata; a status and trailers
//! back: [`wire`](crate#the-envelope)) and the tower plumbing.
//!
//! ```
//! use std::time::Duration;
//! use serde::{Deserialize, Serialize};
//! use smt::keys::{fresh_session_pair, AeadAlgorithm};
//! use smt::{Endpoint, EndpointConfig};
//! use smt_rpc::{Channel, Client, Code, Method, Request, Router, Server, Status};
//!
//! #[derive(Serialize, Deserialize)]
//! struct Add { a: i64, b: i64 }
//!
//! // One constant names the method and fixes its types at both ends.
//! const ADD: Method<Add, i64> = Method::new("calc.Calculator/Add");
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let any = "127.0.0.1:0".parse()?;
//! let server = Endpoint::bind(any, EndpointConfig::default())?;
//! let client = Endpoint::bind(any, EndpointConfig::default())?;
//! // Any way of getting a session works: TLS, PSK, 0-RTT, installed keys.
//! let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
//! client.install_session(server.local_addr(), ck)?;
//! server.install_session(client.local_addr(), sk)?;
//!
//! let router = Router::new().unary(ADD, |req: Request<Add>| async move {
//!     // Who called, and how long they will wait.
//!     let ctx = req.context();
//!     assert!(ctx.peer().is_some() && ctx.remaining().is_some());
//!     let Add { a, b } = req.into_message();
//!     a.checked_add(b).ok_or_else(|| Status::invalid_argument("overflow"))
//! })?;
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let serving = tokio::spawn(
//!     Server::new(server.clone()).serve_with_shutdown(router, async { let _ = stopped.await; }),
//! );
//!
//! let mut calc = Client::new(Channel::new(client, server.local_addr()))
//!     .with_timeout(Duration::from_secs(5));
//! assert_eq!(*calc.unary(ADD, Add { a: 2, b: 40 }).await?.message(), 42);
//! let overflow = calc.unary(ADD, Add { a: i64::MAX, b: 1 }).await.unwrap_err();
//! assert_eq!(overflow.code(), Code::InvalidArgument);
//!
//! let _ = stop.send(());
//! serving.await??; // drained and closed
//! # Ok(()) }
//! ```
//!
//! An example service with replicas, balancing and layers:
//! `examples/kv_service.rs`. The design, point by point against tonic and
//! tarpc: `docs/rpc.md`; in short:
//!
//! | | smt-rpc | tonic (gRPC) | tarpc |
//! |---|---|---|---|
//! | transport | SMT: one encrypted message each way per RPC, over UDP | HTTP/2 streams over TCP (+TLS) | any `Stream + Sink` (TCP, in-process...) |
//! | methods and routing | [`Method`] constants shared by both ends, [`Router`] by name | `package.Service/Method` paths, code generated from `.proto` | a `#[tarpc::service]` trait; an enum of requests |
//! | typed messages | serde + postcard ([`Postcard`]); prost behind feature `prost` ([`Prost`]); any [`Codec`] | prost (other codecs pluggable) | serde with a chosen format |
//! | status | gRPC's 17 [`Code`]s, message, details bytes, trailers | the same (`tonic::Status`) | transport errors only; application errors in the return type |
//! | metadata | [`Metadata`] on requests, responses and statuses | `MetadataMap` (ASCII and `-bin`) | none (the context carries deadline and trace) |
//! | deadline at the handler | remaining timeout in the envelope (as `grpc-timeout`); [`Context::deadline`] | `grpc-timeout` header; the server may enforce it | `Context::deadline`, sent with each request |
//! | cancellation at the handler | [`Context::cancelled`]: caller dropped the call (SMT's RPC_UNKNOWN), deadline passed, shutdown; then a grace period, then the future is dropped | the handler future is dropped on RST_STREAM | the server aborts the handler when the client cancels |
//! | caller identity | [`Context::session`]: address, session ID, verified client certificate, SNI, how the session began | `remote_addr`, `peer_certs` | none built in |
//! | tower | client and server are `Service`s: timeout, concurrency limit, load shed, retry, buffer, balance apply | both are `Service`s | client stubs of its own (retry, round-robin, consistent hash) |
//! | retry safety | [`Code::Unavailable`] only where the request did not run; [`RetryUnavailable`] retries only those | `UNAVAILABLE` also for transport failures after sending | none |
//! | balancing | [`balance`]: tower's p2c on outstanding requests over every resolved address, names re-resolved | `Channel::balance_channel` (p2c), DNS via extra crates | round-robin or consistent hash over fixed stubs |
//! | shutdown | [`Server::serve_with_shutdown`]: stop, answer late requests `UNAVAILABLE`, drain, cancel, close | `serve_with_shutdown`: GOAWAY, drain | drop the server's channel |
//! | streaming | none: one request, one response (SMT's messages go to 64 MiB and more) | all four kinds | none (unary) |
//!
//! # The envelope
//! A request's SMT message is a version byte, a postcard-encoded head
//! (method name, the caller's remaining timeout in microseconds, metadata)
//! and the encoded message; a response's is the version, a head (code,
//! status message, details, metadata) and the message. Messages are
//! sliced out of the received buffer, not copied.
//!
//! # Status codes from SMT's errors
//! [`Code::Unavailable`] means the request did not run: SMT's
//! `Overloaded` (refused unexecuted), `PeerLostRequest` (never
//! delivered), `Unreachable`, a handshake that did not complete, a layer
//! that shed the call, a server shutting down. `Abandoned` and a peer
//! that went silent mid-call are [`Code::Unknown`] (it may have run); the
//! call's own timeout is [`Code::DeadlineExceeded`]; certificate failures
//! are [`Code::Unauthenticated`]. [`Status::from_error`] has the rest.
//!
//! # Caveat
//! `smt::Endpoint::accept_async` is not woken by the endpoint's `close`
//! (a known bug): stop a server with [`Server::serve_with_shutdown`]'s
//! signal, which does not depend on it, rather than by closing its
//! endpoint from elsewhere.
#![warn(missing_docs, unreachable_pub)]

mod balance;
mod client;
mod codec;
mod metadata;
mod method;
mod request;
mod retry;
mod router;
mod server;
mod status;
mod wire;

pub use balance::{balance, BalanceOptions, BalancedChannel, Resolve, SystemResolver};
pub use client::{Channel, Client};
#[cfg(feature = "prost")]
pub use codec::Prost;
pub use codec::{Codec, Postcard};
pub use metadata::{Metadata, MAX_KEY_LEN};
pub use method::Method;
pub use request::{CancelReason, Context, IntoRequest, Request, Response};
pub use retry::RetryUnavailable;
pub use router::{IntoResponse, RawRequest, RawResponse, Router};
pub use server::{Server, DEFAULT_CANCEL_GRACE, DEFAULT_DRAIN_TIMEOUT};
pub use status::{Code, Status};
pub use wire::MAX_METHOD_LEN;

/// What an SMT session proved about a caller ([`Context::session`]).
pub use smt::{PeerIdentity, SessionId, SessionInfo, SessionOrigin};
/// tower, as this crate uses it (layers, `ServiceBuilder`, `ServiceExt`).
pub use tower;
