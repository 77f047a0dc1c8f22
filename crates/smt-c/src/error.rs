//! Error codes, sorted by who is at fault, and the thread-local message of
//! the last failure.
//!
//! Every function returns `SMT_OK` (0) or a non-negative value on success
//! and a negative code on failure. The codes fall in ranges by blame, so a
//! caller can decide what to do from the range alone ([`smt_error_blame`]
//! names it): `-10..=-29` the caller misused the API (fix the program),
//! `-30..=-39` the peer refused or broke the protocol, `-40..=-49` the
//! network (silence, unreachable), `-50..=-59` the environment (sockets,
//! files, the operating system), `-60` a bug in libsmt. `SMT_ERR_AGAIN`
//! (-1) is no failure: nothing is ready yet.
//!
//! [`smt_error_blame`]: crate::smt_error_blame

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::fmt;

use smt::{Error, HandshakeError, RpcError, SendError};

/// Success.
pub const SMT_OK: c_int = 0;
/// Nothing is ready: a non-blocking `smt_recv` found no message. Not a
/// failure; wait on `smt_fd` (and `smt_timeout_ms`) and try again.
pub const SMT_ERR_AGAIN: c_int = -1;

/// The caller's: an argument is invalid (a NULL pointer, text that is not
/// UTF-8, an unknown flag, a key of the wrong length).
pub const SMT_ERR_INVALID: c_int = -10;
/// The caller's: an address is not `IP:PORT` (e.g. `127.0.0.1:7878`,
/// `[::1]:7878`).
pub const SMT_ERR_ADDRESS: c_int = -11;
/// The caller's: the handle is not open (closed, or never returned by
/// `smt_open`).
pub const SMT_ERR_HANDLE: c_int = -12;
/// The caller's: another thread is inside a call on this handle. A handle
/// is used by one thread at a time.
pub const SMT_ERR_BUSY: c_int = -13;
/// The caller's: no session with this peer and no way to make one. Install
/// keys (`smt_install_keys`) or set a PSK, TLS client or 0-RTT ticket
/// before calling it.
pub const SMT_ERR_NO_KEYS: c_int = -14;
/// The caller's: the message is longer than `SMT_MAX_MESSAGE_LEN`.
pub const SMT_ERR_TOO_LARGE: c_int = -15;
/// The caller's: no outstanding call or unanswered request has this id
/// (already answered, aborted, or never handed out).
pub const SMT_ERR_UNKNOWN_ID: c_int = -16;
/// The caller's: a certificate, key, ticket or PSK given is unusable (not
/// PEM, wrong key, expired ticket...), or a setting cannot work; the
/// message says which and why.
pub const SMT_ERR_CONFIG: c_int = -17;
/// The caller's: the buffer given is too small for the result.
pub const SMT_ERR_BUFFER: c_int = -18;
/// The caller's: the session's keys are used up (every message ID or the
/// AEAD's record limit); install new keys.
pub const SMT_ERR_KEYS_SPENT: c_int = -19;
/// The caller's: this handle already has `SMT_MAX_OUTSTANDING_CALLS` calls
/// outstanding; call `smt_recv` until some of them end.
pub const SMT_ERR_TOO_MANY_CALLS: c_int = -20;

/// The peer's: the handshake failed (certificate not trusted or for
/// another name, ticket refused, protocol error or alert).
pub const SMT_ERR_HANDSHAKE: c_int = -30;
/// The peer's: it broke the protocol or lost the request repeatedly.
pub const SMT_ERR_PEER: c_int = -31;
/// The peer's: the server refused the request without executing it (too
/// many requests waiting for its application). Retrying later is safe.
pub const SMT_ERR_OVERLOADED: c_int = -32;
/// The peer's: the server received the request but will not answer it (its
/// application dropped it with `smt_abort`, its response could not be
/// sent, or it gave up on the call). The request may have run: retry only
/// what is safe to run twice.
pub const SMT_ERR_ABANDONED: c_int = -33;
/// The peer's: it ended the session while the call was in flight. A TLS
/// server that requires a client certificate does so right after the
/// handshake when none (or one it does not trust) was presented: see
/// `smt_set_tls_client`'s `cert_path` and `key_path`.
pub const SMT_ERR_SESSION_CLOSED: c_int = -34;

/// The network's: the peer stopped answering (the call or the handshake
/// timed out), or the call's own timeout (`smt_set_call_timeout`) passed
/// before its response was complete; the server may have run the request.
pub const SMT_ERR_TIMEOUT: c_int = -40;
/// The network's: the peer's host or port is unreachable (ICMP): nothing
/// speaks SMT there.
pub const SMT_ERR_UNREACHABLE: c_int = -41;

/// The environment's: the socket could not be opened (address in use,
/// permission denied).
pub const SMT_ERR_SOCKET: c_int = -50;
/// The environment's: the operating system failed an I/O call.
pub const SMT_ERR_IO: c_int = -51;
/// The environment's: a file could not be read.
pub const SMT_ERR_FILE: c_int = -52;

/// libsmt's: a bug (an internal panic was caught). The handle it happened
/// on refuses further calls except `smt_close`; please report it.
pub const SMT_ERR_INTERNAL: c_int = -60;

/// Who is at fault for a code (`smt_error_blame`): no one (success or
/// `SMT_ERR_AGAIN`).
pub const SMT_BLAME_NONE: c_int = 0;
/// The calling program misused the API: fix the call.
pub const SMT_BLAME_CALLER: c_int = 1;
/// The peer refused or misbehaved.
pub const SMT_BLAME_PEER: c_int = 2;
/// The network lost the peer.
pub const SMT_BLAME_NETWORK: c_int = 3;
/// The machine: sockets, files, the operating system.
pub const SMT_BLAME_ENVIRONMENT: c_int = 4;
/// libsmt itself.
pub const SMT_BLAME_LIBRARY: c_int = 5;

/// One row per code: its value, its `smt_strerror` text (NUL-terminated, so
/// it can be returned as it is).
const TEXTS: &[(c_int, &CStr)] = &[
    (SMT_OK, c"success"),
    (SMT_ERR_AGAIN, c"no message ready yet (try again)"),
    (SMT_ERR_INVALID, c"invalid argument"),
    (SMT_ERR_ADDRESS, c"not an IP:PORT address"),
    (SMT_ERR_HANDLE, c"the handle is not open"),
    (SMT_ERR_BUSY, c"another thread is using this handle"),
    (SMT_ERR_NO_KEYS, c"no session keys for this peer"),
    (SMT_ERR_TOO_LARGE, c"message too large"),
    (SMT_ERR_UNKNOWN_ID, c"no call or request with this id"),
    (SMT_ERR_CONFIG, c"unusable certificate, key, ticket or PSK"),
    (SMT_ERR_BUFFER, c"buffer too small"),
    (SMT_ERR_KEYS_SPENT, c"the session's keys are used up"),
    (SMT_ERR_TOO_MANY_CALLS, c"too many calls outstanding"),
    (SMT_ERR_HANDSHAKE, c"handshake failed"),
    (SMT_ERR_PEER, c"the peer misbehaved"),
    (SMT_ERR_OVERLOADED, c"the server is overloaded"),
    (SMT_ERR_ABANDONED, c"the server will not answer the request"),
    (SMT_ERR_SESSION_CLOSED, c"the peer ended the session"),
    (SMT_ERR_TIMEOUT, c"the peer stopped answering"),
    (SMT_ERR_UNREACHABLE, c"the peer is unreachable"),
    (SMT_ERR_SOCKET, c"cannot open the socket"),
    (SMT_ERR_IO, c"I/O error"),
    (SMT_ERR_FILE, c"cannot read a file"),
    (SMT_ERR_INTERNAL, c"internal error in libsmt"),
];

/// The static text for `code`.
pub fn text(code: c_int) -> &'static CStr {
    TEXTS
        .iter()
        .find_map(|(c, t)| (*c == code).then_some(*t))
        .unwrap_or(c"unknown SMT error code")
}

/// Who is at fault for `code`, by its range.
pub fn blame(code: c_int) -> c_int {
    match code {
        SMT_OK | SMT_ERR_AGAIN => SMT_BLAME_NONE,
        -29..=-10 => SMT_BLAME_CALLER,
        -39..=-30 => SMT_BLAME_PEER,
        -49..=-40 => SMT_BLAME_NETWORK,
        -59..=-50 => SMT_BLAME_ENVIRONMENT,
        _ if code > 0 => SMT_BLAME_NONE,
        _ => SMT_BLAME_LIBRARY,
    }
}

/// A failed call: its code and a message that says what to change.
#[derive(Debug)]
pub struct Failure {
    pub code: c_int,
    pub message: String,
}

impl Failure {
    pub fn new(code: c_int, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// A NULL pointer where `what` was required.
    pub fn null(what: &str) -> Self {
        Self::new(SMT_ERR_INVALID, format!("{what} is NULL"))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Self::new(code_of(&e), e.to_string())
    }
}

/// The code for an error of the `smt` crate: the one decision table from
/// its errors to ours.
pub fn code_of(e: &Error) -> c_int {
    match e {
        Error::Config(_) => SMT_ERR_CONFIG,
        Error::Socket(_) => SMT_ERR_SOCKET,
        Error::Io(_) => SMT_ERR_IO,
        Error::Send(e) => send_code(e),
        Error::Rpc(e) => rpc_code(e),
        Error::Handshake(e) => handshake_code(e),
        Error::Closed => SMT_ERR_HANDLE,
        Error::Timeout { .. } => SMT_ERR_TIMEOUT,
        Error::TooManyCalls { .. } => SMT_ERR_TOO_MANY_CALLS,
        _ => SMT_ERR_INTERNAL,
    }
}

fn send_code(e: &SendError) -> c_int {
    match e {
        SendError::NoSession => SMT_ERR_NO_KEYS,
        SendError::MessageTooLarge { .. } => SMT_ERR_TOO_LARGE,
        SendError::IdSpaceExhausted | SendError::KeyExhausted => SMT_ERR_KEYS_SPENT,
        SendError::UnknownRpc | SendError::AlreadyResponded => SMT_ERR_UNKNOWN_ID,
        SendError::ReflectableKeys => SMT_ERR_CONFIG,
        // The engine retries these itself; one that surfaces is a bug.
        _ => SMT_ERR_INTERNAL,
    }
}

fn rpc_code(e: &RpcError) -> c_int {
    match e {
        RpcError::Timeout => SMT_ERR_TIMEOUT,
        RpcError::Unreachable => SMT_ERR_UNREACHABLE,
        RpcError::Overloaded => SMT_ERR_OVERLOADED,
        RpcError::Abandoned => SMT_ERR_ABANDONED,
        RpcError::SessionClosed => SMT_ERR_SESSION_CLOSED,
        RpcError::IdSpaceExhausted => SMT_ERR_KEYS_SPENT,
        // `PeerLostRequest`, `PeerMisbehaved`, and kinds
        // added later (the enum is non-exhaustive): the peer's doing.
        _ => SMT_ERR_PEER,
    }
}

fn handshake_code(e: &HandshakeError) -> c_int {
    match e {
        HandshakeError::Timeout => SMT_ERR_TIMEOUT,
        HandshakeError::Unreachable => SMT_ERR_UNREACHABLE,
        HandshakeError::NotConfigured => SMT_ERR_NO_KEYS,
        _ => SMT_ERR_HANDSHAKE,
    }
}

thread_local! {
    /// The message of the last failure on this thread (`smt_last_error`).
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `failure` as this thread's last error and returns its code.
pub fn record(failure: Failure) -> c_int {
    set_last_error(&failure.message);
    failure.code
}

/// Replaces this thread's last-error message (a NUL inside is shown as
/// `\0`, so the message is never cut short silently).
pub fn set_last_error(message: &str) {
    let text = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|last| *last.borrow_mut() = text);
}

/// This thread's last-error message; valid until the next failing call on
/// this thread.
pub fn last_error() -> *const c_char {
    LAST_ERROR.with(|last| last.borrow().as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_its_own_text_and_one_blame() {
        let mut seen = std::collections::HashSet::new();
        for (code, text) in TEXTS {
            assert!(seen.insert(text.to_bytes()), "{code}: text shared");
            assert!(!text.to_bytes().is_empty());
        }
        assert_eq!(blame(SMT_ERR_AGAIN), SMT_BLAME_NONE);
        assert_eq!(blame(SMT_ERR_BUSY), SMT_BLAME_CALLER);
        assert_eq!(blame(SMT_ERR_HANDSHAKE), SMT_BLAME_PEER);
        assert_eq!(blame(SMT_ERR_UNREACHABLE), SMT_BLAME_NETWORK);
        assert_eq!(blame(SMT_ERR_FILE), SMT_BLAME_ENVIRONMENT);
        assert_eq!(blame(SMT_ERR_INTERNAL), SMT_BLAME_LIBRARY);
        assert_eq!(text(-1000).to_bytes(), b"unknown SMT error code");
    }

    #[test]
    fn errors_of_the_smt_crate_land_in_the_right_range() {
        let mut unworkable = smt::EndpointConfig::default();
        unworkable.set_max_outstanding_calls(0);
        let any = "127.0.0.1:0".parse().unwrap();
        let refused = smt::LocalEndpoint::bind(any, unworkable).unwrap_err();
        assert_eq!(code_of(&refused), SMT_ERR_CONFIG, "{refused}");
        let cases = [
            (Error::Send(SendError::NoSession), SMT_ERR_NO_KEYS),
            (
                Error::Send(SendError::MessageTooLarge { len: 2, max: 1 }),
                SMT_ERR_TOO_LARGE,
            ),
            (Error::Rpc(RpcError::Timeout), SMT_ERR_TIMEOUT),
            (Error::Rpc(RpcError::Overloaded), SMT_ERR_OVERLOADED),
            (Error::Rpc(RpcError::Abandoned), SMT_ERR_ABANDONED),
            (Error::Rpc(RpcError::SessionClosed), SMT_ERR_SESSION_CLOSED),
            (Error::Rpc(RpcError::PeerMisbehaved), SMT_ERR_PEER),
            (
                Error::Timeout {
                    after: std::time::Duration::from_millis(5),
                },
                SMT_ERR_TIMEOUT,
            ),
            (Error::TooManyCalls { max: 1 }, SMT_ERR_TOO_MANY_CALLS),
            (
                Error::Handshake(HandshakeError::WrongName("x".into())),
                SMT_ERR_HANDSHAKE,
            ),
            (Error::Closed, SMT_ERR_HANDLE),
        ];
        for (e, code) in cases {
            assert_eq!(code_of(&e), code, "{e}");
        }
    }

    #[test]
    fn the_last_error_survives_a_nul_inside() {
        set_last_error("a\0b");
        // SAFETY: `last_error` points at this thread's live CString.
        let text = unsafe { CStr::from_ptr(last_error()) };
        assert_eq!(text.to_bytes(), b"a\\0b");
    }
}
