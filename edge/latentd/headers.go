package latentd

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"latent.dev/admission/policy"
)

// The invocation headers.
const (
	HeaderActivationID = "Latent-Activation-Id"
	HeaderRoutingKey   = "Latent-Routing-Key"
	HeaderPriority     = "Latent-Priority"
	HeaderDeadline     = "Latent-Deadline"
	HeaderCPUFuel      = "Latent-Cpu-Fuel"
	HeaderMemoryBytes  = "Latent-Memory-Bytes"
	HeaderWallTimeMs   = "Latent-Wall-Time-Ms"
	HeaderOutcome      = "Latent-Outcome"
)

// invocation is what the headers of one invocation ask for.
type invocation struct {
	activationID string
	routingKey   string
	priority     uint32
	deadline     policy.Optional[int64]
	budget       policy.Budget
}

// headerError is a malformed header: its name and a fixed description.
type headerError struct {
	header  string
	problem string
}

func (e *headerError) Error() string { return e.header + ": " + e.problem }

// single returns the one value of header name; more than one is an error,
// and so is a present but empty one.
func single(h http.Header, name string) (string, bool, *headerError) {
	vs := h.Values(name)
	switch len(vs) {
	case 0:
		return "", false, nil
	case 1:
		if vs[0] == "" {
			return "", true, &headerError{name, "must not be empty"}
		}
		return vs[0], true, nil
	}
	return "", true, &headerError{name, "must appear at most once"}
}

// digitsOnly reports whether s is a non-empty run of ASCII digits: no
// sign, no space, no other base.
func digitsOnly(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func parseUint(h http.Header, name string, bits int) (uint64, bool, *headerError) {
	s, ok, herr := single(h, name)
	if herr != nil || !ok {
		return 0, ok, herr
	}
	if !digitsOnly(s) {
		return 0, true, &headerError{name, "must be a whole number written in decimal digits"}
	}
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, true, &headerError{name, fmt.Sprintf("must be at most %d", uint64(1)<<bits-1)}
	}
	return v, true, nil
}

// parseInvocation reads the invocation headers. An absent budget
// dimension asks for what the ceilings allow: the node's ceiling for fuel
// and memory (the smallest layer decides), and no limit for wall time.
func parseInvocation(h http.Header, ceiling policy.NodeBudgetCeiling) (invocation, *headerError) {
	var inv invocation
	id, ok, herr := single(h, HeaderActivationID)
	if herr != nil {
		return inv, herr
	}
	if !ok {
		id = newActivationID()
	}
	inv.activationID = id
	key, ok, herr := single(h, HeaderRoutingKey)
	if herr != nil {
		return inv, herr
	}
	if !ok {
		key = id
	}
	inv.routingKey = key
	prio, _, herr := parseUint(h, HeaderPriority, 32)
	if herr != nil {
		return inv, herr
	}
	inv.priority = uint32(prio)
	deadline, ok, herr := parseUint(h, HeaderDeadline, 63)
	if herr != nil {
		return inv, herr
	}
	if ok {
		inv.deadline = policy.Some(int64(deadline))
	}
	inv.budget.CPUFuel = ceiling.CPUFuel
	if fuel, ok, herr := parseUint(h, HeaderCPUFuel, 64); herr != nil {
		return inv, herr
	} else if ok {
		inv.budget.CPUFuel = fuel
	}
	inv.budget.MemoryBytes = ceiling.MemoryBytes
	if mem, ok, herr := parseUint(h, HeaderMemoryBytes, 64); herr != nil {
		return inv, herr
	} else if ok {
		inv.budget.MemoryBytes = mem
	}
	wall, ok, herr := parseUint(h, HeaderWallTimeMs, 64)
	if herr != nil {
		return inv, herr
	}
	if ok {
		if wall > uint64(math.MaxInt64/int64(time.Millisecond)) {
			return inv, &headerError{HeaderWallTimeMs, "is too large a number of milliseconds"}
		}
		inv.budget.WallTime = policy.Some(time.Duration(wall) * time.Millisecond)
	}
	return inv, nil
}

// newActivationID is 16 random bytes in hex: 32 characters, an identifier
// under every node's minimum identifier bound.
func newActivationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// bearerToken extracts the token of an "Authorization: Bearer TOKEN"
// header, or "" when there is none.
func bearerToken(h http.Header) string {
	vs := h.Values("Authorization")
	if len(vs) != 1 {
		return ""
	}
	scheme, token, ok := strings.Cut(vs[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
