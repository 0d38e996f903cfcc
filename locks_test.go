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
	fm.release <- struct{}{}
	for _, id := range append(prompts, running) {
		if got := c.responseTo(id); string(got.Result) != `{"stopReason":"cancelled"}` {
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
	if got := c.responseTo(running); string(got.Result) != `{"stopReason":"cancelled"}` {
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
// starts runs its code through guard (a panic in it is told and goes no
// further), but for the few listed here, which only wait on a channel,
// a WaitGroup or signals and run nothing else of rpi's.
func TestEveryGoroutineGuarded(t *testing.T) {
	unguarded := map[string]string{ // file:function → why it needs no guard
		"host.go:goBackground":       "its goroutine runs the work through guard",
		"host.go:waitGroup":          "waits for a WaitGroup and closes a channel",
		"children.go:wait":           "waits for the readers and closes a channel",
		"main.go:endStartupOnSignal": "writes one line to stderr and closes a channel",
		"sys_unix.go:watchSignals":   "relays signals to a channel",
		"main.go:AfterFunc":          "the clock's own: its callers pass guarded functions",
		"main.go:after":              "closes a channel",
		"protocol.go:write":          "writeOut recovers on its own, to pass the write's error on",
	}
	seen := map[string]bool{}
	isGuard := func(e ast.Expr) bool {
		call, ok := e.(*ast.CallExpr)
		if !ok {
			return false
		}
		id, ok := call.Fun.(*ast.Ident)
		return ok && id.Name == "guard"
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
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "AfterFunc" && len(n.Args) == 2 && !isGuard(n.Args[1]) {
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
// was held — at once, without the interleaving that would deadlock.
func TestLockOrderChecked(t *testing.T) {
	if !raceDetector {
		t.Skip("the lock order is checked in race builds")
	}
	for helper, want := range map[string]string{
		"lock-inversion":     "rpi: lock order broken: session.mu taken while conversation.mu is held (lockOrder has session.mu first); held: [conversation.mu]",
		"callout-under-lock": "rpi: lock order broken: a call out of the core (a sink) while session.mu is held; held: [session.mu]",
	} {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(withoutVariables(os.Environ(), []string{"RPI_LOCK_ORDER"}), "RPI_HELPER="+helper, "GORACE=atexit_sleep_ms=0")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 3 || !strings.HasPrefix(string(out), want+"\n") {
			t.Errorf("%s: %v\n%s", helper, err, out)
		}
	}
}
