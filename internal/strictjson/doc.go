// Package strictjson decodes JSON documents strictly and reports every
// structural problem at once, each with its JSON path.
//
// # Design
//
// A document is first parsed into a small tree that keeps key order. Each
// value remembers only its parent and its key or index, so its path (such
// as `tenants[1].limits.max_queued_reservations`) is built when a problem is
// reported with it, never before: a long key above a large array costs its
// length once, not once per value beneath it. Duplicate object keys are
// reported while parsing; the first occurrence is kept. Typed readers then
// walk the tree with an [Object] per JSON object: every read records a
// problem instead of failing fast (a missing key, a wrong type, a negative
// or fractional number, a value out of range), and [Object.Done] reports
// each key the reader never asked for as unknown. The caller ends with
// [Decoder.Err], a [Problems] value listing everything wrong with the file.
//
// Only a syntax error or a broken limit stops parsing early: after it
// nothing reliable can be said about the rest of the document.
//
// # Cost
//
// The parser is a hand-written recursive descent over one copy of the
// input; keys and strings without escapes are slices of that copy. Time and
// memory are linear in the input: about 60 bytes of tree per input byte for
// the densest document (an array of one-digit numbers), far less for a
// typical file. Whole numbers are read exactly in one pass over their
// digits, never through arbitrary-precision arithmetic, so 1e3 is 1000 and
// 9007199254740993.0 stays exact.
//
// # Limits
//
// Hostile or accidental input is bounded, and each limit has its own error:
//
//   - [MaxDocumentBytes] (8 MiB) per document: Parse refuses a longer one
//     and [ReadAll] stops reading one byte past it ([ErrTooLarge], "input
//     exceeds 8388608 bytes").
//   - [MaxDepth] (64) levels of nested arrays and objects: "nesting too
//     deep", at the path of the first container too deep. The parser
//     recurses once per level, so this also bounds its stack.
//   - [MaxNumberDigits] (256) digits in one number, counting the integer,
//     fraction and exponent: "number too long", at the number's path. Every
//     number a policy, catalog or scenario holds needs at most 20.
//   - [MaxProblems] (1000) problems per document; a last line says that the
//     list stopped. Paths are built only for problems that are kept.
//   - A path shows at most [MaxPathKeyBytes] (64) bytes of one key and about
//     [MaxPathBytes] (1 KiB) in all, eliding middle steps with `...`, so
//     that 1000 problems print in bounded space.
//
// # Printing
//
// Keys come from the document and may hold anything. A path writes a key
// of letters, digits, `_` and `-` as `.key`, and any other as a quoted JSON
// string in brackets, `["a key"]`, with control characters, format
// characters (bidi overrides, zero-width characters) and other unprintable
// characters escaped (`\u001b`). [Problem.String] escapes whatever
// unprintable characters remain in a path or message (printable.String,
// internal/printable), so a problem is always exactly one line of plain
// text.
package strictjson
