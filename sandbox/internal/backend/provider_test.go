package backend

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
)

func TestOwned(t *testing.T) {
	objects := []string{"b", "a", "b", "../x", "", "theirs", "a"}
	got := Owned(objects, func(o string) domain.ID { return domain.ID(o) }, func(o string, id domain.ID) bool { return o != "theirs" })
	if want := []domain.ID{"a", "b"}; !slices.Equal(got, want) {
		t.Errorf("Owned(%q) = %q; want %q (valid, ours, once each, sorted)", objects, got, want)
	}
}

// TestRestartsPerSandbox: Lock serializes one sandbox's restarts and lets
// another sandbox's, and another provider's, go on meanwhile.
func TestRestartsPerSandbox(t *testing.T) {
	var r, other Restarts
	unlock := r.Lock("a")
	done := make(chan struct{})
	go func() {
		r.Lock("b")()
		other.Lock("a")()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the lock of sandbox a held sandbox b, or another provider's a")
	}
	var in, most atomic.Int32
	var wg sync.WaitGroup
	unlock()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.Lock("a")()
			n := in.Add(1)
			if n > most.Load() {
				most.Store(n)
			}
			time.Sleep(time.Millisecond)
			in.Add(-1)
		}()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("%d restarts of one sandbox at once; want 1", most.Load())
	}
}
