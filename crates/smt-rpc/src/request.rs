//! Requests and responses, and what a handler knows about its caller.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use smt::SessionInfo;
use tokio_util::sync::CancellationToken;

use crate::Metadata;

/// A request: the message, its metadata, the caller's timeout, and at a
/// server the [`Context`] (who called, the deadline, the cancellation
/// signal).
#[derive(Debug)]
pub struct Request<T> {
    pub(crate) method: Cow<'static, str>,
    pub(crate) message: T,
    pub(crate) metadata: Metadata,
    pub(crate) timeout: Option<Duration>,
    /// When the caller stops waiting (set by [`crate::Client`] when the
    /// call starts, so time spent in layers — buffers, retries' back-off —
    /// counts against the timeout the server hears).
    pub(crate) deadline: Option<Instant>,
    pub(crate) context: Context,
}

impl<T> Request<T> {
    /// A request with `message`, no metadata and no timeout of its own.
    pub fn new(message: T) -> Self {
        Self {
            method: Cow::Borrowed(""),
            message,
            metadata: Metadata::new(),
            timeout: None,
            deadline: None,
            context: Context::local(),
        }
    }

    /// The caller waits at most `timeout` (the handler's deadline is its
    /// receipt time plus what is left when the request leaves).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Replaces the metadata.
    pub fn with_metadata(mut self, metadata: Metadata) -> Self {
        self.metadata = metadata;
        self
    }

    /// The method's name (set by the client from its [`crate::Method`]).
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The message.
    pub fn message(&self) -> &T {
        &self.message
    }

    /// The message, to change it.
    pub fn message_mut(&mut self) -> &mut T {
        &mut self.message
    }

    /// The message, without the metadata.
    pub fn into_message(self) -> T {
        self.message
    }

    /// The metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The metadata, to change it.
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.metadata
    }

    /// The caller's timeout: as set (client), or as it was when the
    /// request left the caller (server).
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Who called and until when (meaningful at a server).
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The same request with its message mapped.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Request<U> {
        Request {
            method: self.method,
            message: f(self.message),
            metadata: self.metadata,
            timeout: self.timeout,
            deadline: self.deadline,
            context: self.context,
        }
    }

    /// Sets the method's name (what [`crate::Client`] does).
    pub fn set_method(&mut self, name: impl Into<Cow<'static, str>>) {
        self.method = name.into();
    }
}

impl<T: Clone> Clone for Request<T> {
    /// A copy to send again (retries): the server-side context is not
    /// copied.
    fn clone(&self) -> Self {
        Self {
            method: self.method.clone(),
            message: self.message.clone(),
            metadata: self.metadata.clone(),
            timeout: self.timeout,
            deadline: self.deadline,
            context: Context::local(),
        }
    }
}

/// A message or a [`Request`] of it.
pub trait IntoRequest<T> {
    /// The request, with empty metadata if `self` is a bare message.
    fn into_request(self) -> Request<T>;
}

impl<T> IntoRequest<T> for T {
    fn into_request(self) -> Request<T> {
        Request::new(self)
    }
}

impl<T> IntoRequest<T> for Request<T> {
    fn into_request(self) -> Request<T> {
        self
    }
}

/// A response: the message and its metadata.
#[derive(Clone, Debug)]
pub struct Response<T> {
    pub(crate) message: T,
    pub(crate) metadata: Metadata,
}

impl<T> Response<T> {
    /// A response carrying `message`, with no metadata.
    pub fn new(message: T) -> Self {
        Self {
            message,
            metadata: Metadata::new(),
        }
    }

    /// Replaces the metadata (trailers).
    pub fn with_metadata(mut self, metadata: Metadata) -> Self {
        self.metadata = metadata;
        self
    }

    /// The message.
    pub fn message(&self) -> &T {
        &self.message
    }

    /// The message, without the metadata.
    pub fn into_message(self) -> T {
        self.message
    }

    /// The metadata (trailers).
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The metadata, to change it.
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.metadata
    }

    /// The same response with its message mapped by `f`.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Response<U> {
        Response {
            message: f(self.message),
            metadata: self.metadata,
        }
    }
}

/// Why a handler's request was cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelReason {
    /// The caller gave up: it dropped the call, or its own timeout fired
    /// first (its endpoint told the server with RPC_UNKNOWN).
    CallerGone,
    /// The caller's deadline passed at the server.
    DeadlinePassed,
    /// The server is shutting down and its drain period ended.
    Shutdown,
}

/// What a handler knows about the request's caller and its time: the
/// session it came in (the peer's address, the session's ID, the client's
/// verified certificate or other identity), the deadline, and a signal
/// that fires when the caller gives up or the deadline passes. A request
/// built locally (at a client) has an empty context.
#[derive(Clone, Debug)]
pub struct Context {
    inbound: Option<Arc<Inbound>>,
}

#[derive(Debug)]
struct Inbound {
    session: Arc<SessionInfo>,
    deadline: Option<Instant>,
    token: CancellationToken,
    reason: OnceLock<CancelReason>,
}

impl Context {
    pub(crate) fn local() -> Self {
        Self { inbound: None }
    }

    pub(crate) fn inbound(session: Arc<SessionInfo>, deadline: Option<Instant>) -> Self {
        let inbound = Inbound {
            session,
            deadline,
            token: CancellationToken::new(),
            reason: OnceLock::new(),
        };
        Self {
            inbound: Some(Arc::new(inbound)),
        }
    }

    /// The caller's address.
    pub fn peer(&self) -> Option<SocketAddr> {
        Some(self.inbound.as_ref()?.session.peer())
    }

    /// The caller's session: its ID (new for every session, so state
    /// such as a login is not inherited by a later session from the same
    /// address), how it was established, and what that proved (the
    /// client's verified certificate with mutual TLS, the SNI it sent).
    pub fn session(&self) -> Option<&SessionInfo> {
        Some(&self.inbound.as_ref()?.session)
    }

    /// When the caller stops waiting, by this machine's clock.
    pub fn deadline(&self) -> Option<Instant> {
        self.inbound.as_ref()?.deadline
    }

    /// How long until [`Context::deadline`] (zero once past).
    pub fn remaining(&self) -> Option<Duration> {
        Some(self.deadline()?.saturating_duration_since(Instant::now()))
    }

    /// Whether the caller gave up or the deadline passed.
    pub fn is_cancelled(&self) -> bool {
        self.inbound
            .as_ref()
            .is_some_and(|i| i.token.is_cancelled())
    }

    /// Resolves when the caller gives up or the deadline passes (never for
    /// a local context): race it against long work.
    pub async fn cancelled(&self) {
        match &self.inbound {
            Some(i) => i.token.cancelled().await,
            None => std::future::pending().await,
        }
    }

    /// Why the request was cancelled, once it was.
    pub fn cancel_reason(&self) -> Option<CancelReason> {
        self.inbound.as_ref()?.reason.get().copied()
    }

    /// Fires the signal (first reason wins).
    pub(crate) fn cancel(&self, reason: CancelReason) {
        if let Some(i) = &self.inbound {
            let _ = i.reason.set(reason);
            i.token.cancel();
        }
    }
}
