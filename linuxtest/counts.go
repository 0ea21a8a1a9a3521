package linuxtest

import "fmt"

// Counts is one sample of the resources a process holds.
type Counts struct {
	Threads     int
	Descriptors int
	Sockets     int // descriptors that are sockets; also counted in Descriptors
	Children    int // direct child processes, zombies included
}

// Sample reads every count of the process whose /proc directory is
// procPidDir. The counts are read one after another, not atomically.
func Sample(procPidDir string) (Counts, error) {
	var counts Counts
	var err error
	if counts.Threads, err = Threads(procPidDir); err != nil {
		return Counts{}, err
	}
	if counts.Descriptors, err = Descriptors(procPidDir); err != nil {
		return Counts{}, err
	}
	if counts.Sockets, err = Sockets(procPidDir); err != nil {
		return Counts{}, err
	}
	if counts.Children, err = Children(procPidDir); err != nil {
		return Counts{}, err
	}
	return counts, nil
}

// Self samples the calling process.
func Self() (Counts, error) {
	return Sample("/proc/self")
}

// Sub returns c minus base, field by field: what was gained since base.
func (c Counts) Sub(base Counts) Counts {
	return Counts{
		Threads:     c.Threads - base.Threads,
		Descriptors: c.Descriptors - base.Descriptors,
		Sockets:     c.Sockets - base.Sockets,
		Children:    c.Children - base.Children,
	}
}

func (c Counts) String() string {
	return fmt.Sprintf("threads=%d descriptors=%d sockets=%d children=%d",
		c.Threads, c.Descriptors, c.Sockets, c.Children)
}
