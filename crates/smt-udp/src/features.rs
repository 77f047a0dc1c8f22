//! What a bound socket actually uses.

use std::fmt;

use crate::Mode;

/// The offloads, batching and buffer sizes a [`Socket`](crate::Socket) found at bind time.
///
/// The [`Display`](fmt::Display) form is one line for users, for example
/// `udp: GSO up to 64 segments, GRO up to 64 segments, recvmmsg batch 32, rcvbuf 8 MiB, sndbuf 8 MiB`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Features {
    /// UDP or raw IP.
    pub mode: Mode,
    /// Most datagrams one `sendmsg` may carry with `UDP_SEGMENT`; 1 means no GSO.
    pub gso_max_segments: usize,
    /// Most datagrams the kernel may coalesce into one received buffer; 1 means no GRO.
    pub gro_segments: usize,
    /// Receive slots filled per receive system call (`recvmmsg`); 1 means one datagram per call.
    pub recv_batch: usize,
    /// `SO_RCVBUF` as the kernel reports it after setting (Linux reports double the request).
    pub recv_buffer: usize,
    /// `SO_SNDBUF` as the kernel reports it after setting (Linux reports double the request).
    pub send_buffer: usize,
}

impl fmt::Display for Features {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.mode)?;
        match self.gso_max_segments {
            0 | 1 => f.write_str("no GSO, ")?,
            n => write!(f, "GSO up to {n} segments, ")?,
        }
        match self.gro_segments {
            0 | 1 => f.write_str("no GRO, ")?,
            n => write!(f, "GRO up to {n} segments, ")?,
        }
        match self.recv_batch {
            0 | 1 => f.write_str("one datagram per recv, ")?,
            n => write!(f, "recvmmsg batch {n}, ")?,
        }
        write!(
            f,
            "rcvbuf {}, sndbuf {}",
            Bytes(self.recv_buffer),
            Bytes(self.send_buffer)
        )
    }
}

/// A byte count printed in the largest binary unit that keeps it at least 1, with at most one
/// decimal: `8 MiB`, `1.5 MiB`, `208 KiB`, `900 B`.
pub(crate) struct Bytes(pub(crate) usize);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(usize, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
        let Some(&(scale, unit)) = UNITS.iter().find(|(scale, _)| self.0 >= *scale) else {
            return write!(f, "{} B", self.0);
        };
        let tenths = (self.0 as u128 * 10 + scale as u128 / 2) / scale as u128;
        match tenths % 10 {
            0 => write!(f, "{} {unit}", tenths / 10),
            d => write!(f, "{}.{d} {unit}", tenths / 10),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_pick_a_readable_unit() {
        let cases = [
            (0, "0 B"),
            (900, "900 B"),
            (212_992, "208 KiB"),
            (8 << 20, "8 MiB"),
            (3 << 19, "1.5 MiB"),
            ((1 << 20) - 1, "1024 KiB"),
            (1 << 30, "1 GiB"),
        ];
        for (n, text) in cases {
            assert_eq!(Bytes(n).to_string(), text, "{n} bytes");
        }
    }

    #[test]
    fn display_names_what_is_missing() {
        let features = Features {
            mode: Mode::raw_ip(),
            gso_max_segments: 1,
            gro_segments: 1,
            recv_batch: 1,
            recv_buffer: 212_992,
            send_buffer: 8 << 20,
        };
        assert_eq!(
            features.to_string(),
            "raw IP protocol 253 (0xfd): no GSO, no GRO, one datagram per recv, \
             rcvbuf 208 KiB, sndbuf 8 MiB"
        );
    }
}
