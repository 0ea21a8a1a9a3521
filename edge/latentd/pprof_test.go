package latentd

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/google/pprof/profile"
)

// Live profiles are for administrators only, under the Host rule, and a
// CPU profile taken over HTTP is one go tool pprof reads.
func TestLiveProfilesAreForAdministrators(t *testing.T) {
	tn := startNode(t, nodeOptions{})
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1", "/debug/pprof/cmdline"} {
		if r := tn.do(http.MethodGet, path, "", nil); r.status != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d", path, r.status)
		}
		if r := tn.do(http.MethodGet, path, aliceToken, nil); r.status != http.StatusForbidden {
			t.Errorf("%s with a tenant's token: %d", path, r.status)
		}
		if r := tn.do(http.MethodGet, path, metricsToken, nil); r.status != http.StatusForbidden {
			t.Errorf("%s with a metrics token: %d", path, r.status)
		}
	}
	req, err := http.NewRequest(http.MethodGet, tn.url+"/debug/pprof/heap", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "rebound.example"
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := tn.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("an administrator through a foreign Host: %d", resp.StatusCode)
	}

	r := tn.do(http.MethodGet, "/debug/pprof/profile?seconds=1", adminToken, nil)
	if r.status != http.StatusOK {
		t.Fatalf("CPU profile: %d %s", r.status, r.body)
	}
	p, err := profile.Parse(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("the CPU profile does not parse: %v", err)
	}
	if len(p.SampleType) == 0 || p.SampleType[0].Type != "samples" {
		t.Errorf("sample types %v, want a CPU profile", p.SampleType)
	}
	if r := tn.do(http.MethodGet, "/debug/pprof/heap", adminToken, nil); r.status != http.StatusOK {
		t.Errorf("heap: %d", r.status)
	} else if _, err := profile.Parse(bytes.NewReader(r.body)); err != nil {
		t.Errorf("the heap profile does not parse: %v", err)
	}
}
