package main

// The agent: the run lifecycle (prompt → model → tools → next turn, until
// nothing is queued), the events it reports, the steering and follow-up queues,
// abortCommand and auto-retry, the approval gate, and the commands that drive
// them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// ---- Event payloads ----

type messageEvent struct {
	Message any `json:"message"`
}

// toolExecStart is a call about to run. call is what its arguments
// decoded to (nil: they do not decode, and the call fails): the very
// value that is approved and runs, for a front end that shows the call
// (ACP's tool card); it is not on the wire.
type toolExecStart struct {
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Args       json.RawMessage `json:"args"`
	call       toolCall
}

type toolExecUpdate struct {
	ToolCallID    string          `json:"toolCallId"`
	ToolName      string          `json:"toolName"`
	Args          json.RawMessage `json:"args"`
	PartialResult toolResult      `json:"partialResult"`
}

type toolExecEnd struct {
	ToolCallID string     `json:"toolCallId"`
	ToolName   string     `json:"toolName"`
	Result     toolResult `json:"result"`
	IsError    bool       `json:"isError"`
	DurationMs *int64     `json:"durationMs,omitempty"` // nil for a call never run, as pi 1.6 (ran)
}

type turnEnd struct {
	Message     *assistantMessage    `json:"message"`
	ToolResults []*toolResultMessage `json:"toolResults"`
}

type agentEnd struct {
	Messages  []any `json:"messages"`
	WillRetry bool  `json:"willRetry"`
}

type runFailed struct {
	Message string `json:"message"`
}

type queueUpdate struct {
	Steering []string `json:"steering"`
	FollowUp []string `json:"followUp"`
	// WaitingForSlot: a prompt waits for a place to run (rpi serve's
	// --max-running: other sessions' turns take them all)
	WaitingForSlot bool `json:"waitingForSlot,omitempty"`
}

type retryStart struct {
	Attempt      int    `json:"attempt"`
	MaxAttempts  int    `json:"maxAttempts"`
	DelayMs      int64  `json:"delayMs"`
	ErrorMessage string `json:"errorMessage"`
}

type retryEnd struct {
	Success    bool   `json:"success"`
	Attempt    int    `json:"attempt"`
	FinalError string `json:"finalError,omitempty"`
}

// ---- The run lifecycle ----

// agentRun is one run chain, from a prompt (or compact) until nothing
// queued is left and it settles.
type agentRun struct {
	ctx     context.Context
	cancel  context.CancelFunc
	settled chan struct{} // closed once the run has settled (after agent_settled)
	agent   bool          // it ran the agent (so it ends with agent_settled)
	// leaveQueued: a compaction after which what is queued waits for the
	// next prompt (rpc's compact); set as it starts, under s.mu.
	leaveQueued bool
	// settling, when set (by the run's own goroutine), runs as the run
	// settles, once the session is idle and before settled is closed: a
	// manual compaction's answer, which abort's answer (given once
	// settled is closed) thus always follows.
	settling func()

	// Only the run's own goroutine uses these: the inputs whose turn is in
	// progress (postTurnsEnded reports their end), and the last answer.
	turn  []runInput
	last  *assistantMessage
	model *model // the last answer's: its tools' images fit its profile

	mu          mutex[agentRunMu] // guards the fields below
	cancelRetry func()            // set while waiting to retry
	retryAfter  time.Duration     // the last failure's Retry-After; negative when it had none
	failure     string            // run_failed's message, once the run failed for good
}

// runInput is a message a run starts from or takes from a queue: the
// user's (*userMessage), or a loop's custom message (rawMessage, loops.go).
type runInput interface{ runInput() }

func (*userMessage) runInput() {}

// inputs makes user messages run inputs (nil stays nil).
func inputs(ms []*userMessage) []runInput {
	if ms == nil {
		return nil
	}
	out := make([]runInput, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}

// Why a run cannot start: tryStartRun's refusals.
var (
	errChanging   = errors.New("A session change is in progress; send the prompt once it is answered.")
	errBusy       = errors.New("Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message.")
	errCompacting = errors.New("Cannot submit a prompt while compaction is in progress. Wait for compaction to finish and retry.")
	errNoModel    = errors.New(noModelMessage)
	errElsewhere  = errors.New("another session is running")
)

// tryStartRun is the one gate every run passes (a prompt, a loop's fire,
// compaction): it starts a run chain in phase when the agent is idle, no
// session change holds runs off — except the caller's own hold (held),
// which ends in the same step, whether the run starts or not — for an
// agent run there is a usable model, and the host's run policy has a
// place for it (--max-running). It decides under s.mu; the caller starts
// the run's goroutine.
func (s *session) tryStartRun(phase runPhase, held bool) (*agentRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tryStartRunLocked(phase, held)
}

func (s *session) tryStartRunLocked(phase runPhase, held bool) (*agentRun, error) {
	if held {
		s.changing--
	}
	switch {
	case s.changing > 0:
		return nil, errChanging
	case s.activeRun != nil:
		return nil, errBusy
	case phase == running && (s.model == nil || !s.model.usable()):
		return nil, errNoModel
	case !s.host.runs.claim(s):
		return nil, errElsewhere
	}
	ctx, cancel := context.WithCancel(s.ctx)
	run := &agentRun{ctx: ctx, cancel: cancel, settled: make(chan struct{}), agent: phase == running, retryAfter: -1}
	s.activeRun, s.phase = run, phase
	s.stopWarmLocked() // its first request warms anew
	s.conv.hold()
	return run, nil
}

// runSettled is the run chain in progress's settled channel, closed once
// it has settled (its follow-ups taken, agent_settled out); nil when the
// agent is idle.
func (s *session) runSettled() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.activeRun == nil {
		return nil
	}
	return s.activeRun.settled
}

// setPhase changes the phase of the run in progress.
func (s *session) setPhase(phase runPhase) {
	s.mu.Lock()
	if s.activeRun != nil && s.phase != stopping {
		s.phase = phase
	}
	s.mu.Unlock()
}

// settle ends a run chain, or continues it: under the lock a prompt takes
// to queue, it takes what is queued (then the caller runs it) or marks
// the agent idle and writes agent_settled, so nothing queued is ever
// left behind, but after rpc's compact, which leaves them for the next
// prompt as pi 1.6 does; an ACP compaction that finds messages queued goes
// on as an agent run. Either way the turn of the inputs it ran has ended
// (postTurnsEnded, after agent_settled when it settles; the host's run is let
// go of before, so another session can run once a client hears of the
// end). Once idle, the loops report the run and may start a waiting fire.
func (s *session) settle(run *agentRun) (next []runInput) {
	s.mu.Lock()
	if run.ctx.Err() == nil && !run.leaveQueued {
		// As pi 1.6 goes on: with what was steered, else with a
		// follow-up; a follow-up queued with a steer waits for the answer.
		if next = inputs(s.takeQueuedLocked(true)); next == nil {
			next = inputs(s.takeQueuedLocked(false))
		}
	}
	if len(next) > 0 {
		s.phase, run.agent = running, true
		s.postTurnsEnded(run)
		s.unlock()
		return next
	}
	s.activeRun, s.phase, s.starting = nil, idle, nil
	bashResults := s.conv.release() // in before agent_settled: the messages asked for then hold them
	s.cacheWarmSettledLocked(run.ctx.Err() != nil)
	s.host.runs.release(s)
	if run.agent {
		s.postTell(uiRequest{Method: "setStatus", StatusKey: "rpi", StatusText: "idle"})
		s.postEvent("agent_settled", runSettled{Aborted: run.ctx.Err() != nil})
	}
	s.postTurnsEnded(run)
	s.loopsSettledLocked(run)
	running := s.activeRun != nil // a loop's waiting fire started
	s.unlock()
	if run.settling != nil {
		run.settling()
	}
	close(run.settled) // after agent_settled is out: abort answers then
	if !running {
		s.host.endRun(s) // wakes the prompts that wait for a place
	}
	run.cancel()
	if bashResults {
		s.conv.flush()
	}
	return nil
}

// runSettled is agent_settled's payload: whether the run was aborted.
type runSettled struct {
	Aborted bool `json:"aborted"`
}

// postTurnsEnded posts the end of the turn of the inputs the run has
// been working on. It runs on the run's goroutine, with s.mu held or
// not; the caller delivers.
func (s *session) postTurnsEnded(run *agentRun) {
	end := promptEnd{ran: true, aborted: run.ctx.Err() != nil, answer: run.last}
	for _, in := range run.turn {
		if m, ok := in.(*userMessage); ok && m.ended != nil {
			ended := m.ended
			m.ended = nil
			s.postCall(func() { ended(end) })
		}
	}
	run.turn = nil
}

// dropUnrunLocked posts the end of queued messages that will never run;
// s.mu is held.
func (s *session) dropUnrunLocked(queued ...[]*userMessage) {
	for _, q := range queued {
		for _, m := range q {
			if m.ended != nil {
				ended := m.ended
				m.ended = nil
				s.postCall(func() { ended(promptEnd{}) })
			}
		}
	}
}

// isRunning reports whether a run is in progress.
func (s *session) isRunning() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.activeRun != nil
}

// busy reports whether anything of the session's is under way: a run, a
// process of the model's or the user's, or a user's bash.
func (s *session) busy() bool {
	return s.isRunning() || s.runningProcessCount() > 0 || s.userBash.count() > 0
}

// holdRuns keeps new runs from starting (a prompt fails, a loop's fire
// waits) until releaseRuns, and reports whether a run is in progress; a
// session change holds runs while it reads what it needs and until it
// has applied itself (abort stops the run in progress meanwhile).
func (s *session) holdRuns() (busy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changing++
	return s.activeRun != nil
}

// takeChangeTurn gives a session change its turn: after is closed once
// the change asked for before it is done (nil when there is none), and
// the change closes turn when it is.
func (s *session) takeChangeTurn() (after <-chan struct{}, turn chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	after, turn = s.lastChange, make(chan struct{})
	s.lastChange = turn
	return after, turn
}

func (s *session) releaseRuns() {
	s.mu.Lock()
	s.changing--
	s.mu.Unlock()
}

// changeAsker is the part of the front end that asked for a session
// change: lock, its answering (rpc: the connection's
// connection.answerMu, which its command loop holds while it handles a
// command; nil: none), and still (nil: none), asked under lock whether
// the change is still the asker's to make (over rpi serve, a client that
// has left the session is no longer): its error is the change's, and the
// change is not made. When it is, keep (nil: none) is what still holds
// for it (over rpi serve, that no other client attaches), let go of once
// the change is answered and announced.
type changeAsker struct {
	lock  sync.Locker
	still func() (keep func(), err error)
}

// changeSession applies a change that needs the agent still (a session
// change): once the change asked for before it is applied, check (which
// reads only memory and may refuse the change; nil for none) and prepare
// (which may read files; nil for none) run, then it aborts a running
// agent, waits for it to settle, applies change and passes its error (or
// check's or prepare's) to done; a change refused aborts nothing. Changes
// apply one at a time, in the order they were asked for, each reading what
// it needs once the one before is applied (two switches to the current
// file: the second reads what the first made; a fork right behind a
// switch checks its entry in the session switched to). When nothing runs,
// no change is under way and there is nothing to prepare, it does all this
// at once, in order with the commands around it; otherwise in the
// background, where the change, done and what it announces hold the
// asker's lock, so that no answer of that connection's command loop comes
// between the change and its answer or between the answer and its
// announcement. asker.still is asked before the abort (a change its asker
// no longer takes aborts nothing) and again, under the lock, right before
// the change, where what it holds (keep) is held until the change is
// announced. No run starts meanwhile.
func (s *session) changeSession(check, prepare func() error, change func() error, asker changeAsker, done func(error)) {
	after, turn := s.takeChangeTurn()
	busy := s.holdRuns()
	inBackground := busy || prepare != nil || !isClosed(after)
	lock := func() func() {
		if !inBackground || asker.lock == nil {
			return func() {}
		}
		asker.lock.Lock()
		return asker.lock.Unlock
	}
	step := func(f func() error) error {
		if f == nil {
			return nil
		}
		_, err := s.safely("the session change", func() (any, error) { return nil, f() })
		return err
	}
	apply := func() {
		defer s.startWaitingLoops() // a loop's fire that waited for a change that failed (one made has removed it)
		// finish ends the change's turn and its hold on runs. It comes
		// right after the answer, before the asker's lock is let go of,
		// so that a command its client sends on reading the answer (a
		// prompt, a compact) finds the change over, never in progress.
		var finished sync.Once
		// Its hold first: the change queued behind it (a compact), which
		// starts once turn is closed, finds no hold but its own.
		finish := func() { finished.Do(func() { s.releaseRuns(); close(turn) }) }
		defer finish() // after a panic too
		answer := func(err error) {
			defer finish()
			done(err)
		}
		if after != nil {
			<-after
		}
		for _, f := range []func() error{check, prepare} {
			if err := step(f); err != nil {
				defer lock()()
				answer(err)
				return
			}
		}
		// still asks asker.still; keep lets go of what it holds for the
		// change (nothing, when it refuses it).
		still := func() (keep func(), err error) {
			err = step(func() (err error) {
				if asker.still != nil {
					keep, err = asker.still()
				}
				return err
			})
			if keep == nil {
				keep = func() {}
			}
			return keep, err
		}
		if asker.still != nil {
			unlock := lock()
			keep, err := still()
			keep()
			if err != nil {
				defer unlock()
				answer(err)
				return
			}
			unlock()
		}
		if settled := s.abort(); settled != nil {
			<-settled
		}
		defer lock()()
		keep, err := still()
		defer keep() // once the change is answered and announced, before the asker's lock is let go of
		if err == nil {
			err = step(change)
		}
		answer(err)
	}
	if inBackground {
		s.goBackground(apply)
	} else {
		apply()
	}
}

// isClosed reports whether ch is nil or closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return ch == nil
	}
}

// abort stops the running agent (or compaction) — its model stream,
// running tool, open dialogs and any retry wait — and returns a channel
// closed once it has settled; nil when idle. The queues are kept.
func (s *session) abort() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.abortLocked()
}

// cancelTurn is clearQueue and abort at once (ACP's session/cancel): the
// run is stopped before the messages dropped from the queues are told of
// (their ends, which a front end answers), so that a client that does not
// read, holding up those answers, does not hold up the stop; they are
// still told before the run's end.
func (s *session) cancelTurn() <-chan struct{} {
	s.mu.Lock()
	defer s.unlock()
	s.clearQueueLocked()
	return s.abortLocked()
}

// abortLocked is abort; s.mu is held.
func (s *session) abortLocked() <-chan struct{} {
	s.stopWarmLocked() // the user stops the model: its cache is not kept warm either
	if s.activeRun == nil {
		return nil
	}
	s.activeRun.cancel()
	s.phase = stopping
	return s.activeRun.settled
}

// abortRetry cancels a pending auto-retry wait (the run then ends) and
// returns a channel closed once the run has settled; nil when no retry
// waits.
func (s *session) abortRetry() <-chan struct{} {
	s.mu.Lock()
	run := s.activeRun
	s.mu.Unlock()
	if run == nil {
		return nil
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	if run.cancelRetry == nil {
		return nil
	}
	run.cancelRetry() // under run.mu: waitRetry, letting go of the wait, sees it or is seen to have
	return run.settled
}

// runStart is how a run chain starts (runAgent).
type runStart int

const (
	goingOn  runStart = iota // with what was queued, after a compaction
	fired                    // from a loop's fire
	prompted                 // from a prompt
)

// runAgent drives a run chain: turns until the model stops with nothing
// queued, auto-retries, compaction, and finally agent_settled. A panic
// anywhere in it ends the run with an error instead of ending rpi.
func (s *session) runAgent(run *agentRun, pending []runInput, start runStart) {
	defer func() {
		if p := recover(); p != nil { // outside the turns (safeTurns has its own)
			fmt.Fprintf(s.stderr, "rpi: panic in the agent run: %v\n%s", p, debug.Stack())
			run.cancel() // nothing queued is taken: the run settles
			s.settle(run)
		}
	}()
	if start != goingOn && s.compactBeforeRun(run) && start == prompted && run.ctx.Err() == nil {
		// What was steered while it compacted goes in after the prompt
		// (with what was steered while idle), as pi 1.6's loop takes the
		// steering queue once it starts.
		pending = append(pending, inputs(s.takeSteeredToo(len(pending) > 1))...)
	}
	s.recordThinkingInForce()
	for pending != nil {
		s.runOnce(run, pending)
		pending = s.settle(run)
	}
}

// compactBeforeRun is pi 1.6's check before a prompt (or a loop's
// message) is sent: the context's last answer may ask for a compaction
// (autoCompact; an overflow's retry is then the run itself). It reports
// whether a compaction started.
func (s *session) compactBeforeRun(run *agentRun) bool {
	last := s.conv.lastAnswer()
	if last == nil {
		return false
	}
	started, _ := s.autoCompact(run, last, true)
	return started
}

// runOnce is one prompt's work: turns, retries and compaction.
func (s *session) runOnce(run *agentRun, pending []runInput) {
	attempt := 0
	for {
		last, retryErr := s.safeTurns(run, pending, attempt)
		pending = nil
		if retryErr == "" {
			if attempt > 0 && last != nil && last.StopReason == "error" {
				s.emit("auto_retry_end", retryEnd{Success: false, Attempt: attempt, FinalError: last.ErrorMessage})
			}
			if _, retry := s.autoCompact(run, last, false); retry {
				// What was steered while it compacted goes in before the
				// answer asked again, as pi 1.6 takes it when the run goes on.
				attempt, pending = 0, inputs(s.takeQueued(true))
				continue
			}
			if last != nil && last.StopReason == "error" {
				s.emit("run_failed", runFailed{last.ErrorMessage})
				run.mu.Lock()
				run.failure = last.ErrorMessage
				run.mu.Unlock()
			}
			return
		}
		attempt++
		delay := s.retryDelay(attempt, run)
		max := s.set.retry.MaxRetries
		// abort_retry can end the wait from the moment auto_retry_start is out.
		cancelled := run.armRetry()
		s.emit("auto_retry_start", retryStart{Attempt: attempt, MaxAttempts: max, DelayMs: delay.Milliseconds(), ErrorMessage: retryErr})
		s.omitAnswer(last) // out of the context already (runTurns): now for good, in the session too
		s.tell(uiRequest{Method: "notify", NotifyType: "warning",
			Message: fmt.Sprintf("Retrying in %v (attempt %d of %d): %s", delay, attempt, max, retryErr)})
		s.status(fmt.Sprintf("retrying (attempt %d of %d)", attempt, max))
		if !s.waitRetry(run, delay, cancelled) {
			s.emit("auto_retry_end", retryEnd{Success: false, Attempt: attempt, FinalError: "Retry cancelled"})
			return
		}
		// What was steered while it waited goes in before the retried
		// answer, as pi 1.6 takes it when the run goes on.
		pending = inputs(s.takeQueued(true))
	}
}

// safeTurns is runTurns with a panic turned into a failed answer.
func (s *session) safeTurns(run *agentRun, pending []runInput, attempt int) (last *assistantMessage, retryErr string) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(s.stderr, "rpi: panic in the agent run: %v\n%s", p, debug.Stack())
			last = &assistantMessage{Role: "assistant", Content: []contentBlock{}, StopReason: "error",
				ErrorMessage: fmt.Sprintf("Internal error: %v", p), Timestamp: s.env.clock.Now().UnixMilli()}
			run.last = last
			s.conv.appendMessage(last)
			s.emit("agent_end", agentEnd{Messages: []any{last}})
			retryErr = ""
		}
	}()
	return s.runTurns(run, pending, attempt)
}

// retryDelay is the server's Retry-After when it gave one within
// retry.provider.maxRetryDelayMs (streamAnswer), else exponential
// backoff from the base delay, at most retry.maxAgentDelayMs.
func (s *session) retryDelay(attempt int, run *agentRun) time.Duration {
	run.mu.Lock()
	defer run.mu.Unlock()
	return s.retryWait(attempt, run.retryAfter)
}

// retryWait is the wait before retry attempt (1, 2, …): the server's
// Retry-After (retryAfter, when not negative), else the backoff.
func (s *session) retryWait(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter >= 0 {
		return retryAfter
	}
	return min(retryBackoff(s.set.retry.BaseDelayMs, attempt), s.set.retry.agentDelayLimit())
}

// retries reports whether a failed call's error (message; final: no
// retry can help) is worth another attempt after attempt retries:
// auto-retry is on (set_auto_retry, settings.json's retry.enabled), the
// budget (retry.maxRetries) is not spent, and the error is one pi 1.6
// retries (retryable), not one rpi knows no retry can mend (final: an
// answer cut at rpi's limit, a compressed stream).
func (s *session) retries(attempt int, message string, final bool) bool {
	s.mu.Lock()
	autoRetry := s.autoRetry
	s.mu.Unlock()
	return autoRetry && attempt < s.set.retry.MaxRetries && !final && retryable(message)
}

// retryBackoff is the wait before attempt (1, 2, …) when the server
// asked for none: the base delay doubled for each attempt before it, at
// most maxDuration (a large base delay, or many retries, would overflow
// a Duration to a negative wait, and the retry would not wait at all).
func retryBackoff(baseDelayMs int64, attempt int) time.Duration {
	d, doublings := msDuration(baseDelayMs), attempt-1
	switch {
	case d == 0 || doublings <= 0:
		return d
	case doublings >= 63 || d > maxDuration>>doublings:
		return maxDuration
	}
	return d << doublings
}

// armRetry makes abort_retry able to cancel the coming retry wait; the
// channel closes when it does.
func (run *agentRun) armRetry() <-chan struct{} {
	cancelled := make(chan struct{})
	run.mu.Lock()
	run.cancelRetry = sync.OnceFunc(func() { close(cancelled) })
	run.mu.Unlock()
	return cancelled
}

// waitRetry sleeps before a retry; abort or abort_retry end it early
// (false). An abort_retry that took the wait as its timer fell due
// cancels the retry still: it answers once the run has settled.
func (s *session) waitRetry(run *agentRun, delay time.Duration, cancelled <-chan struct{}) bool {
	elapsed, stop := after(s.env.clock, delay)
	defer stop()
	select {
	case <-elapsed:
	case <-cancelled:
	case <-run.ctx.Done():
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	run.cancelRetry = nil // abort_retry finds no wait from now on
	return !isClosed(cancelled) && run.ctx.Err() == nil
}

// runTurns emits one agent_start … agent_end: turns until the model stops
// with nothing queued. It returns the last answer, and the error message
// when the run ended in an error worth retrying (then agent_end says
// willRetry and the failed answer leaves the context).
func (s *session) runTurns(run *agentRun, pending []runInput, attempt int) (*assistantMessage, string) {
	s.emit("agent_start", nil)
	var produced []any
	var last *assistantMessage
	for turn := 0; ; turn++ {
		// As pi 1.6 prepares each turn after the first: compacted when
		// past the threshold, and what was steered meanwhile taken when
		// nothing was before.
		if turn > 0 && s.compactBetweenTurns(run) && len(pending) == 0 && run.ctx.Err() == nil {
			pending = inputs(s.takeQueued(true))
		}
		s.emit("turn_start", nil)
		if m := s.declarePrompt(s.offeredTools(), true); m != nil { // before the turn's prompts, as pi 1.6 puts it
			produced = append(produced, m)
		}
		run.turn = append(run.turn, pending...)
		s.mu.Lock()
		lim := s.model.imageLimits() // the model in use as they enter
		s.mu.Unlock()
		for _, m := range pending {
			if u, ok := m.(*userMessage); ok {
				s.setRecoveryTried(false)
				if !s.set.keepImageSize {
					fitPromptImages(u, lim) // as it enters the conversation, once: the session keeps it so
				}
			}
			s.startQueued(m)
			s.emit("message_start", messageEvent{m})
			s.conv.appendMessage(m) // recorded before its end is told: it can be asked for then
			s.emit("message_end", messageEvent{m})
			produced = append(produced, m)
		}
		pending = nil
		// The prompts are recorded before the wait for MCP servers (a
		// crash then loses none); the tools of those that connected in
		// time are declared after them, as pi 1.6 declares tools that
		// register late, and exactly those are offered.
		s.mcp.awaitFirst(run.ctx)
		tools := s.offeredTools()
		if m := s.declarePrompt(tools, false); m != nil {
			produced = append(produced, m)
		}
		answer := s.streamAnswer(run, tools)
		last, run.last = answer, answer
		produced = append(produced, answer)
		if answer.StopReason != "error" && answer.StopReason != "length" {
			s.setRecoveryTried(false)
		}
		if attempt > 0 && answer.StopReason != "error" && answer.StopReason != "aborted" {
			s.emit("auto_retry_end", retryEnd{Success: true, Attempt: attempt})
			attempt = 0
		}
		if answer.StopReason == "error" || answer.StopReason == "aborted" {
			s.emit("turn_end", turnEnd{answer, []*toolResultMessage{}})
			break
		}
		results := s.runTools(run, answer)
		for _, r := range results {
			produced = append(produced, r)
		}
		s.emit("turn_end", turnEnd{answer, results})
		if run.ctx.Err() != nil {
			if len(results) > 0 {
				continue // as pi 1.6: the turn after the results ends at once, its answer aborted
			}
			break
		}
		if pending = inputs(s.takeQueued(true)); len(pending) > 0 || len(results) > 0 {
			continue
		}
		if pending = inputs(s.takeQueued(false)); len(pending) > 0 {
			s.postTurnsEnded(run) // the model has stopped: a follow-up's turn begins
			s.deliver()
			continue
		}
		break
	}
	willRetry := ""
	// As pi, an overflowed context is not retried: auto-compaction runs
	// it again once compacted (recoveryFor).
	if last.StopReason == "error" && !overflowed(last) && s.retries(attempt, last.ErrorMessage, last.final) {
		willRetry = last.ErrorMessage
		s.conv.dropLast(last) // the failed answer leaves the context
	}
	s.emit("agent_end", agentEnd{Messages: produced, WillRetry: willRetry != ""})
	return last, willRetry
}

// streamAnswer asks the model for the next answer, offering it tools,
// and streams it as message_start, message_update… and message_end,
// recording the answer in the session just before its message_end.
func (s *session) streamAnswer(run *agentRun, tools []*tool) *assistantMessage {
	s.mu.Lock()
	m, thinking := s.model, s.effectiveThinking()
	s.mu.Unlock()
	run.model = m
	prompt := s.conv.prompt()
	req := streamRequest{model: m, system: prompt.text(), messages: s.conv.messages(),
		tools: tools, thinking: thinking, budgets: s.set.thinkingBudgets, secrets: s.set.secrets, runKey: s.runKeyCommand, idle: s.set.httpIdle, clock: s.env.clock,
		timeout: s.set.retry.requestTimeout(), blockImages: s.set.blockImages,
		sessionID: s.conv.info().id, longCache: s.longCacheRetention()}
	began := s.env.clock.Now()
	msg := &assistantMessage{Role: "assistant", Content: []contentBlock{}, API: m.API, Provider: m.Provider, Model: m.ID,
		StopReason: "stop", Timestamp: began.UnixMilli(), answerMeta: &answerMeta{}}
	// Aborted already (during the turn's tools): nothing is asked, and
	// the answer is aborted with pi 1.6's words for a request never made.
	aborted := run.ctx.Err() != nil
	if !aborted {
		s.status("thinking")
	}
	started := false
	start := func() {
		started = true
		empty := *msg
		empty.StopReason = "pending" // pi's partial answer
		empty.answerMeta = nil       // what is known of the response comes with its end
		s.emit("message_start", messageEvent{&empty})
	}
	err := run.ctx.Err()
	if !aborted {
		s.startCacheWarm(req)
		ctx, cancel := context.WithTimeout(run.ctx, modelTimeout)
		defer cancel()
		batch := &deltaBatch{stderr: s.stderr, clock: s.env.clock, deliver: s.deliver, post: func(ev assistantEvent, u usage) {
			s.postEvent("message_update", messageUpdate{ev, u})
		}}
		// Called on the streaming goroutine: the usage so far goes with the event.
		emit := func(ev assistantEvent) { batch.add(ev, msg.Usage) }
		err = callModel(ctx, req, msg, start, emit)
		batch.close()
	}
	wait := time.Duration(-1)
	if err != nil {
		msg.StopReason = "error"
		if aborted {
			msg.StopReason, msg.ErrorMessage = "aborted", "This operation was aborted"
		} else if run.ctx.Err() != nil {
			msg.StopReason, msg.ErrorMessage = "aborted", "Request was aborted"
		} else {
			msg.ErrorMessage, wait, msg.final = s.callFailure(err)
		}
		computeCost(&msg.Usage, m)
	}
	// As pi 1.6: how long the response took (from the request, on the
	// monotonic clock) and the thinking level asked for.
	took := s.env.clock.Now().Sub(began).Milliseconds()
	msg.DurationMs, msg.ThinkingLevel = &took, thinking
	run.mu.Lock()
	run.retryAfter = wait
	run.mu.Unlock()
	if !started {
		s.emit("message_start", messageEvent{msg})
	}
	s.conv.appendMessage(msg)
	s.emit("message_end", messageEvent{msg})
	return msg
}

// callFailure is what a failed model call (not aborted) says: its
// message, the server's Retry-After when it gave one within
// retry.provider.maxRetryDelayMs (else negative), and whether no retry
// can help (final).
func (s *session) callFailure(err error) (message string, retryAfter time.Duration, final bool) {
	message, retryAfter = err.Error(), -1
	var perr *providerError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		message = fmt.Sprintf("Connection error: no answer within %v", modelTimeout)
	case errors.As(err, &perr):
		limit := s.set.retry.serverWaitLimit()
		switch {
		case !perr.hasRetryAfter:
		case limit > 0 && perr.retryAfter > limit:
			// As pi: a longer wait than the limit fails the call at
			// once, saying so; a retry then backs off as after any error.
			// The wait is told as pi tells it, a JavaScript number
			// (1e+300), however long.
			message = fmt.Sprintf("Server requested %ss retry delay (max: %ds). %s", jsNumber(math.Ceil(perr.retryAfterMs/1000)), ceilSeconds(limit), message)
		default:
			retryAfter = perr.retryAfter
		}
		final = perr.final
	}
	return message, retryAfter, final
}

// ceilSeconds is d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int64 {
	secs := int64(d / time.Second)
	if d%time.Second > 0 {
		secs++
	}
	return secs
}

// modelTimeout bounds one model call, from request to the end of the stream.
const modelTimeout = 10 * time.Minute

// Deltas are coalesced: consecutive deltas of one block go out as one
// message_update once deltaBatchBytes have gathered or deltaBatchDelay
// after the first, so a fast model costs a few events, not one per token.
const (
	deltaBatchBytes = 4 << 10
	deltaBatchDelay = 30 * time.Millisecond
)

// deltaBatch coalesces the deltas of a streaming answer; every other
// event first sends what is pending, so the order is kept: each is
// posted under mu, and delivered once it is let go of.
type deltaBatch struct {
	post    func(assistantEvent, usage) // posts one message_update
	deliver func()                      // delivers what was posted
	clock   clock
	stderr  io.Writer // where a panic in the timer's send is told

	mu      mutex[deltaBatchMu] // guards the fields below; held while posting
	usage   usage               // the answer's usage as of the pending delta's last text
	pending *assistantEvent
	text    strings.Builder
	timer   func() bool // stops the coming flush; nil when none is set
	closed  bool
}

// add takes an event and the answer's usage when it came. A delta goes
// out with the usage as of its own text, whether the timer or the next
// event sends it, so what a delta reports never depends on the clock.
func (b *deltaBatch) add(ev assistantEvent, u usage) {
	defer b.deliver() // once b.mu is let go of
	b.mu.Lock()
	defer b.mu.Unlock()
	if ev.Delta == nil {
		b.flushLocked()
		b.post(ev, u)
		return
	}
	if b.pending != nil && (b.pending.Type != ev.Type || b.pending.ContentIndex != ev.ContentIndex) {
		b.flushLocked()
	}
	b.usage = u
	if b.pending == nil {
		b.pending = &assistantEvent{Type: ev.Type, ContentIndex: ev.ContentIndex}
	}
	b.text.WriteString(*ev.Delta)
	if b.text.Len() >= deltaBatchBytes {
		b.flushLocked()
	} else if b.timer == nil {
		b.timer = b.clock.AfterFunc(deltaBatchDelay, guarded(b.stderr, "sending deltas", b.flush))
	}
}

func (b *deltaBatch) flush() {
	defer b.deliver()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.flushLocked()
	}
}

func (b *deltaBatch) flushLocked() {
	if b.timer != nil {
		b.timer()
		b.timer = nil
	}
	if b.pending == nil {
		return
	}
	delta := b.text.String()
	b.pending.Delta = &delta
	b.post(*b.pending, b.usage)
	b.pending = nil
	b.text.Reset()
}

// close sends what is pending; later timer firings do nothing.
func (b *deltaBatch) close() {
	defer b.deliver()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
	b.closed = true
}

// runTools runs the answer's tool calls one after another. A steering
// message queued meanwhile skips the calls not yet started.
func (s *session) runTools(run *agentRun, answer *assistantMessage) []*toolResultMessage {
	results := []*toolResultMessage{}
	skip := ""
	for _, call := range answer.Content {
		if call.Type != "toolCall" {
			continue
		}
		began := s.env.clock.Now()
		decoded, decodeErr := s.decodeToolCall(call.Name, call.Arguments)
		s.emit("tool_execution_start", toolExecStart{call.ID, call.Name, call.Arguments, decoded})
		var res toolResult
		var isError, ran bool
		switch {
		case skip != "":
			res, isError = toolResult{Content: textBlocks(skip)}, true
		default:
			res, isError, ran = s.runDecoded(run.ctx, call, decoded, decodeErr, run.model.imageLimits())
		}
		if isError && res.Details == nil {
			res.Details = map[string]any{} // as pi 1.6's error results: "details":{}
		}
		// As pi 1.6: how long the tool ran, for a call that ran; one
		// skipped, of no tool, with arguments it does not take or denied
		// has none.
		var took *int64
		if ran {
			ms := s.env.clock.Now().Sub(began).Milliseconds()
			took = &ms
		}
		s.emit("tool_execution_end", toolExecEnd{call.ID, call.Name, res, isError, took})
		msg := &toolResultMessage{Role: "toolResult", ToolCallID: call.ID, ToolName: call.Name, Content: res.Content,
			Details: res.Details, IsError: isError, DurationMs: took, Timestamp: s.env.clock.Now().UnixMilli()}
		s.emit("message_start", messageEvent{msg})
		s.conv.appendMessage(msg)
		s.emit("message_end", messageEvent{msg})
		results = append(results, msg)
		if skip == "" {
			switch {
			case run.ctx.Err() != nil:
				skip = "Operation aborted"
			case s.steeringQueued():
				skip = "Skipped due to queued user message."
			}
		}
	}
	return results
}

// runTool decodes one tool call and runs it (runDecoded), its images
// made to fit the current model's profile.
func (s *session) runTool(ctx context.Context, block contentBlock) (toolResult, bool) {
	call, err := s.decodeToolCall(block.Name, block.Arguments)
	s.mu.Lock()
	lim := s.model.imageLimits()
	s.mu.Unlock()
	res, isError, _ := s.runDecoded(ctx, block, call, err, lim)
	return res, isError
}

// runDecoded runs a call decoded once (err: why it did not decode, its
// result): it opens what the call changes (write, edit), asks for
// approval when its tool is behind --confirm (showing what the decoded
// call will do to what it opened), and runs that same decoded call,
// streaming its updates. A panic in a tool becomes its error result.
// ran is false for a call that never reached its tool: one that did not
// decode (no such tool, arguments it does not take) or was denied.
//
// What preparing a call finds out about its file (that it is missing, a
// folder, unreadable; where an edit's text is and is not) reaches the
// model only when the call is not behind the gate, or the user allows
// it: a call that cannot be done is asked about all the same, saying so
// and why, and denied it is "Denied by user" like any other, so that a
// model cannot learn a file it may not read (a key in models.json) from
// how its denied edits fail.
func (s *session) runDecoded(ctx context.Context, block contentBlock, call toolCall, err error, lim imageLimits) (res toolResult, isError, ran bool) {
	defer func() { // from prepare to the result: the approval and describe too
		if p := recover(); p != nil {
			fmt.Fprintf(s.stderr, "rpi: panic in tool %s: %v\n%s", block.Name, p, debug.Stack())
			res, isError, ran = textResult(fmt.Sprintf("Internal error in tool %s: %v", block.Name, p)), true, true
		}
	}()
	if err != nil {
		return textResult(err.Error()), true, false
	}
	gated := confirms(s.confirmTools(), block.Name, call)
	var failed error // why the call cannot be done, found by preparing it
	if p, ok := call.(preparer); ok {
		defer p.release()
		failed = p.prepare(ctx, s)
	}
	switch {
	case failed != nil && ctx.Err() != nil:
		return textResult("Operation aborted"), true, true
	case failed != nil && !gated:
		return textResult(failed.Error()), true, true // found as the tool began its work
	}
	checkCallout("the ui's approval")
	if gated && !s.ui.approve(ctx, approval{toolCallID: block.ID, toolName: block.Name, args: block.Arguments, call: call,
		failed: failed, timeout: s.set.confirmTimeout}) {
		return textResult("Denied by user"), true, false
	}
	if failed != nil {
		return textResult(failed.Error()), true, true
	}
	s.status("running " + block.Name)
	update := func(partial toolResult) {
		for i, b := range partial.Content {
			if b.Type == "text" {
				partial.Content[i].Text = s.set.secrets.redact(b.Text)
			}
		}
		s.postEvent("tool_execution_update", toolExecUpdate{block.ID, block.Name, block.Arguments, partial})
	}
	res, err = call.run(ctx, s, toolRun{id: block.ID, update: update, images: lim})
	if failure := (*toolFailure)(nil); errors.As(err, &failure) {
		res, isError = failure.result, true
	} else if err != nil {
		res.Content = textBlocks(err.Error())
		isError = true
	}
	if !s.set.keepImageSize {
		res.Content = fitResultImages(res.Content, lim) // an MCP tool's screenshot, say: scaled once, as it enters the conversation
	}
	// A key rpi holds never goes back to the model or out to the client,
	// whatever a tool came across.
	for i, b := range res.Content {
		if b.Type == "text" {
			res.Content[i].Text = s.set.secrets.redact(b.Text)
		}
	}
	if d, ok := res.Details.(editDetails); ok { // the file's lines around each change
		d.Diff, d.Patch = s.set.secrets.redact(d.Diff), s.set.secrets.redact(d.Patch)
		res.Details = d
	}
	if res.shell != nil {
		res.shell.output = s.set.secrets.redact(res.shell.output)
	}
	return res, isError, true
}

// lastAssistantText is the text of the last assistant answer that has any.
func lastAssistantText(messages []any) *string {
	for i := len(messages) - 1; i >= 0; i-- {
		if m, ok := messages[i].(*assistantMessage); ok {
			if text := strings.TrimSpace(m.text()); text != "" {
				return &text
			}
			if m.StopReason != "aborted" {
				return nil
			}
		}
	}
	return nil
}
