-- wrk script of make compare-edge: POST world with the demonstration
-- user's token (latentd needs it; the bare handler ignores it).
wrk.method = "POST"
wrk.body = "world"
wrk.headers["Authorization"] = "Bearer latent-demo-alice"
wrk.headers["Content-Type"] = "application/octet-stream"
