package fleet_test

import (
	"context"
	"log"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"latent.dev/admission/edge/fleet"
)

// slices is what admission would read: each fleet tenant's slice and its
// local deadline, and the live count the broker states wants from.
type slices struct {
	mu      sync.Mutex
	slice   map[string]int64
	until   map[string]time.Time
	live    map[string]int64
	refused map[string]uint64
}

func (s *slices) Publish(tenant string, slice int64, validUntil time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slice[tenant], s.until[tenant] = slice, validUntil
}

func (s *slices) Live(tenant string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[tenant]
}

func (s *slices) Refused(tenant string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused[tenant]
}

// A node runs one broker for its fleet-limited tenants; admission then
// admits a tenant's activation only while its live count is under the
// published slice and time.Now() is before the slice's deadline.
func Example() {
	client, err := fleet.NewClient(fleet.ClientOptions{
		Endpoints: []string{"https://etcd-1.internal:2379", "https://etcd-2.internal:2379"},
		CAFile:    "/etc/latent/etcd-ca.pem",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	s := &slices{slice: map[string]int64{}, until: map[string]time.Time{}, live: map[string]int64{}, refused: map[string]uint64{}}
	broker, err := fleet.New(fleet.Config{
		Client:  client,
		NodeID:  "node-1",
		Tenants: []fleet.Tenant{{Name: "acme", MaxGrant: 2 * time.Second}},
		Sink:    s,
		Usage:   s,
	})
	if err != nil {
		log.Fatal(err)
	}
	registry := prometheus.NewRegistry() // the node's registry, served at /metrics
	registry.MustRegister(broker.Collector())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	broker.Run(ctx) // until SIGTERM; then the slices are withdrawn and the lease revoked
}
