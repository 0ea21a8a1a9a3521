package fleet

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestFairShare(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int64
		wants []int64
		want  []int64
	}{
		{"wants that fit the limit are granted whole", 100, []int64{10, 20, 30}, []int64{10, 20, 30}},
		{"an equal split when all want more", 90, []int64{100, 100, 100}, []int64{30, 30, 30}},
		{"small wants first, the rest split", 100, []int64{10, 200, 200}, []int64{10, 45, 45}},
		{"a remainder goes to the lowest indexes", 10, []int64{9, 9, 9}, []int64{4, 3, 3}},
		{"a remainder skips the satisfied", 11, []int64{50, 1, 50}, []int64{5, 1, 5}},
		{"a zero limit gives nothing", 0, []int64{5, 5}, []int64{0, 0}},
		{"no nodes", 10, nil, []int64{}},
		{"skew: eighty percent at one node", 100, []int64{200, 22, 22}, []int64{56, 22, 22}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fairShare(tc.limit, tc.wants)
			if len(got) != len(tc.want) {
				t.Fatalf("fairShare(%d, %v) = %v, want %v", tc.limit, tc.wants, got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("fairShare(%d, %v) = %v, want %v", tc.limit, tc.wants, got, tc.want)
				}
			}
		})
	}
}

// TestFairShareIsMaxMinFair holds random divisions to the definition: the
// shares sum to min(limit, sum of wants), no share exceeds its want, and a
// node short of its want holds at least as much as any other node, less one
// unit of remainder.
func TestFairShareIsMaxMinFair(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		n := r.IntN(6)
		wants := make([]int64, n)
		var sum int64
		for i := range wants {
			wants[i] = r.Int64N(50)
			sum += wants[i]
		}
		limit := r.Int64N(120)
		got := fairShare(limit, wants)
		var total int64
		for i, s := range got {
			if s < 0 || s > wants[i] {
				t.Fatalf("fairShare(%d, %v) = %v: share %d outside [0, want]", limit, wants, got, i)
			}
			total += s
		}
		if total != min(limit, sum) {
			t.Fatalf("fairShare(%d, %v) = %v: sums to %d, want %d", limit, wants, got, total, min(limit, sum))
		}
		for i := range got {
			if got[i] == wants[i] {
				continue
			}
			for j := range got {
				if got[j] > got[i]+1 {
					t.Fatalf("fairShare(%d, %v) = %v: node %d short of its want holds %d, node %d holds %d", limit, wants, got, i, got[i], j, got[j])
				}
			}
		}
	}
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name                             string
		has, need, ahead, entitled, free int64
		next                             int64
	}{
		{"grows to need plus margin when free and entitled", 10, 13, 2, 40, 30, 15},
		{"grows no further than free", 10, 13, 2, 40, 3, 13},
		{"grows no further than its fair share", 10, 50, 2, 20, 30, 20},
		{"never grows with nothing free", 10, 13, 2, 40, 0, 10},
		{"a negative free (a lowered limit) does not shrink a growing node", 10, 13, 2, 40, -5, 10},
		{"gives back above its fair share", 30, 40, 2, 20, 0, 20},
		{"gives back to its fair share even below live (the caller holds live)", 30, 40, 2, 20, 0, 20},
		{"returns idle beyond twice the margin", 30, 10, 2, 40, 0, 12},
		{"keeps idle within twice the margin", 14, 10, 2, 40, 0, 14},
		{"an idle node returns everything", 5, 0, 0, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.has, tc.need, tc.ahead, tc.entitled, tc.free); got != tc.next {
				t.Fatalf("decide(has %d, need %d, ahead %d, entitled %d, free %d) = %d, want %d",
					tc.has, tc.need, tc.ahead, tc.entitled, tc.free, got, tc.next)
			}
		})
	}
}

func TestNeed(t *testing.T) {
	p := shareParams{aheadFraction: 0.1, minAhead: 1}
	for _, tc := range []struct {
		name                   string
		live, has, limit, need int64
		short                  bool
	}{
		{"an idle node needs nothing", 0, 0, 100, 0, false},
		{"a node refused from nothing needs the margin", 0, 0, 100, 1, true},
		{"a node not refused needs its live count", 50, 60, 100, 50, false},
		{"a short node asks for double", 20, 20, 100, 40, true},
		{"a short node asks for live plus the margin at least", 20, 5, 100, 22, true},
		{"never more than the limit", 80, 80, 100, 100, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.need(tc.live, tc.has, tc.limit, tc.short); got != tc.need {
				t.Fatalf("need(live %d, has %d, limit %d, short %v) = %d, want %d", tc.live, tc.has, tc.limit, tc.short, got, tc.need)
			}
		})
	}
}

func TestEntitled(t *testing.T) {
	p := shareParams{aheadFraction: 0.1, minAhead: 1}
	for _, tc := range []struct {
		name     string
		limit    int64
		needs    []int64
		entitled []int64
	}{
		{"needs that fit get their margins too", 100, []int64{10, 20, 0}, []int64{11, 22, 0}},
		{"needs that fill the limit leave no margin", 40, []int64{40, 8, 8}, []int64{24, 8, 8}},
		{"what needs leave is split over the margins", 20, []int64{10, 9, 0}, []int64{11, 9, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for self, want := range tc.entitled {
				if got := p.entitled(tc.limit, tc.needs, self); got != want {
					t.Fatalf("entitled(%d, %v, %d) = %d, want %d", tc.limit, tc.needs, self, got, want)
				}
			}
		})
	}
}

func TestDecodeLimit(t *testing.T) {
	for _, ok := range []struct {
		in   string
		want int64
	}{{"0", 0}, {"200", 200}, {"1000000000", 1e9}} {
		if got, err := decodeLimit("k", []byte(ok.in)); err != nil || got != ok.want {
			t.Errorf("decodeLimit(%q) = %d, %v; want %d", ok.in, got, err, ok.want)
		}
	}
	for _, bad := range []string{"", "-1", "+5", "05", " 5", "5 ", "1e3", "1000000001", "99999999999", "abc", "{\"limit\":5}"} {
		if _, err := decodeLimit("/latent/fleet/limits/acme", []byte(bad)); err == nil {
			t.Errorf("decodeLimit(%q) accepted", bad)
		} else if !strings.Contains(err.Error(), "/latent/fleet/limits/acme") {
			t.Errorf("decodeLimit(%q): %v does not name the key", bad, err)
		}
	}
}

func TestDecodeSlice(t *testing.T) {
	if got, err := decodeSlice("k", []byte(encodeSlice(sliceValue{Has: 7, Wants: 9}))); err != nil || got != (sliceValue{Has: 7, Wants: 9}) {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	for _, bad := range []string{``, `{}`, `{"has":1}`, `{"has":1,"wants":2,"x":3}`, `{"has":1,"wants":2}{}`, `{"has":1,"wants":2} x`,
		`{"has":-1,"wants":2}`, `{"has":1.5,"wants":2}`, `{"has":1,"wants":2000000000}`, `[1,2]`, `"x"`} {
		if _, err := decodeSlice("/latent/fleet/slices/acme/n1", []byte(bad)); err == nil {
			t.Errorf("decodeSlice(%q) accepted", bad)
		} else if !strings.Contains(err.Error(), "/latent/fleet/slices/acme/n1") {
			t.Errorf("decodeSlice(%q): %v does not name the key", bad, err)
		}
	}
}
