// Package gen draws the random inputs that hold core to the reference
// model: small node policies that pass validation, generations of
// deployed revisions, admission requests (valid, and broken in every way
// the decision table names) and load samples (good, and wrong in every
// way a sampler can get them wrong). It also holds the two fixtures the
// tests share: an in-memory revision policy source and a settable clock.
//
// # Distribution
//
// rapid favours small draws and shrinks toward them, so every choice is
// laid out for the small draw to be the ordinary one: lists put the
// common option first, [Chance] maps small draws to the likelier outcome,
// and long lists go through [PickFlat]. A failing sequence therefore
// shrinks toward the plainest policy and request that still fail.
//
// A [Generator] is friendly or hostile. A friendly one draws only
// policies and revisions through which ordinary requests pass steps 1 to
// 12, so that its sequences spend their time in the ledger, capacity and
// feasibility; a hostile one also draws what nobody offers or permits, so
// that every rejection row is reached by configuration as well as by bad
// requests. Limits are 0 to 4 slots and a few grants' worth of fuel and
// memory, so capacity boundaries are hit within a few steps.
//
// # Caveats
//
// For tests only: the package depends on pgregory.net/rapid.
package gen
