package guest

import (
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// DefaultMaxArtifactBytes is the store's artifact size limit when
// OpenStore is given none: 64 MiB, well above a Go guest (a few MiB).
const DefaultMaxArtifactBytes = 64 << 20

// tempPrefix marks a Put in progress; OpenStore removes leftovers of
// interrupted ones. A name with it never ends in ".wasm", so no reader
// can take a partial file for an artifact.
const tempPrefix = ".put-"

// Store is the node's artifact directory: ROOT/sha256/<hex>.wasm, one
// file per digest, written only by Put, which publishes a file by
// renaming it into place after it was verified and synced. A Store is
// immutable and safe for concurrent use; two Puts of one digest both
// write the same bytes, and the later rename wins.
type Store struct {
	dir      string // ROOT/sha256
	maxBytes int64
}

// OpenStore opens (creating it if needed) the artifact store rooted at
// root. maxBytes bounds every artifact; zero or less means
// DefaultMaxArtifactBytes. Temporary files of interrupted Puts are
// removed.
func OpenStore(root string, maxBytes int64) (*Store, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxArtifactBytes
	}
	dir := filepath.Join(root, "sha256")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	leftovers, err := filepath.Glob(filepath.Join(dir, tempPrefix+"*"))
	if err != nil {
		return nil, err
	}
	for _, name := range leftovers {
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return &Store{dir: dir, maxBytes: maxBytes}, nil
}

// MaxBytes is the store's artifact size limit.
func (s *Store) MaxBytes() int64 { return s.maxBytes }

// Path is where the artifact of d lives (or would live).
func (s *Store) Path(d Digest) string { return filepath.Join(s.dir, d.Hex()+".wasm") }

// Put reads an artifact from r, hashing it as it streams into a temporary
// file, and publishes it as d's file only if it hashes to d and is within
// the size limit: never more than MaxBytes+1 bytes are read. The file is
// synced before the rename and the directory after it, so a published
// artifact survives a crash. On any error nothing is published.
func (s *Store) Put(d Digest, r io.Reader) error {
	final := s.Path(d)
	tmp, err := os.CreateTemp(s.dir, tempPrefix+d.Hex()+"-*")
	if err != nil {
		return &ArtifactError{Digest: d, File: final, Err: ErrArtifactIO, Cause: err}
	}
	published := false
	defer func() {
		if !published {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, s.maxBytes+1))
	switch {
	case err != nil:
		return &ArtifactError{Digest: d, File: final, Err: ErrArtifactIO, Cause: err}
	case n > s.maxBytes:
		return &ArtifactError{Digest: d, File: final, Err: ErrArtifactTooLarge}
	case Digest(h.Sum(nil)) != d:
		return &ArtifactError{Digest: d, File: final, Err: ErrDigestMismatch}
	}
	if err := tmp.Sync(); err != nil {
		return &ArtifactError{Digest: d, File: final, Err: ErrArtifactIO, Cause: err}
	}
	if err := tmp.Close(); err != nil {
		return &ArtifactError{Digest: d, File: final, Err: ErrArtifactIO, Cause: err}
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return &ArtifactError{Digest: d, File: final, Err: ErrArtifactIO, Cause: err}
	}
	published = true
	if err := syncDir(s.dir); err != nil {
		return &ArtifactError{Digest: d, File: final, Err: ErrArtifactIO, Cause: err}
	}
	return nil
}

// Load reads d's artifact and verifies it hashes to d: a file damaged on
// disk, or replaced by hand, is refused before anything compiles it.
func (s *Store) Load(d Digest) ([]byte, error) {
	name := s.Path(d)
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &ArtifactError{Digest: d, File: name, Err: ErrArtifactNotFound}
	}
	if err != nil {
		return nil, &ArtifactError{Digest: d, File: name, Err: ErrArtifactIO, Cause: err}
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, &ArtifactError{Digest: d, File: name, Err: ErrArtifactIO, Cause: err}
	}
	if !info.Mode().IsRegular() {
		return nil, &ArtifactError{Digest: d, File: name, Err: ErrArtifactNotFound}
	}
	if info.Size() > s.maxBytes {
		return nil, &ArtifactError{Digest: d, File: name, Err: ErrArtifactTooLarge}
	}
	// The size can change under us; read no more than the limit allows.
	b, err := io.ReadAll(io.LimitReader(f, s.maxBytes+1))
	switch {
	case err != nil:
		return nil, &ArtifactError{Digest: d, File: name, Err: ErrArtifactIO, Cause: err}
	case int64(len(b)) > s.maxBytes:
		return nil, &ArtifactError{Digest: d, File: name, Err: ErrArtifactTooLarge}
	case DigestOf(b) != d:
		return nil, &ArtifactError{Digest: d, File: name, Err: ErrDigestMismatch}
	}
	return b, nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
