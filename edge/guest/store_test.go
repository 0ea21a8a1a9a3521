package guest_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"latent.dev/admission/edge/guest"
)

func TestParseDigest(t *testing.T) {
	good := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	d, err := guest.ParseDigest(good)
	if err != nil || d.String() != good || d.Hex() != good[len("sha256:"):] {
		t.Fatalf("ParseDigest(%q) = %v, %v", good, d, err)
	}
	for name, s := range map[string]string{
		"empty":             "",
		"no prefix":         strings.Repeat("ab", 32),
		"other algorithm":   "sha512:" + strings.Repeat("ab", 32),
		"short":             "sha256:9f2c41d0",
		"long":              good + "0",
		"uppercase hex":     "sha256:" + strings.Repeat("AB", 32),
		"not hex":           "sha256:" + strings.Repeat("zz", 32),
		"path separator":    "sha256:" + strings.Repeat("ab", 31) + "/a",
		"prefix in capital": "SHA256:" + strings.Repeat("ab", 32),
	} {
		t.Run(name+" is refused", func(t *testing.T) {
			if _, err := guest.ParseDigest(s); !errors.Is(err, guest.ErrBadDigest) {
				t.Fatalf("ParseDigest(%q): %v", s, err)
			}
		})
	}
}

func openStore(t *testing.T, max int64) (*guest.Store, string) {
	t.Helper()
	root := t.TempDir()
	s, err := guest.OpenStore(root, max)
	if err != nil {
		t.Fatal(err)
	}
	return s, root
}

func TestStorePutThenLoadRoundTrips(t *testing.T) {
	s, root := openStore(t, 1<<20)
	body := []byte("\x00asm\x01\x00\x00\x00 not really, but bytes")
	d := guest.DigestOf(body)
	if err := s.Put(d, bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(root, "sha256", d.Hex()+".wasm")
	if s.Path(d) != want {
		t.Fatalf("path %s, want %s", s.Path(d), want)
	}
	got, err := s.Load(d)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("Load: %q, %v", got, err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "sha256"))
	if len(entries) != 1 {
		t.Fatalf("store holds %d files, want only the artifact", len(entries))
	}
}

func TestStorePutRefusesAndPublishesNothing(t *testing.T) {
	body := []byte("artifact body")
	d := guest.DigestOf(body)
	for _, tc := range []struct {
		name string
		r    io.Reader
		want error
	}{
		{"a body that does not hash to the digest", strings.NewReader("another body"), guest.ErrDigestMismatch},
		{"a body over the size limit", bytes.NewReader(bytes.Repeat([]byte("x"), 65)), guest.ErrArtifactTooLarge},
		{"a body whose reader fails", io.MultiReader(bytes.NewReader(body[:4]), failingReader{}), guest.ErrArtifactIO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, root := openStore(t, 64)
			err := s.Put(d, tc.r)
			var ae *guest.ArtifactError
			if !errors.Is(err, tc.want) || !errors.As(err, &ae) || ae.Digest != d {
				t.Fatalf("Put: %v", err)
			}
			if !strings.Contains(err.Error(), d.String()) {
				t.Fatalf("error %q does not name the digest", err)
			}
			entries, _ := os.ReadDir(filepath.Join(root, "sha256"))
			if len(entries) != 0 {
				t.Fatalf("a refused Put left %d files", len(entries))
			}
			if _, err := s.Load(d); !errors.Is(err, guest.ErrArtifactNotFound) {
				t.Fatalf("Load after a refused Put: %v", err)
			}
		})
	}
}

func TestStorePutReadsNoMoreThanTheLimitPlusOne(t *testing.T) {
	s, _ := openStore(t, 64)
	r := &countingReader{}
	if err := s.Put(guest.DigestOf(nil), r); !errors.Is(err, guest.ErrArtifactTooLarge) {
		t.Fatalf("Put: %v", err)
	}
	if r.n != 65 {
		t.Fatalf("read %d bytes of an endless body, want 65", r.n)
	}
}

func TestStoreLoadRefuses(t *testing.T) {
	body := []byte("artifact body")
	d := guest.DigestOf(body)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, file string)
		want  error
	}{
		{"a missing file", func(*testing.T, string) {}, guest.ErrArtifactNotFound},
		{"a file damaged on disk", func(t *testing.T, file string) { write(t, file, []byte("artifact bodY")) }, guest.ErrDigestMismatch},
		{"a file grown past the limit", func(t *testing.T, file string) { write(t, file, bytes.Repeat([]byte("x"), 65)) }, guest.ErrArtifactTooLarge},
		{"a directory in the file's place", func(t *testing.T, file string) {
			if err := os.Mkdir(file, 0o755); err != nil {
				t.Fatal(err)
			}
		}, guest.ErrArtifactNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := openStore(t, 64)
			tc.setup(t, s.Path(d))
			_, err := s.Load(d)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Load: %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), d.String()) || !strings.Contains(err.Error(), s.Path(d)) {
				t.Fatalf("error %q does not name the digest and the file", err)
			}
		})
	}
}

func TestOpenStoreRemovesInterruptedPuts(t *testing.T) {
	root := t.TempDir()
	if _, err := guest.OpenStore(root, 0); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(root, "sha256", ".put-abc-123")
	write(t, leftover, []byte("partial"))
	s, err := guest.OpenStore(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatalf("leftover temporary file still there: %v", err)
	}
	if s.MaxBytes() != guest.DefaultMaxArtifactBytes {
		t.Fatalf("default limit %d", s.MaxBytes())
	}
}

func write(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// countingReader is an endless body that counts what was read from it.
type countingReader struct{ n int }

func (r *countingReader) Read(p []byte) (int, error) {
	r.n += len(p)
	return len(p), nil
}
