package main

// Shell commands: the bounded output rings every command's output goes
// through, rpi's temp folder (for full output too long to keep), what a
// shell command gathers as it runs, and the user's own bash command (docs/commands.md).

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Output limits of a shell command's answer (docs/commands.md): the tail, at most
// maxOutputLines lines and maxOutputBytes bytes.
const (
	maxOutputLines = 2000
	maxOutputBytes = 50 * 1024
)

// ---- Rings: bounded output ----

// ring keeps the last limit bytes written to it and counts them all; a
// byte's cursor is how many bytes came before it.
type ring struct {
	buf   []byte // grows up to limit, then wraps
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

// startCursor is the cursor of the oldest byte kept.
func (r *ring) startCursor() int64 { return r.total - int64(len(r.buf)) }

// bytes returns everything kept, oldest first (a copy).
func (r *ring) bytes() []byte {
	return append(append(make([]byte, 0, len(r.buf)), r.buf[r.next:]...), r.buf[:r.next]...)
}

// readFrom returns up to max bytes from cursor on (or from the oldest kept
// byte, when cursor is older), and the cursor they start at.
func (r *ring) readFrom(cursor int64, limit int) (start int64, data []byte) {
	start = min(max(cursor, r.startCursor()), r.total)
	all := r.bytes()
	from := int(start - r.startCursor())
	return start, all[from:min(len(all), from+limit)]
}

// shrink drops the room a finished stream will not use, and all but its
// last keep bytes: what it keeps is copied into an allocation of its own,
// so that nothing holds on to the ring's.
func (r *ring) shrink(keep int) {
	// The newest bytes end just before next (at the end when it is 0).
	tail := make([]byte, min(keep, len(r.buf)))
	if n := copy(tail[max(len(tail)-r.next, 0):], r.buf[max(r.next-len(tail), 0):r.next]); n < len(tail) {
		copy(tail, r.buf[len(r.buf)-(len(tail)-n):])
	}
	r.buf, r.next = tail, 0
	r.limit = max(len(r.buf), 1)
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
	cut := incompleteEnd(data)
	u.held = append(u.held[:0:0], data[cut:]...)
	return string(data[:cut])
}

// incompleteEnd is where a character that b ends in the middle of starts
// (its next bytes may come in a later read), or len(b) when none does.
func incompleteEnd(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

// flush returns whatever is still held back (an incomplete character).
func (u *utf8Stream) flush() string {
	s := string(u.held)
	u.held = nil
	return s
}

// ---- Temp files ----

// tempFiles is rpi's own temp folder, made on first use and removed at
// exit (by the watchdog if rpi is killed; else by the next rpi's sweep).
// Of the full-output files an answer named (keep), it holds the newest
// keepFiles and keepBytes of them together: rpi serve lives for days.
type tempFiles struct {
	parent   string
	watchdog *watchdog
	stderr   io.Writer

	mu        mutex[tempFilesMu] // guards the fields below
	dir       string
	kept      []keptFile // the full-output files an answer named, oldest first
	keptBytes int64      // their sizes together
	// keepFiles and keepBytes bound the full-output files kept
	// (maxKeptFiles, maxKeptBytes; tests lower them).
	keepFiles int
	keepBytes int64
}

// The full-output files rpi keeps at most: past either bound, the oldest
// are removed as a newer one is kept; the newest always stays, whatever
// its size (at most maxFullOutputBytes and a line).
const (
	maxKeptFiles = 64
	maxKeptBytes = 1 << 30
)

// keptFile is a full-output file an answer named, and its size.
type keptFile struct {
	path string
	size int64
}

// keep counts in the written file path, which an answer names, and
// removes the oldest of those kept while there are more than keepFiles
// of them or more than keepBytes together, the newest always excepted.
// The count is taken under mu; the files go once it is let go of.
func (tf *tempFiles) keep(path string, size int64) {
	tf.mu.Lock()
	tf.kept = append(tf.kept, keptFile{path, size})
	tf.keptBytes += size
	var old []string
	for len(tf.kept) > 1 && (len(tf.kept) > tf.keepFiles || tf.keptBytes > tf.keepBytes) {
		old = append(old, tf.kept[0].path)
		tf.keptBytes -= tf.kept[0].size
		tf.kept = slices.Delete(tf.kept, 0, 1)
	}
	tf.mu.Unlock()
	for _, path := range old {
		os.Remove(path)
	}
}

// create makes a new file in rpi's temp folder, and the folder again
// when a command removed it (a model cleaning up /tmp): under the same
// name, which the watchdog knows.
func (tf *tempFiles) create(pattern string) (*os.File, error) {
	tf.mu.Lock()
	defer tf.mu.Unlock()
	if tf.dir == "" {
		var b [4]byte
		rand.Read(b[:])
		dir := filepath.Join(tf.parent, fmt.Sprintf("rpi-%d-%s", os.Getpid(), hex.EncodeToString(b[:])))
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, err
		}
		tf.dir = dir
		tf.watchdog.send("d"+dir, tf.stderr)
	}
	f, err := os.CreateTemp(tf.dir, pattern)
	if errors.Is(err, fs.ErrNotExist) && os.Mkdir(tf.dir, 0o700) == nil {
		return os.CreateTemp(tf.dir, pattern)
	}
	return f, err
}

func (tf *tempFiles) removeAll() {
	tf.mu.Lock()
	defer tf.mu.Unlock()
	if tf.dir != "" {
		os.RemoveAll(tf.dir)
		tf.dir = ""
	}
	tf.kept, tf.keptBytes = nil, 0
}

// sweepTempDirs removes the temp folders of rpis that died without
// cleaning up (rpi-<pid>-<hex> whose pid is gone).
func sweepTempDirs(parent string) {
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		parts := strings.Split(e.Name(), "-")
		if !e.IsDir() || len(parts) != 3 || parts[0] != "rpi" || len(parts[2]) != 8 {
			continue
		}
		if pid, err := strconv.Atoi(parts[1]); err == nil && pid != os.Getpid() && !processAlive(pid) {
			os.RemoveAll(filepath.Join(parent, e.Name()))
		}
	}
}

// ---- Shell commands: the user's bash and the model's ----

// shellOutput gathers a shell command's output as it arrives: a bounded
// tail per stream and of both interleaved, onText for each chunk of text,
// and — once the output passes the limits — all of it streamed to a temp
// file, so memory stays flat whatever the size.
type shellOutput struct {
	temp    *tempFiles
	stderr  io.Writer
	onText  func(stream, text string) // posts a chunk's report, under mu: in the order the chunks came
	deliver func()                    // delivers what onText posted, once mu is let go of

	mu        mutex[shellOutputMu] // guards the fields below; the two streams write concurrently
	streams   map[string]*shellTail
	combined  shellTail
	text      map[string]*utf8Stream
	full      *os.File
	fullBytes int64
	fullErr   error
}

// maxFullOutputBytes caps the full-output file: a command that never
// stops printing cannot fill the disk (or a RAM-backed TMPDIR).
const maxFullOutputBytes = 1 << 30

// shellTail is one stream's tail and line count.
type shellTail struct {
	ring     ring
	newlines int64
	lastByte byte
}

func newShellTail() shellTail { return shellTail{ring: ring{limit: 2 * maxOutputBytes}} }

func (t *shellTail) write(p []byte) {
	t.ring.write(p)
	t.newlines += int64(bytes.Count(p, []byte("\n")))
	if len(p) > 0 {
		t.lastByte = p[len(p)-1]
	}
}

// lines counts lines: each "\n" ends one, and a final unterminated one counts.
func (t *shellTail) lines() int64 {
	if t.ring.total > 0 && t.lastByte != '\n' {
		return t.newlines + 1
	}
	return t.newlines
}

func (t *shellTail) overLimit() bool {
	return t.ring.total > maxOutputBytes || t.lines() > maxOutputLines
}

// text returns the whole stream, or its cut tail when it is over the limit.
func (t *shellTail) text() (text string, truncated bool) {
	if !t.overLimit() {
		return string(t.ring.bytes()), false
	}
	return string(cutTail(t.ring.bytes(), maxOutputLines, maxOutputBytes)), true
}

func newShellOutput(s *session, onText func(stream, text string)) *shellOutput {
	o := &shellOutput{temp: s.temp, stderr: s.stderr, onText: onText, deliver: s.deliver, combined: newShellTail(),
		text: map[string]*utf8Stream{"stdout": {}, "stderr": {}}}
	stdout, stderrTail := newShellTail(), newShellTail()
	o.streams = map[string]*shellTail{"stdout": &stdout, "stderr": &stderrTail}
	return o
}

func (o *shellOutput) add(stream string, p []byte) {
	defer o.deliver()
	o.mu.Lock()
	defer o.mu.Unlock()
	newlines := o.combined.newlines + int64(bytes.Count(p, []byte("\n")))
	if o.full == nil && (o.combined.ring.total+int64(len(p)) > maxOutputBytes || newlines >= maxOutputLines) {
		o.startFull()
	}
	o.streams[stream].write(p)
	o.combined.write(p)
	if o.full != nil {
		o.writeFull(p)
	}
	if chunk := o.text[stream].next(p); chunk != "" {
		o.onText(stream, chunk)
	}
}

// startFull starts the temp file with everything so far: the combined
// ring still holds all of it, as it is not yet over the byte limit.
func (o *shellOutput) startFull() {
	if o.fullErr != nil {
		return
	}
	f, err := o.temp.create("rpi-bash-*.log")
	if err != nil {
		o.fullErr = err
		fmt.Fprintf(o.stderr, "rpi: cannot save full bash output: %v\n", err)
		return
	}
	o.full = f
	o.writeFull(o.combined.ring.bytes())
}

func (o *shellOutput) writeFull(p []byte) {
	if o.fullErr != nil || o.fullBytes > maxFullOutputBytes {
		return
	}
	o.fullBytes += int64(len(p))
	if o.fullBytes > maxFullOutputBytes {
		p = append(p[:len(p)-int(o.fullBytes-maxFullOutputBytes):len(p)-int(o.fullBytes-maxFullOutputBytes)],
			"\n[rpi: the output went on; this file keeps its first 1 GiB]\n"...)
	}
	if _, err := o.full.Write(p); err != nil {
		o.fullErr = err
		fmt.Fprintf(o.stderr, "rpi: cannot save full bash output to %s: %v\n", o.full.Name(), err)
	}
}

// shellResult is what a finished shell command produced.
type shellResult struct {
	ExitCode       *int   `json:"exitCode"`
	Stdout         string `json:"stdout"`
	Stderr         string `json:"stderr"`
	Output         string `json:"output"`
	Cancelled      bool   `json:"cancelled"`
	Truncated      bool   `json:"truncated"`
	FullOutputPath string `json:"fullOutputPath,omitempty"`
	// fullErr is why the output was cut and no file has all of it.
	fullErr error
}

// finish flushes held-back text and builds the result. The full-output
// file is named only when the output was cut and the file was written
// without error: all of the output, or its first maxFullOutputBytes and
// a line saying it went on. A file named is kept among the newest
// (tempFiles.keep); one not named is removed at once.
func (o *shellOutput) finish(exitCode *int, cancelled bool) shellResult {
	defer o.deliver() // the last of the text, before the caller answers
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, stream := range []string{"stdout", "stderr"} {
		if chunk := o.text[stream].flush(); chunk != "" {
			o.onText(stream, chunk)
		}
	}
	res := shellResult{ExitCode: exitCode, Cancelled: cancelled}
	var cut [3]bool
	res.Stdout, cut[0] = o.streams["stdout"].text()
	res.Stderr, cut[1] = o.streams["stderr"].text()
	res.Output, cut[2] = o.combined.text()
	res.Truncated = cut[0] || cut[1] || cut[2]
	if o.full != nil {
		if err := o.full.Close(); err != nil && o.fullErr == nil {
			o.fullErr = err
		}
		if o.fullErr == nil && res.Truncated {
			res.FullOutputPath = o.full.Name()
			size := o.fullBytes
			if info, err := os.Stat(res.FullOutputPath); err == nil {
				size = info.Size() // what was written, the closing line included
			}
			o.temp.keep(res.FullOutputPath, size)
		} else {
			os.Remove(o.full.Name())
		}
	}
	if res.Truncated && res.FullOutputPath == "" {
		res.fullErr = o.fullErr
	}
	return res
}

// sessionVariables name the session to the model's bash commands, as pi
// 1.6 does (docs/commands.md#tools): its id, its file (none in memory), the
// model's provider and id (none without a model), and the thinking
// level in force.
var sessionVariables = []string{"PI_SESSION_ID", "PI_SESSION_FILE", "PI_PROVIDER", "PI_MODEL", "PI_REASONING_LEVEL"}

// sessionEnv is the environment of the model's bash commands and of the
// processes its process tool starts: childEnv with sessionValues in place
// of any rpi inherited (a pi or rpi that started this one).
func (s *session) sessionEnv() []string {
	return append(withoutVariables(s.set.childEnv, sessionVariables), s.sessionValues()...)
}

// sessionValues are sessionVariables as they are now, as NAME=value: what
// the model's commands get wherever they run (rpi's own shell and
// processes, sessionEnv; the editor's terminal, acpTerminals.create). A
// value with a NUL (a session file's id, a models.json id), or one too
// long for a variable (maxVariableBytes), is left out: no environment can
// hold it, and with it no command would start.
func (s *session) sessionValues() []string {
	info := s.conv.info()
	s.mu.Lock()
	m, level := s.model, s.effectiveThinking()
	s.mu.Unlock()
	var values []string
	add := func(name, value string) {
		if !strings.ContainsRune(value, 0) && len(name)+1+len(value) < maxVariableBytes {
			values = append(values, name+"="+value)
		}
	}
	add("PI_SESSION_ID", info.id)
	if info.path != "" {
		add("PI_SESSION_FILE", info.path)
	}
	if m != nil {
		add("PI_PROVIDER", m.Provider)
		add("PI_MODEL", m.ID)
	}
	add("PI_REASONING_LEVEL", level)
	return values
}

// maxVariableBytes bounds one NAME=value of the environment rpi gives a
// command: Windows takes at most 32,767 characters in one, Linux 128 KiB
// (execve fails with "argument list too long" past it). Only a session
// file written by hand, or models.json, gives a value that long.
const maxVariableBytes = 32 << 10

// runShell runs command with the shell in the session cwd and the
// environment env, in its own process group, feeding its output to out,
// until it ends. Cancelling ctx
// or the timeout (0: none) kills the group: SIGKILL, or at shutdown SIGTERM
// and SIGKILL after a grace. settings.json's shellPath is the shell when
// set, and its shellCommandPrefix a line run before the command, as in pi.
func (s *session) runShell(ctx context.Context, command string, env []string, timeout time.Duration, out *shellOutput) (end childEnd, err error) {
	shell := s.set.shellPath
	if shell == "" {
		if shell, err = s.set.shell(); err != nil {
			return childEnd{}, fmt.Errorf("Cannot start bash: %v", err)
		}
	}
	if s.set.shellPrefix != "" {
		command = s.set.shellPrefix + "\n" + command
	}
	cmd := s.command(shell, "-c", command)
	cmd.Dir = s.set.cwd
	cmd.Env = env
	end, err = s.runChild(ctx, cmd, timeout, out.add)
	if err != nil {
		return childEnd{}, shellStartError(shell, cmd.Dir, s.set.shellPath != "", err)
	}
	return end, nil
}

// shellStartError is the failure of a shell that did not start in dir:
// pi's "Custom shell path not found: PATH" for a settings.json shellPath
// that is not there (configured), else "Cannot start" and the shell as
// it was run ("bash" when it is bash) and why. The system says "no such
// file or directory" alike for a shell and for a folder to run it in
// that is gone: the folder's is told as such ("chdir DIR: …").
func shellStartError(shell, dir string, configured bool, err error) error {
	name := shell
	if base := filepath.Base(shell); strings.EqualFold(base, "bash") || strings.EqualFold(base, "bash.exe") {
		name = "bash"
	}
	if errors.Is(err, fs.ErrNotExist) && dir != "" {
		if _, gone := os.Stat(dir); gone != nil {
			return fmt.Errorf("Cannot start %s: chdir %s: %v", name, dir, unwrapPathError(gone))
		}
	}
	if configured && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound)) {
		return fmt.Errorf("Custom shell path not found: %s", shell)
	}
	return fmt.Errorf("Cannot start %s: %v", name, unwrapPathError(err))
}

// ---- The model's bash elsewhere ----

// commandRunner runs the model's bash commands somewhere other than rpi's
// own shell, for a front end that has a place of its own for them (ACP:
// the editor's terminal, docs/acp.md). A session has one only when its
// front end gives it, and the runner may leave any call to rpi's shell.
// The approval gate has passed before a call reaches it.
type commandRunner interface {
	// runCommand runs c.command with bash in c.cwd until it exits, ctx
	// ends (the run is aborted) or c.timeout passes, ending it then.
	// taken is false when the runner leaves the call to rpi's own shell
	// (it ran nothing); err, when it took it, is why the command could not
	// run or how it ended is not known: the call's error. It is called on
	// the run chain with no core lock held, and returns once ctx ends
	// whatever the place it runs in does.
	runCommand(ctx context.Context, c commandCall) (end commandEnd, taken bool, err error)
}

// commandCall is one bash call for a commandRunner.
type commandCall struct {
	id      string        // the model's tool call id
	command string        // bash's -c argument
	cwd     string        // the session's working directory
	timeout time.Duration // 0: none
	keep    int           // the bytes of the output's end the call's result can use: the runner need keep no more
}

// commandEnd is how a command run elsewhere ended.
type commandEnd struct {
	output    string // stdout and stderr together: its last keep bytes at most
	truncated bool   // output lost its start (only its end was kept)
	exitCode  *int   // nil when it did not exit by itself (a signal, the timeout, an abort) or the place it ran gave none
	signal    string // the signal that ended it, when the place it ran names one
	timedOut  bool   // its timeout passed, and it was ended
}

// ---- The user's bash (docs/commands.md) ----

// bashRun is one user bash command in flight.
type bashRun struct {
	cancel context.CancelFunc
	// abortAnswered is closed once abort_bash has answered, when it
	// cancelled this run: the cancelled answer comes after that one.
	abortAnswered chan struct{}
	aborted       bool // guarded by userBashRuns.mu
}

// userBashRuns are a session's runs of the user's own shell command (rpc's
// bash), which abort_bash ends: the session's, not the host's.
type userBashRuns struct {
	mu   mutex[userBashMu] // guards runs and each run's aborted
	runs map[*bashRun]bool
}

// count is how many runs are under way.
func (u *userBashRuns) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.runs)
}

// add counts run in.
func (u *userBashRuns) add(run *bashRun) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.runs == nil {
		u.runs = map[*bashRun]bool{}
	}
	u.runs[run] = true
}

// remove counts run out, and reports whether abortAll ended it.
func (u *userBashRuns) remove(run *bashRun) (aborted bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.runs, run)
	return run.aborted
}

// abortAll marks every run aborted and returns them, for the caller to
// cancel.
func (u *userBashRuns) abortAll() []*bashRun {
	u.mu.Lock()
	defer u.mu.Unlock()
	var runs []*bashRun
	for run := range u.runs {
		run.aborted = true
		runs = append(runs, run)
	}
	return runs
}
