package main

// A hostile model server: what a compromised or buggy endpoint (or a
// proxy in front of one) can make of rpi by what it streams. Each test
// runs a real local HTTP server that writes its bytes as it likes, and
// calls it through callModel, as the agent does.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// hostileKey is the key hostileCall's model sends, as long as a real one.
const hostileKey = "sk-proj-hostile-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// hostileCall streams one answer of api from a local server that answers
// with handler, through callModel, asking for maxTokens; the model's key
// is hostileKey. emit (nil: none) sees each event.
func hostileCall(t *testing.T, ctx context.Context, api string, maxTokens int, handler http.HandlerFunc, emit func(assistantEvent)) (*assistantMessage, error) {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	m := &model{ID: "m", API: api, Provider: "p", BaseURL: srv.URL, MaxTokens: maxTokens, cred: &credential{key: hostileKey},
		Cost: modelCost{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}}
	msg := &assistantMessage{Role: "assistant", Content: []contentBlock{}}
	if emit == nil {
		emit = func(assistantEvent) {}
	}
	err := callModel(ctx, streamRequest{model: m, secrets: newRedactor([]string{hostileKey})}, msg, func() {}, emit)
	return msg, err
}

// sseHandler answers with the SSE events each writes, flushed one by one.
func sseHandler(events func(send func(data string))) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		flusher := w.(http.Flusher)
		events(func(data string) {
			fmt.Fprintf(w, "data: %s\n\n", data)
			flusher.Flush()
		})
	}
}

// typedSSEHandler answers with events, each a JSON object whose "type"
// names its event too ("event: TYPE"), as Anthropic and the Responses API
// write them.
func typedSSEHandler(events []string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			var typ struct{ Type string }
			json.Unmarshal([]byte(ev), &typ)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ.Type, ev)
		}
	}
}

// heldBytes is what an answer holds: its blocks' text, thinking,
// arguments, ids, names and signatures.
func heldBytes(msg *assistantMessage) int {
	n := 0
	for _, b := range msg.Content {
		n += len(b.Text) + len(b.Thinking) + len(b.Arguments) + len(b.ID) + len(b.Name) +
			len(b.Signature)
	}
	return n
}

// TestLateToolCallIDsCount: a Chat Completions tool call whose first
// piece has neither id nor name, and a later piece that gives them, holds
// what that piece gave; it counts towards the answer's bound as it does
// when the first piece gives it. Four calls each named by a later piece
// of 200 KiB held 800 KiB of an answer bounded at 128 KiB, uncut; and
// pieces of one call with a new id each were all kept (the id → call map
// grew without end while the stream lasted).
func TestLateToolCallIDsCount(t *testing.T) {
	big := func(c byte, i int) string { return fmt.Sprintf("%c%d", c, i) + strings.Repeat(string(c), 100<<10) }
	msg, err := hostileCall(t, context.Background(), apiOpenAI, 4096, sseHandler(func(send func(string)) {
		for i := range 4 {
			send(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":""}}]}}]}`, i))
		}
		for i := range 4 {
			send(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":%q,"function":{"name":%q}}]}}]}`, i, big('i', i), big('n', i)))
		}
		send(`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
		send(`[DONE]`)
	}), nil)
	const limit = 4096 * answerBytesPerToken
	if held := heldBytes(msg); held > limit {
		t.Errorf("the answer holds %d bytes, more than its bound of %d (error %v)", held, limit, err)
	}
	if err == nil || !strings.HasPrefix(err.Error(), "The answer was cut at 128 KiB") {
		t.Errorf("error %v, want the answer cut", err)
	}
}

// TestNewToolCallIDsNotKept: pieces of one Chat Completions tool call,
// each with an id of its own, are not all kept: 640 of them with an id of
// 64 KiB each held 40 MiB until the stream ended (the id → call map kept
// every id), far past the answer's bound, though none went into the
// answer.
func TestNewToolCallIDsNotKept(t *testing.T) {
	live := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := live()
	var during uint64
	hostileCall(t, context.Background(), apiOpenAI, 4096, sseHandler(func(send func(string)) {
		send(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"read","arguments":""}}]}}]}`)
		for i := range 640 {
			id := fmt.Sprintf("call_%d_", i) + strings.Repeat("x", 64<<10)
			send(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":%q,"function":{"arguments":""}}]}}]}`, id))
		}
		send(`{"choices":[{"index":0,"delta":{"content":"measure"}}]}`)
		send(`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
		send(`[DONE]`)
	}), func(ev assistantEvent) {
		if ev.Type == "text_delta" {
			during = live()
		}
	})
	if grew := int64(during) - int64(before); grew > 16<<20 {
		t.Errorf("the heap grew by %d MiB while one call's pieces came with new ids", grew>>20)
	}
}

// TestOverlongLineFailsAtOnce: a server that sends a line longer than an
// event may be and then neither ends it nor closes the stream gets its
// error at once. rpi read on to the end of the line it had refused, so
// the call waited for the server (for the model's timeout of 10
// minutes) and never said why.
func TestOverlongLineFailsAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	release := make(chan struct{})
	defer close(release)
	_, err := hostileCall(t, ctx, apiOpenAI, 4096, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: "+strings.Repeat("x", 1<<20))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, nil)
	if want := "Invalid response from the model server: a line longer than 327680 bytes"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

// TestAnthropicUnendedBlocksEnd: an Anthropic stream that stops
// (message_stop) with blocks never ended by content_block_stop ends them
// as the other readers do: each gets its end event, and a tool call its
// arguments. The call's streamed arguments were dropped (the call ran
// with none, and failed), and the client never saw text_end or
// toolcall_end.
func TestAnthropicUnendedBlocksEnd(t *testing.T) {
	var ends []string
	msg, err := hostileCall(t, context.Background(), apiAnthropic, 4096, sseHandler(func(send func(string)) {
		send(`{"type":"message_start","message":{"usage":{"input_tokens":5,"output_tokens":1}}}`)
		send(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		send(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Reading."}}`)
		send(`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"read","input":{}}}`)
		send(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"a.txt\"}"}}`)
		send(`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}`)
		send(`{"type":"message_stop"}`)
	}), func(ev assistantEvent) {
		if strings.HasSuffix(ev.Type, "_end") {
			ends = append(ends, ev.Type)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 || string(msg.Content[1].Arguments) != `{"path":"a.txt"}` || msg.StopReason != "toolUse" {
		t.Errorf("content %+v, stop %s; want the call with its arguments", msg.Content, msg.StopReason)
	}
	if fmt.Sprint(ends) != "[text_end toolcall_end]" {
		t.Errorf("end events %v, want text_end and toolcall_end", ends)
	}
}

// TestHugeRetryAfter: a Retry-After past what a Duration holds (ten
// billion seconds, 1e300) is the longest wait: past
// retry.provider.maxRetryDelayMs (one minute by default) the call fails
// at once with pi 1.6's message, which tells the wait asked for as
// JavaScript writes the number (10000000000, 1e+300; rpi told its
// longest wait, 9223372037 s, for both), and the retry backs off from the base
// delay (1 ms here); with the limit off (0) the retry waits that longest
// wait. It once became a negative Duration (a float converted out of
// range), which rpi took for no Retry-After at all. Inf is no number of
// seconds, as in pi: the retry backs off.
func TestHugeRetryAfter(t *testing.T) {
	endToEnd(t)
	longest := fmt.Sprint(maxDuration.Milliseconds())
	for _, tc := range []struct {
		after, settings string
		want            []string
	}{
		{"10000000000", "", []string{`"delayMs":1,`, `"errorMessage":"Server requested 10000000000s retry delay (max: 60s). 429 Too Many Requests: slow down"`}},
		{"1e300", "", []string{`"delayMs":1,`, `"errorMessage":"Server requested 1e+300s retry delay (max: 60s). 429 Too Many Requests: slow down"`}},
		{"1.2345678901234567e23", "", []string{`"delayMs":1,`, `"errorMessage":"Server requested 1.2345678901234567e+23s retry delay (max: 60s). 429 Too Many Requests: slow down"`}},
		{"Inf", "", []string{`"delayMs":1,`, `"errorMessage":"429 Too Many Requests: slow down"`}},
		{"1e300", `{"retry":{"provider":{"maxRetryDelayMs":0}}}`, []string{`"delayMs":` + longest + `,`, `"errorMessage":"429 Too Many Requests: slow down"`}},
	} {
		t.Run(tc.after+tc.settings, func(t *testing.T) {
			e := newTestEnv(t)
			startFakeModel(t, apiOpenAI, `{"status":429,"retryAfter":"`+tc.after+`","body":"slow down"}`, e.agentDir)
			if tc.settings != "" {
				os.WriteFile(filepath.Join(e.agentDir, "settings.json"), []byte(tc.settings), 0o644)
			}
			ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir(), "--no-session"})
			ps.send(`{"id":"p","type":"prompt","message":"Hi"}`)
			ps.waitFor(`"auto_retry_start"`)
			ps.send(`{"id":"r","type":"abort_retry"}`)
			ps.waitFor(`"id":"r"`)
			ps.close()
			start := strings.SplitAfter(string(ps.out.bytes()), `"type":"auto_retry_start"`)
			for _, want := range tc.want {
				if len(start) < 2 || !strings.Contains(strings.SplitN(start[1], "\n", 2)[0], want) {
					t.Errorf("auto_retry_start lacks %s:\n%.3000s", want, ps.out.bytes())
				}
			}
		})
	}
}

// TestHugeWaitsFromSettingsSaturate: a settings.json wait past what a
// Duration holds is the longest wait there is, never a wrapped one. A
// baseDelayMs of 9223372036855 became a negative delay (the retry ran at
// once), and a confirmTimeoutMs of 18446744074710 a dialog that counted
// as denied after one second. The retry's maxAgentDelayMs, as large, lets
// the backoff be that long.
func TestHugeWaitsFromSettingsSaturate(t *testing.T) {
	endToEnd(t)
	longest := fmt.Sprint(maxDuration.Milliseconds())
	t.Run("retry", func(t *testing.T) {
		e := newTestEnv(t)
		startFakeModel(t, apiOpenAI, `{"status":429,"body":"slow down"}`, e.agentDir)
		os.WriteFile(filepath.Join(e.agentDir, "settings.json"), []byte(`{"retry":{"baseDelayMs":9223372036855,"maxAgentDelayMs":9223372036855}}`), 0o644)
		ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir(), "--no-session"})
		ps.send(`{"id":"p","type":"prompt","message":"Hi"}`)
		ps.waitFor(`"auto_retry_start"`)
		ps.send(`{"id":"r","type":"abort_retry"}`)
		ps.waitFor(`"id":"r"`)
		ps.close()
		if want := `"delayMs":` + longest + `,`; !strings.Contains(string(ps.out.bytes()), want) {
			t.Errorf("auto_retry_start lacks %s:\n%.3000s", want, ps.out.bytes())
		}
	})
	t.Run("confirm", func(t *testing.T) {
		e := newTestEnv(t)
		startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"bash","args":["{\"command\":\"echo hi\"}"]}]}`+"\n"+`{"text":["Done."]}`, e.agentDir)
		os.WriteFile(filepath.Join(e.agentDir, "settings.json"), []byte(`{"confirmTimeoutMs":18446744074710}`), 0o644)
		ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir(), "--no-session", "--confirm", "bash"})
		ps.send(`{"id":"p","type":"prompt","message":"go"}`)
		ps.waitFor(`"method":"confirm"`)
		ps.send(`{"id":"a","type":"abort"}`)
		ps.waitFor(`"type":"agent_settled"`)
		ps.close()
		if want := `"timeout":` + longest + `}`; !strings.Contains(string(ps.out.bytes()), want) {
			t.Errorf("the confirm dialog lacks %s:\n%.3000s", want, ps.out.bytes())
		}
	})
}

// TestRetryBackoffSaturates: the doubling wait of many retries stops at
// the longest Duration instead of wrapping around to a negative one.
func TestRetryBackoffSaturates(t *testing.T) {
	for _, tc := range []struct {
		baseMs  int64
		attempt int
		want    time.Duration
	}{
		{2000, 1, 2 * time.Second},
		{2000, 3, 8 * time.Second},
		{2000, 33, 2 * time.Second << 32},
		{2000, 34, maxDuration},
		{2000, 1000, maxDuration},
		{1, math.MaxInt32, maxDuration},
		{math.MaxInt64, 1, maxDuration},
		{math.MaxInt32 + 1, 1, (math.MaxInt32 + 1) * time.Millisecond},
	} {
		if got := retryBackoff(tc.baseMs, tc.attempt); got != tc.want {
			t.Errorf("retryBackoff(%d, %d) = %v, want %v", tc.baseMs, tc.attempt, got, tc.want)
		}
	}
}

// TestNegativeUsageIsNone: token counts a server reports below zero (a
// cached count above the prompt's, a negative count) are none, so an
// answer's cost is never negative and cannot take from what the
// session's other answers cost. Chat Completions and Gemini counted the
// input as the prompt less the cached tokens however many those were
// (the Responses reader already stopped at zero).
func TestNegativeUsageIsNone(t *testing.T) {
	for api, usage := range map[string]string{
		apiOpenAI: `{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}],` +
			`"usage":{"prompt_tokens":10,"completion_tokens":-5000000,"prompt_tokens_details":{"cached_tokens":90000000}}}`,
		apiGoogle: `{"candidates":[{"content":{"parts":[{"text":"Hi"}]},"finishReason":"STOP"}],` +
			`"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":-5000000,"cachedContentTokenCount":90000000}}`,
		apiAnthropic: "",
	} {
		t.Run(api, func(t *testing.T) {
			msg, err := hostileCall(t, context.Background(), api, 4096, sseHandler(func(send func(string)) {
				if api != apiAnthropic {
					send(usage)
					send(`[DONE]`) // after Gemini's finish, a proxy's end marker ends the answer
					return
				}
				send(`{"type":"message_start","message":{"usage":{"input_tokens":-90000000,"output_tokens":1,"cache_read_input_tokens":-3}}}`)
				send(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
				send(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`)
				send(`{"type":"content_block_stop","index":0}`)
				send(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":-5000000}}`)
				send(`{"type":"message_stop"}`)
			}), nil)
			if err != nil {
				t.Fatal(err)
			}
			u := msg.Usage
			if u.Input < 0 || u.Output < 0 || u.CacheRead < 0 || u.CacheWrite < 0 || u.TotalTokens < 0 || u.Cost.Total < 0 {
				t.Errorf("usage %+v", u)
			}
		})
	}
}

// TestHugeUsageHeld: the counts a server reports are summed and taken
// from one another held at the ends of int, as computeCost's totals are
// (addTokens): Gemini's output (candidates and thoughts) of the largest
// int and one wrapped to the smallest, which then counted as none, and a
// prompt of the smallest int less one cached token wrapped to the
// largest, where a count below zero is none.
func TestHugeUsageHeld(t *testing.T) {
	for _, tt := range []struct {
		api, chunk    string
		input, output int
	}{
		{apiGoogle, `{"candidates":[{"content":{"parts":[{"text":"Hi"}]},"finishReason":"STOP"}],` +
			`"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":9223372036854775807,"thoughtsTokenCount":1}}`, 10, math.MaxInt},
		{apiGoogle, `{"candidates":[{"content":{"parts":[{"text":"Hi"}]},"finishReason":"STOP"}],` +
			`"usageMetadata":{"promptTokenCount":-9223372036854775808,"candidatesTokenCount":1,"cachedContentTokenCount":1}}`, 0, 1},
		{apiOpenAI, `{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}],` +
			`"usage":{"prompt_tokens":-9223372036854775808,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":1}}}`, 0, 1},
		{apiResponses, `{"type":"response.completed","response":{"status":"completed",` +
			`"usage":{"input_tokens":-9223372036854775808,"output_tokens":1,"input_tokens_details":{"cached_tokens":1}}}}`, 0, 1},
	} {
		msg, err := hostileCall(t, context.Background(), tt.api, 4096, sseHandler(func(send func(string)) {
			send(tt.chunk)
			send(`[DONE]`)
		}), nil)
		if err != nil {
			t.Fatal(err)
		}
		if u := msg.Usage; u.Input != tt.input || u.Output != tt.output {
			t.Errorf("%s %s: input %d, output %d; want %d, %d", tt.api, tt.chunk, u.Input, u.Output, tt.input, tt.output)
		}
	}
}

// TestEchoedKeyCutNotLeaked: a server that echoes the key where rpi cuts
// what it says (its error body at 4 KiB, its Content-Encoding at 64
// bytes) gets no part of it into the error. rpi cut before it redacted,
// so the part of the key before the cut was no key to the redactor, and
// went out as it was: the key's first 70 bytes of 87 in the body, which
// ends one byte into it, its first 51 in the header.
func TestEchoedKeyCutNotLeaked(t *testing.T) {
	part := hostileKey[:len(hostileKey)-1]
	for name, handler := range map[string]http.HandlerFunc{
		"error body": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, strings.Repeat("x", 4096-len(part))+r.Header.Get("Authorization")[len("Bearer "):])
		},
		"Content-Encoding": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", strings.Repeat("x", 10)+r.Header.Get("Authorization")[len("Bearer "):])
			fmt.Fprint(w, "data: [DONE]\n\n")
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := hostileCall(t, context.Background(), apiOpenAI, 4096, handler, nil)
			if err == nil || strings.Contains(err.Error(), hostileKey[:16]) {
				t.Errorf("error %v holds the key's first bytes", err)
			}
		})
	}
}

// TestInvalidUTF8ArgumentsReplaced: a Gemini function call whose args
// hold bytes that are not UTF-8 (raw JSON, which rpi keeps as the
// server sent it) reaches the client and the session file as valid
// UTF-8, each such byte U+FFFD, as encoding/json decodes the strings of
// every other reader. The bytes went out as they came: a client that
// holds rpi to UTF-8, as rpi holds it, could not read the record.
func TestInvalidUTF8ArgumentsReplaced(t *testing.T) {
	endToEnd(t)
	asked := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked++
		w.Header().Set("Content-Type", "text/event-stream")
		part := "{\"functionCall\":{\"name\":\"read\",\"args\":{\"path\":\"a\xff\xfe.txt\"}}}"
		if asked > 1 {
			part = `{"text":"Done."}`
		}
		fmt.Fprintf(w, "data: {\"candidates\":[{\"content\":{\"parts\":[%s]},\"finishReason\":\"STOP\"}]}\n\n", part)
	}))
	defer srv.Close()
	e := newTestEnv(t)
	os.WriteFile(filepath.Join(e.agentDir, "models.json"), []byte(`{"providers":{"p":{"baseUrl":"`+srv.URL+
		`","api":"google-generative-ai","models":[{"id":"m"}]}}}`), 0o644)
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir()})
	ps.send(`{"id":"p","type":"prompt","message":"Read it"}`)
	ps.waitFor(`"type":"agent_settled"`)
	ps.close()
	session, _ := filepath.Glob(filepath.Join(e.agentDir, "sessions", "*", "*.jsonl"))
	if len(session) != 1 {
		t.Fatalf("session files %v", session)
	}
	sessionData, _ := os.ReadFile(session[0])
	for name, data := range map[string][]byte{"stdout": ps.out.bytes(), "the session file": sessionData} {
		if !utf8.Valid(data) {
			t.Errorf("%s is not UTF-8", name)
		}
		if !bytes.Contains(data, []byte("\"arguments\":{\"path\":\"a\uFFFD\uFFFD.txt\"}")) {
			t.Errorf("%s lacks the arguments with U+FFFD:\n%.3000s", name, data)
		}
	}
}

// TestStreamByteOrderMark: a stream that starts with a byte order mark,
// which the SSE format allows there, loses no event. The mark was read as
// part of the first line's field name, so the first event (here the
// answer's first words) was dropped without a word.
func TestStreamByteOrderMark(t *testing.T) {
	msg, err := hostileCall(t, context.Background(), apiOpenAI, 4096, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "\uFEFFdata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n"+
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\", world\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}, nil)
	if err != nil || len(msg.Content) != 1 || msg.Content[0].Text != "Hello, world" {
		t.Errorf("content %+v, error %v; want Hello, world", msg.Content, err)
	}
}

// TestToolArgumentsAlwaysAnObject: a tool call whose arguments are JSON
// but no object (an array, a number, null) is kept as an object holding
// them as text, as arguments that are not JSON are: Anthropic's input and
// Gemini's args must be an object, so the call, kept as it came, went
// back in every later request of the session, each of which the API
// refuses.
func TestToolArgumentsAlwaysAnObject(t *testing.T) {
	endToEnd(t)
	for _, api := range []string{apiAnthropic, apiGoogle} {
		for _, args := range []string{"[1]", "5", "null"} {
			t.Run(api+"/"+args, func(t *testing.T) {
				ps, fm, _ := agentSession(t, api, `{"toolCalls":[{"id":"call_1","name":"ls","args":[`+quote(args)+`]}]}`+"\n"+`{"text":["Done."]}`)
				ps.send(`{"id":"p","type":"prompt","message":"List"}`)
				ps.waitFor(`"type":"agent_settled"`)
				ps.close()
				data, _ := json.Marshal(fm.lastRequest())
				field := map[string]string{apiAnthropic: `"input":`, apiGoogle: `"args":`}[api]
				if strings.Contains(string(data), field+args) || !strings.Contains(string(data), field+"{") {
					t.Errorf("the next request's %s is not an object:\n%.2000s", field, data)
				}
			})
		}
	}
}

// TestHeaderTokenRedacted: a key given in a models.json header with its
// scheme ("Authorization": "Bearer <token>", as a proxy in front of a
// model server may want it) is redacted when a server echoes the token
// alone, as servers echo a key. Only the header's whole value was a
// secret, so the token went out in the error. A header of two words
// without a scheme ("X-Title": "Coding Assistant") makes no word of it a
// secret on its own: "Assistant" would go from every tool result.
func TestHeaderTokenRedacted(t *testing.T) {
	endToEnd(t)
	const token = "sk-header-token-0123456789abcdef"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		http.Error(w, "invalid "+scheme+" token "+tok+" for the Assistant app", http.StatusUnauthorized)
	}))
	defer srv.Close()
	e := newTestEnv(t)
	os.WriteFile(filepath.Join(e.agentDir, "models.json"), []byte(`{"providers":{"p":{"baseUrl":"`+srv.URL+
		`","api":"openai-completions","headers":{"Authorization":"Bearer `+token+`","X-Title":"Coding Assistant"},"models":[{"id":"m"}]}}}`), 0o644)
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir()})
	ps.send(`{"id":"p","type":"prompt","message":"hi"}`)
	ps.waitFor(`"type":"agent_settled"`)
	ps.close()
	out := ps.out.bytes()
	if bytes.Contains(out, []byte(token)) || !bytes.Contains(out, []byte("invalid Bearer token [redacted] for the Assistant app")) {
		t.Errorf("want the token redacted:\n%.3000s", out)
	}
}

// TestChatCompletionsEndWithoutDone: a Chat Completions stream may end
// without its "data: [DONE]" once a choice gave its finish_reason, as the
// OpenAI SDK that pi uses takes it (some servers and proxies leave it
// out); an end before that, or one that cuts the finishing event, is a
// broken stream.
func TestChatCompletionsEndWithoutDone(t *testing.T) {
	chunk := func(data string) string { return "data: " + data + "\n\n" }
	text := chunk(`{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`)
	finish := chunk(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	saidHi := func(t *testing.T, msg *assistantMessage) {
		if len(msg.Content) != 1 || msg.Content[0].Text != "Hi" {
			t.Errorf("content %+v, want the one text Hi", msg.Content)
		}
	}
	broken := "Connection error: the stream ended before the answer was complete"
	checkStreams(t, apiOpenAI, []streamCase{
		{name: "with [DONE]", sse: text + finish + chunk("[DONE]"), stop: "stop", check: saidHi},
		{name: "without [DONE]", sse: text + finish, stop: "stop", check: saidHi},
		{name: "no finish", sse: text, err: broken},
		{name: "an empty finish", sse: chunk(`{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":""}]}`), err: broken},
		{name: "the finishing event cut", sse: text + strings.TrimSuffix(finish, "\n"), err: broken},
	})
}

// TestSchemeToken: the token after an authentication scheme is a secret
// of its own, in models.json's headers and in an MCP server's alike; the
// words of other header values are not.
func TestSchemeToken(t *testing.T) {
	for value, want := range map[string]string{
		"Bearer sk-abc123":   "sk-abc123",
		"bearer  sk-abc123 ": "sk-abc123",
		"Token tok-999":      "tok-999",
		"Basic dXNlcjpwdw==": "dXNlcjpwdw==",
		"Coding Assistant":   "",
		"sk-abc123":          "",
		"Bearer a b":         "",
	} {
		if got, ok := schemeToken(value); got != want || ok != (want != "") {
			t.Errorf("schemeToken(%q) = %q, %v; want %q", value, got, ok, want)
		}
	}
	h := &mcpHTTP{headers: map[string]string{"Authorization": "Token tok-9999", "X-Title": "Coding Assistant"}}
	if got, want := h.redact("401: bad token tok-9999 for the Assistant app"), "401: bad token [redacted] for the Assistant app"; got != want {
		t.Errorf("an MCP server's echo redacted as %q, want %q", got, want)
	}
}

// FuzzImageSize: the size rpi reads from an image's header, for any bytes
// (an image a tool or a client gave, whatever it holds), never panics,
// is positive when read, and is what image.DecodeConfig reads of the
// formats it knows (of a PNG, when it reads one).
func FuzzImageSize(f *testing.F) {
	for _, seed := range []string{"", "RIFF", "RIFF\x00\x00\x00\x00WEBPVP8 ", "RIFF\x00\x00\x00\x00WEBPVP8L\x00\x00\x00\x00\x2f\xff\xff\xff\xff",
		"RIFF\x00\x00\x00\x00WEBPVP8X\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff", "\x89PNG\r\n\x1a\n", "GIF89a\x01\x00\x01\x00", "\xff\xd8\xff"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w, h, ok := imageSize(base64.StdEncoding.EncodeToString(data))
		if ok != (w > 0 && h > 0) || !ok && (w != 0 || h != 0) {
			t.Fatalf("%q: %dx%d, %v", data, w, h, ok)
		}
		if _, _, webp := webpSize(data); webp {
			return
		}
		c, _, err := image.DecodeConfig(bytes.NewReader(data))
		if _, _, png := pngSize(data); png && err != nil {
			return // a PNG header it refuses (a size past what it decodes, a bad checksum) is still read
		}
		if want := err == nil && c.Width > 0 && c.Height > 0; ok != want || ok && (w != c.Width || h != c.Height) {
			t.Fatalf("%q: %dx%d, %v; image.DecodeConfig %+v, %v", data, w, h, ok, c, err)
		}
	})
}

// TestRepeatedCallIDsLinear: a model that gives every tool call the same
// id (a fake server, a careless one) gets each a distinct id in the
// request, as before, at the cost of one form a call: the search for a
// free form resumes where the id's last one was found, so a long session
// of such calls does not cost the square of its length on every request.
func TestRepeatedCallIDsLinear(t *testing.T) {
	forms := 0
	ids := newCallIDs(func(id string, n int) string {
		forms++
		return nthCallID(id, n, 64)
	})
	seen := map[string]bool{}
	const calls = 2000
	for range calls {
		sent := ids.call("call_1")
		if seen[sent] {
			t.Fatalf("%q went with two calls", sent)
		}
		seen[sent] = true
		if got := ids.result("call_1"); got != sent {
			t.Fatalf("the result went with %q, its call with %q", got, sent)
		}
	}
	if forms > 2*calls {
		t.Errorf("%d forms made for %d calls of one id", forms, calls)
	}
}

// TestServerLabels: what a Chat Completions server names its response
// and model is kept as pi 1.6 keeps it — the first id any piece gives,
// and the model when another than the one asked for — but not a name
// that holds the key rpi sent, is longer than 256 bytes
// or has a control character.
func TestServerLabels(t *testing.T) {
	chunk := func(id, model string) string {
		b, _ := json.Marshal(map[string]any{"id": id, "model": model, "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": "x"}}}})
		return string(b)
	}
	for _, c := range []struct {
		name      string
		chunks    []string
		id, model string
	}{
		{"plain", []string{chunk("chatcmpl-1", "m"), chunk("chatcmpl-1", "m")}, "chatcmpl-1", ""},
		{"another model", []string{chunk("chatcmpl-1", "m-fallback")}, "chatcmpl-1", "m-fallback"},
		{"id in a later piece", []string{`{"choices":[{"index":0,"delta":{"role":"assistant"}}]}`, chunk("", ""), chunk("chatcmpl-2", "m2")}, "chatcmpl-2", "m2"},
		{"the key", []string{chunk(hostileKey, "x"+hostileKey)}, "", ""},
		{"too long", []string{chunk(strings.Repeat("i", 257), strings.Repeat("m", 300))}, "", ""},
		{"control characters", []string{chunk("a\x1b[31mred", "m\n")}, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg, err := hostileCall(t, context.Background(), apiOpenAI, 4096, sseHandler(func(send func(string)) {
				for _, ch := range c.chunks {
					send(ch)
				}
				send(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
				send("[DONE]")
			}), nil)
			if err != nil {
				t.Fatal(err)
			}
			var got answerMeta
			if msg.answerMeta != nil {
				got = *msg.answerMeta
			}
			if got.ResponseID != c.id || got.ResponseModel != c.model || got.RawStopReason != "stop" {
				t.Errorf("responseId %q, responseModel %q, rawStopReason %q; want %q, %q, stop", got.ResponseID, got.ResponseModel, got.RawStopReason, c.id, c.model)
			}
		})
	}
}

// TestResponsesKeepsTheFinalID: a Responses stream names its response in
// response.created and again in the event that ends it; the answer keeps
// the last one given, as pi 1.6 does, and the first when the end names
// none.
func TestResponsesKeepsTheFinalID(t *testing.T) {
	for _, c := range []struct{ name, final, want string }{
		{"renamed at the end", `"id":"resp_final",`, "resp_final"},
		{"unnamed at the end", ``, "resp_first"},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg, err := hostileCall(t, context.Background(), apiResponses, 4096, sseHandler(func(send func(string)) {
				send(`{"type":"response.created","response":{"id":"resp_first","status":"in_progress"}}`)
				send(`{"type":"response.in_progress","response":{"id":"resp_other","status":"in_progress"}}`)
				send(`{"type":"response.output_item.added","output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","content":[]}}`)
				send(`{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"hi"}`)
				send(`{"type":"response.output_item.done","output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"hi"}]}}`)
				send(`{"type":"response.completed","response":{` + c.final + `"status":"completed"}}`)
			}), nil)
			if err != nil {
				t.Fatal(err)
			}
			if msg.answerMeta == nil || msg.ResponseID != c.want {
				t.Errorf("responseId %+v, want %q", msg.answerMeta, c.want)
			}
		})
	}
}

// TestChatCompletionsFirstChoiceOnly: of a Chat Completions piece with
// more than one choice, the answer is the first, as pi 1.6 reads it
// (chunk.choices[0]): the others' text was joined to its text, a call of
// theirs at the same index had its arguments added to the first's, and
// the last choice's finish_reason was the answer's.
func TestChatCompletionsFirstChoiceOnly(t *testing.T) {
	msg, err := hostileCall(t, context.Background(), apiOpenAI, 4096, sseHandler(func(send func(string)) {
		send(`{"choices":[{"index":0,"delta":{"content":"Hello"}},{"index":1,"delta":{"content":"Bonjour"}}]}`)
		send(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"read","arguments":"{\"path\":\"x\"}"}}]}},` +
			`{"index":1,"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"bash","arguments":"{\"command\":\"rm -rf ~\"}"}}]}}]}`)
		send(`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"},{"index":1,"delta":{},"finish_reason":"length"}]}`)
		send(`[DONE]`)
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(msg.Content)
	if len(msg.Content) != 2 || msg.Content[0].Text != "Hello" || msg.Content[1].ID != "a" || string(msg.Content[1].Arguments) != `{"path":"x"}` {
		t.Errorf("content %s, want the first choice's text and call alone", got)
	}
	if msg.StopReason != "toolUse" {
		t.Errorf("stopReason %q, want the first choice's (toolUse)", msg.StopReason)
	}
}

// TestAnthropicDeltasGoToTheirBlocksOnly: an Anthropic delta goes only to
// an open block of its kind, as pi 1.6 takes it: one for a block rpi
// never opened (a server tool's server_tool_use, which rpi does not
// keep) is passed over, where it failed the whole answer ("delta for a
// block that never started"), and one of another kind (thinking for a
// text, text for a tool call) is passed over too, where it was added to
// the block's text or arguments.
func TestAnthropicDeltasGoToTheirBlocksOnly(t *testing.T) {
	msg, err := hostileCall(t, context.Background(), apiAnthropic, 4096, typedSSEHandler([]string{
		`{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":5,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"rpi\"}"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Found it."}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":" (hidden)"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{}"}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"read","input":{}}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"a.txt\"}"}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"content_block_stop","index":2}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}`,
		`{"type":"message_stop"}`,
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(msg.Content)
	if len(msg.Content) != 2 || msg.Content[0].Text != "Found it." || string(msg.Content[1].Arguments) != `{"path":"a.txt"}` {
		t.Errorf("content %s, want the text and the call, each with its own deltas alone", got)
	}
}

// TestAnthropicDeltaUsageOnlyWhatItGives: a message_delta's usage sets the
// counts it gives and only those, as pi 1.6 takes it: its cache reads
// and writes (a proxy's, or Anthropic's with server tools, which count
// them again at the end) were not taken, and a usage without
// output_tokens made the answer's output 0.
func TestAnthropicDeltaUsageOnlyWhatItGives(t *testing.T) {
	msg, err := hostileCall(t, context.Background(), apiAnthropic, 4096, typedSSEHandler([]string{
		`{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":100,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":50,"cache_read_input_tokens":40,"cache_creation_input_tokens":10}}`,
		`{"type":"message_delta","delta":{},"usage":{"input_tokens":20,"output_tokens":null}}`,
		`{"type":"message_stop"}`,
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if u := msg.Usage; u.Input != 20 || u.Output != 50 || u.CacheRead != 40 || u.CacheWrite != 10 {
		t.Errorf("usage %+v, want input 20, output 50, cache read 40, cache write 10", u)
	}
}

// TestChatCompletionsCacheUsage: a Chat Completions host's cached tokens
// are read where pi 1.6 reads them — OpenAI's and OpenRouter's
// prompt_tokens_details.cached_tokens, DeepSeek's prompt_cache_hit_tokens,
// Kimi's top-level cached_tokens — with OpenRouter's cache_write_tokens,
// and a usage given in the choice (Moonshot's) when the chunk has none:
// they counted as input (DeepSeek's and Kimi's cache hits priced as new
// input), or the usage was not read at all.
func TestChatCompletionsCacheUsage(t *testing.T) {
	const text = `"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"`
	for _, tt := range []struct {
		name, chunk                          string
		input, cacheRead, cacheWrite, output int
	}{
		{"openai", `{` + text + `}],"usage":{"prompt_tokens":100,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":60}}}`, 40, 60, 0, 7},
		{"openrouter", `{` + text + `}],"usage":{"prompt_tokens":100,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":60,"cache_write_tokens":30}}}`, 10, 60, 30, 7},
		{"deepseek", `{` + text + `}],"usage":{"prompt_tokens":100,"completion_tokens":7,"prompt_cache_hit_tokens":60,"prompt_cache_miss_tokens":40}}`, 40, 60, 0, 7},
		{"kimi", `{` + text + `}],"usage":{"prompt_tokens":100,"completion_tokens":7,"cached_tokens":60}}`, 40, 60, 0, 7},
		{"moonshot", `{` + text + `,"usage":{"prompt_tokens":100,"completion_tokens":7,"cached_tokens":60}}]}`, 40, 60, 0, 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := hostileCall(t, context.Background(), apiOpenAI, 4096, sseHandler(func(send func(string)) {
				send(tt.chunk)
				send(`[DONE]`)
			}), nil)
			if err != nil {
				t.Fatal(err)
			}
			if u := msg.Usage; u.Input != tt.input || u.CacheRead != tt.cacheRead || u.CacheWrite != tt.cacheWrite || u.Output != tt.output {
				t.Errorf("usage %+v; want input %d, cache read %d, cache write %d, output %d", u, tt.input, tt.cacheRead, tt.cacheWrite, tt.output)
			}
		})
	}
}

// TestGeminiFirstCandidateOnly: of a Gemini chunk with more than one
// candidate, the answer is the first, as pi 1.6 reads it
// (chunk.candidates[0]): the others' text was joined to its text, their
// calls added to its calls, and the last one's finishReason taken.
func TestGeminiFirstCandidateOnly(t *testing.T) {
	msg, err := hostileCall(t, context.Background(), apiGoogle, 4096, sseHandler(func(send func(string)) {
		send(`{"candidates":[{"content":{"parts":[{"text":"Hello"}]}},{"content":{"parts":[{"text":"Bonjour"},{"functionCall":{"name":"bash","args":{"command":"rm -rf ~"}}}]}}]}`)
		send(`{"candidates":[{"content":{"parts":[{"text":"!"}]},"finishReason":"STOP"},{"content":{"parts":[{"text":""}]},"finishReason":"MAX_TOKENS"}]}`)
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(msg.Content)
	if len(msg.Content) != 1 || msg.Content[0].Text != "Hello!" || msg.StopReason != "stop" {
		t.Errorf("content %s, stop %s; want the first candidate's text alone, stopped", got, msg.StopReason)
	}
}

// TestResponsesDeltasGoToTheirBlocksOnly: a Responses delta goes only to
// an open block of its kind, as pi 1.6 takes it (getSlot): text for a
// function call was added to its arguments, arguments and reasoning for
// a message to its text.
func TestResponsesDeltasGoToTheirBlocksOnly(t *testing.T) {
	msg, err := hostileCall(t, context.Background(), apiResponses, 4096, typedSSEHandler([]string{
		`{"type":"response.created","response":{"id":"resp_1","status":"in_progress"}}`,
		`{"type":"response.output_item.added","output_index":0,"item":{"type":"message","id":"msg_1"}}`,
		`{"type":"response.output_text.delta","output_index":0,"delta":"Hi"}`,
		`{"type":"response.function_call_arguments.delta","output_index":0,"delta":"{}"}`,
		`{"type":"response.reasoning_summary_text.delta","output_index":0,"delta":" (hidden)"}`,
		`{"type":"response.output_item.done","output_index":0,"item":{"type":"message","id":"msg_1","content":[{"type":"output_text","text":"Hi"}]}}`,
		`{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"read"}}`,
		`{"type":"response.output_text.delta","output_index":1,"delta":"x"}`,
		`{"type":"response.function_call_arguments.delta","output_index":1,"delta":"{\"path\":\"a.txt\"}"}`,
		`{"type":"response.output_item.done","output_index":1,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"read","arguments":"{\"path\":\"a.txt\"}"}}`,
		`{"type":"response.completed","response":{"id":"resp_1","status":"completed"}}`,
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(msg.Content)
	if len(msg.Content) != 2 || msg.Content[0].Text != "Hi" || string(msg.Content[1].Arguments) != `{"path":"a.txt"}` {
		t.Errorf("content %s, want the text and the call, each with its own deltas alone", got)
	}
}

// TestResponsesItemDoneAsAnotherType: an output item done as another type
// than it was added as gives its block nothing: a message added, whose
// text never came, and done as a function call, showed the call's
// arguments as its text.
func TestResponsesItemDoneAsAnotherType(t *testing.T) {
	msg, err := hostileCall(t, context.Background(), apiResponses, 4096, sseHandler(func(send func(string)) {
		send(`{"type":"response.output_item.added","output_index":0,"item":{"type":"message","id":"msg_1"}}`)
		send(`{"type":"response.output_item.done","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"bash","arguments":"{\"command\":\"rm -rf ~\"}"}}`)
		send(`{"type":"response.completed","response":{"id":"resp_1","status":"completed"}}`)
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(msg.Content); len(msg.Content) != 1 || msg.Content[0].Text != "" {
		t.Errorf("content %s, want one empty text", got)
	}
}

// TestGeminiUsageAfterTheFinish: a Gemini stream read to its end, as pi
// 1.6 reads it: a usage sent in a chunk after the one with finishReason
// is the answer's (rpi stopped reading at the finish, and the answer had
// no usage, nor its cost).
func TestGeminiUsageAfterTheFinish(t *testing.T) {
	msg, err := hostileCall(t, context.Background(), apiGoogle, 4096, sseHandler(func(send func(string)) {
		send(`{"candidates":[{"content":{"parts":[{"text":"Hello"}]},"finishReason":"STOP"}]}`)
		send(`{"usageMetadata":{"promptTokenCount":120,"cachedContentTokenCount":20,"candidatesTokenCount":7,"thoughtsTokenCount":3}}`)
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if u := msg.Usage; msg.Content[0].Text != "Hello" || msg.StopReason != "stop" || u.Input != 100 || u.CacheRead != 20 || u.Output != 10 {
		t.Errorf("text %q, stop %s, usage %+v; want the usage of the chunk after the finish", msg.Content[0].Text, msg.StopReason, u)
	}
}

// TestAnthropicBlockStartsWithText: a text or thinking block whose start
// holds text, thinking or a signature (a proxy's, or a server that sends
// a short block whole) begins with them, as pi 1.6 takes it: rpi
// dropped them, and the answer lost its first words.
func TestAnthropicBlockStartsWithText(t *testing.T) {
	var deltas []string
	msg, err := hostileCall(t, context.Background(), apiAnthropic, 4096, typedSSEHandler([]string{
		`{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":5,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"Let me see.","signature":"sig-"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"rest"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"Hello"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":", world"}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}`,
		`{"type":"message_stop"}`,
	}), func(ev assistantEvent) {
		if ev.Delta != nil {
			deltas = append(deltas, *ev.Delta)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(msg.Content)
	if len(msg.Content) != 2 || msg.Content[0].Thinking != "Let me see." || msg.Content[0].Signature != "sig-rest" || msg.Content[1].Text != "Hello, world" {
		t.Errorf("content %s; want each block with what its start held", got)
	}
	if strings.Join(deltas, "") != "Let me see.Hello, world" {
		t.Errorf("deltas %q; want what a block's start held among them", deltas)
	}
}

// TestStopTextsAsPi: a stop rpi does not take for an answer fails with
// pi 1.6's words for it, each API's own (rpi said "The model stopped: X"
// for all): Anthropic's refusal with the model's explanation when it
// gives one, Chat Completions' finish_reason, Gemini's finishReason.
func TestStopTextsAsPi(t *testing.T) {
	anthropic := func(delta string) http.HandlerFunc {
		return typedSSEHandler([]string{
			`{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":5,"output_tokens":1}}}`,
			`{"type":"message_delta","delta":` + delta + `,"usage":{"output_tokens":1}}`,
			`{"type":"message_stop"}`,
		})
	}
	for _, tt := range []struct {
		name, api string
		handler   http.HandlerFunc
		want, raw string
	}{
		{"refusal explained", apiAnthropic, anthropic(`{"stop_reason":"refusal","stop_details":{"type":"refusal","explanation":"I can't help with that."}}`), "I can't help with that.", "refusal"},
		{"refusal", apiAnthropic, anthropic(`{"stop_reason":"refusal"}`), "The model refused to complete the request", "refusal"},
		{"sensitive", apiAnthropic, anthropic(`{"stop_reason":"sensitive"}`), "Provider stopped with: sensitive", "sensitive"},
		{"unknown", apiAnthropic, anthropic(`{"stop_reason":"model_context_window_exceeded"}`), "Unhandled stop reason: model_context_window_exceeded", "model_context_window_exceeded"},
		{"content_filter", apiOpenAI, sseHandler(func(send func(string)) {
			send(`{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"content_filter"}]}`)
			send(`[DONE]`)
		}), "Provider finish_reason: content_filter", "content_filter"},
		{"SAFETY", apiGoogle, sseHandler(func(send func(string)) {
			send(`{"candidates":[{"content":{"parts":[{"text":"Hi"}]},"finishReason":"SAFETY"}]}`)
		}), "Provider stopped with: SAFETY", "SAFETY"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := hostileCall(t, context.Background(), tt.api, 4096, tt.handler, nil)
			if err == nil || err.Error() != tt.want {
				t.Errorf("error %v; want %q", err, tt.want)
			}
			if msg.answerMeta == nil || msg.RawStopReason != tt.raw {
				t.Errorf("raw stop reason %+v; want %q", msg.answerMeta, tt.raw)
			}
		})
	}
}
