//! Stateless retry (`docs/protocol.md` § 4, HANDSHAKE): when many
//! handshakes are in progress, a responder answers a handshake opening
//! without a token with one RETRY packet carrying an address-validation
//! token, and keeps nothing. A client that really owns its address gets
//! the RETRY and opens again with the token; a spoofed source never sees
//! it. As QUIC's Retry (RFC 9000 § 8.1.2) and DTLS's HelloVerifyRequest.
//!
//! A token is `issued (4 bytes, ms since the endpoint's first token) ||
//! MAC (16 bytes)` over the client's address, `issued` and the handshake
//! kind, under a key only this endpoint holds (`Endpoint::set_retry_key`).
//! It is good for [`TOKEN_LIFETIME_MS`].

use crate::wire::HandshakeKind;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use crate::crypto::{PacketCipher, TAG_LEN};

/// Token bytes: issue time and MAC.
pub(crate) const TOKEN_LEN: usize = 4 + TAG_LEN;
/// How long a token opens a handshake: a round trip and a retransmission
/// or two, with room for a slow client.
pub(crate) const TOKEN_LIFETIME_MS: u32 = 10_000;
/// Domain separation for the MAC input.
const LABEL: &[u8; 9] = b"smt retry";

/// The responder's token key and clock origin.
pub(crate) struct Retry {
    mac: Arc<dyn PacketCipher>,
    origin: Option<Instant>,
    /// The handshakes that count toward `Config::retry_above_handshakes`
    /// (`Endpoint::busy_handshakes`), counted at tick `.0` and raised by
    /// every handshake opened since: one pass over the table per tick at
    /// most, however many openings arrive.
    busy: Option<(u64, usize)>,
}

impl Retry {
    pub(crate) fn new(mac: Arc<dyn PacketCipher>) -> Self {
        Self {
            mac,
            origin: None,
            busy: None,
        }
    }

    /// The count of busy handshakes, if it was made in tick `tick`.
    pub(crate) fn busy(&self, tick: u64) -> Option<usize> {
        self.busy.filter(|&(at, _)| at == tick).map(|(_, n)| n)
    }

    /// Records `n` busy handshakes counted in tick `tick`.
    pub(crate) fn set_busy(&mut self, tick: u64, n: usize) {
        self.busy = Some((tick, n));
    }

    /// A handshake was opened: one more busy until the next count.
    pub(crate) fn opened(&mut self) {
        if let Some((_, n)) = self.busy.as_mut() {
            *n += 1;
        }
    }

    /// Milliseconds since the first token (wrapping after 49 days; the
    /// lifetime check uses wrapping differences).
    fn millis(&mut self, now: Instant) -> u32 {
        let origin = *self.origin.get_or_insert(now);
        now.saturating_duration_since(origin).as_millis() as u32
    }

    /// A token for `peer` opening a handshake of `kind`.
    pub(crate) fn mint(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        kind: HandshakeKind,
    ) -> [u8; TOKEN_LEN] {
        let issued = self.millis(now);
        let tag = self.mac.control_tag(&mac_input(peer, issued, kind));
        let mut token = [0; TOKEN_LEN];
        token[..4].copy_from_slice(&issued.to_be_bytes());
        token[4..].copy_from_slice(&tag);
        token
    }

    /// Whether `token` was minted by this endpoint for `peer` and `kind`,
    /// less than [`TOKEN_LIFETIME_MS`] ago.
    pub(crate) fn verify(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        kind: HandshakeKind,
        token: &[u8],
    ) -> bool {
        let Ok(token) = <&[u8; TOKEN_LEN]>::try_from(token) else {
            return false;
        };
        let issued = u32::from_be_bytes([token[0], token[1], token[2], token[3]]);
        let Ok(tag) = <&[u8; TAG_LEN]>::try_from(&token[4..]) else {
            return false;
        };
        let age = self.millis(now).wrapping_sub(issued);
        age <= TOKEN_LIFETIME_MS
            && self
                .mac
                .verify_control_tag(&mac_input(peer, issued, kind), tag)
                .is_ok()
    }
}

/// `label || IPv6 (or IPv4-mapped) address || port || issued || kind`.
fn mac_input(peer: SocketAddr, issued: u32, kind: HandshakeKind) -> [u8; 32] {
    let ip = match peer.ip() {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    let mut input = [0; 32];
    input[..9].copy_from_slice(LABEL);
    input[9..25].copy_from_slice(&ip.octets());
    input[25..27].copy_from_slice(&peer.port().to_be_bytes());
    input[27..31].copy_from_slice(&issued.to_be_bytes());
    input[31] = kind.0;
    input
}

/// Splits a TOKEN opening's data into the token and the stream bytes.
pub(crate) fn split_token(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let (&len, rest) = data.split_first()?;
    let len = usize::from(len);
    (rest.len() >= len).then(|| rest.split_at(len))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::sim::KeyedCipher;

    fn retry() -> Retry {
        Retry::new(Arc::new(KeyedCipher::new(5)))
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // a test picks its origin
    fn a_token_opens_for_its_address_and_kind_until_it_expires() {
        let mut r = retry();
        let now = Instant::now();
        let a: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let b: SocketAddr = "10.0.0.1:4001".parse().unwrap();
        let t = r.mint(now, a, HandshakeKind::TLS13);
        assert!(r.verify(now, a, HandshakeKind::TLS13, &t));
        assert!(!r.verify(now, b, HandshakeKind::TLS13, &t), "another port");
        assert!(
            !r.verify(now, a, HandshakeKind::PSK_NONCE, &t),
            "another kind"
        );
        let later = now + Duration::from_millis(u64::from(TOKEN_LIFETIME_MS) + 1);
        assert!(!r.verify(later, a, HandshakeKind::TLS13, &t), "expired");
        let mut forged = t;
        forged[TOKEN_LEN - 1] ^= 1;
        assert!(!r.verify(now, a, HandshakeKind::TLS13, &forged));
        assert!(!r.verify(now, a, HandshakeKind::TLS13, &t[..TOKEN_LEN - 1]));
    }

    #[test]
    fn token_data_splits_at_its_length_byte() {
        assert_eq!(split_token(&[2, 7, 8, 9]), Some((&[7, 8][..], &[9][..])));
        assert_eq!(split_token(&[3, 7, 8]), None);
        assert_eq!(split_token(&[]), None);
    }
}
