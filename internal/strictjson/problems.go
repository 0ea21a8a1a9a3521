package strictjson

import (
	"errors"
	"fmt"
	"strings"
)

// Problem is one thing wrong with a document, at one JSON path.
type Problem struct {
	Path    string
	Message string
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
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

// JoinKey appends an object key to a path.
func JoinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Index appends an array index to a path.
func Index(path string, i int) string {
	return fmt.Sprintf("%s[%d]", path, i)
}
