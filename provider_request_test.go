package main

// What rpi sends a model server: each test runs a real local HTTP server
// that keeps the request and refuses it, and calls it through callModel,
// as the agent does, with a conversation a client, a project or another
// model made.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// sentBody is the body of the request callModel makes of history for m
// (its BaseURL set to a local server's), as the server received it.
func sentBody(t *testing.T, m *model, history []any) string {
	t.Helper()
	var mu sync.Mutex
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		mu.Lock()
		body = data
		mu.Unlock()
		http.Error(w, "kept", http.StatusBadRequest)
	}))
	defer srv.Close()
	c := *m
	c.BaseURL = srv.URL
	c.MaxTokens = max(c.MaxTokens, 1000)
	msg := &assistantMessage{Role: "assistant", Content: []contentBlock{}}
	callModel(context.Background(), streamRequest{model: &c, messages: history, thinking: "medium", secrets: newRedactor(nil)},
		msg, func() {}, func(assistantEvent) {})
	mu.Lock()
	defer mu.Unlock()
	if !json.Valid(body) {
		t.Fatalf("%s: the request is not JSON: %.300s", m.API, body)
	}
	return string(body)
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
// Mistral after set_model holds the tool call ids other servers made —
// Kimi's "functions.read:0", an id a local server left empty, Anthropic's
// "toolu_…" — and each went back as it was: Anthropic refuses a tool_use
// id outside ^[a-zA-Z0-9_-]+$ and Mistral one that is not nine letters and
// digits, so every later request of the session failed with a 400. Now
// each id goes in the form the API takes, the same for a call and its
// result, and two ids stay two.
func TestForeignToolCallIDs(t *testing.T) {
	ids := []string{"functions.read:0", "", "toolu_01A09q90qw90lq917835lq9", "call_1|fc_1", strings.Repeat("x", 80), "functions.read.0"}
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
