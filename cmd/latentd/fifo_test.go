//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mkfifo makes a FIFO that no one writes to.
func mkfifo(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	return path
}

// A FIFO given as any file latentd reads at start, or creates, is
// refused at once, naming it: nothing waits for a writer or a reader.
func TestAFIFOAtStartIsRefusedNamingIt(t *testing.T) {
	ca := newTestCA(t)
	certFile, keyFile := ca.issue(t, t.TempDir(), 3)
	tokens, policy := tokenFile(t), calmPolicy(t)
	for _, tc := range []struct {
		flag string
		args func(fifo string) []string
	}{
		{"-tokens", func(f string) []string { return []string{"-tokens", f} }},
		{"-policy", func(f string) []string { return []string{"-tokens", tokens, "-policy", f} }},
		{"-tls-cert", func(f string) []string { return []string{"-tokens", tokens, "-tls-cert", f, "-tls-key", keyFile} }},
		{"-tls-key", func(f string) []string { return []string{"-tokens", tokens, "-tls-cert", certFile, "-tls-key", f} }},
		{"-record", func(f string) []string { return []string{"-tokens", tokens, "-policy", policy, "-record", f} }},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			fifo := mkfifo(t, "fifo")
			var stderr lockedBuffer
			code := make(chan int, 1)
			go func() {
				code <- serveMain(context.Background(), append([]string{"-listen", "127.0.0.1:0"}, tc.args(fifo)...), &bytes.Buffer{}, &stderr)
			}()
			select {
			case c := <-code:
				if c != 1 || !strings.Contains(stderr.String(), fifo+": not a regular file") {
					t.Errorf("exit %d, stderr %q", c, stderr.String())
				}
			case <-time.After(2 * time.Minute):
				t.Fatalf("start blocked on the FIFO; stderr %q", stderr.String())
			}
		})
	}
}

// A token file replaced by a FIFO fails its reload at once (the tokens
// in force stay, the failure is logged and counted), a later reload of
// a good file works, and SIGTERM ends the node.
func TestAFIFOAtReloadFailsAndTheNextReloadWorks(t *testing.T) {
	tokens := tokenFile(t)
	good, err := os.ReadFile(tokens)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, "-tokens", tokens, "-policy", calmPolicy(t))
	if err := os.Remove(tokens); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(tokens, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	hup := func() {
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(s.stderr.String(), what); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the log:\n%s", what, s.stderr)
			}
		}
	}
	hup()
	waitFor(tokens + ": not a regular file")
	if status, _ := call(t, "GET", "http://"+s.addr+"/v1/admin/snapshot", "", fileAdminToken, nil); status != 200 {
		t.Errorf("the tokens in force after the refused reload: %d", status)
	}
	if err := os.Remove(tokens); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokens, good, 0o600); err != nil {
		t.Fatal(err)
	}
	hup()
	waitFor("latentd: reloaded")
	s.end(t)
}
