//go:build unix

package main

// Tests of attaching to rpi serve's sessions as they open, close and
// change (docs/serve.md): the windows between a stage's opening and its
// opener's attach, forced by sh.opened, the host's hook into that window,
// and between a session's opening and its stage's, by sh.registered.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// acpAnswerLine waits for the answer to the ACP request id on c and
// returns its line: a result, or an error (which is no servedRecord: its
// error is an object).
func acpAnswerLine(c *lineClient, id string) string {
	c.t.Helper()
	var answer string
	c.waitUntil("the answer to "+id, func(recs []servedRecord, _ bool) bool {
		answer = acpAnswerRead(c, id)
		return answer != ""
	})
	return answer
}

// acpAnswerRead is the line of the answer to the ACP request id that c
// has read ("": none yet), as acpAnswerLine.
func acpAnswerRead(c *lineClient, id string) (answer string) {
	recs, _ := c.snapshot()
	for _, r := range recs {
		if answers(r, id) {
			answer = string(r.line)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, line := range c.bad {
		if strings.Contains(line, `"id":`+id+`,`) {
			answer = line
		}
	}
	return answer
}

// initializeACP makes c an ACP connection.
func initializeACP(c *lineClient) {
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	c.waitUntil("initialize's answer", func([]servedRecord, bool) bool { return answered(c, "0") })
}

// oneSession is rpi serve on socket, in cwd, with one session, id, its
// stage st, which the rpc client owner opened.
type oneSession struct {
	sh          *serveHost
	socket, cwd string
	owner       *lineClient
	id          string
	st          *stage
}

func serveOneSession(t *testing.T) oneSession {
	t.Helper()
	o := oneSession{cwd: t.TempDir()}
	o.sh, o.socket = startServeInProcess(t, newTestEnv(t), o.cwd)
	o.owner = dialLines(t, o.socket)
	o.id = o.owner.hello(`{"id":"h","type":"hello"}`).SessionID
	o.st = o.sh.stageFor(o.sh.h.sessions.find(o.id))
	return o
}

// hookedServe is startServeHooked in a new cwd.
func hookedServe(t *testing.T, opened func(*stage), args ...string) (sh *serveHost, socket, cwd string) {
	t.Helper()
	cwd = t.TempDir()
	sh, socket = startServeHooked(t, newTestEnv(t), cwd, opened, args...)
	return sh, socket, cwd
}

// waitDetached waits until st has no client (a connection's end has
// detached it).
func waitDetached(st *stage) {
	for st.clientCount() > 0 {
		runtime.Gosched()
	}
}

// TestServeNewSessionNotIdleBeforeAttached: a session the host has just
// opened for a client, not yet attached to, is not idle: making room for
// another session (the host at its limit) or the idle sweep does not
// close it before its client attaches. Before, two looks for an idle
// session in that window (the first marks it idle from then, the second
// closes it) closed it, and the ACP client was told its session/new had
// made a session it was not attached to. The hook looks twice, in the
// window, as two openings at the host's limit would.
func TestServeNewSessionNotIdleBeforeAttached(t *testing.T) {
	var sh *serveHost
	var socket, cwd string
	var closedOne atomic.Bool
	sh, socket, cwd = hookedServe(t, func(*stage) {
		closedOne.Store(sh.closeIdlest() || sh.closeIdlest())
	})
	a := dialLines(t, socket)
	initializeACP(a)
	a.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"` + cwd + `","mcpServers":[]}}`)
	answer := acpAnswerLine(a, "1")
	if closedOne.Load() {
		t.Errorf("the session opened for session/new was closed as idle before its client attached")
	}
	var rows []*stage
	for _, st := range sh.liveStages() {
		rows = append(rows, st)
	}
	if len(rows) != 1 || rows[0].clientCount() != 1 || !strings.Contains(answer, rows[0].s.conv.info().id) {
		t.Errorf("session/new answered %s; live stages: %d", answer, len(rows))
	}
}

// TestServeACPOpenAttachRefused: a session the host opened for an ACP
// session/new that another client attached to and left, and that was
// then closed for being idle, before the opener attached, fails the
// request (The session was closed for being idle before this connection
// attached to it: try again). Before, the refused attach was taken as
// made: the answer gave a session the connection was not attached to,
// closed, whose events it would never get.
func TestServeACPOpenAttachRefused(t *testing.T) {
	var sh *serveHost
	var socket, cwd string
	var once sync.Once
	var closed atomic.Bool
	sh, socket, cwd = hookedServe(t, func(st *stage) {
		once.Do(func() {
			b := dialLines(t, socket)
			b.hello(`{"id":"h","type":"hello","attach":"` + st.s.conv.info().id + `"}`)
			b.close()
			waitDetached(st)
			closed.Store(sh.closeIdlest() || sh.closeIdlest())
		})
	})
	a := dialLines(t, socket)
	initializeACP(a)
	a.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"` + cwd + `","mcpServers":[]}}`)
	answer := acpAnswerLine(a, "1")
	if !closed.Load() {
		t.Fatal("the session another client attached to and left was not closed as idle")
	}
	const want = `"error":{"code":-32603,"message":"` + "The session was closed for being idle before this connection attached to it: try again" + `"}`
	if !strings.Contains(answer, want) {
		t.Errorf("session/new of a session closed before it was attached to answered %s; want %s", answer, want)
	}
}

// startServeChangingFirst starts rpi serve whose first session opened
// is attached to by another client, which changes it in place
// (new_session) before its opener attaches; changedTo is then the id of
// the session it changed to.
func startServeChangingFirst(t *testing.T) (sh *serveHost, socket, cwd string, changedTo *atomic.Value) {
	changedTo = new(atomic.Value)
	var once sync.Once
	sh, socket, cwd = hookedServe(t, func(st *stage) {
		once.Do(func() {
			b := dialLines(t, socket)
			b.hello(`{"id":"h","type":"hello","attach":"` + st.s.conv.info().id + `"}`)
			b.send(`{"id":"n","type":"new_session"}`)
			if r := b.answer("n"); r.Success == nil || !*r.Success {
				t.Errorf("new_session: %s", r.line)
			}
			changedTo.Store(st.s.conv.info().id)
		})
	})
	return sh, socket, cwd, changedTo
}

// TestServeACPOpenChangedFirst: a session the host opened for an ACP
// session/new that another client attached to and changed in place
// (new_session: it was alone on it) before the opener attached fails the
// request (Another client changed the session to another before this
// connection attached to it: try again). Before, the opener was attached
// to the session changed to, the other client's, and told it was the
// new session it asked for.
func TestServeACPOpenChangedFirst(t *testing.T) {
	sh, socket, cwd, changedTo := startServeChangingFirst(t)
	a := dialLines(t, socket)
	initializeACP(a)
	a.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"` + cwd + `","mcpServers":[]}}`)
	answer := acpAnswerLine(a, "1")
	const want = `"error":{"code":-32603,"message":"` + "Another client changed the session to another before this connection attached to it: try again" + `"}`
	if !strings.Contains(answer, want) {
		t.Errorf("session/new of a session another client changed first answered %s; want %s", answer, want)
	}
	if st := sh.stageFor(sh.h.sessions.find(changedTo.Load().(string))); st == nil || st.clientCount() != 1 {
		t.Errorf("the session the other client changed to is not its alone")
	}
}

// TestServeRPCNewSessionChangedFirst: rpc's side of
// TestServeACPOpenChangedFirst: a hello that opens a new session, which
// another client attached to and changed in place first, fails (Another
// client changed the session to another before this connection attached
// to it: try again). Before, it was attached to the session changed to,
// the other client's, and answered with its id.
func TestServeRPCNewSessionChangedFirst(t *testing.T) {
	sh, socket, _, changedTo := startServeChangingFirst(t)
	a := dialLines(t, socket)
	a.send(`{"id":"h","type":"hello"}`)
	const want = "Another client changed the session to another before this connection attached to it: try again"
	if r := a.answer("h"); r.Error != want {
		t.Errorf("a hello whose new session another client changed first answered %s; want %q", r.line, want)
	}
	if st := sh.stageFor(sh.h.sessions.find(changedTo.Load().(string))); st == nil || st.clientCount() != 1 {
		t.Errorf("the session the other client changed to is not its alone")
	}
}

// TestServeAttachChangedTwice: a session_attach whose session is changed
// in place by another client as it is attached to, and again once opened
// again from its file, fails saying so (Another client changed the
// session to another as it was attached to: attach again), not that the
// session was closed, which it was not; the connection stays on its
// session. The hook makes each opening of the session attached to
// another client's, changed in place (new_session) before the attach.
func TestServeAttachChangedTwice(t *testing.T) {
	const xID = "1a2b3c4d-0000-4000-8000-00000000003a"
	attachFailingTwice(t, xID, func(_ *serveHost, _ *stage, socket string) {
		c := dialLines(t, socket)
		c.hello(`{"id":"h","type":"hello","attach":"` + xID + `"}`)
		c.send(`{"id":"n","type":"new_session"}`)
		if r := c.answer("n"); r.Success == nil || !*r.Success {
			t.Errorf("new_session: %s", r.line)
		}
	}, "Another client changed the session to another as it was attached to: attach again")
}

// attachFailingTwice starts rpi serve with a session file of xID, each
// opening of whose session the host's hook hands to meddle (another
// client's doing, before the opener attaches), and has a client attach
// to xID (session_attach) from a session of its own: the attach must
// fail with want, the session having been opened twice (once more as it
// was attached to), and the client stay on its own session.
func attachFailingTwice(t *testing.T, xID string, meddle func(sh *serveHost, st *stage, socket string), want string) {
	t.Helper()
	e := newTestEnv(t)
	cwd, dir := t.TempDir(), t.TempDir()
	writeSessionHeaders(t, dir, cwd, map[string]string{xID: "x.jsonl"})
	var sh *serveHost
	var socket string
	var openings atomic.Int32
	sh, socket = startServeHooked(t, e, cwd, func(st *stage) {
		if st.s.conv.info().id != xID {
			return
		}
		openings.Add(1)
		meddle(sh, st, socket)
	}, "--session-dir", dir)
	b := dialLines(t, socket)
	own := b.hello(`{"id":"h","type":"hello"}`).SessionID
	b.send(`{"id":"at","type":"session_attach","sessionId":"` + xID + `"}`)
	if r := b.answer("at"); r.Error != want {
		t.Errorf("an attach to a session met twice as it was attached to answered %s; want %q", r.line, want)
	}
	if n := openings.Load(); n != 2 {
		t.Errorf("the session was opened %d times; want 2", n)
	}
	if id := sessionIDOf(b, "st"); id != own {
		t.Errorf("b is on %s after its attach failed; want %s, its own", id, own)
	}
}

// TestServeACPOpenAsConnectionEnds: an ACP connection that ends while
// its session/new is being opened, before the session is attached to,
// leaves no client on it: the session is the host's, idle once nothing
// runs. Before, the attach made after the connection's end (which had
// detached every session it knew of, not this one yet) stayed: a client
// no one would ever detach, so the session was never idle, and held one
// of the host's 64 places until the host ended.
func TestServeACPOpenAsConnectionEnds(t *testing.T) {
	var sh *serveHost
	var a *lineClient
	var once sync.Once
	sh, socket, cwd := hookedServe(t, func(st *stage) {
		once.Do(func() {
			a.close()
			for sh.connectionCount() > 0 { // its end has detached its sessions
				runtime.Gosched()
			}
		})
	})
	a = dialLines(t, socket)
	initializeACP(a)
	a.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"` + cwd + `","mcpServers":[]}}`)
	<-a.done
	if !sh.h.background.wait(30 * time.Second) {
		t.Fatal("session/new never ended")
	}
	live := sh.liveStages()
	for _, st := range live {
		if n := st.clientCount(); n != 0 {
			t.Errorf("a session opened for a connection that ended as it opened has %d clients; want 0", n)
		}
	}
	if len(live) != 1 {
		t.Errorf("%d sessions live; want 1, the one opened", len(live))
	}
}

// TestServeACPNewAtTheLimit: an ACP session/new while the host holds all
// the sessions it may, some of them idle, closes the oldest idle one to
// make room, as an rpc client's new session does. Before, the ACP
// connection counted the session against the limit once of its own,
// then again in the host: it was refused (Too many sessions open: at
// most 64 on one connection), naming a limit of one connection that the
// connection had not reached.
func TestServeACPNewAtTheLimit(t *testing.T) {
	e := newTestEnv(t)
	cwd := t.TempDir()
	sh, socket := startServeInProcess(t, e, cwd)
	for range maxSessions {
		c := dialLines(t, socket)
		c.hello(`{"id":"h","type":"hello"}`)
		c.close()
	}
	for _, st := range sh.liveStages() {
		waitDetached(st)
	}
	a := dialLines(t, socket)
	initializeACP(a)
	a.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"` + cwd + `","mcpServers":[]}}`)
	if answer := acpAnswerLine(a, "1"); !strings.Contains(answer, `"result":{"sessionId"`) {
		t.Errorf("session/new with %d idle sessions in the host answered %s", maxSessions, answer)
	}
	if want := fmt.Sprintf("at most %d in one host", maxSessions); !strings.Contains(errHostFull.Message, want) {
		t.Errorf("the host's limit is %d, but its refusal says %q", maxSessions, errHostFull.Message)
	}
}

// TestServeACPResumeClosedAsItAttaches: a session/close of a live
// session whose session/resume is attaching to it, past its last look at
// whether the session is still the connection's, leaves no client of the
// connection on it: the resume fails as one closed while it loads does.
// Before, the attach made after the close stayed, a client no one would
// ever detach. Holding the stage's lock stops the resume in its attach.
func TestServeACPResumeClosedAsItAttaches(t *testing.T) {
	o := serveOneSession(t)
	cwd, id, st := o.cwd, o.id, o.st
	a := dialLines(t, o.socket)
	initializeACP(a)
	st.mu.Lock()
	held := true
	defer func() {
		if held {
			st.mu.Unlock()
		}
	}()
	a.send(`{"jsonrpc":"2.0","id":1,"method":"session/resume","params":{"sessionId":"` + id + `","cwd":"` + cwd + `"}}`)
	waitLockedIn(t, "(*stage).attachHeld", func() bool { return false })
	a.send(`{"jsonrpc":"2.0","id":2,"method":"session/close","params":{"sessionId":"` + id + `"}}`)
	if answer := acpAnswerLine(a, "2"); !strings.Contains(answer, `"result":{}`) {
		t.Errorf("session/close: %s", answer)
	}
	st.mu.Unlock()
	held = false
	want := `"message":"The session ` + id + ` was closed (session/close) while it was loading: load it again to open it"`
	if answer := acpAnswerLine(a, "1"); !strings.Contains(answer, want) {
		t.Errorf("a resume closed as it attached answered %s; want %s", answer, want)
	}
	if n := st.clientCount(); n != 1 {
		t.Errorf("the session has %d clients after the ACP connection closed it; want 1 (the rpc one)", n)
	}
}

// TestServeACPNewWithdrawn: a session/new the client withdraws
// ($/cancel_request) while the host opens its session leaves no stage
// behind: the session, which no other client came to, is closed through
// the host, as the idle sweep closes one. Before, the session was closed
// under the host (session.close), which kept its stage for good, and
// would have closed it under any client that had come to it meanwhile.
func TestServeACPNewWithdrawn(t *testing.T) {
	var a *lineClient
	var once sync.Once
	sh, socket, cwd := hookedServe(t, func(*stage) {
		once.Do(func() {
			a.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}`)
			acpAnswerLine(a, "1") // -32800, at once
		})
	})
	a = dialLines(t, socket)
	initializeACP(a)
	a.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"` + cwd + `","mcpServers":[]}}`)
	if answer := acpAnswerLine(a, "1"); !strings.Contains(answer, "-32800") {
		t.Fatalf("session/new withdrawn answered %s", answer)
	}
	if !sh.h.background.wait(30 * time.Second) {
		t.Fatal("session/new never ended")
	}
	sh.mu.Lock()
	kept := len(sh.stages)
	sh.mu.Unlock()
	if live := len(sh.h.sessions.list()); kept != 0 || live != 0 {
		t.Errorf("after a withdrawn session/new the host keeps %d stages, %d sessions open; want none", kept, live)
	}
}

// TestServeAttachWhileOpening: a client that attaches by its id (an rpc
// session_attach, an ACP session/resume) to a session another request
// is opening — open in the host, found by its id, its stage not live yet
// — waits for the opening, then attaches to it. Before, it was refused as
// if the session were being closed (Session ID is being closed: attach
// again in a moment; over ACP, The session is being closed: load it
// again in a moment). The hook holds a's hello, which opens a new
// session, in that window until b's attach waits (or has its answer).
func TestServeAttachWhileOpening(t *testing.T) {
	for _, wire := range []string{"rpc", "acp"} {
		t.Run(wire, func(t *testing.T) { testAttachWhileOpening(t, wire) })
	}
}

func testAttachWhileOpening(t *testing.T, wire string) {
	cwd := t.TempDir()
	var armed atomic.Bool
	registered, goOn := make(chan string, 1), make(chan struct{})
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(goOn) }) })
	sh, socket := startServeWith(t, newTestEnv(t), cwd, func(sh *serveHost) {
		sh.registered = func(s *session) {
			if armed.CompareAndSwap(true, false) {
				registered <- s.conv.info().id
				<-goOn
			}
		}
	})
	b := dialLines(t, socket)
	if wire == "acp" {
		initializeACP(b)
	} else {
		b.hello(`{"id":"h","type":"hello"}`)
	}
	armed.Store(true)
	a := dialLines(t, socket)
	a.send(`{"id":"h","type":"hello"}`)
	id := <-registered
	attach, answer := `{"id":"at","type":"session_attach","sessionId":"`+id+`"}`, "at"
	if wire == "acp" {
		attach = `{"jsonrpc":"2.0","id":1,"method":"session/resume","params":{"sessionId":"` + id + `","cwd":"` + cwd + `"}}`
		answer = "1"
	}
	b.send(attach)
	waitBlockedIn(t, "[chan receive", "(*serveHost).stageOnceOpen", func() bool { return acpAnswerRead(b, answer) != "" })
	release.Do(func() { close(goOn) })
	if r := a.answer("h"); r.Success == nil || !*r.Success {
		t.Fatalf("a's hello: %s", r.line)
	}
	if line := acpAnswerLine(b, answer); strings.Contains(line, `"error"`) || strings.Contains(line, `"success":false`) {
		t.Errorf("an attach to a session being opened answered %s; want it attached once opened", line)
	}
	if wire == "rpc" {
		if got := sessionIDOf(b, "st"); got != id {
			t.Errorf("b is on %s, want %s (attached to)", got, id)
		}
	}
	if st := sh.stageFor(sh.h.sessions.find(id)); st == nil || st.clientCount() != 2 {
		t.Errorf("the session a opened does not have a and b attached")
	}
}

// TestServeAttachWhileClosing: an attach by its id to a session the host
// is closing (for being idle: its stage taken out, the session not yet
// closing for the host's registry, which still finds it) is refused
// (Session ID is being closed: attach again in a moment; over ACP, The
// session is being closed: load it again in a moment), not taken for a
// session being opened and waited for, whose stage would never come. The
// test closes the stage as the idle sweep does, holding the host's
// seqMu, which the close takes after it took the stage out, and attaches
// meanwhile.
func TestServeAttachWhileClosing(t *testing.T) {
	for _, wire := range []string{"rpc", "acp"} {
		t.Run(wire, func(t *testing.T) { testAttachWhileClosing(t, wire) })
	}
}

func testAttachWhileClosing(t *testing.T, wire string) {
	o := serveOneSession(t)
	o.owner.close()
	for o.st.clientCount() > 0 || !o.st.idleFor(0) { // once a's end has detached it
		runtime.Gosched()
	}
	b := dialLines(t, o.socket) // its own session announced before seqMu is held
	attach := `{"id":"at","type":"session_attach","sessionId":"` + o.id + `"}`
	want := "Session " + o.id + " is being closed: attach again in a moment"
	if wire == "acp" {
		initializeACP(b)
		attach = `{"jsonrpc":"2.0","id":1,"method":"session/resume","params":{"sessionId":"` + o.id + `","cwd":"` + o.cwd + `"}}`
		want = `"error":{"code":-32603,"message":"The session is being closed: load it again in a moment"}`
	} else {
		b.hello(`{"id":"h","type":"hello"}`)
	}
	s := o.st.s
	held, released := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(released) }) }
	t.Cleanup(release) // before the host's end, should the test stop first
	// seqMu is held on a goroutine of its own: no lock of the test's may
	// be taken under it.
	go func() {
		o.sh.seqMu.Lock()
		close(held)
		<-released
		o.sh.seqMu.Unlock()
	}()
	<-held
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		o.sh.closeStage(o.st)
	}()
	for o.sh.stageFor(s) != nil { // taken out; the close waits for seqMu
		runtime.Gosched()
	}
	b.send(attach)
	var got string
	if wire == "acp" {
		got = acpAnswerLine(b, "1")
	} else {
		got = b.answer("at").Error
	}
	release()
	<-closed
	if !strings.Contains(got, want) {
		t.Errorf("an attach to a session being closed answered %s; want %s", got, want)
	}
}

// TestServeAttachClosedTwice: a session_attach whose session the host
// closes for being idle as it is attached to, and again once it was
// opened again from its file, fails saying so (The session was closed as
// it was attached to: attach again); the connection stays on its
// session. The hook makes each opening of the session attached to by
// another client, which leaves it, and then closes it for being idle as
// the host's sweep does, before the attach.
func TestServeAttachClosedTwice(t *testing.T) {
	const xID = "1a2b3c4d-0000-4000-8000-00000000004a"
	attachFailingTwice(t, xID, func(sh *serveHost, st *stage, socket string) {
		c := dialLines(t, socket)
		c.hello(`{"id":"h","type":"hello","attach":"` + xID + `"}`)
		c.close()
		waitDetached(st)
		if !st.idleFor(0) {
			t.Errorf("the session another client attached to and left is not idle")
			return
		}
		sh.closeStage(st)
	}, "The session was closed as it was attached to: attach again")
}

// TestSpawnOfClosedSession: rpi serve closes a session for being idle
// (its client gone) while a spawn of that client's is still starting —
// here another start holds the table, as a slow exec does. The spawn
// leaves nothing behind: the session's close did not see the process,
// so the host's table must not keep it (with the closed session it
// holds) for the host's life. It kept it: the start, now in the
// background, went on into the closed session.
func TestSpawnOfClosedSession(t *testing.T) {
	endToEnd(t)
	o := serveOneSession(t)
	procs := o.sh.h.procs
	startingNow := func() int {
		procs.mu.Lock()
		defer procs.mu.Unlock()
		return procs.starting
	}
	held, release := make(chan struct{}), make(chan struct{})
	go func() { // a start under way (on a goroutine of its own: the test takes the stage's lock meanwhile)
		procs.startMu.Lock()
		close(held)
		<-release
		procs.startMu.Unlock()
	}()
	<-held
	o.owner.send(spawnLine("sp", []string{"sleep", "60"}, ""))
	for startingNow() == 0 { // the spawn has its place, and waits for the table
		runtime.Gosched()
	}
	o.owner.close()
	for o.st.clientCount() > 0 || !o.st.idleFor(0) {
		runtime.Gosched()
	}
	o.sh.closeStage(o.st)
	close(release)
	for startingNow() > 0 { // the spawn is done
		runtime.Gosched()
	}
	procs.mu.Lock()
	for _, p := range procs.byID {
		if p.s == o.st.s {
			t.Errorf("the host's table keeps process %s of the closed session", p.id)
		}
	}
	procs.mu.Unlock()
	if !waitGroup(&procs.children, exitLimit) {
		t.Errorf("a child of the closed session was not ended")
	}
}

// TestServeACPResumeOwnNewAsItOpens: a session/resume, on one ACP
// connection, of the session that connection's own session/new is
// opening (its file is written at once: session/list names it) leaves no
// client of the connection on the session once the connection ends. The
// hook holds the session/new after its stage went live, before its
// attach, until the resume has its answer.
func TestServeACPResumeOwnNewAsItOpens(t *testing.T) {
	var a *lineClient
	var armed atomic.Bool
	var cwd string
	sh, socket, dir := hookedServe(t, func(st *stage) {
		if armed.CompareAndSwap(true, false) {
			a.send(`{"jsonrpc":"2.0","id":2,"method":"session/resume","params":{"sessionId":"` + st.firstID + `","cwd":"` + cwd + `"}}`)
			acpAnswerLine(a, "2")
		}
	})
	cwd = dir
	a = dialLines(t, socket)
	initializeACP(a)
	armed.Store(true)
	a.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"` + cwd + `","mcpServers":[]}}`)
	if answer := acpAnswerLine(a, "1"); !strings.Contains(answer, `"result":{"sessionId"`) {
		t.Fatalf("session/new: %s", answer)
	}
	a.close()
	for sh.connectionCount() > 0 {
		runtime.Gosched()
	}
	for _, st := range sh.liveStages() {
		if n := st.clientCount(); n != 0 {
			t.Errorf("the session has %d clients after its only connection ended; want 0 (its resume answered %s)", n, acpAnswerRead(a, "2"))
		}
	}
}

// TestServeHelloSameNewIDAtOnce: clients that say hello at once, each
// naming the same new session id, all end on one session: one opens it,
// the others wait for that opening and attach (each of them waited 5 s
// for the id the host's own new session held, and failed).
func TestServeHelloSameNewIDAtOnce(t *testing.T) {
	e := newTestEnv(t)
	sh := startServe(t, e, t.TempDir(), "--model", "faux/faux-1")
	clients := make([]*servedClient, 6)
	for i := range clients {
		clients[i] = sh.connect()
	}
	for _, c := range clients {
		c.send(`{"id":"h","type":"hello","options":{"session-id":"same"}}`)
	}
	for _, c := range clients {
		c.waitFor(t, `"command":"hello"`, 1)
		if out := string(c.out.bytes()); !strings.Contains(out, `"success":true,"data":{"sessionId":"same"`) {
			t.Errorf("a hello failed: %s", out)
		}
	}
	clients[0].send(`{"id":"s","type":"host_status"}`)
	clients[0].waitFor(t, `"command":"host_status"`, 1)
	out := string(clients[0].out.bytes())
	status := out[strings.Index(out, `{"id":"s"`):]
	if !strings.Contains(status, `"sessions":[{"sessionId":"same","cwd"`) || strings.Count(status, `"sessionId"`) != 1 ||
		!strings.Contains(status, fmt.Sprintf(`"clients":%d,`, len(clients))) {
		t.Errorf("host_status: %s", status)
	}
	sh.end()
}

// TestServeHelloSessionIDOtherCwd: a hello naming the id of a session live
// in the host with another cwd than the hello's, or with no-session where
// the session has a file, is refused, saying so: it attached the client to
// that session, whose tools work in the other folder (or which writes its
// prompts to a file), as if the hello's options had been taken.
func TestServeHelloSessionIDOtherCwd(t *testing.T) {
	e := newTestEnv(t)
	cwd, other := t.TempDir(), t.TempDir()
	sh := startServe(t, e, cwd, "--model", "faux/faux-1")
	a, b := sh.connect(), sh.connect()
	a.send(`{"id":"h","type":"hello","options":{"session-id":"mine"}}`)
	a.waitFor(t, `"type":"session_started"`, 1)
	hello, _ := json.Marshal(map[string]any{"id": "h", "type": "hello", "options": map[string]string{"session-id": "mine", "cwd": other}})
	b.send(string(hello))
	b.waitFor(t, `"command":"hello"`, 1)
	if out := string(b.out.bytes()); !strings.Contains(out, `"success":false`) || !strings.Contains(out, "another cwd") {
		t.Errorf("the hello in another cwd: %s", out)
	}
	b.send(`{"id":"h","type":"hello","options":{"session-id":"mine","no-session":true}}`)
	b.waitFor(t, `"command":"hello"`, 2)
	if out := string(b.out.bytes()); strings.Count(out, `"success":false`) != 2 || !strings.Contains(out, "says no-session") {
		t.Errorf("the hello with no-session: %s", out)
	}
	hello, _ = json.Marshal(map[string]any{"id": "h", "type": "hello", "options": map[string]string{"session-id": "mine", "cwd": cwd}})
	b.send(string(hello))
	b.waitFor(t, `"command":"hello"`, 3)
	if out := string(b.out.bytes()); !strings.Contains(out, `"success":true,"data":{"sessionId":"mine"`) {
		t.Errorf("the hello in the session's cwd: %s", out)
	}
	sh.end()
}

// TestServeHelloSameFileAtOnce: clients that say hello at once, each
// naming the same session file (options.session), not open in the host,
// all end on one session, as those naming one session id do.
func TestServeHelloSameFileAtOnce(t *testing.T) {
	e := newTestEnv(t)
	cwd := t.TempDir()
	path := filepath.Join(t.TempDir(), "s.jsonl")
	header := fmt.Sprintf(`{"type":"session","version":3,"id":"from-file","timestamp":"2026-01-01T00:00:00.000Z","cwd":%q}`, cwd)
	user := `{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":[{"type":"text","text":"Hi"}],"timestamp":1}}`
	if err := os.WriteFile(path, []byte(header+"\n"+user+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sh := startServe(t, e, cwd, "--model", "faux/faux-1")
	clients := make([]*servedClient, 6)
	for i := range clients {
		clients[i] = sh.connect()
	}
	hello, _ := json.Marshal(map[string]any{"id": "h", "type": "hello", "options": map[string]string{"session": path}})
	for _, c := range clients {
		c.send(string(hello))
	}
	for _, c := range clients {
		c.waitFor(t, `"command":"hello"`, 1)
		if out := string(c.out.bytes()); !strings.Contains(out, `"success":true,"data":{"sessionId":"from-file"`) {
			t.Errorf("a hello failed: %s", out)
		}
	}
	sh.end()
}
