//! How typed messages become bytes: [`Postcard`] (serde, compact) by
//! default, [`Prost`] for messages generated from `.proto` files (feature
//! `prost`), or any [`Codec`] of your own.

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::Status;

/// Encodes and decodes messages of type `T`. A message that cannot be
/// decoded is [`crate::Code::InvalidArgument`] at a server and
/// [`crate::Code::Internal`] at a client (the caller maps it).
pub trait Codec<T>: Send + Sync + 'static {
    /// Appends `message`'s encoding to `out`.
    fn encode(message: &T, out: &mut Vec<u8>) -> Result<(), Status>;
    /// Decodes a message; a decoding error's text goes into the status.
    fn decode(bytes: Bytes) -> Result<T, String>;
}

/// serde with [postcard](https://docs.rs/postcard): varints, no field
/// names, no schema on the wire; both ends must agree on the types (share
/// the [`crate::Method`] constants). Adding a field at the end of a struct
/// is not compatible with older peers: version methods instead
/// (`"kv.Store/GetV2"`), or use [`Prost`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Postcard;

impl<T: Serialize + DeserializeOwned> Codec<T> for Postcard {
    fn encode(message: &T, out: &mut Vec<u8>) -> Result<(), Status> {
        let buf = std::mem::take(out);
        *out = postcard::to_extend(message, buf)
            .map_err(|e| Status::internal(format!("cannot encode the message: {e}")))?;
        Ok(())
    }

    fn decode(bytes: Bytes) -> Result<T, String> {
        postcard::from_bytes(&bytes).map_err(|e| e.to_string())
    }
}

/// Protocol Buffers with [prost](https://docs.rs/prost) (feature `prost`):
/// for messages generated from `.proto` files, which old and new peers
/// read alike as fields are added.
#[cfg(feature = "prost")]
#[derive(Clone, Copy, Debug, Default)]
pub struct Prost;

#[cfg(feature = "prost")]
impl<T: prost::Message + Default> Codec<T> for Prost {
    fn encode(message: &T, out: &mut Vec<u8>) -> Result<(), Status> {
        message
            .encode(out)
            .map_err(|e| Status::internal(format!("cannot encode the message: {e}")))
    }

    fn decode(bytes: Bytes) -> Result<T, String> {
        T::decode(bytes).map_err(|e| e.to_string())
    }
}
