package main

// Tests of the lock order and of the seams where the core calls a front
// end (docs/architecture.md, "Locks and their order"): paths that took
// two front-end and core locks in opposite orders, driven at once until
// they would have met, and a front end that panics in the middle of the
// core's work.

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// hammerACP sends n rounds of the requests round makes (each returns the
// ids it expects an answer to) on c, from two goroutines at once, and
// waits for every answer: a lock cycle between the paths they take
// leaves some unanswered, and waitFor fails the test after 10 s.
func hammerACP(t *testing.T, c *acpTestClient, n int, rounds ...func(i int) json.RawMessage) {
	t.Helper()
	var mu sync.Mutex
	var ids []json.RawMessage
	var wg sync.WaitGroup
	for _, round := range rounds {
		wg.Go(func() {
			for i := range n {
				id := round(i)
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		c.responseTo(id)
	}
}

// TestACPFollowUpsWhileTheModeChanges: prompts queued behind a running
// turn (the core tells ACP each was accepted: ACP sets the session's
// title) while session/set_mode changes the approvals (ACP tells the
// core which tools ask) — the two took the core's and ACP's session
// locks in opposite orders, and the ACP loop hung within seconds, even
// session/cancel unanswered.
func TestACPFollowUpsWhileTheModeChanges(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"text":["held"],"holdAt":1}`, e.agentDir)
	c, a, _ := startACPAgent(t, e, nil)
	sid := openACPSession(t, c, nil, t.TempDir())
	running := c.request("session/prompt", acpTextPrompt(sid, "run"))
	waitRunning(t, a, sid)
	modes := []string{"ask", "auto", "edits"}
	var prompts []json.RawMessage
	var mu sync.Mutex
	hammerACP(t, c, 200, func(i int) json.RawMessage {
		id := c.request("session/prompt", acpTextPrompt(sid, fmt.Sprint("follow-up ", i)))
		mu.Lock()
		prompts = append(prompts, id)
		mu.Unlock()
		return c.request("session/set_mode", map[string]any{"sessionId": sid, "modeId": modes[i%3]}) // a prompt answers at its turn's end
	}, func(i int) json.RawMessage {
		return c.request("session/set_mode", map[string]any{"sessionId": sid, "modeId": modes[(i+1)%3]})
	})
	waitFollowUps(t, a, sid, 200)
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid))
	c.call("session/list", map[string]any{}) // answered after the loop took the cancel
	fm.release <- struct{}{}
	for _, id := range append(prompts, running) {
		if got := c.responseTo(id); stopReasonOf(got.Result) != "cancelled" {
			t.Fatalf("prompt %s: %s", id, got.line)
		}
	}
}

// TestACPToolCallsWhileTheModeChanges: three paths that made a cycle —
// a tool call starting (ACP's updates ask ACP's session whether the call
// waits for approval), a follow-up queued (the core reports the queue to
// ACP's updates while it holds its own lock) and session/set_mode (ACP's
// session tells the core) — run at once, a tool call after another, and
// every request is answered.
func TestACPToolCallsWhileTheModeChanges(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c","name":"ls","args":["{}"]}]}`, e.agentDir)
	fm.mu.Lock()
	fm.cycle = true // a tool call, again and again, until cancelled
	fm.mu.Unlock()
	c, a, _ := startACPAgent(t, e, nil)
	sid := openACPSession(t, c, nil, t.TempDir())
	running := c.request("session/prompt", acpTextPrompt(sid, "run"))
	c.waitFor(0, func(m acpTestMessage) bool { return m.update()["sessionUpdate"] == "tool_call" })
	modes := []string{"auto", "edits"} // neither asks before ls
	hammerACP(t, c, 150, func(i int) json.RawMessage {
		c.request("session/prompt", acpTextPrompt(sid, fmt.Sprint("follow-up ", i)))
		return c.request("session/set_mode", map[string]any{"sessionId": sid, "modeId": modes[i%2]})
	}, func(i int) json.RawMessage {
		return c.request("session/set_mode", map[string]any{"sessionId": sid, "modeId": modes[(i+1)%2]})
	})
	waitFollowUps(t, a, sid, 150)
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid))
	if got := c.responseTo(running); stopReasonOf(got.Result) != "cancelled" {
		t.Fatalf("the running prompt: %s", got.line)
	}
}

// waitRunning waits until the session sid of a has a run in progress.
func waitRunning(t *testing.T, a *acpAgent, sid string) {
	t.Helper()
	a.mu.Lock()
	s := a.sessions[sid].s
	a.mu.Unlock()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if s.state().IsStreaming {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the prompt never started")
		}
	}
}

// panickingSink panics on the event named on, once; it records the
// rest.
type panickingSink struct {
	recordingSink
	on       string
	panicked sync.Once
}

func (p *panickingSink) event(ev event) {
	if ev.Type == p.on {
		fired := false
		p.panicked.Do(func() { fired = true })
		if fired {
			panic("the sink fails on " + p.on)
		}
	}
	p.recordingSink.event(ev)
}

func (p *panickingSink) gatheredEvent(ev event) { p.event(ev) }

// TestSinkPanicContained: a front end's sink that panics on
// agent_settled — which the core reports in the step that marks the
// agent idle — loses that event only: the session answers get_state at
// once, idle, and runs the next prompt. (The panic left the session's
// lock held, and the run's recovery waited for it for ever.)
func TestSinkPanicContained(t *testing.T) {
	sink := &panickingSink{on: "agent_settled"}
	s, _ := openTestSession(t, `{"text":["one"]}
{"text":["two"]}`, sink, &approvingUI{}, nil)
	for _, text := range []string{"first", "second"} {
		ended := make(chan promptEnd, 1)
		msg := &userMessage{Role: "user", Content: textBlocks(text), Timestamp: 1}
		s.startPrompt(msg, "", func(_ bool, err error) {
			if err != nil {
				t.Errorf("%s: %v", text, err)
			}
		}, func(end promptEnd) { ended <- end })
		waitEnded(t, ended)
		state := make(chan stateData, 1)
		go func() { state <- s.state() }()
		if st := receive(t, state, "get_state's answer after the sink's panic"); st.IsStreaming {
			t.Errorf("after %s: still streaming", text)
		}
	}
	if types := strings.Join(sink.types(), " "); strings.Count(types, "agent_settled") != 1 || strings.Count(types, "agent_start") != 2 {
		t.Errorf("events: %s; want both runs, and the second's agent_settled", types)
	}
}

// TestEveryGoroutineGuarded: every goroutine and timer callback rpi
// starts runs its code through guarded (a panic in it is told and goes no
// further), but for the few listed here, which only wait on a channel,
// a WaitGroup or signals and run nothing else of rpi's.
func TestEveryGoroutineGuarded(t *testing.T) {
	unguarded := map[string]string{ // file:function → why it needs no guard
		"host.go:goBackground":       "its goroutine runs the work through guarded",
		"host.go:waitGroup":          "waits for a WaitGroup and closes a channel",
		"children.go:wait":           "waits for the readers and closes a channel",
		"main.go:endStartupOnSignal": "writes one line to stderr and closes a channel",
		"sys_unix.go:watchSignals":   "relays signals to a channel",
		"environment.go:AfterFunc":   "the clock's own: its callers pass guarded functions",
		"environment.go:AfterFuncAt": "the clock's own: its callers pass guarded functions",
		"environment.go:after":       "closes a channel",
		"protocol.go:write":          "writeOut recovers on its own, to pass the write's error on",
		"provider_apis.go:arm":       "reads two clock times, then sets a flag and cancels the call's context, or sets itself again",
		"provider_apis.go:deadline":  "cancels the call's context",
	}
	seen := map[string]bool{}
	isGuard := func(e ast.Expr) bool {
		call, ok := e.(*ast.CallExpr)
		if !ok {
			return false
		}
		id, ok := call.Fun.(*ast.Ident)
		return ok && id.Name == "guarded"
	}
	for path, file := range codeFiles(t) {
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			where := path + ":" + fn.Name.Name
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					if !isGuard(n.Call.Fun) {
						seen[where] = true
						if unguarded[where] == "" {
							t.Errorf("%s: a go statement without guard", where)
						}
					}
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "AfterFunc" || sel.Sel.Name == "AfterFuncAt") && len(n.Args) == 2 && !isGuard(n.Args[1]) {
						seen[where] = true
						if unguarded[where] == "" {
							t.Errorf("%s: an AfterFunc without guard", where)
						}
					}
				}
				return true
			})
		}
	}
	for where := range unguarded {
		if !seen[where] {
			t.Errorf("%s is listed as needing no guard, but starts nothing unguarded", where)
		}
	}
}

func init() {
	// lock-inversion takes session.mu while it holds conversation.mu;
	// callout-under-lock makes a callout while it holds session.mu.
	helpers["lock-inversion"] = func([]string) {
		var conv mutex[convMu]
		var s mutex[sessionMu]
		conv.Lock()
		s.Lock()
	}
	helpers["callout-under-lock"] = func([]string) {
		var s mutex[sessionMu]
		s.Lock()
		checkCallout("a sink")
	}
}

// TestLockOrderChecked: in a race build a lock taken out of lockOrder's
// order, and a callout made under a core lock, end the program with what
// was held — at once, without the interleaving that would deadlock —
// whether the lock was taken with Lock or with TryLock (mutex's own
// TryLock records it as held; sync.Mutex's would pass unseen).
func TestLockOrderChecked(t *testing.T) {
	if !raceDetector {
		t.Skip("the lock order is checked in race builds")
	}
	for helper, want := range map[string]string{
		"lock-inversion":     "rpi: lock order broken: session.mu taken while conversation.mu is held (lockOrder has session.mu first); held: [conversation.mu]",
		"callout-under-lock": "rpi: lock order broken: a call out of the core (a sink) while session.mu is held; held: [session.mu]",
		"trylock-callout":    "rpi: lock order broken: a call out of the core (a sink) while session.mu is held; held: [session.mu]",
		"trylock-order":      "rpi: lock order broken: session.mu taken while conversation.mu is held (lockOrder has session.mu first); held: [conversation.mu]",
	} {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(withoutVariables(os.Environ(), []string{"RPI_LOCK_ORDER"}), "RPI_HELPER="+helper, "GORACE=atexit_sleep_ms=0")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 3 || !strings.HasPrefix(string(out), want+"\n") {
			t.Errorf("%s: %v (want exit 3 and %q)\n%s", helper, err, want, out)
		}
	}
}

// openClockedSession opens a session (no session file) with sink and a fake
// clock, and no model.
func openClockedSession(t *testing.T, sink eventSink) *session {
	t.Helper()
	e := newTestEnv(t)
	e.clock = newFakeClock()
	h, cwd := hostIn(t, e, "--no-session")
	s, err := openSession(h, sessionOptions{cwd: cwd, sink: sink, ui: &approvingUI{}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// outputSink keeps each process_output's data as it is when delivered
// (the rpc sink encodes it then).
type outputSink struct {
	mu     sync.Mutex
	chunks []string
}

func (o *outputSink) event(ev event) {
	if d, ok := ev.Data.(processOutputData); ok {
		o.mu.Lock()
		o.chunks = append(o.chunks, string(d.Data))
		o.mu.Unlock()
	}
}

func (o *outputSink) gatheredEvent(ev event) { o.event(ev) }

func (o *outputSink) flush() {}

// TestProcessOutputKeptUntilDelivered: process_output's data
// is p.pending itself (sendOutput), and flushLocked hands the same array
// back for the next output (p.pending[:0]). It used to be written before
// p.mu was let go of; now it is posted, and delivered later: the
// coalescing timer's flush posts "first", lets go of p.mu and waits for
// the outbox (another goroutine is delivering: a client that reads
// slowly), and the reader's next chunk is appended over "first" before
// the event is encoded. The client gets "SECOND"'s bytes under "first"'s
// cursors (and in production the two goroutines race on the array).
// Fix: flushLocked lets the posted bytes go (p.pending = nil, or post a
// copy) instead of reusing the array.
func TestProcessOutputKeptUntilDelivered(t *testing.T) {
	sink := &outputSink{}
	s := openClockedSession(t, sink)
	p := &process{s: s, id: "p", ownerID: "client", out: ring{limit: 1 << 20}, state: "running", done: make(chan struct{})}
	p.addOutput("combined", []byte("first")) // pending; the (fake) timer is set
	s.callouts.deliverMu.Lock()              // someone else is delivering
	flushed := make(chan struct{})
	go func() { p.flush(); close(flushed) }() // the coalescing timer fires
	for deadline := time.Now().Add(5 * time.Second); s.callouts.undelivered.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the flush never posted")
		}
	}
	added := make(chan struct{})
	go func() { p.addOutput("combined", []byte("SECOND")); close(added) }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		n := len(p.pending)
		p.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second chunk never came")
		}
	}
	s.callouts.deliverMu.Unlock()
	receive(t, flushed, "the flush")
	receive(t, added, "the second chunk")
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.chunks) == 0 || sink.chunks[0] != "first" {
		t.Fatalf("process_output chunks delivered: %q; want the first to be %q", sink.chunks, "first")
	}
}

// TestBashLastUpdateBeforeAnswer: the user's bash holds back an
// incomplete UTF-8 character at the end of a chunk, and sends it when
// the command ends (shellOutput.finish calls onText). onText now posts
// bash_execution_update, but nothing on that path delivers it: the
// answer is written from the background (answerLater → reply, no
// deliver) and overtakes the command's last update, which waits in the
// outbox for whatever delivers next. With no run (the result's write to
// the session file delivers, on the writer's goroutine) it is a race;
// while a prompt runs (the result waits for the run's end) the update
// stays behind until the run's next event. Before, finish wrote it,
// under o.mu, before the answer.
// Fix: finish delivers once o.mu is let go of (defer o.deliver(), as add does).
func TestBashLastUpdateBeforeAnswer(t *testing.T) {
	ps, fm, _ := agentSession(t, apiOpenAI, `{"text":["held"],"holdAt":1}`)
	ps.send(`{"id":"p","type":"prompt","message":"run"}`)
	ps.waitFor(`"message_start","data":{"message":{"role":"assistant"`)
	ps.send(`{"id":"b","type":"bash","command":"printf 'a\\342\\202'"}`)
	ps.waitFor(`"id":"b"`)
	time.Sleep(100 * time.Millisecond) // anything that would still come before the run goes on
	recs := ps.records()
	fm.release <- struct{}{}
	answer := -1
	var before, after strings.Builder
	for i, rec := range recs {
		switch {
		case rec["type"] == "response" && rec["id"] == "b":
			answer = i
		case rec["type"] == "bash_execution_update" && answer < 0:
			before.WriteString(rec["data"].(map[string]any)["chunk"].(string))
		case rec["type"] == "bash_execution_update":
			after.WriteString(rec["data"].(map[string]any)["chunk"].(string))
		}
	}
	if answer < 0 || before.String() != "a\uFFFD\uFFFD" {
		t.Errorf("bash's updates before its answer say %q, after it %q; want all of the output (%q) before", before.String(), after.String(), "a\uFFFD\uFFFD")
	}
	ps.close()
}

func init() {
	// trylock-callout makes a callout while it holds session.mu,
	// taken with TryLock; trylock-order takes session.mu while it
	// holds conversation.mu, taken with TryLock.
	helpers["trylock-callout"] = func([]string) {
		var s mutex[sessionMu]
		if s.TryLock() {
			checkCallout("a sink")
		}
	}
	helpers["trylock-order"] = func([]string) {
		var conv mutex[convMu]
		var s mutex[sessionMu]
		if conv.TryLock() {
			s.Lock()
		}
	}
}

// TestEveryLockRanked: docs/architecture.md says every lock is a
// mutex[name] of lockOrder, which the race build checks; two are plain
// sync.Mutexes the checker never sees: keptOnceFound's (settings.go),
// held while the shell is looked up, which the bash of every user
// command and tool call takes, and endStartupOnSignal's (main.go).
// Neither is in lockOrder, so an order broken through them (or a
// callout under keptOnceFound's) passes every race test.
// Fix: make them mutex[…] with a place in lockOrder (or say in the doc
// which locks are outside it, and why).
func TestEveryLockRanked(t *testing.T) {
	for path, file := range codeFiles(t) {
		if strings.HasPrefix(path, "lockrank") {
			continue
		}
		ast.Inspect(file, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "sync" && (sel.Sel.Name == "Mutex" || sel.Sel.Name == "RWMutex") {
				t.Errorf("%s: a sync.%s, not a mutex of lockOrder", path, sel.Sel.Name)
			}
			return true
		})
	}
}

// TestSinksFanOut: a session's events reach every sink attached, each in
// the same order, from the moment it is attached until it is detached;
// a sink that panics on an event loses that event only, and the sinks
// after it still get it.
func TestSinksFanOut(t *testing.T) {
	first := &panickingSink{on: "agent_settled"}
	s, _ := openTestSession(t, `{"text":["one"]}
{"text":["two"]}`, first, &approvingUI{}, nil)
	second := &recordingSink{}
	detach := s.sinks.attach(second)
	late := &recordingSink{}
	for i, text := range []string{"first", "second"} {
		if i == 1 {
			detach()
			s.sinks.attach(late)
		}
		ended := make(chan promptEnd, 1)
		msg := &userMessage{Role: "user", Content: textBlocks(text), Timestamp: 1}
		s.startPrompt(msg, "", func(_ bool, err error) {
			if err != nil {
				t.Errorf("%s: %v", text, err)
			}
		}, func(end promptEnd) { ended <- end })
		waitEnded(t, ended)
	}
	all := strings.Join(first.types(), " ")
	one, two := strings.Join(second.types(), " "), strings.Join(late.types(), " ")
	if strings.Count(all, "agent_start") != 2 || strings.Count(all, "agent_settled") != 1 {
		t.Fatalf("the first sink got %s; want both runs, the first's agent_settled lost to its panic", all)
	}
	if strings.Count(one, "agent_start") != 1 || strings.Count(one, "agent_settled") != 1 || !strings.HasPrefix(all, strings.ReplaceAll(one, " agent_settled", "")) {
		t.Errorf("the sink attached at the start, detached after the first run, got %s; the first sink %s", one, all)
	}
	if !strings.HasPrefix(two, "agent_start") || strings.Count(two, "agent_start") != 1 || !strings.HasSuffix(all, two) {
		t.Errorf("the sink attached for the second run got %s; the first sink %s", two, all)
	}
}

// TestOpeningNoticesForEachFrontEnd: the warnings of a session's opening
// are kept for every front end that shows the session, not given to the
// first alone; once one has, a warning goes to the ui at once.
func TestOpeningNoticesForEachFrontEnd(t *testing.T) {
	s := openClockedSession(t, &recordingSink{})
	s.warn("the settings file is not valid JSON")
	first, second := s.openingNotices(), s.openingNotices()
	if !slices.Contains(first, "the settings file is not valid JSON") || !slices.Equal(first, second) {
		t.Fatalf("the first front end got %q, the second %q", first, second)
	}
	s.warn("a write failed")
	if later := s.openingNotices(); slices.Contains(later, "a write failed") {
		t.Errorf("a warning after the session was shown was kept as an opening notice: %q", later)
	}
}
