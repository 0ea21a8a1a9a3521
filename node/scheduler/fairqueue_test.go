package scheduler

import (
	"fmt"
	"testing"
)

// drain serves the queue to the end and returns the tenants in order.
func drain(q *fairQueue) string {
	var out []string
	for q.length > 0 {
		it := q.front()
		q.serve(it)
		out = append(out, it.tenant)
	}
	return fmt.Sprint(out)
}

func pushN(q *fairQueue, tenant string, weight uint64, n int) []*item {
	var items []*item
	for range n {
		it := &item{tenant: tenant}
		q.push(it, weight)
		items = append(items, it)
	}
	return items
}

func TestFairQueue(t *testing.T) {
	t.Run("equal weights alternate whatever the arrival order", func(t *testing.T) {
		var q fairQueue
		pushN(&q, "a", 1, 4)
		pushN(&q, "b", 1, 2)
		if got, want := drain(&q), "[a b a b a a]"; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})
	t.Run("a weight is the flow's dispatches per round", func(t *testing.T) {
		var q fairQueue
		pushN(&q, "a", 2, 4)
		pushN(&q, "b", 1, 3)
		if got, want := drain(&q), "[a a b a a b b]"; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})
	t.Run("removing is not service and keeps the turn", func(t *testing.T) {
		var q fairQueue
		a := pushN(&q, "a", 2, 3)
		pushN(&q, "b", 1, 2)
		first := q.front()
		q.serve(first) // a's turn: one of two used
		q.remove(a[1])
		if got, want := drain(&q), "[a b b]"; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})
	t.Run("an emptied flow is forgotten", func(t *testing.T) {
		var q fairQueue
		a := pushN(&q, "a", 1, 1)
		q.remove(a[0])
		if q.length != 0 || len(q.flows) != 0 || q.first != nil || q.last != nil {
			t.Fatalf("queue not empty: %+v", q)
		}
		pushN(&q, "b", 1, 1)
		if got := drain(&q); got != "[b]" {
			t.Fatalf("got %s", got)
		}
	})
	t.Run("a returning flow queues behind the round", func(t *testing.T) {
		var q fairQueue
		pushN(&q, "a", 1, 2)
		pushN(&q, "b", 1, 1)
		q.serve(q.front()) // a
		q.serve(q.front()) // b, which empties and leaves
		pushN(&q, "b", 1, 1)
		pushN(&q, "c", 1, 1)
		if got, want := drain(&q), "[a b c]"; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})
}
