// This program compiles, but go vet must reject it: permits carry a
// noCopy guard, so copying one is reported by the copylocks check.
package main

import "latent.dev/admission/core"

func use(p *core.AdmissionPermit) { p.Release() }

func main() {
	var p core.AdmissionPermit
	q := p
	use(&q)
	var e core.ExecutionPermit
	f := e
	f.Release()
}
