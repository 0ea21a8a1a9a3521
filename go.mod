module latent.dev/admission

go 1.26.0
