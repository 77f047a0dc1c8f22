//! The threaded face: [`crate::Endpoint`], shared by threads and tasks
//! that drive its engine themselves while they wait (`drive/`), with the
//! requests it hands out ([`crate::IncomingRequest`]) and their
//! cancellation signals ([`crate::Cancellation`]).

mod cancel;
mod drive;
mod endpoint;
mod ready;
mod request;
#[cfg(all(test, feature = "tokio"))]
mod tests;

pub use self::cancel::Cancellation;
pub(crate) use self::drive::lock_ignoring_poison;
pub use self::endpoint::Endpoint;
pub(crate) use self::endpoint::WeakEndpoint;
pub use self::request::IncomingRequest;
