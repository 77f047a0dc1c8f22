//! Routing requests to methods by name: a [`Router`] is a
//! `tower::Service`, so layers wrap all of it (or one route).

use std::collections::HashMap;
use std::future::Future;
use std::task::{Context as TaskContext, Poll};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use tower::util::BoxCloneService;
use tower::{Service, ServiceExt};

use crate::codec::Codec;
use crate::wire::MAX_METHOD_LEN;
use crate::{Method, Request, Response, Status};

/// The request and response types every route, layer and transport
/// service sees: messages still encoded.
pub type RawRequest = Request<Bytes>;
/// See [`RawRequest`].
pub type RawResponse = Response<Bytes>;

type Route = BoxCloneService<RawRequest, RawResponse, Status>;

/// A handler's success: a message, or a [`Response`] with metadata.
pub trait IntoResponse<T> {
    /// The response, with empty metadata if `self` is a bare message.
    fn into_response(self) -> Response<T>;
}

impl<T> IntoResponse<T> for T {
    fn into_response(self) -> Response<T> {
        Response::new(self)
    }
}

impl<T> IntoResponse<T> for Response<T> {
    fn into_response(self) -> Response<T> {
        self
    }
}

/// Methods by name. A request for a name no route has is answered
/// [`crate::Code::Unimplemented`].
#[derive(Clone, Default)]
pub struct Router {
    routes: HashMap<&'static str, Route>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<_> = self.routes.keys().collect();
        names.sort();
        f.debug_struct("Router").field("methods", &names).finish()
    }
}

impl Router {
    /// A router without methods.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `method` with `handler`: an async function from the typed
    /// request (its [`crate::Context`] says who called and until when) to
    /// the response message (or a [`Response`] with metadata) or a
    /// [`Status`]. A request whose message does not decode is answered
    /// [`crate::Code::InvalidArgument`] without calling the handler.
    ///
    /// A name registered twice, empty, or longer than 256 bytes is
    /// [`crate::Code::InvalidArgument`].
    pub fn unary<Req, Resp, C, H, F, R>(
        self,
        method: Method<Req, Resp, C>,
        handler: H,
    ) -> Result<Self, Status>
    where
        Req: Send + 'static,
        Resp: Send + 'static,
        C: Codec<Req> + Codec<Resp>,
        H: Fn(Request<Req>) -> F + Clone + Send + 'static,
        F: Future<Output = Result<R, Status>> + Send + 'static,
        R: IntoResponse<Resp>,
    {
        let service = tower::service_fn(move |raw: RawRequest| {
            let handler = handler.clone();
            async move {
                let request = decode_request::<Req, C>(raw)?;
                let response = handler(request).await?.into_response();
                let mut body = Vec::new();
                <C as Codec<Resp>>::encode(&response.message, &mut body)?;
                Ok(response.map(|_| Bytes::from(body)))
            }
        });
        self.route(method.name(), service)
    }

    /// Serves the method `name` with any service of encoded messages
    /// (a tower stack of its own, say).
    pub fn route<S>(mut self, name: &'static str, service: S) -> Result<Self, Status>
    where
        S: Service<RawRequest, Response = RawResponse, Error = Status> + Clone + Send + 'static,
        S::Future: Send + 'static,
    {
        if name.is_empty() || name.len() > MAX_METHOD_LEN {
            return Err(Status::invalid_argument(format!(
                "method name {name:?}: give 1 to {MAX_METHOD_LEN} bytes"
            )));
        }
        if self.routes.contains_key(name) {
            return Err(Status::invalid_argument(format!(
                "method {name:?} is routed twice: register each method once"
            )));
        }
        self.routes.insert(name, BoxCloneService::new(service));
        Ok(self)
    }

    /// The methods served, in no particular order.
    pub fn methods(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.routes.keys().copied()
    }
}

fn decode_request<Req, C: Codec<Req>>(raw: RawRequest) -> Result<Request<Req>, Status> {
    let Request {
        method,
        message,
        metadata,
        timeout,
        deadline,
        context,
    } = raw;
    let message = C::decode(message).map_err(|e| {
        Status::invalid_argument(format!("the {method} request does not decode: {e}"))
    })?;
    Ok(Request {
        method,
        message,
        metadata,
        timeout,
        deadline,
        context,
    })
}

impl Service<RawRequest> for Router {
    type Response = RawResponse;
    type Error = Status;
    type Future = BoxFuture<'static, Result<RawResponse, Status>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: RawRequest) -> Self::Future {
        match self.routes.get(request.method()) {
            Some(route) => Box::pin(route.clone().oneshot(request)),
            None => {
                let status = Status::unimplemented(format!(
                    "this server has no method {:?}",
                    request.method()
                ));
                Box::pin(std::future::ready(Err(status)))
            }
        }
    }
}
