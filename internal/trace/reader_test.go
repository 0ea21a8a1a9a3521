package trace

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func header(file uint64) string {
	return `{"k":"header","version":1,"start_unix_ns":1000,"file":` + jsonNum(file) + `,"policy_sha256":"ab"}`
}

func jsonNum(v uint64) string { b, _ := json.Marshal(v); return string(b) }

func release(order uint64) string {
	return `{"k":"release","order":` + jsonNum(order) + `,"t":5,"of":1,"elapsed_ns":5}`
}

func writeTrace(t *testing.T, name string, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	return p
}

func readAll(t *testing.T, r *Reader) []uint64 {
	t.Helper()
	var orders []uint64
	for {
		l, err := r.Next()
		if err == io.EOF {
			return orders
		}
		require.NoError(t, err)
		orders = append(orders, l.Order)
	}
}

func TestReaderRestoresOrderWithinTheWindow(t *testing.T) {
	p := writeTrace(t, "a.jsonl", header(0), release(3), release(1), release(2), release(5), release(4))
	r, err := Open([]string{p}, 4)
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, []uint64{1, 2, 3, 4, 5}, readAll(t, r))
	assert.Empty(t, r.Stats().Inexact())
}

func TestReaderCountsLinesBeyondTheWindow(t *testing.T) {
	p := writeTrace(t, "a.jsonl", header(0), release(5), release(6), release(7), release(1), release(8))
	r, err := Open([]string{p}, 1)
	require.NoError(t, err)
	defer r.Close()
	// 6 and 7 follow the line handed out before them, so they go at
	// once; 1 arrives after them, beyond the window.
	assert.Equal(t, []uint64{5, 6, 7, 1, 8}, readAll(t, r))
	assert.Equal(t, uint64(1), r.Stats().Late)
	assert.Equal(t, []string{"1 lines arrived beyond the reorder window"}, r.Stats().Inexact())
}

func TestReaderSortsFilesByIndexAndReportsGaps(t *testing.T) {
	a := writeTrace(t, "z.jsonl", header(0), release(1), release(2))
	b := writeTrace(t, "a.jsonl", header(3), release(5))
	c := writeTrace(t, "m.jsonl", header(1), release(3), release(4))
	r, err := Open([]string{b, c, a}, 0)
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, []string{a, c, b}, r.Files())
	assert.Equal(t, []uint64{1, 2, 3, 4, 5}, readAll(t, r))
	assert.Equal(t, []FileRange{{2, 2}}, r.Stats().Gaps)
	assert.Equal(t, []string{"trace files missing (file index 2)"}, r.Stats().Inexact())
}

func TestReaderRefusesAnotherRecordingsFile(t *testing.T) {
	a := writeTrace(t, "a.jsonl", header(0))
	b := writeTrace(t, "b.jsonl", strings.Replace(header(1), "1000", "2000", 1))
	_, err := Open([]string{a, b}, 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), b+":1: start_unix_ns 2000")
}

func TestReaderNamesABadLine(t *testing.T) {
	for name, c := range map[string]struct{ line, want string }{
		"unknown key":    {`{"k":"release","order":2,"of":1,"elapsed_ns":5,"extra":1}`, `unknown field "extra"`},
		"two parts":      {`{"k":"release","order":2,"of":1,"elapsed_ns":5,"dropped_lines":3}`, `a "release" line with fields of a dropped line`},
		"wrong part":     {`{"k":"load","order":2,"of":1,"elapsed_ns":5}`, `a "load" line with the fields of a start or release line`},
		"unknown kind":   {`{"k":"nope","order":2}`, `unknown kind "nope"`},
		"not json":       {`{"k":"release",`, `not a trace line`},
		"trailing":       {release(2) + ` {}`, `more after the object`},
		"no order":       {`{"k":"release","of":1,"elapsed_ns":5}`, `without an order`},
		"second header":  {header(0), `a header after the first line`},
		"bare kind":      {`{"k":"decision","order":4}`, `a "decision" line without its fields`},
		"wrong type":     {`{"k":"release","order":"2","of":1,"elapsed_ns":5}`, `cannot unmarshal string`},
		"empty line":     {``, `empty line`},
		"bad header ver": {``, ``},
		"same, nothing before": {`{"k":"decision","order":2,"stage":"core","same":1,"priority":0,"payload_bytes":0,"answer":"admitted"}`,
			`"same" is 1: it names a part no decision line before it in this file had`},
		"same target, nothing before": {`{"k":"decision","order":2,"stage":"core","same":2,"priority":0,"budget":{"cpu_fuel":1,"memory_bytes":1},"payload_bytes":0,"answer":"admitted"}`,
			`"same" is 2: it names a part no decision line before it in this file had`},
		"same budget, nothing before": {`{"k":"decision","order":2,"stage":"core","same":4,"target":{"tenant":"a","service":"b","route":"c"},"priority":0,"payload_bytes":0,"answer":"admitted"}`,
			`"same" is 4: it names a part no decision line before it in this file had`},
		"same principal, and the part": {`{"k":"decision","order":2,"stage":"core","same":1,"principal":{"kind":"user","subject":"a","tenant":"t"},"target":{"tenant":"a","service":"b","route":"c"},"priority":0,"budget":{"cpu_fuel":1,"memory_bytes":1},"payload_bytes":0,"answer":"admitted"}`,
			`"same" is 1 and the line carries a part it names`},
		"same budget, and the part": {`{"k":"decision","order":2,"stage":"core","same":4,"target":{"tenant":"a","service":"b","route":"c"},"priority":0,"budget":{"cpu_fuel":1,"memory_bytes":1},"payload_bytes":0,"answer":"admitted"}`,
			`"same" is 4 and the line carries a part it names`},
		"same, unknown part": {`{"k":"decision","order":2,"stage":"core","same":8,"target":{"tenant":"a","service":"b","route":"c"},"priority":0,"budget":{"cpu_fuel":1,"memory_bytes":1},"payload_bytes":0,"answer":"admitted"}`,
			`"same" is 8: it names parts this reader does not know (it knows 7)`},
		"same, and the part": {`{"k":"decision","order":2,"stage":"core","same":2,"target":{"tenant":"a","service":"b","route":"c"},"priority":0,"budget":{"cpu_fuel":1,"memory_bytes":1},"payload_bytes":0,"answer":"admitted"}`,
			`"same" is 2 and the line carries a part it names`},
	} {
		t.Run(name, func(t *testing.T) {
			if name == "bad header ver" {
				for _, v := range []string{"0", "3"} {
					p := writeTrace(t, "a.jsonl", strings.Replace(header(0), `"version":1`, `"version":`+v, 1))
					_, err := Open([]string{p}, 0)
					require.Error(t, err)
					assert.Contains(t, err.Error(), p+":1: version "+v+", this reader reads versions 1 to 2")
				}
				return
			}
			p := writeTrace(t, "a.jsonl", header(0), release(1), c.line, release(3))
			r, err := Open([]string{p}, 0)
			require.NoError(t, err)
			defer r.Close()
			first, err := r.Next()
			require.NoError(t, err, "the line before the bad one")
			assert.Equal(t, uint64(1), first.Order)
			_, err = r.Next()
			require.Error(t, err)
			var le *LineError
			require.True(t, errors.As(err, &le))
			assert.Equal(t, 3, le.Line)
			assert.True(t, strings.HasPrefix(err.Error(), p+":3: "), err.Error())
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestReaderRefusesALongLine(t *testing.T) {
	long := `{"k":"release","order":2,"of":1,"elapsed_ns":5` + strings.Repeat(" ", MaxLineBytes) + `}`
	p := writeTrace(t, "a.jsonl", header(0), release(1), long)
	r, err := Open([]string{p}, 0)
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Next()
	require.NoError(t, err, "the line before the long one")
	_, err = r.Next()
	require.Error(t, err)
	assert.Contains(t, err.Error(), p+":3: line longer than 1048576 bytes")
}

func TestReaderKeepsSamplesAsTheyAreRead(t *testing.T) {
	load := func(order, seq uint64) string {
		return `{"k":"load","order":` + jsonNum(order) + `,"sequence":` + jsonNum(seq) + `,"observed_t":-3,"cpu_pressure":0.5,"memory_pressure":0.25,"queue_delay_ns":[1,2,3,4]}`
	}
	p := writeTrace(t, "a.jsonl", header(0), release(2), load(3, 7), `{"k":"dropped","order":4,"dropped_lines":9}`)
	r, err := Open([]string{p}, 8)
	require.NoError(t, err)
	defer r.Close()
	l, err := r.Next()
	require.NoError(t, err)
	assert.Equal(t, uint64(2), l.Order)
	s, ok := r.Sample(7) // read ahead, before the line of order 3 is handed out
	require.True(t, ok)
	assert.Equal(t, int64(-3), s.ObservedT)
	assert.Equal(t, []int64{1, 2, 3, 4}, s.QueueDelayNS)
	readAll(t, r)
	assert.Equal(t, []string{"9 lines dropped by the recorder"}, r.Stats().Inexact())
}

func TestReaderKeepsABoundedNumberOfSamples(t *testing.T) {
	r := &Reader{samples: map[uint64]Load{}}
	for i := uint64(1); i <= KeptSamples+10; i++ {
		r.keepSample(Load{Sequence: i})
	}
	assert.Len(t, r.samples, KeptSamples)
	_, ok := r.Sample(10)
	assert.False(t, ok)
	_, ok = r.Sample(11)
	assert.True(t, ok)
}
