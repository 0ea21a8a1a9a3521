module latent.dev/admission

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b
	github.com/puzpuzpuz/xsync/v3 v3.5.1
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sync v0.25.0
	golang.org/x/sys v0.50.0
	pgregory.net/rapid v1.3.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
