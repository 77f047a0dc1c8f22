//! A request received by a server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use smt_proto::ServerRpcHandle;

use super::drive::{Delivered, Shared};
use crate::{Error, SessionInfo};

/// A complete, authenticated request. Answer it with
/// [`IncomingRequest::respond`]; dropping it unanswered frees its state,
/// and the client's call fails at once with [`crate::RpcError::Abandoned`]
/// (the server sends ABANDONED; the request is never executed twice).
pub struct IncomingRequest {
    rpc: ServerRpcHandle,
    data: Bytes,
    session: Arc<SessionInfo>,
    /// When the engine delivered it (its handler latency runs from here).
    delivered: Instant,
    shared: Option<Arc<Shared>>,
}

impl std::fmt::Debug for IncomingRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IncomingRequest")
            .field("peer", &self.rpc.peer)
            .field("id", &self.rpc.id)
            .field("len", &self.data.len())
            .finish()
    }
}

impl IncomingRequest {
    pub(crate) fn new(delivered: Delivered, shared: Arc<Shared>) -> Self {
        Self {
            rpc: delivered.rpc,
            data: delivered.data,
            session: delivered.session,
            delivered: delivered.at,
            shared: Some(shared),
        }
    }

    /// Who sent it.
    pub fn peer(&self) -> SocketAddr {
        self.rpc.peer
    }

    /// The session the request arrived in: its ID (new for every session,
    /// also from one address), how it was established and what that
    /// proved about the client (its verified certificate with mutual
    /// TLS, the server name it asked for). Authorise by this rather than
    /// by [`IncomingRequest::peer`] alone.
    pub fn session(&self) -> &Arc<SessionInfo> {
        &self.session
    }

    /// Tells when the client gives up on this request (it cancelled the
    /// call or passed its deadline, and the server heard so; or this
    /// endpoint closed): race it against long work and stop early, since
    /// no response would reach anyone. Costs nothing for requests whose
    /// cancellation nobody asks for; asking takes the engine's lock once.
    pub fn cancellation(&self) -> crate::Cancellation {
        match &self.shared {
            Some(shared) => shared.watch(self.rpc),
            None => super::cancel::fired(),
        }
    }

    /// The request bytes.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Takes the request bytes (no copy; dropping them returns a large
    /// buffer to the endpoint's pool).
    pub fn take_data(&mut self) -> Bytes {
        std::mem::take(&mut self.data)
    }

    /// Sends the response: it leaves from this thread before `respond`
    /// returns (as far as the client's grants allow).
    ///
    /// `response` may be borrowed or owned (see [`crate::Payload`]): owned
    /// bytes, such as the request's own from [`IncomingRequest::take_data`],
    /// are sealed with no copy.
    ///
    /// A response that cannot be sent is an error: larger than the
    /// message limit ([`crate::SendError::MessageTooLarge`]), the client
    /// gone (it cancelled the call, or its session ended:
    /// [`crate::SendError::UnknownRpc`]), the endpoint closed. The request
    /// is then abandoned, and a client still waiting fails at once with
    /// [`crate::RpcError::Abandoned`] instead of waiting for a response
    /// that will not come.
    ///
    /// An echo server that sends each request's own buffer back (no copy):
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use smt::{Endpoint, EndpointConfig};
    /// use smt::keys::{fresh_session_pair, AeadAlgorithm};
    /// let server = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::default())?;
    /// let client = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::default())?;
    /// let (client_keys, server_keys) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    /// client.install_session(server.local_addr(), client_keys)?;
    /// server.install_session(client.local_addr(), server_keys)?;
    /// let accepter = server.clone();
    /// std::thread::spawn(move || {
    ///     while let Ok(mut request) = accepter.accept() {
    ///         let data = request.take_data();
    ///         if let Err(e) = request.respond(data) {
    ///             eprintln!("no reply: {e}");
    ///         }
    ///     }
    /// });
    /// let big = vec![7u8; 100_000];
    /// assert_eq!(client.call(server.local_addr(), &big)?, big);
    /// server.close();
    /// # Ok(()) }
    /// ```
    pub fn respond<'a>(mut self, response: impl Into<crate::Payload<'a>>) -> Result<(), Error> {
        let shared = self.shared.take().ok_or(Error::Closed)?;
        shared.respond(self.rpc, response.into(), self.delivered)
    }
}

impl Drop for IncomingRequest {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.take() {
            shared.abandon(self.rpc);
        }
    }
}
