-- A protocol buffers wire encoder for the few messages model:export writes (tpu.nn.onnx).
--
-- Why by hand: an ONNX model is a handful of message kinds with a handful of fields each
-- (model, graph, node, attribute, tensor, value info); encoding them takes the wire format's
-- two rules (varints and length-delimited bytes) and one fixed-width float. A hand encoder
-- avoids protoc code generation and a libprotobuf dependency for the binary and its embedders.
--
-- Each function returns the encoding of one field (key and value) as a string; a message is
-- the concatenation of its fields, so callers build it as a list and table.concat it:
--   local pb = require "tpu.nn.protobuf"
--   local msg = table.concat {pb.int(1, 7), pb.string(2, "tputrain"), pb.message(7, graph)}
-- Repeated fields are written one key per element (proto2's unpacked form, which every parser
-- reads). Integers are Lua's 64-bit ones; a negative one is written as its two's complement,
-- as int64 fields are.
local M = {}

local VARINT, FIXED32, BYTES = 0, 5, 2

-- The base-128 varint of n: 7 bits a byte, low bits first, the top bit set on all bytes but
-- the last. >> is a logical shift on Lua integers, so a negative n takes ten bytes.
function M.varint(n)
  local bytes = {}
  repeat
    local low = n & 0x7f
    n = n >> 7
    bytes[#bytes + 1] = n ~= 0 and (low | 0x80) or low
  until n == 0
  return string.char(table.unpack(bytes))
end

local function key(field, wire_type)
  return M.varint(field << 3 | wire_type)
end

-- An integer field (int32, int64, enum, bool as 0/1).
function M.int(field, n)
  return key(field, VARINT) .. M.varint(math.tointeger(n))
end

-- A length-delimited field: bytes, a string, or an encoded message.
function M.bytes(field, s)
  return key(field, BYTES) .. M.varint(#s) .. s
end
M.string = M.bytes
M.message = M.bytes

-- A float field (32-bit IEEE little-endian).
function M.float(field, x)
  return key(field, FIXED32) .. string.pack("<f", x)
end

-- A repeated integer field, one key per element.
function M.ints(field, list)
  local parts = {}
  for i, n in ipairs(list) do parts[i] = M.int(field, n) end
  return table.concat(parts)
end

-- A repeated string or message field (encoded messages), one key per element.
function M.strings(field, list)
  local parts = {}
  for i, s in ipairs(list) do parts[i] = M.bytes(field, s) end
  return table.concat(parts)
end
M.messages = M.strings

return M
