package main

// Tests of the seams a second front end builds on (ACP, docs/acp.md): a
// session opened on a host with a sink, a ui and files of the test's own,
// driven only through the session's operations, as such a front end would.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordingSink keeps every event a session reports, and marks when
// something else happened among them (mark).
type recordingSink struct {
	mu     sync.Mutex
	events []event
}

func (r *recordingSink) event(ev event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recordingSink) gatheredEvent(ev event) { r.event(ev) }

func (r *recordingSink) flush() {}

// mark records a pseudo-event named what, in order with the real ones.
func (r *recordingSink) mark(what string) { r.event(event{Type: "mark:" + what}) }

func (r *recordingSink) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var types []string
	for _, ev := range r.events {
		types = append(types, ev.Type)
	}
	return types
}

func (r *recordingSink) all() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// approvingUI allows every call and keeps what it was asked.
type approvingUI struct {
	mu        sync.Mutex
	approvals []approval
	changes   []fileChange
}

func (u *approvingUI) show(uiRequest) {}

func (u *approvingUI) ask(context.Context, uiRequest) uiAnswer { return uiAnswer{cancelled: true} }

func (u *approvingUI) approve(_ context.Context, a approval) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.approvals = append(u.approvals, a)
	if c, ok := a.call.(changer); ok && a.failed == nil {
		u.changes = append(u.changes, c.change())
	}
	return true
}

// memFiles is an editor's buffers: files the disk does not have.
type memFiles struct {
	mu    sync.Mutex
	files map[string]string
}

func (m *memFiles) open(_ context.Context, abs string) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	text, ok := m.files[abs]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return io.NopCloser(strings.NewReader(text)), nil
}

func (m *memFiles) target(_ context.Context, path, abs string, create bool) (changeTarget, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.files[abs]; !ok && !create {
		return nil, fs.ErrNotExist
	}
	return &memTarget{m, abs}, nil
}

func (m *memFiles) get(abs string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	text, ok := m.files[abs]
	return text, ok
}

type memTarget struct {
	m   *memFiles
	abs string
}

func (t *memTarget) exists() bool  { _, ok := t.m.get(t.abs); return ok }
func (t *memTarget) size() int64   { text, _ := t.m.get(t.abs); return int64(len(text)) }
func (t *memTarget) where() string { return " (in the editor)" }
func (t *memTarget) close()        {}

func (t *memTarget) read(_ context.Context, limit int64) ([]byte, error) {
	text, ok := t.m.get(t.abs)
	if !ok {
		return nil, fs.ErrNotExist
	}
	return []byte(text), nil
}

func (t *memTarget) write(_ context.Context, verb string, before, content []byte) error {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	if before != nil && t.m.files[t.abs] != string(before) {
		return errors.New("changed meanwhile")
	}
	t.m.files[t.abs] = string(content)
	return nil
}

// openTestSession opens a session in a fresh cwd on a host of its own,
// with the given sink, ui and files, against a fake model with script.
func openTestSession(t *testing.T, script string, sink eventSink, u ui, files fileEnv, args ...string) (*session, *fakeModel) {
	t.Helper()
	return openTestSessionIn(t, newTestEnv(t), script, sink, u, files, args...)
}

// openTestSessionIn is openTestSession in the test environment e (its
// agent dir prepared).
func openTestSessionIn(t testing.TB, e *testEnv, script string, sink eventSink, u ui, files fileEnv, args ...string) (*session, *fakeModel) {
	t.Helper()
	fm := startFakeModel(t, apiOpenAI, script, e.agentDir)
	h, cwd := hostIn(t, e, append([]string{"--no-session"}, args...)...)
	s, err := openSession(h, sessionOptions{cwd: cwd, sink: sink, ui: u, files: files})
	if err != nil {
		t.Fatal(err)
	}
	return s, fm
}

// receive waits up to 10 s for a value on ch, and fails saying that what
// never came.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never came", what)
		var zero T
		return zero
	}
}

// waitEnded waits for a prompt's ended callback.
func waitEnded(t *testing.T, ended <-chan promptEnd) promptEnd {
	t.Helper()
	return receive(t, ended, "the prompt's turn's end")
}

// TestSecondFrontEnd drives a session as ACP will: a prompt whose edit and
// write go to the editor's buffers (nothing reaches the disk), approved
// through the ui with the tool call's id and the file's text before and
// after, every event through the sink, and the prompt's end reported
// after agent_settled with its last answer.
func TestSecondFrontEnd(t *testing.T) {
	sink, u := &recordingSink{}, &approvingUI{}
	files := &memFiles{files: map[string]string{}}
	s, _ := openTestSession(t, `{"toolCalls":[{"id":"c1","name":"edit","args":["{\"path\":\"a.txt\",\"edits\":[{\"oldText\":\"one\",\"newText\":\"two\"}]}"]},`+
		`{"id":"c2","name":"write","args":["{\"path\":\"b.txt\",\"content\":\"new\"}"]},{"id":"c3","name":"read","args":["{\"path\":\"a.txt\"}"]}]}
{"text":["done"]}`, sink, u, files, "--confirm", "edit,write")
	a, b := filepath.Join(s.set.cwd, "a.txt"), filepath.Join(s.set.cwd, "b.txt")
	files.files[a] = "one\n"
	ended := make(chan promptEnd, 1)
	accepted := make(chan error, 1)
	msg := &userMessage{Role: "user", Content: textBlocks("change the files"), Timestamp: 1}
	s.startPrompt(msg, "", func(queued bool, err error) {
		sink.mark("accepted")
		accepted <- err
	}, func(end promptEnd) {
		sink.mark("ended")
		ended <- end
	})
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	end := waitEnded(t, ended)
	if !end.ran || end.aborted || end.answer == nil || end.answer.text() != "done" {
		t.Errorf("ended with %+v", end)
	}
	types := sink.types()
	if types[0] != "mark:accepted" || types[len(types)-1] != "mark:ended" || types[len(types)-2] != "agent_settled" {
		t.Errorf("events: %v; want the acceptance first and the end right after agent_settled", types)
	}
	if got, _ := files.get(a); got != "two\n" {
		t.Errorf("a.txt in the editor: %q", got)
	}
	if got, _ := files.get(b); got != "new" {
		t.Errorf("b.txt in the editor: %q", got)
	}
	for _, p := range []string{a, b} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s reached the disk (%v)", p, err)
		}
	}
	if len(u.approvals) != 2 || u.approvals[0].toolCallID != "c1" || u.approvals[1].toolCallID != "c2" || u.approvals[1].toolName != "write" {
		t.Fatalf("approvals: %+v", u.approvals)
	}
	want := []fileChange{{path: a, existed: true, before: []byte("one\n"), after: []byte("two\n")}, {path: b, after: []byte("new")}}
	if !slices.EqualFunc(u.changes, want, sameChange) {
		t.Errorf("approvals showed %+v, want %+v", u.changes, want)
	}
	var ends []toolExecEnd
	for _, ev := range sink.all() {
		if end, ok := ev.Data.(toolExecEnd); ok {
			ends = append(ends, end)
		}
	}
	if len(ends) != 3 || ends[0].Result.change == nil || !sameChange(*ends[0].Result.change, want[0]) ||
		ends[1].Result.change == nil || !sameChange(*ends[1].Result.change, want[1]) || ends[2].Result.change != nil {
		t.Errorf("tool_execution_end results: %+v", ends)
	}
	if ends[2].IsError || resultText(ends[2].Result.Content) != "two\n" {
		t.Errorf("read gave %q (error %v), want the editor's text", resultText(ends[2].Result.Content), ends[2].IsError)
	}
}

func sameChange(a, b fileChange) bool {
	return a.path == b.path && a.existed == b.existed && bytes.Equal(a.before, b.before) && bytes.Equal(a.after, b.after)
}

// TestPromptTurnsEnd: a follow-up queued during a prompt's turn ends that
// turn when the run takes it (before the follow-up's own message), and
// its own when the run settles; a message cleared from the queue ends
// unrun; an aborted prompt's turn ends aborted.
func TestPromptTurnsEnd(t *testing.T) {
	sink := &recordingSink{}
	s, fm := openTestSession(t, `{"text":["one"],"holdAt":1}
{"text":["two"]}
{"text":["three"],"holdAt":1}`, sink, &approvingUI{}, nil)
	prompt := func(text string, behaviour string) <-chan promptEnd {
		ended := make(chan promptEnd, 1)
		msg := &userMessage{Role: "user", Content: textBlocks(text), Timestamp: 1}
		s.startPrompt(msg, behaviour, func(queued bool, err error) {
			if err != nil {
				t.Errorf("%s: %v", text, err)
			}
		}, func(end promptEnd) {
			sink.mark("ended " + text)
			ended <- end
		})
		return ended
	}
	first := prompt("first", "")
	second := prompt("second", "followUp")
	fm.release <- struct{}{}
	if end := waitEnded(t, first); !end.ran || end.aborted || end.answer.text() != "one" {
		t.Errorf("first ended with %+v", end)
	}
	if end := waitEnded(t, second); !end.ran || end.aborted || end.answer.text() != "two" {
		t.Errorf("second ended with %+v", end)
	}
	var order []string
	for _, ev := range sink.all() {
		switch {
		case strings.HasPrefix(ev.Type, "mark:"), ev.Type == "agent_settled":
			order = append(order, ev.Type)
		case ev.Type == "message_start":
			if m, ok := ev.Data.(messageEvent).Message.(*userMessage); ok {
				order = append(order, "user "+m.Content[0].Text)
			}
		}
	}
	if want := "user first|mark:ended first|user second|agent_settled|mark:ended second"; strings.Join(order, "|") != want {
		t.Errorf("order %s, want %s", strings.Join(order, "|"), want)
	}

	third := prompt("third", "")
	fourth := prompt("fourth", "followUp")
	if removed := s.clearQueue(); len(removed.FollowUp) != 1 {
		t.Errorf("clearQueue removed %+v", removed)
	}
	if end := waitEnded(t, fourth); end.ran {
		t.Errorf("a cleared follow-up ended with %+v", end)
	}
	if settled := s.abort(); settled == nil {
		t.Fatal("abort found no run")
	}
	if end := waitEnded(t, third); !end.ran || !end.aborted {
		t.Errorf("an aborted prompt ended with %+v", end)
	}
}

// TestTwoSessionsOneHost opens two sessions in two working directories on
// one host with --max-running 1: each has its own context files, session
// file and processes; one runs at a time (a prompt in the other fails
// meanwhile, and works once the run has settled); closing one ends its
// processes and lets go of its session file at once.
func TestTwoSessionsOneHost(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"text":["one"],"holdAt":1}
{"text":["two"]}`, e.agentDir)
	cwdA, cwdB := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(cwdA, "AGENTS.md"), []byte("In A."), 0o644)
	os.WriteFile(filepath.Join(cwdB, "AGENTS.md"), []byte("In B."), 0o644)
	cfg, _, err := parseArgs([]string{"rpc", "--cwd", cwdA, "--max-running", "1"}, e.env())
	if err != nil {
		t.Fatal(err)
	}
	h, err := newHost(cfg, e.env(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer h.shutdown(false)
	open := func(cwd string) (*session, *recordingSink) {
		sink := &recordingSink{}
		s, err := openSession(h, sessionOptions{cwd: cwd, sink: sink, ui: &approvingUI{}})
		if err != nil {
			t.Fatal(err)
		}
		return s, sink
	}
	a, _ := open(cwdA)
	b, _ := open(cwdB)
	if a.set.contextFiles[0].content != "In A." || b.set.contextFiles[0].content != "In B." {
		t.Errorf("context files: %+v and %+v", a.set.contextFiles, b.set.contextFiles)
	}
	prompt := func(s *session, text string) (<-chan promptEnd, error) {
		ended := make(chan promptEnd, 1)
		var refused error
		s.startPrompt(&userMessage{Role: "user", Content: textBlocks(text), Timestamp: 1}, "",
			func(_ bool, err error) { refused = err }, func(end promptEnd) { ended <- end })
		return ended, refused
	}
	endedA, err := prompt(a, "in A")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prompt(b, "in B"); err == nil || err.Error() != "another session is running" {
		t.Errorf("a prompt in B while A runs: %v", err)
	}
	fm.release <- struct{}{}
	waitEnded(t, endedA)
	endedB, err := prompt(b, "in B")
	if err != nil {
		t.Fatalf("a prompt in B once A has settled: %v", err)
	}
	if end := waitEnded(t, endedB); end.answer.text() != "two" {
		t.Errorf("B's answer: %+v", end.answer)
	}
	path := a.conv.info().path
	if lock, err := lockSessionFile(context.Background(), path, 0); err == nil {
		lock.Close()
		t.Fatalf("A's session file %s is not held while A is open", path)
	}
	p, err := a.spawn(processSpec{Argv: []string{"sleep", "1000"}, Cwd: cwdA, OutputBytes: 1024}, "client", func(processInfo) {})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.findProcess(p.id); err == nil {
		t.Errorf("B sees A's process")
	}
	a.close()
	if !p.ended() {
		t.Errorf("A's process is %s after A's close", p.info().State)
	}
	lock, err := lockSessionFile(context.Background(), path, 0)
	if err != nil || lock == nil {
		t.Fatalf("A's session file after close: %v", err)
	}
	lock.Close()
	if sessions := h.openSessions(); len(sessions) != 1 || sessions[0] != b {
		t.Errorf("open sessions after A's close: %d", len(sessions))
	}
}

// startTestHost is a host (rpc's flags, a working directory of its own,
// which it returns) whose model answers script; it shuts down when the
// test ends.
func startTestHost(t *testing.T, script string) (*host, string) {
	t.Helper()
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, script, e.agentDir)
	return hostIn(t, e)
}

// hostIn starts a host in the test environment e with rpc's flags: args
// after "--cwd DIR", DIR a fresh directory, which it returns. The host
// shuts down when the test ends.
func hostIn(t testing.TB, e *testEnv, args ...string) (*host, string) {
	t.Helper()
	cfg, _, err := parseArgs(append([]string{"rpc", "--cwd", t.TempDir()}, args...), e.env())
	if err != nil {
		t.Fatal(err)
	}
	h, err := newHost(cfg, e.env(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.shutdown(false) })
	return h, cfg.cwd
}

// TestPromptEndAfterTheRunIsLetGo: when a prompt's end is reported (ACP
// answers the prompt then), the host's run is already let go of, so a
// prompt for another session that a client sends on that answer is not
// refused with "another session is running" (it was, now and then: the
// run was let go of after the report).
func TestPromptEndAfterTheRunIsLetGo(t *testing.T) {
	h, cwd := startTestHost(t, `{"text":["one"]}`)
	s, err := openSession(h, sessionOptions{cwd: cwd, sink: &recordingSink{}, ui: &approvingUI{}})
	if err != nil {
		t.Fatal(err)
	}
	runningAtEnd := make(chan int, 1)
	s.startPrompt(&userMessage{Role: "user", Content: textBlocks("hi"), Timestamp: 1}, "", func(bool, error) {}, func(promptEnd) {
		h.runs.mu.Lock()
		runningAtEnd <- len(h.runs.running)
		h.runs.mu.Unlock()
	})
	if running := receive(t, runningAtEnd, "the prompt's end"); running != 0 {
		t.Errorf("the host's run is still the session's when its prompt's end is reported")
	}
}

// TestSessionWrittenAtOnce: with writeNow, a new session's file (header,
// model and thinking level) exists as soon as the session is open, before
// any answer (ACP's session/new), so that another process can open it.
func TestSessionWrittenAtOnce(t *testing.T) {
	h, cwd := startTestHost(t, `{"text":["unused"]}`)
	s, err := openSession(h, sessionOptions{cwd: cwd, sink: &recordingSink{}, ui: &approvingUI{}, writeNow: true})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(s.conv.info().path)
	if lines := strings.Split(strings.TrimSpace(string(data)), "\n"); err != nil || len(lines) != 3 ||
		!strings.Contains(lines[0], `"id":"`+s.conv.header().ID+`"`) || !strings.Contains(lines[1], `"type":"model_change"`) {
		t.Errorf("the session file: %q, %v", data, err)
	}
}

// recordedFirstSink fails a message_end whose message the session has not
// recorded yet (s, once set): a client that sees message_end may at once
// ask for the entries (get_fork_messages, get_entries) and must find it.
type recordedFirstSink struct {
	recordingSink
	s        *session
	notFound []string
}

func (c *recordedFirstSink) event(ev event) {
	if me, ok := ev.Data.(messageEvent); ok && ev.Type == "message_end" && c.s != nil {
		if !slices.ContainsFunc(c.s.conv.messages(), func(m any) bool { return m == me.Message }) {
			c.mu.Lock()
			c.notFound = append(c.notFound, messageRole(mustJSON(me.Message)))
			c.mu.Unlock()
		}
	}
	c.recordingSink.event(ev)
}

// TestMessageRecordedBeforeItsEnd: each message (the user's, the model's
// answer, a tool result) is in the session before its message_end goes
// out, by construction: it was recorded just after, so a client that
// asked for the entries as soon as it saw message_end could miss it.
func TestMessageRecordedBeforeItsEnd(t *testing.T) {
	sink := &recordedFirstSink{}
	s, _ := openTestSession(t, `{"toolCalls":[{"id":"c1","name":"ls","args":["{}"]}]}
{"text":["done"]}`, sink, &approvingUI{}, nil, "--tools", "ls")
	sink.s = s
	ended := make(chan promptEnd, 1)
	s.startPrompt(&userMessage{Role: "user", Content: textBlocks("list"), Timestamp: 1}, "", func(bool, error) {}, func(end promptEnd) { ended <- end })
	waitEnded(t, ended)
	if ends := strings.Count(strings.Join(sink.types(), " "), "message_end"); ends != 4 {
		t.Errorf("%d message_end events, want 4 (the prompt, a call, its result, the answer)", ends)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.notFound) > 0 {
		t.Errorf("message_end came before its message was recorded, for the roles %q", sink.notFound)
	}
}

// TestCompactAnsweredOnceSettled: a compaction's answer (its done) comes
// once its run has settled, so a prompt sent on seeing it starts: the run
// settled just after, and such a prompt could fail with "Agent is already
// processing".
func TestCompactAnsweredOnceSettled(t *testing.T) {
	e := newTestEnv(t)
	os.WriteFile(filepath.Join(e.agentDir, "settings.json"), []byte(`{"compaction":{"keepRecentTokens":1}}`), 0o644)
	s, _ := openTestSessionIn(t, e, `{"text":["First answer."]}
{"text":["Second answer."]}
{"text":["SUMMARY"]}`, &recordingSink{}, &approvingUI{}, nil)
	for _, text := range []string{"one", "two"} {
		ended := make(chan promptEnd, 1)
		s.startPrompt(&userMessage{Role: "user", Content: textBlocks(text), Timestamp: 1}, "", func(bool, error) {}, func(end promptEnd) { ended <- end })
		waitEnded(t, ended)
	}
	busyAtAnswer := make(chan bool, 1)
	s.compact("", true, func(_ compactionResult, err error) {
		if err != nil {
			t.Errorf("compact: %v", err)
		}
		s.mu.Lock()
		busyAtAnswer <- s.activeRun != nil
		s.mu.Unlock()
	})
	if receive(t, busyAtAnswer, "the compaction's answer") {
		t.Errorf("the compaction was answered while its run was still active")
	}
}

// settledSink runs check on agent_settled, as the event is delivered.
type settledSink struct {
	recordingSink
	check func()
}

func (r *settledSink) event(ev event) {
	r.recordingSink.event(ev)
	if ev.Type == "agent_settled" {
		r.check()
	}
}

func (r *settledSink) gatheredEvent(ev event) { r.event(ev) }

// TestBashResultInBeforeSettled: a user bash command that ends while a
// run is in progress waits for the run's end to join the conversation;
// it is in by the time agent_settled is out, so a client that asks for
// the messages the moment it hears agent_settled finds it (it joined
// after the event: get_messages could miss it).
func TestBashResultInBeforeSettled(t *testing.T) {
	var s *session
	found := make(chan bool, 1)
	sink := &settledSink{}
	sink.check = func() {
		in := false
		for _, m := range s.conv.messages() {
			if b, ok := m.(bashExecutionMessage); ok && b.Command == "echo during" {
				in = true
			}
		}
		found <- in
	}
	s, _ = openTestSession(t, `{"text":["ok"]}`, sink, &approvingUI{}, nil)
	ended := make(chan promptEnd, 1)
	s.startPrompt(&userMessage{Role: "user", Content: textBlocks("go"), Timestamp: 1}, "", func(bool, error) {
		s.conv.addBashResult(bashExecutionMessage{Role: "bashExecution", Command: "echo during", Output: "during\n", Timestamp: 2})
	}, func(end promptEnd) { ended <- end })
	receive(t, ended, "the prompt's end")
	if !receive(t, found, "agent_settled") {
		t.Error("the bash result that ended during the run was not in the conversation when agent_settled was told")
	}
}
