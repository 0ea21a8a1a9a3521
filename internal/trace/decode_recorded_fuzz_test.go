package trace

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzRecordedDecoderMatchesEncodingJSON holds the recorded-line decoder to
// encoding/json on every input: when the recorded-line decoder takes a line,
// encoding/json takes it too and builds the same Line; and DecodeLine
// (the recorded-line decoder, or encoding/json when it gives up) agrees with
// encoding/json alone: the same line, or both refuse.
func FuzzRecordedDecoderMatchesEncodingJSON(f *testing.F) {
	wall := int64(5)
	for _, l := range []Line{
		{Kind: KindHeader, Header: &Header{Version: 1, StartUnixNano: 17, File: 3, PolicySHA256: "abc"}},
		{Kind: KindCatalog, Order: 1, Catalog: &Catalog{Generation: 7, File: []byte(`{"deployments":[]}`)}},
		{Kind: KindUndeploy, Order: 5, T: 10, Change: &Change{Generation: 9, Tenant: "acme", Service: "thumbs"}},
		{Kind: KindLoad, Order: 6, T: -3, Load: &Load{Sequence: 2, ObservedT: -7, CPUPressure: 0.125, QueueDelayNS: []int64{1, 0}}},
		{Kind: KindDecision, Order: 11, T: 12, Decision: &Decision{Stage: StageCore,
			Principal: &Principal{Kind: "user", Subject: "s", Tenant: "acme"}, Target: Target{Tenant: "acme", Service: "t", Route: "r"},
			Revision: &Revision{Tenant: "acme", Release: "rel"}, Budget: Budget{CPUFuel: 1, WallTimeNS: &wall},
			Since: []int64{4}, Answer: "admitted"}},
		{Kind: KindRelease, Order: 14, T: 15, Move: &Move{Of: 11, ElapsedNS: 16, Reclaimed: true}},
		{Kind: KindDropped, Order: 15, Dropped: &Dropped{Lines: 17}},
	} {
		data, err := json.Marshal(l)
		require.NoError(f, err)
		f.Add(data)
	}
	for _, s := range []string{
		`{"k":"decision","order":1,"principal":{"kind":"user","subject":"a"},"principal":null,"principal":{"tenant":"t"},"answer":"x"}`,
		`{"k":"decision","order":1,"revision":{"route":"r"},"revision":null,"revision":{"release":"z"},"answer":"x"}`,
		`{"k":"decision","order":1,"principal":{"kind":"user"},"principal":{"subject":"s"},"answer":"x"}`,
		`{"k":"decision","order":1,"budget":{"wall_time_ns":1},"budget":{"cpu_fuel":2},"answer":"x"}`,
		`{"k":"decision","order":1,"stage":"core","same":7,"priority":0,"payload_bytes":0,"answer":"x"}`,
		`{"k":"decision","order":1,"same":255,"same":256,"answer":"x"}`,
		`{"k":"decision","order":1,"same":-1,"answer":"x"}`,
		`{"k":"load","order":1,"queue_delay_ns":[1],"queue_delay_ns":null}`,
		`{"k":"catalog","order":1,"catalog_json":""}`,
		`{"k":"catalog","order":1,"catalog_generation":1,"catalog_json":"YQ==","catalog_part":1,"catalog_parts":2}`,
		`{"k":"deploy","order":2,"generation":1,"deployment_json":"YQ==","deployment_part":0,"deployment_parts":4294967295}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var recorded, ref Line
		refErr := decodeJSON(data, &ref)
		if decodeRecorded(data, &recorded, new(interner)) {
			require.NoError(t, refErr, "the recorded-line decoder took %q, encoding/json refuses it", data)
			require.Equal(t, ref, recorded, "%q", data)
		}
		if refErr == nil {
			refErr = ref.check()
		}
		var got Line
		err := decodeLine(data, &got, new(interner))
		if refErr != nil {
			assert.Error(t, err, "%q", data)
			return
		}
		require.NoError(t, err, "%q", data)
		require.Equal(t, ref, got, "%q", data)
	})
}
