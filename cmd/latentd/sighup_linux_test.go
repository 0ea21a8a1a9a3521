package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/edge/latentd/demo"
)

// patience bounds a wait for what must happen; it only bounds a hang.
const patience = 2 * time.Minute

// holdsOpen reports whether process pid has file open.
func holdsOpen(pid int, file string) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && target == file {
			return true
		}
	}
	return false
}

// A SIGHUP while latentd starts (here: while it compiles its stored
// deployment's guest, once its catalog store is open) does not end it:
// the reload waits, and is done once the node serves.
func TestSIGHUPDuringStartIsDoneOnceServing(t *testing.T) {
	store, artifacts, tokens := filepath.Join(t.TempDir(), "store"), t.TempDir(), tokenFile(t)
	c, err := catalog.Create(store, catalog.GenerousCapacity)
	if err != nil {
		t.Fatal(err)
	}
	deployments, err := demo.Deployments()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deployments {
		if _, err := c.Deploy(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(artifacts, "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	guestFile := filepath.Join(artifacts, "sha256", strings.TrimPrefix(demo.GuestDigest(), "sha256:")+".wasm")
	if err := os.WriteFile(guestFile, demo.Guest(), 0o644); err != nil {
		t.Fatal(err)
	}
	storeFile, err := filepath.EvalSymlinks(filepath.Join(store, catalog.StoreFileName))
	if err != nil {
		t.Fatal(err)
	}

	ch := startChild(t, "-listen", "127.0.0.1:0", "-store", store, "-artifacts", artifacts, "-tokens", tokens, "-policy", calmPolicy(t))
	pid := ch.cmd.Process.Pid
	for deadline := time.Now().Add(patience); !holdsOpen(pid, storeFile); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the child never opened its store")
		}
		if err := syscall.Kill(pid, 0); err != nil {
			t.Fatalf("the child ended before opening its store: %v", err)
		}
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	addr := ch.waitLine(t, "latentd: serving on http://")
	for deadline := time.Now().Add(patience); ; time.Sleep(5 * time.Millisecond) {
		_, body := call(t, http.MethodGet, "http://"+addr+"/metrics", "", fileAdminToken, nil)
		if strings.Contains(string(body), `latent_node_reloads_total{result="ok"} 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reload asked for during the start was never done:\n%s", body)
		}
	}
	if err := ch.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for range ch.lines {
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- ch.cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("exit: %v; stderr: %s", err, ch.stderr)
		}
	case <-ctx.Done():
		t.Fatal("no exit after SIGTERM")
	}
}
