package main

// A fake model server for tests: it speaks the OpenAI Chat Completions and
// Anthropic Messages streaming formats byte for byte, following a script
// of one JSON line per response.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
	Status     int    `json:"status"`     // an HTTP error instead of a stream
	RetryAfter string `json:"retryAfter"` // its Retry-After header
	Body       string `json:"body"`       // its body
	Cut        bool   `json:"cut"`        // drop the connection after the deltas
	Malformed  bool   `json:"malformed"`  // send an event that is not JSON
	DelayMs    int    `json:"delayMs"`    // pause before each delta
}

// fakeModel is a running fake provider.
type fakeModel struct {
	server *httptest.Server
	api    string

	mu       sync.Mutex
	script   []scriptedResponse
	requests []map[string]any // bodies received, in order
	cycle    bool             // start the script again when it runs out (benchmarks)
	served   int
}

// startFakeModel serves script in the given API's format and writes a
// models.json (model "fake/fake-model", no key needed) and a settings.json
// (1 ms retry base delay; compaction keeps only the last turn; approvals
// time out after 1 s) into agentDir.
func startFakeModel(t testing.TB, api, script, agentDir string) *fakeModel {
	fm := &fakeModel{api: api}
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
	if api == apiOpenAI {
		base += "/v1"
	}
	models := fmt.Sprintf(`{"providers":{"fake":{"baseUrl":%q,"api":%q,"models":[{"id":"fake-model","name":"Fake Model",`+
		`"reasoning":true,"input":["text","image"],"contextWindow":100000,"maxTokens":4096,"cost":{"input":3,"output":15,"cacheRead":0.3,"cacheWrite":3.75}}]}}}`, base, api)
	os.WriteFile(filepath.Join(agentDir, "models.json"), []byte(models), 0o644)
	os.WriteFile(filepath.Join(agentDir, "settings.json"), []byte(`{"retry":{"baseDelayMs":1},"compaction":{"keepRecentTokens":1},"confirmTimeoutMs":1000}`), 0o644)
	return fm
}

func (fm *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	fm.mu.Lock()
	fm.requests = append(fm.requests, body)
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
	}
	fm.mu.Unlock()
	wantPath := "/v1/chat/completions"
	if fm.api == apiAnthropic {
		wantPath = "/v1/messages"
	}
	if r.URL.Path != wantPath {
		http.Error(w, "unexpected path "+r.URL.Path, http.StatusNotFound)
		return
	}
	if resp.Status != 0 {
		if resp.RetryAfter != "" {
			w.Header().Set("Retry-After", resp.RetryAfter)
		}
		http.Error(w, resp.Body, resp.Status)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	send := func(event, data string) {
		if event != "" {
			fmt.Fprintf(w, "event: %s\n", event)
		}
		fmt.Fprintf(w, "data: %s\n\n", data)
		flusher.Flush()
	}
	pause := func() bool {
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
	if fm.api == apiAnthropic {
		fm.anthropicStream(resp, send, pause)
	} else {
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

// agentSession is an in-process rpi with a fake model.
func agentSession(t *testing.T, api, script string, extraArgs ...string) (*processSession, *fakeModel, string) {
	e, cwd := newTestEnv(t), t.TempDir()
	fm := startFakeModel(t, api, script, e.agentDir)
	os.WriteFile(filepath.Join(cwd, "AGENTS.md"), []byte("Always answer in French."), 0o644)
	return startSessionIn(t, e, append([]string{"rpc", "--cwd", cwd}, extraArgs...)), fm, cwd
}

// TestRequestBodies checks what rpi sends each API: the system prompt with
// the context file, the tools, an image, the tool call and its result in
// the next request, and the thinking settings.
func TestRequestBodies(t *testing.T) {
	script := `{"toolCalls":[{"id":"call_1","name":"bash","args":["{\"command\":\"echo hi\"}"]}]}
{"text":["done"]}`
	image := `{"type":"image","data":"aGk=","mimeType":"image/png"}`
	for _, api := range []string{apiOpenAI, apiAnthropic} {
		t.Run(api, func(t *testing.T) {
			ps, fm, _ := agentSession(t, api, script, "--thinking", "low")
			ps.send(`{"id":"p","type":"prompt","message":"Look","images":[` + image + `]}`)
			ps.waitFor(`"agent_settled"`)
			ps.close()
			body := fm.lastRequest()
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
		`{"image_url":{"url":"data:image/png;base64,aGk="},"type":"image_url"}`,
		`"tool_calls":[{"function":{"arguments":"{\"command\":\"echo hi\"}","name":"bash"},"id":"call_1","type":"function"}]`,
		`{"content":"hi\n","role":"tool","tool_call_id":"call_1"}`,
		`"tools":[{"function":{"description":`, `"name":"read"`,
	},
	apiAnthropic: {
		`"stream":true`, `"thinking":{"budget_tokens":4096,"type":"enabled"}`, `"system":"You are an expert coding assistant`,
		`Always answer in French.`, `{"source":{"data":"aGk=","media_type":"image/png","type":"base64"},"type":"image"}`,
		`{"id":"call_1","input":{"command":"echo hi"},"name":"bash","type":"tool_use"}`,
		`{"content":"hi\n","is_error":false,"tool_use_id":"call_1","type":"tool_result"}`,
		`"input_schema":{`,
	},
}
