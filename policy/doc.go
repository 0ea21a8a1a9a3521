// Package policy owns the shared vocabulary of admission (budgets, cell
// classes, threading models, principal kinds, revision identities and
// revision policy) and the node admission policy: its strict decoding, its
// validation and its compilation into dense integer IDs.
//
// # Files
//
// [DecodePolicy] reads the JSON policy file described in docs/policy-format.md. Decoding
// is strict: an unknown key, a missing key, a wrong type, a negative or
// fractional number, a millisecond value that does not fit a
// time.Duration, and a duplicate key are all errors. There are no defaults.
// Every problem is reported at once, one per line, as `path: message`
// (`tenants[1].limits.max_queued_reservations: missing`).
//
// # Rules
//
// [NodeAdmissionPolicy.Validate] enforces the rules of docs/policy-format.md: unique names;
// references only to configured tenants, trust classes and cell classes;
// cell classes from the fixed five with positive memory and parallelism
// and at least one threading model; every priority 0..node maximum in
// exactly one queue class and no reversed or empty range; a positive node
// wall-time ceiling; a generated-identifier allowance of at least 83
// bytes; pressure thresholds in (0, 1]; a positive maximum observation
// age; every identifier obeying the node's own identifier rules. Three
// bounds keep compiled state fixed and small: node live activations at
// most [MaxNodeLiveActivations] (it sizes the live table), at most
// [MaxTrustClasses] trust classes and [MaxFeatures] distinct features
// (each a bit in a word), and a node maximum priority of at most
// [MaxPriority] (it sizes the priority table).
//
// # Compilation
//
// [Compile] validates and then builds a [Compiled] policy: tenants, trust
// classes and queue classes get dense IDs in file order, cell classes are
// indexed by their fixed order, priorities map to queue classes through a
// dense table, and each tenant's trust-class and cell-class sets are
// bitsets. A compiled policy shares no memory with its source and exposes
// only copies, so it is immutable and safe to share.
package policy
