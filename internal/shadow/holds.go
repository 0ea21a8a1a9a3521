package shadow

import (
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/internal/trace"
)

// held is a replay permit: one of the two is set while it holds.
type held struct {
	adm *core.AdmissionPermit
	exe *core.ExecutionPermit
}

func (h *held) release() {
	if h.exe != nil {
		h.exe.Release()
	}
	if h.adm != nil {
		h.adm.Release()
	}
	h.adm, h.exe = nil, nil
}

// due is an estimated hold's release.
type due struct {
	at int64
	h  *held
}

type dueHeap []due

func (d dueHeap) Len() int           { return len(d) }
func (d dueHeap) Less(i, j int) bool { return d[i].at < d[j].at }
func (d dueHeap) Swap(i, j int)      { d[i], d[j] = d[j], d[i] }
func (d *dueHeap) Push(x any)        { *d = append(*d, x.(due)) }
func (d *dueHeap) Pop() any {
	old := *d
	x := old[len(old)-1]
	*d = old[:len(old)-1]
	return x
}

func (r *replay) startLine(l *trace.Line) {
	m := l.Move
	r.moveRecorded(m.Of, true, m.Refused)
	h := r.permits[m.Of]
	if h == nil {
		return
	}
	if h.adm != nil {
		r.clock.set(r.at(l.T), time.Duration(m.ElapsedNS))
		if ep, err := h.adm.StartExecution(); err == nil {
			h.adm, h.exe = nil, ep
		} else {
			h.adm = nil
		}
	}
	if m.Refused || (h.adm == nil && h.exe == nil) {
		h.release()
		delete(r.permits, m.Of)
	}
}

func (r *replay) releaseLine(l *trace.Line) {
	r.moveRecorded(l.Move.Of, false, true)
	if h := r.permits[l.Move.Of]; h != nil {
		h.release()
		delete(r.permits, l.Move.Of)
	}
}
