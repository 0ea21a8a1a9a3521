package core_test

import (
	"testing"

	"pgregory.net/rapid"
)

func TestZZDebug(t *testing.T) {
	why := map[string]int{}
	rapid.Check(t, func(rt *rapid.T) {
		m := newDiffMachine(rt, map[string]int{})
		lastName := "initial"
		acts := m.actions()
		for k, f := range acts {
			if k == "" {
				continue
			}
			f := f
			k := k
			acts[k] = func(rt *rapid.T) {
				if k[:5] == "Publi" || k[:5] == "Clear" || k[:5] == "Advan" {
					_, ok := m.coreLoad.CurrentLoad()
					defer func() {
						if _, ok2 := m.coreLoad.CurrentLoad(); ok && !ok2 {
							lastName = k
						}
					}()
				}
				before := m.outcomes["unavailable scope=load dimension=load-sample reason=load-unavailable retryable=true"]
				f(rt)
				if after := m.outcomes["unavailable scope=load dimension=load-sample reason=load-unavailable retryable=true"]; after > before {
					cs, ok := m.coreLoad.CurrentLoad()
					switch {
					case !ok:
						why["missing:"+lastName]++
					case cs.ObservedAt.After(m.now):
						why["future"]++
					default:
						why["stale"]++
					}
				}
			}
		}
		for round := 0; round < 3; round++ {
			rt.Repeat(acts)
		}
	})
	t.Log(why)
}
