package trace

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonDecode is the reference: encoding/json, strictly.
func jsonDecode(data []byte, l *Line) error {
	*l = Line{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(l)
}

func TestTheRecordedLineDecoderBuildsWhatEncodingJSONBuilds(t *testing.T) {
	wall, deadline := int64(5000000), int64(1700000000123)
	full := []Line{
		{Kind: KindHeader, Header: &Header{Version: 1, StartUnixNano: 1700000000000000000, File: 3, PolicySHA256: "abc"}},
		{Kind: KindCatalog, Catalog: &Catalog{Generation: 7, File: []byte(`{"deployments":[]}`)}},
		{Kind: KindDeploy, Order: 4, T: 9, Change: &Change{Generation: 8, Deployment: []byte(`{"tenant":"acme"}`)}},
		{Kind: KindUndeploy, Order: 5, T: 10, Change: &Change{Generation: 9, Tenant: "acme", Service: "thumbs"}},
		{Kind: KindLoad, Order: 6, T: -3, Load: &Load{Sequence: 2, ObservedT: -7, CPUPressure: 0.125, MemoryPressure: 1e-3, QueueDelayNS: []int64{1, 0, -2, 3}}},
		{Kind: KindLoad, Order: 6, T: 3, Load: &Load{Sequence: 2}},
		{Kind: KindDecision, Order: 11, T: 12, Decision: &Decision{Stage: StageCore,
			Principal: &Principal{Kind: "service", Subject: "billing", Tenant: "acme", Service: "billing", Admin: true},
			Target:    Target{Tenant: "acme", Service: "thumbs", Route: "resize"}, RoutingKey: "k 1",
			Revision:   &Revision{Tenant: "acme", Service: "thumbs", Route: "resize", Contract: "c", Function: "f", Revision: "r", Release: "rel"},
			Generation: 3, ActivationID: "a-1", Priority: 4294967295, Budget: Budget{CPUFuel: 1 << 63, MemoryBytes: 5, WallTimeNS: &wall},
			PayloadBytes: 9, DeadlineUnixMS: &deadline, Clock: true, Committed: true, Since: []int64{4, 5},
			LoadSequence: 2, CommitLoadSequence: 3, Answer: "capacity-exhausted", Scope: "tenant", Dimension: "live-activations"}},
		{Kind: KindDecision, Order: 12, Decision: &Decision{Stage: StageEdge, Answer: AnswerUnauthenticated}},
		{Kind: KindStart, Order: 13, T: 14, Move: &Move{Of: 11, ElapsedNS: 15, Refused: true}},
		{Kind: KindRelease, Order: 14, T: 15, Move: &Move{Of: 11, ElapsedNS: 16, Reclaimed: true}},
		{Kind: KindDropped, Order: 15, T: 16, Dropped: &Dropped{Lines: 17}},
	}
	var lines []string
	for _, l := range full {
		data, err := json.Marshal(l)
		require.NoError(t, err)
		lines = append(lines, string(data))
	}
	lines = append(lines,
		` { "k" : "load" , "order" : 1 , "sequence" : 1 , "observed_t" : 0 , "cpu_pressure" : 1E2 , "memory_pressure" : -0.5e-1 , "queue_delay_ns" : [ ] } `,
		`{"k":"decision","order":1,"stage":"core","principal":null,"revision":null,"target":{},"budget":{"cpu_fuel":0,"memory_bytes":0,"wall_time_ns":null},"answer":"x","deadline_unix_ms":null,"since_ns":null}`,
		`{"k":"decision","order":1,"principal":{"kind":"user"},"principal":{"subject":"s"},"answer":"x"}`,
	)
	for _, s := range lines {
		var got, ref Line
		require.True(t, decodeRecorded([]byte(s), &got, new(interner)), "the recorded-line decoder gave up on %s", s)
		require.NoError(t, jsonDecode([]byte(s), &ref), s)
		assert.Equal(t, ref, got, s)
	}
}

func TestTheRecordedLineDecoderGivesUpOnWhatItDoesNotKnow(t *testing.T) {
	for _, s := range []string{
		`{"K":"release","order":2,"of":1,"elapsed_ns":5}`,               // another case: encoding/json's to judge
		`{"k":"rel\u0065ase","order":2,"of":1,"elapsed_ns":5}`,          // an escape
		`{"k":"release","order":2,"of":1,"elapsed_ns":5,"x":1}`,         // unknown
		`{"k":"release","order":2.0,"of":1,"elapsed_ns":5}`,             // a fraction for an integer
		`{"k":"release","order":-2,"of":1,"elapsed_ns":5}`,              // negative unsigned
		`{"k":"release","order":02,"of":1,"elapsed_ns":5}`,              // a leading zero
		`{"k":"release","order":18446744073709551616,"of":1}`,           // overflow
		`{"k":"decision","order":2,"priority":4294967296,"answer":"a"}`, // overflow of uint32
		`{"k":"decision","order":2,"target":null,"answer":"a"}`,         // null for a struct: encoding/json ignores it
		`{"k":"release","order":2,"of":1,"elapsed_ns":5} x`,             // trailing
		`{"k":"release","order":2,"of":1,"elapsed_ns":5,}`,              // a trailing comma
		`{"k":"décision"}`, // not ASCII
		`{"k":"release","order":+2}`,
		`{"k":"load","order":2,"cpu_pressure":NaN}`,
	} {
		var l Line
		assert.False(t, decodeRecorded([]byte(s), &l, new(interner)), s)
	}
	// Both decoders agree on the ones encoding/json accepts.
	for _, s := range []string{`{"K":"release","order":2,"of":1,"elapsed_ns":5}`, `{"k":"rel\u0065ase","order":2,"of":1,"elapsed_ns":5}`} {
		var l Line
		require.NoError(t, DecodeLine([]byte(s), &l), s)
		assert.Equal(t, KindRelease, l.Kind)
	}
}
