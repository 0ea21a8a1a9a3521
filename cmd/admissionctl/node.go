package main

import (
	"io"
	"os"

	"latent.dev/admission/internal/nodeclient"
)

// `admissionctl node VERB ...` talks to a running latentd: push, deploy,
// undeploy, usage and snapshot (internal/nodeclient).
func init() {
	commands["node"] = func(args []string, stdout, stderr io.Writer) int {
		return nodeclient.Main(args, os.Getenv, stdout, stderr)
	}
}
