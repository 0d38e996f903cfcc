package main

// Loops (docs/todos-and-loops.md): prompts rpi runs again on a schedule. A fire starts a normal
// agent run whose first message is a custom message naming the loop; while
// the agent is busy a fire waits in a queue (or is skipped when that loop's
// run is already running or waiting). Durable loops are saved beside the
// session file and come back with it. Every timer is the host's clock. A
// change of a durable loop is made in memory and its file written after,
// by the loops writer (writeLoops) in the background: the command loop
// never waits for the disk. (The locks' order: docs/architecture.md.)

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	maxLoops       = 50
	loopLifetime   = 7 * 24 * time.Hour
	maxLoopSeconds = 1 << 32 // about 136 years; longer intervals are refused
	loopsVersion   = 1       // of the loops file
	maxLoopsFile   = 4 << 20
	// maxLoopPrompt bounds a loop's prompt as the loops file holds it
	// (JSON: a quote, a backslash or a control character takes two bytes
	// or six): maxLoops of them, with their other fields, stay under
	// maxLoopsFile, which is all a restore reads.
	maxLoopPrompt = 80_000
	// maxLoopRuns bounds a restored loop's runCount: the largest whole
	// number a JSON client reads exactly (2^53-1), far past any count
	// of fires in a loop's 7 days.
	maxLoopRuns = 1<<53 - 1
)

// errLoopPromptTooLong refuses a prompt past maxLoopPrompt. Its numbers
// are written out, as errTooManyLoops's; TestLoopPromptLimit checks them.
var errLoopPromptTooLong = errors.New("loop prompt too long: at most 80000 bytes as saved in the loops file (50 loops must fit in its 4 MiB)")

// loopPromptFits reports whether prompt, saved in the loops file, takes
// at most maxLoopPrompt bytes.
func loopPromptFits(prompt string) bool {
	if len(prompt) > maxLoopPrompt {
		return false // no shorter once escaped: not encoded at all
	}
	saved, err := marshalJSON(prompt)
	return err == nil && len(saved)-2 <= maxLoopPrompt
}

// loopTask is one loop (LoopTask on the wire).
type loopTask struct {
	ID           string
	IntervalSecs int64
	Prompt       string
	Durable      bool
	CreatedAt    time.Time
	LastFiredAt  time.Time // zero until the first fire
	ExpiresAt    time.Time
	RunCount     int64

	notBefore time.Time // a restored loop's first fire comes no earlier (not saved)
}

// loopTaskJSON is a LoopTask as answers, events and the loops file show
// it; times are RFC 3339 in UTC with milliseconds.
type loopTaskJSON struct {
	ID           string  `json:"id"`
	IntervalSecs int64   `json:"intervalSecs"`
	Prompt       string  `json:"prompt"`
	Durable      bool    `json:"durable"`
	CreatedAt    string  `json:"createdAt"`
	LastFiredAt  *string `json:"lastFiredAt"`
	ExpiresAt    string  `json:"expiresAt"`
	RunCount     int64   `json:"runCount"`
}

// asJSON is the task as the loop records give it.
func (t *loopTask) asJSON() loopTaskJSON {
	w := loopTaskJSON{t.ID, t.IntervalSecs, t.Prompt, t.Durable, timestamp(t.CreatedAt), nil, timestamp(t.ExpiresAt), t.RunCount}
	if !t.LastFiredAt.IsZero() {
		last := timestamp(t.LastFiredAt)
		w.LastFiredAt = &last
	}
	return w
}

// nextFire is one interval after the last fire (or the creation), and
// not before notBefore.
func (t *loopTask) nextFire() time.Time {
	base := t.CreatedAt
	if !t.LastFiredAt.IsZero() {
		base = t.LastFiredAt
	}
	next := base.Add(time.Duration(t.IntervalSecs) * time.Second)
	if next.Before(t.notBefore) {
		return t.notBefore
	}
	return next
}

func (t *loopTask) expired(now time.Time) bool { return !now.Before(t.ExpiresAt) }

// schedule says the interval in words: "every 3 seconds", "every 1 day".
func (t *loopTask) schedule() string {
	n, unit := t.IntervalSecs, "second"
	for _, u := range []struct {
		secs int64
		name string
	}{{86400, "day"}, {3600, "hour"}, {60, "minute"}} {
		if n%u.secs == 0 {
			n, unit = n/u.secs, u.name
			break
		}
	}
	if n != 1 {
		unit += "s"
	}
	return fmt.Sprintf("every %d %s", n, unit)
}

// loopScheduler holds the session's loops and their timer.
type loopScheduler struct {
	fileMu mutex[loopsFileMu] // held by the loops writer while it writes

	mu        mutex[loopsMu] // guards the fields below; taken after s.mu
	tasks     []*loopTask    // in creation order
	restoring []*loopTask    // read from the file of a session just opened, announced after its session_started
	invalid   int            // loops of that file that were not valid, dropped
	path      string         // the loops file; "" keeps durable loops in memory only (--no-session)
	queue     []*loopFire    // fires waiting for the agent, oldest first
	active    *loopFire      // the fire whose run is in progress
	stopTimer func() bool    // the timer for the next deadline, when one is set
	closed    bool           // shut down
	writes    []loopsWrite   // loops files to write, oldest first (saveLoopsLocked)
	writing   bool           // the loops writer is running
}

// loopsWrite is a loops file as it must be written: the durable loops of
// the session whose file it is, when the change was made.
type loopsWrite struct {
	path  string
	tasks []loopTaskJSON
}

// loopFire is one fire of a loop that waits for the agent or runs.
type loopFire struct {
	task   *loopTask
	next   time.Time // the loop's next fire after this one
	run    *agentRun
	report bool // loop_finished or loop_failed when its run settles
}

// ---- Events ----

type loopCreated struct {
	Task     loopTaskJSON `json:"task"`
	Restored bool         `json:"restored"`
}

type loopUpdated struct {
	Task loopTaskJSON `json:"task"`
}

type loopQueued struct {
	TaskID     string `json:"task_id"`
	Position   int    `json:"position"`
	NextFireAt string `json:"next_fire_at"`
}

type loopFired struct {
	TaskID     string `json:"task_id"`
	FiredAt    string `json:"fired_at"`
	NextFireAt string `json:"next_fire_at"`
}

type loopSkipped struct {
	TaskID     string `json:"task_id"`
	Reason     string `json:"reason"`
	NextFireAt string `json:"next_fire_at"`
}

type loopFinished struct {
	TaskID     string  `json:"task_id"`
	FinishedAt string  `json:"finished_at"`
	NextFireAt *string `json:"next_fire_at"` // null once the loop is gone
}

type loopFailed struct {
	TaskID     string  `json:"task_id"`
	Message    string  `json:"message"`
	NextFireAt *string `json:"next_fire_at"`
}

type loopRemoved struct {
	TaskID string `json:"task_id"`
	Reason string `json:"reason"`
}

// ---- Commands ----

// addLoop checks and adds a loop (the cap, the prompt, the interval, in
// the original's order); a durable one is saved by the loops writer.
func (s *session) addLoop(rawInterval any, prompt string, fireNow, durable bool) (loopTaskJSON, error) {
	l := s.loops
	if l.count() >= maxLoops {
		return loopTaskJSON{}, errTooManyLoops
	}
	if prompt = strings.TrimSpace(prompt); prompt == "" {
		return loopTaskJSON{}, errors.New("loop prompt cannot be empty")
	}
	if !loopPromptFits(prompt) {
		return loopTaskJSON{}, errLoopPromptTooLong
	}
	secs, err := parseLoopInterval(rawInterval)
	if err != nil {
		return loopTaskJSON{}, err
	}
	now := s.env.clock.Now()
	t := &loopTask{ID: newLoopID(), IntervalSecs: secs, Prompt: prompt, Durable: durable, CreatedAt: now,
		ExpiresAt: now.Add(loopLifetime)}
	if fireNow {
		t.CreatedAt = now.Add(-time.Duration(secs) * time.Second)
	}
	defer s.deliver() // loop_created, once l.mu is let go of
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.tasks)+len(l.restoring) >= maxLoops { // another create came in between (checked first: the original's order of errors)
		return loopTaskJSON{}, errTooManyLoops
	}
	l.tasks = append(l.tasks, t)
	s.postEvent("loop_created", loopCreated{t.asJSON(), false})
	if durable {
		s.saveLoopsLocked()
	}
	return t.asJSON(), nil
}

// editLoop changes the loop named id with commit (which must check that
// the loop is still there); a durable loop's file is written after, by
// the loops writer.
func (s *session) editLoop(id string, commit func(t *loopTask) (any, error)) (any, error) {
	l := s.loops
	l.mu.Lock()
	t := l.findLocked(id)
	l.mu.Unlock()
	if t == nil {
		return nil, noLoop(id)
	}
	data, err := commit(t)
	s.deliver() // what commit posted under its locks
	if err == nil && t.Durable {
		l.mu.Lock()
		s.saveLoopsLocked()
		l.mu.Unlock()
	}
	return data, err
}

// noLoopError is the failure to find a loop: loop_update fails with it;
// loop_delete and loop_cancel answer false.
type noLoopError struct{ id string }

func (e *noLoopError) Error() string { return "no scheduled loop with id " + e.id }

func noLoop(id string) error { return &noLoopError{id} }

// ---- Scheduling ----

// fireDueLoops fires every loop that is due and removes every one that
// has expired, then sets the timer for the next deadline. It is the
// timer's function, and runs at once after a create and a restore.
func (s *session) fireDueLoops() {
	l := s.loops
	save := false
	s.mu.Lock()
	l.mu.Lock()
	now := s.env.clock.Now()
	for !l.closed {
		i := slices.IndexFunc(l.tasks, func(t *loopTask) bool { return t.expired(now) || !t.nextFire().After(now) })
		if i < 0 {
			break
		}
		t := l.tasks[i]
		save = save || t.Durable
		if t.expired(now) {
			s.dropLoopLocked(t, "expired", false)
			continue
		}
		t.LastFiredAt, t.RunCount = now, t.RunCount+1
		s.fireLoopLocked(t)
	}
	s.armLoopsLocked()
	if save {
		s.saveLoopsLocked()
	}
	l.mu.Unlock()
	s.unlock()
}

// armLoopsLocked sets the timer for the earliest next fire or expiry, at
// that time (not after a delay from a now read earlier: a clock moved
// meanwhile must not move the fire).
func (s *session) armLoopsLocked() {
	l := s.loops
	if l.stopTimer != nil {
		l.stopTimer()
		l.stopTimer = nil
	}
	if l.closed || len(l.tasks) == 0 {
		return
	}
	next := l.tasks[0].ExpiresAt
	for _, t := range l.tasks {
		next = earliest(next, t.ExpiresAt, t.nextFire())
	}
	l.stopTimer = s.env.clock.AfterFuncAt(next, guarded(s.stderr, "the loop timer", s.fireDueLoops))
}

func earliest(times ...time.Time) time.Time {
	return slices.MinFunc(times, func(a, b time.Time) int { return a.Compare(b) })
}

// fireLoopLocked handles one fire of t: skipped when its run is already
// running or waiting, else queued and started as soon as the agent is
// free (loop_queued says when it has to wait).
func (s *session) fireLoopLocked(t *loopTask) {
	l := s.loops
	next := timestamp(t.nextFire())
	switch {
	case l.active != nil && l.active.task == t:
		s.postEvent("loop_skipped", loopSkipped{t.ID, "already_running", next})
	case slices.ContainsFunc(l.queue, func(f *loopFire) bool { return f.task == t }):
		s.postEvent("loop_skipped", loopSkipped{t.ID, "already_queued", next})
	default:
		f := &loopFire{task: t, next: t.nextFire(), report: true}
		l.queue = append(l.queue, f)
		s.startQueuedLoopLocked()
		if i := slices.Index(l.queue, f); i >= 0 {
			s.postEvent("loop_queued", loopQueued{t.ID, i + 1, next})
		}
	}
}

// startQueuedLoopLocked starts the oldest waiting fire when the agent is
// free. It runs after each fire and whenever a run settles; a fire that
// waited through a session change that failed starts at the next of
// those.
func (s *session) startQueuedLoopLocked() {
	l := s.loops
	for !l.closed && l.active == nil && len(l.queue) > 0 {
		f := l.queue[0]
		run, err := s.tryStartRunLocked(running, false)
		switch {
		case err == errNoModel:
			l.queue = l.queue[1:]
			s.postEvent("loop_failed", loopFailed{f.task.ID, noModelMessage, l.nextFireLocked(f.task)})
			continue
		case err != nil:
			return // busy, a session change holds runs, or another session runs: the fire waits
		}
		l.queue = l.queue[1:]
		now := s.env.clock.Now()
		f.run = run
		l.active = f
		s.postEvent("loop_fired", loopFired{f.task.ID, timestamp(now), timestamp(f.next)})
		msg := loopMessage(f.task, now)
		s.goBackground(func() { s.runAgent(run, []runInput{msg}, fired) })
		return
	}
}

// startWaitingLoops starts a fire that waited while another session of
// the host was running, or while a session change or a compaction that
// then failed held runs.
func (s *session) startWaitingLoops() {
	s.mu.Lock()
	defer s.unlock()
	s.loops.mu.Lock()
	defer s.loops.mu.Unlock()
	s.startQueuedLoopLocked()
}

// loopsSettledLocked is called by settle (s.mu held) once a run chain has
// settled: a loop's run reports how it ended, and a waiting fire starts.
// A run the user aborted reports nothing (no loop_finished, no
// loop_failed): an abort is no failure of the loop, which stays scheduled.
func (s *session) loopsSettledLocked(run *agentRun) {
	l := s.loops
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.active; f != nil && f.run == run {
		l.active = nil
		run.mu.Lock()
		failure := run.failure
		run.mu.Unlock()
		switch {
		case !f.report, run.ctx.Err() != nil:
		case failure != "":
			s.postEvent("loop_failed", loopFailed{f.task.ID, failure, l.nextFireLocked(f.task)})
		default:
			s.postEvent("loop_finished", loopFinished{f.task.ID, timestamp(s.env.clock.Now()), l.nextFireLocked(f.task)})
		}
	}
	s.startQueuedLoopLocked()
}

// loopMessage is a fire's first message: pi's custom message, shown to
// the client with the loop's name and joining the model's context as the
// user's text.
func loopMessage(t *loopTask, now time.Time) rawMessage {
	m, _ := marshalJSON(struct {
		Role       string `json:"role"`
		CustomType string `json:"customType"`
		Content    string `json:"content"`
		Display    bool   `json:"display"`
		Timestamp  int64  `json:"timestamp"`
	}{"custom", "Loop " + t.ID + " · " + t.schedule(), t.Prompt, true, now.UnixMilli()})
	return rawMessage(m)
}

func (rawMessage) runInput() {}

// nextFireLocked is t's next fire, or null once t is gone.
// count is how many loops the session has, restored ones not yet
// announced included: maxLoops bounds it.
func (l *loopScheduler) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.tasks) + len(l.restoring)
}

// errTooManyLoops refuses a loop past maxLoops. The number is written
// out, so that the text is a constant and package init builds nothing;
// TestTooManyLoopsText checks that it is maxLoops.
var errTooManyLoops = errors.New("maximum of 50 scheduled tasks reached")

func (l *loopScheduler) nextFireLocked(t *loopTask) *string {
	if !slices.Contains(l.tasks, t) {
		return nil
	}
	next := timestamp(t.nextFire())
	return &next
}

func (l *loopScheduler) findLocked(id string) *loopTask {
	for _, t := range l.tasks {
		if t.ID == id {
			return t
		}
	}
	return nil
}

// dropLoopLocked removes t and its waiting fire, posts loop_removed, and
// stops reporting a run of it in progress; with abort it also aborts that
// run and returns it — after loop_removed is posted, so that the events
// of the run's end come after it.
func (s *session) dropLoopLocked(t *loopTask, reason string, abort bool) (aborted *agentRun) {
	l := s.loops
	l.tasks = slices.DeleteFunc(l.tasks, func(task *loopTask) bool { return task == t })
	l.queue = slices.DeleteFunc(l.queue, func(f *loopFire) bool { return f.task == t })
	s.postEvent("loop_removed", loopRemoved{t.ID, reason})
	if f := l.active; f != nil && f.task == t {
		f.report = false
		if abort && s.activeRun == f.run {
			f.run.cancel()
			s.phase = stopping
			aborted = f.run
		}
	}
	return aborted
}

// ---- Sessions and shutdown ----

// loopsRead is what a session's loops file held, read before the session
// becomes current (readLoops): moveLoops reads no file.
type loopsRead struct {
	path    string // the loops file ("" for an in-memory session)
	tasks   []*loopTask
	invalid int
	err     error
}

// readLoops reads the durable loops saved beside the session file at
// sessionPath.
func readLoops(sessionPath string) loopsRead {
	path := loopsFileOf(sessionPath)
	tasks, invalid, err := readLoopsFile(path)
	return loopsRead{path, tasks, invalid, err}
}

// moveLoops follows a session change (before its answer): the loops of
// the session left are removed (session_changed; their file keeps the
// durable ones), and those read from the new session's file wait to be
// announced after its session_started (announceLoops). It reads no
// file: a new session has no loops file yet, and another one's was read
// before (readLoops). A change to the session's own file again takes its
// durable loops as they are now, not as read: a loop deleted or changed
// while the file was read (a loop_delete sent behind the change) would
// otherwise come back as it was. The own file is known by what it is,
// whatever the spelling of the path it was read by (a symlinked folder,
// "./"): sameSessionPath, looked at before the locks are taken.
func (s *session) moveLoops(read loopsRead) {
	l := s.loops
	if read.err != nil {
		s.tell(uiRequest{Method: "notify", NotifyType: "warning", Message: fmt.Sprintf("Cannot restore the loops in %s: %v", read.path, read.err)})
	}
	l.mu.Lock()
	current := l.path // looked at again under the locks: changed meanwhile, the file is taken as read
	l.mu.Unlock()
	own := read.path != "" && current != "" && (read.path == current || sameSessionPath(read.path, current))
	s.mu.Lock()
	l.mu.Lock()
	restoring := read.tasks
	if read.err == nil && own && l.path == current {
		restoring = nil
		for _, t := range slices.Concat(l.tasks, l.restoring) {
			if saved := loopFromFile(t.asJSON()); t.Durable && saved != nil {
				restoring = append(restoring, saved)
			}
		}
	}
	for _, t := range slices.Clone(l.tasks) {
		s.dropLoopLocked(t, "session_changed", false)
	}
	if l.active != nil {
		l.active.report = false
	}
	l.path, l.restoring, l.invalid = read.path, restoring, read.invalid
	s.armLoopsLocked()
	l.mu.Unlock()
	s.unlock()
}

// announceLoops writes loop_created {restored:true} for each loop read
// from the session's file, within the limits loop_create has: at most
// maxLoops, each id once, expiring at most loopLifetime from now (the
// file then keeps that); those past their time get loop_removed
// {expired} and count in maxLoops (so a file of many announces no more
// than that), the others are dropped. A restored loop fires no earlier
// than loopRestoreGrace from now, so a client sees it, and can delete
// it, before it runs anything: a session file someone else wrote cannot
// start prompts at once. A notify says how many came back or were
// dropped. It follows session_started; the file is rewritten to hold
// what was kept.
func (s *session) announceLoops() {
	l := s.loops
	save := false
	s.mu.Lock()
	l.mu.Lock()
	now := s.env.clock.Now()
	ids := map[string]bool{}
	for _, t := range l.tasks {
		ids[t.ID] = true
	}
	restored, expired, repeated, over := 0, 0, 0, 0
	for _, t := range l.restoring {
		switch {
		case ids[t.ID]:
			repeated++
			continue
		case len(l.tasks)+expired >= maxLoops:
			over++
			continue
		case t.expired(now):
			s.postEvent("loop_removed", loopRemoved{t.ID, "expired"})
			ids[t.ID] = true
			expired++
			continue
		}
		if latest := now.Add(loopLifetime); t.ExpiresAt.After(latest) {
			t.ExpiresAt, save = latest, true // kept in the file: no restore gives it 7 days more
		}
		t.notBefore = now.Add(loopRestoreGrace)
		ids[t.ID] = true
		l.tasks = append(l.tasks, t)
		s.postEvent("loop_created", loopCreated{t.asJSON(), true})
		restored++
	}
	save = save || expired+repeated+over+l.invalid > 0
	notice := restoreNotice(l.path, restored, expired, repeated, over, l.invalid)
	l.restoring, l.invalid = nil, 0
	if save {
		s.saveLoopsLocked()
	}
	if notice != "" { // in order with the loops' events: before a command's answer that follows them
		s.postTell(uiRequest{Method: "notify", NotifyType: "warning", Message: notice})
	}
	l.mu.Unlock()
	s.unlock()
	s.fireDueLoops()
}

// loopRestoreGrace is how long a restored loop waits at least before it
// fires: the client has seen loop_created and the notify by then.
const loopRestoreGrace = time.Minute

// restoreNotice says what a restore did, or "" when the file held nothing.
func restoreNotice(path string, restored, expired, repeated, over, invalid int) string {
	if restored+expired+repeated+over+invalid == 0 {
		return ""
	}
	loops := func(n int) string {
		if n == 1 {
			return "1 scheduled loop"
		}
		return fmt.Sprintf("%d scheduled loops", n)
	}
	text := "Restored " + loops(restored) + " from " + path
	if restored > 0 {
		text += ": none fires before a minute from now (loop_list shows them, loop_delete removes one)"
	}
	text += "."
	var dropped []string
	for _, d := range []struct {
		n    int
		what string
	}{{over, fmt.Sprintf("past the limit of %d", maxLoops)}, {repeated, "with an id used before"}, {invalid, "not valid"}} {
		if d.n > 0 {
			dropped = append(dropped, fmt.Sprintf("%d %s", d.n, d.what))
		}
	}
	if len(dropped) > 0 {
		text += " Dropped " + loops(over+repeated+invalid) + ": " + strings.Join(dropped, ", ") + "."
	}
	if expired > 0 {
		text += fmt.Sprintf(" %d had expired.", expired)
	}
	return text
}

// startLoops restores the startup session's durable loops.
func (s *session) startLoops() {
	s.moveLoops(readLoops(s.conv.info().path))
	s.announceLoops()
}

// stopLoops ends every loop at shutdown (loop_removed {shutdown}; the
// file keeps the durable ones) and aborts a loop's run in progress.
func (s *session) stopLoops() {
	l := s.loops
	s.mu.Lock()
	l.mu.Lock()
	for _, t := range slices.Clone(l.tasks) {
		s.dropLoopLocked(t, "shutdown", true)
	}
	l.closed, l.restoring = true, nil
	s.armLoopsLocked()
	l.mu.Unlock()
	s.unlock()
}

// ---- The loops file ----

// loopsFile is the content of <session file>.loops.json.
type loopsFile struct {
	Version int            `json:"version"`
	Tasks   []loopTaskJSON `json:"tasks"`
}

// saveLoopsLocked has the durable loops, as they are now, written to the
// session's loops file by the loops writer (writeLoops), in the
// background; l.mu is held. A write that fails is told to the client.
func (s *session) saveLoopsLocked() {
	l := s.loops
	if l.path == "" {
		return
	}
	tasks := []loopTaskJSON{}
	for _, t := range slices.Concat(l.tasks, l.restoring) {
		if t.Durable {
			tasks = append(tasks, t.asJSON())
		}
	}
	l.writes = append(l.writes, loopsWrite{l.path, tasks})
	if !l.writing {
		l.writing = true
		s.goBackground(s.writeLoops)
	}
}

// writeLoops is the loops writer: it writes the loops files saveLoopsLocked
// queued, in order (only the last of those in a row for one file), until
// none is left.
func (s *session) writeLoops() {
	l := s.loops
	defer s.deliver() // a failed write's notify, once l.fileMu is let go of
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	ended := false
	defer func() { // a panic (guarded logs it) ends the writes it was in only
		if !ended {
			l.mu.Lock()
			l.writing = false
			if len(l.writes) > 0 { // queued meanwhile: no writer was started for them
				l.writing = true
				s.goBackground(s.writeLoops)
			}
			l.mu.Unlock()
		}
	}()
	s.writeQueuedLoopsLocked(true)
	ended = true
}

// readLoopsNow reads a session's loops file for a session change, once
// the writes queued before are done (a loop just deleted is not read
// back from the file its deletion has not yet reached); in the
// background, as the loops writer is.
func (s *session) readLoopsNow(sessionPath string) (read loopsRead) {
	s.afterLoopsWrites(func() { read = readLoops(sessionPath) })
	return read
}

// afterLoopsWrites runs f once the loops files queued are written, and
// none is written while it runs.
func (s *session) afterLoopsWrites(f func()) {
	l := s.loops
	defer s.deliver() // a failed write's notify, once l.fileMu is let go of
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	s.writeQueuedLoopsLocked(false)
	f()
}

// writeQueuedLoopsLocked writes the queued loops files until none is
// left; l.fileMu is held. The loops writer (last) is then done.
func (s *session) writeQueuedLoopsLocked(last bool) {
	l := s.loops
	for {
		l.mu.Lock()
		writes := l.writes
		l.writes = nil
		if len(writes) == 0 {
			if last {
				l.writing = false
			}
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		for i, w := range writes {
			if i+1 < len(writes) && writes[i+1].path == w.path {
				continue // a later state of the same file follows
			}
			if err := writeLoopsFile(w.path, w.tasks); err != nil {
				s.postTell(uiRequest{Method: "notify", NotifyType: "warning",
					Message: fmt.Sprintf("failed to persist loop scheduler state: %v", unwrapPathError(err))})
			}
		}
	}
}

// writeLoopsFile replaces the file with tasks (durable loops),
// atomically (a temp file renamed over it), or removes it when there are
// none. Only a regular file is ever replaced or removed.
func writeLoopsFile(path string, tasks []loopTaskJSON) error {
	file := loopsFile{Version: loopsVersion, Tasks: tasks}
	info, err := os.Lstat(path)
	switch {
	case err == nil && !info.Mode().IsRegular():
		return &errNotRegular{path, fileKind(info.Mode())}
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return err
	case len(file.Tasks) == 0 && err == nil:
		return os.Remove(path)
	case len(file.Tasks) == 0:
		return nil
	}
	data, err := marshalJSON(file)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return writeFileWhole(path, append(data, '\n'), 0o600)
}

// readLoopsFile reads the durable loops saved at path (none when there is
// no file). A loop that loop_create could not have made (an id that is
// not 12 hex digits, an interval out of range, an empty prompt or one
// too long, a time that is not one, a runCount below 0 or past
// maxLoopRuns) is left out and counted in invalid; a file that is not a
// loops file is an error, and so is a symbolic link, which
// writeLoopsFile would never replace or remove.
func readLoopsFile(path string) (tasks []*loopTask, invalid int, err error) {
	if path == "" {
		return nil, 0, nil
	}
	if info, err := os.Lstat(path); err == nil && info.Mode()&os.ModeSymlink != 0 {
		return nil, 0, &errNotRegular{path, fileKind(info.Mode())}
	}
	f, err := openRegular(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, unwrapPathError(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxLoopsFile+1))
	if err != nil {
		return nil, 0, err
	}
	if len(data) > maxLoopsFile {
		return nil, 0, fmt.Errorf("larger than %d bytes", maxLoopsFile)
	}
	var file struct {
		Version int          `json:"version"`
		Tasks   loopsEntries `json:"tasks"`
	}
	if err := unmarshalExact(data, &file); err != nil {
		return nil, 0, fmt.Errorf("not a loops file: %v", err)
	}
	if file.Version != loopsVersion {
		return nil, 0, fmt.Errorf("unsupported loop state version %d; expected %d", file.Version, loopsVersion)
	}
	return file.Tasks.tasks, file.Tasks.invalid, nil
}

// loopsEntries is a loops file's tasks as they are read: each checked
// as it is decoded, and kept only when it is a loop (readLoopsFile), so
// that a file of many entries that are none costs no more memory than
// the file.
type loopsEntries struct {
	tasks   []*loopTask
	invalid int
}

func (e *loopsEntries) UnmarshalJSON(data []byte) error {
	*e = loopsEntries{} // tasks given twice: the last counts
	if string(data) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(exactData(data, &[]loopTaskJSON{})))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return errors.New("tasks must be an array")
	}
	var w loopTaskJSON
	for dec.More() {
		w = loopTaskJSON{}
		if err := dec.Decode(&w); err != nil {
			return err
		}
		if t := loopFromFile(w); t != nil {
			e.tasks = append(e.tasks, t)
		} else {
			e.invalid++
		}
	}
	return nil
}

// loopFromFile is the loop w of a loops file, or nil when loop_create
// could not have made it.
func loopFromFile(w loopTaskJSON) *loopTask {
	prompt := strings.TrimSpace(w.Prompt)
	if !validLoopID(w.ID) || w.IntervalSecs < 1 || w.IntervalSecs > maxLoopSeconds || prompt == "" || !loopPromptFits(prompt) ||
		w.RunCount < 0 || w.RunCount > maxLoopRuns {
		return nil
	}
	t := &loopTask{ID: w.ID, IntervalSecs: w.IntervalSecs, Prompt: prompt, Durable: true, RunCount: w.RunCount}
	for _, at := range []struct {
		text *string
		into *time.Time
	}{{&w.CreatedAt, &t.CreatedAt}, {w.LastFiredAt, &t.LastFiredAt}, {&w.ExpiresAt, &t.ExpiresAt}} {
		if at.text != nil {
			var err error
			if *at.into, err = time.Parse(time.RFC3339Nano, *at.text); err != nil {
				return nil
			}
		}
	}
	return t
}

// ---- Intervals and ids ----

// parseLoopInterval turns an interval into whole seconds: a positive
// integer, bare or with s, m, h or d; or a positive whole JSON number.
func parseLoopInterval(v any) (int64, error) {
	fail := func(format string, args ...any) (int64, error) {
		return 0, fmt.Errorf("invalid interval: "+format, args...)
	}
	if f, ok := v.(float64); ok {
		switch {
		case f != math.Trunc(f):
			return fail("interval must be a whole number of seconds")
		case f <= 0:
			return fail("interval value must be greater than 0")
		case f > maxLoopSeconds:
			return fail("interval too large: %s", jsNumber(f))
		}
		return int64(f), nil
	}
	text := strings.TrimSpace(v.(string))
	if text == "" {
		return fail("interval cannot be empty")
	}
	digits, unit := text, int64(1)
	if last := text[len(text)-1]; last < '0' || last > '9' {
		digits = text[:len(text)-1]
		if !allDigits(digits) {
			return fail("invalid interval format: %q (expected e.g. 300, 5m, 2h, 1d)", text)
		}
		if unit = map[byte]int64{'s': 1, 'm': 60, 'h': 3600, 'd': 86400}[last]; unit == 0 {
			return fail("invalid interval suffix: %q (expected s, m, h, or d)", text[len(text)-1:])
		}
	}
	if !allDigits(digits) {
		return fail("invalid interval format: %q (expected e.g. 300, 5m, 2h, 1d)", text)
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	switch {
	case err != nil || n > maxLoopSeconds/uint64(unit):
		return fail("interval too large: %q", text)
	case n == 0:
		return fail("interval value must be greater than 0")
	}
	return int64(n) * unit, nil
}

// jsNumber writes a number as JavaScript does: 8589934592, not
// 8.589934592e+09 (exponents only from 1e21).
func jsNumber(f float64) string {
	if math.Abs(f) < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func allDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// validLoopID reports whether id is one newLoopID could make.
func validLoopID(id string) bool {
	_, err := hex.DecodeString(id)
	return len(id) == 12 && err == nil && strings.ToLower(id) == id
}

// newLoopID is 12 random hex digits.
func newLoopID() string {
	var b [6]byte
	randomID(b[:])
	return hex.EncodeToString(b[:])
}
