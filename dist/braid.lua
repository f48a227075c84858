-- Wireshark / tshark dissector for braid's wire format (crates/braid-core/src/wire/).
--
--   wireshark -X lua_script:dist/braid.lua capture.pcap
--   tshark -X lua_script:dist/braid.lua -r capture.pcap -Y braid.data
--
-- or copy it to ~/.local/lib/wireshark/plugins/. It registers on UDP port 7447 (the port of
-- `braid sim --pcap` captures; Preferences → Protocols → BRAID to change it) and under
-- "Decode As…" → UDP port → BRAID for any other port.
--
-- Format (wire version 2):
--   packet = header frame*
--   header = first:u8 (version << 4) path:varint seq:varint timestamp:u32 (µs, low 32 bits)
--   varint = QUIC style: the two high bits give the length (1, 2, 4, 8 bytes), shortest form
--   frames: 0x00 PADDING, 0x01 PING, 0x02 ACK cum ts_echo:u32 ranges,
--           0x03 DATA_ACK cum window ranges, 0x04 DATA / 0x05 DATA_FIN dsn len bytes[len],
--           0x06 ADD_ADDR id:u8 flags:u8 family:u8 (4|6) addr port:u16,
--           0x07 REMOVE_ADDR id:u8 before, 0x08 PATH_OPEN local:u8 remote:u8 flags:u8,
--           0x09 PATH_PRIO path flags:u8, 0x0a PATH_CLOSE path reason, 0x0b CLOSE code
--   flags = 0x01 backup; PATH_PRIO also 0x02 duplicate (the path carries a copy of the stream)
--   0x04 reinject (resend what is outstanding on the path over the others) and 0x08 watch
--   (resend it as soon as the path's acknowledgements stop)
--   ranges = count (gap len){count}: start = previous end + 1 + gap (the first: cum + 1 +
--            gap), end = start + 1 + len, half-open [start, end)
--
-- Malformed input (truncated frames, unknown types, non-canonical integers, bad ranges) is
-- marked with an expert item ("_ws.malformed" style, braid.malformed) and never raises.

local braid = Proto("braid", "braid multipath transport")

local VERSION = 2
local DEFAULT_PORT = 7447
local MAX_ACK_RANGES = 32

local frame_names = {
    [0x00] = "PADDING",
    [0x01] = "PING",
    [0x02] = "ACK",
    [0x03] = "DATA_ACK",
    [0x04] = "DATA",
    [0x05] = "DATA_FIN",
    [0x06] = "ADD_ADDR",
    [0x07] = "REMOVE_ADDR",
    [0x08] = "PATH_OPEN",
    [0x09] = "PATH_PRIO",
    [0x0a] = "PATH_CLOSE",
    [0x0b] = "CLOSE",
}

local f = {
    version = ProtoField.uint8("braid.version", "Version", base.DEC, nil, 0xf0),
    reserved = ProtoField.uint8("braid.reserved", "Reserved", base.HEX, nil, 0x0f),
    path = ProtoField.uint64("braid.path", "Path", base.DEC),
    seq = ProtoField.uint64("braid.seq", "Packet number", base.DEC),
    timestamp = ProtoField.uint32("braid.timestamp", "Timestamp (µs)", base.DEC),
    frame = ProtoField.none("braid.frame", "Frame"),
    frame_type = ProtoField.uint8("braid.frame.type", "Frame type", base.HEX, frame_names),
    padding_len = ProtoField.uint32("braid.padding.len", "Padding bytes", base.DEC),
    ack_cum = ProtoField.uint64("braid.ack.cum", "Cumulative ack (next packet number)", base.DEC),
    ack_ts_echo = ProtoField.uint32("braid.ack.ts_echo", "Timestamp echo (µs)", base.DEC),
    data_ack_cum = ProtoField.uint64("braid.data_ack.cum", "Cumulative data ack (next DSN)", base.DEC),
    data_ack_window = ProtoField.uint64("braid.data_ack.window", "Receive window (bytes)", base.DEC),
    range_count = ProtoField.uint64("braid.ranges", "Ranges", base.DEC),
    range = ProtoField.none("braid.range", "Range"),
    range_gap = ProtoField.uint64("braid.range.gap", "Gap", base.DEC),
    range_len = ProtoField.uint64("braid.range.len", "Length - 1", base.DEC),
    range_start = ProtoField.uint64("braid.range.start", "Start", base.DEC),
    range_end = ProtoField.uint64("braid.range.end", "End (exclusive)", base.DEC),
    data_dsn = ProtoField.uint64("braid.data.dsn", "Data sequence number (stream offset)", base.DEC),
    data_len = ProtoField.uint64("braid.data.len", "Length", base.DEC),
    data_end = ProtoField.uint64("braid.data.end", "Next DSN", base.DEC),
    data_fin = ProtoField.bool("braid.data.fin", "End of stream"),
    data_payload = ProtoField.bytes("braid.data.payload", "Payload"),
    addr_id = ProtoField.uint8("braid.addr.id", "Address id", base.DEC),
    flags = ProtoField.uint8("braid.flags", "Flags", base.HEX),
    backup = ProtoField.bool("braid.backup", "Backup", 8, nil, 0x01),
    duplicate = ProtoField.bool("braid.duplicate", "Duplicate (carries a copy of the stream)", 8, nil, 0x02),
    reinject = ProtoField.bool("braid.reinject", "Reinject (resend what is outstanding on the path)", 8, nil, 0x04),
    watch = ProtoField.bool("braid.watch", "Watch (resend what is outstanding once the path's ACKs stop)", 8, nil, 0x08),
    addr_family = ProtoField.uint8("braid.addr.family", "Family", base.DEC),
    addr_ipv4 = ProtoField.ipv4("braid.addr.ipv4", "Address"),
    addr_ipv6 = ProtoField.ipv6("braid.addr.ipv6", "Address"),
    addr_port = ProtoField.uint16("braid.addr.port", "Port", base.DEC),
    remove_before = ProtoField.uint64("braid.remove_addr.before", "Sender's next path id", base.DEC),
    open_local = ProtoField.uint8("braid.path_open.local", "Sender's address id", base.DEC),
    open_remote = ProtoField.uint8("braid.path_open.remote", "Receiver's address id", base.DEC),
    prio_path = ProtoField.uint64("braid.path_prio.path", "Path", base.DEC),
    close_path = ProtoField.uint64("braid.path_close.path", "Path", base.DEC),
    close_reason = ProtoField.uint64("braid.path_close.reason", "Reason", base.DEC),
    close_code = ProtoField.uint64("braid.close.code", "Error code", base.DEC),
}
braid.fields = {}
for _, v in pairs(f) do
    table.insert(braid.fields, v)
end

local e_malformed = ProtoExpert.new("braid.malformed", "Malformed braid packet",
    expert.group.MALFORMED, expert.severity.ERROR)
braid.experts = { e_malformed }

braid.prefs.port = Pref.uint("UDP port", DEFAULT_PORT, "UDP port decoded as braid")

-- A parse failure: carries the reason; raised inside the dissector, caught in dissect().
local Malformed = {}
local function fail(reason)
    error(setmetatable({ reason = reason }, Malformed), 0)
end

local U62_MAX = UInt64.new(0xffffffff, 0x3fffffff)

-- A cursor over the UDP payload.
local function reader(tvb)
    local r = { tvb = tvb, pos = 0, len = tvb:len() }

    function r:need(n)
        if self.pos + n > self.len then
            fail("truncated")
        end
    end

    -- The next n bytes as a range (nil when n is 0).
    function r:bytes(n)
        self:need(n)
        if n == 0 then
            return nil
        end
        local range = self.tvb(self.pos, n)
        self.pos = self.pos + n
        return range
    end

    -- An n-byte big-endian unsigned integer and its range.
    function r:uint(n)
        local range = self:bytes(n)
        return range:uint(), range
    end

    function r:u8() return self:uint(1) end
    function r:u16() return self:uint(2) end
    function r:u32() return self:uint(4) end

    -- A varint as UInt64 and its range; only the shortest encoding is valid.
    function r:varint()
        self:need(1)
        local first = self.tvb(self.pos, 1):uint()
        local n = bit.lshift(1, bit.rshift(first, 6))
        self:need(n)
        local range = self.tvb(self.pos, n)
        local v
        if n == 8 then
            v = range:uint64():band(U62_MAX)
        else
            local masks = { [1] = 0x3f, [2] = 0x3fff, [4] = 0x3fffffff }
            v = UInt64.new(bit.band(range:uint(), masks[n]))
        end
        local shortest
        if v < UInt64.new(64) then
            shortest = 1
        elseif v < UInt64.new(16384) then
            shortest = 2
        elseif v < UInt64.new(0x40000000) then
            shortest = 4
        else
            shortest = 8
        end
        if shortest ~= n then
            fail("integer not in its shortest encoding")
        end
        self.pos = self.pos + n
        return v, range
    end

    return r
end

-- `prio`: PATH_PRIO's flags, which also have the duplicate (0x02), reinject (0x04) and watch
-- (0x08) bits.
local function flags_item(tree, r, prio)
    local v, range = r:u8()
    local t = tree:add(f.flags, range)
    t:add(f.backup, range)
    local reserved = 0xfe
    if prio then
        t:add(f.duplicate, range)
        t:add(f.reinject, range)
        t:add(f.watch, range)
        reserved = 0xf0
    end
    if bit.band(v, reserved) ~= 0 then
        fail("reserved flag bits set")
    end
    return bit.band(v, 1) ~= 0, bit.band(v, 2) ~= 0, bit.band(v, 4) ~= 0, bit.band(v, 8) ~= 0
end

local function ranges(tree, r, cum)
    local count, crange = r:varint()
    local ct = tree:add(f.range_count, crange, count)
    if count > UInt64.new(MAX_ACK_RANGES) then
        fail("more than " .. MAX_ACK_RANGES .. " acknowledgement ranges")
    end
    local prev = cum
    local shown = {}
    for _ = 1, tonumber(tostring(count)) do
        local start_pos = r.pos
        local gap, grange = r:varint()
        local len, lrange = r:varint()
        local s = prev + 1 + gap
        local e = s + 1 + len
        if s <= prev or e <= s or e > U62_MAX then
            fail("malformed acknowledgement ranges")
        end
        local rt = ct:add(f.range, r.tvb(start_pos, r.pos - start_pos))
        rt:set_text(string.format("Range [%s, %s)", tostring(s), tostring(e)))
        rt:add(f.range_gap, grange, gap)
        rt:add(f.range_len, lrange, len)
        rt:add(f.range_start, grange, s):set_generated()
        rt:add(f.range_end, lrange, e):set_generated()
        table.insert(shown, tostring(s) .. "-" .. tostring(e))
        prev = e
    end
    if #shown > 0 then
        return " ranges " .. table.concat(shown, ",")
    end
    return ""
end

-- One frame at r.pos; returns its summary for the Info column.
local function frame(tree, r)
    local start = r.pos
    local ft = tree:add(f.frame, r.tvb(start, 1))
    local ty, trange = r:u8()
    ft:add(f.frame_type, trange)
    local name = frame_names[ty]
    if name == nil then
        ft:set_text(string.format("Frame: unknown type 0x%02x", ty))
        fail(string.format("unknown frame type 0x%02x", ty))
    end
    local info = name
    if ty == 0x00 then
        local n = 1
        while r.pos < r.len and r.tvb(r.pos, 1):uint() == 0 do
            r.pos = r.pos + 1
            n = n + 1
        end
        ft:add(f.padding_len, r.tvb(start, n), n)
        info = "PADDING " .. n
    elseif ty == 0x02 then
        local cum, crange = r:varint()
        ft:add(f.ack_cum, crange, cum)
        local _, erange = r:u32()
        ft:add(f.ack_ts_echo, erange)
        info = "ACK cum " .. tostring(cum) .. ranges(ft, r, cum)
    elseif ty == 0x03 then
        local cum, crange = r:varint()
        ft:add(f.data_ack_cum, crange, cum)
        local win, wrange = r:varint()
        ft:add(f.data_ack_window, wrange, win)
        info = "DATA_ACK cum " .. tostring(cum) .. " win " .. tostring(win) .. ranges(ft, r, cum)
    elseif ty == 0x04 or ty == 0x05 then
        local dsn, drange = r:varint()
        ft:add(f.data_dsn, drange, dsn)
        local len, lrange = r:varint()
        ft:add(f.data_len, lrange, len)
        local fin = ty == 0x05
        ft:add(f.data_fin, trange, fin)
        if len > UInt64.new(r.len - r.pos) then
            fail("truncated")
        end
        local n = tonumber(tostring(len))
        local payload = r:bytes(n)
        if n > 0 then
            ft:add(f.data_payload, payload)
        end
        local e = dsn + len
        if e > U62_MAX then
            fail("value out of range")
        end
        ft:add(f.data_end, lrange, e):set_generated()
        info = string.format("%s dsn %s len %d", name, tostring(dsn), n)
    elseif ty == 0x06 then
        local id, irange = r:u8()
        ft:add(f.addr_id, irange)
        local backup = flags_item(ft, r)
        local fam, frange = r:u8()
        ft:add(f.addr_family, frange)
        local addr
        if fam == 4 then
            local a = r:bytes(4)
            ft:add(f.addr_ipv4, a)
            addr = tostring(a:ipv4())
        elseif fam == 6 then
            local a = r:bytes(16)
            ft:add(f.addr_ipv6, a)
            addr = "[" .. tostring(a:ipv6()) .. "]"
        else
            fail("unknown address family " .. fam)
        end
        local port, prange = r:u16()
        ft:add(f.addr_port, prange)
        info = string.format("ADD_ADDR id %d %s:%d%s", id, addr, port, backup and " backup" or "")
    elseif ty == 0x07 then
        local id, irange = r:u8()
        ft:add(f.addr_id, irange)
        local before, brange = r:varint()
        ft:add(f.remove_before, brange, before)
        info = string.format("REMOVE_ADDR id %d before path %s", id, tostring(before))
    elseif ty == 0x08 then
        local l, lrange = r:u8()
        ft:add(f.open_local, lrange)
        local rm, rrange = r:u8()
        ft:add(f.open_remote, rrange)
        local backup = flags_item(ft, r)
        info = string.format("PATH_OPEN addr %d→%d%s", l, rm, backup and " backup" or "")
    elseif ty == 0x09 then
        local p, prange = r:varint()
        ft:add(f.prio_path, prange, p)
        local backup, duplicate, reinject, watch = flags_item(ft, r, true)
        info = "PATH_PRIO path " .. tostring(p) .. (backup and " backup" or " active")
            .. (duplicate and " duplicate" or "") .. (reinject and " reinject" or "")
            .. (watch and " watch" or "")
    elseif ty == 0x0a then
        local p, prange = r:varint()
        ft:add(f.close_path, prange, p)
        local reason, rrange = r:varint()
        ft:add(f.close_reason, rrange, reason)
        info = "PATH_CLOSE path " .. tostring(p) .. " reason " .. tostring(reason)
    elseif ty == 0x0b then
        local code, crange = r:varint()
        ft:add(f.close_code, crange, code)
        info = "CLOSE code " .. tostring(code)
    end
    ft:set_len(r.pos - start)
    ft:set_text("Frame: " .. info)
    return info
end

function braid.dissector(tvb, pinfo, tree)
    local len = tvb:len()
    if len == 0 then
        return 0
    end
    pinfo.cols.protocol = "BRAID"
    local t = tree:add(braid, tvb(), "braid")
    local r = reader(tvb)
    local infos = {}
    local ok, err = pcall(function()
        local first, frange = r:u8()
        t:add(f.version, frange)
        t:add(f.reserved, frange)
        if bit.rshift(first, 4) ~= VERSION then
            fail("unsupported wire version " .. bit.rshift(first, 4))
        end
        if bit.band(first, 0x0f) ~= 0 then
            fail("reserved header bits set")
        end
        local path, prange = r:varint()
        t:add(f.path, prange, path)
        local seq, srange = r:varint()
        t:add(f.seq, srange, seq)
        local _, tsrange = r:u32()
        t:add(f.timestamp, tsrange)
        t:append_text(string.format(", path %s, seq %s", tostring(path), tostring(seq)))
        table.insert(infos, string.format("path %s seq %s", tostring(path), tostring(seq)))
        while r.pos < r.len do
            table.insert(infos, frame(t, r))
        end
    end)
    if not ok then
        local reason
        if getmetatable(err) == Malformed then
            reason = err.reason
        else
            reason = "dissector error: " .. tostring(err)
        end
        table.insert(infos, "[Malformed: " .. reason .. "]")
        t:add_proto_expert_info(e_malformed, "Malformed braid packet: " .. reason)
    end
    pinfo.cols.info = table.concat(infos, " ")
    return len
end

local udp_port = DissectorTable.get("udp.port")
local registered = nil

local function register()
    if registered ~= nil then
        udp_port:remove(registered, braid)
    end
    registered = braid.prefs.port
    if registered ~= 0 then
        udp_port:add(registered, braid)
    end
end

function braid.prefs_changed()
    register()
end

register()
udp_port:add_for_decode_as(braid)
