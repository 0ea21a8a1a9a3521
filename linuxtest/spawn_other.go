//go:build !linux

package linuxtest

import "time"

// spawn needs Linux: without a parent-death signal the child could outlive
// a killed parent, which is the leak the harness exists to prevent.
func spawn(args, env []string, deadline time.Duration) (Outcome, error) {
	return Outcome{}, ErrUnsupported
}
