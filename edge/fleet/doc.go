// Package fleet holds a tenant's live activations within a fleet-wide
// limit across nodes, on etcd: each node's broker holds a slice of each
// fleet-limited tenant's limit and publishes it, with a local deadline,
// into a [Sink] that admission reads. docs/fleet.md is the contract: the
// guarantee, the failure table, the parameters and measured figures.
//
// # Keys
//
//	<prefix>limits/<tenant>          the fleet limit: a decimal integer, set by an operator
//	<prefix>slices/<tenant>/<node>   a node's slice, {"has":N,"wants":W}, under the node's lease
//
// The prefix is /latent/fleet/ unless configured. Values are decoded
// strictly; one that does not decode is logged naming its key, and the
// tenant fails closed until it is fixed.
//
// # Invariants
//
//   - The slices of a tenant sum to at most its limit at every revision
//     of etcd: a node changes its slice only in a transaction that
//     compares the mod revision of every key under the tenant's slice
//     prefix, and of its limit key, with the revision it read them at.
//     A lease that expires only deletes slices, which only lowers the sum.
//   - What the sink admits under never exceeds what etcd holds for the
//     node: a slice grows in the sink after the transaction that grows
//     it, and shrinks in the sink before the transaction that shrinks it.
//   - A node's slice in etcd never drops below its live count: only idle
//     capacity returns, and new work waits until usage falls.
//   - The sink admits nothing under a slice at or after its local
//     deadline: the send time of the last keep-alive (or grant) that
//     succeeded, plus the TTL the server granted, less the tenant's
//     MaxGrant and the Slack. The server renewed the lease no earlier
//     than it received that request, so an activation admitted before the
//     deadline ends before the lease, and with it the slice, can expire.
//
// # Goroutines and memory
//
// [Broker.Run] runs two goroutines: the lease loop (grant, keep-alive,
// back-off capped at BackoffMax, or at KeepAlive for keep-alives) and the
// allocation loop (one round per tenant every Refresh, at most three
// attempts when a transaction loses a race). Memory is fixed by the
// configuration: the tenants, and at most MaxNodes slices read per
// tenant and round.
//
// # Caveats
//
// Lowering a tenant's limit below the sum of its slices does not revoke
// them: nodes over their new fair share stop admitting above it at once
// and give back as their activations end, so the sum is over the new
// limit until they have. The limit is for operators to raise freely and
// to lower with that in mind.
package fleet
