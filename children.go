package main

// Children: how rpi starts a process in its own process group (with pipes
// or a terminal), reads its output, signals it and reaps it, and the table
// of every child, which shutdown waits for. Shell commands (shell.go) and
// background processes (process.go) are built on it.

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// processTable owns every child rpi starts: the background processes by
// id, the user's running bash commands, and the count shutdown waits for.
type processTable struct {
	watchdog *watchdog
	stderr   io.Writer
	// adopt (runEnv.adoptOrphans; nil for none) is called before each
	// child starts, with reapAdoptedNow to call as a process exits.
	adopt func(reap func())
	// reapAdopted (runEnv.reapAdopted; nil for none) reaps what rpi
	// adopted that has exited, but the children keep names; called under
	// mu (reapAdoptedNow).
	reapAdopted func(keep func(pid int) bool)

	// children counts started children not yet reaped.
	children sync.WaitGroup

	// ending is closed once rpi ends (close): children stopped from then
	// on get the shorter graces of the end (endKillGrace, endPipeGrace).
	ending chan struct{}

	// startMu is held while a child starts, from the check of closed
	// until its pid is in live (the fork and the exec, which can take
	// seconds on a slow disk), and while what rpi adopted is reaped or
	// ended, so that no child of rpi's own is taken for adopted. mu is
	// not held meanwhile: listing the processes never waits for a start.
	startMu mutex[processStartMu]
	// live are the pids of the children started and not yet reaped: an
	// exited one among them is os/exec's to wait for, not an adopted
	// process to reap (reapAdopted). A pid joins as its child starts,
	// and leaves once it is reaped; startMu guards it.
	live map[int]bool

	mu     mutex[processTableMu] // guards the fields below
	closed bool                  // shutting down: no new children
	byID   map[string]*process
	order  []string // process ids, oldest first
	// ended are the processes in byID that have ended, in the order
	// they ended; each session keeps at most keepEnded of them
	// (noteEnded), maxEndedProcesses unless a test lowers it.
	ended     []*process
	keepEnded int
	// starting counts the background processes being started, not yet
	// in byID, which count against the limit (reserveProcess).
	starting int
}

func newProcessTable(w *watchdog, stderr io.Writer, adopt func(reap func())) *processTable {
	return &processTable{watchdog: w, stderr: stderr, adopt: adopt, ending: make(chan struct{}), byID: map[string]*process{}, live: map[int]bool{},
		keepEnded: maxEndedProcesses}
}

// close refuses every later child, and from then on stops children with
// the graces of the end; shutdown then waits for the others. A child
// being started is waited for: it is in the count shutdown waits for. It
// may be called more than once.
func (t *processTable) close() {
	t.startMu.Lock()
	defer t.startMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		close(t.ending)
	}
}

// isEnding reports whether rpi ends (close was called).
func (t *processTable) isEnding() bool {
	select {
	case <-t.ending:
		return true
	default:
		return false
	}
}

var errShuttingDown = errors.New("rpi is shutting down")

// child is a started process in its own process group whose output is
// read by one goroutine per stream.
type child struct {
	table   *processTable
	cmd     *exec.Cmd
	pid     int
	exited  chan struct{} // closed once the child itself has exited
	stdin   *os.File      // write end of its stdin pipe, or the PTY master; nil when stdin is /dev/null
	tty     *os.File      // the PTY master, for resizing; nil without a PTY
	readers sync.WaitGroup
	pipes   []*os.File     // read ends (or the PTY master), closed by the readers
	taken   []atomic.Int64 // bytes read from each of pipes so far
	// killed is set when rpi ends the child before it exited (a timeout,
	// an abort, shutdown): on Windows, where a killed process exits with
	// code 1 like any failure, only this tells the two apart.
	killed atomic.Bool
	// cutNow is closed once rpi has killed the child (kill: an abort, a
	// timeout): wait then reads what its pipes hold and closes them,
	// without waiting for a process it left outside its group and
	// session that still holds them.
	cutNow  chan struct{}
	cutOnce sync.Once
	// mu orders every signal against the reaping. Until reaped is set
	// the child is at least a zombie (on Linux; see wait), so its pid,
	// and the group and session it leads, are its own and no other
	// process's; from then on nothing is sent to them.
	mu     mutex[childMu]
	reaped bool
}

// childOptions say how a child's stdin and output are connected.
type childOptions struct {
	stdin      bool // a pipe the host writes to (otherwise /dev/null)
	combined   bool // stdout and stderr share one pipe, read as stream "combined"
	pty        bool // a new pseudo-terminal as stdin, stdout and stderr, in a new session
	rows, cols int  // the PTY's size
	// answers: the child answers requests (an MCP server), so each read
	// is handed on at once, never held back to let the pipe fill.
	answers bool
	// ended, if set, is told as each stream ends (every writer closed it,
	// or wait cut it), after its last output, from the stream's reader;
	// wait waits for it.
	ended func(stream string)
}

// start starts cmd in a new process group (under a PTY: a new session
// whose process group it leads) that the watchdog kills should rpi die.
// Each chunk of output is passed to onOutput, from one goroutine per
// stream ("stdout" and "stderr", or one "combined"); onOutput may block,
// and then the child blocks on its pipe. The caller must wait() for it.
func (t *processTable) start(cmd *exec.Cmd, opts childOptions, onOutput func(stream string, p []byte)) (*child, error) {
	t.startMu.Lock()
	defer t.startMu.Unlock()
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, errShuttingDown
	}
	readyChildSignals()
	if t.adopt != nil {
		t.adopt(t.reapAdoptedNow)
	}
	var c *child
	var err error
	if opts.pty {
		c, err = startPTYChild(cmd, opts, onOutput, t.stderr)
	} else {
		c, err = startPipeChild(cmd, opts, onOutput, t.stderr)
	}
	if err != nil {
		return nil, err
	}
	c.table = t
	t.live[c.pid] = true
	t.children.Add(1)
	t.watchdog.send("+"+strconv.Itoa(c.pid), t.stderr)
	return c, nil
}

func startPipeChild(cmd *exec.Cmd, opts childOptions, onOutput func(string, []byte), stderr io.Writer) (*child, error) {
	startInGroup(cmd, false)
	var parentEnds, childEnds []*os.File
	closeAll := func(files []*os.File) {
		for _, f := range files {
			f.Close()
		}
	}
	streams := []string{"stdout", "stderr"}
	if opts.combined {
		streams = []string{"combined"}
	}
	for range streams {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(parentEnds)
			closeAll(childEnds)
			return nil, err
		}
		parentEnds, childEnds = append(parentEnds, r), append(childEnds, w)
		growPipe(r)
	}
	cmd.Stdout, cmd.Stderr = childEnds[0], childEnds[len(childEnds)-1]
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
	c := &child{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{}), cutNow: make(chan struct{}), stdin: stdin, pipes: parentEnds, taken: make([]atomic.Int64, len(parentEnds))}
	c.readers.Add(len(parentEnds))
	for i := range parentEnds {
		go guarded(stderr, "reading a child's "+streams[i], func() { c.read(i, streams[i], !opts.answers, onOutput, opts.ended) })()
	}
	return c, nil
}

// startPTYChild starts cmd with a new pseudo-terminal as its controlling
// terminal and stdio; the master is both its output and its stdin.
func startPTYChild(cmd *exec.Cmd, opts childOptions, onOutput func(string, []byte), stderr io.Writer) (*child, error) {
	master, slave, err := openPTY(opts.rows, opts.cols)
	if err != nil {
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	startInGroup(cmd, true)
	err = cmd.Start()
	slave.Close()
	if err != nil {
		master.Close()
		return nil, err
	}
	c := &child{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{}), cutNow: make(chan struct{}), stdin: master, tty: master, pipes: []*os.File{master}, taken: make([]atomic.Int64, 1)}
	c.readers.Add(1)
	go guarded(stderr, "reading a child's terminal", func() { c.read(0, "combined", true, onOutput, opts.ended) })()
	return c, nil
}

// read passes the output of pipe i, a stream, to onOutput until it ends. While a child
// keeps writing (two reads in a row found data), a short read is followed
// by readPause (unless pause is false: a child that answers requests) to
// let the pipe fill, so a flood of small writes costs a few
// large reads instead of a wake-up each; output is coalesced for longer
// than that anyway, and a single burst (echo hi) is not delayed. ended
// (nil for none) is told once the stream has ended.
func (c *child) read(i int, stream string, pause bool, onOutput func(string, []byte), ended func(string)) {
	defer c.readers.Done()
	pipe := c.pipes[i]
	defer pipe.Close()
	buf := make([]byte, readSize)
	flowing := false
	for {
		n, err := pipe.Read(buf)
		if n > 0 {
			c.taken[i].Add(int64(n))
			onOutput(stream, buf[:n])
		}
		if err != nil {
			if ended != nil {
				ended(stream)
			}
			return
		}
		if pause && flowing && n < len(buf)/4 {
			time.Sleep(readPause)
		}
		flowing = n > 0
	}
}

// readPause is how long a reader lets a pipe fill after a short read.
const readPause = time.Millisecond

// readSize is the most a reader takes from a pipe at once.
const readSize = 256 << 10

// wait waits for the child to exit, closes its stdin, kills what remains
// of its process group (nothing a command started outlives it) and waits
// for the last of its output. A descendant that left the group and still
// holds a pipe is cut off after killGrace (cutOff: once what the pipe held
// then is read), at once when rpi killed the child (kill), or after
// endPipeGrace once rpi ends.
// Only then is the child reaped: until that, its pid stays its own (a
// zombie's), so the kill cannot reach a process that took the pid over.
// Where the system cannot wait without reaping (waitUnreaped), it is
// reaped as it exits, before the kill. wait must be called once, and
// release once its owner has reported the end.
func (c *child) wait() *os.ProcessState {
	defer c.reap() // after a panic too: no zombie is left
	if !waitUnreaped(c.pid) {
		c.cmd.Wait()
	}
	close(c.exited)
	if c.stdin != nil && c.tty == nil {
		c.stdin.Close()
	}
	c.killTree()
	done := make(chan struct{})
	go func() { c.readers.Wait(); close(done) }()
	cut := func() {
		for _, p := range c.pipes {
			p.Close()
		}
		<-done
	}
	select {
	case <-done:
	case <-c.cutNow:
		if !c.cutOff(done) {
			cut()
		}
	case <-time.After(killGrace):
		if !c.cutOff(done) {
			cut()
		}
	case <-c.table.ending:
		select {
		case <-done:
		case <-time.After(endPipeGrace):
			cut()
		}
	}
	c.table.watchdog.send("-"+strconv.Itoa(c.pid), c.table.stderr)
	return c.reap()
}

// cutOff closes each pipe once its reader has taken all the pipe held
// when cutOff was called, or found it empty, and waits for the readers;
// it gives up (false) once rpi ends. A child that exited wrote all its
// output before the cut: a reader that is slow only because the client
// reads slowly must not lose the end of it (up to a pipe's capacity).
// What a descendant writes after the cut may be cut; one that never stops
// writing is cut after at most the pipe's capacity and one read more. A
// pipe whose fill cannot be known (pipeBuffered's -1) is closed at once.
//
// A terminal tells only what its line discipline holds (4 KiB): up to
// ptyHeld more waits before it, moved over as the reader makes room, by
// a kernel worker a busy machine may run late. So its target is that
// much higher, and it is empty only when found so at every look for
// ptyEmptyPolls looks with nothing read between.
func (c *child) cutOff(done <-chan struct{}) bool {
	target := make([]int64, len(c.pipes))
	open := make([]bool, len(c.pipes))
	emptyAt := make([]int64, len(c.pipes))  // a terminal's taken when it was found empty; -1: not
	emptyLooks := make([]int, len(c.pipes)) // how many looks in a row found it so, nothing read
	for i, p := range c.pipes {
		// The fill first: a read between the two counts its bytes in
		// target twice, so target errs high, and the empty pipe ends it.
		// A read that returned before the fill but is counted in taken
		// only after it is in neither: up to readSize more.
		fill := pipeBuffered(p)
		target[i] = fill + c.taken[i].Load()
		if fill >= 0 {
			target[i] += readSize
			if p == c.tty {
				target[i] += ptyHeld
			}
		}
		open[i], emptyAt[i] = true, -1
	}
	tick := time.NewTicker(cutOffPoll)
	defer tick.Stop()
	for {
		left := 0
		for i, p := range c.pipes {
			if !open[i] {
				continue
			}
			taken := c.taken[i].Load()
			empty := pipeBuffered(p) <= 0
			if p == c.tty {
				switch {
				case !empty:
					emptyAt[i], emptyLooks[i] = -1, 0
				case emptyAt[i] == taken:
					emptyLooks[i]++
				default:
					emptyAt[i], emptyLooks[i] = taken, 1
				}
				empty = emptyLooks[i] >= ptyEmptyPolls
			}
			if taken >= target[i] || empty {
				p.Close()
				open[i] = false
			} else {
				left++
			}
		}
		if left == 0 {
			<-done
			return true
		}
		select {
		case <-done:
			return true
		case <-c.table.ending:
			return false
		case <-tick.C:
		}
	}
}

const (
	// cutOffPoll is how often cutOff looks at what its pipes still hold.
	cutOffPoll = 10 * time.Millisecond
	// ptyHeld is what a pseudo-terminal holds beyond what TIOCINQ tells
	// (Linux's pty.c: its 8 KiB buffer before the line discipline).
	ptyHeld = 8 << 10
	// ptyEmptyPolls is how many looks in a row must find a terminal
	// empty, nothing read, before it counts as empty: 200 ms, where its
	// kernel worker was seen late by more than the 10 ms between two
	// looks on a loaded machine (TestProcessTailKeptForSlowClient).
	ptyEmptyPolls = 20
)

// reap collects the exited child's status, once: from then on its pid
// may be given to another process, and no signal is sent to it. The
// table forgets the pid after that: until then, what reapAdopted finds
// under it is left alone.
func (c *child) reap() *os.ProcessState {
	ps := c.reapOnce()
	c.table.startMu.Lock()
	delete(c.table.live, c.pid)
	c.table.startMu.Unlock()
	return ps
}

func (c *child) reapOnce() *os.ProcessState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.reaped {
		if c.cmd.ProcessState == nil {
			c.cmd.Wait() // it has exited: at once
		}
		c.reaped = true
		// Its arguments and environment (up to the system's limit,
		// MiBs) are not needed now: a background process stays listed
		// long after.
		c.cmd.Args, c.cmd.Env = nil, nil
	}
	return c.cmd.ProcessState
}

// reapAdoptedNow reaps what rpi adopted that has exited (called as a
// process exits: SIGCHLD), but its own children not yet reaped and the
// watchdog, which are os/exec's to wait for: holding startMu, no child
// starts meanwhile (start holds it from the fork until the pid is in
// live), and
// the watchdog is asked for once each pid is found (it holds its lock
// from its fork until it knows the pid).
func (t *processTable) reapAdoptedNow() {
	if t.reapAdopted == nil {
		return
	}
	t.startMu.Lock()
	defer t.startMu.Unlock()
	t.reapAdopted(t.keeps)
}

// endAdopted ends what rpi adopted (end: runEnv.endOrphans) at rpi's
// end, holding startMu: no reap of reapAdoptedNow frees meanwhile a pid
// end has found and is about to kill.
func (t *processTable) endAdopted(end func(keep func(pid int) bool)) {
	t.startMu.Lock()
	defer t.startMu.Unlock()
	end(t.keeps)
}

// keeps reports whether pid is a child rpi waits for itself: one the
// table started and has not reaped, or the watchdog. startMu is held.
func (t *processTable) keeps(pid int) bool { return t.live[pid] || pid == t.watchdog.pid() }

// release tells shutdown that the child and everything about it is done.
func (c *child) release() { c.table.children.Done() }

// signalGroup sends sig to the child's whole process group; once the
// child is reaped it sends nothing.
func (c *child) signalGroup(sig sysSignal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reaped {
		return nil
	}
	return signalGroup(c.pid, sig)
}

// killTree SIGKILLs the child's group and what else is in its session
// (killTree), unless the child is reaped.
func (c *child) killTree() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.reaped {
		killTree(c.pid)
	}
}

// kill ends the child and its group at once (SIGKILL), and its output
// once what its pipes hold is read (cutNow).
func (c *child) kill() {
	if !c.hasExited() {
		c.killed.Store(true)
	}
	c.killTree()
	c.cutOnce.Do(func() { close(c.cutNow) })
}

// stop ends the child as a session's close or rpi's end does: SIGTERM,
// then SIGKILL after killGrace, or endKillGrace once rpi ends.
func (c *child) stop() {
	grace := killGrace
	if c.table.isEnding() {
		grace = endKillGrace
	}
	c.terminate(grace)
}

// terminate asks the group to stop with SIGTERM and sends SIGKILL if the
// child has not exited after grace.
func (c *child) terminate(grace time.Duration) {
	if !c.hasExited() {
		c.killed.Store(true)
	}
	c.signalGroup(sigTerm)
	select {
	case <-c.exited:
	case <-time.After(grace):
		c.killTree()
	}
}

func (c *child) hasExited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// childEnd is how a short-lived child ended.
type childEnd struct {
	ps       *os.ProcessState
	timedOut bool // its timeout passed before it exited, and rpi ended it
	killed   bool // rpi ended it (the timeout, ctx ending) before it exited
}

// exitCode is the child's exit status; nil when a signal ended it, or
// when rpi did (on Windows a killed process has exit code 1, which is not
// the program's: the docs promise null for a killed bash everywhere).
func (e childEnd) exitCode() *int {
	code, _ := exitStatus(e.ps)
	if e.killed && code != nil && *code == killedExitCode {
		return nil
	}
	return code
}

// runChild runs cmd to its end as every short-lived child runs: in its own
// process group, with stdin /dev/null, its stdout and stderr passed to
// onOutput. Cancelling ctx or the timeout (0: none) kills the group:
// SIGKILL, or at shutdown (or the session's close) SIGTERM and SIGKILL
// after a grace (stop).
func (s *session) runChild(ctx context.Context, cmd *exec.Cmd, timeout time.Duration, onOutput func(stream string, p []byte)) (childEnd, error) {
	c, err := s.procs.start(cmd, childOptions{}, onOutput)
	if err != nil {
		return childEnd{}, err
	}
	cancel := context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	stop := context.AfterFunc(ctx, guarded(s.stderr, "stopping a command", func() {
		if s.ctx.Err() != nil || c.table.isEnding() {
			c.stop()
		} else {
			c.kill()
		}
	}))
	ps := c.wait()
	c.release() // the caller's answer is counted as background work
	stop()
	// A timeout that passed only while the output was waited for (a
	// process the child left in a session of its own holds it) ended
	// nothing: the child had exited by itself.
	killed := c.killed.Load()
	return childEnd{ps: ps, timedOut: killed && errors.Is(ctx.Err(), context.DeadlineExceeded), killed: killed}, nil
}
