package shadow

import (
	"fmt"
	"sort"
	"time"
	"unicode/utf8"

	"latent.dev/admission/core"
	"latent.dev/admission/internal/trace"
)

// knownAnswers are the answers a replay counts by name.
var knownAnswers = func() map[string]bool {
	m := map[string]bool{trace.AnswerAdmitted: true, trace.AnswerUnauthenticated: true}
	for _, r := range core.Reasons() {
		m[string(r)] = true
	}
	return m
}()

// shorten cuts s to at most MaxNameBytes (on a rune boundary) and marks
// the cut.
func shorten(s string) string {
	if len(s) <= MaxNameBytes {
		return s
	}
	n := MaxNameBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Answer is a decision's answer: trace.AnswerAdmitted, or a refusal's
// reason with its scope and dimension.
type Answer struct {
	Answer    string
	Scope     string
	Dimension string
}

// Admitted reports whether a is an admission.
func (a Answer) Admitted() bool { return a.Answer == trace.AnswerAdmitted }

// String is the answer, then its scope and dimension when set:
// "capacity-exhausted (tenant live-activations)".
func (a Answer) String() string {
	if a.Scope == "" && a.Dimension == "" {
		return a.Answer
	}
	return a.Answer + " (" + a.Scope + " " + a.Dimension + ")"
}

// Change is a decision the candidate answered otherwise.
type Change struct {
	Time                                 time.Time // the decision's time: the trace's start plus T
	Order                                uint64
	Tenant, Service, Route, ActivationID string
	Recorded, Candidate                  Answer
}

// Refusals counts one tenant's refusals for one reason.
type Refusals struct {
	Tenant, Reason      string
	Recorded, Candidate uint64
}

// Result is what a replay found.
type Result struct {
	// Start is the trace's start (its header's StartUnixNano).
	Start time.Time
	// PolicySHA256 is the recorded node policy's, from the header.
	PolicySHA256 string
	// Decisions counts the decision lines; RecordedAdmitted and
	// CandidateAdmitted the admissions among them; Changed those
	// answered otherwise.
	Decisions, RecordedAdmitted, CandidateAdmitted, Changed uint64
	// Estimated counts the decisions the node refused and the candidate
	// admitted, whose holds were estimated.
	Estimated uint64
	// Refusals is per tenant and reason, sorted by tenant then reason:
	// at most KeptTenants tenants by name (the most refused), then
	// OtherTenants. A recorded answer outside the vocabulary counts as
	// OtherAnswer.
	Refusals []Refusals
	// Changes are the first KeptChanges changed decisions, in order.
	Changes []Change
	// Exact is true when nothing in the trace kept the replay from
	// being exact; Inexact says what did.
	Exact   bool
	Inexact []string
	// Times are the series' sample points, since Start.
	Times  []time.Duration
	Series []Series
}

func (r *replay) refusal(tenant, reason string) *Refusals {
	if !knownAnswers[reason] {
		reason = OtherAnswer
	}
	if _, ok := r.tenantIx[tenant]; !ok && !r.tracked[tenant] {
		if len(r.tracked) < trackedTenants {
			r.tracked[tenant] = true
		} else {
			tenant = OtherTenants
		}
	}
	k := [2]string{tenant, reason}
	c := r.refusals[k]
	if c == nil {
		c = &Refusals{Tenant: tenant, Reason: reason}
		r.refusals[k] = c
	}
	return c
}

func (r *replay) result() *Result {
	res := r.res
	res.Refusals = topTenants(r.refusals)
	res.Inexact = r.rd.Stats().Inexact()
	if r.noCatalog {
		res.Inexact = append(res.Inexact, "the trace has no catalog line")
	}
	if r.missingSamples > 0 {
		res.Inexact = append(res.Inexact, fmt.Sprintf("%d decisions judged a load sample the trace did not hold", r.missingSamples))
	}
	if r.futurePins > 0 {
		res.Inexact = append(res.Inexact, fmt.Sprintf("%d decisions resolved in a catalog generation whose change came later in the trace", r.futurePins))
	}
	if r.untracked > 0 {
		res.Inexact = append(res.Inexact, fmt.Sprintf("%d recorded admissions past the %d unreleased ones followed at once", r.untracked, maxOpenHolds))
	}
	if r.oldPins > 0 {
		res.Inexact = append(res.Inexact, fmt.Sprintf("%d decisions resolved in a catalog generation older than the %d kept", r.oldPins, KeptPins))
	}
	res.Exact = len(res.Inexact) == 0
	return &res
}

// topTenants is the refusal rows of the KeptTenants tenants with the most
// refusals, then the others' summed per reason under OtherTenants.
func topTenants(rows map[[2]string]*Refusals) []Refusals {
	totals := map[string]uint64{}
	for _, c := range rows {
		if c.Tenant != OtherTenants {
			totals[c.Tenant] += c.Recorded + c.Candidate
		}
	}
	names := make([]string, 0, len(totals))
	for name := range totals {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if totals[names[i]] != totals[names[j]] {
			return totals[names[i]] > totals[names[j]]
		}
		return names[i] < names[j]
	})
	kept := map[string]bool{}
	for _, name := range names[:min(len(names), KeptTenants)] {
		kept[name] = true
	}
	var out []Refusals
	others := map[string]*Refusals{}
	for _, c := range rows {
		if kept[c.Tenant] {
			row := *c
			row.Tenant = shorten(row.Tenant)
			out = append(out, row)
			continue
		}
		o := others[c.Reason]
		if o == nil {
			o = &Refusals{Tenant: OtherTenants, Reason: c.Reason}
			others[c.Reason] = o
		}
		o.Recorded += c.Recorded
		o.Candidate += c.Candidate
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Tenant != b.Tenant {
			return a.Tenant < b.Tenant
		}
		return a.Reason < b.Reason
	})
	reasons := make([]string, 0, len(others))
	for reason := range others {
		reasons = append(reasons, reason)
	}
	sort.Strings(reasons)
	for _, reason := range reasons {
		out = append(out, *others[reason])
	}
	return out
}
