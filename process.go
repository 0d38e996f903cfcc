package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
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

// child is a started process in its own process group whose stdout and
// stderr are read by two goroutines.
type child struct {
	cmd     *exec.Cmd
	pid     int
	readers sync.WaitGroup
	pipes   []*os.File // read ends, closed by the readers
}

// startChild starts cmd in a new process group. Each chunk it writes to
// stdout or stderr is passed to onOutput, from one goroutine per stream;
// onOutput may block, and then the child blocks on its pipe.
func startChild(cmd *exec.Cmd, onOutput func(stream string, p []byte)) (*child, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	c := &child{cmd: cmd, pid: cmd.Process.Pid, pipes: []*os.File{outR, errR}}
	c.readers.Add(2)
	go c.read(outR, "stdout", onOutput)
	go c.read(errR, "stderr", onOutput)
	return c, nil
}

func (c *child) read(pipe *os.File, stream string, onOutput func(string, []byte)) {
	defer c.readers.Done()
	defer pipe.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := pipe.Read(buf)
		if n > 0 {
			onOutput(stream, buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// wait waits for the child to exit, then kills what remains of its process
// group (nothing a command started outlives it) and waits for the last of
// its output. A descendant that left the group and still holds a pipe is
// cut off after killGrace.
func (c *child) wait() *os.ProcessState {
	c.cmd.Wait()
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
func (c *child) terminate(exited <-chan struct{}) {
	c.signalGroup(syscall.SIGTERM)
	select {
	case <-exited:
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
	data := append(u.held, p...)
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
	child     *child
	cancelled atomic.Bool
	answered  <-chan struct{}
}

// bashOutput gathers a bash command's output as it arrives: an event per
// chunk, a tail per stream and of both interleaved, and — once the output
// passes the limits — all of it in a temp file.
type bashOutput struct {
	s         *server
	requestID *string

	mu       sync.Mutex // guards the fields below; the two streams write concurrently
	stdout   tail
	stderr   tail
	combined tail
	text     map[string]*utf8Stream
	full     *os.File
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
		o.s.out.write(event{Type: "bash_execution_update", Data: bashUpdate{o.requestID, stream, chunk}})
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
			o.s.out.write(event{Type: "bash_execution_update", Data: bashUpdate{o.requestID, stream, chunk}})
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
	timeout, hasTimeout, err := r.optPositive("timeout")
	if err != nil {
		return nil, err
	}
	out := &bashOutput{s: s, requestID: r.idString(), text: map[string]*utf8Stream{"stdout": {}, "stderr": {}}}
	cmd := exec.Command(s.shell, "-c", command)
	cmd.Dir = s.cfg.cwd
	c, err := startChild(cmd, out.add)
	if err != nil {
		return nil, fmt.Errorf("Cannot start bash: %v", err)
	}
	run := &bashRun{child: c}
	ctx, cancel := s.ctx, context.CancelFunc(func() {})
	if hasTimeout {
		ctx, cancel = context.WithTimeout(s.ctx, time.Duration(timeout*float64(time.Second)))
	}
	exited := make(chan struct{})
	stopWatching := context.AfterFunc(ctx, func() {
		run.cancelled.Store(true)
		if s.ctx.Err() != nil {
			c.terminate(exited) // shutdown: SIGTERM first, SIGKILL after a grace
		} else {
			c.signalGroup(syscall.SIGKILL) // timeout
		}
	})
	s.mu.Lock()
	s.bashRuns[run] = true
	s.mu.Unlock()
	run.answered = s.answerLater(r, func() (any, error) {
		ps := c.wait()
		close(exited)
		stopWatching()
		cancel()
		s.mu.Lock()
		delete(s.bashRuns, run)
		s.mu.Unlock()
		code, _ := exitStatus(ps)
		res := out.finish(code, run.cancelled.Load())
		s.appendMessage(bashExecutionMessage{
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
	for _, run := range runs {
		run.cancelled.Store(true)
		run.child.signalGroup(syscall.SIGKILL)
	}
	if len(runs) == 0 {
		return nil, nil
	}
	s.answerLater(r, func() (any, error) {
		for _, run := range runs {
			<-run.answered
		}
		return nil, nil
	})
	return noReply{}, nil
}

// appendMessage adds a message to the conversation.
func (s *server) appendMessage(m any) {
	s.mu.Lock()
	s.messages = append(s.messages, m)
	s.mu.Unlock()
}
