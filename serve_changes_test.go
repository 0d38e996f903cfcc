//go:build unix

package main

// rpi serve's session changes answered from the background
// (docs/serve.md, docs/protocol.md#startup-and-shutdown): a change waits
// in the background (here, for a file the test holds, as another rpi
// would) while its client moves on, or another client attaches.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// holdSessionFile writes a session file with id at path and holds it as
// another rpi would: a switch to it waits until the file is let go of.
func holdSessionFile(t *testing.T, path, id string) *os.File {
	t.Helper()
	os.WriteFile(path, []byte(`{"type":"session","version":3,"id":"`+id+`","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}`+"\n"), 0o644)
	held, err := lockSessionFile(t.Context(), path, 0)
	if err != nil || held == nil {
		t.Fatalf("the test could not hold %s: %v", path, err)
	}
	t.Cleanup(func() { held.Close() })
	return held
}

// startServeWaitingForFiles starts rpi serve in cwd, a new directory,
// with a switch to a file another rpi holds waiting until it is let go of
// (holdSessionFile); it ends with the test.
func startServeWaitingForFiles(t *testing.T) (sh *servedHost, cwd string) {
	t.Helper()
	e := newTestEnv(t)
	e.lockWait = time.Hour // until the test lets go of the file
	cwd = t.TempDir()
	sh = startServe(t, e, cwd)
	t.Cleanup(sh.end)
	return sh, cwd
}

// sessionIDOf is the session id c's get_state answers (id names it).
func sessionIDOf(c *lineClient, id string) string {
	c.t.Helper()
	c.send(`{"id":"` + id + `","type":"get_state"}`)
	var state struct{ SessionID string }
	json.Unmarshal(c.answer(id).Data, &state)
	return state.SessionID
}

// checkStartedRightAfter checks that the answer to id, when it succeeded,
// is followed at once by session_started.
func checkStartedRightAfter(t *testing.T, c *lineClient, id string) {
	t.Helper()
	recs, _ := c.snapshot()
	for i, r := range recs {
		if r.Type != "response" || string(r.ID) != `"`+id+`"` || r.Success == nil || !*r.Success {
			continue
		}
		if i+1 >= len(recs) || recs[i+1].Type != "session_started" {
			t.Errorf("no session_started right after the answer to %s:\n%s", id, recordLines(recs))
		}
	}
}

// TestServeChangeAskedThenLeft: a client that asks for a change of its
// session answered from the background, then attaches to another session
// before the change is made, has left the session the change was for:
// the change is not made (that session stays as it was, and the file it
// read is let go of), and its answer says so. Before, it was made on the
// session left, and answered as made without the session_started that
// must follow such an answer.
func TestServeChangeAskedThenLeft(t *testing.T) {
	sh, cwd := startServeWaitingForFiles(t)
	a := dialLines(t, sh.socket)
	left := a.hello(`{"id":"h","type":"hello"}`).SessionID
	b := dialLines(t, sh.socket)
	other := b.hello(`{"id":"h","type":"hello"}`).SessionID
	path := filepath.Join(cwd, "held.jsonl")
	held := holdSessionFile(t, path, "1a2b3c4d-0000-4000-8000-00000000000d")
	a.send(`{"id":"sw","type":"switch_session","sessionPath":"held.jsonl"}`) // a alone: in place, once the file is let go of
	a.send(`{"id":"at","type":"session_attach","sessionId":"` + other + `"}`)
	if r := a.answer("at"); r.Success == nil || !*r.Success {
		t.Fatalf("session_attach: %s", r.line)
	}
	held.Close()
	r := a.answer("sw")
	if id := sessionIDOf(a, "st"); id != other {
		t.Errorf("a is on %s, want %s", id, other)
	}
	checkStartedRightAfter(t, a, "sw")
	if r.Success == nil || *r.Success || r.Error != errLeftSession.Error() {
		t.Errorf("the change of a session its client left: %s", r.line)
	}
	status := hostStatusOf(t, a, "status")
	found := false
	for _, s := range status.Sessions {
		found = found || s.SessionID == left
	}
	if !found {
		t.Errorf("the session left is no longer %s: %+v", left, status.Sessions)
	}
	again, err := lockSessionFile(t.Context(), path, 0)
	if err != nil || again == nil {
		t.Errorf("the file the change read is still held: %v", err)
	} else {
		again.Close()
	}
}

// askSwitchThenWatch starts rpi serve with a client, a, alone on its
// session (watched), which asks to switch to path, a file held as
// another rpi would (held, with heldID): the switch waits, in place, for
// the file; then b attaches to watched.
func askSwitchThenWatch(t *testing.T, heldID string) (a, b *lineClient, watched string, held *os.File, path string) {
	t.Helper()
	sh, cwd := startServeWaitingForFiles(t)
	a = dialLines(t, sh.socket)
	watched = a.hello(`{"id":"h","type":"hello"}`).SessionID
	path = filepath.Join(cwd, "held.jsonl")
	held = holdSessionFile(t, path, heldID)
	a.send(`{"id":"sw","type":"switch_session","sessionPath":"held.jsonl"}`) // a alone: in place, once the file is let go of
	if id := sessionIDOf(a, "asked"); id != watched {                        // answered once the switch waits
		t.Fatalf("a is on %s before the switch is made", id)
	}
	b = dialLines(t, sh.socket)
	b.hello(`{"id":"h","type":"hello","attach":"` + watched + `"}`)
	return a, b, watched, held, path
}

// TestServeChangeAskedThenWatched: a change asked while its client was
// the session's only one, and made once another client had attached,
// moves the asking client apart, as a change asked while others watch
// does: the other stays where it was. Before, the session the other had
// attached to was switched under it.
func TestServeChangeAskedThenWatched(t *testing.T) {
	const heldID = "1a2b3c4d-0000-4000-8000-00000000000e"
	a, b, watched, held, _ := askSwitchThenWatch(t, heldID)
	held.Close()
	if r := a.answer("sw"); r.Success == nil || !*r.Success {
		t.Fatalf("switch_session: %s", r.line)
	}
	if id := sessionIDOf(a, "st"); id != heldID {
		t.Errorf("a is on %s, want %s", id, heldID)
	}
	checkStartedRightAfter(t, a, "sw")
	if id := sessionIDOf(b, "st"); id != watched {
		t.Errorf("b was moved to %s", id)
	}
	if recs, _ := b.snapshot(); len(seqsOf(recs)) > 0 {
		t.Errorf("b got events of a's change:\n%s", recordLines(recs))
	}
}

// TestServeChangeAskedThenGone: a change asked while its client was the
// session's only one, whose connection then ended while it waited, and
// another client had attached meanwhile, is not made: the session is that
// other client's now, and stays as it is (the file the change read is let
// go of). Before, the client gone no longer counted, the session looked
// unshared, and it was switched under the one that stayed, unasked.
func TestServeChangeAskedThenGone(t *testing.T) {
	a, b, watched, held, path := askSwitchThenWatch(t, "1a2b3c4d-0000-4000-8000-00000000000f")
	a.close()
	waitHostStatus(t, b, "a gone", func(st hostStatus) bool {
		return len(st.Sessions) == 1 && st.Sessions[0].Clients == 1
	})
	held.Close()
	// Changes are made in the order they were asked for: the answer to
	// b's (refused: no such entry) comes once a's is done.
	b.send(`{"id":"fk","type":"fork","entryId":"none"}`)
	if r := b.answer("fk"); r.Success == nil || *r.Success {
		t.Fatalf("fork: %s", r.line)
	}
	if id := sessionIDOf(b, "st"); id != watched {
		t.Errorf("b's session was switched to %s under it", id)
	}
	if recs, _ := b.snapshot(); len(seqsOf(recs)) > 0 {
		t.Errorf("b got events of a's change:\n%s", recordLines(recs))
	}
	again, err := lockSessionFile(t.Context(), path, 0)
	if err != nil || again == nil {
		t.Errorf("the file the change read is still held: %v", err)
	} else {
		again.Close()
	}
}

// startServeInProcess starts rpi serve's host in this process, with
// args, listening on a socket of its own (returned), so that a test can
// reach its sessions and stages while clients use the socket; it ends
// with the test.
func startServeInProcess(t *testing.T, e *testEnv, cwd string, args ...string) (*serveHost, string) {
	t.Helper()
	return startServeHooked(t, e, cwd, nil, args...)
}

// startServeHooked is startServeInProcess with opened, the host's hook
// into the window between a stage's opening and its opener's attach
// (serveHost.opened), set before any connection is taken.
func startServeHooked(t *testing.T, e *testEnv, cwd string, opened func(*stage), args ...string) (*serveHost, string) {
	t.Helper()
	return startServeWith(t, e, cwd, func(sh *serveHost) { sh.opened = opened }, args...)
}

// startServeWith is startServeInProcess with hook setting the host's
// hooks (serveHost.opened, serveHost.registered) before any connection
// is taken.
func startServeWith(t *testing.T, e *testEnv, cwd string, hook func(*serveHost), args ...string) (*serveHost, string) {
	t.Helper()
	cfg, _, err := parseArgs(append([]string{"serve", "--cwd", cwd}, args...), e.env())
	if err != nil {
		t.Fatal(err)
	}
	h, err := newHost(cfg, e.env(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sh := &serveHost{h: h, cfg: cfg.served, wires: servedWires{acp: newServedACPWire, rpc: newServedRPCWire},
		conns: map[*servedConn]struct{}{}, stages: map[*session]*stage{}, started: time.Now()}
	hook(sh)
	socket := filepath.Join(shortSocketDir(t), "rpi.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			sh.take(c)
		}
	}()
	t.Cleanup(func() { l.Close(); <-accepted; sh.shutdown() })
	return sh, socket
}

// waitLockedIn waits until a goroutine whose stack holds fn waits for a
// sync.Mutex, or until done reports true first; it reports whether such
// a goroutine was seen.
func waitLockedIn(t *testing.T, fn string, done func() bool) bool {
	t.Helper()
	return waitBlockedIn(t, "[sync.Mutex.Lock", fn, done)
}

// waitBlockedIn is waitLockedIn for a goroutine blocked as state says
// ("[sync.Mutex.Lock", "[chan receive").
func waitBlockedIn(t *testing.T, state, fn string, done func() bool) bool {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(30 * time.Second); ; {
		if done() {
			return false
		}
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, state) && strings.Contains(g, fn) {
				return true
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine in %s was ever blocked (%s):\n%s", fn, state, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// answered reports whether c has read the answer to the command id
// (an rpc id, a string; or a JSON-RPC one, a number).
func answered(c *lineClient, id string) bool {
	recs, _ := c.snapshot()
	return slices.ContainsFunc(recs, func(r servedRecord) bool { return answers(r, id) })
}

// answers reports whether r is the answer to the command id (as answered).
func answers(r servedRecord, id string) bool {
	return r.Type == "response" && string(r.ID) == `"`+id+`"` || r.Type == "" && string(r.ID) == id
}

// writeSessionHeaders writes in dir, for each id, a session file (its
// name) holding only its header, of a session in cwd.
func writeSessionHeaders(t *testing.T, dir, cwd string, names map[string]string) {
	t.Helper()
	for id, name := range names {
		header := `{"type":"session","version":3,"id":"` + id + `","timestamp":"2026-03-16T09:00:00.000Z","cwd":"` + cwd + `"}` + "\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(header), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServeAttachDuringChange: a client that attaches to a session by
// its id (an rpc session_attach, an ACP session/resume) while a change of
// it, asked in place by the session's only client and answered from the
// background, is between its last check that no other client watches and
// its session_started, waits for the change to be announced, and then
// attaches to the session it asked for (opened again from its file, which
// the change left in place, and announced: over rpc, session_started
// right after the answer). Before, it attached in that window: the
// change, checked as unshared, was made in place under it, and it was on
// the session switched to without having asked, its answer naming the
// session it asked for. The window is held open by holding the session's
// callout delivery, which the change waits for as it tells its client
// that the loops of the file switched to cannot be read (their file is a
// directory).
func TestServeAttachDuringChange(t *testing.T) {
	for _, wire := range []string{"rpc", "acp"} {
		t.Run(wire, func(t *testing.T) { testAttachDuringChange(t, wire) })
	}
}

func testAttachDuringChange(t *testing.T, wire string) {
	e := newTestEnv(t)
	cwd, dir := t.TempDir(), t.TempDir()
	sh, socket := startServeInProcess(t, e, cwd, "--session-dir", dir)
	const xID, hID = "1a2b3c4d-0000-4000-8000-00000000001a", "1a2b3c4d-0000-4000-8000-00000000001b"
	writeSessionHeaders(t, dir, cwd, map[string]string{xID: "x.jsonl", hID: "h.jsonl"})
	if err := os.Mkdir(loopsFileOf(filepath.Join(dir, "h.jsonl")), 0o755); err != nil {
		t.Fatal(err)
	}
	a := dialLines(t, socket)
	a.hello(`{"id":"h","type":"hello","attach":"` + xID + `"}`)
	// announced after the answer: held below, its delivery would hold a's loop
	a.waitRecord("x's session_started", func(r servedRecord) bool { return r.Type == "session_started" })
	b := dialLines(t, socket)
	attach, attacher, answer := `{"id":"at","type":"session_attach","sessionId":"`+xID+`"}`, "(*servedRPC).attachTo", "at"
	if wire == "acp" {
		b.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
		b.waitUntil("initialize's answer", func([]servedRecord, bool) bool { return answered(b, "0") })
		attach = `{"jsonrpc":"2.0","id":1,"method":"session/resume","params":{"sessionId":"` + xID + `","cwd":"` + cwd + `"}}`
		attacher, answer = "(*acpAgent).reopen", "1"
	} else {
		b.hello(`{"id":"h","type":"hello"}`)
	}
	st := sh.stageFor(sh.h.sessions.find(xID))
	st.s.callouts.deliverMu.Lock()
	held := true
	defer func() {
		if held {
			st.s.callouts.deliverMu.Unlock()
		}
	}()
	a.send(`{"id":"sw","type":"switch_session","sessionPath":"` + filepath.Join(dir, "h.jsonl") + `"}`) // a alone: in place, in the background
	waitLockedIn(t, "(*session).moveLoops", func() bool { return false })                               // past its last check, waiting to tell a
	b.send(attach)
	waitLockedIn(t, attacher, func() bool { return answered(b, answer) })
	st.s.callouts.deliverMu.Unlock()
	held = false
	if r := a.answer("sw"); r.Success == nil || !*r.Success {
		t.Fatalf("switch_session: %s", r.line)
	}
	if id := sessionIDOf(a, "st"); id != hID {
		t.Errorf("a is on %s, want %s (switched to)", id, hID)
	}
	checkStartedRightAfter(t, a, "sw")
	b.waitUntil("the attach's answer", func([]servedRecord, bool) bool { return answered(b, answer) })
	recs, _ := b.snapshot()
	for _, r := range recs {
		if answers(r, answer) && (r.Success != nil && !*r.Success || bytes.Contains(r.line, []byte(`"error"`))) {
			t.Fatalf("the attach failed: %s", r.line)
		}
	}
	if wire == "rpc" {
		if id := sessionIDOf(b, "st"); id != xID {
			t.Errorf("b is on %s, want %s (attached to)", id, xID)
		}
		recs, _ := b.snapshot()
		at := slices.IndexFunc(recs, func(r servedRecord) bool { return answers(r, "at") })
		if at+1 >= len(recs) || recs[at+1].Type != "session_started" || !bytes.Contains(recs[at+1].line, []byte(xID)) {
			t.Errorf("no session_started of %s (opened again from its file) right after the answer to session_attach:\n%s", xID, recordLines(recs))
		}
	}
	if x := sh.h.sessions.find(xID); x == nil || sh.stageFor(x).clientCount() != 1 {
		t.Errorf("b is not on %s, which it attached to (opened again from its file)", xID)
	}
	if n := st.clientCount(); n != 1 {
		t.Errorf("the session a switched to has %d clients, want 1 (a)", n)
	}
	recs, _ = b.snapshot()
	for _, r := range recs {
		if bytes.Contains(r.line, []byte(hID)) || bytes.Contains(r.line, []byte("Cannot restore the loops")) {
			t.Errorf("b got something of a's change:\n%s", recordLines(recs))
			break
		}
	}
}

// TestServeACPAttachToClosingStage: an ACP session/resume of a live
// session whose stage the host has closed for being idle, before it
// takes the stage out of its list, fails as one that finds it gone does
// (The session is being closed: load it again in a moment). Before, the
// attach the stage refused was taken as made: the answer said resumed,
// and the connection was on a session closing, which it would never hear
// from again. The test closes the stage as the idle sweep does, in its
// two steps, and resumes between them.
func TestServeACPAttachToClosingStage(t *testing.T) {
	o := serveOneSession(t)
	cwd, id, st := o.cwd, o.id, o.st
	o.owner.close()
	for st.clientCount() > 0 || !st.idleFor(0) { // once a's end has detached it
		runtime.Gosched()
	}
	b := dialLines(t, o.socket)
	initializeACP(b)
	b.send(`{"jsonrpc":"2.0","id":1,"method":"session/resume","params":{"sessionId":"` + id + `","cwd":"` + cwd + `"}}`)
	answer := acpAnswerLine(b, "1")
	o.sh.closeStage(st)
	if !strings.Contains(answer, errStageClosing.Message) {
		t.Errorf("the resume of a session being closed: %s", answer)
	}
}

// TestServeSwitchInPlaceNumbersOn: a session file the host closed, which
// a client's session then switches to in place, numbers on from its last
// seq, as a session opened again from its file does. Before, it took the
// seq of the session switched from, which started lower: a client coming
// back to it with a cursor from before its close was replayed events of
// the other session as if they were its own.
func TestServeSwitchInPlaceNumbersOn(t *testing.T) {
	e := newTestEnv(t)
	cwd, dir := t.TempDir(), t.TempDir()
	sh, socket := startServeInProcess(t, e, cwd, "--session-dir", dir)
	const hID, xID = "1a2b3c4d-0000-4000-8000-00000000002a", "1a2b3c4d-0000-4000-8000-00000000002b"
	writeSessionHeaders(t, dir, cwd, map[string]string{hID: "h.jsonl", xID: "x.jsonl"})
	a := dialLines(t, socket)
	a.hello(`{"id":"h","type":"hello","attach":"` + hID + `"}`)
	for _, name := range []string{"one", "two", "three"} {
		a.send(`{"id":"` + name + `","type":"set_session_name","name":"` + name + `"}`)
		a.answer(name)
	}
	recs, _ := a.snapshot()
	seqs := seqsOf(recs)
	last := seqs[len(seqs)-1]
	st := sh.stageFor(sh.h.sessions.find(hID))
	a.close()
	for st.clientCount() > 0 || !st.idleFor(0) { // once a's end has detached it
		runtime.Gosched()
	}
	sh.closeStage(st)
	b := dialLines(t, socket)
	b.hello(`{"id":"h","type":"hello","attach":"` + xID + `"}`)
	b.send(`{"id":"sw","type":"switch_session","sessionPath":"` + filepath.Join(dir, "h.jsonl") + `"}`) // b alone: in place
	b.answer("sw")
	started := b.waitRecord("h's session_started", func(r servedRecord) bool {
		return r.Type == "session_started" && bytes.Contains(r.Data, []byte(hID))
	})
	if started.Seq <= last {
		t.Errorf("h, switched to in place, numbers on from %d, at or below %d, its last seq before it closed", started.Seq, last)
	}
	c := dialLines(t, socket)
	if back := c.hello(fmt.Sprintf(`{"id":"h","type":"hello","attach":"%s","cursor":%d}`, hID, last-1)); !back.Resync {
		recs, _ := c.snapshot()
		t.Errorf("a client back with a cursor from before h closed is not told resync:\n%s", recordLines(recs))
	}
}
