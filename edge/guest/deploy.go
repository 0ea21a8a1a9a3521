package guest

import (
	"context"

	"latent.dev/admission/catalog"
)

// Prepared is a deployment whose modules are compiled and referenced but
// not yet the ones its (tenant, service) pair runs: Prepare makes one,
// Commit switches the pair to it, Discard drops it. Compiling is slow and
// switching is not, so a caller can compile outside its own lock and
// switch the runtime and its catalog together under it.
//
// A Prepared is not safe for concurrent use; once committed or discarded
// it is spent, and Discard on a spent one does nothing.
type Prepared struct {
	b   *Backend
	key catalog.DeploymentKey
	// releases maps each release ID to its module, one module reference
	// per entry; nil means "no deployment" (Commit removes the pair).
	releases map[string]*module
	spent    bool
}

// Prepare loads, verifies and compiles every artifact d names (once per
// digest: a digest already compiled for any deployment is shared) and
// returns them prepared for d's pair, changing nothing the backend runs.
// If any is missing, corrupt or not a WASI command, or the cache would
// pass MaxModules, the error names the artifact. When ctx ends first the
// compile is abandoned (wazero stops between functions when it compiles
// on more than one worker) and the error is ctx's.
func (b *Backend) Prepare(ctx context.Context, d catalog.Deployment) (*Prepared, error) {
	byRelease := map[string]Digest{}
	for _, route := range d.Routes {
		for _, rev := range route.Revisions {
			digest, err := ParseDigest(rev.Release.ArtifactDigest)
			if err != nil {
				return nil, err
			}
			byRelease[catalog.ReleaseID(rev.Release)] = digest
		}
	}
	loaded := map[Digest]*module{}
	// Whatever happens, drop the references load took; the prepared
	// deployment takes its own, one per release.
	defer func() {
		for _, m := range loaded {
			b.release(m)
		}
	}()
	for _, digest := range byRelease {
		if loaded[digest] != nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m, err := b.load(ctx, digest)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, ctxErr
			}
			return nil, err
		}
		loaded[digest] = m
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	releases := make(map[string]*module, len(byRelease))
	for id, digest := range byRelease {
		m := loaded[digest]
		b.modules[m.digest].refs++
		releases[id] = m
	}
	return &Prepared{b: b, key: catalog.DeploymentKey{Tenant: d.Tenant, Service: d.Service}, releases: releases}, nil
}

// Commit makes p its pair's deployment, replacing what the pair had, and
// returns what it replaced, prepared in turn (a pair that had none gives
// a Prepared that removes it): Commit that to restore the pair, or
// Discard it. Guests running or held (see Hold) keep their modules. On a
// closed backend it changes nothing and returns ErrClosed; p is then
// still to be discarded.
func (p *Prepared) Commit() (*Prepared, error) {
	b := p.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.spent {
		panic("guest: Prepared committed or discarded twice")
	}
	if b.closed {
		return nil, ErrClosed
	}
	old := b.deployments[p.key]
	if p.releases == nil {
		delete(b.deployments, p.key)
	} else {
		b.deployments[p.key] = p.releases
	}
	p.releases, p.spent = nil, true
	return &Prepared{b: b, key: p.key, releases: old}, nil
}

// Discard drops p's module references, closing modules nothing else
// references. It does nothing once p is spent.
func (p *Prepared) Discard() {
	if p == nil {
		return
	}
	b := p.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.spent {
		return
	}
	for _, m := range p.releases {
		b.releaseLocked(m)
	}
	p.releases, p.spent = nil, true
}

// Deploy makes d's releases the modules its (tenant, service) pair may
// run, replacing whatever the pair had: Prepare, then Commit. If any
// artifact is missing, corrupt or not a WASI command, or the cache would
// pass MaxModules, nothing changes and the error names the artifact.
// Modules that no deployment, hold or running guest references any more
// are closed.
func (b *Backend) Deploy(ctx context.Context, d catalog.Deployment) error {
	p, err := b.Prepare(ctx, d)
	if err != nil {
		return err
	}
	previous, err := p.Commit()
	if err != nil {
		p.Discard()
		return err
	}
	previous.Discard()
	return nil
}

// Undeploy drops the modules of (tenant, service), closing those nothing
// else references. Undeploying a pair that has none does nothing.
func (b *Backend) Undeploy(tenant, service string) {
	p := &Prepared{b: b, key: catalog.DeploymentKey{Tenant: tenant, Service: service}}
	if previous, err := p.Commit(); err == nil {
		previous.Discard()
	}
}

// heldRelease is one release kept runnable by holds (see Hold).
// heldRelease is an entry of Backend.held; holds is guarded by
// Backend.mu.
type heldRelease struct {
	module *module // one module reference for the entry
	holds  int
}

type holdKey struct {
	key     catalog.DeploymentKey
	release string
}

// Hold keeps release (a catalog.ReleaseID) of (tenant, service) runnable
// until done is called, however the pair is redeployed or undeployed
// meanwhile: an activation admitted for a release runs that release even
// when it waits for a cell across a redeploy. ok is false (and nothing is
// held) when the pair does not deploy that release now and no other hold
// keeps it, or the backend is closed. Call done exactly once.
func (b *Backend) Hold(tenant, service, release string) (done func(), ok bool) {
	hk := holdKey{key: catalog.DeploymentKey{Tenant: tenant, Service: service}, release: release}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, false
	}
	h := b.held[hk]
	if h == nil {
		m := b.deployments[hk.key][release]
		if m == nil {
			return nil, false
		}
		if b.held == nil {
			b.held = map[holdKey]*heldRelease{}
		}
		b.modules[m.digest].refs++
		h = &heldRelease{module: m}
		b.held[hk] = h
	}
	h.holds++
	released := false
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if released {
			panic("guest: a hold released twice")
		}
		released = true
		if h.holds--; h.holds == 0 {
			if b.held[hk] == h {
				delete(b.held, hk)
			}
			b.releaseLocked(h.module)
		}
	}, true
}

// Modules is the number of compiled modules held now.
func (b *Backend) Modules() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.modules)
}

// load returns the compiled module of digest with one reference taken,
// compiling it (outside the lock) if no deployment holds it yet.
func (b *Backend) load(ctx context.Context, digest Digest) (*module, error) {
	if m, err := b.reference(digest); m != nil || err != nil {
		return m, err
	}
	binary, err := b.store.Load(digest)
	if err != nil {
		return nil, err
	}
	m, err := compile(ctx, b.runtime, b.wasi, digest, binary)
	if err != nil {
		if ae, ok := err.(*ArtifactError); ok {
			ae.File = b.store.Path(digest)
		}
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		_ = m.compiled.Close(ctx)
		return nil, ErrClosed
	case b.modules[digest] != nil:
		// Another Deploy compiled it meanwhile; share theirs.
		_ = m.compiled.Close(ctx)
		c := b.modules[digest]
		c.refs++
		return c.module, nil
	case len(b.modules) >= b.maxModules:
		_ = m.compiled.Close(ctx)
		return nil, &ArtifactError{Digest: digest, Err: ErrTooManyModules}
	}
	b.modules[digest] = &cachedModule{module: m, refs: 1}
	return m, nil
}

// reference takes a reference to digest's module if it is compiled.
func (b *Backend) reference(digest Digest) (*module, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	if c := b.modules[digest]; c != nil {
		c.refs++
		return c.module, nil
	}
	return nil, nil
}

// acquire takes a reference to the module of release in key's deployment,
// or in a hold of it (see Hold), or returns nil if neither has it
// (deployment replaced or removed since admission without a hold, or the
// backend closed).
func (b *Backend) acquire(key catalog.DeploymentKey, release string) *module {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.deployments[key][release]
	if m == nil {
		if h := b.held[holdKey{key: key, release: release}]; h != nil {
			m = h.module
		}
	}
	if m == nil || b.modules[m.digest] == nil {
		return nil
	}
	b.modules[m.digest].refs++
	return m
}

func (b *Backend) release(m *module) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releaseLocked(m)
}

// releaseLocked drops one reference to m, closing it at zero; b.mu must
// be held. After Close the modules map was emptied and the runtime closed
// every module, so nothing is left to drop.
func (b *Backend) releaseLocked(m *module) {
	c := b.modules[m.digest]
	if c == nil || c.module != m {
		return
	}
	if c.refs--; c.refs == 0 {
		delete(b.modules, m.digest)
		_ = m.compiled.Close(context.Background())
	}
}
