//! Endpoint configuration. Defaults follow Homa's where Homa has one
//! (the SMT paper builds on Homa/Linux): 1 ms ticks, RESEND after 5 silent ticks,
//! ~40 KB unscheduled, 8 messages granted at once. An RPC is aborted after
//! 1000 silent ticks, not Homa's 100 (handshakes keep 100): a user-space endpoint shares its CPU with the
//! application and other processes, and a peer descheduled or busy (copying
//! a 64 MiB message, under a loaded machine) for a few hundred
//! milliseconds is slow, not dead.

use std::time::Duration;

use crate::crypto::TAG_LEN;
use crate::record::{SeqLayout, MAX_RECORD_PLAINTEXT};
use crate::wire::{ACK_MAX_IDS, COMMON_HEADER_LEN, DATA_HEADER_LEN};

/// The smallest `max_datagram_size` the protocol works with: its largest
/// control packet, a full ACK batch (common header, count, 16 IDs) with its
/// MAC, must fit in one datagram. (A DATA packet needs 45 bytes; handshake
/// bytes are cut to fit.)
pub const MIN_DATAGRAM_SIZE: usize = COMMON_HEADER_LEN + 4 + 8 * ACK_MAX_IDS + TAG_LEN;

/// Length concealment (the SMT paper §6.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Padding {
    /// Send messages at their true length.
    #[default]
    None,
    /// Pad every message up to a multiple of this many bytes. The plaintext
    /// message-length field then carries the padded length.
    Multiple(u32),
}

impl Padding {
    /// The padded length of a `len`-byte message.
    pub fn padded_len(self, len: u64) -> u64 {
        match self {
            Self::None | Self::Multiple(0) => len,
            Self::Multiple(m) => len.div_ceil(u64::from(m)).max(1) * u64::from(m),
        }
    }
}

/// Everything tunable about an [`crate::Endpoint`].
#[derive(Clone, Debug)]
pub struct Config {
    /// Split of the record sequence number (default 48-bit IDs / 16-bit
    /// record index). Both ends must agree.
    pub seq_layout: SeqLayout,
    /// Largest datagram the endpoint emits (the UDP payload or raw-IP
    /// payload). 1472 fits a 1500-byte Ethernet MTU over IPv4/UDP.
    pub max_datagram_size: usize,
    /// Plaintext bytes per record, at most 16384.
    pub record_size: usize,
    /// Largest application message accepted, in bytes before padding.
    pub max_message_len: u64,
    /// Wire bytes a sender may send of a message before its first GRANT
    /// (Homa's "unscheduled bytes"); a receiver counts on the same figure
    /// (both ends must agree). Default 72 000: the bandwidth-delay product
    /// of a user-space stack (tens of microseconds of wake-ups at 10-20
    /// Gbit/s), and enough for a 64 KiB message to go out whole without
    /// waiting for a grant. At 40 000 a loopback 64 KiB RPC took twice as
    /// long (grant round trips).
    pub unscheduled_bytes: u32,
    /// Receiver: how far past what has arrived each GRANT lets the sender
    /// run (default 72 000, as `unscheduled_bytes`, for the same reason).
    pub grant_window: u32,
    /// Receiver: the largest byte range one RESEND asks for (at most
    /// `RESENDS_PER_TICK` ranges per message per tick). Default 72 000.
    pub max_resend_bytes: u32,
    /// Incoming messages granted at once (Homa's overcommit).
    pub overcommit: usize,
    /// Period of the housekeeping tick.
    pub tick: Duration,
    /// Silent ticks before an RPC asks for missing data (RESEND/NEED_ACK).
    pub resend_ticks: u32,
    /// Silent ticks after which an RPC is aborted (client: timeout error;
    /// server: state freed). Default 1000.
    pub abort_ticks: u32,
    /// Silent ticks after which a handshake fails, and after which a
    /// finished responder's handshake is forgotten with its session if
    /// nothing authenticated has come from the peer's address. Default 100:
    /// a handshake is a few small packets, and state for spoofed hellos
    /// must not linger.
    pub handshake_abort_ticks: u32,
    /// Times a client restarts a request the server says it does not know.
    pub max_restarts: u32,
    /// Server: complete requests the application may hold unanswered
    /// (delivered, no response or abandon yet). A request completing
    /// beyond it is refused unexecuted: its ID is retired and the client
    /// hears OVERLOADED (`RpcError::Overloaded`), so an overloaded server
    /// sheds load instead of letting its queue grow. Default 4096.
    pub max_pending_requests: usize,
    /// Client: the requests a server is assumed to let us have
    /// outstanding before its first CREDIT says how many
    /// ([`crate::Endpoint::credit`]). Default 128: a burst to a fresh
    /// server starts at once, and a server that allows more says so
    /// within a round trip.
    pub initial_credit: u32,
    /// Authenticate control packets with a MAC. Off reproduces the SMT paper's
    /// forgeable plaintext control packets, for comparison only.
    pub authenticate_control: bool,
    /// Pathlet feedback (`docs/protocol.md` § 4, PATH and PATH_ECHO; seed
    /// 004's pathlet congestion control): datagrams with DATA start with a
    /// PATH whose slots devices on the path fill; the receiver echoes what
    /// they said (PATH_ECHO) and the sender keeps a DCTCP window per
    /// `(pathlet, class)` for each message an echo has placed on one. Both
    /// ends must agree (a peer older than these packet types drops a
    /// datagram that starts with a PATH). Needs `authenticate_control`
    /// (an echo must be authenticated: anyone could throttle a sender) and
    /// not `tx_offload` (a NIC cuts segments a PATH cannot precede). Each
    /// DATA packet carries [`crate::pathlet::PATH_RESERVE`] fewer payload
    /// bytes. Default off.
    pub pathlet_feedback: bool,
    /// With `pathlet_feedback`: one DCTCP window for everything, whatever
    /// pathlet an echo names (every entry counted as one pathlet), as a
    /// DCTCP sender whose path the network changes under it: the baseline
    /// per-pathlet windows are measured against. Default off.
    pub pathlet_single_window: bool,
    /// Length concealment policy.
    pub padding: Padding,
    /// Message IDs above the replay floor that the replay guard tracks
    /// individually; older ones are rejected wholesale.
    pub replay_window: u64,
    /// Partially received requests allowed per peer; the first packet of
    /// one more is dropped (`DropReason::OverLimit`) and the request
    /// refused: its client hears OVERLOADED (`endpoint/recv/rpc.rs`).
    pub max_incoming_per_peer: usize,
    /// Partially received requests allowed across all peers.
    pub max_incoming_total: usize,
    /// Bytes one peer's partially received messages (requests from it and
    /// responses from it) may hold: reassembly buffers, the data opened so
    /// far and bookkeeping. Checked before every allocation; packets that
    /// would exceed it are dropped (`DropReason::OverLimit`) and asked for
    /// again later. Must be at least one maximal message to let it through.
    pub max_buffered_per_peer: usize,
    /// The same bound across all peers.
    pub max_buffered_total: usize,
    /// Wire bytes of one incoming message that may arrive past the part
    /// already authenticated (opened in order): grants stop there until
    /// the gap is filled. Bounds what a peer without the keys can make one
    /// message hold, whatever length it claims; raised to at least
    /// `unscheduled_bytes` plus one 64 KiB segment. Large enough to ride
    /// out a retransmission timeout at full speed.
    pub max_unopened_bytes: u32,
    /// Sessions the key resolver may create for addresses it has not seen
    /// (each costs a session and a replay window, before the peer has
    /// proved anything). Beyond it, packets from new addresses are dropped
    /// (`DropReason::OverLimit`). Installed and handshake sessions do not
    /// count against it.
    pub max_resolved_sessions: usize,
    /// Sessions made by a handshake are forgotten after this long without
    /// an authenticated packet from the peer and with no RPC in flight
    /// (a vanished client's keys would otherwise stay forever); the peer
    /// re-handshakes if it comes back. `None` keeps them. Sessions from
    /// `install_session` or the key resolver are never evicted: the
    /// resolver would derive the same keys again with a fresh replay
    /// guard, letting old packets be replayed.
    pub session_idle_timeout: Option<Duration>,
    /// Handshakes in progress at once. A HANDSHAKE packet that would open
    /// one more displaces the oldest handshake a peer opened with us if
    /// that one is older than `resend_ticks` × 2 (a genuine handshake
    /// finishes in a round trip or two; one held open by a trickle of bytes
    /// does not), and is dropped (`DropReason::OverLimit`) otherwise.
    pub max_handshakes: usize,
    /// Once the handshake table is half full: handshakes peers may hold
    /// open at once from one IP address (`max_handshakes_per_ip`) and from
    /// one /24 (IPv4) or /64 (IPv6) prefix (`max_handshakes_per_prefix`).
    /// An opening past either is dropped (`DropReason::OverLimit`), so one
    /// host cannot hold the table; below half full nothing is refused for
    /// its source.
    pub max_handshakes_per_ip: usize,
    /// Handshakes held open at once from one prefix (see above).
    pub max_handshakes_per_prefix: usize,
    /// Ticks a handshake may take in all, however often its peer sends
    /// (the silence timeout, `handshake_abort_ticks`, alone would let a
    /// peer that trickles a byte now and then hold its place forever);
    /// past it the handshake fails with `HandshakeError::Timeout`.
    pub handshake_deadline_ticks: u32,
    /// Sessions held at once, of every origin. A handshake or the key
    /// resolver making one more first evicts the least proven: a session
    /// whose peer never used its keys (oldest first), else the handshake
    /// session heard from least recently with no RPC in flight; if there is
    /// none, the new session is refused. Installed sessions (the
    /// application's) count but are never evicted; resolved ones neither
    /// (see `session_idle_timeout`).
    pub max_sessions: usize,
    /// Sessions a responder's handshake made whose address nothing
    /// authenticated has validated yet (a PSK hello, which anyone can send
    /// from any source, makes one at once). Past it the oldest such
    /// session is forgotten; and one that stays unvalidated is forgotten
    /// with its handshake, `handshake_abort_ticks` after the handshake's
    /// last packet.
    /// A genuine client validates within a round trip (its first
    /// authenticated packet), so a flood of spoofed hellos holds at most
    /// this many sessions and cannot push genuine ones out.
    pub max_unvalidated_sessions: usize,
    /// With a retry key set (`Endpoint::set_retry_key`): once this many
    /// handshakes are in progress (or just finished), a handshake opening
    /// without a valid token is answered with a stateless RETRY instead of
    /// being processed, so spoofed openings cost one MAC and no state, and
    /// a genuine client pays one round trip more. 0 retries every opening.
    pub retry_above_handshakes: usize,
    /// Of one receive batch (`Endpoint::handle_batch`), datagrams from
    /// addresses nothing vouches for yet (no validated session or
    /// installed keys, no handshake opened by us or with a retry token)
    /// are handled after the others, at most this many, each sender's
    /// first datagram before the rest of its run; the others are dropped
    /// unread (`DropReason::OverBudget`) and their senders retransmit.
    /// Default 64: above a `recvmmsg` batch's 32 slots, so every sender's
    /// first datagram is handled, and above the ~50 packets of a first
    /// unscheduled window (a new PSK client's first 64 KiB request is one
    /// GRO train whose first record authenticates only after a dozen
    /// packets); what is cut is the rest of longer trains.
    pub unvalidated_per_batch: usize,
    /// Put several packets to the same peer into one datagram, each
    /// unchanged (`docs/protocol.md` § 2.1): small messages, their ACKs and
    /// grants then share system calls and datagrams. Off sends one packet
    /// per datagram, as the SMT paper does. Receivers always accept both.
    pub coalesce: bool,
    /// Transmit offload: records leave with plaintext bodies and empty
    /// tags for a NIC to seal (the SMT paper §4.3, NVIDIA's kTLS offload paper), and each DATA
    /// packet travels alone in its datagram (the NIC's segment), with
    /// [`crate::Endpoint::take_tx_records`] saying where its records are
    /// and which key and sequence numbers seal them (`docs/offload.md`).
    /// Nothing changes on the wire once the NIC has sealed them. Off (the
    /// default): records are sealed in software.
    pub tx_offload: bool,
    /// The local port written into the SMT header's source-port field.
    pub local_port: u16,
    /// Check the SMT header's ports: the destination port must be
    /// `local_port` (if non-zero) and the source port zero or the
    /// datagram's source port. Needed in raw-IP mode, where these ports
    /// demultiplex; over UDP they only repeat the UDP ports, and a NAT or
    /// relay that rewrites UDP ports would make checking them drop
    /// everything.
    pub verify_ports: bool,
}

impl Config {
    /// The defaults (see each field), usable in `const` contexts; the same
    /// as [`Config::default`].
    pub const DEFAULT: Config = Config {
        seq_layout: SeqLayout::DEFAULT,
        max_datagram_size: 1472,
        record_size: MAX_RECORD_PLAINTEXT,
        max_message_len: 64 << 20,
        unscheduled_bytes: 72_000,
        grant_window: 72_000,
        max_resend_bytes: 72_000,
        overcommit: 8,
        tick: Duration::from_millis(1),
        resend_ticks: 5,
        abort_ticks: 1000,
        handshake_abort_ticks: 100,
        max_restarts: 6,
        max_pending_requests: 4096,
        initial_credit: 128,
        authenticate_control: true,
        pathlet_feedback: false,
        pathlet_single_window: false,
        padding: Padding::None,
        replay_window: 4096,
        max_incoming_per_peer: 1024,
        max_incoming_total: 16 * 1024,
        max_buffered_per_peer: 128 << 20,
        max_buffered_total: 512 << 20,
        max_unopened_bytes: 16 << 20,
        max_resolved_sessions: 64 * 1024,
        max_handshakes: 4096,
        max_handshakes_per_ip: 64,
        max_handshakes_per_prefix: 512,
        handshake_deadline_ticks: 2000,
        max_sessions: 16 * 1024,
        max_unvalidated_sessions: 1024,
        retry_above_handshakes: 64,
        unvalidated_per_batch: 64,
        session_idle_timeout: Some(Duration::from_secs(600)),
        coalesce: true,
        tx_offload: false,
        local_port: 0,
        verify_ports: true,
    };
}

impl Default for Config {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A configuration value that cannot work, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid SMT configuration: {}", self.0)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Payload bytes per DATA packet.
    pub fn mss(&self) -> usize {
        let path = if self.pathlet_feedback {
            crate::pathlet::PATH_RESERVE
        } else {
            0
        };
        self.max_datagram_size - DATA_HEADER_LEN - path
    }

    /// The largest message this configuration can carry: bounded by the
    /// record-index bits (so an index never spills into the message-ID
    /// bits), by the 32-bit wire-length field, and by `max_message_len`.
    pub fn message_len_limit(&self) -> u64 {
        let by_index = self
            .seq_layout
            .max_records()
            .saturating_mul(self.record_size as u64);
        let limit = self.max_message_len.min(by_index);
        // Asked for every message sent and received: the wire bound's
        // division is skipped where it cannot bind (below its least value).
        if limit <= WIRE_BOUND_FLOOR {
            return limit;
        }
        limit.min(wire_bound(self.record_size))
    }

    /// Checks that the values can work together: the datagram size first
    /// (its message names the numbers), then each rule of `RULES` in order;
    /// the first broken one is the error.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(MIN_DATAGRAM_SIZE..=65535).contains(&self.max_datagram_size) {
            return Err(ConfigError(format!(
                "max_datagram_size is {} bytes; it must be between {MIN_DATAGRAM_SIZE} (the largest \
                 control packet, a full ACK batch with its MAC) and 65535 bytes; over UDP/IPv4 \
                 that is an MTU of at least {}",
                self.max_datagram_size,
                MIN_DATAGRAM_SIZE + 28
            )));
        }
        match RULES.iter().find(|(holds, _)| !holds(self)) {
            Some((_, message)) => Err(ConfigError((*message).to_string())),
            None => Ok(()),
        }
    }
}

/// The largest message whose records' wire bytes fit the 32-bit wire-length
/// field, with records of `record_size` bytes (each 22 bytes more on the
/// wire).
fn wire_bound(record_size: usize) -> u64 {
    u64::from(u32::MAX) / (record_size as u64 + 22) * record_size as u64
}

/// A floor of `wire_bound` over every record size (1 B to 16 KiB): at
/// least `u32::MAX × rs / (rs + 22) − rs`, above 2^32 / 23 − 2^14; checked
/// for every size by a test.
const WIRE_BOUND_FLOOR: u64 = 186_000_000;

/// A rule a valid configuration keeps, and what to tell its user if not.
type Rule = (fn(&Config) -> bool, &'static str);

/// The rules `Config::validate` checks after the datagram size, in order;
/// each message says what to change.
const RULES: &[Rule] = &[
    (
        |c| !c.pathlet_feedback || (c.authenticate_control && !c.tx_offload),
        "pathlet_feedback needs authenticate_control (echoes must be authenticated) \
         and cannot be used with tx_offload (a NIC cuts segments a PATH cannot precede)",
    ),
    (
        |c| (1..=MAX_RECORD_PLAINTEXT).contains(&c.record_size),
        "record_size must be between 1 and 16384 bytes (RFC 8446 §5.1)",
    ),
    (
        |c| {
            c.overcommit > 0
                && c.unscheduled_bytes > 0
                && c.grant_window > 0
                && c.max_resend_bytes > 0
                && c.unvalidated_per_batch > 0
                && c.max_pending_requests > 0
                && c.initial_credit > 0
        },
        "overcommit, unscheduled_bytes, grant_window, max_resend_bytes, \
         unvalidated_per_batch, max_pending_requests and initial_credit must be at least 1",
    ),
    (
        |c| {
            !c.tick.is_zero()
                && c.resend_ticks > 0
                && c.abort_ticks > c.resend_ticks
                && c.handshake_abort_ticks > c.resend_ticks
        },
        "tick must be non-zero and abort_ticks, handshake_abort_ticks > resend_ticks > 0",
    ),
    (
        |c| c.handshake_deadline_ticks >= c.handshake_abort_ticks,
        "handshake_deadline_ticks (the whole handshake) must be at least \
         handshake_abort_ticks (its silence timeout)",
    ),
    (
        |c| c.max_handshakes_per_ip > 0 && c.max_handshakes_per_prefix > 0 && c.max_sessions > 0,
        "max_handshakes_per_ip, max_handshakes_per_prefix and max_sessions must be at \
         least 1",
    ),
    (
        |c| c.replay_window > 0 && c.max_incoming_per_peer > 0 && c.max_unvalidated_sessions > 0,
        "replay_window, max_incoming_per_peer and max_unvalidated_sessions must be at least 1",
    ),
    (
        |c| {
            c.max_incoming_total >= c.max_incoming_per_peer
                && c.max_buffered_total >= c.max_buffered_per_peer
        },
        "a total limit (max_incoming_total, max_buffered_total) is below its per-peer limit",
    ),
    (
        |c| c.max_buffered_per_peer as u64 >= c.message_len_limit(),
        "max_buffered_per_peer must hold the largest message (max_message_len)",
    ),
    (
        |c| {
            c.session_idle_timeout
                .is_none_or(|t| t >= c.tick * c.abort_ticks)
        },
        "session_idle_timeout must be at least abort_ticks ticks",
    ),
    (
        |c| c.padding != Padding::Multiple(0),
        "Padding::Multiple needs a non-zero multiple",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// `message_len_limit` may skip the wire bound below its floor only if
    /// no record size brings it lower.
    #[test]
    fn the_wire_bound_floor_is_below_every_record_size() {
        for rs in 1..=MAX_RECORD_PLAINTEXT {
            assert!(wire_bound(rs) > WIRE_BOUND_FLOOR, "record size {rs}");
        }
    }

    /// Above the floor the wire bound still binds.
    #[test]
    fn the_wire_bound_binds_above_the_floor() {
        let cfg = Config {
            record_size: 1,
            max_message_len: u64::MAX,
            ..Config::default()
        };
        assert!(cfg.message_len_limit() <= wire_bound(1));
    }
}
