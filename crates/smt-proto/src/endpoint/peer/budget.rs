//! The amplification budget of an address not yet validated: what we send
//! it in reaction to its packets is bounded by [`AMPLIFICATION`] times what
//! it sent us, as QUIC bounds a server before address validation (RFC 9000
//! § 8), so a spoofed source cannot use us as an amplifier. One type for
//! both things that answer a stranger: a peer's session (reactive control
//! packets) and a handshake (its flights and retransmissions).

/// Before an address is validated, reactive packets to it (RESEND, GRANT,
/// BUSY, RPC_UNKNOWN, NEED_ACK, handshake flights and retransmissions)
/// carry at most this many times the bytes received from it.
pub(crate) const AMPLIFICATION: u64 = 3;

/// Bytes received from an address and sent to it, and whether it is
/// validated (then there is no bound).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Budget {
    validated: bool,
    received: u64,
    sent: u64,
}

impl Budget {
    /// A budget for an address already proven (no bound), or not.
    pub(crate) fn new(validated: bool) -> Self {
        Self {
            validated,
            ..Self::default()
        }
    }

    /// Whether the address is validated: whoever sends from it receives
    /// there, so it is not a spoofed victim.
    #[inline]
    pub(crate) fn is_validated(&self) -> bool {
        self.validated
    }

    /// The address proved itself: no bound from now on.
    #[inline]
    pub(crate) fn validate(&mut self) {
        self.validated = true;
    }

    /// Counts `len` bytes received from the address (what it sends earns
    /// it room).
    #[inline]
    pub(crate) fn received(&mut self, len: usize) {
        self.received += len as u64;
    }

    /// Whether `len` more bytes may go to the address now (without
    /// counting them).
    pub(crate) fn allows(&self, len: usize) -> bool {
        self.validated || self.sent + len as u64 <= AMPLIFICATION * self.received
    }

    /// Counts `len` bytes sent to the address.
    pub(crate) fn spend(&mut self, len: usize) {
        self.sent += len as u64;
    }

    /// Whether a reactive packet of `len` bytes may go to the address, and
    /// if so counts it (nothing is counted once validated).
    pub(crate) fn try_spend(&mut self, len: usize) -> bool {
        if self.validated {
            return true;
        }
        if !self.allows(len) {
            return false;
        }
        self.spend(len);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::{Budget, AMPLIFICATION};

    #[test]
    fn an_unvalidated_address_gets_three_times_what_it_sent() {
        let mut b = Budget::new(false);
        assert!(!b.try_spend(1), "nothing received, nothing sent");
        b.received(100);
        assert!(b.try_spend(AMPLIFICATION as usize * 100));
        assert!(!b.try_spend(1));
        b.validate();
        assert!(b.try_spend(1_000_000));
    }
}
