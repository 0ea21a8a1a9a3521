package guest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
)

// TestTheScannerReadsWhatWazeroReads runs the scanner over every module
// of the WebAssembly specification tests that wazero ships with its
// source (and its fuzzing cases): any module the scanner cannot read must
// be one that wazero, with the features the backend enables, refuses
// too. A scanner that lost its place in an instruction stream wazero
// reads would show here. Only the refused modules are compiled, so the
// test costs a scan of each file.
func TestTheScannerReadsWhatWazeroReads(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/tetratelabs/wazero").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Skipf("wazero's source is not at hand: %v", err)
	}
	var files []string
	for _, d := range []string{"spectest/v1", "spectest/v2", "fuzzcases"} {
		found, _ := filepath.Glob(filepath.Join(dir, "internal", "integration_test", d, "testdata", "*.wasm"))
		files = append(files, found...)
	}
	if len(files) == 0 {
		t.Skip("no specification modules in wazero's source")
	}
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	counts := map[string]int{}
	for _, file := range files {
		binary, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		_, scanErr := scanModule(binary)
		switch {
		case scanErr == nil:
			counts["passed"]++
			continue
		case !errors.Is(scanErr, errMalformed):
			counts[trimPrefix(scanErr)]++
			continue
		}
		counts["unreadable"]++
		if compiled, err := r.CompileModule(ctx, binary); err == nil {
			_ = compiled.Close(ctx)
			t.Errorf("%s: wazero compiles it, the scanner cannot read it", filepath.Base(file))
		}
	}
	t.Logf("%d modules: %v", len(files), counts)
	if counts["module refused: it can grow or fill a table at run time (table.grow, table.fill)"] == 0 {
		t.Error("no specification module grows or fills a table: the scanner missed table.grow")
	}
}
