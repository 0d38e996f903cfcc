package main

// The bytes of every wire: input split into lines (docs/protocol.md#framing)
// and handed over in batches, and the one locked writer that every output
// record goes through, whole (and given up on at the end when the client
// takes nothing).

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// maxLineBytes is the longest input line accepted, not counting its "\n"
// (docs/protocol.md#framing). get_capabilities reports it.
const maxLineBytes = 64 << 20

// ---- Framing (docs/protocol.md#framing) ----

// A frame is one non-blank input line, or tooLong when the line passed the
// limit and was discarded (line is then its first bytes, up to
// tooLongHead: what an answer's id can be read from).
type frame struct {
	line    []byte
	tooLong bool
}

// tooLongHead is how much of a line too long a frame keeps.
const tooLongHead = 1 << 10

// readFrames splits r into frames on "\n" and sends them to frames in
// batches (every line already buffered goes in one batch, so a pipelining
// client costs one hand-off per read, not per line); it closes frames at EOF
// or on a read error. One trailing "\r" is stripped, blank lines are
// skipped, and a final line without "\n" is still delivered. A line longer
// than max is discarded as it streams past, never held whole. The lines of
// a batch share allocations of about maxArenaLine bytes or less. Once quit
// is closed (nil: never), a batch nobody takes ends the reading: the loop
// that took them has ended.
func readFrames(r io.Reader, max int, frames chan<- []frame, quit <-chan struct{}) {
	defer close(frames)
	br := bufio.NewReaderSize(r, 64<<10)
	var batch []frame
	var arena []byte
	for {
		if arena == nil {
			// The lines already read in are what the arena will hold (up
			// to batchArenaBytes); Peek waits where ReadSlice would.
			br.Peek(1)
			arena = make([]byte, 0, min(br.Buffered(), batchArenaBytes))
		}
		start := len(arena)
		var tooLong bool
		var err error
		arena, tooLong, err = appendInputLine(arena, br, max)
		line := arena[start:len(arena):len(arena)]
		if tooLong {
			batch = append(batch, frame{line: bytes.Clone(line), tooLong: true}) // not the arena of up to max bytes
		} else if line = bytes.TrimSuffix(line, []byte("\r")); !isBlank(line) {
			batch = append(batch, frame{line: line})
		}
		if tooLong || len(arena) > maxArenaLine {
			// Once the arena holds a long line or many (or the up to max
			// bytes of one too long), the next lines get an allocation of
			// their own: a command kept by a background answer must not
			// keep much more than itself alive.
			arena = nil
		}
		if err != nil || br.Buffered() == 0 || len(batch) >= 256 {
			if len(batch) > 0 {
				select {
				case frames <- batch:
				case <-quit:
					return
				}
				batch = make([]frame, 0, 256)
				arena = nil
			}
		}
		if err != nil {
			return
		}
	}
}

// maxArenaLine is how many bytes of lines a batch's allocation may hold
// before the next line starts another.
const maxArenaLine = 64 << 10

// batchArenaBytes bounds a batch's first allocation for its lines.
const batchArenaBytes = 8 << 10

// appendInputLine appends the next line, without its "\n", to dst, or
// reports tooLong once more than max bytes came before the "\n" (max < 0:
// no limit), having read past the rest of that line; dst then comes back
// with at most its first tooLongHead bytes appended. err is non-nil only
// at the end of input, possibly with a final partial line.
func appendInputLine(dst []byte, br *bufio.Reader, max int) (_ []byte, tooLong bool, err error) {
	start := len(dst)
	for {
		chunk, err := br.ReadSlice('\n')
		chunk = bytes.TrimSuffix(chunk, []byte("\n"))
		if max >= 0 && len(dst)-start+len(chunk) > max {
			if room := tooLongHead - (len(dst) - start); room > 0 {
				dst = append(dst, chunk[:min(room, len(chunk))]...)
			}
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
			return dst[:start+min(len(dst)-start, tooLongHead)], true, err
		}
		dst = append(dst, chunk...)
		if err != bufio.ErrBufferFull {
			return dst, false, err
		}
	}
}

// isBlank reports whether a line holds only spaces, tabs and CRs.
func isBlank(line []byte) bool {
	for _, c := range line {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// ---- Output: the one locked writer ----

// output is the only path to stdout. Every record is encoded with its
// "\n" into pending while mu is held and leaves in whole records, so
// records never interleave or split, and their order on stdout is the
// order of the calls. A record is written at once, after whatever is
// pending; only the dispatcher's answers to input that was already
// buffered may wait in pending (gather), until the dispatcher would wait
// for input (flush) or maxPending bytes have gathered. A pipelining client
// thus costs one write per batch, and no record waits on input.
//
// A client that stops reading blocks the write in progress, and with it
// whoever holds mu. That is the client's to decide while rpi serves it,
// but not once rpi ends: after end, a write of which the client takes
// nothing for endStall (awaitStall) is given up, the output with it
// (nothing more is written), so that ending never waits on a client that
// does not read. Each write runs on a goroutine of its own for that (a
// write blocked on a pipe cannot be interrupted otherwise: stdout is a
// pipe in blocking mode, whose writes no deadline reaches); a write given
// up stays blocked until rpi exits, when its record may be cut — the
// last one, as nothing is written after it. What the client takes is
// seen a piece at a time (writeChunk, endWriteChunk once rpi ends): a
// client that takes less than a piece in endStall is taken for one that
// stopped reading.
type output struct {
	mu      mutex[outputMu] // guards w, err, pending and the order of records
	w       io.Writer
	err     error  // the first write failure, or errGivenUp; later records are dropped
	pending []byte // encoded records not yet written
	stderr  io.Writer
	// unwritten is set once a record is added to pending, cleared as a
	// write takes pending: while it is clear every record is written or
	// being written (flushUnwritten).
	unwritten atomic.Bool

	// gone is closed when a write fails (the client stopped reading) or
	// is given up.
	gone chan struct{}
	// ending is closed by end: rpi is ending, and a write of which the
	// client takes nothing for endStall from then on is given up.
	ending  chan struct{}
	endOnce sync.Once
	// wrote passes each write's error from writeOut (one at a time: the
	// writer holds mu until it is passed, or gives the output up).
	wrote chan error
	// pieces counts the pieces of the current write that writeOut has
	// begun handing the client: a write whose count moves on is slow, not
	// stalled, and one not begun (0) cannot have stalled on the client.
	pieces atomic.Int64
}

// endStall is how long a write may wait on the client, taking nothing,
// once rpi is ending.
const endStall = time.Second

// writeChunk is the most one write to the client hands over at once, so
// that a big record's progress shows (output.pieces); endWriteChunk once
// rpi ends, so that a client reading slowly, but more than that a second,
// is seen to take something within each endStall and gets all of it.
const (
	writeChunk    = 64 << 10
	endWriteChunk = 4 << 10
)

// errGivenUp is the output's error once a write was given up at the end.
var errGivenUp = errors.New("the client stopped reading: a write was given up at the end")

// maxPending bounds the records gathered into one write.
const maxPending = 256 << 10

func newOutput(w, stderr io.Writer) *output {
	return &output{w: w, stderr: stderr, gone: make(chan struct{}), ending: make(chan struct{}),
		wrote: make(chan error, 1)}
}

// end marks rpi as ending: from now on a write that the client does not
// take within endStall is given up. It may be called many times, from any
// goroutine, while a write is blocked (it takes no lock).
func (o *output) end() {
	o.endOnce.Do(func() { close(o.ending) })
}

// send writes one record built by encode, which appends the record's
// JSON to buf, together with whatever is pending before it. An encoding
// failure is a bug: it is reported on stderr and nothing is added.
func (o *output) send(encode func(buf []byte) ([]byte, error)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.appendLocked(encode)
	o.flushLocked()
}

// gather adds a record to pending without writing it, unless maxPending
// bytes have gathered. Whoever gathers flushes before it waits for
// anything: the dispatcher before it waits for input, a process's reader
// before it reads again.
func (o *output) gather(encode func(buf []byte) ([]byte, error)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.appendLocked(encode)
	if len(o.pending) >= maxPending {
		o.flushLocked()
	}
}

// stream writes one record too big to hold whole (get_messages of a big
// session): encode appends it piece by piece and hands what it has so
// far to spill, which writes it out once maxPending bytes have gathered
// and gives the buffer back empty; once the client is gone (a write
// failed or was given up) spill says so (more is false), and encode may
// stop. The lock is held throughout, so the record still leaves whole
// and uninterrupted, after whatever was pending. encode cannot fail: what
// could fail is checked before.
func (o *output) stream(encode func(buf []byte, spill func([]byte) (_ []byte, more bool)) []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return
	}
	buf := encode(o.pending, o.spillLocked)
	if o.err != nil {
		return
	}
	o.pending = append(buf, '\n')
	o.flushLocked()
}

// spillLocked is stream's spill; o.mu is held.
func (o *output) spillLocked(buf []byte) (_ []byte, more bool) {
	if o.err != nil {
		return buf[:0], false // the client is gone: nothing more reaches it
	}
	if len(buf) < maxPending {
		return buf, true
	}
	o.pending = buf
	o.flushLocked()
	return o.pending, o.err == nil
}

// flush writes what is pending.
func (o *output) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flushLocked()
}

// flushUnwritten is flush, when a record is pending that no write has
// taken: a loop about to wait for input flushes what it gathered, and
// does not wait behind a write in progress (held for as long as the
// client does not read), which writes whatever it gathered before it.
func (o *output) flushUnwritten() {
	if o.unwritten.Load() {
		o.flush()
	}
}

func (o *output) appendLocked(encode func(buf []byte) ([]byte, error)) {
	if o.err != nil {
		return
	}
	mark := len(o.pending)
	buf, err := encode(o.pending)
	if err != nil {
		fmt.Fprintf(o.stderr, "rpi: bug: cannot encode a record: %v\n", err)
		o.pending = o.pending[:mark]
		return
	}
	o.pending = append(buf, '\n')
	o.unwritten.Store(true)
}

func (o *output) flushLocked() {
	if len(o.pending) == 0 || o.err != nil {
		return
	}
	o.unwritten.Store(false) // this write takes them all
	if err := o.writeLocked(o.pending); err == errGivenUp {
		o.pending = nil // the write given up still holds it
		return
	}
	if cap(o.pending) <= 4*maxPending {
		o.pending = o.pending[:0] // reuse small buffers; let big ones go
	} else {
		o.pending = nil
	}
}

// writeLocked writes p (write), o.mu held; the first failure is the
// output's for good: every later write fails with it, and gone closes.
func (o *output) writeLocked(p []byte) error {
	if o.err != nil {
		return o.err
	}
	if err := o.write(p); err != nil {
		o.err = err
		close(o.gone)
	}
	return o.err
}

// write writes p whole, or gives it up (errGivenUp) once rpi is ending
// and the client has taken nothing of it for endStall (a client that
// reads slowly gets all of it). The write runs on a goroutine of its own
// (writeOut), which a write given up leaves blocked: a deadline ends it
// when w takes one (a pollable *os.File, a socket), else rpi's exit does.
func (o *output) write(p []byte) error {
	if q, ok := o.w.(queueWriter); ok {
		_, err := q.Write(p) // never waits: the client has a writer of its own
		return err
	}
	o.pieces.Store(0)
	go o.writeOut(p)
	select {
	case err := <-o.wrote:
		return err
	case <-o.ending:
	}
	ticks := time.NewTicker(endStall / stallLooks)
	defer ticks.Stop()
	if done, err := o.awaitStall(ticks.C); done {
		return err
	}
	if d, ok := o.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		d.SetWriteDeadline(time.Now())
	}
	fmt.Fprintf(o.stderr, "rpi: the client took no output for %v while rpi ended: the rest is not written\n", endStall)
	return errGivenUp
}

// stallLooks is how many looks in a row, endStall/stallLooks apart, must
// find a write at the end still on the piece a look before them first
// found it on (endStall in all) before it is given up.
// Counting looks rather than measuring time means a stall is time rpi
// itself ran: on a machine too busy to run rpi for a second, a ticker's
// looks fall behind (it drops the ones missed), and the client, which
// reads as well as it can, is not taken to have stopped.
const stallLooks = 10

// awaitStall waits, once rpi is ending, for the write in progress to end
// (done, with its error) or to stall: found on the same begun piece at
// stallLooks ticks in a row after the one that first found it there
// (done is false: give it up).
func (o *output) awaitStall(ticks <-chan time.Time) (done bool, err error) {
	seen, still := int64(0), 0
	for {
		select {
		case err := <-o.wrote:
			return true, err
		case <-ticks:
		}
		now := o.pieces.Load()
		if now == 0 || now != seen {
			seen, still = now, 0
			continue
		}
		if still++; still >= stallLooks {
			select {
			case err := <-o.wrote: // it ended as the last look came: not given up
				return true, err
			default:
				return false, nil
			}
		}
	}
}

// writeOut is write's goroutine: it writes p and passes on the error.
// A panic in w is an error, logged with its stack, as guarded does.
func (o *output) writeOut(p []byte) {
	err := errWritePanicked
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(o.stderr, "rpi: panic in writing to stdout: %v\n%s", r, debug.Stack())
		}
		o.wrote <- err
	}()
	for len(p) > 0 {
		n := min(len(p), writeChunk)
		select {
		case <-o.ending:
			n = min(n, endWriteChunk)
		default:
		}
		o.pieces.Add(1)
		if _, err = o.w.Write(p[:n]); err != nil {
			return
		}
		p = p[n:]
	}
	err = nil
}

var errWritePanicked = errors.New("the write to stdout panicked")

// A queueWriter takes a write without waiting (it queues it for a writer
// of its own: rpi serve's clients), so output writes to it directly.
type queueWriter interface {
	io.Writer
	queues()
}

// Field accessors. Each returns an error that names the field and what it
// must be, so handlers can return it as is.

// readInput reads stdin's frames (readFrames) on a goroutine of its own;
// inputEnded is closed once it has read the last, or stopped at quit.
func readInput(stdin io.Reader, maxLine int, stderr io.Writer, quit <-chan struct{}) (frames <-chan []frame, inputEnded <-chan struct{}) {
	ch, ended := make(chan []frame, 4), make(chan struct{})
	go guarded(stderr, "reading input", func() {
		defer close(ended)
		readFrames(stdin, maxLine, ch, quit)
	})()
	return ch, ended
}

// watchEnd watches, beside a command loop, for what ends rpi: a signal on
// stop, or the end of input. The loop itself may be held by a write to a
// client that stopped reading (its answer to get_messages, say), so the
// watcher starts the output's end (output.end): such a write is given up
// once the client has taken nothing of it for endStall, and the loop,
// free again, takes the signal from signalled (there before the write is
// given up) or sees the input's end. stopWatching ends the watcher.
func watchEnd(out *output, stop <-chan os.Signal, inputEnded <-chan struct{}) (signalled <-chan os.Signal, stopWatching func()) {
	sigs, quit, done := make(chan os.Signal, 1), make(chan struct{}), make(chan struct{})
	go guarded(out.stderr, "watching for the end", func() {
		defer close(done)
		for {
			select {
			case sig := <-stop:
				sigs <- sig // before the end: a write given up finds it there
				out.end()
				return
			case <-inputEnded:
				out.end()
				inputEnded = nil // a signal may still come while the loop ends
			case <-quit:
				return
			}
		}
	})()
	return sigs, func() { close(quit); <-done }
}

// bigLineBytes is the size from which an input line's memory is given
// back to the system once it is handled (memoryReturn).
const bigLineBytes = 4 << 20

// A connection is one client's line stream: the lines it writes (in) and
// the one writer of what it reads (out). Every wire serves one with the
// same loop (serve); stdio is a connection.
type connection struct {
	in  io.Reader
	out *output
	// frames and inputEnded are readInput's, once readAhead started it;
	// serve closes quitReading as it returns, so that a reader blocked on
	// a batch (a client that wrote on while its output was given up) ends.
	frames      <-chan []frame
	inputEnded  <-chan struct{}
	quitReading chan struct{}
	// whenIdle, if set, is called once, on serve's goroutine, when serve
	// has answered (and written out) the first lines that came and finds
	// no more waiting, before it reads on; or settleWithin after serve
	// started, when that has not come (no line came, or they never stop
	// coming).
	whenIdle func()
	// answerMu keeps a session change answered from the background next
	// to its announcement (session_started right after the answer): the
	// connection's command loop holds it while it handles a command and
	// gathers its answer, and a change the connection asked for from its
	// answer to its last event (changeSession). It is the connection's,
	// not the session's: over rpi serve, a command that takes long on one
	// client's loop holds up no other client of the session.
	answerMu mutex[answerMu]
	// spawnsWaiting counts the client's process_spawn commands not yet
	// answered, across the sessions it attaches to (processSpawnCommand).
	spawnsWaiting atomic.Int32
}

// settleWithin bounds the wait for a connection's whenIdle: a client
// that sends nothing, or lines without a pause, must not keep SIGHUP and
// SIGQUIT without rpi's handlers (docs/protocol.md#launch).
const settleWithin = 20 * time.Millisecond

// readAhead starts reading the connection's lines, at most maxLine bytes
// each: from then on they wait, read and framed, for serve.
func (c *connection) readAhead(maxLine int, stderr io.Writer) {
	c.quitReading = make(chan struct{})
	c.frames, c.inputEnded = readInput(c.in, maxLine, stderr, c.quitReading)
}

func newConnection(in io.Reader, out, stderr io.Writer) *connection {
	return &connection{in: in, out: newOutput(out, stderr)}
}

// settle calls whenIdle, the first time only.
func (c *connection) settle() {
	if c.whenIdle != nil {
		c.whenIdle()
		c.whenIdle = nil
	}
}

// serve reads the connection's lines, at most maxLine bytes each, and
// hands each to handle, in order, until its input ends, the client stops
// reading, or a signal comes on stop (which it returns; nil otherwise).
// The answers gathered while lines were waiting go out once none is left;
// a big line's memory goes back to the system (memory) once it is
// handled. When it returns, the output is ending (output.end): what is
// written after may be given up on a client that reads nothing.
func (c *connection) serve(maxLine int, stop <-chan os.Signal, handle func(frame), memory *memoryReturn, stderr io.Writer) os.Signal {
	if c.frames == nil {
		c.readAhead(maxLine, stderr)
	}
	frames, inputEnded := c.frames, c.inputEnded
	defer close(c.quitReading)
	signalled, stopWatching := watchEnd(c.out, stop, inputEnded)
	defer stopWatching()
	defer c.out.end()
	var settle <-chan time.Time // whenIdle's latest time
	if c.whenIdle != nil {
		timer := time.NewTimer(settleWithin)
		defer timer.Stop()
		settle = timer.C
	}
	for {
		select {
		case <-settle:
			settle = nil
			c.settle()
		case batch, ok := <-frames:
			if !ok {
				return nil
			}
			for _, f := range batch {
				handle(f)
				if f.tooLong || len(f.line) >= bigLineBytes {
					memory.soon() // the line is handled; what it took can go
				}
			}
			if len(frames) == 0 { // rpi would wait for input now
				c.out.flushUnwritten()
				c.settle()
			}
		case sig := <-signalled:
			return sig
		case <-c.out.gone:
			select { // a write given up at a signal: the signal's exit code
			case sig := <-signalled:
				return sig
			default:
				return nil
			}
		}
	}
}
