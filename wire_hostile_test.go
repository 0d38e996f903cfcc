package main

// A hostile review of the wire's fast paths: the one-pass decoder against
// the json.Unmarshal decoder it replaced (88e85ba), the hand-written
// appenders against encoding/json, and the input arena.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

// oldDecodeRequest is decodeRequest as of 88e85ba, with its field lookup.
func oldDecodeRequest(line []byte) (fields map[string]json.RawMessage, typ string, id json.RawMessage, rerr *requestError) {
	parseFailure := func(detail string) *requestError {
		return &requestError{command: "parse", message: "Failed to parse command: " + detail}
	}
	if !utf8.Valid(line) {
		return nil, "", nil, parseFailure("invalid UTF-8")
	}
	if err := json.Unmarshal(line, &fields); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, "", nil, parseFailure("expected a JSON object, got " + typeErr.Value)
		}
		return nil, "", nil, parseFailure(err.Error())
	}
	if fields == nil {
		return nil, "", nil, parseFailure("expected a JSON object, got null")
	}
	rawID, hasID := fields["id"]
	idIsString := hasID && rawID[0] == '"'
	rawType := fields["type"]
	if len(rawType) == 0 || rawType[0] != '"' || json.Unmarshal(rawType, &typ) != nil {
		e := &requestError{command: "parse", message: "Missing or invalid field: type"}
		if idIsString {
			e.id = rawID
		}
		return nil, "", nil, e
	}
	if hasID && !idIsString && string(rawID) != "null" {
		return nil, "", nil, &requestError{id: rawID, command: typ, message: "Invalid field id: must be a string"}
	}
	if idIsString {
		id = rawID
	}
	return fields, typ, id, nil
}

func compareDecoders(t *testing.T, line []byte) {
	t.Helper()
	fields, typ, id, oldErr := oldDecodeRequest(line)
	r, newErr := decodeRequest(line, false, new(rpcRequest))
	switch {
	case (oldErr == nil) != (newErr == nil):
		t.Fatalf("%q: old error %v, new error %v", line, oldErr, newErr)
	case oldErr != nil:
		if oldErr.command != newErr.command || oldErr.message != newErr.message || !bytes.Equal(oldErr.id, newErr.id) {
			t.Fatalf("%q: old %q %q %s, new %q %q %s", line, oldErr.command, oldErr.message, oldErr.id, newErr.command, newErr.message, newErr.id)
		}
		return
	}
	if typ != r.typ || !bytes.Equal(id, r.id) || (id == nil) != (r.id == nil) {
		t.Fatalf("%q: old type %q id %s, new type %q id %s", line, typ, id, r.typ, r.id)
	}
	for k, v := range fields {
		got, ok := r.field(k)
		if !ok || !bytes.Equal(got, v) {
			t.Fatalf("%q: field %q: old %s, new %s (%v)", line, k, v, got, ok)
		}
		if old, new := string(v) != "null", r.has(k); old != new {
			t.Fatalf("%q: has(%q): old %v, new %v", line, k, old, new)
		}
		var olds string
		oldStrOK := v[0] == '"' && json.Unmarshal(v, &olds) == nil
		news, err := r.str(k)
		if oldStrOK != (err == nil) || olds != news {
			t.Fatalf("%q: str(%q): old %q %v, new %q %v", line, k, olds, oldStrOK, news, err)
		}
	}
	for _, m := range r.members {
		if _, ok := fields[string(m.key)]; !ok {
			t.Fatalf("%q: new decoder found a member %q the old did not", line, m.key)
		}
	}
}

var hostileLines = []string{
	`{"id":"1","type":"get_state"}`,
	`{"type":"get_state","id":null}`, `{"type":"get_state","id":7}`, `{"type":"get_state","id": [1, 2 ]}`,
	`{"type":"get_state","id":{"a" : 1}}`, `{"id":"a","id":7,"type":"x"}`, `{"id":7,"id":"a","type":"x"}`,
	`{"type":"a","type":null}`, `{"type":null,"type":"a"}`, `{"ty\u0070e":"get_state"}`, `{"type":"get_st\u0061te"}`,
	`{"type":"\ud800"}`, `{"type":"\udc00\ud800x"}`, `{"type":"a\u0000b"}`, `{"\u0000":1,"type":"x"}`,
	`{"type":"x","":1,"":2}`, `{"type":"x","a":-0}`, `{"type":"x","a":-0.0e-0}`, `{"type":"x","a":1E+2}`,
	`{"type":"x","a":00}`, `{"type":"x","a":-01}`, `{"type":"x","a":.5}`, `{"type":"x","a":+1}`, `{"type":"x","a":1.e5}`,
	`{"type":"x","a":1e+}`, `{"type":"x","a":--1}`, `{"type":"x","a":0x10}`, `{"type":"x","a":Infinity}`, `{"type":"x","a":NaN}`,
	`{"type":"x","a":"\u12"}`, `{"type":"x","a":"\u12g4"}`, `{"type":"x","a":"\U1234"}`, `{"type":"x","a":"\'"}`,
	`{"type":"x","a":"` + "\x7f" + `"}`, `{"type":"x","a":"` + "\u2028" + `"}`, "{\"type\":\"x\"}\x00", "\ufeff{\"type\":\"x\"}",
	"{\"type\":\"x\"\v}", "{\"type\":\"x\"\f}", "\t{\"type\" :\t\"x\"}\r", `{"type":"x",}`, `{"type":"x"`, `{"type":"x"}}`,
	`{"type":"x"} {}`, `{"type" "x"}`, `{type:"x"}`, `{'type':'x'}`, `{"type":"x","a":[1,]}`, `{"type":"x","a":[,1]}`,
	`{"type":"x","a":{"b"}}`, `{"type":"x","a":{"b":}}`, `{"type":"x","a":{1:2}}`, `{"type":"x","a":[]}`, `{"type":"x","a":{}}`,
	`{"type":"x","a":truefalse}`, `{"type":"x","a":nul}`, `{"type":"x","a":nulll}`, `{"type":"x","a":True}`,
	`[]`, `[{"type":"x"}]`, `"type"`, `1`, `-`, `null`, ` null `, `true`, `{}`, ` { } `, `{"":""}`, `"`, `{"`, `{"a`, `{"a":`,
	`{"type":"x","a":"` + strings.Repeat(`\\`, 3) + `"}`, `{"type":"x","a":"\"}`,
	`{"type":"x","deep":` + strings.Repeat("[", maxScanDepth+5) + strings.Repeat("]", maxScanDepth+5) + `}`,
	`{"type":"x","id":` + strings.Repeat("[", maxScanDepth+5) + strings.Repeat("]", maxScanDepth+5) + `}`,
	`{"type":"x","deep":` + strings.Repeat("[", maxScanDepth+5) + strings.Repeat("]", maxScanDepth+4) + `}`,
	`{"type":"x","deep":` + strings.Repeat(`{"a":`, 10001) + `1` + strings.Repeat("}", 10001) + `}`,
	`{"type":"x","deep":` + strings.Repeat("[", maxScanDepth) + strings.Repeat("]", maxScanDepth) + `}`,
	`{"type":"x","deep":` + strings.Repeat("[", maxScanDepth-1) + strings.Repeat("]", maxScanDepth-1) + `}`,
	`{"type":"x","deep":` + strings.Repeat("[", maxScanDepth+1) + strings.Repeat("]", maxScanDepth+1) + `}`,
	`{"type":"x","a":1,"a":2,"a":3}`, `{"type":"x","\u0061":1,"a":2}`, `{"type":"x","a":1,"\u0061":2}`,
}

// TestDecoderMatchesEncodingJSONDecoder: for hostile lines, the one-pass decoder
// accepts, refuses, answers and finds fields exactly as the old one.
func TestDecoderMatchesEncodingJSONDecoder(t *testing.T) {
	for _, line := range hostileLines {
		compareDecoders(t, []byte(line))
	}
}

func FuzzDecoderMatchesEncodingJSONDecoder(f *testing.F) {
	for _, line := range hostileLines {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		compareDecoders(t, line)
	})
}

// TestAppendersRefuseNonFinite: a usage whose cost overflowed (a
// models.json price of 1e306 a million tokens, times a thousand tokens)
// made encoding/json refuse the message_update (a bug on stderr, nothing
// on stdout); the appender must not write NaN or +Inf, which is not JSON,
// onto the wire.
func TestAppendersRefuseNonFinite(t *testing.T) {
	m := &model{ID: "m", Cost: modelCost{Input: 1e306, Output: 1}}
	u := usage{Input: 1000, Output: 10}
	computeCost(&u, m)
	if u.Cost.Input != math.MaxFloat64 || u.Cost.Total != math.MaxFloat64 {
		t.Fatalf("an overflowing cost is not capped: %v", u.Cost)
	}
	u.Cost.Input = math.Inf(1) // as if it had not been
	text := "hi"
	ev := assistantEvent{Type: "text_delta", Delta: &text}
	for _, u := range []usage{u, {Cost: costBreakdown{Total: math.NaN()}}, {Cost: costBreakdown{Output: math.Inf(-1)}}} {
		for _, w := range []wire{rpcWire{}, piWire{}} {
			got, err := w.appendEvent(nil, event{"message_update", messageUpdate{ev, u}})
			_, wantErr := marshalJSON(messageUpdate{ev, u})
			if wantErr == nil {
				t.Fatal("encoding/json took a non-finite float")
			}
			if err == nil {
				t.Errorf("%s: appendEvent wrote %s (valid JSON: %v); encoding/json refuses it: %v", w.name(), got, json.Valid(got), wantErr)
			}
		}
	}
	for _, data := range []any{&model{Cost: modelCost{CacheRead: math.Inf(1)}}, stateData{Model: &model{Cost: modelCost{Output: math.NaN()}}}} {
		// The answer is refused, and the command gets a failure instead.
		got, err := encodeResponse(rpcWire{}, nil, nil, "get_state", data, nil)
		if err != nil || !bytes.HasPrefix(got, []byte(`{"type":"response","command":"get_state","success":false,"error":"Internal error in get_state: its answer cannot be encoded (json: `)) {
			t.Errorf("%T: encodeResponse wrote %s (valid JSON: %v), %v; encoding/json refuses it", data, got, json.Valid(got), err)
		}
	}
}

// TestNegativeZeroAsEncodingJSON: -0 is written as encoding/json writes it (the
// existing test's -0.0 is a Go constant, which is +0).
func TestNegativeZeroAsEncodingJSON(t *testing.T) {
	nz := math.Copysign(0, -1)
	u := usage{Cost: costBreakdown{Input: nz, Total: nz}}
	want, _ := marshalJSON(u)
	if got := u.appendJSON(nil); !bytes.Equal(got, want) {
		t.Errorf("appendJSON %s, encoding/json %s", got, want)
	}
}

// heapAfterGC is the live heap after two collections.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// readOneBatch feeds input to readFrames and returns the frames, all of
// them in one batch.
func readOneBatch(t *testing.T, input []byte, max int) []frame {
	frames := make(chan []frame, 4)
	go readFrames(bytes.NewReader(input), max, frames, nil)
	var all []frame
	batches := 0
	for b := range frames {
		all = append(all, b...)
		batches++
	}
	if batches != 1 {
		t.Fatalf("%d batches, want 1", batches)
	}
	return all
}

// TestOverlongLineNotKeptByLaterLines: a short command that arrives right after a
// long line must not keep the long line's memory alive. Before the arena,
// each line was its own allocation; a background command (bash,
// process_wait) keeps its request, and so its line, for as long as it
// runs. A line over the limit never was a command, yet its bytes up to the
// limit stayed in the arena that the next lines of the batch live in.
func TestOverlongLineNotKeptByLaterLines(t *testing.T) {
	const max = 16 << 20
	const cmd = `{"type":"bash","command":"sleep 3600"}`
	for _, first := range []string{"too long", "long", "command first"} {
		t.Run(first, func(t *testing.T) {
			n := max + 1
			if first != "too long" {
				n = max - 100
			}
			before := heapAfterGC()
			kept := func() frame {
				long := bytes.Repeat([]byte("x"), n)
				if first == "command first" {
					all := readOneBatch(t, append([]byte(cmd+"\n"), append(long, '\n')...), max)
					return all[0]
				}
				all := readOneBatch(t, append(long, "\n"+cmd+"\n"...), max)
				return all[len(all)-1]
			}()
			after := heapAfterGC()
			if string(kept.line) != cmd {
				t.Fatalf("kept %q", kept.line)
			}
			if grew := int64(after) - int64(before); grew > 4<<20 {
				t.Errorf("a %d-byte command after a %d-byte line keeps %d bytes alive", len(kept.line), n, grew)
			}
			runtime.KeepAlive(kept)
		})
	}
}

var _ = bufio.NewReader

// TestNilModelIsNull: a nil *model payload is null, as encoding/json
// writes it, not a panic under the output lock.
func TestNilModelIsNull(t *testing.T) {
	got, err := encodeResponse(rpcWire{}, nil, nil, "set_model", (*model)(nil), nil)
	want := `{"type":"response","command":"set_model","success":true,"data":null}`
	if err != nil || string(got) != want {
		t.Errorf("got %s, %v; want %s", got, err, want)
	}
}

// TestUnparsableBaseURLHidesPassword: a baseUrl that net/url refuses kept
// its password in get_state and get_available_models (before the
// appenders as well: MarshalJSON masked only what url.Parse took).
func TestUnparsableBaseURLHidesPassword(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:p%zz@host/v1":       "https://user:***@host/v1",
		"https://user:sec ret@host/v1":    "https://user:***@host/v1",
		"https://user:secret@host/v1/%zz": "https://user:***@host/v1/%zz",
		"https://user:secret@host:80x/v1": "https://user:***@host:80x/v1",
		"https://user:secret@host/v1#%zz": "https://user:***@host/v1#%zz",
		"https://user@host/v1/%zz":        "https://user@host/v1/%zz",
		"https://host/v1/%zz@x":           "https://host/v1/%zz@x",
		"https://user:secret@host/v1?x=1": "https://user:***@host/v1?x=1",
	} {
		m := &model{ID: "m", BaseURL: in}
		for _, got := range [][]byte{m.appendJSON(nil), must(marshalJSON(m))} {
			if strings.Contains(string(got), "secret") || strings.Contains(string(got), "zz@") && strings.Contains(in, "p%zz") {
				t.Errorf("%s: password not masked: %s", in, got)
			}
			if !strings.Contains(string(got), `"baseUrl":`+string(must(marshalJSON(want)))) {
				t.Errorf("%s: got %s, want baseUrl %s", in, got, want)
			}
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

type writesRecorder struct{ writes []string }

func (w *writesRecorder) Write(p []byte) (int, error) {
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// TestGatheredAnswersKeepOrder: a gathered answer leaves before any later record,
// in the same write; flush writes the rest. (Holds.) A single write may
// exceed maxPending: the bound is checked after the answer is added.
func TestGatheredAnswersKeepOrder(t *testing.T) {
	w := &writesRecorder{}
	o := newOutput(w, &bytes.Buffer{})
	rec := func(s string) func([]byte) ([]byte, error) {
		return func(buf []byte) ([]byte, error) { return append(buf, s...), nil }
	}
	o.gather(rec(`"a"`))
	o.gather(rec(`"b"`))
	if len(w.writes) != 0 {
		t.Fatalf("gathered answers written early: %q", w.writes)
	}
	o.send(rec(`"event"`))
	o.gather(rec(`"c"`))
	o.flush()
	o.flush()
	if want := []string{"\"a\"\n\"b\"\n\"event\"\n", "\"c\"\n"}; strings.Join(w.writes, "|") != strings.Join(want, "|") {
		t.Fatalf("writes %q, want %q", w.writes, want)
	}
	w.writes = nil
	o.gather(rec(strings.Repeat("x", maxPending-10)))
	o.gather(rec(`"` + strings.Repeat("y", 1<<20) + `"`))
	batch := strings.Join(w.writes, "")
	if len(batch) <= maxPending || len(w.writes) != (len(batch)+writeChunk-1)/writeChunk {
		t.Fatalf("%d writes of %d bytes in all", len(w.writes), len(batch))
	}
	t.Logf("one batch of %d bytes, handed over %d bytes at a time (docs: at most %d gathered)", len(batch), writeChunk, maxPending)
}

// TestUnencodableAnswerIsAFailure: an answer whose data cannot be encoded
// (a bug: a cycle, a NaN, a type JSON has no form for) still gives its
// command its one response, a failure naming the command, in both modes.
func TestUnencodableAnswerIsAFailure(t *testing.T) {
	for _, w := range []wire{rpcWire{}, piWire{}} {
		for data, why := range map[any]string{math.NaN(): "json: unsupported value: NaN", make(chan int): "json: unsupported type: chan int"} {
			var out bytes.Buffer
			o := newOutput(&out, io.Discard)
			o.send(func(buf []byte) ([]byte, error) {
				return encodeResponse(w, buf, json.RawMessage(`"7"`), "get_tree", data, nil)
			})
			want := `{"id":"7","type":"response","command":"get_tree","success":false,"error":"Internal error in get_tree: its answer cannot be encoded (` + why + `)"}` + "\n"
			if out.String() != want {
				t.Errorf("%s: got %q, want %q", w.name(), out.String(), want)
			}
		}
	}
}
