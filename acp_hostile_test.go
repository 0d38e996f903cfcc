package main

// The ACP wire against a hostile model, editor and session file: what the
// model's tools ask the editor for, what the editor answers, what a
// permission request shows, and what session/load, resume and close do
// with a session open already or a file that is not valid.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestACPLoadOfAnInvalidSessionFile: session/load and resume of a session
// whose file has two entries with one id, or whose parentId links loop,
// fail saying why, as rpc's switch_session does: the file, the entry and
// what is wrong with it, not "Internal error". Nothing is opened.
func TestACPLoadOfAnInvalidSessionFile(t *testing.T) {
	e := newTestEnv(t)
	cwd := t.TempDir()
	c, a, _ := startACPAgent(t, e, nil)
	c.call("initialize", map[string]any{"protocolVersion": 1})
	entry := func(id, parent string) string {
		return `{"type":"message","id":"` + id + `","parentId":` + parent + `,"timestamp":"2026-03-16T09:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}` + "\n"
	}
	for _, tt := range []struct {
		id, entries, why string
	}{
		{"1a2b3c4d-0000-4000-8000-000000000001", entry("aaaaaaaa", "null") + entry("bbbbbbbb", `"aaaaaaaa"`) + entry("aaaaaaaa", `"bbbbbbbb"`),
			`two entries have the id "aaaaaaaa", so a parentId naming it could mean either: each entry's id must be unique in its file`},
		{"1a2b3c4d-0000-4000-8000-000000000002", entry("aaaaaaaa", `"bbbbbbbb"`) + entry("bbbbbbbb", `"aaaaaaaa"`),
			"the parentId links from entry aaaaaaaa loop"},
	} {
		path := writeTestSession(t, e.agentDir, cwd, tt.id, 0, "hi")
		header, _, _ := strings.Cut(mustRead(t, path), "\n")
		if err := os.WriteFile(path, []byte(header+"\n"+tt.entries), 0o644); err != nil {
			t.Fatal(err)
		}
		want := &acpError{Code: acpInternalError, Message: "Not a valid session file: " + path + " (" + tt.why + ")"}
		for _, method := range []string{"session/load", "session/resume"} {
			got := c.call(method, map[string]any{"sessionId": tt.id, "cwd": cwd, "mcpServers": []any{}})
			if got.Error == nil || *got.Error != *want {
				t.Errorf("%s of %s: %s\nwant the error %+v", method, filepath.Base(path), got.line, *want)
			}
		}
		if a.isOpen(tt.id) {
			t.Errorf("%s is open", tt.id)
		}
	}
}

// mustRead is the text of the file at path.
func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestACPLatin1AnswerAsTheDiskReadsIt: the text of a Latin-1 file, as an
// editor sends it (bytes that are not UTF-8, in a JSON string), reaches
// the model exactly as read gives that file from the disk (each such
// byte a U+FFFD); the read is answered and the turn ends.
func TestACPLatin1AnswerAsTheDiskReadsIt(t *testing.T) {
	latin1 := "caf\xe9 cr\xe8me br\xfbl\xe9e\n\xff\xfe\n"
	read := `{"toolCalls":[{"id":"c1","name":"read","args":["{\"path\":\"menu.txt\"}"]}]}` + "\n" + `{"text":["done"]}`
	results := map[string]string{}
	for _, via := range []string{"disk", "editor"} {
		e := newTestEnv(t)
		startFakeModel(t, apiOpenAI, read, e.agentDir)
		c, _, _ := startACPAgent(t, e, nil)
		cwd := t.TempDir()
		caps := map[string]any{}
		if via == "disk" {
			os.WriteFile(filepath.Join(cwd, "menu.txt"), []byte(latin1), 0o644)
		} else {
			caps["fs"] = map[string]bool{"readTextFile": true}
		}
		sid := openACPSession(t, c, caps, cwd)
		prompt := c.request("session/prompt", acpTextPrompt(sid, "read"))
		if via == "editor" {
			i := c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "fs/read_text_file" })
			// The file's bytes as they are, in a JSON string.
			c.send(`{"jsonrpc":"2.0","id":` + string(c.messages()[i].ID) + `,"result":{"content":"` + strings.ReplaceAll(latin1, "\n", `\n`) + `"}}`)
		}
		if got := c.responseTo(prompt); string(got.Result) != `{"stopReason":"end_turn"}` {
			t.Fatalf("%s: the prompt: %s", via, got.line)
		}
		for _, m := range c.messages() {
			if u := m.update(); u != nil && u["toolCallId"] == "c1" && u["status"] != nil && u["status"] != "in_progress" {
				out, _ := json.Marshal(u["rawOutput"]) // decoded: \ufffd and U+FFFD alike
				results[via] = fmt.Sprint(u["status"], " ", string(out))
			}
		}
	}
	want := `completed {"content":[{"text":"caf� cr�me br�l�e\n��\n","type":"text"}]}`
	if results["disk"] != want {
		t.Errorf("read from the disk: %s\nwant %s", results["disk"], want)
	}
	if results["editor"] != want {
		t.Errorf("read through the editor: %s\nwant %s", results["editor"], want)
	}
}

// TestACPLeavesALoopsFileAlone: a session file's loops (its loops file:
// a prompt someone else may have written, run on a schedule) are not run
// over ACP, where the editor can neither see nor remove them: a note says
// the file keeps them, once, however often the session is loaded or
// resumed; no prompt runs when they fall due; the file is as it was after
// the session is closed.
func TestACPLeavesALoopsFileAlone(t *testing.T) {
	e := newTestEnv(t)
	clock := newFakeClock()
	e.clock = clock
	fm := startFakeModel(t, apiOpenAI, `{"text":["ran the file's prompt"]}`, e.agentDir)
	cwd := t.TempDir()
	const sid = "1a2b3c4d-0000-4000-8000-0000000000b1"
	path := writeTestSession(t, e.agentDir, cwd, sid, 0, "hi")
	reviewLoopsFile(t, path, clock.Now(), "Run the deploy script")
	before, _ := os.ReadFile(path + ".loops.json")
	c, a, _ := startACPAgent(t, e, nil)
	c.call("initialize", map[string]any{"protocolVersion": 1})
	params := map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}}
	for _, method := range []string{"session/load", "session/load", "session/resume"} {
		from := len(c.messages())
		if got := c.call(method, params); got.Error != nil {
			t.Fatalf("%s: %s", method, got.line)
		}
		c.waitFor(from, func(m acpTestMessage) bool { return strings.Contains(m.line, `"usage_update"`) })
	}
	c.call("session/list", map[string]any{}) // after the last announce's updates
	notes := 0
	for _, m := range c.messages() {
		if strings.Contains(m.line, "This session's file keeps 1 scheduled loop") {
			notes++
		}
	}
	if notes != 1 {
		t.Errorf("%d notes of the loops file, want 1:\n%s", notes, strings.Join(c.lines(), "\n"))
	}
	if n := a.sessions[sid].s.loops.count(); n != 0 {
		t.Errorf("%d loops in the session", n)
	}
	clock.advance(2 * time.Hour)
	time.Sleep(100 * time.Millisecond)
	fm.mu.Lock()
	asked := len(fm.requests)
	fm.mu.Unlock()
	if asked > 0 {
		t.Errorf("the loops file's prompt ran in the editor's session (the model was asked %d times)", asked)
	}
	c.call("session/close", map[string]any{"sessionId": sid})
	if after, _ := os.ReadFile(path + ".loops.json"); !bytes.Equal(after, before) {
		t.Errorf("the loops file changed:\n%s\nwas\n%s", after, before)
	}
}

// TestACPCloseHoldsItsSlotUntilDone: a session being closed counts
// against the connection's acpMaxSessions until its close is done (here
// it waits for a process that ignores SIGTERM), so a client cannot pass
// the limit by closing and opening in a tight loop: a session/new sent
// right behind the close is refused; once the close has answered, one
// opens.
func TestACPCloseHoldsItsSlotUntilDone(t *testing.T) {
	e := newTestEnv(t)
	spawn, _ := json.Marshal(`{"action":"spawn","spec":{"argv":["bash","-c","trap '' TERM; touch started; exec sleep 30"]}}`)
	startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"process","args":[`+string(spawn)+`]}]}`+"\n"+`{"text":["started"]}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	cwd := t.TempDir()
	first := openACPSession(t, c, nil, cwd)
	if got := c.call("session/prompt", acpTextPrompt(first, "start it")); string(got.Result) != `{"stopReason":"end_turn"}` {
		t.Fatalf("the prompt: %s", got.line)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(cwd, "started")); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("the process did not start")
		}
	}
	newSession := map[string]any{"cwd": cwd, "mcpServers": []any{}}
	for n := 1; n < acpMaxSessions; n++ {
		if got := c.call("session/new", newSession); got.Error != nil {
			t.Fatalf("session/new %d: %s", n+1, got.line)
		}
	}
	closing := c.request("session/close", map[string]any{"sessionId": first})
	want := fmt.Sprintf(`"error":{"code":-32603,"message":"Too many sessions open: at most %d on one connection; close one (session/close) and try again"}`, acpMaxSessions)
	if got := c.call("session/new", newSession); !strings.Contains(got.line, want) {
		t.Errorf("session/new while a close waits for its process: %s", got.line)
	}
	if got := c.responseTo(closing); string(got.Result) != "{}" {
		t.Fatalf("the close: %s", got.line)
	}
	if got := c.call("session/new", newSession); got.Error != nil {
		t.Errorf("session/new once the close is done: %s", got.line)
	}
}
