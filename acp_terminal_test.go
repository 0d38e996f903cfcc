package main

// Tests of bash in the editor's terminal (docs/acp.md, "The editor's
// terminal"): the shell option, offered only to a client with terminals;
// the approval gate before the terminal; and a careless or hostile client:
// errors, a wait that never ends, a flood of output, a terminal made after
// the cancel.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// bashCalls is a model script that calls bash once per answer, with each
// of args in turn (c1, c2, …), then answers the texts.
func bashCalls(args []map[string]any, texts ...string) string {
	var lines []string
	for i, a := range args {
		raw, _ := json.Marshal(a)
		quoted, _ := json.Marshal(string(raw))
		lines = append(lines, fmt.Sprintf(`{"toolCalls":[{"id":"c%d","name":"bash","args":[%s]}]}`, i+1, quoted))
	}
	for _, text := range texts {
		quoted, _ := json.Marshal(text)
		lines = append(lines, `{"text":[`+string(quoted)+`]}`)
	}
	return strings.Join(lines, "\n")
}

// commands is bashCalls' args for commands without a timeout.
func commands(cmds ...string) []map[string]any {
	var args []map[string]any
	for _, c := range cmds {
		args = append(args, map[string]any{"command": c})
	}
	return args
}

// setShell sets a session's shell option and fails the test when it is
// refused.
func setShell(t *testing.T, c *acpTestClient, sid, value string) {
	t.Helper()
	if got := c.call("session/set_config_option", map[string]any{"sessionId": sid, "configId": "shell", "value": value}); got.Error != nil {
		t.Fatalf("shell %s: %s", value, got.line)
	}
}

// openEditorShell opens a session for a client with terminals, its
// bash in the editor's terminal.
func openEditorShell(t *testing.T, c *acpTestClient, cwd string) string {
	t.Helper()
	sid := openACPSession(t, c, map[string]any{"terminal": true}, cwd)
	setShell(t, c, sid, "editor")
	return sid
}

// cardEnd is how the card id ended: its status, its rawOutput's text and
// its last update's content (as JSON; "" when it has none).
func cardEnd(c *acpTestClient, id string) (status, text, content string) {
	for _, m := range c.messages() {
		var p struct {
			Update struct {
				SessionUpdate, ToolCallID, Status string
				Content                           json.RawMessage
				RawOutput                         struct{ Content []contentBlock }
			}
		}
		json.Unmarshal(m.Params, &p)
		u := p.Update
		if m.Method == "session/update" && u.ToolCallID == id && (u.Status == "completed" || u.Status == "failed") {
			status, text, content = u.Status, resultText(u.RawOutput.Content), string(u.Content)
		}
	}
	return status, text, content
}

// terminalRequests lists the terminal/* requests the agent made, as
// "method terminalId" (terminal/create as its command).
func terminalRequests(c *acpTestClient) []string {
	var got []string
	for _, m := range c.messages() {
		if !strings.HasPrefix(m.Method, "terminal/") {
			continue
		}
		var p struct {
			TerminalID string
			Args       []string
		}
		json.Unmarshal(m.Params, &p)
		if m.Method == "terminal/create" {
			got = append(got, m.Method+" "+p.Args[len(p.Args)-1])
		} else {
			got = append(got, m.Method+" "+p.TerminalID)
		}
	}
	return got
}

// configIDs are the ids of a session answer's config options, and the
// shell option's value ("" when it has none).
func configIDs(t *testing.T, result json.RawMessage) (ids []string, shell string) {
	t.Helper()
	var answer acpSessionAnswer
	if err := json.Unmarshal(result, &answer); err != nil {
		t.Fatal(err)
	}
	for _, o := range answer.ConfigOptions {
		ids = append(ids, o.ID)
		if o.ID == "shell" {
			shell = o.CurrentValue
		}
	}
	return ids, shell
}

// TestACPShellOptionOnlyWithTerminals: the shell option is offered only
// to a client whose initialize said terminal: true, rpi first; a client
// without terminals cannot set it. Offered and left at rpi, bash runs in
// rpi: no terminal/* request is made.
func TestACPShellOptionOnlyWithTerminals(t *testing.T) {
	t.Run("without terminals", func(t *testing.T) {
		c, _, _ := startACPAgent(t, nil, nil)
		c.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{"terminal": false, "_meta": map[string]bool{"terminal_output": true}}})
		got := c.call("session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}})
		if ids, _ := configIDs(t, got.Result); strings.Join(ids, " ") != "model thought_level approvals" {
			t.Errorf("config options: %v", ids)
		}
		var sid struct{ SessionID string }
		json.Unmarshal(got.Result, &sid)
		set := c.call("session/set_config_option", map[string]any{"sessionId": sid.SessionID, "configId": "shell", "value": "editor"})
		if set.Error == nil || set.Error.Code != acpInvalidParams || set.Error.Message != "Invalid field configId: must be one of model, thought_level, approvals" {
			t.Errorf("shell set without terminals: %s", set.line)
		}
	})
	t.Run("with terminals", func(t *testing.T) {
		e := newTestEnv(t)
		startFakeModel(t, apiOpenAI, bashCalls(commands("echo ran > ran.txt"), "done"), e.agentDir)
		c, _, _ := startACPAgent(t, e, nil)
		c.answer = func(method string, _ json.RawMessage) (any, *acpError) {
			return nil, &acpError{Code: acpInternalError, Message: "unexpected " + method}
		}
		cwd := t.TempDir()
		c.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{"terminal": true}})
		got := c.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
		if ids, shell := configIDs(t, got.Result); strings.Join(ids, " ") != "model thought_level approvals shell" || shell != "rpi" {
			t.Errorf("config options: %v, shell %q", ids, shell)
		}
		var sid struct{ SessionID string }
		json.Unmarshal(got.Result, &sid)
		for value, want := range map[string]string{
			"shell:vim":  "Invalid field value: shell must be one of rpi, editor",
			"shell:":     "Invalid field value: shell must be one of rpi, editor",
			"nope:rpi":   "Invalid field configId: must be one of model, thought_level, approvals, shell",
			"shell:RPI":  "Invalid field value: shell must be one of rpi, editor",
			"shell:rpi ": "Invalid field value: shell must be one of rpi, editor",
		} {
			id, v, _ := strings.Cut(value, ":")
			set := c.call("session/set_config_option", map[string]any{"sessionId": sid.SessionID, "configId": id, "value": v})
			if set.Error == nil || set.Error.Message != want {
				t.Errorf("%s: %s, want %q", value, set.line, want)
			}
		}
		if got := c.call("session/prompt", acpTextPrompt(sid.SessionID, "go")); stopReasonOf(got.Result) != "end_turn" {
			t.Fatalf("the prompt: %s", got.line)
		}
		if data, err := os.ReadFile(filepath.Join(cwd, "ran.txt")); err != nil || string(data) != "ran\n" || len(terminalRequests(c)) > 0 {
			t.Errorf("bash with the shell option at rpi: %q, %v; terminal requests %v", data, err, terminalRequests(c))
		}
	})
}

// TestACPEditorTerminalClientErrors: an error answer to a terminal
// request is the call's error, naming the request and the client's
// message; a terminal that was made is released all the same (an error
// answer to the kill of a call timed out, or to the release, changes
// nothing), and the session goes on: its next prompt runs.
func TestACPEditorTerminalClientErrors(t *testing.T) {
	refuse := &acpError{Code: acpInternalError, Message: "the terminal broke"}
	for _, tt := range []struct {
		name     string
		failing  string // the method answered with refuse
		answer   any    // terminal/create's answer instead of a terminal (nil: term-1)
		status   string
		text     string
		requests string
		terminal bool    // the card shows the terminal
		timeout  float64 // the call's (seconds; 0: none): terminal/wait_for_exit is never answered
	}{
		{"create", "terminal/create", nil, "failed",
			"Cannot run the command in the editor's terminal: terminal/create failed: the terminal broke",
			"terminal/create echo hi", false, 0},
		{"create without an id", "", map[string]any{"terminalId": ""}, "failed",
			"Cannot run the command in the editor's terminal: terminal/create failed: the editor answered terminal/create without a terminalId",
			"terminal/create echo hi", false, 0},
		{"wait", "terminal/wait_for_exit", nil, "failed",
			"Cannot run the command in the editor's terminal: terminal/wait_for_exit failed: the terminal broke",
			"terminal/create echo hi, terminal/wait_for_exit term-1, terminal/release term-1", true, 0},
		{"output", "terminal/output", nil, "failed",
			"Cannot read the command's output from the editor's terminal: terminal/output failed: the terminal broke",
			"terminal/create echo hi, terminal/wait_for_exit term-1, terminal/output term-1, terminal/release term-1", true, 0},
		{"release", "terminal/release", nil, "completed", "hi\n",
			"terminal/create echo hi, terminal/wait_for_exit term-1, terminal/output term-1, terminal/release term-1", true, 0},
		{"kill", "terminal/kill", nil, "failed", "hi\n\n\nCommand timed out after 0.05 seconds",
			"terminal/create echo hi, terminal/wait_for_exit term-1, terminal/kill term-1, terminal/output term-1, terminal/release term-1", true, 0.05},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t)
			call := map[string]any{"command": "echo hi"}
			if tt.timeout > 0 {
				call["timeout"] = tt.timeout
			}
			startFakeModel(t, apiOpenAI, bashCalls([]map[string]any{call}, "done", "again"), e.agentDir)
			c, _, _ := startACPAgent(t, e, nil)
			never := make(chan struct{})
			t.Cleanup(func() { close(never) })
			c.answer = func(method string, _ json.RawMessage) (any, *acpError) {
				switch {
				case method == "terminal/wait_for_exit" && tt.timeout > 0:
					<-never
					return nil, nil
				case method == tt.failing:
					return nil, refuse
				case method == "terminal/create" && tt.answer != nil:
					return tt.answer, nil
				case method == "terminal/create":
					return map[string]string{"terminalId": "term-1"}, nil
				case method == "terminal/wait_for_exit":
					return map[string]any{"exitCode": 0, "signal": nil}, nil
				case method == "terminal/output":
					return map[string]any{"output": "hi\n", "truncated": false}, nil
				}
				return map[string]any{}, nil
			}
			sid := openEditorShell(t, c, t.TempDir())
			if got := c.call("session/prompt", acpTextPrompt(sid, "go")); stopReasonOf(got.Result) != "end_turn" {
				t.Fatalf("the prompt: %s", got.line)
			}
			status, text, content := cardEnd(c, "c1")
			if status != tt.status || text != tt.text {
				t.Errorf("the call ended %s %q, want %s %q", status, text, tt.status, tt.text)
			}
			if shows := strings.Contains(content, `{"type":"terminal","terminalId":"term-1"}`); shows != tt.terminal && content != "" {
				t.Errorf("the card's last content: %s", content)
			}
			if got := strings.Join(terminalRequests(c), ", "); got != tt.requests {
				t.Errorf("terminal requests: %s\nwant %s", got, tt.requests)
			}
			if got := c.call("session/prompt", acpTextPrompt(sid, "and now")); stopReasonOf(got.Result) != "end_turn" {
				t.Errorf("the next prompt: %s", got.line)
			}
		})
	}
}

// TestACPEditorTerminalExitStatus: how the command ended is what
// terminal/wait_for_exit says, as rpi's own bash says it; a field of the
// wrong type or range counts as not given, as the schema's readers take
// it, and an answer that is no exit status at all is the call's error.
func TestACPEditorTerminalExitStatus(t *testing.T) {
	cases := []struct {
		exit   string // wait_for_exit's answer
		status string
		text   string
	}{
		{`{"exitCode":0,"signal":null}`, "completed", "out\n"},
		{`{"exitCode":3}`, "failed", "out\n\n\nCommand exited with code 3"},
		{`{"exitCode":null,"signal":"SIGTERM"}`, "failed", "out\n\n\nCommand was killed by signal SIGTERM"},
		{`{}`, "failed", "out\n\n\nCommand ended without an exit code"},
		{`{"exitCode":-1,"signal":9}`, "failed", "out\n\n\nCommand ended without an exit code"},
		{`{"exitCode":"0","signal":"` + strings.Repeat("S", 100) + `"}`, "failed", "out\n\n\nCommand ended without an exit code"},
		{`{"exitCode":4294967295}`, "failed", "out\n\n\nCommand exited with code 4294967295"}, // 64-bit; see below
		{`{"exitCode":1.5}`, "failed", "out\n\n\nCommand ended without an exit code"},
		{`null`, "failed", "Cannot run the command in the editor's terminal: terminal/wait_for_exit failed: the editor answered terminal/wait_for_exit without an exit status"},
		{`[0]`, "failed", "Cannot run the command in the editor's terminal: terminal/wait_for_exit failed: the editor answered terminal/wait_for_exit without an exit status"},
	}
	if math.MaxInt < 1<<32-1 { // an int cannot hold the largest uint32
		for i, tt := range cases {
			if tt.exit == `{"exitCode":4294967295}` {
				cases[i].text = "out\n\n\nCommand ended without an exit code"
			}
		}
	}
	var cmds []string
	for i := range cases {
		cmds = append(cmds, fmt.Sprintf("case %d", i))
	}
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, bashCalls(commands(cmds...), "done"), e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	c.answer = func(method string, params json.RawMessage) (any, *acpError) {
		var p struct {
			TerminalID string
			Args       []string
		}
		json.Unmarshal(params, &p)
		switch method {
		case "terminal/create":
			return map[string]string{"terminalId": p.Args[1]}, nil // the command names its case
		case "terminal/wait_for_exit":
			var i int
			fmt.Sscanf(p.TerminalID, "case %d", &i)
			return json.RawMessage(cases[i].exit), nil
		case "terminal/output":
			return map[string]any{"output": "out\n", "truncated": false}, nil
		}
		return nil, nil
	}
	sid := openEditorShell(t, c, t.TempDir())
	if got := c.call("session/prompt", acpTextPrompt(sid, "go")); stopReasonOf(got.Result) != "end_turn" {
		t.Fatalf("the prompt: %s", got.line)
	}
	for i, tt := range cases {
		if status, text, _ := cardEnd(c, fmt.Sprintf("c%d", i+1)); status != tt.status || text != tt.text {
			t.Errorf("%s: %s %q, want %s %q", tt.exit, status, text, tt.status, tt.text)
		}
	}
}

// answerTerminalsHolding has c answer terminal/create with the terminal
// id and every other request with {} at once, but for the methods held:
// their answers wait until their channel closes (nil: until the test
// ends).
func answerTerminalsHolding(t *testing.T, c *acpTestClient, id string, held map[string]chan struct{}) {
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	c.answer = func(method string, _ json.RawMessage) (any, *acpError) {
		if wait, ok := held[method]; ok {
			select {
			case <-wait:
			case <-never:
			}
		}
		if method == "terminal/create" {
			return map[string]string{"terminalId": id}, nil
		}
		return map[string]any{}, nil
	}
}

// TestACPEditorTerminalNeverExits: a client that never answers
// terminal/wait_for_exit holds that session's turn, not the connection:
// another session is answered meanwhile; session/cancel ends the turn at
// once (cancelled), then kills and releases the terminal, and the other
// session's prompt runs.
func TestACPEditorTerminalNeverExits(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, bashCalls(commands("sleep 600"), "the other answer"), e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	answerTerminalsHolding(t, c, "stuck", map[string]chan struct{}{"terminal/wait_for_exit": nil})
	sid := openEditorShell(t, c, t.TempDir())
	var other acpSessionAnswer
	json.Unmarshal(c.call("session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}}).Result, &other)
	prompt := c.request("session/prompt", acpTextPrompt(sid, "go"))
	c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "terminal/wait_for_exit" })
	if got := c.call("session/set_config_option", map[string]any{"sessionId": other.SessionID, "configId": "shell", "value": "editor"}); got.Error != nil {
		t.Errorf("the other session, while the command runs: %s", got.line)
	}
	setShell(t, c, other.SessionID, "rpi")
	cancelled := time.Now()
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}`)
	if got := c.responseTo(prompt); stopReasonOf(got.Result) != "cancelled" || time.Since(cancelled) > 2*time.Second {
		t.Errorf("the prompt, cancelled: %s after %v", got.line, time.Since(cancelled))
	}
	c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "terminal/release" })
	if got := strings.Join(terminalRequests(c), ", "); got != "terminal/create sleep 600, terminal/wait_for_exit stuck, terminal/kill stuck, terminal/release stuck" {
		t.Errorf("terminal requests: %s", got)
	}
	if status, text, _ := cardEnd(c, "c1"); status != "failed" || text != "Command aborted" {
		t.Errorf("the call: %s %q", status, text)
	}
	if got := c.call("session/prompt", acpTextPrompt(other.SessionID, "hi")); stopReasonOf(got.Result) != "end_turn" {
		t.Errorf("the other session's prompt: %s", got.line)
	}
}

// cancelWhileWaiting prompts the session, cancels the turn once the
// agent has asked the client method, and checks that the prompt answers
// cancelled.
func cancelWhileWaiting(t *testing.T, c *acpTestClient, sid, method string) {
	t.Helper()
	prompt := c.request("session/prompt", acpTextPrompt(sid, "go"))
	c.waitFor(0, func(m acpTestMessage) bool { return m.Method == method })
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}`)
	if got := c.responseTo(prompt); stopReasonOf(got.Result) != "cancelled" {
		t.Errorf("the prompt, cancelled: %s", got.line)
	}
}

// TestACPEditorTerminalCancelWhileTimingOut: a cancel while the call
// that timed out waits for terminal/kill ends the turn at once and the
// terminal behind it, as a cancel before the timeout does: the kill is
// sent again and the release goes out, neither withdrawn. The release
// was sent and withdrawn ($/cancel_request) at once, so a client that
// honours that kept the terminal.
func TestACPEditorTerminalCancelWhileTimingOut(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, bashCalls([]map[string]any{{"command": "sleep 600", "timeout": 0.05}}), e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	killHeld := make(chan struct{})
	answerTerminalsHolding(t, c, "slow", map[string]chan struct{}{"terminal/wait_for_exit": nil, "terminal/kill": killHeld})
	cancelWhileWaiting(t, c, openEditorShell(t, c, t.TempDir()), "terminal/kill")
	close(killHeld)
	i := c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "terminal/release" })
	release := c.messages()[i].ID
	c.call("session/list", map[string]any{}) // the release's answer is in before this request
	for _, m := range c.messages() {
		var p struct{ RequestID json.RawMessage }
		if json.Unmarshal(m.Params, &p); m.Method == "$/cancel_request" && bytes.Equal(p.RequestID, release) {
			t.Errorf("terminal/release was withdrawn: %s", m.line)
		}
	}
	if got := strings.Join(terminalRequests(c), ", "); got != "terminal/create sleep 600, terminal/wait_for_exit slow, terminal/kill slow, terminal/kill slow, terminal/release slow" {
		t.Errorf("terminal requests: %s", got)
	}
	if status, text, _ := cardEnd(c, "c1"); status != "failed" || text != "Command aborted" {
		t.Errorf("the call: %s %q", status, text)
	}
}

// TestACPEditorTerminalMadeAfterTheCancel: a cancel while terminal/create
// waits for its answer ends the turn at once; the terminal the client
// makes after all is killed and released.
func TestACPEditorTerminalMadeAfterTheCancel(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, bashCalls(commands("echo late")), e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	late := make(chan struct{})
	c.answer = func(method string, _ json.RawMessage) (any, *acpError) {
		if method == "terminal/create" {
			<-late
			return map[string]string{"terminalId": "late-1"}, nil
		}
		return map[string]any{}, nil
	}
	cancelWhileWaiting(t, c, openEditorShell(t, c, t.TempDir()), "terminal/create")
	close(late)
	c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "terminal/release" })
	if got := strings.Join(terminalRequests(c), ", "); got != "terminal/create echo late, terminal/kill late-1, terminal/release late-1" {
		t.Errorf("terminal requests: %s", got)
	}
}

// promptTimesOut prompts the session and checks that the turn ends and
// that its call c1 timed out after secs, with no output.
func promptTimesOut(t *testing.T, c *acpTestClient, sid string, secs float64) {
	t.Helper()
	if got := c.call("session/prompt", acpTextPrompt(sid, "go")); stopReasonOf(got.Result) != "end_turn" {
		t.Fatalf("the prompt: %s", got.line)
	}
	if status, text, _ := cardEnd(c, "c1"); status != "failed" || text != fmt.Sprintf("(no output)\n\nCommand timed out after %g seconds", secs) {
		t.Errorf("the call: %s %q", status, text)
	}
}

// TestACPEditorTerminalCreateTimesOut: a call's timeout holds while the
// client has not yet made the terminal: the call times out as one whose
// command ran too long (it waited for terminal/create for ever), the
// turn goes on, and the terminal the client makes after all is killed
// and released.
func TestACPEditorTerminalCreateTimesOut(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, bashCalls([]map[string]any{{"command": "echo late", "timeout": 0.05}}, "done"), e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	late := make(chan struct{})
	answerTerminalsHolding(t, c, "late-1", map[string]chan struct{}{"terminal/create": late})
	promptTimesOut(t, c, openEditorShell(t, c, t.TempDir()), 0.05)
	close(late)
	c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "terminal/release" })
	if got := strings.Join(terminalRequests(c), ", "); got != "terminal/create echo late, terminal/kill late-1, terminal/release late-1" {
		t.Errorf("terminal requests: %s", got)
	}
}

// TestACPEditorTerminalOutputHeldBack: a call's timeout holds while the
// client, the command ended, does not answer terminal/output: the call
// times out and the terminal is released, where it waited for ever.
func TestACPEditorTerminalOutputHeldBack(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, bashCalls([]map[string]any{{"command": "echo held", "timeout": 0.5}}, "done"), e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	answerTerminalsHolding(t, c, "held-1", map[string]chan struct{}{"terminal/output": nil})
	promptTimesOut(t, c, openEditorShell(t, c, t.TempDir()), 0.5)
	if got := terminalRequests(c); got[len(got)-1] != "terminal/release held-1" {
		t.Errorf("terminal requests: %s", strings.Join(got, ", "))
	}
}

// TestACPEditorTerminalOutputFlood: the client is asked to keep 100 KiB of
// output; one that sends 100 MB in its terminal/output answer fails that
// request (the line limit: rpi never holds it) and so the call, the
// terminal is released and the session goes on; one that sends more than
// it was asked for, within the line limit, is cut as it would have cut,
// and the model gets the tail rpi's bash gives (2000 lines, 50KB), saying
// that the rest was not kept.
func TestACPEditorTerminalOutputFlood(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, bashCalls(commands("yes", "seq 20000"), "done"), e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	cwd := t.TempDir()
	sid := openEditorShell(t, c, cwd)
	prompt := c.request("session/prompt", acpTextPrompt(sid, "go"))
	answer := func(method, result string, n int) { // the nth request of method
		t.Helper()
		i := -1
		for range n {
			i = c.waitFor(i+1, func(m acpTestMessage) bool { return m.Method == method })
		}
		c.send(`{"jsonrpc":"2.0","id":` + string(c.messages()[i].ID) + `,"result":` + result + `}`)
	}
	answer("terminal/create", `{"terminalId":"flood"}`, 1)
	answer("terminal/wait_for_exit", `{"exitCode":0}`, 1)
	i := c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "terminal/output" })
	c.wmu.Lock()
	head := `{"jsonrpc":"2.0","id":` + string(c.messages()[i].ID) + `,"result":{"output":"`
	c.w.Write([]byte(head))
	chunk := bytes.Repeat([]byte("y\\n"), 1<<19) // 1 MiB of y and escaped newlines
	for range 100 {
		c.w.Write(chunk)
	}
	c.w.Write([]byte(`","truncated":false}}` + "\n"))
	c.wmu.Unlock()
	answer("terminal/release", `{}`, 1)

	var lines strings.Builder
	for n := 1; n <= 20000; n++ {
		fmt.Fprintf(&lines, "%d\n", n)
	}
	quoted, _ := json.Marshal(lines.String())
	answer("terminal/create", `{"terminalId":"lines"}`, 2)
	answer("terminal/wait_for_exit", `{"exitCode":0}`, 2)
	answer("terminal/output", `{"output":`+string(quoted)+`,"truncated":false}`, 2)
	answer("terminal/release", `{}`, 2)
	if got := c.responseTo(prompt); stopReasonOf(got.Result) != "end_turn" {
		t.Fatalf("the prompt: %s", got.line)
	}
	if status, text, _ := cardEnd(c, "c1"); status != "failed" ||
		text != fmt.Sprintf("Cannot read the command's output from the editor's terminal: terminal/output failed: the client's answer is longer than %d bytes", maxLineBytes) {
		t.Errorf("100 MB of output: %s %q", status, text)
	}
	var want strings.Builder
	for n := 18001; n <= 20000; n++ {
		fmt.Fprintf(&want, "%d\n", n)
	}
	want.WriteString("\n\n[Showing the last 2000 lines; the output before them was not kept]")
	if status, text, _ := cardEnd(c, "c2"); status != "completed" || text != want.String() {
		t.Errorf("20000 lines: %s, %d bytes, starting %.20q and ending %q", status, len(text), text, text[max(0, len(text)-80):])
	}
	var create struct{ OutputByteLimit int }
	json.Unmarshal(c.messages()[c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "terminal/create" })].Params, &create)
	if create.OutputByteLimit != 100*1024 {
		t.Errorf("outputByteLimit %d", create.OutputByteLimit)
	}
}

// TestACPEditorTerminalBehindTheGate: the approval gate comes first
// wherever bash runs: a rejected call makes no terminal; an allowed one
// runs in the editor's terminal after the permission request. Where a
// call runs is decided when it starts: a call waiting for its approval
// when the shell option changes runs where it would have.
func TestACPEditorTerminalBehindTheGate(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, bashCalls(commands("echo one", "echo two", "echo three > three.txt"), "done"), e.agentDir)
	c, _, _ := startACPAgent(t, e, nil, "--confirm", "bash")
	cwd := t.TempDir()
	choices := make(chan string, 3)
	choices <- "reject"
	choices <- "allow"
	choices <- "allow"
	var sid string
	c.answer = func(method string, _ json.RawMessage) (any, *acpError) {
		switch method {
		case "session/request_permission":
			choice := <-choices
			if len(choices) == 0 { // the third call, started with the shell at rpi
				setShell(t, c, sid, "editor")
			}
			return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": choice}}, nil
		case "terminal/create":
			return map[string]string{"terminalId": "t"}, nil
		case "terminal/wait_for_exit":
			return map[string]any{"exitCode": 0}, nil
		case "terminal/output":
			return map[string]any{"output": "two\n", "truncated": false}, nil
		}
		return map[string]any{}, nil
	}
	sid = openEditorShell(t, c, cwd)
	c.waitFor(0, func(m acpTestMessage) bool { return strings.Contains(m.line, `"config_option_update"`) })
	prompt := c.request("session/prompt", acpTextPrompt(sid, "go"))
	// The second call's turn: back to rpi once the editor ran it.
	c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "terminal/release" })
	setShell(t, c, sid, "rpi")
	if got := c.responseTo(prompt); stopReasonOf(got.Result) != "end_turn" {
		t.Fatalf("the prompt: %s", got.line)
	}
	var order []string
	for _, m := range c.messages() {
		if m.Method == "session/request_permission" || m.Method == "terminal/create" {
			order = append(order, m.Method)
		}
	}
	if got := strings.Join(order, ", "); got != "session/request_permission, session/request_permission, terminal/create, session/request_permission" {
		t.Errorf("the requests: %s", got)
	}
	for id, want := range map[string]string{"c1": "failed Denied by user", "c2": "completed two\n", "c3": "completed (no output)"} {
		if status, text, _ := cardEnd(c, id); status+" "+text != want {
			t.Errorf("%s: %s %q, want %q", id, status, text, want)
		}
	}
	if data, err := os.ReadFile(filepath.Join(cwd, "three.txt")); err != nil || string(data) != "three\n" {
		t.Errorf("the third call, started with the shell at rpi, ran in rpi: %q, %v", data, err)
	}
	if slices.Contains(terminalRequests(c), "terminal/create echo three > three.txt") {
		t.Error("the third call ran in the editor")
	}
}

// TestACPEditorTerminalSessionEnv: the model's bash in the editor's
// terminal, run here for real by the client as an editor runs it (the
// editor's environment, terminal/create's env over it), prints the
// session's variables as the model's bash in rpi prints them, in place of
// the editor's own; terminal/create's env holds those and the agent
// markers only: neither rpi's provider key nor anything it inherited.
func TestACPEditorTerminalSessionEnv(t *testing.T) {
	endToEnd(t)
	const script = `env | grep -E '^(AI_AGENT|PI_CODING_AGENT=|PI_SESSION|PI_PROVIDER|PI_MODEL|PI_REASONING|OPENAI)' | sort`
	e := newTestEnv(t)
	e.vars["OPENAI_API_KEY"] = "sk-never-sent"
	e.vars["PI_SESSION_ID"] = "inherited-by-rpi"
	startFakeModel(t, apiOpenAI, bashCalls(commands(script), "done"), e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	var mu sync.Mutex
	var sent []acpEnv
	var output string
	c.answer = func(method string, params json.RawMessage) (any, *acpError) {
		mu.Lock()
		defer mu.Unlock()
		switch method {
		case "terminal/create":
			var p acpCreateTerminal
			json.Unmarshal(params, &p)
			sent = p.Env
			cmd := exec.Command(p.Command, p.Args...)
			cmd.Dir = p.Cwd
			cmd.Env = append(withoutVariables(os.Environ(), hiddenVars), "PI_SESSION_ID=the-editors", "AI_AGENT=editor")
			for _, v := range p.Env {
				cmd.Env = append(cmd.Env, v.Name+"="+v.Value)
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("the command: %v\n%s", err, out)
			}
			output = string(out)
			return map[string]string{"terminalId": "t1"}, nil
		case "terminal/wait_for_exit":
			return map[string]any{"exitCode": 0}, nil
		case "terminal/output":
			return map[string]any{"output": output, "truncated": false}, nil
		}
		return map[string]any{}, nil
	}
	sid := openEditorShell(t, c, t.TempDir())
	if got := c.call("session/prompt", acpTextPrompt(sid, "go")); stopReasonOf(got.Result) != "end_turn" {
		t.Fatalf("the prompt: %s", got.line)
	}
	files, _ := filepath.Glob(filepath.Join(e.agentDir, "sessions", "*", "*_"+sid+".jsonl"))
	if len(files) != 1 {
		t.Fatalf("the session's files: %v", files)
	}
	want := "AI_AGENT=rpi\nPI_CODING_AGENT=true\nPI_MODEL=fake-model\nPI_PROVIDER=fake\nPI_REASONING_LEVEL=medium\n" +
		"PI_SESSION_FILE=" + files[0] + "\nPI_SESSION_ID=" + sid + "\n"
	if _, text, _ := cardEnd(c, "c1"); text != want {
		t.Errorf("the command printed\n%s\nwant\n%s", text, want)
	}
	mu.Lock()
	defer mu.Unlock()
	var names []string
	for _, v := range sent {
		names = append(names, v.Name)
	}
	if got := strings.Join(names, " "); got != "AI_AGENT PI_CODING_AGENT PI_SESSION_ID PI_SESSION_FILE PI_PROVIDER PI_MODEL PI_REASONING_LEVEL" {
		t.Errorf("terminal/create's env names %s", got)
	}
}

// TestACPEditorTerminalSessionClosed: session/close while the model's
// command runs in the editor's terminal ends the terminal as a cancel
// does: terminal/kill and terminal/release go out and neither is
// withdrawn ($/cancel_request), though the session is gone before the
// client answers them: a client that honours the withdrawal would keep
// the command running.
func TestACPEditorTerminalSessionClosed(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, bashCalls(commands("sleep 600")), e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	killHeld := make(chan struct{})
	answerTerminalsHolding(t, c, "open", map[string]chan struct{}{"terminal/wait_for_exit": nil, "terminal/kill": killHeld})
	sid := openEditorShell(t, c, t.TempDir())
	prompt := c.request("session/prompt", acpTextPrompt(sid, "go"))
	c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "terminal/wait_for_exit" })
	if got := c.call("session/close", map[string]any{"sessionId": sid}); got.Error != nil {
		t.Fatalf("session/close: %s", got.line)
	}
	if got := c.responseTo(prompt); stopReasonOf(got.Result) != "cancelled" {
		t.Errorf("the prompt: %s", got.line)
	}
	close(killHeld)
	i := c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "terminal/release" })
	release := c.messages()[i].ID
	c.call("session/list", map[string]any{}) // the release's answer is in before this request
	withdrawn := map[string]bool{}
	for _, m := range c.messages() {
		var p struct{ RequestID json.RawMessage }
		if json.Unmarshal(m.Params, &p); m.Method == "$/cancel_request" {
			withdrawn[string(p.RequestID)] = true
		}
	}
	for _, m := range c.messages() {
		if (m.Method == "terminal/kill" || m.Method == "terminal/release") && withdrawn[string(m.ID)] {
			t.Errorf("%s was withdrawn: %s", m.Method, m.line)
		}
	}
	if !slices.Contains(terminalRequests(c), "terminal/kill open") || withdrawn[string(release)] {
		t.Errorf("terminal requests: %s", strings.Join(terminalRequests(c), ", "))
	}
}

// TestACPEditorTerminalMadeAfterTheClose: session/close while
// terminal/create waits for its answer: the terminal the client makes
// after all (a client may ignore $/cancel_request, and answer) is killed
// and released, as one made after a cancel is, not left running the
// command with no one to end it.
func TestACPEditorTerminalMadeAfterTheClose(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, bashCalls(commands("echo late")), e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	late := make(chan struct{})
	answerTerminalsHolding(t, c, "late-1", map[string]chan struct{}{"terminal/create": late})
	sid := openEditorShell(t, c, t.TempDir())
	prompt := c.request("session/prompt", acpTextPrompt(sid, "go"))
	c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "terminal/create" })
	if got := c.call("session/close", map[string]any{"sessionId": sid}); got.Error != nil {
		t.Fatalf("session/close: %s", got.line)
	}
	if got := c.responseTo(prompt); stopReasonOf(got.Result) != "cancelled" {
		t.Errorf("the prompt: %s", got.line)
	}
	close(late)
	c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "terminal/release" })
	if got := strings.Join(terminalRequests(c), ", "); got != "terminal/create echo late, terminal/kill late-1, terminal/release late-1" {
		t.Errorf("terminal requests: %s", got)
	}
}
