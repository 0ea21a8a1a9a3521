package latentd

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"latent.dev/admission/internal/trace"
)

func TestARefusalBeforeAuthenticationRecordsBoundedNames(t *testing.T) {
	tn, path := startRecordingNode(t)
	long := strings.Repeat("x", 1500)
	const unknown = "an-unknown-token"
	assert.Equal(t, http.StatusUnauthorized, tn.invoke(long+"/"+long+"/"+long, unknown, "",
		HeaderActivationID, long, HeaderRoutingKey, long).status)
	// An authenticated caller's path to another tenant is refused before
	// the headers are read too.
	assert.Equal(t, http.StatusForbidden, tn.invoke(long+"/echo/run", aliceToken, "", HeaderActivationID, long).status)
	// Names within the bound are kept.
	assert.Equal(t, http.StatusUnauthorized, tn.invoke("acme/echo/run", unknown, "", HeaderActivationID, "act-ok").status)
	tn.waitIdle()
	tn.shutdown()

	lines, text := readTrace(t, path)
	assert.NotContains(t, text, long[:65], "no name over maximum_identifier_bytes (64) is recorded")
	var edge []trace.Decision
	for _, l := range lines {
		if l.Kind == trace.KindDecision {
			edge = append(edge, *l.Decision)
		}
	}
	require.Len(t, edge, 3)
	for _, d := range edge[:2] {
		assert.Equal(t, trace.StageEdge, d.Stage)
		assert.Empty(t, d.Target.Tenant)
		assert.Empty(t, d.ActivationID)
		assert.Empty(t, d.RoutingKey)
	}
	assert.Equal(t, trace.AnswerUnauthenticated, edge[0].Answer)
	assert.Empty(t, edge[0].Target.Service)
	assert.Empty(t, edge[0].Target.Route)
	assert.Equal(t, trace.Target{Tenant: "acme", Service: "echo", Route: "run"}, edge[2].Target)
	assert.Equal(t, "act-ok", edge[2].ActivationID)
}

// fullDisk is the trace file's seam: while full, a write puts down half
// of its bytes and fails with ENOSPC.
type fullDisk struct {
	full   atomic.Bool
	failed atomic.Int64
}

type fullDiskFile struct {
	*os.File
	disk *fullDisk
}

func (f fullDiskFile) Write(p []byte) (int, error) {
	if f.disk.full.Load() {
		f.disk.failed.Add(1)
		n, _ := f.File.Write(p[:len(p)/2])
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return f.File.Write(p)
}

func (d *fullDisk) create(path string) (trace.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	return fullDiskFile{File: f, disk: d}, nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestAFullDiskIsLoggedShownAndRecordingResumes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	disk := &fullDisk{}
	var log lockedBuffer
	tn := startNode(t, nodeOptions{mutate: func(c *Config) {
		c.RecordPath, c.recordCreate = path, disk.create
		c.Logger = slog.New(slog.NewJSONHandler(&log, nil))
	}})
	recording := func() map[string]any {
		st := tn.do(http.MethodGet, "/v1/admin/status", adminToken, nil)
		require.Equal(t, http.StatusOK, st.status)
		var out struct {
			Recording map[string]any `json:"recording"`
		}
		require.NoError(t, json.Unmarshal(st.body, &out))
		require.NotNil(t, out.Recording)
		return out.Recording
	}
	assert.Equal(t, "recording", recording()["state"])

	disk.full.Store(true)
	// Requests until a write reaches the full disk (the file buffer
	// holds 64 KiB).
	for disk.failed.Load() == 0 {
		for range 50 {
			tn.invoke("acme/echo/run", "unknown", "")
		}
	}
	require.Eventually(t, func() bool { return tn.node.rec.w.Err() != nil }, patience, time.Millisecond)
	// Logged at once, naming the file; counted; on the status page.
	require.Eventually(t, func() bool { return strings.Contains(log.String(), "recording stopped") }, patience, time.Millisecond)
	assert.Contains(t, log.String(), `"file":"`+path+`"`)
	rec := recording()
	assert.Equal(t, "stopped", rec["state"])
	assert.Contains(t, rec["error"], path)
	assert.Contains(t, rec["error"], "no space left on device")
	assert.EqualValues(t, 1, rec["write_errors"])
	m := tn.do(http.MethodGet, "/metrics", metricsToken, nil)
	assert.Contains(t, string(m.body), "latent_record_write_errors_total 1")
	assert.Contains(t, string(m.body), "latent_record_stopped 1")

	// Space returns: recording resumes, and the page says so.
	disk.full.Store(false)
	require.Eventually(t, func() bool { return tn.node.rec.w.Err() == nil }, patience, 10*time.Millisecond)
	assert.Equal(t, "recording", recording()["state"])
	assert.Contains(t, log.String(), "recording resumed")
	assert.Equal(t, http.StatusUnauthorized, tn.invoke("acme/echo/run", "unknown", "", HeaderActivationID, "after").status)
	tn.waitIdle()
	tn.shutdown()

	// The trace reads, says what was lost, and holds the line after.
	rd, err := trace.Open([]string{path}, 0)
	require.NoError(t, err)
	defer rd.Close()
	var after bool
	for {
		l, err := rd.Next()
		if err != nil {
			break
		}
		if l.Kind == trace.KindDecision && l.Decision.ActivationID == "after" {
			after = true
		}
	}
	assert.True(t, after)
	assert.NotZero(t, rd.Stats().Dropped)
}
