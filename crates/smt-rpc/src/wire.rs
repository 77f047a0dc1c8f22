//! The envelope around each message: one SMT request or response carries
//! a version byte, a small head (postcard: varints and length-prefixed
//! strings) and the encoded message, whose bytes are handed on without a
//! copy.
//!
//! ```text
//! request:  01 | method, timeout in µs (optional), metadata | message
//! response: 01 | code, status message, details, metadata   | message
//! ```
//!
//! The timeout is what the caller has left when it sends (gRPC's
//! `grpc-timeout`): a duration, not a point in time, so the two clocks
//! need not agree. The server's deadline is its receipt time plus it.

use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::{Code, Metadata, Status};

/// The envelope's version; another is refused with a clear status.
pub(crate) const VERSION: u8 = 1;

/// Longest method name, in bytes.
pub const MAX_METHOD_LEN: usize = 256;

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct RequestHead {
    pub method: String,
    pub timeout_us: Option<u64>,
    pub metadata: Metadata,
}

#[derive(Debug, Serialize, Deserialize)]
struct ResponseHead {
    code: u32,
    message: String,
    details: Vec<u8>,
    metadata: Metadata,
}

/// A request's envelope with `body` (the encoded message) after it.
pub(crate) fn encode_request(head: &RequestHead, body: &[u8]) -> Result<Vec<u8>, Status> {
    let mut out = Vec::with_capacity(1 + 16 + head.method.len() + body.len());
    out.push(VERSION);
    let mut out = postcard::to_extend(head, out)
        .map_err(|e| Status::internal(format!("cannot encode the request head: {e}")))?;
    out.extend_from_slice(body);
    Ok(out)
}

/// A request's head and message. Garbage is [`Code::InvalidArgument`].
pub(crate) fn decode_request(data: Bytes) -> Result<(RequestHead, Bytes), Status> {
    let rest = check_version(&data)?;
    let (head, body) = postcard::take_from_bytes::<RequestHead>(rest)
        .map_err(|e| Status::invalid_argument(format!("malformed request envelope: {e}")))?;
    if head.method.len() > MAX_METHOD_LEN {
        return Err(Status::invalid_argument("method name too long"));
    }
    head.metadata.validate()?;
    let offset = data.len() - body.len();
    Ok((head, data.slice(offset..)))
}

/// A response's envelope: the message and its metadata, or a status.
pub(crate) fn encode_response(result: Result<(Metadata, Bytes), Status>) -> Vec<u8> {
    let (head, body) = match result {
        Ok((metadata, body)) => (
            ResponseHead {
                code: Code::Ok.as_u32(),
                message: String::new(),
                details: Vec::new(),
                metadata,
            },
            body,
        ),
        Err(status) => (
            ResponseHead {
                code: status.code().as_u32(),
                message: status.message().to_owned(),
                details: status.details().to_vec(),
                metadata: status.metadata().clone(),
            },
            Bytes::new(),
        ),
    };
    let mut out = Vec::with_capacity(1 + 16 + head.message.len() + body.len());
    out.push(VERSION);
    // Strings, bytes and varints only: encoding into a Vec cannot fail.
    let mut out = postcard::to_extend(&head, out).unwrap_or_else(|_| vec![VERSION]);
    out.extend_from_slice(&body);
    out
}

/// A response's message and metadata, or the status it carries. Garbage
/// is [`Code::Internal`] (the server broke the protocol).
pub(crate) fn decode_response(data: Bytes) -> Result<(Metadata, Bytes), Status> {
    let rest = check_version(&data).map_err(|s| Status::internal(s.message().to_owned()))?;
    let (head, body) = postcard::take_from_bytes::<ResponseHead>(rest)
        .map_err(|e| Status::internal(format!("malformed response envelope: {e}")))?;
    head.metadata
        .validate()
        .map_err(|s| Status::internal(format!("response metadata: {}", s.message())))?;
    let code = Code::from_u32(head.code);
    if code != Code::Ok {
        let status = Status::new(code, head.message)
            .with_details(head.details)
            .with_metadata(head.metadata);
        return Err(status);
    }
    let offset = data.len() - body.len();
    Ok((head.metadata, data.slice(offset..)))
}

fn check_version(data: &[u8]) -> Result<&[u8], Status> {
    match data.split_first() {
        Some((&VERSION, rest)) => Ok(rest),
        Some((v, _)) => Err(Status::invalid_argument(format!(
            "RPC envelope version {v}, this end speaks {VERSION}"
        ))),
        None => Err(Status::invalid_argument("empty RPC envelope")),
    }
}

/// A timeout as the envelope carries it (saturating, whole µs).
pub(crate) fn timeout_us(timeout: Duration) -> u64 {
    u64::try_from(timeout.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_round_trips_and_its_message_is_not_copied() {
        let mut metadata = Metadata::new();
        metadata.insert("x-user", "ada").unwrap();
        let head = RequestHead {
            method: "kv.Store/Get".into(),
            timeout_us: Some(1_500_000),
            metadata,
        };
        let bytes = Bytes::from(encode_request(&head, b"message").unwrap());
        let (back, body) = decode_request(bytes.clone()).unwrap();
        assert_eq!(back.method, "kv.Store/Get");
        assert_eq!(back.timeout_us, Some(1_500_000));
        assert_eq!(back.metadata.get_str("x-user"), Some("ada"));
        assert_eq!(&body[..], b"message");
        assert_eq!(body.as_ptr(), bytes[bytes.len() - 7..].as_ptr(), "a slice");
    }

    #[test]
    fn a_status_round_trips_with_details() {
        let status = Status::not_found("no such key").with_details(&b"k1"[..]);
        let bytes = Bytes::from(encode_response(Err(status.clone())));
        assert_eq!(decode_response(bytes).unwrap_err(), status);
    }

    #[test]
    fn garbage_is_a_clear_status_not_a_panic() {
        for input in [
            &b""[..],
            b"\x02abc",
            b"\x01",
            b"\x01\xff\xff\xff\xff\xff\xff",
        ] {
            let e = decode_request(Bytes::copy_from_slice(input)).unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{input:?}");
            let e = decode_response(Bytes::copy_from_slice(input)).unwrap_err();
            assert_eq!(e.code(), Code::Internal, "{input:?}");
        }
    }
}
