package trace

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// encodeJSON is the encoding the writer had before AppendLine: a
// json.Encoder with HTML escaping off.
func encodeJSON(l *Line) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(l)
	return buf.Bytes(), err
}

// fuzzLine builds a line from fuzzed values: parts says which parts are
// set (every combination, not only the ones the recorder writes), and
// the strings, numbers and flags fill every field.
func fuzzLine(parts uint16, s1, s2, s3 string, u uint64, i int64, f1, f2 float64, b []byte, flags uint16) Line {
	bit := func(n uint) bool { return flags&(1<<n) != 0 }
	l := Line{Kind: s1, Order: u, T: i}
	if parts&1 != 0 {
		l.Header = &Header{Version: int(i), StartUnixNano: -i, File: u >> 3, PolicySHA256: s2}
	}
	if parts&2 != 0 {
		l.Catalog = &Catalog{Generation: u, File: b, Part: uint32(u), Parts: uint32(i)}
		if bit(0) {
			l.Catalog.File = nil
		}
	}
	if parts&4 != 0 {
		l.Change = &Change{Generation: u + 1, Deployment: b, Tenant: s2, Service: s3, DeploymentPart: uint32(i >> 3), DeploymentParts: uint32(u >> 5)}
	}
	if parts&8 != 0 {
		l.Load = &Load{Sequence: u, ObservedT: i, CPUPressure: f1, MemoryPressure: f2}
		if !bit(1) {
			l.Load.QueueDelayNS = []int64{i, int64(u), 0}[:int(u%4)%3]
		}
	}
	if parts&16 != 0 {
		wall, deadline := i*3, -i
		d := &Decision{Stage: s3, Target: Target{Tenant: s1, Service: s2, Route: s3}, RoutingKey: s2,
			Generation: u >> 1, ActivationID: s1, Priority: uint32(u), Budget: Budget{CPUFuel: u, MemoryBytes: uint64(i)},
			PayloadBytes: u >> 7, Clock: bit(2), Committed: bit(3), LoadSequence: u >> 2, CommitLoadSequence: uint64(i) >> 4,
			Answer: s2, Scope: s3, Dimension: s1}
		if bit(4) {
			d.Principal = &Principal{Kind: s1, Subject: s2, Tenant: s3, Service: s1, Admin: bit(5)}
		}
		if bit(6) {
			d.Revision = &Revision{Tenant: s1, Service: s2, Route: s3, Contract: s3 + s1, Function: s2 + s3, Revision: s1 + s2, Release: s3}
		}
		if bit(7) {
			d.Budget.WallTimeNS = &wall
		}
		if bit(8) {
			d.DeadlineUnixMS = &deadline
		}
		if bit(14) {
			d.Fleet = &FleetReading{Published: bit(15), Slice: i >> 2, RemainingNS: -i, Writes: u >> 9}
		}
		if bit(13) {
			d.Same = uint8(u >> 3) // AppendLine writes it as it is, any value (bit 13 also sets Owner, never written)
		}
		if bit(9) {
			d.Since = []int64{i, int64(u)}[:1+int(u%2)]
		} else if bit(10) {
			d.Since = []int64{}
		}
		l.Decision = d
	}
	if parts&32 != 0 {
		l.Move = &Move{Of: u, ElapsedNS: i, Refused: bit(11), Reclaimed: bit(12)}
	}
	if parts&64 != 0 {
		l.Dropped = &Dropped{Lines: u ^ uint64(i)}
	}
	if parts&128 != 0 {
		l.Fleet = &Fleet{Tenant: s3, Published: bit(15), Slice: i >> 1, ValidUntilT: int64(u >> 3), Writes: u >> 11}
	}
	if bit(13) {
		l.Owner = &s1 // never written
	}
	return l
}

// FuzzAppendLineMatchesEncodingJSON holds AppendLine to encoding/json:
// for every line, the same bytes as a json.Encoder with HTML escaping
// off, or an error where it refuses the line.
func FuzzAppendLineMatchesEncodingJSON(f *testing.F) {
	f.Add(uint16(16), "decision", "acme", "core", uint64(11), int64(12), 0.5, 0.25, []byte("x"), uint16(0xffff))
	f.Add(uint16(127), "k\"\\<>&\u2028\u2029\x00\x1f\b\f\n\r\t", "\xff\xfeé日本", "a\xc3", uint64(math.MaxUint64), int64(math.MinInt64), 1e-7, 1e21, []byte{}, uint16(0))
	f.Add(uint16(8), "load", "", "", uint64(0), int64(0), math.Inf(1), 0.0, []byte(nil), uint16(2))
	f.Add(uint16(8), "load", "", "", uint64(3), int64(-1), math.Copysign(0, -1), math.NaN(), []byte(nil), uint16(0))
	f.Add(uint16(8), "load", "", "", uint64(3), int64(-1), 123456789e-15, -1.5e300, []byte(nil), uint16(0))
	f.Add(uint16(16|128), "fleet", "acme", "globex", uint64(77), int64(-5), 0.0, 0.0, []byte(nil), uint16(1<<14|1<<15))
	f.Add(uint16(16|128), "fleet", "acme", "globex", uint64(0), int64(0), 0.0, 0.0, []byte(nil), uint16(1<<14))
	f.Add(uint16(2|4), "catalog", "", "", uint64(1), int64(2), 0.0, 0.0, bytes.Repeat([]byte{0xfb, 0xff}, 40), uint16(1))
	f.Fuzz(func(t *testing.T, parts uint16, s1, s2, s3 string, u uint64, i int64, f1, f2 float64, b []byte, flags uint16) {
		l := fuzzLine(parts, s1, s2, s3, u, i, f1, f2, b, flags)
		want, wantErr := encodeJSON(&l)
		prefix := []byte("prefix")
		got, err := AppendLine(prefix, &l)
		if wantErr != nil {
			require.Error(t, err)
			require.Equal(t, "prefix", string(got), "a refused line leaves dst as it was")
			return
		}
		require.NoError(t, err)
		require.Equal(t, "prefix"+string(want), string(got))
	})
}

// TestAppendLineMatchesEncodingJSON checks the recorder's own lines and
// the strings encoding/json escapes, outside the fuzzer too.
func TestAppendLineMatchesEncodingJSON(t *testing.T) {
	odd := []string{"", "plain", `q"b\s`, "<a href='x'>&amp;</a>", "\x00\x01\x1f\x7f", "\b\f\n\r\t",
		"\u2028\u2029", "é日本\U0001F600", "\xff", "a\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80"}
	for n, s := range odd {
		for parts := uint16(0); parts < 128; parts++ {
			for _, flags := range []uint16{0, 0xffff, 0x2aa, 0x155} {
				l := fuzzLine(parts, s, odd[(n+1)%len(odd)], odd[(n+5)%len(odd)], uint64(n)*977, int64(n)-5, 0.1*float64(n), 3e-9, []byte(s), flags)
				want, err := encodeJSON(&l)
				require.NoError(t, err)
				got, err := AppendLine(nil, &l)
				require.NoError(t, err)
				require.Equal(t, string(want), string(got))
			}
		}
	}
	// The writer's encoding, keeping the repeated parts of one line to
	// the next and leaving them out, reads back as the same lines.
	var e fragments
	var k fragments
	for n, s := range odd {
		for parts := uint16(16); parts < 128; parts += 16 {
			for _, flags := range []uint16{0, 0xffff, 0x2aa, 0x155} {
				l := fuzzLine(parts, s, odd[(n+1)%len(odd)], odd[(n+5)%len(odd)], uint64(n)*977, int64(n)-5, 0.1*float64(n), 3e-9, []byte(s), flags)
				if l.Decision != nil {
					l.Decision.Same = 0
				}
				want, err := AppendLine(nil, &l)
				require.NoError(t, err)
				got, err := appendLine(nil, &l, &e)
				require.NoError(t, err)
				var wantLine, gotLine Line
				wantErr, gotErr := DecodeLine(want, &wantLine), DecodeLine(got, &gotLine)
				require.Equal(t, wantErr == nil, gotErr == nil, "%v / %v", wantErr, gotErr)
				if wantErr != nil {
					continue // not a line a reader takes (no kind, two parts)
				}
				if gotLine.Kind == KindDecision {
					require.NoError(t, k.resolve(gotLine.Decision))
				}
				require.Equal(t, wantLine, gotLine)
			}
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		l := Line{Kind: KindLoad, Load: &Load{CPUPressure: f}}
		_, err := AppendLine(nil, &l)
		require.Error(t, err, "%v", f)
	}
}

// BenchmarkAppendLine is a decision line as the recorder writes one,
// encoded by AppendLine, by the writer (AppendLine with its fragments)
// and by the json.Encoder the writer used before.
func BenchmarkAppendLine(b *testing.B) {
	wall := int64(5e9)
	l := Line{Kind: KindDecision, Order: 123456789, T: 987654321, Decision: &Decision{Stage: StageCore,
		Principal: &Principal{Kind: "user", Subject: "alice", Tenant: "acme"},
		Target:    Target{Tenant: "acme", Service: "echo", Route: "run"},
		Revision: &Revision{Tenant: "acme", Service: "echo", Route: "run", Contract: "echo-contract", Function: "echo",
			Revision: "r-2026-11-30T10:00:00Z", Release: "stable"},
		Generation: 3, ActivationID: "bench-activation", Priority: 5, Budget: Budget{CPUFuel: 1e9, MemoryBytes: 64 << 20, WallTimeNS: &wall},
		PayloadBytes: 1, Clock: true, Committed: true, Since: []int64{1234}, Answer: AnswerAdmitted}}
	b.Run("AppendLine", func(b *testing.B) {
		var buf []byte
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if buf, err = AppendLine(buf[:0], &l); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("writer", func(b *testing.B) {
		// The writer's encoding: the same line again, its principal,
		// target, revision and budget copied from the last one.
		var buf []byte
		var e fragments
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if buf, err = appendLine(buf[:0], &l, &e); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("encoding-json", func(b *testing.B) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			if err := enc.Encode(&l); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(int64(buf.Len()))
	})
}

// FuzzFragmentsMatchAppendLine holds the writer's encoding, which leaves
// out a decision's principal, target and budget when they equal the last
// ones it kept and names them in "same", to AppendLine: two fuzzed lines
// encoded in turn (a, b, b, a, a, b), the second one's parts then changed
// in place, as a recycled line's are, and encoded again, read back as one
// file's lines (decoded, and the parts "same" names put back as a Reader
// does) are the lines AppendLine's bytes decode to; a line that names no
// part is AppendLine's bytes.
func FuzzFragmentsMatchAppendLine(f *testing.F) {
	f.Add(uint16(16), "decision", "acme", "core", uint64(11), int64(12), uint16(0xffff), uint16(16), "globex", uint16(0x50))
	f.Add(uint16(16), "decision", "acme", "core", uint64(11), int64(12), uint16(0x2d0), uint16(16), "acme", uint16(0x2d0))
	f.Add(uint16(16), "d", strings.Repeat("x", maxFragmentBytes), "c", uint64(1), int64(2), uint16(0xd0), uint16(17), "", uint16(0xd0))
	f.Fuzz(func(t *testing.T, parts uint16, s1, s2, s3 string, u uint64, i int64, flags, parts2 uint16, s4 string, flags2 uint16) {
		a := fuzzLine(parts, s1, s2, s3, u, i, 0.5, 0.25, nil, flags)
		b := fuzzLine(parts2, s4, s2, s1, u>>1, i+1, 0.5, 0.25, nil, flags2)
		for _, l := range []*Line{&a, &b} {
			if l.Decision != nil {
				l.Decision.Same = 0 // the writer's own to set
			}
		}
		var e fragments
		var k fragments
		check := func(l *Line) {
			want, wantErr := AppendLine([]byte("p"), l)
			got, err := appendLine([]byte("p"), l, &e)
			require.Equal(t, wantErr, err)
			if err != nil {
				e.reset() // as the writer does
				return
			}
			var wantLine, gotLine Line
			wantDecodeErr := DecodeLine(want[1:len(want)-1], &wantLine)
			gotDecodeErr := DecodeLine(got[1:len(got)-1], &gotLine)
			require.Equal(t, wantDecodeErr == nil, gotDecodeErr == nil, "%v / %v", wantDecodeErr, gotDecodeErr)
			if wantDecodeErr != nil {
				return
			}
			if gotLine.Decision == nil || gotLine.Decision.Same == 0 {
				require.Equal(t, string(want), string(got))
			}
			if gotLine.Kind == KindDecision {
				require.NoError(t, k.resolve(gotLine.Decision))
			}
			require.Equal(t, wantLine, gotLine)
		}
		for _, l := range []*Line{&a, &b, &b, &a, &a, &b} {
			check(l)
		}
		if d := b.Decision; d != nil {
			d.Target.Route += "x"
			d.Budget.CPUFuel++
			if d.Principal != nil {
				d.Principal.Admin = !d.Principal.Admin
			}
			if d.Revision != nil {
				d.Revision.Release = s3
			}
			if d.Budget.WallTimeNS != nil {
				*d.Budget.WallTimeNS++
			}
			check(&b)
			check(&a)
			check(&b)
		}
	})
}
