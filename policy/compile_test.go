package policy_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"latent.dev/admission/policy"
)

func compileValid(t testing.TB) (*policy.NodeAdmissionPolicy, *policy.Compiled) {
	t.Helper()
	p := decodeValid(t)
	c, err := policy.Compile(p)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return p, c
}

func TestCompileAssignsDenseIDsInFileOrder(t *testing.T) {
	_, c := compileValid(t)

	tenants := []string{"acme", "globex", "initech", "umbrella"}
	if c.NumTenants() != len(tenants) {
		t.Fatalf("NumTenants = %d, want %d", c.NumTenants(), len(tenants))
	}
	for i, name := range tenants {
		id, ok := c.TenantID(name)
		if !ok || id != policy.TenantID(i) {
			t.Errorf("TenantID(%q) = %d, %v; want %d", name, id, ok, i)
		}
		if s := c.Tenant(policy.TenantID(i)); s.ID != policy.TenantID(i) || s.Name != name {
			t.Errorf("Tenant(%d) = {ID %d, Name %q}, want {%d, %q}", i, s.ID, s.Name, i, name)
		}
	}

	trust := []string{"standard", "privileged"}
	if c.NumTrustClasses() != len(trust) {
		t.Fatalf("NumTrustClasses = %d, want %d", c.NumTrustClasses(), len(trust))
	}
	for i, name := range trust {
		id, ok := c.TrustClassID(name)
		if !ok || id != policy.TrustClassID(i) {
			t.Errorf("TrustClassID(%q) = %d, %v; want %d", name, id, ok, i)
		}
		if s := c.TrustClass(policy.TrustClassID(i)); s.ID != policy.TrustClassID(i) || s.Name != name {
			t.Errorf("TrustClass(%d) = {ID %d, Name %q}, want {%d, %q}", i, s.ID, s.Name, i, name)
		}
	}

	queues := []string{"batch", "interactive"}
	if c.NumQueueClasses() != len(queues) {
		t.Fatalf("NumQueueClasses = %d, want %d", c.NumQueueClasses(), len(queues))
	}
	for i, name := range queues {
		id, ok := c.QueueClassID(name)
		if !ok || id != policy.QueueClassID(i) {
			t.Errorf("QueueClassID(%q) = %d, %v; want %d", name, id, ok, i)
		}
		if s := c.QueueClass(policy.QueueClassID(i)); s.ID != policy.QueueClassID(i) || s.Name != name {
			t.Errorf("QueueClass(%d) = {ID %d, Name %q}, want {%d, %q}", i, s.ID, s.Name, i, name)
		}
	}

	for _, unknown := range []string{"", "nobody", "ACME"} {
		if _, ok := c.TenantID(unknown); ok {
			t.Errorf("TenantID(%q) found", unknown)
		}
		if _, ok := c.TrustClassID(unknown); ok {
			t.Errorf("TrustClassID(%q) found", unknown)
		}
		if _, ok := c.QueueClassID(unknown); ok {
			t.Errorf("QueueClassID(%q) found", unknown)
		}
	}
}

func TestCompileKeepsSettings(t *testing.T) {
	_, c := compileValid(t)
	if got, want := c.QueueClass(1), (policy.QueueClassSettings{ID: 1, Name: "interactive", MinPriority: 5, MaxPriority: 9, MaxQueued: 3}); got != want {
		t.Errorf("QueueClass(1) = %+v, want %+v", got, want)
	}
	wantTenant := policy.TenantSettings{
		ID: 3, Name: "umbrella", TrustClasses: 1,
		CellClasses:     policy.CellClassSet(0).With(policy.Tiny).With(policy.Small),
		MaximumPriority: 4, MaximumPayloadBytes: 65536,
		Limits: policy.Limits{MaxLiveActivations: 4, MaxQueuedReservations: 0, MaxReservedCPUFuel: 4000000000, MaxReservedMemoryBytes: 268435456},
	}
	if got := c.Tenant(3); got != wantTenant {
		t.Errorf("Tenant(3) = %+v, want %+v", got, wantTenant)
	}
	wantTrust := policy.TrustClassSettings{
		ID: 1, Name: "privileged",
		CellClasses: policy.CellClassSet(0).With(policy.Tiny).With(policy.Small).With(policy.Standard).With(policy.ExtraLarge),
		Limits:      policy.Limits{MaxLiveActivations: 8, MaxQueuedReservations: 8, MaxReservedCPUFuel: 10000000000, MaxReservedMemoryBytes: 4294967296},
	}
	if got := c.TrustClass(1); got != wantTrust {
		t.Errorf("TrustClass(1) = %+v, want %+v", got, wantTrust)
	}
	wantNode := policy.NodeSettings{
		Placement:     policy.Placement{Architecture: "x86_64", Region: "eu-west", Zone: "eu-west-1a"},
		BudgetCeiling: policy.NodeBudgetCeiling{CPUFuel: 5000000000, MemoryBytes: 1073741824, WallTime: 30 * time.Second},
		Limits: policy.Limits{MaxLiveActivations: 64, MaxQueuedReservations: 48,
			MaxReservedCPUFuel: 100000000000, MaxReservedMemoryBytes: 17179869184},
		MaximumPayloadBytes:             1048576,
		MaximumPriority:                 9,
		MaximumIdentifierBytes:          64,
		MaximumGeneratedIdentifierBytes: 96,
		MaximumMetadataEntries:          8,
		MaximumMetadataBytes:            256,
		Overload:                        policy.OverloadPolicy{CPUThreshold: 0.9, MemoryThreshold: 0.85, MaximumObservationAge: 2 * time.Second},
		Deadline: policy.DeadlinePolicy{EstimatedServiceTime: 100 * time.Millisecond,
			MinimumExecutionTime: 20 * time.Millisecond, SafetyMargin: 10 * time.Millisecond},
	}
	if got := c.Node(); got != wantNode {
		t.Errorf("Node() = %+v\nwant %+v", got, wantNode)
	}
	if got := c.Backends(); !slices.Equal(got, []string{"wasm"}) {
		t.Errorf("Backends() = %q", got)
	}
	if got := c.StateModels(); !slices.Equal(got, []string{"stateless"}) {
		t.Errorf("StateModels() = %q", got)
	}
	if !c.SupportsBackend("wasm") || c.SupportsBackend("native") || c.SupportsBackend("") {
		t.Error("SupportsBackend disagrees with node.backends")
	}
	if !c.SupportsStateModel("stateless") || c.SupportsStateModel("stateful") || c.SupportsStateModel("") {
		t.Error("SupportsStateModel disagrees with node.state_models")
	}
}

func TestQueueClassFor(t *testing.T) {
	_, c := compileValid(t)
	for pr := uint32(0); pr <= 9; pr++ {
		want := policy.QueueClassID(0)
		if pr >= 5 {
			want = 1
		}
		if got, ok := c.QueueClassFor(pr); !ok || got != want {
			t.Errorf("QueueClassFor(%d) = %d, %v; want %d", pr, got, ok, want)
		}
	}
	for _, pr := range []uint32{10, policy.MaxPriority, policy.MaxPriority + 1, math.MaxUint32} {
		if got, ok := c.QueueClassFor(pr); ok {
			t.Errorf("QueueClassFor(%d) = %d, true; want out of range", pr, got)
		}
	}
}

// The table follows the ranges, not the order the classes are listed in,
// and a class that reaches past the node maximum is cut at it.
func TestQueueClassForFollowsRanges(t *testing.T) {
	p := decodeValid(t)
	p.QueueClasses = []policy.QueueClassPolicy{
		{Name: "high", MinPriority: 7, MaxPriority: 100, MaxQueued: 1},
		{Name: "low", MinPriority: 0, MaxPriority: 2, MaxQueued: 1},
		{Name: "mid", MinPriority: 3, MaxPriority: 6, MaxQueued: 1},
	}
	c := policy.MustCompile(p)
	want := []policy.QueueClassID{1, 1, 1, 2, 2, 2, 2, 0, 0, 0}
	for pr, w := range want {
		if got, ok := c.QueueClassFor(uint32(pr)); !ok || got != w {
			t.Errorf("QueueClassFor(%d) = %d, %v; want %d", pr, got, ok, w)
		}
	}
	if _, ok := c.QueueClassFor(10); ok {
		t.Error("QueueClassFor(10) is in range; the node maximum is 9")
	}
}

func TestQueueClassForAtMaxPriority(t *testing.T) {
	p := decodeValid(t)
	p.Node.MaximumPriority = policy.MaxPriority
	p.QueueClasses = []policy.QueueClassPolicy{
		{Name: "low", MinPriority: 0, MaxPriority: 9, MaxQueued: 1},
		{Name: "high", MinPriority: 10, MaxPriority: policy.MaxPriority, MaxQueued: 1},
	}
	c := policy.MustCompile(p)
	if got, ok := c.QueueClassFor(policy.MaxPriority); !ok || got != 1 {
		t.Errorf("QueueClassFor(MaxPriority) = %d, %v; want 1", got, ok)
	}
	if _, ok := c.QueueClassFor(policy.MaxPriority + 1); ok {
		t.Error("QueueClassFor(MaxPriority+1) is in range")
	}
}

func cellSet(classes ...policy.CellClass) policy.CellClassSet {
	var s policy.CellClassSet
	for _, c := range classes {
		s = s.With(c)
	}
	return s
}

func TestCompileTenantSets(t *testing.T) {
	_, c := compileValid(t)
	standard, _ := c.TrustClassID("standard")
	privileged, _ := c.TrustClassID("privileged")
	cases := []struct {
		tenant string
		trust  []policy.TrustClassID
		cells  policy.CellClassSet
	}{
		{"acme", []policy.TrustClassID{standard}, cellSet(policy.Tiny, policy.Small, policy.Standard)},
		{"globex", []policy.TrustClassID{standard, privileged}, cellSet(policy.Tiny, policy.Small, policy.Standard, policy.ExtraLarge)},
		{"initech", []policy.TrustClassID{standard}, cellSet(policy.Tiny, policy.Small)},
	}
	for _, tc := range cases {
		t.Run(tc.tenant, func(t *testing.T) {
			id, _ := c.TenantID(tc.tenant)
			s := c.Tenant(id)
			var wantBits uint64
			for _, tr := range tc.trust {
				wantBits |= 1 << uint(tr)
			}
			if s.TrustClasses != wantBits {
				t.Errorf("TrustClasses = %b, want %b", s.TrustClasses, wantBits)
			}
			for tr := policy.TrustClassID(-1); tr <= 64; tr++ {
				if got, want := s.PermitsTrustClass(tr), slices.Contains(tc.trust, tr); got != want {
					t.Errorf("PermitsTrustClass(%d) = %v, want %v", tr, got, want)
				}
			}
			if s.CellClasses != tc.cells {
				t.Errorf("CellClasses = %b, want %b", s.CellClasses, tc.cells)
			}
		})
	}
}

func TestCompileTrustClassCellSets(t *testing.T) {
	_, c := compileValid(t)
	if got, want := c.TrustClass(0).CellClasses, cellSet(policy.Tiny, policy.Small, policy.Standard); got != want {
		t.Errorf("standard cell classes = %b, want %b", got, want)
	}
	if got := c.TrustClass(1).CellClasses; !got.Has(policy.ExtraLarge) || got.Has(policy.Large) {
		t.Errorf("privileged cell classes = %b", got)
	}
}

// With MaxTrustClasses classes the last one still gets its own bit.
func TestCompileTrustClassBitsetAtTheLimit(t *testing.T) {
	p := decodeValid(t)
	for i := len(p.TrustClasses); i < policy.MaxTrustClasses; i++ {
		tc := p.TrustClasses[0]
		tc.Name = fmt.Sprintf("extra-%d", i)
		p.TrustClasses = append(p.TrustClasses, tc)
	}
	last := p.TrustClasses[policy.MaxTrustClasses-1].Name
	p.Tenants[0].TrustClasses = []string{last}
	c := policy.MustCompile(p)
	s := c.Tenant(0)
	if s.TrustClasses != 1<<63 || !s.PermitsTrustClass(policy.MaxTrustClasses-1) || s.PermitsTrustClass(0) {
		t.Errorf("TrustClasses = %b", s.TrustClasses)
	}
}

func TestCompileCellClasses(t *testing.T) {
	_, c := compileValid(t)
	simd, _ := c.Feature("simd")
	threads, _ := c.Feature("threads")
	single := policy.ThreadingSet(0).With(policy.SingleThreaded)
	both := single.With(policy.MultiThreaded)
	want := map[policy.CellClass]policy.CellClassSettings{
		policy.Tiny:       {Class: policy.Tiny, Configured: true, MemoryBytes: 16777216, Parallelism: 8, Threading: single},
		policy.Small:      {Class: policy.Small, Configured: true, MemoryBytes: 67108864, Parallelism: 4, Threading: single, Features: simd},
		policy.Standard:   {Class: policy.Standard, Configured: true, MemoryBytes: 268435456, Parallelism: 2, Threading: both, Features: simd},
		policy.Large:      {Class: policy.Large},
		policy.ExtraLarge: {Class: policy.ExtraLarge, Configured: true, MemoryBytes: 805306368, Parallelism: 1, Threading: both, Features: simd | threads},
		5:                 {Class: 5},
		255:               {Class: 255},
	}
	for class, w := range want {
		if got := c.CellClass(class); got != w {
			t.Errorf("CellClass(%v) = %+v, want %+v", class, got, w)
		}
	}
}

func TestCompileFeatureBits(t *testing.T) {
	_, c := compileValid(t)
	if got := c.Features(); !slices.Equal(got, []string{"simd", "threads"}) {
		t.Fatalf("Features() = %q, want first-seen order [simd threads]", got)
	}
	for i, name := range c.Features() {
		bit, ok := c.Feature(name)
		if !ok || bit != policy.FeatureSet(1)<<i {
			t.Errorf("Feature(%q) = %b, %v; want bit %d", name, bit, ok, i)
		}
	}
	for _, name := range []string{"", "avx", "SIMD"} {
		if bit, ok := c.Feature(name); ok || bit != 0 {
			t.Errorf("Feature(%q) = %b, %v; want absent", name, bit, ok)
		}
	}
}

func TestCompileFeatureBitsAtTheLimit(t *testing.T) {
	p := decodeValid(t)
	for i := range p.CellClasses {
		p.CellClasses[i].Features = nil
	}
	for i := 0; i < policy.MaxFeatures; i++ {
		p.CellClasses[0].Features = append(p.CellClasses[0].Features, fmt.Sprintf("feature-%d", i))
	}
	c := policy.MustCompile(p)
	if got := len(c.Features()); got != policy.MaxFeatures {
		t.Fatalf("%d features, want %d", got, policy.MaxFeatures)
	}
	if got := c.CellClass(policy.Tiny).Features; got != ^policy.FeatureSet(0) {
		t.Errorf("tiny features = %b, want all 64 bits", got)
	}
	if bit, ok := c.Feature("feature-63"); !ok || bit != 1<<63 {
		t.Errorf("Feature(feature-63) = %b, %v; want the top bit", bit, ok)
	}
}

func TestAuthorized(t *testing.T) {
	_, c := compileValid(t)
	acme, _ := c.TenantID("acme")
	globex, _ := c.TenantID("globex")
	cases := []struct {
		name    string
		tenant  policy.TenantID
		kind    policy.PrincipalKind
		subject string
		want    bool
	}{
		{"listed user", acme, policy.UserPrincipal, "alice", true},
		{"listed service", acme, policy.ServicePrincipal, "billing", true},
		{"user subject as a service", acme, policy.ServicePrincipal, "alice", false},
		{"service subject as a user", acme, policy.UserPrincipal, "billing", false},
		{"anonymous with a listed subject", acme, policy.AnonymousPrincipal, "alice", false},
		{"anonymous without a subject", acme, policy.AnonymousPrincipal, "", false},
		{"unknown subject", acme, policy.UserPrincipal, "mallory", false},
		{"empty subject", acme, policy.UserPrincipal, "", false},
		{"subject differing in case", acme, policy.UserPrincipal, "Alice", false},
		{"another tenant's user", globex, policy.UserPrincipal, "alice", false},
		{"that tenant's own user", globex, policy.UserPrincipal, "bob", true},
		{"zero kind", acme, 0, "alice", false},
		{"out-of-range kind", acme, 200, "alice", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.Authorized(tc.tenant, tc.kind, tc.subject); got != tc.want {
				t.Errorf("Authorized(%d, %v, %q) = %v, want %v", tc.tenant, tc.kind, tc.subject, got, tc.want)
			}
		})
	}
}

// A subject listed as both kinds is authorized as each.
func TestAuthorizedSameSubjectBothKinds(t *testing.T) {
	p := decodeValid(t)
	p.Tenants[0].Principals = append(p.Tenants[0].Principals, policy.PrincipalPolicy{Kind: "service", Subject: "alice"})
	c := policy.MustCompile(p)
	if !c.Authorized(0, policy.UserPrincipal, "alice") || !c.Authorized(0, policy.ServicePrincipal, "alice") {
		t.Error("alice is not authorized as both user and service")
	}
}

func TestCompileRejectsAnInvalidPolicy(t *testing.T) {
	p := decodeValid(t)
	p.Node.BudgetCeiling.WallTime = 0
	c, err := policy.Compile(p)
	if c != nil {
		t.Error("Compile returned a policy along with its error")
	}
	assertProblems(t, problemsOf(t, err), []want{{"node.budget_ceiling.wall_time_ms", "must be positive"}})
}

func TestMustCompilePanicsOnAnInvalidPolicy(t *testing.T) {
	p := decodeValid(t)
	p.Tenants[1].ID = p.Tenants[0].ID
	defer func() {
		msg, _ := recover().(string)
		if !strings.HasPrefix(msg, "policy: MustCompile: ") || !strings.Contains(msg, "tenants[1].id: duplicates tenants[0]") {
			t.Errorf("panic = %q, want a policy-prefixed message naming the problem", msg)
		}
	}()
	policy.MustCompile(p)
}

// TestAuthorizedPrincipalAgreesWithTheAllowlists checks step 3's
// combined lookup against the per-tenant answers, for every listed
// principal, each kind, unknown tenants and subjects, a subject listed
// only under another tenant, and many tenants (so the table's probe
// sequences wrap and collide).
func TestAuthorizedPrincipalAgreesWithTheAllowlists(t *testing.T) {
	p := decodeValid(t)
	base := p.Tenants[0]
	for i := 0; i < 300; i++ {
		tn := base
		tn.ID = fmt.Sprintf("bulk-%d", i)
		tn.Principals = []policy.PrincipalPolicy{{Kind: "user", Subject: fmt.Sprintf("u%d", i%17)}, {Kind: "service", Subject: "shared"}}
		p.Tenants = append(p.Tenants, tn)
	}
	// Names past eight bytes take the table's other path, and "abcd"
	// reads as the same word as "abcdabcd" on the short one.
	for _, names := range [][2]string{{"a-tenant-of-some-length", "alice"}, {"abcdabcd", "a-subject-of-some-length"}, {"abcd", "abcdabcd"}} {
		tn := base
		tn.ID = names[0]
		tn.Principals = []policy.PrincipalPolicy{{Kind: "user", Subject: names[1]}}
		p.Tenants = append(p.Tenants, tn)
	}
	c := policy.MustCompile(p)
	subjects := []string{"", "nobody", "shared", "u3", "u16", "alice", "bob", "abcd", "a-subject-of-some-lengtH"}
	for _, tp := range p.Tenants {
		for _, pr := range tp.Principals {
			subjects = append(subjects, pr.Subject)
		}
	}
	tenants := []string{"", "unknown", "ACME", "abcdabcdabcd", "a-tenant-of-some-lengtH"}
	for _, tp := range p.Tenants {
		tenants = append(tenants, tp.ID)
	}
	kinds := []policy.PrincipalKind{policy.UserPrincipal, policy.ServicePrincipal, policy.AnonymousPrincipal, 7}
	for _, tenant := range tenants {
		for _, subject := range subjects {
			for _, kind := range kinds {
				wantID, known := c.TenantID(tenant)
				want := known && c.Authorized(wantID, kind, subject)
				id, ok := c.AuthorizedPrincipal(tenant, kind, subject)
				if ok != want || (ok && id != wantID) {
					t.Fatalf("AuthorizedPrincipal(%q, %v, %q) = %d %v, want %d %v", tenant, kind, subject, id, ok, wantID, want)
				}
			}
		}
	}
}

// TestTrustClassIDByNameAtEverySize: the lookup compares names for a few
// classes and uses the map beyond; both must answer alike.
func TestTrustClassIDByNameAtEverySize(t *testing.T) {
	for _, n := range []int{1, 8, 9, policy.MaxTrustClasses} {
		p := decodeValid(t)
		for i := len(p.TrustClasses); i < n; i++ {
			tc := p.TrustClasses[0]
			tc.Name = fmt.Sprintf("extra-%d", i)
			p.TrustClasses = append(p.TrustClasses, tc)
		}
		if len(p.TrustClasses) > n {
			continue
		}
		c := policy.MustCompile(p)
		for i, tc := range p.TrustClasses {
			if id, ok := c.TrustClassID(tc.Name); !ok || id != policy.TrustClassID(i) {
				t.Fatalf("%d classes: TrustClassID(%q) = %d %v, want %d", n, tc.Name, id, ok, i)
			}
		}
		for _, name := range []string{"", "extra-999", "Standard"} {
			if _, ok := c.TrustClassID(name); ok {
				t.Fatalf("%d classes: %q found", n, name)
			}
		}
	}
}

// TestAuthorizedPrincipalWithEmptyAllowlists: a policy that lists no
// principal at all is valid; every lookup answers false.
func TestAuthorizedPrincipalWithEmptyAllowlists(t *testing.T) {
	p := decodeValid(t)
	for i := range p.Tenants {
		p.Tenants[i].Principals = nil
	}
	c := policy.MustCompile(p)
	for _, tp := range p.Tenants {
		for _, kind := range []policy.PrincipalKind{policy.UserPrincipal, policy.ServicePrincipal} {
			if _, ok := c.AuthorizedPrincipal(tp.ID, kind, "alice"); ok {
				t.Fatalf("%s: a principal was authorized by an empty allowlist", tp.ID)
			}
		}
	}
}
