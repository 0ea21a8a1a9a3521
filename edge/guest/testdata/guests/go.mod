module latent.dev/admission/edge/guest/testdata/guests

go 1.26.0
