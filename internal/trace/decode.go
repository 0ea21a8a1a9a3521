package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// DecodeLine strictly decodes one line into l (which it resets first): a
// key the format does not have is refused, and so is a line whose Kind is
// not one of the kinds or whose parts are not exactly the one its Kind
// names.
func DecodeLine(data []byte, l *Line) error { return decodeLine(data, l, nil) }

func decodeLine(data []byte, l *Line, in *interner) error {
	if decodeRecorded(data, l, in) {
		return l.check()
	}
	if err := decodeJSON(data, l); err != nil {
		return err
	}
	return l.check()
}

// decodeJSON decodes data into l (reset first) with encoding/json,
// strictly: no unknown key, nothing after the object. It is what the
// recorded-line decoder must match.
func decodeJSON(data []byte, l *Line) error {
	*l = Line{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(l); err != nil {
		return fmt.Errorf("not a trace line: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("not a trace line: more after the object")
	}
	return nil
}

// check reports whether exactly the part Kind names is set.
func (l *Line) check() error {
	var want string
	n, first := 0, ""
	note := func(set bool, what string) {
		if set {
			if n == 0 {
				first = what
			}
			n++
		}
	}
	note(l.Header != nil, KindHeader)
	note(l.Catalog != nil, KindCatalog)
	note(l.Change != nil, "deploy or undeploy")
	note(l.Load != nil, KindLoad)
	note(l.Decision != nil, KindDecision)
	note(l.Move != nil, "start or release")
	note(l.Dropped != nil, KindDropped)
	note(l.Fleet != nil, KindFleet)
	ok := false
	switch l.Kind {
	case KindHeader:
		want, ok = KindHeader, l.Header != nil
	case KindCatalog:
		want, ok = KindCatalog, l.Catalog != nil
	case KindDeploy:
		want, ok = "deploy or undeploy", l.Change != nil && l.Change.Deployment != nil
	case KindUndeploy:
		want, ok = "deploy or undeploy", l.Change != nil && l.Change.Deployment == nil && l.Change.Tenant != "" && l.Change.Service != ""
	case KindLoad:
		want, ok = KindLoad, l.Load != nil
	case KindDecision:
		want, ok = KindDecision, l.Decision != nil
	case KindStart, KindRelease:
		want, ok = "start or release", l.Move != nil
	case KindDropped:
		want, ok = KindDropped, l.Dropped != nil
	case KindFleet:
		want, ok = KindFleet, l.Fleet != nil && l.Fleet.Tenant != ""
	case "":
		return errors.New(`no kind ("k")`)
	default:
		return fmt.Errorf("unknown kind %q", l.Kind)
	}
	if !ok || n != 1 || first != want {
		return l.partsProblem(ok, want)
	}
	if c := l.Catalog; c != nil && c.Parts > 0 && c.Part >= c.Parts {
		return fmt.Errorf("catalog_part %d is not below catalog_parts %d", c.Part, c.Parts)
	}
	if c := l.Change; c != nil && c.DeploymentParts > 0 && c.DeploymentPart >= c.DeploymentParts {
		return fmt.Errorf("deployment_part %d is not below deployment_parts %d", c.DeploymentPart, c.DeploymentParts)
	}
	if l.Kind != KindHeader && l.Order == 0 {
		return fmt.Errorf("a %q line without an order", l.Kind)
	}
	return nil
}

// partsProblem says what is wrong with a line's parts.
func (l *Line) partsProblem(ok bool, want string) error {
	var set []string
	for _, p := range []struct {
		set  bool
		what string
	}{{l.Header != nil, KindHeader}, {l.Catalog != nil, KindCatalog}, {l.Change != nil, "deploy or undeploy"},
		{l.Load != nil, KindLoad}, {l.Decision != nil, KindDecision}, {l.Move != nil, "start or release"}, {l.Dropped != nil, KindDropped},
		{l.Fleet != nil, KindFleet}} {
		if p.set {
			set = append(set, p.what)
		}
	}
	if len(set) == 0 {
		return fmt.Errorf("a %q line without its fields", l.Kind)
	}
	if ok || (len(set) == 1 && set[0] == want) {
		return fmt.Errorf("a %q line with fields of a %s line", l.Kind, joinOthers(set, want))
	}
	return fmt.Errorf("a %q line with the fields of a %s line", l.Kind, set[0])
}

func joinOthers(set []string, want string) string {
	var b []byte
	for _, s := range set {
		if s == want {
			continue
		}
		if len(b) > 0 {
			b = append(b, " and "...)
		}
		b = append(b, s...)
	}
	return string(b)
}
