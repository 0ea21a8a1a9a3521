// Package linuxtest measures what a process holds and runs test bodies in
// processes of their own, so that a test can assert that work leaves the
// process's threads, descriptors, sockets and children where they were.
//
// # Readers
//
// Threads, Descriptors, Sockets and Children each read one count from a
// /proc/<pid> directory given as a path, so that tests can point them at
// fixtures; Sample reads all four into a Counts and Self samples the calling
// process. A sample is not atomic: each count is read at its own moment.
//
//   - Threads is the "Threads:" line of status.
//   - Descriptors is the number of entries in fd/. Listing /proc/self/fd
//     opens a descriptor of its own; that one is left out, so Self counts
//     what the process holds between samples.
//   - Sockets is the number of fd/ entries whose link target is
//     "socket:[inode]".
//   - Children is the number of distinct process IDs in task/*/children.
//     A thread lists only the children it forked, so every thread is read.
//     Zombies count until they are reaped.
//
// # Isolated children
//
// RunIsolated(t, name, deadline, body) re-executes the test binary with
// -test.run anchored to t's full name and two environment variables naming
// the test and the body. In that child, the matching RunIsolated call runs
// body with the child's own t and ends the test there; every other call
// returns at once. The parent waits, and then:
//
//   - past the deadline, sends the child SIGQUIT, so that its output ends in
//     a dump of every goroutine, and after a short grace kills its group;
//   - once the child has exited, but before it is reaped, kills the child's
//     process group, which the child leads (Setpgid), so that descendants
//     it left behind die too; an unreaped child pins its process ID, so the
//     group ID cannot name a stranger;
//   - reaps the child and fails t with the child's output if the child
//     failed, timed out, or left a descendant holding its output open.
//
// The child is started with a parent-death signal (Pdeathsig SIGKILL), so a
// parent that panics on a test timeout or is killed does not leave it
// running. Flags the test package defines, and -test.short, reach the child
// with the parent's values; the parent's -run, -count, -bench and profile
// flags do not.
//
// Isolated is the same call without the verdict: it returns the child's
// Outcome (process ID and output) and ErrTimeout, ErrChildFailed or
// ErrOutputHeld, so that tests can assert on a child that should fail.
//
// A test measuring resource use looks like this; the counts are taken in a
// process that has run nothing but this body:
//
//	func TestWorkKeepsResourcesFlat(t *testing.T) {
//		linuxtest.RunIsolated(t, "flat", time.Minute, func(t *testing.T) {
//			before, err := linuxtest.Self()
//			...
//			gained := after.Sub(before)
//		})
//	}
//
// # Caveats
//
//   - Code before the call runs in both processes; code after it runs only
//     in the parent. Inside a child, a call for another body returns
//     ErrOtherChild, which RunIsolated ignores and callers of Isolated
//     must let pass. Isolation does not nest: a call from within a body
//     panics.
//   - A body that skips ends the child as a pass; decide on skipping, for
//     instance under -short, in the parent, before the call.
//   - The Go runtime starts threads as it needs them (GC workers, threads
//     for blocking system calls) and seldom ends them, so Threads may rise
//     with no leak; warm the work up before the first sample and allow
//     slack. Descriptors also rise once when the network poller starts (its
//     epoll and wakeup descriptors) and for each started os.Process, which
//     holds a pidfd until it is waited for.
//   - Pdeathsig fires when the thread that started the child exits, not the
//     process. Go ends a thread only when a goroutine that locked it with
//     runtime.LockOSThread returns without unlocking, so do not start an
//     isolated child from such a goroutine.
//   - If the parent dies before it kills the group, the child dies by its
//     parent-death signal but its descendants do not.
//   - A descendant that leaves the group (setsid, setpgid) escapes the
//     group kill; if it holds the child's output, Isolated returns
//     ErrOutputHeld after a second and leaves it running.
//   - A killed grandchild is reparented to a reaper this package does not
//     control and may remain a zombie for a while; it no longer runs.
//   - Children needs a kernel built with CONFIG_PROC_CHILDREN and returns
//     ErrUnsupported without it. On systems other than Linux every reader
//     and Isolated return ErrUnsupported, and RunIsolated skips.
package linuxtest
