package gen

import (
	"testing"
	"time"

	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestDrawnPoliciesAreValid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := Generator{T: t, Friendly: rapid.Bool().Draw(t, "friendly")}
		p := g.Policy() // fails the check itself if the policy is invalid
		sources, revisions := g.Sources(p)
		if len(sources) == 0 || len(revisions) == 0 {
			t.Fatal("no revisions deployed")
		}
		for _, s := range sources {
			for _, e := range s.Entries {
				if got, ok := s.RevisionPolicy(&e.Revision); !ok || got != e.Policy {
					t.Fatalf("a source does not find its own revision %+v", e.Revision)
				}
				forged := e.Revision
				forged.Generation += 100
				if _, ok := s.RevisionPolicy(&forged); ok {
					t.Fatal("a source found a forged generation")
				}
			}
		}
		req := Request(t, p, revisions, sources[0], time.UnixMilli(0))
		if req.Principal.Tenant == "" && req.Revision.Tenant == "" {
			t.Fatal("a request without any tenant")
		}
	})
}

func TestFriendlyPoliciesLetOrdinaryRevisionsThrough(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := Generator{T: t, Friendly: true}
		p := g.Policy()
		sources, _ := g.Sources(p)
		for _, e := range sources[0].Entries {
			rev := e.Policy
			if !contains(p.Node.Backends, rev.Backend) || !contains(p.Node.StateModels, rev.StateModel) || rev.Threading == 0 {
				t.Fatalf("a friendly revision needs what the node lacks: %+v", rev)
			}
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestClock(t *testing.T) {
	epoch := time.UnixMilli(1767225600000)
	c := NewClock(epoch)
	if !c.Now().Equal(epoch) || c.Since(epoch) != 0 {
		t.Fatal("a set clock moved")
	}
	c.Arm(epoch, epoch.Add(time.Second))
	if !c.Now().Equal(epoch) {
		t.Fatal("the first reading after Arm is not the earlier time")
	}
	if !c.Now().Equal(epoch.Add(time.Second)) || c.Since(epoch) != time.Second {
		t.Fatal("later readings after Arm are not the later time")
	}
	c.Set(epoch)
	if !c.Now().Equal(epoch) {
		t.Fatal("Set does not disarm")
	}
}

func TestChanceLeansTowardTheLikelierOutcome(t *testing.T) {
	var rare, common, draws int
	rapid.Check(t, func(t *rapid.T) {
		draws++
		if Chance(t, 1, 16, "rare") {
			rare++
		}
		if Chance(t, 15, 16, "common") {
			common++
		}
	})
	if rare*4 > draws || common*10 < draws*7 {
		t.Fatalf("out of %d draws: %d rare, %d common", draws, rare, common)
	}
}
