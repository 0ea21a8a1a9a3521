package latentd

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/internal/cputime"
	"latent.dev/admission/internal/trace"
	"latent.dev/admission/policy"
)

// startRecordingNode is startNode recording to a file in a temporary
// directory; it returns the node and the file.
func startRecordingNode(t *testing.T) (*testNode, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	tn := startNode(t, nodeOptions{mutate: func(c *Config) {
		c.RecordPath, c.RecordPolicySHA256 = path, strings.Repeat("ab", 32)
	}})
	return tn, path
}

func readTrace(t *testing.T, path string) ([]trace.Line, string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	// As the replay reads it: in order, each decision whole (the parts
	// a line names in "same" put back). The header comes first.
	r, err := trace.Open([]string{path}, 0)
	require.NoError(t, err)
	defer r.Close()
	h := r.Header()
	lines := []trace.Line{{Kind: trace.KindHeader, Header: &h}}
	for {
		l, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		lines = append(lines, l)
	}
	return lines, string(data)
}

func TestRecordWritesEveryDecision(t *testing.T) {
	tn, path := startRecordingNode(t)
	const payload = "payload-that-must-not-be-recorded"
	const unknownToken = "unknown-token-that-must-not-be-recorded"
	ok := tn.invoke("acme/echo/run", aliceToken, payload, HeaderActivationID, "act-1", HeaderRoutingKey, "key-1",
		HeaderWallTimeMs, "1500", HeaderDeadline, "99999999999999")
	require.Equal(t, http.StatusOK, ok.status, "%s", ok.body)
	assert.Equal(t, http.StatusUnauthorized, tn.invoke("acme/echo/run", unknownToken, payload).status)
	assert.Equal(t, http.StatusForbidden, tn.invoke("globex/echo/run", aliceToken, payload, HeaderActivationID, "act-3").status)
	unresolved := tn.invoke("acme/echo/nowhere", aliceToken, payload, HeaderActivationID, "act-4")
	assert.Equal(t, http.StatusNotFound, unresolved.status, "%s", unresolved.body)
	// Not decisions: a malformed header writes nothing.
	assert.Equal(t, http.StatusBadRequest, tn.invoke("acme/echo/run", aliceToken, payload, HeaderPriority, "-1").status)
	tn.waitIdle()
	m := tn.do(http.MethodGet, "/metrics", metricsToken, nil)
	require.Equal(t, http.StatusOK, m.status)
	assert.Contains(t, string(m.body), "latent_record_lines_total")
	assert.Contains(t, string(m.body), "latent_record_dropped_lines_total 0")
	tn.shutdown()

	lines, text := readTrace(t, path)
	for _, secret := range []string{aliceToken, unknownToken, payload, digestHex(aliceToken)} {
		assert.NotContains(t, text, secret)
	}
	require.GreaterOrEqual(t, len(lines), 2)
	require.Equal(t, trace.KindHeader, lines[0].Kind)
	assert.Equal(t, trace.Version, lines[0].Version)
	assert.Equal(t, strings.Repeat("ab", 32), lines[0].PolicySHA256)
	assert.NotZero(t, lines[0].StartUnixNano)
	require.Equal(t, trace.KindCatalog, lines[1].Kind)
	f, err := catalog.DecodeCatalogFile(lines[1].Catalog.File, true)
	require.NoError(t, err)
	assert.Len(t, f.Deployments, len(testDeployments(t)))
	assert.Equal(t, tn.node.catalog.Pin().Generation(), lines[1].Catalog.Generation)

	orders := map[uint64]bool{}
	byAnswer := map[string]trace.Line{}
	var loads int
	var starts, releases []trace.Line
	for _, l := range lines[1:] {
		require.NotZero(t, l.Order, "%+v", l)
		require.False(t, orders[l.Order], "order %d twice", l.Order)
		orders[l.Order] = true
		switch l.Kind {
		case trace.KindLoad:
			loads++
			assert.NotZero(t, l.Load.Sequence)
		case trace.KindDecision:
			_, dup := byAnswer[l.Decision.Answer]
			require.False(t, dup, "two decisions answered %s", l.Decision.Answer)
			byAnswer[l.Decision.Answer] = l
		case trace.KindStart:
			starts = append(starts, l)
		case trace.KindRelease:
			releases = append(releases, l)
		case trace.KindCatalog:
		default:
			t.Fatalf("unexpected line %+v", l)
		}
	}
	assert.NotZero(t, loads, "the sample New takes is recorded")
	require.Len(t, byAnswer, 4, "one decision per request: %v", byAnswer)

	admitted := byAnswer[trace.AnswerAdmitted].Decision
	require.NotNil(t, admitted)
	assert.Equal(t, trace.StageCore, admitted.Stage)
	assert.Equal(t, &trace.Principal{Kind: "user", Subject: "alice", Tenant: "acme"}, admitted.Principal)
	assert.Equal(t, trace.Target{Tenant: "acme", Service: "echo", Route: "run"}, admitted.Target)
	assert.Nil(t, admitted.Revision, "the replay resolves the target and routing key again")
	assert.Equal(t, "act-1", admitted.ActivationID)
	assert.Equal(t, "key-1", admitted.RoutingKey)
	assert.EqualValues(t, len(payload), admitted.PayloadBytes)
	require.NotNil(t, admitted.Budget.WallTimeNS)
	assert.EqualValues(t, 1500e6, *admitted.Budget.WallTimeNS)
	require.NotNil(t, admitted.DeadlineUnixMS)
	assert.EqualValues(t, 99999999999999, *admitted.DeadlineUnixMS)
	assert.True(t, admitted.Clock)
	assert.True(t, admitted.Committed)
	assert.NotZero(t, admitted.LoadSequence)
	assert.NotZero(t, admitted.Generation)
	of := byAnswer[trace.AnswerAdmitted].Order
	require.Len(t, starts, 1)
	require.Len(t, releases, 1)
	assert.Equal(t, of, starts[0].Of)
	assert.Equal(t, of, releases[0].Of)
	assert.Greater(t, starts[0].Order, of)
	assert.Greater(t, releases[0].Order, starts[0].Order)
	assert.False(t, releases[0].Reclaimed)

	unauth := byAnswer[trace.AnswerUnauthenticated].Decision
	require.NotNil(t, unauth)
	assert.Equal(t, trace.StageEdge, unauth.Stage)
	assert.Nil(t, unauth.Principal)

	denied := byAnswer[string(core.ReasonPrincipalNotAuthorized)].Decision
	require.NotNil(t, denied)
	assert.Equal(t, trace.StageEdge, denied.Stage)
	assert.Equal(t, "acme", denied.Principal.Tenant)
	assert.Equal(t, trace.Target{Tenant: "globex", Service: "echo", Route: "run"}, denied.Target)
	assert.Equal(t, "act-3", denied.ActivationID)
	assert.Equal(t, string(core.ScopePrincipal), denied.Scope)

	missing := byAnswer[string(core.ReasonRevisionNotAvailable)].Decision
	require.NotNil(t, missing)
	assert.Equal(t, trace.StageEdge, missing.Stage)
	assert.Nil(t, missing.Revision)
	assert.Equal(t, "nowhere", missing.Target.Route)
	assert.Equal(t, "act-4", missing.ActivationID)
	assert.EqualValues(t, len(payload), missing.PayloadBytes)
}

func TestRecordWritesDeployAndUndeploy(t *testing.T) {
	tn, path := startRecordingNode(t)
	put := tn.do(http.MethodPut, "/v1/admin/deployments/acme/fresh", adminToken, versionedDeployment("acme", "fresh", demoDigest, "1.0.0", 1000))
	require.Equal(t, http.StatusOK, put.status, "%s", put.body)
	del := tn.do(http.MethodDelete, "/v1/admin/deployments/acme/fresh", adminToken, nil)
	require.Equal(t, http.StatusOK, del.status, "%s", del.body)
	tn.shutdown()

	lines, _ := readTrace(t, path)
	var deploy, undeploy *trace.Line
	for i := range lines {
		switch lines[i].Kind {
		case trace.KindDeploy:
			deploy = &lines[i]
		case trace.KindUndeploy:
			undeploy = &lines[i]
		}
	}
	require.NotNil(t, deploy)
	require.NotNil(t, undeploy)
	assert.EqualValues(t, put.json(t)["generation"], deploy.Change.Generation)
	assert.EqualValues(t, del.json(t)["generation"], undeploy.Change.Generation)
	d, err := catalog.ValidateDeployment(deploy.Change.Deployment, tn.node.cfg.Policy)
	require.NoError(t, err)
	assert.Equal(t, "fresh", d.Service)
	assert.Equal(t, "acme", undeploy.Change.Tenant)
	assert.Equal(t, "fresh", undeploy.Change.Service)
	assert.Greater(t, undeploy.Order, deploy.Order)
}

func TestRecordRefusesANegativeMaxBytes(t *testing.T) {
	_, err := New(testConfig(t, newFakeGuests(), nodeOptions{mutate: func(c *Config) {
		c.RecordPath, c.RecordMaxBytes = filepath.Join(t.TempDir(), "trace.jsonl"), -1
	}}))
	require.Error(t, err)
}

func TestRecordRefusesAMaxBytesBelowTheMinimum(t *testing.T) {
	for _, n := range []int64{1, MinRecordMaxBytes - 1} {
		_, err := New(testConfig(t, newFakeGuests(), nodeOptions{mutate: func(c *Config) {
			c.RecordPath, c.RecordMaxBytes = filepath.Join(t.TempDir(), "trace.jsonl"), n
		}}))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "RecordMaxBytes must be 0 (no rotation) or at least 1048576")
	}
	tn := startNode(t, nodeOptions{mutate: func(c *Config) {
		c.RecordPath, c.RecordMaxBytes = filepath.Join(t.TempDir(), "trace.jsonl"), MinRecordMaxBytes
	}})
	tn.shutdown()
}

// BenchmarkAdmitRecording is one admission and its release on a node's
// own view, without recording (Admit, on the striped provider) and with
// it (AdmitWith on the recording provider, the decision line built as
// invoke builds it and queued, and the release's line from the journal).
// The writer's goroutine encodes the lines to a file meanwhile; lines it
// could not keep up with are reported as dropped/op, the trace's size
// as file-bytes/op, and cpu-ns/op is the process's CPU time per op (the
// writer's included) where the system measures it.
//
// record=discard is record=on with a trace file that keeps nothing (the
// writer encodes every line, and the file's Write only counts its
// bytes): what recording costs the process without the kernel's share,
// which on a host that backs the page cache lazily (a virtual machine's
// first touch of a page) may be the larger part of record=on.
func BenchmarkAdmitRecording(b *testing.B) {
	for _, name := range []string{"record=off", "record=on", "record=discard"} {
		on, discard := name != "record=off", name == "record=discard"
		b.Run(name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "trace.jsonl")
			var sink discardFile
			n, err := New(testConfig(b, newFakeGuests(), nodeOptions{mutate: func(c *Config) {
				// A starved sampler must not make the load sample too
				// old for the benchmark's admissions (load-unavailable).
				c.Policy.Node.Overload.MaximumObservationAge = time.Hour
				if on {
					c.RecordPath = path
				}
				if discard {
					c.recordCreate = func(string) (trace.File, error) { return &sink, nil }
				}
			}}))
			require.NoError(b, err)
			shut := false
			defer func() {
				if !shut {
					require.NoError(b, n.Shutdown(context.Background()))
				}
			}()
			header := http.Header{}
			header.Set(HeaderActivationID, "bench-activation")
			inv, herr := parseInvocation(header, n.provider.Policy().Node().BudgetCeiling)
			require.Nil(b, herr)
			principal := Principal{Kind: policy.UserPrincipal, Subject: "alice", Tenant: "acme"}
			v := n.view.Load()
			target := catalog.Target{Tenant: "acme", Service: "echo", Route: "run"}
			_, handle, err := v.pin.Resolve(target, inv.routingKey)
			require.NoError(b, err)
			req := core.AdmissionRequest{
				ActivationID:    inv.activationID,
				Principal:       core.Principal{Kind: principal.Kind, Subject: principal.Subject, Tenant: principal.Tenant},
				Handle:          handle, // as invoke's: the handle carries the revision
				RequestedBudget: inv.budget,
				PayloadBytes:    1,
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0, _ := cputime.Process()
			for b.Loop() {
				var permit *core.AdmissionPermit
				var err error
				if n.rec == nil {
					permit, err = v.controller.Admit(&req)
				} else {
					permit, err = n.rec.admit(v, target, &req, principal, &inv)
				}
				if err != nil {
					b.Fatal(err)
				}
				permit.Release()
			}
			b.StopTimer()
			if n.rec != nil {
				b.ReportMetric(float64(n.rec.w.Dropped())/float64(b.N), "dropped/op")
			}
			if cpu1, ok := cputime.Process(); ok {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
			shut = true
			require.NoError(b, n.Shutdown(context.Background()))
			switch {
			case discard:
				b.ReportMetric(float64(sink.size.Load())/float64(b.N), "file-bytes/op")
			case n.rec != nil:
				info, err := os.Stat(path)
				require.NoError(b, err)
				b.ReportMetric(float64(info.Size())/float64(b.N), "file-bytes/op")
			}
		})
	}
}

// discardFile is a trace file that keeps nothing: it counts the bytes
// written to it (read once the writer is closed; atomic, so that the
// race detector sees the hand-over).
type discardFile struct{ size atomic.Int64 }

func (f *discardFile) Write(p []byte) (int, error) {
	f.size.Add(int64(len(p)))
	return len(p), nil
}

func (f *discardFile) Sync() error                             { return nil }
func (f *discardFile) Close() error                            { return nil }
func (f *discardFile) Truncate(size int64) error               { f.size.Store(size); return nil }
func (f *discardFile) Seek(offset int64, _ int) (int64, error) { return offset, nil }
