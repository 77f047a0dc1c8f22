//! Pathlet feedback on the wire (`docs/protocol.md` § 4, PATH and
//! PATH_ECHO; MTP, Stephens et al., HotNets 2021, § 3.1.3).
//!
//! - **PATH** (`0x1d`) goes first in a datagram. The sender reserves `N`
//!   empty 8-byte slots and may list `(pathlet, class)` pairs it asks the
//!   network not to use for new messages; each device on the way writes
//!   one slot (its pathlet, the packet's class, a CE mark, its queue) in
//!   place, so no device ever grows a datagram. The network writes it, so
//!   it carries no MAC: a receiver believes it only for a datagram in which
//!   another packet authenticates.
//! - **PATH_ECHO** (`0x1e`) is a control packet (MAC'd like the others)
//!   from the receiver back to the sender: per `(pathlet, class)`, the
//!   datagram bytes and CE-marked bytes counted since the last echo,
//!   what DCTCP's `alpha` needs (RFC 8257 § 3.3).
//!
//! Neither is a [`super::Body`]: PATH is about a datagram, not an RPC, and
//! is written by the network. Each has its own representation
//! ([`PathRepr`], [`PathEchoRepr`]) with `parse`, `buffer_len` and `emit`;
//! [`super::Repr::parse`] refuses them with
//! [`WireError::OwnRepr`](super::WireError::OwnRepr).

use super::packet::field;
use super::{Packet, PacketType, WireError, COMMON_HEADER_LEN};

/// PATH's header: the common header and 4 bytes (slots, used, excludes,
/// flags).
pub const PATH_HEADER_LEN: usize = COMMON_HEADER_LEN + 4;
/// One `(pathlet, class)` the sender asks the network to avoid.
pub const PATH_EXCLUDE_LEN: usize = 4;
/// One device's feedback slot.
pub const PATH_SLOT_LEN: usize = 8;
/// Most slots one PATH packet reserves.
pub const MAX_PATH_SLOTS: usize = 8;
/// Most exclusions one PATH packet lists.
pub const MAX_PATH_EXCLUDES: usize = 8;
/// PATH flag: a device found every slot filled and wrote nothing (the
/// sender reserved too few).
pub const PATH_OVERFLOW: u8 = 0x01;
/// Slot flag: the device's queue was above its marking threshold when the
/// packet arrived (DCTCP's CE, RFC 8257 § 3.1).
pub const SLOT_CE: u8 = 0x01;

/// PATH_ECHO's header: the common header and 8 bytes (count, flags,
/// reserved, sequence).
pub const PATH_ECHO_HEADER_LEN: usize = COMMON_HEADER_LEN + 8;
/// One `(pathlet, class)` entry of an echo.
pub const PATH_ECHO_ENTRY_LEN: usize = 24;
/// Most entries one PATH_ECHO carries.
pub const MAX_ECHO_ENTRIES: usize = 16;
/// Echo flag: a datagram counted since the last echo had no slot left
/// (its PATH had [`PATH_OVERFLOW`]).
pub const ECHO_OVERFLOW: u8 = 0x01;
/// Entry flag: `last_id` holds a message ID.
pub(super) const ENTRY_HAS_ID: u8 = 0x01;

/// A list of at most `N` values, without allocation (as [`super::AckIds`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Bounded<T: Copy + Default, const N: usize> {
    items: [T; N],
    len: u8,
}

impl<T: Copy + Default, const N: usize> Bounded<T, N> {
    /// An empty list.
    pub fn new() -> Self {
        Self {
            items: [T::default(); N],
            len: 0,
        }
    }

    /// Appends `item`; `false` when full.
    pub fn push(&mut self, item: T) -> bool {
        let len = usize::from(self.len);
        if len == N {
            return false;
        }
        self.items[len] = item;
        self.len += 1;
        true
    }

    /// The values pushed so far, in order.
    pub fn as_slice(&self) -> &[T] {
        &self.items[..usize::from(self.len)]
    }

    /// How many values the list holds (at most `N`).
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether the list holds no value.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<T: Copy + Default, const N: usize> Default for Bounded<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy + Default + std::fmt::Debug, const N: usize> std::fmt::Debug for Bounded<T, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// A `(pathlet, traffic class)` pair: the unit of feedback and of
/// congestion windows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PathletClass {
    /// Chosen by the device that owns the pathlet (`smt-forwarder`:
    /// `--pathlet-base` + path index).
    pub pathlet: u16,
    /// The traffic class the device put the packet in.
    pub class: u8,
}

/// What one device wrote into a PATH slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathSlot {
    /// The device's pathlet and the packet's class there.
    pub at: PathletClass,
    /// DCTCP's mark: the queue held more than the device's threshold when
    /// the packet arrived.
    pub ce: bool,
    /// Bytes queued behind the packet as it left (saturating).
    pub queue_bytes: u32,
}

/// A parsed PATH packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathRepr {
    /// The sender's SMT port.
    pub src_port: u16,
    /// The receiver's SMT port.
    pub dst_port: u16,
    /// Slots the sender reserved, 1 to [`MAX_PATH_SLOTS`].
    pub capacity: u8,
    /// Whether a device found no empty slot.
    pub overflow: bool,
    /// What the sender asks the network to avoid for new messages.
    pub exclude: Bounded<PathletClass, MAX_PATH_EXCLUDES>,
    /// The slots devices filled, in path order (at most `capacity`).
    pub slots: Bounded<PathSlot, MAX_PATH_SLOTS>,
}

/// One `(pathlet, class)` entry of a PATH_ECHO: what the receiver counted
/// there since its previous echo.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EchoEntry {
    /// The pathlet and class counted.
    pub at: PathletClass,
    /// Bytes of the datagrams that crossed it (whole datagrams, as
    /// received; saturating).
    pub bytes: u32,
    /// Of those, bytes of datagrams it marked CE.
    pub ce_bytes: u32,
    /// Its queue as the last counted datagram left it.
    pub queue_bytes: u32,
    /// The ID of the last DATA packet counted there (in the epoch the
    /// echo's key phase names): which message the sender should move to
    /// this pathlet's window. `None` when only control packets crossed.
    pub last_id: Option<u64>,
}

/// A parsed PATH_ECHO (without its MAC, as every control packet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathEchoRepr {
    /// The sender's SMT port.
    pub src_port: u16,
    /// The receiver's SMT port.
    pub dst_port: u16,
    /// The key phase of the epoch whose control key MACs the echo (and in
    /// which the entries' `last_id`s are named).
    pub key_phase: bool,
    /// Numbers echoes per sender and peer, 1, 2, 3, …: a receiver keeps
    /// only echoes above the largest it has seen (a copy would count the
    /// same bytes twice).
    pub sequence: u32,
    /// Some counted datagram had [`PATH_OVERFLOW`] set.
    pub overflow: bool,
    /// 1 to [`MAX_ECHO_ENTRIES`].
    pub entries: Bounded<EchoEntry, MAX_ECHO_ENTRIES>,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be64(b: &[u8], at: usize) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// The common-header rules PATH and PATH_ECHO share with every control
/// packet (`docs/protocol.md` § 2 rules 3, 5 and 6).
fn check_common<T: AsRef<[u8]>>(packet: &Packet<T>, header_len: usize) -> Result<(), WireError> {
    if packet.doff_reserved() != 0 || packet.checksum() != 0 {
        return Err(WireError::BadField("reserved header bits"));
    }
    let zero = packet.segment_offset() == 0
        && packet.message_len() == 0
        && packet.mss() == 0
        && packet.resend_index() == 0;
    if !zero {
        return Err(WireError::BadField(
            "DATA-only field set on a control packet",
        ));
    }
    if packet.header_len() != header_len {
        return Err(WireError::BadHeaderLength);
    }
    Ok(())
}

/// A PATH's exclude list (`list` is exactly its entries).
fn parse_excludes(list: &[u8]) -> Result<Bounded<PathletClass, MAX_PATH_EXCLUDES>, WireError> {
    let mut exclude = Bounded::new();
    for e in list.chunks_exact(PATH_EXCLUDE_LEN) {
        if e[3] != 0 {
            return Err(WireError::BadField("reserved bytes set"));
        }
        exclude.push(PathletClass {
            pathlet: be16(e, 0),
            class: e[2],
        });
    }
    Ok(exclude)
}

/// A PATH's slots (`list` is exactly all of them), of which the first
/// `used` are filled and the rest must be zero.
fn parse_slots(list: &[u8], used: usize) -> Result<Bounded<PathSlot, MAX_PATH_SLOTS>, WireError> {
    let mut slots = Bounded::new();
    for (i, s) in list.chunks_exact(PATH_SLOT_LEN).enumerate() {
        if i >= used {
            if s.iter().any(|&b| b != 0) {
                return Err(WireError::BadField("PATH unused slot not zero"));
            }
            continue;
        }
        if s[3] & !SLOT_CE != 0 {
            return Err(WireError::BadField("PATH slot flags"));
        }
        slots.push(PathSlot {
            at: PathletClass {
                pathlet: be16(s, 0),
                class: s[2],
            },
            ce: s[3] & SLOT_CE != 0,
            queue_bytes: be32(s, 4),
        });
    }
    Ok(slots)
}

/// PATH's length from its header: `32 + 4 × excludes + 8 × slots`, or why
/// it cannot be told. `buf` starts with a PATH packet that passed
/// [`Packet::new_checked`].
pub(crate) fn path_len(buf: &[u8]) -> Result<usize, WireError> {
    use field::path;
    if buf.len() < PATH_HEADER_LEN {
        return Err(WireError::Truncated);
    }
    let (slots, excludes) = (
        usize::from(buf[path::SLOTS]),
        usize::from(buf[path::EXCLUDES]),
    );
    if slots == 0 || slots > MAX_PATH_SLOTS {
        return Err(WireError::BadField("PATH slot count"));
    }
    if excludes > MAX_PATH_EXCLUDES {
        return Err(WireError::BadField("PATH exclude count"));
    }
    Ok(PATH_HEADER_LEN + PATH_EXCLUDE_LEN * excludes + PATH_SLOT_LEN * slots)
}

/// PATH_ECHO's length without its MAC: `36 + 24 × count`.
pub(crate) fn path_echo_len(buf: &[u8]) -> Result<usize, WireError> {
    let Some(c) = buf.get(field::path_echo::COUNT) else {
        return Err(WireError::Truncated);
    };
    let count = usize::from(u16::from_be_bytes([c[0], c[1]]));
    if count == 0 || count > MAX_ECHO_ENTRIES {
        return Err(WireError::BadField("PATH_ECHO count"));
    }
    Ok(PATH_ECHO_HEADER_LEN + PATH_ECHO_ENTRY_LEN * count)
}

impl PathRepr {
    /// An empty PATH with `capacity` slots (clamped to 1..=8) and no
    /// exclusion: what a sender puts first in a datagram.
    pub fn new(src_port: u16, dst_port: u16, capacity: u8) -> Self {
        Self {
            src_port,
            dst_port,
            capacity: capacity.clamp(1, MAX_PATH_SLOTS as u8),
            overflow: false,
            exclude: Bounded::new(),
            slots: Bounded::new(),
        }
    }

    /// Parses and validates a PATH packet (exactly its bytes: split it off
    /// with [`super::first_packet_len`]).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, WireError> {
        use field::path;
        if packet.packet_type() != PacketType::PATH {
            return Err(WireError::BadField("not a PATH packet"));
        }
        check_common(packet, PATH_HEADER_LEN)?;
        if packet.key_phase() || packet.id() != 0 {
            return Err(WireError::BadField("PATH key phase or ID set"));
        }
        let buf = packet.as_bytes();
        let len = path_len(buf)?;
        if buf.len() != len {
            return Err(WireError::BadField("PATH length does not match counts"));
        }
        let (capacity, used) = (buf[path::SLOTS], usize::from(buf[path::USED]));
        let flags = buf[path::FLAGS];
        if flags & !PATH_OVERFLOW != 0 {
            return Err(WireError::BadField("PATH flags"));
        }
        if used > usize::from(capacity) {
            return Err(WireError::BadField("PATH used beyond slots"));
        }
        let slots_at = path::LIST + PATH_EXCLUDE_LEN * usize::from(buf[path::EXCLUDES]);
        let exclude = parse_excludes(&buf[path::LIST..slots_at])?;
        let slots = parse_slots(&buf[slots_at..], used)?;
        Ok(Self {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            capacity,
            overflow: flags & PATH_OVERFLOW != 0,
            exclude,
            slots,
        })
    }

    /// Bytes [`PathRepr::emit`] writes: the whole packet.
    pub fn buffer_len(&self) -> usize {
        PATH_HEADER_LEN
            + PATH_EXCLUDE_LEN * self.exclude.len()
            + PATH_SLOT_LEN * usize::from(self.capacity)
    }

    /// Writes the packet into `packet`, at least [`PathRepr::buffer_len`]
    /// bytes long. Every byte is written; unused slots are zero. A repr
    /// with more filled slots than `capacity` writes `capacity` of them.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        use field::path;
        let len = self.buffer_len();
        packet.inner_mut()[..len].fill(0);
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_header_len(PATH_HEADER_LEN);
        packet.set_key_phase(false);
        packet.set_packet_type(PacketType::PATH);
        let used = self.slots.len().min(usize::from(self.capacity));
        let buf = packet.inner_mut();
        buf[path::SLOTS] = self.capacity;
        buf[path::USED] = used as u8;
        buf[path::EXCLUDES] = self.exclude.len() as u8;
        buf[path::FLAGS] = if self.overflow { PATH_OVERFLOW } else { 0 };
        let mut at = path::LIST;
        for e in self.exclude.as_slice() {
            buf[at..at + 2].copy_from_slice(&e.pathlet.to_be_bytes());
            buf[at + 2] = e.class;
            at += PATH_EXCLUDE_LEN;
        }
        for s in &self.slots.as_slice()[..used] {
            write_slot(&mut buf[at..at + PATH_SLOT_LEN], s);
            at += PATH_SLOT_LEN;
        }
    }
}

fn write_slot(out: &mut [u8], s: &PathSlot) {
    out[0..2].copy_from_slice(&s.at.pathlet.to_be_bytes());
    out[2] = s.at.class;
    out[3] = if s.ce { SLOT_CE } else { 0 };
    out[4..8].copy_from_slice(&s.queue_bytes.to_be_bytes());
}

/// What a device did with a PATH packet's slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotWrite {
    /// Written into slot `n` (from 0).
    Written(usize),
    /// Every slot was filled: [`PATH_OVERFLOW`] is now set.
    Overflow,
}

/// A device's write: fills the next empty slot of the PATH packet at the
/// start of `buf` (which may hold the packets after it) in place, or sets
/// [`PATH_OVERFLOW`] when none is left. The datagram's length never
/// changes. Checks only what the write needs (the type, the header and
/// the counts): a PATH the receiver will refuse stays refused.
pub fn write_path_slot(buf: &mut [u8], slot: &PathSlot) -> Result<SlotWrite, WireError> {
    use field::path;
    let packet = Packet::new_checked(&*buf)?;
    if packet.packet_type() != PacketType::PATH || packet.header_len() != PATH_HEADER_LEN {
        return Err(WireError::BadField("not a PATH packet"));
    }
    let len = path_len(buf)?;
    if buf.len() < len {
        return Err(WireError::Truncated);
    }
    let (capacity, used) = (buf[path::SLOTS], buf[path::USED]);
    if used >= capacity {
        buf[path::FLAGS] |= PATH_OVERFLOW;
        return Ok(SlotWrite::Overflow);
    }
    let at = path::LIST
        + PATH_EXCLUDE_LEN * usize::from(buf[path::EXCLUDES])
        + PATH_SLOT_LEN * usize::from(used);
    write_slot(&mut buf[at..at + PATH_SLOT_LEN], slot);
    buf[path::USED] = used + 1;
    Ok(SlotWrite::Written(usize::from(used)))
}

/// The exclusions of the PATH packet at the start of `buf`, for a device
/// choosing a path (empty when `buf` starts with no valid-length PATH).
pub fn path_excludes(buf: &[u8]) -> Bounded<PathletClass, MAX_PATH_EXCLUDES> {
    use field::path;
    let mut out = Bounded::new();
    let is_path = Packet::new_checked(buf)
        .is_ok_and(|p| p.packet_type() == PacketType::PATH && p.header_len() == PATH_HEADER_LEN);
    if !is_path || path_len(buf).map_or(true, |len| len > buf.len()) {
        return out;
    }
    let n = usize::from(buf[path::EXCLUDES]);
    for e in buf[path::LIST..path::LIST + PATH_EXCLUDE_LEN * n].chunks_exact(PATH_EXCLUDE_LEN) {
        out.push(PathletClass {
            pathlet: be16(e, 0),
            class: e[2],
        });
    }
    out
}

/// A PATH_ECHO's entries (`list` is exactly them).
fn parse_echo_entries(list: &[u8]) -> Result<Bounded<EchoEntry, MAX_ECHO_ENTRIES>, WireError> {
    let mut entries = Bounded::new();
    for e in list.chunks_exact(PATH_ECHO_ENTRY_LEN) {
        let has_id = e[3] & ENTRY_HAS_ID != 0;
        if e[3] & !ENTRY_HAS_ID != 0 || (!has_id && be64(e, 16) != 0) {
            return Err(WireError::BadField("reserved bytes set"));
        }
        entries.push(EchoEntry {
            at: PathletClass {
                pathlet: be16(e, 0),
                class: e[2],
            },
            bytes: be32(e, 4),
            ce_bytes: be32(e, 8),
            queue_bytes: be32(e, 12),
            last_id: has_id.then(|| be64(e, 16)),
        });
    }
    Ok(entries)
}

impl PathEchoRepr {
    /// Parses and validates a PATH_ECHO (without its MAC).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, WireError> {
        use field::path_echo;
        if packet.packet_type() != PacketType::PATH_ECHO {
            return Err(WireError::BadField("not a PATH_ECHO packet"));
        }
        check_common(packet, PATH_ECHO_HEADER_LEN)?;
        if packet.id() != 0 {
            return Err(WireError::BadField("PATH_ECHO ID set"));
        }
        let buf = packet.as_bytes();
        let len = path_echo_len(buf)?;
        if buf.len() != len {
            return Err(WireError::BadField("PATH_ECHO length does not match count"));
        }
        let flags = buf[path_echo::FLAGS];
        if flags & !ECHO_OVERFLOW != 0 || buf[path_echo::RESERVED] != 0 {
            return Err(WireError::BadField("reserved bytes set"));
        }
        let entries = parse_echo_entries(&buf[path_echo::ENTRIES..])?;
        Ok(Self {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            key_phase: packet.key_phase(),
            sequence: be32(buf, path_echo::SEQUENCE.start),
            overflow: flags & ECHO_OVERFLOW != 0,
            entries,
        })
    }

    /// Bytes [`PathEchoRepr::emit`] writes (the MAC follows them).
    pub fn buffer_len(&self) -> usize {
        PATH_ECHO_HEADER_LEN + PATH_ECHO_ENTRY_LEN * self.entries.len()
    }

    /// Writes the packet (not its MAC) into `packet`, at least
    /// [`PathEchoRepr::buffer_len`] bytes long. An echo must carry at
    /// least one entry to parse.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        use field::path_echo;
        let len = self.buffer_len();
        packet.inner_mut()[..len].fill(0);
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_header_len(PATH_ECHO_HEADER_LEN);
        packet.set_key_phase(self.key_phase);
        packet.set_packet_type(PacketType::PATH_ECHO);
        let buf = packet.inner_mut();
        let count = self.entries.len() as u16;
        buf[path_echo::COUNT].copy_from_slice(&count.to_be_bytes());
        buf[path_echo::FLAGS] = if self.overflow { ECHO_OVERFLOW } else { 0 };
        buf[path_echo::SEQUENCE].copy_from_slice(&self.sequence.to_be_bytes());
        for (i, e) in self.entries.as_slice().iter().enumerate() {
            let out =
                &mut buf[path_echo::ENTRIES + PATH_ECHO_ENTRY_LEN * i..][..PATH_ECHO_ENTRY_LEN];
            out[0..2].copy_from_slice(&e.at.pathlet.to_be_bytes());
            out[2] = e.at.class;
            out[3] = if e.last_id.is_some() { ENTRY_HAS_ID } else { 0 };
            out[4..8].copy_from_slice(&e.bytes.to_be_bytes());
            out[8..12].copy_from_slice(&e.ce_bytes.to_be_bytes());
            out[12..16].copy_from_slice(&e.queue_bytes.to_be_bytes());
            out[16..24].copy_from_slice(&e.last_id.unwrap_or(0).to_be_bytes());
        }
    }
}

#[cfg(test)]
mod tests;
