package main

// Tests of the run lifecycle and of races between answers and events
// (docs/architecture.md): nothing queued is stranded, a dialog resolves
// once, the command loop never waits on the agent or the disk, and a
// process is ended for every command after its process_exited.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFollowUpAtTheSettlingMoment sends a follow-up prompt the moment a
// run's agent_end is out — while the run is settling — many times: each
// one runs (now or as the next run), none is left in the queue.
func TestFollowUpAtTheSettlingMoment(t *testing.T) {
	endToEnd(t)
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"text":["ok"]}`, e.agentDir)
	fm.repeat()
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir(), "--no-session"})
	const rounds = 30
	for i := range rounds {
		ps.send(fmt.Sprintf(`{"id":"p%d","type":"prompt","message":"question %d"}`, i, i))
		ps.waitFor(fmt.Sprintf(`"id":"p%d"`, i))
		waitUntil(t, ps, func(out string) bool { return strings.Count(out, `"type":"agent_end"`) >= 2*i+1 })
		ps.send(fmt.Sprintf(`{"id":"f%d","type":"prompt","message":"follow-up %d","streamingBehavior":"followUp"}`, i, i))
		ps.waitFor(fmt.Sprintf(`"id":"f%d"`, i))
		waitUntil(t, ps, func(out string) bool { return strings.Count(out, `"type":"agent_end"`) >= 2*i+2 })
		for {
			rec := askFor(t, ps, "s", `{"id":"s","type":"get_state"}`)
			data := rec["data"].(map[string]any)
			if data["isStreaming"] == false {
				if data["pendingMessageCount"].(float64) != 0 {
					t.Fatalf("round %d: a follow-up was left queued: %v", i, data)
				}
				break
			}
		}
	}
	rec := askFor(t, ps, "m", `{"id":"m","type":"get_messages"}`)
	users := 0
	for _, m := range rec["data"].(map[string]any)["messages"].([]any) {
		if m.(map[string]any)["role"] == "user" {
			users++
		}
	}
	ps.close()
	if users != 2*rounds {
		t.Errorf("%d user messages reached the model, want %d", users, 2*rounds)
	}
}

// askFor sends line, a command with this id, and returns its answer.
func askFor(t *testing.T, ps *processSession, id, line string) map[string]any {
	t.Helper()
	marker := fmt.Sprintf(`{"id":%q,"type":"response"`, id)
	before := strings.Count(string(ps.out.bytes()), marker)
	ps.send(line)
	waitUntil(t, ps, func(out string) bool { return strings.Count(out, marker) > before })
	recs := ps.records()
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i]["id"] == id && recs[i]["type"] == "response" {
			return recs[i]
		}
	}
	t.Fatalf("no answer %s", id)
	return nil
}

// waitUntil waits until the output satisfies done, or fails after 10 s.
func waitUntil(t *testing.T, ps *processSession, done func(out string) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !done(string(ps.out.bytes())) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting; output:\n%s", ps.out.bytes())
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// A dialog is resolved once, by whoever takes it from the open dialogs
// first: the client's answer, or its timeout. The tests below put each in
// first, and the answer in between (taken from the table, not yet handed
// to the dialog) when the timeout fires.

// dialogServer is a server on a fake clock with one confirm dialog open
// (1 s timeout): its id, and the dialog's outcome when it resolves.
func dialogServer(t *testing.T) (s *rpcServer, clock *fakeClock, id string, outcome <-chan uiAnswer) {
	t.Helper()
	e := newTestEnv(t)
	clock = newFakeClock()
	e.clock = clock
	cfg, _, err := parseArgs([]string{"rpc", "--cwd", t.TempDir(), "--no-session"}, e.env())
	if err != nil {
		t.Fatal(err)
	}
	s, err = newServer(cfg, e.env(), newConnection(nil, io.Discard, io.Discard), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.shutdown(false) })
	answered := make(chan uiAnswer, 1)
	go func() {
		answered <- s.dialogs.ask(context.Background(), uiRequest{Method: "confirm", Title: "ok?", Timeout: 1000})
	}()
	for deadline := time.Now().Add(10 * time.Second); id == "" || !clock.pending(); time.Sleep(10 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatal("the dialog never opened")
		}
		s.dialogs.mu.Lock()
		for k := range s.dialogs.open {
			id = k
		}
		s.dialogs.mu.Unlock()
	}
	return s, clock, id, answered
}

// confirmed is the client's extension_ui_response confirming dialog id.
func confirmed(s *rpcServer, id string) error {
	r := &rpcRequest{typ: "extension_ui_response", id: json.RawMessage(fmt.Sprintf("%q", id)),
		fields: fields{members: []member{{[]byte("confirmed"), []byte("true")}}}}
	_, err := s.extensionUIResponseCommand(r)
	return err
}

func waitAnswer(t *testing.T, outcome <-chan uiAnswer) uiAnswer {
	t.Helper()
	return receive(t, outcome, "the dialog's outcome")
}

// TestDialogAnswerBeforeTimeout: the answer comes first; the timeout that
// follows changes nothing.
func TestDialogAnswerBeforeTimeout(t *testing.T) {
	s, clock, id, outcome := dialogServer(t)
	if err := confirmed(s, id); err != nil {
		t.Fatalf("the answer was refused: %v", err)
	}
	if a := waitAnswer(t, outcome); a.cancelled || a.confirmed == nil || !*a.confirmed {
		t.Errorf("the dialog got %+v, want confirmed", a)
	}
	clock.advance(time.Second)
}

// TestDialogTimeoutBeforeAnswer: the timeout comes first and cancels the
// dialog; the answer that follows is refused as expired.
func TestDialogTimeoutBeforeAnswer(t *testing.T) {
	s, clock, id, outcome := dialogServer(t)
	clock.advance(time.Second)
	if a := waitAnswer(t, outcome); !a.cancelled {
		t.Errorf("the dialog got %+v, want cancelled", a)
	}
	if err := confirmed(s, id); err == nil || !strings.Contains(err.Error(), "already answered or expired") {
		t.Errorf("a late answer: %v", err)
	}
}

// TestDialogTimeoutWhileAnswerOnItsWay: the answer has taken the dialog
// from the table (as extension_ui_response does first) and not yet handed
// it over when the timeout fires: the dialog waits for that answer and
// gets it, however the two goroutines run.
func TestDialogTimeoutWhileAnswerOnItsWay(t *testing.T) {
	s, clock, id, outcome := dialogServer(t)
	d := s.dialogs.take(id)
	clock.advance(time.Second)
	yes := true
	d.answer <- uiAnswer{confirmed: &yes}
	if a := waitAnswer(t, outcome); a.cancelled || a.confirmed == nil || !*a.confirmed {
		t.Errorf("the dialog got %+v, want the answer", a)
	}
}

// servedInProcess is a server for args serving in this process, on a pipe
// the test writes lines to (send), with its output (seen waits for a text
// in it); stop ends its input and checks that it exits with 0.
type servedInProcess struct {
	t    *testing.T
	s    *rpcServer
	out  *watchedOutput
	in   *io.PipeWriter
	done chan int
}

func serveInProcess(t *testing.T, e *testEnv, args ...string) *servedInProcess {
	t.Helper()
	cfg, _, err := parseArgs(append([]string{"rpc"}, args...), e.env())
	if err != nil {
		t.Fatal(err)
	}
	sp := &servedInProcess{t: t, out: newWatchedOutput(), done: make(chan int)}
	pr, pw := io.Pipe()
	if sp.s, err = newServer(cfg, e.env(), newConnection(pr, sp.out, io.Discard), io.Discard); err != nil {
		t.Fatal(err)
	}
	sp.in = pw
	go func() { sp.done <- sp.s.serve(nil) }()
	return sp
}

func (sp *servedInProcess) send(lines ...string) {
	for _, line := range lines {
		io.WriteString(sp.in, line+"\n")
	}
}

func (sp *servedInProcess) seen(text string) {
	sp.t.Helper()
	if !sp.out.waitFor(text, func(b []byte) string { return string(b) }) {
		sp.t.Fatalf("never saw %s in:\n%s", text, sp.out.bytes())
	}
}

func (sp *servedInProcess) stop() {
	sp.t.Helper()
	sp.in.Close()
	if code := <-sp.done; code != 0 {
		sp.t.Errorf("exit %d", code)
	}
}

// TestCommandLoopNeverWaits holds the session file's writes (a disk that
// does not answer) while a run streams, then asks for a new session and
// the state: get_state is answered while the run cannot settle, and
// new_session answers once the disk is back.
func TestCommandLoopNeverWaits(t *testing.T) {
	endToEnd(t)
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"text":["slow ","answer"],"delayMs":100}`, e.agentDir)
	sp := serveInProcess(t, e, "--cwd", t.TempDir())
	sp.send(`{"id":"p","type":"prompt","message":"hi"}`)
	sp.seen(`"type":"message_update"`)
	sp.s.conv.fileMu.Lock() // the disk stops answering
	sp.send(`{"id":"n","type":"new_session"}`, `{"id":"s","type":"get_state"}`)
	sp.seen(`"id":"s"`)
	if bytes.Contains(sp.out.bytes(), []byte(`"id":"n"`)) {
		t.Errorf("new_session answered while the run could not settle")
	}
	sp.s.conv.fileMu.Unlock()
	sp.seen(`"id":"n"`)
	sp.stop()
}

// TestRemoveRightAfterExit removes each process the moment its
// process_exited is read: every command after that event sees it ended.
func TestRemoveRightAfterExit(t *testing.T) {
	endToEnd(t)
	p := startRPI(t, "rpc", "--cwd", t.TempDir())
	p.next(t)
	for i := range 40 {
		p.send(t, spawnLine(fmt.Sprintf("p%d", i), []string{"true"}, "")+"\n")
		rec := p.until(t, "process_exited", "")
		id := rec["data"].(map[string]any)["process"].(map[string]any)["id"].(string)
		p.send(t, fmt.Sprintf(`{"id":"rm%d","type":"process_remove","processId":%q}`+"\n", i, id))
		if ans := p.until(t, "response", fmt.Sprintf("rm%d", i)); ans["success"] != true {
			t.Fatalf("round %d: %v", i, ans)
		}
	}
	p.stdin.Close()
	p.exit(t)
}

// TestCommandLoopNeverWaitsForTheDisk holds the session file's lock and
// the loops file's lock (a disk that does not answer) while commands that
// write them are sent: each is answered, and get_state after them, while
// the disk still holds; what they wrote is in the files once it is back.
func TestCommandLoopNeverWaitsForTheDisk(t *testing.T) {
	sp, file := serveSessionCopy(t, "s.jsonl")
	sp.s.loops.fileMu.Lock() // the disk stops answering (the locks in their order)
	sp.s.conv.fileMu.Lock()
	answered := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			if !bytes.Contains(sp.out.bytes(), []byte(`"id":"`+id+`","type":"response"`)) {
				t.Errorf("%s was not answered while the disk held", id)
			}
		}
	}
	sp.send(`{"id":"name","type":"set_session_name","name":"renamed"}`,
		`{"id":"think","type":"set_thinking_level","level":"low"}`,
		`{"id":"cycle","type":"cycle_thinking_level"}`,
		`{"id":"model","type":"set_model","provider":"fake","modelId":"fake-model"}`,
		`{"id":"loop","type":"loop_create","interval":"1h","prompt":"p","fireImmediately":false,"durable":true}`,
		`{"id":"state","type":"get_state"}`)
	sp.seen(`"id":"state"`)
	answered("name", "think", "cycle", "model", "loop")
	sp.send(`{"id":"clone","type":"clone"}`, `{"id":"new","type":"new_session"}`, `{"id":"state2","type":"get_state"}`)
	sp.seen(`"id":"state2"`)
	answered("clone", "new")
	sp.s.loops.fileMu.Unlock()
	sp.s.conv.fileMu.Unlock()
	sp.stop()
	saved, _ := os.ReadFile(file)
	for _, want := range []string{`"type":"session_info","id":`, `"name":"renamed"`, `"thinkingLevel":"low"`, `"type":"model_change"`} {
		if !bytes.Contains(saved, []byte(want)) {
			t.Errorf("the session file lacks %s:\n%s", want, saved)
		}
	}
	if loops, err := os.ReadFile(file + ".loops.json"); err != nil || !bytes.Contains(loops, []byte(`"prompt":"p"`)) {
		t.Errorf("the loops file: %s, %v", loops, err)
	}
}

// TestRefusedConnectionBacksOff checks that a model server that refuses
// the connection (a llama-server not started yet) is retried after the
// base delay, doubled each time, as an HTTP error without Retry-After is:
// 1, 2 and 4 ms with the fake model's settings, never at once.
func TestRefusedConnectionBacksOff(t *testing.T) {
	endToEnd(t)
	t.Parallel()
	e, cwd := newTestEnv(t), t.TempDir()
	fm := startFakeModel(t, apiOpenAI, `{"text":["never sent"]}`, e.agentDir)
	fm.server.Close() // nothing listens at its address now
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd})
	ps.send(`{"id":"p","type":"prompt","message":"Hi"}`)
	ps.waitFor(`"agent_settled"`)
	var delays []float64
	for _, rec := range ps.close() {
		if rec["type"] != "auto_retry_start" {
			continue
		}
		data := rec["data"].(map[string]any)
		if msg, _ := data["errorMessage"].(string); !strings.HasPrefix(msg, "Connection error: ") || !strings.Contains(msg, "refused") {
			t.Errorf("retried for %q, want a refused connection", msg)
		}
		delays = append(delays, data["delayMs"].(float64))
	}
	if want := []float64{1, 2, 4}; !slices.Equal(delays, want) {
		t.Errorf("retries waited %v ms, want %v", delays, want)
	}
}

// allStacks is every goroutine's stack, as a panic prints them (the
// first 4 MiB).
func allStacks() []byte {
	buf := make([]byte, 4<<20)
	return buf[:runtime.Stack(buf, true)]
}
