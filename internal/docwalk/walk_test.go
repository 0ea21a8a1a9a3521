package docwalk

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// hop is one row of the walk.
type hop struct {
	line     int    // in docs/README.md
	n        int    // its number
	from     int    // the caller's number; 0 for a call from outside the repository
	file     string // relative to the root, slash-separated
	function string // Name, or Receiver.Name
}

var (
	rowRE   = regexp.MustCompile("^\\| (\\d+) \\| (\\d+|—) \\| `([^`]+)` \\| `([^`]+)` \\|")
	filesRE = regexp.MustCompile(`\*\*(\d+) distinct files\*\*`)
	crossRE = regexp.MustCompile(`\*\*(\d+) call\s+sites\*\*`)
)

// readWalk reads the walk's table and the page's stated counts.
func readWalk(t *testing.T) (hops []hop, files, crossings int) {
	t.Helper()
	name := filepath.Join(root, "docs", "README.md")
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "## One invocation, end to end")
	if start < 0 {
		t.Fatalf("%s: no section \"One invocation, end to end\"", name)
	}
	section := text[start:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	before := strings.Count(text[:start], "\n")
	sc := bufio.NewScanner(strings.NewReader(section))
	for i := 1; sc.Scan(); i++ {
		m := rowRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		h := hop{line: before + i, file: m[3], function: m[4]}
		h.n, _ = strconv.Atoi(m[1])
		if m[2] != "—" {
			h.from, _ = strconv.Atoi(m[2])
		}
		hops = append(hops, h)
	}
	m := filesRE.FindStringSubmatch(section)
	if m == nil {
		t.Fatalf("%s: the walk does not state its count of distinct files (**N distinct files**)", name)
	}
	files, _ = strconv.Atoi(m[1])
	m = crossRE.FindStringSubmatch(section)
	if m == nil {
		t.Fatalf("%s: the walk does not state its package crossings (**N call sites**)", name)
	}
	crossings, _ = strconv.Atoi(m[1])
	return hops, files, crossings
}

// declared reports the functions file declares, as Name or Receiver.Name.
func declared(t *testing.T, file string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, filepath.FromSlash(file)), nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("docs/README.md names %s: %v", file, err)
	}
	out := map[string]bool{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			if recv := receiverName(fd.Recv.List[0].Type); recv != "" {
				name = recv + "." + name
			}
		}
		out[name] = true
	}
	return out
}

// receiverName is the type name of a receiver: T, *T, T[P] or *T[P].
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// TestTheWalkIsTrueToTheTree holds every hop of docs/README.md's walk to
// a real function in a real file, every caller to an earlier hop, and
// the page's counts to the table.
func TestTheWalkIsTrueToTheTree(t *testing.T) {
	hops, wantFiles, wantCrossings := readWalk(t)
	if len(hops) == 0 {
		t.Fatal("docs/README.md: the walk has no rows")
	}
	byNumber := map[int]hop{}
	decls := map[string]map[string]bool{}
	crossings := 0
	for i, h := range hops {
		if h.n != i+1 {
			t.Errorf("docs/README.md:%d: hop %d should be numbered %d", h.line, h.n, i+1)
		}
		if h.from != 0 {
			caller, ok := byNumber[h.from]
			if !ok {
				t.Errorf("docs/README.md:%d: hop %d is called from %d, which is not an earlier hop", h.line, h.n, h.from)
			} else if path.Dir(caller.file) != path.Dir(h.file) {
				crossings++
			}
		}
		byNumber[h.n] = h
		if decls[h.file] == nil {
			decls[h.file] = declared(t, h.file)
		}
		if !decls[h.file][h.function] {
			t.Errorf("docs/README.md:%d: hop %d: %s declares no function %s", h.line, h.n, h.file, h.function)
		}
	}
	if len(decls) != wantFiles {
		t.Errorf("docs/README.md: the walk names %d distinct files, the page says %d", len(decls), wantFiles)
	}
	if crossings != wantCrossings {
		t.Errorf("docs/README.md: the walk crosses packages at %d call sites, the page says %d", crossings, wantCrossings)
	}
	t.Logf("%d hops, %d distinct files, %d package crossings", len(hops), len(decls), crossings)
}

// The recording's tools are split by concern: no non-test file of
// internal/shadow or internal/trace is over 400 lines (docs/operations.md,
// the layout).
func TestRecordingToolsFilesStayShort(t *testing.T) {
	const limit = 400
	for _, dir := range []string{"internal/shadow", "internal/trace"} {
		names, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil || len(names) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(data), "\n"); n > limit {
				t.Errorf("%s: %d lines, over %d: split it by concern", name, n, limit)
			}
		}
	}
}
