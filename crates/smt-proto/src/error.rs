//! Errors, sorted by who is at fault (rustls's habit).
//!
//! * [`DropReason`]: the peer (or an attacker) sent something we drop. Never
//!   fatal, never surfaced as an `Err`; counted in [`crate::Stats`].
//! * [`SendError`]: the local caller misused the API; the message says how
//!   to fix it.
//! * [`RpcError`]: an RPC could not complete (peer gone, network failed);
//!   delivered as an [`crate::Event::Failed`].

use std::fmt;

/// Why an arriving datagram (or part of it) was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DropReason {
    /// Not a well-formed SMT packet.
    Malformed,
    /// A packet type this implementation does not know.
    UnknownType,
    /// Addressed to another SMT port.
    WrongPort,
    /// No session keys for the sender.
    UnknownSession,
    /// A control packet's MAC did not verify (forged or corrupted).
    BadControlTag,
    /// A record failed AEAD authentication (forged, corrupted, wrong key or
    /// spliced from another message).
    AuthFailure,
    /// The message ID was already delivered or is older than the replay
    /// window: dropped before any decryption.
    Replay,
    /// A packet we already have.
    Duplicate,
    /// About an RPC this endpoint has no state for.
    UnknownRpc,
    /// Would exceed a configured limit (message size, partial messages).
    OverLimit,
    /// Authenticated, but inconsistent with the protocol (e.g. lengths that
    /// disagree between packets of one message).
    ProtocolViolation,
    /// A packet type this build cannot handle yet (handshake records).
    Unsupported,
    /// Protected with a key epoch this side does not hold (long gone, or a
    /// forged key update).
    KeyPhase,
    /// A handshake packet this side cannot use (no handshake configured,
    /// or outside the handshake's stream).
    Handshake,
    /// A handshake opening whose retry token is forged, expired or for
    /// another address or kind.
    BadToken,
    /// From an address that has proved nothing yet, past the receive
    /// batch's budget for such datagrams (`Config::unvalidated_per_batch`):
    /// dropped unread so a flood cannot crowd out validated peers.
    OverBudget,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [Self; 16] = [
        Self::Malformed,
        Self::UnknownType,
        Self::WrongPort,
        Self::UnknownSession,
        Self::BadControlTag,
        Self::AuthFailure,
        Self::Replay,
        Self::Duplicate,
        Self::UnknownRpc,
        Self::OverLimit,
        Self::ProtocolViolation,
        Self::Unsupported,
        Self::KeyPhase,
        Self::Handshake,
        Self::BadToken,
        Self::OverBudget,
    ];

    /// Whether a packet dropped for this reason takes the rest of its
    /// datagram with it (coalesced datagrams, `docs/protocol.md` § 2.1):
    /// a packet that is malformed, forged or corrupted has a length nobody
    /// vouches for, so what follows it is no packet either (and one damaged
    /// datagram counts one drop). A packet that is merely stale (a
    /// duplicate, a replay, an RPC already gone, a limit reached) was
    /// well-formed: the packets after it are handled.
    pub fn ends_datagram(self) -> bool {
        !matches!(
            self,
            Self::Replay
                | Self::Duplicate
                | Self::UnknownRpc
                | Self::OverLimit
                | Self::Unsupported
                | Self::KeyPhase
        )
    }

    /// A short stable name for counters and logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::UnknownType => "unknown_type",
            Self::WrongPort => "wrong_port",
            Self::UnknownSession => "unknown_session",
            Self::BadControlTag => "bad_control_tag",
            Self::AuthFailure => "auth_failure",
            Self::Replay => "replay",
            Self::Duplicate => "duplicate",
            Self::UnknownRpc => "unknown_rpc",
            Self::OverLimit => "over_limit",
            Self::ProtocolViolation => "protocol_violation",
            Self::Unsupported => "unsupported",
            Self::KeyPhase => "key_phase",
            Self::Handshake => "handshake",
            Self::BadToken => "bad_token",
            Self::OverBudget => "over_budget",
        }
    }

    pub(crate) fn index(self) -> usize {
        Self::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

/// The local caller asked for something that cannot be done.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// No session keys are installed for this peer.
    NoSession,
    /// The message is larger than the configuration allows.
    MessageTooLarge {
        /// The message's length in bytes.
        len: u64,
        /// The largest allowed (`Config::max_message_len`).
        max: u64,
    },
    /// Every message ID of this session's key has been used; the session
    /// must be rekeyed (a new handshake) before it can send again.
    IdSpaceExhausted,
    /// The key has protected as many records as its AEAD allows.
    KeyExhausted,
    /// The server RPC is unknown: already answered, or freed because the
    /// client went away.
    UnknownRpc,
    /// The server RPC has already been answered.
    AlreadyResponded,
    /// Session keys whose two directions are the same key.
    ReflectableKeys,
    /// The session is moving to new keys and waits for RPCs under the old
    /// ones to finish; retry when one completes.
    RekeyPending,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSession => f.write_str(
                "no session keys for this peer: install them with Endpoint::install_session \
                 (or a key resolver) before sending",
            ),
            Self::MessageTooLarge { len, max } => write!(
                f,
                "message of {len} bytes exceeds the limit of {max} bytes (raise \
                 Config::max_message_len, or give the record index more bits)"
            ),
            Self::IdSpaceExhausted => f.write_str(
                "this session has used every message ID its key allows: rekey the session \
                 (install new keys) to continue",
            ),
            Self::KeyExhausted => f.write_str(
                "the session key reached its AEAD usage limit: install new keys to continue",
            ),
            Self::UnknownRpc => f.write_str(
                "no such server RPC: it was already answered, or freed after its client went away",
            ),
            Self::AlreadyResponded => f.write_str("this RPC has already been answered"),
            Self::RekeyPending => f.write_str(
                "the session is switching keys and waits for in-flight RPCs: retry after one completes",
            ),
            Self::ReflectableKeys => f.write_str(
                "the send and receive keys are identical, which lets an attacker reflect a \
                 peer's packets back to it: use distinct keys per direction",
            ),
        }
    }
}

impl std::error::Error for SendError {}

/// Why an RPC failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RpcError {
    /// The peer stayed silent for `Config::abort_ticks` ticks.
    Timeout,
    /// The server kept answering RPC_UNKNOWN after `Config::max_restarts`
    /// restarts.
    PeerLostRequest,
    /// The application aborted it.
    Aborted,
    /// The session's keys were removed while the RPC was in flight.
    SessionClosed,
    /// Restarting needed a fresh message ID, but the session had none left.
    IdSpaceExhausted,
    /// The peer sent an authenticated response that breaks the protocol
    /// (e.g. more data than its length field announced).
    PeerMisbehaved,
    /// The network reported the peer unreachable (an ICMP port or host
    /// unreachable for a datagram to it) before anything authenticated
    /// came from it: nothing speaks SMT there.
    Unreachable,
    /// The server refused the request without executing it: too many
    /// requests were waiting for its application
    /// (`Config::max_pending_requests`). Retrying later is safe.
    Overloaded,
    /// The server received the request but will not answer it: its
    /// application dropped the request, or its response could not be sent
    /// (too large, for example), or the server had already given up on the
    /// RPC (its state timed out). The request may have been executed, so
    /// retry only what is safe to run twice.
    Abandoned,
}

impl RpcError {
    /// A short stable name for traces and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::PeerLostRequest => "peer_lost_request",
            Self::Aborted => "aborted",
            Self::SessionClosed => "session_closed",
            Self::IdSpaceExhausted => "id_space_exhausted",
            Self::PeerMisbehaved => "peer_misbehaved",
            Self::Unreachable => "unreachable",
            Self::Overloaded => "overloaded",
            Self::Abandoned => "abandoned",
        }
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Timeout => "RPC timed out: the peer stopped answering",
            Self::PeerLostRequest => "the server repeatedly lost the request",
            Self::Aborted => "RPC aborted by the application",
            Self::SessionClosed => "the session was closed",
            Self::IdSpaceExhausted => "no message IDs left to restart the request; rekey",
            Self::PeerMisbehaved => "the peer sent a response that violates the protocol",
            Self::Unreachable => {
                "the peer is unreachable (ICMP): nothing answers SMT at that address and port"
            }
            Self::Overloaded => {
                "the server is overloaded and refused the request unexecuted; retry later"
            }
            Self::Abandoned => {
                "the server received the request but will not answer it (its application dropped \
                 it or could not send the response, or the server gave up on the RPC); it may \
                 have run: retry only if that is safe"
            }
        })
    }
}

impl std::error::Error for RpcError {}
