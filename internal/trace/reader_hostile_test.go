package trace

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReaderNeverAllocatesByAFileIndex(t *testing.T) {
	// Files 0 and 2^62, and a lone file 10^12: the missing indexes are
	// ranges, not one entry each.
	a := writeTrace(t, "a.jsonl", header(0), release(1))
	b := writeTrace(t, "b.jsonl", header(1<<62), release(2))
	r, err := Open([]string{b, a}, 0)
	require.NoError(t, err)
	assert.Equal(t, []uint64{1, 2}, readAll(t, r))
	require.NoError(t, r.Close())
	assert.Equal(t, []FileRange{{1, 1<<62 - 1}}, r.Stats().Gaps)
	assert.Equal(t, []string{"trace files missing (file index 1 to 4611686018427387903)"}, r.Stats().Inexact())

	// A rotated recording whose oldest files are gone still replays.
	c := writeTrace(t, "c.jsonl", header(1e12), release(7), release(8))
	r, err = Open([]string{c}, 0)
	require.NoError(t, err)
	assert.Equal(t, []uint64{7, 8}, readAll(t, r))
	require.NoError(t, r.Close())
	assert.Equal(t, []FileRange{{0, 1e12 - 1}}, r.Stats().Gaps)
}

func TestReaderBoundsItsWindowInBytes(t *testing.T) {
	// Order 1 never comes: the reader holds lines until a bound is
	// reached. Each line is about 10 KB; the window's bytes allow ten.
	pad := strings.Repeat(" ", 10<<10)
	lines := []string{header(0)}
	for o := uint64(2); o < 60; o++ {
		lines = append(lines, `{"k":"release","order":`+jsonNum(o)+`,"t":5,"of":1,"elapsed_ns":5`+pad+`}`)
	}
	p := writeTrace(t, "a.jsonl", lines...)
	r, err := Open([]string{p}, 0)
	require.NoError(t, err)
	defer r.Close()
	r.maxHeld = 100 << 10
	l, err := r.Next()
	require.NoError(t, err)
	assert.EqualValues(t, 2, l.Order)
	assert.LessOrEqual(t, r.pending.len(), 11, "the window stops at its bytes, not at its 65,536 lines")
	assert.LessOrEqual(t, r.held, int64(100<<10))
	got := readAll(t, r)
	assert.Len(t, got, 57)
}

func TestReaderTakesATornLastLineAsTheEnd(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "trace.jsonl")
	torn := release(3)
	require.NoError(t, os.WriteFile(p, []byte(header(0)+"\n"+release(1)+"\n"+release(2)+"\n"+torn[:len(torn)/2]), 0o600))
	r, err := Open([]string{p}, 0)
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, []uint64{1, 2}, readAll(t, r))
	assert.Equal(t, []Position{{File: p, Line: 4}}, r.Stats().Torn)
	assert.Equal(t, []string{"the recording ends in a torn line (" + p + ":4)"}, r.Stats().Inexact())

	// A last line without its newline that decodes is a line.
	require.NoError(t, os.WriteFile(p, []byte(header(0)+"\n"+release(1)+"\n"+release(2)), 0o600))
	r2, err := Open([]string{p}, 0)
	require.NoError(t, err)
	defer r2.Close()
	assert.Equal(t, []uint64{1, 2}, readAll(t, r2))
	assert.Empty(t, r2.Stats().Inexact())

	// A bad line that ends in a newline is still refused.
	require.NoError(t, os.WriteFile(p, []byte(header(0)+"\n"+torn[:len(torn)/2]+"\n"+release(2)+"\n"), 0o600))
	r3, err := Open([]string{p}, 0)
	require.NoError(t, err)
	defer r3.Close()
	_, err = r3.Next()
	require.Error(t, err)
	assert.Contains(t, err.Error(), p+":2: not a trace line")
}

func catalogPart(order uint64, gen uint64, data string, part, parts uint32) string {
	l := Line{Kind: KindCatalog, Order: order, Catalog: &Catalog{Generation: gen, File: []byte(data), Part: part, Parts: parts}}
	b, _ := json.Marshal(l)
	return string(b)
}

func deployPart(order uint64, gen uint64, data string, part, parts uint32) string {
	l := Line{Kind: KindDeploy, Order: order, Change: &Change{Generation: gen, Deployment: []byte(data), DeploymentPart: part, DeploymentParts: parts}}
	b, _ := json.Marshal(l)
	return string(b)
}

func TestReaderPutsPartsTogether(t *testing.T) {
	p := writeTrace(t, "a.jsonl", header(0),
		catalogPart(1, 3, "abc", 0, 3), release(2), catalogPart(4, 3, "ghi", 2, 3), catalogPart(3, 3, "def", 1, 3),
		deployPart(5, 4, "12", 0, 2), deployPart(6, 4, "34", 1, 2),
		// Lost: part 1 of 3 never comes.
		deployPart(7, 5, "xx", 0, 3), deployPart(8, 5, "zz", 2, 3),
		// An orphan part, and a whole line after.
		deployPart(9, 6, "yy", 1, 2), release(10))
	r, err := Open([]string{p}, 0)
	require.NoError(t, err)
	defer r.Close()
	var got []string
	for {
		l, err := r.Next()
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
		switch l.Kind {
		case KindCatalog:
			got = append(got, fmt.Sprintf("catalog %d %s %d/%d", l.Order, l.Catalog.File, l.Catalog.Part, l.Catalog.Parts))
		case KindDeploy:
			got = append(got, fmt.Sprintf("deploy %d %s %d/%d", l.Order, l.Change.Deployment, l.Change.DeploymentPart, l.Change.DeploymentParts))
		default:
			got = append(got, fmt.Sprintf("%s %d", l.Kind, l.Order))
		}
	}
	assert.Equal(t, []string{"release 2", "catalog 4 abcdefghi 0/0", "deploy 6 1234 0/0", "release 10"}, got)
	assert.EqualValues(t, 3, r.Stats().LostParts)
	assert.Equal(t, []string{"3 parts of a catalog or deployment came without their other parts"}, r.Stats().Inexact())
}

func TestSplitCutsAtPartBytes(t *testing.T) {
	assert.Equal(t, [][]byte{{}}, Split([]byte{}))
	data := make([]byte, 2*PartBytes+5)
	parts := Split(data)
	require.Len(t, parts, 3)
	assert.Len(t, parts[0], PartBytes)
	assert.Len(t, parts[2], 5)
	// The longest line a part makes fits the reader's limit.
	l := Line{Kind: KindCatalog, Order: 1<<64 - 1, T: -1 << 63, Catalog: &Catalog{Generation: 1<<64 - 1, File: parts[0], Part: 1<<32 - 2, Parts: 1<<32 - 1}}
	b, err := json.Marshal(l)
	require.NoError(t, err)
	assert.Less(t, len(b), MaxLineBytes)
}

func TestAPartOutOfRangeIsRefused(t *testing.T) {
	var l Line
	err := DecodeLine([]byte(catalogPart(1, 1, "a", 3, 3)), &l)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "catalog_part 3 is not below catalog_parts 3")
}

func TestReaderSkipsAFileWithoutAWholeHeader(t *testing.T) {
	a := writeTrace(t, "a.jsonl", header(0), release(1), release(2))
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.jsonl")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	h := header(1)
	torn := filepath.Join(dir, "torn.jsonl")
	require.NoError(t, os.WriteFile(torn, []byte(h[:len(h)/2]), 0o600))
	r, err := Open([]string{empty, a, torn}, 0)
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, []uint64{1, 2}, readAll(t, r))
	assert.Equal(t, []Position{{File: empty, Line: 1}, {File: torn, Line: 1}}, r.Stats().Torn)
	assert.Len(t, r.Stats().Inexact(), 2)

	_, err = Open([]string{empty}, 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), empty+":1: empty file: no header")
	// A whole bad header is still refused.
	bad := writeTrace(t, "bad.jsonl", `{"k":"header","version":3,"start_unix_ns":1,"file":0,"policy_sha256":""}`)
	_, err = Open([]string{bad, a}, 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "version 3")
}
