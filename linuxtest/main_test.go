package linuxtest_test

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// helperEnv turns the test binary into a process that only sleeps: a child
// or grandchild for the tests to count and kill that needs no outside binary.
const helperEnv = "LINUXTEST_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "sleep" {
		// Long enough to outlast any test, short enough that one leaked by a
		// crashed test does not linger.
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// startSleeper starts a helper process that sleeps until killed. Its output
// goes nowhere, so it holds no pipe of the process that started it.
func startSleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), helperEnv+"=sleep")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}
