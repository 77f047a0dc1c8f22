//! Who gets a place in the handshake table (issue #22 item 3): one host
//! must not hold it. Once the table is half full, a source IP address and
//! its /24 (IPv6: /64) hold a bounded share; once it is full, a new
//! opening displaces the oldest handshake a peer opened with us, if that
//! one has had longer than a genuine handshake needs. A handshake held
//! open by a trickle of bytes thus loses its place to the next stranger,
//! and a genuine one, which finishes in a round trip or two, keeps it.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use super::HandshakeConn;
use crate::config::Config;

/// A source's network: its /24 (IPv4) or /64 (IPv6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Prefix(u128);

impl Prefix {
    fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(a) => Self(u128::from(u32::from(a) >> 8)),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => Self::of(IpAddr::V4(v4)),
                None => Self((1 << 64) | (u128::from(a) >> 64)),
            },
        }
    }
}

/// What the table holds that matters for one newcomer.
#[derive(Default)]
struct Census {
    same_ip: usize,
    same_prefix: usize,
    /// The handshake a peer opened that started first: (its start tick,
    /// whether it has installed its keys, its address); finished ones
    /// (kept only to answer late copies) come before those in progress.
    oldest: Option<(bool, u64, SocketAddr)>,
}

/// Whether a new opening from a peer gets a place in the table.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Admission {
    Admit,
    /// The source IP address or its prefix holds its share already.
    OverQuota,
    /// The table is full: this handshake (old enough not to be a genuine
    /// one still under way, or finished) gives its place up.
    Displace(SocketAddr),
    /// The table is full of handshakes too young to displace.
    Full,
}

/// Decides whether the table `handshakes` has a place for a handshake
/// `from` opens at tick `ticks`. Bounded work: one pass over the table (at
/// most `max_handshakes` entries), and only once it is half full.
pub(super) fn admission(
    handshakes: &BTreeMap<SocketAddr, HandshakeConn>,
    cfg: &Config,
    ticks: u64,
    from: SocketAddr,
) -> Admission {
    if handshakes.len() < cfg.max_handshakes / 2 {
        return Admission::Admit;
    }
    let census = census(handshakes, from.ip());
    if census.same_ip >= cfg.max_handshakes_per_ip
        || census.same_prefix >= cfg.max_handshakes_per_prefix
    {
        return Admission::OverQuota;
    }
    if handshakes.len() < cfg.max_handshakes {
        return Admission::Admit;
    }
    // Old enough not to be a genuine handshake still under way.
    let min_age = 2 * u64::from(cfg.resend_ticks);
    match census.oldest {
        Some((keys, started, victim)) if keys || ticks - started >= min_age => {
            Admission::Displace(victim)
        }
        _ => Admission::Full,
    }
}

/// Counts the handshakes peers opened from `ip` and its prefix, and finds
/// the one to displace first.
fn census(handshakes: &BTreeMap<SocketAddr, HandshakeConn>, ip: IpAddr) -> Census {
    let prefix = Prefix::of(ip);
    let mut census = Census::default();
    for (addr, conn) in handshakes {
        if conn.initiator {
            continue; // ours: never displaced, not a peer's share
        }
        if !conn.keys_installed() {
            census.same_ip += usize::from(addr.ip() == ip);
            census.same_prefix += usize::from(Prefix::of(addr.ip()) == prefix);
        }
        // Finished first (`true` sorts first reversed), then oldest.
        let rank = (!conn.keys_installed(), conn.started, *addr);
        if census.oldest.is_none_or(|(k, t, a)| rank < (!k, t, a)) {
            census.oldest = Some((conn.keys_installed(), conn.started, *addr));
        }
    }
    census
}

#[cfg(test)]
mod tests {
    use super::Prefix;

    #[test]
    fn prefixes_are_slash_24_and_slash_64() {
        let p = |s: &str| Prefix::of(s.parse().unwrap());
        assert_eq!(p("10.1.2.3"), p("10.1.2.200"));
        assert_ne!(p("10.1.2.3"), p("10.1.3.3"));
        assert_eq!(p("2001:db8::1"), p("2001:db8::ffff:1"));
        assert_ne!(p("2001:db8::1"), p("2001:db8:0:1::1"));
        assert_eq!(p("::ffff:10.1.2.3"), p("10.1.2.9"));
        assert_ne!(p("10.0.0.0"), p("::a00:0"));
    }
}
