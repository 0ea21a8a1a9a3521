package latentd

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"latent.dev/admission/core"
	"latent.dev/admission/internal/shadow"
	"latent.dev/admission/node/loadsampler"
)

// TestShadowReplaysARecordedSoakExactly records a soak against a real
// node over loopback (valid work, work over acme's live limit, unknown
// tokens, principals the policy does not list, another tenant's path, an
// unknown route, work refused while memory pressure is over the
// threshold, then a concurrent burst of both tenants), and replays the
// trace: under the same policy no decision changes and the replay is
// exact; under a policy with acme's max_live_activations lowered, the
// only changes are acme's extra capacity-exhausted refusals.
func TestShadowReplaysARecordedSoakExactly(t *testing.T) {
	dir := t.TempDir()
	proc := filepath.Join(dir, "proc")
	require.NoError(t, os.CopyFS(proc, os.DirFS(filepath.Join("testdata", "load", "calm", "proc"))))
	// Without PSI the memory reading is 1 - MemAvailable/MemTotal, which
	// the test sets.
	require.NoError(t, os.RemoveAll(filepath.Join(proc, "pressure")))
	tracePath := filepath.Join(dir, "trace.jsonl")
	tn := startNode(t, nodeOptions{mutate: func(c *Config) {
		c.RecordPath = tracePath
		c.Load = loadsampler.Files{Proc: proc}
		c.SampleInterval = 10 * time.Millisecond
	}})

	sent := map[string]int{} // answers seen, by status
	var mu sync.Mutex
	note := func(r response) {
		mu.Lock()
		defer mu.Unlock()
		sent[fmt.Sprint(r.status)]++
	}
	tiny := []string{HeaderMemoryBytes, "1048576"}

	// acme's four live slots held by guests that block.
	var holds sync.WaitGroup
	for i := range 4 {
		holds.Add(1)
		go func() {
			defer holds.Done()
			note(send(t, tn.client, tn.url, http.MethodPost, "/v1/invoke/acme/echo/run", aliceToken, []byte("hold"),
				append([]string{HeaderActivationID, fmt.Sprintf("hold-%d", i)}, tiny...)...))
		}()
	}
	require.Eventually(t, func() bool {
		s, _ := tn.node.Provider().TenantSnapshot("acme")
		return s.Live == 4
	}, patience, 5*time.Millisecond, "acme's four holds admitted")
	for i := range 6 {
		r := tn.invoke("acme/echo/run", aliceToken, "x", append([]string{HeaderActivationID, fmt.Sprintf("over-%d", i)}, tiny...)...)
		require.Equal(t, http.StatusTooManyRequests, r.status, "over acme's limit: %s", r.body)
		note(r)
	}
	for i := range 4 {
		note(tn.invoke("globex/echo/run", bobToken, "x", append([]string{HeaderActivationID, fmt.Sprintf("g-%d", i)}, tiny...)...))
	}
	// Refused at the edge.
	for _, c := range []struct{ path, token string }{
		{"acme/echo/run", "not-a-token"}, {"acme/echo/run", ""}, {"acme/echo/run", revokedToken},
		{"nowhere/echo/run", strayToken}, {"acme/echo/run", bobToken}, {"acme/nothing-here/run", aliceToken},
	} {
		note(tn.invoke(c.path, c.token, "x", tiny...))
	}

	// Memory pressure over the threshold, then back.
	meminfo := filepath.Join(proc, "meminfo")
	calm, err := os.ReadFile(meminfo)
	require.NoError(t, err)
	writeAtomically(t, meminfo, []byte("MemTotal:        4000000 kB\nMemFree:           10000 kB\nMemAvailable:      20000 kB\n"))
	require.Eventually(t, func() bool {
		s, ok := tn.node.load.CurrentLoad()
		return ok && s.MemoryPressure >= 0.9
	}, patience, 5*time.Millisecond, "memory pressure seen")
	for range 3 {
		r := tn.invoke("globex/echo/run", bobToken, "x", tiny...)
		require.Equal(t, http.StatusServiceUnavailable, r.status, "overloaded: %s", r.body)
		note(r)
	}
	writeAtomically(t, meminfo, calm)
	require.Eventually(t, func() bool {
		s, ok := tn.node.load.CurrentLoad()
		return ok && s.MemoryPressure < 0.5
	}, patience, 5*time.Millisecond, "memory pressure gone")

	tn.closeHold()
	holds.Wait()
	// A concurrent burst of both tenants, guests that run 2 ms, more
	// of acme's at once than its limit allows.
	var burst sync.WaitGroup
	for w := range 10 {
		burst.Add(1)
		go func() {
			defer burst.Done()
			tenant, token := "acme", aliceToken
			if w >= 8 {
				tenant, token = "globex", bobToken
			}
			for i := range 20 {
				note(send(t, tn.client, tn.url, http.MethodPost, "/v1/invoke/"+tenant+"/echo/run", token, []byte("brief"),
					append([]string{HeaderActivationID, fmt.Sprintf("b-%d-%d", w, i)}, tiny...)...))
			}
		}()
	}
	burst.Wait()
	tn.waitIdle()
	tn.shutdown()
	t.Logf("answers by status: %v", sent)
	decisions := 0
	for _, n := range sent {
		decisions += n
	}

	same := testPolicy(t)
	res, err := shadow.Replay(shadow.Config{Policy: same, Files: []string{tracePath}})
	require.NoError(t, err)
	t.Log(res.Summary())
	assert.True(t, res.Exact, "inexact: %v", res.Inexact)
	assert.Equal(t, uint64(decisions), res.Decisions, "one decision line per request")
	assert.Zero(t, res.Changed, "changed decisions under the same policy: %+v", res.Changes)
	recorded, _ := res.Refused()
	assert.GreaterOrEqual(t, recorded, uint64(6+6+3), "the soak's refusals")
	assert.Equal(t, uint64(sent["200"]), res.RecordedAdmitted)

	lower := testPolicy(t)
	for i := range lower.Tenants {
		if lower.Tenants[i].ID == "acme" {
			lower.Tenants[i].Limits.MaxLiveActivations = 1
		}
	}
	res, err = shadow.Replay(shadow.Config{Policy: lower, Files: []string{tracePath}})
	require.NoError(t, err)
	t.Log(res.Summary())
	require.NotZero(t, res.Changed, "lowering acme's limit changed nothing")
	for _, c := range res.Changes {
		assert.Equal(t, "acme", c.Tenant, "a change for another tenant: %+v", c)
		assert.True(t, c.Recorded.Admitted(), "a refusal that changed: %+v", c)
		assert.Equal(t, string(core.ReasonCapacityExhausted), c.Candidate.Answer, "%+v", c)
	}
	extra := map[string]int64{}
	for _, r := range res.Refusals {
		extra[r.Tenant+" "+r.Reason] += int64(r.Candidate) - int64(r.Recorded)
	}
	for key, n := range extra {
		if key == "acme "+string(core.ReasonCapacityExhausted) {
			assert.Positive(t, n, "acme's extra capacity refusals")
			continue
		}
		assert.LessOrEqual(t, n, int64(0), "%s: more refusals under the lowered policy", key)
		if strings.HasPrefix(key, "globex ") {
			assert.Zero(t, n, "%s changed", key)
		}
	}
}

// writeAtomically replaces path's content so a reader sees the old or
// the new file, never half of one.
func writeAtomically(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, data, 0o644))
	require.NoError(t, os.Rename(tmp, path))
}

// TestShadowReplaysDeploysDuringARecordingExactly deploys, deletes and
// redeploys a service while invocations of it run, and replays the
// trace under the same policy: a decision made on a new generation must
// find that generation's catalog, so no decision changes.
func TestShadowReplaysDeploysDuringARecordingExactly(t *testing.T) {
	tracePath := filepath.Join(t.TempDir(), "trace.jsonl")
	tn := startNode(t, nodeOptions{mutate: func(c *Config) { c.RecordPath = tracePath }})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := send(t, tn.client, tn.url, http.MethodPost, "/v1/invoke/acme/fresh/run", aliceToken, []byte("x"),
					HeaderActivationID, fmt.Sprintf("d-%d-%d", w, i), HeaderMemoryBytes, "1048576")
				// A request whose deployment changed between resolving
				// and holding its release is told to retry: not a
				// decision, so it has no line.
				if !strings.Contains(string(r.body), "the deployment changed while the request was resolved") {
					sent.Add(1)
				}
			}
		}()
	}
	for round := range 6 {
		put := tn.do(http.MethodPut, "/v1/admin/deployments/acme/fresh", adminToken,
			versionedDeployment("acme", "fresh", demoDigest, fmt.Sprintf("1.0.%d", round), 1000+round))
		require.Equal(t, http.StatusOK, put.status, "%s", put.body)
		time.Sleep(20 * time.Millisecond)
		if round%2 == 1 {
			del := tn.do(http.MethodDelete, "/v1/admin/deployments/acme/fresh", adminToken, nil)
			require.Equal(t, http.StatusOK, del.status, "%s", del.body)
			time.Sleep(10 * time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
	tn.waitIdle()
	tn.shutdown()

	res, err := shadow.Replay(shadow.Config{Policy: testPolicy(t), Files: []string{tracePath}})
	require.NoError(t, err)
	t.Log(res.Summary())
	assert.True(t, res.Exact, "inexact: %v", res.Inexact)
	assert.Equal(t, uint64(sent.Load()), res.Decisions)
	assert.NotZero(t, res.RecordedAdmitted)
	assert.Zero(t, res.Changed, "changed decisions under the same policy: %+v", res.Changes)
}
