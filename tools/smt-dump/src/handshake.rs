//! HANDSHAKE streams, reassembled far enough to name the session: the
//! client random of a TLS ClientHello or a 0-RTT ClientHello0, the client
//! nonce of a PskHello (the ids the key log files keys under), and the
//! cipher suite a TLS ServerHello chose.

use std::collections::BTreeMap;

use smt_crypto::{AeadAlgorithm, TlsHash};

/// Bytes of a stream kept for parsing its first messages.
const KEEP: usize = 4096;

/// One direction's handshake stream (its start only).
#[derive(Debug, Default)]
pub(crate) struct Stream {
    pieces: BTreeMap<u32, Vec<u8>>,
}

impl Stream {
    /// Adds `data` at stream offset `offset` (pieces past [`KEEP`] are not
    /// needed).
    pub(crate) fn add(&mut self, offset: u32, data: &[u8]) {
        if (offset as usize) < KEEP && !data.is_empty() {
            self.pieces.entry(offset).or_insert_with(|| data.to_vec());
        }
    }

    /// The stream's contiguous start.
    pub(crate) fn prefix(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (&at, piece) in &self.pieces {
            let at = at as usize;
            if at > out.len() {
                break;
            }
            if let Some(fresh) = piece.get(out.len() - at..) {
                out.extend_from_slice(fresh);
            }
            if out.len() >= KEEP {
                break;
            }
        }
        out
    }

    /// The first bytes the stream opened with, if any arrived.
    pub(crate) fn first(&self) -> Option<&[u8]> {
        self.pieces.get(&0).map(Vec::as_slice)
    }
}

/// The data of an opening packet without its retry token, if it carries
/// one (flags `0x02`: one length byte, the token, then stream bytes).
pub(crate) fn strip_token(flags: u8, offset: u32, data: &[u8]) -> &[u8] {
    if flags & 0x02 == 0 || offset != 0 {
        return data;
    }
    match data.first() {
        Some(&n) => data.get(1 + usize::from(n)..).unwrap_or(&[]),
        None => data,
    }
}

/// The id the key log files a session under, from the client's stream.
pub(crate) fn client_id(kind: u8, stream: &[u8]) -> Option<Vec<u8>> {
    let range = match kind {
        // TLS record header (5), handshake header (4), legacy_version (2).
        0 if stream.first() == Some(&0x16) && stream.get(5) == Some(&0x01) => 11..43,
        // ClientHello0: 4-byte header, ticket hash (32), client random.
        1 if stream.first() == Some(&0x01) => 36..68,
        // PskHello: type, version, client nonce.
        2 if stream.first() == Some(&0x01) => 2..34,
        _ => return None,
    };
    stream.get(range).map(<[u8]>::to_vec)
}

/// The suite a TLS ServerHello chose, from the server's stream.
pub(crate) fn server_suite(stream: &[u8]) -> Option<(TlsHash, AeadAlgorithm)> {
    if stream.first() != Some(&0x16) || stream.get(5) != Some(&0x02) {
        return None;
    }
    // After the random: session id (length-prefixed), then the suite.
    let sid_len = usize::from(*stream.get(43)?);
    let at = 44 + sid_len;
    match stream.get(at..at + 2)? {
        [0x13, 0x01] => Some((TlsHash::Sha256, AeadAlgorithm::Aes128Gcm)),
        [0x13, 0x02] => Some((TlsHash::Sha384, AeadAlgorithm::Aes256Gcm)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_stops_at_the_first_gap() {
        let mut s = Stream::default();
        s.add(0, b"abc");
        s.add(6, b"ghi");
        assert_eq!(s.prefix(), b"abc");
        s.add(2, b"cdef");
        assert_eq!(s.prefix(), b"abcdefghi");
    }

    #[test]
    fn ids_need_the_whole_field() {
        let mut hello = vec![0x01, 0x01];
        hello.extend_from_slice(&[7; 32]);
        assert_eq!(client_id(2, &hello), Some(vec![7; 32]));
        assert_eq!(client_id(2, &hello[..20]), None);
        assert_eq!(client_id(0, &hello), None);
        assert_eq!(strip_token(2, 0, &[2, 9, 9, 1, 1]), &[1, 1]);
        assert_eq!(strip_token(2, 0, &[200, 1]), &[] as &[u8]);
    }
}
