package catalog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"latent.dev/admission/internal/strictjson"
)

func TestApplyMakesEveryChangeAtOneGeneration(t *testing.T) {
	dir := t.TempDir()
	c, err := Create(dir, GenerousCapacity)
	if err != nil {
		t.Fatal(err)
	}
	mustDeploy(t, c, weighted("acme", "thumbs", 1))
	mustDeploy(t, c, weighted("acme", "old", 1))
	held := c.Pin()
	fsys := &faultFS{}
	useFS(c, fsys)
	g, err := c.Apply(Changes{
		Deploy: []Deployment{weighted("acme", "thumbs", 2, 1), weighted("globex", "render", 1), weighted("initech", "jobs", 3)},
		Delete: []DeploymentKey{{"acme", "old"}},
	})
	if err != nil || g != 3 || c.Generation() != 3 {
		t.Fatalf("Apply = %d, %v; generation %d", g, err, c.Generation())
	}
	if !reflect.DeepEqual(fsys.steps, []string{"write", "write", "fsync"}) {
		t.Fatalf("Apply took the store steps %v, want one write of a durable-end slot, one of the transaction and one fsync", fsys.steps)
	}
	for _, k := range []DeploymentKey{{"acme", "thumbs"}, {"globex", "render"}, {"initech", "jobs"}} {
		if _, got, ok := c.Pin().Deployment(k.Tenant, k.Service); !ok || got != 3 {
			t.Fatalf("%v at generation %d (present %v), want 3", k, got, ok)
		}
	}
	if _, _, ok := c.Pin().Deployment("acme", "old"); ok {
		t.Fatal("the deleted deployment is still there")
	}
	// A pin held from before still serves what it held.
	if _, g, ok := held.Deployment("acme", "old"); !ok || g != 2 || held.Len() != 2 {
		t.Fatal("a pin held across an Apply changed")
	}
	want := snapshotView(t, c.Pin())
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if got := snapshotView(t, reopened.Pin()); !equalViews(got, want) {
		t.Fatal("the reopened store differs from the catalog after Apply")
	}
}

func TestApplyIsAllOrNothing(t *testing.T) {
	bad := weighted("globex", "render", 1)
	bad.Routes[0].Name = ""
	tests := []struct {
		name    string
		changes Changes
		reasons []error
		paths   []string
	}{
		{"one invalid deployment among valid ones", Changes{
			Deploy: []Deployment{weighted("initech", "jobs", 1), bad, weighted("umbrella", "a", 1)},
		}, []error{ErrInvalidDeployment}, []string{"deploy[1].routes[0].route"}},
		{"a delete of a pair that is not deployed", Changes{
			Deploy: []Deployment{weighted("initech", "jobs", 1)},
			Delete: []DeploymentKey{{"acme", "thumbs"}, {"nobody", "here"}},
		}, []error{ErrNotDeployed}, []string{"delete[1]"}},
		{"a pair named twice", Changes{
			Deploy: []Deployment{weighted("initech", "jobs", 1), weighted("initech", "jobs", 2)},
		}, []error{ErrInvalidDeployment}, []string{"deploy[1]"}},
		{"a pair deployed and deleted", Changes{
			Deploy: []Deployment{weighted("acme", "thumbs", 2)},
			Delete: []DeploymentKey{{"acme", "thumbs"}},
		}, []error{ErrInvalidDeployment}, []string{"delete[0]"}},
		{"every problem at once", Changes{
			Deploy: []Deployment{bad, weighted("initech", "jobs", 1)},
			Delete: []DeploymentKey{{"nobody", "here"}},
		}, []error{ErrInvalidDeployment, ErrNotDeployed}, []string{"deploy[0].routes[0].route", "delete[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			c, err := Create(dir, GenerousCapacity)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			mustDeploy(t, c, weighted("acme", "thumbs", 1))
			before := c.Pin()
			file := filepath.Join(dir, StoreFileName)
			stored, _ := os.ReadFile(file)
			_, err = c.Apply(tt.changes)
			for _, reason := range tt.reasons {
				if !errors.Is(err, reason) {
					t.Fatalf("Apply = %v, want %v", err, reason)
				}
			}
			var problems strictjson.Problems
			if !errors.As(err, &problems) {
				t.Fatalf("Apply = %v, want the problems listed", err)
			}
			for _, path := range tt.paths {
				found := false
				for _, p := range problems {
					found = found || p.Path == path
				}
				if !found {
					t.Fatalf("problems %v do not name %s", problems, path)
				}
			}
			if c.Pin() != before {
				t.Fatal("a refused Apply changed the view")
			}
			if after, _ := os.ReadFile(file); !bytes.Equal(after, stored) {
				t.Fatal("a refused Apply wrote to the store")
			}
			if g := mustDeploy(t, c, weighted("acme", "next", 1)); g != 2 {
				t.Fatalf("a refused Apply consumed a generation: next is %d", g)
			}
		})
	}
	t.Run("over the capacity", func(t *testing.T) {
		c := New(Capacity{MaxRevisions: 2, MaxPolicyBytes: 1 << 20})
		mustDeploy(t, c, weighted("acme", "thumbs", 1))
		before := c.Pin()
		_, err := c.Apply(Changes{Deploy: []Deployment{weighted("a", "b", 1), weighted("c", "d", 1)}})
		if !errors.Is(err, ErrCapacityExceeded) || c.Pin() != before {
			t.Fatalf("Apply over the capacity = %v", err)
		}
		// Replacing within the same capacity is fine: a delete frees room.
		if _, err := c.Apply(Changes{Deploy: []Deployment{weighted("a", "b", 1), weighted("c", "d", 1)}, Delete: []DeploymentKey{{"acme", "thumbs"}}}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a failed store write", func(t *testing.T) {
		dir := t.TempDir()
		c, err := Create(dir, GenerousCapacity)
		if err != nil {
			t.Fatal(err)
		}
		mustDeploy(t, c, weighted("acme", "thumbs", 1))
		before := c.Pin()
		useFS(c, &crashFS{crashAt: "write", torn: true})
		_, err = c.Apply(Changes{Deploy: []Deployment{weighted("a", "b", 1), weighted("c", "d", 1)}, Delete: []DeploymentKey{{"acme", "thumbs"}}})
		if !errors.Is(err, errCrash) || c.Pin() != before {
			t.Fatalf("Apply with a torn write = %v", err)
		}
		_ = c.Close()
		reopened, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer reopened.Close()
		if reopened.Generation() != 1 || reopened.Pin().Len() != 1 {
			t.Fatalf("a torn Apply reopened at %d with %d deployments", reopened.Generation(), reopened.Pin().Len())
		}
	})
}

func TestApplyEdges(t *testing.T) {
	c := New(GenerousCapacity)
	mustDeploy(t, c, weighted("acme", "thumbs", 1))
	if g, err := c.Apply(Changes{}); err != nil || g != 1 {
		t.Fatalf("an empty Apply = %d, %v; want the current generation", g, err)
	}
	if g := mustDeploy(t, c, weighted("acme", "x", 1)); g != 2 {
		t.Fatalf("an empty Apply consumed a generation: next is %d", g)
	}
	_ = c.Close()
	if _, err := c.Apply(Changes{Deploy: []Deployment{weighted("a", "b", 1)}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Apply after Close = %v", err)
	}
	// An error prints fixed vocabulary and indices, never a caller's name.
	d := weighted("secret-tenant", "secret-service", 1)
	d.Routes[0].Contract = ""
	_, err := New(GenerousCapacity).Apply(Changes{Deploy: []Deployment{d}, Delete: []DeploymentKey{{"secret-tenant", "other"}}})
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("Apply error %q", err)
	}
}
