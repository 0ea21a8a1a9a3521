package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// -max-connections-per-client reaches the node: with a cap of one, a
// second connection from the same address is closed, and counted, while
// the first is still served.
func TestTheConnectionCapFlags(t *testing.T) {
	s := serve(t, "-tokens", tokenFile(t), "-policy", calmPolicy(t), "-max-connections-per-client", "1")
	defer s.end(t)
	first, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if err := first.SetDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(first)
	get := func(path string) (int, string) {
		t.Helper()
		if _, err := io.WriteString(first, "GET "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+fileAdminToken+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if status, _ := get("/healthz"); status != http.StatusOK {
		t.Fatalf("the first connection: %d", status)
	}
	second, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if err := second.SetDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(second, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(second), nil); err == nil {
		resp.Body.Close()
		t.Errorf("a second connection past -max-connections-per-client 1 was answered %d", resp.StatusCode)
	}
	if status, body := get("/metrics"); status != http.StatusOK || !strings.Contains(body, `latent_node_connections_refused_total{reason="per_client"} 1`) {
		t.Errorf("metrics: %d, refused per client not 1:\n%s", status, body)
	}
	first.Close()
}
