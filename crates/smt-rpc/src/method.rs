//! A method: its name, its request and response types and their codec,
//! in one constant both ends share.

use std::fmt;
use std::marker::PhantomData;

use crate::codec::Postcard;

/// Names a method and fixes its types, for clients
/// ([`crate::Client::unary`]) and servers ([`crate::Router::unary`]) alike;
/// declare it once where both see it:
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use smt_rpc::Method;
///
/// #[derive(Serialize, Deserialize)]
/// pub struct GetRequest { pub key: String }
/// #[derive(Serialize, Deserialize)]
/// pub struct GetReply { pub value: Option<Vec<u8>> }
///
/// pub const GET: Method<GetRequest, GetReply> = Method::new("kv.Store/Get");
/// ```
///
/// Names are free-form up to 256 bytes; gRPC's `package.Service/Method`
/// reads well in logs and metrics.
pub struct Method<Req, Resp, C = Postcard> {
    name: &'static str,
    _types: PhantomData<fn(Req, C) -> Resp>,
}

impl<Req, Resp, C> Method<Req, Resp, C> {
    /// A method named `name` (the name goes on the wire with each request).
    pub const fn new(name: &'static str) -> Self {
        Self {
            name,
            _types: PhantomData,
        }
    }

    /// The method's name.
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

impl<Req, Resp, C> Clone for Method<Req, Resp, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Req, Resp, C> Copy for Method<Req, Resp, C> {}

impl<Req, Resp, C> fmt::Debug for Method<Req, Resp, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Method({})", self.name)
    }
}
