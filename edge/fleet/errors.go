package fleet

import "errors"

// ErrBadValue is wrapped by the error for a value in etcd that does not
// decode: a limit key that is not a decimal integer in range, or a slice
// key that is not the broker's JSON. The error names the key. The
// tenant fails closed until the value is fixed.
var ErrBadValue = errors.New("fleet: a value in etcd does not decode")

// ErrNoLimit is wrapped when a fleet-limited tenant has no limit key:
// the tenant fails closed until an operator sets one.
var ErrNoLimit = errors.New("fleet: no fleet limit is set")

// ErrTooManySlices is wrapped when a tenant's slice prefix holds more
// keys than the broker reads (Config.MaxNodes): the sum cannot be
// known, so the tenant fails closed.
var ErrTooManySlices = errors.New("fleet: more slices than the broker reads")

// ErrNodeIDInUse is wrapped when this node's slice key is held under an
// etcd lease that is not this broker's: another process runs with the
// same node ID. Overwriting its slice would drop capacity it may be
// using from the sum, so the tenant fails closed.
var ErrNodeIDInUse = errors.New("fleet: the node ID's slice is held by another lease")

// ErrConfig is wrapped by every error of [New] for a configuration that
// cannot work; the error names the field.
var ErrConfig = errors.New("fleet: bad broker configuration")
