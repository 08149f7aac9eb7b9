-- The seed's WAL request: POST /log with a 1024-byte body, 1156 bytes in
-- all (an X-Pad header fills the gap), keep-alive.
--
-- The store fills unless someone checkpoints, so this client acts like one:
-- it remembers the highest X-Paste-LSN acknowledged, and every CHECKPOINT
-- requests it sends "DELETE /log?upto=<highest - KEEP>" instead of a POST
-- (wrk counts it like any other request). Args: [CHECKPOINT [KEEP]].
local BODY_LEN, TOTAL_LEN = 1024, 1156
local CHECKPOINT, KEEP = 2000, 20000
local HOST = "localhost:60000"
local post
local sent, highest = 0, 0

function init(args)
   CHECKPOINT = tonumber(args[1]) or CHECKPOINT
   KEEP = tonumber(args[2]) or KEEP
   local body = string.rep("w", BODY_LEN)
   local bare = wrk.format("POST", "/log", { Host = HOST, ["X-Pad"] = "" }, body)
   local pad = string.rep("p", TOTAL_LEN - #bare)
   post = wrk.format("POST", "/log", { Host = HOST, ["X-Pad"] = pad }, body)
   assert(#post == TOTAL_LEN, "wal.lua: request is " .. #post .. " bytes, want " .. TOTAL_LEN)
end

function request()
   sent = sent + 1
   if sent % CHECKPOINT == 0 and highest > KEEP then
      return wrk.format("DELETE", "/log?upto=" .. (highest - KEEP), { Host = HOST })
   end
   return post
end

function response(status, headers, body)
   if status == 201 then
      local lsn = tonumber(headers["X-Paste-LSN"] or headers["x-paste-lsn"])
      if lsn and lsn > highest then
         highest = lsn
      end
   end
end
