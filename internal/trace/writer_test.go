package trace_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"latent.dev/admission/internal/trace"
)

// readLines decodes every line of the trace file at path.
func readLines(t *testing.T, path string) []trace.Line {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []trace.Line
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l trace.Line
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), "line %q", sc.Text())
		out = append(out, l)
	}
	require.NoError(t, sc.Err())
	return out
}

// readRecording reads the recording in paths as a replay does: every
// line after the headers, in order, each decision whole.
func readRecording(t *testing.T, paths ...string) []trace.Line {
	t.Helper()
	r, err := trace.Open(paths, 0)
	require.NoError(t, err)
	defer r.Close()
	var lines []trace.Line
	for {
		l, err := r.Next()
		if err == io.EOF {
			return lines
		}
		require.NoError(t, err)
		lines = append(lines, l)
	}
}

func decision(order uint64) trace.Line {
	wall := int64(250e6)
	return trace.Line{Kind: trace.KindDecision, Order: order, T: int64(order) * 1000, Decision: &trace.Decision{
		Stage:     trace.StageCore,
		Principal: &trace.Principal{Kind: "user", Subject: "alice", Tenant: "acme"},
		Target:    trace.Target{Tenant: "acme", Service: "echo", Route: "run"},
		Priority:  1, Budget: trace.Budget{CPUFuel: 10, MemoryBytes: 20, WallTimeNS: &wall},
		Clock: true, Committed: true, Since: []int64{5, 7}, LoadSequence: 3, CommitLoadSequence: 4,
		Answer: trace.AnswerAdmitted,
	}}
}

// distinct is decision(order) with parts no other order's has (of the
// same length up to order 9999): the writer leaves nothing out of it, so
// every such line is as long as the first.
// writeAll writes lines 1 to n, line(order) each, through a writer
// rotating at maxBytes whose queue holds them all, and closes it: every
// line is accepted and written.
func writeAll(t *testing.T, path string, maxBytes int64, n int, line func(order uint64) trace.Line) {
	t.Helper()
	w, err := trace.NewWriter(trace.WriterConfig{Path: path, MaxBytes: maxBytes, Buffer: 1024})
	require.NoError(t, err)
	for i := range n {
		require.True(t, w.Add(line(uint64(i+1))))
	}
	require.NoError(t, w.Close())
	require.NoError(t, w.Err())
}

func distinct(order uint64) trace.Line {
	l := decision(order)
	l.Decision.Principal.Subject = fmt.Sprintf("u%04d", order)
	l.Decision.Target.Route = fmt.Sprintf("r%04d", order)
	l.Decision.Budget.CPUFuel = 10000 + order
	return l
}

func TestWriterRoundTrip(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	w, err := trace.NewWriter(trace.WriterConfig{Path: path, StartUnixNano: 42, PolicySHA256: "abc"})
	require.NoError(t, err)
	want := []trace.Line{
		{Kind: trace.KindCatalog, Order: 1, Catalog: &trace.Catalog{Generation: 7, File: []byte(`{"capacity":{}}`)}},
		{Kind: trace.KindLoad, Order: 2, T: -5, Load: &trace.Load{Sequence: 1, ObservedT: -5, CPUPressure: 0.5, QueueDelayNS: []int64{1, 2, 3}}},
		decision(3),
		{Kind: trace.KindStart, Order: 4, T: 9, Move: &trace.Move{Of: 3, ElapsedNS: 6}},
		{Kind: trace.KindRelease, Order: 5, T: 11, Move: &trace.Move{Of: 3, ElapsedNS: 8, Reclaimed: true}},
	}
	for _, l := range want {
		require.True(t, w.Add(l))
	}
	require.NoError(t, w.Close())
	require.NoError(t, w.Close(), "Close twice")
	assert.False(t, w.Add(decision(9)), "Add after Close")
	assert.EqualValues(t, len(want), w.Written())
	assert.Zero(t, w.Dropped())

	got := readLines(t, path)
	require.Len(t, got, len(want)+1)
	assert.Equal(t, trace.Line{Kind: trace.KindHeader, Header: &trace.Header{Version: trace.Version, StartUnixNano: 42, PolicySHA256: "abc"}}, got[0])
	assert.Equal(t, want, got[1:])
}

func TestWriterDropsWhenFull(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	var orders uint64 = 1000
	w, err := trace.NewWriter(trace.WriterConfig{Path: path, Buffer: 4, NextOrder: func() uint64 { orders++; return orders }})
	require.NoError(t, err)
	// Far more than the buffer, as fast as possible: some are dropped.
	const sent = 20000
	accepted := 0
	for i := range sent {
		if w.Add(decision(uint64(i + 1))) {
			accepted++
		}
	}
	require.NoError(t, w.Close())
	dropped := w.Dropped()
	require.NotZero(t, dropped, "a buffer of 4 took %d lines in a row", sent)
	assert.EqualValues(t, sent, uint64(accepted)+dropped)
	assert.EqualValues(t, accepted, w.Written())

	var decisions int
	var reported uint64
	for _, l := range readLines(t, path)[1:] {
		switch l.Kind {
		case trace.KindDecision:
			decisions++
		case trace.KindDropped:
			require.NotNil(t, l.Dropped)
			assert.Greater(t, l.Order, uint64(1000), "a dropped line's order comes from NextOrder")
			reported += l.Lines
		default:
			t.Fatalf("unexpected line %+v", l)
		}
	}
	assert.Equal(t, accepted, decisions)
	assert.Equal(t, dropped, reported, "every dropped line is reported")
}

func TestWriterRotates(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	// An older FILE.1 is replaced.
	require.NoError(t, os.WriteFile(path+".1", []byte("old\n"), 0o600))
	one, err := json.Marshal(distinct(1))
	require.NoError(t, err)
	// A header is shorter than a line: each file takes three lines.
	maxBytes := int64(3 * len(one))
	const sent = 8 // files 0 and 1 take three each, file 2 the last two
	writeAll(t, path, maxBytes, sent, distinct)

	older, newer := readLines(t, path+".1"), readLines(t, path)
	require.NotEmpty(t, older)
	require.NotEmpty(t, newer)
	require.Equal(t, trace.KindHeader, older[0].Kind)
	require.Equal(t, trace.KindHeader, newer[0].Kind)
	assert.Equal(t, older[0].Header.File+1, newer[0].Header.File, "the files count on")
	assert.EqualValues(t, 2, newer[0].Header.File)
	assert.Len(t, newer, 3)

	// Each file holds consecutive orders; the newest file ends at the
	// last, and the two files join without a gap.
	var orders []uint64
	for _, l := range append(older[1:], newer[1:]...) {
		require.Equal(t, trace.KindDecision, l.Kind)
		orders = append(orders, l.Order)
	}
	require.Equal(t, uint64(sent), orders[len(orders)-1])
	for i := 1; i < len(orders); i++ {
		assert.Equal(t, orders[i-1]+1, orders[i], "no line lost across a rotation: %v", orders)
	}
	info, err := os.Stat(path + ".1")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, info.Size(), maxBytes, "a file rotates only once it reached MaxBytes")
}

// A decision line names in "same" only parts of its own file's lines:
// each file's first decision is whole, the ones after it leave out what
// repeats, and the files read back as every line that was sent.
func TestSameNamesOnlyItsOwnFilesLines(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	one, err := json.Marshal(decision(1))
	require.NoError(t, err)
	const sent = 40
	writeAll(t, path, int64(8*len(one)), sent, decision)
	for _, p := range []string{path + ".1", path} {
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
		require.Greater(t, len(lines), 2, p)
		assert.NotContains(t, lines[1], `"same"`, "%s: the file's first decision is whole", p)
		for _, l := range lines[2:] {
			assert.Contains(t, l, `"same":7`, p)
			assert.NotContains(t, l, `"target"`, p)
		}
	}
	got := readRecording(t, path, path+".1")
	// The rotation keeps one older file: the lines from its first on.
	require.NotEmpty(t, got)
	first := got[0].Order
	require.Len(t, got, sent-int(first)+1)
	for i, l := range got {
		assert.Equal(t, decision(first+uint64(i)), l)
	}
}

func TestWriterRotationKeepsEveryLine(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	one, err := json.Marshal(distinct(1))
	require.NoError(t, err)
	// Exactly one rotation: the first file takes 30 lines (its header is
	// shorter than a line), the second the last 10.
	const sent = 40
	writeAll(t, path, int64(30*len(one)), sent, distinct)
	older, newer := readLines(t, path+".1"), readLines(t, path)
	assert.EqualValues(t, 0, older[0].Header.File)
	assert.EqualValues(t, 1, newer[0].Header.File)
	assert.Len(t, older, 31)
	assert.Equal(t, sent+2, len(older)+len(newer), "every line and two headers")
	var next uint64 = 1
	for _, l := range append(older[1:], newer[1:]...) {
		assert.Equal(t, next, l.Order)
		next++
	}
}

func TestWriterRefusesBadConfig(t *testing.T) {
	_, err := trace.NewWriter(trace.WriterConfig{})
	assert.Error(t, err)
	_, err = trace.NewWriter(trace.WriterConfig{Path: filepath.Join(t.TempDir(), "x"), MaxBytes: -1})
	assert.Error(t, err)
	_, err = trace.NewWriter(trace.WriterConfig{Path: filepath.Join(t.TempDir(), "missing", "x")})
	assert.Error(t, err)
}

// TestWriterRecyclesOwnersOnceWritten reuses each line's parts as soon as
// Recycle hands them back, as the recorder does: every line in the file
// is still the one that was added (a part handed back before its line
// was encoded would be overwritten by a later line), every owner comes
// back once, and a line Add refuses is not handed back. Recycle
// overwrites each part at once, as its next line would.
func TestWriterRecyclesOwnersOnceWritten(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	type parts struct{ d trace.Decision }
	free := make(chan *parts, 5001) // room for every owner: Recycle never waits
	var back []uint64
	w, err := trace.NewWriter(trace.WriterConfig{Path: path, Recycle: func(owner any) {
		p := owner.(*parts)
		back = append(back, p.d.LoadSequence)
		p.d = trace.Decision{Answer: "reused"} // as a next line would
		free <- p
	}})
	require.NoError(t, err)
	const n = 5000
	for i := uint64(1); i <= n; i++ {
		var p *parts
		select {
		case p = <-free:
		default:
			p = new(parts)
		}
		l := decision(i)
		p.d = *l.Decision
		p.d.LoadSequence = i
		l.Decision, l.Owner = &p.d, p
		require.True(t, w.AddWait(l))
	}
	require.NoError(t, w.Close())
	refused := &parts{}
	l := decision(n + 1)
	l.Owner = refused
	require.False(t, w.Add(l), "closed")
	lines := readLines(t, path)
	require.Len(t, lines, n+1)
	for i, l := range lines[1:] {
		require.Equal(t, uint64(i+1), l.Order)
		require.Equal(t, uint64(i+1), l.Decision.LoadSequence, "line %d was overwritten before it was written", i+1)
	}
	require.Len(t, back, n, "each owner handed back once")
	for i, seq := range back {
		require.Equal(t, uint64(i+1), seq)
	}
}

// TestWriterKeepsOrderAroundItsRing adds far more lines than a small
// queue (three lines, so its ring wraps on every few lines and the
// writer frees fewer than releaseEvery at a time), each waiting for
// room: every line is written once, in the order added, and the queue
// ends empty.
func TestWriterKeepsOrderAroundItsRing(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	w, err := trace.NewWriter(trace.WriterConfig{Path: path, Buffer: 3})
	require.NoError(t, err)
	const n = 1000
	for i := uint64(1); i <= n; i++ {
		require.True(t, w.AddWait(decision(i)))
	}
	require.NoError(t, w.Close())
	assert.EqualValues(t, n, w.Written())
	assert.Zero(t, w.Dropped())
	assert.Zero(t, w.QueuedBytes())
	lines := readLines(t, path)
	require.Len(t, lines, n+1)
	for i, l := range lines[1:] {
		require.Equal(t, uint64(i+1), l.Order)
	}
}

// TestWriterTakesLinesFromManyGoroutines has eight goroutines add lines
// at once through a small queue (sixteen lines), each waiting for room:
// every line is written once, and each goroutine's lines reach the file
// in the order it added them.
func TestWriterTakesLinesFromManyGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	w, err := trace.NewWriter(trace.WriterConfig{Path: path, Buffer: 16})
	require.NoError(t, err)
	const adders, each = 8, 500
	var wg sync.WaitGroup
	for a := range adders {
		wg.Go(func() {
			for i := range each {
				// Order a*each+i+1: the adder is (order-1)/each.
				if !w.AddWait(decision(uint64(a*each + i + 1))) {
					t.Errorf("adder %d: line %d refused", a, i)
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, w.Close())
	assert.EqualValues(t, adders*each, w.Written())
	assert.Zero(t, w.Dropped())
	lines := readLines(t, path)
	require.Len(t, lines, adders*each+1)
	var last [adders]uint64
	for _, l := range lines[1:] {
		a := (l.Order - 1) / each
		require.Greater(t, l.Order, last[a], "adder %d's lines out of order", a)
		last[a] = l.Order
	}
	for a, o := range last {
		assert.EqualValues(t, (a+1)*each, o, "adder %d's last line", a)
	}
}

// TestWriterAddMoveWritesWhatAddWrites queues moves by value through a
// small queue that wraps many times, into slots that held decisions:
// each line is the one Add writes for the same move (the move kept in
// its slot, never a stale one), and AddMove after Close is refused.
func TestWriterAddMoveWritesWhatAddWrites(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	byValue, byAdd := filepath.Join(dir, "value.jsonl"), filepath.Join(dir, "add.jsonl")
	wv, err := trace.NewWriter(trace.WriterConfig{Path: byValue, Buffer: 3})
	require.NoError(t, err)
	wa, err := trace.NewWriter(trace.WriterConfig{Path: byAdd})
	require.NoError(t, err)
	const n = 500
	for i := uint64(1); i <= n; i++ {
		// An empty queue takes the line: nothing is dropped.
		for wv.QueuedBytes() != 0 {
			runtime.Gosched()
		}
		if i%3 == 0 {
			require.True(t, wv.Add(decision(i)))
			require.True(t, wa.Add(decision(i)))
			continue
		}
		kind := trace.KindStart
		if i%2 == 0 {
			kind = trace.KindRelease
		}
		m := trace.Move{Of: i - 1, ElapsedNS: int64(i) * 7, Refused: i%5 == 0, Reclaimed: i%7 == 0}
		require.True(t, wa.Add(trace.Line{Kind: kind, Order: i, T: int64(i), Move: &trace.Move{Of: m.Of, ElapsedNS: m.ElapsedNS, Refused: m.Refused, Reclaimed: m.Reclaimed}}))
		require.True(t, wv.AddMove(kind, i, int64(i), m))
	}
	require.NoError(t, wv.Close())
	require.NoError(t, wa.Close())
	require.False(t, wv.AddMove(trace.KindStart, n+1, 1, trace.Move{Of: 1}), "closed")
	got, err := os.ReadFile(byValue)
	require.NoError(t, err)
	want, err := os.ReadFile(byAdd)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	assert.Len(t, readLines(t, byValue), n+1)
}
