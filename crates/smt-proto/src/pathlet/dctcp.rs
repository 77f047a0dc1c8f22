//! DCTCP's sender (RFC 8257 §§ 3.3–3.4), on byte counts: one window and
//! its `alpha`, driven by how many bytes were acknowledged and how many of
//! them were marked. Used twice: once per `(pathlet, class)`
//! ([`super::PathletWindows`]) and once for everything (the single-window
//! baseline, [`super::SingleWindow`]).

/// DCTCP's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DctcpParams {
    /// The estimation gain `g` (RFC 8257 § 4.2 recommends 1/16).
    pub g: f64,
    /// Bytes added to the window per window of unmarked data (additive
    /// increase, RFC 5681 § 3.1's one SMSS per RTT, spread over the bytes
    /// acknowledged).
    pub mss: u64,
    /// The window a new one starts with.
    pub initial_window: u64,
    /// The window never goes below this (RFC 8257 § 3.4 lets it shrink to
    /// one segment; a window below one datagram would stall the sender).
    pub min_window: u64,
}

impl Default for DctcpParams {
    /// g = 1/16, 1500-byte segments, 10 segments to start (RFC 6928), one
    /// segment at least.
    fn default() -> Self {
        Self {
            g: 1.0 / 16.0,
            mss: 1500,
            initial_window: 15_000,
            min_window: 1500,
        }
    }
}

/// One DCTCP window. Byte counters stand in for TCP's sequence numbers:
/// `sent` is SND.NXT, `acked` SND.UNA (both counted from 0).
#[derive(Clone, Debug, PartialEq)]
pub struct Dctcp {
    params: DctcpParams,
    /// DCTCP.Alpha; RFC 8257 § 3.3 starts it at 1 (assume congestion
    /// until told otherwise).
    alpha: f64,
    cwnd: f64,
    sent: u64,
    acked: u64,
    /// DCTCP.BytesAcked and DCTCP.BytesMarked of the current observation
    /// window.
    window_acked: u64,
    window_marked: u64,
    /// DCTCP.WindowEnd: `alpha` is updated when `acked` passes it.
    window_end: u64,
    /// Observation windows ended so far (how much `alpha` has learnt).
    windows: u64,
    /// The window is cut at most once per window of data: not again until
    /// `acked` passes this (RFC 3168 § 6.1.2, which RFC 8257 § 3.4 keeps).
    cut_until: Option<u64>,
}

impl Dctcp {
    /// A window at `params.initial_window` (at least `min_window`), with
    /// `alpha` 1.
    pub fn new(params: DctcpParams) -> Self {
        Self {
            params,
            alpha: 1.0,
            cwnd: params.initial_window.max(params.min_window) as f64,
            sent: 0,
            acked: 0,
            window_acked: 0,
            window_marked: 0,
            window_end: 0,
            windows: 0,
            cut_until: None,
        }
    }

    /// The estimated fraction of marked bytes (DCTCP's `alpha`, 0 to 1).
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Observation windows that have ended: `alpha` starts at 1 and says
    /// little before a few.
    pub fn windows(&self) -> u64 {
        self.windows
    }

    /// The congestion window in bytes (unrounded).
    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    /// Bytes sent and not yet acknowledged.
    pub fn in_flight(&self) -> u64 {
        self.sent - self.acked
    }

    /// Bytes the window lets the sender send now.
    pub fn allowance(&self) -> u64 {
        (self.cwnd as u64).saturating_sub(self.in_flight())
    }

    /// The sender put `bytes` on the wire under this window.
    pub fn on_sent(&mut self, bytes: u64) {
        self.sent += bytes;
    }

    /// Feedback: `bytes` acknowledged, `marked` of them CE-marked
    /// (`marked <= bytes`; more is clamped). Acknowledgements beyond what
    /// was sent are clamped too (they can only be late or forged).
    ///
    /// RFC 8257 § 3.3, in its order: count the bytes; at the end of an
    /// observation window (`acked` past DCTCP.WindowEnd, strictly), `F =
    /// BytesMarked / BytesAcked`, `alpha = (1 - g) · alpha + g · F`, the
    /// next window ends at what is sent now, the counters restart. Then
    /// § 3.4: marked bytes cut the window to `cwnd · (1 - alpha / 2)`,
    /// at most once per window of data (with the `alpha` just updated);
    /// unmarked ones grow it by `mss · bytes / cwnd`.
    pub fn on_feedback(&mut self, bytes: u64, marked: u64) {
        let bytes = bytes.min(self.in_flight());
        let marked = marked.min(bytes);
        self.acked += bytes;
        self.window_acked += bytes;
        self.window_marked += marked;
        if self.acked > self.window_end && self.window_acked > 0 {
            let f = self.window_marked as f64 / self.window_acked as f64;
            self.alpha = (1.0 - self.params.g) * self.alpha + self.params.g * f;
            self.window_end = self.sent;
            self.window_acked = 0;
            self.window_marked = 0;
            self.windows += 1;
        }
        let min = self.params.min_window as f64;
        if marked > 0 {
            if self.cut_until.is_none_or(|end| self.acked > end) {
                self.cwnd = (self.cwnd * (1.0 - self.alpha / 2.0)).max(min);
                self.cut_until = Some(self.sent);
            }
        } else if bytes > 0 {
            self.cwnd += self.params.mss as f64 * bytes as f64 / self.cwnd;
        }
    }

    /// `bytes` sent under this window were lost (the receiver asked for
    /// them again): they leave the flight, and the window halves at most
    /// once per window of data, as conventional TCP does (RFC 8257 § 3.5:
    /// DCTCP reacts to loss like standard TCP).
    pub fn on_loss(&mut self, bytes: u64) {
        self.forget_in_flight(bytes);
        if self.cut_until.is_none_or(|end| self.acked > end) {
            self.cwnd = (self.cwnd / 2.0).max(self.params.min_window as f64);
            self.cut_until = Some(self.sent);
        }
    }

    /// Forgets what is in flight (the bytes were lost, or moved to another
    /// window): the window and `alpha` stay.
    pub fn forget_in_flight(&mut self, bytes: u64) {
        let bytes = bytes.min(self.in_flight());
        self.sent -= bytes;
        self.window_end = self.window_end.min(self.sent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> DctcpParams {
        DctcpParams {
            g: 1.0 / 16.0,
            mss: 1000,
            initial_window: 10_000,
            min_window: 1000,
        }
    }

    /// RFC 8257 § 3.3 by hand: alpha starts at 1; after a window with
    /// F = 1/4, alpha = 15/16 + 1/16 · 1/4 = 61/64; the window is cut to
    /// 10 000 · (1 − 61/128) = 5234.375. (Every value is a binary
    /// fraction, so the comparisons are exact.)
    #[test]
    fn one_marked_window_follows_the_rfc_equations() {
        let mut d = Dctcp::new(params());
        assert_eq!((d.alpha(), d.cwnd()), (1.0, 10_000.0));
        d.on_sent(10_000);
        assert_eq!(d.allowance(), 0);
        d.on_feedback(10_000, 2500);
        assert_eq!(d.alpha(), 61.0 / 64.0);
        assert_eq!(d.cwnd(), 10_000.0 * (1.0 - 61.0 / 128.0));
        assert_eq!(d.cwnd(), 5234.375);
    }

    /// Unmarked windows decay alpha by (1 − g) each: 1, 15/16, 225/256,
    /// 3375/4096; the window grows by mss · acked / cwnd.
    #[test]
    fn unmarked_windows_decay_alpha_and_grow_the_window() {
        let mut d = Dctcp::new(params());
        let mut want_alpha = 1.0;
        for _ in 0..3 {
            let w = d.cwnd();
            d.on_sent(4000);
            d.on_feedback(4000, 0);
            want_alpha *= 15.0 / 16.0;
            assert_eq!(d.alpha(), want_alpha);
            assert_eq!(d.cwnd(), w + 1000.0 * 4000.0 / w);
        }
        assert_eq!(d.alpha(), 3375.0 / 4096.0);
    }

    /// alpha is updated once per observation window (when SND.UNA passes
    /// DCTCP.WindowEnd, the SND.NXT of the previous update), not per
    /// echo: the marks of two echoes in one window count together.
    #[test]
    fn alpha_changes_once_per_window_of_data() {
        let mut d = Dctcp::new(params());
        d.on_sent(8000);
        d.on_feedback(4000, 0); // passes WindowEnd 0: alpha 15/16, WindowEnd 8000
        assert_eq!(d.alpha(), 15.0 / 16.0);
        d.on_feedback(4000, 4000); // acked 8000, not past 8000
        assert_eq!(d.alpha(), 15.0 / 16.0, "window not over yet");
        d.on_sent(4000);
        d.on_feedback(4000, 0); // acked 12 000 > 8000: the window ends
                                // F = 4000 / 8000 = 1/2: 15/16 · 15/16 + 1/16 · 1/2 = 233/256.
        assert_eq!(d.alpha(), 233.0 / 256.0);
    }

    /// The window is cut once per window of data however many echoes
    /// carry marks, and never below the minimum.
    #[test]
    fn the_window_is_cut_once_per_window() {
        let mut d = Dctcp::new(params());
        d.on_sent(10_000);
        // WindowEnd starts at 0, so the first echo ends the first
        // observation window: F = 1, alpha stays 1, the window halves.
        d.on_feedback(5000, 5000);
        assert_eq!(d.alpha(), 1.0);
        assert_eq!(d.cwnd(), 5000.0);
        d.on_feedback(5000, 5000);
        assert_eq!(d.cwnd(), 5000.0, "second mark in the same window");
        for _ in 0..10 {
            d.on_sent(1000);
            d.on_feedback(1000, 1000);
        }
        assert_eq!(d.cwnd(), 1000.0);
    }

    #[test]
    fn a_loss_halves_the_window_once_per_window() {
        let mut d = Dctcp::new(params());
        d.on_sent(10_000);
        d.on_loss(1000);
        assert_eq!((d.cwnd(), d.in_flight()), (5000.0, 9000));
        d.on_loss(1000);
        assert_eq!(d.cwnd(), 5000.0, "same window of data");
    }

    #[test]
    fn feedback_beyond_what_was_sent_is_clamped() {
        let mut d = Dctcp::new(params());
        d.on_sent(100);
        d.on_feedback(1_000_000, 5_000_000);
        assert_eq!(d.in_flight(), 0);
        assert_eq!(d.alpha(), 1.0);
    }
}
