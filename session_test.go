package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// keyOrder lists an object's keys in order, and those of its "message".
func keyOrder(line []byte) string {
	dec := json.NewDecoder(bytes.NewReader(line))
	var keys []string
	var walk func(depth int, prefix string)
	walk = func(depth int, prefix string) {
		dec.Token() // {
		for dec.More() {
			tok, _ := dec.Token()
			key := tok.(string)
			keys = append(keys, prefix+key)
			if key == "message" && depth == 0 {
				walk(1, "message.")
				continue
			}
			var skip json.RawMessage
			dec.Decode(&skip)
		}
		dec.Token() // }
	}
	walk(0, "")
	return strings.Join(keys, ",")
}

// TestSessionFileMatchesPi checks, field by field, that the entries rpi
// writes have the keys, in the order, of the same entries in a session
// file in pi's format (testdata/sessions/pi-v3.jsonl), as pi 1.6 writes
// them where it wrote any (get_entries in testdata/pi16's transcript:
// the system message, an answer's responseId…, a tool result's
// durationMs).
func TestSessionFileMatchesPi(t *testing.T) {
	kind := func(line []byte) string {
		var e struct {
			Type    string
			Message struct{ Role string }
		}
		json.Unmarshal(line, &e)
		return e.Type + "/" + e.Message.Role
	}
	want := map[string]string{}
	pi, _ := os.ReadFile("testdata/sessions/pi-v3.jsonl")
	for _, line := range bytes.Split(bytes.TrimSpace(pi), []byte("\n")) {
		want[kind(line)] = keyOrder(line)
	}
	pi16, _ := os.ReadFile("testdata/pi16/transcript.out.jsonl")
	for _, line := range bytes.Split(pi16, []byte("\n")) {
		var answer struct {
			Command string
			Data    struct{ Entries []json.RawMessage }
		}
		if json.Unmarshal(line, &answer) == nil && answer.Command == "get_entries" {
			for _, entry := range answer.Data.Entries {
				want[kind(entry)] = keyOrder(entry)
			}
		}
	}
	if _, ok := want["message/system"]; !ok {
		t.Fatal("no pi 1.6 entries read")
	}
	ps, _, _ := agentSession(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"bash","args":["{\"command\":\"echo hi\"}"]}]}
{"text":["ok"]}`)
	ps.send(`{"id":"p","type":"prompt","message":"list"}`)
	ps.waitFor(`"agent_settled"`)
	ps.send(`{"id":"n","type":"set_session_name","name":"x"}`)
	ps.send(`{"id":"s","type":"get_state"}`)
	ps.waitFor(`"id":"s"`)
	var path string
	for _, rec := range ps.close() {
		if rec["id"] == "s" {
			path = rec["data"].(map[string]any)["sessionFile"].(string)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for i, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		k := kind(line)
		if i == 0 {
			k = "session/"
		}
		if w, ok := want[k]; ok {
			seen++
			if got := keyOrder(line); got != w {
				t.Errorf("%s entry keys:\n got %s\nwant %s", k, got, w)
			}
		}
	}
	if seen < 7 {
		t.Errorf("compared only %d entries of %s", seen, data)
	}
}

// TestEndToEndKill9 kills rpi with SIGKILL mid-run and checks that the
// session file holds everything answered so far and loads.
func TestEndToEndKill9(t *testing.T) {
	endToEnd(t)
	agent, cwd := t.TempDir(), t.TempDir()
	startFakeModel(t, apiOpenAI, `{"text":["first answer"]}
{"text":["slow ","answer ","never ","finished"],"delayMs":500}`, agent)
	p := startRPIWith(t, withEnv("PI_CODING_AGENT_DIR="+agent), "rpc", "--cwd", cwd)
	header := p.next(t)["data"].(map[string]any)
	p.send(t, `{"id":"p1","type":"prompt","message":"one"}`+"\n")
	p.until(t, "agent_settled", "")
	p.send(t, `{"id":"p2","type":"prompt","message":"two"}`+"\n")
	p.until(t, "message_update", "")
	p.cmd.Process.Kill()
	p.cmd.Wait()
	dir := defaultSessionDir(agent, cwd)
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("session files in %s: %v", dir, files)
	}
	ss, err := loadSessionFile(context.Background(), files[0])
	if err != nil {
		t.Fatal(err)
	}
	if ss.header.ID != header["id"] {
		t.Errorf("header id %s, want %v", ss.header.ID, header["id"])
	}
	var texts []string
	for _, m := range ss.context().messages {
		switch m := m.(type) {
		case *userMessage:
			texts = append(texts, "user:"+m.Content[0].Text)
		case *assistantMessage:
			texts = append(texts, "assistant:"+m.text())
		}
	}
	if got := strings.Join(texts, "|"); got != "user:one|assistant:first answer|user:two" {
		t.Errorf("after kill -9 the session holds %q", got)
	}
}

// sessionLines reads a session file's lines.
func sessionLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// TestTornLastLineCostsNothing opens a session file whose last line a
// crash tore, and appends to it: the torn bytes are dropped first, so the
// file loads again with every entry, old and new.
func TestTornLastLineCostsNothing(t *testing.T) {
	e, cwd := newTestEnv(t), t.TempDir()
	startFakeModel(t, apiOpenAI, `{"text":["new answer"]}`, e.agentDir)
	path := filepath.Join(cwd, "torn.jsonl")
	torn, _ := os.ReadFile("testdata/sessions/pi-v3-torn.jsonl")
	os.WriteFile(path, torn, 0o644)
	before := len(sessionLines(t, path))
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd, "--session", path})
	ps.send(`{"id":"p","type":"prompt","message":"new question"}`)
	ps.waitFor(`"type":"agent_settled"`)
	ps.close()
	lines := sessionLines(t, path)
	ss, err := loadSessionFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	// The torn line went; the thinking level (the file has none, and rpi
	// records it as it opens the session, as pi 1.6), the system prompt
	// (the file has none), the new user message and answer came.
	if len(lines) != before-1+4 || len(ss.entries) != len(lines)-1 {
		t.Errorf("%d lines (%d before, one torn), %d entries load:\n%s", len(lines), before, len(ss.entries), strings.Join(lines, "\n"))
	}
	var texts []string
	for _, m := range ss.context().messages {
		if a, ok := m.(*assistantMessage); ok {
			texts = append(texts, a.text())
		}
	}
	if got := strings.Join(texts, "|"); got != "Recent answer|new answer" {
		t.Errorf("answers after reload: %q", got)
	}
}

// TestTornLineWrittenWhileOpen: another process (pi, which takes no
// lock) tears the last line of a session file rpi has open, as a crash
// in the middle of its write does. rpi's next entry was glued to the torn
// bytes, one malformed line, so that reading the file again lost it and,
// its children's parent gone, the whole conversation before them. The
// torn bytes are cut off before every append now, not only the first.
func TestTornLineWrittenWhileOpen(t *testing.T) {
	e, cwd := newTestEnv(t), t.TempDir()
	startFakeModel(t, apiOpenAI, `{"text":["first answer"]}
{"text":["second answer"]}`, e.agentDir)
	path := filepath.Join(cwd, "open.jsonl")
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd, "--session", path})
	ps.send(`{"id":"p1","type":"prompt","message":"first question"}`)
	ps.waitFor(`"type":"agent_settled"`)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"type":"message","id":"0badc0de","parentId":null,"timestamp":"2026-03-16T09:00:01.000Z","mess`)
	f.Close()
	ps.send(`{"id":"p2","type":"prompt","message":"second question"}`)
	waitUntil(t, ps, func(out string) bool { return strings.Count(out, `"type":"agent_settled"`) == 2 })
	ps.close()
	ss, err := loadSessionFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range ss.context().messages {
		switch m := m.(type) {
		case *userMessage:
			texts = append(texts, m.Content[0].Text)
		case *assistantMessage:
			texts = append(texts, m.text())
		}
	}
	if got := strings.Join(texts, "|"); got != "first question|first answer|second question|second answer" || ss.skipped.n != 0 {
		t.Errorf("the conversation read again: %q (%d lines skipped)", got, ss.skipped.n)
	}
}

// TestTornLineLongerThanAnyEntry: a last line torn while rpi has the
// file open may be of any length (another process's, or a hostile
// one's, grown after rpi read the file): before every append it is cut
// off without being read into memory once it is longer than a line the
// loader reads, where rpi read it whole to see whether it was an entry
// (a 10 GB one: 10 GB of memory). The line here is a 257 MiB hole, no
// disk written.
func TestTornLineLongerThanAnyEntry(t *testing.T) {
	endToEnd(t)
	path := filepath.Join(t.TempDir(), "torn.jsonl")
	header := `{"type":"session","version":3,"id":"1a2b3c4d-0000-4000-8000-000000000001","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}` + "\n"
	if err := os.WriteFile(path, []byte(header+`{"type":"message"`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, int64(len(header))+maxSessionLineBytes+1<<20); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := appendLine(path, []byte(`{"type":"label","id":"a0000001","parentId":null}`), false, false)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != header+`{"type":"label","id":"a0000001","parentId":null}`+"\n" {
		t.Errorf("the file after the append: %.300q", got)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Errorf("the append allocated %d MiB", grew>>20)
	}
}

// TestHugeSessionLine loads a session whose one line is longer than any
// input line may be (a 65 MiB message): nothing is dropped.
func TestHugeSessionLine(t *testing.T) {
	endToEnd(t)
	if testing.Short() {
		t.Skip("writes 65 MiB")
	}
	path := filepath.Join(t.TempDir(), "huge.jsonl")
	f, _ := os.Create(path)
	f.WriteString(`{"type":"session","version":3,"id":"1a2b3c4d-0000-4000-8000-000000000001","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}` + "\n")
	f.WriteString(`{"type":"message","id":"a0000001","parentId":null,"timestamp":"2026-03-16T09:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"`)
	f.Write(bytes.Repeat([]byte("y"), 65<<20))
	f.WriteString(`"}],"timestamp":1}}` + "\n")
	f.WriteString(`{"type":"message","id":"a0000002","parentId":"a0000001","timestamp":"2026-03-16T09:00:02.000Z","message":{"role":"user","content":[{"type":"text","text":"after"}],"timestamp":2}}` + "\n")
	f.Close()
	ss, err := loadSessionFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if msgs := ss.context().messages; len(msgs) != 2 || len(msgs[0].(*userMessage).Content[0].Text) != 65<<20 {
		t.Errorf("%d messages loaded, want both", len(msgs))
	}
}

// TestLoopingSessionFile refuses a session file whose parentId links form
// a loop, naming an entry on it, both at startup and on switch_session.
func TestLoopingSessionFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loop.jsonl")
	os.WriteFile(path, []byte(`{"type":"session","version":3,"id":"1a2b3c4d-0000-4000-8000-000000000001","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}
{"type":"message","id":"a0000001","parentId":"a0000002","timestamp":"2026-03-16T09:00:01.000Z","message":{"role":"user","content":"one","timestamp":1}}
{"type":"message","id":"a0000002","parentId":"a0000001","timestamp":"2026-03-16T09:00:02.000Z","message":{"role":"user","content":"two","timestamp":2}}
`), 0o644)
	want := "(the parentId links from entry a0000001 loop)"
	var out bytes.Buffer
	done := make(chan int)
	go func() {
		done <- runRPI(t, newTestEnv(t), []string{"rpc", "--session", path}, strings.NewReader(""), &out)
	}()
	select {
	case code := <-done:
		if code == 0 || !strings.Contains(out.String(), want) {
			t.Errorf("--session with a loop: exit %d, %s", code, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("rpi hangs on a looping session file")
	}
	ps := startSession(t)
	ps.send(`{"id":"sw","type":"switch_session","sessionPath":"` + path + `"}`)
	ps.waitFor(`"id":"sw"`)
	ps.send(`{"id":"s","type":"get_state"}`)
	ps.waitFor(`"id":"s"`)
	ps.close()
	if !strings.Contains(string(ps.out.bytes()), want) {
		t.Errorf("switch_session to a loop:\n%s", ps.out.bytes())
	}
}

// TestLoopThroughAnEmptyID: parentId links that loop through an entry
// whose id is "" are a loop too. They were taken for none (the loop's
// entry was named by its id, and "" meant "no loop"), and
// get_session_stats then walked the loop for ever, holding the session.
func TestLoopThroughAnEmptyID(t *testing.T) {
	endToEnd(t)
	const head = `{"type":"session","version":3,"id":"1a2b3c4d-0000-4000-8000-000000000001","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}` + "\n"
	entry := func(id, parent string) string {
		return `{"type":"message","id":"` + id + `","parentId":"` + parent + `","timestamp":"2026-03-16T09:00:01.000Z","message":{"role":"user","content":"q","timestamp":1}}` + "\n"
	}
	for name, content := range map[string]string{
		"pair": head + entry("", "b0000001") + entry("b0000001", ""),
		"self": head + entry("", ""),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "loop.jsonl")
			os.WriteFile(path, []byte(content), 0o644)
			ps, _, _ := agentSession(t, apiOpenAI, "") // with a model, whose context is counted
			ps.send(`{"id":"sw","type":"switch_session","sessionPath":"` + path + `"}`)
			ps.waitFor(`"id":"sw"`)
			ps.send(`{"id":"st","type":"get_session_stats"}`)
			ps.waitFor(`"id":"st"`)
			ps.close()
			if want := `(the parentId links from entry \"\" loop)`; !strings.Contains(string(ps.out.bytes()), want) {
				t.Errorf("switch_session to a loop through \"\":\n%s", ps.out.bytes())
			}
		})
	}
}

// TestSessionFolderVanishes removes the session folder mid-session: the
// client is told, and the next entry writes the file again, header first,
// with everything so far.
func TestSessionFolderVanishes(t *testing.T) {
	e, cwd := newTestEnv(t), t.TempDir()
	startFakeModel(t, apiOpenAI, "{\"text\":[\"one\"]}\n{\"text\":[\"two\"]}", e.agentDir)
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd})
	ps.send(`{"id":"p1","type":"prompt","message":"first"}`)
	ps.waitFor(`"type":"agent_settled"`)
	dir := defaultSessionDir(e.agentDir, cwd)
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("session files: %v", files)
	}
	os.RemoveAll(dir)
	ps.send(`{"id":"p2","type":"prompt","message":"second"}`)
	ps.waitFor(`"id":"p2"`)
	waitUntil(t, ps, func(out string) bool { return strings.Count(out, `"type":"agent_settled"`) >= 2 })
	ps.close()
	if !bytes.Contains(ps.out.bytes(), []byte(`"method":"notify","message":"Cannot append to the session file `+files[0])) {
		t.Errorf("the client was not told:\n%s", ps.out.bytes())
	}
	lines := sessionLines(t, files[0])
	ss, err := loadSessionFile(context.Background(), files[0])
	if err != nil || !strings.HasPrefix(lines[0], `{"type":"session"`) {
		t.Fatalf("the recreated file does not start with its header: %v\n%s", err, strings.Join(lines, "\n"))
	}
	if n := len(ss.context().messages); n != 5 { // the system prompt, and two prompts and their answers
		t.Errorf("%d messages in the recreated file, want 5", n)
	}
}

// TestUnchangedValuesWriteNothing sets the same session name and thinking
// level twice on an existing session: only the first of each writes an
// entry.
func TestUnchangedValuesWriteNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	data, _ := os.ReadFile("testdata/sessions/pi-v3.jsonl")
	os.WriteFile(path, data, 0o644)
	before := len(sessionLines(t, path))
	in := `{"id":"n1","type":"set_session_name","name":"renamed"}
{"id":"n2","type":"set_session_name","name":" renamed "}
{"id":"t1","type":"set_thinking_level","level":"minimal"}
{"id":"t2","type":"set_thinking_level","level":"minimal"}
`
	var out bytes.Buffer
	runRPI(t, newTestEnv(t), []string{"rpc", "--session", path}, strings.NewReader(in), &out)
	lines := sessionLines(t, path)
	added := strings.Join(lines[before:], "\n")
	if len(lines) != before+2 || !strings.Contains(added, `"type":"session_info"`) || !strings.Contains(added, `"type":"thinking_level_change"`) {
		t.Errorf("entries added:\n%s\noutput:\n%s", added, out.String())
	}
}

// TestPlantedTempFileIsNotFollowed plants a symlink where a careless
// writer would put its temp file beside the session file: writing the
// session must not follow it.
func TestPlantedTempFileIsNotFollowed(t *testing.T) {
	e, cwd := newTestEnv(t), t.TempDir()
	startFakeModel(t, apiOpenAI, `{"text":["hello"]}`, e.agentDir)
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("untouched"), 0o644)
	os.Symlink(victim, filepath.Join(cwd, "s.jsonl.tmp"))
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd, "--session", "s.jsonl"})
	ps.send(`{"id":"p","type":"prompt","message":"hi"}`)
	ps.waitFor(`"type":"agent_settled"`)
	ps.close()
	if data, _ := os.ReadFile(victim); string(data) != "untouched" {
		t.Errorf("the planted symlink was followed: %q", data)
	}
	if _, err := loadSessionFile(context.Background(), filepath.Join(cwd, "s.jsonl")); err != nil {
		t.Error(err)
	}
}

// TestMessageEntryWithoutMessage: an entry of type message whose message
// is missing, null or not an object is skipped on load; the rest of the
// conversation loads and get_messages is answered.
func TestMessageEntryWithoutMessage(t *testing.T) {
	cwd := t.TempDir()
	path := filepath.Join(cwd, "odd.jsonl")
	os.WriteFile(path, []byte(`{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/x"}
{"type":"message","id":"a1b2c3d1","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z"}
{"type":"message","id":"a1b2c3d2","parentId":"a1b2c3d1","timestamp":"2026-01-01T00:00:00.000Z","message":null}
{"type":"message","id":"a1b2c3d3","parentId":"a1b2c3d2","timestamp":"2026-01-01T00:00:00.000Z","message":"text"}
{"type":"message","id":"a1b2c3d4","parentId":"a1b2c3d3","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"hi","timestamp":1}}
`), 0o644)
	ps := startSessionIn(t, newTestEnv(t), []string{"rpc", "--cwd", cwd, "--session", path})
	ps.send(`{"id":"m","type":"get_messages"}`)
	ps.waitFor(`"id":"m"`)
	ps.close()
	if out := string(ps.out.bytes()); !strings.Contains(out, `"data":{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1}]}`) {
		t.Errorf("get_messages:\n%s", out)
	}
}

// TestNoMessageNoFile: a session that never got a user or assistant
// message leaves no file and no folder, whatever else happened in it (a
// name, the user's bash).
func TestNoMessageNoFile(t *testing.T) {
	e := newTestEnv(t)
	in := `{"id":"n","type":"set_session_name","name":"named"}` + "\n" + `{"id":"b","type":"bash","command":"echo hi"}` + "\n"
	var out bytes.Buffer
	runRPI(t, e, []string{"rpc", "--cwd", t.TempDir()}, strings.NewReader(in), &out)
	if !strings.Contains(out.String(), `"id":"b","type":"response","command":"bash","success":true`) {
		t.Fatalf("output:\n%s", out.Bytes())
	}
	if left, _ := os.ReadDir(e.agentDir); len(left) > 0 {
		t.Errorf("the agent directory holds %v", left)
	}
}

// TestRecordBeforeTheFileStartsNoWriter: the entries a fresh session
// makes before its file exists (pi writes it with the first user or
// assistant message) start no writer in the background; the first
// answer's entry does, and the file is then written whole.
func TestRecordBeforeTheFileStartsNoWriter(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.jsonl")
	var started atomic.Int32
	var writers sync.WaitGroup
	c := &conversation{clock: realClock{}, warn: func(w string) { t.Error(w) }, deliver: func() {},
		background: func(work func()) { started.Add(1); writers.Go(work) }}
	c.replace(newSessionFile(time.Now(), "", dir, dir, path, "", false), sessionContext{})
	c.record("model_change", entryField{"provider", "p"}, entryField{"modelId", "m"})
	c.record("thinking_level_change", entryField{"thinkingLevel", "high"})
	if n := started.Load(); n != 0 {
		t.Errorf("%d writers started for entries that are not written yet", n)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the file exists before a message: %v", err)
	}
	c.appendMessage(rawMessage(`{"role":"assistant","content":[],"timestamp":1}`))
	c.record("session_info", entryField{"name", "after"})
	writers.Wait()
	if n := started.Load(); n != 1 {
		t.Errorf("%d writers started for the entry after the first answer, want 1", n)
	}
	data, _ := os.ReadFile(path)
	if lines := strings.Count(string(data), "\n"); lines != 5 {
		t.Errorf("the file holds %d lines, want the header and 4 entries:\n%s", lines, data)
	}
}

// TestFirstMessageWritesTheFile: as pi 1.6's _hasConversation counts, a
// message entry of a user or an assistant makes a fresh session write its
// file (whole, every entry so far); a user's bash result, a custom
// message and the setup entries do not.
func TestFirstMessageWritesTheFile(t *testing.T) {
	for _, first := range []string{
		`{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1}`,
		`{"role":"assistant","content":[],"timestamp":1}`,
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "s.jsonl")
		var writers sync.WaitGroup
		c := &conversation{clock: realClock{}, warn: func(w string) { t.Error(w) }, deliver: func() {},
			background: func(work func()) { writers.Go(work) }}
		c.replace(newSessionFile(time.Now(), "", dir, dir, path, "", false), sessionContext{})
		c.record("model_change", entryField{"provider", "p"}, entryField{"modelId", "m"})
		c.appendMessage(bashExecutionMessage{Role: "bashExecution", Command: "echo hi", Output: "hi\n", Timestamp: 1})
		c.appendMessage(rawMessage(`{"role":"custom","customType":"note","content":"a note","display":true,"timestamp":1}`))
		writers.Wait()
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("the file exists before a user or assistant message: %v", err)
		}
		c.appendMessage(rawMessage(first))
		writers.Wait()
		data, _ := os.ReadFile(path)
		if lines := strings.Count(string(data), "\n"); lines != 5 || !strings.Contains(string(data), first) {
			t.Errorf("after %s the file holds %d lines, want the header and 4 entries:\n%s", first, lines, data)
		}
		c.close()
	}
}

// TestEndToEndKilledInTheFirstTurnKeepsThePrompt: rpi killed (SIGKILL)
// while the model answers a new session's first prompt leaves the file,
// the prompt in it (pi issue #10000).
func TestEndToEndKilledInTheFirstTurnKeepsThePrompt(t *testing.T) {
	endToEnd(t)
	agent := t.TempDir()
	fm := startFakeModel(t, apiOpenAI, `{"text":["never ","sent"],"holdAt":1}`, agent)
	p := startRPIWith(t, withEnv("PI_CODING_AGENT_DIR="+agent), "rpc", "--cwd", t.TempDir())
	p.next(t) // session_started
	p.send(t, `{"id":"p","type":"prompt","message":"Keep this prompt"}`+"\n")
	fm.waitAsked(t, 1)
	p.cmd.Process.Kill()
	p.cmd.Wait()
	fm.release <- struct{}{} // the held stream ends, for the server's close
	files, _ := filepath.Glob(filepath.Join(agent, "sessions", "*", "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("session files: %v", files)
	}
	data, _ := os.ReadFile(files[0])
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	// The header, the model and thinking level, the system prompt, the prompt.
	if len(lines) != 5 || !strings.HasPrefix(lines[0], `{"type":"session","version":3,`) ||
		!strings.Contains(lines[3], `"message":{"role":"system",`) ||
		!strings.Contains(lines[4], `"message":{"role":"user","content":[{"type":"text","text":"Keep this prompt"}]`) {
		t.Errorf("the session file after the kill:\n%s", data)
	}
}

// TestSessionLeftKeepsItsFileForAQueuedWrite: a flush that found nothing
// queued lets go of the files of the sessions left only after that look
// (unlockRetired, called here by hand at that moment); meanwhile a
// command may queue an entry of the session and the session change: the
// session left keeps its file until that entry is written, then lets go
// of it. Before, the file was let go of first, the entry's write took it
// again, and nothing let go of it after: the file stayed held until rpi
// ended (another rpi, or this one switching back, found it in use).
func TestSessionLeftKeepsItsFileForAQueuedWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "left.jsonl")
	var writers []func()
	c := &conversation{clock: realClock{}, warn: func(w string) { t.Error(w) }, deliver: func() {},
		background: func(work func()) { writers = append(writers, work) }}
	c.replace(newSessionFile(time.Now(), "", dir, dir, path, "", false), sessionContext{})
	c.appendMessage(rawMessage(`{"role":"assistant","content":[],"timestamp":1}`)) // written, and held
	c.record("session_info", entryField{"name", "last"})
	c.replace(newSessionFile(time.Now(), "", dir, dir, filepath.Join(dir, "next.jsonl"), "", false), sessionContext{})
	c.fileMu.Lock()
	c.unlockRetired() // the end of a flush that found nothing queued, before the record
	c.fileMu.Unlock()
	for _, w := range writers {
		w()
	}
	if data, _ := os.ReadFile(path); !strings.Contains(string(data), `"name":"last"`) {
		t.Errorf("the entry queued before the change is not in the file:\n%s", data)
	}
	lock, err := lockSessionFile(context.Background(), path, 0)
	if err != nil || lock == nil {
		t.Fatalf("the file of the session left, once its writes are done: %v", err)
	}
	lock.Close()
	c.close()
}

// TestWriterPanicStillLetsGoOfTheSessionLeft: a panic in the session's
// writer (here in its warning, as the session left's file vanished under
// its queued write) ends that write only: the file of the session left,
// which the write held, is let go of by the writer started after it.
func TestWriterPanicStillLetsGoOfTheSessionLeft(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "left.jsonl")
	var writers []func()
	panicked := false
	c := &conversation{clock: realClock{}, deliver: func() {},
		warn:       func(w string) { panicked = true; panic(w) },
		background: func(work func()) { writers = append(writers, work) }}
	left := newSessionFile(time.Now(), "", dir, dir, path, "", false)
	c.replace(left, sessionContext{})
	c.appendMessage(rawMessage(`{"role":"assistant","content":[],"timestamp":1}`)) // written, and held
	c.record("session_info", entryField{"name", "last"})
	c.replace(newSessionFile(time.Now(), "", dir, dir, filepath.Join(dir, "next.jsonl"), "", false), sessionContext{})
	os.Remove(path) // the queued append fails, and its warning panics
	for i := 0; i < len(writers); i++ {
		func() {
			defer func() { recover() }() // as guarded does
			writers[i]()
		}()
	}
	if !panicked {
		t.Fatal("the writer did not panic")
	}
	c.lockMu.Lock()
	held := left.lock != nil
	c.lockMu.Unlock()
	if held {
		t.Error("the file of the session left is still held after the writer's panic")
	}
	c.close()
}

// TestTextEntriesMatchDecoding: an entry whose fields are all text, and a
// message entry's message, are set without decoding its line; they must
// be what decoding the line gives, for every text field of an entry,
// hostile and invalid text included.
func TestTextEntriesMatchDecoding(t *testing.T) {
	ss := newSessionFile(time.Unix(1e9, 0), "", "/", "", "", "", true)
	// check adds an entry and compares it with its line decoded.
	check := func(typ string, fields []entryField) {
		t.Helper()
		e, _, err := ss.add(time.Unix(1e9, 0), typ, fields)
		if err != nil {
			t.Fatal(err)
		}
		want := &sessionEntry{}
		if err := json.Unmarshal(e.raw, want); err != nil {
			t.Fatalf("%s: %v", e.raw, err)
		}
		want.raw = e.raw
		if !reflect.DeepEqual(e, want) {
			t.Errorf("%s:\nset     %+v\ndecoded %+v", e.raw, *e, *want)
		}
	}
	entryType := reflect.TypeFor[sessionEntry]()
	for i := range entryType.NumField() {
		name, _, _ := strings.Cut(entryType.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "type" || name == "id" || name == "timestamp" || entryType.Field(i).Type.Kind() != reflect.String {
			continue
		}
		if !(&sessionEntry{}).setText(name, "") {
			t.Errorf("setText does not know the text field %q", name)
		}
		for _, text := range []string{"", "gpt-5", "q\" b\\ \n\x00 <>& \u2028 é😀", "\xff bad"} {
			for _, fields := range [][]entryField{{{name, text}}, {{"provider", "p"}, {name, text}}} {
				check("custom", fields)
			}
		}
	}
}

// TestCheckWritableDir: the session folder's startup check walks up to
// the nearest folder that exists, refuses one rpi cannot write to, and
// creates nothing either way.
func TestCheckWritableDir(t *testing.T) {
	dir := t.TempDir()
	if err := checkWritableDir(filepath.Join(dir, "a", "b")); err != nil {
		t.Errorf("a folder that does not exist yet, under a writable one: %v", err)
	}
	locked := filepath.Join(dir, "locked")
	os.Mkdir(locked, 0o555)
	err := checkWritableDir(filepath.Join(locked, "sessions"))
	if os.Geteuid() != 0 && (err == nil || err.Error() != "permission denied") {
		t.Errorf("a read-only folder: %v, want permission denied", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the check left %v behind", entries)
	}
	if entries, _ := os.ReadDir(locked); len(entries) != 0 {
		t.Errorf("the check left %v behind", entries)
	}
}

// TestSessionFileLock runs rpis on one session file at once (in one
// process: their locks are on separate open files, as between processes):
// the second is refused with an init error that says what to do, after
// waiting; switch_session to a file another rpi holds fails the same way
// and changes nothing. A session left (here by clone) lets go of its
// file, and the file written whole for the clone is held from the start;
// once the first rpi has ended, that one opens too, its entries all there.
func TestSessionFileLock(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shared.jsonl")
	os.WriteFile(path, []byte(`{"type":"session","version":3,"id":"1a2b3c4d-0000-4000-8000-00000000000c","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}
{"type":"session_info","id":"a0000001","parentId":null,"timestamp":"2026-03-16T09:00:01.000Z","name":"Shared"}
{"type":"message","id":"a0000002","parentId":"a0000001","timestamp":"2026-03-16T09:00:02.000Z","message":{"role":"user","content":"Hi","timestamp":1}}
{"type":"message","id":"a0000003","parentId":"a0000002","timestamp":"2026-03-16T09:00:03.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Hello"}],"api":"openai-completions","provider":"p","model":"m","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":2}}
`), 0o644)
	e := newTestEnv(t)
	e.lockWait = 200 * time.Millisecond
	inUse := func(path string) string {
		return "Session file " + path + " is in use by another rpi process, which did not let go of it within 200ms. " +
			"End that process (or close the session there) and try again; to work on a copy instead, start rpi with --fork " + path + "."
	}
	// open runs an rpi on path that asks for the session's name.
	open := func(path string) (int, string) {
		var out syncBuffer
		code := runRPI(t, e, []string{"rpc", "--cwd", dir, "--session", path}, strings.NewReader(`{"id":"s","type":"get_state"}`+"\n"), &out)
		return code, out.String()
	}
	first := startSessionIn(t, e, []string{"rpc", "--cwd", dir, "--session", path})
	first.send(`{"id":"n","type":"set_session_name","name":"Renamed by the first"}`)
	first.waitFor(`"id":"n"`)

	if code, out := open(path); code == 0 || out != `{"type":"response","command":"init","success":false,"error":`+quote(inUse(path))+"}\n" {
		t.Errorf("a second rpi on the file: exit %d, %s", code, out)
	}
	other := startSessionIn(t, e, []string{"rpc", "--cwd", dir})
	other.send(`{"id":"sw","type":"switch_session","sessionPath":"` + path + `"}`)
	other.waitFor(`"id":"sw"`)
	other.send(`{"id":"s","type":"get_state"}`)
	other.waitFor(`"id":"s"`)
	other.close()
	if want := `{"id":"sw","type":"response","command":"switch_session","success":false,"error":` + quote(inUse(path)) + `}`; !strings.Contains(string(other.out.bytes()), want) ||
		strings.Contains(string(other.out.bytes()), `"sessionName":"Renamed by the first"`) {
		t.Errorf("switch_session to a file another rpi holds:\n%s", other.out.bytes())
	}

	first.send(`{"id":"c","type":"clone"}`)
	first.waitFor(`"id":"c"`)
	first.send(`{"id":"s","type":"get_state"}`)
	first.waitFor(`"id":"s"`)
	var clone string
	for _, rec := range first.records() {
		if rec["id"] == "s" {
			clone = rec["data"].(map[string]any)["sessionFile"].(string)
		}
	}
	if code, out := open(path); code != 0 || !strings.Contains(out, `"sessionName":"Renamed by the first"`) {
		t.Errorf("the file the first rpi left: exit %d, %s", code, out)
	}
	if code, out := open(clone); code == 0 || !strings.Contains(out, quote(inUse(clone))) {
		t.Errorf("the clone the first rpi holds: exit %d, %s", code, out)
	}
	first.close()
	if code, out := open(clone); code != 0 || !strings.Contains(out, `"sessionName":"Renamed by the first"`) {
		t.Errorf("the clone after the first rpi ended: exit %d, %s", code, out)
	}
}

// TestSessionHandOff does what pi-acp's session/load does: it stops one
// rpi with SIGTERM and at once starts another on the same session file.
// The first still writes its last entry (a bash command whose shell takes
// a second to end), then lets go of the file; the second waits for it,
// starts, and has that entry.
func TestSessionHandOff(t *testing.T) {
	endToEnd(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "handed.jsonl")
	os.WriteFile(path, []byte(`{"type":"session","version":3,"id":"1a2b3c4d-0000-4000-8000-00000000000d","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}
`), 0o644)
	old := startRPI(t, "rpc", "--cwd", dir, "--session", path)
	old.next(t)
	old.send(t, `{"id":"b","type":"bash","command":"trap 'sleep 1; echo last words; exit' TERM; echo started; sleep 30 & wait"}`+"\n")
	old.until(t, "bash_execution_update", "")
	old.cmd.Process.Signal(syscall.SIGTERM)
	next := startRPI(t, "rpc", "--cwd", dir, "--session", path)
	if rec := next.next(t); rec["type"] != "session_started" {
		t.Fatalf("the second rpi: %v", rec)
	}
	next.send(t, `{"id":"m","type":"get_messages"}`+"\n")
	rec := next.until(t, "response", "m")
	messages, _ := json.Marshal(rec["data"])
	if !strings.Contains(string(messages), `"role":"bashExecution"`) || !strings.Contains(string(messages), "last words") {
		t.Errorf("the second rpi lacks the first one's last entry: %s", messages)
	}
	if code, _ := old.exit(t); code != 0 {
		t.Errorf("the first rpi exited %d", code)
	}
	next.stdin.Close()
	next.exit(t)
}

// linesWriter keeps what is written and closes done once it holds want
// lines.
type linesWriter struct {
	bytes.Buffer
	want, lines int
	done        chan struct{}
}

func (w *linesWriter) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	if w.lines < w.want {
		if w.lines += bytes.Count(p, []byte("\n")); w.lines >= w.want {
			close(w.done)
		}
	}
	return n, err
}

// waitReader is a reader that ends (io.EOF) once it is closed, or after
// a minute: a test whose lines never come fails instead of hanging.
type waitReader chan struct{}

func (r waitReader) Read([]byte) (int, error) {
	select {
	case <-r:
	case <-time.After(time.Minute):
	}
	return 0, io.EOF
}

// TestLongChainOfEntries opens a session of 100,000 entries, each the child
// of the one before, with every goroutine's stack limited to 16 MiB:
// get_tree writes the tree nested 100,000 deep without recursing (nested
// encoders ran out of stack: a chain of 500,000 crashed rpi with the
// runtime's 1 GiB), and get_entries writes every entry.
func TestLongChainOfEntries(t *testing.T) {
	const n = 100_000
	path := filepath.Join(t.TempDir(), "chain.jsonl")
	file := []byte(`{"type":"session","version":3,"id":"1a2b3c4d-0000-4000-8000-000000000001","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}` + "\n")
	var entries, nodes []byte
	parent := "null"
	for i := range n {
		line := fmt.Sprintf(`{"type":"model_change","id":"%x","parentId":%s,"timestamp":"t","provider":"p","modelId":"m"}`, i, parent)
		switch i { // a message and a thinking level: rpi adds no entry as it opens the session (openEntries)
		case 0:
			line = fmt.Sprintf(`{"type":"thinking_level_change","id":"%x","parentId":%s,"timestamp":"t","thinkingLevel":"medium"}`, i, parent)
		case 1:
			line = fmt.Sprintf(`{"type":"message","id":"%x","parentId":%s,"timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1}}`, i, parent)
		}
		parent = fmt.Sprintf(`"%x"`, i)
		file = append(append(file, line...), '\n')
		if i > 0 {
			entries = append(entries, ',')
		}
		entries = append(entries, line...)
		nodes = append(append(append(nodes, `{"entry":`...), line...), `,"children":[`...)
	}
	nodes = append(nodes, strings.Repeat("]}", n)...)
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	defer debug.SetMaxStack(debug.SetMaxStack(16 << 20))
	// stdin ends once both answers are out: answers still being written
	// at the end would be given up after a second without progress,
	// which a loaded race run can reach with 20 MB to write.
	out := &linesWriter{want: 3, done: make(chan struct{})}
	input := `{"id":"t","type":"get_tree"}` + "\n" + `{"id":"e","type":"get_entries"}` + "\n"
	stdin := io.MultiReader(strings.NewReader(input), waitReader(out.done))
	if code := runRPI(t, newTestEnv(t), []string{"rpc", "--session", path}, stdin, out); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	leaf := fmt.Sprintf(`"%x"`, n-1)
	want := []string{
		`{"id":"t","type":"response","command":"get_tree","success":true,"data":{"tree":[` + string(nodes) + `],"leafId":` + leaf + `,"activeLeafId":` + leaf + `}}`,
		`{"id":"e","type":"response","command":"get_entries","success":true,"data":{"entries":[` + string(entries) + `],"leafId":` + leaf + `}}`,
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 || lines[1] != want[0] || lines[2] != want[1] {
		t.Errorf("get_tree and get_entries of a chain of %d entries: got %d lines:\n%.300s", n, len(lines), out.String())
	}
}

// TestEmptySessionFile: --session naming an empty file (as mktemp makes
// it) starts a new session in that file, as pi does: its header is
// written at once, in place, so the file keeps its inode and its mode.
// rpi refused such a file. A file of blank lines, or of a byte order mark
// alone, is still no session (pi refuses both too).
func TestEmptySessionFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "made-by-mktemp")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(path)
	var out bytes.Buffer
	if code := runRPI(t, newTestEnv(t), []string{"rpc", "--session", path}, strings.NewReader(`{"id":"s","type":"get_state"}`+"\n"), &out); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, out.String())
	}
	var started struct{ Data struct{ ID string } }
	first, _, _ := strings.Cut(out.String(), "\n")
	json.Unmarshal([]byte(first), &started)
	data, _ := os.ReadFile(path)
	header, _, _ := strings.Cut(string(data), "\n")
	if started.Data.ID == "" || !strings.HasPrefix(header, `{"type":"session","version":3,"id":"`+started.Data.ID+`"`) ||
		!strings.Contains(string(data), `"type":"thinking_level_change"`) {
		t.Errorf("session_started %s; the file:\n%s", first, data)
	}
	if !strings.Contains(out.String(), `"sessionFile":"`+path+`"`) {
		t.Errorf("get_state does not name the file:\n%s", out.String())
	}
	after, _ := os.Stat(path)
	if !os.SameFile(before, after) || after.Mode().Perm() != 0o600 {
		t.Errorf("the file was replaced (same: %v) or its mode changed (%v)", os.SameFile(before, after), after.Mode().Perm())
	}
	for content, why := range map[string]string{"\n \n": "it holds only blank lines", "\uFEFF": "it holds only blank lines"} {
		os.WriteFile(path, []byte(content), 0o600)
		out.Reset()
		if code := runRPI(t, newTestEnv(t), []string{"rpc", "--session", path}, strings.NewReader(""), &out); code == 0 || !strings.Contains(out.String(), "("+why+")") {
			t.Errorf("%q: exit %d, %s", content, code, out.String())
		}
		if data, _ := os.ReadFile(path); string(data) != content {
			t.Errorf("%q was written: %q", content, data)
		}
	}
}

// TestLinesBeforeTheHeader: lines before the header that are no JSON, or
// JSON that JavaScript counts as false, are passed over as pi 1.6 passes
// them over, and the client is told of them as of any line that is no
// entry; rpi refused such a file. The first JSON line that is kept must be
// the header, as in pi.
func TestLinesBeforeTheHeader(t *testing.T) {
	header := `{"type":"session","version":3,"id":"1a2b3c4d-0000-4000-8000-000000000004","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}`
	user := `{"type":"message","id":"a1","parentId":null,"timestamp":"t","message":{"role":"user","content":"hi","timestamp":1}}`
	for _, tt := range []struct{ before, want string }{
		{"garbage\n\nnull\n0\n", `"Skipped 3 line(s) of $PATH that are not session entries (line [1 3 4])`},
		{"1\n", `(the first line is not a session header)`},
		{`{"type":"message"}` + "\n", `(the first line is not a session header)`},
		{"garbage\n", ``},
	} {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		content := tt.before + header + "\n" + user + "\n"
		if tt.want == "" {
			content, tt.want = tt.before, "(no line of it is a session header)"
		}
		os.WriteFile(path, []byte(content), 0o644)
		var out bytes.Buffer
		code := runRPI(t, newTestEnv(t), []string{"rpc", "--session", path}, strings.NewReader(`{"id":"m","type":"get_messages"}`+"\n"), &out)
		opened := strings.Contains(out.String(), `"text":"hi"`)
		if !strings.Contains(out.String(), strings.ReplaceAll(tt.want, "$PATH", path)) || opened != (code == 0) || opened != strings.HasPrefix(tt.want, `"Skipped`) {
			t.Errorf("%q before the header: exit %d\n%s", tt.before, code, out.String())
		}
	}
}

// TestUsageSumsHeld: a session file's token counts and costs may be any
// number; their sums in get_session_stats are held at the largest there
// is. Two counts of the largest int summed to a negative one, and two
// large costs to +Inf, which made the answer an internal error; a 32-bit
// build lost the counts.
func TestUsageSumsHeld(t *testing.T) {
	path := filepath.Join(t.TempDir(), "usage.jsonl")
	answer := func(id, parent string) string {
		return `{"type":"message","id":"` + id + `","parentId":` + parent + `,"timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"x"}],` +
			`"api":"x","provider":"p","model":"m","usage":{"input":9223372036854775807,"output":5,"cacheRead":0,"cacheWrite":0,` +
			`"totalTokens":9223372036854775807,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":1.5e308}},"stopReason":"stop","timestamp":1}}` + "\n"
	}
	file := `{"type":"session","version":3,"id":"1a2b3c4d-0000-4000-8000-000000000003","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}` + "\n" +
		answer("a1", "null") + answer("a2", `"a1"`)
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := runRPI(t, newTestEnv(t), []string{"rpc", "--session", path}, strings.NewReader(`{"id":"s","type":"get_session_stats"}`+"\n"), &out); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	// A 32-bit build holds each count at its largest int as it reads it.
	most := strconv.Itoa(math.MaxInt)
	want := `"tokens":{"input":` + most + `,"output":10,"cacheRead":0,"cacheWrite":0,"total":` + most + `},"cost":1.7976931348623157e+308}`
	if !strings.Contains(out.String(), want) {
		t.Errorf("got\n%s\nwant an answer with %s", out.String(), want)
	}
}

// TestSessionBytesNotUTF8: bytes that are not UTF-8 in a session file
// (tool arguments, details, a message of a role rpi does not know, a
// custom entry's content and details, an entry type rpi does not know, a
// member it does not know) reach no client: get_messages, get_entries and get_tree
// write each as U+FFFD, as pi reads such a file. The file keeps them.
func TestSessionBytesNotUTF8(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bytes.jsonl")
	file := `{"type":"session","version":3,"id":"1a2b3c4d-0000-4000-8000-000000000002","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}
{"type":"message","id":"a1","parentId":null,"timestamp":"t","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"ls \xff"}}],"api":"x","provider":"p","model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"toolUse","timestamp":1}}
{"type":"message","id":"a2","parentId":"a1","timestamp":"t","message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"ok"}],"details":{"path":"\xfe"},"isError":false,"timestamp":2}}
{"type":"message","id":"a3","parentId":"a2","timestamp":"t","message":{"role":"mystery","note":"\xff\xfe"}}
{"type":"custom_message","id":"a4","parentId":"a3","timestamp":"t","customType":"x","content":[{"type":"text","text":"\xc3"}],"display":true,"details":{"d":"\xfe"}}
{"type":"whatever","id":"a5","parentId":"a4","timestamp":"t","note":"\xe2\x80"}
{"type":"message","id":"a6","parentId":"a5","timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":3,"x":"\xf0"},"y":"\x80"}
`
	file = regexp.MustCompile(`\\x[0-9a-f]{2}`).ReplaceAllStringFunc(file, func(hex string) string {
		b, _ := strconv.ParseUint(hex[2:], 16, 8)
		return string([]byte{byte(b)})
	})
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	input := `{"id":"m","type":"get_messages"}` + "\n" + `{"id":"e","type":"get_entries"}` + "\n" + `{"id":"t","type":"get_tree"}` + "\n"
	var out bytes.Buffer
	if code := runRPI(t, newTestEnv(t), []string{"rpc", "--session", path}, strings.NewReader(input), &out); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	answers := 0
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if !utf8.ValidString(line) {
			t.Errorf("a line that is not UTF-8: %q", line)
		}
		var answer struct {
			ID      string
			Success bool
		}
		if json.Unmarshal([]byte(line), &answer) == nil && answer.ID != "" {
			answers++
			if replaced := strings.Count(line, "\uFFFD"); !answer.Success || replaced < 3 {
				t.Errorf("%s: %d bytes written as U+FFFD: %.400s", answer.ID, replaced, line)
			}
		}
	}
	if answers != 3 {
		t.Errorf("%d answers, want 3:\n%s", answers, out.String())
	}
	if kept, err := os.ReadFile(path); err != nil || !strings.HasPrefix(string(kept), file) {
		t.Errorf("the file no longer holds its bytes (%v)", err)
	}
}

// TestSkippedLinesToldBounded: a file of many short lines that are no
// entries, before its header and after it, is told of by their count and
// the numbers of the first of them: each number was kept and told, 8
// bytes held and about 8 sent for each 2-byte line ("x\n"), so that a
// 64 MiB file made rpi hold and send a notice of 277 MiB. A torn last
// line is still left out of the count.
func TestSkippedLinesToldBounded(t *testing.T) {
	header := `{"type":"session","version":3,"id":"1a2b3c4d-0000-4000-8000-000000000005","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}` + "\n"
	user := `{"type":"message","id":"a1","parentId":null,"timestamp":"t","message":{"role":"user","content":"hi","timestamp":1}}` + "\n"
	junk := strings.Repeat("x\n", 5000)
	path := filepath.Join(t.TempDir(), "s.jsonl")
	os.WriteFile(path, []byte(junk+header+junk+user+junk+`{"torn`), 0o644)
	ss, err := loadSessionFile(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	notice := ss.skippedNotice()
	if want := "Skipped 15000 line(s) of " + path + " that are not session entries (line [1 2 3 "; !strings.HasPrefix(notice, want) || len(notice) > 1000 ||
		!strings.Contains(notice, " 100] and 14900 more)") || len(ss.entries) != 1 {
		t.Errorf("%d entries, notice (%d bytes) %.300s…", len(ss.entries), len(notice), notice)
	}
	// Read in parts, the count and the first lines are the same.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := []int{}
	for line := 5002; len(want) < maxToldLines; line++ {
		want = append(want, line)
	}
	for parts := 1; parts <= 7; parts++ {
		read, err := readEntries(t.Context(), f, int64(len(junk+header)), 5001, true, parts)
		if err != nil || read.skipped.n != 10000 || !slices.Equal(read.skipped.first, want) {
			t.Errorf("%d parts: %d skipped, the first %v (%v)", parts, read.skipped.n, read.skipped.first, err)
		}
	}
}

// TestLoadStopsBeforeTheHeader: a load stops when its context ends while
// it is still passing over the lines before a header, as it stops among
// the entries: those lines may be all of a large file that has no header.
func TestLoadStopsBeforeTheHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	os.WriteFile(path, []byte(strings.Repeat("not a session line\n", 1<<12)), 0o644)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := loadSessionFile(ctx, path); err == nil || !strings.Contains(err.Error(), "Stopped reading session file") {
		t.Errorf("loaded after its context ended: %v", err)
	}
}

// TestSessionIDInFoldersWithPatternCharacters: --session-id finds the
// cwd's session by its file's name, never reading the folder's path as a
// pattern: a cwd named "p[1]" opens its own session again, and one named
// "q*" does not open the session of the project "qz" beside it.
func TestSessionIDInFoldersWithPatternCharacters(t *testing.T) {
	e, parent := newTestEnv(t), t.TempDir()
	write := func(cwd, text string) {
		dir := defaultSessionDir(e.agentDir, cwd)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		lines := `{"type":"session","version":3,"id":"my-id","timestamp":"2026-03-16T09:00:00.000Z","cwd":` + strconv.Quote(cwd) + "}\n" +
			`{"type":"message","id":"aaaaaaa1","parentId":null,"timestamp":"2026-03-16T09:00:01.000Z","message":{"role":"user","content":` + strconv.Quote(text) + `,"timestamp":1}}` + "\n"
		if err := os.WriteFile(filepath.Join(dir, "2026-03-16T09-00-00-000Z_my-id.jsonl"), []byte(lines), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	state := func(cwd string) string {
		if err := os.MkdirAll(cwd, 0o755); err != nil {
			t.Fatal(err)
		}
		ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd, "--session-id", "my-id"})
		ps.send(`{"id":"m","type":"get_messages"}`)
		ps.waitFor(`"id":"m"`)
		ps.close()
		return string(ps.out.bytes())
	}
	own := filepath.Join(parent, "p[1]")
	write(own, "the question of p[1]")
	if out := state(own); !strings.Contains(out, "the question of p[1]") {
		t.Errorf("--session-id in %s did not open its session again:\n%s", own, out)
	}
	write(filepath.Join(parent, "qz"), "the question of qz")
	if out := state(filepath.Join(parent, "q*")); strings.Contains(out, "the question of qz") {
		t.Errorf("--session-id in q* opened the session of qz:\n%s", out)
	}
}

// TestSymlinkedSessionFileStaysALink: a session file given as a symlink
// and written whole (a version 2 file brought to version 3) is written
// where the link leads, as its appends are and as pi writes it: the link
// stays a link, and the file it names holds the whole conversation.
func TestSymlinkedSessionFileStaysALink(t *testing.T) {
	e, cwd, dir := newTestEnv(t), t.TempDir(), t.TempDir()
	startFakeModel(t, apiOpenAI, `{"text":["hello"]}`, e.agentDir)
	v2, err := os.ReadFile("testdata/sessions/pi-v2.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	real, link := filepath.Join(dir, "real.jsonl"), filepath.Join(dir, "link.jsonl")
	if err := os.WriteFile(real, v2, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd, "--session", link})
	ps.send(`{"id":"p","type":"prompt","message":"through the link"}`)
	ps.waitFor(`"type":"agent_settled"`)
	ps.close()
	if info, err := os.Lstat(link); err != nil || info.Mode()&os.ModeSymlink == 0 {
		t.Errorf("%s is no longer a symlink: %v, %v", link, info.Mode(), err)
	}
	lines := sessionLines(t, real)
	if !strings.Contains(lines[0], `"version":3`) || !strings.Contains(strings.Join(lines, "\n"), "through the link") {
		t.Errorf("the file the link names was not written:\n%s", strings.Join(lines, "\n"))
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(leftovers) > 0 {
		t.Errorf("temp files left: %v", leftovers)
	}
}

// TestSessionStartedRightAfterTheAnswer: a session change answered from
// the background (switch_session reads its file there) is followed at
// once by its session_started: an answer to a command sent after it, on
// the command loop meanwhile, comes before that answer or after the
// event, never between them.
func TestSessionStartedRightAfterTheAnswer(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i, id := range []string{"1a2b3c4d-0000-4000-8000-00000000000a", "1a2b3c4d-0000-4000-8000-00000000000b"} {
		path := filepath.Join(dir, fmt.Sprint(i, ".jsonl"))
		os.WriteFile(path, []byte(`{"type":"session","version":3,"id":"`+id+`","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}`+"\n"), 0o644)
		paths = append(paths, path)
	}
	const rounds = 200
	var input strings.Builder
	for i := range rounds {
		fmt.Fprintf(&input, `{"id":"sw%d","type":"switch_session","sessionPath":%q}`+"\n", i, paths[i%2])
		for j := range 3 {
			fmt.Fprintf(&input, `{"id":"q%d.%d","type":"get_state"}`+"\n", i, j)
		}
	}
	ps := startSessionIn(t, newTestEnv(t), []string{"rpc", "--cwd", dir, "--no-session"})
	go io.WriteString(ps.in, input.String()) // all at once; stdin ends once every switch is answered
	ps.waitFor(fmt.Sprintf(`"id":"sw%d"`, rounds-1))
	ps.close()
	lines := strings.Split(string(ps.out.bytes()), "\n")
	answered := 0
	for i, line := range lines {
		if !strings.Contains(line, `"command":"switch_session"`) {
			continue
		}
		answered++
		if !strings.Contains(line, `"success":true`) {
			t.Fatalf("a switch failed: %s", line)
		}
		if next := lines[i+1]; !strings.HasPrefix(next, `{"type":"session_started"`) {
			t.Fatalf("after %s\ncame %s", line, next)
		}
	}
	if answered != rounds {
		t.Errorf("%d switches answered, want %d", answered, rounds)
	}
}

// TestSessionStartedRightAfterABusyChangesAnswer: a new_session sent
// while the agent waits on an approval dialog is answered from the
// background, once the run it aborts (closing the dialog) has settled;
// the command loop meanwhile answers the client's get_state lines and
// its late answer to that dialog, none of them between the change's
// answer and its session_started, and nothing waits for another.
func TestSessionStartedRightAfterABusyChangesAnswer(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"w1","name":"write","args":["{\"path\":\"new.txt\",\"content\":\"hello\"}"]}]}`+"\n"+`{"text":["Done."]}`, e.agentDir)
	// The dialog stays open until the change closes it.
	os.WriteFile(filepath.Join(e.agentDir, "settings.json"), []byte(`{"retry":{"baseDelayMs":1},"confirmTimeoutMs":3600000}`), 0o644)
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir(), "--confirm", "write"})
	ps.send(`{"id":"p","type":"prompt","message":"Write it"}`)
	ps.waitFor(`"method":"confirm"`)
	dialog := regexp.MustCompile(`"type":"extension_ui_request","id":"([^"]+)","method":"confirm"`).FindStringSubmatch(string(ps.out.bytes()))
	if dialog == nil {
		t.Fatalf("no dialog id in:\n%s", ps.out.bytes())
	}
	const queries = 50
	var input strings.Builder
	input.WriteString(`{"id":"n","type":"new_session"}` + "\n")
	for i := range queries {
		if i == queries/2 {
			fmt.Fprintf(&input, `{"type":"extension_ui_response","id":%q,"confirmed":true}`+"\n", dialog[1])
		}
		fmt.Fprintf(&input, `{"id":"q%d","type":"get_state"}`+"\n", i)
	}
	io.WriteString(ps.in, input.String())
	ps.waitFor(`"id":"n"`)
	ps.send(`{"id":"last","type":"get_state"}`)
	ps.waitFor(`"id":"last"`)
	ps.close()
	lines := strings.Split(string(ps.out.bytes()), "\n")
	answered := 0
	for i, line := range lines {
		if strings.HasPrefix(line, `{"id":"q`) {
			answered++
		}
		if !strings.Contains(line, `"command":"new_session"`) {
			continue
		}
		if !strings.Contains(line, `"success":true`) {
			t.Fatalf("new_session failed: %s", line)
		}
		if next := lines[i+1]; !strings.HasPrefix(next, `{"type":"session_started"`) {
			t.Errorf("after %s\ncame %s", line, next)
		}
	}
	if answered != queries {
		t.Errorf("%d get_state answered, want %d:\n%s", answered, queries, ps.out.bytes())
	}
}

// TestOpenEntriesFailedAppendKeepsTheFile: the entries a session gets as
// it is opened (openEntries: here the thinking level of a file with
// messages and none) are appended to its file; where that append fails
// (the file gone here; a read-only file too, which root cannot make),
// the file is not written again from memory, as a failed append
// otherwise is (a session opened only to be read must not be rewritten):
// the client is told, and the entries wait for the next answer, which
// writes the file whole with them.
func TestOpenEntriesFailedAppendKeepsTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "old.jsonl")
	content := `{"type":"session","version":3,"id":"1a2b3c4d-0000-4000-8000-0000000000f1","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}` + "\n" +
		`{"type":"message","id":"d0000001","parentId":null,"timestamp":"2026-03-16T09:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}` + "\n"
	os.WriteFile(path, []byte(content), 0o644)
	ss, err := loadSessionFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	var writers []func()
	var warnings []string
	c := &conversation{clock: realClock{}, warn: func(w string) { warnings = append(warnings, w) }, deliver: func() {},
		background: func(work func()) { writers = append(writers, work) }}
	sc := c.replace(ss, ss.context())
	c.openEntries(sc, nil, "high")
	os.Remove(path) // before the writer appends
	for _, w := range writers {
		w()
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the file was written again from memory at once: %v", err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "kept in memory, and the file is written with the next message") {
		t.Errorf("warnings %q", warnings)
	}
	writers = nil
	c.appendMessage(rawMessage(`{"role":"assistant","content":[],"timestamp":2}`))
	data, _ := os.ReadFile(path)
	if lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n"); len(lines) != 4 || !strings.Contains(lines[2], `"thinkingLevel":"high"`) {
		t.Errorf("after the answer, the file:\n%s", data)
	}
	c.close()
}

// TestSessionIDClaimedByTwoRPIs starts two rpi processes with one
// --session-id in one session folder, the second while the first has
// written nothing yet (a session's file comes with its first message):
// the second waits for the id as for a held file, then is refused with
// an init error, and neither made a file of its own. Before, each found
// no file and started a session with that id, and two files had it.
// Once the first has its file and has ended, a third opens that session.
// A folder made only for the claim is gone when nothing was written.
func TestSessionIDClaimedByTwoRPIs(t *testing.T) {
	endToEnd(t)
	cwd, dir := t.TempDir(), filepath.Join(t.TempDir(), "sessions")
	args := []string{"rpc", "--cwd", cwd, "--session-dir", dir, "--session-id", "shared-id", "--model", "faux/faux-1"}
	first := startRPIWith(t, withEnv("PI_FAUX_RESPONSE=Hello"), args...)
	if rec := first.next(t); rec["type"] != "session_started" {
		t.Fatalf("the first rpi: %v", rec)
	}
	second := startRPI(t, args...)
	second.stdin.Close()
	want := `{"type":"response","command":"init","success":false,"error":"Session id 'shared-id' is being started by another rpi process, ` +
		`which has not written its file yet and did not let go of the id within 5s. End that process (or wait for its first message) and try again."}` + "\n"
	if code, out := second.exit(t); code == 0 || out != want {
		t.Errorf("the second rpi: exit %d, %s", code, out)
	}
	first.send(t, `{"id":"p","type":"prompt","message":"Hi"}`+"\n")
	first.until(t, "agent_settled", "")
	first.send(t, `{"id":"s","type":"get_state"}`+"\n")
	file := first.until(t, "response", "s")["data"].(map[string]any)["sessionFile"].(string)
	first.stdin.Close()
	first.exit(t)
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || filepath.Join(dir, entries[0].Name()) != file {
		t.Errorf("the session folder holds %v, want only %s", entries, file)
	}
	third := startRPI(t, args...)
	third.next(t)
	third.send(t, `{"id":"s","type":"get_state"}`+"\n")
	if got := third.until(t, "response", "s")["data"].(map[string]any)["sessionFile"]; got != file {
		t.Errorf("the third rpi opened %v, want %s", got, file)
	}
	third.stdin.Close()
	third.exit(t)

	unused := filepath.Join(t.TempDir(), "a", "b")
	p := startRPI(t, "rpc", "--cwd", cwd, "--session-dir", unused, "--session-id", "never-written")
	p.next(t)
	p.stdin.Close()
	p.exit(t)
	if _, err := os.Stat(filepath.Dir(unused)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the folders made for a claim of a session never written are there: %v", err)
	}
}

// TestSessionIDClaimedAtOnce runs two rpis (in one process: their locks
// are on separate open files, as between processes) with one --session-id
// at the same moment: whichever claims the id first starts the session,
// and the other, once it has waited, is refused with an init error.
func TestSessionIDClaimedAtOnce(t *testing.T) {
	e := newTestEnv(t)
	e.lockWait = 200 * time.Millisecond
	cwd := t.TempDir()
	var ins [2]*io.PipeWriter
	var outs [2]*watchedOutput
	ended := make(chan int, 2)
	codes := [2]int{}
	for i := range 2 {
		pr, pw := io.Pipe()
		ins[i], outs[i] = pw, newWatchedOutput()
		go func() {
			codes[i] = runRPI(t, e, []string{"rpc", "--cwd", cwd, "--session-id", "at-once"}, pr, outs[i])
			ended <- i
		}()
	}
	// Without the claim both start, and run until their stdin ends.
	bothStarted, stop := make(chan struct{}), make(chan struct{})
	defer close(stop)
	go func() {
		for {
			started := 0
			var changed [2]chan struct{}
			for i, o := range outs {
				o.mu.Lock()
				if bytes.Contains(o.buf.Bytes(), []byte(`"type":"session_started"`)) {
					started++
				}
				changed[i] = o.changed
				o.mu.Unlock()
			}
			if started == 2 {
				close(bothStarted)
				return
			}
			select {
			case <-changed[0]:
			case <-changed[1]:
			case <-stop:
				return
			}
		}
	}()
	var lost int
	select {
	case lost = <-ended: // the winner runs until its stdin ends
	case <-bothStarted:
		ins[0].Close()
		ins[1].Close()
		<-ended
		<-ended
		t.Fatalf("both started session at-once:\n%s\n%s", outs[0].bytes(), outs[1].bytes())
	}
	won := 1 - lost
	ins[won].Close()
	<-ended
	if want := "Session id 'at-once' is being started by another rpi process"; codes[lost] == 0 || !strings.Contains(string(outs[lost].bytes()), want) {
		t.Errorf("the rpi that lost: exit %d, %s", codes[lost], outs[lost].bytes())
	}
	if codes[won] != 0 || !strings.Contains(string(outs[won].bytes()), `"type":"session_started"`) {
		t.Errorf("the rpi that won: exit %d, %s", codes[won], outs[won].bytes())
	}
}

// TestPromptOnASwitchAnswer: a prompt sent on reading a switch_session's
// answer starts. The switch, made in the background (it reads the file),
// ended its hold on runs only after its answer, so such a prompt (or a
// compact) now and then failed "A session change is in progress" under
// load; the hold now ends before the answer's connection takes its next
// command.
func TestPromptOnASwitchAnswer(t *testing.T) {
	endToEnd(t)
	const turns = 30
	var script strings.Builder
	for i := range turns {
		fmt.Fprintf(&script, "{\"text\":[\"answer-%d\"]}\n", i)
	}
	ps, _, cwd := agentSession(t, apiOpenAI, script.String())
	path := filepath.Join(cwd, "s.jsonl")
	os.WriteFile(path, []byte(`{"type":"session","version":3,"id":"0195f3a0-0000-7000-8000-0000000000a1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}`+"\n"), 0o600)
	for i := range turns {
		ps.send(fmt.Sprintf(`{"id":"sw-%d","type":"switch_session","sessionPath":%q}`, i, path))
		ps.waitFor(fmt.Sprintf(`"id":"sw-%d"`, i))
		ps.send(fmt.Sprintf(`{"id":"p-%d","type":"prompt","message":"question %d"}`, i, i))
		ps.waitFor(fmt.Sprintf(`"id":"p-%d"`, i))
		for _, rec := range ps.records() {
			if rec["id"] == fmt.Sprintf("p-%d", i) && rec["success"] != true {
				t.Fatalf("a prompt sent on a switch's answer failed: %v", rec)
			}
		}
		ps.waitFor(fmt.Sprintf(`"text":"answer-%d"}],"api"`, i))
	}
	ps.close()
}
