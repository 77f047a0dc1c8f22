//! A server RPC (a request the peer started): Receiving → InService →
//! Responding, and its decision table for control packets. The endpoint
//! finds it (`endpoint/recv.rs`) and carries out what it decides
//! ([`ServerControl`]).

use super::silence::{is_resend_tick, starved, Silence, RESENDS_PER_TICK};
use super::{Incoming, Outgoing};
use crate::wire::Body;

// Every server RPC lives in its slab slot, which is as large as the largest
// variant either way; boxing the response would allocate once per RPC.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum ServerState {
    Receiving(Incoming),
    InService,
    Responding(Outgoing),
}

#[derive(Debug)]
pub(crate) struct ServerRpc {
    pub state: ServerState,
    pub silent_ticks: u32,
}

/// What the endpoint does after a server RPC took a control packet.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ServerControl {
    /// Nothing more.
    Nothing,
    /// The response has bytes to send.
    Sendable,
    /// Say BUSY: what was asked for is on its way, or not sent yet.
    Busy,
    /// The client is gone (RPC_UNKNOWN): free the RPC, and if the
    /// application holds the request, tell it (`cancelled`).
    ClientGone { cancelled: bool },
    /// Not a packet a server hears in this state.
    Unsupported,
}

/// What a tick decided for a server RPC.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ServerTick {
    /// Nothing to do (not silent, or not a tick to ask on).
    Idle,
    /// Ask for these (offset, length) ranges of the request.
    Resend(Vec<(u32, u32)>),
    /// The whole response went out and no ACK came: ask for one.
    NeedAck,
    /// Silent too long: free the RPC.
    Expired,
}

impl ServerRpc {
    /// A request whose first packet arrived: Receiving.
    #[inline]
    pub(crate) fn new(request: Incoming) -> Self {
        Self {
            state: ServerState::Receiving(request),
            silent_ticks: 0,
        }
    }

    /// Whether the application holds the request (and has not answered).
    #[inline]
    pub(crate) fn is_in_service(&self) -> bool {
        matches!(self.state, ServerState::InService)
    }

    /// The application answers a request in service (the caller checked:
    /// `is_in_service`): Responding, and silence starts over.
    #[inline]
    pub(crate) fn respond(&mut self, response: Outgoing) {
        self.state = ServerState::Responding(response);
        self.silent_ticks = 0;
    }

    /// The response being sent, once the application answered.
    #[inline]
    pub(crate) fn responding_mut(&mut self) -> Option<&mut Outgoing> {
        match &mut self.state {
            ServerState::Responding(out) => Some(out),
            _ => None,
        }
    }

    /// One tick of the RPC's silence (decision table, see `silence.rs`):
    /// silence while we are the ones to act is not counted.
    pub(crate) fn on_tick(&mut self, s: &Silence) -> ServerTick {
        if self.waits_on_us(s.crowded) {
            self.silent_ticks = 0;
            return ServerTick::Idle;
        }
        self.silent_ticks += 1;
        let silent = self.silent_ticks;
        if silent >= self.abort_ticks(s) {
            if let ServerState::Receiving(inc) = &self.state {
                log_silent_request(inc);
            }
            return ServerTick::Expired;
        }
        if !is_resend_tick(silent, s.resend_ticks, s.resend_ticks) {
            return ServerTick::Idle;
        }
        match &self.state {
            ServerState::Receiving(inc) => {
                ServerTick::Resend(inc.gaps(RESENDS_PER_TICK, s.max_resend_bytes))
            }
            ServerState::Responding(out) if out.fully_sent() => ServerTick::NeedAck,
            _ => ServerTick::Idle,
        }
    }

    /// Whether the RPC waits on us, not on the client.
    fn waits_on_us(&self, crowded: bool) -> bool {
        match &self.state {
            // The application owns the RPC until it answers.
            ServerState::InService => true,
            ServerState::Responding(out) => out.has_sendable(),
            // We withhold the grant it needs (the client's RESENDs, which
            // we answer with BUSY, keep both sides from giving up).
            ServerState::Receiving(inc) => starved(inc, crowded),
        }
    }

    /// The silence after which the RPC is freed. A request nothing of
    /// which has authenticated may be anyone's (its lengths are
    /// plaintext): it gets a handshake's short budget, so unauthenticated
    /// state does not linger.
    fn abort_ticks(&self, s: &Silence) -> u32 {
        match &self.state {
            ServerState::Receiving(inc) if inc.nothing_authenticated() => s.handshake_abort_ticks,
            _ => s.abort_ticks,
        }
    }

    /// The message being received, if the request is not complete yet.
    #[inline]
    pub(crate) fn receiving_mut(&mut self) -> Option<&mut Incoming> {
        match &mut self.state {
            ServerState::Receiving(inc) => Some(inc),
            _ => None,
        }
    }

    /// The message being received, if the request is not complete yet.
    #[inline]
    pub(crate) fn receiving(&self) -> Option<&Incoming> {
        match &self.state {
            ServerState::Receiving(inc) => Some(inc),
            _ => None,
        }
    }

    /// The request is complete: `take` takes what it needs of the message
    /// received, in place (moving an `Incoming` out is a copy of a few
    /// hundred bytes per request), and Receiving becomes InService. Any
    /// other state stays untouched (`None`).
    #[inline]
    pub(crate) fn start_service<R>(&mut self, take: impl FnOnce(&mut Incoming) -> R) -> Option<R> {
        let ServerState::Receiving(inc) = &mut self.state else {
            return None;
        };
        let taken = take(inc);
        self.state = ServerState::InService;
        Some(taken)
    }

    /// Takes a control packet about this RPC: the decision table by
    /// packet and state. Any of these is a sign of life. `ticks` and
    /// `resend_ticks` pace retransmission.
    pub(crate) fn on_control(
        &mut self,
        body: Body,
        ticks: u64,
        resend_ticks: u64,
    ) -> ServerControl {
        self.silent_ticks = 0;
        match (body, &mut self.state) {
            (Body::Grant { offset, .. }, ServerState::Responding(out)) => {
                out.grant(offset);
                ServerControl::Sendable
            }
            (Body::Resend { offset, length, .. }, ServerState::Responding(out)) => {
                match out.resend(offset, length, ticks, resend_ticks) {
                    true => ServerControl::Sendable,
                    // Still on its way (or not sent yet): say we are
                    // alive rather than send it twice.
                    false => ServerControl::Busy,
                }
            }
            (Body::Resend { .. }, _) => ServerControl::Busy,
            (Body::RpcUnknown, ServerState::InService) => {
                // The application holds the request: it hears the client
                // is gone, so it can stop working on it.
                ServerControl::ClientGone { cancelled: true }
            }
            (Body::RpcUnknown, _) => ServerControl::ClientGone { cancelled: false },
            (Body::Busy | Body::Grant { .. }, _) => ServerControl::Nothing,
            _ => ServerControl::Unsupported,
        }
    }
}

#[cold]
fn log_silent_request(inc: &Incoming) {
    tracing::debug!(
        received = inc.received(),
        granted = inc.granted(),
        len = inc.wire_len(),
        "server RPC silent while receiving"
    );
}
