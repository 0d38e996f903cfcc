package main

// The rpc wire: framing of input lines (§3), the one locked writer that
// every output record goes through, the wire value that shapes responses
// and events (§4, §5: rpcWire here, pi 1.6's flat shapes in wire_pi.go,
// §10), and the decoding of command lines and their fields.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// maxLineBytes is the longest input line accepted, not counting its "\n"
// (§3). get_capabilities reports it.
const maxLineBytes = 64 << 20

// ---- Framing (§3) ----

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
// a batch share allocations of about maxArenaLine bytes or less.
func readFrames(r io.Reader, max int, frames chan<- []frame) {
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
				frames <- batch
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

// readLine returns the next line without its "\n" (a copy the caller owns),
// or tooLong once more than max bytes came before the "\n" (max < 0: no
// limit). err is non-nil only at the end of input, possibly with a final
// partial line.
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	return appendInputLine(nil, br, max)
}

// appendInputLine is readLine appending the line to dst; when the line is too
// long, dst comes back with at most its first tooLongHead bytes appended.
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
// but not once rpi ends: after end, a write that has not finished within
// endStall is given up, the output with it (nothing more is written), so
// that ending never waits on a client that does not read. Each write
// runs on a goroutine of its own for that (a write blocked on a pipe
// cannot be interrupted otherwise: stdout is a pipe in blocking mode,
// whose writes no deadline reaches); a write given up stays blocked until
// rpi exits, when its record may be cut — the last one, as nothing is
// written after it.
type output struct {
	mu      mutex[outputMu] // guards w, err, pending and the order of records
	w       io.Writer
	err     error  // the first write failure, or errGivenUp; later records are dropped
	pending []byte // encoded records not yet written
	stderr  io.Writer

	// gone is closed when a write fails (the client stopped reading) or
	// is given up.
	gone chan struct{}
	// ending is closed by end: rpi is ending, and a write may take at most
	// endStall from then (or from its start, if later).
	ending  chan struct{}
	endOnce sync.Once
	// wrote passes each write's error from writeOut (one at a time: the
	// writer holds mu until it is passed, or gives the output up).
	wrote chan error
	// taken counts the bytes the client has taken: a write that moves it
	// on is slow, not stalled.
	taken atomic.Int64
}

// endStall is how long a write may wait on the client, taking nothing,
// once rpi is ending.
const endStall = time.Second

// writeChunk is the most one write to the client hands over at once, so
// that a big record's progress shows (output.taken).
const writeChunk = 64 << 10

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

// record writes one record built by encode, which appends the record's
// JSON to buf, together with whatever is pending before it. An encoding
// failure is a bug: it is reported on stderr and nothing is added.
func (o *output) record(encode func(buf []byte) ([]byte, error)) {
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
}

func (o *output) flushLocked() {
	if len(o.pending) == 0 || o.err != nil {
		return
	}
	if err := o.write(o.pending); err != nil {
		o.err = err
		close(o.gone)
		if err == errGivenUp {
			o.pending = nil // the write given up still holds it
			return
		}
	}
	if cap(o.pending) <= 4*maxPending {
		o.pending = o.pending[:0] // reuse small buffers; let big ones go
	} else {
		o.pending = nil
	}
}

// write writes p whole, or gives it up (errGivenUp) once rpi is ending
// and the client has taken nothing of it for endStall (a client that
// reads slowly gets all of it). The write runs on a goroutine of its own
// (writeOut), which a write given up leaves blocked: a deadline ends it
// when w takes one (a pollable *os.File, a socket), else rpi's exit does.
func (o *output) write(p []byte) error {
	go o.writeOut(p)
	select {
	case err := <-o.wrote:
		return err
	case <-o.ending:
	}
	stall := time.NewTimer(endStall)
	defer stall.Stop()
	for taken := o.taken.Load(); ; {
		select {
		case err := <-o.wrote:
			return err
		case <-stall.C:
		}
		if now := o.taken.Load(); now != taken { // slow, not stalled
			taken = now
			stall.Reset(endStall)
			continue
		}
		break
	}
	if d, ok := o.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		d.SetWriteDeadline(time.Now())
	}
	fmt.Fprintf(o.stderr, "rpi: the client took no output for %v while rpi ended: the rest is not written\n", endStall)
	return errGivenUp
}

// writeOut is write's goroutine: it writes p and passes on the error.
// A panic in w is an error, logged with its stack, as guard does.
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
		var k int
		k, err = o.w.Write(p[:n])
		o.taken.Add(int64(k))
		if err != nil {
			return
		}
		p = p[n:]
	}
	err = nil
}

var errWritePanicked = errors.New("the write to stdout panicked")

// ---- Envelopes (§4, §5) ----

// A wire is the shape the rpc front end gives its records: the default
// envelope (rpcWire, below) or pi 1.6's flat one (piWire, wire_pi.go,
// §10). A wire of this family is one value of this interface; a protocol
// of another family (ACP, SPEC §12) is a front end of its own over the
// same core (session.go's session), with its own records.
type wire interface {
	// name is what get_capabilities reports as compat.
	name() string
	// appendEvent appends an event record.
	appendEvent(buf []byte, ev event) ([]byte, error)
	// appendResponse appends the response to a command: success with
	// data, or failure with failure's text.
	appendResponse(buf []byte, id json.RawMessage, command string, data any, failure error) ([]byte, error)
	// numericIDs says a command's id may also be a number, echoed as sent.
	numericIDs() bool
	// lenientUIResponses says an extension_ui_response may give more or
	// fewer than one answer, and one for no open dialog is ignored.
	lenientUIResponses() bool
}

// An event is one thing the core reports, as the rpc wire names it (§5):
// its type, its payload (a typed value; nil for none), and its payload in
// pi's shape when that differs there (§10). The envelope (under "data" or
// flat) is the wire's.
type event struct {
	Type string
	Data any
	Pi   any
}

// rpcWire is rpi's own shape: {"type":T,"data":{…}} events, and responses
// that always carry data on success.
type rpcWire struct{}

func (rpcWire) name() string             { return "rpi" }
func (rpcWire) numericIDs() bool         { return false }
func (rpcWire) lenientUIResponses() bool { return false }

// appendEvent appends {"type":T,"data":{…}}, or {"type":T} without data.
func (rpcWire) appendEvent(buf []byte, ev event) ([]byte, error) {
	buf = append(buf, `{"type":`...)
	buf = appendJSONString(buf, ev.Type)
	if ev.Data == nil {
		return append(buf, '}'), nil
	}
	buf = append(buf, `,"data":`...)
	buf, err := appendPayload(buf, ev.Data)
	return append(buf, '}'), err
}

// appendResponse appends a response whose success always has data (null
// when none; a piOnly's otherwise).
func (rpcWire) appendResponse(buf []byte, id json.RawMessage, command string, data any, failure error) ([]byte, error) {
	buf = appendResponseHead(buf, id, command)
	if failure != nil {
		return appendFailure(buf, failure), nil
	}
	if p, ok := data.(piOnly); ok {
		data = p.otherwise
	}
	buf = append(buf, `,"success":true,"data":`...)
	if data == nil {
		return append(buf, `null}`...), nil
	}
	buf, err := appendPayload(buf, data)
	return append(buf, '}'), err
}

// appendFailure appends the failure members that close a response.
func appendFailure(buf []byte, failure error) []byte {
	buf = append(buf, `,"success":false,"error":`...)
	buf = appendJSONString(buf, failure.Error())
	return append(buf, '}')
}

// encodeResponse appends a response in w's shape. Data that cannot be
// encoded (a bug) makes the response a failure that says so, so that
// every command still gets its one answer.
func encodeResponse(w wire, buf []byte, id json.RawMessage, command string, data any, failure error) ([]byte, error) {
	mark := len(buf)
	out, err := w.appendResponse(buf, id, command, data, failure)
	if err != nil {
		failure = fmt.Errorf("Internal error in %s: its answer cannot be encoded (%v)", command, err)
		return w.appendResponse(buf[:mark], id, command, nil, failure)
	}
	return out, nil
}

// appendResponseHead appends a response's first members: its id (when it
// has one), type and command.
func appendResponseHead(buf []byte, id json.RawMessage, command string) []byte {
	buf = append(buf, '{')
	if id != nil {
		buf = append(buf, `"id":`...)
		buf = append(buf, id...)
		buf = append(buf, ',')
	}
	buf = append(buf, `"type":"response","command":`...)
	return appendJSONString(buf, command)
}

// A jsonAppender is a payload on a hot path that appends its own JSON,
// without reflection. What it appends must equal marshalJSON of the same
// value, byte for byte; TestAppendersMatchEncodingJSON and the fuzz tests
// check each one.
type jsonAppender interface {
	appendJSON(buf []byte) []byte
}

// appendPayload appends data's JSON: by its own appender when it has one,
// by encoding/json otherwise.
func appendPayload(buf []byte, data any) ([]byte, error) {
	if a, ok := data.(jsonAppender); ok {
		// A non-finite float is no JSON: encoding/json refuses it, and so
		// must the appenders (they write it as NaN or +Inf).
		if f, ok := data.(interface{ finiteJSON() bool }); !ok || f.finiteJSON() {
			return a.appendJSON(buf), nil
		}
	}
	return appendMarshal(buf, data)
}

// marshalJSON encodes v like the writer does: no HTML escaping.
func marshalJSON(v any) ([]byte, error) { return appendMarshal(nil, v) }

// appendMarshal appends v's JSON (no HTML escaping) to buf, straight from
// encoding/json's own buffer: a large value is not copied once more on
// its way (an answer of a few MiB goes out in several records).
func appendMarshal(buf []byte, v any) ([]byte, error) {
	w := appendWriter{buf}
	enc := json.NewEncoder(&w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(w.buf, []byte("\n")), nil
}

// appendWriter appends what is written to buf, leaving room for the
// few bytes that close a record, so that a large value is not copied
// again for them.
type appendWriter struct{ buf []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	if cap(w.buf)-len(w.buf) < len(p) {
		w.buf = slices.Grow(w.buf, len(p)+64)
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// appendJSONString appends s as a JSON string, escaped as encoding/json
// does with SetEscapeHTML(false): quotes, backslashes and control
// characters, U+2028 and U+2029; invalid UTF-8 becomes U+FFFD.
func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		j, high := stringRun(s, i)
		if run := s[i:j]; high && (!utf8.ValidString(run) || strings.Contains(run, "\u2028") || strings.Contains(run, "\u2029")) {
			buf = appendEscapedRunes(buf, run)
		} else {
			buf = append(buf, run...)
		}
		if j == len(s) {
			break
		}
		switch c := s[j]; c {
		case '"', '\\':
			buf = append(buf, '\\', c)
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\r':
			buf = append(buf, '\\', 'r')
		case '\t':
			buf = append(buf, '\\', 't')
		case '\b':
			buf = append(buf, '\\', 'b')
		case '\f':
			buf = append(buf, '\\', 'f')
		default:
			buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i = j + 1
	}
	return append(buf, '"')
}

const hexDigits = "0123456789abcdef"

// appendEscapedRunes appends a run of s with no control character, quote
// or backslash: invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendEscapedRunes(buf []byte, run string) []byte {
	start := 0
	for i := 0; i < len(run); {
		r, size := utf8.DecodeRuneInString(run[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			buf = append(buf, run[start:i]...)
			buf = append(buf, `\ufffd`...)
			start = i + size
		case r == '\u2028' || r == '\u2029':
			buf = append(buf, run[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			start = i + size
		}
		i += size
	}
	return append(buf, run[start:]...)
}

// stringRun returns the index of the first byte from i on that a JSON
// string cannot hold as it is (a control character, '"' or '\\'), or
// len(s) when there is none, and whether a byte of a multi-byte UTF-8
// sequence came before it. It tests eight bytes at a time.
func stringRun[T string | []byte](s T, i int) (end int, high bool) {
	var seen uint64
	for ; i+8 <= len(s); i += 8 {
		w := s[i : i+8] // one bounds check, and one load
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		if found := stringStops(x); found != 0 {
			at := bits.TrailingZeros64(found) / 8
			seen |= x & (1<<(8*at) - 1)
			return i + at, seen&everyByte80 != 0
		}
		seen |= x
	}
	high = seen&everyByte80 != 0
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c == '"' || c == '\\':
			return i, high
		case c >= utf8.RuneSelf:
			high = true
		}
	}
	return i, high
}

const everyByte01, everyByte80 = 0x0101010101010101, 0x8080808080808080

// stringStops marks, with its high bit, each byte of x (eight bytes of a
// string, the first in the low byte) that a JSON string cannot hold as it
// is: below 0x20, '"' or '\\'. A borrow can mark bytes after the first
// one marked, never before it: the lowest mark is always true.
func stringStops(x uint64) uint64 {
	quote, backslash := x^(everyByte01*'"'), x^(everyByte01*'\\')
	return ((x - everyByte01*0x20) | (quote - everyByte01) | (backslash - everyByte01)) &^ x & everyByte80
}

// eventTypes lists every event rpi emits, for get_capabilities. A test
// checks that each appears in a fixture and that fixtures show no other.
var eventTypes = []string{
	"session_started",
	"bash_execution_update",
	"process_started",
	"process_output",
	"process_exited",
	"agent_start",
	"turn_start",
	"message_start",
	"message_update",
	"message_end",
	"tool_execution_start",
	"tool_execution_update",
	"tool_execution_end",
	"turn_end",
	"agent_end",
	"agent_settled",
	"queue_update",
	"auto_retry_start",
	"auto_retry_end",
	"todo_updated",
	"loop_created",
	"loop_updated",
	"loop_queued",
	"loop_fired",
	"loop_skipped",
	"loop_finished",
	"loop_failed",
	"loop_removed",
	"compaction_start",
	"compaction_end",
	"thinking_level_changed",
	"session_info_changed",
	"run_failed",
}

// ---- Requests ----

// request is one decoded command line. Its fields stay raw JSON, found by
// exact key, and are decoded only when a handler asks for them.
type request struct {
	id      json.RawMessage // as sent, or nil when absent or null
	typ     string
	members []member  // the object's members in line order
	room    [4]member // members' first home: most commands have a few fields
}

// A member is one key and its raw value, both slices of the line (the key
// unescaped into its own bytes when it had escapes).
type member struct {
	key, value []byte
}

// field is the raw value of the member called name; as with any JSON
// object decoded in Go, the last of duplicate keys wins.
func (r *request) field(name string) (json.RawMessage, bool) {
	for i := len(r.members) - 1; i >= 0; i-- {
		if string(r.members[i].key) == name {
			return r.members[i].value, true
		}
	}
	return nil, false
}

// A requestError is a failure to answer before the command is known.
type requestError struct {
	id      json.RawMessage
	command string
	message string
}

// decodeRequest checks a line in §4's order: JSON object, type, id. It
// takes one pass over the line (scanObject); a line that pass cannot
// accept is decoded again by encoding/json, whose error text is the
// answer. With numericIDs (pi-compatible mode, §10) an id may also be a
// number, echoed as sent, as pi does.
func decodeRequest(line []byte, numericIDs bool) (*request, *requestError) {
	parseFailure := func(detail string) *requestError {
		return &requestError{command: "parse", message: "Failed to parse command: " + detail}
	}
	if !utf8.Valid(line) {
		return nil, parseFailure("invalid UTF-8")
	}
	r := &request{}
	members, ok := scanObject(line, r.room[:0])
	if !ok {
		var fields map[string]json.RawMessage
		err := json.Unmarshal(line, &fields)
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typeErr):
			return nil, parseFailure("expected a JSON object, got " + typeErr.Value)
		case err != nil:
			return nil, parseFailure(err.Error())
		case fields == nil:
			return nil, parseFailure("expected a JSON object, got null")
		}
		// Valid, but beyond what scanObject takes (deep nesting): keep
		// encoding/json's view.
		members = members[:0]
		for k, v := range fields {
			members = append(members, member{[]byte(k), v})
		}
	}
	r.members = members
	rawID, hasID := r.field("id")
	idIsString := hasID && (rawID[0] == '"' || numericIDs && (rawID[0] == '-' || rawID[0] >= '0' && rawID[0] <= '9'))
	rawType, _ := r.field("type")
	if len(rawType) == 0 || rawType[0] != '"' || !unquote(rawType, &r.typ) {
		e := &requestError{command: "parse", message: "Missing or invalid field: type"}
		if idIsString {
			e.id = rawID
		}
		return nil, e
	}
	if hasID && !idIsString && string(rawID) != "null" {
		if numericIDs {
			return nil, &requestError{id: rawID, command: r.typ, message: "Invalid field id: must be a string or a number"}
		}
		return nil, &requestError{id: rawID, command: r.typ, message: "Invalid field id: must be a string"}
	}
	if idIsString {
		r.id = rawID
	}
	return r, nil
}

// unquote decodes a valid JSON string into s, without encoding/json when
// it has no escapes.
func unquote(raw []byte, s *string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		*s = string(raw[1 : len(raw)-1])
		return true
	}
	return json.Unmarshal(raw, s) == nil
}

// maxScanDepth is how deep scanObject follows nested values; deeper lines
// go to encoding/json.
const maxScanDepth = 512

// scanObject splits a line holding one JSON object into its members, in
// one pass that also checks the whole line is valid JSON (the line is
// already valid UTF-8). ok is false for anything else.
// The members are appended to dst.
func scanObject(line []byte, dst []member) (members []member, ok bool) {
	members = dst
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return nil, false
	}
	i = skipSpace(line, i+1)
	if i < len(line) && line[i] == '}' {
		return nil, skipSpace(line, i+1) == len(line)
	}
	for {
		keyStart := i
		if i = skipString(line, i); i < 0 {
			return nil, false
		}
		key := line[keyStart+1 : i-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			if json.Unmarshal(line[keyStart:i], &k) != nil {
				return nil, false
			}
			key = []byte(k)
		}
		if i = skipSpace(line, i); i >= len(line) || line[i] != ':' {
			return nil, false
		}
		i = skipSpace(line, i+1)
		valueStart := i
		if i = skipValue(line, i, 0); i < 0 {
			return nil, false
		}
		members = append(members, member{key, line[valueStart:i]})
		if i = skipSpace(line, i); i >= len(line) {
			return nil, false
		}
		switch line[i] {
		case ',':
			i = skipSpace(line, i+1)
		case '}':
			return members, skipSpace(line, i+1) == len(line)
		default:
			return nil, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value starting at b[i],
// or -1 when there is no valid value there.
func skipValue(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{' || c == '[':
		if depth >= maxScanDepth {
			return -1
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == end {
			return i + 1
		}
		for {
			if c == '{' {
				if i = skipString(b, i); i < 0 {
					return -1
				}
				if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
					return -1
				}
				i = skipSpace(b, i+1)
			}
			if i = skipValue(b, i, depth+1); i < 0 {
				return -1
			}
			if i = skipSpace(b, i); i >= len(b) {
				return -1
			}
			if b[i] == end {
				return i + 1
			}
			if b[i] != ',' {
				return -1
			}
			i = skipSpace(b, i+1)
		}
	case c == '-' || c >= '0' && c <= '9':
		return skipNumber(b, i)
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	}
	return -1
}

// skipString returns the index just past the JSON string at b[i], or -1.
func skipString(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if i++; i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// skipNumber returns the index just past the JSON number at b[i], or -1.
func skipNumber(b []byte, i int) int {
	digits := func(i int) int {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == start {
			return -1
		}
		return i
	}
	if b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if i = digits(i); i < 0 {
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if i = digits(i + 1); i < 0 {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i = digits(i); i < 0 {
			return -1
		}
	}
	return i
}

func skipLiteral(b []byte, i int, lit string) int {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return -1
	}
	return i + len(lit)
}

// idString is the request's id as a string (a numeric id of pi's mode
// as written), or nil when it had none.
func (r *request) idString() *string {
	if r.id == nil {
		return nil
	}
	s := string(r.id)
	if r.id[0] == '"' {
		json.Unmarshal(r.id, &s)
	}
	return &s
}

// Field accessors. Each returns an error that names the field and what it
// must be, so handlers can return it as is.

func (r *request) has(name string) bool {
	raw, ok := r.field(name)
	return ok && string(raw) != "null"
}

// A fieldError is a command field that is missing, or present but not
// what it must be. Its text is the failure the rpc wire answers (§4);
// another wire can tell it from other failures (ACP: -32602).
type fieldError struct {
	name    string // the field, as the command spells it ("spec.cwd" inside an object)
	want    string // what it must be
	missing bool
}

func (e *fieldError) Error() string {
	if e.missing {
		return "Missing field " + e.name + ": must be " + e.want
	}
	return "Invalid field " + e.name + ": must be " + e.want
}

func missing(name, want string) error { return &fieldError{name, want, true} }
func invalid(name, want string) error { return &fieldError{name, want, false} }

// decodeField decodes a present field into v, which must be of kind want.
func (r *request) decodeField(name, want string, v any) error {
	raw, _ := r.field(name)
	if err := json.Unmarshal(raw, v); err != nil {
		return invalid(name, want)
	}
	return nil
}

func (r *request) str(name string) (string, error) {
	if !r.has(name) {
		return "", missing(name, "a string")
	}
	var s string
	if raw, _ := r.field(name); raw[0] != '"' || !unquote(raw, &s) {
		return "", invalid(name, "a string")
	}
	return s, nil
}

func (r *request) optStr(name string) (string, error) {
	if !r.has(name) {
		return "", nil
	}
	return r.str(name)
}

func (r *request) boolean(name string) (bool, error) {
	if !r.has(name) {
		return false, missing(name, "true or false")
	}
	var b bool
	return b, r.decodeField(name, "true or false", &b)
}

// optBool reads an optional boolean (otherwise when absent).
func (r *request) optBool(name string, otherwise bool) (bool, error) {
	if !r.has(name) {
		return otherwise, nil
	}
	return r.boolean(name)
}

// enum reads a required string field that must be one of values.
func (r *request) enum(name string, values []string) (string, error) {
	want := "one of " + strings.Join(values, ", ")
	if !r.has(name) {
		return "", missing(name, want)
	}
	var s string
	if err := r.decodeField(name, want, &s); err != nil || !slices.Contains(values, s) {
		return "", invalid(name, want)
	}
	return s, nil
}

// optDuration reads an optional timeout in unit (time.Second for a field
// in seconds, time.Millisecond for one in ms): absent is 0 (no timeout);
// a present one must lie between 1 ms and a day.
func (r *request) optDuration(name string, unit time.Duration) (time.Duration, error) {
	if !r.has(name) {
		return 0, nil
	}
	want := "a number of milliseconds from 1 to 86400000"
	if unit == time.Second {
		want = "a number of seconds from 0.001 to 86400"
	}
	var f float64
	if err := r.decodeField(name, want, &f); err != nil {
		return 0, err
	}
	d := f * float64(unit)
	if math.IsNaN(d) || d < float64(time.Millisecond) || d > float64(24*time.Hour) {
		return 0, invalid(name, want)
	}
	return time.Duration(d), nil
}

// optInt reads an optional whole number between lo and hi (hi < lo: no
// upper bound).
func (r *request) optInt(name string, lo, hi, otherwise int) (int, error) {
	if !r.has(name) {
		return otherwise, nil
	}
	want := fmt.Sprintf("a whole number from %d to %d", lo, hi)
	if hi < lo {
		hi, want = math.MaxInt, fmt.Sprintf("a whole number, at least %d", lo)
	}
	var n int
	if err := r.decodeField(name, want, &n); err != nil || n < lo || n > hi {
		return 0, invalid(name, want)
	}
	return n, nil
}

// optStrings reads an optional array of strings (nil when absent).
func (r *request) optStrings(name string) ([]string, error) {
	if !r.has(name) {
		return nil, nil
	}
	list := []string{}
	if err := r.decodeField(name, "an array of strings", &list); err != nil {
		return nil, err
	}
	return list, nil
}

// ---- Ids and times ----

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
