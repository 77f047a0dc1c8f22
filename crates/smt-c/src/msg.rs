//! The message `smt_recv` fills: the data stays where SMT assembled it
//! (no copy), owned by the library until `smt_msg_release`.

use std::ffi::{c_char, c_int, c_void};
use std::net::SocketAddr;

use smt::Bytes;

use crate::socket::Delivery;

/// `smt_msg.kind`: a request from a peer; answer it with `smt_reply` (or
/// drop it with `smt_abort`).
pub const SMT_MSG_REQUEST: c_int = 1;
/// `smt_msg.kind`: the response to one of our calls.
pub const SMT_MSG_RESPONSE: c_int = 2;
/// `smt_msg.kind`: one of our calls failed; `error` says why, and `data`
/// holds the reason as text.
pub const SMT_MSG_FAILED: c_int = 3;

/// Room for a peer's address as text with its NUL (`[IPv6%scope]:port`
/// takes at most 58 bytes).
pub const SMT_PEER_LEN: usize = 64;

/// A received message, filled by `smt_recv`. `data` belongs to the library
/// until `smt_msg_release`, which must be called exactly once per message
/// filled (from any thread, even after the handle is closed). Copying the
/// struct does not copy the data: release one copy only.
#[repr(C)]
#[derive(Debug)]
pub struct Msg {
    /// `SMT_MSG_REQUEST`, `SMT_MSG_RESPONSE` or `SMT_MSG_FAILED`.
    pub kind: c_int,
    /// For `SMT_MSG_FAILED`: why the call failed (a negative `SMT_ERR_*`
    /// code); otherwise 0.
    pub error: c_int,
    /// The call's id (as `smt_send` returned it) or the request's (for
    /// `smt_reply`).
    pub id: u64,
    /// The peer as `IP:PORT`, NUL-terminated.
    pub peer: [c_char; SMT_PEER_LEN],
    /// The message's bytes (for `SMT_MSG_FAILED`, the reason as text,
    /// followed by a NUL that `len` does not count). Never NULL.
    pub data: *const u8,
    /// How many bytes `data` holds.
    pub len: usize,
    /// The library's; do not change it.
    pub internal: *mut c_void,
}

impl Msg {
    /// The C struct for `delivery`; its bytes move into a box that
    /// `internal` owns until [`Msg::release`].
    pub fn new(delivery: Delivery) -> Self {
        let (kind, error, id, peer, data) = match delivery {
            Delivery::Request { id, peer, data } => (SMT_MSG_REQUEST, 0, id, peer, data),
            Delivery::Response { id, peer, data } => (SMT_MSG_RESPONSE, 0, id, peer, data),
            Delivery::Failed {
                id,
                peer,
                code,
                message,
            } => {
                let mut text = message.into_bytes();
                text.push(0);
                let mut data = Bytes::from(text);
                data.truncate(data.len() - 1);
                (SMT_MSG_FAILED, code, id, peer, data)
            }
        };
        let boxed = Box::new(data);
        Self {
            kind,
            error,
            id,
            peer: peer_text(peer),
            data: boxed.as_ptr(),
            len: boxed.len(),
            internal: Box::into_raw(boxed).cast(),
        }
    }

    /// A message holding nothing (what a released one looks like).
    pub fn empty() -> Self {
        Self {
            kind: 0,
            error: 0,
            id: 0,
            peer: [0; SMT_PEER_LEN],
            data: std::ptr::null(),
            len: 0,
            internal: std::ptr::null_mut(),
        }
    }

    /// Frees the data and empties the message (a second release is a
    /// no-op).
    pub fn release(&mut self) {
        let internal = std::mem::replace(&mut self.internal, std::ptr::null_mut());
        if !internal.is_null() {
            // SAFETY: a non-NULL `internal` is only ever set by `Msg::new`,
            // from `Box::into_raw` of a `Box<Bytes>`, and is cleared above
            // before this box is dropped, so it is freed once. (A caller
            // who released a copy of the struct before breaks that
            // promise, which the header forbids.)
            drop(unsafe { Box::from_raw(internal.cast::<Bytes>()) });
        }
        *self = Self::empty();
    }
}

/// `peer` as NUL-terminated text.
fn peer_text(peer: SocketAddr) -> [c_char; SMT_PEER_LEN] {
    let mut out = [0; SMT_PEER_LEN];
    let text = peer.to_string();
    // Always fits (see SMT_PEER_LEN); cut, never overflow, if not.
    let n = text.len().min(SMT_PEER_LEN - 1);
    for (o, b) in out.iter_mut().zip(&text.as_bytes()[..n]) {
        *o = *b as c_char;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_call_carries_its_reason_as_nul_terminated_text() {
        let mut msg = Msg::new(Delivery::Failed {
            id: 7,
            peer: "[::1]:9".parse().unwrap(),
            code: -40,
            message: "timed out".into(),
        });
        assert_eq!(
            (msg.kind, msg.error, msg.id, msg.len),
            (SMT_MSG_FAILED, -40, 7, 9)
        );
        // SAFETY: `data` holds `len` bytes and the NUL after them, owned
        // by `msg` until it is released below.
        let with_nul = unsafe { std::slice::from_raw_parts(msg.data, msg.len + 1) };
        assert_eq!(with_nul, b"timed out\0");
        let peer: Vec<u8> = msg
            .peer
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        assert_eq!(peer, b"[::1]:9");
        msg.release();
        msg.release();
        assert!(msg.data.is_null() && msg.internal.is_null());
    }

    #[test]
    fn the_longest_peer_fits() {
        let peer: SocketAddr = "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff%4294967295]:65535"
            .parse()
            .unwrap();
        assert!(peer.to_string().len() < SMT_PEER_LEN, "{peer}");
    }
}
