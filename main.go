// Command rpi hosts a coding agent without a terminal and speaks a
// line-delimited JSON protocol on stdin/stdout. See README.md and docs/.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"
)

func main() {
	growStack()
	if dir, ok := os.LookupEnv(watchdogEnv); ok {
		hideOwnEnvironment() // no other process reads its memory
		forgetOwnMemory()    // the watchdog has no keys to overwrite
		os.Exit(runWatchdog(os.Stdin, dir))
	}
	// The handlers first: installing them takes longer, on threads of
	// their own, than the rest of startup.
	stop := make(chan os.Signal, 1)
	signalsReady := watchSignals(stop)
	hideOwnEnvironment() // no other process reads its memory
	trace := newStartupTrace(os.Stderr)
	// rpi parses a copy of its arguments: the originals, which the kernel
	// shows as /proc/<rpi>/cmdline to every process, lose their keys.
	args := make([]string, len(os.Args)-1)
	for i, arg := range os.Args[1:] {
		args[i] = strings.Clone(arg)
	}
	if err := hideKeyArguments(); err != nil {
		fmt.Fprintf(os.Stderr, "rpi: cannot hide --api-key from other processes: %v\n", err)
	}
	env := hostEnvironment()
	env.trace = trace
	env.signalsReady = signalsReady
	env.exit = os.Exit
	env.hideVariables = hideOwnVariables
	env.setenv = os.Setenv
	env.adoptOrphans, env.endOrphans, env.reapAdopted = adoptOrphans, endOrphans, reapAdopted
	trace.phase("main: environment")
	os.Exit(runProgram(args, env, os.Stdin, os.Stdout, os.Stderr, stop))
}

// growStack grows the main goroutine's stack at once to the 16 KiB that
// startup reaches. Left to grow as startup calls deeper, the stack is
// copied twice more, each copy walking every frame on it through the
// binary's frame tables, whose pages startup touches for nothing else:
// page faults that cost more than the rest of a copy
// (docs/performance.md). One copy of two frames costs a fraction of that.
//
//go:noinline
func growStack() byte {
	var frame [14 << 10]byte
	return lastByte(frame[:])
}

// lastByte keeps growStack's frame from being compiled away.
//
//go:noinline
func lastByte(b []byte) byte { return b[len(b)-1] }

// runProgram is the whole program: it parses args, serves the protocol until stdin
// ends or a signal arrives, and returns the exit code. Nothing but main
// touches the process's real stdin, stdout, environment or signals.
func runProgram(args []string, env runEnv, stdin io.Reader, stdout, stderr io.Writer, stop chan os.Signal) int {
	cfg, action, err := parseArgs(args, env)
	env.trace.phase("flags")
	switch {
	case err != nil && (cfg.acp || cfg.serve):
		fmt.Fprintf(stderr, "rpi: %v\n", err) // ACP's stdout carries ACP messages only; rpi serve's nothing
		return 1
	case err != nil:
		return initFailure(stdout, stderr, err)
	case action == "help":
		fmt.Fprint(stdout, usageText())
		return 0
	case action == "version" && cfg.compat:
		fmt.Fprintln(stdout, piVersion)
		return 0
	case action == "version":
		info, _ := debug.ReadBuildInfo()
		fmt.Fprintln(stdout, versionLine(info))
		return 0
	}
	// Startup reads files a project controls and can take seconds (a
	// large --session or --fork). It runs on this goroutine, whose stack
	// has grown already: a new goroutine's stack would grow again, which
	// costs about as much as the rest of startup. So a signal that comes
	// meanwhile is taken by endStartupOnSignal.
	if cfg.bridge != nil {
		return runBridge(cfg, env, stdin, stdout, stderr, stop)
	}
	if cfg.acp {
		return runACP(cfg, env, stdin, stdout, stderr, stop)
	}
	if cfg.serve {
		return runServe(cfg, env, stderr, stop, servedWires{acp: newServedACPWire, rpc: newServedRPCWire})
	}
	startupOver := endStartupOnSignal(env, stop, stderr)
	conn := newConnection(stdin, stdout, stderr)
	s, err := newServer(cfg, env, conn, stderr)
	if err != nil {
		startupOver()
		return initFailure(stdout, stderr, err)
	}
	s.startupOver = startupOver // once the session's resources are read
	// The first lines are read while serve waits for the signal handlers
	// and writes session_started (started earlier, the reader would
	// slow startup down).
	conn.readAhead(env.maxLineBytes, stderr)
	conn.whenIdle = func() { s.settleIn(stdout) }
	return s.serve(stop)
}

// endStartupOnSignal watches stop while startup runs: a signal then ends
// the process at once through env.exit, with the exit code docs/protocol.md#launch gives. The func it
// returns marks startup over; a signal after that is left on stop for
// serve. Without env.exit (in-process tests) it watches nothing.
func endStartupOnSignal(env runEnv, stop chan os.Signal, stderr io.Writer) (over func()) {
	if env.exit == nil {
		return func() {}
	}
	var w startupWatch
	done := make(chan struct{})
	go guarded(stderr, "watching startup for a signal", func() {
		select {
		case sig := <-stop:
			w.mu.Lock()
			select {
			case <-done: // startup ended meanwhile: serve's signal now
				select {
				case stop <- sig:
				default: // another signal is already waiting for serve
				}
			default:
				// A stderr nobody reads must not keep rpi from ending.
				written := make(chan struct{})
				go func() {
					fmt.Fprintf(stderr, "rpi: %v during startup: exiting\n", sig)
					close(written)
				}()
				select {
				case <-written:
				case <-time.After(time.Second):
				}
				env.exit(exitCode(sig))
			}
			w.mu.Unlock()
		case <-done:
		}
	})()
	return func() {
		w.mu.Lock()
		close(done)
		w.mu.Unlock()
	}
}

// startupWatch is what endStartupOnSignal decides under: whether startup
// or a signal came first.
type startupWatch struct {
	mu mutex[startupWatchMu] // held while deciding who acts on a signal
}

// initFailure writes the one failure line of a fatal initialization error.
func initFailure(stdout, stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "rpi: %v\n", err)
	newOutput(stdout, stderr).send(func(buf []byte) ([]byte, error) {
		return encodeResponse(rpcWire{}, buf, nil, "init", nil, err)
	})
	return 1
}
