// Package guesttest builds Go guests for the edge's tests: the Go main
// packages under edge/guest/testdata/guests, compiled as WASI commands
// with the standard toolchain, as `make guests` builds them.
package guesttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ErrBuild is the error of a go build of a guest that failed; the
// BuildError carries the compiler's output.
var ErrBuild = errors.New("guesttest: go build of the guest failed")

// BuildError is a failed BuildGoGuest: ErrBuild, and the go command's
// combined output.
type BuildError struct {
	Output []byte
	Cause  error
}

func (e *BuildError) Error() string { return ErrBuild.Error() }

// Unwrap gives ErrBuild and the cause to errors.Is and errors.As.
func (e *BuildError) Unwrap() []error { return []error{ErrBuild, e.Cause} }

// BuildGoGuest builds the Go main package in srcDir (a directory inside a
// module of its own; the workspace is ignored) as a WASI command into
// outFile, with the go command on PATH:
//
//	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 GOWORK=off go build -trimpath -buildvcs=false -o outFile .
//
// With one toolchain the output is byte for byte the same on every run
// and machine, so its digest can be written down.
func BuildGoGuest(ctx context.Context, srcDir, outFile string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return &BuildError{Cause: err}
	}
	out, err := filepath.Abs(outFile)
	if err != nil {
		return &BuildError{Cause: err}
	}
	cmd := exec.CommandContext(ctx, goTool, "build", "-trimpath", "-buildvcs=false", "-o", out, ".")
	cmd.Dir = srcDir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return &BuildError{Output: output.Bytes(), Cause: fmt.Errorf("go build in %s: %w", srcDir, err)}
	}
	return nil
}
