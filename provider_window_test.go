package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
)

// windowHistory is a conversation whose last answer reported tokens of
// context, followed by a prompt of 4 characters (2 tokens by pi's
// estimate); 0 tokens is a conversation of one short prompt.
func windowHistory(tokens int) []any {
	if tokens == 0 {
		return []any{&userMessage{Role: "user", Content: textBlocks("Hi"), Timestamp: 1}}
	}
	return []any{
		&userMessage{Role: "user", Content: textBlocks("Hi"), Timestamp: 1},
		&assistantMessage{Role: "assistant", API: apiOpenAI, Provider: "other", Model: "other", StopReason: "stop",
			Content: textBlocks("Hello."), Usage: usage{Input: tokens - 10, Output: 10, TotalTokens: tokens}, Timestamp: 2},
		&userMessage{Role: "user", Content: textBlocks("next"), Timestamp: 3},
	}
}

// sentMaxTokens is the answer's token limit in a request body: max_tokens,
// max_output_tokens or generationConfig.maxOutputTokens.
func sentMaxTokens(t *testing.T, body string) int {
	t.Helper()
	var sent struct {
		MaxTokens        *int `json:"max_tokens"`
		MaxOutputTokens  *int `json:"max_output_tokens"`
		GenerationConfig struct {
			MaxOutputTokens *int `json:"maxOutputTokens"`
		} `json:"generationConfig"`
	}
	json.Unmarshal([]byte(body), &sent)
	for _, n := range []*int{sent.MaxTokens, sent.MaxOutputTokens, sent.GenerationConfig.MaxOutputTokens} {
		if n != nil {
			return *n
		}
	}
	t.Fatalf("no token limit in the request:\n%.1000s", body)
	return 0
}

// TestAnswerWithinTheWindow: every API asks for the model's maxTokens
// (64000) lowered so that the input and the answer fit its window
// (200000), as pi 1.6 asks: the input is the last answer's reported
// usage and pi's estimate of what came after (here 2 tokens), the margin
// 15% of it (at least 4096) while that leaves 32768 for the answer, else
// 4096 and the answer at most 32768. A short conversation keeps 64000; at
// 150,002 tokens the answer gets 32768; at 180,002 it gets 15902 (rpi
// asked 64000, which Anthropic refused: input and max_tokens over the
// window); a full window leaves 1 (the Responses API its least, 16). What
// rpi keeps of the answer is counted from the same number.
func TestAnswerWithinTheWindow(t *testing.T) {
	models := []*model{
		{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic"},
		{ID: "some-model", API: apiOpenAI, Provider: "local"},
		{ID: "gpt-5", API: apiResponses, Provider: "openai"},
		{ID: "gemini-2.5-flash", API: apiGoogle, Provider: "google"},
	}
	for _, m := range models {
		m.ContextWindow, m.MaxTokens = 200000, 64000
		for _, c := range []struct{ used, want int }{{0, 64000}, {100000, 64000}, {150000, 32768}, {180000, 15902}, {199000, 1}} {
			want := c.want
			if m.API == apiResponses {
				want = max(want, 16)
			}
			req := streamRequest{model: m, messages: windowHistory(c.used), thinking: "off"}
			if got := sentMaxTokens(t, sentRequest(t, m, req)); got != want {
				t.Errorf("%s, %d tokens used: the answer's limit is %d, want %d", m.API, c.used, got, want)
			}
			if kept := wireAPINamed(m.API).maxTokens(req); kept != want {
				t.Errorf("%s, %d tokens used: rpi keeps an answer of %d tokens, asked for %d", m.API, c.used, kept, want)
			}
		}
	}
}

// TestWindowWithoutAWindow: a model whose window is not known (0) asks
// for its maxTokens whatever the conversation holds, as pi asks.
func TestWindowWithoutAWindow(t *testing.T) {
	m := &model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic", MaxTokens: 64000}
	if got := sentMaxTokens(t, sentBodyAt(t, m, windowHistory(10_000_000), "off")); got != 64000 {
		t.Errorf("the answer's limit is %d, want 64000", got)
	}
}

// TestThinkingWithinTheWindow: the thinking budget fits in what the window
// leaves, as pi fits it: Anthropic's budget_tokens and a Chat Completions
// host's budget field are at most max_tokens less 1024 for the answer
// (high's 16384 becomes 14878 of 15902). Where that is below 1024,
// Anthropic's least budget, Anthropic is asked without thinking (pi sends
// 1024 or the little left, which Anthropic refuses: budget_tokens must be
// at least 1024 and below max_tokens); the host's field gets what is left.
// Gemini's budget is not fitted, as in pi.
func TestThinkingWithinTheWindow(t *testing.T) {
	claude := &model{ID: "claude-sonnet-4-5", API: apiAnthropic, Provider: "anthropic", Reasoning: true}
	vllm := &model{ID: "qwen3", API: apiOpenAI, Provider: "local", Reasoning: true,
		compat: compat{ThinkingFormat: "openai", ThinkingTokenBudgetField: "thinking_budget"}}
	flash := &model{ID: "gemini-2.5-flash", API: apiGoogle, Provider: "google", Reasoning: true}
	for _, m := range []*model{claude, vllm, flash} {
		m.ContextWindow, m.MaxTokens = 200000, 64000
	}
	for _, c := range []struct {
		m     *model
		used  int
		want  []string
		never string
	}{
		{claude, 0, []string{`"max_tokens":64000`, `"thinking":{"budget_tokens":16384,"display":"summarized","type":"enabled"}`}, ""},
		{claude, 180000, []string{`"max_tokens":15902`, `"thinking":{"budget_tokens":14878,"display":"summarized","type":"enabled"}`}, ""},
		{claude, 194000, []string{`"max_tokens":1902`}, `"thinking"`},
		{claude, 199000, []string{`"max_tokens":1,`}, `"thinking"`},
		{vllm, 0, []string{`"max_tokens":64000`, `"thinking_budget":16384`}, ""},
		{vllm, 180000, []string{`"max_tokens":15902`, `"thinking_budget":14878`}, ""},
		{vllm, 194000, []string{`"max_tokens":1902`, `"thinking_budget":878`}, ""},
		{vllm, 199000, []string{`"max_tokens":1,`}, `"thinking_budget"`},
		{flash, 180000, []string{`"maxOutputTokens":15902`, `"thinkingBudget":24576`}, ""},
	} {
		body := sentBodyAt(t, c.m, windowHistory(c.used), "high")
		for _, w := range c.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s, %d tokens used: request lacks %s:\n%.1500s", c.m.API, c.used, w, body)
			}
		}
		if c.never != "" && strings.Contains(body, c.never) {
			t.Errorf("%s, %d tokens used: request has %s:\n%.1500s", c.m.API, c.used, c.never, body)
		}
	}
}

// TestInputEstimate: rpi's estimate of a request's input is pi 1.6's
// (estimateContextTokens), each message apart, rounded up, at 3.5
// characters a token (UTF-16 code units, as JavaScript counts them: 😀 is
// two), an image as 4800 characters (or the text it becomes when images
// are blocked), an answer as its text, thinking, and each tool call's name
// and compact arguments; the system prompt and the tools' JSON (name,
// description, parameters) count apart. With an answer that reported its
// usage (its total, else the sum of its parts), that usage is the
// conversation up to it and only what follows is estimated: not a failed
// answer's usage (its text counts), nor that of an answer older than a
// message before it (one kept across a compaction, after the summary).
func TestInputEstimate(t *testing.T) {
	read := &tool{name: "read", description: "Read a file", schema: json.RawMessage(`{ "type": "object" }`)}
	image := contentBlock{Type: "image", MimeType: "image/png", Data: "AAAA"}
	answer := &assistantMessage{Role: "assistant", StopReason: "toolUse", Timestamp: 5, Content: []contentBlock{
		{Type: "text", Text: "ab"}, {Type: "thinking", Thinking: "cd"},
		{Type: "toolCall", ID: "c1", Name: "read", Arguments: json.RawMessage(`{ "path": "a" }`)}}} // 2+2+4+12 characters
	reported := *answer
	reported.Usage = usage{Input: 100, Output: 20, CacheRead: 30}
	failed := &assistantMessage{Role: "assistant", StopReason: "error", Timestamp: 7, Content: textBlocks("1234567"), Usage: usage{TotalTokens: 999}}
	result := &toolResultMessage{Role: "toolResult", ToolCallID: "c1", ToolName: "read", Content: textBlocks("xxxxxxx"), Timestamp: 6}
	prompt := &userMessage{Role: "user", Content: []contentBlock{{Type: "text", Text: "héllo 😀"}, image}, Timestamp: 1} // 8 characters and an image
	custom := func(at int) rawMessage {
		return rawMessage(fmt.Sprintf(`{"role":"custom","customType":"note","content":"abcdefg","display":true,"timestamp":%d}`, at))
	}
	for _, c := range []struct {
		name string
		req  streamRequest
		want int
	}{
		{"system and tools", streamRequest{system: "You are.", tools: []*tool{read}}, 3 + 22},
		{"messages", streamRequest{system: "You are.", messages: []any{prompt, answer, result}}, 3 + 1374 + 6 + 2},
		{"images blocked", streamRequest{messages: []any{prompt}, blockImages: true}, 10},
		{"reported usage", streamRequest{system: "You are.", tools: []*tool{read}, messages: []any{prompt, &reported, result}}, 150 + 2},
		{"failed answer", streamRequest{messages: []any{prompt, &reported, result, failed}}, 150 + 2 + 2},
		{"custom message", streamRequest{messages: []any{custom(1), &reported}}, 150},
		{"kept across a compaction", streamRequest{messages: []any{custom(9), &reported, result}}, 2 + 6 + 2},
	} {
		if got := inputTokens(c.req); got != c.want {
			t.Errorf("%s: %d tokens, want %d", c.name, got, c.want)
		}
	}
}

// TestFitWindow: pi's arithmetic at its edges: the 15% margin while it
// leaves 32768, then 4096 and at most 32768, at least 1, a model's
// maxTokens when it is less, and a window not known.
func TestFitWindow(t *testing.T) {
	for _, c := range []struct{ window, input, maxTokens, want int }{
		{200000, 0, 64000, 64000},
		{200000, 130000, 64000, 50500},    // the 15% margin, 19500
		{200000, 140000, 64000, 39000},    // the 15% margin, 21000
		{200000, 160000, 64000, 32768},    // 24000 would leave 16000: 4096 then, at most 32768
		{200000, 170000, 64000, 25904},    // 4096
		{200000, 196000, 64000, 1},        // nothing left
		{128000, 0, 128000, 123904},       // a maxTokens of the whole window
		{32768, 10000, 16384, 16384},      // a small window: 4096 leaves 18672
		{32768, 20000, 16384, 8672},       // 4096 leaves 8672
		{0, 500000, 64000, 64000},         // no window
		{0, 0, 0, 1},                      // no window, no maxTokens
		{1000000, 400001, 128000, 128000}, // the margin rounds up: 60001 leaves 539998
		{1000000, 800000, 128000, 80000},  // the 15% margin, 120000
	} {
		if got := fitWindow(c.window, c.input, c.maxTokens); got != c.want {
			t.Errorf("fitWindow(%d, %d, %d) = %d, want %d", c.window, c.input, c.maxTokens, got, c.want)
		}
	}
}

// TestNearlyFullWindowAnswer: a request the window lowered to one token
// gets the server's answer and its length stop, on every API that asks
// for so few: rpi counts what it keeps of an answer from a short answer's
// tokens of the model's own (2048) at least, where the one token's 32
// bytes were passed by the answer's first block and cut it as a server
// that sent more than asked.
func TestNearlyFullWindowAnswer(t *testing.T) {
	m := &model{ID: "some-model", API: apiOpenAI, Provider: "local", ContextWindow: 200000, MaxTokens: 64000}
	handler := openRouterSSE(
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hm"},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`)
	srv := httptest.NewServer(handler)
	defer srv.Close()
	m.BaseURL = srv.URL
	req := streamRequest{model: m, messages: windowHistory(199000), thinking: "off", secrets: newRedactor(nil)}
	if asked := wireAPINamed(m.API).maxTokens(req); asked != 1 {
		t.Fatalf("the request asks for %d tokens, want 1", asked)
	}
	msg := &assistantMessage{Role: "assistant", API: m.API, Provider: m.Provider, Model: m.ID, Content: []contentBlock{}}
	err := callModel(context.Background(), req, msg, func() {}, func(assistantEvent) {})
	if err != nil || msg.StopReason != "length" || len(msg.Content) != 1 || msg.Content[0].Text != "Hm" {
		t.Errorf("error %v, stopReason %q, content %+v; want the answer \"Hm\" and a length stop", err, msg.StopReason, msg.Content)
	}
}

// TestHugeReportedContext: an answer whose server reported a context of
// the largest int (a hostile or broken server) leaves the next request
// 1 token, as pi's arithmetic leaves it: the input is over the window.
// rpi's sums wrapped past the ends of int: the margin taken from the
// window turned the room positive, and the estimate of the messages
// after the answer, added to it, turned the input negative; either way
// the request asked for the model's whole maxTokens.
func TestHugeReportedContext(t *testing.T) {
	for _, c := range []struct{ window, input, maxTokens, want int }{
		{200000, math.MaxInt, 64000, 1},
		{200000, math.MaxInt - 5, 64000, 1},
		{math.MaxInt, math.MaxInt, 64000, 1},
	} {
		if got := fitWindow(c.window, c.input, c.maxTokens); got != c.want {
			t.Errorf("fitWindow(%d, %d, %d) = %d, want %d", c.window, c.input, c.maxTokens, got, c.want)
		}
	}
	m := &model{ID: "some-model", API: apiOpenAI, Provider: "local", ContextWindow: 200000, MaxTokens: 64000}
	for _, total := range []int{math.MaxInt, math.MaxInt - 1} {
		req := streamRequest{model: m, messages: windowHistory(total), thinking: "off"}
		if in := inputTokens(req); in != math.MaxInt {
			t.Errorf("a reported context of %d and a prompt after it: an input of %d tokens, want %d", total, in, math.MaxInt)
		}
		if asked := answerTokens(req); asked != 1 {
			t.Errorf("a reported context of %d: the request asks for %d tokens, want 1", total, asked)
		}
	}
}
