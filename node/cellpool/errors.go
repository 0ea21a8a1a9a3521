package cellpool

import "errors"

// Errors returned by the pool. Each is a fixed value; compare with
// errors.Is.
var (
	// ErrClassNotPooled is returned by Acquire and Replenish for a cell
	// class the pool was not configured with.
	ErrClassNotPooled = errors.New("cellpool: cell class not pooled")
	// ErrNoFreeCell is returned by Acquire when every usable cell of the
	// class is leased or the class has no usable cell left. It is
	// transient: wait on Changed and try again.
	ErrNoFreeCell = errors.New("cellpool: no free cell")
	// ErrClosed is returned by Acquire after Close.
	ErrClosed = errors.New("cellpool: closed")
	// ErrNothingQuarantined is returned by Replenish when the class has no
	// quarantined cell to replace.
	ErrNothingQuarantined = errors.New("cellpool: no quarantined cell")
	// ErrTooManyCells is returned by New for a class whose parallelism is
	// above MaxCellsPerClass.
	ErrTooManyCells = errors.New("cellpool: parallelism above the per-class maximum")
)
