package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"latent.dev/admission/internal/shadow/shadowtest"
	"latent.dev/admission/internal/trace"
	"latent.dev/admission/policy"
)

const shadowPolicy = "../../testdata/policy/node.json"

// shadowTrace records a small workload under the testdata policy.
func shadowTrace(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(shadowPolicy)
	require.NoError(t, err)
	p, err := policy.DecodePolicy(data)
	require.NoError(t, err)
	cat, err := os.ReadFile("../../testdata/catalog/good.json")
	require.NoError(t, err)
	rec, err := shadowtest.NewRecorder(p, cat)
	require.NoError(t, err)
	require.NoError(t, shadowtest.Workload{Decisions: 1000, SampleEvery: 100, Seed: 1}.Run(rec))
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	require.NoError(t, rec.Write(path))
	return path
}

// lowerAcme writes the testdata policy with acme's live limit at 2.
func lowerAcme(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(shadowPolicy)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	tenants := doc["tenants"].([]any)
	tenants[0].(map[string]any)["limits"].(map[string]any)["max_live_activations"] = 2
	out, err := json.Marshal(doc)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "candidate.json")
	require.NoError(t, os.WriteFile(path, out, 0o644))
	return path
}

func runShadowCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(append([]string{"shadow"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestShadowUnderTheRecordedPolicyChangesNothing(t *testing.T) {
	tr := shadowTrace(t)
	code, out, errOut := runShadowCmd("-policy", shadowPolicy, tr)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^tenant +reason +recorded +candidate$`, out)
	assert.Regexp(t, `(?m)^acme +capacity-exhausted +(\d+) +(\d+)$`, out)
	m := regexp.MustCompile(`(?m)^(\S+) +(\S+) +(\d+) +(\d+)$`).FindAllStringSubmatch(out, -1)
	require.NotEmpty(t, m)
	for _, row := range m {
		assert.Equal(t, row[3], row[4], "row %v", row[0])
	}
	assert.NotContains(t, out, "changed decisions")
	assert.Regexp(t, `(?m)^shadow: 1000 decisions, \d+ refused as recorded, \d+ under the candidate, 0 changed; exact$`, out)
}

func TestShadowPrintsTheChangedDecisions(t *testing.T) {
	tr := shadowTrace(t)
	report := filepath.Join(t.TempDir(), "report.html")
	code, out, errOut := runShadowCmd(tr, "-policy="+lowerAcme(t), "--report", report)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^changed decisions \(the first 20 of \d+\):$`, out)
	lines := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z order \d+ acme/thumbs/\w+ activation a\d+: recorded [a-z-]+, candidate capacity-exhausted \(tenant live-activations\)$`).FindAllString(out, -1)
	assert.Len(t, lines, 20, out)
	assert.Regexp(t, `(?m)^shadow: 1000 decisions, (\d+) refused as recorded, (\d+) under the candidate, [1-9]\d* changed; exact$`, out)
	page, err := os.ReadFile(report)
	require.NoError(t, err)
	assert.Contains(t, string(page), `<svg id="reasons-chart"`)
	assert.Contains(t, string(page), `<svg id="scope-0-chart"`)
	assert.NotContains(t, string(page), "http")
}

func TestShadowExitCodes(t *testing.T) {
	tr := shadowTrace(t)
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	data, err := os.ReadFile(tr)
	require.NoError(t, err)
	lines := strings.SplitN(string(data), "\n", 4)
	lines[2] = `{"k":"load","order":1,"bogus":true}`
	require.NoError(t, os.WriteFile(bad, []byte(strings.Join(lines, "\n")), 0o644))
	badPolicy := filepath.Join(t.TempDir(), "policy.json")
	require.NoError(t, os.WriteFile(badPolicy, []byte(`{"node":{}}`), 0o644))

	for _, c := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"a bad line", []string{"-policy", shadowPolicy, bad}, 1, bad + `:3: not a trace line: json: unknown field "bogus"`},
		{"a bad policy", []string{"-policy", badPolicy, tr}, 1, badPolicy + ": the candidate policy is not valid:\nnode"},
		{"a bad catalog", []string{"-policy", shadowPolicy, "-catalog", "../../testdata/catalog/bad.json", tr}, 1, "bad.json: the catalog is not valid:\n"},
		{"an unknown flag", []string{"-policy", shadowPolicy, "-nope", tr}, 2, "unknown flag -nope"},
		{"no policy", []string{tr}, 2, "no -policy"},
		{"no trace", []string{"-policy", shadowPolicy}, 2, "no TRACE file"},
		{"a flag without its value", []string{tr, "-policy"}, 2, "-policy needs a value"},
		{"a missing trace", []string{"-policy", shadowPolicy, filepath.Join(t.TempDir(), "none.jsonl")}, 3, "none.jsonl: no such file or directory"},
		{"a missing policy", []string{"-policy", "none.json", tr}, 3, "none.json: no such file or directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := runShadowCmd(c.args...)
			assert.Equal(t, c.code, code, errOut)
			assert.Contains(t, errOut, c.stderr)
		})
	}
}

func TestAnUnwritableReportFailsBeforeTheReplay(t *testing.T) {
	// A trace whose replay would fail: the report's error comes first.
	tr := shadowTrace(t)
	data, err := os.ReadFile(tr)
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	lines[len(lines)-2] = `{"k":"load","order":1,"bogus":true}`
	require.NoError(t, os.WriteFile(tr, []byte(strings.Join(lines, "\n")), 0o644))
	report := filepath.Join(t.TempDir(), "missing", "report.html")
	code, out, errOut := runShadowCmd("-policy", shadowPolicy, "-report", report, tr)
	assert.Equal(t, 3, code, errOut)
	assert.Contains(t, errOut, "admissionctl shadow: the report: open "+report+": no such file or directory")
	assert.NotContains(t, errOut, "bogus", "the replay never ran")
	assert.Empty(t, out)

	// A report that could be opened is not left behind by a replay that fails.
	report = filepath.Join(t.TempDir(), "report.html")
	code, _, errOut = runShadowCmd("-policy", shadowPolicy, "-report", report, tr)
	assert.Equal(t, 1, code, errOut)
	assert.NoFileExists(t, report)
}

func TestAFloodPrintsABoundedTable(t *testing.T) {
	data, err := os.ReadFile(shadowPolicy)
	require.NoError(t, err)
	p, err := policy.DecodePolicy(data)
	require.NoError(t, err)
	cat, err := os.ReadFile("../../testdata/catalog/good.json")
	require.NoError(t, err)
	rec, err := shadowtest.NewRecorder(p, cat)
	require.NoError(t, err)
	require.NoError(t, shadowtest.Workload{Decisions: 100, SampleEvery: 100, Seed: 1}.Run(rec))
	long := strings.Repeat("x", 2000)
	for i := range 3000 {
		name := long + strconv.Itoa(i)
		rec.Lines = append(rec.Lines, trace.Line{Kind: trace.KindDecision, Order: rec.Provider.NextOrder(), T: 1,
			Decision: &trace.Decision{Stage: trace.StageEdge, Target: trace.Target{Tenant: name, Service: name, Route: name},
				ActivationID: name, Answer: trace.AnswerUnauthenticated}})
	}
	tr := filepath.Join(t.TempDir(), "trace.jsonl")
	require.NoError(t, rec.Write(tr))
	report := filepath.Join(t.TempDir(), "report.html")
	code, out, errOut := runShadowCmd("-policy", shadowPolicy, "-report", report, tr)
	require.Equal(t, 0, code, errOut)
	assert.Less(t, len(out), 64<<10, "3,000 invented tenants print a bounded table")
	assert.Contains(t, out, "(other tenants)")
	info, err := os.Stat(report)
	require.NoError(t, err)
	assert.Less(t, info.Size(), int64(1<<20))
}
