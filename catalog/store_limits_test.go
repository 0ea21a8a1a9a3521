package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"latent.dev/admission/internal/strictjson"
)

// names returns n distinct identifiers of length bytes each.
func names(n, length int) []string {
	out := make([]string, n)
	for i := range out {
		s := fmt.Sprintf("f%d-", i)
		out[i] = s + strings.Repeat("x", length-len(s))
	}
	return out
}

// TestTheLargestValidRevisionFitsInOneRecord: a revision at every bound
// of validation encodes within the record limit, so a deployment that
// validates can always be stored.
func TestTheLargestValidRevisionFitsInOneRecord(t *testing.T) {
	d := weighted("acme", "thumbs", 1)
	rev := &d.Routes[0].Revisions[0]
	rev.Release = Release{ArtifactDigest: strings.Repeat("d", MaxNameBytes), Version: strings.Repeat("v", MaxNameBytes)}
	rev.Weight = ^uint64(0)
	p := &rev.Policy
	p.TrustClass, p.Backend, p.StateModel = strings.Repeat("t", MaxNameBytes), strings.Repeat("b", MaxNameBytes), strings.Repeat("s", MaxNameBytes)
	p.CallDepthLimit = ^uint32(0)
	p.Features = names(MaxPolicyListEntries, MaxNameBytes)
	p.Placement.Architectures = names(MaxPolicyListEntries, MaxNameBytes)
	p.Placement.Regions = names(MaxPolicyListEntries, MaxNameBytes)
	p.Placement.Zones = names(MaxPolicyListEntries, MaxNameBytes)
	dep, err := compileDeployment(&d, 1)
	if err != nil {
		t.Fatal(err)
	}
	record := appendRevisionRecord(nil, &dep.routes[0].revisions[0].spec)
	if len(record) > maxRecordBytes {
		t.Fatalf("the largest valid revision record takes %d bytes, over the limit of %d", len(record), maxRecordBytes)
	}
	if _, _, err := encodeChanges([]change{{key: DeploymentKey{"acme", "thumbs"}, dep: dep}}); err != nil {
		t.Fatal(err)
	}
}

// TestAnUnstorableDeploymentIsInvalidAndSpendsNoGeneration: a policy list
// too long for the store's records is a validation problem at that
// list's JSON path, found before a generation is spent, so it is never a
// store error a caller would retry.
func TestAnUnstorableDeploymentIsInvalidAndSpendsNoGeneration(t *testing.T) {
	tooMany := weighted("acme", "many", 1)
	tooMany.Routes[0].Revisions[0].Policy.Features = names(MaxPolicyListEntries+1, 8)
	// 70,000 zones of 255 bytes: 18 MB, past the 16 MiB record limit.
	tooBig := weighted("acme", "big", 1)
	tooBig.Routes[0].Revisions[0].Policy.Placement.Zones = names(70_000, MaxNameBytes)
	for _, tt := range []struct {
		name string
		d    Deployment
		path string
	}{
		{"a features list one over the bound", tooMany, "routes[0].revisions[0].policy.features"},
		{"a zones list past the record limit", tooBig, "routes[0].revisions[0].policy.placement.zones"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			c, err := Create(dir, GenerousCapacity)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			mustDeploy(t, c, weighted("acme", "thumbs", 1))
			path := filepath.Join(dir, StoreFileName)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			check := func(op, prefix string, err error) {
				t.Helper()
				var problems strictjson.Problems
				var se *StoreError
				switch {
				case !errors.Is(err, ErrInvalidDeployment):
					t.Fatalf("%s = %v, want ErrInvalidDeployment", op, err)
				case errors.As(err, &se):
					t.Fatalf("%s = %v: a store error, which callers retry", op, err)
				case !errors.As(err, &problems) || len(problems) != 1 || problems[0].Path != prefix+tt.path:
					t.Fatalf("%s: problems %v, want one at %s", op, problems, prefix+tt.path)
				}
			}
			_, err = c.Deploy(tt.d)
			check("Deploy", "", err)
			_, err = c.Apply(Changes{Deploy: []Deployment{tt.d}})
			check("Apply", "deploy[0].", err)
			if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
				t.Fatal("a refused deployment changed the store")
			}
			if g := mustDeploy(t, c, weighted("acme", "after", 1)); g != 2 {
				t.Fatalf("the next deploy got generation %d, want 2: a refused one spent a generation", g)
			}
		})
	}
}

// TestAnEncodeFailureIsNeverRetryable: should the format refuse a change
// anyway, the error says the change is invalid, not that its outcome is
// unknown, and the catalog spends no generation on it.
func TestAnEncodeFailureIsNeverRetryable(t *testing.T) {
	for _, cause := range []error{errRecordTooLarge, errStoreTooLarge} {
		err := encodeFailure("store", cause)
		if !isEncodeFailure(err) || !(errors.Is(err, ErrInvalidDeployment) || errors.Is(err, ErrCapacityExceeded)) {
			t.Fatalf("encode failure %v: %v is neither invalid nor over the capacity", cause, err)
		}
	}
}
