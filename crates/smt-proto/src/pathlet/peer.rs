//! One peer's pathlet feedback inside the endpoint (`Config::pathlet_feedback`):
//! the sender's windows for the messages it sends that peer, and the
//! receiver's counts of what the PATH packets of that peer's datagrams
//! said. The endpoint decides which PATH to believe and when to send; this
//! keeps the state and the arithmetic.

use std::time::{Duration, Instant};

use super::{EchoCounter, PathletParams, PathletWindows, Windows};
use crate::wire::{PathEchoRepr, PathRepr};

/// Slots a sender reserves in each PATH (one per device expected on the
/// path; a device that finds none free sets OVERFLOW).
pub const PATH_SLOTS: u8 = 2;

/// Bytes a sender keeps free at the front of every datagram for its PATH:
/// the header, the most exclusions, and the slots. DATA packets are that
/// much shorter with pathlet feedback on (`Config::mss`).
pub const PATH_RESERVE: usize = crate::wire::PATH_HEADER_LEN
    + crate::wire::PATH_EXCLUDE_LEN * crate::wire::MAX_PATH_EXCLUDES
    + crate::wire::PATH_SLOT_LEN * PATH_SLOTS as usize;

/// The receiver echoes once it has counted this many bytes on one
/// `(pathlet, class)` since its last echo (about a window), and otherwise at
/// the next tick.
pub const ECHO_AFTER_BYTES: u32 = 64 * 1024;

/// With no echo for this long, the windows forget what their messages
/// have in flight, and again after each such period: bytes the receiver
/// did not count (duplicates, datagrams without an accepted packet) or
/// whose echo was lost would otherwise hold a window full for good.
const SILENT_FOR: Duration = Duration::from_millis(50);

/// A peer's pathlet state, both directions.
#[derive(Debug)]
pub(crate) struct PeerFeedback {
    windows: PathletWindows,
    /// Every echo entry counted as pathlet 0 (`Config::pathlet_single_window`).
    single: bool,
    echoes: EchoCounter,
    /// The last fresh echo, or the last time the flights were forgotten
    /// for silence.
    last_echo: Option<Instant>,
    /// The datagram being written: its last DATA packet's message, the
    /// DATA bytes in it, and whether any of them were sent for the first
    /// time (the rest, PATH and control packets, is charged to that
    /// message too: the receiver counts whole datagrams).
    datagram: Option<(u64, u64, bool)>,
}

impl PeerFeedback {
    pub(crate) fn new(single: bool) -> Self {
        Self {
            windows: PathletWindows::new(PathletParams::default()),
            single,
            echoes: EchoCounter::new(),
            last_echo: None,
            datagram: None,
        }
    }

    /// Message `id` is about to send its first packet: it starts on the
    /// pathlet the peer's messages were last seen on (`PathletWindows::adopt`).
    pub(crate) fn adopt(&mut self, id: u64) {
        self.windows.adopt(id);
    }

    /// Bytes message `id` may send now: its pathlet's window less what is
    /// in flight there, or no limit before an echo has placed it (or the
    /// peer's messages, [`PeerFeedback::adopt`]).
    pub(crate) fn allowance(&self, id: u64) -> u64 {
        match self.windows.pathlet_of(id) {
            Some(_) => self.windows.allowance(id),
            None => u64::MAX,
        }
    }

    /// A DATA packet of message `id`, `bytes` long, went into the datagram
    /// being written. A retransmission (the receiver asked for those bytes
    /// again) counts as a loss and is not put in flight: the receiver
    /// counts it only if the original was lost, and a copy of bytes it
    /// had (a RESEND that crossed a slow original) is a duplicate it does
    /// not count (`docs/protocol.md` § 4), which would keep those bytes in
    /// flight for good. Erring this way only lets the window send a little
    /// more after a loss, never less.
    pub(crate) fn on_data_sent(&mut self, id: u64, bytes: u64, retransmit: bool) {
        let (data, fresh) = self.datagram.map_or((0, false), |(_, d, f)| (d, f));
        if retransmit {
            self.windows.on_lost(id, bytes);
        } else {
            self.windows.on_sent(id, bytes);
        }
        self.datagram = Some((id, data + bytes, fresh || !retransmit));
    }

    /// The datagram is complete, `len` bytes with its PATH: what is not
    /// DATA is charged to its last message (unless it carried only
    /// retransmissions, which are not in flight).
    pub(crate) fn charge_datagram(&mut self, len: u64) {
        if let Some((id, data, true)) = self.datagram.take() {
            self.windows.on_sent(id, len.saturating_sub(data));
        }
    }

    /// An authenticated PATH_ECHO; `false` for a copy or an older one.
    pub(crate) fn on_echo(&mut self, now: Instant, echo: &PathEchoRepr) -> bool {
        let fresh = if self.single {
            self.windows.on_echo(now, &as_one_pathlet(echo))
        } else {
            self.windows.on_echo(now, echo)
        };
        if fresh {
            self.last_echo = Some(now);
        }
        fresh
    }

    /// The PATH to put in front of a datagram with DATA: empty slots and
    /// the pathlets this sender asks devices to keep new messages off.
    pub(crate) fn path(&self, now: Instant, src_port: u16, dst_port: u16) -> PathRepr {
        let mut path = PathRepr::new(src_port, dst_port, PATH_SLOTS);
        path.exclude = self.windows.excluded(now);
        path
    }

    /// A believed PATH of a datagram of `len` bytes whose last accepted
    /// DATA packet was message `last_id`. Whether an echo is due at once.
    pub(crate) fn record(&mut self, path: &PathRepr, len: usize, last_id: Option<u64>) -> bool {
        self.echoes.record(path, len, last_id);
        self.echoes.most_bytes() >= ECHO_AFTER_BYTES
    }

    /// The next echo to send, if anything was counted.
    pub(crate) fn take_echo(&mut self, ports: (u16, u16), phase: bool) -> Option<PathEchoRepr> {
        self.echoes.take_echo(ports.0, ports.1, phase)
    }

    /// Housekeeping at a tick: forgets messages that are gone (`alive`
    /// says which are not) and, after a long silence, every placement.
    pub(crate) fn tick(&mut self, now: Instant, mut alive: impl FnMut(u64) -> bool) {
        let gone: Vec<u64> = self.windows.messages().filter(|id| !alive(*id)).collect();
        for id in gone {
            self.windows.on_finished(id);
        }
        if self.last_echo.is_some_and(|t| now >= t + SILENT_FOR) {
            // Like TCP's retransmission timeout: what was in flight is
            // forgotten (its echoes may never come: bytes the receiver did
            // not count, echoes lost), and again after each silent period.
            let all: Vec<u64> = self.windows.messages().collect();
            for id in all {
                self.windows.on_finished(id);
            }
            self.last_echo = Some(now);
        }
    }
}

/// `echo` with every entry's pathlet 0: one window per class.
fn as_one_pathlet(echo: &PathEchoRepr) -> PathEchoRepr {
    let mut one = *echo;
    one.entries = crate::wire::Bounded::new();
    for e in echo.entries.as_slice() {
        let mut e = *e;
        e.at.pathlet = 0;
        one.entries.push(e);
    }
    one
}
