-- wrk script of make compare-edge: POST world with the demonstration
-- user's token (latentd needs it; the bare handler ignores it), and, at
-- the end, the count of every status other than 200 ("status 503: 12"),
-- so that a round that was not all 2xx says what it got.
wrk.method = "POST"
wrk.body = "world"
wrk.headers["Authorization"] = "Bearer latent-demo-alice"
wrk.headers["Content-Type"] = "application/octet-stream"

local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

function init(args)
   others = {}
end

function response(status, headers, body)
   if status ~= 200 then
      others[status] = (others[status] or 0) + 1
   end
end

function done(summary, latency, requests)
   local total = {}
   for _, thread in ipairs(threads) do
      for status, n in pairs(thread:get("others")) do
         total[status] = (total[status] or 0) + n
      end
   end
   for status, n in pairs(total) do
      io.write(string.format("status %d: %d\n", status, n))
   end
end
