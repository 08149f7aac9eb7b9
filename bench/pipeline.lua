-- The RPC request (44 bytes, as in rpc.lua) pipelined: every write carries
-- DEPTH requests and wrk waits for DEPTH responses before the next write.
-- wrk counts the requests in what request() returns to learn the depth.
-- This amortises the loopback TCP cost and exposes the server's own cost.
local DEPTH = 16
local batch

function init(args)
   local depth = tonumber(args[1]) or DEPTH
   local one = wrk.format("GET", "/rpc", { Host = "localhost:60000" })
   assert(#one == 44, "pipeline.lua: request is " .. #one .. " bytes, want 44")
   batch = string.rep(one, depth)
end

function request()
   return batch
end
