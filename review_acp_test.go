package main

// A fresh adversarial pass over the ACP wire: a hostile or buggy editor,
// a prompt-injected model and hostile files on disk. Each test here shows
// one defect and fails on the code it was written against.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// reviewSession is the session sid open on a's connection.
func reviewSession(t *testing.T, a *acpAgent, sid string) *acpSession {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	as := a.sessions[sid]
	if as == nil {
		t.Fatalf("session %s is not open", sid)
	}
	return as
}

// reviewLoopsFile writes a loops file beside the session file at path
// with one durable loop of prompt, due at once (it was created an hour
// ago, every hour).
func reviewLoopsFile(t *testing.T, path string, now time.Time, prompt string) {
	t.Helper()
	p, _ := json.Marshal(prompt)
	loops := `{"version":1,"tasks":[{"id":"0123456789ab","intervalSecs":3600,"prompt":` + string(p) + `,"durable":true,` +
		`"createdAt":"` + timestamp(now.Add(-2*time.Hour)) + `","lastFiredAt":null,"expiresAt":"` + timestamp(now.Add(24*time.Hour)) + `","runCount":0}]}`
	if err := os.WriteFile(path+".loops.json", []byte(loops), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReviewACPPromptAfterCancellingALoopRunIsAnswered: a run of the
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
func TestReviewACPPromptAfterCancellingALoopRunIsAnswered(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"text":["the loop's answer"],"holdAt":1}
{"text":["the answer to the prompt"]}`, e.agentDir)
	c, a, _ := startACPAgent(t, e, nil)
	sid := openACPSession(t, c, nil, t.TempDir())
	s := reviewSession(t, a, sid).s
	if _, err := s.addLoop("1h", "Report", true, false); err != nil { // a run of the core's own, not a prompt's
		t.Fatal(err)
	}
	s.fireDueLoops()
	fm.waitAsked(t, 1)
	line, _ := appendACPCall(nil, json.RawMessage("90"), "session/prompt", acpTextPrompt(sid, "something else"))
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}` + "\n" + string(line))
	if got := c.responseTo(json.RawMessage("90")); string(got.Result) != `{"stopReason":"end_turn"}` {
		t.Errorf("the prompt sent after the cancel of the loop's run: %s", got.line)
	}
}

// TestReviewACPCompactWaitsForALoopRun: /compact sent while a loop's run
// streams stops that run (session.compact aborts whatever runs), where
// docs/acp.md says "A /compact sent while turns run comes after them ...
// the running turn ... end[s] as the model ends [it]": ACP's wait before a
// compaction (acpSession.waitTurns) counts only the turns of prompts, not
// a loop's. The loop's answer is cut off and never shown.
func TestReviewACPCompactWaitsForALoopRun(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"text":["`+strings.Repeat("one ", 200)+`"]}
{"text":["`+strings.Repeat("two ", 200)+`"]}
{"text":["the loop's ","answer"],"holdAt":2}
{"text":["a summary"]}`, e.agentDir)
	c, a, _ := startACPAgent(t, e, nil)
	sid := openACPSession(t, c, nil, t.TempDir())
	c.call("session/prompt", acpTextPrompt(sid, "one"))
	c.call("session/prompt", acpTextPrompt(sid, "two"))
	s := reviewSession(t, a, sid).s
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

// TestReviewACPEditorIsNotGivenProcSelfPaths: the editor opens a path as
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
func TestReviewACPEditorIsNotGivenProcSelfPaths(t *testing.T) {
	wd, err := os.Getwd() // the test process's cwd: rpi's /proc/self/cwd here
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/self/cwd/go.mod"); err != nil {
		t.Skip("no /proc/self/cwd here")
	}
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"read","args":["{\"path\":\"/proc/self/cwd/go.mod\"}"]}]}
{"toolCalls":[{"id":"c2","name":"write","args":["{\"path\":\"/proc/self/cwd/review-probe.txt\",\"content\":\"x\"}"]}]}
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
	os.Remove(filepath.Join(wd, "review-probe.txt"))
	for _, m := range c.messages() {
		if !strings.HasPrefix(m.Method, "fs/") {
			continue
		}
		var p struct{ Path string }
		json.Unmarshal(m.Params, &p)
		if strings.HasPrefix(p.Path, "/proc/self/") {
			t.Errorf("%s asks the editor for %s: the editor resolves /proc/self in itself, not where rpi checked it (%s)", m.Method, p.Path, wd)
		}
	}
}

// TestReviewACPListIsOfThatDirectoryOnly: session/list {cwd} is "the
// sessions of cwd" (docs/acp.md), but its folder name is cwd with every
// "/" made "-", so /x/a/b and /x/a-b share a folder and session/list for
// /x/a-b lists the sessions of /x/a/b (Zed shows them in that project's
// history, and loads them there, in the wrong directory). The rows are
// not filtered by their own cwd.
func TestReviewACPListIsOfThatDirectoryOnly(t *testing.T) {
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

// TestReviewACPCommandMenuNamesWhatRuns: a prompt template named compact
// (or name) is listed in the / menu (available_commands_update) beside
// rpi's own /compact, two entries with one name; choosing the template's
// runs rpi's command (acpOwnCommand comes first), never the template.
// Zed rejects a prompt with an unadvertised /name, so what is advertised
// should be what runs.
func TestReviewACPCommandMenuNamesWhatRuns(t *testing.T) {
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

// TestReviewACPOverlongRequestAnsweredUnderItsID: a request longer than
// the line limit (a session/prompt with a pasted file or an image past
// 48 MiB, whose base64 passes 64 MiB) is answered -32700 under id null,
// although its id is at the head of the line that rpi keeps (acpHeadID
// finds it for an answer too long): the editor's request is answered
// under no id it can match, and its prompt waits for ever (Zed shows the
// turn running). A line nested too deeply is answered under its id; one
// too long could be too. (docs/acp.md documents the id null, and
// TestACPOverlongLine expects it: a design gap rather than a slip.)
func TestReviewACPOverlongRequestAnsweredUnderItsID(t *testing.T) {
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

// TestReviewACPListRowsCanBeOpened: session/list gives back what a
// session file's header says, unchecked, so a file from elsewhere in the
// cwd's session folder makes rows an editor cannot use: a sessionId that
// session/load refuses ("x/y", ".."), a cwd that is not absolute (the
// schema's SessionInfo.cwd is an absolute path) or empty, and one
// sessionId on two rows (load and delete reach only one of them). Zed
// shows each in the project's history; opening one fails.
func TestReviewACPListRowsCanBeOpened(t *testing.T) {
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
		if _, err := acpSessionID(acpParams{r: &request{members: []member{{[]byte("sessionId"), mustJSON(row.SessionID)}}}}); err != nil {
			t.Errorf("session/list gives a session whose id session/load refuses: %q (%v)", row.SessionID, err)
		}
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// TestReviewACPCloseDuringLoad: session/close sent while a session/load
// replays (Zed closes a session when its last view goes away, as a user
// who opens a long history and leaves it does) answers {} and lets go of
// the session; the load then answers success all the same, followed by
// the / menu, the usage and "Restored 1 scheduled loop … none fires
// before a minute from now" for the session just closed. The editor
// holds a session rpi no longer has: its next prompt is -32602 "no session
// with the id … is open here".
func TestReviewACPCloseDuringLoad(t *testing.T) {
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
	reviewLoopsFile(t, path, time.Now(), "Report")
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

// TestReviewACPPromptToAnotherSessionAfterCancel: the user stops the turn
// of one thread and writes in another; the editor sends session/cancel
// for the first and session/prompt for the second in one write. The
// prompt fails -32603 "another session is running": the cancelled run
// has not settled yet, and the host runs one session at a time. A prompt
// after the cancel in the same session waits for the cancelled turn to end
// (docs/acp.md); one in another session fails at once, for a run the user
// already stopped.
func TestReviewACPPromptToAnotherSessionAfterCancel(t *testing.T) {
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
