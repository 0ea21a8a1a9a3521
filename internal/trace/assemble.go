package trace

import (
	"fmt"
)

// assembly is a payload in parts being put together.
type assembly struct {
	active      bool
	kind        string
	gen         uint64
	next, parts uint32
	buf         []byte
}

// assemble takes a line in order: a line not in parts is itself; a part
// joins the payload it continues, which is handed out with its last
// part (ok).
func (r *Reader) assemble(l Line) (Line, bool, error) {
	var part, parts uint32
	var data []byte
	var gen uint64
	switch {
	case l.Kind == KindCatalog && l.Catalog.Parts > 0:
		part, parts, data, gen = l.Catalog.Part, l.Catalog.Parts, l.Catalog.File, l.Catalog.Generation
	case l.Kind == KindDeploy && l.Change.DeploymentParts > 0:
		part, parts, data, gen = l.Change.DeploymentPart, l.Change.DeploymentParts, l.Change.Deployment, l.Change.Generation
	default:
		return l, true, nil
	}
	a := &r.asm
	if part == 0 {
		if a.active {
			r.stats.LostParts += uint64(a.next)
		}
		*a = assembly{active: true, kind: l.Kind, gen: gen, parts: parts}
	} else if !a.active || a.kind != l.Kind || a.gen != gen || a.parts != parts || a.next != part {
		// A part whose predecessors were lost (dropped, or in a file
		// that is gone).
		if a.active {
			r.stats.LostParts += uint64(a.next)
			*a = assembly{}
		}
		r.stats.LostParts++
		return Line{}, false, nil
	}
	if int64(len(a.buf))+int64(len(data)) > MaxPayloadBytes {
		pos := r.lastPos
		return Line{}, false, &LineError{File: pos.File, Line: pos.Line,
			Err: fmt.Errorf("a %s in parts longer than %d bytes", l.Kind, MaxPayloadBytes)}
	}
	a.buf = append(a.buf, data...)
	a.next++
	if a.next < parts {
		return Line{}, false, nil
	}
	whole := l
	switch l.Kind {
	case KindCatalog:
		c := *l.Catalog
		c.File, c.Part, c.Parts = a.buf, 0, 0
		whole.Catalog = &c
	default:
		c := *l.Change
		c.Deployment, c.DeploymentPart, c.DeploymentParts = a.buf, 0, 0
		whole.Change = &c
	}
	*a = assembly{}
	return whole, true, nil
}
