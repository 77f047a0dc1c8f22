-- Wireshark dissector for SMT, the Secure Message Transport.
--
-- Decodes every packet type and field of docs/protocol.md: the 28-byte
-- common header (TCP-shaped), the DATA extension with the TLS 1.3 records
-- its payload carries (where their boundaries are visible), the control
-- bodies (GRANT, RESEND, ACK with its ID list, KEY_UPDATE, HANDSHAKE) and
-- the 16-byte control-packet MAC; datagrams that hold several packets
-- (coalesced, docs/protocol.md section 2.1) are split by each packet's own
-- header, as a receiver splits them. Anything a receiver would drop is
-- flagged with expert info (smt.malformed says why).
--
-- SMT runs over UDP (registered on the ports of the "UDP ports"
-- preference, 7878 by default as `smt server`, and found heuristically on
-- any other port) and directly over IP (protocol 253 by default).
--
-- Install: tools/wireshark/install.sh (copies this file into
-- ~/.local/lib/wireshark/plugins). One-off: tshark -X lua_script:smt.lua
-- Records are encrypted; `smt dump` decrypts them with the key log
-- (docs/observability.md).

local smt = Proto("smt", "Secure Message Transport")

-- Preferences ---------------------------------------------------------------

smt.prefs.udp_ports = Pref.range("UDP ports", "7878",
    "UDP ports always decoded as SMT (smt server listens on 7878)", 65535)
smt.prefs.heuristic = Pref.bool("Find SMT on other UDP ports", true,
    "Decode UDP datagrams on any port whose packets all parse as SMT")
smt.prefs.ip_proto = Pref.uint("IP protocol number", 253,
    "SMT's own IP protocol number in raw-IP mode (smt --raw --ip-protocol)")
smt.prefs.tagged = Pref.bool("Control packets carry a MAC", true,
    "Config::authenticate_control (on by default): every control packet but HANDSHAKE ends in a 16-byte MAC")

-- Code points ------------------------------------------------------------------

local TYPE_DATA, TYPE_GRANT, TYPE_RESEND = 0x10, 0x11, 0x12
local TYPE_ACK, TYPE_KEY_UPDATE, TYPE_HANDSHAKE = 0x18, 0x19, 0x20
local TYPE_CREDIT = 0x1c

local type_names = {
    [0x10] = "DATA", [0x11] = "GRANT", [0x12] = "RESEND", [0x13] = "RPC_UNKNOWN",
    [0x14] = "BUSY", [0x17] = "NEED_ACK", [0x18] = "ACK", [0x19] = "KEY_UPDATE",
    [0x1a] = "OVERLOADED", [0x1b] = "ABANDONED", [0x1c] = "CREDIT", [0x20] = "HANDSHAKE",
}

-- The header length each type must declare (docs/protocol.md section 2).
local header_lens = {
    [0x10] = 44, [0x11] = 36, [0x12] = 40, [0x13] = 28, [0x14] = 28,
    [0x17] = 28, [0x18] = 32, [0x19] = 28, [0x1a] = 28, [0x1b] = 28, [0x1c] = 36, [0x20] = 40,
}

local kind_names = { [0] = "TLS 1.3", [1] = "0-RTT SMT-ticket", [2] = "PSK nonce exchange" }

local TAG_LEN = 16
local COMMON_LEN = 28
local DATA_LEN = 44
local MAX_SEGMENT_LEN = 65536
local ACK_MAX_IDS = 16

-- Fields ---------------------------------------------------------------------------

local F = {
    sport = ProtoField.uint16("smt.sport", "Source port"),
    dport = ProtoField.uint16("smt.dport", "Destination port"),
    port = ProtoField.uint16("smt.port", "Port"),
    seg_offset = ProtoField.uint32("smt.seg_offset", "Segment offset"),
    msg_len = ProtoField.uint32("smt.msg_len", "Message length (padded)"),
    doff = ProtoField.uint8("smt.doff", "Data offset byte", base.HEX),
    header_len = ProtoField.uint8("smt.header_len", "Header length"),
    doff_reserved = ProtoField.uint8("smt.doff_reserved", "Reserved bits", base.HEX, nil, 0x0e),
    key_phase = ProtoField.uint8("smt.key_phase", "Key phase", base.DEC, nil, 0x01),
    type = ProtoField.uint8("smt.type", "Type", base.HEX, type_names),
    mss = ProtoField.uint16("smt.mss", "MSS (payload per packet)"),
    checksum = ProtoField.uint16("smt.checksum", "Checksum (always 0)", base.HEX),
    resend_index = ProtoField.uint16("smt.resend_index", "Resend index"),
    id = ProtoField.uint64("smt.id", "Message ID", base.HEX),
    -- DATA extension
    pkt_index = ProtoField.uint16("smt.pkt_index", "Packet index"),
    flags = ProtoField.uint8("smt.flags", "Flags", base.HEX),
    retransmit = ProtoField.uint8("smt.retransmit", "RETRANSMIT", base.DEC, nil, 0x01),
    msg_priority = ProtoField.uint8("smt.msg_priority", "Message priority", base.DEC),
    msg_wire_len = ProtoField.uint32("smt.msg_wire_len", "Message wire length"),
    seg_len = ProtoField.uint32("smt.seg_len", "Segment length"),
    incoming = ProtoField.uint32("smt.incoming", "Incoming (sendable without grants)"),
    wire_offset = ProtoField.uint32("smt.wire_offset", "Wire offset of the payload"),
    payload_len = ProtoField.uint32("smt.payload_len", "Payload length"),
    payload = ProtoField.bytes("smt.payload", "Payload"),
    -- Records in a DATA payload
    record = ProtoField.bytes("smt.record", "TLS record"),
    record_type = ProtoField.uint8("smt.record.type", "Content type", base.HEX),
    record_version = ProtoField.uint16("smt.record.version", "Legacy version", base.HEX),
    record_length = ProtoField.uint16("smt.record.length", "Length"),
    record_wire_offset = ProtoField.uint32("smt.record.wire_offset", "Record starts at wire offset"),
    record_ciphertext = ProtoField.bytes("smt.record.ciphertext", "Encrypted record (ciphertext and tag)"),
    record_continued = ProtoField.bytes("smt.record.continued", "Rest of a record begun in an earlier packet"),
    -- Control bodies
    grant_offset = ProtoField.uint32("smt.grant_offset", "Grant offset"),
    priority = ProtoField.uint8("smt.priority", "Priority"),
    reserved = ProtoField.bytes("smt.reserved", "Reserved"),
    resend_offset = ProtoField.uint32("smt.resend_offset", "Resend offset"),
    resend_length = ProtoField.uint32("smt.resend_length", "Resend length"),
    credit_limit = ProtoField.uint32("smt.credit_limit", "Requests the receiver may have outstanding"),
    credit_sequence = ProtoField.uint32("smt.credit_sequence", "CREDIT sequence number"),
    ack_count = ProtoField.uint16("smt.ack_count", "ID count"),
    ack_id = ProtoField.uint64("smt.ack_id", "Acknowledged ID", base.HEX),
    key_update = ProtoField.string("smt.key_update", "KEY_UPDATE"),
    hs_offset = ProtoField.uint32("smt.hs_offset", "Stream offset"),
    hs_ack = ProtoField.uint32("smt.hs_ack", "Stream ACK"),
    hs_len = ProtoField.uint16("smt.hs_len", "Data length"),
    hs_kind = ProtoField.uint8("smt.hs_kind", "Handshake kind", base.DEC, kind_names),
    hs_flags = ProtoField.uint8("smt.hs_flags", "Flags", base.HEX),
    hs_retry = ProtoField.uint8("smt.hs_retry", "RETRY", base.DEC, nil, 0x01),
    hs_token_flag = ProtoField.uint8("smt.hs_token_flag", "TOKEN", base.DEC, nil, 0x02),
    hs_data = ProtoField.bytes("smt.hs_data", "Handshake data"),
    hs_token_len = ProtoField.uint8("smt.hs_token_len", "Token length"),
    hs_token = ProtoField.bytes("smt.hs_token", "Retry token"),
    hs_token_issued = ProtoField.uint32("smt.hs_token_issued", "Token issued (responder ms)"),
    hs_token_mac = ProtoField.bytes("smt.hs_token_mac", "Token MAC"),
    tag = ProtoField.bytes("smt.tag", "Control MAC"),
    -- Where the packet sits in its datagram
    packet_len = ProtoField.uint32("smt.packet_len", "Packet length"),
    packet_number = ProtoField.uint16("smt.packet_number", "Packet in datagram"),
    malformed = ProtoField.string("smt.malformed", "Malformed"),
}
local field_list = {}
for _, f in pairs(F) do table.insert(field_list, f) end
smt.fields = field_list

local E = {
    malformed = ProtoExpert.new("smt.expert.malformed", "Malformed SMT packet",
        expert.group.MALFORMED, expert.severity.ERROR),
    retransmission = ProtoExpert.new("smt.expert.retransmission", "Retransmitted DATA packet",
        expert.group.SEQUENCE, expert.severity.NOTE),
    coalesced = ProtoExpert.new("smt.expert.coalesced", "Coalesced datagram",
        expert.group.SEQUENCE, expert.severity.CHAT),
}
smt.experts = { E.malformed, E.retransmission, E.coalesced }

-- Helpers --------------------------------------------------------------------------

local band, rshift = bit32.band, bit32.rshift

--- The length of the packet at `off` (at most `avail` bytes), from its own
--- header, as wire::first_packet_len computes it; nil and a reason when it
--- cannot be computed.
local function packet_len(tvb, off, avail, tagged)
    if avail < COMMON_LEN then return nil, "packet truncated" end
    local hl = rshift(tvb(off + 12, 1):uint(), 4) * 4
    if hl < COMMON_LEN then return nil, "bad header length" end
    if avail < hl then return nil, "packet truncated" end
    local ty = tvb(off + 13, 1):uint()
    local tag = 0
    if ty == TYPE_KEY_UPDATE or (tagged and ty ~= TYPE_DATA) then tag = TAG_LEN end
    local len
    if ty == TYPE_DATA then
        if hl ~= DATA_LEN then return nil, "bad header length" end
        local index = tvb(off + 18, 2):uint()
        if index == 0 then index = tvb(off + 28, 2):uint() end
        local mss, seg = tvb(off + 14, 2):uint(), tvb(off + 36, 4):uint()
        local start = index * mss
        if mss == 0 or start >= seg then return nil, "invalid field: packet index beyond segment" end
        len = hl + math.min(mss, seg - start)
    elseif ty == TYPE_ACK then
        if avail < COMMON_LEN + 2 then return nil, "packet truncated" end
        local count = tvb(off + 28, 2):uint()
        if count == 0 or count > ACK_MAX_IDS then return nil, "invalid field: ACK count" end
        len = hl + 8 * count + tag
    elseif ty == TYPE_HANDSHAKE then
        if avail < COMMON_LEN + 10 then return nil, "packet truncated" end
        len = hl + tvb(off + 36, 2):uint()
    else
        len = hl + tag
    end
    if len > avail then return nil, "packet truncated" end
    return len
end

--- Why Repr::parse would refuse the packet (its bytes without the MAC),
--- or nil.
local function check(tvb, off, len)
    local doff = tvb(off + 12, 1):uint()
    local hl = rshift(doff, 4) * 4
    local ty = tvb(off + 13, 1):uint()
    if band(doff, 0x0e) ~= 0 or tvb(off + 16, 2):uint() ~= 0 then
        return "invalid field: reserved header bits"
    end
    if not type_names[ty] then
        return string.format("unknown packet type PacketType(0x%02x)", ty)
    end
    if ty ~= TYPE_DATA then
        local zero = tvb(off + 4, 4):uint() == 0 and tvb(off + 8, 4):uint() == 0
            and tvb(off + 14, 2):uint() == 0 and tvb(off + 18, 2):uint() == 0
        if not zero then return "invalid field: DATA-only field set on a control packet" end
    end
    if hl ~= header_lens[ty] then return "bad header length" end
    if ty == TYPE_DATA then
        local flags = tvb(off + 30, 1):uint()
        if band(flags, 0xfe) ~= 0 then return "invalid field: unknown DATA flags" end
        local retransmit = band(flags, 0x01) ~= 0
        local pkt, resend = tvb(off + 28, 2):uint(), tvb(off + 18, 2):uint()
        if retransmit and pkt ~= 0 then return "invalid field: retransmission with non-zero packet index" end
        if not retransmit and resend ~= 0 then return "invalid field: resend index on a first transmission" end
        local index = retransmit and resend or pkt
        local seg_off, msg_len = tvb(off + 4, 4):uint(), tvb(off + 8, 4):uint()
        local mss, wire = tvb(off + 14, 2):uint(), tvb(off + 32, 4):uint()
        local seg, incoming = tvb(off + 36, 4):uint(), tvb(off + 40, 4):uint()
        if mss == 0 or seg == 0 then return "invalid field: empty segment or zero mss" end
        if seg > MAX_SEGMENT_LEN then return "invalid field: segment longer than 64 KiB" end
        if mss > seg then return "invalid field: mss larger than the segment" end
        if seg_off + seg > wire then return "invalid field: segment beyond message" end
        if msg_len >= wire then return "invalid field: message length exceeds wire length" end
        if index * mss >= seg then return "invalid field: packet index beyond segment" end
        if incoming > wire then return "invalid field: incoming beyond message" end
        local payload = math.min(mss, seg - index * mss)
        if seg_off + index * mss + payload > incoming then return "invalid field: packet beyond incoming" end
        if len - DATA_LEN ~= payload then return "invalid field: payload length does not match segment layout" end
    elseif ty == TYPE_HANDSHAKE then
        if band(doff, 0x01) ~= 0 then return "invalid field: key phase on a handshake packet" end
        local flags = tvb(off + 39, 1):uint()
        if band(flags, 0xfc) ~= 0 then return "invalid field: handshake flags" end
        local hs_len, offset = tvb(off + 36, 2):uint(), tvb(off + 28, 4):uint()
        if len - 40 ~= hs_len then return "invalid field: handshake length" end
        if offset + hs_len > 4294967295 then return "invalid field: handshake offset" end
    elseif ty == TYPE_ACK then
        local count = tvb(off + 28, 2):uint()
        if tvb(off + 30, 2):uint() ~= 0 then return "invalid field: reserved bytes set" end
        if count == 0 or count > ACK_MAX_IDS then return "invalid field: ACK count" end
        if len ~= 32 + 8 * count then return "invalid field: ACK length does not match count" end
    else
        if ty == TYPE_GRANT and tvb(off + 33, 3):uint() ~= 0 then return "invalid field: reserved bytes set" end
        if ty == TYPE_RESEND and tvb(off + 37, 3):uint() ~= 0 then return "invalid field: reserved bytes set" end
        if len ~= hl then return "invalid field: trailing bytes after control packet" end
    end
    return nil
end

-- Record boundaries: per message (addresses, ports, phase, ID), the wire
-- offsets where records are known to start, learnt on the first pass from
-- segment starts and from each record header's length.
local record_starts = {}

local function message_key(pinfo, tvb, off)
    return table.concat({ tostring(pinfo.src), tostring(pinfo.dst), tvb(off, 4):uint(),
        band(tvb(off + 12, 1):uint(), 1), tostring(tvb(off + 20, 8):uint64()) }, "/")
end

local function add_records(tree, tvb, pinfo, off, wire_offset, payload_len, seg_off, seg_len)
    local key = message_key(pinfo, tvb, off)
    local wire_len = tvb(off + 32, 4):uint()
    local starts = record_starts[key]
    -- IDs repeat in every key epoch: other lengths are another message.
    if not starts or starts.wire_len ~= wire_len then
        starts = { wire_len = wire_len }
        record_starts[key] = starts
    end
    starts[seg_off] = true
    local first_start = nil
    for s, _ in pairs(starts) do
        if type(s) == "number" and s >= wire_offset and s < wire_offset + payload_len and (not first_start or s < first_start) then
            first_start = s
        end
    end
    local base = off + DATA_LEN
    if not first_start then
        tree:add(F.record_continued, tvb(base, payload_len))
        return
    end
    if first_start > wire_offset then
        tree:add(F.record_continued, tvb(base, first_start - wire_offset))
    end
    local s = first_start
    while s < wire_offset + payload_len do
        local p = s - wire_offset
        local avail = payload_len - p
        if avail < 5 then
            tree:add(F.record, tvb(base + p, avail)):append_text(" (header continues in the next packet)")
            break
        end
        local rlen = tvb(base + p + 3, 2):uint()
        local whole = 5 + rlen
        local here = math.min(whole, avail)
        local rtree = tree:add(F.record, tvb(base + p, here))
        rtree:set_text(string.format("TLS record at wire offset %d, %d bytes%s", s, whole,
            here < whole and " (continues in the next packet)" or ""))
        rtree:add(F.record_wire_offset, s):set_generated()
        rtree:add(F.record_type, tvb(base + p, 1))
        rtree:add(F.record_version, tvb(base + p + 1, 2))
        rtree:add(F.record_length, tvb(base + p + 3, 2))
        if here > 5 then rtree:add(F.record_ciphertext, tvb(base + p + 5, here - 5)) end
        local next_start = s + whole
        if next_start < seg_off + seg_len then starts[next_start] = true end
        s = next_start
    end
end

-- One packet ------------------------------------------------------------------------

local function add_common(tree, tvb, off)
    tree:add(F.sport, tvb(off, 2))
    tree:add(F.dport, tvb(off + 2, 2))
    tree:add(F.seg_offset, tvb(off + 4, 4))
    tree:add(F.msg_len, tvb(off + 8, 4))
    local doff = tree:add(F.doff, tvb(off + 12, 1))
    doff:add(F.header_len, tvb(off + 12, 1), rshift(tvb(off + 12, 1):uint(), 4) * 4)
    doff:add(F.doff_reserved, tvb(off + 12, 1))
    doff:add(F.key_phase, tvb(off + 12, 1))
    tree:add(F.type, tvb(off + 13, 1))
    tree:add(F.mss, tvb(off + 14, 2))
    tree:add(F.checksum, tvb(off + 16, 2))
    tree:add(F.resend_index, tvb(off + 18, 2))
    tree:add(F.id, tvb(off + 20, 8))
end

local function add_data(tree, tvb, pinfo, off, len)
    tree:add(F.pkt_index, tvb(off + 28, 2))
    local flags = tree:add(F.flags, tvb(off + 30, 1))
    flags:add(F.retransmit, tvb(off + 30, 1))
    tree:add(F.msg_priority, tvb(off + 31, 1))
    tree:add(F.msg_wire_len, tvb(off + 32, 4))
    tree:add(F.seg_len, tvb(off + 36, 4))
    tree:add(F.incoming, tvb(off + 40, 4))
    local retransmit = band(tvb(off + 30, 1):uint(), 1) ~= 0
    local index = retransmit and tvb(off + 18, 2):uint() or tvb(off + 28, 2):uint()
    local seg_off, mss, seg = tvb(off + 4, 4):uint(), tvb(off + 14, 2):uint(), tvb(off + 36, 4):uint()
    local wire_offset = seg_off + index * mss
    local payload_len = len - DATA_LEN
    tree:add(F.wire_offset, wire_offset):set_generated()
    tree:add(F.payload_len, payload_len):set_generated()
    if retransmit then
        tree:add_proto_expert_info(E.retransmission,
            string.format("Retransmission of packet %d of the segment at %d", index, seg_off))
    end
    if payload_len > 0 then
        local ptree = tree:add(F.payload, tvb(off + DATA_LEN, payload_len))
        add_records(ptree, tvb, pinfo, off, wire_offset, payload_len, seg_off, seg)
    end
    return string.format("DATA id=%s len=%d bytes %d-%d%s", tostring(tvb(off + 20, 8):uint64()),
        tvb(off + 8, 4):uint(), wire_offset, wire_offset + payload_len, retransmit and " RETRANSMIT" or "")
end

--- HANDSHAKE data: a RETRY's token (issued, MAC), the token a TOKEN
--- opening carries before its stream bytes, or stream bytes.
local function add_handshake_data(tree, tvb, off, len)
    local at, n = off + 40, len - 40
    local flags = tvb(off + 39, 1):uint()
    if band(flags, 0x01) ~= 0 and n == 20 then
        local t = tree:add(F.hs_token, tvb(at, n))
        t:add(F.hs_token_issued, tvb(at, 4))
        t:add(F.hs_token_mac, tvb(at + 4, 16))
        return
    end
    if band(flags, 0x02) ~= 0 and tvb(off + 28, 4):uint() == 0 then
        local token = tvb(at, 1):uint()
        tree:add(F.hs_token_len, tvb(at, 1))
        if 1 + token <= n then
            if token > 0 then tree:add(F.hs_token, tvb(at + 1, token)) end
            at, n = at + 1 + token, n - 1 - token
        end
    end
    if n > 0 then tree:add(F.hs_data, tvb(at, n)) end
end

local function add_body(tree, tvb, pinfo, off, len, ty)
    local id = tostring(tvb(off + 20, 8):uint64())
    if ty == TYPE_DATA then
        return add_data(tree, tvb, pinfo, off, len)
    elseif ty == TYPE_GRANT then
        tree:add(F.grant_offset, tvb(off + 28, 4))
        tree:add(F.priority, tvb(off + 32, 1))
        tree:add(F.reserved, tvb(off + 33, 3))
        return string.format("GRANT id=%s offset=%d", id, tvb(off + 28, 4):uint())
    elseif ty == TYPE_RESEND then
        tree:add(F.resend_offset, tvb(off + 28, 4))
        tree:add(F.resend_length, tvb(off + 32, 4))
        tree:add(F.priority, tvb(off + 36, 1))
        tree:add(F.reserved, tvb(off + 37, 3))
        local o = tvb(off + 28, 4):uint()
        return string.format("RESEND id=%s bytes %d-%d", id, o, o + tvb(off + 32, 4):uint())
    elseif ty == TYPE_CREDIT then
        tree:add(F.credit_limit, tvb(off + 28, 4))
        tree:add(F.credit_sequence, tvb(off + 32, 4))
        return string.format("CREDIT limit=%d sequence=%d", tvb(off + 28, 4):uint(), tvb(off + 32, 4):uint())
    elseif ty == TYPE_ACK then
        tree:add(F.ack_count, tvb(off + 28, 2))
        tree:add(F.reserved, tvb(off + 30, 2))
        local ids = {}
        local n = math.min(tvb(off + 28, 2):uint(), math.floor((len - 32) / 8))
        for i = 0, n - 1 do
            tree:add(F.ack_id, tvb(off + 32 + 8 * i, 8))
            table.insert(ids, tostring(tvb(off + 32 + 8 * i, 8):uint64()))
        end
        return "ACK " .. table.concat(ids, ",")
    elseif ty == TYPE_KEY_UPDATE then
        local what = tvb(off + 20, 8):uint64() == UInt64(1) and "confirm" or "announce"
        tree:add(F.key_update, what):set_generated()
        return "KEY_UPDATE " .. what
    elseif ty == TYPE_HANDSHAKE then
        tree:add(F.hs_offset, tvb(off + 28, 4))
        tree:add(F.hs_ack, tvb(off + 32, 4))
        tree:add(F.hs_len, tvb(off + 36, 2))
        tree:add(F.hs_kind, tvb(off + 38, 1))
        local flags = tree:add(F.hs_flags, tvb(off + 39, 1))
        flags:add(F.hs_retry, tvb(off + 39, 1))
        flags:add(F.hs_token_flag, tvb(off + 39, 1))
        if len > 40 then add_handshake_data(tree, tvb, off, len) end
        local kind = tvb(off + 38, 1):uint()
        return string.format("HANDSHAKE %s offset=%d ack=%d len=%d", kind_names[kind] or ("kind " .. kind),
            tvb(off + 28, 4):uint(), tvb(off + 32, 4):uint(), tvb(off + 36, 2):uint())
    end
    return string.format("%s id=%s", type_names[ty] or string.format("0x%02x", ty), id)
end

--- Dissects the packet at `off` of `len` bytes (tag included); returns a
--- one-line summary.
local function dissect_packet(tvb, pinfo, root, off, len, number, why_unmeasured)
    local tree = root:add(smt, tvb(off, len))
    tree:add(F.packet_number, number):set_generated()
    tree:add(F.packet_len, len):set_generated()
    local function malformed(why)
        tree:add(F.malformed, why):set_generated()
        tree:add_proto_expert_info(E.malformed, why)
        tree:append_text(" [Malformed: " .. why .. "]")
        return "Malformed: " .. why
    end
    if len < COMMON_LEN or rshift(tvb(off + 12, 1):uint(), 4) * 4 < COMMON_LEN
        or rshift(tvb(off + 12, 1):uint(), 4) * 4 > len then
        if len >= 14 then tree:add(F.type, tvb(off + 13, 1)) end
        return malformed(why_unmeasured or "packet truncated")
    end
    add_common(tree, tvb, off)
    local ty = tvb(off + 13, 1):uint()
    if why_unmeasured then return malformed(why_unmeasured) end
    local body_len = len
    local tagged = ty == TYPE_KEY_UPDATE or (smt.prefs.tagged and ty ~= TYPE_DATA and ty ~= TYPE_HANDSHAKE)
    if tagged and type_names[ty] then
        body_len = len - TAG_LEN
        tree:add(F.tag, tvb(off + body_len, TAG_LEN))
    end
    local why = check(tvb, off, body_len)
    local summary = add_body(tree, tvb, pinfo, off, body_len, ty)
    tree:append_text(", " .. summary)
    if why then return malformed(why) end
    return summary
end

--- Splits a datagram into its packets and dissects each; returns the
--- number of packets.
local function dissect_datagram(tvb, pinfo, root)
    local total = tvb:len()
    local off, number, summaries = 0, 0, {}
    while off < total do
        local len, why = packet_len(tvb, off, total - off, smt.prefs.tagged)
        if not len then len = total - off end
        table.insert(summaries, dissect_packet(tvb, pinfo, root, off, len, number, why))
        off = off + len
        number = number + 1
    end
    pinfo.cols.protocol = "SMT"
    pinfo.cols.info = table.concat(summaries, "; ")
    return number
end

function smt.dissector(tvb, pinfo, root)
    if tvb:len() == 0 then return 0 end
    dissect_datagram(tvb, pinfo, root)
    return tvb:len()
end

--- Whether a UDP payload is SMT: every packet's length computes, the
--- packets tile the datagram, and each has a known type, its type's
--- header length, zero reserved bits and a zero checksum.
local function looks_like_smt(tvb)
    local total = tvb:len()
    if total < COMMON_LEN then return false end
    local off = 0
    while off < total do
        local len = packet_len(tvb, off, total - off, smt.prefs.tagged)
        if not len then return false end
        local ty = tvb(off + 13, 1):uint()
        local hl = rshift(tvb(off + 12, 1):uint(), 4) * 4
        if not type_names[ty] or header_lens[ty] ~= hl then return false end
        if band(tvb(off + 12, 1):uint(), 0x0e) ~= 0 or tvb(off + 16, 2):uint() ~= 0 then return false end
        off = off + len
    end
    return true
end

local function heuristic(tvb, pinfo, root)
    if not smt.prefs.heuristic or not looks_like_smt(tvb) then return false end
    pinfo.conversation = smt
    smt.dissector(tvb, pinfo, root)
    return true
end

-- Registration ---------------------------------------------------------------------

local registered_ports = nil
local registered_proto = nil

local function register()
    local udp = DissectorTable.get("udp.port")
    if registered_ports then udp:remove(registered_ports, smt) end
    registered_ports = smt.prefs.udp_ports
    udp:add(registered_ports, smt)
    local ip = DissectorTable.get("ip.proto")
    if registered_proto then ip:remove(registered_proto, smt) end
    registered_proto = smt.prefs.ip_proto
    ip:add(registered_proto, smt)
end

function smt.init()
    record_starts = {}
end

function smt.prefs_changed()
    register()
end

register()
smt:register_heuristic("udp", heuristic)
