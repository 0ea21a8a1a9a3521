module example.com/consumer

go 1.26.0

require latent.dev/admission v0.0.0-00010101000000-000000000000

require golang.org/x/sys v0.50.0 // indirect

replace latent.dev/admission => ../..
