package policy

import (
	"time"
)

// CellClass is one of the five fixed execution-cell sizes. Their order is
// the order of selection: admission picks the smallest compatible class.
type CellClass uint8

// The cell classes, smallest first.
const (
	Tiny CellClass = iota
	Small
	Standard
	Large
	ExtraLarge
	// NumCellClasses is the number of cell classes.
	NumCellClasses = 5
)

var cellClassNames = [NumCellClasses]string{"tiny", "small", "standard", "large", "extra-large"}

// String returns the class's file name ("tiny", ..., "extra-large").
func (c CellClass) String() string {
	if int(c) < NumCellClasses {
		return cellClassNames[c]
	}
	return "invalid-cell-class"
}

// ParseCellClass maps a file name to its class.
func ParseCellClass(s string) (CellClass, bool) {
	for i, n := range cellClassNames {
		if n == s {
			return CellClass(i), true
		}
	}
	return 0, false
}

// CellClassSet is a set of cell classes, one bit per class.
type CellClassSet uint8

// Has reports whether the set holds c.
func (s CellClassSet) Has(c CellClass) bool { return s&(1<<c) != 0 }

// With returns the set with c added.
func (s CellClassSet) With(c CellClass) CellClassSet { return s | 1<<c }

// Threading is a guest threading model.
type Threading uint8

// The threading models.
const (
	SingleThreaded Threading = iota + 1
	MultiThreaded
)

// String returns the file name of the model.
func (t Threading) String() string {
	switch t {
	case SingleThreaded:
		return "single"
	case MultiThreaded:
		return "multi"
	}
	return "invalid-threading"
}

// ParseThreading maps a file name to its model.
func ParseThreading(s string) (Threading, bool) {
	switch s {
	case "single":
		return SingleThreaded, true
	case "multi":
		return MultiThreaded, true
	}
	return 0, false
}

// ThreadingSet is a set of threading models.
type ThreadingSet uint8

// Has reports whether the set holds t.
func (s ThreadingSet) Has(t Threading) bool { return t != 0 && s&(1<<t) != 0 }

// With returns the set with t added.
func (s ThreadingSet) With(t Threading) ThreadingSet { return s | 1<<t }

// PrincipalKind is the kind of an authenticated caller.
type PrincipalKind uint8

// The principal kinds. The zero value is not a kind, so a request that
// forgot to set one is never authorized.
const (
	UserPrincipal PrincipalKind = iota + 1
	ServicePrincipal
	AnonymousPrincipal
)

// String returns the file name of the kind.
func (k PrincipalKind) String() string {
	switch k {
	case UserPrincipal:
		return "user"
	case ServicePrincipal:
		return "service"
	case AnonymousPrincipal:
		return "anonymous"
	}
	return "invalid-principal-kind"
}

// ParsePrincipalKind maps a file name to its kind.
func ParsePrincipalKind(s string) (PrincipalKind, bool) {
	switch s {
	case "user":
		return UserPrincipal, true
	case "service":
		return ServicePrincipal, true
	case "anonymous":
		return AnonymousPrincipal, true
	}
	return 0, false
}

// Optional is a limit that may be absent: an absent limit restricts nothing
// at its layer. It is a value, so budgets never allocate.
type Optional[T ~uint64 | ~int64] struct {
	Value T
	Set   bool
}

// Some returns a present limit.
func Some[T ~uint64 | ~int64](v T) Optional[T] { return Optional[T]{Value: v, Set: true} }

// Budget is a requested or granted activation budget. CPU fuel, memory and
// wall time are the Phase 1 dimensions; the three later-phase dimensions
// must be zero in a request. WallTime is relative; an omitted wall time
// (Set false) adds no restriction, a zero one grants no time at all.
type Budget struct {
	CPUFuel            uint64
	MemoryBytes        uint64
	WallTime           Optional[time.Duration]
	NetworkEgressBytes uint64
	StorageBytes       uint64
	OutboundCalls      uint64
}

// Ceiling is a per-activation upper bound from one layer (capsule or
// deployment); an omitted dimension is no limit at that layer.
type Ceiling struct {
	CPUFuel     Optional[uint64]
	MemoryBytes Optional[uint64]
	WallTime    Optional[time.Duration]
}

// Placement is a node's identity for placement checks.
type Placement struct {
	Architecture string
	Region       string
	Zone         string
}

// PlacementRestriction limits where a revision may run; an empty list is
// no restriction.
type PlacementRestriction struct {
	Architectures []string
	Regions       []string
	Zones         []string
}

// ResolvedRevision is what route resolution hands the adapter and the
// adapter hands admission: the full identity tuple of one revision in one
// catalog generation. Admission verifies every field against the pinned
// view and never re-resolves. Attributes are untrusted metadata: counted
// against the metadata bounds, otherwise ignored.
type ResolvedRevision struct {
	RevisionIdentity
	Attributes map[string]string
}

// RevisionIdentity is the identity tuple of one revision: what a route
// resolves to, what admission verifies against the pinned view, and what
// a permit carries. It is comparable, so two identities are the same
// exactly when they are ==.
type RevisionIdentity struct {
	Tenant     string
	Service    string
	Route      string
	Contract   string
	Function   string
	Revision   string
	Release    string
	Generation uint64
}

// RevisionPolicy is the typed execution policy of one revision, as the
// catalog compiled it. Admission reads it; it never comes from a request.
type RevisionPolicy struct {
	TrustClass        string
	Backend           string
	Threading         Threading
	StateModel        string
	Features          []string
	CallDepthLimit    uint32
	CapsuleCeiling    Ceiling
	DeploymentCeiling Ceiling
	Placement         PlacementRestriction
}
