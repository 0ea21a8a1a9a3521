package catalog

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"latent.dev/admission/internal/strictjson"
)

// Catalog holds the deployments of a node. Deploy, Delete and Apply
// serialize on a mutex and publish a new immutable [Pin] last;
// [Catalog.Pin] reads the current one with one atomic load, so taking a
// pin neither locks nor copies. A Catalog must not be copied after first
// use.
//
// A catalog made by [New] lives in memory only; one made by [Create] or
// [Open] appends every change to its store before the change becomes
// visible, and holds the store directory's lock until [Catalog.Close].
type Catalog struct {
	capacity Capacity
	store    *store // nil for an in-memory catalog

	mu sync.Mutex
	// issued is the highest generation ever handed to a change, guarded by
	// mu. A change whose store write failed keeps its generation issued: the
	// write may have reached the disk, so the number is never handed out
	// again by this process.
	issued uint64
	// persisted is the issued value the store last recorded in a write
	// that succeeded, guarded by mu; below issued after a failed write.
	persisted uint64
	// closed is set by Close, guarded by mu.
	closed bool
	// current is written under mu and read without it.
	current atomic.Pointer[Pin]
}

// Changes is what one [Catalog.Apply] makes at one generation: the
// deployments to deploy, each replacing any earlier deployment of its
// (tenant, service) pair, and the pairs to delete. A pair appears at most
// once in all.
type Changes struct {
	Deploy []Deployment
	Delete []DeploymentKey
}

// New returns an empty in-memory catalog at generation 0.
func New(capacity Capacity) *Catalog {
	return newCatalog(capacity, nil, emptyPin(0))
}

// FromFile returns an in-memory catalog with the capacity of f and its
// deployments deployed one by one in file order (the first at generation
// 1, the next at 2, ...).
func FromFile(f File) (*Catalog, error) {
	c := New(f.Capacity)
	for i := range f.Deployments {
		if _, err := c.Deploy(f.Deployments[i]); err != nil {
			return nil, fmt.Errorf("deployments[%d]: %w", i, err)
		}
	}
	return c, nil
}

func newCatalog(capacity Capacity, s *store, pin *Pin) *Catalog {
	c := &Catalog{capacity: capacity, store: s, issued: pin.generation}
	c.current.Store(pin)
	return c
}

func emptyPin(generation uint64) *Pin {
	return &Pin{generation: generation, index: emptyIndex()}
}

// Capacity is the catalog's configured capacity.
func (c *Catalog) Capacity() Capacity { return c.capacity }

// Pin returns the current immutable view. It is cheap: one atomic load.
func (c *Catalog) Pin() *Pin { return c.current.Load() }

// Generation is the generation of the current view.
func (c *Catalog) Generation() uint64 { return c.Pin().generation }

// change is one staged deploy or delete: dep is the new deployment (nil
// for a delete) and old the one it replaces or removes (nil for a new
// pair).
type change struct {
	key DeploymentKey
	dep *deployment
	old *deployment
}

// Deploy validates d and makes it the deployment of (d.Tenant, d.Service),
// replacing any earlier one, at a new generation that it returns. An
// invalid deployment ([ErrInvalidDeployment]), one that would exceed the
// capacity ([ErrCapacityExceeded]) or a failed store write (*[StoreError])
// changes nothing that pins can see; after [Catalog.Close] it returns
// [ErrClosed]. Pins taken before keep serving what they held.
func (c *Catalog) Deploy(d Deployment) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, ErrClosed
	}
	generation, err := c.nextGenerationLocked()
	if err != nil {
		return 0, err
	}
	dep, err := compileDeployment(&d, generation)
	if err != nil {
		return 0, err
	}
	cur := c.current.Load()
	changes := []change{{key: DeploymentKey{d.Tenant, d.Service}, dep: dep, old: cur.lookup(d.Tenant, d.Service)}}
	return generation, c.commitLocked(cur, changes, generation)
}

// Delete removes the deployment of (tenant, service) at a new generation
// that it returns, or returns [ErrNotDeployed] and consumes no generation.
// After [Catalog.Close] it returns [ErrClosed].
// Pins taken before keep serving the deleted deployment.
func (c *Catalog) Delete(tenant, service string) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, ErrClosed
	}
	cur := c.current.Load()
	old := cur.lookup(tenant, service)
	if old == nil {
		return 0, ErrNotDeployed
	}
	generation, err := c.nextGenerationLocked()
	if err != nil {
		return 0, err
	}
	return generation, c.commitLocked(cur, []change{{key: DeploymentKey{tenant, service}, old: old}}, generation)
}

// Apply makes every change of ch at one new generation, which it returns,
// with one store write: all of them or none. Every deployment is validated
// and every delete checked before anything is written; a deployment that
// breaks a rule ([ErrInvalidDeployment]), a delete of a pair that is not
// deployed ([ErrNotDeployed]), or a pair named twice ([ErrInvalidDeployment])
// fails the whole call with a [latent.dev/admission/problems.List] listing every problem
// by its path ("deploy[3].routes[0].route", "delete[1]"), and consumes no
// generation. A result over the capacity ([ErrCapacityExceeded]) or a
// failed store write (*[StoreError]) changes nothing that pins can see,
// as for Deploy. An Apply without changes changes nothing and returns the
// current generation. After [Catalog.Close] it returns [ErrClosed].
func (c *Catalog) Apply(ch Changes) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, ErrClosed
	}
	cur := c.current.Load()
	if len(ch.Deploy) == 0 && len(ch.Delete) == 0 {
		return cur.generation, nil
	}
	generation, err := c.nextGenerationLocked()
	if err != nil {
		return 0, err
	}
	changes, err := stageChanges(cur, &ch, generation)
	if err != nil {
		return 0, err
	}
	return generation, c.commitLocked(cur, changes, generation)
}

// stageChanges validates every change of ch against cur and compiles the
// deployments at generation; on any problem it returns them all and no
// change.
func stageChanges(cur *Pin, ch *Changes, generation uint64) ([]change, error) {
	var problems strictjson.Problems
	var missing, invalid bool
	first := make(map[DeploymentKey]string, len(ch.Deploy)+len(ch.Delete))
	once := func(key DeploymentKey, path string) {
		if earlier, dup := first[key]; dup {
			invalid = true
			problems = append(problems, strictjson.Problem{Path: path, Message: "changes the same deployment as " + earlier})
			return
		}
		first[key] = path
	}
	changes := make([]change, 0, len(ch.Deploy)+len(ch.Delete))
	for i := range ch.Deploy {
		d := &ch.Deploy[i]
		path := strictjson.Index("deploy", i)
		before := len(problems)
		dep := compileReporting(d, generation, path, &problems)
		if len(problems) > before {
			invalid = true
		}
		key := DeploymentKey{d.Tenant, d.Service}
		once(key, path)
		if dep != nil {
			changes = append(changes, change{key: key, dep: dep, old: cur.lookup(key.Tenant, key.Service)})
		}
	}
	for i, key := range ch.Delete {
		path := strictjson.Index("delete", i)
		once(key, path)
		old := cur.lookup(key.Tenant, key.Service)
		if old == nil {
			missing = true
			problems = append(problems, strictjson.Problem{Path: path, Message: "is not deployed"})
			continue
		}
		changes = append(changes, change{key: key, old: old})
	}
	switch {
	case invalid && missing:
		return nil, fmt.Errorf("%w: %w: %w", ErrInvalidDeployment, ErrNotDeployed, problems)
	case invalid:
		return nil, fmt.Errorf("%w: %w", ErrInvalidDeployment, problems)
	case missing:
		return nil, fmt.Errorf("%w: %w", ErrNotDeployed, problems)
	}
	return changes, nil
}

func (c *Catalog) nextGenerationLocked() (uint64, error) {
	if c.issued == math.MaxUint64 {
		return 0, ErrGenerationExhausted
	}
	return c.issued + 1, nil
}

// commitLocked builds the view that applies changes to cur at generation,
// checks it against the capacity, persists it (for a store-backed catalog)
// and then makes it current. The generation is issued before the write is
// attempted.
func (c *Catalog) commitLocked(cur *Pin, changes []change, generation uint64) error {
	next := cur.apply(changes, generation)
	if next.usage.Revisions > c.capacity.MaxRevisions || next.usage.PolicyBytes > c.capacity.MaxPolicyBytes {
		return fmt.Errorf("%w: the catalog would hold %d revisions in %d policy bytes; capacity is %d revisions in %d policy bytes",
			ErrCapacityExceeded, next.usage.Revisions, next.usage.PolicyBytes, c.capacity.MaxRevisions, c.capacity.MaxPolicyBytes)
	}
	issued := c.issued
	c.issued = generation
	var comp *compaction
	if c.store != nil {
		var err error
		if comp, err = c.store.commitLocked(c.capacity, next, changes, c.issued); err != nil {
			if isEncodeFailure(err) {
				c.issued = issued // nothing was written: the generation is not spent
			}
			return err
		}
		c.persisted = c.issued
	}
	c.current.Store(next)
	if comp != nil {
		go c.compact(comp)
	}
	return nil
}

// apply returns a new pin at generation with changes made: it shares every
// untouched deployment and every untouched part of the index with p, so
// its cost grows with the number of changes, not with the catalog.
func (p *Pin) apply(changes []change, generation uint64) *Pin {
	next := &Pin{generation: generation, index: p.index, usage: p.usage}
	edit := newEditToken()
	for i := range changes {
		ch := &changes[i]
		if ch.old != nil {
			next.usage.Revisions -= ch.old.usage.Revisions
			next.usage.PolicyBytes -= ch.old.usage.PolicyBytes
		}
		h := keyHash(ch.key.Tenant, ch.key.Service)
		if ch.dep == nil {
			next.index, _ = next.index.remove(h, ch.key.Tenant, ch.key.Service, edit)
			continue
		}
		next.index, _ = next.index.put(h, ch.dep, edit)
		next.usage.Revisions += ch.dep.usage.Revisions
		next.usage.PolicyBytes += ch.dep.usage.PolicyBytes
	}
	return next
}
