package main

// The wire's fast paths checked against encoding/json: the one-pass
// envelope scan against json.Unmarshal into a map, and every string and
// payload rpi appends itself against json.Marshal of the same value.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzDecodeRequest: scanObject accepts exactly the lines that are one
// JSON object, and finds the members encoding/json finds, the last of
// duplicate keys winning.
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"id":"1","type":"get_state"}`,
		` { "type" : "prompt" , "message" : "hi \"there\" \u00e9\ud800" , "images":[{"a":[1,-2.5e+3,true,false,null]}] } `,
		`{"type":"a","type":"b","ty\u0070e":"c"}`,
		`{}`, `[]`, `null`, `{"a":01}`, `{"a":1.}`, `{"a":"\x"}`, `{"a":1,}`, `{"a" 1}`, `{"a":1}x`,
		`{"a":{"b":[{"c":{}}]}}`, `{"a":"` + "\t" + `"}`, `{"a":-}`, `{"a":1e}`, `{"a":tru}`,
		`{"type":"get\u005fstate"}`, `{"type":""}`, `{"type":"get_state` + "\u2028" + `"}`, `{"type":"\/get_state"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if !utf8.Valid(line) {
			return
		}
		members, ok := scanObject(line, nil)
		var fields map[string]json.RawMessage
		err := json.Unmarshal(line, &fields)
		if !ok {
			if err == nil && fields != nil && bytes.Count(line, []byte("{"))+bytes.Count(line, []byte("[")) <= maxScanDepth {
				t.Fatalf("scanObject refused %q, which encoding/json takes", line)
			}
			return
		}
		if err != nil || fields == nil {
			t.Fatalf("scanObject took %q, which encoding/json refuses: %v", line, err)
		}
		got := map[string]json.RawMessage{}
		for _, m := range members {
			got[string(m.key)] = m.value
		}
		if !maps.EqualFunc(got, fields, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
			t.Fatalf("%q: scanObject found %q, encoding/json %q", line, got, fields)
		}
		// The command's type is the string encoding/json reads, whether
		// commandNames knows it or not.
		var want string
		if json.Unmarshal(fields["type"], &want) == nil && len(fields["type"]) > 0 && fields["type"][0] == '"' {
			r, rerr := decodeRequest(line, false, new(rpcRequest))
			switch {
			case rerr != nil && rerr.message == "Missing or invalid field: type":
				t.Fatalf("%q: type %q refused", line, want)
			case rerr == nil && r.typ != want:
				t.Fatalf("%q: type read as %q, encoding/json reads %q", line, r.typ, want)
			}
		}
	})
}

// FuzzAppendJSONString: appendJSONString writes what encoding/json writes
// with SetEscapeHTML(false), for any bytes.
func FuzzAppendJSONString(f *testing.F) {
	for _, seed := range []string{"", "plain", "quote \" back \\ nl \n cr \r tab \t", "\x00\x1f\x7f", "<>&", "\u2028\u2029", "\xff\xfe bad", "é中😀"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := marshalJSON(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendJSONString(%q) = %s, encoding/json gives %s", s, got, want)
		}
	})
}

// TestAppendersMatchEncodingJSON: every hand-written encoder writes what
// encoding/json writes for the same value, hostile strings included.
func TestAppendersMatchEncodingJSON(t *testing.T) {
	hostile := "q\" b\\ \n\r\t\x00\x1f <>& \u2028\u2029 \xff é😀"
	text, empty := hostile, ""
	m := &model{ID: hostile, Name: "n", API: "openai-completions", Provider: "p", BaseURL: "https://user:secret@host.example/v1",
		Reasoning: true, Input: []string{"text", hostile}, Cost: modelCost{Input: 1.25, Output: 1e-7, CacheRead: 3e21, CacheWrite: 0.1 + 0.2},
		ContextWindow: 200000, MaxTokens: 64000}
	bare := &model{ID: "x", BaseURL: "http://localhost:1234/v1"}
	short, long := 300.0, 3600.5
	cached := &model{ID: "c", PromptCache: &promptCache{Short: &short, Long: &long}}
	longOnly := &model{ID: "l", PromptCache: &promptCache{Long: &long}}
	userOnly := &model{ID: "x", BaseURL: "http://user@host/v1"}
	plans := [][]todoPhase{nil, {}, {{Name: hostile}}, {{Name: "p", Tasks: []todoItem{
		{ID: "1", Content: hostile, Status: "pending", DependsOn: []string{"2"}, BlockedBy: []todoBlocker{{TaskID: "2", Content: "c", Status: "pending"}}, Agent: "a"},
		{ID: "2", Content: "c", Status: "in_progress", Ready: true, DependsOn: []string{}, BlockedBy: []todoBlocker{}},
	}}}}
	var values []jsonAppender
	for _, model := range []*model{nil, m, bare, userOnly, cached, longOnly} {
		for _, plan := range plans {
			values = append(values, stateData{Model: model, ThinkingLevel: "high", IsStreaming: true, SteeringMode: "all",
				FollowUpMode: "one-at-a-time", SessionFile: pathOrNull("/tmp/" + hostile), SessionID: "id", SessionName: hostile,
				AutoRetryEnabled: true, MessageCount: 3, PendingMessageCount: 1, TodoPhases: plan, ProcessCount: 2})
		}
	}
	values = append(values, stateData{}, m, bare)
	u := usage{Input: 100, Output: 20, CacheRead: 3, CacheWrite: 4, TotalTokens: 127,
		Cost: costBreakdown{Input: 0.000123, Output: 1e-9, CacheRead: 12345678.5, CacheWrite: -0.0, Total: 1e22}}
	for _, ev := range []assistantEvent{
		{Type: "text_delta", ContentIndex: 0, Delta: &text},
		{Type: "text_delta", ContentIndex: 2, Delta: &empty},
		{Type: "text_end", ContentIndex: 1, Content: &text},
		{Type: "toolcall_start", ContentIndex: 3, ID: hostile, ToolName: "bash"},
		{Type: "toolcall_end", ContentIndex: 3, ToolCall: &contentBlock{Type: "toolCall", ID: "c", Name: "bash", Arguments: []byte(`{"command":"ls"}`)}},
		{},
	} {
		values = append(values, messageUpdate{ev, u}, piMessageUpdate{u, ev}, ev)
	}
	values = append(values, usage{},
		sessionHeader{Version: 3, ID: hostile, Timestamp: "2026-12-03T07:00:00.000Z", Cwd: "/" + hostile},
		sessionHeader{Version: 3, ID: "i", Timestamp: "t", Cwd: "/", ParentSession: hostile}, sessionHeader{}, jsonNull{})
	for _, v := range values {
		want, err := marshalJSON(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.appendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("%T:\nappendJSON   %s\nencoding/json %s", v, got, want)
		}
	}
}

// FuzzAppendJSONFloat: appendJSONFloat writes a finite float64 as
// encoding/json does.
func FuzzAppendJSONFloat(f *testing.F) {
	for _, seed := range []float64{0, -0.0, 1, 0.1, 1e-6, 9.99e-7, 1e20, 1e21, 123456789.125, -3.5e-300, math.MaxFloat64, math.SmallestNonzeroFloat64} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, x float64) {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return
		}
		want, _ := json.Marshal(x)
		if got := appendJSONFloat(nil, x); !bytes.Equal(got, want) {
			t.Fatalf("appendJSONFloat(%v) = %s, encoding/json gives %s", x, got, want)
		}
	})
}

// TestCountingDoesNotEncode: the token estimate of a conversation with an
// 8 MiB image — autoCompact's (projectedTokens), usage_update's and
// get_session_stats' (estimateContext), compaction's (estimateTokens) —
// is the figure json.Marshal's length gives (but for a tool result's
// details, which the model is never sent), and takes a few KiB,
// not the copies of the image that encoding each message made (24 MiB
// and more for each count before).
func TestCountingDoesNotEncode(t *testing.T) {
	image := strings.Repeat("iVBORw0KGgo+/", 8<<20/13)
	code := 0
	messages := []any{
		&userMessage{Role: "user", Content: []contentBlock{{Type: "text", Text: "What is in <this> picture?"},
			{Type: "image", Data: image, MimeType: "image/png"}}, Timestamp: 1},
		&assistantMessage{Role: "assistant", Content: []contentBlock{{Type: "thinking", Thinking: "Look & see"},
			{Type: "toolCall", ID: "c1", Name: "bash", Arguments: json.RawMessage(`{"command": "file a.png > /dev/null"}`)}},
			API: "faux", Provider: "faux", Model: "faux-1", StopReason: "toolUse", Timestamp: 2},
		&toolResultMessage{Role: "toolResult", ToolCallID: "c1", ToolName: "bash", Content: textBlocks("PNG image data, 800 x 600"),
			Details: map[string]any{"exitCode": 0.0}, Timestamp: 3},
		bashExecutionMessage{Role: "bashExecution", Command: "ls", Output: "a.png\n", ExitCode: &code, Timestamp: 4},
		&summaryMessage{Role: "branchSummary", Summary: "An image was looked at.", Timestamp: 5},
	}
	want := 0
	for _, m := range messages {
		if r, ok := m.(*toolResultMessage); ok { // its details are never sent: not counted (contextSize)
			light := *r
			light.Details = nil
			m = &light
		}
		data, _ := json.Marshal(m)
		want += (len(data) + 3) / 4
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	used := estimateContext(messages)
	tokens := projectedTokens(messages, true)
	runtime.ReadMemStats(&after)
	if used == nil || *used != want {
		t.Errorf("estimateContext %v, want %d (json.Marshal's bytes / 4)", used, want)
	}
	if tokens > want || tokens < want-len(messages) {
		t.Errorf("projectedTokens %d, want about %d", tokens, want)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 64<<10 {
		t.Errorf("two counts of the conversation allocated %d bytes; want at most 64 KiB (the image is %d)", allocated, len(image))
	}
}

// FuzzOpenAIDelta: decodeOpenAIDelta, where it decodes a Chat
// Completions chunk, decodes it as encoding/json does.
func FuzzOpenAIDelta(f *testing.F) {
	for _, seed := range []string{
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}`,
		`{"choices":[{"delta":{"role":"assistant","content":""}}]}`,
		`{"choices":[{"delta":{"reasoning_content":"hm \"x\" \u00e9"},"finish_reason":null}]}`,
		`{"choices":[{"delta":{},"finish_reason":"stop"}],"usage":null}`,
		`{"choices":[{"delta":{"content":null,"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}`,
		`{"choices":[{"delta":{"Content":"a","content":"b"}}]}`,
		`{"choices":[{"delta":{"content":"a","content":"b"}}]}`,
		`{"choices":[],"choices":[{"delta":{"content":"b"}}]}`,
		`{"choices":[{"delta":{"content":["x"]}}]}`, `{"choices":[null]}`, `{"choices":null}`, `{"choices":{}}`,
		`{"usage":{"prompt_tokens":3}}`, `{"error":{"message":"no"}}`, `{"choices":[{"delta":{"content":5}}]}`,
		`{"choices":[{"delta":{"reasoning":null,"reasoning_text":"r"},"finish_reason":7}]}`,
		`{"choices":[{"delta":{"content":"a","reasoning_details":null}}]}`,
		`{"choices":[{"delta":{"reasoning_details":[{"type":"reasoning.text","text":"t"}]}}]}`,
		`{"choices":[{"delta":{"reasoning_details":"x","Reasoning_details":null}}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast openAIChunk
		if !decodeOpenAIDelta(data, &fast) {
			return
		}
		var want openAIChunk
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("decodeOpenAIDelta took %q, which encoding/json refuses: %v", data, err)
		}
		if !reflect.DeepEqual(fast, want) {
			t.Fatalf("decodeOpenAIDelta(%q) = %+v; encoding/json: %+v", data, fast, want)
		}
	})
}

// TestStateSameJSONSeesEveryField: get_state answers from its last JSON
// while sameJSON holds, so sameJSON must see a change of every field of
// stateData: one changed field at a time, for each field there is (a
// field added later is covered without editing this test), the two
// states are not the same, and their JSON differs too.
func TestStateSameJSONSeesEveryField(t *testing.T) {
	base := stateData{Model: &model{ID: "a"}, ThinkingLevel: "high", SteeringMode: "all", FollowUpMode: "all",
		SessionFile: "/s.jsonl", SessionID: "id", SessionName: "n", MessageCount: 1, PendingMessageCount: 1,
		TodoPhases: []todoPhase{{Name: "p"}}, ProcessCount: 1}
	same := base
	if !base.sameJSON(&same) {
		t.Fatal("a copy of the state is not the same")
	}
	fields := reflect.TypeOf(base)
	for i := range fields.NumField() {
		changed := base
		v := reflect.ValueOf(&changed).Elem().Field(i)
		switch v.Kind() {
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Int:
			v.SetInt(v.Int() + 1)
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Pointer: // the model: a new one, as the session makes
			v.Set(reflect.ValueOf(&model{ID: "b"}))
		case reflect.Slice: // the plan: a new one, as changeTodos makes
			v.Set(reflect.ValueOf([]todoPhase{{Name: "q"}}))
		case reflect.Interface: // the session file
			v.Set(reflect.ValueOf("/t.jsonl"))
		default:
			t.Fatalf("field %s: a kind this test cannot change: add it", fields.Field(i).Name)
		}
		if base.sameJSON(&changed) {
			t.Errorf("field %s changed, but sameJSON says the state is the same", fields.Field(i).Name)
		}
		if bytes.Equal(base.appendJSON(nil), changed.appendJSON(nil)) {
			t.Errorf("field %s changed, but the JSON did not: this test changes it wrongly", fields.Field(i).Name)
		}
	}
}

// TestQueriesAreCommands: every command keepsNoRequest names (a switch
// over names) is a command, so that a name misspelt there cannot hide:
// there are twelve of them; and none is one of rpi serve's own commands,
// whose handlers replace rpc's of the same name.
func TestQueriesAreCommands(t *testing.T) {
	var queries []string
	for name := range rpcCommands() {
		if keepsNoRequest(name) {
			queries = append(queries, name)
		}
	}
	if len(queries) != 12 {
		t.Errorf("keepsNoRequest names %d commands (%v), want 12: a name misspelt, or the list changed without this test", len(queries), queries)
	}
	for name := range servedCommands.get() { // keepsNoRequest goes by name: rpi serve's own must not share one
		if keepsNoRequest(name) {
			t.Errorf("rpi serve's %s is named a query: its handler would get the reused request", name)
		}
	}
}

// TestQueryRequestClearedOnEveryPath: the connection's one request
// (rpcServer.queryRequest) holds nothing of a line once that line is
// handled, whichever way handleFrame returns: a line refused after its
// decode (unknown command, an id of the wrong kind, no type) must not
// keep its bytes alive until the next line comes — a big one (prompt's
// image) would outlive memoryReturn's giving back, on an idle connection
// for good.
func TestQueryRequestClearedOnEveryPath(t *testing.T) {
	s := newQuietServer(t, "--cwd", t.TempDir(), "--no-session")
	for _, line := range []string{
		`{"id":"a","type":"get_state","x":1}`,
		`{"id":"a","type":"no_such_command","x":1,"y":2,"z":3,"w":4,"v":5}`,
		`{"id":7,"type":"prompt","message":"hi"}`,
		`{"id":"a","message":"hi"}`,
		`{"id":"a","type":"get_state","deep":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
		`{"id":"a","type":"no_such_command","deep":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
		`{"id":"a","type":"set_session_name","name":"n"}`,
	} {
		s.handleFrame(frame{line: []byte(line)})
		if q := &s.queryRequest; q.id != nil || q.typ != "" || q.members != nil || !reflect.DeepEqual(q.room, [4]member{}) {
			t.Errorf("%s: after it, queryRequest still holds id %q, type %q, %d members", line, q.id, q.typ, len(q.members))
		}
	}
}

// TestRefusedBigLineNotKept: a big line refused after its decode can be
// collected once handled (memoryReturn gives it back), as before the
// connection's one request.
func TestRefusedBigLineNotKept(t *testing.T) {
	s := newQuietServer(t, "--cwd", t.TempDir(), "--no-session")
	collected := make(chan struct{})
	func() {
		line := []byte(`{"id":"a","type":"no_such_command","pad":"` + strings.Repeat("x", 8<<20) + `"}`)
		runtime.AddCleanup(&line[0], func(c chan struct{}) { close(c) }, collected)
		s.handleFrame(frame{line: line})
	}()
	for range 50 {
		runtime.GC()
		select {
		case <-collected:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("the refused line is still reachable after it was handled")
}

// TestPolledQueryAllocatesNothing: a query handled line after line costs
// no allocation (the connection's one request; get_state's kept answer,
// and its state's session file, a path or null, a string in both).
func TestPolledQueryAllocatesNothing(t *testing.T) {
	if raceDetector {
		t.Skip("in race builds the lock-order checks allocate (lockrank_race.go)")
	}
	for _, session := range []string{"--no-session", "--name=polled"} {
		s := newQuietServer(t, "--cwd", t.TempDir(), session)
		line := []byte(`{"id":"s","type":"get_state"}`)
		s.handleFrame(frame{line: line})
		s.out.flush()
		if n := testing.AllocsPerRun(20, func() { s.handleFrame(frame{line: line}) }); n != 0 {
			t.Errorf("%s: get_state allocates %v times a line", session, n)
		}
	}
}

// TestHeldCopyOwnsItsMembers: a command's copy of the connection's one
// request (heldCopy) shares nothing with it: the next line decoded into
// that request, or its clearing, leaves the copy as it was, with few
// members (in the request's room), many, or encoding/json's.
func TestHeldCopyOwnsItsMembers(t *testing.T) {
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	for _, line := range []string{
		`{"id":"a","type":"prompt","message":"m"}`,
		`{"id":"a","type":"prompt","message":"m","b":1,"c":2,"d":3,"e":4}`,
		`{"id":"a","type":"prompt","message":"m","deep":` + deep + `}`,
	} {
		var q rpcRequest
		r, err := decodeRequest([]byte(line), false, &q)
		if err != nil {
			t.Fatal(line, err.message)
		}
		c := r.heldCopy()
		want := fmt.Sprint(c.id, c.typ, c.members)
		decodeRequest([]byte(`{"id":"zzzzz","type":"get_state","x":"yyyyyy","b":5,"c":6,"d":7,"e":8,"f":9}`), false, &q)
		if got := fmt.Sprint(c.id, c.typ, c.members); got != want {
			t.Errorf("%s: the copy changed with the next line: %s, was %s", line, got, want)
		}
		q = rpcRequest{}
		if got := fmt.Sprint(c.id, c.typ, c.members); got != want {
			t.Errorf("%s: the copy changed with the clearing: %s, was %s", line, got, want)
		}
		if m, _ := c.str("message"); m != "m" {
			t.Errorf("%s: the copy's message is %q", line, m)
		}
	}
}
