package policy_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"latent.dev/admission/internal/strictjson"
	"latent.dev/admission/policy"
)

// inMemoryIdentifiers are the identifier locations of a decoded policy,
// for values no JSON file can carry (invalid UTF-8 is refused while
// parsing, before any rule is checked).
func inMemoryIdentifiers() []struct {
	name string
	path string
	set  func(p *policy.NodeAdmissionPolicy, s string)
} {
	return []struct {
		name string
		path string
		set  func(p *policy.NodeAdmissionPolicy, s string)
	}{
		{"tenant id", "tenants[0].id", func(p *policy.NodeAdmissionPolicy, s string) { p.Tenants[0].ID = s }},
		{"principal subject", "tenants[0].principals[1].subject", func(p *policy.NodeAdmissionPolicy, s string) { p.Tenants[0].Principals[1].Subject = s }},
		{"queue class name", "queue_classes[1].name", func(p *policy.NodeAdmissionPolicy, s string) { p.QueueClasses[1].Name = s }},
		{"trust class name", "trust_classes[2].name", func(p *policy.NodeAdmissionPolicy, s string) {
			tc := p.TrustClasses[0]
			tc.Name = s
			p.TrustClasses = append(p.TrustClasses, tc)
		}},
		{"backend", "node.backends[0]", func(p *policy.NodeAdmissionPolicy, s string) { p.Node.Backends[0] = s }},
		{"state model", "node.state_models[0]", func(p *policy.NodeAdmissionPolicy, s string) { p.Node.StateModels[0] = s }},
		{"placement architecture", "node.placement.architecture", func(p *policy.NodeAdmissionPolicy, s string) { p.Node.Placement.Architecture = s }},
		{"placement region", "node.placement.region", func(p *policy.NodeAdmissionPolicy, s string) { p.Node.Placement.Region = s }},
		{"placement zone", "node.placement.zone", func(p *policy.NodeAdmissionPolicy, s string) { p.Node.Placement.Zone = s }},
		{"cell class feature", "cell_classes[3].features[1]", func(p *policy.NodeAdmissionPolicy, s string) { p.CellClasses[3].Features[1] = s }},
	}
}

func TestValidateIdentifierEncoding(t *testing.T) {
	encodings := []struct {
		name  string
		value string
		valid bool
	}{
		{"invalid byte 0xff is rejected", "a\xffb", false},
		{"truncated multi-byte rune is rejected", "caf\xc3", false},
		{"encoded surrogate is rejected", "a\xed\xa0\x80", false},
		{"overlong encoding is rejected", "a\xc0\xafb", false},
		{"literal U+FFFD is accepted", "a\ufffdb", true},
	}
	for _, loc := range inMemoryIdentifiers() {
		for _, enc := range encodings {
			t.Run(loc.name+" "+enc.name, func(t *testing.T) {
				p := decodeValid(t)
				loc.set(p, enc.value)
				err := p.Validate()
				if enc.valid {
					if err != nil {
						t.Fatalf("Validate: %v", err)
					}
					return
				}
				assertProblems(t, problemsOf(t, err), []want{{loc.path, notIdentifier}})
			})
		}
	}
}

func TestValidateAcceptsTheValidPolicy(t *testing.T) {
	if err := decodeValid(t).Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

// A node maximum priority that only a program (not a file) can set must be
// refused without sizing anything by it.
func TestValidateMaximumPriorityBeyondMaxPriority(t *testing.T) {
	for _, maxPriority := range []uint32{policy.MaxPriority + 1, math.MaxUint32} {
		t.Run(fmt.Sprint(maxPriority), func(t *testing.T) {
			p := decodeValid(t)
			p.Node.MaximumPriority = maxPriority
			assertProblems(t, problemsOf(t, p.Validate()), []want{
				{"node.maximum_priority", fmt.Sprintf("must be at most %d", policy.MaxPriority)},
			})
		})
	}
}

// The zero policy grants nothing and breaks exactly the rules that demand
// a positive or bounded value; with no identifier allowance, identifier
// checks stay quiet instead of repeating that problem.
func TestValidateZeroPolicy(t *testing.T) {
	var p policy.NodeAdmissionPolicy
	assertProblems(t, problemsOf(t, p.Validate()), []want{
		{"node.maximum_identifier_bytes", "must be positive"},
		{"node.maximum_generated_identifier_bytes", "must be at least 83"},
		{"node.budget_ceiling.wall_time_ms", "must be positive"},
		{"node.overload.cpu_threshold", "must be in (0, 1]"},
		{"node.overload.memory_threshold", "must be in (0, 1]"},
		{"node.overload.maximum_observation_age_ms", "must be positive"},
		{"queue_classes", "priority 0 is in no queue class"},
	})
}

func TestValidateRejectsNonFiniteThresholds(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.SmallestNonzeroFloat64 * -1} {
		t.Run(fmt.Sprint(f), func(t *testing.T) {
			p := decodeValid(t)
			p.Node.Overload.CPUThreshold = f
			assertProblems(t, problemsOf(t, p.Validate()), []want{{"node.overload.cpu_threshold", "must be in (0, 1]"}})
		})
	}
}

func TestValidateRejectsNegativeDurations(t *testing.T) {
	p := decodeValid(t)
	p.Node.BudgetCeiling.WallTime = -1
	p.Node.Overload.MaximumObservationAge = -1
	assertProblems(t, problemsOf(t, p.Validate()), []want{
		{"node.budget_ceiling.wall_time_ms", "must be positive"},
		{"node.overload.maximum_observation_age_ms", "must be positive"},
	})
}

func TestValidateRejectsNegativeDeadlineEstimatesBuiltInCode(t *testing.T) {
	p := decodeValid(t)
	p.Node.Deadline.SafetyMargin = -1
	p.Node.Deadline.EstimatedServiceTime = -time.Millisecond
	got := strictjson.AsProblems(p.Validate())
	want := "node.deadline.estimated_service_time_ms: must not be negative\nnode.deadline.safety_margin_ms: must not be negative"
	if got.Error() != want {
		t.Fatalf("got:\n%v\nwant:\n%s", got, want)
	}
}
