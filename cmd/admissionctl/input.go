package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"latent.dev/admission/internal/printable"
	"latent.dev/admission/internal/strictjson"
)

// Exit statuses, documented in the package comment and the usage text.
const (
	exitOK         = 0 // everything valid, every check passed
	exitProblems   = 1 // a file has problems, or a replay check failed
	exitMisuse     = 2 // bad arguments
	exitUnreadable = 3 // an input could not be read, or exceeds the size limit
)

// stdin is what the file name "-" reads; tests replace it.
var stdin io.Reader = os.Stdin

// readInput reads a whole input file, or standard input for "-", never
// more than strictjson.MaxDocumentBytes+1 bytes of it: a longer input,
// /dev/zero included, fails with strictjson.ErrTooLarge.
func readInput(name string) ([]byte, error) {
	if name == "-" {
		return strictjson.ReadAll(stdin)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return strictjson.ReadAll(f)
}

// printUnreadable prints why an input could not be read, as one line
// naming it.
func printUnreadable(w io.Writer, name string, err error) {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the name is printed once, escaped, below
	}
	if name == "-" {
		name = "standard input"
	}
	fmt.Fprintf(w, "%s: %s\n", printable.String(name), printable.String(err.Error()))
}

// printProblems prints one line per problem in err, each escaped so that
// it stays one line of plain text.
func printProblems(w io.Writer, err error) {
	for _, p := range strictjson.AsProblems(err) {
		fmt.Fprintln(w, p.String())
	}
}

// exitStatusUsage ends the usage text.
const exitStatusUsage = "exit status: 0 ok, 1 problems found, 2 misuse, 3 unreadable or oversized input (FILE \"-\" is standard input)"
