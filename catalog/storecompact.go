package catalog

import "time"

// compaction is a rewrite of the store that runs in its own goroutine, so
// that writers never wait for a time that grows with the catalog: it
// writes a snapshot of the view it started from to a temporary file
// without the catalog's mutex, then, under it, appends the transactions
// committed in the meantime, fsyncs, renames the file over the store and
// fsyncs the directory. Only that last step holds writers up, and it costs
// what they appended meanwhile.
type compaction struct {
	capacity Capacity
	snapshot *Pin
	issued   uint64
	done     chan struct{} // closed when the goroutine has finished

	// The fields below are guarded by the owning Catalog's mu.

	// abandoned is set when the store file it would replace was dropped
	// or rewritten meanwhile; the goroutine then discards its work.
	abandoned bool
	// pending is the transactions appended since snapshot, in order.
	pending []pendingTransaction

	// Set by the goroutine before done closes: the result of the
	// directory fsync after the rename; for benchmarks, whether it
	// swapped the files, and how long it held the catalog's mutex.
	syncErr error
	swapped bool
	locked  time.Duration
}

// pendingTransaction is a transaction appended during a compaction, kept
// to be sealed again after the compaction's snapshot.
type pendingTransaction struct {
	records            []byte
	count              int
	generation, issued uint64
}

// commitLocked persists next, the view after changes at next.generation,
// with issued: one transaction appended to the store file and one fsync.
// When an earlier write failed, or the append would take the file past
// maxStoreBytes, it rewrites the store from next instead. When the append
// leaves more garbage (bytes of replaced and deleted deployments and of
// old commits) than live data, and at least rewriteFloor of it, it returns
// a compaction for the caller to start once next is published. Each
// compaction costs the live data once and follows at least that much
// appended garbage, so a change costs, on average, a constant multiple of
// what it writes, whatever the catalog's size; and it runs outside the
// lock, so no change waits for it.
func (s *store) commitLocked(capacity Capacity, next *Pin, changes []change, issued uint64) (*compaction, error) {
	live := s.live
	for i := range changes {
		if old := changes[i].old; old != nil {
			live -= deploymentBytes(old)
		}
		if dep := changes[i].dep; dep != nil {
			live += deploymentBytes(dep)
		}
	}
	records, count, err := encodeChanges(changes)
	if err != nil {
		return nil, encodeFailure(s.path, err)
	}
	tx, chain := sealTransaction(records, count, next.generation, issued, s.chain)
	if s.file == nil || s.end+int64(len(tx)) > maxStoreBytes {
		return nil, s.rewriteLocked(capacity, next, issued, live)
	}
	// The file is durable up to s.end: say so in a slot, in the same
	// fsync as the append, so that Open can tell a torn append from
	// zeros over transactions already acknowledged.
	if s.slotted {
		if _, err := s.file.WriteAt(encodeSlot(s.slot, s.end), slotAt(s.slot)); err != nil {
			s.dropFileLocked()
			return nil, &StoreError{File: s.path, Record: -1, Op: "write", Cause: err}
		}
		s.slot ^= 1
	}
	if _, err := s.file.WriteAt(tx, s.end); err != nil {
		s.dropFileLocked()
		return nil, &StoreError{File: s.path, Record: -1, Op: "write", Cause: err}
	}
	if err := s.file.Sync(); err != nil {
		s.dropFileLocked()
		return nil, &StoreError{File: s.path, Record: -1, Op: "fsync", Cause: err}
	}
	// The file may be one a compaction renamed over the store: the change
	// is durable only once that rename is. Its fsync ran meanwhile.
	if err := s.settleLocked(); err != nil {
		return nil, err
	}
	s.end += int64(len(tx))
	s.chain, s.live = chain, live
	if comp := s.compaction; comp != nil {
		comp.pending = append(comp.pending, pendingTransaction{records: records, count: count, generation: next.generation, issued: issued})
		return nil, nil
	}
	garbage := s.end - (s.header + live + commitBytes)
	if garbage <= max(live, s.rewriteFloor) {
		return nil, nil
	}
	s.compaction = &compaction{capacity: capacity, snapshot: next, issued: issued, done: make(chan struct{})}
	return s.compaction, nil
}

// catchUpRounds is how many times a compaction appends what was committed
// meanwhile without the catalog's mutex before it takes the mutex for the
// rest: each round appends what the writers committed during the last
// one, so under a steady load the last, locked round is short.
const catchUpRounds = 4

// compact runs comp, a compaction of c's store (see compaction), to the
// end. Without c.mu it writes the snapshot and fsyncs it, then, in up to
// catchUpRounds rounds, appends and fsyncs the transactions committed
// meanwhile. Under c.mu it appends and fsyncs the few committed since,
// renames the file over the store and makes it the one the store appends
// to. Then, without c.mu again, it fsyncs the directory and closes the old
// file; until that fsync is done no change appended to the new file is
// acknowledged (store.settleLocked waits for it), since a power loss could
// still undo the rename. If the catalog closed, the store dropped its
// file, or any step before the rename failed, it removes its temporary
// file and the store goes on appending to the file it has; the next
// change that leaves too much garbage starts another. A failed directory
// fsync leaves the store with no file to append to, as a failed rewrite
// does, so the next change rewrites it whole.
func (c *Catalog) compact(comp *compaction) {
	defer close(comp.done)
	s := c.store
	data, chain, err := encodeSnapshot(comp.capacity, comp.snapshot, comp.issued)
	var f storeFile
	if err == nil {
		f, err = s.fs.CreateTemp(s.dir, tempPattern)
	}
	end := int64(len(data))
	if err == nil {
		if _, err = f.WriteAt(data, 0); err == nil {
			err = f.Sync()
		}
	}
	data = nil
	// appendPending seals pending after chain and appends it to f at end,
	// then fsyncs f.
	appendPending := func(pending []pendingTransaction) error {
		if len(pending) == 0 {
			return nil
		}
		var tail []byte
		for _, tx := range pending {
			var sealed []byte
			sealed, chain = sealTransaction(tx.records, tx.count, tx.generation, tx.issued, chain)
			tail = append(tail, sealed...)
		}
		if _, err := f.WriteAt(tail, end); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		end += int64(len(tail))
		return nil
	}
	discard := func() {
		if f != nil {
			_ = f.Close()
			_ = s.fs.Remove(f.Name())
		}
	}
	// takePending takes the transactions committed since the last call,
	// and reports whether the compaction is still wanted.
	takePending := func() ([]pendingTransaction, bool) {
		if comp.abandoned || c.closed {
			s.compaction = nil
			return nil, false
		}
		pending := comp.pending
		comp.pending = nil
		return pending, true
	}
	for round := 0; err == nil && round < catchUpRounds; round++ {
		c.mu.Lock()
		pending, wanted := takePending()
		c.mu.Unlock()
		if !wanted {
			discard()
			return
		}
		if len(pending) == 0 {
			break
		}
		err = appendPending(pending)
	}
	c.mu.Lock()
	lockedAt := time.Now()
	pending, wanted := takePending()
	if err == nil && wanted {
		err = appendPending(pending)
	}
	if err == nil && wanted {
		err = s.fs.Rename(f.Name(), s.path)
	}
	if err != nil || !wanted {
		s.compaction = nil
		comp.locked = time.Since(lockedAt)
		c.mu.Unlock()
		discard()
		return
	}
	old := s.file
	s.file, s.end, s.chain = f, end, chain
	s.header, s.slotted, s.slot = headerBytes(storeVersion, comp.capacity), true, 0
	s.compaction, s.settling = nil, comp
	comp.swapped = true
	comp.locked = time.Since(lockedAt)
	c.mu.Unlock()
	comp.syncErr = s.fs.SyncDir(s.dir)
	if old != nil {
		_ = old.Close()
	}
}

// settleLocked waits until the directory fsync of the last compaction, if
// it is still running, is done. A change appended to the file a
// compaction renamed is acknowledged only after that. When it failed, the
// rename may not survive a power loss, so the store drops its file (the
// next write rewrites it) and settleLocked returns the failure.
func (s *store) settleLocked() error {
	comp := s.settling
	if comp == nil {
		return nil
	}
	<-comp.done
	s.settling = nil
	if comp.syncErr != nil {
		s.dropFileLocked()
		return &StoreError{File: s.dir, Record: -1, Op: "fsync directory", Cause: comp.syncErr}
	}
	return nil
}
