module example.com/consumer

go 1.26.0

require latent.dev/admission v0.0.0-00010101000000-000000000000

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace latent.dev/admission => ../..
