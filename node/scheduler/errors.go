package scheduler

import "errors"

// Errors the scheduler returns from Submit or passes to Job.End. Each
// is a fixed value; compare with errors.Is. Whenever one of them is the
// answer, the scheduler has already released the permit.
var (
	// ErrQueueFull: the activation's queue class already holds its bound.
	ErrQueueFull = errors.New("scheduler: queue class full")
	// ErrCanceled: the submit context was done before the activation got
	// a cell.
	ErrCanceled = errors.New("scheduler: canceled while queued")
	// ErrExpired: the permit's deadline passed before the activation got a
	// cell, or at StartExecution.
	ErrExpired = errors.New("scheduler: deadline passed while queued")
	// ErrClosed: the scheduler is closing or closed.
	ErrClosed = errors.New("scheduler: closed")
	// ErrUnknownQueueClass: the permit names a queue class the scheduler's
	// policy does not have (it was admitted under another policy).
	ErrUnknownQueueClass = errors.New("scheduler: unknown queue class")
	// ErrCellClassNotPooled: the permit's cell class has no cells in the
	// pool, so it could never run.
	ErrCellClassNotPooled = errors.New("scheduler: cell class not pooled")
	// ErrStartFailed: StartExecution refused the permit for a reason other
	// than its deadline.
	ErrStartFailed = errors.New("scheduler: start refused")
	// ErrInvalidOptions is returned by New for a zero weight or a negative
	// bound.
	ErrInvalidOptions = errors.New("scheduler: invalid options")
)
