// Package strictjson decodes JSON documents strictly and reports every
// structural problem at once, each with its JSON path.
//
// # Design
//
// A document is first parsed into a small tree that keeps key order and
// remembers where each value sits (its path, such as
// `tenants[1].limits.max_queued_reservations`). Duplicate object keys are
// reported while parsing; the first occurrence is kept. Typed readers then
// walk the tree with an [Object] per JSON object: every read records a
// problem instead of failing fast (a missing key, a wrong type, a negative
// or fractional number, a value out of range), and [Object.Done] reports
// each key the reader never asked for as unknown. The caller ends with
// [Decoder.Err], a [Problems] value listing everything wrong with the file.
//
// Only a syntax error stops parsing early: after it nothing reliable can be
// said about the rest of the document.
package strictjson
