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
// Every Deploy, Delete and Apply that succeeds takes the next value of one
// catalog-wide counter, and the counter never goes back: a number that was
// handed to a change is never handed to another, even when that change's
// store write failed (the write may have reached the disk). A change that
// fails validation or capacity, a Delete of a missing deployment
// ([ErrNotDeployed]), or an Apply with no changes, takes no number. Every store write records the
// highest number handed out, so a catalog reopened from its store carries
// on above every number the last writer acknowledged, deletions included,
// and above the numbers of failed changes once any later write succeeded
// ([Catalog.Close] makes one; see "Failed writes"). Each deployment records
// the generation it was deployed at (all the deployments of one Apply
// share one), and a resolved revision carries that number
// (policy.ResolvedRevision.Generation). A pin's own generation
// ([Pin.Generation]) is the counter's value when it was taken.
//
// So a revision resolved from an older pin stays valid in a newer pin for
// as long as its deployment is untouched, and is rejected by every pin
// taken after the deployment was replaced or deleted: the deployment there
// either is absent or carries a newer generation.
//
// # Apply
//
// [Catalog.Apply] makes many deploys and deletes at one generation with
// one store write and one fsync: all of them or none. It compiles and
// validates every deployment and checks every delete against the current
// view before it takes a generation or writes anything; a problem anywhere
// fails the whole call with every problem listed by its path, and leaves
// the catalog as it was. A (tenant, service) pair appears at most once in
// one Apply, so the result does not depend on the order of its changes.
//
// # Pins and structure sharing
//
// The Catalog holds an atomic.Pointer to the current [Pin]. A pin holds
// its deployments in a persistent hash array mapped trie keyed by
// (tenant, service): each node branches 32 ways on 5 bits of a keyed
// 64-bit hash of the two names (each name's xxhash, folded with a
// per-process random key) and stores only its occupied slots, so
// 10,000 deployments sit about three nodes deep. A change copies the
// nodes on the path to its key, O(log32 n) small copies, and shares every
// other node, and every untouched compiled deployment, with the pins
// before it; an Apply, and the rebuild of a view from its store, pass one
// edit token to all their changes, so a node they created is changed in
// place until they publish and never after. Keys whose full hashes are
// equal share an overflow node below the last level; the key is chosen
// per process, so no one who picks names can aim them at one path.
// Deploy, Delete and Apply, serialized by a mutex, build the new pin,
// write the store, and publish the pin last with one atomic store.
// [Catalog.Pin] is one atomic load: no lock, no copy. A held pin keeps
// every node and deployment it references alive and unchanged, so it
// keeps serving exactly its policy after a replacement or a deletion. A
// pin holds no file and no lock; holding many old pins holds their
// memory, which is not charged to the capacity.
//
// [Pin.RevisionPolicy] is the admission-time lookup: a trie walk keyed by
// the hash of (tenant, service) from the request, the route by name (a
// comparison of each of a few names, a map past eight), a scan of the
// route's few revision IDs, then field comparisons of contract,
// function, release and generation. It allocates nothing, blocks on
// nothing, touches no file and compiles nothing; the returned policy is
// shared and immutable. [Pin.RevisionRecord] is the same lookup returning
// the pin's whole record of the revision: its identity (which a permit
// points to), its policy and the slot in which admission keeps the node
// requirements it derives from the policy, once per record and provider.
//
// # Handles
//
// [Pin.Resolve] returns, beside the identity, a [Handle]: the pin and its
// record of the revision, made in the same allocation. An adapter puts it
// in core.AdmissionRequest.Handle. [Pin.OwnRecord] recognises a handle by
// comparing its pin with itself, nothing more, so only the pin that
// resolved it answers for it; admission then takes the record as verified
// if the request's identity is still the record's (one ==). A handle of
// another pin, of the same catalog or not, is not recognised, and the
// request is verified by the lookup above: a revision resolved through an
// older pin of a deployment that has not changed since is still admitted,
// on that path.
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
// an append-only log of checksummed records, grouped into transactions
// that each end in a commit record.
//
//	file        = magic "LATCAT\x00\x03", header, transaction...
//	record      = kind (1 byte) | length (4 bytes, big endian)
//	              | CRC-32C(kind | length) | payload | SHA-256(kind | length | payload)
//	transaction = change record... commit record
//
// The header holds the format version (3) and the capacity. A deployment
// is a deployment record (tenant, service, generation, number of routes)
// followed per route by a route record (name, contract, function, number
// of revisions) and its revision records (the canonical policy records);
// a delete is one record naming (tenant, service). A commit holds the
// generation, the highest generation handed out, the number of records in
// its transaction, and a chain digest: SHA-256 of the previous commit's
// digest (for the first, of the magic and header) and the bytes of the
// transaction's records, so every commit vouches for the whole file
// before it. The CRC of the kind and length tells a damaged length from a
// file that ends early.
//
// The first transaction is a snapshot: every deployment of a view, oldest
// generation first, each at its own generation. A rewrite (below) writes
// such a file; every later change appends one transaction, its
// deployments at its commit's generation, which must exceed every
// generation the file handed out before. Identities are not stored: they
// are recomputed from content. [Open] checks every record's CRC and
// SHA-256 and every commit's chain digest before it interprets anything,
// applies each transaction only once its commit has checked, rebuilds each
// deployment through the same compilation and validation as Deploy, and
// insists that every record is byte for byte what the writer would write.
// Any failure is a *[StoreError] naming the file, the record and the
// reason ([ErrStoreMissing], [ErrTruncated], [ErrChecksumMismatch],
// [ErrMalformed]); there is no partial catalog.
//
// # Formats
//
// Format 3, the log described here, is the first format a release
// wrote; a file that does not begin with its magic is "not a catalog
// store".
//
// # Appends, torn tails and rewrites
//
// A change encodes only what it changes (its deployments' records, or a
// delete record, and a commit), writes them at the end of the file in one
// write and fsyncs once. Its cost does not depend on the catalog's size.
// A store-backed catalog writes before it publishes, so a change whose
// write failed is never visible in a pin.
//
// A crash during an append leaves a torn tail: the file ends inside the
// transaction, or from some byte of it on, however few bytes before its
// end, holds only zeros (the file grew before its data reached the disk;
// zeros that begin inside a checksum follow the right bytes of it). Open
// drops a torn tail back to the
// last commit, cuts it off the file and appends from there; nothing of an
// uncommitted transaction is ever visible, and every acknowledged change
// was fsynced, so it lies before the tail. Anything else that fails a
// check is damage, and Open refuses it, in the last transaction too: a
// flipped bit is not a torn write. A store cut short at any byte after its
// first commit opens at the last commit before the cut, because an
// append-only file cannot tell that cut from a crash; a store cut before
// its first commit is [ErrTruncated]. A torn tail whose lost page is
// followed by data that did reach the disk (writeback reordered within
// one append) reads as damage and is refused; on the file systems Linux
// uses for such stores an append's data reaches the disk before the size
// that covers it.
//
// Open streams the file: it refuses one over the maximum store size
// (1 GiB) before reading it, reads each record once, holds no more than
// the view and the records of the transaction it is reading, and stops at
// the first record that fails to check. Before it publishes a view it
// fsyncs the file and the directory, so that nothing it serves can be
// taken back by a power loss; Create fsyncs every directory it made. A
// record is at most 16 MiB, which validation guarantees by bounding each
// policy list to [MaxPolicyListEntries]; docs/catalog-store.md states the
// durability rule and the limits.
//
// Replaced and deleted deployments and old commits stay in the file as
// garbage. When an append leaves more garbage than live data (the records
// of the current deployments), and at least 1 MiB of it, the store is
// compacted in a goroutine: it encodes the view of that append as a
// snapshot and writes and fsyncs it to a temporary file in the directory
// without the catalog's mutex; then, under it, it appends the
// transactions committed meanwhile, fsyncs, renames the file over the
// store and fsyncs the directory, and appends to the new file from then
// on. Writers wait only for that last step. A crash before the rename
// leaves the old store (and a temporary file that the directory's next
// owner removes); after it, the new one; both hold every acknowledged
// change. A compaction that cannot finish is dropped and the old file
// stays in use; Close waits for one in flight. Each compaction costs the
// live data once and follows at least as many appended bytes, so on
// average a change costs a constant multiple of what it writes.
// [Catalog.WriteStore], and the first change after a failed write,
// rewrite the store the same way, synchronously.
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
// After Close, Deploy, Delete and Apply fail with [ErrClosed]; Close is
// idempotent, and pins keep working. A catalog that is dropped without
// Close keeps its lock until the garbage collector finalizes the file, or
// the process exits.
//
// # Failed writes
//
// A Deploy, Delete or Apply whose store write fails returns a
// *[StoreError] whose Op names the step ("write", "fsync" for an append;
// "create temporary file", "write", "fsync", "rename", "fsync directory"
// for a rewrite) and is never published: no pin shows it, and the next
// change builds on the view before it. Its generation is spent. After a
// failed write the catalog never appends to that file again, since what
// it holds past the last commit is unknown (after a failed fsync, Linux
// may even drop data it reported written): the next write rewrites the
// store from the published view. A rewrite that fails before its rename
// leaves the store file untouched, and the failed change is gone for
// good; if the process then ends before any later write succeeds (Close
// included), a later process may hand that number out again, which is
// harmless: no file and no pin ever carried it.
//
// A failed write or fsync of an append, or a failed directory fsync after
// a rewrite's rename, may leave the change in the file: the bytes are in
// the running system's file, but not known to be durable. What a caller
// can rely on:
//
//   - the call returns an error, and the in-memory catalog is not updated;
//   - the generation is spent: this process never hands it out again, and
//     a later process that opens the store does not either once the file
//     that holds it survived or any later write succeeded. Only a machine
//     crash that takes the write back before such a write can let the
//     number come round again, and then no pin ever showed it;
//   - until the catalog's next successful write, the directory may hold
//     the store with or without the change: a machine crash can leave
//     either, and a process that exits without Close leaves it in, so a
//     later Open can find the change the caller was told failed;
//   - the next successful write rewrites the file from the published
//     view, which does not hold the change. That is the next Deploy,
//     Delete or Apply, [Catalog.WriteStore] to the catalog's own
//     directory, or Close, which rewrites the published view once more
//     when a write failed since the last one that succeeded.
//
// A failure to encode (Op "encode": a record or a store over its limit)
// is different: nothing was written and no generation was spent, and the
// error matches [ErrInvalidDeployment] or [ErrCapacityExceeded], so it is
// never worth retrying.
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
