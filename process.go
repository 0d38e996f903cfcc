package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// Output limits of the user's bash (§6): the answer keeps the tail, at most
// maxOutputLines lines and maxOutputBytes bytes.
const (
	maxOutputLines = 2000
	maxOutputBytes = 50 * 1024
)

// findShell picks bash, or /bin/sh where bash is missing.
func findShell() string {
	if path, err := exec.LookPath("bash"); err == nil {
		return path
	}
	return "/bin/sh"
}

// ---- Children: start, group, read, signal, reap ----

// child is a started process in its own process group whose output is
// read by one goroutine per stream.
type child struct {
	cmd     *exec.Cmd
	pid     int
	exited  chan struct{} // closed once the child itself has exited
	stdin   *os.File      // write end of its stdin pipe, or the PTY master; nil when stdin is /dev/null
	readers sync.WaitGroup
	pipes   []*os.File // read ends (or the PTY master), closed by the readers
}

// childOptions say how a child's stdin and output are connected.
type childOptions struct {
	stdin bool // a pipe the host writes to (otherwise /dev/null)
	pty   bool // a new pseudo-terminal as stdin, stdout and stderr, in a new session
}

// startChild starts cmd in a new process group (under a PTY: a new session
// whose process group it leads). Each chunk of output is passed to
// onOutput, from one goroutine per stream ("stdout", "stderr"; a PTY has
// only "stdout"); onOutput may block, and then the child blocks on its pipe.
func startChild(cmd *exec.Cmd, opts childOptions, onOutput func(stream string, p []byte)) (*child, error) {
	if opts.pty {
		return startPTYChild(cmd, onOutput)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var parentEnds, childEnds []*os.File
	closeAll := func(files []*os.File) {
		for _, f := range files {
			f.Close()
		}
	}
	for range 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(parentEnds)
			closeAll(childEnds)
			return nil, err
		}
		parentEnds, childEnds = append(parentEnds, r), append(childEnds, w)
		growPipe(r)
	}
	cmd.Stdout, cmd.Stderr = childEnds[0], childEnds[1]
	var stdin *os.File
	if opts.stdin {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(parentEnds)
			closeAll(childEnds)
			return nil, err
		}
		cmd.Stdin, stdin = r, w
		childEnds = append(childEnds, r)
	}
	err := cmd.Start()
	closeAll(childEnds)
	if err != nil {
		closeAll(parentEnds)
		if stdin != nil {
			stdin.Close()
		}
		return nil, err
	}
	c := &child{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{}), stdin: stdin, pipes: parentEnds}
	c.readers.Add(2)
	go c.read(parentEnds[0], "stdout", onOutput)
	go c.read(parentEnds[1], "stderr", onOutput)
	return c, nil
}

// startPTYChild starts cmd with a new pseudo-terminal as its controlling
// terminal and stdio; the master is both its output and its stdin.
func startPTYChild(cmd *exec.Cmd, onOutput func(stream string, p []byte)) (*child, error) {
	master, slave, err := openPTY()
	if err != nil {
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	err = cmd.Start()
	slave.Close()
	if err != nil {
		master.Close()
		return nil, err
	}
	c := &child{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{}), stdin: master, pipes: []*os.File{master}}
	c.readers.Add(1)
	go c.read(master, "stdout", onOutput)
	return c, nil
}

// read passes a stream's output to onOutput until it ends. While a child
// keeps writing (two reads in a row found data), a short read is followed
// by readPause to let the pipe fill, so a flood of small writes costs a few
// large reads instead of a wake-up each; output is coalesced for longer
// than that anyway, and a single burst (echo hi) is not delayed.
func (c *child) read(pipe *os.File, stream string, onOutput func(string, []byte)) {
	defer c.readers.Done()
	defer pipe.Close()
	buf := make([]byte, 256<<10)
	flowing := false
	for {
		n, err := pipe.Read(buf)
		if n > 0 {
			onOutput(stream, buf[:n])
		}
		if err != nil {
			return
		}
		if flowing && n < len(buf)/4 {
			time.Sleep(readPause)
		}
		flowing = n > 0
	}
}

// readPause is how long a reader lets a pipe fill after a short read.
const readPause = time.Millisecond

// wait waits for the child to exit, then kills what remains of its process
// group (nothing a command started outlives it) and waits for the last of
// its output. A descendant that left the group and still holds a pipe is
// cut off after killGrace.
func (c *child) wait() *os.ProcessState {
	c.cmd.Wait()
	close(c.exited)
	c.signalGroup(syscall.SIGKILL)
	done := make(chan struct{})
	go func() { c.readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(killGrace):
		for _, p := range c.pipes {
			p.Close()
		}
		<-done
	}
	return c.cmd.ProcessState
}

// signalGroup sends sig to the child's whole process group.
func (c *child) signalGroup(sig syscall.Signal) error {
	err := syscall.Kill(-c.pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil // already gone
	}
	return err
}

// terminate asks the group to stop with SIGTERM and sends SIGKILL if the
// child has not exited after killGrace.
func (c *child) terminate() {
	c.signalGroup(syscall.SIGTERM)
	c.killAfterGrace()
}

// killAfterGrace sends SIGKILL to the group unless the child exits within
// killGrace.
func (c *child) killAfterGrace() {
	select {
	case <-c.exited:
	case <-time.After(killGrace):
		c.signalGroup(syscall.SIGKILL)
	}
}

// exitStatus reads a finished child's exit code, or the signal that killed it.
func exitStatus(ps *os.ProcessState) (code *int, signal syscall.Signal) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return nil, ws.Signal()
	}
	c := ps.ExitCode()
	return &c, 0
}

// ---- Text ----

// utf8Stream turns a byte stream into valid UTF-8 chunks: a multi-byte
// character split between two reads is held back until it is whole.
type utf8Stream struct{ held []byte }

// next returns the text of p (with what was held before), keeping back an
// incomplete character at its end. Invalid bytes become U+FFFD when encoded.
func (u *utf8Stream) next(p []byte) string {
	data := p
	if len(u.held) > 0 {
		data = append(u.held, p...)
	}
	cut := len(data)
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				cut = i
			}
			break
		}
	}
	u.held = append(u.held[:0:0], data[cut:]...)
	return string(data[:cut])
}

// flush returns whatever is still held back (an incomplete character).
func (u *utf8Stream) flush() string {
	s := string(u.held)
	u.held = nil
	return s
}

// tail keeps the end of a stream and counts all of it, so that the last
// maxOutputLines lines / maxOutputBytes bytes can be cut at the end.
type tail struct {
	buf      []byte
	total    int64
	newlines int
	bounded  bool // drop the front once buf is well past the limit
}

func (t *tail) write(p []byte) {
	t.total += int64(len(p))
	t.newlines += bytes.Count(p, []byte("\n"))
	t.buf = append(t.buf, p...)
	if t.bounded && len(t.buf) > 4*maxOutputBytes {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-2*maxOutputBytes:]...)
	}
}

// lines counts lines: each "\n" ends one, and a final unterminated one counts.
func (t *tail) lines() int {
	if len(t.buf) > 0 && t.buf[len(t.buf)-1] != '\n' {
		return t.newlines + 1
	}
	return t.newlines
}

func (t *tail) overLimit() bool {
	return t.total > maxOutputBytes || t.lines() > maxOutputLines
}

// text returns the whole stream, or its cut tail when it is over the limit.
func (t *tail) text() (text string, truncated bool) {
	if !t.overLimit() {
		return string(t.buf), false
	}
	return string(cutTail(t.buf, maxOutputLines, maxOutputBytes)), true
}

// cutTail keeps whole lines from the end of b, at most maxLines lines and
// maxBytes bytes; when the last line alone is longer, it keeps its end.
func cutTail(b []byte, maxLines, maxBytes int) []byte {
	end := len(b)
	start := end
	for lines := 0; start > 0 && lines < maxLines; lines++ {
		lineStart := bytes.LastIndexByte(b[:start-1], '\n') + 1
		if end-lineStart > maxBytes {
			break
		}
		start = lineStart
	}
	if start == end && end > 0 {
		start = max(end-maxBytes, 0)
		for start < end && !utf8.RuneStart(b[start]) {
			start++
		}
	}
	return b[start:]
}

// ---- The user's bash (§6) ----

// bashRun is one user bash command in flight.
type bashRun struct {
	cancel   context.CancelFunc // abort_bash: kills the command
	answered <-chan struct{}
}

// bashOutput gathers a shell command's output as it arrives: a tail per
// stream and of both interleaved, onText for each chunk of text, and —
// once the output passes the limits — all of it in a temp file.
type bashOutput struct {
	s      *server
	onText func(stream, text string)

	mu       sync.Mutex // guards the fields below; the two streams write concurrently
	stdout   tail
	stderr   tail
	combined tail
	text     map[string]*utf8Stream
	full     *os.File
}

func newBashOutput(s *server, onText func(stream, text string)) *bashOutput {
	return &bashOutput{s: s, onText: onText, text: map[string]*utf8Stream{"stdout": {}, "stderr": {}}}
}

// bashUpdate is the data of a bash_execution_update event.
type bashUpdate struct {
	RequestID *string `json:"requestId"`
	Stream    string  `json:"stream"`
	Chunk     string  `json:"chunk"`
}

func (o *bashOutput) add(stream string, p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if stream == "stdout" {
		o.stdout.write(p)
	} else {
		o.stderr.write(p)
	}
	o.combined.write(p)
	if o.full != nil {
		o.full.Write(p)
	} else if o.combined.overLimit() {
		o.saveFullOutput()
	}
	if chunk := o.text[stream].next(p); chunk != "" {
		o.onText(stream, chunk)
	}
}

// saveFullOutput starts the temp file with everything so far (all still in
// memory: the combined tail is unbounded until now).
func (o *bashOutput) saveFullOutput() {
	f, err := o.s.createTempFile("rpi-bash-*.log")
	if err != nil {
		fmt.Fprintf(o.s.stderr, "rpi: cannot save full bash output: %v\n", err)
		return
	}
	f.Write(o.combined.buf)
	o.full = f
	o.combined.bounded = true
}

// bashResult is the answer to the bash command.
type bashResult struct {
	ExitCode       *int   `json:"exitCode"`
	Stdout         string `json:"stdout"`
	Stderr         string `json:"stderr"`
	Output         string `json:"output"`
	Cancelled      bool   `json:"cancelled"`
	Truncated      bool   `json:"truncated"`
	FullOutputPath string `json:"fullOutputPath,omitempty"`
}

// bashExecutionMessage is how a bash result joins the conversation (pi's shape).
type bashExecutionMessage struct {
	Role           string `json:"role"`
	Command        string `json:"command"`
	Output         string `json:"output"`
	ExitCode       *int   `json:"exitCode,omitempty"`
	Cancelled      bool   `json:"cancelled"`
	Truncated      bool   `json:"truncated"`
	FullOutputPath string `json:"fullOutputPath,omitempty"`
	Timestamp      int64  `json:"timestamp"`
}

// finish flushes held-back text and builds the result.
func (o *bashOutput) finish(exitCode *int, cancelled bool) bashResult {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, stream := range []string{"stdout", "stderr"} {
		if chunk := o.text[stream].flush(); chunk != "" {
			o.onText(stream, chunk)
		}
	}
	res := bashResult{ExitCode: exitCode, Cancelled: cancelled}
	var cut [3]bool
	res.Stdout, cut[0] = o.stdout.text()
	res.Stderr, cut[1] = o.stderr.text()
	res.Output, cut[2] = o.combined.text()
	res.Truncated = cut[0] || cut[1] || cut[2]
	if o.full != nil {
		res.FullOutputPath = o.full.Name()
		o.full.Close()
	}
	return res
}

// runShell runs command with bash -c in the session cwd, in its own
// process group, feeding its output to out, until it ends. Cancelling ctx
// or the timeout (0: none) kills the group: SIGKILL, or at shutdown SIGTERM
// and SIGKILL after a grace.
func (s *server) runShell(ctx context.Context, command string, timeout time.Duration, out *bashOutput) (ps *os.ProcessState, timedOut bool, err error) {
	cmd := s.command(s.shell, "-c", command)
	cmd.Dir = s.cfg.cwd
	c, err := startChild(cmd, childOptions{}, out.add)
	if err != nil {
		return nil, false, fmt.Errorf("Cannot start bash: %v", err)
	}
	cancel := context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		if s.ctx.Err() != nil {
			c.terminate()
		} else {
			c.signalGroup(syscall.SIGKILL)
		}
	})
	ps = c.wait()
	stop()
	return ps, errors.Is(ctx.Err(), context.DeadlineExceeded), nil
}

// bash runs the user's own shell command (not the model's tool) with
// `bash -c` in the session cwd, in its own process group, and answers when
// it ends; the commands after it are answered meanwhile.
// Fields: command (string), [timeout] (seconds; on expiry the command is
// killed and answers cancelled:true).
// Answer: {exitCode (null when killed by a signal), stdout, stderr, output
// (both interleaved as they arrived), cancelled, truncated, [fullOutputPath]};
// a nonzero exit is still a success.
// Events: bash_execution_update per chunk of output, with the request's id.
func (s *server) bash(r *request) (any, error) {
	command, err := r.str("command")
	if err != nil {
		return nil, err
	}
	timeout, _, err := r.optPositive("timeout")
	if err != nil {
		return nil, err
	}
	requestID := r.idString()
	out := newBashOutput(s, func(stream, text string) {
		s.emit("bash_execution_update", bashUpdate{requestID, stream, text})
	})
	ctx, cancel := context.WithCancel(s.ctx)
	run := &bashRun{cancel: cancel}
	s.mu.Lock()
	s.bashRuns[run] = true
	s.mu.Unlock()
	run.answered = s.answerLater(r, func() (any, error) {
		defer cancel()
		ps, timedOut, err := s.runShell(ctx, command, time.Duration(timeout*float64(time.Second)), out)
		s.mu.Lock()
		delete(s.bashRuns, run)
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		code, _ := exitStatus(ps)
		res := out.finish(code, ctx.Err() != nil || timedOut)
		s.addBashMessage(bashExecutionMessage{
			Role: "bashExecution", Command: command, Output: res.Output, ExitCode: code,
			Cancelled: res.Cancelled, Truncated: res.Truncated, FullOutputPath: res.FullOutputPath,
			Timestamp: time.Now().UnixMilli(),
		})
		return res, nil
	})
	return noReply{}, nil
}

// abortBash kills every running user bash command (the whole process
// group, SIGKILL) and answers once each of them has answered cancelled:true.
// Fields: none. Answer: null. Events: none.
func (s *server) abortBash(r *request) (any, error) {
	s.mu.Lock()
	var runs []*bashRun
	for run := range s.bashRuns {
		runs = append(runs, run)
	}
	s.mu.Unlock()
	if len(runs) == 0 {
		return nil, nil
	}
	for _, run := range runs {
		run.cancel()
	}
	s.answerLater(r, func() (any, error) {
		for _, run := range runs {
			<-run.answered
		}
		return nil, nil
	})
	return noReply{}, nil
}

// addBashMessage adds a user bash command's result to the conversation;
// while the agent runs it waits for the run to end, so that it never lands
// between a tool call and its result.
func (s *server) addBashMessage(m bashExecutionMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deferred = append(s.deferred, m)
	if s.run == nil {
		s.flushDeferred()
	}
}

// appendMessage adds a message to the conversation and the session.
func (s *server) appendMessage(m any) {
	s.mu.Lock()
	s.messages = append(s.messages, m)
	s.record("message", "message", m)
	s.mu.Unlock()
}

// flushDeferred adds the user bash results that waited for a run to end.
// s.mu must be held.
func (s *server) flushDeferred() {
	for _, m := range s.deferred {
		s.messages = append(s.messages, m)
		s.record("message", "message", m)
	}
	s.deferred = nil
}

// ---- Background processes (§6) ----

// Process tuning: what process_output retains per stream, what it returns
// by default, and how output is coalesced into process_output events.
const (
	retainedOutputBytes = 1 << 20
	defaultTailBytes    = 64 << 10
	coalesceBytes       = 32 << 10
	coalesceDelay       = 5 * time.Millisecond
)

// processSignals are the signals process_signal accepts, in §6's order.
var processSignals = []string{"SIGINT", "SIGTERM", "SIGKILL", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGSTOP", "SIGCONT"}

// signalNumbers maps signal names to numbers: the nine above and the others
// a process_exited event may report.
var signalNumbers = map[string]syscall.Signal{
	"SIGINT": syscall.SIGINT, "SIGTERM": syscall.SIGTERM, "SIGKILL": syscall.SIGKILL,
	"SIGHUP": syscall.SIGHUP, "SIGQUIT": syscall.SIGQUIT, "SIGUSR1": syscall.SIGUSR1,
	"SIGUSR2": syscall.SIGUSR2, "SIGSTOP": syscall.SIGSTOP, "SIGCONT": syscall.SIGCONT,
	"SIGABRT": syscall.SIGABRT, "SIGALRM": syscall.SIGALRM, "SIGBUS": syscall.SIGBUS,
	"SIGFPE": syscall.SIGFPE, "SIGILL": syscall.SIGILL, "SIGPIPE": syscall.SIGPIPE,
	"SIGSEGV": syscall.SIGSEGV, "SIGTRAP": syscall.SIGTRAP, "SIGTSTP": syscall.SIGTSTP,
	"SIGTTIN": syscall.SIGTTIN, "SIGTTOU": syscall.SIGTTOU, "SIGXCPU": syscall.SIGXCPU,
	"SIGXFSZ": syscall.SIGXFSZ, "SIGPROF": syscall.SIGPROF, "SIGSYS": syscall.SIGSYS,
	"SIGVTALRM": syscall.SIGVTALRM, "SIGWINCH": syscall.SIGWINCH, "SIGURG": syscall.SIGURG,
}

// signalName is the SCREAMING_SNAKE_CASE name of sig.
func signalName(sig syscall.Signal) string {
	for name, n := range signalNumbers {
		if n == sig {
			return name
		}
	}
	return fmt.Sprintf("SIG%d", int(sig))
}

// processKeys are the keys process_send_keys accepts, in §6's order.
var processKeys = []string{"Enter", "Tab", "Escape", "Backspace", "Delete", "Space", "Up", "Down", "Left", "Right",
	"Home", "End", "PageUp", "PageDown", "CtrlA", "CtrlC", "CtrlD", "CtrlE", "CtrlK", "CtrlL", "CtrlU", "CtrlW", "CtrlZ"}

// keyBytes are the bytes a terminal sends for each key (Enter is "\r"
// under a PTY and "\n" without one).
var keyBytes = map[string]string{
	"Enter": "\r", "Tab": "\t", "Escape": "\x1b", "Backspace": "\x7f", "Delete": "\x1b[3~", "Space": " ",
	"Up": "\x1b[A", "Down": "\x1b[B", "Right": "\x1b[C", "Left": "\x1b[D", "Home": "\x1b[H", "End": "\x1b[F",
	"PageUp": "\x1b[5~", "PageDown": "\x1b[6~",
	"CtrlA": "\x01", "CtrlC": "\x03", "CtrlD": "\x04", "CtrlE": "\x05", "CtrlK": "\x0b", "CtrlL": "\x0c",
	"CtrlU": "\x15", "CtrlW": "\x17", "CtrlZ": "\x1a",
}

// ring keeps the last len(buf) bytes written to it and counts them all.
type ring struct {
	buf   []byte // grows up to its limit, then wraps
	limit int
	next  int // where the next byte goes once buf is full
	total int64
}

func (r *ring) write(p []byte) {
	r.total += int64(len(p))
	if len(p) >= r.limit {
		r.buf = append(r.buf[:0], p[len(p)-r.limit:]...)
		r.next = 0
		return
	}
	if room := r.limit - len(r.buf); room > 0 {
		n := min(room, len(p))
		r.buf = append(r.buf, p[:n]...)
		p = p[n:]
	}
	for len(p) > 0 {
		n := copy(r.buf[r.next:], p)
		p = p[n:]
		r.next = (r.next + n) % r.limit
	}
}

// tail returns the last n retained bytes, starting at a character boundary.
func (r *ring) tail(n int) []byte {
	ordered := append(append([]byte{}, r.buf[r.next:]...), r.buf[:r.next]...)
	start := max(len(ordered)-n, 0)
	for start < len(ordered) && !utf8.RuneStart(ordered[start]) {
		start++
	}
	return ordered[start:]
}

// process is one background process started by process_start.
type process struct {
	s         *server
	id        string
	name      *string
	command   string
	args      []string
	cwd       string
	pty       bool
	startedAt time.Time
	child     *child
	done      chan struct{} // closed once process_exited is written

	mu         sync.Mutex // guards the fields below; held while this process's events are written, so they stay in order
	stdout     ring
	stderr     ring
	pending    []byte // output not yet sent, all of pendingStream
	pendingOf  string
	flushTimer *time.Timer
	text       map[string]*utf8Stream
	lastInput  <-chan struct{} // closed when the latest stdin write or key press is answered
	stdinGone  bool            // closed by CtrlD
	exited     bool
	exitCode   *int
	signal     *string
}

// Event data of the process events.
type processStartedData struct {
	ProcessID string   `json:"processId"`
	PID       int      `json:"pid"`
	Command   string   `json:"command"`
	Args      []string `json:"args"`
	Cwd       string   `json:"cwd"`
	Name      *string  `json:"name"`
	PTY       bool     `json:"pty"`
	StartedAt string   `json:"startedAt"`
}

type processOutputData struct {
	ProcessID string `json:"processId"`
	Stream    string `json:"stream"`
	Chunk     string `json:"chunk"`
}

type processExitedData struct {
	ProcessID  string  `json:"processId"`
	ExitCode   *int    `json:"exitCode"`
	Signal     *string `json:"signal"`
	DurationMs int64   `json:"durationMs"`
}

// addOutput takes a chunk from one of the process's streams: it is kept
// in the stream's ring and sent in a coalesced process_output event, at
// once when coalesceBytes are pending, else after coalesceDelay.
func (p *process) addOutput(stream string, b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if stream == "stdout" {
		p.stdout.write(b)
	} else {
		p.stderr.write(b)
	}
	if p.pendingOf != stream {
		p.flushLocked()
		p.pendingOf = stream
	}
	for len(p.pending) == 0 && len(b) >= coalesceBytes {
		// Whole chunks go out straight from the read buffer.
		p.sendOutput(stream, p.text[stream].next(b[:coalesceBytes]))
		b = b[coalesceBytes:]
	}
	p.pending = append(p.pending, b...)
	if len(p.pending) >= coalesceBytes {
		p.flushLocked()
	} else if p.flushTimer == nil {
		p.flushTimer = time.AfterFunc(coalesceDelay, p.flush)
	}
}

func (p *process) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flushLocked()
}

// flushLocked sends the pending output as one process_output event.
func (p *process) flushLocked() {
	if p.flushTimer != nil {
		p.flushTimer.Stop()
		p.flushTimer = nil
	}
	if len(p.pending) == 0 {
		return
	}
	chunk := p.text[p.pendingOf].next(p.pending)
	p.pending = p.pending[:0]
	p.sendOutput(p.pendingOf, chunk)
}

func (p *process) sendOutput(stream, chunk string) {
	if chunk != "" {
		p.s.out.write(event{Type: "process_output", Data: processOutputData{p.id, stream, chunk}})
	}
}

// waitExit waits for the process to end (killing it at shutdown), sends
// the last of its output and then process_exited.
func (p *process) waitExit() {
	defer p.s.children.Done()
	stop := context.AfterFunc(p.s.ctx, p.child.terminate)
	defer stop()
	ps := p.child.wait()
	duration := time.Since(p.startedAt)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flushLocked()
	for _, stream := range []string{"stdout", "stderr"} {
		p.sendOutput(stream, p.text[stream].flush())
	}
	p.exited = true
	code, sig := exitStatus(ps)
	p.exitCode = code
	if sig != 0 {
		name := signalName(sig)
		p.signal = &name
	}
	p.s.out.write(event{Type: "process_exited", Data: processExitedData{p.id, p.exitCode, p.signal, duration.Milliseconds()}})
	close(p.done)
}

// afterInput runs work in the background once the process's earlier
// stdin writes and key presses have been answered, and answers r with its
// error or null; so writes happen, and are answered, in the order sent.
func (p *process) afterInput(r *request, work func() error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	previous := p.lastInput
	p.lastInput = p.s.answerLater(r, func() (any, error) {
		<-previous
		return nil, work()
	})
}

// stdinClosed is the error for writing after CtrlD closed stdin, or nil.
func (p *process) stdinClosed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdinGone {
		return fmt.Errorf("Process %s has closed stdin (CtrlD)", p.id)
	}
	return nil
}

// writeStdin writes data to the process's stdin (or its terminal).
func (p *process) writeStdin(data []byte) error {
	if err := p.stdinClosed(); err != nil {
		return err
	}
	if _, err := p.child.stdin.Write(data); err != nil {
		if p.isExited() {
			return fmt.Errorf("Process %s has exited", p.id)
		}
		return fmt.Errorf("Cannot write to process %s: %v", p.id, err)
	}
	return nil
}

func (p *process) isExited() bool {
	select {
	case <-p.child.exited:
		return true
	default:
		return false
	}
}

// lookupProcess finds the process a command names in its processId field.
func (s *server) lookupProcess(r *request) (*process, error) {
	id, err := r.str("processId")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	p, ok := s.processes[id]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("Unknown process: %s", id)
	}
	return p, nil
}

// runningProcess is lookupProcess for commands that need it still running.
func (s *server) runningProcess(r *request) (*process, error) {
	p, err := s.lookupProcess(r)
	if err == nil && p.isExited() {
		err = fmt.Errorf("Process %s has exited", p.id)
	}
	return p, err
}

// processStart starts a background process.
// Fields: command; [args] (array: exec command directly with them; absent:
// bash -c command); [cwd] (relative to the session cwd); [env] (object of
// strings added to the host environment); [name]; [pty] (bool).
// Answer: {processId, pid}. Events: process_started right after the
// answer, then process_output chunks, then process_exited.
func (s *server) processStart(r *request) (any, error) {
	_, err := s.startProcess(r, func(p *process) {
		s.reply(r, processStartAnswer{p.id, p.child.pid}, nil)
	})
	if err != nil {
		return nil, err
	}
	return noReply{}, nil
}

type processStartAnswer struct {
	ProcessID string `json:"processId"`
	PID       int    `json:"pid"`
}

// startProcess starts the process r describes. announce runs once it is
// registered, before process_started and while no output event can be
// written yet, so whatever announce writes comes first.
func (s *server) startProcess(r *request, announce func(*process)) (*process, error) {
	command, err := r.str("command")
	if err == nil && command == "" {
		err = invalid("command", "a non-empty string")
	}
	if err != nil {
		return nil, err
	}
	args, err := r.optStrings("args")
	if err != nil {
		return nil, err
	}
	cwd, err := r.optStr("cwd")
	if err != nil {
		return nil, err
	}
	cwd = resolvePath(s.cfg.cwd, cwd)
	if info, statErr := os.Stat(cwd); statErr != nil || !info.IsDir() {
		return nil, fmt.Errorf("Invalid field cwd: %s is not a directory", cwd)
	}
	env, err := r.optStringMap("env")
	if err != nil {
		return nil, err
	}
	var name *string
	if r.has("name") {
		n, err := r.str("name")
		if err != nil {
			return nil, err
		}
		name = &n
	}
	pty, err := r.optBool("pty")
	if err != nil {
		return nil, err
	}

	var cmd *exec.Cmd
	if args != nil {
		cmd = s.command(command, args...)
	} else {
		cmd = s.command(s.shell, "-c", command)
	}
	cmd.Dir = cwd
	cmd.Env = os.Environ()
	for _, key := range slices.Sorted(maps.Keys(env)) {
		cmd.Env = append(cmd.Env, key+"="+env[key])
	}
	started := make(chan struct{})
	close(started)
	p := &process{
		s: s, id: newUUIDv7(time.Now()), name: name, command: command, args: args, cwd: cwd, pty: pty,
		done: make(chan struct{}), lastInput: started,
		stdout: ring{limit: retainedOutputBytes}, stderr: ring{limit: retainedOutputBytes},
		text: map[string]*utf8Stream{"stdout": {}, "stderr": {}},
	}
	// Hold p.mu until process_started is out, so no output event can come first.
	p.mu.Lock()
	defer p.mu.Unlock()
	p.startedAt = time.Now()
	c, err := startChild(cmd, childOptions{stdin: true, pty: pty}, p.addOutput)
	if err != nil {
		return nil, fmt.Errorf("Cannot start process: %v", err)
	}
	p.child = c
	s.mu.Lock()
	s.processes[p.id] = p
	s.processOrder = append(s.processOrder, p.id)
	s.mu.Unlock()
	s.children.Add(1)
	go p.waitExit()
	announce(p)
	s.emit("process_started", processStartedData{
		ProcessID: p.id, PID: c.pid, Command: command, Args: args, Cwd: cwd, Name: name, PTY: pty,
		StartedAt: timestamp(p.startedAt),
	})
	return p, nil
}

// processInfo is one entry of process_list.
type processInfo struct {
	ProcessID   string  `json:"processId"`
	PID         int     `json:"pid"`
	Name        *string `json:"name"`
	Command     string  `json:"command"`
	Status      string  `json:"status"`
	ExitCode    *int    `json:"exitCode"`
	Signal      *string `json:"signal"`
	StartedAt   string  `json:"startedAt"`
	OutputBytes int64   `json:"outputBytes"`
}

// processList answers every process not yet removed, oldest first.
// Fields: none. Answer: {"processes":[{processId, pid, name, command,
// status: running|exited, exitCode, signal, startedAt, outputBytes}]}.
func (s *server) processList(r *request) (any, error) {
	s.mu.Lock()
	var procs []*process
	for _, id := range s.processOrder {
		procs = append(procs, s.processes[id])
	}
	s.mu.Unlock()
	list := []processInfo{}
	for _, p := range procs {
		p.mu.Lock()
		info := processInfo{
			ProcessID: p.id, PID: p.child.pid, Name: p.name, Command: p.command, Status: "running",
			ExitCode: p.exitCode, Signal: p.signal, StartedAt: timestamp(p.startedAt),
			OutputBytes: p.stdout.total + p.stderr.total,
		}
		if p.exited {
			info.Status = "exited"
		}
		p.mu.Unlock()
		list = append(list, info)
	}
	return struct {
		Processes []processInfo `json:"processes"`
	}{list}, nil
}

// processOutput answers the retained tail of a process's output.
// Fields: processId; [tail] (bytes per stream, default 65536).
// Answer: {processId, stdout, stderr, truncated} — truncated when the
// process wrote more to either stream than is returned.
func (s *server) processOutput(r *request) (any, error) {
	tail, err := r.optPositiveInt("tail", defaultTailBytes)
	if err != nil {
		return nil, err
	}
	p, err := s.lookupProcess(r)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	stdout, stderr := p.stdout.tail(tail), p.stderr.tail(tail)
	return struct {
		ProcessID string `json:"processId"`
		Stdout    string `json:"stdout"`
		Stderr    string `json:"stderr"`
		Truncated bool   `json:"truncated"`
	}{p.id, string(stdout), string(stderr), int64(len(stdout)) < p.stdout.total || int64(len(stderr)) < p.stderr.total}, nil
}

// processWrite writes to a running process's stdin, after any earlier
// writes and keys to it.
// Fields: processId, data (string). Answer: null once written.
func (s *server) processWrite(r *request) (any, error) {
	data, err := r.str("data")
	if err != nil {
		return nil, err
	}
	p, err := s.runningProcess(r)
	if err != nil {
		return nil, err
	}
	if err := p.stdinClosed(); err != nil {
		return nil, err // known now: answer in order, not from the background
	}
	p.afterInput(r, func() error { return p.writeStdin([]byte(data)) })
	return noReply{}, nil
}

// processSendKeys presses keys in a running process. Under a PTY each key
// is written as the bytes a terminal sends. Without one, CtrlC sends
// SIGINT to the process group, CtrlZ SIGTSTP, CtrlD closes stdin, and the
// other keys are written as bytes (Enter as "\n").
// Fields: processId, keys ([ProcessKey]). Answer: null once pressed.
func (s *server) processSendKeys(r *request) (any, error) {
	keys, err := r.optStrings("keys")
	if err == nil && keys == nil {
		err = missing("keys", "an array of keys")
	}
	if err != nil {
		return nil, err
	}
	for _, key := range keys {
		if _, ok := keyBytes[key]; !ok {
			return nil, fmt.Errorf("Invalid key %q: must be one of %s", key, strings.Join(processKeys, ", "))
		}
	}
	p, err := s.runningProcess(r)
	if err != nil {
		return nil, err
	}
	p.afterInput(r, func() error {
		for _, key := range keys {
			if err := p.pressKey(key); err != nil {
				return err
			}
		}
		return nil
	})
	return noReply{}, nil
}

// pressKey does what one key means for this process (see processSendKeys).
func (p *process) pressKey(key string) error {
	if !p.pty {
		switch key {
		case "CtrlC":
			return p.child.signalGroup(syscall.SIGINT)
		case "CtrlZ":
			return p.child.signalGroup(syscall.SIGTSTP)
		case "CtrlD":
			p.mu.Lock()
			defer p.mu.Unlock()
			p.stdinGone = true
			return p.child.stdin.Close()
		case "Enter":
			return p.writeStdin([]byte("\n"))
		}
	}
	return p.writeStdin([]byte(keyBytes[key]))
}

// processSignal sends a signal to a running process's whole group.
// Fields: processId, signal (ProcessSignal). Answer: null, always before
// the process_exited the signal may cause.
func (s *server) processSignal(r *request) (any, error) {
	name, err := r.enum("signal", processSignals)
	if err != nil {
		return nil, err
	}
	p, err := s.runningProcess(r)
	if err != nil {
		return nil, err
	}
	return p.signalAndReply(r, signalNumbers[name])
}

// processKill stops a running process: SIGTERM to its group, then SIGKILL
// if it has not exited 2 s later.
// Fields: processId. Answer: null once SIGTERM is sent, before
// process_exited.
func (s *server) processKill(r *request) (any, error) {
	p, err := s.runningProcess(r)
	if err != nil {
		return nil, err
	}
	data, err := p.signalAndReply(r, syscall.SIGTERM)
	if err == nil {
		go p.child.killAfterGrace()
	}
	return data, err
}

// signalAndReply signals the process group and answers r while holding
// p.mu, which process_exited also needs: the answer always comes first.
func (p *process) signalAndReply(r *request, sig syscall.Signal) (any, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.child.signalGroup(sig); err != nil {
		return nil, err
	}
	if r.typ != "process" { // the process tool answers through its tool result
		p.s.reply(r, nil, nil)
		return noReply{}, nil
	}
	return nil, nil
}

// waitResult is the answer to process_wait.
type waitResult struct {
	ExitCode *int    `json:"exitCode"`
	Signal   *string `json:"signal"`
	TimedOut bool    `json:"timedOut"`
}

// waitFor waits until the process has exited (and process_exited is
// out), the timeout passes (0: no timeout), or ctx ends (ok is false).
func (p *process) waitFor(ctx context.Context, timeout time.Duration) (res waitResult, ok bool) {
	var expired <-chan time.Time
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return waitResult{p.exitCode, p.signal, false}, true
	case <-expired:
		return waitResult{TimedOut: true}, true
	case <-ctx.Done():
		return waitResult{}, false
	}
}

// processWait waits for a process to exit, in the background (at once
// when it already has).
// Fields: processId; [timeout] (ms). Answer: {exitCode, signal, timedOut}.
func (s *server) processWait(r *request) (any, error) {
	timeout, _, err := r.optPositive("timeout")
	if err != nil {
		return nil, err
	}
	p, err := s.lookupProcess(r)
	if err != nil {
		return nil, err
	}
	wait := func() (any, error) {
		res, _ := p.waitFor(context.Background(), time.Duration(timeout*float64(time.Millisecond)))
		return res, nil
	}
	select {
	case <-p.done:
		return wait()
	default:
	}
	s.answerLater(r, wait)
	return noReply{}, nil
}

// processRemove forgets an exited process.
// Fields: processId. Answer: null; a running process is an error.
func (s *server) processRemove(r *request) (any, error) {
	p, err := s.lookupProcess(r)
	if err != nil {
		return nil, err
	}
	select {
	case <-p.done:
	default:
		return nil, fmt.Errorf("Process %s is still running; kill it first", p.id)
	}
	s.mu.Lock()
	delete(s.processes, p.id)
	s.processOrder = slices.DeleteFunc(s.processOrder, func(id string) bool { return id == p.id })
	s.mu.Unlock()
	return nil, nil
}

// runningProcesses counts the processes that have not exited.
func (s *server) runningProcesses() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.processes {
		if !p.isExited() {
			n++
		}
	}
	return n
}

// resolvePath makes path absolute against dir.
func resolvePath(dir, path string) string {
	if path == "" {
		return dir
	}
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(dir, path)
}
