//! How the forwarder chooses: a path for each message (or packet), a
//! replica for each message. `docs/innetwork.md` § 4 explains each rule.

use std::hash::{BuildHasher, Hash};
use std::net::SocketAddr;
use std::str::FromStr;

/// How packets are spread over the paths to a replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Balance {
    /// ECMP: a hash of the UDP 5-tuple picks the path, so every packet
    /// of a client goes one way whatever its message (the baseline of
    /// MTP's Fig. 6).
    Ecmp,
    /// Per-packet spraying: round robin over the paths, packet by packet
    /// (the other baseline; reorders packets within a message).
    Spray,
    /// Message-aware: every packet of a message takes the path chosen
    /// when its first packet arrived, the path where the message is
    /// expected to finish first given the bytes already queued and
    /// promised there and the message's own size.
    Message,
    /// Every packet on one path, the next one every `period_ms`
    /// milliseconds from the first packet: a switch moving a long
    /// transfer between paths (MTP's Fig. 5, experiment 4(a)).
    Alternate {
        /// Milliseconds on each path before moving to the next.
        period_ms: u64,
    },
}

impl FromStr for Balance {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ecmp" => Ok(Self::Ecmp),
            "spray" => Ok(Self::Spray),
            "message" => Ok(Self::Message),
            _ => match s.strip_prefix("alternate:").map(str::parse::<u64>) {
                Some(Ok(period_ms)) if period_ms > 0 => Ok(Self::Alternate { period_ms }),
                _ => Err(format!(
                    "balance is ecmp, spray, message or alternate:MS (MS > 0), not {s:?}"
                )),
            },
        }
    }
}

/// How a message's replica is chosen among servers sharing the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaPolicy {
    /// Per message, from the message ID alone: consecutive IDs of a
    /// session go to consecutive replicas (offset by a hash of the
    /// session). A function of what every packet of the message carries,
    /// so a replayed ID always reaches the replica that saw it, whatever
    /// the forwarder remembers (`docs/innetwork.md` § 5).
    Message,
    /// Per session, round robin over sessions in the order they appear
    /// (the baseline). Kept in a table: a forwarder that lost the table
    /// (a restart) could send a session's old IDs to another replica;
    /// see `docs/innetwork.md` § 5.
    Session,
}

impl FromStr for ReplicaPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "message" => Ok(Self::Message),
            "session" => Ok(Self::Session),
            _ => Err(format!("replica policy is message or session, not {s:?}")),
        }
    }
}

/// A fixed-key hasher: the same choice in every run and every process
/// (ECMP hashes are deterministic in switches too).
pub(crate) fn stable_hash<T: Hash>(value: &T) -> u64 {
    foldhash::fast::FixedState::with_seed(0x5eed_f0ad).hash_one(value)
}

/// The replica of message `id` of `session` under the message rule.
pub fn message_replica(session: SocketAddr, id: u64, replicas: usize) -> usize {
    let offset = stable_hash(&session);
    // IDs of one side step by 2 (the low bit names the side): id >> 1
    // counts the session's messages.
    (offset.wrapping_add(id >> 1) % replicas.max(1) as u64) as usize
}

/// The ECMP choice among `n` paths for a client's 5-tuple (UDP to the
/// forwarder's port).
pub fn ecmp_path(client: SocketAddr, port: u16, n: usize) -> usize {
    (stable_hash(&(client, port, 17u8)) % n.max(1) as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balance_names_parse_and_bad_ones_say_what_is_allowed() {
        assert_eq!("spray".parse(), Ok(Balance::Spray));
        assert_eq!(
            "alternate:400".parse(),
            Ok(Balance::Alternate { period_ms: 400 })
        );
        for bad in ["alternate:0", "alternate:", "alternate:x", "round"] {
            let err = bad.parse::<Balance>().unwrap_err();
            assert!(err.contains("alternate:MS"), "{bad}: {err}");
        }
    }
}
