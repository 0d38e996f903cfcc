package main

// A fake model server for tests: it speaks the streaming formats of the
// four APIs byte for byte (OpenAI Chat Completions, OpenAI Responses,
// Anthropic Messages, Google Gemini), following a script of one JSON line
// per response.

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// scriptedResponse is one line of a fixture's model.jsonl: what the fake
// server answers to one request.
type scriptedResponse struct {
	Thinking  []string `json:"thinking"` // thinking deltas
	Text      []string `json:"text"`     // text deltas
	ToolCalls []struct {
		ID   string   `json:"id"`
		Name string   `json:"name"`
		Args []string `json:"args"` // argument JSON, in pieces
	} `json:"toolCalls"`
	Usage *struct {
		Input, Output, CacheRead, CacheWrite int
	} `json:"usage"`
	Finish       string   `json:"finish"`       // the Chat Completions finish_reason, when not stop or tool_calls
	Status       int      `json:"status"`       // an HTTP error instead of a stream
	RetryAfter   string   `json:"retryAfter"`   // its Retry-After header
	RetryAfterMs string   `json:"retryAfterMs"` // its retry-after-ms header
	Body         string   `json:"body"`         // its body
	Cut          bool     `json:"cut"`          // drop the connection after the deltas
	Malformed    bool     `json:"malformed"`    // send an event that is not JSON
	DelayMs      int      `json:"delayMs"`      // pause before each delta
	HoldAt       int      `json:"holdAt"`       // before the n-th delta, wait for the fixture's #release
	Silent       bool     `json:"silent"`       // send nothing, not even the headers, until the client goes
	SSE          []string `json:"sse"`          // instead of all the above: these events, byte for byte (each followed by a blank line)
}

// fakeModel is a running fake provider.
type fakeModel struct {
	server *httptest.Server
	api    string

	mu       sync.Mutex
	script   []scriptedResponse
	requests []map[string]any // bodies received, in order
	headers  []http.Header    // their headers
	cycle    bool             // start the script again when it runs out (benchmarks)
	served   int
	asked    int           // requests received, all told
	release  chan struct{} // #release in a fixture: a held stream goes on
	left     chan struct{} // a silent answer's client went (its request was cancelled)
}

// startFakeModel serves script in the given API's format and writes a
// models.json (model "fake/fake-model", no key needed) and a settings.json
// (1 ms retry base delay; compaction keeps only the last turn; approvals
// time out after 1 s) into agentDir.
func startFakeModel(t testing.TB, api, script, agentDir string) *fakeModel {
	fm := &fakeModel{api: api, release: make(chan struct{}, 16), left: make(chan struct{}, 16)}
	for _, line := range strings.Split(strings.TrimSpace(script), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		var r scriptedResponse
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("model script line %q: %v", line, err)
		}
		fm.script = append(fm.script, r)
	}
	fm.server = httptest.NewServer(http.HandlerFunc(fm.serve))
	t.Cleanup(fm.server.Close)
	base := fm.server.URL
	switch api {
	case apiOpenAI, apiResponses:
		base += "/v1"
	case apiGoogle:
		base += "/v1beta"
	}
	models := fmt.Sprintf(`{"providers":{"fake":{"baseUrl":%q,"api":%q,"models":[{"id":"fake-model","name":"Fake Model",`+
		`"reasoning":true,"input":["text","image"],"contextWindow":100000,"maxTokens":4096,"cost":{"input":3,"output":15,"cacheRead":0.3,"cacheWrite":3.75}}]}}}`, base, api)
	os.WriteFile(filepath.Join(agentDir, "models.json"), []byte(models), 0o644)
	os.WriteFile(filepath.Join(agentDir, "settings.json"), []byte(`{"retry":{"baseDelayMs":1},"compaction":{"keepRecentTokens":1},"confirmTimeoutMs":1000}`), 0o644)
	return fm
}

// waitAsked waits up to 10 s until the model has been asked n times.
func (fm *fakeModel) waitAsked(t *testing.T, n int) {
	t.Helper()
	if !fm.askedWithin(n, 10*time.Second) {
		t.Fatalf("the model was never asked %d times", n)
	}
}

// askedWithin waits up to d until the model has been asked n times,
// reporting whether it was.
func (fm *fakeModel) askedWithin(n int, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(time.Millisecond) {
		fm.mu.Lock()
		asked := fm.asked
		fm.mu.Unlock()
		if asked >= n {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func (fm *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	fm.mu.Lock()
	fm.requests = append(fm.requests, body)
	fm.asked++
	fm.headers = append(fm.headers, r.Header.Clone())
	if len(fm.script) == 0 {
		fm.mu.Unlock()
		http.Error(w, "the fake model has no more scripted answers", http.StatusTeapot)
		return
	}
	resp := fm.script[fm.served%len(fm.script)]
	fm.served++
	if !fm.cycle {
		fm.script = fm.script[1:]
		fm.served = 0
	}
	if len(fm.requests) > 100 {
		fm.requests = fm.requests[1:] // keep memory flat in long benchmarks
		fm.headers = fm.headers[1:]
	}
	fm.mu.Unlock()
	wantPath := map[string]string{apiOpenAI: "/v1/chat/completions", apiResponses: "/v1/responses", apiAnthropic: "/v1/messages",
		apiGoogle: "/v1beta/models/fake-model:streamGenerateContent?alt=sse"}[fm.api]
	if r.URL.RequestURI() != wantPath {
		http.Error(w, "unexpected path "+r.URL.RequestURI(), http.StatusNotFound)
		return
	}
	if resp.Silent {
		<-r.Context().Done()
		select {
		case fm.left <- struct{}{}:
		default:
		}
		return
	}
	if resp.Status != 0 {
		if resp.RetryAfter != "" {
			w.Header().Set("Retry-After", resp.RetryAfter)
		}
		if resp.RetryAfterMs != "" {
			w.Header().Set("Retry-After-Ms", resp.RetryAfterMs)
		}
		http.Error(w, resp.Body, resp.Status)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	if resp.SSE != nil {
		for _, ev := range resp.SSE {
			fmt.Fprintf(w, "%s\n\n", ev)
		}
		flusher.Flush()
		return
	}
	send := func(event, data string) {
		if event != "" {
			fmt.Fprintf(w, "event: %s\n", event)
		}
		fmt.Fprintf(w, "data: %s\n\n", data)
		flusher.Flush()
	}
	deltas := 0
	pause := func() bool {
		if deltas++; deltas == resp.HoldAt {
			select {
			case <-fm.release:
			case <-r.Context().Done():
				return false
			}
		}
		if resp.DelayMs == 0 {
			return true
		}
		select {
		case <-time.After(time.Duration(resp.DelayMs) * time.Millisecond):
			return true
		case <-r.Context().Done():
			return false
		}
	}
	switch fm.api {
	case apiAnthropic:
		fm.anthropicStream(resp, send, pause)
	case apiResponses:
		responsesStream(resp, send, pause)
	case apiGoogle:
		geminiStream(resp, w, pause)
	default:
		fm.openAIStream(resp, send, pause)
	}
	if resp.Cut {
		if hj, ok := w.(http.Hijacker); ok {
			conn, _, _ := hj.Hijack()
			conn.Close()
		}
	}
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// openAIStream writes Chat Completions chunks: deltas, the finish chunk, a
// usage chunk (stream_options.include_usage), then [DONE].
func (fm *fakeModel) openAIStream(resp scriptedResponse, send func(string, string), pause func() bool) {
	chunk := func(delta string, finish string) string {
		fin := "null"
		if finish != "" {
			fin = quote(finish)
		}
		return `{"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1700000000,"model":"fake-model",` +
			`"choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + fin + `}]}`
	}
	send("", chunk(`{"role":"assistant","content":""}`, ""))
	for _, t := range resp.Thinking {
		if !pause() {
			return
		}
		send("", chunk(`{"reasoning_content":`+quote(t)+`}`, ""))
	}
	for _, t := range resp.Text {
		if !pause() {
			return
		}
		send("", chunk(`{"content":`+quote(t)+`}`, ""))
	}
	for i, tc := range resp.ToolCalls {
		send("", chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%s,"type":"function","function":{"name":%s,"arguments":""}}]}`, i, quote(tc.ID), quote(tc.Name)), ""))
		for _, piece := range tc.Args {
			if !pause() {
				return
			}
			send("", chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, quote(piece)), ""))
		}
	}
	if resp.Malformed {
		send("", `{"choices":[{"delta":{"content":"oops"`)
		return
	}
	if resp.Cut {
		return
	}
	finish := "stop"
	if len(resp.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	if resp.Finish != "" {
		finish = resp.Finish
	}
	send("", chunk(`{}`, finish))
	if u := resp.Usage; u != nil {
		send("", fmt.Sprintf(`{"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1700000000,"model":"fake-model","choices":[],`+
			`"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`,
			u.Input+u.CacheRead, u.Output, u.Input+u.CacheRead+u.Output, u.CacheRead))
	}
	send("", "[DONE]")
}

// anthropicStream writes Messages events: message_start, a start, deltas
// and stop per content block, message_delta with the stop reason and
// usage, message_stop.
func (fm *fakeModel) anthropicStream(resp scriptedResponse, send func(string, string), pause func() bool) {
	in, out, cacheRead, cacheWrite := 0, 0, 0, 0
	if u := resp.Usage; u != nil {
		in, out, cacheRead, cacheWrite = u.Input, u.Output, u.CacheRead, u.CacheWrite
	}
	send("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_fake","type":"message","role":"assistant","content":[],`+
		`"model":"fake-model","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,`+
		`"cache_read_input_tokens":%d,"output_tokens":1}}}`, in, cacheWrite, cacheRead))
	index := 0
	block := func(start string, deltas []string, deltaJSON func(string) string, extra ...string) bool {
		send("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, index, start))
		for _, d := range deltas {
			if !pause() {
				return false
			}
			send("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":%s}`, index, deltaJSON(d)))
		}
		for _, e := range extra {
			send("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":%s}`, index, e))
		}
		if resp.Cut {
			return false
		}
		send("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, index))
		index++
		return true
	}
	if len(resp.Thinking) > 0 && !block(`{"type":"thinking","thinking":""}`, resp.Thinking,
		func(d string) string { return `{"type":"thinking_delta","thinking":` + quote(d) + `}` },
		`{"type":"signature_delta","signature":"sig-fake"}`) {
		return
	}
	if len(resp.Text) > 0 {
		send("ping", `{"type": "ping"}`)
		if !block(`{"type":"text","text":""}`, resp.Text, func(d string) string { return `{"type":"text_delta","text":` + quote(d) + `}` }) {
			return
		}
	}
	for _, tc := range resp.ToolCalls {
		if !block(fmt.Sprintf(`{"type":"tool_use","id":%s,"name":%s,"input":{}}`, quote(tc.ID), quote(tc.Name)), tc.Args,
			func(d string) string { return `{"type":"input_json_delta","partial_json":` + quote(d) + `}` }) {
			return
		}
	}
	if resp.Malformed {
		send("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{`)
		return
	}
	stop := "end_turn"
	if len(resp.ToolCalls) > 0 {
		stop = "tool_use"
	}
	send("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, stop, out))
	send("message_stop", `{"type":"message_stop"}`)
}

// responsesStream writes an OpenAI Responses stream as api.openai.com
// does: response.created and .in_progress, then per output item (a
// reasoning item with one summary part, a message, each function call)
// its added event, deltas and done events, then response.completed with
// the usage. Every event is "event: <type>" and "data: <json>" whose
// first keys are type and sequence_number.
func responsesStream(resp scriptedResponse, send func(string, string), pause func() bool) {
	seq := 0
	event := func(typ, rest string) {
		send(typ, fmt.Sprintf(`{"type":%q,"sequence_number":%d,%s}`, typ, seq, rest))
		seq++
	}
	response := func(status, output, usage string) string {
		return `"response":{"id":"resp_fake","object":"response","created_at":1763500000,"status":"` + status + `","background":false,` +
			`"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":4096,"max_tool_calls":null,"model":"fake-model",` +
			`"output":[` + output + `],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":"low","summary":"auto"},` +
			`"safety_identifier":null,"service_tier":"default","store":false,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},` +
			`"tool_choice":"auto","tools":[],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":` + usage + `,"user":null,"metadata":{}}`
	}
	event("response.created", response("in_progress", "", "null"))
	event("response.in_progress", response("in_progress", "", "null"))
	var output []string
	index := 0
	// each sends events written "<type> <the fields after sequence_number>".
	each := func(events []string) {
		for _, e := range events {
			typ, rest, _ := strings.Cut(e, " ")
			event(typ, rest)
		}
	}
	// item streams one output item: output_item.added, the start events,
	// the deltas, the done events, then output_item.done.
	item := func(added string, start []string, deltaType string, deltas []string, deltaJSON func(string) string, done []string, final string) bool {
		event("response.output_item.added", fmt.Sprintf(`"output_index":%d,"item":%s`, index, added))
		each(start)
		for _, d := range deltas {
			if !pause() {
				return false
			}
			event(deltaType, deltaJSON(d))
		}
		if resp.Cut {
			return false
		}
		each(done)
		event("response.output_item.done", fmt.Sprintf(`"output_index":%d,"item":%s`, index, final))
		output = append(output, final)
		index++
		return true
	}
	if len(resp.Thinking) > 0 {
		summary := strings.Join(resp.Thinking, "")
		id := `"item_id":"rs_fake","output_index":` + strconv.Itoa(index) + `,"summary_index":0`
		if !item(`{"id":"rs_fake","type":"reasoning","encrypted_content":"gAAAAEncryptedFake1","summary":[]}`,
			[]string{"response.reasoning_summary_part.added " + id + `,"part":{"type":"summary_text","text":""}`},
			"response.reasoning_summary_text.delta", resp.Thinking,
			func(d string) string { return id + `,"delta":` + quote(d) + `,"obfuscation":"x7"` },
			[]string{"response.reasoning_summary_text.done " + id + `,"text":` + quote(summary),
				"response.reasoning_summary_part.done " + id + `,"part":{"type":"summary_text","text":` + quote(summary) + `}`},
			`{"id":"rs_fake","type":"reasoning","encrypted_content":"gAAAAEncryptedFake2","summary":[{"type":"summary_text","text":`+quote(summary)+`}]}`) {
			return
		}
	}
	if len(resp.Text) > 0 {
		text := strings.Join(resp.Text, "")
		id := `"item_id":"msg_fake","output_index":` + strconv.Itoa(index) + `,"content_index":0`
		if !item(`{"id":"msg_fake","type":"message","status":"in_progress","content":[],"role":"assistant"}`,
			[]string{"response.content_part.added " + id + `,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}`},
			"response.output_text.delta", resp.Text,
			func(d string) string { return id + `,"delta":` + quote(d) + `,"logprobs":[]` },
			[]string{"response.output_text.done " + id + `,"text":` + quote(text) + `,"logprobs":[]`,
				"response.content_part.done " + id + `,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":` + quote(text) + `}`},
			`{"id":"msg_fake","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":`+quote(text)+`}],"role":"assistant"}`) {
			return
		}
	}
	for n, tc := range resp.ToolCalls {
		args := strings.Join(tc.Args, "")
		itemID := fmt.Sprintf("fc_fake%d", n+1)
		id := `"item_id":"` + itemID + `","output_index":` + strconv.Itoa(index)
		call := func(status, arguments string) string {
			return fmt.Sprintf(`{"id":%q,"type":"function_call","status":%q,"arguments":%s,"call_id":%s,"name":%s}`,
				itemID, status, quote(arguments), quote(tc.ID), quote(tc.Name))
		}
		if !item(call("in_progress", ""), nil, "response.function_call_arguments.delta", tc.Args,
			func(d string) string { return id + `,"delta":` + quote(d) },
			[]string{"response.function_call_arguments.done " + id + `,"arguments":` + quote(args)},
			call("completed", args)) {
			return
		}
	}
	if resp.Malformed {
		send("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":`)
		return
	}
	in, out, cached := 0, 0, 0
	if u := resp.Usage; u != nil {
		in, out, cached = u.Input+u.CacheRead, u.Output, u.CacheRead
	}
	usage := fmt.Sprintf(`{"input_tokens":%d,"input_tokens_details":{"cached_tokens":%d},"output_tokens":%d,`+
		`"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}`, in, cached, out, in+out)
	event("response.completed", response("completed", strings.Join(output, ","), usage))
}

// googleJSON spaces JSON as Google's servers do: a space after each colon
// and none after commas.
func googleJSON(compact string) string {
	var b strings.Builder
	inString, escaped := false, false
	for _, c := range compact {
		b.WriteRune(c)
		switch {
		case escaped:
			escaped = false
		case c == '\\' && inString:
			escaped = true
		case c == '"':
			inString = !inString
		case c == ':' && !inString:
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// geminiStream writes a Gemini streamGenerateContent?alt=sse stream as
// Google does: "data: <json>" and CRLF CRLF per chunk, no event names, no
// end marker. Each delta is a chunk with the usage so far; thoughts are
// parts with "thought":true, the first text part carries a thought
// signature, each function call comes whole in its own chunk (with its
// signature, and its id when the script gives one); the last chunk has an
// empty text part, finishReason and the final usage.
func geminiStream(resp scriptedResponse, w http.ResponseWriter, pause func() bool) {
	flusher := w.(http.Flusher)
	in, out, cached := 0, 0, 0
	if u := resp.Usage; u != nil {
		in, out, cached = u.Input+u.CacheRead, u.Output, u.CacheRead
	}
	thoughts := 0
	if len(resp.Thinking) > 0 {
		thoughts = out / 2
	}
	chunk := func(parts, finish string, final bool) {
		candidates := 0
		if final || len(resp.Thinking) == 0 {
			candidates = out - thoughts
		}
		usage := fmt.Sprintf(`{"promptTokenCount":%d,`, in)
		if candidates > 0 {
			usage += fmt.Sprintf(`"candidatesTokenCount":%d,`, candidates)
		}
		usage += fmt.Sprintf(`"totalTokenCount":%d,`, in+candidates+thoughts)
		if cached > 0 {
			usage += fmt.Sprintf(`"cachedContentTokenCount":%d,`, cached)
		}
		usage += fmt.Sprintf(`"promptTokensDetails":[{"modality":"TEXT","tokenCount":%d}]`, in)
		if thoughts > 0 {
			usage += fmt.Sprintf(`,"thoughtsTokenCount":%d`, thoughts)
		}
		usage += "}"
		if finish != "" {
			finish = `"finishReason":"` + finish + `",`
		}
		data := `{"candidates":[{"content":{"parts":[` + parts + `],"role":"model"},` + finish + `"index":0}],` +
			`"usageMetadata":` + usage + `,"modelVersion":"fake-model","responseId":"fakeResponseId1"}`
		fmt.Fprintf(w, "data: %s\r\n\r\n", googleJSON(data))
		flusher.Flush()
	}
	for _, t := range resp.Thinking {
		if !pause() {
			return
		}
		chunk(`{"text":`+quote(t)+`,"thought":true}`, "", false)
	}
	for i, t := range resp.Text {
		if !pause() {
			return
		}
		sig := ""
		if i == 0 && len(resp.Thinking) > 0 {
			sig = `,"thoughtSignature":"c2lnLXRleHQ="`
		}
		chunk(`{"text":`+quote(t)+sig+`}`, "", false)
	}
	for _, tc := range resp.ToolCalls {
		if !pause() {
			return
		}
		id := ""
		if tc.ID != "" {
			id = `"id":` + quote(tc.ID) + `,`
		}
		chunk(`{"functionCall":{`+id+`"name":`+quote(tc.Name)+`,"args":`+strings.Join(tc.Args, "")+`},"thoughtSignature":"c2lnLWNhbGw="}`, "", false)
	}
	if resp.Malformed {
		fmt.Fprint(w, "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"oops\"\r\n\r\n")
		return
	}
	if resp.Cut {
		return
	}
	chunk(`{"text":""}`, "STOP", true)
}

// repeat makes the script start again when it runs out (for benchmarks).
func (fm *fakeModel) repeat() {
	fm.mu.Lock()
	fm.cycle = true
	fm.mu.Unlock()
}

// lastRequest is the body of the latest request the fake server received.
func (fm *fakeModel) lastRequest() map[string]any {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	if len(fm.requests) == 0 {
		return nil
	}
	return fm.requests[len(fm.requests)-1]
}

// conversations are what a fixture's requests.jsonl section shows of the
// requests the model received: for each, one line of the conversation it
// was sent — messages (Chat Completions, Anthropic), input (Responses) or
// contents (Gemini) — without the system prompt.
func (fm *fakeModel) conversations() []byte {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	var out []byte
	for _, body := range fm.requests {
		var kept []any
		for _, key := range []string{"messages", "input", "contents"} {
			list, _ := body[key].([]any)
			for _, m := range list {
				if m, _ := m.(map[string]any); m["role"] == "system" || m["role"] == "developer" {
					continue
				}
				kept = append(kept, m)
			}
		}
		line, _ := json.Marshal(kept)
		out = append(append(out, line...), '\n')
	}
	return out
}

// agentSession is an in-process rpi with a fake model.
func agentSession(t *testing.T, api, script string, extraArgs ...string) (*processSession, *fakeModel, string) {
	e, cwd := newTestEnv(t), t.TempDir()
	fm := startFakeModel(t, api, script, e.agentDir)
	os.WriteFile(filepath.Join(cwd, "AGENTS.md"), []byte("Always answer in French."), 0o644)
	return startSessionIn(t, e, append([]string{"rpc", "--cwd", cwd}, extraArgs...)), fm, cwd
}

// TestRequestBodies checks what rpi sends each API: the system prompt with
// the context file, the tools, an image, the tool call and its result in
// the next request, and the thinking settings; and the Responses API the
// session's id as prompt_cache_key, as pi sends it.
func TestRequestBodies(t *testing.T) {
	endToEnd(t)
	script := `{"toolCalls":[{"id":"call_1","name":"bash","args":["{\"command\":\"echo hi\"}"]}]}
{"text":["done"]}`
	image := `{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}`
	for _, api := range []string{apiOpenAI, apiResponses, apiAnthropic, apiGoogle} {
		t.Run(api, func(t *testing.T) {
			ps, fm, _ := agentSession(t, api, script, "--thinking", "low")
			ps.send(`{"id":"p","type":"prompt","message":"Look","images":[` + image + `]}`)
			ps.waitFor(`"agent_settled"`)
			ps.send(`{"id":"s","type":"get_state"}`)
			ps.waitFor(`"command":"get_state"`)
			var sessionID string
			for _, rec := range ps.close() {
				if data, _ := rec["data"].(map[string]any); rec["command"] == "get_state" {
					sessionID, _ = data["sessionId"].(string)
				}
			}
			body := fm.lastRequest()
			if key, _ := body["prompt_cache_key"].(string); api == apiResponses && (key == "" || key != sessionID) {
				t.Errorf("prompt_cache_key %q, want the session's id %q", key, sessionID)
			}
			data, _ := json.Marshal(body)
			text := string(data)
			for _, want := range wantInRequest[api] {
				if !strings.Contains(text, want) {
					t.Errorf("request lacks %s:\n%.3000s", want, text)
				}
			}
		})
	}
}

var wantInRequest = map[string][]string{
	apiOpenAI: {
		`"stream":true`, `"stream_options":{"include_usage":true}`, `"max_tokens":4096`, `"reasoning_effort":"low"`,
		`{"content":"You are an expert coding assistant`, `"role":"system"`, `Always answer in French.`,
		`{"image_url":{"url":"data:image/png;base64,iVBORw0KGgo="},"type":"image_url"}`,
		`"tool_calls":[{"function":{"arguments":"{\"command\":\"echo hi\"}","name":"bash"},"id":"call_1","type":"function"}]`,
		`{"content":"hi\n","role":"tool","tool_call_id":"call_1"}`,
		`"tools":[{"function":{"description":`, `"name":"read"`,
		// edit as pi 1.6 offers it, and its guidelines in the system prompt.
		`"name":"edit","parameters":{"properties":{"edits":{"description":"One or more replacements`,
		`"required":["path","edits"]`, `- Use edit for targeted changes, and put all the changes to one file in one call.`,
	},
	apiResponses: {
		`"stream":true`, `"store":false`, `"max_output_tokens":4096`, `"model":"fake-model"`,
		`"reasoning":{"effort":"low","summary":"auto"}`, `"include":["reasoning.encrypted_content"]`,
		`{"content":"You are an expert coding assistant`, `"role":"developer"`, `Always answer in French.`,
		`{"content":[{"text":"Look","type":"input_text"},{"detail":"auto","image_url":"data:image/png;base64,iVBORw0KGgo=","type":"input_image"}],"role":"user"}`,
		`{"arguments":"{\"command\":\"echo hi\"}","call_id":"call_1","id":"fc_fake1","name":"bash","type":"function_call"}`,
		`{"call_id":"call_1","output":"hi\n","type":"function_call_output"}`,
		`"tools":[{"description":`, `"name":"read","parameters":{`, `"type":"function"}`,
	},
	apiGoogle: {
		`"systemInstruction":{"parts":[{"text":"You are an expert coding assistant`, `Always answer in French.`,
		`{"parts":[{"text":"Look"},{"inlineData":{"data":"iVBORw0KGgo=","mimeType":"image/png"}}],"role":"user"}`,
		`{"parts":[{"functionCall":{"args":{"command":"echo hi"},"name":"bash"},"thoughtSignature":"c2lnLWNhbGw="}],"role":"model"}`,
		`{"parts":[{"functionResponse":{"name":"bash","response":{"output":"hi\n"}}}],"role":"user"}`,
		`"tools":[{"functionDeclarations":[{"description":`, `"name":"read","parametersJsonSchema":{`,
		`"generationConfig":{"maxOutputTokens":4096,"thinkingConfig":{"includeThoughts":true,"thinkingBudget":-1}}`,
	},
	apiAnthropic: {
		// low's 4096, lowered to leave 1024 of the model's 4096 for the answer.
		`"stream":true`, `"max_tokens":4096`, `"thinking":{"budget_tokens":2048,"display":"summarized","type":"enabled"}`,
		`"system":[{"cache_control":{"type":"ephemeral"},"text":"You are an expert coding assistant`,
		`Always answer in French.`, `{"source":{"data":"iVBORw0KGgo=","media_type":"image/png","type":"base64"},"type":"image"}`,
		`{"id":"call_1","input":{"command":"echo hi"},"name":"bash","type":"tool_use"}`,
		`{"cache_control":{"type":"ephemeral"},"content":"hi\n","is_error":false,"tool_use_id":"call_1","type":"tool_result"}`,
		`"input_schema":{`,
	},
}

// readStream runs an API's stream reader over raw SSE text and returns
// the answer, the events it emitted and the error.
func readStream(t *testing.T, api, sse string) (*assistantMessage, []string, error) {
	t.Helper()
	msg := &assistantMessage{Content: []contentBlock{}}
	var events []string
	st := newStreamer(msg, func(ev assistantEvent) {
		data, _ := json.Marshal(ev)
		events = append(events, string(data))
	})
	m := &model{ID: "m", API: api, Cost: modelCost{Input: 1, Output: 2}}
	err := wireAPINamed(api).read(strings.NewReader(sse), st, m)
	st.finish()
	return msg, events, err
}

// streamCase is raw SSE for an API's reader and what it must make of it:
// the stop reason, or the error, and anything else check looks at.
type streamCase struct {
	name, sse, stop, err string
	check                func(t *testing.T, msg *assistantMessage)
}

// checkStreams runs each case through api's reader.
func checkStreams(t *testing.T, api string, cases []streamCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg, _, err := readStream(t, api, c.sse)
			if got := fmt.Sprint(err); (err != nil || c.err != "") && got != c.err {
				t.Errorf("error %q, want %q", got, c.err)
			}
			if c.stop != "" && msg.StopReason != c.stop {
				t.Errorf("stopReason %q, want %q", msg.StopReason, c.stop)
			}
			if c.check != nil {
				c.check(t, msg)
			}
		})
	}
}

// TestEventLineEndings: a stream's lines may end in "\r\n", "\n" or "\r"
// alone, in any mix, as the server-sent events format allows, and a
// "\r\n" may be split between two reads. A stream whose lines ended in
// "\r" alone was read as one line, and its answer lost.
func TestEventLineEndings(t *testing.T) {
	stream := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n" +
		": a comment\nevent: chunk\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\", world\"},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: [DONE]\n\n"
	for name, ending := range map[string]string{"LF": "\n", "CRLF": "\r\n", "CR": "\r"} {
		t.Run(name, func(t *testing.T) {
			msg, _, err := readStream(t, apiOpenAI, strings.ReplaceAll(stream, "\n", ending))
			if err != nil || len(msg.Content) != 1 || msg.Content[0].Text != "Hello, world" {
				t.Errorf("content %+v, error %v; want Hello, world", msg.Content, err)
			}
		})
	}
	mixed := "data: a\r\rdata: b\n\r\ndata: c\r\ndata\r\ndata:d\n\n:x\rdata: e\r\r\n"
	want := []string{"a", "b", "c\n\nd", "e"}
	for _, chunk := range []int{1, 2, 3, len(mixed)} {
		t.Run(fmt.Sprintf("mixed, read %d bytes at a time", chunk), func(t *testing.T) {
			if got := readEvents(t, &chunkedReader{data: mixed, chunk: chunk}); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("events %q, want %q", got, want)
			}
		})
	}
}

// FuzzEventLines: the stream reader finds the events a literal reading of
// the server-sent events format finds, however the stream is split into
// reads.
func FuzzEventLines(f *testing.F) {
	for _, seed := range []string{
		"data: a\n\n", "data: a\r\rdata: b\r\n\r\n", "event: x\ndata\ndata: y\n\n", "\uFEFFdata:z\r\n\r\n",
		": c\r\n\ndata: a\n", "data: a\r\r\n\n", "id: 1\nretry: 5\ndata: a\n\n", "data : a\n\n",
	} {
		f.Add([]byte(seed), uint8(1))
		f.Add([]byte(seed), uint8(7))
	}
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		got := readEvents(t, &chunkedReader{data: string(stream), chunk: 1 + int(chunk)%16})
		if want := literalEvents(string(stream)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("stream %q read %d bytes at a time: events %q, want %q", stream, 1+int(chunk)%16, got, want)
		}
	})
}

// readEvents is every event the stream reader finds in r, as
// "name:data" when the event has a name.
func readEvents(t *testing.T, r io.Reader) []string {
	t.Helper()
	var got []string
	st := newStreamer(&assistantMessage{}, func(assistantEvent) {})
	st.events(r, func(name string, data []byte) (bool, error) {
		if name != "" {
			name += ":"
		}
		got = append(got, name+string(data))
		return false, nil
	})
	return got
}

// literalEvents reads a stream as the server-sent events format spells
// it out, for FuzzEventLines: the whole stream split into lines first,
// then each line a field, a comment or a blank that ends an event; an
// event without an ending blank line is none. (rpi trims the spaces
// around an event's name, where the format removes one before it.)
func literalEvents(stream string) []string {
	stream = strings.TrimPrefix(stream, "\uFEFF")
	var events []string
	name, data, hasData := "", "", false
	for {
		end := strings.IndexAny(stream, "\r\n")
		if end < 0 {
			return events
		}
		line := stream[:end]
		if strings.HasPrefix(stream[end:], "\r\n") {
			end++
		}
		stream = stream[end+1:]
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "":
			if hasData {
				if name != "" {
					name += ":"
				}
				events = append(events, name+strings.TrimSuffix(data, "\n"))
			}
			name, data, hasData = "", "", false
		case field == "event":
			name = strings.TrimSpace(value)
		case field == "data":
			data, hasData = data+value+"\n", true
		}
	}
}

// chunkedReader reads data at most chunk bytes at a time.
type chunkedReader struct {
	data  string
	chunk int
}

func (r *chunkedReader) Read(p []byte) (int, error) {
	if r.data == "" {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.chunk)], r.data)
	r.data = r.data[n:]
	return n, nil
}

// TestResponsesEndings checks how the Responses reader ends an answer:
// response.incomplete for max_output_tokens is stopReason length, another
// reason or response.failed an error naming it, an error event its
// message (either shape), and a reasoning item with two summary parts is
// one thinking block whose parts are joined by a blank line.
func TestResponsesEndings(t *testing.T) {
	ev := func(typ, rest string) string {
		return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\",\"sequence_number\":0," + rest + "}\n\n"
	}
	text := ev("response.output_item.added", `"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}`) +
		ev("response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Once upon a time","logprobs":[]`)
	end := func(typ, status, extra string) string {
		return ev(typ, `"response":{"id":"resp_1","object":"response","status":"`+status+`",`+extra+
			`"usage":{"input_tokens":20,"input_tokens_details":{"cached_tokens":4},"output_tokens":16,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":36}}`)
	}
	thinking := func(want string) func(*testing.T, *assistantMessage) {
		return func(t *testing.T, msg *assistantMessage) {
			if len(msg.Content) == 0 || msg.Content[0].Thinking != want {
				t.Errorf("content %+v, want thinking %q", msg.Content, want)
			}
		}
	}
	checkStreams(t, apiResponses, []streamCase{
		{"length", text + end("response.incomplete", "incomplete", `"error":null,"incomplete_details":{"reason":"max_output_tokens"},`), "length", "", func(t *testing.T, msg *assistantMessage) {
			if msg.Usage.Input != 16 || msg.Usage.CacheRead != 4 || msg.Usage.Output != 16 || msg.Content[0].Text != "Once upon a time" {
				t.Errorf("usage %+v, content %+v", msg.Usage, msg.Content)
			}
		}},
		{"filtered", text + end("response.incomplete", "incomplete", `"error":null,"incomplete_details":{"reason":"content_filter"},`), "", "Response incomplete: content_filter", nil},
		{"failed", ev("response.failed", `"response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"The model produced invalid content."},"incomplete_details":null,"output":[],"usage":null}`),
			"", "server_error: The model produced invalid content.", nil},
		{"error event", text + ev("error", `"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"You exceeded your current quota.","param":null}`),
			"", "insufficient_quota: You exceeded your current quota.", nil},
		{"flat error", "data: {\"type\":\"error\",\"sequence_number\":1,\"code\":\"server_error\",\"message\":\"Something went wrong.\",\"param\":null}\n\n",
			"", "server_error: Something went wrong.", nil},
		{"no terminal event", text, "", "Connection error: the stream ended before the answer was complete", nil},
		{"two summary parts",
			ev("response.output_item.added", `"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}`) +
				ev("response.reasoning_summary_part.added", `"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}`) +
				ev("response.reasoning_summary_text.delta", `"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"**One**"`) +
				ev("response.reasoning_summary_part.added", `"item_id":"rs_1","output_index":0,"summary_index":1,"part":{"type":"summary_text","text":""}`) +
				ev("response.reasoning_summary_text.delta", `"item_id":"rs_1","output_index":0,"summary_index":1,"delta":"**Two**"`) +
				ev("response.output_item.done", `"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"**One**"},{"type":"summary_text","text":"**Two**"}]}`) +
				end("response.completed", "completed", `"error":null,"incomplete_details":null,`),
			"stop", "", thinking("**One**\n\n**Two**")},
		{"summary without deltas",
			ev("response.output_item.added", `"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}`) +
				ev("response.output_item.done", `"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"A"},{"type":"summary_text","text":"B"}]}`) +
				end("response.completed", "completed", `"error":null,"incomplete_details":null,`),
			"stop", "", thinking("A\n\nB")},
	})
}

// TestResponsesItemOfAnotherType: an item whose done event names another
// type than its added event did signs nothing (a reasoning item's JSON is
// a thinking's signature, a message's id a text's): a text does not go
// back with a reasoning item's id, a thinking not as a message's id.
func TestResponsesItemOfAnotherType(t *testing.T) {
	ev := func(typ, rest string) string {
		return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\",\"sequence_number\":0," + rest + "}\n\n"
	}
	reasoning, message := `{"id":"rs_1","type":"reasoning","summary":[]}`, `{"id":"msg_1","type":"message","role":"assistant","content":[]}`
	call := `{"id":"fc_1","type":"function_call","call_id":"call_1","name":"read","arguments":"{}"}`
	sse := ev("response.output_item.added", `"output_index":0,"item":`+reasoning) +
		ev("response.output_item.done", `"output_index":0,"item":`+message) +
		ev("response.output_item.added", `"output_index":1,"item":`+message) +
		ev("response.output_item.done", `"output_index":1,"item":`+reasoning) +
		ev("response.output_item.added", `"output_index":2,"item":`+call) +
		ev("response.output_item.done", `"output_index":2,"item":`+reasoning) +
		ev("response.completed", `"response":{"id":"resp_1","status":"completed"}`)
	msg, _, err := readStream(t, apiResponses, sse)
	if err != nil || len(msg.Content) != 3 {
		t.Fatalf("%v, content %+v", err, msg.Content)
	}
	for _, b := range msg.Content {
		if b.Signature != "" {
			t.Errorf("%s block signed %q", b.Type, b.Signature)
		}
	}
}

// TestGeminiEndings checks how the Gemini reader ends an answer and what
// it makes of its parts: MAX_TOKENS is stopReason length, another
// finishReason or an error chunk an error naming it, a blocked prompt
// says so; a function call without an id gets one made up (unique in the
// answer); the empty part that ends a stream opens no block unless it
// carries a signature; "\n\n" framing works as well as CRLF.
func TestGeminiEndings(t *testing.T) {
	chunk := func(parts, finish string) string {
		if finish != "" {
			finish = `"finishReason": "` + finish + `",`
		}
		return `data: {"candidates": [{"content": {"parts": [` + parts + `],"role": "model"},` + finish + `"index": 0}],` +
			`"usageMetadata": {"promptTokenCount": 812,"candidatesTokenCount": 15,"totalTokenCount": 923,"thoughtsTokenCount": 96}}` + "\r\n\r\n"
	}
	call := `{"functionCall": {"name": "read","args": {"path": "a.go"}},"thoughtSignature": "CiQBjz1rX0vCq3mW9hB2yT8kLq1nR5sP7uA3eD6fG0hJ2kM4oQ=="}`
	checkStreams(t, apiGoogle, []streamCase{
		{name: "length", sse: chunk(`{"text": "Once upon a time"}`, "MAX_TOKENS"), stop: "length"},
		{name: "safety", sse: chunk(`{"text": ""}`, "SAFETY"), err: "Provider stopped with: SAFETY"},
		{name: "error chunk", sse: chunk(`{"text": "Hi"}`, "") +
			`data: {"error": {"code": 503,"message": "The model is overloaded. Please try again later.","status": "UNAVAILABLE"}}` + "\r\n\r\n",
			err: "503 UNAVAILABLE: The model is overloaded. Please try again later."},
		{name: "blocked", sse: `data: {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},"usageMetadata": {"promptTokenCount": 9,"totalTokenCount": 9}}` + "\r\n\r\n",
			err: "The prompt was blocked: PROHIBITED_CONTENT"},
		{name: "no finish", sse: chunk(`{"text": "Hi"}`, ""), err: "Connection error: the stream ended before the answer was complete"},
		{name: "calls without ids", sse: chunk(call, "") + chunk(call, "") + chunk(`{"text": ""}`, "STOP"), stop: "toolUse",
			check: func(t *testing.T, msg *assistantMessage) {
				if len(msg.Content) != 2 {
					t.Fatalf("want two tool calls and no empty text block, got %+v", msg.Content)
				}
				a, b := msg.Content[0], msg.Content[1]
				if !strings.HasPrefix(a.ID, "read_") || a.ID == b.ID || string(a.Arguments) != `{"path": "a.go"}` || !strings.HasPrefix(a.Signature, "CiQB") {
					t.Errorf("calls %+v", msg.Content)
				}
				if msg.Usage.Input != 812 || msg.Usage.Output != 111 {
					t.Errorf("usage %+v, want input 812, output 15+96", msg.Usage)
				}
			}},
		{name: "signed empty part", sse: strings.ReplaceAll(chunk(`{"text": "Done."}`, "")+chunk(`{"text": "","thoughtSignature": "c2ln"}`, "STOP"), "\r\n", "\n"), stop: "stop",
			check: func(t *testing.T, msg *assistantMessage) {
				if len(msg.Content) != 1 || msg.Content[0].Text != "Done." || msg.Content[0].Signature != "c2ln" {
					t.Errorf("content %+v", msg.Content)
				}
			}},
	})
}

// TestGeminiThinking checks thinkingConfig per model and level: budgets
// for 2.5 models, levels for Gemini 3, and "off" as a zero budget or the
// lowest level without thoughts.
func TestGeminiThinking(t *testing.T) {
	none := map[string]*string{"off": nil, "xhigh": nil, "max": nil}
	cases := []struct {
		id     string
		levels map[string]*string
		level  string
		want   string
	}{
		{"gemini-2.5-flash", nil, "medium", `{"includeThoughts":true,"thinkingBudget":8192}`},
		{"gemini-2.5-flash", nil, "xhigh", `{"includeThoughts":true,"thinkingBudget":24576}`},
		{"gemini-2.5-flash-lite", nil, "minimal", `{"includeThoughts":true,"thinkingBudget":512}`},
		{"gemini-2.5-pro", nil, "high", `{"includeThoughts":true,"thinkingBudget":32768}`},
		{"gemini-2.5-flash", nil, "off", `{"thinkingBudget":0}`},
		{"gemini-2.5-pro", none, "off", `{"thinkingBudget":128}`},
		{"gemini-3-flash-preview", none, "low", `{"includeThoughts":true,"thinkingLevel":"LOW"}`},
		{"gemini-3-flash-preview", none, "off", `{"thinkingLevel":"MINIMAL"}`},
		{"gemini-3.1-pro-preview", think("!off !minimal low medium high !xhigh !max"), "off", `{"thinkingLevel":"LOW"}`},
		{"gemini-3.1-pro-preview", think("!off !minimal low medium high !xhigh !max"), "xhigh", `{"includeThoughts":true,"thinkingLevel":"HIGH"}`},
	}
	for _, c := range cases {
		m := &model{ID: c.id, levels: c.levels}
		got, _ := json.Marshal(geminiThinking(m, c.level, thinkingBudgets{}))
		if string(got) != c.want {
			t.Errorf("%s at %s: %s, want %s", c.id, c.level, got, c.want)
		}
	}
}

// TestCrossModelHistory checks what a conversation that moves between
// APIs sends: a Responses tool call id goes to the other APIs as its
// call id and item id joined by "_", as pi sends it, and signatures,
// reasoning items and item ids (as items) go only to the API (and model)
// that made them.
func TestCrossModelHistory(t *testing.T) {
	history := []any{
		&userMessage{Role: "user", Content: textBlocks("Read a.txt")},
		&assistantMessage{Role: "assistant", API: apiResponses, Provider: "openai", Model: "gpt-5.1", StopReason: "toolUse", Content: []contentBlock{
			{Type: "thinking", Thinking: "Need to read.", Signature: `{"id":"rs_1","type":"reasoning","encrypted_content":"gAAAA","summary":[]}`},
			{Type: "text", Text: "Let me look.", Signature: `{"v":1,"id":"msg_1"}`},
			{Type: "toolCall", ID: "call_1|fc_1", Name: "read", Arguments: json.RawMessage(`{"path":"a.txt"}`)}}},
		&toolResultMessage{Role: "toolResult", ToolCallID: "call_1|fc_1", ToolName: "read", Content: textBlocks("hello")},
	}
	for _, c := range []struct {
		api, provider, id string
		want, never       []string
	}{
		{apiResponses, "openai", "gpt-5.1",
			[]string{`"encrypted_content":"gAAAA"`, `"id":"msg_1"`, `"call_id":"call_1","id":"fc_1"`}, nil},
		{apiResponses, "openai", "gpt-5.5",
			[]string{`"id":"msg_rpi_1"`, `{"arguments":"{\"path\":\"a.txt\"}","call_id":"call_1","name":"read","type":"function_call"}`},
			[]string{"gAAAA", "msg_1", "fc_1"}},
		{apiAnthropic, "anthropic", "claude-sonnet-4-5",
			[]string{`"id":"call_1_fc_1","input"`, `"tool_use_id":"call_1_fc_1"`}, []string{"gAAAA", `"fc_1"`, `"type":"thinking"`}},
		{apiOpenAI, "groq", "llama",
			[]string{`"id":"call_1_fc_1","type":"function"`, `"tool_call_id":"call_1_fc_1"`}, []string{`"fc_1"`}},
		{apiGoogle, "google", "gemini-3-flash-preview",
			[]string{`"functionCall":{"args":{"path":"a.txt"},"id":"call_1_fc_1","name":"read"},"thoughtSignature":"skip_thought_signature_validator"`,
				`"functionResponse":{"id":"call_1_fc_1"`},
			[]string{`"fc_1"`, `"thought":`, "gAAAA"}},
	} {
		m := &model{ID: c.id, API: c.api, Provider: c.provider, Reasoning: true, MaxTokens: 1000}
		data, _ := json.Marshal(wireAPINamed(c.api).body(streamRequest{model: m, messages: history, thinking: "medium"}))
		for _, want := range c.want {
			if !strings.Contains(string(data), want) {
				t.Errorf("%s/%s: request lacks %s:\n%s", c.api, c.id, want, data)
			}
		}
		for _, never := range c.never {
			if strings.Contains(string(data), never) {
				t.Errorf("%s/%s: request has %s:\n%s", c.api, c.id, never, data)
			}
		}
	}
}

// TestNoBlocksAfterTheCut: one event with 15,000 tool calls of distinct
// index (each a block of its own) cuts the answer once its blocks pass the
// bound, and adds no block after that: the cut answer held all 15,000
// (796 KB for a bound of 128 KiB), and was written three times.
func TestNoBlocksAfterTheCut(t *testing.T) {
	var calls []string
	for i := range 15_000 {
		calls = append(calls, fmt.Sprintf(`{"index":%d,"id":"c%d","type":"function","function":{"name":"read","arguments":""}}`, i, i))
	}
	sse := `data: {"choices":[{"index":0,"delta":{"tool_calls":[` + strings.Join(calls, ",") + "]}}]}\n\ndata: [DONE]\n\n"
	msg, events, err := readStream(t, apiOpenAI, sse)
	if err == nil || !strings.HasPrefix(err.Error(), "The answer was cut at 1 MiB") {
		t.Fatalf("error %v, want the answer cut", err)
	}
	if most := maxAnswerBytes / blockBytes; len(msg.Content) > most {
		t.Errorf("the cut answer holds %d blocks, more than the %d its bound takes", len(msg.Content), most)
	}
	if starts := strings.Count(strings.Join(events, "\n"), `"toolcall_start"`); starts != len(msg.Content) {
		t.Errorf("%d toolcall_start events for %d blocks", starts, len(msg.Content))
	}
}

// TestAnswerLimit: an answer may hold 32 bytes a token asked for, at
// least one token's and at most 1 MiB, whatever maxTokens models.json
// gives (2^26 once wrapped a 32-bit int to a negative limit, which cut
// every answer; a huge one does the same to a 64-bit int).
func TestAnswerLimit(t *testing.T) {
	for _, tt := range []struct{ tokens, want int }{
		{-5, 32}, {0, 32}, {1000, 32_000}, {1 << 15, 1 << 20}, {1 << 26, 1 << 20}, {math.MaxInt, 1 << 20},
	} {
		if got := answerLimit(tt.tokens); got != tt.want {
			t.Errorf("answerLimit(%d) = %d, want %d", tt.tokens, got, tt.want)
		}
	}
}

// TestBlockStartAtAnOpenIndex: a block that starts at an index still open
// (Anthropic's index, the Responses API's output_index) ends the open
// block first, with its end event: the client never got text_end for it,
// though message_end had its text.
func TestBlockStartAtAnOpenIndex(t *testing.T) {
	for api, sse := range map[string]string{
		apiAnthropic: `data: {"type":"message_start","message":{"usage":{}}}` + "\n\n" +
			`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
			`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"first"}}` + "\n\n" +
			`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
			`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"second"}}` + "\n\n" +
			`data: {"type":"content_block_stop","index":0}` + "\n\n" +
			`data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}` + "\n\n" +
			`data: {"type":"message_stop"}` + "\n\n",
		apiResponses: `data: {"type":"response.output_item.added","output_index":0,"item":{"id":"m1","type":"message","content":[]}}` + "\n\n" +
			`data: {"type":"response.output_text.delta","output_index":0,"delta":"first"}` + "\n\n" +
			`data: {"type":"response.output_item.added","output_index":0,"item":{"id":"m2","type":"message","content":[]}}` + "\n\n" +
			`data: {"type":"response.output_text.delta","output_index":0,"delta":"second"}` + "\n\n" +
			`data: {"type":"response.output_item.done","output_index":0,"item":{"id":"m2","type":"message","content":[]}}` + "\n\n" +
			`data: {"type":"response.completed","response":{"status":"completed"}}` + "\n\n",
	} {
		_, events, _ := readStream(t, api, sse)
		var ends []string
		for _, ev := range events {
			if strings.Contains(ev, `"type":"text_end"`) {
				ends = append(ends, ev)
			}
		}
		if len(ends) != 2 || !strings.Contains(ends[0], `"contentIndex":0,"content":"first"`) || !strings.Contains(ends[1], `"contentIndex":1,"content":"second"`) {
			t.Errorf("%s: text_end events %q, want one for each block", api, ends)
		}
	}
}

// TestAnthropicThinkingGoesToItsModelOnly: signed thinking goes back to the
// Claude model that made it, and to no other model, even of the same
// provider (pi sends it to the same model alone; another may refuse the
// signature). It went to every Claude of the provider.
func TestAnthropicThinkingGoesToItsModelOnly(t *testing.T) {
	history := []any{
		&userMessage{Role: "user", Content: textBlocks("Read a.txt")},
		&assistantMessage{Role: "assistant", API: apiAnthropic, Provider: "anthropic", Model: "claude-sonnet-4-5", StopReason: "toolUse", Content: []contentBlock{
			{Type: "thinking", Thinking: "Need to read.", Signature: "sig-sonnet"},
			{Type: "toolCall", ID: "toolu_1", Name: "read", Arguments: json.RawMessage(`{"path":"a.txt"}`)}}},
		&toolResultMessage{Role: "toolResult", ToolCallID: "toolu_1", ToolName: "read", Content: textBlocks("hello")},
	}
	for _, c := range []struct {
		id   string
		sent bool
	}{{"claude-sonnet-4-5", true}, {"claude-opus-4-5", false}} {
		m := &model{ID: c.id, API: apiAnthropic, Provider: "anthropic", Reasoning: true, MaxTokens: 64000}
		data, _ := json.Marshal(wireAPINamed(apiAnthropic).body(streamRequest{model: m, messages: history, thinking: "medium"}))
		if got := strings.Contains(string(data), `"signature":"sig-sonnet"`); got != c.sent {
			t.Errorf("to %s: the thinking's signature sent %v, want %v:\n%s", c.id, got, c.sent, data)
		}
	}
}

// TestContextPairsResultsWithCalls: every tool result the model is sent
// follows the call it answers. A call left without a result gets one
// saying so; a result whose call was in an answer left out (aborted), or
// whose call was answered already, is left out: the APIs refuse a result
// without its call, at every later request of the session.
func TestContextPairsResultsWithCalls(t *testing.T) {
	call := func(id string) contentBlock {
		return contentBlock{Type: "toolCall", ID: id, Name: "read", Arguments: json.RawMessage(`{"path":"a"}`)}
	}
	result := func(id, text string) *toolResultMessage {
		return &toolResultMessage{Role: "toolResult", ToolCallID: id, ToolName: "read", Content: textBlocks(text)}
	}
	history := []any{
		&userMessage{Role: "user", Content: textBlocks("go")},
		&assistantMessage{Role: "assistant", StopReason: "aborted", Content: []contentBlock{call("gone")}},
		result("gone", "orphan"),
		&assistantMessage{Role: "assistant", StopReason: "toolUse", Content: []contentBlock{call("a"), call("b")}},
		result("a", "first"),
		result("a", "again"),
		&userMessage{Role: "user", Content: textBlocks("next")},
	}
	var got []string
	for _, m := range contextMessages(history) {
		if r, ok := m.(*toolResultMessage); ok {
			got = append(got, r.ToolCallID+":"+r.Content[0].Text)
		}
	}
	if want := []string{"a:first", "b:No result provided"}; !slices.Equal(got, want) {
		t.Errorf("results sent %q, want %q", got, want)
	}
}
