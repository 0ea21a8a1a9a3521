package guest

import "context"

// boundedOutput collects a guest's standard output up to a limit. The
// first write that would pass it is refused (the guest sees an I/O
// error), the output so far is discarded, and the guest is interrupted:
// a response over the bound is a broken response, never a truncated one.
// Only the instance's goroutine writes to it.
type boundedOutput struct {
	limit    int64
	cancel   context.CancelCauseFunc
	buffer   []byte
	overflow bool
}

// firstOutputBytes is the capacity of a guest's output at its first write
// (or the write's length, if longer; never past the limit).
const firstOutputBytes = 64

func (o *boundedOutput) Write(p []byte) (int, error) {
	if o.overflow || int64(len(p)) > o.limit-int64(len(o.buffer)) {
		o.overflow = true
		o.buffer = nil
		o.cancel(errOutputTooLarge)
		return 0, errOutputTooLarge
	}
	if o.buffer == nil {
		// One allocation for a short answer written in pieces.
		o.buffer = make([]byte, 0, min(max(int64(len(p)), firstOutputBytes), o.limit))
	}
	o.buffer = append(o.buffer, p...)
	return len(p), nil
}
