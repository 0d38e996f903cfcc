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
	"slices"
	"strings"
	"sync"
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
		if got := c.responseTo(prompt); stopReasonOf(got.Result) != "end_turn" {
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
	writeDueLoopsFile(t, path, clock.Now(), "Run the deploy script")
	before, _ := os.ReadFile(path + ".loops.json")
	c, a, _ := startACPAgent(t, e, nil)
	c.call("initialize", map[string]any{"protocolVersion": 1})
	params := map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}}
	for _, method := range []string{"session/load", "session/load", "session/resume"} {
		from := len(c.messages())
		if got := c.call(method, params); got.Error != nil {
			t.Fatalf("%s: %s", method, got.line)
		}
		last := `"usage_update"` // the last of a load's announcement, or the note when it opens the session
		if from == 1 {
			last = "scheduled loop"
		}
		c.waitFor(from, func(m acpTestMessage) bool { return strings.Contains(m.line, last) })
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
// against the connection's maxSessions until its close is done (here
// it waits for a process that ignores SIGTERM), so a client cannot pass
// the limit by closing and opening in a tight loop: a session/new sent
// right behind the close is refused; once the close has answered, one
// opens.
func TestACPCloseHoldsItsSlotUntilDone(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	spawn, _ := json.Marshal(`{"action":"spawn","spec":{"argv":["bash","-c","trap '' TERM; touch started; exec sleep 30"]}}`)
	startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"process","args":[`+string(spawn)+`]}]}`+"\n"+`{"text":["started"]}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	cwd := t.TempDir()
	first := openACPSession(t, c, nil, cwd)
	if got := c.call("session/prompt", acpTextPrompt(first, "start it")); stopReasonOf(got.Result) != "end_turn" {
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
	for n := 1; n < maxSessions; n++ {
		if got := c.call("session/new", newSession); got.Error != nil {
			t.Fatalf("session/new %d: %s", n+1, got.line)
		}
	}
	closing := c.request("session/close", map[string]any{"sessionId": first})
	want := fmt.Sprintf(`"error":{"code":-32603,"message":"Too many sessions open: at most %d on one connection; close one (session/close) and try again"}`, maxSessions)
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

// openSessionOf is the session sid open on a's connection.
func openSessionOf(t *testing.T, a *acpAgent, sid string) *acpSession {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	as := a.sessions[sid]
	if as == nil {
		t.Fatalf("session %s is not open", sid)
	}
	return as
}

// writeDueLoopsFile writes a loops file beside the session file at path
// with one durable loop of prompt, due at once (it was created an hour
// ago, every hour).
func writeDueLoopsFile(t *testing.T, path string, now time.Time, prompt string) {
	t.Helper()
	p, _ := json.Marshal(prompt)
	loops := `{"version":1,"tasks":[{"id":"0123456789ab","intervalSecs":3600,"prompt":` + string(p) + `,"durable":true,` +
		`"createdAt":"` + timestamp(now.Add(-2*time.Hour)) + `","lastFiredAt":null,"expiresAt":"` + timestamp(now.Add(24*time.Hour)) + `","runCount":0}]}`
	if err := os.WriteFile(path+".loops.json", []byte(loops), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestACPPromptAfterCancellingACoreRun: a run of the
// core's own, with no session/prompt (a loop's fire; rpi acp runs no
// loops of a file, but the core may run one). The user cancels it and
// sends the next message in the same write, as Zed does. That prompt is
// never answered: session/cancel counts only the turns of prompts
// (acpSession.turns), so it does not make the next prompt wait for the
// stopping run; the prompt is queued as a follow-up behind a run that is
// being aborted, which settles without taking it, and it sits in the
// core's queue until some later prompt's run ends (then it runs after
// that one, out of order). docs/acp.md: "A prompt that comes after the
// cancel ... waits for the cancelled turn to end, then runs".
func TestACPPromptAfterCancellingACoreRun(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"text":["the loop's answer"],"holdAt":1}
{"text":["the answer to the prompt"]}`, e.agentDir)
	c, a, _ := startACPAgent(t, e, nil)
	sid := openACPSession(t, c, nil, t.TempDir())
	s := openSessionOf(t, a, sid).s
	if _, err := s.addLoop("1h", "Report", true, false); err != nil { // a run of the core's own, not a prompt's
		t.Fatal(err)
	}
	s.fireDueLoops()
	fm.waitAsked(t, 1)
	line, _ := appendACPCall(nil, json.RawMessage("90"), "session/prompt", acpTextPrompt(sid, "something else"))
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}` + "\n" + string(line))
	if got := c.responseTo(json.RawMessage("90")); stopReasonOf(got.Result) != "end_turn" {
		t.Errorf("the prompt sent after the cancel of the loop's run: %s", got.line)
	}
}

// TestACPCompactWaitsForACoreRun: /compact sent while a loop's run
// streams stops that run (session.compact aborts whatever runs), where
// docs/acp.md says "A /compact sent while turns run comes after them ...
// the running turn ... end[s] as the model ends [it]": ACP's wait before a
// compaction (acpSession.waitTurns) counts only the turns of prompts, not
// a loop's. The loop's answer is cut off and never shown.
func TestACPCompactWaitsForACoreRun(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"text":["`+strings.Repeat("one ", 200)+`"]}
{"text":["`+strings.Repeat("two ", 200)+`"]}
{"text":["the loop's ","answer"],"holdAt":2}
{"text":["a summary"]}`, e.agentDir)
	c, a, _ := startACPAgent(t, e, nil)
	sid := openACPSession(t, c, nil, t.TempDir())
	c.call("session/prompt", acpTextPrompt(sid, "one"))
	c.call("session/prompt", acpTextPrompt(sid, "two"))
	s := openSessionOf(t, a, sid).s
	if _, err := s.addLoop("1h", "Report", true, false); err != nil { // as loop_create does, or a restored loop due
		t.Fatal(err)
	}
	s.fireDueLoops()
	c.waitFor(0, func(m acpTestMessage) bool { return strings.Contains(m.line, `"text":"the loop's "`) })
	compact := c.request("session/prompt", acpTextPrompt(sid, "/compact"))
	time.Sleep(100 * time.Millisecond) // were the compaction to wait, it would wait now
	fm.release <- struct{}{}
	c.responseTo(compact)
	streamed := false
	for _, m := range c.messages() {
		streamed = streamed || strings.Contains(m.line, `"text":"answer"`)
	}
	if !streamed {
		t.Errorf("/compact stopped the loop's running turn: its answer was cut off\n%s", strings.Join(c.lines(), "\n"))
	}
}

// TestACPEditorIsNotGivenProcSelfPaths: the editor opens a path as
// its own process, so a path through /proc/self (or /proc/thread-self,
// /dev/fd) names another file for it than for rpi. rpi checks
// /proc/self/cwd/<name> in its own working directory (a regular file: let
// through) and asks the editor for that very path, which the editor
// resolves in its own working directory: the read returns another file
// (with the editor's cwd "/", /proc/self/cwd/proc/self/environ is the
// editor's environment, the leak docs/acp.md says is closed, once a
// regular file proc/self/environ exists in rpi's directory: a cloned
// repository can ship one). A write is worse: the permission request says
// "Write /proc/self/cwd/x → <rpi's directory>/x" and the editor writes x in
// its own directory.
func TestACPEditorIsNotGivenProcSelfPaths(t *testing.T) {
	if _, err := os.Stat("/proc/self/root/proc"); err != nil {
		t.Skip("no /proc/self/root here")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "in.txt"), []byte("on disk"), 0o644)
	through := "/proc/self/root" + dir // rpi's root: the editor's may be another
	read, _ := json.Marshal(map[string]string{"path": through + "/in.txt"})
	write, _ := json.Marshal(map[string]string{"path": through + "/out.txt", "content": "x"})
	readArgs, _ := json.Marshal(string(read))
	writeArgs, _ := json.Marshal(string(write))
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"read","args":[`+string(readArgs)+`]}]}
{"toolCalls":[{"id":"c2","name":"write","args":[`+string(writeArgs)+`]}]}
{"text":["done"]}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil, "--confirm", "write")
	c.answer = func(method string, params json.RawMessage) (any, *acpError) {
		switch method {
		case "fs/read_text_file":
			return map[string]string{"content": "the editor's file"}, nil
		case "fs/write_text_file":
			return nil, nil
		}
		return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "allow"}}, nil
	}
	sid := openACPSession(t, c, map[string]any{"fs": map[string]bool{"readTextFile": true, "writeTextFile": true}}, t.TempDir())
	c.call("session/prompt", acpTextPrompt(sid, "go"))
	asked := 0
	for _, m := range c.messages() {
		if !strings.HasPrefix(m.Method, "fs/") {
			continue
		}
		asked++
		var p struct{ Path string }
		json.Unmarshal(m.Params, &p)
		if strings.HasPrefix(p.Path, "/proc/") {
			t.Errorf("%s asks the editor for %s: the editor resolves /proc/self in itself, not where rpi checked it", m.Method, p.Path)
		}
	}
	if asked < 2 {
		t.Errorf("the editor was asked %d times, not for the read and the write:\n%s", asked, strings.Join(c.lines(), "\n"))
	}
}

// TestACPListIsOfThatDirectoryOnly: session/list {cwd} is "the
// sessions of cwd" (docs/acp.md), but its folder name is cwd with every
// "/" made "-", so /x/a/b and /x/a-b share a folder and session/list for
// /x/a-b lists the sessions of /x/a/b (Zed shows them in that project's
// history, and loads them there, in the wrong directory). The rows are
// not filtered by their own cwd.
func TestACPListIsOfThatDirectoryOnly(t *testing.T) {
	root := t.TempDir()
	nested, dashed := filepath.Join(root, "a", "b"), filepath.Join(root, "a-b")
	for _, dir := range []string{nested, dashed} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c, _, _ := startACPAgent(t, nil, nil)
	sid := openACPSession(t, c, nil, nested)
	var page acpListPage
	got := c.call("session/list", map[string]any{"cwd": dashed})
	if err := json.Unmarshal(got.Result, &page); err != nil {
		t.Fatalf("session/list: %s", got.line)
	}
	for _, row := range page.Sessions {
		if row.Cwd != dashed {
			t.Errorf("session/list of %s lists %s, a session of %s", dashed, row.SessionID, row.Cwd)
		}
	}
	_ = sid
}

// TestACPCommandMenuNamesWhatRuns: a prompt template named compact
// (or name) is listed in the / menu (available_commands_update) beside
// rpi's own /compact, two entries with one name; choosing the template's
// runs rpi's command (acpOwnCommand comes first), never the template.
// Zed rejects a prompt with an unadvertised /name, so what is advertised
// should be what runs.
func TestACPCommandMenuNamesWhatRuns(t *testing.T) {
	e := newTestEnv(t)
	os.MkdirAll(filepath.Join(e.agentDir, "prompts"), 0o755)
	os.WriteFile(filepath.Join(e.agentDir, "prompts", "compact.md"), []byte("---\ndescription: Compact the CSS of $1\n---\nCompact the CSS of $1"), 0o644)
	c, _, _ := startACPAgent(t, e, nil)
	openACPSession(t, c, nil, t.TempDir())
	at := c.waitFor(0, func(m acpTestMessage) bool { return strings.Contains(m.line, "available_commands_update") })
	var p struct {
		Update acpAvailableCommands
	}
	json.Unmarshal(c.messages()[at].Params, &p)
	seen := map[string]int{}
	for _, cmd := range p.Update.AvailableCommands {
		if seen[cmd.Name]++; seen[cmd.Name] == 2 {
			t.Errorf("the / menu lists %q twice (the template's never runs): %s", cmd.Name, c.messages()[at].line)
		}
	}
}

// TestACPOverlongRequestAnsweredUnderItsID: a request longer than
// the line limit (a session/prompt with a pasted file or an image past
// 48 MiB, whose base64 passes 64 MiB) is answered -32700 under id null,
// although its id is at the head of the line that rpi keeps (acpHeadID
// finds it for an answer too long): the editor's request is answered
// under no id it can match, and its prompt waits for ever (Zed shows the
// turn running). A line nested too deeply is answered under its id; one
// too long could be too. (docs/acp.md documents the id null, and
// TestACPOverlongLine expects it: a design gap rather than a slip.)
func TestACPOverlongRequestAnsweredUnderItsID(t *testing.T) {
	const maxLine = 8 << 10
	c, _, _ := startACPAgentWith(t, nil, nil, maxLine)
	sid := openACPSession(t, c, nil, t.TempDir())
	prompt, _ := json.Marshal(acpTextPrompt(sid, strings.Repeat("x", 2*maxLine)))
	c.send(`{"jsonrpc":"2.0","id":41,"method":"session/prompt","params":` + string(prompt) + `}`)
	c.call("no/such/method", nil) // answered in turn: the line before it is handled
	for _, m := range c.messages() {
		if m.Error != nil && m.Error.Code == acpParseError && string(m.ID) != "41" {
			t.Errorf("the over-long session/prompt with id 41 is answered %s: its prompt is never answered", m.line)
		}
	}
}

// TestACPListRowsCanBeOpened: session/list gives back what a
// session file's header says, unchecked, so a file from elsewhere in the
// cwd's session folder makes rows an editor cannot use: a sessionId that
// session/load refuses ("x/y", ".."), a cwd that is not absolute (the
// schema's SessionInfo.cwd is an absolute path) or empty, and one
// sessionId on two rows (load and delete reach only one of them). Zed
// shows each in the project's history; opening one fails.
func TestACPListRowsCanBeOpened(t *testing.T) {
	e := newTestEnv(t)
	cwd := t.TempDir()
	dir := defaultSessionDir(e.agentDir, cwd)
	os.MkdirAll(dir, 0o755)
	for name, header := range map[string]string{
		"a.jsonl": `{"type":"session","version":3,"id":"x/y","timestamp":"2025-01-01T00:00:00.000Z","cwd":"` + cwd + `"}`,
		"b.jsonl": `{"type":"session","version":3,"id":"..","timestamp":"2025-01-01T00:00:00.000Z","cwd":"` + cwd + `"}`,
		"c.jsonl": `{"type":"session","version":3,"id":"rel","timestamp":"2025-01-01T00:00:00.000Z","cwd":"relative/dir"}`,
		"d.jsonl": `{"type":"session","version":3,"id":"nocwd","timestamp":"2025-01-01T00:00:00.000Z"}`,
		"e.jsonl": `{"type":"session","version":3,"id":"dup","timestamp":"2025-01-01T00:00:00.000Z","cwd":"` + cwd + `"}`,
		"f.jsonl": `{"type":"session","version":3,"id":"dup","timestamp":"2025-01-01T00:00:00.000Z","cwd":"` + cwd + `"}`,
	} {
		os.WriteFile(filepath.Join(dir, name), []byte(header+"\n"), 0o644)
	}
	c, _, _ := startACPAgent(t, e, nil)
	c.call("initialize", map[string]any{"protocolVersion": 1})
	var page acpListPage
	got := c.call("session/list", map[string]any{"cwd": cwd})
	if err := json.Unmarshal(got.Result, &page); err != nil {
		t.Fatalf("session/list: %s", got.line)
	}
	seen := map[string]bool{}
	for _, row := range page.Sessions {
		if !filepath.IsAbs(row.Cwd) {
			t.Errorf("session/list gives %q a cwd that is not absolute: %q", row.SessionID, row.Cwd)
		}
		if seen[row.SessionID] {
			t.Errorf("session/list gives the id %q to two sessions", row.SessionID)
		}
		seen[row.SessionID] = true
		if _, err := acpSessionID(acpParams{r: &fields{members: []member{{[]byte("sessionId"), mustJSON(row.SessionID)}}}}); err != nil {
			t.Errorf("session/list gives a session whose id session/load refuses: %q (%v)", row.SessionID, err)
		}
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// TestACPCloseDuringLoad: session/close sent while a session/load
// replays (Zed closes a session when its last view goes away, as a user
// who opens a long history and leaves it does) answers {} and lets go of
// the session; the load then answers success all the same, followed by
// the / menu, the usage and "Restored 1 scheduled loop … none fires
// before a minute from now" for the session just closed. The editor
// holds a session rpi no longer has: its next prompt is -32602 "no session
// with the id … is open here".
func TestACPCloseDuringLoad(t *testing.T) {
	e := newTestEnv(t)
	cwd := t.TempDir()
	const sid = "1a2b3c4d-0000-4000-8000-0000000000d1"
	path := writeTestSession(t, e.agentDir, cwd, sid, 0, "hi")
	var b strings.Builder
	prev := "e0000001"
	for i := range 20000 { // a history long enough that its replay takes a while
		id := fmt.Sprintf("f%07d", i)
		fmt.Fprintf(&b, `{"type":"message","id":"%s","parentId":"%s","timestamp":"2025-01-01T00:00:00.000Z","message":{"role":"user","content":[{"type":"text","text":"message %d"}],"timestamp":1}}`+"\n", id, prev, i)
		prev = id
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(b.String())
	f.Close()
	writeDueLoopsFile(t, path, time.Now(), "Report")
	c, _, _ := startACPAgent(t, e, nil)
	c.call("initialize", map[string]any{"protocolVersion": 1})
	load := c.request("session/load", map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}})
	c.waitFor(0, func(m acpTestMessage) bool { return strings.Contains(m.line, "user_message_chunk") }) // open, and replaying
	closed := c.call("session/close", map[string]any{"sessionId": sid})
	if closed.Error != nil {
		t.Skipf("the close came after the load: %s", closed.line)
	}
	loaded := c.answerIndex(load)
	if got := c.messages()[loaded]; got.Error == nil {
		if p := c.call("session/prompt", acpTextPrompt(sid, "go on")); p.Error != nil {
			t.Errorf("session/load answered success after session/close answered {}, and the session is not open: %s", p.line)
		}
	}
}

// TestACPPromptToAnotherSessionAfterCancel: the user stops the turn
// of one thread and writes in another; the editor sends session/cancel
// for the first and session/prompt for the second in one write. The
// prompt fails -32603 "another session is running": the cancelled run
// has not settled yet, and the host runs one session at a time. A prompt
// after the cancel in the same session waits for the cancelled turn to end
// (docs/acp.md); one in another session fails at once, for a run the user
// already stopped.
func TestACPPromptToAnotherSessionAfterCancel(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"text":["one"],"holdAt":1}
{"text":["two"]}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	first := openACPSession(t, c, nil, t.TempDir())
	var opened acpSessionAnswer
	json.Unmarshal(c.call("session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}}).Result, &opened)
	running := c.request("session/prompt", acpTextPrompt(first, "first"))
	fm.waitAsked(t, 1)
	line, _ := appendACPCall(nil, json.RawMessage("90"), "session/prompt", acpTextPrompt(opened.SessionID, "in the other thread"))
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + first + `"}}` + "\n" + string(line))
	c.responseTo(running)
	if got := c.responseTo(json.RawMessage("90")); got.Error != nil {
		t.Errorf("a prompt to another session sent after the cancel of the running one: %s", got.line)
	}
}

// TestACPClientErrorMessageIsBounded: the message of a client's error
// answer becomes the tool call's error, which the model is sent with
// every later request: one of a MiB (a stack trace, a file's text) is
// kept to its first 4 KiB, saying how much more there was.
func TestACPClientErrorMessageIsBounded(t *testing.T) {
	read := `{"toolCalls":[{"id":"c1","name":"read","args":["{\"path\":\"notes.txt\"}"]}]}` + "\n" + `{"text":["done"]}`
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, read, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	huge := strings.Repeat("é", 1<<19) // 1 MiB
	c.answer = func(method string, _ json.RawMessage) (any, *acpError) {
		return nil, &acpError{Code: acpInternalError, Message: huge}
	}
	cwd := t.TempDir()
	sid := openACPSession(t, c, map[string]any{"fs": map[string]bool{"readTextFile": true}}, cwd)
	if got := c.call("session/prompt", acpTextPrompt(sid, "read")); stopReasonOf(got.Result) != "end_turn" {
		t.Fatalf("the prompt: %s", got.line)
	}
	status, text, _ := cardEnd(c, "c1")
	want := "Cannot read " + filepath.Join(cwd, "notes.txt") + ": the editor could not give it: " + huge[:acpMaxClientMessage] + fmt.Sprintf("… (%d more bytes)", len(huge)-acpMaxClientMessage)
	if status != "failed" || text != want {
		t.Errorf("the call ended %s with %d bytes %.80q…%q, want %d bytes", status, len(text), text, text[max(0, len(text)-40):], len(want))
	}
}

// TestACPEditOfABufferThatIsNotUTF8: an edit of a file whose text the
// editor gives with bytes that are not UTF-8 (a Latin-1 file) is refused,
// before it is asked and with nothing written: its text reached rpi with
// each such byte a U+FFFD, and writing the edited text back through the
// editor would have replaced every one of them, which the diff the user
// approves does not show (both sides hold the U+FFFD). On the disk the
// same edit keeps the bytes it does not change. A write still replaces
// such a file (one the editor alone has, here), asked as one whose text
// is not shown, its diff without the old text (oldText null).
func TestACPEditOfABufferThatIsNotUTF8(t *testing.T) {
	latin1 := "caf\xe9\nbeta\n"
	edit := `{"toolCalls":[{"id":"c1","name":"edit","args":["{\"path\":\"menu.txt\",\"edits\":[{\"oldText\":\"beta\",\"newText\":\"BETA\"}]}"]}]}` + "\n" +
		`{"toolCalls":[{"id":"c2","name":"write","args":["{\"path\":\"other.txt\",\"content\":\"new\\n\"}"]}]}` + "\n" + `{"text":["done"]}`
	for _, via := range []string{"disk", "editor", "disk, written by the editor"} {
		t.Run(via, func(t *testing.T) {
			e := newTestEnv(t)
			startFakeModel(t, apiOpenAI, edit, e.agentDir)
			c, _, _ := startACPAgent(t, e, nil, "--confirm", "write")
			var mu sync.Mutex
			var written []string
			c.answer = func(method string, params json.RawMessage) (any, *acpError) {
				switch method {
				case "fs/read_text_file": // the file's bytes as they are, in a JSON string
					return json.RawMessage(`{"content":"` + strings.ReplaceAll(latin1, "\n", `\n`) + `"}`), nil
				case "fs/write_text_file":
					mu.Lock()
					defer mu.Unlock()
					var p struct{ Content string }
					json.Unmarshal(params, &p)
					written = append(written, p.Content)
				case "session/request_permission":
					return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "allow"}}, nil
				}
				return map[string]any{}, nil
			}
			cwd := t.TempDir()
			caps := map[string]any{}
			switch via {
			case "disk":
				os.WriteFile(filepath.Join(cwd, "menu.txt"), []byte(latin1), 0o644)
			case "disk, written by the editor": // the file's bytes read from the disk, the edit written as a JSON string
				os.WriteFile(filepath.Join(cwd, "menu.txt"), []byte(latin1), 0o644)
				caps["fs"] = map[string]bool{"writeTextFile": true}
			default:
				caps["fs"] = map[string]bool{"readTextFile": true, "writeTextFile": true}
			}
			sid := openACPSession(t, c, caps, cwd)
			if got := c.call("session/prompt", acpTextPrompt(sid, "edit")); stopReasonOf(got.Result) != "end_turn" {
				t.Fatalf("the prompt: %s", got.line)
			}
			status, text, _ := cardEnd(c, "c1")
			mu.Lock()
			defer mu.Unlock()
			if via == "disk" {
				if data, _ := os.ReadFile(filepath.Join(cwd, "menu.txt")); status != "completed" || string(data) != "caf\xe9\nBETA\n" {
					t.Errorf("the edit on disk: %s %q, the file %q", status, text, data)
				}
				return
			}
			if via == "disk, written by the editor" {
				want := "Cannot edit menu.txt: it has bytes that are not UTF-8 (a file in another encoding), and the editor writes text: an edit would replace each of them with U+FFFD; nothing was written"
				if data, _ := os.ReadFile(filepath.Join(cwd, "menu.txt")); status != "failed" || text != want || len(written) != 1 || string(data) != latin1 {
					t.Errorf("the edit of the disk's file through the editor: %s %q, written %q, the file %q\nwant failed %q", status, text, written, data, want)
				}
				return
			}
			want := "Cannot edit menu.txt: the editor gave its text with bytes that are not UTF-8 (a file in another encoding): an edit would replace each of them with U+FFFD; nothing was written"
			if status != "failed" || text != want {
				t.Errorf("the edit through the editor: %s %q\nwant failed %q", status, text, want)
			}
			status, _, content := cardEnd(c, "c2")
			if status != "completed" || !slices.Equal(written, []string{"new\n"}) || !strings.Contains(content, `"oldText":null`) {
				t.Errorf("the write through the editor: %s, written %q, its card %s", status, written, content)
			}
			asked := c.messages()[c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "session/request_permission" })]
			if !strings.Contains(asked.line, `other.txt (replacing a file whose text is not shown)"`) {
				t.Errorf("the write, asked: %s", asked.line)
			}
		})
	}
}

// TestACPEditOfABufferWithLoneSurrogates: an editor may give the bytes
// of a file in another encoding as escapes of lone surrogates (Python's
// surrogateescape makes the Latin-1 byte 0xE9 "\udce9"), which decode,
// as such bytes do, to U+FFFD: an edit of such text is refused as one of
// text with bytes that are not UTF-8, nothing written, whichever half
// the surrogate is and wherever it stands. A surrogate pair is a
// character, and an escaped backslash before "udce9" is text: those
// files are edited.
func TestACPEditOfABufferWithLoneSurrogates(t *testing.T) {
	cases := []struct {
		content string // the JSON string's inside, as the editor sends it
		written string // what the edit writes; "" when it is refused
	}{
		{`caf\udce9\nbeta\n`, ""},
		{`caf\uDCE9\nbeta\n`, ""},
		{`caf\ud83d\nbeta\n`, ""},
		{`caf\ud83d\u0041\nbeta\n`, ""},
		{`caf\ude00\ud83d\nbeta\n`, ""},
		{`caf\ud83d\ud83d\ude00\nbeta\n`, ""},
		{`beta\n\ud83d`, ""},
		{`caf\\\udce9\nbeta\n`, ""},
		{`caf\ud83d\ude00\nbeta\n`, "caf\U0001F600\nBETA\n"},
		{`caf\\udce9\nbeta\n`, `caf\udce9` + "\nBETA\n"},
		{`caf\u00e9\nbeta\n`, "caf\u00e9\nBETA\n"},
	}
	var script []string
	for i := range cases {
		script = append(script, fmt.Sprintf(`{"toolCalls":[{"id":"c%d","name":"edit","args":["{\"path\":\"f%d.txt\",\"edits\":[{\"oldText\":\"beta\",\"newText\":\"BETA\"}]}"]}]}`, i, i))
	}
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, strings.Join(script, "\n")+"\n"+`{"text":["done"]}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	var mu sync.Mutex
	written := map[int][]string{}
	c.answer = func(method string, params json.RawMessage) (any, *acpError) {
		var p struct{ Path, Content string }
		json.Unmarshal(params, &p)
		var i int
		fmt.Sscanf(filepath.Base(p.Path), "f%d.txt", &i)
		switch method {
		case "fs/read_text_file":
			return json.RawMessage(`{"content":"` + cases[i].content + `"}`), nil
		case "fs/write_text_file":
			mu.Lock()
			defer mu.Unlock()
			written[i] = append(written[i], p.Content)
		}
		return map[string]any{}, nil
	}
	sid := openACPSession(t, c, map[string]any{"fs": map[string]bool{"readTextFile": true, "writeTextFile": true}}, t.TempDir())
	if got := c.call("session/prompt", acpTextPrompt(sid, "edit")); stopReasonOf(got.Result) != "end_turn" {
		t.Fatalf("the prompt: %s", got.line)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, tt := range cases {
		status, text, _ := cardEnd(c, fmt.Sprintf("c%d", i))
		if tt.written == "" {
			want := fmt.Sprintf("Cannot edit f%d.txt: ", i) + errEditorNotUTF8.Error()
			if status != "failed" || text != want || len(written[i]) != 0 {
				t.Errorf("%s: the edit %s %q, written %q\nwant failed %q", tt.content, status, text, written[i], want)
			}
			continue
		}
		if status != "completed" || !slices.Equal(written[i], []string{tt.written}) {
			t.Errorf("%s: the edit %s %q, written %q, want %q", tt.content, status, text, written[i], tt.written)
		}
	}
}

// TestACPEditOfABufferThatTurnsNotUTF8: the editor gives the file as
// UTF-8 text holding a U+FFFD, then, read again before the edit is
// written, with a byte that is not UTF-8 where that U+FFFD was (the
// buffer changed, read in another encoding), or with a lone surrogate's
// escape there: the file changed, and the edit is not written, as its
// text was read the same once each such byte or surrogate is a U+FFFD,
// and the edit would have written a U+FFFD over it.
func TestACPEditOfABufferThatTurnsNotUTF8(t *testing.T) {
	for name, again := range map[string]string{"a byte": "{\"content\":\"caf\xe9\\nbeta\\n\"}", "a surrogate": `{"content":"caf\udce9\nbeta\n"}`} {
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t)
			startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"edit","args":["{\"path\":\"menu.txt\",\"edits\":[{\"oldText\":\"beta\",\"newText\":\"BETA\"}]}"]}]}`+"\n"+`{"text":["done"]}`, e.agentDir)
			c, _, _ := startACPAgent(t, e, nil)
			var mu sync.Mutex
			reads, written := 0, 0
			c.answer = func(method string, params json.RawMessage) (any, *acpError) {
				mu.Lock()
				defer mu.Unlock()
				switch method {
				case "fs/read_text_file":
					if reads++; reads == 1 {
						return json.RawMessage(`{"content":"caf\ufffd\nbeta\n"}`), nil
					}
					return json.RawMessage(again), nil
				case "fs/write_text_file":
					written++
				}
				return map[string]any{}, nil
			}
			sid := openACPSession(t, c, map[string]any{"fs": map[string]bool{"readTextFile": true, "writeTextFile": true}}, t.TempDir())
			if got := c.call("session/prompt", acpTextPrompt(sid, "edit")); stopReasonOf(got.Result) != "end_turn" {
				t.Fatalf("the prompt: %s", got.line)
			}
			status, text, _ := cardEnd(c, "c1")
			mu.Lock()
			defer mu.Unlock()
			if want := "Cannot edit menu.txt: the file changed while this call was waiting; nothing was written (read it again and redo the edit)"; status != "failed" || text != want || written != 0 || reads != 2 {
				t.Errorf("the edit: %s %q, %d reads, %d writes\nwant failed %q", status, text, reads, written, want)
			}
		})
	}
}

// TestACPPermissionAnswersThatAllowNothing: only an answer that selects
// an option rpi offered, in the schema's shape, runs the call: an option
// never offered, one spelled otherwise, a cancelled outcome, an error, a
// result of another shape, or the schema's names in another case (as
// every other answer and request of ACP is read: by exact key) deny it,
// "Denied by user", and the command does not run. Fields besides the
// outcome (_meta) change nothing.
func TestACPPermissionAnswersThatAllowNothing(t *testing.T) {
	cases := []struct {
		answer string // the result; "error" for an error answer
		runs   bool
	}{
		{`{"outcome":{"outcome":"selected","optionId":"allow"},"_meta":{"x":1}}`, true},
		{`{"outcome":{"outcome":"selected","optionId":"yes"}}`, false},
		{`{"outcome":{"outcome":"selected","optionId":"ALLOW"}}`, false},
		{`{"outcome":{"outcome":"Selected","optionId":"allow"}}`, false},
		{`{"outcome":{"outcome":"cancelled","optionId":"allow"}}`, false},
		{`{"outcome":{"outcome":"selected"}}`, false},
		{`{"outcome":"selected","optionId":"allow"}`, false},
		{`{"Outcome":{"Outcome":"selected","OptionId":"allow"}}`, false},
		{`{"outcome":{"outcome":"selected","OPTIONID":"allow"}}`, false},
		{`{"outcome":{"outcome":"selected","optionId":["allow"]}}`, false},
		{`null`, false},
		{`"allow"`, false},
		{"error", false},
	}
	var cmds []string
	for i := range cases {
		cmds = append(cmds, fmt.Sprintf("touch ran-%d", i+1))
	}
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, bashCalls(commands(cmds...), "done"), e.agentDir)
	c, _, _ := startACPAgent(t, e, nil, "--confirm", "bash")
	c.answer = func(method string, params json.RawMessage) (any, *acpError) {
		var p struct{ ToolCall struct{ ToolCallID string } }
		json.Unmarshal(params, &p)
		var i int
		fmt.Sscanf(p.ToolCall.ToolCallID, "c%d", &i)
		if i < 1 || i > len(cases) || cases[i-1].answer == "error" {
			return nil, &acpError{Code: acpInternalError, Message: "no buttons here"}
		}
		return json.RawMessage(cases[i-1].answer), nil
	}
	cwd := t.TempDir()
	sid := openACPSession(t, c, nil, cwd)
	if got := c.call("session/prompt", acpTextPrompt(sid, "go")); stopReasonOf(got.Result) != "end_turn" {
		t.Fatalf("the prompt: %s", got.line)
	}
	for i, tt := range cases {
		status, text, _ := cardEnd(c, fmt.Sprintf("c%d", i+1))
		_, err := os.Stat(filepath.Join(cwd, fmt.Sprintf("ran-%d", i+1)))
		if ran := err == nil; ran != tt.runs || !tt.runs && (status != "failed" || text != "Denied by user") {
			t.Errorf("%s: ran %v, the call %s %q", tt.answer, ran, status, text)
		}
	}
}
