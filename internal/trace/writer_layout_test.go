package trace

import (
	"testing"
	"unsafe"
)

// The queue's fields, which every Add writes, keep cache lines of their
// own: at least falseSharingBytes from the fields before them and from
// the writing goroutine's, which change with every line it writes.
func TestTheQueueHasCacheLinesOfItsOwn(t *testing.T) {
	var w Writer
	first, last := unsafe.Offsetof(w.mu), unsafe.Offsetof(w.wakeBytes)+unsafe.Sizeof(w.wakeBytes)
	if end := unsafe.Offsetof(w.once) + unsafe.Sizeof(w.once); first-end < falseSharingBytes {
		t.Errorf("the queue begins %d bytes after the fields before it", first-end)
	}
	for name, off := range map[string]uintptr{"written": unsafe.Offsetof(w.written), "f": unsafe.Offsetof(w.f),
		"size": unsafe.Offsetof(w.size), "unflushed": unsafe.Offsetof(w.unflushed), "fragments": unsafe.Offsetof(w.fragments)} {
		if off < last+falseSharingBytes {
			t.Errorf("the writer's %s is %d bytes after the queue's last field", name, off-last)
		}
	}
}
