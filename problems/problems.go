// Package problems is the error type of every decoder and validator of
// the library: a list of problems, each with the JSON path it concerns
// and a message. policy.DecodePolicy, policy.Validate,
// catalog.DecodeCatalogFile, catalog.DecodeDeployment, catalog.ValidateFile
// and a catalog's Deploy and Apply return one, which [errors.As] finds:
//
//	var ps problems.List
//	if errors.As(err, &ps) {
//		for _, p := range ps {
//			fmt.Println(p.Path, p.Message)
//		}
//	}
//
// latentd's `problems` response body is the same list.
package problems

import (
	"errors"
	"strings"

	"latent.dev/admission/internal/printable"
)

// Problem is one thing wrong with a document, at one JSON path, such as
// `tenants[1].limits.max_live_activations`; the document's root is the
// empty path.
type Problem struct {
	Path    string
	Message string
}

// String renders the problem as one line, `path: message`, with every
// character that is not printable (control and format characters)
// replaced by its JSON escape, so that a hostile document cannot drive a
// terminal or a log.
func (p Problem) String() string {
	if p.Path == "" {
		return printable.String(p.Message)
	}
	return printable.String(p.Path) + ": " + printable.String(p.Message)
}

// List is every problem found in a document, in the order found. It is
// an error whose text has one line per problem.
type List []Problem

func (ps List) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Of returns the problems an error carries: the list itself when err is
// or wraps a List, otherwise one problem without a path; nil for nil.
func Of(err error) List {
	if err == nil {
		return nil
	}
	var ps List
	if errors.As(err, &ps) {
		return ps
	}
	return List{{Message: err.Error()}}
}
