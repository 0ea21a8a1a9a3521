package strictjson

import (
	"strconv"

	"latent.dev/admission/problems"
)

// Problem is one thing wrong with a document, at one JSON path: the
// public [problems.Problem], so that the decoders' errors are a type an
// embedder can name.
type Problem = problems.Problem

// Problems is every problem found in a document: [problems.List].
type Problems = problems.List

// AsProblems returns the problems an error carries; see [problems.Of].
func AsProblems(err error) Problems { return problems.Of(err) }

// tooMany ends a list that reached MaxProblems.
var tooMany = Problem{Message: "too many problems: only the first " + strconv.Itoa(MaxProblems) + " are listed"}

// problemList keeps at most MaxProblems problems and remembers whether
// more were dropped. Callers check room before building a problem's path,
// so a document with a million problems costs no more than one with a
// thousand.
type problemList struct {
	items     Problems
	truncated bool
}

func (l *problemList) room() bool { return len(l.items) < MaxProblems }

func (l *problemList) add(p Problem) {
	switch {
	case p == tooMany:
		l.truncated = true
	case l.room():
		l.items = append(l.items, p)
	default:
		l.truncated = true
	}
}

// list returns the problems, ending with tooMany when some were dropped.
func (l *problemList) list() Problems {
	if !l.truncated {
		return l.items
	}
	return append(l.items[:len(l.items):len(l.items)], tooMany)
}
