//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris

package catalog

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The deploy-loop child is this test binary run again with
// -test.run=TestStoreKillHelperProcess and these variables set.
const (
	killDirEnv   = "CATALOG_KILL_HELPER_DIR"
	killStartEnv = "CATALOG_KILL_HELPER_START"
	killKeys     = 17
)

// killOp is change number i of the deploy loop: every 7th an Apply of
// three deployments, the others a Deploy of one. Each deployment has two
// routes of two revisions whose versions name i, so a reopened store shows
// which change each deployment came from, and whether all of it did.
func killOp(i int) []Deployment {
	keys := []int{i % killKeys}
	if i%7 == 6 {
		keys = append(keys, (i+5)%killKeys, (i+11)%killKeys)
	}
	var out []Deployment
	for _, k := range keys {
		d := Deployment{Tenant: "kill", Service: fmt.Sprintf("svc-%02d", k)}
		for r, name := range []string{"resize", "crop"} {
			rt := Route{Name: name, Contract: "img.v1", Function: name}
			for j := range 2 {
				rt.Revisions = append(rt.Revisions, Revision{
					Release: Release{ArtifactDigest: fmt.Sprintf("sha256:%02d%d%d", k, r, j), Version: fmt.Sprintf("op-%d.%d", i, j)},
					Weight:  uint64(1 + (i+j)%4),
					Policy:  samplePolicy(),
				})
			}
			d.Routes = append(d.Routes, rt)
		}
		out = append(out, d)
	}
	return out
}

// TestStoreKillHelperProcess is not a test: it is the child of
// TestAKilledDeployLoopReopensConsistently. It opens the store and makes
// changes killOp(start), killOp(start+1), ... until it is killed, saying
// "ack i" on stdout once change i has returned.
func TestStoreKillHelperProcess(t *testing.T) {
	dir := os.Getenv(killDirEnv)
	if dir == "" {
		t.Skip("run as a child process by TestAKilledDeployLoopReopensConsistently")
	}
	start, err := strconv.Atoi(os.Getenv(killStartEnv))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(helperFailed)
	}
	c, err := Open(dir)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(helperFailed)
	}
	// Rewrites every few dozen changes, so kills land in them too.
	c.store.rewriteFloor = 8 << 10
	for i := start; ; i++ {
		deploys := killOp(i)
		if len(deploys) == 1 {
			_, err = c.Deploy(deploys[0])
		} else {
			_, err = c.Apply(Changes{Deploy: deploys})
		}
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(helperFailed)
		}
		fmt.Printf("ack %d\n", i)
	}
}

// TestAKilledDeployLoopReopensConsistently kills a child that deploys in
// a loop with SIGKILL at random moments, at least 200 times (25 with
// -short), and reopens the store after each kill: it must hold exactly
// the changes acknowledged before the kill, possibly with the one in
// flight, all of each change or none of it.
func TestAKilledDeployLoopReopensConsistently(t *testing.T) {
	rounds := 200
	if testing.Short() {
		rounds = 25
	}
	dir := t.TempDir()
	c, err := Create(dir, GenerousCapacity)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 18))
	// latest[k] is the change that last deployed key k, -1 if none did.
	latest := make([]int, killKeys)
	for k := range latest {
		latest[k] = -1
	}
	next, rewrites, inFlightLanded := 0, 0, 0
	var lastSize int64
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStoreKillHelperProcess$", "-test.count=1", "-test.timeout=60s")
		cmd.Env = append(os.Environ(), killDirEnv+"="+dir, killStartEnv+"="+strconv.Itoa(next))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		var acked []int
		ack := func(line string) {
			t.Helper()
			n, err := strconv.Atoi(strings.TrimPrefix(line, "ack "))
			if !strings.HasPrefix(line, "ack ") || err != nil {
				_ = cmd.Process.Kill()
				t.Fatalf("round %d: the child said %q", round, line)
			}
			acked = append(acked, n)
		}
		// Let it get through a random number of changes, then a little
		// further, then kill it wherever it is.
		for wait := rng.IntN(12); len(acked) < wait; {
			select {
			case line, ok := <-lines:
				if !ok {
					_ = cmd.Wait()
					t.Fatalf("round %d: the child exited", round)
				}
				ack(line)
			case <-time.After(2 * time.Minute): // only a hang: a loaded machine is slow
				_ = cmd.Process.Kill()
				t.Fatalf("round %d: the child is stuck", round)
			}
		}
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Microsecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		for line := range lines {
			ack(line)
		}
		_ = cmd.Wait()

		for i, n := range acked {
			if n != next+i {
				t.Fatalf("round %d: acknowledgements %v do not start at %d", round, acked, next)
			}
			for _, d := range killOp(n) {
				latest[keyNumber(t, d.Service)] = n
			}
		}
		inFlight := next + len(acked)

		reopened, err := Open(dir)
		if err != nil {
			t.Fatalf("round %d: reopen after the kill: %v", round, err)
		}
		landed := checkKilledStore(t, round, reopened.Pin(), latest, inFlight)
		if landed {
			inFlightLanded++
			for _, d := range killOp(inFlight) {
				latest[keyNumber(t, d.Service)] = inFlight
			}
			next = inFlight + 1
		} else {
			next = inFlight
		}
		if reopened.store.end < lastSize {
			rewrites++
		}
		lastSize = reopened.store.end
		if err := reopened.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d kills, %d changes acknowledged, %d in-flight changes landed, %d rewrites seen", rounds, next, inFlightLanded, rewrites)
}

func keyNumber(t *testing.T, service string) int {
	t.Helper()
	k, err := strconv.Atoi(strings.TrimPrefix(service, "svc-"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// checkKilledStore holds a reopened pin to latest, the acknowledged state,
// allowing change inFlight whole or not at all, and reports whether it
// landed.
func checkKilledStore(t *testing.T, round int, pin *Pin, latest []int, inFlight int) bool {
	t.Helper()
	flying := map[int]bool{}
	for _, d := range killOp(inFlight) {
		flying[keyNumber(t, d.Service)] = true
	}
	showsInFlight := 0
	for k := range killKeys {
		got, _, ok := pin.Deployment("kill", fmt.Sprintf("svc-%02d", k))
		var from int
		switch {
		case !ok:
			from = -1
		default:
			v := got.Routes[0].Revisions[0].Release.Version
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(v, "op-"), ".0"))
			if err != nil {
				t.Fatalf("round %d: svc-%02d has release version %q", round, k, v)
			}
			from = n
		}
		if flying[k] && from == inFlight {
			showsInFlight++
		} else if from != latest[k] {
			t.Fatalf("round %d: svc-%02d shows change %d, the last acknowledged was %d (in flight %d)", round, k, from, latest[k], inFlight)
		}
		if from < 0 {
			continue
		}
		var want Deployment
		for _, d := range killOp(from) {
			if keyNumber(t, d.Service) == k {
				want = d
			}
		}
		dep, err := compileDeployment(&want, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, dep.spec()) {
			t.Fatalf("round %d: svc-%02d is not whole change %d:\n got %+v\nwant %+v", round, k, from, got, dep.spec())
		}
	}
	if showsInFlight != 0 && showsInFlight != len(flying) {
		t.Fatalf("round %d: %d of the %d deployments of change %d landed", round, showsInFlight, len(flying), inFlight)
	}
	return showsInFlight > 0
}
