package catalog

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRoutingHashIsStable(t *testing.T) {
	// Golden values (checked against an independent implementation of
	// FNV-1a 64 and fmix64): changing the hash moves keys between revisions in
	// every running node, so it must never change by accident.
	for _, tt := range []struct {
		key  string
		want uint64
	}{
		{"", 0xefd01f60ba992926},
		{"k1", 0x4a2b30eb98962955},
		{"user-42", 0xa39532c7ab051e8d},
	} {
		assert.Equal(t, tt.want, RoutingHash(tt.key), "RoutingHash(%q)", tt.key)
	}
}

func TestResolveIsDeterministic(t *testing.T) {
	c := New(GenerousCapacity)
	mustDeploy(t, c, weighted("acme", "thumbs", 50, 30, 20))
	target := Target{"acme", "thumbs", "resize"}
	other := New(GenerousCapacity) // another process deploying the same file
	mustDeploy(t, other, weighted("globex", "render", 1))
	mustDeploy(t, other, weighted("acme", "thumbs", 50, 30, 20))
	for i := range 1000 {
		key := fmt.Sprintf("key-%d", i)
		a := mustResolve(t, c.Pin(), target, key)
		b := mustResolve(t, c.Pin(), target, key)
		o := mustResolve(t, other.Pin(), target, key)
		if a.Revision != b.Revision || a.Revision != o.Revision || a.Release != o.Release {
			t.Fatalf("key %q resolves to %s, %s and (elsewhere) %s", key, a.Revision, b.Revision, o.Revision)
		}
	}
}

func TestResolveSplitFollowsWeights(t *testing.T) {
	weights := []uint64{70, 0, 20, 10}
	c := New(GenerousCapacity)
	mustDeploy(t, c, weighted("acme", "thumbs", weights...))
	pin := c.Pin()
	d, _, _ := pin.Deployment("acme", "thumbs")
	index := map[string]int{}
	for i, rev := range d.Routes[0].Revisions {
		index[revisionIDOf("acme", "thumbs", d.Routes[0], rev)] = i
	}
	const keys = 100_000
	counts := make([]int, len(weights))
	for i := range keys {
		rev := mustResolve(t, pin, Target{"acme", "thumbs", "resize"}, fmt.Sprintf("key-%d", i))
		counts[index[rev.Revision]]++
	}
	for i, w := range weights {
		got := float64(counts[i]) / keys
		want := float64(w) / 100
		assert.InDelta(t, want, got, 0.01, "revision %d (weight %d): share of keys", i, w)
	}
	assert.Zero(t, counts[1], "times a weight-0 revision was selected")
}

func TestWeightZeroIsNeverSelected(t *testing.T) {
	for _, weights := range [][]uint64{{0, 1}, {1, 0}, {0, 5, 0}, {0, 0, 1}} {
		t.Run(fmt.Sprint(weights), func(t *testing.T) {
			c := New(GenerousCapacity)
			mustDeploy(t, c, weighted("acme", "thumbs", weights...))
			d, _, _ := c.Pin().Deployment("acme", "thumbs")
			for i := range 2000 {
				rev := mustResolve(t, c.Pin(), Target{"acme", "thumbs", "resize"}, fmt.Sprint(i))
				for j, w := range weights {
					if w == 0 && rev.Revision == revisionIDOf("acme", "thumbs", d.Routes[0], d.Routes[0].Revisions[j]) {
						t.Fatalf("weight-0 revision %d selected for key %d", j, i)
					}
				}
			}
		})
	}
}

func TestTargetsThatDoNotResolve(t *testing.T) {
	c := New(GenerousCapacity)
	mustDeploy(t, c, weighted("acme", "thumbs", 0, 0))
	mustDeploy(t, c, weighted("acme", "single", math.MaxUint64))
	pin := c.Pin()
	for _, tt := range []struct {
		name   string
		target Target
	}{
		{"zero-sum route resolves to nothing", Target{"acme", "thumbs", "resize"}},
		{"unknown tenant", Target{"globex", "thumbs", "resize"}},
		{"unknown service", Target{"acme", "render", "resize"}},
		{"unknown route", Target{"acme", "thumbs", "crop"}},
		{"empty target", Target{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rev, _, err := pin.Resolve(tt.target, "k")
			assert.ErrorIs(t, err, ErrNotResolved)
			assert.Nil(t, rev)
		})
	}
	t.Run("a single revision of the largest weight always resolves", func(t *testing.T) {
		mustResolve(t, pin, Target{"acme", "single", "resize"}, "k")
	})
}

func TestResolvedRevisionIsFreshAndComplete(t *testing.T) {
	c := New(GenerousCapacity)
	g := mustDeploy(t, c, weighted("acme", "thumbs", 1))
	a := mustResolve(t, c.Pin(), Target{"acme", "thumbs", "resize"}, "k")
	b := mustResolve(t, c.Pin(), Target{"acme", "thumbs", "resize"}, "k")
	require.NotSame(t, a, b, "Resolve shares its result between callers")
	a.Tenant = "changed"
	assert.Equal(t, "acme", b.Tenant)
	assert.Equal(t, "thumbs", b.Service)
	assert.Equal(t, "resize", b.Route)
	assert.Equal(t, "img.v1", b.Contract)
	assert.Equal(t, "resize", b.Function)
	assert.Equal(t, g, b.Generation)
	assert.Nil(t, b.Attributes)
	assert.Equal(t, ReleaseID(Release{ArtifactDigest: "sha256:0a", Version: "1.0.0"}), b.Release)
}
