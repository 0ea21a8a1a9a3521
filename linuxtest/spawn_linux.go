package linuxtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// quitGrace is how long a child that ran past its deadline has to print
	// its goroutine dump after SIGQUIT before its group is killed.
	quitGrace = 2 * time.Second
	// outputGrace bounds the wait for the output pipe once the group is
	// dead: only a descendant that left the group can still hold it.
	outputGrace = time.Second
)

func spawn(args, env []string, deadline time.Duration) (Outcome, error) {
	started, err := startChild(args, env)
	if err != nil {
		return Outcome{}, err
	}
	return started.await(deadline)
}

// child is a started isolated child that has not yet been awaited.
type child struct {
	cmd    *exec.Cmd
	output *bytes.Buffer // written by exec until cmd.Wait returns
}

func startChild(args, env []string) (child, error) {
	self, err := os.Executable()
	if err != nil {
		return child{}, err
	}
	output := new(bytes.Buffer)
	cmd := exec.Command(self, args...)
	cmd.Env = env
	cmd.Stdout = output
	cmd.Stderr = output
	cmd.WaitDelay = outputGrace
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// The child leads its own group so that one kill reaches every
		// descendant that stayed in it.
		Setpgid: true,
		// If the parent dies before it can kill the group (a test timeout
		// panic, a kill), the child still dies; see doc.go for what that
		// leaves of its descendants.
		Pdeathsig: unix.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return child{}, err
	}
	return child{cmd: cmd, output: output}, nil
}

// await waits for the child until deadline, kills its group, reaps it and
// says how it ended.
func (c child) await(deadline time.Duration) (Outcome, error) {
	cmd := c.cmd
	pid := cmd.Process.Pid

	exited := make(chan struct{})
	go func() {
		defer close(exited)
		waitExitedUnreaped(pid)
	}()
	timedOut := !waitUntil(exited, deadline)
	if timedOut {
		_ = unix.Kill(pid, unix.SIGQUIT)
		if !waitUntil(exited, quitGrace) {
			_ = unix.Kill(-pid, unix.SIGKILL)
			<-exited
		}
	}
	// The child is a zombie here, not yet reaped, so its process ID and
	// with it the group ID cannot have been reused: this kill reaches only
	// the descendants the child left behind.
	_ = unix.Kill(-pid, unix.SIGKILL)
	waitErr := cmd.Wait()

	outcome := Outcome{PID: pid, Output: c.output.Bytes()}
	var exitErr *exec.ExitError
	switch {
	case timedOut:
		return outcome, ErrTimeout
	case errors.As(waitErr, &exitErr):
		return outcome, fmt.Errorf("%w: %w", ErrChildFailed, waitErr)
	case errors.Is(waitErr, exec.ErrWaitDelay):
		return outcome, ErrOutputHeld
	case waitErr != nil:
		return outcome, waitErr
	}
	return outcome, nil
}

// waitExitedUnreaped returns once pid has exited, leaving it a zombie for
// cmd.Wait to reap. Any error other than an interrupt means there is nothing
// left to wait for.
func waitExitedUnreaped(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// waitUntil reports whether done closed within d.
func waitUntil(done <-chan struct{}, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		return false
	}
}
