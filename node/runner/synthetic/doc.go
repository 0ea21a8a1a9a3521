// Package synthetic is a backend for tests and the stress tool that runs
// no code: each activation follows a [Behavior] that its plan chooses,
// which can inject every terminal outcome the runner knows (success,
// declared error, trap, deadline and fuel interruption, memory
// exhaustion, platform failure, uncertain cleanup, a panicking backend).
//
// # Invariants it checks
//
// The backend also watches the cells it is given: two guests on one cell
// at the same time, or a guest on a cell whose cleanup was uncertain (a
// cell that should have been quarantined), count as violations, which a
// test or the stress tool reads with [Backend.Violations].
package synthetic
