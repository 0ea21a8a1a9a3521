package guest

import (
	"context"

	"latent.dev/admission/catalog"
)

// Deploy makes d's releases the modules its (tenant, service) pair may
// run, replacing whatever the pair had. Every artifact d names is loaded
// from the store, verified and compiled now (once per digest: a digest
// already compiled for any deployment is shared); if any is missing,
// corrupt or not a WASI command, or the cache would pass MaxModules,
// nothing changes and the error names the artifact. Modules that no
// deployment references any more are closed (a guest running one keeps
// it until it stops).
//
// Call it before the catalog's Deploy, so a deployment the node cannot
// run is refused; undo it (Deploy the previous deployment, or Undeploy)
// if the catalog then refuses.
func (b *Backend) Deploy(ctx context.Context, d catalog.Deployment) error {
	byRelease := map[string]Digest{}
	for _, route := range d.Routes {
		for _, rev := range route.Revisions {
			digest, err := ParseDigest(rev.Release.ArtifactDigest)
			if err != nil {
				return err
			}
			byRelease[catalog.ReleaseID(rev.Release)] = digest
		}
	}
	held := map[Digest]*module{}
	// Whatever happens, drop the references this call took; on success
	// the deployment has taken its own.
	defer func() {
		for _, m := range held {
			b.release(m)
		}
	}()
	for _, digest := range byRelease {
		if held[digest] != nil {
			continue
		}
		m, err := b.load(ctx, digest)
		if err != nil {
			return err
		}
		held[digest] = m
	}
	releases := make(map[string]*module, len(byRelease))
	for id, digest := range byRelease {
		releases[id] = held[digest]
	}
	return b.replace(catalog.DeploymentKey{Tenant: d.Tenant, Service: d.Service}, releases)
}

// Undeploy drops the modules of (tenant, service), closing those no other
// deployment references. Undeploying a pair that has none does nothing.
func (b *Backend) Undeploy(tenant, service string) {
	_ = b.replace(catalog.DeploymentKey{Tenant: tenant, Service: service}, nil)
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

// replace makes releases the pair's modules (nil removes the pair),
// taking a reference per release and dropping the old ones.
func (b *Backend) replace(key catalog.DeploymentKey, releases map[string]*module) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	for _, m := range releases {
		b.modules[m.digest].refs++
	}
	old := b.deployments[key]
	if releases == nil {
		delete(b.deployments, key)
	} else {
		b.deployments[key] = releases
	}
	for _, m := range old {
		b.releaseLocked(m)
	}
	return nil
}

// acquire takes a reference to the module of release in key's deployment,
// or returns nil if the pair does not have it (deployment replaced or
// removed since admission, or the backend closed).
func (b *Backend) acquire(key catalog.DeploymentKey, release string) *module {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.deployments[key][release]
	if m == nil {
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
