// Package docwalk holds no code: its test keeps the invocation walk of
// docs/README.md true to the tree. Each hop of the walk names a file and
// a function; the test fails when the file is missing, does not declare
// the function, names a caller that is not an earlier hop, or when the
// counts the page states (distinct files, package crossings) are not
// the table's own.
package docwalk
