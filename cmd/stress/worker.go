package main

import (
	"math/rand/v2"
	"strconv"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// requestKind is one kind of request in the soak's mix.
type requestKind int

const (
	valid requestKind = iota
	unauthorized
	oversized
	infeasible
	duplicate
	unknownTarget
	badIdentifier
	forged
	stalePin
)

// mix is each invalid kind's share in percent; the rest are valid.
var mix = [...]struct {
	kind    requestKind
	percent int
}{
	{unauthorized, 8}, {oversized, 6}, {infeasible, 6}, {duplicate, 5},
	{unknownTarget, 8}, {badIdentifier, 4}, {forged, 4}, {stalePin, 4},
}

func (w *worker) pickKind() requestKind {
	roll := w.rng.IntN(100)
	for _, m := range mix {
		if roll < m.percent {
			return m.kind
		}
		roll -= m.percent
	}
	return valid
}

// holdSlots is how many permits a worker keeps at once, so that scopes
// fill up and capacity rejections happen.
const holdSlots = 6

type held struct {
	admission *core.AdmissionPermit
	execution *core.ExecutionPermit
}

type worker struct {
	s           *soak
	rng         *rand.Rand
	next        uint64
	prefix      string
	holding     []held
	latency     histogram
	abandonRate int // per mille of valid admissions dropped unreleased
}

func newWorker(s *soak, seed uint64) *worker {
	return &worker{s: s, rng: rand.New(rand.NewPCG(seed, seed>>1)), prefix: "w" + strconv.FormatUint(seed%100000, 36) + "-", abandonRate: 2}
}

func (w *worker) loop() {
	for !w.s.stop.Load() {
		w.once()
	}
}

func (w *worker) id() string {
	w.next++
	return w.prefix + strconv.FormatUint(w.next, 36)
}

// once sends one request of the mix and disposes of any permit it gets.
func (w *worker) once() {
	t := &w.s.templates[w.rng.IntN(len(w.s.templates))]
	pins := *w.s.pins.Load()
	pin := pins[0]
	req := core.AdmissionRequest{
		ActivationID:    w.id(),
		Principal:       t.principal,
		RequestedBudget: policy.Budget{CPUFuel: 1 + w.rng.Uint64N(2_000_000_000), MemoryBytes: 1 + w.rng.Uint64N(64<<20)},
		PayloadBytes:    w.rng.Uint64N(t.payload + 1),
		Priority:        w.rng.Uint32N(t.priority + 1),
	}
	target, key := t.target, strconv.FormatUint(w.rng.Uint64(), 36)
	resolvePin := pin
	kind := w.pickKind()
	switch kind {
	case unauthorized:
		req.Principal.Subject = "intruder-" + strconv.Itoa(w.rng.IntN(1000))
	case oversized:
		req.PayloadBytes = t.payload + 1 + w.rng.Uint64N(1000)
	case infeasible:
		req.RequestedBudget.WallTime = policy.Some(time.Duration(w.rng.IntN(30)) * time.Millisecond)
	case duplicate:
		if len(w.holding) > 0 {
			req.ActivationID = w.holding[w.rng.IntN(len(w.holding))].admission.Grant().ActivationID
		}
	case unknownTarget:
		// A distinct unknown service every time: nothing may grow with it.
		target = catalog.Target{Tenant: t.target.Tenant, Service: "svc-" + strconv.FormatUint(w.rng.Uint64(), 36), Route: t.target.Route}
	case badIdentifier:
		req.ActivationID = "bad id " + req.ActivationID
	case forged:
		// forged after resolution, below
	case stalePin:
		// Resolve through an old pin but admit through the newest: a
		// replaced deployment's generation no longer verifies.
		resolvePin = pins[len(pins)-1]
	default:
		// Valid; now and then through an older pin that still serves its
		// own (possibly replaced) policy.
		if w.rng.IntN(10) == 0 {
			pin = pins[len(pins)-1]
			resolvePin = pin
		}
	}
	rev, handle, err := resolvePin.Resolve(target, key)
	if err != nil {
		w.s.rejected.Add(1)
		return
	}
	req.Revision, req.Handle = *rev, handle
	if kind == forged {
		req.Revision.Revision = "rev-forged"
	}
	ctl := w.s.base.WithPolicySource(pin)
	begin := time.Now()
	p, err := ctl.Admit(&req)
	w.latency.record(time.Since(begin))
	if err != nil {
		w.s.rejected.Add(1)
		return
	}
	w.s.admitted.Add(1)
	if live := w.s.provider.NodeSnapshot().Live; live > w.s.peakLive.Load() {
		w.s.peakLive.Store(live) // a racy max is fine for a report
	}
	w.dispose(p)
}

// dispose does what a scheduler would: release at once (cancelled),
// start and finish, keep it queued or running for a while, or, rarely,
// lose it without release for the GC to reclaim.
func (w *worker) dispose(p *core.AdmissionPermit) {
	switch r := w.rng.IntN(1000); {
	case r < w.abandonRate:
		w.s.abandoned.Add(1)
	case r < 350:
		p.Release()
	case r < 650:
		if e, err := p.StartExecution(); err == nil {
			e.Release()
		}
	default:
		h := held{admission: p}
		if w.rng.IntN(2) == 0 {
			if e, err := p.StartExecution(); err == nil {
				h.execution = e
			} else {
				return
			}
		}
		if len(w.holding) == holdSlots {
			i := w.rng.IntN(holdSlots)
			w.holding[i].release()
			w.holding[i] = h
			return
		}
		w.holding = append(w.holding, h)
	}
}

func (h held) release() {
	if h.execution != nil {
		h.execution.Release()
		return
	}
	h.admission.Release()
}

func (w *worker) releaseAll() {
	for _, h := range w.holding {
		h.release()
	}
	w.holding = w.holding[:0]
}
