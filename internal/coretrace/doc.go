// Package coretrace maps admission's decisions to a trace's lines
// (internal/trace) and back, in one place for the recorders (latentd's,
// edge/latentd/record.go, and the tests' internal/shadow/shadowtest) and
// the replay (internal/shadow).
//
// # Readings by label
//
// A decision reads its clock and load through a [core.Inputs], one
// method per reading, named for the step that takes it (the first
// reading, step 12's resample and sample, the commit's reading and
// sample), and is told its fleet slice and its place in the order.
// [Recording] is a recorder's: it reads the node's clock and load source
// and keeps each reading by its label; [Recording.Put] writes them into
// the decision's line. [Replaying] is the replay's: [Replaying.Set] reads
// them back from a line and it answers each label with its own reading,
// however many times it is asked. A replay therefore does not depend on
// how many times the decision reads its clock or its load.
//
// In the line, a decision's clock readings after its first (T) are
// since_ns: step 12's resample when it was taken, then the commit's when
// the decision reached the commit (committed). That is the format's
// version 1, which the labels read unambiguously: a committed decision's
// last reading is the commit's, and any other reading is step 12's.
//
// # The rest of a line
//
// A request ([SetRequest], [Request]), an answer ([SetAnswer],
// [Answer]), a load sample ([LoadOf], [Sample]) and a ledger move
// ([MoveOf]) are mapped here too, each one way and its reverse beside
// it.
package coretrace
