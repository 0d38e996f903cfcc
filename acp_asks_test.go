package main

// Tests of rpi's questions to the client (docs/acp.md): requests withdrawn
// when their turn is cancelled ($/cancel_request), and the model's
// free-text questions asked as forms (elicitation/create).

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestACPWithdrawnRequests: a request rpi gives up on (its context
// ended) is withdrawn with $/cancel_request naming its id, once; the
// client's late answer to it is dropped without a word on stderr, and
// nothing goes back to the client. A request answered before its context
// ended, or waiting when the input ended, is not withdrawn.
func TestACPWithdrawnRequests(t *testing.T) {
	var out, stderr syncBuffer
	c := testACPAgent(t, nil, &out, &stderr).conn
	ask := func(ctx context.Context) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := c.request(ctx, "client/ask", struct{}{})
			done <- err
		}()
		return done
	}
	waitOut := func(text string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), text); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("never written: %s\nthe output:\n%s", text, out.String())
			}
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := ask(ctx)
	waitOut(`"id":0,"method":"client/ask"`)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("a withdrawn request: %v", err)
	}
	cancel()
	c.deliver(&acpMessage{id: json.RawMessage("0"), response: true, result: json.RawMessage(`{}`)})

	ctx, cancel = context.WithCancel(context.Background())
	done = ask(ctx)
	waitOut(`"id":1,"method":"client/ask"`)
	c.deliver(&acpMessage{id: json.RawMessage("1"), response: true, result: json.RawMessage(`{}`)})
	if err := <-done; err != nil {
		t.Errorf("an answered request: %v", err)
	}
	cancel()

	done = ask(context.Background())
	waitOut(`"id":2,"method":"client/ask"`)
	c.close()
	if err := <-done; err != errConnectionClosed {
		t.Errorf("a request waiting when the input ended: %v", err)
	}

	want := `{"jsonrpc":"2.0","id":0,"method":"client/ask","params":{}}
{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":0}}
{"jsonrpc":"2.0","id":1,"method":"client/ask","params":{}}
{"jsonrpc":"2.0","id":2,"method":"client/ask","params":{}}
`
	if got := out.String(); got != want {
		t.Errorf("rpi wrote:\n%swant:\n%s", got, want)
	}
	if got := stderr.String(); got != "" {
		t.Errorf("stderr: %q", got)
	}
	acpSchemaCheck(t, strings.Split(strings.TrimSpace(out.String()), "\n")[1:2], nil)
}

// acpToolText is the text of the first content of the call id's last
// tool_call_update (its result), or "" when there is none.
func acpToolText(c *acpTestClient, id string) string {
	text := ""
	for _, m := range c.messages() {
		var p struct {
			Update struct {
				SessionUpdate string `json:"sessionUpdate"`
				ToolCallID    string `json:"toolCallId"`
				RawOutput     struct {
					Content []struct{ Text string } `json:"content"`
				} `json:"rawOutput"`
			} `json:"update"`
		}
		if m.Method == "session/update" && json.Unmarshal(m.Params, &p) == nil && p.Update.ToolCallID == id &&
			len(p.Update.RawOutput.Content) > 0 {
			text = p.Update.RawOutput.Content[0].Text
		}
	}
	return text
}

// TestACPAskUserAsAForm: with forms offered, the model's free-text
// ask_user is an elicitation/create form, and every answer has its
// outcome: the text accepted (empty too), "The user declined to answer"
// for decline and cancel, and for an answer that does not fit the form
// (no content, no answer, a field besides it, an answer that is not a
// string, an action rpi does not know, a result that is not an object)
// or an error, no answer and why; the turn goes on to its end each time.
func TestACPAskUserAsAForm(t *testing.T) {
	const notFit = "No answer: the editor's answer does not fit the question's form ("
	for _, tt := range []struct {
		result  any
		failure *acpError
		want    string
	}{
		{result: map[string]any{"action": "accept", "content": map[string]any{"answer": "Ada"}}, want: "Ada"},
		{result: map[string]any{"action": "accept", "content": map[string]any{"answer": ""}}, want: ""},
		{result: map[string]any{"action": "decline"}, want: acpDeclined},
		{result: map[string]any{"action": "cancel", "_meta": map[string]any{"why": "closed"}}, want: acpDeclined},
		{result: map[string]any{"action": "accept"}, want: notFit + "it accepts the form without its content). Ask again, or go on without an answer."},
		{result: map[string]any{"action": "accept", "content": map[string]any{}}, want: notFit + "its content has no answer). Ask again, or go on without an answer."},
		{result: map[string]any{"action": "accept", "content": map[string]any{"answer": "Ada", "age": 36}}, want: notFit + `its content has fields the form does not: ["age"]). Ask again, or go on without an answer.`},
		{result: map[string]any{"action": "accept", "content": map[string]any{"answer": []string{"Ada"}}}, want: notFit + "its answer is not a string). Ask again, or go on without an answer."},
		{result: map[string]any{"action": "_later"}, want: notFit + `the action "_later" is none of accept, decline and cancel). Ask again, or go on without an answer.`},
		{result: "Ada", want: notFit + "it is not an object). Ask again, or go on without an answer."},
		{failure: &acpError{Code: acpMethodNotFound, Message: "Method not found"}, want: "No answer: the editor could not ask the question (Method not found). Ask again with options to choose from, or go on without an answer."},
	} {
		e := newTestEnv(t)
		startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"q1","name":"ask_user","args":["{\"question\":\"Your name?\"}"]}]}
{"text":["done"]}`, e.agentDir)
		c, _, _ := startACPAgent(t, e, nil)
		c.answer = func(method string, params json.RawMessage) (any, *acpError) {
			if method != "elicitation/create" {
				t.Errorf("asked %s", method)
			}
			return tt.result, tt.failure
		}
		sid := openACPSession(t, c, map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}, t.TempDir())
		if got := c.call("session/prompt", acpTextPrompt(sid, "Ask me")); stopReasonOf(got.Result) != "end_turn" {
			t.Errorf("%v: the turn: %s", tt.result, got.line)
		}
		if got := acpToolText(c, "q1"); got != tt.want {
			t.Errorf("%v %v: the model is told %q, want %q", tt.result, tt.failure, got, tt.want)
		}
		acpSchemaCheck(t, c.lines(), nil)
	}
}

// TestACPAskUserFormsAndChoices: with forms offered, a multi-line
// question is a form too, shown as rpc's dialogs show text (its lines
// kept, control and format characters escaped) and tied to the call's
// card (here the second card of a repeated id); a question with options
// stays a permission request. Without forms offered (elicitation
// without form, or form not an object), the model is told the user
// cannot type, as before.
func TestACPAskUserFormsAndChoices(t *testing.T) {
	script := `{"toolCalls":[{"id":"q","name":"ask_user","args":["{\"question\":\"Which?\",\"options\":[\"a\",\"b\"]}"]}]}
{"toolCalls":[{"id":"q","name":"ask_user","args":["{\"question\":\"What broke?\\nWhere \\u001b[2K\\u202e?\",\"multiline\":true}"]}]}
{"text":["done"]}`
	for _, tt := range []struct {
		caps    map[string]any
		offered bool
	}{
		{map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}, true},
		{map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}, false},
		{map[string]any{"elicitation": map[string]any{"form": true}}, false},
		{map[string]any{"elicitation": nil}, false},
	} {
		caps := tt.caps
		e := newTestEnv(t)
		startFakeModel(t, apiOpenAI, script, e.agentDir)
		c, _, _ := startACPAgent(t, e, nil)
		var mu sync.Mutex // guards asked and form
		var asked []string
		var form acpElicitation
		c.answer = func(method string, params json.RawMessage) (any, *acpError) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, method)
			if method == "elicitation/create" {
				json.Unmarshal(params, &form)
				return map[string]any{"action": "accept", "content": map[string]any{"answer": "here\nand there"}}, nil
			}
			return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "1"}}, nil
		}
		sid := openACPSession(t, c, caps, t.TempDir())
		if got := c.call("session/prompt", acpTextPrompt(sid, "Ask me")); stopReasonOf(got.Result) != "end_turn" {
			t.Errorf("%v: the turn: %s", caps, got.line)
		}
		mu.Lock()
		methods, form := strings.Join(asked, " "), form
		mu.Unlock()
		if got := acpToolText(c, "q"); got != "b" {
			t.Errorf("%v: the choice: %q", caps, got)
		}
		if !tt.offered {
			if got := acpToolText(c, "q#2"); !strings.HasPrefix(got, "The user cannot type an answer") || methods != "session/request_permission" {
				t.Errorf("%v: asked %s; the model is told %q", caps, methods, got)
			}
			continue
		}
		if methods != "session/request_permission elicitation/create" {
			t.Errorf("%v: asked %s", caps, methods)
		}
		if form.ToolCallID != "q#2" || form.SessionID != sid || form.Message != `What broke?`+"\n"+`Where \x1b[2K\u202e?` {
			t.Errorf("the form: %+v", form)
		}
		if got := acpToolText(c, "q#2"); got != "here\nand there" {
			t.Errorf("the multi-line answer: %q", got)
		}
		acpSchemaCheck(t, c.lines(), nil)
	}
}
