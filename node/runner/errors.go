package runner

import "errors"

// Outcome errors: Activation.Wait returns the one for its outcome (nil
// for success). Each is a fixed value; compare with errors.Is.
var (
	ErrDeclared         = errors.New("runner: guest returned a declared error")
	ErrTrapped          = errors.New("runner: guest trapped")
	ErrDeadlineExceeded = errors.New("runner: deadline exceeded")
	ErrFuelExhausted    = errors.New("runner: cpu fuel exhausted")
	ErrMemoryExhausted  = errors.New("runner: memory exhausted")
	ErrCanceled         = errors.New("runner: canceled while running")
	ErrPlatformFailure  = errors.New("runner: platform failure")
	// ErrNoBackend is returned by New for a configuration without
	// backends.
	ErrNoBackend = errors.New("runner: no backend configured")
)
