package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// replacements are gremlins' token changes (its engine/mappings.go) for
// the default mutators, by mutator and operator.
var replacements = map[string]map[string]string{
	"ARITHMETIC_BASE":       {"+": "-", "*": "/", "/": "*", "%": "*", "-": "+"},
	"CONDITIONALS_BOUNDARY": {">=": ">", ">": ">=", "<=": "<", "<": "<="},
	"CONDITIONALS_NEGATION": {"==": "!=", "!=": "==", ">=": "<", ">": "<=", "<=": ">", "<": ">="},
	"INCREMENT_DECREMENT":   {"++": "--", "--": "++"},
	"INVERT_NEGATIVES":      {"-": "+"},
	"INVERT_LOGICAL":        {"&&": "||", "||": "&&"},
}

// mutate returns src with the operator at line:col (1-based, in bytes)
// replaced as mutator does.
func mutate(src []byte, line, col int, mutator string) ([]byte, error) {
	table, ok := replacements[mutator]
	if !ok {
		return nil, fmt.Errorf("mutator %s is not supported for uncovered mutants", mutator)
	}
	offset := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(src[offset:], '\n')
		if i < 0 {
			return nil, fmt.Errorf("no line %d", line)
		}
		offset += i + 1
	}
	offset += col - 1
	if offset >= len(src) {
		return nil, fmt.Errorf("no column %d on line %d", col, line)
	}
	// The longest operator at the position is the token (">=" before ">").
	for _, width := range []int{2, 1} {
		if offset+width > len(src) {
			continue
		}
		if to, ok := table[string(src[offset:offset+width])]; ok {
			out := append([]byte{}, src[:offset]...)
			out = append(out, to...)
			return append(out, src[offset+width:]...), nil
		}
	}
	return nil, fmt.Errorf("line %d column %d holds no operator %s changes", line, col, mutator)
}

// retestUncovered tests, in a copy of the module, each mutant gremlins
// left untested for want of a coverage block, and sets its status:
// NOT VIABLE when it does not build, KILLED when the package's tests
// fail, TIMED OUT when they run past the limit, LIVED when they pass.
func retestUncovered(root, pkg string, mutants []Mutant) error {
	var todo []int
	for i, m := range mutants {
		if m.Status == statusNotCovered {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	fmt.Printf("mutants: %s: testing %d mutants outside gremlins' coverage blocks\n", pkg, len(todo))
	tmp, err := os.MkdirTemp("", "mutants-module-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := copyModule(root, tmp); err != nil {
		return err
	}
	for _, i := range todo {
		m := &mutants[i]
		file := filepath.Join(tmp, filepath.FromSlash(m.File))
		original, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		mutated, err := mutate(original, m.Line, m.Column, m.Type)
		if err != nil {
			return fmt.Errorf("%s: %w", m.Key(), err)
		}
		if err := os.WriteFile(file, mutated, 0o644); err != nil {
			return err
		}
		m.Status = runTests(tmp, pkg)
		if err := os.WriteFile(file, original, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// runTests runs pkg's tests in module copy dir and maps the outcome to a
// gremlins status: a mutant that does not build is NOT VIABLE, as
// gremlins calls it.
func runTests(dir, pkg string) string {
	build := exec.Command("go", "build", "./"+pkg)
	build.Dir = dir
	if build.Run() != nil {
		return statusNotViable
	}
	const limit = 10 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-failfast", "./"+pkg)
	cmd.Dir = dir
	err := cmd.Run()
	switch {
	case ctx.Err() != nil:
		return statusTimedOut
	case err != nil:
		return statusKilled
	}
	return statusLived
}

// copyModule copies the module's files, without .git, to dst.
func copyModule(root, dst string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if d.IsDir() && (rel == ".git" || strings.HasPrefix(rel, ".git"+string(filepath.Separator))) {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(target, data, 0o644)
		}
		return nil // links and other files are left out
	})
}
