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

// TestDialogResolvesOnce answers dialogs at the moment they time out, many
// times: either the answer wins (the dialog gets it, the answer gets no
// response) or the timeout does (the dialog is cancelled, the answer is
// told it expired) — never both lost.
func TestDialogResolvesOnce(t *testing.T) {
	endToEnd(t)
	e := newTestEnv(t)
	clock := newFakeClock()
	e.clock = clock
	cfg, _, err := parseArgs([]string{"rpc", "--cwd", t.TempDir(), "--no-session"}, e.env())
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	s, err := newServer(cfg, e.env(), &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer s.shutdown(false)
	outcomes := map[string]int{}
	for i := range 200 {
		answered := make(chan uiAnswer)
		go func() {
			answered <- s.dialogs.ask(context.Background(), uiRequest{Method: "confirm", Title: "ok?", Timeout: 1000})
		}()
		id := ""
		deadline := time.Now().Add(10 * time.Second)
		for id == "" || !clock.pending() {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the dialog never opened", i)
			}
			s.dialogs.mu.Lock()
			for k := range s.dialogs.open {
				id = k
			}
			s.dialogs.mu.Unlock()
			time.Sleep(10 * time.Microsecond)
		}
		advanced := make(chan struct{})
		go func() { clock.advance(time.Second); close(advanced) }()
		r := &request{typ: "extension_ui_response", id: json.RawMessage(fmt.Sprintf("%q", id)),
			members: []member{{[]byte("confirmed"), []byte("true")}}}
		_, respErr := s.extensionUIResponseCommand(r)
		a := <-answered
		<-advanced
		switch {
		case respErr == nil && a.confirmed != nil && *a.confirmed:
			outcomes["answer won"]++
		case respErr != nil && a.cancelled && strings.Contains(respErr.Error(), "already answered or expired"):
			outcomes["timeout won"]++
		default:
			t.Fatalf("round %d: the answer was accepted (%v) but the dialog got %+v", i, respErr, a)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

// TestCommandLoopNeverWaits holds the session file's writes (a disk that
// does not answer) while a run streams, then asks for a new session and
// the state: get_state is answered while the run cannot settle, and
// new_session answers once the disk is back.
func TestCommandLoopNeverWaits(t *testing.T) {
	endToEnd(t)
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"text":["slow ","answer"],"delayMs":100}`, e.agentDir)
	cfg, _, err := parseArgs([]string{"rpc", "--cwd", t.TempDir()}, e.env())
	if err != nil {
		t.Fatal(err)
	}
	out := newWatchedOutput()
	s, err := newServer(cfg, e.env(), out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	done := make(chan int)
	go func() { done <- s.serve(pr, nil) }()
	seen := func(text string) {
		t.Helper()
		if !out.waitFor(text, func(b []byte) string { return string(b) }) {
			t.Fatalf("never saw %s in:\n%s", text, out.bytes())
		}
	}
	io.WriteString(pw, `{"id":"p","type":"prompt","message":"hi"}`+"\n")
	seen(`"type":"message_update"`)
	s.conv.fileMu.Lock() // the disk stops answering
	io.WriteString(pw, `{"id":"n","type":"new_session"}`+"\n")
	io.WriteString(pw, `{"id":"s","type":"get_state"}`+"\n")
	seen(`"id":"s"`)
	if bytes.Contains(out.bytes(), []byte(`"id":"n"`)) {
		t.Errorf("new_session answered while the run could not settle")
	}
	s.conv.fileMu.Unlock()
	seen(`"id":"n"`)
	pw.Close()
	if code := <-done; code != 0 {
		t.Errorf("exit %d", code)
	}
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
