-- The seed's WAL request: POST /log with a 1024-byte body, 1156 bytes in
-- all (an X-Pad header fills the gap), keep-alive.
--
-- A static request on purpose: a Lua request()/response() per request
-- makes one wrk thread several times slower, and the client must outrun
-- the baseline by 2x here. The store cannot fill during one run (the
-- harness sizes it); harness.measure() truncates the log between runs,
-- like a checkpoint would.
local BODY_LEN, TOTAL_LEN = 1024, 1156
local HOST = "localhost:60000"

wrk.method = "POST"
wrk.path = "/log"
wrk.body = string.rep("w", BODY_LEN)
wrk.headers["Host"] = HOST
wrk.headers["X-Pad"] = ""
local bare = wrk.format()
wrk.headers["X-Pad"] = string.rep("p", TOTAL_LEN - #bare)
local req = wrk.format()
assert(#req == TOTAL_LEN, "wal.lua: request is " .. #req .. " bytes, want " .. TOTAL_LEN)
