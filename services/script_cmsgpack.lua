-- script_cmsgpack.lua - Redis's cmsgpack encoding on Debian's
-- lua-MessagePack (script_cmsgpack.c gives scripts the API around it).
--
-- Called once per Lua state with the MessagePack module and its table of
-- decoders by first byte; answers the encoder (every argument packed,
-- concatenated) and the decoder (decode(s, offset, limit): the offset
-- after the last value, -1 when the string is used up, the count, a
-- table of the values; or nil and Redis's words for bad input, which
-- script_cmsgpack.c raises where the script called). What Redis's
-- cmsgpack does that the module does not by default:
--   - a number equal to an int64 is an integer, the smallest encoding
--     (the module's integer packer up to 2^53, 8 bytes past it); any
--     other a float (0xca) when a float holds it exactly, else a double;
--   - strings of 32 to 255 bytes are str8;
--   - a table is an array when its keys are exactly 1..n, else a map;
--     tables nested 16 deep are packed as nil (circular references
--     end there);
--   - functions and other values without an encoding are nil;
--   - decoding errors are Redis's: "Missing bytes in input.", and
--     "Bad data format in input." for a byte that starts no value
--     Redis reads (bin and ext types included).
local mp, unpackers = ...
local packers = mp.packers
local unpack_cursor = mp.unpack_cursor
local floor, frexp, ldexp, huge = math.floor, math.frexp, math.ldexp, math.huge
local char, find, concat = string.char, string.find, table.concat
local type, next, ipairs, pcall, error, tostring, select = type, next, ipairs, pcall, error, tostring, select

local MISSING, BADFMT = "Missing bytes in input.", "Bad data format in input."
local MAX_NESTING = 16
local TWO53, TWO63 = 2 ^ 53, 2 ^ 63

mp.set_string('string')
mp.set_integer('unsigned')
local function bad_format()
	error(BADFMT, 0)
end
for _, b in ipairs({ 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8 }) do
	unpackers[b] = bad_format      -- bin and ext: not Redis's
end

local pack_nil = packers['nil']
packers['function'] = pack_nil
packers['userdata'] = pack_nil
packers['thread'] = pack_nil

-- Eight bytes of an integer x (|x| < 2^63, a double: every step exact).
local function pack_int64(buffer, x)
	local b = {}
	local v = x
	for i = 8, 1, -1 do
		b[i] = v % 256
		v = floor(v / 256)
	end
	buffer[#buffer + 1] = char(x >= 0 and 0xcf or 0xd3, b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8])
end

-- A float's or double's bytes for a value below their smallest normal
-- one (the module writes those as zero): sign, exponent 0, the bits.
local function pack_subnormal(buffer, sign, a, float)
	if float then
		local m = ldexp(a, 149)
		buffer[#buffer + 1] = char(0xca, sign, floor(m / 0x10000), floor(m / 0x100) % 0x100, m % 0x100)
	else
		local m = ldexp(a, 1074)
		buffer[#buffer + 1] = char(0xcb, sign, floor(m / 0x1000000000000),
					   floor(m / 0x10000000000) % 0x100, floor(m / 0x100000000) % 0x100,
					   floor(m / 0x1000000) % 0x100, floor(m / 0x10000) % 0x100,
					   floor(m / 0x100) % 0x100, m % 0x100)
	end
end

packers['number'] = function(buffer, n)
	if n == floor(n) and n >= -TWO63 and n < TWO63 then
		if n > -TWO53 and n < TWO53 then
			packers['integer'](buffer, n)
		else
			pack_int64(buffer, n)
		end
		return
	end
	if n ~= n then
		-- NaN: Lua shows its sign ("-nan"), the only bit scripts can set.
		local neg = tostring(n):sub(1, 1) == '-'
		buffer[#buffer + 1] = char(0xcb, neg and 0xff or 0x7f, 0xf8, 0, 0, 0, 0, 0, 0)
		return
	end
	local a, sign = n, 0
	if a < 0 then
		a, sign = -a, 0x80
	end
	if a == huge then
		packers['float'](buffer, n)
		return
	end
	local _, e = frexp(a)           -- a = m * 2^e, 0.5 <= m < 1
	local low = e - 24              -- a float's lowest bit
	if low < -149 then
		low = -149
	end
	local f = ldexp(a, -low)
	local float = e <= 128 and f == floor(f)
	if float and e <= -126 then
		pack_subnormal(buffer, sign, a, true)
	elseif float then
		packers['float'](buffer, n)
	elseif e <= -1022 then
		pack_subnormal(buffer, sign, a, false)
	else
		packers['double'](buffer, n)
	end
end

-- Redis's test: every key a positive whole number that fits a C int,
-- as many keys as the largest; then #t is n.
local function array_len(t)
	local count, max = 0, 0
	for k in next, t do
		if type(k) ~= 'number' or k <= 0 or k ~= floor(k) or k > 2147483647 then
			return nil
		end
		if k > max then
			max = k
		end
		count = count + 1
	end
	return max == count and count or nil
end

local depth = 0
packers['table'] = function(buffer, t)
	if depth == MAX_NESTING then
		pack_nil(buffer)
		return
	end
	depth = depth + 1
	local n = array_len(t)
	if n then
		packers['array'](buffer, t, n)
	else
		n = 0
		for _ in next, t do
			n = n + 1
		end
		packers['map'](buffer, t, n)
	end
	depth = depth - 1
end

local function encode(...)
	local buffer = {}
	local args = { ... }
	for i = 1, select('#', ...) do
		depth = 0
		local v = args[i]
		packers[type(v)](buffer, v)
	end
	return concat(buffer)
end

local function underflow()
	error(MISSING, 0)
end

-- Values from byte offset (0-based) on, at most limit of them (< 0: all).
local function decode(s, offset, limit)
	local c = { s = s, i = offset + 1, j = #s, underflow = underflow }
	local out, n = {}, 0
	local ok, err = pcall(function()
		while c.i <= c.j and (limit < 0 or n < limit) do
			n = n + 1
			out[n] = unpack_cursor(c)
		end
	end)
	if not ok then
		if err == MISSING or err == BADFMT then
			return nil, err
		elseif type(err) == 'string' and find(err, "is unimplemented", 1, true) then
			return nil, BADFMT
		end
		error(err, 0)                   -- SCRIPT KILL, out of memory: as they were
	end
	return c.i > c.j and -1 or c.i - 1, n, out
end

return encode, decode
