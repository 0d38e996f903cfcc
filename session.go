package main

// The session: one conversation and the agent that works on it, in one
// working directory — its settings, context files, templates and skills,
// the conversation store and its session file, the loops, the todos, the
// agent's state and run — and what a front end gives it: the sink its
// events go to, the ui it asks its user through, the files its file tools
// read and write (fileEnv), and where the model's bash may run instead of
// rpi's own shell (commandRunner). The rpc front end (commands.go) serves
// one; the host (host.go) may hold several, one running at a time.

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// session is one conversation and its agent. What never changes after it
// opens is in set; each part that changes has its own owner and lock.
// The lock order of the whole program is in docs/architecture.md.
type session struct {
	*host
	set   *settings // fixed when the session opens; read without locks
	sinks sinks     // where its events go: one sink per front end attached
	ui    ui        // how it asks its user: the front end's
	files fileEnv   // where its file tools read and write: the disk, unless the front end gives another
	// where the model's bash runs when the front end gives a runner and it
	// takes the call; nil: rpi's own shell runs every call
	commands commandRunner

	// ctx is cancelled when the session closes, or rpi shuts down: its
	// runs, commands and processes watch it.
	ctx    context.Context
	cancel context.CancelFunc

	conv  *conversation  // the messages and the session file (own locks)
	loops *loopScheduler // scheduled prompts (own locks, loops.go)
	dir   string         // where new session files go; "" beside the current one (or in memory)

	closing  atomic.Bool  // close has begun: the host's registry finds it no more
	mcp      mcpServers   // its MCP servers and their tools (own lock, mcp.go)
	callouts outbox       // the calls to its front end not yet made
	userBash userBashRuns // the user's own shell commands running (rpc's bash)

	noticesMu mutex[noticesMu] // guards notices
	notices   []string         // the warnings of its opening, for each front end that shows it
	live      atomic.Bool      // the front end has taken the notices: warnings go to the ui

	// resourcesLater: set's resources wait for loadLaterResources, whose
	// notices go in after set's own (the settings') and before the
	// session file's, as if read when the session opened.
	resourcesLater bool

	// startModel is the model --model names (nil when it names none),
	// startThinking the level of its ":level" suffix: what every start of
	// a conversation (startState) goes by, as pi's do.
	startModel    *model
	startThinking string

	mu             mutex[sessionMu] // guards the agent's state below
	model          *model           // the model the next call uses; nil when none is usable
	thinkingLevel  string
	steeringMode   string
	followUpMode   string
	autoCompaction bool
	autoRetry      bool
	recoveryTried  bool          // an overflow or cut-short answer was compacted away and run again (setRecoveryTried)
	confirm        []string      // the tools behind the approval gate
	phase          runPhase      // what the agent is doing (agent.go)
	activeRun      *agentRun     // the run chain in progress; nil when idle
	changing       int           // session changes waiting for the agent to stop; no run starts meanwhile
	lastChange     chan struct{} // closed once the last session change asked for is done (changeSession)
	steering       []*userMessage
	followUp       []*userMessage
	starting       []queuedMessage // taken from a queue, their message_start not yet out: still queued to a client, as in pi 1.6
	todos          []todoPhase     // the plan (todos.go): replaced whole on a change, never changed in place
	warm           *cacheWarm      // the prompt cache warming under way (cachewarm.go); nil when none
	warmEnded      bool            // rpi is ending: no warming starts (endCacheWarm)
}

// An eventSink takes every event of one session, in order, one at a time,
// never while the core holds a lock of its own (the session's outbox
// delivers them): where an answer and an event must keep their order,
// the core relies on the event having been written (or handed on) when
// the call that made it returns. The payload is the typed value
// (messageUpdate, toolExecEnd, …), for a front end to switch on. A sink
// may take its own locks and read the session's state, but must not call
// what delivers (an operation that changes the session), nor block on
// anything but its own output. A sink that panics loses that event only.
type eventSink interface {
	event(ev event)
	// gatheredEvent is event for a poster that has the sink flush before
	// it waits (a process's reader): the event may wait for what follows.
	gatheredEvent(ev event)
	// flush sends what gathered events wait in.
	flush()
}

// sinks is a session's fan-out point: every event goes to each sink
// attached, in the order they were attached; each front end that shows
// the session attaches its own. The outbox delivers one callout at a time,
// so each sink gets the events one at a time and in order. The list is
// replaced, never changed, so delivery reads it without a lock.
type sinks struct {
	attached atomic.Pointer[[]*attachedSink]
	mu       mutex[sinksMu] // serializes attach and detach
}

// attachedSink is one sink's place in the list (sinks of any type, not
// all comparable, are told apart by it).
type attachedSink struct{ sink eventSink }

// attach adds sink (nil: nothing); the events delivered from now on
// reach it too, until detach is called.
func (f *sinks) attach(sink eventSink) (detach func()) {
	if sink == nil {
		return func() {}
	}
	place := &attachedSink{sink}
	f.replace(func(list []*attachedSink) []*attachedSink { return append(list, place) })
	return func() {
		f.replace(func(list []*attachedSink) []*attachedSink {
			return slices.DeleteFunc(list, func(o *attachedSink) bool { return o == place })
		})
	}
}

func (f *sinks) replace(change func([]*attachedSink) []*attachedSink) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var list []*attachedSink
	if old := f.attached.Load(); old != nil {
		list = slices.Clone(*old)
	}
	list = change(list)
	f.attached.Store(&list)
}

// list is the sinks attached now (not to be changed).
func (f *sinks) list() []*attachedSink {
	if attached := f.attached.Load(); attached != nil {
		return *attached
	}
	return nil
}

// sessionOptions say where a session works, what its front end gives it,
// and which conversation it opens with.
type sessionOptions struct {
	cwd string // absolute
	// dirs are the other directories the session works in besides cwd
	// (ACP's additionalDirectories): absolute, clean, existing, neither
	// cwd nor one another; the front end checks them. Their context files
	// join the cwd's, the system prompt names them, MCP servers get them
	// as roots.
	dirs     []string
	sink     eventSink // the first front end's sink (sinks.attach adds others)
	ui       ui
	files    fileEnv       // nil: the disk
	commands commandRunner // nil: the model's bash runs in rpi's own shell

	file string // a session file: opened when it exists, else made there (--session)
	id   string // the id of the cwd's session to open, or of the new one (--session-id)
	// forkFrom is the session the new session copies: its file, or for
	// --fork (forkAll) its file or its id as forkSource finds it
	forkFrom string
	// forkAll copies every entry of forkFrom, each branch, as pi 1.6's
	// --fork does (else the branch to forkLeaf)
	forkAll bool
	// forkLeaf is where forkFrom's copy ends: nil for its current leaf,
	// "" for nothing copied (a fork before its first message)
	forkLeaf *string
	name     string // the new session's name (--name)
	// flags, when set, are the session's own flags instead of the host's
	// (a served client's hello options): its model, thinking level, tools,
	// approvals and whether it keeps a file.
	flags *cliConfig
	// writeNow writes a new session's file (header and first entries) as
	// it opens, not with the first message as pi does (ACP's session/new).
	writeNow bool
	// startInEmpty: an empty file gets a new session, as pi's --session
	// gives one (and rpi serve's hello option session, its twin); else it
	// is refused, as switch_session refuses it (a file that is no valid
	// session) and as a file found by its session's id is (ACP's
	// session/load and resume, rpi serve's attach): emptied since it was
	// found, that session is gone.
	startInEmpty bool
	// resourcesLater leaves the session's resources (context files,
	// system prompt files, templates, skills) to loadLaterResources, for a
	// front end that announces the session before it reads its first
	// command (rpc's first session): nothing the first line needs.
	resourcesLater bool
}

// openSession opens a session in o.cwd: its settings and resources, the
// starting model (--model, or settings.json's default, or the first
// usable one; within --models' scope when given), and its conversation (see openConversation). What opening
// writes (a fork's copy) is on disk when it returns. Once the host shuts
// down, reading the session file stops and nothing opens.
func openSession(h *host, o sessionOptions) (*session, error) {
	set := loadSettings(h.set, o.cwd, o.dirs, h.env.trace)
	if !o.resourcesLater {
		set.notices = append(set.notices, set.loadResources(h.env.trace)...)
	}
	start, startThinking := h.set.startModel, h.set.startThinking
	if o.flags != nil {
		set.cfg, set.tools = *o.flags, toolsOf(*o.flags, defaultToolNames(set.defaultToolEntries))
		if o.flags.model != h.set.cfg.model || o.flags.provider != h.set.cfg.provider {
			var err error
			if start, startThinking, err = sessionStartModel(set); err != nil {
				return nil, err
			}
		}
	}
	cfg := set.cfg
	s := &session{host: h, set: set, ui: o.ui, files: o.files, commands: o.commands, loops: &loopScheduler{},
		notices: slices.Clone(set.notices), steeringMode: set.steeringMode,
		followUpMode: set.followUpMode, autoCompaction: set.autoCompaction, autoRetry: set.autoRetry, confirm: cfg.confirm}
	if s.files == nil {
		s.files = diskFiles{cwd: o.cwd, dirs: set.dirs}
	}
	s.startModel, s.startThinking = start, startThinking
	s.resourcesLater = o.resourcesLater
	s.model = start
	if s.model == nil {
		s.model, _, _ = chooseModel(set.catalog, cfg.provider, "", set.defaultProvider, set.defaultModel)
	}
	scope, scopeLevel := s.startScope()
	s.model, s.thinkingLevel = s.startState(sessionContext{}, scope, scopeLevel)
	s.sinks.attach(o.sink)
	s.mcp.s = s
	s.ctx, s.cancel = context.WithCancel(h.ctx)
	conv, err := s.openConversation(o)
	if err != nil {
		s.cancel()
		return nil, err
	}
	s.conv = conv
	conv.flush()
	if err := h.sessions.add(s, func() bool { return h.ctx.Err() != nil }); err != nil {
		s.cancel()
		conv.close()
		return nil, err
	}
	return s, nil
}

// sessionStartModel is the model a session's own --model and --provider
// (set.cfg) name, as loadHostSettings checks the host's; nil when they
// leave it to settings.json or the first usable model. The model must be
// in the catalog: one --provider would adopt is the host's to add.
func sessionStartModel(set *settings) (*model, string, error) {
	cfg := set.cfg
	if cfg.provider != "" {
		if err := checkProvider(set.catalog, cfg.provider, cfg.model == ""); err != nil {
			return nil, "", err
		}
	}
	if cfg.model == "" {
		return nil, "", nil
	}
	m, thinking, err := chooseModel(set.catalog, cfg.provider, cfg.model, "", "")
	if err == nil && !slices.Contains(set.catalog.of(m.Provider), m) {
		err = fmt.Errorf("Unknown model: %s (see get_available_models, or add it to models.json)", cfg.model)
	}
	return m, thinking, err
}

// close ends the session: its loops, its run (aborted, and waited for),
// the commands and processes it started; then its session file is
// written to the end and let go of (another rpi may open it at once). The
// front end forgets the session after. Shutdown does this for every
// session at once (host.shutdown).
func (s *session) close() {
	s.closing.Store(true)
	s.stopLoops()
	settled := s.abort()
	procs := s.processes()
	s.cancel() // its commands end, its processes are stopped (waitExit)
	s.mcp.close()
	deadline := time.After(exitLimit)
	if settled != nil {
		select {
		case <-settled:
		case <-deadline:
		}
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline:
		}
	}
	s.forgetProcesses()
	s.conv.close()
	s.host.sessions.remove(s)
}

// ---- Callouts: what the core owes its front end ----

// A callout is one call the core owes its front end: an event for its
// sink, a one-way request for its ui, or a callback the front end gave
// (a prompt accepted, a turn ended, a compaction done).
type callout struct {
	ev       event
	gathered bool       // ev goes to the sink's gatheredEvent
	flush    bool       // the sink's flush, instead of an event
	show     *uiRequest // a one-way request, instead of an event
	call     func()     // a callback, instead of either
}

// outbox keeps a session's callouts in the order the core decided them
// — often under its own locks, which is what keeps that order — until
// they are delivered, once those locks are let go of: the core never
// calls its front end while it holds a lock of its own (lockrank.go
// checks it), so a front end may take its own locks in a callout and,
// outside callouts, call the core while it holds them.
type outbox struct {
	mu    mutex[outboxMu] // guards items and spare; taken under any core lock
	items []callout
	spare []callout // the last batch delivered, emptied: the next one's room
	// undelivered counts the callouts posted and not yet made: with none,
	// deliver has nothing to wait for.
	undelivered atomic.Int64
	// deliverMu is held while callouts are delivered, one goroutine at a
	// time, in order; it is taken with no core lock held.
	deliverMu mutex[deliverMu]
}

// post queues a callout; the next deliver delivers it. Any lock may be
// held.
func (s *session) post(c callout) {
	s.callouts.mu.Lock()
	s.callouts.items = append(s.callouts.items, c)
	s.callouts.undelivered.Add(1)
	s.callouts.mu.Unlock()
}

// postEvent queues an event: its type and its payload, a typed value the
// front end renders in its wire's shape (nil: none).
func (s *session) postEvent(typ string, data any) { s.post(callout{ev: event{typ, data}}) }

// postCall queues a callback of the front end's.
func (s *session) postCall(f func()) { s.post(callout{call: f}) }

// deliver makes every callout posted so far: when it returns, those
// its caller posted have been made (by it, or by the goroutine that was
// delivering when it came). It is called with no core lock held, never
// from a callout (a callout that calls the core calls what delivers
// nothing). A callout that panics is told on stderr and ends there: the
// next goes on.
func (s *session) deliver() {
	checkCallout("the session's callouts")
	if s.callouts.undelivered.Load() == 0 {
		return
	}
	s.callouts.deliverMu.Lock()
	defer s.callouts.deliverMu.Unlock()
	for {
		s.callouts.mu.Lock()
		batch := s.callouts.items
		s.callouts.items, s.callouts.spare = s.callouts.spare, nil
		s.callouts.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		for _, c := range batch {
			s.callOut(c)
			s.callouts.undelivered.Add(-1)
		}
		clear(batch) // what the callouts held goes
		s.callouts.mu.Lock()
		if cap(batch) <= 1024 { // a burst's room is not kept
			s.callouts.spare = batch[:0]
		}
		s.callouts.mu.Unlock()
	}
}

// callOut makes one callout: a callback, a one-way request to the ui, or
// an event (or flush) for every sink attached, one after another. A panic
// ends only the call it happened in: the next sink still gets the event.
func (s *session) callOut(c callout) {
	switch {
	case c.call != nil:
		s.contain(c, c.call)
	case c.show != nil:
		s.contain(c, func() { s.ui.show(*c.show) })
	default:
		for _, a := range s.sinks.list() {
			sink := a.sink
			s.contain(c, func() {
				switch {
				case c.flush:
					sink.flush()
				case c.gathered:
					sink.gatheredEvent(c.ev)
				default:
					sink.event(c.ev)
				}
			})
		}
	}
}

// contain makes the call f, for callout c; a panic in it is told on
// stderr and ends there.
func (s *session) contain(c callout, f func()) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(s.stderr, "rpi: panic in the front end (%s): %v\n%s", c.what(), p, debug.Stack())
		}
	}()
	f()
}

// what names a callout for a panic's report.
func (c callout) what() string {
	switch {
	case c.call != nil:
		return "a callback"
	case c.show != nil:
		return "the ui's " + c.show.Method
	case c.flush:
		return "the sink's flush"
	}
	return "the sink's " + c.ev.Type
}

// unlock lets go of s.mu, then delivers what was posted under it.
func (s *session) unlock() {
	s.mu.Unlock()
	s.deliver()
}

// emit reports an event through the sink, now; no core lock is held.
func (s *session) emit(typ string, data any) {
	s.postEvent(typ, data)
	s.deliver()
}

// tell sends a one-way request to the user (notify, setStatus,
// setWidget, setTitle, set_editor_text), now; no core lock is held.
func (s *session) tell(req uiRequest) {
	s.postTell(req)
	s.deliver()
}

// postTell queues a one-way request.
func (s *session) postTell(req uiRequest) { s.post(callout{show: &req}) }

// status shows the agent's current activity in the client's status bar
// (setStatus, key "rpi").
func (s *session) status(activity string) {
	s.tell(uiRequest{Method: "setStatus", StatusKey: "rpi", StatusText: activity})
}

// warn tells the user of a problem the session ran into (a session file
// that cannot be written): a notify warning, or, until the front end has
// shown the session, a notice it takes then (openingNotices).
func (s *session) warn(message string) {
	s.postWarning(message)
	s.deliver()
}

// postWarning is warn for a caller that holds a core lock: the notify is
// posted.
func (s *session) postWarning(message string) {
	s.noticesMu.Lock()
	if !s.live.Load() {
		s.notices = append(s.notices, message)
		s.noticesMu.Unlock()
		return
	}
	s.noticesMu.Unlock()
	s.postTell(uiRequest{Method: "notify", Message: message, NotifyType: "warning"})
}

// loadLaterResources loads the resources openSession left for later
// (sessionOptions.resourcesLater), once, before the front end takes the
// opening notices and before it reads a command: nothing reads them
// before, and everything after it starts reads them as loaded.
func (s *session) loadLaterResources() {
	if !s.resourcesLater {
		return
	}
	s.resourcesLater = false
	notices := s.set.loadResources(s.env.trace)
	s.noticesMu.Lock()
	s.notices = slices.Insert(s.notices, len(s.set.notices), notices...) // s.notices began as a copy of set's
	s.noticesMu.Unlock()
}

// openingNotices are the warnings gathered while the session opened (of
// its settings files, the catalog, its resources and its session file),
// for a front end to show once it has announced the session: every front
// end that shows the session gets them all. From the first such call on, a
// warning goes to the ui at once.
func (s *session) openingNotices() []string {
	s.noticesMu.Lock()
	defer s.noticesMu.Unlock()
	s.live.Store(true)
	return slices.Clone(s.notices)
}

// ---- State ----

// stateData is the answer to get_state (docs/commands.md), in pi's key order.
type stateData struct {
	Model                 *model      `json:"model"` // null when none is usable
	ThinkingLevel         string      `json:"thinkingLevel"`
	IsStreaming           bool        `json:"isStreaming"`
	IsCompacting          bool        `json:"isCompacting"`
	SteeringMode          string      `json:"steeringMode"`
	FollowUpMode          string      `json:"followUpMode"`
	SessionFile           pathOrNull  `json:"sessionFile"` // null with --no-session
	SessionID             string      `json:"sessionId"`
	SessionName           string      `json:"sessionName,omitempty"`
	AutoCompactionEnabled bool        `json:"autoCompactionEnabled"`
	AutoRetryEnabled      bool        `json:"autoRetryEnabled"`
	MessageCount          int         `json:"messageCount"`
	PendingMessageCount   int         `json:"pendingMessageCount"`
	TodoPhases            []todoPhase `json:"todoPhases"`
	ProcessCount          int         `json:"processCount"`
}

// pathOrNull is a file's path, JSON null when there is none (the session
// file with --no-session): a string, so that a polled get_state boxes
// nothing into an interface.
type pathOrNull string

func (p pathOrNull) MarshalJSON() ([]byte, error) {
	if p == "" {
		return []byte("null"), nil
	}
	return appendJSONString(nil, string(p)), nil
}

// state is every field of the session's state, from memory.
func (s *session) state() stateData {
	processes, info := s.runningProcessCount(), s.conv.info()
	s.mu.Lock()
	defer s.mu.Unlock()
	todoPhases := s.todos // shared, not copied: the plan is never changed in place
	if todoPhases == nil {
		todoPhases = []todoPhase{}
	}
	return stateData{
		Model:                 s.model,
		ThinkingLevel:         s.effectiveThinking(),
		IsStreaming:           s.phase == running || s.phase == stopping,
		IsCompacting:          s.phase == compacting,
		SessionFile:           pathOrNull(info.path),
		SteeringMode:          s.steeringMode,
		FollowUpMode:          s.followUpMode,
		SessionID:             info.id,
		SessionName:           info.name,
		AutoCompactionEnabled: s.autoCompaction,
		AutoRetryEnabled:      s.autoRetry,
		MessageCount:          info.messages,
		PendingMessageCount:   len(s.starting) + len(s.steering) + len(s.followUp),
		TodoPhases:            todoPhases,
		ProcessCount:          processes,
	}
}

// sameJSON reports whether two states have the same JSON. The model and the
// plan are compared by identity: neither is ever changed in place (a
// new model or plan replaces the old). TestStateSameJSONSeesEveryField
// holds it to every field, and TestTodoPlanNeverChangedInPlace the plan
// to its premise.
func (a *stateData) sameJSON(b *stateData) bool {
	return a.Model == b.Model && a.ThinkingLevel == b.ThinkingLevel &&
		a.IsStreaming == b.IsStreaming && a.IsCompacting == b.IsCompacting &&
		a.SteeringMode == b.SteeringMode && a.FollowUpMode == b.FollowUpMode &&
		a.SessionFile == b.SessionFile && a.SessionID == b.SessionID && a.SessionName == b.SessionName &&
		a.AutoCompactionEnabled == b.AutoCompactionEnabled && a.AutoRetryEnabled == b.AutoRetryEnabled &&
		a.MessageCount == b.MessageCount && a.PendingMessageCount == b.PendingMessageCount &&
		len(a.TodoPhases) == len(b.TodoPhases) && (len(a.TodoPhases) == 0 || &a.TodoPhases[0] == &b.TodoPhases[0]) &&
		a.ProcessCount == b.ProcessCount
}

// setSessionName names the session (a session_info entry, written only
// when the name changes): session_info_changed and the ui's title follow.
// The name is trimmed; an empty one fails.
func (s *session) setSessionName(name string) error {
	if name = strings.TrimSpace(name); name == "" {
		return errors.New("Session name cannot be empty")
	}
	changed, err := s.conv.setName(name)
	if changed {
		s.emit("session_info_changed", sessionInfoChanged{name})
		s.tell(uiRequest{Method: "setTitle", Title: name})
	}
	return err
}

// sessionInfoChanged is the data of session_info_changed.
type sessionInfoChanged struct {
	Name string `json:"name"`
}

// setQueueMode sets how many queued messages one turn takes of the
// steering queue (steering) or the follow-up queue: mode is "all" or
// "one-at-a-time".
func (s *session) setQueueMode(steering bool, mode string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if steering {
		s.steeringMode = mode
	} else {
		s.followUpMode = mode
	}
}

// setAutoCompaction turns compaction near the context window on or off.
func (s *session) setAutoCompaction(enabled bool) {
	s.mu.Lock()
	s.autoCompaction = enabled
	s.mu.Unlock()
}

// setAutoRetry turns retrying of failed model calls on or off.
func (s *session) setAutoRetry(enabled bool) {
	s.mu.Lock()
	s.autoRetry = enabled
	s.mu.Unlock()
}

// confirmTools are the tools whose calls wait for the user's approval.
func (s *session) confirmTools() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirm
}

// setConfirmTools puts these tools behind the approval gate (and no
// others), from the next call on; --confirm gives the first set.
func (s *session) setConfirmTools(names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.confirm = slices.Clone(names)
}

// An event is one thing the core reports, as the rpc wire names it
// (docs/protocol.md#events): its type and its payload, a typed value (nil
// for none). What a front end makes of it — the rpc wire's envelope,
// pi's shapes, ACP's updates — is the front end's.
type event struct {
	Type string
	Data any
}

// eventTypes lists every event rpi emits, for get_capabilities. A test
// checks that each appears in a fixture and that fixtures show no other.
var eventTypes = []string{
	"session_started",
	"bash_execution_update",
	"process_started",
	"process_output",
	"process_exited",
	"agent_start",
	"turn_start",
	"message_start",
	"message_update",
	"message_end",
	"tool_execution_start",
	"tool_execution_update",
	"tool_execution_end",
	"turn_end",
	"agent_end",
	"agent_settled",
	"queue_update",
	"auto_retry_start",
	"auto_retry_end",
	"todo_updated",
	"loop_created",
	"loop_updated",
	"loop_queued",
	"loop_fired",
	"loop_skipped",
	"loop_finished",
	"loop_failed",
	"loop_removed",
	"compaction_start",
	"compaction_end",
	"summarization_retry_scheduled",
	"summarization_retry_attempt_start",
	"summarization_retry_finished",
	"thinking_level_changed",
	"session_info_changed",
	"run_failed",
	"mcp_server_update",
	"entry_appended",
}

// runPhase is what the agent is doing.
type runPhase int

const (
	idle       runPhase = iota
	running             // a run chain: turns of model calls and tools
	compacting          // summarising (the compact command, or automatically within a run)
	stopping            // aborted, not yet settled
)
