//! Parsed packet representations: `parse` checks every field once, so code
//! downstream works with values that are known to be consistent.

use super::packet::field;
use super::{
    DataFlags, HandshakeKind, Packet, PacketType, WireError, COMMON_HEADER_LEN, DATA_HEADER_LEN,
};

/// Most message IDs one ACK packet carries.
pub const ACK_MAX_IDS: usize = 16;
/// HANDSHAKE flag: a responder's stateless retry; the data is an
/// address-validation token to open the handshake again with.
pub const HANDSHAKE_RETRY: u8 = 0x01;
/// HANDSHAKE flag: an opening packet whose data starts with a token from a
/// retry (one length byte, then the token), before the stream bytes.
pub const HANDSHAKE_TOKEN: u8 = 0x02;

const GRANT_LEN: usize = COMMON_HEADER_LEN + 8;
const RESEND_LEN: usize = COMMON_HEADER_LEN + 12;
const CREDIT_LEN: usize = COMMON_HEADER_LEN + 8;
const ACK_HEADER_LEN: usize = COMMON_HEADER_LEN + 4;
const HANDSHAKE_HEADER_LEN: usize = COMMON_HEADER_LEN + 12;

/// The plaintext metadata of a DATA packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataHeader {
    /// Application message length in bytes, including length-concealment
    /// padding (the SMT paper §6.1).
    pub message_len: u32,
    /// Bytes of the whole message on the wire: every segment's records with
    /// their headers and tags.
    pub message_wire_len: u32,
    /// Where this packet's segment starts in the message's wire bytes (the
    /// paper's TSO offset).
    pub segment_offset: u32,
    /// Wire bytes of this packet's segment.
    pub segment_len: u32,
    /// Payload bytes in every packet of the segment except possibly the last.
    pub mss: u16,
    /// Position of this packet within its segment. For a retransmission this
    /// is the *original* index, carried in the resend-index field.
    pub packet_index: u16,
    /// Whether this packet is a retransmission.
    pub retransmit: bool,
    /// Wire bytes the sender will send without further grants.
    pub incoming: u32,
    /// The message's priority (MTP's "Msg Pri"), for devices on the
    /// path that queue by priority: 0 is the default, larger is more
    /// urgent. The receiver ignores it; like every header field it is not
    /// authenticated (`docs/protocol.md` § 3).
    pub priority: u8,
}

impl DataHeader {
    /// Parses a DATA packet's header with the checks [`Repr::parse`] makes
    /// of one (reserved bits, then the DATA fields), without building a
    /// `Repr`: its ACK variant makes it 144 bytes, moved per packet on the
    /// receive path.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, WireError> {
        if packet.doff_reserved() != 0 || packet.checksum() != 0 {
            return Err(WireError::BadField("reserved header bits"));
        }
        parse_data(packet)
    }

    /// [`DataHeader::parse`] of the DATA packet at the start of `packet`'s
    /// buffer, which may hold more packets after it (a coalesced
    /// datagram): every check but the payload's length, which need only
    /// be at least what the header says. With the packet's length: its
    /// bytes, split off, parse to this same header.
    #[inline]
    pub(crate) fn parse_leading<T: AsRef<[u8]>>(
        packet: &Packet<T>,
    ) -> Result<(Self, usize), WireError> {
        if packet.doff_reserved() != 0 || packet.checksum() != 0 {
            return Err(WireError::BadField("reserved header bits"));
        }
        let header = parse_data_fields(packet)?;
        let len = header.payload_len();
        if packet.payload().len() < len {
            return Err(WireError::Truncated);
        }
        Ok((header, DATA_HEADER_LEN + len))
    }

    /// Offset of this packet's payload within the message's wire bytes.
    pub fn wire_offset(&self) -> u64 {
        u64::from(self.segment_offset) + u64::from(self.packet_index) * u64::from(self.mss)
    }

    /// The payload length this packet must carry.
    pub fn payload_len(&self) -> usize {
        let start = u64::from(self.packet_index) * u64::from(self.mss);
        let left = u64::from(self.segment_len).saturating_sub(start);
        left.min(u64::from(self.mss)) as usize
    }

    /// The whole DATA packet header with this body, from port `ports.0`
    /// to `ports.1`, key phase `key_phase`, message `id`: what
    /// [`Repr::emit`] writes for a DATA packet (it calls this), and what
    /// the send path writes per packet. Filling an array at fixed offsets
    /// skips per-field bounds checks.
    #[inline(always)]
    pub(crate) fn header_bytes(
        &self,
        ports: (u16, u16),
        key_phase: bool,
        id: u64,
    ) -> [u8; DATA_HEADER_LEN] {
        let (index, resend, flags) = match self.retransmit {
            true => (0, self.packet_index, DataFlags::RETRANSMIT),
            false => (self.packet_index, 0, DataFlags::default()),
        };
        let mut h = [0u8; DATA_HEADER_LEN];
        h[field::SPORT].copy_from_slice(&ports.0.to_be_bytes());
        h[field::DPORT].copy_from_slice(&ports.1.to_be_bytes());
        h[field::SEG_OFFSET].copy_from_slice(&self.segment_offset.to_be_bytes());
        h[field::MSG_LEN].copy_from_slice(&self.message_len.to_be_bytes());
        h[field::DOFF] = ((DATA_HEADER_LEN / 4) as u8) << 4 | u8::from(key_phase);
        h[field::TYPE] = PacketType::DATA.0;
        h[field::MSS].copy_from_slice(&self.mss.to_be_bytes());
        // The checksum slot stays zero.
        h[field::RESEND_INDEX].copy_from_slice(&resend.to_be_bytes());
        h[field::ID].copy_from_slice(&id.to_be_bytes());
        h[field::PKT_INDEX].copy_from_slice(&index.to_be_bytes());
        h[field::FLAGS] = flags.0;
        h[field::PRIORITY] = self.priority;
        h[field::MSG_WIRE_LEN].copy_from_slice(&self.message_wire_len.to_be_bytes());
        h[field::SEG_LEN].copy_from_slice(&self.segment_len.to_be_bytes());
        h[field::INCOMING].copy_from_slice(&self.incoming.to_be_bytes());
        h
    }

    fn check(&self) -> Result<(), WireError> {
        if self.mss == 0 || self.segment_len == 0 {
            return Err(WireError::BadField("empty segment or zero mss"));
        }
        if self.segment_len as usize > crate::record::MAX_SEGMENT_LEN {
            return Err(WireError::BadField("segment longer than 64 KiB"));
        }
        if u32::from(self.mss) > self.segment_len {
            return Err(WireError::BadField("mss larger than the segment"));
        }
        let seg_end = u64::from(self.segment_offset) + u64::from(self.segment_len);
        if seg_end > u64::from(self.message_wire_len) {
            return Err(WireError::BadField("segment beyond message"));
        }
        if self.message_len >= self.message_wire_len {
            return Err(WireError::BadField("message length exceeds wire length"));
        }
        if u64::from(self.packet_index) * u64::from(self.mss) >= u64::from(self.segment_len) {
            return Err(WireError::BadField("packet index beyond segment"));
        }
        if self.incoming > self.message_wire_len {
            return Err(WireError::BadField("incoming beyond message"));
        }
        // A sender may only send what it is allowed to: the packet must end
        // within the bytes it says it may send.
        if self.wire_offset() + self.payload_len() as u64 > u64::from(self.incoming) {
            return Err(WireError::BadField("packet beyond incoming"));
        }
        Ok(())
    }
}

/// Message IDs acknowledged by one ACK packet (no allocation).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct AckIds {
    ids: [u64; ACK_MAX_IDS],
    len: u8,
}

impl AckIds {
    /// An empty list.
    pub fn new() -> Self {
        Self {
            ids: [0; ACK_MAX_IDS],
            len: 0,
        }
    }

    /// Appends an ID; returns `false` when full.
    pub fn push(&mut self, id: u64) -> bool {
        let len = usize::from(self.len);
        if len == ACK_MAX_IDS {
            return false;
        }
        self.ids[len] = id;
        self.len += 1;
        true
    }

    /// The IDs.
    pub fn as_slice(&self) -> &[u64] {
        &self.ids[..usize::from(self.len)]
    }

    /// Whether no ID is present.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether no more IDs fit.
    pub fn is_full(&self) -> bool {
        usize::from(self.len) == ACK_MAX_IDS
    }
}

impl Default for AckIds {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for AckIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.as_slice().iter().map(|id| format!("{id:#x}")))
            .finish()
    }
}

/// What a packet says, by type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// A piece of a message; the payload follows the header.
    Data(DataHeader),
    /// The sender may transmit the message up to wire offset `offset`.
    Grant {
        /// The wire offset the sender may transmit up to (exclusive).
        offset: u32,
        /// The message's rank among those the receiver grants (0 = first).
        priority: u8,
    },
    /// Retransmit wire bytes `[offset, offset + length)` of the message.
    Resend {
        /// The first wire byte to send again.
        offset: u32,
        /// How many wire bytes to send again.
        length: u32,
        /// As in [`Body::Grant`].
        priority: u8,
    },
    /// The sender of this packet has no state for the RPC.
    RpcUnknown,
    /// The sender of this packet is alive but has nothing to send yet.
    Busy,
    /// The server refused the request unexecuted: too many requests wait
    /// for its application.
    Overloaded,
    /// The server's application will not answer the request (it dropped
    /// it, or its response could not be sent); it may have run.
    Abandoned,
    /// The receiver may have `limit` requests outstanding at the sender;
    /// of two CREDIT packets, the one with the larger `sequence` holds.
    Credit {
        /// Requests the receiver may have outstanding at the sender at once.
        limit: u32,
        /// The sender's CREDIT counter, 1, 2, 3, … across all its peers.
        sequence: u32,
    },
    /// The server asks the client to acknowledge the RPC's response.
    NeedAck,
    /// These RPCs are complete; the server may free them.
    Ack(AckIds),
    /// The sender has moved to the next key epoch (the packet's key phase).
    KeyUpdate,
    /// `len` bytes of the sender's handshake stream, starting at stream
    /// offset `offset`, follow the header; `ack` is how many bytes of the
    /// receiver's stream the sender has received in order; `kind` names the
    /// handshake protocol ([`HandshakeKind`]);
    /// `flags` mark a stateless retry ([`HANDSHAKE_RETRY`],
    /// [`HANDSHAKE_TOKEN`]; `docs/protocol.md` § 4, HANDSHAKE).
    Handshake {
        /// Where the carried bytes start in the sender's handshake stream.
        offset: u32,
        /// Bytes of the receiver's handshake stream received in order.
        ack: u32,
        /// Stream bytes carried after the header.
        len: u16,
        /// The handshake protocol.
        kind: HandshakeKind,
        /// Stateless-retry flags ([`HANDSHAKE_RETRY`], [`HANDSHAKE_TOKEN`]).
        flags: u8,
    },
}

impl Body {
    /// The packet type this body is sent as.
    pub fn packet_type(&self) -> PacketType {
        match self {
            Self::Data(_) => PacketType::DATA,
            Self::Grant { .. } => PacketType::GRANT,
            Self::Resend { .. } => PacketType::RESEND,
            Self::RpcUnknown => PacketType::RPC_UNKNOWN,
            Self::Busy => PacketType::BUSY,
            Self::Overloaded => PacketType::OVERLOADED,
            Self::Abandoned => PacketType::ABANDONED,
            Self::Credit { .. } => PacketType::CREDIT,
            Self::NeedAck => PacketType::NEED_ACK,
            Self::Ack(_) => PacketType::ACK,
            Self::KeyUpdate => PacketType::KEY_UPDATE,
            Self::Handshake { .. } => PacketType::HANDSHAKE,
        }
    }

    fn header_len(&self) -> usize {
        match self {
            Self::Data(_) => DATA_HEADER_LEN,
            Self::Grant { .. } => GRANT_LEN,
            Self::Resend { .. } => RESEND_LEN,
            Self::Credit { .. } => CREDIT_LEN,
            Self::RpcUnknown
            | Self::Busy
            | Self::Overloaded
            | Self::Abandoned
            | Self::NeedAck
            | Self::KeyUpdate => COMMON_HEADER_LEN,
            Self::Ack(_) => ACK_HEADER_LEN,
            Self::Handshake { .. } => HANDSHAKE_HEADER_LEN,
        }
    }
}

/// A parsed packet header (for DATA and HANDSHAKE, the payload stays in the
/// buffer: see [`Packet::payload`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// The sender's SMT port.
    pub src_port: u16,
    /// The receiver's SMT port.
    pub dst_port: u16,
    /// Which of two consecutive key epochs protects the packet (the RPC's
    /// epoch); always false for HANDSHAKE packets.
    pub key_phase: bool,
    /// The message / RPC ID. Its low bit names the side that started the RPC.
    pub id: u64,
    /// What the packet says, by type.
    pub body: Body,
}

impl Repr {
    /// Parses and validates a packet. For control packets `packet` must not
    /// include the authentication tag (the endpoint strips it first).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, WireError> {
        if packet.doff_reserved() != 0 || packet.checksum() != 0 {
            return Err(WireError::BadField("reserved header bits"));
        }
        let ty = packet.packet_type();
        let body = match ty {
            PacketType::DATA => Body::Data(parse_data(packet)?),
            PacketType::HANDSHAKE => parse_handshake(packet)?,
            t @ (PacketType::PATH | PacketType::PATH_ECHO) => return Err(WireError::OwnRepr(t)),
            t if t.name().is_some() => parse_control(packet)?,
            t => return Err(WireError::UnknownType(t)),
        };
        Ok(Self {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            key_phase: packet.key_phase(),
            id: packet.id(),
            body,
        })
    }

    /// Bytes `emit` writes: the header, plus the ID list of an ACK. DATA and
    /// HANDSHAKE payloads are the caller's to append.
    pub fn buffer_len(&self) -> usize {
        match &self.body {
            Body::Ack(ids) => ACK_HEADER_LEN + 8 * ids.as_slice().len(),
            body => body.header_len(),
        }
    }

    /// Writes the header into `packet`, which must be at least
    /// [`Repr::buffer_len`] bytes long. Every header byte is written.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        match &self.body {
            Body::Data(d) => {
                let ports = (self.src_port, self.dst_port);
                packet.set_data_header(&d.header_bytes(ports, self.key_phase, self.id));
            }
            _ => self.emit_control(packet),
        }
    }

    /// [`Repr::emit`] for a packet that is not DATA.
    #[inline]
    fn emit_control<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_header_len(self.body.header_len());
        packet.set_key_phase(self.key_phase);
        packet.set_packet_type(self.body.packet_type());
        packet.set_checksum(0);
        packet.set_id(self.id);
        emit_zero_data_fields(packet);
        emit_control_body(&self.body, packet);
    }
}

#[inline]
fn parse_data<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<DataHeader, WireError> {
    let header = parse_data_fields(packet)?;
    if packet.payload().len() != header.payload_len() {
        return Err(WireError::BadField(
            "payload length does not match segment layout",
        ));
    }
    Ok(header)
}

/// A DATA header's fields, checked, all but the payload's length (the
/// caller's: exact for one packet, at least for a coalesced datagram).
/// Inlined into both: out of line, its call and the `Result` it returns
/// through memory cost ~25 instructions per DATA packet.
#[inline(always)]
fn parse_data_fields<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<DataHeader, WireError> {
    packet.check_data()?;
    let flags = packet.data_flags();
    if flags.0 & !DataFlags::KNOWN.0 != 0 {
        return Err(WireError::BadField("unknown DATA flags"));
    }
    let retransmit = flags.contains(DataFlags::RETRANSMIT);
    let packet_index = if retransmit {
        if packet.packet_index() != 0 {
            return Err(WireError::BadField(
                "retransmission with non-zero packet index",
            ));
        }
        packet.resend_index()
    } else {
        if packet.resend_index() != 0 {
            return Err(WireError::BadField("resend index on a first transmission"));
        }
        packet.packet_index()
    };
    let header = DataHeader {
        message_len: packet.message_len(),
        message_wire_len: packet.message_wire_len(),
        segment_offset: packet.segment_offset(),
        segment_len: packet.segment_len(),
        mss: packet.mss(),
        packet_index,
        retransmit,
        incoming: packet.incoming(),
        priority: packet.priority(),
    };
    header.check()?;
    Ok(header)
}

fn require_zero_data_fields<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<(), WireError> {
    let zero = packet.segment_offset() == 0
        && packet.message_len() == 0
        && packet.mss() == 0
        && packet.resend_index() == 0;
    if zero {
        Ok(())
    } else {
        Err(WireError::BadField(
            "DATA-only field set on a control packet",
        ))
    }
}

fn be32_at(b: &[u8], at: std::ops::Range<usize>) -> u32 {
    let mut a = [0; 4];
    a.copy_from_slice(&b[at]);
    u32::from_be_bytes(a)
}

fn be16_at(b: &[u8], at: std::ops::Range<usize>) -> u16 {
    u16::from_be_bytes([b[at.start], b[at.start + 1]])
}

fn parse_control<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Body, WireError> {
    require_zero_data_fields(packet)?;
    let buf = packet.as_bytes();
    let ty = packet.packet_type();
    let expect = control_header_len(ty);
    if packet.header_len() != expect {
        return Err(WireError::BadHeaderLength);
    }
    let body = match ty {
        PacketType::GRANT => parse_grant(buf)?,
        PacketType::RESEND => parse_resend(buf)?,
        PacketType::CREDIT => Body::Credit {
            limit: be32_at(buf, field::credit::LIMIT),
            sequence: be32_at(buf, field::credit::SEQUENCE),
        },
        PacketType::ACK => return parse_ack(buf),
        PacketType::RPC_UNKNOWN => Body::RpcUnknown,
        PacketType::BUSY => Body::Busy,
        PacketType::OVERLOADED => Body::Overloaded,
        PacketType::ABANDONED => Body::Abandoned,
        PacketType::KEY_UPDATE => Body::KeyUpdate,
        _ => Body::NeedAck,
    };
    if buf.len() != expect {
        return Err(WireError::BadField("trailing bytes after control packet"));
    }
    Ok(body)
}

/// The header length a control packet of type `ty` must have (the bodyless
/// types have only the common header).
fn control_header_len(ty: PacketType) -> usize {
    match ty {
        PacketType::GRANT => GRANT_LEN,
        PacketType::RESEND => RESEND_LEN,
        PacketType::CREDIT => CREDIT_LEN,
        PacketType::ACK => ACK_HEADER_LEN,
        _ => COMMON_HEADER_LEN,
    }
}

/// A GRANT's body (its length already checked).
fn parse_grant(buf: &[u8]) -> Result<Body, WireError> {
    use field::grant;
    reserved_zero(&buf[grant::RESERVED])?;
    Ok(Body::Grant {
        offset: be32_at(buf, grant::OFFSET),
        priority: buf[grant::PRIORITY],
    })
}

/// A RESEND's body (its length already checked).
fn parse_resend(buf: &[u8]) -> Result<Body, WireError> {
    use field::resend;
    reserved_zero(&buf[resend::RESERVED])?;
    Ok(Body::Resend {
        offset: be32_at(buf, resend::OFFSET),
        length: be32_at(buf, resend::LENGTH),
        priority: buf[resend::PRIORITY],
    })
}

fn reserved_zero(bytes: &[u8]) -> Result<(), WireError> {
    if bytes.iter().all(|&b| b == 0) {
        Ok(())
    } else {
        Err(WireError::BadField("reserved bytes set"))
    }
}

fn parse_ack(buf: &[u8]) -> Result<Body, WireError> {
    use field::ack;
    let count = usize::from(be16_at(buf, ack::COUNT));
    reserved_zero(&buf[ack::RESERVED])?;
    if count == 0 || count > ACK_MAX_IDS {
        return Err(WireError::BadField("ACK count"));
    }
    if buf.len() != ACK_HEADER_LEN + 8 * count {
        return Err(WireError::BadField("ACK length does not match count"));
    }
    let mut ids = AckIds::new();
    for chunk in buf[ack::IDS..].chunks_exact(8) {
        let mut a = [0; 8];
        a.copy_from_slice(chunk);
        ids.push(u64::from_be_bytes(a));
    }
    Ok(Body::Ack(ids))
}

fn parse_handshake<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Body, WireError> {
    require_zero_data_fields(packet)?;
    if packet.header_len() != HANDSHAKE_HEADER_LEN {
        return Err(WireError::BadHeaderLength);
    }
    if packet.key_phase() {
        return Err(WireError::BadField("key phase on a handshake packet"));
    }
    use field::handshake;
    let buf = packet.as_bytes();
    let offset = be32_at(buf, handshake::OFFSET);
    let ack = be32_at(buf, handshake::ACK);
    let len = be16_at(buf, handshake::LEN);
    let kind = HandshakeKind(buf[handshake::KIND]);
    let flags = buf[handshake::FLAGS];
    if flags & !(HANDSHAKE_RETRY | HANDSHAKE_TOKEN) != 0 {
        return Err(WireError::BadField("handshake flags"));
    }
    if packet.payload().len() != usize::from(len) {
        return Err(WireError::BadField("handshake length"));
    }
    if u64::from(offset) + u64::from(len) > u64::from(u32::MAX) {
        return Err(WireError::BadField("handshake offset"));
    }
    Ok(Body::Handshake {
        offset,
        ack,
        len,
        kind,
        flags,
    })
}

fn emit_zero_data_fields<T: AsRef<[u8]> + AsMut<[u8]>>(packet: &mut Packet<T>) {
    packet.set_segment_offset(0);
    packet.set_message_len(0);
    packet.set_mss(0);
    packet.set_resend_index(0);
}

/// An ACK's count and message IDs.
fn emit_ack(ids: &[u64], buf: &mut [u8]) {
    use field::ack;
    buf[ack::COUNT].copy_from_slice(&(ids.len() as u16).to_be_bytes());
    buf[ack::RESERVED].fill(0);
    for (i, id) in ids.iter().enumerate() {
        let at = ack::IDS + 8 * i;
        buf[at..at + 8].copy_from_slice(&id.to_be_bytes());
    }
}

/// A HANDSHAKE's fields: its (offset, ack, length), kind and flags.
fn emit_handshake(
    (offset, ack, len): (u32, u32, u16),
    kind: HandshakeKind,
    flags: u8,
    buf: &mut [u8],
) {
    use field::handshake;
    buf[handshake::OFFSET].copy_from_slice(&offset.to_be_bytes());
    buf[handshake::ACK].copy_from_slice(&ack.to_be_bytes());
    buf[handshake::LEN].copy_from_slice(&len.to_be_bytes());
    buf[handshake::KIND] = kind.0;
    buf[handshake::FLAGS] = flags;
}

fn emit_control_body<T: AsRef<[u8]> + AsMut<[u8]>>(body: &Body, packet: &mut Packet<T>) {
    use field::{grant, resend};
    let buf = packet.inner_mut();
    match body {
        Body::Grant { offset, priority } => {
            buf[grant::OFFSET].copy_from_slice(&offset.to_be_bytes());
            buf[grant::PRIORITY] = *priority;
            buf[grant::RESERVED].fill(0);
        }
        Body::Resend {
            offset,
            length,
            priority,
        } => {
            buf[resend::OFFSET].copy_from_slice(&offset.to_be_bytes());
            buf[resend::LENGTH].copy_from_slice(&length.to_be_bytes());
            buf[resend::PRIORITY] = *priority;
            buf[resend::RESERVED].fill(0);
        }
        Body::Credit { limit, sequence } => {
            buf[field::credit::LIMIT].copy_from_slice(&limit.to_be_bytes());
            buf[field::credit::SEQUENCE].copy_from_slice(&sequence.to_be_bytes());
        }
        Body::Ack(ids) => emit_ack(ids.as_slice(), buf),
        Body::Handshake {
            offset,
            ack,
            len,
            kind,
            flags,
        } => emit_handshake((*offset, *ack, *len), *kind, *flags, buf),
        Body::RpcUnknown
        | Body::Busy
        | Body::Overloaded
        | Body::Abandoned
        | Body::NeedAck
        | Body::KeyUpdate
        | Body::Data(_) => {}
    }
}
