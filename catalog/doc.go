// Package catalog is the node's embedded deployment catalog: it holds the
// deployments of (tenant, service) pairs, resolves a route and a routing
// key to one weighted revision, and answers admission's question "what is
// the typed policy of exactly this revision?" from an immutable pinned
// view. It persists itself in a checksummed store and rebuilds the same
// typed policy after a restart.
//
// # Deployments
//
// A [Deployment] names a tenant and a service and lists routes; a route
// has a contract, a function and weighted revisions; a revision is a
// release (artifact digest and version, never the artifact) and a typed
// policy.RevisionPolicy. [Catalog.Deploy] validates a deployment as a
// whole (every caller-chosen name an identifier of at most [MaxNameBytes]
// bytes, threading single or multi, at least one route and one revision
// per route, unique route names, features and placement entries, no two
// identical revisions in a route, weights that sum without overflow) and
// makes it the deployment of its pair, replacing any earlier one whole.
//
// # Generations
//
// Every Deploy and Delete that succeeds takes the next value of one
// catalog-wide counter, and the counter never goes back: a number that was
// handed to a change is never handed to another, even when that change's
// store write failed (the write may have reached the disk). A change that
// fails validation or capacity, or a Delete of a missing deployment
// ([ErrNotDeployed]), takes no number. Every store write records the
// highest number handed out, so a catalog reopened from its store carries
// on above every number the last writer acknowledged, deletions included,
// and above the numbers of failed changes once any later write succeeded
// ([Catalog.Close] makes one; see "Failed writes"). Each deployment records the
// generation it was deployed at, and a resolved revision carries that
// number (policy.ResolvedRevision.Generation). A pin's own generation
// ([Pin.Generation]) is the counter's value when it was taken.
//
// So a revision resolved from an older pin stays valid in a newer pin for
// as long as its deployment is untouched, and is rejected by every pin
// taken after the deployment was replaced or deleted: the deployment there
// either is absent or carries a newer generation.
//
// # Pins and structure sharing
//
// The Catalog holds an atomic.Pointer to the current [Pin], an immutable
// map from (tenant, service) to an immutable compiled deployment. Deploy
// and Delete, serialized by a mutex, build a new map that shares every
// untouched deployment by pointer (copy-on-write at the deployment level),
// write the store, and publish the new pin last with one atomic store.
// [Catalog.Pin] is one atomic load: no lock, no copy. A held pin keeps
// every deployment it references alive and unchanged, so it keeps serving
// exactly its policy after a replacement or a deletion. A pin holds no
// file and no lock; holding many old pins holds their memory, which is
// not charged to the capacity.
//
// [Pin.RevisionPolicy] is the admission-time lookup: two map lookups keyed
// by strings taken from the request ((tenant, service), then (route,
// revision)), then field comparisons of contract, function, release and
// generation. It allocates nothing, blocks on nothing, touches no file and
// compiles nothing; the returned policy is shared and immutable.
//
// # Resolution
//
// [Pin.Resolve] hashes the routing key with [RoutingHash] (FNV-1a 64 with
// the MurmurHash3 finalizer: stable across processes, architectures and
// releases), takes the hash modulo the route's weight sum and picks the
// first revision whose cumulative weight exceeds it. A revision of weight
// w gets w/sum of the keys, a weight-0 revision none, and a route whose
// weights sum to zero resolves to nothing ([ErrNotResolved]). Admission
// never resolves again; it checks the whole tuple.
//
// # Identities
//
// Identities are derived from content, so every process and every restart
// agrees on them:
//
//	release  = "rel-" + hex(SHA-256(len-prefixed domain, artifact digest, version))
//	revision = "rev-" + hex(SHA-256(len-prefixed domain, tenant, service, route,
//	                                contract, function, release ID) || canonical policy)
//
// Both are [IdentityBytes] (68) bytes, within the 83 bytes every node
// allows generated identities, and obey policy.ValidIdentifier. The
// canonical policy is the record encoding below minus the release and the
// weight: moving traffic keeps identities, changing policy makes a new
// revision. Set-like lists (features, placement entries) are sorted when a
// deployment is compiled, so their order in a file does not matter.
//
// # Capacity
//
// Each revision is retained as a small record: identities, release
// metadata, weight and typed policy. Its size is the length of its
// canonical binary encoding ([RecordSize]: release digest and version,
// weight, then the policy fields in a fixed order, strings and numbers as
// unsigned varints). A catalog's [Capacity] bounds the number of revisions
// and the sum of those sizes over its current deployments; a Deploy that
// would exceed either fails with [ErrCapacityExceeded] and changes nothing.
//
// # Store format
//
// A store is one file, [StoreFileName], in a directory the catalog owns:
//
//	file   = magic "LATCAT\x00\x01", record..., end record
//	record = kind (1 byte) | length (4 bytes, big endian) | payload
//	         | SHA-256(kind | length | payload)
//
// The records are: a header (format version, catalog generation, the
// highest generation handed out, capacity, number of deployments); per
// deployment, oldest generation first, a
// deployment record (tenant, service, generation, number of routes)
// followed per route by a route record (name, contract, function, number
// of revisions) and its revision records (the canonical policy records);
// and an end record holding the number of records before it and the
// SHA-256 of every byte before it. Identities are not stored: they are
// recomputed from content. [Open] checks the framing and every checksum
// before it interprets anything, then rebuilds each deployment through the
// same compilation and validation as Deploy, and insists that every
// revision record is byte for byte what the writer would write. Any
// failure is a *[StoreError] naming the file, the record and the reason
// ([ErrStoreMissing], [ErrTruncated], [ErrChecksumMismatch],
// [ErrMalformed]); there is no partial catalog. The format version is 2;
// a version 1 header, which lacks the highest generation handed out, still
// opens, taking its catalog generation for it.
//
// # Crash safety
//
// A write encodes the whole catalog, writes it to a temporary file in the
// directory, fsyncs it, closes it, renames it over the store and fsyncs
// the directory. A crash before the rename leaves the old store (and a
// temporary file that the directory's next owner ignores and removes); a crash after it leaves
// the new one: a reader sees exactly the old or the new generation. A
// store-backed catalog ([Create], [Open]) writes before it publishes, so a
// change whose write failed is never visible in a pin; its generation is
// still spent, because a failed fsync or directory fsync says nothing
// about whether the data reached the disk.
//
// # Store lock
//
// A store directory has one owner at a time. [Create] and [Open] take an
// exclusive lock on the directory and the catalog holds it until
// [Catalog.Close]; while it is held every other [Create] or [Open] of the
// directory, from this process or any other, fails at once with
// [ErrStoreInUse] (a *[StoreError] naming the directory) and touches
// nothing there. [Catalog.WriteStore] to a directory takes its lock for
// the write and is refused the same way, except for the catalog's own
// directory, which it writes under the lock it holds. The lock is
// flock(2) with LOCK_EX|LOCK_NB on a file named catalog.lock in the
// directory: it belongs to the open file, so the kernel drops it when the
// owner closes it or dies, and a killed process never leaves a stale
// lock. The lock file is never removed; removing it would let a second
// owner lock a fresh file of the same name. flock is advisory (a program
// that ignores it can still write the directory) and on network file
// systems it is only as good as the server's locking. On systems without
// flock the lock excludes only other catalogs in the same process.
//
// Everything that needs one owner happens under the lock: Create checks
// that no store exists and writes the first one, so of two concurrent
// creators exactly one succeeds and the other gets [ErrStoreInUse] or
// [ErrStoreExists]; Open reads the store; and only the owner removes the
// temporary files that crashed writes left behind, so a live writer's
// temporary file is never removed under it. The generation counter lives
// in the one catalog that owns the directory, which is what keeps one
// number from being handed to two changes.
//
// After Close, Deploy and Delete fail with [ErrClosed]; Close is
// idempotent, and pins keep working. A catalog that is dropped without
// Close keeps its lock until the garbage collector finalizes the file, or
// the process exits.
//
// # Failed writes
//
// A Deploy or Delete whose store write fails returns a *[StoreError] whose
// Op names the step ("create temporary file", "write", "fsync", "close",
// "rename", "fsync directory") and is never published: no pin shows it,
// and the next change builds on the view before it. Its generation is
// spent. Up to the rename the store file is untouched, and the failed
// change is gone for good; if the process then ends before any later
// write succeeds (Close included), a later process may hand that number
// out again, which is harmless: no file and no pin ever carried it.
//
// A failure of the directory fsync, after the rename, is the one case in
// which the change may still be on disk. The rename has already replaced
// the store file in the running system, but the replacement is not known
// to be durable. What a caller can rely on:
//
//   - the call returns an error, and the in-memory catalog is not updated;
//   - the generation is spent: this process never hands it out again, and
//     a later process that opens the store does not either once the new
//     file survived or any later write succeeded. Only a machine crash
//     that takes the rename back before such a write can let the number
//     come round again, and then no pin ever showed it;
//   - until the catalog's next successful write, the directory may hold
//     either the old file or the new one: a machine crash can leave
//     either, and a process that exits without Close leaves the new one,
//     so a later Open can find the change the caller was told failed;
//   - the next successful write replaces the file with the published view,
//     which does not hold the change. That is the next Deploy or Delete,
//     [Catalog.WriteStore] to the catalog's own directory, or Close, which
//     writes the published view once more when a write failed since the
//     last one that succeeded.
//
// So the outcome of a failed change is unknown until a later write
// succeeds. Deploy replaces a deployment whole, so the safe answer to a
// failed Deploy is to retry it until it succeeds and trust that result;
// to give the change up instead, any other successful change, or Close,
// settles the file to the published view. Publishing the change in memory
// instead would be worse: a machine crash could then take back a change
// that pins had already served, under a generation a later change could
// be given.
package catalog
