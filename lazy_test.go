package main

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestLazyConcurrentFirstUse: goroutines that ask a lazy value for the
// first time at once (the ACP and rpc tables, a regexp, under rpi serve's
// connections) all get the one value, built once (run with -race).
func TestLazyConcurrentFirstUse(t *testing.T) {
	var builds atomic.Int32
	l := lazy[*[]int]{build: func() *[]int { builds.Add(1); return &[]int{1, 2, 3} }}
	var wg sync.WaitGroup
	got := make([]*[]int, 16)
	for i := range got {
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = l.get() }()
	}
	wg.Wait()
	for i, v := range got {
		if v != got[0] || len(*v) != 3 {
			t.Errorf("goroutine %d got %v, not the one value %v", i, v, got[0])
		}
	}
	if n := builds.Load(); n != 1 {
		t.Errorf("built %d times", n)
	}
}
