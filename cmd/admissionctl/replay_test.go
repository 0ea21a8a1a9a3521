package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReplayCheckPassesTheSharedExamples(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/shared-scenarios/*.json")
	var out, errOut bytes.Buffer
	if code := run(append([]string{"replay", "--check"}, files...), &out, &errOut); code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut.String())
	}
	if lines := strings.Count(out.String(), "\n"); lines != 11+13+6+7 {
		t.Fatalf("printed %d lines, want one per step", lines)
	}
}

func TestReplayCheckReportsAWrongExpectation(t *testing.T) {
	data, err := os.ReadFile("../../testdata/shared-scenarios/lifecycle.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	step := doc["steps"].([]any)[2].(map[string]any)
	if step["op"] != "snapshot" {
		t.Fatalf("the fixture changed: step 2 is %v", step["op"])
	}
	step["expect"].(map[string]any)["queued"] = 7
	broken, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "wrong.json")
	if err := os.WriteFile(file, broken, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run([]string{"replay", "--check", "-q", file}, &out, &errOut)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	want := file + `: step 2 (snapshot): key "queued": expected 7, got 1`
	if !strings.Contains(errOut.String(), want) {
		t.Fatalf("stderr lacks %q:\n%s", want, errOut.String())
	}
	if out.Len() != 0 {
		t.Fatalf("-q printed answers:\n%s", out.String())
	}
}

func TestReplayRejectsMalformedScenarios(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(file, []byte(`{"name": "x", "epoch_unix_ms": 0, "steps": [{"op": "load"}], "extra": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"replay", "--check", file}, &out, &errOut); code != 1 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{file + ": extra: unknown key", file + ": steps[0].sample: missing", file + ": policy: missing"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	if code := run([]string{"replay"}, &out, &errOut); code != 2 {
		t.Fatalf("no files: exit %d", code)
	}
	if code := run([]string{"replay", "--bogus", file}, &out, &errOut); code != 2 {
		t.Fatalf("unknown flag: exit %d", code)
	}
}
