-- The seed's WAL request: POST /log with a 1024-byte body, 1156 bytes in
-- all (an X-Pad header fills the gap), keep-alive. An optional script
-- argument sets another body length, keeping the 132-byte head
-- (wrk ... -s wal.lua URL -- 8192); bench/wal.py builds the same bytes for
-- pload.
--
-- A static request on purpose: a Lua request()/response() per request
-- makes one wrk thread several times slower. The store cannot fill during
-- one run (the harness sizes it); the harness truncates the log between
-- runs, like a checkpoint would.
local HEAD_LEN = 132
local HOST = "localhost:60000"

local function build(body_len)
   wrk.method = "POST"
   wrk.path = "/log"
   wrk.body = string.rep("w", body_len)
   wrk.headers["Host"] = HOST
   wrk.headers["X-Pad"] = ""
   local bare = wrk.format()
   wrk.headers["X-Pad"] = string.rep("p", HEAD_LEN + body_len - #bare)
   local req = wrk.format()
   assert(#req == HEAD_LEN + body_len,
          "wal.lua: request is " .. #req .. " bytes, want " .. HEAD_LEN + body_len)
end

build(1024)

function init(args)
   if args[1] then
      build(assert(tonumber(args[1]), "wal.lua: body length must be a number"))
   end
end
