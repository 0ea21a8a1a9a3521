package linuxtest_test

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"latent.dev/admission/linuxtest"
)

func self(t *testing.T) linuxtest.Counts {
	t.Helper()
	counts, err := linuxtest.Self()
	if err != nil {
		t.Fatal(err)
	}
	return counts
}

// warmUp makes the Go runtime create what it creates lazily on first use,
// such as the network poller's descriptors, so that the counts that follow
// move only with what the test itself opens.
func warmUp(t *testing.T) {
	t.Helper()
	file, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	file.Close()
	self(t)
}

func openSocket(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

func TestSelfCountsExactlyTheOpenDescriptors(t *testing.T) {
	warmUp(t)
	got := self(t).Descriptors
	// fcntl answers for each number without opening anything, so it is an
	// independent count of what the process holds.
	want := 0
	for fd := range 1 << 12 {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
			want++
		}
	}
	if got != want {
		t.Fatalf("Self().Descriptors = %d; fcntl finds %d", got, want)
	}
}

func TestSelfRisesByOneForEachResource(t *testing.T) {
	warmUp(t)

	t.Run("an opened file is one descriptor and no socket", func(t *testing.T) {
		before := self(t)
		file, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		gained := self(t).Sub(before)
		if gained.Descriptors != 1 || gained.Sockets != 0 || gained.Children != 0 {
			t.Fatalf("gained %v; want one descriptor", gained)
		}
	})

	t.Run("an opened socket is one descriptor and one socket", func(t *testing.T) {
		before := self(t)
		fd := openSocket(t)
		defer unix.Close(fd)
		gained := self(t).Sub(before)
		if gained.Descriptors != 1 || gained.Sockets != 1 || gained.Children != 0 {
			t.Fatalf("gained %v; want one descriptor that is a socket", gained)
		}
	})

	t.Run("a started process is one child until it is reaped", func(t *testing.T) {
		before := self(t)
		sleeper := startSleeper(t)
		running := self(t).Sub(before)
		if err := sleeper.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = sleeper.Wait()
		reaped := self(t).Sub(before)
		if running.Children != 1 || running.Sockets != 0 {
			t.Errorf("while running gained %v; want one child", running)
		}
		if reaped != (linuxtest.Counts{Threads: reaped.Threads}) {
			t.Errorf("after reaping gained %v; want nothing but threads", reaped)
		}
	})
}

func TestSelfSeesItsOwnThreads(t *testing.T) {
	counts := self(t)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	// Threads start and stop beneath the test; the listing and the count
	// need only agree on there being some.
	if counts.Threads < 1 || len(tasks) < 1 {
		t.Fatalf("Self().Threads = %d with %d task entries; want both positive", counts.Threads, len(tasks))
	}
}
