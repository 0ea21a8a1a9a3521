// This program must not compile: code outside package core cannot set a
// permit's unexported fields, so it cannot build a live permit.
package main

import "latent.dev/admission/core"

func main() {
	p := &core.AdmissionPermit{self: 1}
	p.Release()
}
