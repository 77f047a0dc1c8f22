//! Calling methods: [`Channel`], the `tower::Service` that sends encoded
//! requests to one server, and [`Client`], typed calls over any such
//! service (a channel, a balancer, a stack of layers).

use std::net::SocketAddr;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use smt::{CallOptions, Endpoint};
use tower::{BoxError, Service, ServiceExt};

use crate::codec::Codec;
use crate::request::IntoRequest;
use crate::router::{RawRequest, RawResponse};
use crate::wire::{self, RequestHead};
use crate::{Method, Response, Status};

/// Sends encoded requests to one server through an SMT endpoint (which
/// establishes the session: TLS, PSK or installed keys). Cheap to clone;
/// always ready (the endpoint bounds calls in flight itself:
/// `EndpointConfig::max_outstanding_calls`). Dropping a call's future
/// cancels the RPC at both ends: the handler's context fires.
#[derive(Clone, Debug)]
pub struct Channel {
    endpoint: Endpoint,
    server: SocketAddr,
}

impl Channel {
    /// A channel to `server` through `endpoint`.
    pub fn new(endpoint: Endpoint, server: SocketAddr) -> Self {
        Self { endpoint, server }
    }

    /// The server's address.
    pub fn server(&self) -> SocketAddr {
        self.server
    }
}

impl Service<RawRequest> for Channel {
    type Response = RawResponse;
    type Error = Status;
    type Future = BoxFuture<'static, Result<RawResponse, Status>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: RawRequest) -> Self::Future {
        let endpoint = self.endpoint.clone();
        let server = self.server;
        Box::pin(async move { call(&endpoint, server, request).await })
    }
}

/// One RPC: the envelope with the caller's timeout, an SMT call bounded by
/// the same timeout, the response's envelope opened.
async fn call(
    endpoint: &Endpoint,
    server: SocketAddr,
    request: RawRequest,
) -> Result<RawResponse, Status> {
    // What is left of the caller's time, as the request leaves.
    let timeout = match request.deadline {
        Some(deadline) => {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Status::deadline_exceeded(
                    "the call's timeout passed before the request was sent",
                ));
            }
            Some(left)
        }
        None => request.timeout,
    };
    let head = RequestHead {
        method: request.method.into_owned(),
        timeout_us: timeout.map(wire::timeout_us),
        metadata: request.metadata,
    };
    let envelope = wire::encode_request(&head, &request.message)?;
    let options = match timeout {
        Some(t) => CallOptions::new().timeout(t),
        None => CallOptions::new(),
    };
    let reply = endpoint.call_async_with(server, envelope, options).await?;
    let (metadata, message) = wire::decode_response(reply)?;
    Ok(Response { message, metadata })
}

/// Typed calls over a service of encoded messages: a [`Channel`], a
/// balancer ([`crate::balance`]), or either under tower layers
/// (`ServiceBuilder::new().timeout(..).retry(..).service(channel)`).
/// Clone it for concurrent calls when the service is `Clone` (a channel
/// is; a balancer is once buffered, as [`crate::balance`] returns it).
#[derive(Clone, Debug)]
pub struct Client<S> {
    service: S,
    timeout: Option<Duration>,
}

impl<S> Client<S>
where
    S: Service<RawRequest, Response = RawResponse>,
    S::Error: Into<BoxError>,
{
    /// A client over `service` (a [`Channel`] or a balancer), without a timeout.
    pub fn new(service: S) -> Self {
        Self {
            service,
            timeout: None,
        }
    }

    /// The timeout of requests that set none themselves
    /// ([`crate::Request::with_timeout`]): sent to the server as the
    /// handler's deadline, and the SMT call's own. (A tower `Timeout`
    /// layer bounds the call too, but the server does not hear of it.)
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The service underneath.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.service
    }

    /// Calls `method` with `request` (a message or a
    /// [`crate::Request`]); the error is the server's status, or the
    /// transport's mapped to one (`UNAVAILABLE` only where the request did
    /// not run).
    pub async fn unary<Req, Resp, C>(
        &mut self,
        method: Method<Req, Resp, C>,
        request: impl IntoRequest<Req>,
    ) -> Result<Response<Resp>, Status>
    where
        C: Codec<Req> + Codec<Resp>,
    {
        let mut request = request.into_request();
        request.set_method(method.name());
        if request.timeout.is_none() {
            request.timeout = self.timeout;
        }
        request.deadline = request.timeout.and_then(|t| Instant::now().checked_add(t));
        let mut body = Vec::new();
        <C as Codec<Req>>::encode(&request.message, &mut body)?;
        let deadline = request.deadline;
        let raw = request.map(|_| Bytes::from(body));
        let service = &mut self.service;
        let exchange = async move {
            let ready = service
                .ready()
                .await
                .map_err(|e| Status::from_error(e.into()))?;
            ready
                .call(raw)
                .await
                .map_err(|e| Status::from_error(e.into()))
        };
        // The deadline also bounds the wait for a ready service (a
        // balancer with no server yet, a full buffer).
        let response = match deadline {
            Some(at) => tokio::time::timeout_at(at.into(), exchange)
                .await
                .map_err(|_| Status::deadline_exceeded("the call's timeout passed"))??,
            None => exchange.await?,
        };
        let Response { message, metadata } = response;
        let message = <C as Codec<Resp>>::decode(message).map_err(|e| {
            Status::internal(format!(
                "the {} response does not decode: {e}",
                method.name()
            ))
        })?;
        Ok(Response { message, metadata })
    }
}
