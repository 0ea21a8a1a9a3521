package catalog

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// indexModel is the reference the index is held to: a map.
type indexModel map[DeploymentKey]*deployment

func (m indexModel) clone() indexModel {
	out := make(indexModel, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// checkIndex holds every answer of x to m: each key's lookup, a spread of
// absent keys, the count and the full listing.
func checkIndex(t *testing.T, x *index, m indexModel, hash func(string, string) uint64, absent []DeploymentKey) {
	t.Helper()
	if x.count != len(m) {
		t.Fatalf("index counts %d, the model %d", x.count, len(m))
	}
	for k, want := range m {
		if got := x.get(hash(k.Tenant, k.Service), k.Tenant, k.Service); got != want {
			t.Fatalf("get(%v) = %p, want %p", k, got, want)
		}
	}
	for _, k := range absent {
		if _, in := m[k]; in {
			continue
		}
		if got := x.get(hash(k.Tenant, k.Service), k.Tenant, k.Service); got != nil {
			t.Fatalf("get(%v) of an absent key = %p", k, got)
		}
	}
	seen := map[DeploymentKey]bool{}
	x.each(func(d *deployment) {
		k := DeploymentKey{d.tenant, d.service}
		if seen[k] || m[k] != d {
			t.Fatalf("each lists %v twice or not as the model holds it", k)
		}
		seen[k] = true
	})
	if len(seen) != len(m) {
		t.Fatalf("each lists %d deployments, the model holds %d", len(seen), len(m))
	}
}

// TestIndexAnswersLikeAMap runs random puts, replacements and removals,
// singly and in batches under one edit token, against a map, under the
// real hash and under hashes that collide on purpose: in their low bits
// (deep tries) and in all 64 (overflow nodes). Every earlier version it
// keeps must still answer as it did when it was taken: no change
// reaches a published node.
func TestIndexAnswersLikeAMap(t *testing.T) {
	hashes := map[string]func(string, string) uint64{
		"real": keyHash,
		"low bits collide": func(tenant, service string) uint64 {
			return keyHash(tenant, service) &^ (1<<40 - 1)
		},
		"a few full hashes": func(tenant, service string) uint64 {
			return keyHash(tenant, service) % 3
		},
		"one hash for all": func(string, string) uint64 { return 42 },
	}
	for name, hash := range hashes {
		t.Run(name, func(t *testing.T) {
			for seed := range uint64(8) {
				rng := rand.New(rand.NewPCG(seed, 0x1de))
				keys := make([]DeploymentKey, 60)
				for i := range keys {
					keys[i] = DeploymentKey{fmt.Sprintf("t%d", i%7), fmt.Sprintf("s%d", i)}
				}
				x, m := emptyIndex(), indexModel{}
				type version struct {
					x index
					m indexModel
				}
				var versions []version
				for step := range 600 {
					edit := newEditToken()
					batch := 1
					if rng.IntN(4) == 0 {
						batch = 1 + rng.IntN(20)
					}
					for range batch {
						k := keys[rng.IntN(len(keys))]
						h := hash(k.Tenant, k.Service)
						if rng.IntN(3) == 0 {
							var old *deployment
							x, old = x.remove(h, k.Tenant, k.Service, edit)
							if old != m[k] {
								t.Fatalf("step %d: remove(%v) returned %p, the model held %p", step, k, old, m[k])
							}
							delete(m, k)
							continue
						}
						dep := &deployment{tenant: k.Tenant, service: k.Service, generation: uint64(step)}
						var old *deployment
						x, old = x.put(h, dep, edit)
						if old != m[k] {
							t.Fatalf("step %d: put(%v) replaced %p, the model held %p", step, k, old, m[k])
						}
						m[k] = dep
					}
					checkIndex(t, &x, m, hash, keys)
					if step%25 == 0 {
						versions = append(versions, version{x, m.clone()})
					}
				}
				for i := range versions {
					checkIndex(t, &versions[i].x, versions[i].m, hash, keys)
				}
				// Removing everything leaves an empty root, however deep the
				// trie grew.
				edit := newEditToken()
				for _, k := range keys {
					x, _ = x.remove(hash(k.Tenant, k.Service), k.Tenant, k.Service, edit)
				}
				assert.Zero(t, x.count, "an emptied index's count")
				assert.Empty(t, x.root.slots, "an emptied index's root")
				assert.Empty(t, x.root.overflow, "an emptied index's root")
			}
		})
	}
}

// TestIndexStaysShallow: a lookup walks about log32(n) nodes, and a
// change copies no more.
func TestIndexStaysShallow(t *testing.T) {
	x := emptyIndex()
	edit := newEditToken()
	const n = 20000
	for i := range n {
		k := DeploymentKey{fmt.Sprintf("tenant-%d", i), "svc"}
		x, _ = x.put(keyHash(k.Tenant, k.Service), &deployment{tenant: k.Tenant, service: k.Service}, edit)
	}
	var deepest func(n *indexNode, depth int) int
	deepest = func(n *indexNode, depth int) int {
		d := depth
		for i := range n.slots {
			if c := n.slots[i].child; c != nil {
				d = max(d, deepest(c, depth+1))
			}
		}
		return d
	}
	// 20,000 keys fill about three levels of 32. The hash seed is random
	// per process, so some pair of keys shares its first 30 bits (depth 7)
	// in about one run in six and its first 35 bits (depth 8) in about one
	// in 170; depth 9 needs 40 shared bits, about one run in 5,000. A trie
	// that degraded toward a list would be thousands of levels deep.
	assert.LessOrEqual(t, deepest(x.root, 1), 8, "levels in a trie of %d keys", n)
}

func TestIndexNodeSizes(t *testing.T) {
	assert.Equal(t, uintptr(24), unsafe.Sizeof(indexSlot{}), "bytes of an index slot")
}

func TestAnIndexChangeWithoutATokenPanics(t *testing.T) {
	x := emptyIndex()
	assert.PanicsWithValue(t, "catalog: index changed without an edit token", func() {
		x.put(1, &deployment{tenant: "a", service: "b"}, 0)
	})
}

// referenceResolve is Resolve written the plain way, from a deployment
// as it was deployed: cumulative weights, a linear scan.
func referenceResolve(d Deployment, generation uint64, target Target, key string) (string, string, uint64, bool) {
	for _, rt := range d.Routes {
		if rt.Name != target.Route {
			continue
		}
		var total uint64
		for _, r := range rt.Revisions {
			total += r.Weight
		}
		if total == 0 {
			return "", "", 0, false
		}
		point := RoutingHash(key) % total
		var sum uint64
		for _, r := range rt.Revisions {
			sum += r.Weight
			if point < sum {
				n := normalizeRevision(r)
				return revisionID(d.Tenant, d.Service, &rt, ReleaseID(n.Release), &n), ReleaseID(n.Release), generation, true
			}
		}
	}
	return "", "", 0, false
}

// TestCatalogAnswersLikeAMap drives Deploy, Delete and Apply at random
// against a map of what was deployed at which generation, and holds every
// Resolve and RevisionPolicy of the current pin, and of pins kept from
// earlier, to it.
func TestCatalogAnswersLikeAMap(t *testing.T) {
	type entry struct {
		d Deployment
		g uint64
	}
	type kept struct {
		pin   *Pin
		model map[DeploymentKey]entry
	}
	rng := rand.New(rand.NewPCG(7, 11))
	c := New(GenerousCapacity)
	model := map[DeploymentKey]entry{}
	var pins []kept
	keys := make([]DeploymentKey, 40)
	for i := range keys {
		keys[i] = DeploymentKey{fmt.Sprintf("tenant-%d", i%9), fmt.Sprintf("svc-%d", i%13)}
	}
	randomDeployment := func(k DeploymentKey) Deployment {
		weights := make([]uint64, 1+rng.IntN(3))
		for i := range weights {
			weights[i] = uint64(rng.IntN(4))
		}
		return weighted(k.Tenant, k.Service, weights...)
	}
	check := func(p *Pin, m map[DeploymentKey]entry) {
		t.Helper()
		if p.Len() != len(m) {
			t.Fatalf("pin at %d holds %d deployments, the model %d", p.Generation(), p.Len(), len(m))
		}
		listed := p.Deployments()
		if !sort.SliceIsSorted(listed, func(i, j int) bool {
			return listed[i].Tenant < listed[j].Tenant || listed[i].Tenant == listed[j].Tenant && listed[i].Service < listed[j].Service
		}) {
			t.Fatal("Deployments is not sorted")
		}
		for _, k := range keys {
			e, in := m[k]
			for _, route := range []string{"resize", "other"} {
				target := Target{k.Tenant, k.Service, route}
				for q := range 5 {
					key := fmt.Sprintf("user-%d", q)
					rev, _, err := p.Resolve(target, key)
					id, release, g, ok := "", "", uint64(0), false
					if in {
						id, release, g, ok = referenceResolve(e.d, e.g, target, key)
					}
					if (err == nil) != ok {
						t.Fatalf("Resolve(%v, %q) = %v, the model resolves: %v", target, key, err, ok)
					}
					if !ok {
						continue
					}
					if rev.Revision != id || rev.Release != release || rev.Generation != g {
						t.Fatalf("Resolve(%v, %q) = %+v, the model %s %s %d", target, key, rev, id, release, g)
					}
					if _, ok := p.RevisionPolicy(rev); !ok {
						t.Fatalf("a pin rejects its own resolution %+v", rev)
					}
				}
			}
		}
	}
	for step := range 400 {
		switch op := rng.IntN(10); {
		case op < 5:
			k := keys[rng.IntN(len(keys))]
			d := randomDeployment(k)
			g := mustDeploy(t, c, d)
			model[k] = entry{d, g}
		case op < 7:
			k := keys[rng.IntN(len(keys))]
			g, err := c.Delete(k.Tenant, k.Service)
			if _, in := model[k]; !in {
				if err != ErrNotDeployed {
					t.Fatalf("step %d: Delete of an absent deployment = %v", step, err)
				}
				continue
			}
			if err != nil || g != c.Generation() {
				t.Fatalf("step %d: Delete = %d, %v", step, g, err)
			}
			delete(model, k)
		default:
			var ch Changes
			picked := map[DeploymentKey]bool{}
			for range 1 + rng.IntN(8) {
				k := keys[rng.IntN(len(keys))]
				if picked[k] {
					continue
				}
				picked[k] = true
				if _, in := model[k]; in && rng.IntN(3) == 0 {
					ch.Delete = append(ch.Delete, k)
				} else {
					ch.Deploy = append(ch.Deploy, randomDeployment(k))
				}
			}
			g, err := c.Apply(ch)
			if err != nil {
				t.Fatalf("step %d: Apply = %v", step, err)
			}
			for _, d := range ch.Deploy {
				model[DeploymentKey{d.Tenant, d.Service}] = entry{d, g}
			}
			for _, k := range ch.Delete {
				delete(model, k)
			}
		}
		check(c.Pin(), model)
		if step%40 == 0 {
			m := make(map[DeploymentKey]entry, len(model))
			for k, v := range model {
				m[k] = v
			}
			pins = append(pins, kept{c.Pin(), m})
		}
	}
	for _, p := range pins {
		check(p.pin, p.model)
	}
}
