// Package shadow replays a decision trace (internal/trace, what `latentd
// -record` writes) through admission under a candidate policy and says
// what would have changed (docs/record-and-shadow.md).
//
// The replay runs the core itself: one [core.LocalQuotaProvider] for the
// candidate policy, one controller per catalog generation the trace
// names. Each decision reads its clock and load through a
// coretrace.Replaying ([core.AdmissionController.AdmitWith]), which
// answers each label (the first reading, step 12's, the commit's) with
// the reading the line recorded under it, however many times the
// decision asks; a permit's start and release read a virtual clock that
// answers with their recorded times. Every start and release the trace holds moves the replay's
// ledger as it moved the node's, so under the recording's own policy a
// complete trace replays to the same answers, decision for decision.
//
// Under another policy a decision the node refused may be admitted. The
// trace cannot say how long it would have run, so the replay estimates
// it: the median recorded duration (admission to release) of its route,
// or, when its route has none, the wall time the candidate granted. Such
// a hold starts at once and is released when the virtual time passes its
// admission plus that duration. [Result.Estimated] counts them.
//
// # Layout
//
//   - shadow.go: the engine, [Replay], reading the trace in order and
//     deciding each decision line under the candidate;
//   - edge.go: the checks the edge makes before admission (the
//     principal and the route), replayed under the candidate through
//     the edge's own implementation, internal/edgecheck;
//   - virtual.go: the virtual clock a permit's moves read, and the
//     recorded samples a decision's readings name (coretrace.Samples);
//   - pins.go: the catalog generations a decision resolves in;
//   - holds.go: the replay's permits, started and released as the trace
//     says, and the estimated holds released when due;
//   - median.go: the first pass, the recorded duration per route;
//   - series.go: the reservations over time, recorded and candidate;
//   - result.go and report.go: the [Result], its text and its HTML page.
package shadow
