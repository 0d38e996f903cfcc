package main

// Background processes as the original's command table names them (docs/processes.md),
// shared by the client's process_* commands and the model's process tool:
// the process table, each process's output and input, and the commands.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Process limits and tuning: how many may run at once, how many of a
// client's process_spawn commands may wait to start, how much input may
// wait to be written to one (and in how many writes), how many commands
// may wait for one to end, the output ring's default (and largest) size, the default process_logs page, how output
// is coalesced into process_output events, how long a process nobody
// touches lives, and the grace between SIGTERM and SIGKILL when one is
// stopped, times out or expires.
const (
	maxRunningProcesses = 16
	maxWaitingSpawns    = 64      // a client's process_spawn commands not yet answered (processSpawnCommand)
	maxInputBytes       = 4 << 20 // what may wait to be written to one process
	maxInputsWaiting    = 1024    // the writes and key presses that may wait for one process (each holds a goroutine)
	maxProcessWaiters   = 64      // the process_wait and process_stop commands that may wait for one process
	defaultOutputBytes  = 1 << 20
	defaultLogBytes     = 256 << 10
	coalesceBytes       = 32 << 10
	coalesceDelay       = 5 * time.Millisecond
	processIdleExpiry   = 30 * time.Minute
	stopGrace           = time.Second
	exitedOutputBytes   = 64 << 10 // what an ended process keeps of its output
	maxEndedProcesses   = 64       // the ended processes a session keeps of the client's, and of the model's (processTable.noteEnded)
)

// namedSignal is a signal's name and its number: a row of the system's
// table, signalNumbers.
type namedSignal struct {
	name   string
	number sysSignal
}

// signalName is the SCREAMING_SNAKE_CASE name of sig (signalNumbers is
// the system's table).
func signalName(sig sysSignal) string {
	for _, s := range signalNumbers {
		if s.number == sig {
			return s.name
		}
	}
	return fmt.Sprintf("SIG%d", int(sig))
}

// signalNumber is the number of the signal called name (0 for a name not
// in signalNumbers).
func signalNumber(name string) sysSignal {
	for _, s := range signalNumbers {
		if s.name == name {
			return s.number
		}
	}
	return 0
}

// processKeys are the keys process_keys accepts (docs/processes.md), and keyBytes what a
// terminal sends for each; they are always written as these bytes.
var processKeys = []string{"ENTER", "TAB", "ESCAPE", "CTRL_C", "CTRL_D", "UP", "DOWN", "LEFT", "RIGHT",
	"BACKSPACE", "DELETE", "SPACE", "HOME", "END", "PAGE_UP", "PAGE_DOWN",
	"CTRL_A", "CTRL_B", "CTRL_E", "CTRL_F", "CTRL_G", "CTRL_H", "CTRL_I", "CTRL_J", "CTRL_K", "CTRL_L", "CTRL_M",
	"CTRL_N", "CTRL_O", "CTRL_P", "CTRL_Q", "CTRL_R", "CTRL_S", "CTRL_T", "CTRL_U", "CTRL_V", "CTRL_W", "CTRL_X",
	"CTRL_Y", "CTRL_Z"}

var keyBytes = lazy[map[string]string]{build: func() map[string]string {
	m := map[string]string{
		"ENTER": "\r", "TAB": "\t", "ESCAPE": "\x1b", "UP": "\x1b[A", "DOWN": "\x1b[B", "RIGHT": "\x1b[C",
		"LEFT": "\x1b[D", "BACKSPACE": "\x7f", "DELETE": "\x1b[3~", "SPACE": " ", "HOME": "\x1b[H", "END": "\x1b[F",
		"PAGE_UP": "\x1b[5~", "PAGE_DOWN": "\x1b[6~",
	}
	for c := 'A'; c <= 'Z'; c++ {
		m["CTRL_"+string(c)] = string(rune(c - 'A' + 1))
	}
	return m
}}

// processSpec is what to start: docs/processes.md's spec, shared by process_spawn and
// the model's process tool.
type processSpec struct {
	Argv         []string           `json:"argv"`
	Cwd          string             `json:"cwd"`
	Env          map[string]*string `json:"env"`
	TTY          bool               `json:"tty"`
	TerminalSize *terminalSize      `json:"terminalSize"`
	Label        string             `json:"label"`
	TimeoutMs    int64              `json:"timeoutMs"`
	OutputBytes  int                `json:"outputBytes"`
}

type terminalSize struct {
	Rows int `json:"rows"`
	Cols int `json:"cols"`
}

// decodeProcessSpec reads and checks a spec. With cwdBase set, a missing
// or relative cwd is taken from it (the model's tool); without, cwd must
// be absolute (the client's process_spawn).
func decodeProcessSpec(raw json.RawMessage, cwdBase string) (processSpec, error) {
	var spec processSpec
	if len(raw) == 0 || raw[0] != '{' {
		return spec, invalid("spec", "an object {argv, cwd, [env], [tty], [terminalSize], [label], [timeoutMs], [outputBytes]}")
	}
	if err := json.Unmarshal(wholeNumbers(raw), &spec); err != nil { // 5e3 and 5000.0 are whole numbers too
		return spec, specFieldError(err)
	}
	var present map[string]json.RawMessage
	json.Unmarshal(raw, &present)
	switch {
	case len(spec.Argv) == 0 || spec.Argv[0] == "":
		return spec, invalid("spec.argv", specWant("argv"))
	case cwdBase != "":
		spec.Cwd = resolvePath(cwdBase, spec.Cwd)
	case spec.Cwd == "":
		return spec, missing("spec.cwd", "an absolute path")
	case !filepath.IsAbs(spec.Cwd):
		return spec, invalid("spec.cwd", "an absolute path")
	}
	if info, err := os.Stat(spec.Cwd); err != nil || !info.IsDir() {
		return spec, invalid("spec.cwd", "an existing directory")
	}
	for key, value := range spec.Env {
		if key == "" || strings.ContainsAny(key, "=\x00") || value != nil && strings.ContainsRune(*value, 0) {
			return spec, invalid("spec.env", specWant("env"))
		}
	}
	for _, s := range spec.Argv {
		if strings.ContainsRune(s, 0) {
			return spec, invalid("spec.argv", "strings without NUL bytes")
		}
	}
	if _, ok := present["label"]; ok && (len(spec.Label) < 1 || len(spec.Label) > 64 || strings.ContainsRune(spec.Label, 0)) {
		return spec, invalid("spec.label", specWant("label"))
	}
	if t := spec.TerminalSize; t != nil {
		switch {
		case !spec.TTY:
			return spec, invalid("spec.terminalSize", "given only with tty:true")
		case t.Rows < 1 || t.Rows > 65535 || t.Cols < 1 || t.Cols > 65535:
			return spec, invalid("spec.terminalSize", specWant("terminalSize"))
		}
	}
	if _, ok := present["timeoutMs"]; ok && (spec.TimeoutMs < 1 || spec.TimeoutMs > 86400000) {
		return spec, invalid("spec.timeoutMs", specWant("timeoutMs"))
	}
	if _, ok := present["outputBytes"]; ok && (spec.OutputBytes < 1 || spec.OutputBytes > defaultOutputBytes) {
		return spec, invalid("spec.outputBytes", specWant("outputBytes"))
	}
	if spec.TTY && !ptySupported {
		return spec, invalid("spec.tty", "false on this system (no PTY support)")
	}
	if spec.OutputBytes == 0 {
		spec.OutputBytes = defaultOutputBytes
	}
	return spec, nil
}

// specWant says what a field of a spec must be, for its errors ("" for
// a name that is no field).
func specWant(name string) string {
	switch name {
	case "argv":
		return "a non-empty array of strings, the program first"
	case "cwd":
		return "a string, the path of an existing directory"
	case "env":
		return "an object of variable names (no = or NUL) to strings (no NUL) or null"
	case "tty":
		return "true or false"
	case "terminalSize":
		return "{rows, cols}, each from 1 to 65535"
	case "label":
		return "a string of 1 to 64 bytes, without NUL"
	case "timeoutMs":
		return "a number of milliseconds from 1 to 86400000"
	case "outputBytes":
		return "a whole number from 1 to " + strconv.Itoa(defaultOutputBytes)
	}
	return ""
}

// specFieldError names the field of a spec that holds a value of the
// wrong type (a string for timeoutMs, 1.5, a number past an int).
func specFieldError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		name, _, _ := strings.Cut(te.Field, ".")
		if want := specWant(name); want != "" {
			return invalid("spec."+name, want)
		}
	}
	return invalid("spec", "an object {argv, cwd, [env], [tty], [terminalSize], [label], [timeoutMs], [outputBytes]}")
}

// process is one background process.
type process struct {
	s         *session // the session that started it: its events go there
	id        string
	ownerID   string
	spec      processSpec // its Argv and Env are let go of, under mu, once it ends
	startedAt time.Time
	child     *child

	mu            mutex[processMu] // guards the fields below; held while this process's events are written, so they stay in order
	state         string           // starting, running, stopping, exited, timed_out, expired, failed
	endState      string           // what state exiting leads to (exited, timed_out, expired)
	exitCode      *int
	signal        string
	exitedAt      time.Time
	out           ring
	pending       []byte // output not yet sent in a process_output event
	pendingFrom   int64  // the cursor of pending's first byte
	flushTimer    func() bool
	lastInput     <-chan struct{} // closed when the latest write or key press is done
	inputsPending int             // writes and key presses not yet answered
	inputBytes    int             // the bytes of those not yet written (at most maxInputBytes)
	waiters       int             // process_wait and process_stop commands not yet answered (at most maxProcessWaiters)
	stdinClosed   bool
	touched       time.Time // for the idle expiry
	stopExpiry    func() bool
	stopTimeout   func() bool   // the timer of spec.TimeoutMs (nil without one)
	done          chan struct{} // closed once process_exited is written
}

// processInfo is docs/processes.md's ProcessInfo.
type processInfo struct {
	ID                string `json:"id"`
	OwnerID           string `json:"ownerId"`
	Label             string `json:"label,omitempty"`
	State             string `json:"state"`
	PID               int    `json:"pid,omitempty"`
	TTY               bool   `json:"tty"`
	StartedAtMs       int64  `json:"startedAtMs"`
	ExitedAtMs        int64  `json:"exitedAtMs,omitempty"`
	ExitCode          *int   `json:"exitCode,omitempty"`
	Signal            string `json:"signal,omitempty"`
	OutputStartCursor int64  `json:"outputStartCursor"`
	OutputCursor      int64  `json:"outputCursor"`
}

// infoLocked describes the process; p.mu must be held.
func (p *process) infoLocked() processInfo {
	info := processInfo{ID: p.id, OwnerID: p.ownerID, Label: p.spec.Label, State: p.state, TTY: p.spec.TTY,
		StartedAtMs: p.startedAt.UnixMilli(), ExitCode: p.exitCode, Signal: p.signal,
		OutputStartCursor: p.out.startCursor(), OutputCursor: p.out.total}
	if p.child != nil {
		info.PID = p.child.pid
	}
	if !p.exitedAt.IsZero() {
		info.ExitedAtMs = p.exitedAt.UnixMilli()
	}
	return info
}

func (p *process) info() processInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.infoLocked()
}

// ended reports whether process_exited is out.
func (p *process) ended() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// endedLocked reports whether the process has reached a final state.
func (p *process) endedLocked() bool {
	return p.state != "starting" && p.state != "running" && p.state != "stopping"
}

// processEvent is the data of process_started and process_exited.
type processEvent struct {
	Process processInfo `json:"process"`
}

// processOutputData is the data of a process_output event. Data is the
// output itself, which JSON carries as base64 (as encoding/json does any
// []byte); it is encoded straight into the record, so it need only stay
// unchanged until the event is written.
type processOutputData struct {
	ID          string `json:"id"`
	OwnerID     string `json:"ownerId"`
	Stream      string `json:"stream"`
	StartCursor int64  `json:"startCursor"`
	Cursor      int64  `json:"cursor"`
	Data        []byte `json:"dataBase64"`
}

func (d processOutputData) appendJSON(buf []byte) []byte {
	buf = append(buf, `{"id":`...)
	buf = appendJSONString(buf, d.ID)
	buf = append(buf, `,"ownerId":`...)
	buf = appendJSONString(buf, d.OwnerID)
	buf = append(buf, `,"stream":`...)
	buf = appendJSONString(buf, d.Stream)
	buf = append(buf, `,"startCursor":`...)
	buf = strconv.AppendInt(buf, d.StartCursor, 10)
	buf = append(buf, `,"cursor":`...)
	buf = strconv.AppendInt(buf, d.Cursor, 10)
	buf = append(buf, `,"dataBase64":`...)
	if d.Data == nil {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, '"')
		buf = appendBase64(buf, d.Data)
		buf = append(buf, '"')
	}
	return append(buf, '}')
}

// spawn starts a background process. announce runs once it is
// registered and process_started is out, while no output event can be
// written yet, so whatever announce writes comes next. The model's
// processes (ownerID "tool:…") start in sessionEnv, computed now, the
// client's in childEnv (the agent markers alone); spec.Env changes either.
func (s *session) spawn(spec processSpec, ownerID string, announce func(processInfo)) (*process, error) {
	if s.closing.Load() {
		return nil, errSessionClosed
	}
	if err := s.procs.reserveProcess(); err != nil {
		return nil, err
	}
	reserved := true
	defer func() {
		if reserved { // not started: its place goes back
			s.procs.mu.Lock()
			s.procs.starting--
			s.procs.mu.Unlock()
		}
	}()
	cmd := s.command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Cwd
	env := s.set.childEnv
	if strings.HasPrefix(ownerID, "tool:") {
		env = s.sessionEnv() // the model's: the session as it is now, as its bash gets it
	}
	cmd.Env = overrideEnv(env, spec.Env)
	started := make(chan struct{})
	close(started)
	now := s.env.clock.Now()
	p := &process{s: s, id: newUUIDv7(now), ownerID: ownerID, spec: spec, startedAt: now, state: "starting",
		endState: "exited", out: ring{limit: spec.OutputBytes}, lastInput: started, touched: now, done: make(chan struct{})}
	opts := childOptions{stdin: true, combined: true, pty: spec.TTY, rows: 24, cols: 80}
	if t := spec.TerminalSize; t != nil {
		opts.rows, opts.cols = t.Rows, t.Cols
	}
	// Hold p.mu until process_started (and announce) are posted, so no
	// output event can come first.
	defer s.deliver() // once p.mu is let go of
	p.mu.Lock()
	defer p.mu.Unlock()
	c, err := s.procs.start(cmd, opts, p.addOutput)
	if err != nil {
		if errors.Is(err, errShuttingDown) {
			return nil, err
		}
		return nil, fmt.Errorf("Cannot start %s: %v", spec.Argv[0], unwrapPathError(err))
	}
	p.child, p.state = c, "running"
	s.procs.mu.Lock()
	// A session closing looks for its processes after it is marked
	// closing, under this lock: one it will not see is not listed, and
	// ends now (a client's spawn starts in the background, and rpi
	// serve may close its session meanwhile).
	closing := s.closing.Load()
	if !closing {
		s.procs.byID[p.id] = p
		s.procs.order = append(s.procs.order, p.id)
	}
	s.procs.starting--
	reserved = false
	s.procs.mu.Unlock()
	if closing {
		c.kill()
		go guarded(s.stderr, "ending a process of a closed session", func() { c.wait(); c.release() })()
		return nil, errSessionClosed
	}
	if spec.TimeoutMs > 0 {
		p.stopTimeout = s.env.clock.AfterFunc(msDuration(spec.TimeoutMs), guarded(s.stderr, "the timeout of process "+p.id, func() { p.end("timed_out") }))
	}
	p.stopExpiry = s.env.clock.AfterFunc(processIdleExpiry, guarded(s.stderr, "the expiry of process "+p.id, p.checkExpiry))
	go guarded(s.stderr, "process "+p.id, p.waitExit)()
	info := p.infoLocked()
	s.postEvent("process_started", processEvent{info})
	s.postCall(func() { announce(info) })
	return p, nil
}

// reserveProcess takes a place for a process about to start, or fails
// when maxRunningProcesses run or are starting already. The count and the
// place are taken together, so spawns at once cannot pass the limit; the
// place is given back (starting) once the process is in the table, or
// did not start.
func (t *processTable) reserveProcess() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	running := t.starting
	for _, p := range t.byID {
		if !p.child.hasExited() {
			running++
		}
	}
	if running >= maxRunningProcesses {
		return fmt.Errorf("process limit reached (maximum %d)", maxRunningProcesses)
	}
	t.starting++
	return nil
}

// overrideEnv is base with the overrides applied: a string sets a
// variable, null removes it.
func overrideEnv(base []string, overrides map[string]*string) []string {
	if len(overrides) == 0 {
		return base
	}
	env := make([]string, 0, len(base)+len(overrides))
	for _, kv := range base {
		key, _, _ := strings.Cut(kv, "=")
		if _, ok := overrides[key]; !ok {
			env = append(env, kv)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(overrides)) {
		if v := overrides[key]; v != nil {
			env = append(env, key+"="+*v)
		}
	}
	return env
}

// addOutput takes a chunk of output: it is kept in the ring and sent in a
// coalesced process_output event, at once when coalesceBytes are pending,
// else after coalesceDelay.
func (p *process) addOutput(_ string, b []byte) {
	// Whole chunks go out straight from the read buffer, gathered into
	// one write with what follows them before this returns: delivered,
	// then the sink flushed, once p.mu is let go of.
	defer p.s.deliver()
	defer p.s.post(callout{flush: true}) // after what is posted below
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pending) == 0 {
		p.pendingFrom = p.out.total
	}
	p.out.write(b)
	for len(p.pending) == 0 && len(b) >= coalesceBytes {
		p.s.post(callout{ev: event{Type: "process_output", Data: p.outputData(p.out.total-int64(len(b)), b[:coalesceBytes])}, gathered: true})
		b = b[coalesceBytes:]
		p.pendingFrom = p.out.total - int64(len(b))
	}
	p.pending = append(p.pending, b...)
	if len(p.pending) >= coalesceBytes {
		p.flushLocked()
	} else if p.flushTimer == nil && len(p.pending) > 0 {
		p.flushTimer = p.s.env.clock.AfterFunc(coalesceDelay, guarded(p.s.stderr, "the output of process "+p.id, p.flush))
	}
}

func (p *process) flush() {
	defer p.s.deliver()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flushLocked()
}

// flushLocked sends the pending output as one process_output event.
func (p *process) flushLocked() {
	if p.flushTimer != nil {
		p.flushTimer()
		p.flushTimer = nil
	}
	if len(p.pending) > 0 {
		p.sendOutput(p.pendingFrom, p.pending)
		p.pending = nil // the posted event holds those bytes until it is delivered: the next output gets an array of its own
	}
}

func (p *process) sendOutput(start int64, data []byte) {
	p.s.postEvent("process_output", p.outputData(start, data))
}

func (p *process) outputData(start int64, data []byte) processOutputData {
	return processOutputData{ID: p.id, OwnerID: p.ownerID, Stream: "combined",
		StartCursor: start, Cursor: start + int64(len(data)), Data: data}
}

// waitExit waits for the process to end (stopping it at shutdown), then,
// under p.mu, posts the last of its output, records the final state and
// posts process_exited, so every command after that event sees it ended;
// once that is out, the process is done (p.done) and shutdown may go on.
func (p *process) waitExit() {
	stop := context.AfterFunc(p.s.ctx, guarded(p.s.stderr, "stopping process "+p.id, func() { p.child.stop() }))
	defer stop()
	ps := p.child.wait()
	defer p.child.release() // last: shutdown waits for it
	p.recordExit(ps)
	p.s.deliver()
	close(p.done)
}

// recordExit makes the process's state final and posts process_exited.
func (p *process) recordExit(ps *os.ProcessState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flushLocked()
	p.stopExpiry()
	if p.stopTimeout != nil {
		p.stopTimeout() // it would hold the process until it fell due
	}
	code, sig := exitStatus(ps)
	if sig != 0 {
		n := 128 + int(sig)
		code, p.signal = &n, signalName(sig)
	}
	if p.endState == "timed_out" {
		n := 124
		code = &n
	}
	p.state, p.exitCode, p.exitedAt = p.endState, code, p.s.env.clock.Now()
	p.stdinClosed = true
	if cap(p.out.buf) > exitedOutputBytes {
		p.s.memory.soon() // the ring's room goes back to the system
	}
	p.out.shrink(exitedOutputBytes)
	p.pending = nil                    // all sent: its room goes too
	p.spec.Argv, p.spec.Env = nil, nil // up to the system's limit (MiBs), and nothing reads them now
	p.s.procs.noteEnded(p)
	p.s.postEvent("process_exited", processEvent{p.infoLocked()})
}

// end stops the process for a reason (timed_out, expired): SIGTERM to its
// group, SIGKILL after stopGrace.
func (p *process) end(reason string) {
	p.mu.Lock()
	if p.endedLocked() {
		p.mu.Unlock()
		return
	}
	p.endState = reason
	p.state = "stopping"
	p.mu.Unlock()
	p.child.terminate(stopGrace)
}

// touch notes that a command named the process (for the idle expiry).
func (p *process) touch() {
	p.mu.Lock()
	p.touched = p.s.env.clock.Now()
	p.mu.Unlock()
}

// checkExpiry ends a process nobody has touched for processIdleExpiry, or
// waits again for the rest of that time.
func (p *process) checkExpiry() {
	p.mu.Lock()
	idle := p.s.env.clock.Now().Sub(p.touched)
	if p.endedLocked() {
		p.mu.Unlock()
		return
	}
	if idle < processIdleExpiry {
		p.stopExpiry = p.s.env.clock.AfterFunc(processIdleExpiry-idle, guarded(p.s.stderr, "the expiry of process "+p.id, p.checkExpiry))
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.end("expired")
}

// input writes data to the process's stdin (then closes it when
// closeStdin is set) after its earlier writes and key presses, then calls
// done with the result, before the next input's turn: writes to one
// process happen, and are answered, in the order they were asked for. At
// most maxInputBytes, in at most maxInputsWaiting writes, may wait to be
// written to a process: input fails at once, queuing nothing, when data
// would pass that. When ctx ends first,
// done gets "Operation aborted" at once (nothing of data is written), and
// the next input still waits for the earlier ones.
func (p *process) input(ctx context.Context, data []byte, closeStdin bool, done func(error)) error {
	mine := make(chan struct{})
	p.mu.Lock()
	if p.inputsPending >= maxInputsWaiting {
		p.mu.Unlock()
		return fmt.Errorf("Cannot write to process %s: %d writes and key presses to it are waiting already (it is not "+
			"reading its input as fast). Wait for the earlier writes to be answered, or stop the process.", p.id, maxInputsWaiting)
	}
	if p.inputBytes+len(data) > maxInputBytes {
		waiting := p.inputBytes
		p.mu.Unlock()
		return fmt.Errorf("Cannot write %s to process %s: at most %s may wait to be written to a process, and %s written "+
			"earlier are still waiting (it is not reading its input as fast). Wait for the earlier writes to be answered, "+
			"write less at a time, or stop the process.", byteSize(len(data)), p.id, byteSize(maxInputBytes), byteSize(waiting))
	}
	previous := p.lastInput
	p.lastInput = mine
	p.inputsPending++
	p.inputBytes += len(data)
	p.mu.Unlock()
	// Answered once, posted under p.mu with the count: afterInput sees
	// either this answer posted or the input still pending, never between.
	var once sync.Once
	finish := func(err error) {
		once.Do(func() {
			defer p.s.deliver()
			p.mu.Lock()
			defer p.mu.Unlock()
			p.inputsPending--
			p.inputBytes -= len(data)
			p.s.postCall(func() { done(err) })
		})
	}
	go guarded(p.s.stderr, "a write to process "+p.id, func() {
		defer close(mine)
		defer finish(errors.New("Internal error: the write failed")) // after a panic; answered once
		select {
		case <-previous:
		case <-ctx.Done():
			finish(errors.New("Operation aborted"))
			<-previous
		}
		if ctx.Err() != nil {
			finish(errors.New("Operation aborted"))
			return
		}
		finish(p.writeInput(ctx, data, closeStdin))
	})()
	return nil
}

// waiter takes a place for a command that waits for the process to end
// in the background, each holding a goroutine (process_wait,
// process_stop: what says which), or fails when maxProcessWaiters wait
// already; release gives the place back, once.
func (p *process) waiter(what string) (release func(), err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiters >= maxProcessWaiters {
		return nil, fmt.Errorf("Cannot %s process %s: %d process_wait and process_stop commands wait for it already", what, p.id, maxProcessWaiters)
	}
	p.waiters++
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			p.waiters--
			p.mu.Unlock()
		})
	}, nil
}

// inputAndWait is input for a caller that waits for the result.
func (p *process) inputAndWait(ctx context.Context, data []byte, closeStdin bool) error {
	result := make(chan error, 1)
	if err := p.input(ctx, data, closeStdin, func(err error) { result <- err }); err != nil {
		return err
	}
	return <-result
}

// writeInput writes data to the process's stdin (or terminal), then
// closes stdin when closeStdin is set; a terminal's input cannot be
// closed, so with one closeStdin fails before anything is written. An
// ended ctx stops a write the process does not read.
func (p *process) writeInput(ctx context.Context, data []byte, closeStdin bool) error {
	p.mu.Lock()
	closed := p.stdinClosed
	p.mu.Unlock()
	if closed {
		if p.child.hasExited() {
			return errors.New("process has exited")
		}
		return errors.New("process has closed stdin")
	}
	if closeStdin && p.child.tty != nil {
		// Closing the terminal's master would hang it up, not end the input.
		return errors.New("process has a terminal, whose input cannot be closed: press CTRL_D (process_keys) at the start of a line to end its input, or stop the process")
	}
	if len(data) > 0 {
		p.child.stdin.SetWriteDeadline(time.Time{})
		stop := context.AfterFunc(ctx, guarded(p.s.stderr, "ending a write", func() { p.child.stdin.SetWriteDeadline(time.Now()) }))
		_, err := p.child.stdin.Write(data)
		stop()
		switch {
		case err != nil && ctx.Err() != nil:
			return errors.New("Operation aborted")
		case err != nil && p.child.hasExited():
			return errors.New("process has exited")
		case err != nil:
			return fmt.Errorf("cannot write to process %s: %v", p.id, err)
		}
	}
	if closeStdin {
		p.mu.Lock()
		p.stdinClosed = true
		p.mu.Unlock()
		return p.child.stdin.Close()
	}
	return nil
}

// keyInput is the bytes of keys, or an error naming the field.
func keyInput(keys []string) ([]byte, error) {
	var data []byte
	for _, key := range keys {
		b, ok := keyBytes.get()[key]
		if !ok {
			return nil, invalid("keys", "an array of keys, each one of "+strings.Join(processKeys, ", "))
		}
		data = append(data, b...)
	}
	return data, nil
}

// signal sends a signal to the process's group and posts then while
// holding p.mu, which process_exited also needs: whatever then writes
// comes before that event. Once the process has ended it does nothing.
func (p *process) sendSignal(sig sysSignal, then func()) error {
	defer p.s.deliver() // once p.mu is let go of
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.endedLocked() {
		if err := p.child.signalGroup(sig); err != nil {
			return err
		}
	}
	p.s.postCall(then)
	return nil
}

// stop ends the process: SIGTERM to its group, SIGKILL after stopGrace;
// it returns once process_exited is out.
func (p *process) stop() processInfo {
	p.mu.Lock()
	if !p.endedLocked() {
		p.state = "stopping"
	}
	p.mu.Unlock()
	p.child.terminate(stopGrace)
	<-p.done
	return p.info()
}

// wait waits until the process has ended and process_exited is out (then
// ok), the timeout passes (0: none), or ctx ends.
func (p *process) wait(ctx context.Context, timeout time.Duration) (processInfo, error) {
	var expired <-chan struct{}
	if timeout > 0 {
		done, stop := after(p.s.env.clock, timeout)
		defer stop()
		expired = done
	}
	select {
	case <-p.done:
		return p.info(), nil
	case <-expired:
		return processInfo{}, fmt.Errorf("timed out waiting for process %s", p.id)
	case <-ctx.Done():
		return processInfo{}, errors.New("Operation aborted")
	}
}

// processLogs is the answer to process_logs.
type processLogs struct {
	RequestedCursor int64      `json:"requestedCursor"`
	StartCursor     int64      `json:"startCursor"`
	Cursor          int64      `json:"cursor"`
	Lost            bool       `json:"lost"`
	LostBytes       int64      `json:"lostBytes"`
	Chunks          []logChunk `json:"chunks"`
	EOF             bool       `json:"eof"`
}

type logChunk struct {
	StartCursor int64  `json:"startCursor"`
	Cursor      int64  `json:"cursor"`
	Stream      string `json:"stream"`
	DataBase64  string `json:"dataBase64"`
}

// logs reads kept output from cursor on, at most limit bytes.
func (p *process) logs(cursor int64, limit int) (processLogs, []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	start, data := p.out.readFrom(cursor, limit)
	res := processLogs{RequestedCursor: cursor, StartCursor: start, Cursor: start + int64(len(data)), Chunks: []logChunk{}}
	if start > cursor {
		res.Lost, res.LostBytes = true, start-cursor
	}
	if len(data) > 0 {
		res.Chunks = append(res.Chunks, logChunk{start, res.Cursor, "combined", base64.StdEncoding.EncodeToString(data)})
	}
	res.EOF = p.endedLocked() && res.Cursor == p.out.total
	return res, data
}

// resize sets the size of the process's terminal; then (when not nil)
// is posted before anything the process writes after it (its redraw for
// the new size): output is posted under p.mu, which resize holds until
// then is.
func (p *process) resize(rows, cols int, then func()) error {
	if p.child.tty == nil {
		return errors.New("process is not attached to a PTY")
	}
	defer p.s.deliver() // once p.mu is let go of
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.child.hasExited() {
		return errors.New("process has exited")
	}
	if err := setWindowSize(p.child.tty, rows, cols); err != nil {
		return err
	}
	if then != nil {
		p.s.postCall(then)
	}
	return nil
}

// findProcess looks up a process by id and notes the use.
func (s *session) findProcess(id string) (*process, error) {
	s.procs.mu.Lock()
	p, ok := s.procs.byID[id]
	s.procs.mu.Unlock()
	if !ok || p.s != s {
		return nil, fmt.Errorf("process not found: %s", id)
	}
	p.touch()
	return p, nil
}

// removeProcess forgets an ended process.
func (s *session) removeProcess(p *process) error {
	p.mu.Lock()
	ended := p.endedLocked()
	p.mu.Unlock()
	if !ended {
		return fmt.Errorf("process %s is still running; stop it first", p.id)
	}
	s.procs.mu.Lock()
	s.procs.forgetLocked(func(q *process) bool { return q == p })
	s.procs.mu.Unlock()
	return nil
}

// noteEnded records that p has ended, and forgets the ended process of
// p's session and p's owner (the client, or the model: sameOwners) that
// ended first when it now has more than keepEnded of them: a client or
// model that starts short commands and never removes them holds at most
// that many ended processes' output, and a model's never push out of the
// list a process the client started (which the model may not remove).
// A running process is never forgotten. It is called under p.mu
// (process.mu comes before processTable.mu) before process_exited is
// posted, so every command after that event sees the table bounded.
func (t *processTable) noteEnded(p *process) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[p.id] != p {
		return // its session closed and forgot it
	}
	t.ended = append(t.ended, p)
	alike := func(q *process) bool { return q.s == p.s && sameOwners(q, p) }
	n := 0
	for _, q := range t.ended {
		if alike(q) {
			n++
		}
	}
	var first []*process // those that ended first, past keepEnded
	for _, q := range t.ended {
		if alike(q) && n > t.keepEnded {
			first = append(first, q)
			n--
		}
	}
	if len(first) > 0 {
		t.forgetLocked(func(q *process) bool { return slices.Contains(first, q) })
	}
}

// sameOwners reports whether p and q were both started by the model (its
// process tool) or both by the client.
func sameOwners(p, q *process) bool {
	return strings.HasPrefix(p.ownerID, "tool:") == strings.HasPrefix(q.ownerID, "tool:")
}

// forgetLocked takes the processes forget picks out of the table; t.mu
// must be held.
func (t *processTable) forgetLocked(forget func(*process) bool) {
	t.order = slices.DeleteFunc(t.order, func(id string) bool {
		if p := t.byID[id]; forget(p) {
			delete(t.byID, id)
			return true
		}
		return false
	})
	t.ended = slices.DeleteFunc(t.ended, forget)
}

// forgetProcesses takes every process of the closing session out of the
// host's table: nothing can name them once the session is gone, and each
// would hold its output and the session itself for the host's life.
func (s *session) forgetProcesses() {
	s.procs.mu.Lock()
	defer s.procs.mu.Unlock()
	s.procs.forgetLocked(func(p *process) bool { return p.s == s })
}

// processes are the session's processes not yet removed, oldest first.
func (s *session) processes() []*process {
	s.procs.mu.Lock()
	defer s.procs.mu.Unlock()
	var procs []*process
	for _, id := range s.procs.order {
		if p := s.procs.byID[id]; p.s == s {
			procs = append(procs, p)
		}
	}
	return procs
}

// listProcesses describes the session's processes not yet removed, oldest first.
func (s *session) listProcesses() []processInfo {
	list := []processInfo{}
	for _, p := range s.processes() {
		list = append(list, p.info())
	}
	return list
}

// runningProcessCount counts the processes that have not ended.
func (s *session) runningProcessCount() int {
	n := 0
	for _, p := range s.processes() {
		p.mu.Lock()
		if !p.endedLocked() {
			n++
		}
		p.mu.Unlock()
	}
	return n
}
