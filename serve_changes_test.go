//go:build unix

package main

// rpi serve's session changes answered from the background
// (docs/serve.md, docs/protocol.md#startup-and-shutdown): a change waits
// in the background (here, for a file the test holds, as another rpi
// would) while its client moves on, or another client attaches.

import (
	"encoding/json"
	"os"
	"path/filepath"
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

// TestServeChangeAskedThenWatched: a change asked while its client was
// the session's only one, and made once another client had attached,
// moves the asking client apart, as a change asked while others watch
// does: the other stays where it was. Before, the session the other had
// attached to was switched under it.
func TestServeChangeAskedThenWatched(t *testing.T) {
	sh, cwd := startServeWaitingForFiles(t)
	a := dialLines(t, sh.socket)
	watched := a.hello(`{"id":"h","type":"hello"}`).SessionID
	const heldID = "1a2b3c4d-0000-4000-8000-00000000000e"
	held := holdSessionFile(t, filepath.Join(cwd, "held.jsonl"), heldID)
	a.send(`{"id":"sw","type":"switch_session","sessionPath":"held.jsonl"}`) // a alone: in place, once the file is let go of
	if id := sessionIDOf(a, "asked"); id != watched {                        // answered once the switch waits
		t.Fatalf("a is on %s before the switch is made", id)
	}
	b := dialLines(t, sh.socket)
	b.hello(`{"id":"h","type":"hello","attach":"` + watched + `"}`)
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
