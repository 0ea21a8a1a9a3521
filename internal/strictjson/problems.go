package strictjson

import (
	"errors"
	"strconv"
	"strings"
)

// Problem is one thing wrong with a document, at one JSON path.
type Problem struct {
	Path    string
	Message string
}

// String renders the problem as one line, `path: message`, with every
// unprintable character escaped (see [Printable]).
func (p Problem) String() string {
	if p.Path == "" {
		return Printable(p.Message)
	}
	return Printable(p.Path) + ": " + Printable(p.Message)
}

// Problems is every problem found in a document, in the order found. It is
// an error whose text has one line per problem.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// AsProblems returns the problems an error carries: the list itself for a
// Problems error, otherwise one problem without a path.
func AsProblems(err error) Problems {
	if err == nil {
		return nil
	}
	var ps Problems
	if errors.As(err, &ps) {
		return ps
	}
	return Problems{{Message: err.Error()}}
}

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
