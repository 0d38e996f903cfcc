//go:build race

package main

// The lock order's checker, in race builds (go test -race): each
// goroutine's held locks are kept, and a lock taken out of lockOrder's
// order, or a callout made while a core lock is held, ends the program
// with what was held and where.

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
)

// lockRank is each lock's place in lockOrder.
var lockRank = func() map[string]int {
	ranks := map[string]int{}
	for i, l := range lockOrder {
		ranks[l.name] = i
	}
	return ranks
}()

// heldLock is one lock a goroutine holds.
type heldLock struct {
	name string
	lock any // the *mutex
}

// lockHolders is, by goroutine, the locks it holds, in the order taken.
var lockHolders = struct {
	sync.Mutex
	by map[uint64][]heldLock
}{by: map[uint64][]heldLock{}}

// goroutineID is the calling goroutine's number, as its stack says.
func goroutineID() uint64 {
	var buf [64]byte
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	id, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

func heldBy(id uint64) []heldLock {
	lockHolders.Lock()
	defer lockHolders.Unlock()
	return append([]heldLock(nil), lockHolders.by[id]...)
}

func (m *mutex[N]) Lock() {
	var n N
	name := n.lockName()
	rank, ok := lockRank[name]
	if !ok {
		lockOrderBroken(name+" is not in lockOrder", nil)
	}
	id := goroutineID()
	held := heldBy(id)
	for _, h := range held {
		if lockRank[h.name] >= rank {
			lockOrderBroken(fmt.Sprintf("%s taken while %s is held (lockOrder has %s first)", name, h.name,
				lockOrder[min(rank, lockRank[h.name])].name), held)
		}
	}
	m.Mutex.Lock()
	lockHolders.Lock()
	lockHolders.by[id] = append(lockHolders.by[id], heldLock{name, m})
	lockHolders.Unlock()
}

// TryLock records a lock it takes, as Lock does (it cannot wait, so its
// own order needs no check).
func (m *mutex[N]) TryLock() bool {
	if !m.Mutex.TryLock() {
		return false
	}
	var n N
	lockHolders.Lock()
	id := goroutineID()
	lockHolders.by[id] = append(lockHolders.by[id], heldLock{n.lockName(), m})
	lockHolders.Unlock()
	return true
}

func (m *mutex[N]) Unlock() {
	lockHolders.Lock()
	id := goroutineID()
	if !forgetHeld(id, m) { // unlocked by another goroutine than took it
		for other := range lockHolders.by {
			if forgetHeld(other, m) {
				break
			}
		}
	}
	lockHolders.Unlock()
	m.Mutex.Unlock()
}

// forgetHeld drops lock from what goroutine id holds; lockHolders is held.
func forgetHeld(id uint64, lock any) bool {
	held := lockHolders.by[id]
	for i := len(held) - 1; i >= 0; i-- {
		if held[i].lock == lock {
			held = append(held[:i], held[i+1:]...)
			if len(held) == 0 {
				delete(lockHolders.by, id)
			} else {
				lockHolders.by[id] = held
			}
			return true
		}
	}
	return false
}

// checkCallout is called where the core calls a front end (what says
// which call): the goroutine must hold no lock of the core's.
func checkCallout(what string) {
	held := heldBy(goroutineID())
	for _, h := range held {
		if lockOrder[lockRank[h.name]].side == coreLock {
			lockOrderBroken(fmt.Sprintf("a call out of the core (%s) while %s is held", what, h.name), held)
		}
	}
}

// lockOrderBroken ends the program: a lock order broken is a deadlock
// waiting for its interleaving. With RPI_LOCK_ORDER=report it tells each
// breach once and goes on, to list them all in one run.
func lockOrderBroken(what string, held []heldLock) {
	var names []string
	for _, h := range held {
		names = append(names, h.name)
	}
	report := fmt.Sprintf("rpi: lock order broken: %s; held: [%s]\n", what, strings.Join(names, " "))
	if os.Getenv("RPI_LOCK_ORDER") == "report" {
		if _, told := breachesTold.LoadOrStore(report, true); !told {
			fmt.Fprintf(os.Stderr, "%s%s", report, debug.Stack())
		}
		return
	}
	fmt.Fprintf(os.Stderr, "%s%s", report, debug.Stack())
	os.Exit(3)
}

var breachesTold sync.Map
