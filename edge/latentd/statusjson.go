package latentd

import "latent.dev/admission/core"

// The JSON of GET /v1/admin/status.
type (
	statusJSON struct {
		NowUnixMS    int64             `json:"now_unix_ms"`
		Scopes       []statusScopeJSON `json:"scopes"`
		QueueClasses []statusQueueJSON `json:"queue_classes"`
		CellClasses  []statusCellJSON  `json:"cell_classes"`
		Load         *statusLoadJSON   `json:"load"`
		Rejections   statusRejectJSON  `json:"rejections"`
		Outcomes     statusOutcomeList `json:"outcomes"`
		Admitted     int64             `json:"admitted"`
		Live         int               `json:"live_reservations"`
		// Recording is the -record trace's state; absent when the node
		// does not record.
		Recording *statusRecordJSON `json:"recording,omitempty"`
		// Fleet is each fleet-limited tenant's slice (docs/fleet.md);
		// absent when the policy marks none.
		Fleet []statusFleetJSON `json:"fleet,omitempty"`
	}
	statusFleetJSON struct {
		Tenant string `json:"tenant"`
		// Slice is the slice admission admits under now; Published false
		// (and Slice 0) when none is: the tenant is refused as
		// fleet-unavailable. ValidForMS is how long the slice stays
		// valid (its local deadline less now; 0 or less: lapsed).
		Slice      int64 `json:"slice"`
		Published  bool  `json:"published"`
		ValidForMS int64 `json:"valid_for_ms"`
		// Live is the tenant's live activations on this node.
		Live uint64 `json:"live_activations"`
		// Limit is the fleet limit as last read from etcd, -1 when not
		// read yet (or no broker runs); Held is this node's slice in etcd.
		Limit int64 `json:"fleet_limit"`
		Held  int64 `json:"held"`
		// Broker is false when no broker runs (no -etcd): the tenant is
		// refused. Problem is why it fails closed for a value in etcd.
		Broker  bool   `json:"broker"`
		Problem string `json:"problem,omitempty"`
	}
	statusRecordJSON struct {
		Path string `json:"path"`
		// State is "recording", or "stopped" while a write error (a full
		// disk) stops it; Error is that error.
		State        string `json:"state"`
		Error        string `json:"error,omitempty"`
		WriteErrors  uint64 `json:"write_errors"`
		DroppedLines uint64 `json:"dropped_lines"`
	}
	statusScopeJSON struct {
		Kind       string          `json:"kind"` // node, tenant, trust-class
		Name       string          `json:"name"`
		Dimensions []statusDimJSON `json:"dimensions"`
	}
	statusDimJSON struct {
		Dimension string `json:"dimension"`
		Reserved  uint64 `json:"reserved"`
		Limit     uint64 `json:"limit"`
	}
	statusQueueJSON struct {
		Name      string `json:"name"`
		Queued    uint64 `json:"queued_reservations"`
		MaxQueued uint64 `json:"max_queued"`
	}
	statusCellJSON struct {
		Class       string `json:"class"`
		Live        uint64 `json:"live_activations"`
		Parallelism uint64 `json:"parallelism"`
	}
	statusLoadJSON struct {
		Sequence        uint64  `json:"sequence"`
		CPU             float64 `json:"cpu"`
		Memory          float64 `json:"memory"`
		CPUThreshold    float64 `json:"cpu_threshold"`
		MemoryThreshold float64 `json:"memory_threshold"`
		AgeMS           int64   `json:"age_ms"`
		MaxAgeMS        int64   `json:"max_age_ms"`
	}
	statusRejectJSON struct {
		WindowMS int64              `json:"window_ms"`
		Total    int64              `json:"total"`
		ByReason []statusReasonJSON `json:"by_reason"`
	}
	statusReasonJSON struct {
		Reason string `json:"reason"`
		Count  int64  `json:"count"`
	}
	statusOutcomeList struct {
		Capacity int                 `json:"capacity"`
		Recent   []statusOutcomeJSON `json:"recent"` // newest first
	}
	statusOutcomeJSON struct {
		AtUnixMS   int64   `json:"at_unix_ms"`
		Tenant     string  `json:"tenant"`
		Service    string  `json:"service"`
		Route      string  `json:"route"`
		Outcome    string  `json:"outcome"`
		Status     int     `json:"status"`
		DurationMS float64 `json:"duration_ms"`
	}
)

// Dimension names, the vocabulary's.
var statusDimensions = [4]string{string(core.DimLiveActivations), string(core.DimQueuedReservations),
	string(core.DimCPUFuel), string(core.DimMemoryBytes)}

func statusScope(kind, name string, s core.ScopeUsage) statusScopeJSON {
	reserved := [4]uint64{s.Live, s.Queued, s.CPUFuel, s.MemoryBytes}
	limits := [4]uint64{s.Limits.MaxLiveActivations, s.Limits.MaxQueuedReservations, s.Limits.MaxReservedCPUFuel,
		s.Limits.MaxReservedMemoryBytes}
	dims := make([]statusDimJSON, len(reserved))
	for i := range reserved {
		dims[i] = statusDimJSON{Dimension: statusDimensions[i], Reserved: reserved[i], Limit: limits[i]}
	}
	return statusScopeJSON{Kind: kind, Name: name, Dimensions: dims}
}
