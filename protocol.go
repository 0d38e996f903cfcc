package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// maxLineBytes is the longest input line accepted, not counting its "\n"
// (§3). get_capabilities reports it.
const maxLineBytes = 64 << 20

// ---- Framing (§3) ----

// A frame is one non-blank input line, or tooLong when the line passed the
// limit and was discarded.
type frame struct {
	line    []byte
	tooLong bool
}

// readFrames splits r into frames on "\n" and sends them to frames in
// batches (every line already buffered goes in one batch, so a pipelining
// client costs one hand-off per read, not per line); it closes frames at EOF
// or on a read error. One trailing "\r" is stripped, blank lines are
// skipped, and a final line without "\n" is still delivered. A line longer
// than max is discarded as it streams past, never held whole.
func readFrames(r io.Reader, max int, frames chan<- []frame) {
	defer close(frames)
	br := bufio.NewReaderSize(r, 64<<10)
	var batch []frame
	for {
		line, tooLong, err := readLine(br, max)
		if tooLong {
			batch = append(batch, frame{tooLong: true})
		} else if line = bytes.TrimSuffix(line, []byte("\r")); !isBlank(line) {
			batch = append(batch, frame{line: line})
		}
		if err != nil || br.Buffered() == 0 || len(batch) >= 256 {
			if len(batch) > 0 {
				frames <- batch
				batch = make([]frame, 0, 256)
			}
		}
		if err != nil {
			return
		}
	}
}

// readLine returns the next line without its "\n" (a copy the caller owns),
// or tooLong once more than max bytes came before the "\n". err is non-nil
// only at the end of input, possibly with a final partial line.
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		chunk = bytes.TrimSuffix(chunk, []byte("\n"))
		if len(line)+len(chunk) > max {
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
			return nil, true, err
		}
		line = append(line, chunk...)
		if err != bufio.ErrBufferFull {
			return line, false, err
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
// "\n" and written with exactly one Write (json.Encoder writes each record
// whole, once) while mu is held.
type output struct {
	mu     sync.Mutex // guards enc, w and the records' order: one whole record per Write
	enc    *json.Encoder
	w      *recordWriter
	stderr io.Writer

	// gone is closed when a write fails: the client stopped reading.
	gone chan struct{}
}

// recordWriter passes writes through and remembers the first failure.
type recordWriter struct {
	w   io.Writer
	err error
}

func (rw *recordWriter) Write(p []byte) (int, error) {
	if rw.err != nil {
		return 0, rw.err
	}
	n, err := rw.w.Write(p)
	rw.err = err
	return n, err
}

func newOutput(w, stderr io.Writer) *output {
	o := &output{w: &recordWriter{w: w}, stderr: stderr, gone: make(chan struct{})}
	o.enc = json.NewEncoder(o.w)
	o.enc.SetEscapeHTML(false)
	return o
}

// write sends one record. A record that cannot be encoded is a bug: it is
// reported on stderr and nothing is written. After a failed write (the
// client stopped reading) gone is closed and later records are dropped.
func (o *output) write(v any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.w.err != nil {
		return
	}
	if err := o.enc.Encode(v); err != nil {
		if o.w.err != nil {
			close(o.gone)
			return
		}
		fmt.Fprintf(o.stderr, "rpi: bug: cannot encode %T: %v\n", v, err)
	}
}

// ---- Envelopes (§4, §5) ----

// successResponse and failureResponse are the two response shapes; their
// field order is the wire's key order.
type successResponse struct {
	ID      json.RawMessage `json:"id,omitempty"`
	Type    string          `json:"type"`
	Command string          `json:"command"`
	Success bool            `json:"success"`
	Data    any             `json:"data"`
}

type failureResponse struct {
	ID      json.RawMessage `json:"id,omitempty"`
	Type    string          `json:"type"`
	Command string          `json:"command"`
	Success bool            `json:"success"`
	Error   string          `json:"error"`
}

// event is every event record: a type, and data when it has a payload.
type event struct {
	Type string `json:"type"`
	Data any    `json:"data,omitempty"`
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
	"auto_compaction_start",
	"auto_compaction_end",
}

// ---- Requests ----

// request is one decoded command line. Fields are looked up by exact key.
type request struct {
	id     json.RawMessage // as sent, or nil when absent or null
	typ    string
	fields map[string]json.RawMessage
}

// A requestError is a failure to answer before the command is known.
type requestError struct {
	id      json.RawMessage
	command string
	message string
}

// decodeRequest checks a line in §4's order: JSON object, type, id.
func decodeRequest(line []byte) (*request, *requestError) {
	parseFailure := func(detail string) *requestError {
		return &requestError{command: "parse", message: "Failed to parse command: " + detail}
	}
	if !utf8.Valid(line) {
		return nil, parseFailure("invalid UTF-8")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, parseFailure("expected a JSON object, got " + typeErr.Value)
		}
		return nil, parseFailure(err.Error())
	}
	if fields == nil {
		return nil, parseFailure("expected a JSON object, got null")
	}
	r := &request{fields: fields}
	rawID, hasID := fields["id"]
	idIsString := hasID && rawID[0] == '"'
	rawType := fields["type"]
	if len(rawType) == 0 || rawType[0] != '"' || json.Unmarshal(rawType, &r.typ) != nil {
		e := &requestError{command: "parse", message: "Missing or invalid field: type"}
		if idIsString {
			e.id = rawID
		}
		return nil, e
	}
	if hasID && !idIsString && string(rawID) != "null" {
		return nil, &requestError{id: rawID, command: r.typ, message: "Invalid field id: must be a string"}
	}
	if idIsString {
		r.id = rawID
	}
	return r, nil
}

// idString is the request's id as a string, or nil when it had none.
func (r *request) idString() *string {
	if r.id == nil {
		return nil
	}
	var s string
	json.Unmarshal(r.id, &s)
	return &s
}

// Field accessors. Each returns an error that names the field and what it
// must be, so handlers can return it as is.

func (r *request) has(name string) bool {
	raw, ok := r.fields[name]
	return ok && string(raw) != "null"
}

func missing(name, want string) error { return fmt.Errorf("Missing field %s: must be %s", name, want) }
func invalid(name, want string) error { return fmt.Errorf("Invalid field %s: must be %s", name, want) }

// decodeField decodes a present field into v, which must be of kind want.
func (r *request) decodeField(name, want string, v any) error {
	raw := r.fields[name]
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
	if r.fields[name][0] != '"' {
		return "", invalid(name, "a string")
	}
	return s, r.decodeField(name, "a string", &s)
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

// enum reads a required string field that must be one of values.
func (r *request) enum(name string, values []string) (string, error) {
	want := "one of " + strings.Join(values, ", ")
	if !r.has(name) {
		return "", missing(name, want)
	}
	var s string
	if err := r.decodeField(name, want, &s); err != nil || !oneOf(s, values) {
		return "", invalid(name, want)
	}
	return s, nil
}

// optPositive reads an optional number that must be greater than zero.
func (r *request) optPositive(name string) (float64, bool, error) {
	if !r.has(name) {
		return 0, false, nil
	}
	var f float64
	if err := r.decodeField(name, "a number greater than 0", &f); err != nil || f <= 0 {
		return 0, false, invalid(name, "a number greater than 0")
	}
	return f, true, nil
}

// optBool reads an optional boolean (false when absent).
func (r *request) optBool(name string) (bool, error) {
	if !r.has(name) {
		return false, nil
	}
	return r.boolean(name)
}

// optPositiveInt reads an optional whole number greater than zero.
func (r *request) optPositiveInt(name string, otherwise int) (int, error) {
	if !r.has(name) {
		return otherwise, nil
	}
	var n int
	if err := r.decodeField(name, "a whole number greater than 0", &n); err != nil || n <= 0 {
		return 0, invalid(name, "a whole number greater than 0")
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

// optStringMap reads an optional object whose values are strings.
func (r *request) optStringMap(name string) (map[string]string, error) {
	if !r.has(name) {
		return nil, nil
	}
	var m map[string]string
	if err := r.decodeField(name, "an object of strings", &m); err != nil || r.fields[name][0] != '{' {
		return nil, invalid(name, "an object of strings")
	}
	return m, nil
}

func oneOf(s string, values []string) bool {
	for _, v := range values {
		if s == v {
			return true
		}
	}
	return false
}

// ---- Ids and times ----

// newUUIDv7 returns an RFC 9562 version 7 UUID: a 48-bit Unix millisecond
// timestamp, the version and variant bits, and 74 random bits.
func newUUIDv7(now time.Time) string {
	var u [16]byte
	rand.Read(u[6:])
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

// ---- Extension UI requests (§7) ----

// uiRequest is an extension_ui_request: the host asking the client's UI.
// Its fields are flattened beside type, id and method, as pi sends them.
type uiRequest struct {
	Type            string   `json:"type"`
	ID              string   `json:"id"`
	Method          string   `json:"method"`
	Title           string   `json:"title,omitempty"`
	Message         string   `json:"message,omitempty"`
	Options         []string `json:"options,omitempty"`
	Placeholder     string   `json:"placeholder,omitempty"`
	Prefill         string   `json:"prefill,omitempty"`
	Timeout         int64    `json:"timeout,omitempty"`
	NotifyType      string   `json:"notifyType,omitempty"`
	StatusKey       string   `json:"statusKey,omitempty"`
	StatusText      string   `json:"statusText,omitempty"`
	WidgetKey       string   `json:"widgetKey,omitempty"`
	WidgetLines     []string `json:"widgetLines,omitempty"`
	WidgetPlacement string   `json:"widgetPlacement,omitempty"`
	Text            string   `json:"text,omitempty"`
}

// dialog is an extension_ui_request that waits for the client's answer.
type dialog struct {
	method  string
	options []string
	answer  chan uiAnswer // buffered: receives exactly one answer
}

// uiAnswer is a client's extension_ui_response, already validated.
type uiAnswer struct {
	value     *string
	confirmed *bool
	cancelled bool
}

// tell sends a fire-and-forget UI request (notify, setStatus, setWidget,
// setTitle, set_editor_text); the client does not answer it.
func (s *server) tell(req uiRequest) {
	req.Type, req.ID = "extension_ui_request", newUUIDv7(time.Now())
	s.out.write(req)
}

// ask shows a dialog (select, confirm, input, editor) and waits for the
// client's answer. A timeout (req.Timeout ms) or ctx ending resolves it to
// cancelled; the id is then forgotten, so a late answer is refused.
func (s *server) ask(ctx context.Context, req uiRequest) uiAnswer {
	req.Type, req.ID = "extension_ui_request", newUUIDv7(time.Now())
	d := &dialog{method: req.Method, options: req.Options, answer: make(chan uiAnswer, 1)}
	s.mu.Lock()
	s.dialogs[req.ID] = d
	s.mu.Unlock()
	forget := func() {
		s.mu.Lock()
		delete(s.dialogs, req.ID)
		s.mu.Unlock()
	}
	s.out.write(req)
	var expired <-chan time.Time
	if req.Timeout > 0 {
		timer := time.NewTimer(time.Duration(req.Timeout) * time.Millisecond)
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case a := <-d.answer:
		return a
	case <-expired:
		forget()
	case <-ctx.Done():
		forget()
	}
	return uiAnswer{cancelled: true}
}
