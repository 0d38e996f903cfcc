package main

// The thinking a Chat Completions model streams, and how it goes back to
// that model: the field it came in (pi's thinkingSignature), and
// OpenRouter's reasoning_details, byte for byte as OpenRouter streams them.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"
)

// openRouterSSE is a stream as a server sends it: each event on its
// own "data:" line, a blank line after each.
func openRouterSSE(events ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		var b strings.Builder
		b.WriteString(": OPENROUTER PROCESSING\n\n")
		for _, ev := range events {
			b.WriteString("data: " + ev + "\n\n")
		}
		b.WriteString("data: [DONE]\n\n")
		w.Write([]byte(b.String()))
	}
}

// streamedAnswer is m's answer from a local server that answers with
// handler, through callModel.
func streamedAnswer(t *testing.T, m *model, handler http.HandlerFunc) *assistantMessage {
	t.Helper()
	srv := httptest.NewServer(handler)
	defer srv.Close()
	c := *m
	c.BaseURL = srv.URL
	msg := &assistantMessage{Role: "assistant", API: m.API, Provider: m.Provider, Model: m.ID, Content: []contentBlock{}}
	if err := callModel(context.Background(), streamRequest{model: &c, secrets: newRedactor(nil)}, msg, func() {}, func(assistantEvent) {}); err != nil {
		t.Fatalf("%s: %v", m.ID, err)
	}
	return msg
}

// throughSession is msg as a session file gives it back: written as an
// entry's line, and read again; the line read back is written again byte
// for byte.
func throughSession(t *testing.T, msg *assistantMessage) *assistantMessage {
	t.Helper()
	raw, err := marshalJSON(msg)
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(`{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-12-06T10:00:00.000Z","message":` + string(raw) + `}`)
	var d jsonIn
	e, err := decodeEntry(line, &d)
	if err != nil {
		t.Fatalf("the session line does not decode: %v\n%s", err, line)
	}
	e.keepLine(line, &d)
	if again, _ := e.appendMessageLine(nil); !bytes.Equal(again, line) {
		t.Errorf("the session line is not written again as it was:\n%s\n%s", line, again)
	}
	back, ok := e.msg.(*assistantMessage)
	if !ok {
		t.Fatalf("the session line gives %T", e.msg)
	}
	return back
}

// sentAssistant is the assistant message of a request body (the first).
func sentAssistant(t *testing.T, body string) map[string]json.RawMessage {
	t.Helper()
	var req struct {
		Messages []map[string]json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	for _, m := range req.Messages {
		if string(m["role"]) == `"assistant"` {
			return m
		}
	}
	t.Fatalf("no assistant message in %s", body)
	return nil
}

// TestOpenRouterReasoningDetailsSentBack: a model through OpenRouter
// streams its reasoning both as text (reasoning) and as reasoning_details
// — Claude's signature in an entry of its own at the end, Gemini 3's
// thought signature as an encrypted entry with its tool call, GPT-5's
// summary and encrypted reasoning item — and wants those details back,
// unchanged, with its tool calls. rpi read the text alone and sent the
// model nothing of it (Gemini 3 refuses the next turn of a tool loop
// without its signature). Now the thinking block's thinkingSignature is
// the details' JSON, as pi 1.6 keeps it (pieces of one text or summary
// joined), it survives the session file, and the same model gets it back
// as reasoning_details; no other model does.
func TestOpenRouterReasoningDetailsSentBack(t *testing.T) {
	chunk := func(provider, model, delta, finish string) string {
		return fmt.Sprintf(`{"id":"gen-1790802605-zQ4v","provider":%q,"model":%q,"object":"chat.completion.chunk","created":1790802605,`+
			`"choices":[{"index":0,"delta":%s,"finish_reason":%s,"native_finish_reason":%s,"logprobs":null}]}`, provider, model, delta, finish, finish)
	}
	usage := `{"id":"gen-1790802605-zQ4v","provider":"p","model":"m","object":"chat.completion.chunk","created":1790802605,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls","native_finish_reason":"tool_calls","logprobs":null}],` +
		`"usage":{"prompt_tokens":597,"completion_tokens":190,"total_tokens":787,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":98}}}`
	cases := []struct {
		name     string
		model    string
		events   []string
		thinking string
		details  string // the block's thinkingSignature, and what the model gets back
		content  string
	}{
		{
			name: "claude", model: "anthropic/claude-sonnet-4.5",
			events: []string{
				chunk("Amazon Bedrock", "anthropic/claude-sonnet-4.5", `{"role":"assistant","content":"","reasoning":"The user wants ","reasoning_details":[{"type":"reasoning.text","text":"The user wants ","format":"anthropic-claude-v1","index":0}]}`, "null"),
				chunk("Amazon Bedrock", "anthropic/claude-sonnet-4.5", `{"role":"assistant","content":"","reasoning":"a.txt read.","reasoning_details":[{"type":"reasoning.text","text":"a.txt read.","format":"anthropic-claude-v1","index":0}]}`, "null"),
				chunk("Amazon Bedrock", "anthropic/claude-sonnet-4.5", `{"role":"assistant","content":"","reasoning_details":[{"type":"reasoning.text","signature":"EqIFCkYIBxgCKkB+dz/Q==","format":"anthropic-claude-v1","index":0}]}`, "null"),
				chunk("Amazon Bedrock", "anthropic/claude-sonnet-4.5", `{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"toolu_bdrk_01","type":"function","function":{"name":"read","arguments":""}}]}`, "null"),
				chunk("Amazon Bedrock", "anthropic/claude-sonnet-4.5", `{"role":"assistant","content":null,"tool_calls":[{"index":0,"function":{"arguments":"{\"path\": \"a.txt\"}"}}]}`, "null"),
				chunk("Amazon Bedrock", "anthropic/claude-sonnet-4.5", `{"role":"assistant","content":"","reasoning":null}`, `"tool_calls"`),
				usage,
			},
			thinking: "The user wants a.txt read.",
			details:  `[{"type":"reasoning.text","text":"The user wants a.txt read.","format":"anthropic-claude-v1","index":0,"signature":"EqIFCkYIBxgCKkB+dz/Q=="}]`,
			content:  "null",
		},
		{
			name: "gemini-3", model: "google/gemini-3-pro-preview",
			events: []string{
				chunk("Google", "google/gemini-3-pro-preview", `{"role":"assistant","content":"","reasoning":"**Reading the file**\n\nI'll read a.txt.","reasoning_details":[{"type":"reasoning.text","text":"**Reading the file**\n\nI'll read a.txt.","format":"google-gemini-v1","index":0}]}`, "null"),
				chunk("Google", "google/gemini-3-pro-preview", `{"role":"assistant","content":"Reading it.","reasoning":null}`, "null"),
				chunk("Google", "google/gemini-3-pro-preview", `{"role":"assistant","content":null,"reasoning":null,"tool_calls":[{"index":0,"id":"tool_read_Xb1k","type":"function","function":{"name":"read","arguments":"{\"path\":\"a.txt\"}"}}],"reasoning_details":[{"type":"reasoning.encrypted","data":"CiQBjz1rX8vR2c+0/eU=","id":"tool_read_Xb1k","format":"google-gemini-v1","index":0}]}`, "null"),
				usage,
			},
			thinking: "**Reading the file**\n\nI'll read a.txt.",
			details: `[{"type":"reasoning.text","text":"**Reading the file**\n\nI'll read a.txt.","format":"google-gemini-v1","index":0},` +
				`{"type":"reasoning.encrypted","data":"CiQBjz1rX8vR2c+0/eU=","id":"tool_read_Xb1k","format":"google-gemini-v1","index":0}]`,
			content: `"Reading it."`,
		},
		{
			name: "gpt-5", model: "openai/gpt-5",
			events: []string{
				chunk("OpenAI", "openai/gpt-5", `{"role":"assistant","content":"","reasoning":"**Planning**","reasoning_details":[{"type":"reasoning.summary","summary":"**Planning**","format":"openai-responses-v1","index":0}]}`, "null"),
				chunk("OpenAI", "openai/gpt-5", `{"role":"assistant","content":"","reasoning":" the read","reasoning_details":[{"type":"reasoning.summary","summary":" the read","format":"openai-responses-v1","index":0}]}`, "null"),
				chunk("OpenAI", "openai/gpt-5", `{"role":"assistant","content":"","reasoning_details":[{"type":"reasoning.encrypted","data":"gAAAAABpKx","id":"rs_0a1b2c","format":"openai-responses-v1","index":0}]}`, "null"),
				chunk("OpenAI", "openai/gpt-5", `{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_Qy7","type":"function","function":{"name":"read","arguments":"{\"path\":\"a.txt\"}"}}]}`, "null"),
				usage,
			},
			thinking: "**Planning** the read",
			details: `[{"type":"reasoning.summary","summary":"**Planning** the read","format":"openai-responses-v1","index":0},` +
				`{"type":"reasoning.encrypted","data":"gAAAAABpKx","id":"rs_0a1b2c","format":"openai-responses-v1","index":0}]`,
			content: "null",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &model{ID: c.model, API: apiOpenAI, Provider: "openrouter", Reasoning: true, MaxTokens: 4096,
				compat: detectCompat("openrouter", "https://openrouter.ai/api/v1")}
			msg := throughSession(t, streamedAnswer(t, m, openRouterSSE(c.events...)))
			if len(msg.Content) == 0 || msg.Content[0].Type != "thinking" {
				t.Fatalf("the answer does not start with thinking: %+v", msg.Content)
			}
			if b := msg.Content[0]; b.Thinking != c.thinking || b.Signature != c.details {
				t.Errorf("thinking %q with thinkingSignature\n%s\nwant %q with\n%s", b.Thinking, b.Signature, c.thinking, c.details)
			}
			for _, b := range msg.Content[1:] {
				if b.Type == "thinking" {
					t.Errorf("a second thinking block: %+v", msg.Content)
				}
			}
			history := []any{&userMessage{Role: "user", Content: textBlocks("Read a.txt")}, msg,
				&toolResultMessage{Role: "toolResult", ToolCallID: msg.Content[len(msg.Content)-1].ID, ToolName: "read", Content: textBlocks("hello")}}
			sent := sentAssistant(t, sentBody(t, m, history))
			if got := string(sent["reasoning_details"]); got != c.details {
				t.Errorf("the model got reasoning_details\n%s\nwant\n%s", got, c.details)
			}
			if got := string(sent["content"]); got != c.content {
				t.Errorf("content %s, want %s", got, c.content)
			}
			for _, field := range []string{"reasoning", "reasoning_content", "reasoning_text"} {
				if _, ok := sent[field]; ok {
					t.Errorf("%s sent beside reasoning_details: %s", field, sent[field])
				}
			}
			other := *m
			other.ID = "x-ai/grok-4"
			if body := sentBody(t, &other, history); strings.Contains(body, "reasoning_details") || strings.Contains(body, "a.txt read") {
				t.Errorf("another model was sent this one's reasoning:\n%s", body)
			}
		})
	}
}

// TestReasoningFieldSentBack: thinking streamed in reasoning_content,
// reasoning or reasoning_text goes back to its model in the same field,
// as pi 1.6 records the field (the block's thinkingSignature) and sends
// it; rpi sent it back only as reasoning_content, and only to DeepSeek,
// so a vLLM or llama.cpp server running gpt-oss, which streams and wants
// back reasoning, got none. The opencode-go host streams reasoning and
// wants it back as reasoning_content. A host that requiresThinkingAsText
// gets it as a text part before the answer's text.
func TestReasoningFieldSentBack(t *testing.T) {
	cases := []struct {
		provider, field, signature string
		compat                     compat
		want                       string // the sent assistant message's member
	}{
		{"local", "reasoning", "reasoning", compat{}, `"reasoning":"Plan.\nMore."`},
		{"local", "reasoning_text", "reasoning_text", compat{}, `"reasoning_text":"Plan.\nMore."`},
		{"deepseek", "reasoning_content", "reasoning_content", compat{RequiresReasoningContent: ptr(true)}, `"reasoning_content":"Plan.\nMore."`},
		{"opencode-go", "reasoning", "reasoning_content", compat{}, `"reasoning_content":"Plan.\nMore."`},
		{"local", "reasoning", "reasoning", compat{RequiresThinkingAsText: ptr(true)},
			`"content":[{"text":"Plan.\n\nMore.","type":"text"},{"text":"Done.","type":"text"}]`},
	}
	for _, c := range cases {
		m := &model{ID: "gpt-oss-120b", API: apiOpenAI, Provider: c.provider, Reasoning: true, MaxTokens: 4096, compat: c.compat}
		// Two thinking blocks, the text between them.
		msg := throughSession(t, streamedAnswer(t, m, openRouterSSE(
			`{"choices":[{"index":0,"delta":{"`+c.field+`":"Plan."}}]}`,
			`{"choices":[{"index":0,"delta":{"content":"Done."}}]}`,
			`{"choices":[{"index":0,"delta":{"`+c.field+`":"More."}}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)))
		if len(msg.Content) != 3 || msg.Content[0].Signature != c.signature || msg.Content[2].Signature != c.signature {
			t.Errorf("%s %s: blocks %+v, want thinking signed %q", c.provider, c.field, msg.Content, c.signature)
		}
		history := []any{&userMessage{Role: "user", Content: textBlocks("Plan it")}, msg, &userMessage{Role: "user", Content: textBlocks("Again")}}
		body := sentBody(t, m, history)
		if !strings.Contains(body, c.want) {
			t.Errorf("%s %s: the model was not sent %s:\n%s", c.provider, c.field, c.want, body)
		}
		if strings.Count(body, "Plan.") != 1 {
			t.Errorf("%s %s: the thinking is not sent once:\n%s", c.provider, c.field, body)
		}
	}
}

// TestHostileReasoningDetails: reasoning_details are the server's JSON,
// and none of it may break the answer, the session or the next request:
// what is not an array, or an entry pi would not take, is left out; a
// key given twice counts once, where it first stood, with its last value;
// and what the details hold counts towards the answer's bound, so a
// server that streams endless details is cut there like one that streams
// endless text.
func TestHostileReasoningDetails(t *testing.T) {
	m := &model{ID: "m", API: apiOpenAI, Provider: "p", Reasoning: true, MaxTokens: 4096}
	msg := streamedAnswer(t, m, openRouterSSE(
		`{"choices":[{"index":0,"delta":{"reasoning_details":"not a list"}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning_details":{"type":"reasoning.text","text":"an object"}}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning_details":7}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning_details":[1,null,"x",[],{},{"type":"reasoning.other","text":"t"},`+
			`{"type":"reasoning.text","text":5},{"type":"reasoning.text","text":"t","id":5},{"type":"reasoning.text","text":"t","format":null},`+
			`{"type":"reasoning.text","text":"t","index":"0"},{"type":"reasoning.text","text":"t","signature":1},{"type":"reasoning.encrypted"},`+
			`{"type":"reasoning.summary","summary":null},{"type":"reasoning.text"},{"type":"reasoning.text","text":"t","n":1e999}]}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"Still read."}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning_details":[{"type":"reasoning.encrypted","data":"first","index":0,"data":"last","x":{"b":1, "a":[1.50, "\u00e9\u2028"]}}]}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`))
	want := `[{"type":"reasoning.encrypted","data":"last","index":0,"x":{"b":1,"a":[1.5,"é\u2028"]}}]`
	var sig string
	for _, b := range msg.Content {
		if b.Type == "thinking" {
			sig = b.Signature
		}
	}
	if sig != want {
		t.Errorf("thinkingSignature\n%s\nwant\n%s\n(%+v)", sig, want, msg.Content)
	}
	if text := msg.Content[0]; text.Type != "text" || text.Text != "Still read." {
		t.Errorf("the answer's text was lost: %+v", msg.Content)
	}

	// A thinking block's signature from a session file that is not
	// details pi would take goes nowhere, and the request stays JSON.
	for _, stored := range []string{`[`, `[]`, `[{"type":"reasoning.text","text":1}]`, `[{"type":"reasoning.text","text":"t"},5]`,
		`{"type":"reasoning.text","text":"t"}`, `[{"type":"reasoning.text","text":"t"}] x`, "[" + strings.Repeat("[", 600) + strings.Repeat("]", 601)} {
		history := []any{&userMessage{Role: "user", Content: textBlocks("hi")},
			&assistantMessage{Role: "assistant", API: m.API, Provider: m.Provider, Model: m.ID, StopReason: "stop",
				Content: []contentBlock{{Type: "thinking", Thinking: "Hm.", Signature: stored}, {Type: "text", Text: "Hello."}}},
			&userMessage{Role: "user", Content: textBlocks("again")}}
		sent := sentAssistant(t, sentBody(t, m, history))
		for key := range sent {
			if strings.HasPrefix(key, "reasoning") {
				t.Errorf("signature %.40q: sent %s: %s", stored, key, sent[key])
			}
		}
	}

	// Endless details are cut at the answer's bound, as endless text is.
	big := strings.Repeat("A", 60<<10)
	_, err := hostileCall(t, context.Background(), apiOpenAI, 4096, sseHandler(func(send func(string)) {
		for range 8 {
			send(`{"choices":[{"index":0,"delta":{"reasoning_details":[{"type":"reasoning.encrypted","data":"` + big + `"}]}}]}`)
		}
		send(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
		send(`[DONE]`)
	}), nil)
	if err == nil || !strings.HasPrefix(err.Error(), "The answer was cut at 128 KiB") {
		t.Errorf("error %v, want the answer cut", err)
	}
}

// cutByDetails is the answer to 4096 tokens of a server that streams 20
// events of reasoning_details, each 100 copies of entry, which must cut
// it at its bound.
func cutByDetails(t *testing.T, entry string) *assistantMessage {
	t.Helper()
	entries := strings.Repeat(entry+",", 99) + entry
	msg, err := hostileCall(t, context.Background(), apiOpenAI, 4096, sseHandler(func(send func(string)) {
		for range 20 {
			send(`{"choices":[{"index":0,"delta":{"reasoning_details":[` + entries + `]}}]}`)
		}
		send(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
		send(`[DONE]`)
	}), nil)
	if err == nil || !strings.HasPrefix(err.Error(), "The answer was cut at 128 KiB") {
		t.Errorf("error %v, want the answer cut", err)
	}
	return msg
}

// TestReasoningDetailsCountAsBlocks: each entry of reasoning_details that
// is not joined to the one before is held as an entry of its own, which
// costs rpi a few hundred bytes whatever its JSON, so it counts towards
// the answer's bound as a block does; counted as its JSON alone, 2000
// empty encrypted entries held several times the bound of 128 KiB uncut.
func TestReasoningDetailsCountAsBlocks(t *testing.T) {
	msg := cutByDetails(t, `{"type":"reasoning.encrypted","data":""}`)
	if len(msg.Content) > 0 {
		if kept := strings.Count(msg.Content[0].Signature, "reasoning.encrypted"); kept > 4096*answerBytesPerToken/blockBytes {
			t.Errorf("%d entries kept, more than the bound holds as blocks", kept)
		}
	}
}

// TestLegacyReasoningDetailSentBack: an older pi kept an encrypted
// reasoning_details entry as a tool call's thoughtSignature; pi 1.6 sends
// such entries back as reasoning_details when no thinking block holds
// any, and so does rpi.
func TestLegacyReasoningDetailSentBack(t *testing.T) {
	m := &model{ID: "google/gemini-3-pro-preview", API: apiOpenAI, Provider: "openrouter", Reasoning: true, MaxTokens: 4096}
	entry := `{"type":"reasoning.encrypted","data":"CiQB","id":"tool_1","format":"google-gemini-v1","index":0}`
	msg := &assistantMessage{Role: "assistant", API: m.API, Provider: m.Provider, Model: m.ID, StopReason: "toolUse", Content: []contentBlock{
		{Type: "toolCall", ID: "tool_1", Name: "read", Arguments: json.RawMessage(`{"path":"a.txt"}`), Signature: entry}}}
	history := []any{&userMessage{Role: "user", Content: textBlocks("Read a.txt")}, msg,
		&toolResultMessage{Role: "toolResult", ToolCallID: "tool_1", ToolName: "read", Content: textBlocks("hello")}}
	if got := string(sentAssistant(t, sentBody(t, m, history))["reasoning_details"]); got != "["+entry+"]" {
		t.Errorf("reasoning_details %s, want [%s]", got, entry)
	}
}

// TestAnthropicUnsignedThinkingSentBack: thinking of the model called that
// has no signature (an answer cut before its signature came, a host that
// signs nothing) was left out of what the model was sent; pi 1.6 sends
// it as a text block, or, to a model whose compat allowEmptySignature,
// as thinking with an empty signature. Another model still gets none.
func TestAnthropicUnsignedThinkingSentBack(t *testing.T) {
	m := &model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic", Reasoning: true, MaxTokens: 4096}
	history := func(id string) []any {
		return []any{&userMessage{Role: "user", Content: textBlocks("hi")},
			&assistantMessage{Role: "assistant", API: m.API, Provider: m.Provider, Model: id, StopReason: "stop", Content: []contentBlock{
				{Type: "thinking", Thinking: "Unsigned plan."}, {Type: "thinking", Thinking: " ", Signature: " "}, {Type: "text", Text: "Hello."}}},
			&userMessage{Role: "user", Content: textBlocks("again")}}
	}
	content := func(body string) string {
		var req struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		json.Unmarshal([]byte(body), &req)
		return string(req.Messages[1].Content)
	}
	if got, want := content(sentBody(t, m, history(m.ID))), `[{"text":"Unsigned plan.","type":"text"},{"text":"Hello.","type":"text"}]`; got != want {
		t.Errorf("sent %s, want %s", got, want)
	}
	empty := *m
	empty.compat.AllowEmptySignature = ptr(true)
	if got, want := content(sentBody(t, &empty, history(m.ID))), `[{"signature":"","thinking":"Unsigned plan.","type":"thinking"},{"text":"Hello.","type":"text"}]`; got != want {
		t.Errorf("allowEmptySignature: sent %s, want %s", got, want)
	}
	if got := content(sentBody(t, m, history("claude-opus-4-5"))); strings.Contains(got, "Unsigned") {
		t.Errorf("another model was sent this one's thinking: %s", got)
	}
}

// TestPiSessionReasoningDetailsSentBack: an answer pi 1.6 wrote to a
// session file, its reasoning_details kept as the thinking block's
// thinkingSignature, goes back to its model from rpi with those details
// as pi wrote them, and the line is written again byte for byte.
func TestPiSessionReasoningDetailsSentBack(t *testing.T) {
	details := `[{"type":"reasoning.text","text":"Plan.\n\"a\"","format":"google-gemini-v1","index":0},` +
		`{"type":"reasoning.encrypted","data":"CiQB","id":"tool_1","format":"google-gemini-v1","index":0}]`
	line := []byte(`{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-12-06T10:00:00.000Z","message":{"role":"assistant","content":[` +
		`{"type":"thinking","thinking":"Plan.","thinkingSignature":` + string(appendJSONString(nil, details)) + `},` +
		`{"type":"toolCall","id":"tool_1","name":"read","arguments":{"path":"a.txt"}}],"api":"openai-completions","provider":"openrouter",` +
		`"model":"google/gemini-3-pro-preview","usage":{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":15,` +
		`"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"toolUse","timestamp":1773614422000}}`)
	var d jsonIn
	e, err := decodeEntry(line, &d)
	if err != nil {
		t.Fatal(err)
	}
	e.keepLine(line, &d)
	if again, _ := e.appendMessageLine(nil); !bytes.Equal(again, line) {
		t.Errorf("pi's line is not written again as it was:\n%s\n%s", line, again)
	}
	m := &model{ID: "google/gemini-3-pro-preview", API: apiOpenAI, Provider: "openrouter", Reasoning: true, MaxTokens: 4096}
	history := []any{&userMessage{Role: "user", Content: textBlocks("Read a.txt")}, e.msg,
		&toolResultMessage{Role: "toolResult", ToolCallID: "tool_1", ToolName: "read", Content: textBlocks("hello")}}
	if got := string(sentAssistant(t, sentBody(t, m, history))["reasoning_details"]); got != details {
		t.Errorf("reasoning_details\n%s\nwant\n%s", got, details)
	}
}

// TestLongReasoningDetailsNotCut: a long reasoning streamed as OpenRouter
// streams it, a few characters a chunk, each chunk both in reasoning and
// as a reasoning.text piece of reasoning_details, is well within the
// answer's bound as rpi holds it (the thinking, and the details' one
// joined text); each piece counted as its whole JSON — type, format and
// index again every chunk — cut such an answer at a third of its bound.
func TestLongReasoningDetailsNotCut(t *testing.T) {
	const pieces = 2000 // 8000 bytes of thinking, kept twice: far below 128 KiB
	msg, err := hostileCall(t, context.Background(), apiOpenAI, 4096, sseHandler(func(send func(string)) {
		for range pieces {
			send(`{"choices":[{"index":0,"delta":{"reasoning":"abc ","reasoning_details":[{"type":"reasoning.text","text":"abc ","format":"anthropic-claude-v1","index":0}]}}]}`)
		}
		send(`{"choices":[{"index":0,"delta":{"reasoning_details":[{"type":"reasoning.text","signature":"EqIF","format":"anthropic-claude-v1","index":0}]}}]}`)
		send(`{"choices":[{"index":0,"delta":{"content":"Done."},"finish_reason":"stop"}]}`)
		send(`[DONE]`)
	}), nil)
	if err != nil {
		t.Fatalf("the answer was cut: %v", err)
	}
	want := `[{"type":"reasoning.text","text":"` + strings.Repeat("abc ", pieces) + `","format":"anthropic-claude-v1","index":0,"signature":"EqIF"}]`
	if len(msg.Content) != 2 || msg.Content[0].Signature != want {
		t.Errorf("blocks %.300v", msg.Content)
	}
}

// TestReasoningDetailMembersBounded: an entry is read member by member, a
// key given twice looked up among those before it, so an entry of n
// members cost n² steps: one event of a few hundred thousand made-up
// members held rpi for minutes, and a session file's thinkingSignature
// holding one did so at every request of the session. No server sends an
// entry of more than a handful of members; one of more than
// maxDetailMembers is left out, from a stream and from a session file.
func TestReasoningDetailMembersBounded(t *testing.T) {
	entry := func(members int) string {
		var b strings.Builder
		b.WriteString(`{"type":"reasoning.encrypted","data":"x"`)
		for i := 2; i < members; i++ {
			fmt.Fprintf(&b, `,"k%d":0`, i)
		}
		return b.String() + "}"
	}
	if _, _, ok := parseReasoningDetail([]byte(entry(maxDetailMembers))); !ok {
		t.Errorf("an entry of %d members is left out", maxDetailMembers)
	}
	m := &model{ID: "m", API: apiOpenAI, Provider: "p", Reasoning: true, MaxTokens: 4096}
	msg := streamedAnswer(t, m, openRouterSSE(
		`{"choices":[{"index":0,"delta":{"reasoning_details":[`+entry(maxDetailMembers+1)+`,{"type":"reasoning.encrypted","data":"kept"}]}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"Done."},"finish_reason":"stop"}]}`))
	if want := `[{"type":"reasoning.encrypted","data":"kept"}]`; len(msg.Content) == 0 || msg.Content[0].Signature != want {
		t.Errorf("blocks %.300v, want the signature %s", msg.Content, want)
	}
	if storedReasoningDetails("["+entry(maxDetailMembers+1)+"]") != nil {
		t.Errorf("a stored entry of %d members is sent back", maxDetailMembers+1)
	}
}

// FuzzReasoningDetails: whatever a server streams as reasoning_details,
// what rpi keeps of it (the thinkingSignature) is JSON in valid UTF-8, and
// is what a session file gives back and what the model is sent again:
// read again as stored details, it is the same bytes.
func FuzzReasoningDetails(f *testing.F) {
	for _, seed := range []string{
		`[{"type":"reasoning.text","text":"a","format":"anthropic-claude-v1","index":0},{"type":"reasoning.text","signature":"s"}]`,
		`[{"type":"reasoning.summary","summary":"x","id":null},{"type":"reasoning.summary","summary":"y","id":"r"}]`,
		`[{"type":"reasoning.encrypted","data":"d","x":{"b":1,"b":[1.50,"\u00e9\ud800"]},"data":"e"}]`,
		`[{"type":"reasoning.text","text":"t","t\u0065xt":"u","signature":""},{"type":"reasoning.text","text":"v","signature":"w"}]`,
		"[{\"type\":\"reasoning.encrypted\",\"data\":\"d\",\"a\xff\":1,\"a\xfe\":2}]",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var ds reasoningDetails
		eachElement(data, func(elem []byte) {
			if d, _, ok := parseReasoningDetail(elem); ok {
				ds.add(d)
			}
		})
		if ds == nil {
			return
		}
		kept := ds.appendJSON(nil)
		if !json.Valid(kept) || !utf8.Valid(kept) {
			t.Fatalf("%q kept as %q", data, kept)
		}
		if again := storedReasoningDetails(string(kept)); !bytes.Equal(again, kept) {
			t.Fatalf("%q kept as\n%s\nread again as\n%s", data, kept, again)
		}
	})
}

// TestReasoningDetailMembersCount: an entry is held member by member, each
// member a struct and its key and value apart, several times what its few
// bytes of JSON count; entries of 64 tiny members each held nearly six
// times the answer's bound uncut. Each member of an entry of its own now
// counts as what holding it costs, so the members' structs alone fit the
// bound.
func TestReasoningDetailMembersCount(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"type":"reasoning.encrypted","data":""`)
	for i := 2; i < maxDetailMembers; i++ {
		fmt.Fprintf(&b, `,"%c%c":0`, 'a'+i%26, 'a'+i/26)
	}
	msg := cutByDetails(t, b.String()+"}")
	if len(msg.Content) > 0 {
		members := strings.Count(msg.Content[0].Signature, `":`)
		if held := members * int(unsafe.Sizeof(detailMember{})); held > 4096*answerBytesPerToken {
			t.Errorf("%d members kept, %d bytes of structs alone, more than the bound", members, held)
		}
	}
}
