package main

// A fleet on loopback: one etcd and latentd nodes in processes of their
// own, for `latentd fleet-demo` (make fleet) and the end-to-end tests.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"latent.dev/admission/edge/fleet"
	"latent.dev/admission/edge/fleet/etcdproc"
	"latent.dev/admission/edge/latentd/demo"
)

// demoBobToken is the demonstration's token for user bob of tenant globex.
const demoBobToken = "latent-demo-bob"

// The fleet's timing: the node policy's wall-time ceiling is every fleet
// permit's longest grant (docs/fleet.md#latentd), so a short one allows a
// short lease. The held guest sleeps for fleetHold, well within it.
const (
	fleetWallMS   = 1000
	fleetLeaseTTL = 4 * time.Second
	fleetHold     = 300 * time.Millisecond
)

// sleeperGuest is a hand-assembled WASI module whose _start sleeps for d
// (one poll_oneoff on the monotonic clock) and writes nothing: an
// activation that holds its permit for d and costs no CPU.
func sleeperGuest(d time.Duration) []byte {
	uleb := func(n int) []byte {
		var b []byte
		for {
			c := byte(n & 0x7f)
			n >>= 7
			if n != 0 {
				b = append(b, c|0x80)
				continue
			}
			return append(b, c)
		}
	}
	name := func(s string) []byte { return append(uleb(len(s)), s...) }
	section := func(id byte, content ...[]byte) []byte {
		c := bytes.Join(content, nil)
		return append(append([]byte{id}, uleb(len(c))...), c...)
	}
	// The subscription poll_oneoff reads at address 0: userdata, tag 0
	// (clock), clock ID 1 (monotonic), the timeout in ns, precision 0,
	// flags 0 (relative).
	sub := make([]byte, 48)
	binary.LittleEndian.PutUint32(sub[16:], 1)
	binary.LittleEndian.PutUint64(sub[24:], uint64(d.Nanoseconds()))
	body := []byte{0x00, // no locals
		0x41, 0x00, // i32.const 0: the subscription
		0x41, 0xc0, 0x00, // i32.const 64: the event
		0x41, 0x01, // i32.const 1: one subscription
		0x41, 0x80, 0x01, // i32.const 128: where the count of events goes
		0x10, 0x00, // call poll_oneoff
		0x1a, // drop
		0x0b} // end
	return bytes.Join([][]byte{
		{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00},
		section(1, []byte{0x02, 0x60, 0x04, 0x7f, 0x7f, 0x7f, 0x7f, 0x01, 0x7f, 0x60, 0x00, 0x00}),
		section(2, []byte{0x01}, name("wasi_snapshot_preview1"), name("poll_oneoff"), []byte{0x00, 0x00}),
		section(3, []byte{0x01, 0x01}),
		section(5, []byte{0x01, 0x00, 0x01}),
		section(7, []byte{0x02}, name("memory"), []byte{0x02, 0x00}, name("_start"), []byte{0x00, 0x01}),
		section(10, []byte{0x01}, uleb(len(body)), body),
		section(11, []byte{0x01, 0x00, 0x41, 0x00, 0x0b}, uleb(len(sub)), sub),
	}, nil)
}

// fleetPolicyJSON is the demonstration policy with acme fleet-limited,
// the wall-time ceiling at fleetWallMS and the overload thresholds at 1.
func fleetPolicyJSON() ([]byte, error) {
	var p map[string]any
	if err := json.Unmarshal(demo.PolicyJSON(), &p); err != nil {
		return nil, err
	}
	node, _ := p["node"].(map[string]any)
	ceiling, _ := node["budget_ceiling"].(map[string]any)
	if ceiling == nil {
		return nil, errors.New("the demonstration policy has no node.budget_ceiling")
	}
	ceiling["wall_time_ms"] = fleetWallMS
	// The nodes, etcd and the clients share one machine: a node would
	// shed load (node-overloaded) for the others' work. Only a pressure
	// of 1 (every task stalled) sheds here.
	if overload, ok := node["overload"].(map[string]any); ok {
		overload["cpu_threshold"], overload["memory_threshold"] = 1, 1
	}
	p["fleet"] = map[string]any{"tenants": []string{"acme"}}
	return json.MarshalIndent(p, "", " ")
}

// holdDeployment is a deployment of tenant's service "hold", route "run",
// running the guest with digest hexDigest: the demonstration catalog's
// deployment with its names and artifact replaced.
func holdDeployment(tenant, hexDigest string) ([]byte, error) {
	var c struct {
		Deployments []map[string]any `json:"deployments"`
	}
	if err := json.Unmarshal(demo.CatalogJSON(), &c); err != nil {
		return nil, err
	}
	if len(c.Deployments) == 0 {
		return nil, errors.New("the demonstration catalog has no deployment")
	}
	d := c.Deployments[0]
	d["tenant"], d["service"] = tenant, "hold"
	routes, _ := d["routes"].([]any)
	if len(routes) == 0 {
		return nil, errors.New("the demonstration deployment has no route")
	}
	route := routes[0].(map[string]any)
	route["route"] = "run"
	for _, r := range route["revisions"].([]any) {
		rel := r.(map[string]any)["release"].(map[string]any)
		rel["artifact_digest"] = "sha256:" + hexDigest
	}
	return json.Marshal(d)
}

// fleetCluster is one etcd and its latentd nodes.
type fleetCluster struct {
	dir    string
	exe    string   // the latentd binary (or a test binary that runs main)
	env    []string // its extra environment
	etcd   *etcdproc.Proc
	nodes  []*fleetNode
	policy string
	tokens string
	guest  []byte
	limit  int64
	logs   io.Writer // the nodes' standard error, line by line; nil discards
}

// fleetNode is one latentd process.
type fleetNode struct {
	id     string
	url    string
	trace  string
	cmd    *exec.Cmd
	exited chan error // put back once read
}

// startFleetCluster starts etcd under dir and writes the files the nodes
// share; the nodes start with addNode.
func startFleetCluster(dir, exe string, env []string, logs io.Writer) (*fleetCluster, error) {
	return startFleetClusterWith(dir, exe, env, logs, etcdproc.Options{})
}

// startFleetClusterWith is startFleetCluster with etcd serving its
// clients as o says (TLS: the nodes are given its CA and certificate).
func startFleetClusterWith(dir, exe string, env []string, logs io.Writer, o etcdproc.Options) (*fleetCluster, error) {
	e, err := etcdproc.StartWith(dir, 2*time.Minute, o)
	if err != nil {
		return nil, err
	}
	c := &fleetCluster{dir: dir, exe: exe, env: env, etcd: e, guest: sleeperGuest(fleetHold), logs: logs}
	pol, err := fleetPolicyJSON()
	if err != nil {
		c.stop()
		return nil, err
	}
	c.policy, c.tokens = filepath.Join(dir, "policy.json"), filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(c.policy, pol, 0o600); err != nil {
		c.stop()
		return nil, err
	}
	if err := os.WriteFile(c.tokens, demo.TokensJSON(), 0o600); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// client is a new client of etcd (with its CA and certificate when it
// speaks TLS); the caller closes it.
func (c *fleetCluster) client() (*clientv3.Client, error) {
	o := fleet.ClientOptions{Endpoints: []string{c.etcd.Endpoint}}
	if f := c.etcd.TLS; f != nil {
		o.CAFile, o.CertFile, o.KeyFile = f.CA, f.Cert, f.Key
	}
	return fleet.NewClient(o)
}

// setLimit sets acme's fleet limit in etcd, as `admissionctl fleet set`
// does (the same edge/fleet call).
func (c *fleetCluster) setLimit(limit int64) error {
	client, err := c.client()
	if err != nil {
		return err
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.limit = limit
	return fleet.SetLimit(ctx, client, "", "acme", limit)
}

// slices reads acme's slices in etcd.
func (c *fleetCluster) slices() (fleet.TenantLimit, error) {
	client, err := c.client()
	if err != nil {
		return fleet.TenantLimit{}, err
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return fleet.GetLimit(ctx, client, "", "acme")
}

// addNode starts node id, waits until it serves, and deploys the held
// guest as acme/hold/run and globex/hold/run on it. extra are more
// flags, after the cluster's (a flag given twice takes the later value).
func (c *fleetCluster) addNode(id string, extra ...string) (*fleetNode, error) {
	dir := filepath.Join(c.dir, id)
	n := &fleetNode{id: id, trace: filepath.Join(dir, "trace.jsonl"), exited: make(chan error, 1)}
	if err := os.MkdirAll(filepath.Join(dir, "artifacts"), 0o700); err != nil {
		return nil, err
	}
	n.cmd = exec.Command(c.exe, "-policy", c.policy, "-tokens", c.tokens,
		"-store", filepath.Join(dir, "store"), "-artifacts", filepath.Join(dir, "artifacts"),
		"-listen", "127.0.0.1:0", "-etcd", c.etcd.Endpoint, "-node-id", id,
		"-fleet-lease-ttl", fleetLeaseTTL.String(), "-record", n.trace, "-access-log=false", "-grace", "5s")
	if f := c.etcd.TLS; f != nil {
		n.cmd.Args = append(n.cmd.Args, "-etcd-ca", f.CA, "-etcd-cert", f.Cert, "-etcd-key", f.Key)
	}
	n.cmd.Args = append(n.cmd.Args, extra...)
	n.cmd.Env = append(os.Environ(), c.env...)
	stdout, err := n.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := n.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := n.cmd.Start(); err != nil {
		return nil, err
	}
	c.nodes = append(c.nodes, n)
	addr := make(chan string, 1)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "latentd: serving on "); ok {
				select {
				case addr <- rest:
				default:
				}
			}
		}
	}()
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if c.logs != nil {
				fmt.Fprintf(c.logs, "%s: %s\n", id, sc.Text())
			}
		}
	}()
	go func() { wg.Wait(); n.exited <- n.cmd.Wait() }()
	select {
	case n.url = <-addr:
	case err := <-n.exited:
		n.exited <- err
		return nil, fmt.Errorf("node %s exited before serving: %v", id, err)
	case <-time.After(2 * time.Minute):
		return nil, fmt.Errorf("node %s did not serve within 2 minutes", id)
	}
	sum := sha256.Sum256(c.guest)
	hexDigest := hex.EncodeToString(sum[:])
	if err := n.admin(http.MethodPut, "/v1/admin/artifacts/sha256/"+hexDigest, c.guest); err != nil {
		return nil, err
	}
	for _, tenant := range []string{"acme", "globex"} {
		d, err := holdDeployment(tenant, hexDigest)
		if err != nil {
			return nil, err
		}
		if err := n.admin(http.MethodPut, "/v1/admin/deployments/"+tenant+"/hold", d); err != nil {
			return nil, err
		}
	}
	return n, nil
}

var fleetHTTP = &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func (n *fleetNode) admin(method, path string, body []byte) error {
	req, err := http.NewRequest(method, n.url+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+DemoAdminToken)
	resp, err := fleetHTTP.Do(req)
	if err != nil {
		return fmt.Errorf("node %s: %s %s: %w", n.id, method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("node %s: %s %s: %d %s", n.id, method, path, resp.StatusCode, data)
	}
	return nil
}

// invokeAnswer is what a client sees of one invocation.
type invokeAnswer struct {
	start, end time.Time
	status     int
	reason     string // the rejection's reason, "" on success
	retryable  bool
	err        error
}

// invoke calls tenant's hold/run on n as its demonstration user.
func (n *fleetNode) invoke(tenant string) invokeAnswer { return n.invokeRoute(tenant, "hold/run") }

// invokeRoute calls tenant's SERVICE/ROUTE on n as its demonstration user.
func (n *fleetNode) invokeRoute(tenant, serviceRoute string) invokeAnswer {
	token := DemoUserToken
	if tenant == "globex" {
		token = demoBobToken
	}
	a := invokeAnswer{start: time.Now()}
	req, err := http.NewRequest(http.MethodPost, n.url+"/v1/invoke/"+tenant+"/"+serviceRoute, strings.NewReader("x"))
	if err != nil {
		a.err = err
		return a
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := fleetHTTP.Do(req)
	if err != nil {
		a.err, a.end = err, time.Now()
		return a
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	a.end, a.status = time.Now(), resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		var body struct {
			Reason    string `json:"reason"`
			Retryable bool   `json:"retryable"`
		}
		_ = json.Unmarshal(data, &body)
		a.reason, a.retryable = body.Reason, body.Retryable
		if a.reason == "" {
			a.reason = fmt.Sprintf("status %d: %s", resp.StatusCode, data)
		}
	}
	return a
}

// nodeFleet is one tenant's row of /v1/admin/status's fleet table.
type nodeFleet struct {
	Tenant     string `json:"tenant"`
	Slice      int64  `json:"slice"`
	Published  bool   `json:"published"`
	ValidForMS int64  `json:"valid_for_ms"`
	Live       uint64 `json:"live_activations"`
	Limit      int64  `json:"fleet_limit"`
	Held       int64  `json:"held"`
	Problem    string `json:"problem"`
}

// fleetStatus reads n's row for acme.
func (n *fleetNode) fleetStatus() (nodeFleet, error) {
	req, err := http.NewRequest(http.MethodGet, n.url+"/v1/admin/status", nil)
	if err != nil {
		return nodeFleet{}, err
	}
	req.Header.Set("Authorization", "Bearer "+DemoAdminToken)
	resp, err := fleetHTTP.Do(req)
	if err != nil {
		return nodeFleet{}, err
	}
	defer resp.Body.Close()
	var st struct {
		Fleet []nodeFleet `json:"fleet"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&st); err != nil {
		return nodeFleet{}, err
	}
	for _, f := range st.Fleet {
		if f.Tenant == "acme" {
			return f, nil
		}
	}
	return nodeFleet{}, fmt.Errorf("node %s: no fleet row for acme", n.id)
}

// stopNode ends n with SIGTERM (a graceful shutdown that flushes its
// trace and revokes its lease) and waits, at most grace, then kills it.
func (n *fleetNode) stop(grace time.Duration) error {
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-n.exited:
		n.exited <- err
		return err
	case <-time.After(grace):
		_ = n.cmd.Process.Kill()
		err := <-n.exited
		n.exited <- err
		return fmt.Errorf("node %s: still running %v after SIGTERM: killed", n.id, grace)
	}
}

// kill ends n with SIGKILL: a node that dies.
func (n *fleetNode) kill() {
	_ = n.cmd.Process.Kill()
	err := <-n.exited
	n.exited <- err
}

// stop ends every node still running (SIGTERM, then SIGKILL) and etcd.
func (c *fleetCluster) stop() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); _ = n.stop(30 * time.Second) }()
	}
	wg.Wait()
	if c.etcd != nil {
		c.etcd.Stop()
	}
}
