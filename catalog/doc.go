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
// # The store: design and invariants
//
// A store ([Create], [Open]) is one append-only log file,
// [StoreFileName], in a directory the catalog owns; docs/catalog-store.md
// has its byte layout, the durability rule, the limits, what each failure
// leaves on disk, and measured costs. What the code keeps true:
//
//   - One owner. [Create] and [Open] take an exclusive flock(2) on the
//     directory's catalog.lock and hold it until [Catalog.Close]; every
//     other opener fails at once with [ErrStoreInUse] and touches nothing.
//     Everything that needs one owner (creating the first store, reading
//     it, removing crashed writers' temporary files, handing out
//     generations) happens under that lock.
//   - Write, then publish. A change is appended (or the store rewritten)
//     and fsynced before any pin shows it; a change whose write failed is
//     never published, and the next successful write rewrites the file
//     from the published view. [Open] fsyncs the file, the directory and
//     every directory above it before it serves a view, and [Create] every
//     directory on the path to the store, whether it made it or found it,
//     so a power loss never takes back something a pin served.
//   - Generations are never reused for other content: every commit
//     records the highest generation handed out, a reopened catalog goes
//     on above it, and an encode failure (nothing written) spends none.
//   - All or nothing. [Open] checks every record's CRC-32C and SHA-256 and
//     every commit's chain digest before it interprets anything, applies a
//     transaction only once its commit checked, rebuilds each deployment
//     through the same validation as Deploy, and insists every record is
//     byte for byte what the writer would write. A torn tail (the file
//     ends, or turns to zeros, inside the last transaction) is dropped
//     back to the last commit; anything else is damage and refused with a
//     *[StoreError] naming the file, the record and the reason. The file
//     records how far it was durable (every append says so, in the same
//     fsync), so zeros or an end before that byte, over a transaction
//     already acknowledged, are damage too, naming the byte. There is no
//     partial catalog.
//   - Bounded. Open streams the file, refuses one over the maximum size
//     before reading it, reads each transaction twice (check, then apply)
//     and holds none of it: beyond the view, one record buffer, a read
//     window and the deployment it is reading; a record fits its 16 MiB
//     cap because validation bounds each policy list
//     ([MaxPolicyListEntries]).
//   - Writers never wait on the catalog's size. An append writes only what
//     changed; a compaction writes its snapshot, and catches up with what
//     was committed meanwhile, outside the mutex, holds it only to append
//     the last few changes and rename the file, and fsyncs the directory
//     and closes the old file after releasing it.
//
// Format 4, the log with its durable-end slots, is what a catalog writes;
// it opens format 3, the first a release wrote, and rewrites it as
// format 4 at the first rewrite.
package catalog
