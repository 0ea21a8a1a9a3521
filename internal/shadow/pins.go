package shadow

import (
	"slices"
	"sort"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
)

// pinAt is a replay pin and the recorded generation it stands for.
type pinAt struct {
	gen uint64
	pin *catalog.Pin
}

// catalog is the replay catalog; a deploy before any catalog line starts
// from an empty one, and makes the replay inexact.
func (r *replay) catalog() *catalog.Catalog {
	if r.cat == nil {
		r.cat, r.noCatalog = catalog.New(catalog.GenerousCapacity), true
	}
	return r.cat
}

func (r *replay) addPin(gen uint64) {
	p := r.cat.Pin()
	i := sort.Search(len(r.pins), func(i int) bool { return r.pins[i].gen >= gen })
	if i < len(r.pins) && r.pins[i].gen == gen {
		delete(r.ctrls, r.pins[i].pin)
		r.pins[i].pin = p
	} else {
		r.pins = slices.Insert(r.pins, i, pinAt{gen: gen, pin: p})
	}
	if len(r.pins) > KeptPins {
		delete(r.ctrls, r.pins[0].pin)
		r.pins = slices.Delete(r.pins, 0, 1)
	}
}

// pinFor is the pin of recorded generation gen, or the latest at or
// below it; gen 0 (no resolution recorded) is the latest. With count, a
// generation older than those kept, or newer than the last change the
// replay has applied, is counted against exactness.
func (r *replay) pinFor(gen uint64, count bool) *catalog.Pin {
	if len(r.pins) == 0 {
		if !r.override && !r.catalogSeen {
			r.noCatalog = true
		}
		return nil
	}
	if r.override || gen == 0 {
		return r.pins[len(r.pins)-1].pin
	}
	i := sort.Search(len(r.pins), func(i int) bool { return r.pins[i].gen > gen })
	if count && i == len(r.pins) && gen > r.pins[i-1].gen && r.catalogSeen {
		// A generation whose deploy or delete line has not come yet:
		// resolved in the latest, which may not be what the node saw.
		r.futurePins++
	}
	if i == 0 {
		if count {
			r.oldPins++
		}
		return r.pins[0].pin
	}
	return r.pins[i-1].pin
}

func (r *replay) controller(p *catalog.Pin) *core.AdmissionController {
	c := r.ctrls[p]
	if c == nil {
		c = r.provider.Controller(core.ControllerConfig{Source: p, Clock: r.clock})
		r.ctrls[p] = c
	}
	return c
}
