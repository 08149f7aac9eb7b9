-- The seed's RPC request: exactly 44 bytes, keep-alive (HTTP/1.1 default).
-- Static: wrk formats it once in wrk.init and never calls Lua per request,
-- so the client stays as fast as wrk can go.
--   "GET /rpc HTTP/1.1\r\n" (19) + "Host: localhost:60000\r\n" (23) + "\r\n" (2)
wrk.method = "GET"
wrk.path = "/rpc"
wrk.headers["Host"] = "localhost:60000"

function init(args)
   local req = wrk.format()
   assert(#req == 44, "rpc.lua: request is " .. #req .. " bytes, want 44")
end
