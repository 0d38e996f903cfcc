package main

// The ACP wire against a hostile model, editor and session file: what the
// model's tools ask the editor for, what the editor answers, what a
// permission request shows, and what session/load, resume and close do
// with a session open already or a file that is not valid.

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestACPAskUserShownAsInRPC: ask_user's question and choices reach the
// permission request as rpc's dialog shows text: a carriage return, an
// escape sequence, newlines and a bidi override are escapes, so the
// model cannot rewrite what the editor shows; the choice that goes back
// to the model is the one it gave, as it gave it.
func TestACPAskUserShownAsInRPC(t *testing.T) {
	question := "Deploy?\r\x1b[2KSafe to say yes\n\u202eon"
	choices := []string{"no\rYES", "yes\x1b[8m", "\u202eon\nno"}
	args, _ := json.Marshal(map[string]any{"question": question, "options": choices})
	argsJSON, _ := json.Marshal(string(args))
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"q1","name":"ask_user","args":[`+string(argsJSON)+`]}]}`+"\n"+`{"text":["done"]}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	c.answer = func(string, json.RawMessage) (any, *acpError) {
		return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "2"}}, nil
	}
	sid := openACPSession(t, c, nil, t.TempDir())
	c.call("session/prompt", acpTextPrompt(sid, "ask"))
	var asked struct {
		ToolCall acpToolCallUpdate
		Options  []acpPermissionOption
	}
	var result string
	for _, m := range c.messages() {
		if m.Method == "session/request_permission" {
			json.Unmarshal(m.Params, &asked)
		}
		if u := m.update(); u != nil && u["toolCallId"] == "q1" && u["status"] == "completed" {
			result = m.line
		}
	}
	if want := `Deploy?\r\x1b[2KSafe to say yes\n\u202eon`; asked.ToolCall.Title != want {
		t.Errorf("the question is shown as %q, want %q", asked.ToolCall.Title, want)
	}
	var names []string
	for _, o := range asked.Options {
		names = append(names, o.Name)
	}
	if got, want := strings.Join(names, " | "), `no\rYES | yes\x1b[8m | \u202eon\nno`; got != want {
		t.Errorf("the choices are shown as %q, want %q", got, want)
	}
	if want, _ := json.Marshal(choices[2]); !strings.Contains(result, `"rawOutput":{"content":[{"type":"text","text":`+string(want)+`}]}`) {
		t.Errorf("the model is not given the choice as it gave it: %s", result)
	}
}
