//! Changing captured datagrams: bit flips, truncation, a new message ID.

use smt_proto::wire::Packet;

/// A copy of `bytes` with bit `bit` flipped (counted from the first byte's
/// least significant bit); unchanged if `bit` is past the end.
pub fn flip_bit(bytes: &[u8], bit: usize) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if let Some(b) = out.get_mut(bit / 8) {
        *b ^= 1 << (bit % 8);
    }
    out
}

/// The first `len` bytes of `bytes` (all of it if shorter).
pub fn truncate(bytes: &[u8], len: usize) -> Vec<u8> {
    bytes[..len.min(bytes.len())].to_vec()
}

/// A copy of `bytes` claiming message ID `id` (the plaintext header field
/// only; a record sealed under another ID must then fail to open).
pub fn retarget_id(bytes: &[u8], id: u64) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if Packet::new_checked(&out[..]).is_ok() {
        Packet::new_unchecked(&mut out[..]).set_id(id);
    }
    out
}
