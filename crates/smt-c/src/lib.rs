//! libsmt: SMT's C API, in the style of Homa's socket API (`homa_send`,
//! `homa_recv`, `homa_reply` on a socket): open an endpoint, send a request
//! and get an id, receive requests and responses (blocking or not), reply
//! by id, and poll the endpoint's descriptor from the program's own epoll
//! loop. The header, `include/smt.h`, is generated from this file by
//! cbindgen (`tests/integration/header.rs` fails when it is stale) and states the
//! ownership and threading rules; `docs/c-api.md` has an example.
//!
//! Layout: `lib.rs` holds the exported functions, each a thin shell that
//! turns its C arguments into Rust values (`ffi.rs`), finds the endpoint in
//! the handle table (`table.rs`) and calls safe Rust (`socket.rs`, one
//! `smt::LocalEndpoint` per handle); `error.rs` has the codes by blame and
//! the thread-local last error; `msg.rs` the received message.

// An FFI boundary cannot be written without `unsafe`: C hands over raw
// pointers, and the functions must be exported unmangled. The workspace
// denies `unsafe_code`; this crate alone allows it. Every unsafe operation
// is a pointer/length conversion at the boundary (`ffi.rs`, `msg.rs`),
// behind a `// SAFETY:` comment; inside an `unsafe fn` each one still needs
// its own `unsafe` block. Panics are caught (`ffi::guard`) and never
// unwind into C.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

mod error;
mod ffi;
mod msg;
mod socket;
mod table;

use std::ffi::{c_char, c_int, c_void, CStr};
use std::time::Duration;

use smt::Role;

pub use error::*;
pub use msg::{Msg, SMT_MSG_FAILED, SMT_MSG_REQUEST, SMT_MSG_RESPONSE, SMT_PEER_LEN};
pub use socket::{SMT_MAX_MESSAGE_LEN, SMT_MAX_OUTSTANDING_CALLS, SMT_MIN_PSK_LEN};
pub use table::Handle;

use ffi::guard;
use socket::Socket;
use table::Table;

/// `smt_recv` flag: return `SMT_ERR_AGAIN` at once instead of waiting when
/// no message is ready.
pub const SMT_RECV_NONBLOCKING: c_int = 0x1;

/// `smt_install_keys` role: this side calls the peer.
pub const SMT_ROLE_CLIENT: c_int = 0;
/// `smt_install_keys` role: this side serves the peer.
pub const SMT_ROLE_SERVER: c_int = 1;

/// Every open endpoint.
static SOCKETS: Table<Socket> = Table::new();

// ---- opening and closing ----

/// Opens an SMT endpoint on a UDP socket bound to `addr` (`IP:PORT`; port 0
/// picks a free one, see `smt_local_addr`) and stores its handle in
/// `*handle`.
///
/// Errors: `SMT_ERR_ADDRESS` (not `IP:PORT`), `SMT_ERR_SOCKET` (in use, no
/// permission), `SMT_ERR_INVALID` (NULL).
///
/// # Safety
/// `addr` is NULL or a NUL-terminated string; `handle` is NULL or points
/// to writable memory for one `smt_handle`.
#[no_mangle]
pub unsafe extern "C" fn smt_open(addr: *const c_char, handle: *mut Handle) -> c_int {
    guard(|| {
        // SAFETY: the caller's promise on `addr`.
        let addr = unsafe { ffi::addr(addr, "addr") }?;
        if handle.is_null() {
            return Err(Failure::null("handle"));
        }
        let socket = Socket::open(addr)?;
        // SAFETY: not NULL (checked above) and writable (the caller's promise).
        unsafe { ffi::write(handle, SOCKETS.insert(socket), "handle") }?;
        Ok(SMT_OK)
    })
}

/// Closes the endpoint: calls still outstanding are cancelled (no message
/// reports them; their servers are told), requests not answered are
/// dropped (their clients' calls fail with `SMT_ERR_ABANDONED`), and
/// answers already given get up to 2 s to reach their clients before the
/// socket closes: this call blocks until they are acknowledged or the 2 s
/// are over (it returns at once when nothing is in flight). The handle is invalid afterwards (every call
/// with it returns `SMT_ERR_HANDLE`); messages received from it stay valid
/// until released.
///
/// Errors: `SMT_ERR_HANDLE` (not open), `SMT_ERR_BUSY` (another thread is
/// inside a call on it; the handle stays open).
#[no_mangle]
pub extern "C" fn smt_close(handle: Handle) -> c_int {
    guard(|| {
        SOCKETS.remove(handle, Socket::close)?;
        Ok(SMT_OK)
    })
}

/// Writes the endpoint's bound address (`IP:PORT`, NUL-terminated) into
/// `buf` of `len` bytes (`SMT_PEER_LEN` always suffices).
///
/// Errors: `SMT_ERR_BUFFER` (too small), `SMT_ERR_HANDLE`, `SMT_ERR_INVALID`.
///
/// # Safety
/// `buf` is NULL or valid for writing `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn smt_local_addr(handle: Handle, buf: *mut c_char, len: usize) -> c_int {
    guard(|| {
        let addr = SOCKETS.with(handle, |s| Ok(s.local_addr()))?;
        // SAFETY: the caller's promise on `buf` and `len`.
        unsafe { ffi::write_text(buf, len, &addr.to_string(), "buf") }?;
        Ok(SMT_OK)
    })
}

// ---- keys ----

/// Installs session keys for `peer` directly (what the paper does with
/// `setsockopt`): `keys` is the client-to-server key and IV followed by the
/// server-to-client key and IV, 56 bytes for AES-128-GCM (16 + 12 + 16 +
/// 12) or 88 for AES-256-GCM; `role` is `SMT_ROLE_CLIENT` on the side that
/// calls and `SMT_ROLE_SERVER` on the side that answers. Both sides must
/// install the same bytes, and never reuse them for another session (each
/// key and message ID pair must be used once): prefer `smt_set_psk` or TLS.
/// The bytes are copied.
///
/// Errors: `SMT_ERR_ADDRESS`, `SMT_ERR_INVALID` (length, role),
/// `SMT_ERR_CONFIG` (both directions the same key), `SMT_ERR_HANDLE`.
///
/// # Safety
/// `peer` is NULL or a NUL-terminated string; `keys` is NULL or points to
/// `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn smt_install_keys(
    handle: Handle,
    peer: *const c_char,
    role: c_int,
    keys: *const u8,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's promise on `peer`.
        let peer = unsafe { ffi::addr(peer, "peer") }?;
        let role = match role {
            SMT_ROLE_CLIENT => Role::Client,
            SMT_ROLE_SERVER => Role::Server,
            r => {
                return Err(Failure::new(
                    SMT_ERR_INVALID,
                    format!("role {r} is neither SMT_ROLE_CLIENT nor SMT_ROLE_SERVER"),
                ))
            }
        };
        // SAFETY: the caller's promise on `keys` and `len`.
        let keys = unsafe {
            ffi::bytes(keys.cast(), len, 88, "keys", |n| {
                Failure::new(
                    SMT_ERR_INVALID,
                    format!("keys are {n} bytes; give 56 or 88"),
                )
            })
        }?;
        SOCKETS.with(handle, |s| s.install_keys(peer, role, keys))?;
        Ok(SMT_OK)
    })
}

/// Sets a pre-shared master key (at least `SMT_MIN_PSK_LEN` random bytes,
/// the same on both sides): calls to peers without a session first run
/// SMT's PSK nonce exchange (one round trip; fresh keys per session), and
/// this endpoint answers that exchange from clients holding the same key.
/// The bytes are copied.
///
/// Errors: `SMT_ERR_INVALID` (too short, NULL), `SMT_ERR_HANDLE`.
///
/// # Safety
/// `key` is NULL or points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn smt_set_psk(handle: Handle, key: *const u8, len: usize) -> c_int {
    guard(|| {
        // SAFETY: the caller's promise on `key` and `len`.
        let key = unsafe {
            ffi::bytes(key.cast(), len, 1 << 16, "key", |n| {
                Failure::new(SMT_ERR_INVALID, format!("a {n}-byte key is too long"))
            })
        }?;
        SOCKETS.with(handle, |s| s.set_psk(key))?;
        Ok(SMT_OK)
    })
}

/// Answers TLS 1.3 handshakes with the certificate chain in `cert_path`
/// (PEM, leaf first) and its private key in `key_path` (PEM). With
/// `client_ca_path` (PEM; NULL for none), every client must present a
/// certificate issued by that CA (mutual TLS). The files are read now.
///
/// Errors: `SMT_ERR_FILE` (unreadable), `SMT_ERR_CONFIG` (not a
/// certificate or key, or they do not match), `SMT_ERR_HANDLE`,
/// `SMT_ERR_INVALID`.
///
/// # Safety
/// Each path is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn smt_set_tls_server(
    handle: Handle,
    cert_path: *const c_char,
    key_path: *const c_char,
    client_ca_path: *const c_char,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's promise on each path.
        let (cert, key, ca) = unsafe {
            (
                ffi::path(cert_path, "cert_path")?,
                ffi::path(key_path, "key_path")?,
                ffi::optional_text(client_ca_path, "client_ca_path")?,
            )
        };
        SOCKETS.with(handle, |s| {
            s.set_tls_server(cert, key, ca.map(std::path::Path::new))
        })?;
        Ok(SMT_OK)
    })
}

/// Makes calls to peers without a session run a TLS 1.3 handshake first,
/// trusting only the CA certificates in `ca_path` (PEM). The server's
/// certificate must name the address called, or the name given by
/// `smt_set_server_name` / `smt_resolve`. `cert_path` and `key_path` (PEM;
/// both NULL for none) are this client's certificate and key for servers
/// that require one. The files are read now.
///
/// Errors: `SMT_ERR_FILE`, `SMT_ERR_CONFIG`, `SMT_ERR_HANDLE`,
/// `SMT_ERR_INVALID` (one of `cert_path`/`key_path` without the other).
///
/// # Safety
/// Each path is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn smt_set_tls_client(
    handle: Handle,
    ca_path: *const c_char,
    cert_path: *const c_char,
    key_path: *const c_char,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's promise on each path.
        let (ca, cert, key) = unsafe {
            (
                ffi::path(ca_path, "ca_path")?,
                ffi::optional_text(cert_path, "cert_path")?,
                ffi::optional_text(key_path, "key_path")?,
            )
        };
        let auth = match (cert, key) {
            (Some(c), Some(k)) => Some((std::path::Path::new(c), std::path::Path::new(k))),
            (None, None) => None,
            _ => {
                return Err(Failure::new(
                    SMT_ERR_INVALID,
                    "give both cert_path and key_path for a client certificate, or neither",
                ))
            }
        };
        SOCKETS.with(handle, |s| s.set_tls_client(ca, auth))?;
        Ok(SMT_OK)
    })
}

/// TLS handshakes with `peer` (`IP:PORT`) check the server's certificate
/// against `name` (a DNS name) instead of the IP address.
///
/// Errors: `SMT_ERR_ADDRESS`, `SMT_ERR_INVALID` (not a DNS name),
/// `SMT_ERR_HANDLE`.
///
/// # Safety
/// `peer` and `name` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn smt_set_server_name(
    handle: Handle,
    peer: *const c_char,
    name: *const c_char,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's promise on `peer` and `name`.
        let (peer, name) = unsafe { (ffi::addr(peer, "peer")?, ffi::text(name, "name")?) };
        SOCKETS.with(handle, |s| s.set_server_name(peer, name))?;
        Ok(SMT_OK)
    })
}

/// Looks up `host_port` (`HOST:PORT` or `IP:PORT`) with the system's
/// resolver, **blocking** until it answers, writes the address (`IP:PORT`,
/// of the endpoint's address family) into `addr` of `len` bytes, and
/// remembers HOST as the name to check the server's certificate against.
///
/// Errors: `SMT_ERR_ADDRESS` (not `HOST:PORT`), `SMT_ERR_IO` (no such
/// host), `SMT_ERR_BUFFER`, `SMT_ERR_HANDLE`, `SMT_ERR_INVALID`.
///
/// # Safety
/// `host_port` is NULL or a NUL-terminated string; `addr` is NULL or valid
/// for writing `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn smt_resolve(
    handle: Handle,
    host_port: *const c_char,
    addr: *mut c_char,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's promise on `host_port`.
        let host_port = unsafe { ffi::text(host_port, "host_port") }?;
        let found = SOCKETS.with(handle, |s| s.resolve(host_port))?;
        // SAFETY: the caller's promise on `addr` and `len`.
        unsafe { ffi::write_text(addr, len, &found.to_string(), "addr") }?;
        Ok(SMT_OK)
    })
}

/// The next session with `peer` starts with 0-RTT: the first request
/// travels with the hello, under a key from the server's SMT-ticket in
/// `ticket_path` (base64, from `smt ticket issue` or DNS), which is checked
/// now against the CA in `ca_path` (PEM) and the server name `name`.
/// `forward_secrecy` non-zero: switch to a forward-secret key after one
/// round trip. Tickets live at most an hour.
///
/// Errors: `SMT_ERR_FILE`, `SMT_ERR_CONFIG` (not a ticket, refused: wrong
/// CA or name, expired), `SMT_ERR_ADDRESS`, `SMT_ERR_HANDLE`,
/// `SMT_ERR_INVALID`.
///
/// # Safety
/// Each string is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn smt_set_zero_rtt_ticket(
    handle: Handle,
    peer: *const c_char,
    ticket_path: *const c_char,
    ca_path: *const c_char,
    name: *const c_char,
    forward_secrecy: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's promise on each string.
        let (peer, ticket, ca, name) = unsafe {
            (
                ffi::addr(peer, "peer")?,
                ffi::path(ticket_path, "ticket_path")?,
                ffi::path(ca_path, "ca_path")?,
                ffi::text(name, "name")?,
            )
        };
        SOCKETS.with(handle, |s| {
            s.set_zero_rtt_ticket(peer, ticket, ca, name, forward_secrecy != 0)
        })?;
        Ok(SMT_OK)
    })
}

/// Answers 0-RTT hellos for the SMT-ticket in `ticket_path` with the
/// server's static key in `static_key_path` (64 hex digits), as `smt
/// ticket issue --out T` writes them (T and T-static.key). A server started
/// now refuses hellos stamped within the allowed clock skew (100 ms) of
/// its start.
///
/// Errors: `SMT_ERR_FILE`, `SMT_ERR_CONFIG` (not a key or ticket, or not
/// each other's), `SMT_ERR_HANDLE`, `SMT_ERR_INVALID`.
///
/// # Safety
/// Each path is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn smt_set_zero_rtt_server(
    handle: Handle,
    static_key_path: *const c_char,
    ticket_path: *const c_char,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's promise on each path.
        let (key, ticket) = unsafe {
            (
                ffi::path(static_key_path, "static_key_path")?,
                ffi::path(ticket_path, "ticket_path")?,
            )
        };
        SOCKETS.with(handle, |s| s.set_zero_rtt_server(key, ticket))?;
        Ok(SMT_OK)
    })
}

// ---- messages ----

/// Sends a request of `len` bytes to `peer` (`IP:PORT`) and stores the
/// call's id in `*id`. Never waits for the network: the request is sent
/// before this returns (or, to a peer without a session, as soon as the
/// handshake started now installs keys). The response, or the reason the
/// call failed, arrives from `smt_recv` with the same id. The data is
/// copied or sent before this returns.
///
/// Errors: `SMT_ERR_NO_KEYS` (no session and no PSK, TLS client or ticket
/// set), `SMT_ERR_TOO_LARGE` (over `SMT_MAX_MESSAGE_LEN`),
/// `SMT_ERR_TOO_MANY_CALLS` (`SMT_MAX_OUTSTANDING_CALLS` outstanding:
/// receive some first),
/// `SMT_ERR_ADDRESS`, `SMT_ERR_HANDLE`, `SMT_ERR_BUSY`, `SMT_ERR_INVALID`.
///
/// # Safety
/// `peer` is NULL or a NUL-terminated string; `data` is NULL or points to
/// `len` readable bytes; `id` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn smt_send(
    handle: Handle,
    peer: *const c_char,
    data: *const c_void,
    len: usize,
    id: *mut u64,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's promises on `peer`, `data` and `len`.
        let (peer, data) = unsafe { (ffi::addr(peer, "peer")?, message(data, len)?) };
        if id.is_null() {
            return Err(Failure::null("id"));
        }
        let call = SOCKETS.with(handle, |s| s.send(peer, data))?;
        // SAFETY: not NULL (checked above); writable (the caller's promise).
        unsafe { ffi::write(id, call, "id") }?;
        Ok(SMT_OK)
    })
}

/// Receives the next message into `*msg`: a request from a peer, the
/// response to one of our calls, or the failure of one of our calls. This
/// is where the endpoint does its work (receiving, timers,
/// retransmissions, handshakes): a program must keep calling it while it
/// has calls outstanding or serves requests. Blocks until a message is
/// ready unless `flags` has `SMT_RECV_NONBLOCKING`, which returns
/// `SMT_ERR_AGAIN` at once when none is.
///
/// Returns the message's kind (`SMT_MSG_REQUEST`, `SMT_MSG_RESPONSE` or
/// `SMT_MSG_FAILED`, also in `msg->kind`) or a negative error:
/// `SMT_ERR_AGAIN`, `SMT_ERR_HANDLE`, `SMT_ERR_BUSY`, `SMT_ERR_INVALID`,
/// `SMT_ERR_IO`. `*msg` is overwritten (release the previous message
/// first, or it leaks) and then owns the data until `smt_msg_release`.
///
/// # Safety
/// `msg` is NULL or valid for writing one `struct smt_msg`.
#[no_mangle]
pub unsafe extern "C" fn smt_recv(handle: Handle, flags: c_int, msg: *mut Msg) -> c_int {
    guard(|| {
        if flags & !SMT_RECV_NONBLOCKING != 0 {
            return Err(Failure::new(
                SMT_ERR_INVALID,
                format!("unknown flags {flags:#x} (only SMT_RECV_NONBLOCKING)"),
            ));
        }
        if msg.is_null() {
            return Err(Failure::null("msg"));
        }
        let blocking = flags & SMT_RECV_NONBLOCKING == 0;
        let delivery = SOCKETS.with(handle, |s| s.recv(blocking))?;
        let filled = Msg::new(delivery);
        let kind = filled.kind;
        // SAFETY: not NULL (checked above); writable (the caller's promise).
        unsafe { ffi::write(msg, filled, "msg") }?;
        Ok(kind)
    })
}

/// Frees the data of a message `smt_recv` filled and empties `*msg`.
/// Releasing an emptied message again, or NULL, does nothing. Any thread
/// may release any message, also after its handle was closed.
///
/// # Safety
/// `msg` is NULL or points to a `struct smt_msg` that `smt_recv` filled
/// (or one already released), whose `internal` field is unchanged; it was
/// not released through another copy of the struct.
#[no_mangle]
pub unsafe extern "C" fn smt_msg_release(msg: *mut Msg) {
    let _ = guard(|| {
        // SAFETY: NULL or a valid message (the caller's promise).
        if let Some(msg) = unsafe { msg.as_mut() } {
            msg.release();
        }
        Ok(SMT_OK)
    });
}

/// Answers the request `id` (from a `SMT_MSG_REQUEST` message) with `len`
/// bytes. The response is sent before this returns; the data is copied or
/// sent by then. Each request is answered once.
///
/// Errors: `SMT_ERR_UNKNOWN_ID` (no unanswered request has this id),
/// `SMT_ERR_TOO_LARGE` (the request stays unanswered: reply with less, or
/// `smt_abort` it), `SMT_ERR_HANDLE`, `SMT_ERR_BUSY`, `SMT_ERR_INVALID`.
/// Any other error (the client's session gone, its keys used up) ends the
/// request: its client's call fails with `SMT_ERR_ABANDONED`.
///
/// # Safety
/// `data` is NULL or points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn smt_reply(
    handle: Handle,
    id: u64,
    data: *const c_void,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's promise on `data` and `len`.
        let data = unsafe { message(data, len) }?;
        SOCKETS.with(handle, |s| s.reply(id, data))?;
        Ok(SMT_OK)
    })
}

/// Calls sent from now on from this handle fail (a `SMT_MSG_FAILED`
/// message with `SMT_ERR_TIMEOUT`) when their response is not complete
/// `timeout_ms` milliseconds after `smt_send`, handshake included; their
/// RPC is then aborted at both ends, and the server may have run the
/// request. 0 (the default): no deadline of their own (a call still fails
/// when its peer goes silent). Calls already sent keep their deadline.
///
/// Errors: `SMT_ERR_HANDLE`, `SMT_ERR_BUSY`.
#[no_mangle]
pub extern "C" fn smt_set_call_timeout(handle: Handle, timeout_ms: u32) -> c_int {
    guard(|| {
        let timeout = (timeout_ms > 0).then(|| Duration::from_millis(timeout_ms.into()));
        SOCKETS.with(handle, |s| {
            s.set_call_timeout(timeout);
            Ok(())
        })?;
        Ok(SMT_OK)
    })
}

/// Gives up on call `id` (no message will report it; its server is told
/// to stop working on it) or drops request `id` unanswered (its client's
/// call fails at once with `SMT_ERR_ABANDONED`; the request is never
/// executed twice).
///
/// Errors: `SMT_ERR_UNKNOWN_ID`, `SMT_ERR_HANDLE`, `SMT_ERR_BUSY`.
#[no_mangle]
pub extern "C" fn smt_abort(handle: Handle, id: u64) -> c_int {
    guard(|| {
        SOCKETS.with(handle, |s| s.abort(id))?;
        Ok(SMT_OK)
    })
}

// ---- an event loop of the program's own ----

/// The endpoint's descriptor (its UDP socket), for the program's own
/// `epoll`/`poll`: wait until it is readable, or until `smt_timeout_ms`
/// has passed, then call `smt_recv` with `SMT_RECV_NONBLOCKING` until it
/// returns `SMT_ERR_AGAIN`; then ask `smt_timeout_ms` again. While
/// `smt_wants_writable` says so, wait for writability too. The descriptor
/// stays the library's: do not read, write or close it. Level-triggered
/// and edge-triggered epoll both work, given that loop.
///
/// Returns the descriptor (>= 0) or `SMT_ERR_HANDLE` / `SMT_ERR_BUSY`.
#[no_mangle]
pub extern "C" fn smt_fd(handle: Handle) -> c_int {
    guard(|| SOCKETS.with(handle, |s| Ok(s.fd())))
}

/// Milliseconds until `smt_recv` must be called even if the descriptor
/// stays quiet (the protocol's timers: retransmissions, acknowledgements,
/// timeouts), rounded up; 0: call it now; -1: no timer, wait for the
/// descriptor alone. Ask again after each round of `smt_recv`. On a handle
/// that is not open (or busy) it returns 0, so that the loop calls
/// `smt_recv` and gets the error from it.
#[no_mangle]
pub extern "C" fn smt_timeout_ms(handle: Handle) -> c_int {
    match guard(|| SOCKETS.with(handle, |s| Ok(s.timeout_ms()))) {
        // An error code (all are below -1).
        t if t < -1 => 0,
        t => t,
    }
}

/// 1 while datagrams wait for room in the socket (wait for `EPOLLOUT` too,
/// then call `smt_recv` non-blocking), 0 otherwise; or `SMT_ERR_HANDLE` /
/// `SMT_ERR_BUSY`.
#[no_mangle]
pub extern "C" fn smt_wants_writable(handle: Handle) -> c_int {
    guard(|| SOCKETS.with(handle, |s| Ok(c_int::from(s.wants_writable()))))
}

// ---- errors ----

/// A short, static description of `code` (never NULL; do not free).
#[no_mangle]
pub extern "C" fn smt_strerror(code: c_int) -> *const c_char {
    error::text(code).as_ptr()
}

/// Who is at fault for `code`: `SMT_BLAME_NONE` (success,
/// `SMT_ERR_AGAIN`), `SMT_BLAME_CALLER`, `SMT_BLAME_PEER`,
/// `SMT_BLAME_NETWORK`, `SMT_BLAME_ENVIRONMENT` or `SMT_BLAME_LIBRARY`.
#[no_mangle]
pub extern "C" fn smt_error_blame(code: c_int) -> c_int {
    error::blame(code)
}

/// What the last failed call on this thread said, in full (which argument,
/// what to change); "" if none failed yet. Successful calls leave it
/// unchanged, like `errno`. Never NULL; valid until the next failing call
/// on this thread; do not free.
#[no_mangle]
pub extern "C" fn smt_last_error() -> *const c_char {
    error::last_error()
}

/// libsmt's version, e.g. "0.1.0" (static; do not free).
#[no_mangle]
pub extern "C" fn smt_version() -> *const c_char {
    VERSION.as_ptr()
}

const VERSION: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => c"unknown",
    };

/// A message argument, its length checked against `SMT_MAX_MESSAGE_LEN`
/// before its memory is looked at.
///
/// # Safety
/// As [`ffi::bytes`].
unsafe fn message<'a>(data: *const c_void, len: usize) -> Result<&'a [u8], Failure> {
    // SAFETY: the caller's promise, passed on.
    unsafe {
        ffi::bytes(data, len, SMT_MAX_MESSAGE_LEN, "data", |n| {
            Failure::new(
                SMT_ERR_TOO_LARGE,
                format!(
                    "the message is {n} bytes, more than SMT_MAX_MESSAGE_LEN ({SMT_MAX_MESSAGE_LEN}): \
                     split it into several calls"
                ),
            )
        })
    }
}
