package main

// `admissionctl node` is an administrator's client for a running
// latentd, over its HTTP API (docs/latentd.md). It uses only the
// standard library, so the library's module stays lean.
//
//	admissionctl node push [flags] FILE.wasm
//	admissionctl node deploy [flags] [-artifacts DIR] FILE
//	admissionctl node undeploy [flags] TENANT/SERVICE
//	admissionctl node usage [flags] TENANT
//	admissionctl node snapshot [flags]
//
// Every verb takes -node URL (default $LATENT_NODE, else
// http://127.0.0.1:8080), -token-file FILE (default: the token in
// $LATENT_TOKEN; a token is never a flag's value, which other users of
// the machine could read) and -ca FILE (PEM certificates to trust for an
// https node with a private CA), -timeout and -insecure-plaintext (send
// the token over plain HTTP to a node that is not on loopback, as
// latentd's own flag of that name allows it to listen so).
//
// The client never follows a redirect: the token would go wherever the
// Location names, and a redirected PUT comes back as a GET that deploys
// nothing. Every answer but the documented one (200 with a JSON body) is
// a failure: a 3xx, an unexpected 2xx, or a refusal.
//
// The node's refusals are printed one line each: the error, then every
// problem with its JSON path. Exit status: 0 ok; 1 the node refused or
// answered anything but 200 (a redirect among them), or a deployment
// file has problems; 2 misuse (plain HTTP to a node that is not on
// loopback without -insecure-plaintext among them); 3 an input could not
// be read, or the node could not be reached.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/internal/boundedfile"
	"latent.dev/admission/internal/printable"
	"latent.dev/admission/internal/strictjson"
	"latent.dev/admission/problems"
)

func init() {
	commands["node"] = func(args []string, stdout, stderr io.Writer) int {
		return runNode(args, os.Getenv, stdout, stderr)
	}
}

// The exit codes.
const (
	ExitOK      = 0
	ExitRefused = 1
	ExitMisuse  = 2
	ExitInput   = 3
)

// DefaultNode is the node a verb talks to without -node or $LATENT_NODE:
// `make node`'s address.
const DefaultNode = "http://127.0.0.1:8080"

// maxAnswerBytes bounds what is read of an answer.
const maxAnswerBytes = 16 << 20

// runNode runs `admissionctl node ARGS...` and returns the exit code; getenv
// reads the environment (os.Getenv in the command).
func runNode(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, nodeUsage)
		return ExitMisuse
	}
	verb, ok := verbs[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "admissionctl node: unknown verb %q\n%s", printable.String(args[0]), nodeUsage)
		return ExitMisuse
	}
	fs := flag.NewFlagSet("admissionctl node "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := options{}
	fs.StringVar(&o.node, "node", "", "the node's base URL (default $LATENT_NODE, else "+DefaultNode+")")
	fs.StringVar(&o.tokenFile, "token-file", "", "a file holding the bearer token (default: $LATENT_TOKEN)")
	fs.StringVar(&o.caFile, "ca", "", "PEM certificates to trust for an https node")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long one request may take (a deploy compiles its guests)")
	fs.BoolVar(&o.insecurePlaintext, "insecure-plaintext", false, "allow an http -node that is not on loopback (the token then crosses the network in clear)")
	if verb.flags != nil {
		verb.flags(fs, &o)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return ExitMisuse
	}
	if fs.NArg() != verb.args {
		fmt.Fprintf(stderr, "usage: admissionctl node %s [flags] %s\n", args[0], verb.usage)
		return ExitMisuse
	}
	c, code := o.client(getenv, stderr)
	if code != ExitOK {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	return verb.run(ctx, c, &o, fs.Args(), stdout, stderr)
}

const nodeUsage = `usage: admissionctl node VERB [flags] ARGS
verbs:
  push FILE.wasm               upload an artifact (its digest is computed)
  deploy [-artifacts DIR] FILE deploy one deployment; with -artifacts, first push
                               the artifacts its revisions name from DIR/sha256/<hex>.wasm
  undeploy TENANT/SERVICE      delete a deployment
  usage TENANT                 a tenant's reservations and limits
  snapshot                     the node's catalog, usage and load
flags of every verb: -node URL, -token-file FILE ($LATENT_TOKEN otherwise), -ca FILE, -timeout,
  -insecure-plaintext (an http -node that is not on loopback)
redirects are never followed; any answer but 200 is a failure
exit status: 0 ok, 1 refused by the node or an unexpected answer, 2 misuse, 3 unreadable input or node unreachable
`

type options struct {
	node, tokenFile, caFile string
	timeout                 time.Duration
	insecurePlaintext       bool
	artifacts               string
}

type verb struct {
	args  int
	usage string
	flags func(*flag.FlagSet, *options)
	run   func(ctx context.Context, c *client, o *options, args []string, stdout, stderr io.Writer) int
}

var verbs = map[string]verb{
	"push": {args: 1, usage: "FILE.wasm", run: runPush},
	"deploy": {args: 1, usage: "FILE", run: runDeploy, flags: func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.artifacts, "artifacts", "", "push the artifacts FILE names from DIR/sha256/<hex>.wasm first")
	}},
	"undeploy": {args: 1, usage: "TENANT/SERVICE", run: runUndeploy},
	"usage":    {args: 1, usage: "TENANT", run: runUsage},
	"snapshot": {args: 0, usage: "", run: runSnapshot},
}

// client is one node's address, token and HTTP client.
type client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// client builds the client from the options and the environment; a
// problem is printed and its exit code returned.
func (o *options) client(getenv func(string) string, stderr io.Writer) (*client, int) {
	node := o.node
	if node == "" {
		node = getenv("LATENT_NODE")
	}
	if node == "" {
		node = DefaultNode
	}
	base, err := url.Parse(node)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" || base.RawQuery != "" || base.Fragment != "" {
		fmt.Fprintf(stderr, "admissionctl node: -node %q: want an http or https URL such as %s\n", printable.String(node), DefaultNode)
		return nil, ExitMisuse
	}
	if base.Scheme == "http" && !o.insecurePlaintext && !loopbackHost(base.Hostname()) {
		fmt.Fprintf(stderr, "admissionctl node: -node %s: plain HTTP to a node that is not on loopback would send the token in clear: use https, or give -insecure-plaintext\n", printable.String(base.Redacted()))
		return nil, ExitMisuse
	}
	base.Path = strings.TrimSuffix(base.Path, "/")
	token := strings.TrimSpace(getenv("LATENT_TOKEN"))
	if o.tokenFile != "" {
		data, err := boundedfile.Read(o.tokenFile, 64<<10)
		if err != nil {
			fmt.Fprintf(stderr, "admissionctl node: -token-file: %s\n", printable.String(err.Error()))
			return nil, ExitInput
		}
		token = strings.TrimSpace(string(data))
	}
	if token == "" {
		fmt.Fprintln(stderr, "admissionctl node: no token: set LATENT_TOKEN or give -token-file FILE")
		return nil, ExitMisuse
	}
	if strings.ContainsAny(token, " \t\r\n") {
		fmt.Fprintln(stderr, "admissionctl node: the token holds white space (one token, alone, is expected)")
		return nil, ExitInput
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if o.caFile != "" {
		pem, err := boundedfile.Read(o.caFile, 1<<20)
		if err != nil {
			fmt.Fprintf(stderr, "admissionctl node: -ca: %s\n", printable.String(err.Error()))
			return nil, ExitInput
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			fmt.Fprintf(stderr, "admissionctl node: -ca %s: no PEM certificate in it\n", printable.String(o.caFile))
			return nil, ExitInput
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &client{base: base, token: token, http: &http.Client{Transport: transport, CheckRedirect: noRedirects}}, ExitOK
}

// noRedirects hands a redirect back as the answer: following it would
// send the token to wherever Location names (in clear, if it says http),
// and would turn a PUT into a GET.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// loopbackHost reports whether a URL's host is this machine's loopback:
// localhost, or an address in 127.0.0.0/8 or ::1 (latentd's own rule for
// plain HTTP).
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// answer is one answer from the node.
type answer struct {
	status int
	body   []byte
}

// do sends one request. A transport failure is exit 3; an answer that is
// not 200 (the only success the node's API documents) is printed as the
// node's refusal, or as an unexpected answer, and is exit 1.
func (c *client) do(ctx context.Context, method, path string, body io.Reader, stderr io.Writer) (answer, int) {
	u := *c.base
	u.Path += path
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		fmt.Fprintf(stderr, "admissionctl node: %s\n", printable.String(err.Error()))
		return answer{}, ExitMisuse
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "admissionctl node: %s %s: %s\n", method, printable.String(u.Redacted()), printable.String(err.Error()))
		return answer{}, ExitInput
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		fmt.Fprintf(stderr, "admissionctl node: %s %s: reading the answer: %s\n", method, printable.String(u.Redacted()), printable.String(err.Error()))
		return answer{}, ExitInput
	}
	a := answer{status: resp.StatusCode, body: data}
	switch {
	case resp.StatusCode == http.StatusOK:
		return a, ExitOK
	case resp.StatusCode/100 == 3:
		fmt.Fprintf(stderr, "%s %s: the node answered %d, a redirect (to %s), which is never followed: nothing was done; give -node the URL the node serves on\n",
			method, path, resp.StatusCode, printable.String(resp.Header.Get("Location")))
	case resp.StatusCode/100 == 2 || resp.StatusCode/100 == 1:
		fmt.Fprintf(stderr, "%s %s: the node answered %d, not the documented 200: the request's effect is unknown\n", method, path, resp.StatusCode)
	default:
		printRefusal(stderr, method+" "+path, a)
	}
	return a, ExitRefused
}

// printRefusal prints the node's error and every problem with its JSON
// path, one per line.
func printRefusal(w io.Writer, what string, a answer) {
	var body struct {
		Error    string            `json:"error"`
		Header   string            `json:"header"`
		Path     string            `json:"path"`
		Reason   string            `json:"reason"`
		Problems []json.RawMessage `json:"problems"`
	}
	if json.Unmarshal(a.body, &body) != nil || (body.Error == "" && body.Reason == "") {
		fmt.Fprintf(w, "%s: the node answered %d %s\n", what, a.status, printable.String(strings.TrimSpace(string(a.body))))
		return
	}
	msg := body.Error
	if msg == "" {
		msg = body.Reason
	}
	line := fmt.Sprintf("%s: the node answered %d: %s", what, a.status, msg)
	if body.Header != "" {
		line += " (header " + body.Header + ")"
	}
	if body.Path != "" {
		line += " (at " + body.Path + ")"
	}
	fmt.Fprintln(w, printable.String(line))
	for _, raw := range body.Problems {
		var p struct{ Path, Message string }
		var s string
		switch {
		case json.Unmarshal(raw, &p) == nil && p.Message != "":
			fmt.Fprintln(w, problems.Problem{Path: p.Path, Message: p.Message}.String())
		case json.Unmarshal(raw, &s) == nil:
			fmt.Fprintln(w, printable.String(s))
		default:
			fmt.Fprintln(w, printable.String(string(raw)))
		}
	}
}

func runPush(ctx context.Context, c *client, _ *options, args []string, stdout, stderr io.Writer) int {
	digest, code := c.push(ctx, args[0], stderr)
	if code == ExitOK {
		fmt.Fprintf(stdout, "pushed %s %s\n", digest, printable.String(args[0]))
	}
	return code
}

// maxArtifactBytes bounds an artifact read from disk; the node's own
// limit is usually smaller, and it says so.
const maxArtifactBytes = 1 << 30

// push uploads one artifact file and returns its digest.
func (c *client) push(ctx context.Context, name string, stderr io.Writer) (string, int) {
	data, err := boundedfile.Read(name, maxArtifactBytes)
	if err != nil {
		fmt.Fprintf(stderr, "admissionctl node: %s\n", printable.String(err.Error()))
		return "", ExitInput
	}
	sum := sha256.Sum256(data)
	hexDigest := hex.EncodeToString(sum[:])
	a, code := c.do(ctx, http.MethodPut, "/v1/admin/artifacts/sha256/"+hexDigest, bytes.NewReader(data), stderr)
	if code != ExitOK {
		return "", code
	}
	// The documented answer names the digest stored; any other is not
	// the node's word that the artifact is there.
	var body struct {
		Digest string `json:"digest"`
	}
	if json.Unmarshal(a.body, &body) != nil || body.Digest != "sha256:"+hexDigest {
		fmt.Fprintf(stderr, "admissionctl node: push %s: the node's answer does not name sha256:%s: %s\n", printable.String(name), hexDigest, printable.String(string(a.body)))
		return "", ExitRefused
	}
	return "sha256:" + hexDigest, ExitOK
}

func runDeploy(ctx context.Context, c *client, o *options, args []string, stdout, stderr io.Writer) int {
	data, err := boundedfile.Read(args[0], strictjson.MaxDocumentBytes)
	if err != nil {
		fmt.Fprintf(stderr, "admissionctl node: %s\n", printable.String(err.Error()))
		return ExitInput
	}
	// The catalog's own decoder, without the node's policy (the node
	// checks that): a file with problems never reaches the node.
	d, err := catalog.ValidateDeployment(data, nil)
	if err != nil {
		fmt.Fprintf(stderr, "%s: not a deployment:\n", printable.String(args[0]))
		for _, p := range problems.Of(err) {
			fmt.Fprintln(stderr, p.String())
		}
		return ExitRefused
	}
	if o.artifacts != "" {
		for _, digest := range digests(d) {
			hexDigest, ok := strings.CutPrefix(digest, "sha256:")
			if !ok {
				fmt.Fprintf(stderr, "admissionctl node: artifact %s: only sha256 digests can be pushed\n", printable.String(digest))
				return ExitInput
			}
			file := filepath.Join(o.artifacts, "sha256", hexDigest+".wasm")
			got, code := c.push(ctx, file, stderr)
			if code != ExitOK {
				return code
			}
			if got != digest {
				fmt.Fprintf(stderr, "admissionctl node: %s holds %s, not the %s its name says\n", printable.String(file), got, digest)
				return ExitInput
			}
			fmt.Fprintf(stdout, "pushed %s\n", digest)
		}
	}
	a, code := c.do(ctx, http.MethodPut, "/v1/admin/deployments/"+url.PathEscape(d.Tenant)+"/"+url.PathEscape(d.Service), bytes.NewReader(data), stderr)
	if code != ExitOK {
		return code
	}
	return printGeneration(stdout, stderr, "deployed "+d.Tenant+"/"+d.Service, a)
}

// digests lists the distinct artifact digests a deployment names, in
// order.
func digests(d catalog.Deployment) []string {
	var out []string
	seen := map[string]bool{}
	for _, rt := range d.Routes {
		for _, rev := range rt.Revisions {
			if digest := rev.Release.ArtifactDigest; !seen[digest] {
				seen[digest] = true
				out = append(out, digest)
			}
		}
	}
	return out
}

func printGeneration(stdout, stderr io.Writer, what string, a answer) int {
	var body struct {
		Generation *uint64 `json:"generation"`
	}
	if json.Unmarshal(a.body, &body) != nil || body.Generation == nil {
		fmt.Fprintf(stderr, "admissionctl node: %s: the node's answer names no generation: %s\n", printable.String(what), printable.String(string(a.body)))
		return ExitInput
	}
	fmt.Fprintf(stdout, "%s: generation %d\n", printable.String(what), *body.Generation)
	return ExitOK
}

func runUndeploy(ctx context.Context, c *client, _ *options, args []string, stdout, stderr io.Writer) int {
	tenant, service, ok := strings.Cut(args[0], "/")
	if !ok || tenant == "" || service == "" || strings.Contains(service, "/") {
		fmt.Fprintf(stderr, "admissionctl node undeploy: %q: want TENANT/SERVICE\n", printable.String(args[0]))
		return ExitMisuse
	}
	a, code := c.do(ctx, http.MethodDelete, "/v1/admin/deployments/"+url.PathEscape(tenant)+"/"+url.PathEscape(service), nil, stderr)
	if code != ExitOK {
		return code
	}
	return printGeneration(stdout, stderr, "undeployed "+args[0], a)
}

func runUsage(ctx context.Context, c *client, _ *options, args []string, stdout, stderr io.Writer) int {
	a, code := c.do(ctx, http.MethodGet, "/v1/tenants/"+url.PathEscape(args[0])+"/usage", nil, stderr)
	return printJSON(a, code, stdout, stderr)
}

func runSnapshot(ctx context.Context, c *client, _ *options, _ []string, stdout, stderr io.Writer) int {
	a, code := c.do(ctx, http.MethodGet, "/v1/admin/snapshot", nil, stderr)
	return printJSON(a, code, stdout, stderr)
}

// printJSON prints a successful answer's JSON indented; code is the
// answer's exit code, passed through when it is not ExitOK.
func printJSON(a answer, code int, stdout, stderr io.Writer) int {
	if code != ExitOK {
		return code
	}
	var out bytes.Buffer
	if err := json.Indent(&out, a.body, "", "  "); err != nil {
		fmt.Fprintf(stderr, "admissionctl node: the node's answer is not JSON: %s\n", printable.String(err.Error()))
		return ExitInput
	}
	out.WriteByte('\n')
	_, _ = stdout.Write(out.Bytes())
	return ExitOK
}
