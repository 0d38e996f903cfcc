package main

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The environment rpi runs in, as runProgram is given it: the variables (and
// hiding the ones keys came from), the clock, the startup trace.

// keyArguments says which of a command line's arguments hold a key, and
// where in each the key starts: all of K in --api-key K, what follows the
// "=" in --api-key=K.
func keyArguments(args []string) map[int]int {
	keys := map[int]int{}
	for i, arg := range args {
		name, _, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		switch {
		case !strings.HasPrefix(arg, "-") || name != "api-key":
		case hasValue:
			keys[i] = strings.Index(arg, "=") + 1
		case i+1 < len(args):
			keys[i+1] = 0
		}
	}
	return keys
}

// hideOwnVariables removes the variables rpi read keys from from its own
// environment, both the runtime's copy and the memory the kernel shows as
// /proc/<rpi>/environ, once the keys are read.
func hideOwnVariables(names []string) {
	set := variablesNamed(os.Environ(), names) // nothing else to overwrite
	for _, name := range names {
		os.Unsetenv(name)
	}
	if len(set) == 0 {
		forgetOwnMemory()
		return
	}
	if err := hideVariables(set); err != nil {
		fmt.Fprintf(os.Stderr, "rpi: cannot clear the key variables in rpi's own memory: %v\n", err)
	}
	forgetOwnMemory() // the last of what rpi overwrites in its own memory
}

// variablesNamed returns those of names that environ names, with a
// value or empty. An empty one may still hide a key: a raw execve can
// name a variable twice, and Go keeps only the first copy (os.Environ
// shows "NAME="), while the memory /proc/<rpi>/environ shows still holds
// the second; hideVariables overwrites every copy there.
func variablesNamed(environ, names []string) []string {
	var named []string
	for _, name := range names {
		if slices.ContainsFunc(environ, func(kv string) bool { return strings.HasPrefix(kv, name) && strings.HasPrefix(kv[len(name):], "=") }) {
			named = append(named, name)
		}
	}
	return named
}

// runEnv is everything rpi takes from the machine besides its
// arguments and stdio, so that tests can give each run its own.
type runEnv struct {
	getenv       func(string) string
	environ      []string // the variables children start from (before provider keys are removed)
	clock        clock
	tempDir      string // where rpi's own temp folder goes
	maxLineBytes int
	executable   string // rpi's binary, started again as the watchdog; "" for none
	program      string // the name rpi was started as ("pi" selects pi's shapes)
	// command builds every child rpi runs; nil is exec.Command (the fuzz
	// test replaces it so that no input can run a real program).
	command func(name string, args ...string) *exec.Cmd
	trace   *startupTrace // the phases of startup on stderr; nil for none
	// signalsReady, when set, is closed once rpi's signal handlers are
	// installed; the first line waits for it.
	signalsReady <-chan struct{}
	// exit ends the process at once (os.Exit); nil in in-process tests.
	exit func(code int)
	// hideVariables, once the keys are read, removes the variables they
	// came from from rpi's own environment; nil in in-process tests.
	hideVariables func(names []string)
	// setenv sets a variable of rpi's own environment (os.Setenv), where
	// settings.json's httpProxy fills HTTP_PROXY and HTTPS_PROXY for its
	// own requests; nil in in-process tests.
	setenv func(name, value string) error
	// adoptOrphans, when set, makes rpi adopt what its commands leave
	// behind, before the first child starts, and call reap as a process
	// exits; endOrphans ends what it adopted, but the children keep names
	// (its own, the watchdog), at rpi's end; nil in in-process tests,
	// where the process's other children are the tests' own.
	adoptOrphans func(reap func())
	endOrphans   func(keep func(pid int) bool)
	// reapAdopted reaps, while rpi runs, what it adopted that has exited,
	// but the children keep names; nil in in-process tests.
	reapAdopted func(keep func(pid int) bool)
	// lockWait is how long opening a session file another rpi holds
	// waits for it (0: sessionLockWait).
	lockWait time.Duration
	// finishWrites is how long rpi serve gives a client that is leaving,
	// or slow, to take each write of what waits for it (0:
	// finishWriteLimit).
	finishWrites time.Duration
	// keepEnded is how many ended processes each session keeps (0:
	// maxEndedProcesses); tests lower it.
	keepEnded int
}

// hostEnvironment is the real machine's.
func hostEnvironment() runEnv {
	exe, _ := os.Executable()
	return runEnv{getenv: os.Getenv, environ: os.Environ(), clock: realClock{}, tempDir: os.TempDir(),
		maxLineBytes: maxLineBytes, executable: exe, program: filepath.Base(os.Args[0])}
}

// startupTrace, with RPI_TRACE_STARTUP=1, writes to stderr how long each
// phase of startup took, from main's first line to session_started, and
// how many page faults the process took in it (all its threads; unlike a
// time, a count the machine's other work hardly moves). What comes before
// main (the runtime and every package's init) shows with
// GODEBUG=inittrace=1.
type startupTrace struct {
	w           io.Writer
	start, last time.Time
	own         time.Duration // spent writing the trace, left out of every figure
	faults      int64         // pageFaults at the end of the last phase, after the trace's own line
}

// newStartupTrace is nil, which traces nothing, unless RPI_TRACE_STARTUP=1.
func newStartupTrace(w io.Writer) *startupTrace {
	if os.Getenv("RPI_TRACE_STARTUP") != "1" {
		return nil
	}
	now := time.Now()
	return &startupTrace{w: w, start: now, last: now, faults: pageFaults()}
}

// phase reports the phase that has just ended.
func (t *startupTrace) phase(name string) {
	if t == nil {
		return
	}
	now, faults := time.Now(), pageFaults()
	taken := "     -"
	if faults >= 0 {
		taken = fmt.Sprintf("%6d", faults-t.faults)
	}
	fmt.Fprintf(t.w, "rpi: startup: %7.3f ms %s faults  %-32s (%.3f ms since main)\n",
		float64(now.Sub(t.last).Microseconds())/1000, taken, name, float64((now.Sub(t.start)-t.own).Microseconds())/1000)
	t.faults = pageFaults()
	t.last = time.Now()
	t.own += t.last.Sub(now)
}

// clock is where rpi's timers come from: the real one, or a fake one in
// tests whose time moves only when the test says so.
type clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed; stop
	// cancels it and reports whether it did so before f ran.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
	// AfterFuncAt is AfterFunc at the time t: at once when t has passed,
	// however long ago t was read from Now.
	AfterFuncAt(t time.Time, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

func (realClock) AfterFuncAt(t time.Time, f func()) func() bool {
	return time.AfterFunc(time.Until(t), f).Stop
}

// after returns a channel closed once d has passed on c, and a stop func.
func after(c clock, d time.Duration) (<-chan struct{}, func() bool) {
	done := make(chan struct{})
	return done, c.AfterFunc(d, func() { close(done) })
}

// randomID fills b for an id: session, entry and loop ids must be unique,
// not secret. math/rand/v2's generator is ChaCha8, seeded by the runtime
// from the system's entropy, and costs no system call, while the first
// crypto/rand read sets up per-thread state (on Linux, the vDSO's), which
// startup need not wait for. Names that must not be guessed, such as
// rpi's temp folder, still come from crypto/rand.
func randomID(b []byte) {
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
}

// newUUIDv7 returns an RFC 9562 version 7 UUID: a 48-bit Unix millisecond
// timestamp, the version and variant bits, and 74 random bits.
func newUUIDv7(now time.Time) string {
	var u [16]byte
	randomID(u[6:])
	ms := uint64(now.UnixMilli())
	binary.BigEndian.PutUint16(u[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(u[2:6], uint32(ms))
	u[6] = 0x70 | u[6]&0x0f // version 7
	u[8] = 0x80 | u[8]&0x3f // variant 10
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// timestamp formats t as RFC 3339 in UTC with milliseconds.
func timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// maxDuration is the longest time.Duration, some 292 years.
const maxDuration = time.Duration(math.MaxInt64)

// msDuration is ms milliseconds, at most maxDuration: a number from a
// setting, a client or a server past what a Duration holds would wrap
// around to a short or a negative wait. A negative ms is no wait.
func msDuration(ms int64) time.Duration {
	switch {
	case ms < 0:
		return 0
	case ms > int64(maxDuration/time.Millisecond):
		return maxDuration
	}
	return time.Duration(ms) * time.Millisecond
}
