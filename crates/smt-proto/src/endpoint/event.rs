//! What the endpoint hands the application and the driver: events and
//! the datagrams it wrote.

use std::net::SocketAddr;

use crate::error::RpcError;
use crate::handshake::HandshakeError;
use crate::rpc::{RpcHandle, ServerRpcHandle};

/// Something the application must hear about.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event {
    /// A complete, authenticated request. Answer it with
    /// [`Endpoint::send_response`](super::Endpoint::send_response).
    Request {
        /// What `send_response` takes to answer it.
        rpc: ServerRpcHandle,
        /// The request message.
        data: Vec<u8>,
    },
    /// The complete, authenticated response to one of our RPCs.
    Response {
        /// The RPC, as `send_request` returned it.
        rpc: RpcHandle,
        /// The response message.
        data: Vec<u8>,
    },
    /// One of our RPCs failed.
    Failed {
        /// The RPC, as `send_request` returned it.
        rpc: RpcHandle,
        /// Why it failed.
        error: RpcError,
    },
    /// A handshake finished; the session with `peer` has keys.
    Connected {
        /// The peer's address.
        peer: SocketAddr,
    },
    /// A handshake with `peer` failed; no session was installed.
    HandshakeFailed {
        /// The peer's address.
        peer: SocketAddr,
        /// Why it failed.
        error: HandshakeError,
    },
    /// The client gave up on a request the application holds (delivered
    /// as [`Event::Request`], not answered yet): it cancelled the call or
    /// its deadline passed, and said so with RPC_UNKNOWN. The RPC's state
    /// is freed (a response would fail with [`SendError::UnknownRpc`](crate::error::SendError::UnknownRpc)), so
    /// the application may stop working on it. Said once per request, and
    /// only for this cause (a session that ends frees its requests
    /// without it).
    RequestCancelled {
        /// The request, as its [`Event::Request`] named it.
        rpc: ServerRpcHandle,
    },
}

/// A datagram [`Endpoint::poll_transmit`](super::Endpoint::poll_transmit) wrote into the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Where to send the datagram.
    pub destination: SocketAddr,
    /// Bytes written at the start of the caller's buffer.
    pub len: usize,
}
