//! How the tick judges an RPC's silence (`endpoint/tick.rs` asks each RPC,
//! `ClientRpc::on_tick` and `ServerRpc::on_tick`): each RPC counts the
//! ticks its peer stayed silent; at `resend_ticks` it asks for what is
//! missing, then again after intervals that double up to [`MAX_BACKOFF`] ×
//! `resend_ticks` (a slow or busy peer is not flooded with requests it will
//! answer anyway, each of which would make it retransmit); at `abort_ticks`
//! it gives up.

use super::Incoming;

/// RESEND packets one message sends per tick.
pub(crate) const RESENDS_PER_TICK: usize = 8;

/// The longest interval between two requests of one silent RPC or
/// handshake, in `resend_ticks`.
pub(crate) const MAX_BACKOFF: u32 = 8;

/// What one tick judges silence by: the tick count and the configuration's
/// limits, and whether more messages want grants than we give.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Silence {
    /// Ticks so far.
    pub ticks: u64,
    pub resend_ticks: u32,
    pub abort_ticks: u32,
    /// The short budget of a request nothing of which authenticated.
    pub handshake_abort_ticks: u32,
    pub max_resend_bytes: u32,
    /// More messages want grants than `Config::overcommit` lets us give.
    pub crowded: bool,
}

/// Whether something silent for `silent` ticks asks again now: first after
/// `first` ticks, then after `resend` ticks, `2 × resend`, `4 × resend`,
/// ... up to `MAX_BACKOFF × resend` between requests.
pub(crate) fn is_resend_tick(silent: u32, first: u32, resend: u32) -> bool {
    let (mut at, mut gap) = (first, resend.max(1));
    while at < silent {
        at = at.saturating_add(gap);
        gap = (gap * 2).min(resend * MAX_BACKOFF);
    }
    at == silent
}

/// What a client's RESEND asks for of a response: its gaps, or, while
/// nothing of it has arrived, only the packet holding its first byte. That
/// one is a probe: the response may be queued behind others at the server
/// or on the path, and asking for all of it would have the server send it
/// twice; a server with nothing old enough to resend answers BUSY, and once
/// the first packet is in, the receiver knows the length and asks for gaps.
pub(crate) fn missing(response: Option<&Incoming>, max_len: u32) -> Vec<(u32, u32)> {
    match response {
        None => vec![(0, 1)],
        Some(inc) => inc.gaps(RESENDS_PER_TICK, max_len),
    }
}

/// Whether an incoming message waits only for a grant we give to others:
/// everything granted has arrived, more is to come, and more messages want
/// grants than `overcommit` lets us give.
pub(crate) fn starved(inc: &Incoming, crowded: bool) -> bool {
    crowded && inc.granted() < inc.wire_len() && inc.received() >= u64::from(inc.granted())
}

#[cfg(test)]
mod tests {
    use super::{is_resend_tick, MAX_BACKOFF};

    #[test]
    fn requests_back_off_from_the_first_to_the_longest_interval() {
        let at: Vec<u32> = (0..=400).filter(|&t| is_resend_tick(t, 5, 5)).collect();
        assert_eq!(
            at,
            [5, 10, 20, 40, 80, 120, 160, 200, 240, 280, 320, 360, 400]
        );
        let later: Vec<u32> = (0..=60).filter(|&t| is_resend_tick(t, 20, 5)).collect();
        assert_eq!(later, [20, 25, 35, 55]);
        let gaps: Vec<u32> = at.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|&g| g <= 5 * MAX_BACKOFF));
    }
}
