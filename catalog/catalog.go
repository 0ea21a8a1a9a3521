package catalog

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// Catalog holds the deployments of a node. Deploy and Delete serialize on
// a mutex and publish a new immutable [Pin] last; [Catalog.Pin] reads the
// current one with one atomic load, so taking a pin neither locks nor
// copies. A Catalog must not be copied after first use.
//
// A catalog made by [New] lives in memory only; one made by [Create] or
// [Open] writes its whole state to its store directory after every change,
// before the change becomes visible, and holds the directory's lock until
// [Catalog.Close].
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
	return &Pin{generation: generation, deployments: map[DeploymentKey]*deployment{}}
}

// Capacity is the catalog's configured capacity.
func (c *Catalog) Capacity() Capacity { return c.capacity }

// Pin returns the current immutable view. It is cheap: one atomic load.
func (c *Catalog) Pin() *Pin { return c.current.Load() }

// Generation is the generation of the current view.
func (c *Catalog) Generation() uint64 { return c.Pin().generation }

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
	next := c.current.Load().with(dep, generation)
	if next.usage.Revisions > c.capacity.MaxRevisions || next.usage.PolicyBytes > c.capacity.MaxPolicyBytes {
		return 0, fmt.Errorf("%w: the catalog would hold %d revisions in %d policy bytes; capacity is %d revisions in %d policy bytes",
			ErrCapacityExceeded, next.usage.Revisions, next.usage.PolicyBytes, c.capacity.MaxRevisions, c.capacity.MaxPolicyBytes)
	}
	return generation, c.publishLocked(next)
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
	if _, ok := cur.deployments[DeploymentKey{tenant, service}]; !ok {
		return 0, ErrNotDeployed
	}
	generation, err := c.nextGenerationLocked()
	if err != nil {
		return 0, err
	}
	return generation, c.publishLocked(cur.without(DeploymentKey{tenant, service}, generation))
}

func (c *Catalog) nextGenerationLocked() (uint64, error) {
	if c.issued == math.MaxUint64 {
		return 0, ErrGenerationExhausted
	}
	return c.issued + 1, nil
}

// publishLocked persists next (for a store-backed catalog) and then makes
// it current. The generation is issued before the write is attempted.
func (c *Catalog) publishLocked(next *Pin) error {
	c.issued = next.generation
	if c.store != nil {
		if err := writeStore(c.store.fs, c.store.dir, c.capacity, next, c.issued); err != nil {
			return err
		}
		c.persisted = c.issued
	}
	c.current.Store(next)
	return nil
}

// with returns a new pin at generation that shares every deployment of p
// except the one dep replaces or adds: copy-on-write at the deployment
// level, so a change costs one map copy of pointers, never a deep copy.
func (p *Pin) with(dep *deployment, generation uint64) *Pin {
	key := DeploymentKey{dep.tenant, dep.service}
	next := &Pin{generation: generation, deployments: make(map[DeploymentKey]*deployment, len(p.deployments)+1), usage: p.usage}
	for k, v := range p.deployments {
		next.deployments[k] = v
	}
	if old, ok := p.deployments[key]; ok {
		next.usage.Revisions -= old.usage.Revisions
		next.usage.PolicyBytes -= old.usage.PolicyBytes
	}
	next.deployments[key] = dep
	next.usage.Revisions += dep.usage.Revisions
	next.usage.PolicyBytes += dep.usage.PolicyBytes
	return next
}

func (p *Pin) without(key DeploymentKey, generation uint64) *Pin {
	next := &Pin{generation: generation, deployments: make(map[DeploymentKey]*deployment, len(p.deployments)), usage: p.usage}
	for k, v := range p.deployments {
		if k != key {
			next.deployments[k] = v
		}
	}
	old := p.deployments[key]
	next.usage.Revisions -= old.usage.Revisions
	next.usage.PolicyBytes -= old.usage.PolicyBytes
	return next
}
