package trace

import (
	"fmt"
	"strings"
)

// Stats is what a [Reader] found that makes a replay inexact.
type Stats struct {
	// Dropped is the sum of the dropped lines' counts (the lines the
	// recorder lost); DroppedMarks is how many dropped lines there were.
	Dropped, DroppedMarks uint64
	// Late is the number of lines that arrived after a line with a
	// higher Order had been handed out: beyond the reorder window.
	Late uint64
	// Gaps lists the ranges of file indexes missing from the given files
	// (the first file's index is expected to be 0), at most one more
	// than the files.
	Gaps []FileRange
	// Torn lists the files whose last line was cut short (the recorder
	// stopped mid-line: a crash, a full disk): the recording ends there.
	Torn []Position
	// Lines is the number of lines Next took in order (each part of a
	// payload in parts counts).
	Lines uint64
	// LostParts counts the parts of a catalog or deployment in parts that
	// came without the others (a dropped line, a file that is gone): the
	// payload is not handed out.
	LostParts uint64
}

// FileRange is the file indexes From to To, both included.
type FileRange struct{ From, To uint64 }

func (g FileRange) String() string {
	if g.From == g.To {
		return fmt.Sprint(g.From)
	}
	return fmt.Sprintf("%d to %d", g.From, g.To)
}

// Inexact describes what the reader found that makes a replay inexact,
// one phrase each; none for a complete trace.
func (s Stats) Inexact() []string {
	var out []string
	if s.Dropped > 0 || s.DroppedMarks > 0 {
		out = append(out, fmt.Sprintf("%d lines dropped by the recorder", s.Dropped))
	}
	if s.Late > 0 {
		out = append(out, fmt.Sprintf("%d lines arrived beyond the reorder window", s.Late))
	}
	if len(s.Gaps) > 0 {
		idx := make([]string, len(s.Gaps))
		for i, g := range s.Gaps {
			idx[i] = g.String()
		}
		out = append(out, "trace files missing (file index "+strings.Join(idx, ", ")+")")
	}
	if s.LostParts > 0 {
		out = append(out, fmt.Sprintf("%d parts of a catalog or deployment came without their other parts", s.LostParts))
	}
	for _, p := range s.Torn {
		out = append(out, fmt.Sprintf("the recording ends in a torn line (%s)", p))
	}
	return out
}
