package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseArgsTakesFlagsAnywhere(t *testing.T) {
	for _, c := range []struct {
		name       string
		args       []string
		positional []string
		check      bool
		policy     string
	}{
		{"flags first", []string{"--check", "-policy", "p", "a", "b"}, []string{"a", "b"}, true, "p"},
		{"flags after the files", []string{"a", "b", "--check", "--policy=p"}, []string{"a", "b"}, true, "p"},
		{"flags between the files", []string{"a", "-check", "b", "-policy", "p", "c"}, []string{"a", "b", "c"}, true, "p"},
		{"standard input is positional", []string{"-", "--check"}, []string{"-"}, true, ""},
		{"after -- everything is positional", []string{"a", "--", "-check", "--policy=p"}, []string{"a", "-check", "--policy=p"}, false, ""},
		{"no arguments", nil, nil, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := newFlagSet("test")
			check := fs.Bool("check", false, "")
			var policy onceString
			fs.Var(&policy, "policy", "")
			got, err := parseArgs(fs, c.args)
			require.NoError(t, err)
			assert.Equal(t, c.positional, got)
			assert.Equal(t, c.check, *check)
			assert.Equal(t, c.policy, policy.value)
		})
	}
}

// Every subcommand takes its flags after its files too, as they always
// could.
func TestFlagsMayFollowTheFiles(t *testing.T) {
	scenario := "../../testdata/shared-scenarios/" + firstSharedScenario(t)
	t.Run("replay FILE --check -q", func(t *testing.T) {
		code, stdout, stderr := runCommand(t, "replay", scenario, "--check", "-q")
		assert.Equal(t, 0, code, stderr)
		assert.Empty(t, stdout, "-q after the file was not taken")
		assert.Contains(t, stderr, "ok   ", "--check after the file was not taken")
	})
	t.Run("shadow TRACE -policy P", func(t *testing.T) {
		code, stdout, stderr := runShadowCmd(shadowTrace(t), "-policy", shadowPolicy)
		assert.Equal(t, 0, code, stderr)
		assert.Contains(t, stdout, "tenant")
	})
	t.Run("validate catalog FILE --policy P", func(t *testing.T) {
		code, stdout, stderr := runCommand(t, "validate", "catalog", mismatchCatalog, "--policy", nodePolicy)
		assert.Equal(t, 1, code, stderr)
		assert.NotContains(t, stdout, "ok", "--policy after the file was not taken")
	})
}

// A file whose name begins with a dash is named after "--".
func TestDoubleDashEndsTheFlags(t *testing.T) {
	data, err := os.ReadFile("../../testdata/shared-scenarios/" + firstSharedScenario(t))
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "-scenario.json"), data, 0o644))
	t.Chdir(dir)
	code, _, stderr := runCommand(t, "replay", "--check", "-q", "--", "-scenario.json")
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "ok   -scenario.json")
}

// An unknown flag, wherever it comes, exits 2 naming it, and prints
// nothing on standard output.
func TestAnUnknownFlagExitsTwoNamingIt(t *testing.T) {
	for _, args := range [][]string{
		{"replay", "../../testdata/shared-scenarios/x.json", "--nope"},
		{"shadow", "-policy", shadowPolicy, "trace.jsonl", "-nope"},
		{"validate", "policy", nodePolicy, "-nope"},
		{"validate", "catalog", goodCatalog, "--nope"},
		{"load", "-nope"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runCommand(t, args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, stdout)
			name := args[0]
			if name == "validate" {
				name += " " + args[1]
			}
			assert.Contains(t, stderr, "admissionctl "+name+": unknown flag -nope\nusage: admissionctl "+name)
		})
	}
}

func firstSharedScenario(t *testing.T) string {
	t.Helper()
	files, err := filepath.Glob("../../testdata/shared-scenarios/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return filepath.Base(files[0])
}

// A flag given twice, or given an empty value, is misuse, as it always was.
func TestAFlagTwiceOrEmptyIsMisuse(t *testing.T) {
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"shadow", "-policy", shadowPolicy, "trace.jsonl", "--policy", shadowPolicy}, "admissionctl shadow: -policy given twice"},
		{[]string{"shadow", "-policy=", "trace.jsonl"}, "admissionctl shadow: -policy needs a value"},
		{[]string{"validate", "catalog", goodCatalog, "--policy="}, "admissionctl validate catalog: -policy needs a value"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCommand(t, c.args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, c.stderr)
		})
	}
}
