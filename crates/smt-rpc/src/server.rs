//! Serving a `tower::Service` of [`RawRequest`]s on an SMT endpoint:
//! accept, decode, call, answer; stop, drain and close on a signal.
//!
//! Per request: the envelope is decoded (garbage is answered
//! `INVALID_ARGUMENT`), the [`Context`] is built from the request's
//! session and the caller's timeout, and the service's future runs in a
//! task of its own, raced against three signals — the caller gives up
//! (its RPC_UNKNOWN reaches this endpoint), the deadline passes, the
//! server shuts down. On one, the context's signal fires and the handler
//! gets [`Server::cancel_grace`] to notice and return before its future
//! is dropped; no response is sent to a caller who left.
//!
//! The service's readiness is asked for each request once it is
//! accepted, before the next is: under a `ConcurrencyLimit` layer one
//! request waits here and the rest in the endpoint's queue (beyond
//! `max_pending_requests`, SMT refuses them unexecuted and the callers
//! see `UNAVAILABLE`); `LoadShed` answers `UNAVAILABLE` at once.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use futures_util::{FutureExt, TryFutureExt};
use smt::{Endpoint, IncomingRequest};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower::{BoxError, Service};

use crate::request::{CancelReason, Context};
use crate::router::{RawRequest, RawResponse};
use crate::wire;
use crate::{Request, Status};

/// How long a graceful shutdown waits for requests in flight, by default.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a cancelled handler may run on, by default.
pub const DEFAULT_CANCEL_GRACE: Duration = Duration::from_millis(200);

/// Serves a service on an SMT endpoint (its TLS, PSK or installed keys
/// already set up). See the module docs.
#[derive(Debug)]
pub struct Server {
    endpoint: Endpoint,
    drain_timeout: Duration,
    cancel_grace: Duration,
}

impl Server {
    /// A server answering requests that arrive at `endpoint`.
    pub fn new(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            cancel_grace: DEFAULT_CANCEL_GRACE,
        }
    }

    /// How long [`Server::serve_with_shutdown`] waits for requests in
    /// flight before cancelling them.
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// How long a handler whose request was cancelled (caller gone,
    /// deadline passed, shutdown) may run on to clean up before its
    /// future is dropped.
    pub fn cancel_grace(mut self, grace: Duration) -> Self {
        self.cancel_grace = grace;
        self
    }

    /// Serves until `shutdown` resolves, then shuts down gracefully:
    /// stops taking requests into the service (those still arriving are
    /// answered `UNAVAILABLE`: not run, safe to send elsewhere), waits up
    /// to [`Server::drain_timeout`] for the requests in flight, cancels
    /// those left (their handlers see [`CancelReason::Shutdown`]), and
    /// closes the endpoint (its own close waits up to two seconds for the
    /// last responses to be acknowledged).
    ///
    /// Must run inside a tokio runtime. An error from the service's
    /// `poll_ready` ends serving (after the same drain) and is returned.
    pub async fn serve_with_shutdown<S>(
        self,
        mut service: S,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), Status>
    where
        S: Service<RawRequest, Response = RawResponse>,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        let stop = CancellationToken::new();
        let mut tasks = JoinSet::new();
        tokio::pin!(shutdown);
        let ended = loop {
            while tasks.try_join_next().is_some() {}
            let incoming = tokio::select! {
                biased;
                () = &mut shutdown => break Ok(()),
                incoming = self.endpoint.accept_async() => incoming,
            };
            let Ok(incoming) = incoming else {
                // The endpoint was closed under us: nothing left to serve.
                break Ok(());
            };
            let Some((request, incoming)) = decode(incoming) else {
                continue;
            };
            // Readiness is asked with the request in hand, so a load-shed
            // layer judges the load as it is now (and a concurrency limit
            // holds this one request while the rest wait in the endpoint).
            let ready = tokio::select! {
                biased;
                () = &mut shutdown => {
                    refuse(incoming);
                    break Ok(());
                }
                ready = futures_util::future::poll_fn(|cx| {
                    service.poll_ready(cx).map_err(|e| Status::from_error(e.into()))
                }) => ready,
            };
            if let Err(status) = ready {
                let _ = incoming.respond(wire::encode_response(Err(status.clone())));
                break Err(status);
            }
            let context = request.context.clone();
            let future = service
                .call(request)
                .map_err(|e| Status::from_error(e.into()));
            let run = Run {
                incoming,
                context,
                stop: stop.clone(),
                grace: self.cancel_grace,
            };
            tasks.spawn(run.run(future));
        };
        self.drain(tasks, &stop).await;
        self.endpoint.close_async().await;
        ended
    }

    /// Waits for the requests in flight, answering new ones UNAVAILABLE;
    /// cancels what is left after the drain timeout.
    async fn drain(&self, mut tasks: JoinSet<()>, stop: &CancellationToken) {
        let end = tokio::time::Instant::now() + self.drain_timeout;
        loop {
            tokio::select! {
                done = tasks.join_next() => if done.is_none() { return },
                incoming = self.endpoint.accept_async() => match incoming {
                    Ok(incoming) => refuse(incoming),
                    Err(_) => break,
                },
                () = tokio::time::sleep_until(end) => break,
            }
        }
        stop.cancel();
        while tasks.join_next().await.is_some() {}
    }
}

/// The request as the service sees it, and the SMT request to answer; a
/// malformed envelope is answered at once.
fn decode(mut incoming: IncomingRequest) -> Option<(RawRequest, IncomingRequest)> {
    let received = Instant::now();
    let (head, body) = match wire::decode_request(incoming.take_data()) {
        Ok(decoded) => decoded,
        Err(status) => {
            let _ = incoming.respond(wire::encode_response(Err(status)));
            return None;
        }
    };
    let timeout = head.timeout_us.map(Duration::from_micros);
    let deadline = timeout.and_then(|t| received.checked_add(t));
    let context = Context::inbound(incoming.session().clone(), deadline);
    let request = Request {
        method: head.method.into(),
        message: body,
        metadata: head.metadata,
        timeout,
        deadline,
        context,
    };
    Some((request, incoming))
}

/// Answers a request that arrived during shutdown, unexecuted.
fn refuse(incoming: IncomingRequest) {
    let status = Status::unavailable("the server is shutting down: the request did not run");
    let _ = incoming.respond(wire::encode_response(Err(status)));
}

/// One request in flight.
struct Run {
    incoming: IncomingRequest,
    context: Context,
    stop: CancellationToken,
    grace: Duration,
}

impl Run {
    async fn run<F>(self, future: F)
    where
        F: Future<Output = Result<RawResponse, Status>> + Send + 'static,
    {
        // A panicking handler is answered INTERNAL, not left to time out.
        let future = AssertUnwindSafe(future).catch_unwind();
        tokio::pin!(future);
        let caller = self.incoming.cancellation();
        let deadline = async {
            match self.context.deadline() {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        let outcome = tokio::select! {
            outcome = &mut future => Some(outcome),
            () = caller.cancelled() => self.cancel(CancelReason::CallerGone),
            () = deadline => self.cancel(CancelReason::DeadlinePassed),
            () = self.stop.cancelled() => self.cancel(CancelReason::Shutdown),
        };
        let outcome = match outcome {
            Some(outcome) => Some(outcome),
            None => tokio::time::timeout(self.grace, &mut future).await.ok(),
        };
        let reason = self.context.cancel_reason();
        let result = match (outcome, reason) {
            // Nobody to answer: dropping the request frees it.
            (_, Some(CancelReason::CallerGone)) => return,
            // Whatever the handler made of it, the caller's time is up.
            (_, Some(CancelReason::DeadlinePassed)) | (None, _) => Err(cancelled_status(reason)),
            (Some(Ok(result)), _) => result,
            (Some(Err(_panic)), _) => Err(Status::internal("the handler panicked")),
        };
        let answer = result.map(|r| (r.metadata, r.message));
        let _ = self.incoming.respond(wire::encode_response(answer));
    }

    fn cancel<T>(&self, reason: CancelReason) -> Option<T> {
        self.context.cancel(reason);
        None
    }
}

fn cancelled_status(reason: Option<CancelReason>) -> Status {
    match reason {
        Some(CancelReason::DeadlinePassed) => {
            Status::deadline_exceeded("the caller's deadline passed while the handler ran")
        }
        Some(CancelReason::Shutdown) => {
            Status::cancelled("the server shut down while the handler ran")
        }
        _ => Status::cancelled("the request was cancelled"),
    }
}
