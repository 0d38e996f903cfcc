package main

// What rpi sends a model server: each test runs a real local HTTP server
// that keeps the request and refuses it, and calls it through callModel,
// as the agent does, with a conversation a client, a project or another
// model made.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// sentBody is the body of the request callModel makes of history for m
// (its BaseURL set to a local server's), as the server received it.
func sentBody(t *testing.T, m *model, history []any) string {
	t.Helper()
	c := *m
	c.MaxTokens = max(c.MaxTokens, 1000)
	return sentBodyAt(t, &c, history, "medium")
}

// readTurn is a prompt, m's call of read with the id given, and its result.
func readTurn(m *model, id string) []any {
	return []any{
		&userMessage{Role: "user", Content: textBlocks("Read a.txt")},
		&assistantMessage{Role: "assistant", API: m.API, Provider: m.Provider, Model: m.ID, StopReason: "toolUse", Content: []contentBlock{
			{Type: "toolCall", ID: id, Name: "read", Arguments: json.RawMessage(`{"path":"a.txt"}`)}}},
		&toolResultMessage{Role: "toolResult", ToolCallID: id, ToolName: "read", Content: textBlocks("hello")},
	}
}

// sentBodyAt is sentBody at a thinking level, with m's maxTokens as it is.
func sentBodyAt(t *testing.T, m *model, history []any, thinking string) string {
	t.Helper()
	return sentRequest(t, m, streamRequest{messages: history, thinking: thinking})
}

// sentBodySystem is sentBody with a system prompt.
func sentBodySystem(t *testing.T, m *model, history []any, system string) string {
	t.Helper()
	c := *m
	c.MaxTokens = max(c.MaxTokens, 1000)
	return sentRequest(t, &c, streamRequest{messages: history, thinking: "medium", system: system})
}

// sentRequest is the body of req to m, as a local server received it.
func sentRequest(t *testing.T, m *model, req streamRequest) string {
	t.Helper()
	body, _ := sentWithHeaders(t, m, req)
	return body
}

// membersNamed are the values of every member called key in a JSON text.
func membersNamed(text, key string) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == key {
					out = append(out, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var v any
	json.Unmarshal([]byte(text), &v)
	walk(v)
	return out
}

// TestForeignToolCallIDs: a conversation moved to Anthropic, Responses or
// Mistral (or OpenAI's Chat Completions, which refuses an id of more than
// 40 bytes) after set_model holds the tool call ids other servers made —
// Kimi's "functions.read:0", an id a local server left empty, Anthropic's
// "toolu_…" — and each went back as it was: Anthropic refuses a tool_use
// id outside ^[a-zA-Z0-9_-]+$ and Mistral one that is not nine letters and
// digits, so every later request of the session failed with a 400. Now
// each id goes in the form the API takes, the same for a call and its
// result, and two ids stay two.
func TestForeignToolCallIDs(t *testing.T) {
	ids := []string{"functions.read:0", "", "toolu_01A09q90qw90lq917835lq9", "call_1|fc_1", strings.Repeat("x", 80), "functions.read.0", strings.Repeat("x", 81)}
	var history []any
	history = append(history, &userMessage{Role: "user", Content: textBlocks("Read a.txt")})
	for i, id := range ids {
		history = append(history,
			&assistantMessage{Role: "assistant", API: apiOpenAI, Provider: "moonshotai", Model: "kimi", StopReason: "toolUse", Content: []contentBlock{
				{Type: "toolCall", ID: id, Name: "read", Arguments: json.RawMessage(`{"path":"a.txt"}`)}}},
			&toolResultMessage{Role: "toolResult", ToolCallID: id, ToolName: "read", Content: textBlocks("hello " + string(rune('a'+i)))})
	}
	for _, c := range []struct {
		m               *model
		callKey, resKey string
		valid           *regexp.Regexp
	}{
		{&model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic"}, "id", "tool_use_id", regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)},
		{&model{ID: "gpt-5.1", API: apiResponses, Provider: "openai"}, "call_id", "call_id", regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)},
		{&model{ID: "devstral-2512", API: apiOpenAI, Provider: "mistral", compat: detectCompat("mistral", "https://api.mistral.ai/v1")},
			"id", "tool_call_id", regexp.MustCompile(`^[a-zA-Z0-9]{9}$`)},
		{&model{ID: "gpt-4.1", API: apiOpenAI, Provider: "openai"}, "id", "tool_call_id", regexp.MustCompile(`^(functions\.read[.:]0|[a-zA-Z0-9_-]{0,40})$`)},
	} {
		body := sentBody(t, c.m, history)
		var calls, results []string
		if c.callKey == c.resKey { // Responses: calls and results are told apart by their type
			var req struct {
				Input []map[string]any `json:"input"`
			}
			json.Unmarshal([]byte(body), &req)
			for _, item := range req.Input {
				id, _ := item["call_id"].(string)
				switch item["type"] {
				case "function_call":
					calls = append(calls, id)
				case "function_call_output":
					results = append(results, id)
				}
			}
		} else {
			for _, id := range membersNamed(body, c.callKey) {
				if id != "msg_rpi_1" {
					calls = append(calls, id)
				}
			}
			results = membersNamed(body, c.resKey)
		}
		if len(calls) != len(ids) || len(results) != len(ids) {
			t.Fatalf("%s: %d calls and %d results, want %d of each:\n%s", c.m.API, len(calls), len(results), len(ids), body)
		}
		seen := map[string]bool{}
		for _, id := range calls {
			if !c.valid.MatchString(id) {
				t.Errorf("%s/%s: tool call id %q is not of the form the API takes", c.m.Provider, c.m.ID, id)
			}
			if seen[id] {
				t.Errorf("%s/%s: two calls share the id %q", c.m.Provider, c.m.ID, id)
			}
			seen[id] = true
			if !strings.Contains(strings.Join(results, "\x00")+"\x00", id+"\x00") {
				t.Errorf("%s/%s: no result has the id %q of its call (results: %q)", c.m.Provider, c.m.ID, id, results)
			}
		}
	}
	// An id already of the form goes as it came: the same model's ids,
	// which it may compare with what it said, do not change.
	for _, c := range []struct {
		m    *model
		want string
	}{
		{&model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic"}, `"id":"toolu_01A09q90qw90lq917835lq9"`},
		{&model{ID: "gpt-5.1", API: apiResponses, Provider: "openai"}, `"call_id":"call_1"`},
		{&model{ID: "devstral-2512", API: apiOpenAI, Provider: "mistral", compat: detectCompat("mistral", "https://api.mistral.ai/v1")}, `"id":"Ab3dE6gH9"`},
		{&model{ID: "gpt-4.1", API: apiOpenAI, Provider: "openai"}, `"id":"toolu_01A09q90qw90lq917835lq9"`},
	} {
		own := []any{history[0],
			&assistantMessage{Role: "assistant", API: c.m.API, Provider: c.m.Provider, Model: c.m.ID, StopReason: "toolUse", Content: []contentBlock{
				{Type: "toolCall", ID: "toolu_01A09q90qw90lq917835lq9", Name: "read", Arguments: json.RawMessage(`{}`)},
				{Type: "toolCall", ID: "call_1|fc_1", Name: "read", Arguments: json.RawMessage(`{}`)},
				{Type: "toolCall", ID: "Ab3dE6gH9", Name: "read", Arguments: json.RawMessage(`{}`)}}}}
		if body := sentBody(t, c.m, own); !strings.Contains(body, c.want) {
			t.Errorf("%s: request lacks %s:\n%s", c.m.Provider, c.want, body)
		}
	}
}

// TestToolResultImagesSent: an image a tool gives (read of a PNG, an MCP
// tool's image) reaches the model. Every API was sent the result's text
// alone — "Read image file [image/png]", or "(see attached image)" with
// nothing attached — so the model never saw what read advertises it
// returns. Anthropic gets the image in its tool_result; the other APIs,
// whose tool results hold text, in a user message after the results (pi's
// way), which Chat Completions must not have between two tool messages.
func TestToolResultImagesSent(t *testing.T) {
	endToEnd(t)
	png := "\x89PNG\r\n\x1a\n-tool-image-bytes"
	data := base64.StdEncoding.EncodeToString([]byte(png))
	script := `{"toolCalls":[{"id":"call_1","name":"read","args":["{\"path\":\"pic.png\"}"]},{"id":"call_2","name":"read","args":["{\"path\":\"b.txt\"}"]}]}
{"text":["seen"]}`
	want := map[string][]string{
		apiOpenAI: {`{"content":"b\n","role":"tool","tool_call_id":"call_2"},{"content":[{"text":"Attached image(s) from tool result:","type":"text"},` +
			`{"image_url":{"url":"data:image/png;base64,` + data + `"},"type":"image_url"}],"role":"user"}`},
		apiResponses: {`"type":"function_call_output"},{"content":[{"text":"Attached image(s) from tool result:","type":"input_text"},` +
			`{"detail":"auto","image_url":"data:image/png;base64,` + data + `","type":"input_image"}],"role":"user"}`},
		apiAnthropic: {`{"content":[{"text":"Read image file [image/png]","type":"text"},{"source":{"data":"` + data +
			`","media_type":"image/png","type":"base64"},"type":"image"}],"is_error":false,"tool_use_id":"call_1","type":"tool_result"}`},
		apiGoogle: {`{"parts":[{"text":"Attached image(s) from tool result:"},{"inlineData":{"data":"` + data + `","mimeType":"image/png"}}],"role":"user"}`},
	}
	for _, api := range []string{apiOpenAI, apiResponses, apiAnthropic, apiGoogle} {
		t.Run(api, func(t *testing.T) {
			ps, fm, cwd := agentSession(t, api, script)
			os.WriteFile(filepath.Join(cwd, "pic.png"), []byte(png), 0o644)
			os.WriteFile(filepath.Join(cwd, "b.txt"), []byte("b\n"), 0o644)
			ps.send(`{"id":"p","type":"prompt","message":"Look at pic.png"}`)
			ps.waitFor(`"agent_settled"`)
			ps.close()
			body, _ := json.Marshal(fm.lastRequest())
			for _, w := range want[api] {
				if !strings.Contains(string(body), w) {
					t.Errorf("request lacks %s:\n%.4000s", w, body)
				}
			}
		})
	}
}

// TestImagesAModelCannotTake: an image that cannot go to the model is a
// note in its place, not a silent loss (or, for Anthropic, a request
// refused): a model without "image" in its input is told an image was
// there, and Anthropic, which refuses an image of more than 5 MiB of base64
// (and with it every later request of the session, since the image stays
// in the conversation), is sent the note instead.
func TestImagesAModelCannotTake(t *testing.T) {
	small := contentBlock{Type: "image", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nsmall"))}
	big := contentBlock{Type: "image", MimeType: "image/png", Data: strings.Repeat("A", 6<<20)}
	history := []any{
		&userMessage{Role: "user", Content: []contentBlock{{Type: "text", Text: "Look"}, big}},
		&assistantMessage{Role: "assistant", API: apiAnthropic, Provider: "anthropic", Model: "claude-sonnet-4-5", StopReason: "toolUse", Content: []contentBlock{
			{Type: "toolCall", ID: "call_1", Name: "read", Arguments: json.RawMessage(`{"path":"a.png"}`)}}},
		&toolResultMessage{Role: "toolResult", ToolCallID: "call_1", ToolName: "read", Content: []contentBlock{big, small}},
	}
	anthropic := &model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic", imageable: true}
	body := sentBody(t, anthropic, history)
	if strings.Contains(body, big.Data) {
		t.Errorf("Anthropic was sent an image of %d bytes of base64", len(big.Data))
	}
	for _, w := range []string{`"[image/png image omitted: its 6 MiB of base64 is more than the 5 MiB Anthropic takes]"`, small.Data} {
		if !strings.Contains(body, w) {
			t.Errorf("Anthropic's request lacks %s:\n%.2000s", w, body)
		}
	}
	for _, api := range []string{apiOpenAI, apiResponses, apiAnthropic, apiGoogle} {
		textOnly := &model{ID: "m", API: api, Provider: "p"}
		body := sentBody(t, textOnly, history)
		if strings.Contains(body, small.Data) || strings.Contains(body, "Attached image") {
			t.Errorf("%s: a model without images was sent one:\n%.2000s", api, body)
		}
		if n := strings.Count(body, "image omitted: model p/m does not take images"); n != 3 {
			t.Errorf("%s: %d notes of an image left out, want 3:\n%.2000s", api, n, body)
		}
	}
}

// TestGemini3ForeignCalls: Gemini 3 refuses (400) a request whose turn
// holds a function call without a thought signature, and a call another
// model made has none it may be sent: a conversation moved to Gemini 3
// in the middle of a tool loop (set_model while the agent runs) failed at
// its next request. Such a call now carries Google's documented skip
// value, as pi sends it; Gemini 2.5, which does not check, gets none. A
// tool result's image goes to Gemini 3 in the function response itself.
func TestGemini3ForeignCalls(t *testing.T) {
	png := contentBlock{Type: "image", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nshot"))}
	history := []any{
		&userMessage{Role: "user", Content: textBlocks("Look at a.png")},
		&assistantMessage{Role: "assistant", API: apiAnthropic, Provider: "anthropic", Model: "claude-sonnet-4-5", StopReason: "toolUse", Content: []contentBlock{
			{Type: "thinking", Thinking: "Read it.", Signature: "RXVhbnRocm9waWMtc2lnbmF0dXJl"},
			{Type: "toolCall", ID: "toolu_1", Name: "read", Arguments: json.RawMessage(`{"path":"a.png"}`)}}},
		&toolResultMessage{Role: "toolResult", ToolCallID: "toolu_1", ToolName: "read", Content: []contentBlock{{Type: "text", Text: "Read image file [image/png]"}, png}},
	}
	gemini3 := &model{ID: "gemini-3-flash-preview", API: apiGoogle, Provider: "google", Reasoning: true, imageable: true}
	body := sentBody(t, gemini3, history)
	for _, w := range []string{
		`{"functionCall":{"args":{"path":"a.png"},"id":"toolu_1","name":"read"},"thoughtSignature":"skip_thought_signature_validator"}`,
		`{"functionResponse":{"id":"toolu_1","name":"read","parts":[{"inlineData":{"data":"` + png.Data + `","mimeType":"image/png"}}],"response":{"output":"Read image file [image/png]"}}}`,
	} {
		if !strings.Contains(body, w) {
			t.Errorf("Gemini 3's request lacks %s:\n%s", w, body)
		}
	}
	if strings.Contains(body, "RXVhbnRocm9waWMtc2lnbmF0dXJl") || strings.Contains(body, "Attached image") {
		t.Errorf("Gemini 3's request has another model's signature, or the image twice:\n%s", body)
	}
	gemini25 := &model{ID: "gemini-2.5-flash", API: apiGoogle, Provider: "google", Reasoning: true, imageable: true}
	body = sentBody(t, gemini25, history)
	if strings.Contains(body, "thoughtSignature") || !strings.Contains(body, `{"text":"Attached image(s) from tool result:"},{"inlineData"`) {
		t.Errorf("Gemini 2.5's request:\n%s", body)
	}
}

// TestAnthropicMaxTokensWithinTheModel: max_tokens is never more than the
// model's maxTokens. With thinking on it was raised to the budget and
// 4096 more (14336 at medium, 24576 at high), so a models.json model
// whose maxTokens is what its server takes (8192, say) was refused at every
// request while it thought. The budget now fits within maxTokens, leaving
// 1024 for the answer (pi's rule); a model with too little room for the
// least budget Anthropic takes (1024) is asked without thinking. The
// budgets are pi 1.6's: 1024, 2048, 8192 and 16384 from minimal to high,
// and high's for xhigh and max (rpi asked 4096, 10240, 20480 and 32000,
// and nothing at max).
func TestAnthropicMaxTokensWithinTheModel(t *testing.T) {
	history := []any{&userMessage{Role: "user", Content: textBlocks("Hi")}}
	for _, c := range []struct {
		maxTokens int
		thinking  string
		want      []string
	}{
		{8192, "medium", []string{`"max_tokens":8192`, `"thinking":{"budget_tokens":7168,"display":"summarized","type":"enabled"}`}},
		{8192, "minimal", []string{`"max_tokens":8192`, `"thinking":{"budget_tokens":1024,"display":"summarized","type":"enabled"}`}},
		{64000, "high", []string{`"max_tokens":64000`, `"thinking":{"budget_tokens":16384,"display":"summarized","type":"enabled"}`}},
		{64000, "low", []string{`"max_tokens":64000`, `"thinking":{"budget_tokens":2048,"display":"summarized","type":"enabled"}`}},
		{64000, "medium", []string{`"max_tokens":64000`, `"thinking":{"budget_tokens":8192,"display":"summarized","type":"enabled"}`}},
		{64000, "xhigh", []string{`"max_tokens":64000`, `"thinking":{"budget_tokens":16384,"display":"summarized","type":"enabled"}`}},
		{64000, "max", []string{`"max_tokens":64000`, `"thinking":{"budget_tokens":16384,"display":"summarized","type":"enabled"}`}},
		{1500, "high", []string{`"max_tokens":1500`}},
	} {
		m := &model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic", Reasoning: true, MaxTokens: c.maxTokens}
		srvBody := sentBodyAt(t, m, history, c.thinking)
		for _, w := range c.want {
			if !strings.Contains(srvBody, w) {
				t.Errorf("maxTokens %d, %s: request lacks %s:\n%s", c.maxTokens, c.thinking, w, srvBody)
			}
		}
		if c.maxTokens == 1500 && strings.Contains(srvBody, `"thinking"`) {
			t.Errorf("maxTokens 1500: asked to think with less room than Anthropic's least budget:\n%s", srvBody)
		}
	}
}

// TestLoneSurrogatesNotSent: a tool call's arguments go back to Anthropic
// and Gemini as the JSON the model wrote, and a model (a prompt-injected
// one, on purpose) may write the escape of a lone surrogate there, which
// Anthropic's parser refuses ("no low surrogate in string"): since the
// call stays in the conversation, every later request of the session was
// refused. Bytes that are not UTF-8 (a session file's) went as they were
// too. Both are now U+FFFD in what rpi sends; a pair stays a pair.
func TestLoneSurrogatesNotSent(t *testing.T) {
	sse := strings.Join([]string{
		`data: {"type":"message_start","message":{"usage":{"input_tokens":1}}}`,
		`data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"read"}}`,
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"a\\ud800b \\udc00 \\ud83d\\ude00 \\\\ud800\"}"}}`,
		`data: {"type":"content_block_stop","index":0}`,
		`data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}`,
		`data: {"type":"message_stop"}`, ""}, "\n\n")
	answer, _, err := readStream(t, apiAnthropic, sse)
	if err != nil {
		t.Fatal(err)
	}
	answer.Role, answer.API, answer.Provider, answer.Model, answer.StopReason = "assistant", apiAnthropic, "anthropic", "claude-sonnet-4-5", "toolUse"
	history := []any{&userMessage{Role: "user", Content: textBlocks("Read it")}, answer,
		&assistantMessage{Role: "assistant", API: apiOpenAI, Provider: "p", Model: "m", StopReason: "toolUse", Content: []contentBlock{
			{Type: "toolCall", ID: "call_2", Name: "read", Arguments: json.RawMessage("{\"path\":\"x\xffy\"}")}}},
	}
	for _, m := range []*model{
		{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic"},
		{ID: "gemini-2.5-flash", API: apiGoogle, Provider: "google"},
	} {
		body := sentBody(t, m, history)
		if !utf8.ValidString(body) {
			t.Errorf("%s: the request is not UTF-8", m.API)
		}
		for _, w := range []string{`"path":"a\ufffdb \ufffd \ud83d\ude00 \\ud800"`, `"path":"x` + "\uFFFD" + `y"`} {
			if !strings.Contains(body, w) {
				t.Errorf("%s: request lacks %s:\n%s", m.API, w, body)
			}
		}
	}
}

// TestNoBlankAnthropicText: Anthropic refuses a text block of white space
// alone ("text content blocks must contain non-whitespace text"), and one
// went whenever a turn held one: a prompt of a blank message with an
// image, an answer whose text was "\n\n" before its tool call (another
// model's, or Claude's own). Since the turn stays in the conversation,
// every later request was refused. Such blocks are now left out.
func TestNoBlankAnthropicText(t *testing.T) {
	png := contentBlock{Type: "image", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nx"))}
	history := []any{
		&userMessage{Role: "user", Content: []contentBlock{{Type: "text", Text: " \n"}, png}},
		&assistantMessage{Role: "assistant", API: apiOpenAI, Provider: "p", Model: "m", StopReason: "toolUse", Content: []contentBlock{
			{Type: "text", Text: "\n\n"}, {Type: "toolCall", ID: "call_1", Name: "read", Arguments: json.RawMessage(`{"path":"a.png"}`)}}},
		&toolResultMessage{Role: "toolResult", ToolCallID: "call_1", ToolName: "read", Content: []contentBlock{{Type: "text", Text: "\t"}, png}},
	}
	m := &model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic", imageable: true}
	body := sentBody(t, m, history)
	var req struct {
		Messages []struct {
			Content []struct {
				Type    string          `json:"type"`
				Text    *string         `json:"text"`
				Content json.RawMessage `json:"content"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	check := func(typ string, text *string) {
		if typ == "text" && (text == nil || strings.TrimSpace(*text) == "") {
			t.Errorf("a blank text block went to Anthropic:\n%s", body)
		}
	}
	for _, msg := range req.Messages {
		for _, b := range msg.Content {
			check(b.Type, b.Text)
			var inner []struct {
				Type string  `json:"type"`
				Text *string `json:"text"`
			}
			json.Unmarshal(b.Content, &inner)
			for _, c := range inner {
				check(c.Type, c.Text)
			}
		}
	}
	if !strings.Contains(body, `"tool_use_id":"call_1"`) || strings.Count(body, png.Data) != 2 {
		t.Errorf("the request lost more than the blank text:\n%s", body)
	}
}

// TestNoBlankChatCompletionsText: a text block of white space alone (the
// "\n\n" a model writes before its tool calls) went back to a Chat
// Completions model as the answer's content, and an answer of nothing
// else as an assistant message of it; pi 1.6 sends no such text, and an
// answer left with neither text nor tool calls not at all.
func TestNoBlankChatCompletionsText(t *testing.T) {
	m := &model{ID: "gpt-4.1", API: apiOpenAI, Provider: "openai"}
	history := []any{
		&userMessage{Role: "user", Content: textBlocks("Read a.txt")},
		&assistantMessage{Role: "assistant", API: m.API, Provider: m.Provider, Model: m.ID, StopReason: "toolUse", Content: []contentBlock{
			{Type: "text", Text: "\n\n"}, {Type: "toolCall", ID: "call_1", Name: "read", Arguments: json.RawMessage(`{"path":"a.txt"}`)}, {Type: "text", Text: " "}}},
		&toolResultMessage{Role: "toolResult", ToolCallID: "call_1", ToolName: "read", Content: textBlocks("hello")},
		&assistantMessage{Role: "assistant", API: m.API, Provider: m.Provider, Model: m.ID, StopReason: "stop", Content: []contentBlock{{Type: "text", Text: "\t"}}},
		&userMessage{Role: "user", Content: textBlocks("again")},
	}
	body := sentBody(t, m, history)
	if !strings.Contains(body, `{"content":null,"role":"assistant","tool_calls":`) || strings.Count(body, `"role":"assistant"`) != 1 {
		t.Errorf("white space went as an answer's text:\n%s", body)
	}
}

// TestAnthropicPromptCaching: Anthropic caches a prompt only where the
// request marks it (cache_control), and rpi marked nothing: every turn of
// a session paid its whole conversation at the full input price, though
// the catalog prices cache reads at a tenth of it. As pi does, the system
// prompt and the last user turn's last block are now marked.
func TestAnthropicPromptCaching(t *testing.T) {
	m := &model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic"}
	history := readTurn(m, "toolu_1")
	body := sentBodySystem(t, m, history, "You are a coding agent.")
	for _, w := range []string{
		`"system":[{"cache_control":{"type":"ephemeral"},"text":"You are a coding agent.","type":"text"}]`,
		`{"cache_control":{"type":"ephemeral"},"content":"hello","is_error":false,"tool_use_id":"toolu_1","type":"tool_result"}`,
	} {
		if !strings.Contains(body, w) {
			t.Errorf("request lacks %s:\n%s", w, body)
		}
	}
	if n := strings.Count(body, "cache_control"); n != 2 {
		t.Errorf("%d cache breakpoints, want 2:\n%s", n, body)
	}
}

// TestMistralUserAfterToolResults: Mistral refuses a user turn right after
// tool results ("Unexpected role 'user' after role 'tool'"), and a
// conversation has one whenever the user steers while tools run, or
// prompts again after aborting them: every later request of the session
// was refused. An assistant turn now comes between, for Mistral's host
// only.
func TestMistralUserAfterToolResults(t *testing.T) {
	mistral := &model{ID: "devstral-2512", API: apiOpenAI, Provider: "mistral", compat: detectCompat("mistral", "https://api.mistral.ai/v1")}
	history := append(readTurn(mistral, "Ab3dE6gH9"), &userMessage{Role: "user", Content: textBlocks("Stop, read b.txt instead")})
	roles := func(body string) string {
		var req struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		json.Unmarshal([]byte(body), &req)
		var out []string
		for _, m := range req.Messages {
			out = append(out, m.Role)
		}
		return strings.Join(out, " ")
	}
	if got, want := roles(sentBody(t, mistral, history)), "user assistant tool assistant user"; got != want {
		t.Errorf("Mistral's roles: %s, want %s", got, want)
	}
	other := &model{ID: "llama", API: apiOpenAI, Provider: "groq", compat: detectCompat("groq", "https://api.groq.com/openai/v1")}
	if got, want := roles(sentBody(t, other, history)), "user assistant tool user"; got != want {
		t.Errorf("another host's roles: %s, want %s", got, want)
	}
}

// TestModelServerSilence: a model server that sends nothing for
// httpIdleTimeoutMs — no headers at all, or nothing more of a stream it
// began — fails the call as a connection error, which is retried, as pi
// 1.6's undici limits do: before, a server that accepted the connection
// and then said nothing held the turn until the user aborted it. With 0
// there is no limit.
func TestModelServerSilence(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"silent":true}
{"text":["half","never"],"holdAt":2}
{"text":["done"]}`, e.agentDir)
	os.WriteFile(filepath.Join(e.agentDir, "settings.json"), []byte(`{"retry":{"baseDelayMs":1},"httpIdleTimeoutMs":400}`), 0o644)
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir(), "--no-session"})
	ps.send(`{"id":"p","type":"prompt","message":"hi"}`)
	ps.waitFor(`"type":"agent_settled"`)
	ps.close()
	out := string(ps.out.bytes())
	const silence = `"errorMessage":"Connection error: the model server sent nothing for 400ms (settings.json httpIdleTimeoutMs)"`
	retries := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, `"type":"auto_retry_start"`) {
			retries++
			if !strings.Contains(line, silence) {
				t.Errorf("a retry after another failure: %s", line)
			}
		}
	}
	if retries != 2 || !strings.Contains(out, `"text":"done"`) {
		t.Errorf("%d retries; want two, each after the server's silence, then the answer:\n%s", retries, out)
	}
	fm.mu.Lock()
	defer fm.mu.Unlock()
	if len(fm.requests) != 3 {
		t.Errorf("%d requests, want 3", len(fm.requests))
	}
	set := &settings{httpIdle: defaultHTTPIdle}
	path := filepath.Join(t.TempDir(), "settings.json")
	os.WriteFile(path, []byte(`{"httpIdleTimeoutMs":0}`), 0o644)
	if set.applySettingsFile(path); set.httpIdle != 0 {
		t.Errorf("httpIdleTimeoutMs 0 leaves a limit of %v, want none", set.httpIdle)
	}
}

// TestIdleLimitCountsFromTheLastByte: the silence limit runs from the last
// byte read, not from when its timer was set: a timer that comes early sets
// itself again for what is left, and a stopped watch cancels nothing. On a
// fake clock, so no real time passes.
func TestIdleLimitCountsFromTheLastByte(t *testing.T) {
	c := newFakeClock()
	ended := make(chan struct{})
	w := watchIdle(time.Second, c, func() { close(ended) })
	body := w.reader(io.NopCloser(strings.NewReader("x")))
	c.advance(600 * time.Millisecond)
	if _, err := body.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	c.advance(400 * time.Millisecond) // the first timer: 0.4 s since the byte
	for deadline := time.Now().Add(10 * time.Second); !c.dueWithin(600 * time.Millisecond); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the timer did not set itself again for the rest of the limit")
		}
	}
	if c.dueWithin(599*time.Millisecond) || w.expired() {
		t.Fatal("the limit was counted from the call's start, not from the last byte")
	}
	c.advance(600 * time.Millisecond)
	<-ended
	if !w.expired() {
		t.Error("the call ended, but expired says no")
	}
	w.stop()

	stopped := watchIdle(time.Second, c, func() { t.Error("a stopped watch cancelled its call") })
	stopped.stop()
	if c.dueWithin(time.Hour) {
		t.Error("a stopped watch left its timer set")
	}
}

// TestRedactedThinkingSentBack: Anthropic streams thinking its safety
// systems flagged as a redacted_thinking block of encrypted data, and
// refuses the next request of a tool loop unless that block goes back as
// it came. rpi dropped it while reading the answer (only "thinking" blocks
// were kept), so it was never sent back. It is now kept as pi keeps it (a
// thinking block "[Reasoning redacted]", the data as its signature,
// "redacted": true) and sent back as redacted_thinking to the model that
// made it; another model, on Anthropic or another API, gets nothing of it.
func TestRedactedThinkingSentBack(t *testing.T) {
	endToEnd(t)
	script := `{"sse":[` +
		`"data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}",` +
		`"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"RW5jcnlwdGVk\"}}",` +
		`"data: {\"type\":\"content_block_stop\",\"index\":0}",` +
		`"data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read\",\"input\":{}}}",` +
		`"data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\":\\\"a.txt\\\"}\"}}",` +
		`"data: {\"type\":\"content_block_stop\",\"index\":1}",` +
		`"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}",` +
		`"data: {\"type\":\"message_stop\"}"]}
{"text":["done"]}`
	ps, fm, cwd := agentSession(t, apiAnthropic, script, "--thinking", "low")
	os.WriteFile(filepath.Join(cwd, "a.txt"), []byte("hello\n"), 0o644)
	ps.send(`{"id":"p","type":"prompt","message":"Read a.txt"}`)
	ps.waitFor(`"agent_settled"`)
	ps.send(`{"id":"m","type":"get_messages"}`)
	ps.waitFor(`"command":"get_messages"`)
	out := string(ps.out.bytes())
	ps.close()
	if want := `{"type":"thinking","thinking":"[Reasoning redacted]","thinkingSignature":"RW5jcnlwdGVk","redacted":true}`; !strings.Contains(out, want) {
		t.Errorf("the answer lacks %s:\n%s", want, out)
	}
	body, _ := json.Marshal(fm.lastRequest())
	if want := `"content":[{"data":"RW5jcnlwdGVk","type":"redacted_thinking"},{"id":"toolu_1","input":{"path":"a.txt"},"name":"read","type":"tool_use"}]`; !strings.Contains(string(body), want) {
		t.Errorf("the next request lacks %s:\n%s", want, body)
	}

	history := []any{
		&userMessage{Role: "user", Content: textBlocks("Read a.txt")},
		&assistantMessage{Role: "assistant", API: apiAnthropic, Provider: "anthropic", Model: "claude-sonnet-4-5", StopReason: "toolUse", Content: []contentBlock{
			{Type: "thinking", Thinking: redactedThinking, Signature: "RW5jcnlwdGVk", Redacted: true},
			{Type: "toolCall", ID: "toolu_1", Name: "read", Arguments: json.RawMessage(`{"path":"a.txt"}`)}}},
		&toolResultMessage{Role: "toolResult", ToolCallID: "toolu_1", ToolName: "read", Content: textBlocks("hello")},
	}
	for _, m := range []*model{
		{ID: "claude-opus-4-5", API: apiAnthropic, Provider: "anthropic", Reasoning: true},
		{ID: "deepseek-reasoner", API: apiOpenAI, Provider: "deepseek", Reasoning: true, compat: detectCompat("deepseek", "https://api.deepseek.com")},
		{ID: "gpt-5.1", API: apiResponses, Provider: "openai", Reasoning: true},
		{ID: "gemini-2.5-flash", API: apiGoogle, Provider: "google", Reasoning: true},
	} {
		if body := sentBody(t, m, history); strings.Contains(body, "RW5jcnlwdGVk") || strings.Contains(body, "Reasoning redacted") {
			t.Errorf("%s/%s was sent another model's redacted thinking:\n%s", m.Provider, m.ID, body)
		}
	}
}

// encodedImage is an image of w by h pixels in format ("png", "jpeg",
// "gif", or "webp-vp8", "webp-vp8l", "webp-vp8x": the header alone), as a
// block of base64.
func encodedImage(t *testing.T, format string, w, h int) contentBlock {
	t.Helper()
	var buf bytes.Buffer
	var err error
	mime := "image/" + format
	webp := func(chunk string, body []byte) {
		mime = "image/webp"
		buf.WriteString("RIFF\x00\x00\x00\x00WEBP" + chunk + "\x00\x00\x00\x00")
		buf.Write(body)
	}
	switch format {
	case "png":
		err = png.Encode(&buf, image.NewGray(image.Rect(0, 0, w, h)))
	case "jpeg":
		err = jpeg.Encode(&buf, image.NewGray(image.Rect(0, 0, w, h)), nil)
	case "gif":
		err = gif.Encode(&buf, image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.Black}), nil)
	case "webp-vp8":
		webp("VP8 ", []byte{0, 0, 0, 0x9d, 0x01, 0x2a, byte(w), byte(w >> 8), byte(h), byte(h >> 8)})
	case "webp-vp8l":
		bits := uint32(w-1) | uint32(h-1)<<14
		webp("VP8L", []byte{0x2f, byte(bits), byte(bits >> 8), byte(bits >> 16), byte(bits >> 24)})
	case "webp-vp8x":
		webp("VP8X", []byte{0, 0, 0, 0, byte(w - 1), byte((w - 1) >> 8), byte((w - 1) >> 16), byte(h - 1), byte((h - 1) >> 8), byte((h - 1) >> 16)})
	}
	if err != nil {
		t.Fatal(err)
	}
	return contentBlock{Type: "image", MimeType: mime, Data: base64.StdEncoding.EncodeToString(buf.Bytes())}
}

// imagesTurn is a prompt with the images given and a read whose result
// has them too.
func imagesTurn(prompt, result []contentBlock) []any {
	return []any{
		&userMessage{Role: "user", Content: append(textBlocks("Look"), prompt...)},
		&assistantMessage{Role: "assistant", API: apiAnthropic, Provider: "anthropic", Model: "claude-sonnet-4-5", StopReason: "toolUse", Content: []contentBlock{
			{Type: "toolCall", ID: "toolu_1", Name: "read", Arguments: json.RawMessage(`{"path":"a.png"}`)}}},
		&toolResultMessage{Role: "toolResult", ToolCallID: "toolu_1", ToolName: "read", Content: append(textBlocks("Read image file"), result...)},
	}
}

// TestAnthropicImageLimits: Anthropic refuses a request with an image of
// more than 8000 px a side, with more than 100 images, with more than 20
// of which one is more than 2000 px a side, or of more than 32 MB, and
// since the images stay in the conversation, every later request of the
// session. rpi sent every image that had less than 5 MiB of base64. Such
// an image now goes as a note in its place, its size read from its header
// (PNG, JPEG, GIF, WebP's three kinds); past the count or the room, the
// older images go as notes and the newest go.
func TestAnthropicImageLimits(t *testing.T) {
	claude := &model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic", imageable: true}
	small := encodedImage(t, "png", 40, 30)
	var huge []contentBlock
	for _, c := range []struct {
		format string
		w, h   int
	}{{"png", 8001, 1}, {"jpeg", 1, 9000}, {"gif", 8500, 2}, {"webp-vp8", 8200, 3}, {"webp-vp8l", 4, 16384}, {"webp-vp8x", 9000, 5}} {
		huge = append(huge, encodedImage(t, c.format, c.w, c.h))
	}
	// Sizes rpi cannot read go as they are: Anthropic judges them.
	unread := []contentBlock{
		{Type: "image", MimeType: "image/webp", Data: base64.StdEncoding.EncodeToString([]byte("RIFF\x00\x00\x00\x00WEBPVP8X\x00"))},
		{Type: "image", MimeType: "image/webp", Data: base64.StdEncoding.EncodeToString([]byte("RIFF\x00\x00\x00\x00WEBPVP8 \x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))},
		{Type: "image", MimeType: "image/png", Data: "not base64 at all!"},
		{Type: "image", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n"))},
	}
	body := sentBody(t, claude, imagesTurn(append([]contentBlock{small}, huge[:3]...), append(huge[3:], unread...)))
	for _, w := range []string{
		`"[image/png image omitted: it is 8001x1 px, more than the 8000 px a side Anthropic takes]"`,
		`"[image/jpeg image omitted: it is 1x9000 px, more than the 8000 px a side Anthropic takes]"`,
		`"[image/gif image omitted: it is 8500x2 px, more than the 8000 px a side Anthropic takes]`,
		`[image/webp image omitted: it is 8200x3 px, more than the 8000 px a side Anthropic takes]`,
		`[image/webp image omitted: it is 4x16384 px, more than the 8000 px a side Anthropic takes]`,
		`[image/webp image omitted: it is 9000x5 px, more than the 8000 px a side Anthropic takes]`,
		small.Data, unread[0].Data, unread[1].Data, unread[2].Data, unread[3].Data,
	} {
		if !strings.Contains(body, w) {
			t.Errorf("the request lacks %s:\n%.3000s", w, body)
		}
	}
	for _, b := range huge {
		if strings.Contains(body, b.Data) {
			t.Errorf("Anthropic was sent an image of more than 8000 px a side (%s)", b.MimeType)
		}
	}
	if n := strings.Count(body, `"type":"image"`); n != 5 {
		t.Errorf("%d images sent, want 5", n)
	}

	// 101 images: the oldest is a note.
	var many []contentBlock
	for i := range 101 {
		many = append(many, encodedImage(t, "png", i+1, 1))
	}
	body = sentBody(t, claude, imagesTurn(many[:50], many[50:]))
	if n := strings.Count(body, `"type":"image"`); n != 100 || strings.Contains(body, `"`+many[0].Data+`"`) || !strings.Contains(body, `"`+many[1].Data+`"`) ||
		!strings.Contains(body, `"[image/png image omitted: Anthropic takes 100 images in a request, and 100 newer ones went]"`) {
		t.Errorf("101 images: %d sent, want the 100 newest and a note:\n%.3000s", n, body)
	}

	// More than 20 images: none of more than 2000 px a side; 20 may have one.
	wide := encodedImage(t, "png", 2001, 1)
	for _, n := range []int{20, 21} {
		body := sentBody(t, claude, imagesTurn([]contentBlock{wide}, many[:n-1]))
		note := strings.Contains(body, `"[image/png image omitted: it is 2001x1 px, more than the 2000 px a side Anthropic takes in a request of more than 20 images]"`)
		if sent := strings.Contains(body, wide.Data); sent != (n == 20) || note == sent {
			t.Errorf("%d images: the image of 2001 px sent %v, noted %v", n, sent, note)
		}
	}

	// Images of more than 24 MiB of base64 together: the newest go.
	var heavy []contentBlock
	for i := range 6 {
		heavy = append(heavy, contentBlock{Type: "image", MimeType: "image/png", Data: strings.Repeat(string(rune('A'+i)), 9<<19)})
	}
	body = sentBody(t, claude, imagesTurn(heavy[:3], heavy[3:]))
	if n := strings.Count(body, `"type":"image"`); n != 5 || strings.Contains(body, heavy[0].Data) || !strings.Contains(body,
		`"[image/png image omitted: its 4.5 MiB of base64 would take the request's images past the 24 MiB Anthropic's request has room for]"`) {
		t.Errorf("images of 27 MiB: %d sent, want the 5 newest and a note", n)
	}

	// Other APIs have none of Anthropic's limits.
	openai := &model{ID: "gpt-4.1", API: apiOpenAI, Provider: "openai", imageable: true}
	if body := sentBody(t, openai, imagesTurn(huge[:1], nil)); !strings.Contains(body, huge[0].Data) {
		t.Errorf("OpenAI was not sent an image of 8001 px")
	}
}

// TestAnthropicErrorResultImages: Anthropic refuses a tool result marked
// is_error that holds anything but text, and rpi sent a failed tool's
// images (an MCP tool's screenshot of the failure, say) in it, so the
// request and every later one failed. The result now says the images
// come after the run of results, and they do, under a line naming the
// call, as pi sends them; a result that did not fail keeps its images.
func TestAnthropicErrorResultImages(t *testing.T) {
	claude := &model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic", imageable: true}
	shot, ok := encodedImage(t, "png", 3, 2), encodedImage(t, "png", 2, 3)
	history := []any{
		&userMessage{Role: "user", Content: textBlocks("Shoot")},
		&assistantMessage{Role: "assistant", API: apiAnthropic, Provider: "anthropic", Model: "claude-sonnet-4-5", StopReason: "toolUse", Content: []contentBlock{
			{Type: "toolCall", ID: "toolu_1", Name: "shot", Arguments: json.RawMessage(`{}`)},
			{Type: "toolCall", ID: "toolu_2", Name: "shot", Arguments: json.RawMessage(`{}`)}}},
		&toolResultMessage{Role: "toolResult", ToolCallID: "toolu_1", ToolName: "shot", IsError: true, Content: []contentBlock{{Type: "text", Text: "It failed:"}, shot, shot}},
		&toolResultMessage{Role: "toolResult", ToolCallID: "toolu_2", ToolName: "shot", Content: []contentBlock{ok}},
	}
	body := sentBody(t, claude, history)
	want := `{"content":[{"content":"It failed:\n(image attached after the tool results)","is_error":true,"tool_use_id":"toolu_1","type":"tool_result"},` +
		`{"content":[{"text":"(see attached image)","type":"text"},{"source":{"data":"` + ok.Data + `","media_type":"image/png","type":"base64"},"type":"image"}],"is_error":false,"tool_use_id":"toolu_2","type":"tool_result"},` +
		`{"text":"Images from the error result of tool call toolu_1 (shot):","type":"text"},` +
		`{"source":{"data":"` + shot.Data + `","media_type":"image/png","type":"base64"},"type":"image"},` +
		`{"cache_control":{"type":"ephemeral"},"source":{"data":"` + shot.Data + `","media_type":"image/png","type":"base64"},"type":"image"}],"role":"user"}`
	if !strings.Contains(body, want) {
		t.Errorf("the request lacks\n%s\n%s", want, body)
	}
}

// TestAnthropicImageGiantPNG: a PNG whose header says more pixels than
// image.DecodeConfig takes ("dimension overflow": past 2^60 pixels, or
// 2^28 on a 32-bit build, a 16384x16384 PNG of one colour among them) was
// an image whose size rpi could not read, and went to Anthropic, which
// refuses it and, the image staying in the conversation, every later
// request. Its size is read from its header, so it goes as a note.
func TestAnthropicImageGiantPNG(t *testing.T) {
	claude := &model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic", imageable: true}
	header := func(w, h uint32) contentBlock {
		b := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR")
		b = binary.BigEndian.AppendUint32(b, w)
		b = binary.BigEndian.AppendUint32(b, h)
		b = append(b, 8, 0, 0, 0, 0) // depth, colour type, methods
		b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[12:]))
		return contentBlock{Type: "image", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(b)}
	}
	for _, c := range []struct {
		w, h uint32
		note string
	}{
		{1 << 30, 1 << 30, "it is 1073741824x1073741824 px"},
		{1<<31 - 1, 7, "it is 2147483647x7 px"},
		{16384, 16384, "it is 16384x16384 px"},
	} {
		img := header(c.w, c.h)
		body := sentBody(t, claude, imagesTurn([]contentBlock{img}, nil))
		if strings.Contains(body, img.Data) || !strings.Contains(body, c.note+", more than the 8000 px a side Anthropic takes") {
			t.Errorf("a PNG of %dx%d px was not made a note:\n%.2000s", c.w, c.h, body)
		}
	}
	// A width or height of 0 or past 2^31-1 is no PNG's: rpi cannot judge it.
	for _, wh := range [][2]uint32{{0, 5}, {5, 1 << 31}} {
		if w, h, ok := imageSize(header(wh[0], wh[1]).Data); ok {
			t.Errorf("a PNG header of %dx%d read as %dx%d", wh[0], wh[1], w, h)
		}
	}
}

// TestAnthropicManyLargeImages: with more than 20 images Anthropic takes
// none of more than 2000 px a side, and rpi made a note of every such
// image, newest included: a session of 21 screenshots (2560x1440, as most
// screens take them) sent the model none, not even the one just taken.
// The newest go, as with the other limits: the 20 newest when one of them
// is that large, the older ones are the notes.
func TestAnthropicManyLargeImages(t *testing.T) {
	claude := &model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic", imageable: true}
	var shots []contentBlock
	for i := range 25 {
		shots = append(shots, encodedImage(t, "png", 2001+i, 1)) // each its own data
	}
	body := sentBody(t, claude, imagesTurn(shots[:10], shots[10:]))
	if n := strings.Count(body, `"type":"image"`); n != 20 || strings.Contains(body, `"`+shots[4].Data+`"`) || !strings.Contains(body, `"`+shots[5].Data+`"`) ||
		!strings.Contains(body, `"[image/png image omitted: it is 2005x1 px, more than the 2000 px a side Anthropic takes in a request of more than 20 images]"`) {
		t.Errorf("25 images of more than 2000 px: %d sent, want the 20 newest:\n%.3000s", n, body)
	}

	// The newest large, 25 small before it: it and the 19 newest small go.
	var small []contentBlock
	for i := range 25 {
		small = append(small, encodedImage(t, "png", i+1, 1))
	}
	body = sentBody(t, claude, imagesTurn(small, shots[24:]))
	if n := strings.Count(body, `"type":"image"`); n != 20 || !strings.Contains(body, `"`+shots[24].Data+`"`) || strings.Contains(body, `"`+small[5].Data+`"`) ||
		!strings.Contains(body, `"`+small[6].Data+`"`) ||
		!strings.Contains(body, `"[image/png image omitted: Anthropic takes 20 images in a request with one of more than 2000 px a side, and 20 newer ones went]"`) {
		t.Errorf("a large image after 25 small: %d sent, want it and the 19 newest small:\n%.3000s", n, body)
	}
}

// TestOtherModelsThinkingLeftOut: after set_model, thinking another model
// made — readable, signed, encrypted — goes to no API, as pi 1.6 sends a
// conversation (it stopped sending it as text: the new model took it for
// part of its own replies). DeepSeek's Chat Completions, which wants
// reasoning_content on every earlier answer, was sent another model's
// thinking there; it now gets it empty, and its own thinking as before.
func TestOtherModelsThinkingLeftOut(t *testing.T) {
	history := func(api, provider, id string) []any {
		return []any{
			&userMessage{Role: "user", Content: textBlocks("Read a.txt")},
			&assistantMessage{Role: "assistant", API: api, Provider: provider, Model: id, StopReason: "toolUse", Content: []contentBlock{
				{Type: "thinking", Thinking: "Plan: read it.", Signature: "c2lnbmVk"},
				{Type: "thinking", Thinking: "Unsigned plan."},
				{Type: "thinking", Thinking: redactedThinking, Signature: "RW5jcnlwdGVk", Redacted: true},
				{Type: "text", Text: "Reading."},
				{Type: "toolCall", ID: "call_1", Name: "read", Arguments: json.RawMessage(`{"path":"a.txt"}`)}}},
			&toolResultMessage{Role: "toolResult", ToolCallID: "call_1", ToolName: "read", Content: textBlocks("hello")},
		}
	}
	deepseek := catalogModel(t, "deepseek", "deepseek-v4-pro")
	for _, m := range []*model{
		{ID: "claude-opus-4-5", API: apiAnthropic, Provider: "anthropic", Reasoning: true},
		{ID: "gpt-5.1", API: apiResponses, Provider: "openai", Reasoning: true},
		{ID: "gemini-3-pro-preview", API: apiGoogle, Provider: "google", Reasoning: true},
		{ID: "gpt-4.1", API: apiOpenAI, Provider: "openai"},
		deepseek,
	} {
		body := sentBody(t, m, history(apiAnthropic, "anthropic", "claude-sonnet-4-5"))
		for _, never := range []string{"Plan: read it.", "Unsigned plan.", "c2lnbmVk", "RW5jcnlwdGVk", "Reasoning redacted"} {
			if strings.Contains(body, never) {
				t.Errorf("%s/%s was sent another model's thinking (%s):\n%s", m.Provider, m.ID, never, body)
			}
		}
		if !strings.Contains(body, "Reading.") {
			t.Errorf("%s/%s was not sent the other model's text:\n%s", m.Provider, m.ID, body)
		}
	}
	if body := sentBody(t, deepseek, history(apiAnthropic, "anthropic", "claude-sonnet-4-5")); !strings.Contains(body, `"reasoning_content":""`) {
		t.Errorf("deepseek was not sent an empty reasoning_content for another model's answer:\n%s", body)
	}
	if body := sentBody(t, deepseek, history(deepseek.API, deepseek.Provider, deepseek.ID)); !strings.Contains(body, `"reasoning_content":"Plan: read it.\nUnsigned plan."`) {
		t.Errorf("deepseek was not sent its own thinking:\n%s", body)
	}
}

// sentCallIDs are the tool call ids of a request body of api, the calls'
// and the results', each in the order sent.
func sentCallIDs(t *testing.T, api, body string) (calls, results []string) {
	t.Helper()
	var req struct {
		Messages []struct {
			Role      string `json:"role"`
			ToolID    string `json:"tool_call_id"`
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Input []struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		} `json:"input"`
		Contents []struct {
			Parts []struct {
				Call *struct {
					ID string `json:"id"`
				} `json:"functionCall"`
				Response *struct {
					ID string `json:"id"`
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	type sent struct{ kind, id string } // kind: the API's name of a call or a result
	var all []sent
	switch api {
	case apiAnthropic:
		for _, m := range req.Messages {
			var blocks []struct{ Type, ID, Tool_use_id string }
			json.Unmarshal(m.Content, &blocks)
			for _, b := range blocks {
				all = append(all, sent{b.Type, b.ID + b.Tool_use_id})
			}
		}
	case apiOpenAI:
		for _, m := range req.Messages {
			for _, c := range m.ToolCalls {
				all = append(all, sent{"call", c.ID})
			}
			all = append(all, sent{m.Role, m.ToolID})
		}
	case apiResponses:
		for _, item := range req.Input {
			all = append(all, sent{item.Type, item.CallID})
		}
	case apiGoogle:
		for _, c := range req.Contents {
			for _, p := range c.Parts {
				if p.Call != nil {
					all = append(all, sent{"call", p.Call.ID})
				}
				if p.Response != nil {
					all = append(all, sent{"result", p.Response.ID})
				}
			}
		}
	}
	for _, x := range all {
		switch x.kind {
		case "call", "tool_use", "function_call":
			calls = append(calls, x.id)
		case "result", "tool", "tool_result", "function_call_output":
			results = append(results, x.id)
		}
	}
	return calls, results
}

// TestToolCallIDsStayApart: two different tool calls are never sent with
// the same id, and a result always with its call's, on every API. The
// Responses API's ids are "<call_id>|<item id>", and every other API was
// sent the call id alone, so two calls sharing a call id (pi has seen
// such from Responses proxies) went as one id, and their results with it:
// Anthropic refuses two tool_use blocks of one id, and the others cannot
// tell which result is whose. A server that gives every turn's call the
// same id ("call_0"), or several calls of a turn no id, made two calls one
// id the same way. A "<call_id>|<item id>" id now goes to the other APIs
// with the two joined by "_", as pi sends it, and a call whose id another
// call of the request already has goes with one made from a hash.
func TestToolCallIDsStayApart(t *testing.T) {
	long := "call_" + strings.Repeat("A", 24)
	item := "|fc_" + strings.Repeat("0123456789abcdef", 3)
	groups := [][]string{
		{"call_a|fc_1", "call_a|fc_2"},
		{long + item + "1", long + item + "2"},
		{"call_0"},
		{"call_0"},
		{"", ""},
	}
	responses := &model{ID: "gpt-5.1", API: apiResponses, Provider: "openai", Reasoning: true}
	local := &model{ID: "qwen", API: apiOpenAI, Provider: "local"}
	history := []any{&userMessage{Role: "user", Content: textBlocks("Read them")}}
	n := 0
	for i, ids := range groups {
		from := responses
		if i >= 2 {
			from = local
		}
		answer := &assistantMessage{Role: "assistant", API: from.API, Provider: from.Provider, Model: from.ID, StopReason: "toolUse"}
		var results []any
		for _, id := range ids {
			n++
			answer.Content = append(answer.Content, contentBlock{Type: "toolCall", ID: id, Name: "read", Arguments: json.RawMessage(`{"path":"a.txt"}`)})
			results = append(results, &toolResultMessage{Role: "toolResult", ToolCallID: id, ToolName: "read", Content: textBlocks("result " + strconv.Itoa(n))})
		}
		history = append(append(history, answer), results...)
	}
	wire := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	for _, c := range []struct {
		m     *model
		valid *regexp.Regexp
		first string // what "call_a|fc_1" goes as
	}{
		{&model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic"}, wire, "call_a_fc_1"},
		{responses, wire, "call_a"},
		{&model{ID: "gpt-5.2", API: apiResponses, Provider: "openai"}, wire, "call_a"},
		{&model{ID: "gemini-3-pro-preview", API: apiGoogle, Provider: "google"}, wire, "call_a_fc_1"},
		{&model{ID: "gpt-4.1", API: apiOpenAI, Provider: "openai"}, regexp.MustCompile(`^[a-zA-Z0-9_-]{0,40}$`), "call_a_fc_1"},
		{local, regexp.MustCompile(`^[a-zA-Z0-9_-]{0,40}$`), "call_a_fc_1"},
		{&model{ID: "devstral-2512", API: apiOpenAI, Provider: "mistral", compat: detectCompat("mistral", "https://api.mistral.ai/v1")}, regexp.MustCompile(`^[a-zA-Z0-9]{9}$`), ""},
	} {
		body := sentBody(t, c.m, history)
		calls, results := sentCallIDs(t, c.m.API, body)
		if len(calls) != n || !slices.Equal(calls, results) {
			t.Errorf("%s/%s: calls %q, results %q: want %d, each result with its call's id:\n%s", c.m.Provider, c.m.ID, calls, results, n, body)
			continue
		}
		seen := map[string]bool{}
		for _, id := range calls {
			if seen[id] {
				t.Errorf("%s/%s: two calls go with the id %q: %q", c.m.Provider, c.m.ID, id, calls)
			}
			seen[id] = true
			if !c.valid.MatchString(id) {
				t.Errorf("%s/%s: id %q is not of the form the API takes", c.m.Provider, c.m.ID, id)
			}
		}
		if c.first != "" && calls[0] != c.first {
			t.Errorf("%s/%s: call_a|fc_1 went as %q, want %q", c.m.Provider, c.m.ID, calls[0], c.first)
		}
	}
	// The model that made them gets its item ids back with its calls.
	if body := sentBody(t, responses, history); !strings.Contains(body, `"id":"fc_1"`) || !strings.Contains(body, `"id":"fc_2"`) {
		t.Errorf("the Responses model was not sent its item ids:\n%s", body)
	}
}

// TestGeminiSignedEmptyThought: Gemini may sign a thought part whose text
// is empty, and wants the signature back (pi sends it: without it the
// model may end a tool loop's turn with nothing). rpi left such a thought
// out when sending the conversation back to that model. A thought or a
// text of white space alone without a signature is left out, as pi does.
func TestGeminiSignedEmptyThought(t *testing.T) {
	m := &model{ID: "gemini-3-pro-preview", API: apiGoogle, Provider: "google", Reasoning: true}
	history := []any{
		&userMessage{Role: "user", Content: textBlocks("Read a.txt")},
		&assistantMessage{Role: "assistant", API: m.API, Provider: m.Provider, Model: m.ID, StopReason: "toolUse", Content: []contentBlock{
			{Type: "thinking", Thinking: "", Signature: "c2lnbg=="},
			{Type: "thinking", Thinking: " \n"},
			{Type: "text", Text: "  "},
			{Type: "toolCall", ID: "call_1", Name: "read", Arguments: json.RawMessage(`{"path":"a.txt"}`), Signature: "Y2FsbA=="}}},
		&toolResultMessage{Role: "toolResult", ToolCallID: "call_1", ToolName: "read", Content: textBlocks("hello")},
	}
	body := sentBody(t, m, history)
	if want := `{"text":"","thought":true,"thoughtSignature":"c2lnbg=="}`; !strings.Contains(body, want) {
		t.Errorf("the request lacks %s:\n%s", want, body)
	}
	for _, never := range []string{`" \n"`, `"  "`} {
		if strings.Contains(body, never) {
			t.Errorf("the request has the blank %s:\n%s", never, body)
		}
	}
}

// TestEndToEndSettingsProxy: settings.json's httpProxy carries rpi's own
// requests to a model server, as HTTP_PROXY does: the proxy gets the
// request for the model's host (which does not exist) and its answer is
// the model's. A proxy the environment names wins over the file's.
func TestEndToEndSettingsProxy(t *testing.T) {
	endToEnd(t)
	for _, fromEnv := range []bool{false, true} {
		t.Run(fmt.Sprintf("environment %v", fromEnv), func(t *testing.T) {
			var hosts []string
			var mu sync.Mutex
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hosts = append(hosts, r.URL.Host) // a proxied request names its host in its URL
				mu.Unlock()
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"through the proxy"},"finish_reason":null}]}`+"\n\n"+
					`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
			}))
			defer proxy.Close()
			agent := t.TempDir()
			inFile, inEnv := proxy.URL, "http://127.0.0.1:9" // nothing listens on port 9
			if fromEnv {
				inFile, inEnv = inEnv, inFile
			}
			os.WriteFile(filepath.Join(agent, "settings.json"), []byte(`{"httpProxy":"`+inFile+`"}`), 0o644)
			os.WriteFile(filepath.Join(agent, "models.json"), []byte(`{"providers":{"zeta":{"baseUrl":"http://model.invalid/v1","api":"openai-completions","apiKey":"zeta-key-0123456789","models":[{"id":"z1"}]}}}`), 0o644)
			vars := []string{"PI_CODING_AGENT_DIR=" + agent}
			if fromEnv {
				vars = append(vars, "HTTP_PROXY="+inEnv)
			}
			p := startRPIWith(t, withEnv(vars...), "rpc", "--no-session", "--cwd", t.TempDir(), "--model", "zeta/z1")
			p.send(t, `{"id":"p","type":"prompt","message":"hi"}`+"\n")
			end := p.until(t, "agent_end", "")
			if !strings.Contains(fmt.Sprint(end["data"]), "through the proxy") {
				t.Errorf("agent_end without the proxy's answer: %v", end)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(hosts) != 1 || hosts[0] != "model.invalid" {
				t.Errorf("the proxy got requests for %q; want one for model.invalid", hosts)
			}
		})
	}
}

// TestWithProxy: settings.json's httpProxy fills HTTP_PROXY and
// HTTPS_PROXY where the environment has neither in either case, for the
// children and for rpi itself alike.
func TestWithProxy(t *testing.T) {
	var set []string
	setenv := func(name, value string) error { set = append(set, name+"="+value); return nil }
	got := withProxy([]string{"PATH=/bin", "https_proxy=http://mine:1"}, "http://file:2", setenv)
	want := []string{"PATH=/bin", "https_proxy=http://mine:1", "HTTP_PROXY=http://file:2"}
	if !slices.Equal(got, want) || !slices.Equal(set, want[2:]) {
		t.Errorf("children get %q and rpi sets %q; want %q and %q", got, set, want, want[2:])
	}
	if got := withProxy([]string{"PATH=/bin"}, "", setenv); !slices.Equal(got, []string{"PATH=/bin"}) {
		t.Errorf("no proxy: children get %q", got)
	}
}

// TestOpenAIThinkingTokenBudget: a Chat Completions host whose compat
// names thinkingTokenBudgetField (or sets supportsThinkingTokenBudget,
// vLLM's thinking_token_budget) gets the level's thinking budget in that
// top-level field, at most what max_tokens leaves past 1024 for the
// answer, as pi 1.6 sends it: reasoning and answer share max_tokens
// there, so reasoning left uncapped can leave no answer. rpi ignored
// both keys. No field when thinking is off or no budget is left, and
// none for a host that names no field.
func TestOpenAIThinkingTokenBudget(t *testing.T) {
	history := []any{&userMessage{Role: "user", Content: textBlocks("Hi")}}
	for _, c := range []struct {
		over      compat
		maxTokens int
		thinking  string
		field     string
		want      any // nil: no field
	}{
		{compat{ThinkingTokenBudgetField: "thinking_budget"}, 32000, "medium", "thinking_budget", 8192.0},
		{compat{ThinkingTokenBudgetField: "thinking_budget_tokens"}, 32000, "xhigh", "thinking_budget_tokens", 16384.0},
		{compat{ThinkingTokenBudgetField: "thinking_budget_tokens"}, 32000, "minimal", "thinking_budget_tokens", 1024.0},
		{compat{SupportsThinkingTokenBudget: ptr(true)}, 32000, "low", "thinking_token_budget", 2048.0},
		{compat{SupportsThinkingTokenBudget: ptr(true)}, 4096, "high", "thinking_token_budget", 3072.0},
		{compat{SupportsThinkingTokenBudget: ptr(true)}, 64000, "high", "thinking_token_budget", 16384.0},
		{compat{SupportsThinkingTokenBudget: ptr(true)}, 1000, "high", "thinking_token_budget", nil},
		{compat{ThinkingTokenBudgetField: "thinking_budget"}, 32000, "off", "thinking_budget", nil},
		{compat{}, 32000, "high", "thinking_token_budget", nil},
	} {
		m := &model{ID: "qwen3", API: apiOpenAI, Provider: "local", Reasoning: true, MaxTokens: c.maxTokens,
			compat: detectCompat("local", "http://127.0.0.1/v1").over(&c.over)}
		var body map[string]any
		if err := json.Unmarshal([]byte(sentBodyAt(t, m, history, c.thinking)), &body); err != nil {
			t.Fatal(err)
		}
		if got, ok := body[c.field]; got != c.want || ok != (c.want != nil) {
			t.Errorf("%+v, maxTokens %d, %s: %s is %v, want %v", c.over, c.maxTokens, c.thinking, c.field, got, c.want)
		}
	}
}

// TestThinkingBudgetsInRequests: settings.json's thinkingBudgets (pi
// 1.6's) reach the request of the session's level on every API that
// takes a budget, as pi sends them; rpi accepted and ignored them.
// Anthropic's budget_tokens, Gemini's thinkingBudget and a Chat
// Completions host's thinkingTokenBudgetField get low's 3000; the
// Responses API takes no budget.
func TestThinkingBudgetsInRequests(t *testing.T) {
	endToEnd(t)
	want := map[string]string{
		apiAnthropic: `"thinking":{"budget_tokens":3000,"display":"summarized","type":"enabled"}`,
		apiGoogle:    `"thinkingConfig":{"includeThoughts":true,"thinkingBudget":3000}`,
		apiOpenAI:    `"thinking_budget":3000`,
		apiResponses: `"reasoning":{"effort":"low","summary":"auto"}`,
	}
	for _, api := range []string{apiOpenAI, apiResponses, apiAnthropic, apiGoogle} {
		t.Run(api, func(t *testing.T) {
			e := newTestEnv(t)
			fm := startFakeModel(t, api, `{"text":["done"]}`, e.agentDir)
			path := filepath.Join(e.agentDir, "models.json")
			models, _ := os.ReadFile(path)
			os.WriteFile(path, bytes.Replace(models, []byte(`"reasoning":true`), []byte(`"reasoning":true,"compat":{"thinkingTokenBudgetField":"thinking_budget"}`), 1), 0o644)
			os.WriteFile(filepath.Join(e.agentDir, "settings.json"), []byte(`{"retry":{"baseDelayMs":1},"thinkingBudgets":{"low":3000,"high":100}}`), 0o644)
			ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir(), "--no-session", "--thinking", "low"})
			ps.send(`{"id":"p","type":"prompt","message":"hi"}`)
			ps.waitFor(`"type":"agent_settled"`)
			ps.close()
			data, _ := json.Marshal(fm.lastRequest())
			if !strings.Contains(string(data), want[api]) || api == apiResponses && strings.Contains(string(data), "3000") {
				t.Errorf("request lacks %s, or has a budget the API does not take:\n%.3000s", want[api], data)
			}
		})
	}
}

// TestThinkingBudgetsArithmetic: how each API uses the user's budgets, as
// pi 1.6 does. Anthropic: the budget of the level (xhigh and max take
// high's; a level not set keeps pi's), at most maxTokens less 1024 for
// the answer, with max_tokens the model's; where that is less than 1024,
// Anthropic's least (0 and negative budgets too), the level is asked
// without thinking (pi would send a budget Anthropic refuses, or 1024 for
// 0). Gemini: the budget as it is (0 stops thinking, -1 lets the model
// decide), not for the models that take a level. A Chat Completions
// budget field: at most max_tokens less 1024, left out when that is 0 or
// less. The Responses API takes none.
func TestThinkingBudgetsArithmetic(t *testing.T) {
	history := []any{&userMessage{Role: "user", Content: textBlocks("Hi")}}
	n := func(v int) *int { return &v }
	budgets := thinkingBudgets{Minimal: n(-5), Low: n(3000), Medium: n(0), High: n(10000)}
	claude := &model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic", Reasoning: true, MaxTokens: 4096}
	flash := &model{ID: "gemini-2.5-flash", API: apiGoogle, Provider: "google", Reasoning: true, MaxTokens: 4096}
	gemini3 := &model{ID: "gemini-3-flash-preview", API: apiGoogle, Provider: "google", Reasoning: true, MaxTokens: 4096}
	vllm := &model{ID: "qwen3", API: apiOpenAI, Provider: "local", Reasoning: true, MaxTokens: 4096,
		compat: compat{MaxTokensField: "max_tokens", ThinkingFormat: "openai", SupportsThinkingTokenBudget: ptr(true)}}
	for _, c := range []struct {
		m        *model
		budgets  thinkingBudgets
		thinking string
		want     []string
		not      string
	}{
		{claude, budgets, "low", []string{`"max_tokens":4096`, `"thinking":{"budget_tokens":3000,"display":"summarized","type":"enabled"}`}, ""},
		{claude, budgets, "high", []string{`"max_tokens":4096`, `"thinking":{"budget_tokens":3072,"display":"summarized","type":"enabled"}`}, ""},
		{claude, budgets, "xhigh", []string{`"thinking":{"budget_tokens":3072,"display":"summarized","type":"enabled"}`}, ""},
		{claude, thinkingBudgets{High: n(2000)}, "max", []string{`"thinking":{"budget_tokens":2000,"display":"summarized","type":"enabled"}`}, ""},
		{claude, thinkingBudgets{High: n(2000)}, "medium", []string{`"thinking":{"budget_tokens":3072,"display":"summarized","type":"enabled"}`}, ""},
		{claude, budgets, "medium", []string{`"max_tokens":4096`}, `"thinking"`},
		{claude, budgets, "minimal", []string{`"max_tokens":4096`}, `"thinking"`},
		{claude, thinkingBudgets{Low: n(512)}, "low", []string{`"max_tokens":4096`}, `"thinking"`},
		{flash, budgets, "low", []string{`"thinkingConfig":{"includeThoughts":true,"thinkingBudget":3000}`}, ""},
		{flash, budgets, "medium", []string{`"thinkingConfig":{"includeThoughts":true,"thinkingBudget":0}`}, ""},
		{flash, budgets, "minimal", []string{`"thinkingConfig":{"includeThoughts":true,"thinkingBudget":-5}`}, ""},
		{flash, budgets, "xhigh", []string{`"maxOutputTokens":4096`, `"thinkingBudget":10000}`}, ""},
		{flash, thinkingBudgets{High: n(2000)}, "low", []string{`"thinkingBudget":2048}`}, ""},
		{flash, budgets, "off", []string{`"thinkingConfig":{"thinkingBudget":0}`}, ""},
		{gemini3, budgets, "low", []string{`"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"LOW"}`}, "thinkingBudget"},
		{vllm, budgets, "low", []string{`"max_tokens":4096`, `"thinking_token_budget":3000`}, ""},
		{vllm, budgets, "high", []string{`"thinking_token_budget":3072`}, ""},
		{vllm, budgets, "medium", []string{`"reasoning_effort":"medium"`}, "thinking_token_budget"},
		{vllm, budgets, "minimal", []string{`"reasoning_effort":"minimal"`}, "thinking_token_budget"},
		{vllm, thinkingBudgets{High: n(2000)}, "low", []string{`"thinking_token_budget":2048`}, ""},
	} {
		body := sentRequest(t, c.m, streamRequest{messages: history, thinking: c.thinking, budgets: c.budgets})
		for _, w := range c.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s at %s: request lacks %s:\n%.1500s", c.m.ID, c.thinking, w, body)
			}
		}
		if c.not != "" && strings.Contains(body, c.not) {
			t.Errorf("%s at %s: request has %s:\n%.1500s", c.m.ID, c.thinking, c.not, body)
		}
	}
	gpt := &model{ID: "gpt-5", API: apiResponses, Provider: "openai", Reasoning: true, MaxTokens: 4096}
	with := sentRequest(t, gpt, streamRequest{messages: history, thinking: "low", budgets: budgets})
	if without := sentRequest(t, gpt, streamRequest{messages: history, thinking: "low"}); with != without {
		t.Errorf("the Responses API's request changes with budgets:\n%s\n%s", with, without)
	}
}

// TestThinkingBudgetsSettings: settings.json's thinkingBudgets are read
// level by level, a project's (with --approve) over the user's, as pi
// merges them; 0 and negative budgets are kept (each API says what they
// do). A budget that is not a whole number makes the file invalid, which
// is ignored with a warning, as any other value of the wrong type.
func TestThinkingBudgetsSettings(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		os.WriteFile(path, []byte(text), 0o644)
		return path
	}
	set := &settings{}
	set.applySettingsFile(write("user.json", `{"thinkingBudgets":{"low":3000,"high":20000,"xhigh":1}}`))
	set.applySettingsFile(write("project.json", `{"thinkingBudgets":{"high":-1,"medium":0}}`))
	got := fmt.Sprint(set.thinkingBudgets.of("minimal"))
	for _, level := range []string{"low", "medium", "high", "xhigh", "max", "off"} {
		b, ok := set.thinkingBudgets.of(level)
		got += fmt.Sprintf(" %s:%d,%v", level, b, ok)
	}
	if want := "1024 true low:3000,true medium:0,true high:-1,true xhigh:-1,true max:-1,true off:0,false"; got != want || len(set.notices) > 0 {
		t.Errorf("budgets %s, want %s; notices %q", got, want, set.notices)
	}
	for _, c := range []struct{ text, want string }{
		{`{"thinkingBudgets":{"low":"2000"}}`, `line 1, column 32: thinkingBudgets.low: expected a whole number, got a string`},
		{`{"thinkingBudgets":{"low":2000.5}}`, `line 1, column 32: thinkingBudgets.low: expected a whole number, got 2000.5`},
		{`{"thinkingBudgets":[2000]}`, `line 1, column 20: thinkingBudgets: expected an object, got an array`},
	} {
		set := &settings{}
		path := write("bad.json", c.text)
		set.applySettingsFile(path)
		if want := "Ignored " + path + ": " + c.want; len(set.notices) != 1 || set.notices[0] != want || set.thinkingBudgets.Low != nil {
			t.Errorf("%s: notices %q, want %q", c.text, set.notices, want)
		}
	}
}

// TestResponsesLeastOutputTokens: the Responses API refuses a
// max_output_tokens below 16, so a model whose maxTokens is less is asked
// for 16, as pi asks; rpi sent its maxTokens and every request failed.
func TestResponsesLeastOutputTokens(t *testing.T) {
	history := []any{&userMessage{Role: "user", Content: textBlocks("Hi")}}
	for maxTokens, want := range map[int]string{10: `"max_output_tokens":16,`, 16: `"max_output_tokens":16,`, 100: `"max_output_tokens":100,`} {
		m := &model{ID: "gpt-5", API: apiResponses, Provider: "openai", MaxTokens: maxTokens}
		if body := sentBodyAt(t, m, history, "off"); !strings.Contains(body, want) {
			t.Errorf("maxTokens %d: request lacks %s:\n%.1000s", maxTokens, want, body)
		}
	}
}

// sentWithHeaders is sentRequest with the request's headers too.
func sentWithHeaders(t *testing.T, m *model, req streamRequest) (string, http.Header) {
	t.Helper()
	var mu sync.Mutex
	var body []byte
	var header http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		mu.Lock()
		body, header = data, r.Header.Clone()
		mu.Unlock()
		http.Error(w, "kept", http.StatusBadRequest)
	}))
	defer srv.Close()
	c := *m
	c.BaseURL = srv.URL
	msg := &assistantMessage{Role: "assistant", Content: []contentBlock{}}
	req.model, req.secrets = &c, newRedactor(nil)
	callModel(context.Background(), req, msg, func() {}, func(assistantEvent) {})
	mu.Lock()
	defer mu.Unlock()
	if !json.Valid(body) {
		t.Fatalf("%s: the request is not JSON: %.300s", m.API, body)
	}
	return string(body), header
}

// twoTools are two tools as a request offers them.
func twoTools() []*tool {
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
	return []*tool{{name: "read", description: "Read a file", schema: schema}, {name: "write", description: "Write a file", schema: schema}}
}

// TestAnthropicRequestAsPi: what pi 1.6 sends Claude beside the
// conversation, as scripts/request-compare.sh showed rpi did not: the
// interleaved-thinking beta with thinking (Claude may think between tool
// calls), thinking summarised (the default of older models, which newer
// ones leave out), the tools' input streamed as it comes
// (eager_input_streaming), and a third cache breakpoint on the last tool,
// an hour long for every breakpoint with PI_CACHE_RETENTION=long.
func TestAnthropicRequestAsPi(t *testing.T) {
	m := &model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic", Reasoning: true, MaxTokens: 64000, ContextWindow: 200000}
	history := readTurn(m, "toolu_1")
	body, h := sentWithHeaders(t, m, streamRequest{messages: history, thinking: "high", system: "You are a coding agent.", tools: twoTools()})
	if got := h.Get("Anthropic-Beta"); got != "interleaved-thinking-2025-05-14" {
		t.Errorf("anthropic-beta %q, want the interleaved-thinking beta", got)
	}
	for _, w := range []string{
		`"thinking":{"budget_tokens":16384,"display":"summarized","type":"enabled"}`,
		`{"description":"Read a file","eager_input_streaming":true,"input_schema":`,
		`"name":"write"}`,
	} {
		if !strings.Contains(body, w) {
			t.Errorf("request lacks %s:\n%s", w, body)
		}
	}
	if !regexp.MustCompile(`\{"cache_control":\{"type":"ephemeral"\},"description":"Write a file","eager_input_streaming":true,`).MatchString(body) {
		t.Errorf("the last tool is no cache breakpoint:\n%s", body)
	}
	if n := strings.Count(body, `"cache_control":{"type":"ephemeral"}`); n != 3 {
		t.Errorf("%d cache breakpoints, want 3:\n%s", n, body)
	}

	// Without thinking, no beta; with eager streaming off (a proxy that
	// refuses the field), the fine-grained tool streaming beta instead.
	off := *m
	off.compat.SupportsEagerToolInputStreaming = ptr(false)
	body, h = sentWithHeaders(t, &off, streamRequest{messages: history, thinking: "off", tools: twoTools()})
	if got := h.Get("Anthropic-Beta"); got != "fine-grained-tool-streaming-2025-05-14" {
		t.Errorf("anthropic-beta %q without thinking and eager streaming, want fine-grained-tool-streaming", got)
	}
	if strings.Contains(body, "eager_input_streaming") || strings.Contains(body, `"thinking"`) {
		t.Errorf("eager streaming or thinking sent:\n%s", body)
	}

	// PI_CACHE_RETENTION=long: an hour for each breakpoint.
	body, _ = sentWithHeaders(t, m, streamRequest{messages: history, thinking: "high", system: "S", tools: twoTools(), longCache: true})
	if n := strings.Count(body, `"cache_control":{"ttl":"1h","type":"ephemeral"}`); n != 3 {
		t.Errorf("%d hour-long breakpoints, want 3:\n%s", n, body)
	}
}

// TestPromptCacheKey: pi 1.6 sends OpenAI the session's id as
// prompt_cache_key, which routes a session's requests to the machine that
// holds its cached prompt (without it, OpenAI routes by the prompt's
// first 256 tokens and a long prompt shared by many sessions overflows
// that machine and misses), and as session-id and x-client-request-id
// headers (x-session-id to OpenRouter, which routes by it); with
// PI_CACHE_RETENTION=long it asks to keep the cache 24 hours.
func TestPromptCacheKey(t *testing.T) {
	const id = "019adf3c-6a1e-7b91-883d-dc868626d545"
	responses := &model{ID: "gpt-5.1", API: apiResponses, Provider: "openai", MaxTokens: 1000}
	body, h := sentWithHeaders(t, responses, streamRequest{messages: readTurn(responses, "call_1|fc_1"), sessionID: id})
	if !strings.Contains(body, `"prompt_cache_key":"`+id+`"`) || strings.Contains(body, "prompt_cache_retention") {
		t.Errorf("Responses: no prompt_cache_key, or a retention:\n%s", body)
	}
	if h.Get("Session-Id") != id || h.Get("X-Client-Request-Id") != id {
		t.Errorf("Responses headers %v, want session-id and x-client-request-id %s", h, id)
	}
	body, _ = sentWithHeaders(t, responses, streamRequest{messages: readTurn(responses, "call_1|fc_1"), sessionID: id, longCache: true})
	if !strings.Contains(body, `"prompt_cache_retention":"24h"`) {
		t.Errorf("Responses, long retention: no prompt_cache_retention:\n%s", body)
	}
	routed := &model{ID: "openai/gpt-5.1", API: apiResponses, Provider: "openrouter", MaxTokens: 1000,
		compat: detectCompat("openrouter", "https://openrouter.ai/api/v1")}
	if _, h := sentWithHeaders(t, routed, streamRequest{messages: readTurn(routed, "call_1|fc_1"), sessionID: id}); h.Get("X-Session-Id") != id || h.Get("Session-Id") != "" {
		t.Errorf("Responses to OpenRouter: headers %v, want x-session-id %s alone", h, id)
	}
	long := strings.Repeat("é", 70)
	body, _ = sentWithHeaders(t, responses, streamRequest{messages: readTurn(responses, "call_1|fc_1"), sessionID: long})
	if !strings.Contains(body, `"prompt_cache_key":"`+strings.Repeat("é", 64)+`"`) {
		t.Errorf("Responses: a long id not cut to 64 characters:\n%s", body)
	}

	// Chat Completions: the key to api.openai.com (or with long
	// retention); OpenRouter gets the id as x-session-id; a local server
	// nothing of it.
	for _, c := range []struct {
		provider, baseURL string
		long              bool
		key, header       string
		retention         bool
	}{
		{"openai", "https://api.openai.com/v1", false, id, "", false},
		{"openrouter", "https://openrouter.ai/api/v1", false, "", id, false},
		{"local", "http://127.0.0.1:8080/v1", false, "", "", false},
		{"local", "http://127.0.0.1:8080/v1", true, id, "", true},
		{"mistral", "https://api.mistral.ai/v1", true, id, "", false},
		{"together", "https://api.together.ai/v1", true, "", "", false},
	} {
		m := &model{ID: "m", API: apiOpenAI, Provider: c.provider, MaxTokens: 1000, compat: detectCompat(c.provider, c.baseURL)}
		body, h := sentWithHeaders(t, m, streamRequest{messages: readTurn(m, "call_1"), sessionID: id, longCache: c.long})
		if got := membersNamed(body, "prompt_cache_key"); strings.Join(got, "") != c.key {
			t.Errorf("%s (long %v): prompt_cache_key %q, want %q", c.provider, c.long, got, c.key)
		}
		if got := strings.Contains(body, `"prompt_cache_retention":"24h"`); got != c.retention {
			t.Errorf("%s (long %v): prompt_cache_retention sent %v, want %v", c.provider, c.long, got, c.retention)
		}
		if got := h.Get("X-Session-Id"); got != c.header {
			t.Errorf("%s: x-session-id %q, want %q", c.provider, got, c.header)
		}
	}
}

// TestSessionAffinityHeaders: the session's id goes in the headers a
// host routes a session's requests by, as pi 1.6 sends them for each API
// and host: Fireworks (pi's catalog sets sendSessionAffinityHeaders) gets
// session_id, x-client-request-id and x-session-affinity; Mistral
// x-affinity (and prompt_cache_key: TestPromptCacheKey); OpenRouter
// x-session-id on every API; models.json's compat turns them on for any
// host and picks the format; a host without it gets none.
func TestSessionAffinityHeaders(t *testing.T) {
	const id = "019adf3c-6a1e-7b91-883d-dc868626d545"
	var fromJSON compat // models.json's names, as pi spells them
	if err := json.Unmarshal([]byte(`{"sendSessionAffinityHeaders":true,"sessionAffinityFormat":"openai-nosession"}`), &fromJSON); err != nil {
		t.Fatal(err)
	}
	local := func(api string, o *compat) *model {
		return &model{ID: "m", API: api, Provider: "local", MaxTokens: 1000, compat: detectCompat("local", "http://127.0.0.1:8080/v1").over(o)}
	}
	fireworks := hostedProviderNamed("fireworks")
	affinity := []string{"Session_id", "X-Client-Request-Id", "X-Session-Affinity"}
	for _, c := range []struct {
		name string
		m    *model
		want []string // the headers that carry the id; no other may
	}{
		{"fireworks", fireworks.makeModels(fireworks.baseURL, nil, providerOverride{})[0], affinity},
		{"mistral", &model{ID: "m", API: apiOpenAI, Provider: "mistral", MaxTokens: 1000, compat: detectCompat("mistral", "https://api.mistral.ai/v1")}, []string{"X-Affinity"}},
		{"openrouter", &model{ID: "m", API: apiOpenAI, Provider: "openrouter", MaxTokens: 1000, compat: detectCompat("openrouter", "https://openrouter.ai/api/v1")}, []string{"X-Session-Id"}},
		{"local", local(apiOpenAI, nil), nil},
		{"local, models.json sendSessionAffinityHeaders", local(apiOpenAI, &compat{SendSessionAffinityHeaders: ptr(true)}), affinity},
		{"local, openai-nosession", local(apiOpenAI, &fromJSON), []string{"X-Client-Request-Id", "X-Session-Affinity"}},
		{"local, format openrouter", local(apiOpenAI, &compat{SendSessionAffinityHeaders: ptr(true), SessionAffinityFormat: "openrouter"}), []string{"X-Session-Id"}},
		{"responses", local(apiResponses, nil), []string{"Session-Id", "X-Client-Request-Id"}},
		{"responses, openai-nosession", local(apiResponses, &fromJSON), []string{"X-Client-Request-Id"}},
		{"anthropic", &model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic", MaxTokens: 1000, compat: detectCompat("anthropic", "https://api.anthropic.com")}, nil},
		{"anthropic to openrouter", &model{ID: "anthropic/claude-sonnet-4.5", API: apiAnthropic, Provider: "router", MaxTokens: 1000, compat: detectCompat("router", "https://openrouter.ai/api")}, []string{"X-Session-Id"}},
		{"anthropic, sendSessionAffinityHeaders", local(apiAnthropic, &fromJSON), []string{"X-Session-Affinity"}},
	} {
		m := c.m
		_, h := sentWithHeaders(t, m, streamRequest{messages: readTurn(m, "call_1|fc_1"), sessionID: id})
		var got []string
		for name, values := range h {
			if slices.Contains(values, id) {
				got = append(got, name)
			}
		}
		slices.Sort(got)
		if want := slices.Sorted(slices.Values(c.want)); !slices.Equal(got, want) {
			t.Errorf("%s: the id in headers %v, want %v", c.name, got, want)
		}
		// An id no header can carry goes in none.
		if _, h := sentWithHeaders(t, m, streamRequest{messages: readTurn(m, "call_1|fc_1"), sessionID: "a\nb"}); h.Get("X-Affinity")+h.Get("X-Session-Affinity")+h.Get("X-Session-Id") != "" {
			t.Errorf("%s: an id with a line break in a header: %v", c.name, h)
		}
	}
}

// TestStrictTools: pi 1.6's read, bash, edit and write ask for strict
// sampling, and a host that offers it (pi's catalog: Anthropic, OpenAI,
// DeepSeek, Groq, OpenRouter, Fireworks, Hugging Face; Gemini 3 and
// later) gets them strict — every property required, an optional one
// nullable, no other property — so that the model cannot write arguments
// they do not take; rpi sent every tool as it is. A tool that does not
// ask (an MCP server's) goes as it is; bash's timeout goes without its
// bounds, which Anthropic's strict mode refuses; a host without strict
// gets no strict field, which some refuse.
func TestStrictTools(t *testing.T) {
	other := &tool{name: "mcp__s__echo", description: "Echo", schema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)}
	tools := []*tool{readTool, bashTool, other}
	// Its properties in read's order, which a model held to the schema writes them in.
	strictRead := `{"type":"object","properties":{"path":{"type":"string","description":"File to read, relative to the working directory or absolute"},` +
		`"offset":{"anyOf":[{"type":"integer","description":"First line to read, from 1"},{"type":"null"}]},` +
		`"limit":{"anyOf":[{"type":"integer","description":"How many lines to read"},{"type":"null"}]}},"required":["path","offset","limit"],"additionalProperties":false}`
	for _, c := range []struct {
		name string
		m    *model
		want []string
		not  []string
	}{
		{"deepseek", &model{ID: "deepseek-v4-pro", API: apiOpenAI, Provider: "deepseek", compat: compat{SupportsStrictMode: ptr(true)}},
			[]string{`"name":"read","parameters":` + strictRead + `,"strict":true}`, `"name":"bash","parameters":{"type":"object",`, `"required":["command","timeout"],"additionalProperties":false},"strict":true}`,
				`"name":"mcp__s__echo","parameters":{"type":"object","properties":{"text":{"type":"string"}}},"strict":false}`}, nil},
		{"local", &model{ID: "m", API: apiOpenAI, Provider: "local"}, nil, []string{`"strict"`, `anyOf`}},
		{"responses", &model{ID: "gpt-5.1", API: apiResponses, Provider: "openai", compat: compat{SupportsStrictMode: ptr(true)}},
			[]string{`"name":"read","parameters":` + strictRead + `,"strict":true,"type":"function"}`,
				`"name":"mcp__s__echo","parameters":{"type":"object","properties":{"text":{"type":"string"}}},"strict":false,`}, nil},
		{"anthropic", &model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic", compat: compat{SupportsStrictTools: ptr(true)}},
			[]string{`"input_schema":` + strictRead + `,"name":"read","strict":true}`,
				`"input_schema":{"type":"object","properties":{"command":{"type":"string","description":"The command line"},"timeout":{"anyOf":[{"type":"number","description":"Seconds before the command is killed (default: none)"},{"type":"null"}]}},"required":["command","timeout"],"additionalProperties":false},"name":"bash","strict":true}`},
			[]string{`"name":"mcp__s__echo","strict"`, `imum`}},
		{"anthropic without strict", &model{ID: "claude-x", API: apiAnthropic, Provider: "proxy"}, nil, []string{`"strict"`, `anyOf`}},
		{"gemini 3", &model{ID: "gemini-3-flash-preview", API: apiGoogle, Provider: "google"},
			[]string{`"name":"read","parametersJsonSchema":` + strictRead, `"toolConfig":{"functionCallingConfig":{"mode":"VALIDATED"}}`,
				`"name":"mcp__s__echo","parametersJsonSchema":{"type":"object","properties":{"text":{"type":"string"}}}}`}, nil},
		{"gemini 2.5", &model{ID: "gemini-2.5-flash", API: apiGoogle, Provider: "google"}, nil, []string{`toolConfig`, `anyOf`}},
	} {
		c.m.MaxTokens = 1000
		body, _ := sentWithHeaders(t, c.m, streamRequest{messages: readTurn(c.m, "call_1"), tools: tools})
		for _, w := range c.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: request lacks %s:\n%s", c.name, w, body)
			}
		}
		for _, w := range c.not {
			if strings.Contains(body, w) {
				t.Errorf("%s: request has %s:\n%s", c.name, w, body)
			}
		}
	}

	// The catalog's models of such hosts take strict tools, another's not.
	for provider, want := range map[string]bool{"anthropic": true, "openai": true, "deepseek": true, "openrouter": true, "together": false, "cerebras": false} {
		p := hostedProviderNamed(provider)
		m := p.makeModels(p.baseURL, nil, providerOverride{})[0]
		if got := setting(m.compat.SupportsStrictMode, false) || setting(m.compat.SupportsStrictTools, false); got != want {
			t.Errorf("%s: strict %v, want %v", provider, got, want)
		}
	}

	// A strict model sends null for an optional argument it leaves out:
	// the call is the same as without it.
	s := toolServer(t, map[string]string{"a.txt": "a\n"})
	for name, pair := range map[string][2]string{
		"read": {`{"path":"a.txt","offset":null,"limit":null}`, `{"path":"a.txt"}`},
		"bash": {`{"command":"true","timeout":null}`, `{"command":"true"}`},
	} {
		withNull, err1 := s.decodeToolCall(name, json.RawMessage(pair[0]))
		without, err2 := s.decodeToolCall(name, json.RawMessage(pair[1]))
		if err1 != nil || err2 != nil || !reflect.DeepEqual(withNull, without) {
			t.Errorf("%s: %s decodes to %#v (%v), %s to %#v (%v)", name, pair[0], withNull, err1, pair[1], without, err2)
		}
	}
}

// TestStrictSchema: a schema made strict as pi makes it (its
// makeStrictJsonSchema), and those it leaves as they are.
func TestStrictSchema(t *testing.T) {
	for _, c := range []struct{ schema, want string }{
		{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":["string","null"]},"c":{"type":"array","items":{"type":"object","properties":{"x":{"type":"number"}}}}},"required":["a"]}`,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":["string","null"]},"c":{"anyOf":[{"type":"array","items":{"type":"object","properties":{"x":{"anyOf":[{"type":"number"},{"type":"null"}]}},"required":["x"],"additionalProperties":false}},{"type":"null"}]}},"required":["a","b","c"],"additionalProperties":false}`},
		{`{"type":"object","properties":{"e":{"enum":["x","y"]},"u":{"anyOf":[{"type":"string"},{"type":"number"}]}},"required":["e","u"],"additionalProperties":false}`,
			`{"type":"object","properties":{"e":{"enum":["x","y"]},"u":{"anyOf":[{"type":"string"},{"type":"number"}]}},"required":["e","u"],"additionalProperties":false}`},
		{`{"type":"object","properties":{"a":{"$ref":"#/x"}}}`, ""},
		{`{"type":"object","properties":{"a":{}}}`, ""},
		{`{"type":"object","properties":{"a":{"anyOf":[{"type":"object"},{"type":"string"}]}}}`, ""},
		{`{"type":"object","additionalProperties":true}`, ""},
		{`{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}`, ""},
		{`{"type":"string"}`, ""},
	} {
		got, ok := strictParameters(&tool{strict: true, schema: json.RawMessage(c.schema)}, nil)
		if string(got) != c.want || ok != (c.want != "") {
			t.Errorf("%s:\ngot  %s (%v)\nwant %s", c.schema, got, ok, c.want)
		}
	}
	if _, ok := strictParameters(&tool{schema: json.RawMessage(`{"type":"object"}`)}, nil); ok {
		t.Error("a tool that does not ask went strict")
	}
	// rpi checks a number's bounds as it decodes the call: its strict
	// tools go without them, as pi's own tools have none (bash's
	// timeout), to Anthropic, which refuses them, and to every host.
	bounded := &tool{strict: true, schema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9,"description":"N."}}}`)}
	want := `{"type":"object","properties":{"n":{"anyOf":[{"type":"integer","description":"N."},{"type":"null"}]}},"required":["n"],"additionalProperties":false}`
	for _, refuses := range []func(string, any) bool{anthropicRefusesStrict, nil} {
		if got, ok := strictParameters(bounded, refuses); !ok || string(got) != want {
			t.Errorf("a bounded schema went as %s (%v), want %s", got, ok, want)
		}
	}
	if got, ok := bashTool.strictFor(true); !ok || strings.Contains(string(got), "imum") {
		t.Errorf("bash to Anthropic: %s (%v), want strict without bounds", got, ok)
	}
}

// TestSessionIDHeaderSafe: a session's id comes from its file's header,
// which nothing checks (a hand-edited or foreign file): an id a header
// cannot carry (a line break, a control character) or longer than
// --session-id takes is left out of the session headers, where Go's HTTP
// client refused the whole request, and every request of the session
// failed; the body's prompt_cache_key, JSON-escaped and cut to 64
// characters, still carries it.
func TestSessionIDHeaderSafe(t *testing.T) {
	for _, id := range []string{"a\r\nX-Evil: 1", "a\x00b", strings.Repeat("a", maxSessionIDLength+1)} {
		for _, m := range []*model{
			{ID: "gpt-5.1", API: apiResponses, Provider: "openai", MaxTokens: 1000},
			{ID: "m", API: apiOpenAI, Provider: "openrouter", MaxTokens: 1000, compat: detectCompat("openrouter", "https://openrouter.ai/api/v1")},
		} {
			body, h := sentWithHeaders(t, m, streamRequest{messages: readTurn(m, "call_1"), sessionID: id})
			for _, k := range []string{"Session-Id", "X-Client-Request-Id", "X-Session-Id", "X-Evil"} {
				if v := h.Get(k); v != "" {
					t.Errorf("%s, id %.20q: header %s %.30q sent", m.API, id, k, v)
				}
			}
			if m.API == apiResponses && len(membersNamed(body, "prompt_cache_key")) != 1 {
				t.Errorf("%s, id %.20q: no prompt_cache_key:\n%.300s", m.API, id, body)
			}
		}
	}
}

// TestCatalogCompatAsPi: the request settings this rpi takes from pi
// 1.6's catalog model by model: Claude Opus 4.1 takes no strict tools
// there (pi sends its tools as they are), where Sonnet and Haiku 4.5 do;
// xAI and Fireworks take no long cache retention (PI_CACHE_RETENTION=long
// sends them no prompt_cache_retention); Kimi K3 on Fireworks and DeepSeek
// V4.1 Flash on OpenRouter get reasoning_content on every earlier answer
// (an empty one where it had no thinking), and GPT OSS on Together is
// asked to reason by reasoning_effort alone, where Together's other
// models get reasoning {enabled}; a models.json compat goes over all of
// it.
func TestCatalogCompatAsPi(t *testing.T) {
	answered := func(m *model) []any {
		return []any{&userMessage{Role: "user", Content: textBlocks("hi")},
			&assistantMessage{Role: "assistant", API: m.API, Provider: m.Provider, Model: m.ID, StopReason: "stop", Content: textBlocks("hello")},
			&userMessage{Role: "user", Content: textBlocks("more")}}
	}
	for _, c := range []struct {
		provider, id string
		over         *compat
		want, not    string
	}{
		{"fireworks", "accounts/fireworks/models/kimi-k3", nil, `"reasoning_content":""`, ""},
		{"fireworks", "accounts/fireworks/models/glm-5p3", nil, "", `reasoning_content`},
		{"fireworks", "accounts/fireworks/models/kimi-k3", &compat{RequiresReasoningContent: ptr(false)}, "", `reasoning_content`},
		{"openrouter", "deepseek/deepseek-v4.1-flash", nil, `"reasoning_content":""`, ""},
		{"openrouter", "openai/gpt-5.5", nil, "", `reasoning_content`},
		{"together", "openai/gpt-oss-120b", nil, `"reasoning_effort":"high"`, `"reasoning":`},
		{"together", "zai-org/GLM-5.3", nil, `"reasoning":{"enabled":true}`, ""},
		{"together", "openai/gpt-oss-120b", &compat{ThinkingFormat: "together"}, `"reasoning":{"enabled":true}`, ""},
	} {
		p := hostedProviderNamed(c.provider)
		var m *model
		for _, made := range p.makeModels(p.baseURL, nil, providerOverride{compat: c.over}) {
			if made.ID == c.id {
				m = made
			}
		}
		body, _ := sentWithHeaders(t, m, streamRequest{messages: answered(m), thinking: "high"})
		if c.want != "" && !strings.Contains(body, c.want) || c.not != "" && strings.Contains(body, c.not) {
			t.Errorf("%s/%s (models.json %+v): want %s, not %s:\n%.1500s", c.provider, c.id, c.over, c.want, c.not, body)
		}
	}

	strict := map[string]bool{}
	for _, m := range hostedProviderNamed("anthropic").makeModels("https://api.anthropic.com", nil, providerOverride{}) {
		strict[m.ID] = setting(m.compat.SupportsStrictTools, false)
	}
	if want := map[string]bool{"claude-sonnet-4-5": true, "claude-opus-4-1": false, "claude-haiku-4-5": true}; !reflect.DeepEqual(strict, want) {
		t.Errorf("strict tools %v, want %v", strict, want)
	}
	for _, provider := range []string{"xai", "fireworks"} {
		p := hostedProviderNamed(provider)
		m := p.makeModels(p.baseURL, nil, providerOverride{})[0]
		body, _ := sentWithHeaders(t, m, streamRequest{messages: readTurn(m, "call_1|fc_1"), sessionID: "s1", longCache: true})
		if strings.Contains(body, "prompt_cache_retention") {
			t.Errorf("%s: prompt_cache_retention sent:\n%.400s", provider, body)
		}
	}
}

// TestStrictSchemaMadeOnce: a tool's strict schema is made at its first
// request and kept, not made again for every request (each took a few
// hundred microseconds and a hundred kilobytes for the four tools:
// BenchmarkRequestBodyTools); and it is what strictParameters makes.
func TestStrictSchemaMadeOnce(t *testing.T) {
	for _, anthropic := range []bool{false, true} {
		refuses := (func(string, any) bool)(nil)
		if anthropic {
			refuses = anthropicRefusesStrict
		}
		for _, tl := range []*tool{readTool, bashTool, editTool, writeTool} {
			got, ok := tl.strictFor(anthropic)
			want, wantOK := strictParameters(tl, refuses)
			if string(got) != string(want) || ok != wantOK {
				t.Errorf("%s (anthropic %v): %s %v, want %s %v", tl.name, anthropic, got, ok, want, wantOK)
			}
			if n := testing.AllocsPerRun(10, func() { tl.strictFor(anthropic) }); n != 0 {
				t.Errorf("%s (anthropic %v): %v allocations a request, want none", tl.name, anthropic, n)
			}
		}
	}
}

// TestExplicitPromptCacheMode: a model of OpenAI's explicit prompt cache
// mode (pi's compat supportsExplicitPromptCacheMode; of the catalog,
// GPT-6.2 Sol) asks for the longer cache with
// PI_CACHE_RETENTION=long as pi 1.6 does, prompt_cache_options
// {"ttl":"30m"}, not prompt_cache_retention, which pi sends it never;
// the other models keep prompt_cache_retention "24h".
func TestExplicitPromptCacheMode(t *testing.T) {
	p := hostedProviderNamed("openai")
	for _, m := range p.makeModels(p.baseURL, nil, providerOverride{}) {
		if m.ID != "gpt-6.2-sol" && m.ID != "gpt-5.1" {
			continue
		}
		body, _ := sentWithHeaders(t, m, streamRequest{messages: readTurn(m, "call_1|fc_1"), sessionID: "s1", longCache: true})
		explicit := m.ID == "gpt-6.2-sol"
		if got := strings.Contains(body, `"prompt_cache_options":{"ttl":"30m"}`); got != explicit {
			t.Errorf("%s: prompt_cache_options sent %v, want %v:\n%.300s", m.ID, got, explicit, body)
		}
		if got := strings.Contains(body, `"prompt_cache_retention":"24h"`); got == explicit {
			t.Errorf("%s: prompt_cache_retention sent %v, want %v", m.ID, got, !explicit)
		}
		body, _ = sentWithHeaders(t, m, streamRequest{messages: readTurn(m, "call_1|fc_1"), sessionID: "s1"})
		if strings.Contains(body, "prompt_cache_options") || strings.Contains(body, "prompt_cache_retention") {
			t.Errorf("%s: a cache setting sent without PI_CACHE_RETENTION=long:\n%.300s", m.ID, body)
		}
	}
}

// TestAnthropicTurnsAlternate: rpi sends Anthropic one message per turn,
// roles alternating: two user messages in a row go as one, and a message
// the user sent while tools ran (steer) goes in the message of their
// results, after them. pi 1.6 sends each as a message of its own (only a
// run of tool results in one); Anthropic joins consecutive turns of a
// role into one, so the model is given the same conversation, and a host
// that takes only alternating roles takes rpi's (docs/pi-compat.md).
func TestAnthropicTurnsAlternate(t *testing.T) {
	m := &model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic"}
	history := []any{
		&userMessage{Role: "user", Content: textBlocks("first")},
		&userMessage{Role: "user", Content: textBlocks("second")},
		&assistantMessage{Role: "assistant", API: m.API, Provider: m.Provider, Model: m.ID, StopReason: "toolUse", Content: []contentBlock{
			{Type: "toolCall", ID: "toolu_1", Name: "read", Arguments: json.RawMessage(`{"path":"a"}`)},
			{Type: "toolCall", ID: "toolu_2", Name: "read", Arguments: json.RawMessage(`{"path":"b"}`)}}},
		&toolResultMessage{Role: "toolResult", ToolCallID: "toolu_1", ToolName: "read", Content: textBlocks("A")},
		&toolResultMessage{Role: "toolResult", ToolCallID: "toolu_2", ToolName: "read", Content: textBlocks("B")},
		&userMessage{Role: "user", Content: textBlocks("steer")},
	}
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
			} `json:"content"`
		} `json:"messages"`
	}
	body := sentBody(t, m, history)
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	var turns []string
	for _, msg := range req.Messages {
		var types []string
		for _, b := range msg.Content {
			types = append(types, b.Type)
		}
		turns = append(turns, msg.Role+":"+strings.Join(types, ","))
	}
	if want := "user:text,text assistant:tool_use,tool_use user:tool_result,tool_result,text"; strings.Join(turns, " ") != want {
		t.Errorf("turns %s, want %s:\n%s", strings.Join(turns, " "), want, body)
	}
}
