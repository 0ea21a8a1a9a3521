package catalog

import (
	"errors"
	"strings"
	"testing"
)

func TestRecordSizeIsTheCanonicalEncodingLength(t *testing.T) {
	rev := weighted("acme", "thumbs", 1).Routes[0].Revisions[0]
	n := normalizeRevision(rev)
	if got, want := RecordSize(rev), uint64(len(appendRevisionRecord(nil, &n))); got != want || got == 0 {
		t.Fatalf("RecordSize = %d, want %d", got, want)
	}
	reordered := rev
	reordered.Policy.Features = []string{"simd"}
	if RecordSize(reordered) != RecordSize(rev) {
		t.Fatal("record size depends on more than content")
	}
	bigger := rev
	bigger.Policy.Features = []string{"simd", "threads"}
	if RecordSize(bigger) != RecordSize(rev)+1+uint64(len("threads")) {
		t.Fatalf("one more feature adds %d bytes", RecordSize(bigger)-RecordSize(rev))
	}
}

func TestCapacityIsEnforcedAndAFailedDeployChangesNothing(t *testing.T) {
	one := RecordSize(weighted("a", "b", 1).Routes[0].Revisions[0])
	tests := []struct {
		name     string
		capacity Capacity
		reason   string
	}{
		{"over max_revisions", Capacity{MaxRevisions: 3, MaxPolicyBytes: 1 << 20}, "hold 5 revisions"},
		{"over max_policy_bytes", Capacity{MaxRevisions: 100, MaxPolicyBytes: 3 * one}, "policy bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(tt.capacity)
			mustDeploy(t, c, weighted("acme", "thumbs", 1, 1))
			mustDeploy(t, c, weighted("globex", "render", 1))
			before := c.Pin()
			rev := mustResolve(t, before, Target{"acme", "thumbs", "resize"}, "k")
			snapshot := snapshotView(t, before)

			_, err := c.Deploy(weighted("initech", "jobs", 1, 1))
			if !errors.Is(err, ErrCapacityExceeded) || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("Deploy over capacity = %v", err)
			}
			if c.Pin() != before || c.Generation() != 2 {
				t.Fatalf("a refused deploy published generation %d", c.Generation())
			}
			if got := snapshotView(t, before); !equalViews(got, snapshot) {
				t.Fatal("a refused deploy changed the held pin")
			}
			if _, ok := c.Pin().RevisionPolicy(rev); !ok {
				t.Fatal("a refused deploy invalidated a resolution")
			}
			// Replacing a deployment is charged net of what it replaces.
			if g := mustDeploy(t, c, weighted("acme", "thumbs", 1, 0)); g != 3 {
				t.Fatalf("replacement generation %d, want 3", g)
			}
			if u := c.Pin().CapacityUse(); u.Revisions != 3 || u.PolicyBytes != 3*one {
				t.Fatalf("usage %+v", u)
			}
			// Deleting frees capacity.
			if _, err := c.Delete("globex", "render"); err != nil {
				t.Fatal(err)
			}
			mustDeploy(t, c, weighted("initech", "jobs", 1))
		})
	}
}

func TestZeroCapacityHoldsNothing(t *testing.T) {
	c := New(Capacity{})
	if _, err := c.Deploy(weighted("acme", "thumbs", 1)); !errors.Is(err, ErrCapacityExceeded) {
		t.Fatalf("Deploy into zero capacity = %v", err)
	}
}
