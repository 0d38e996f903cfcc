package main

// ACP's sessions (docs/acp.md): each an rpi session of
// the core with this front end's sink, ui and files — session/new, load,
// resume, close, list and delete (the catalog's code, shared with rpc),
// prompts and their turns, cancel, the editor's files, approvals as
// permission requests, and the config options.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
)

// acpSession is one session open over ACP: the core's session and what
// this front end keeps for it. It is the session's event sink, its ui,
// (through acpFiles) its files and (through acpTerminals) where its bash
// runs.
type acpSession struct {
	agent   *acpAgent
	s       *session
	id      string
	updates *acpUpdates

	// The prompts are started in the order they came, one after the
	// other, by one goroutine while there are some (starter): a prompt
	// waiting to start costs its message, not a goroutine. startMu is
	// held while a prompt starts and while session/cancel ends the
	// prompts not started yet (pending), so that none starts after a
	// cancel that came after it; before s.mu.
	startMu mutex[acpStartMu]
	// configMu is held while the config options are read and sent
	// (tellSettings), so that they go out in the order they were read.
	configMu mutex[acpConfigMu]
	detached bool          // taken off its rpi serve stage: nothing more is told of it; guarded by configMu
	pending  []*acpPending // prompts received and not yet started; guarded by startMu
	starter  bool          // a goroutine is starting the pending prompts; guarded by startMu
	// starting is what the prompts not yet started read their links
	// under: session/cancel ends it (and makes the next prompts a new
	// one), so that a link the editor never gives back holds up neither
	// the cancel nor the prompts after it. Guarded by startMu.
	starting     context.Context
	stopStarting context.CancelFunc

	mu        mutex[acpSessionMu] // guards the fields below
	stopping  <-chan struct{}     // closed once the run the last session/cancel stopped has settled (nil: none)
	always    map[string]bool     // tools the user allowed for the session (allow_always)
	approvals string              // ask, edits, auto, or custom (the --confirm set)
	custom    []string            // the custom set, while it is in force
	confirm   []string            // the tools behind the approval gate (what the session was last given)
	titled    bool                // the session has a name, or a first prompt gave its title
	shell     string              // where bash runs: rpi or editor; "" when the client has no terminals (no shell option)
}

// ---- Opening ----

// acpSessionAnswer is what session/new, load and resume answer.
type acpSessionAnswer struct {
	SessionID     string            `json:"sessionId,omitempty"` // session/new's
	ConfigOptions []acpConfigOption `json:"configOptions"`
	Modes         acpModes          `json:"modes"`
	Models        *acpModelState    `json:"models,omitempty"` // the model as the older selector has it
	Meta          *acpAttached      `json:"_meta,omitempty"`  // rpi serve's, on attaching to a live session
}

// acpAttached is what attaching to a session live in rpi serve's host
// (session/load, session/resume) tells: the seq of its latest event, and
// whether the events after the cursor asked for were no longer all kept
// (resync: none was replayed).
type acpAttached struct {
	RPI struct {
		Cursor int64 `json:"cursor"`
		Resync bool  `json:"resync"`
	} `json:"rpi"`
}

// acpCursor reads _meta.rpi.cursor (rpi serve's: the seq of the last
// event the client saw); -1 when absent.
func acpCursor(p acpParams) (int64, error) {
	meta, _, err := p.object("_meta")
	if err != nil {
		return -1, err
	}
	rpi, _, err := meta.object("rpi")
	if err != nil || !rpi.has("cursor") {
		return -1, err
	}
	return rpi.integer("cursor", 0, 1<<53)
}

// acpModelState is the model selector clients that predate config
// options still read (Emacs agent-shell): the model, and those to pick
// from, as the model config option has them; set by session/set_model.
type acpModelState struct {
	CurrentModelID  string         `json:"currentModelId"`
	AvailableModels []acpModelInfo `json:"availableModels"`
}

type acpModelInfo struct {
	ModelID string `json:"modelId"`
	Name    string `json:"name"`
}

// acpModelsOf is the model option as the older selector; nil when there
// is no model to show as current.
func acpModelsOf(options []acpConfigOption) *acpModelState {
	for _, o := range options {
		if o.ID != "model" || o.CurrentValue == "" {
			continue
		}
		state := &acpModelState{CurrentModelID: o.CurrentValue, AvailableModels: []acpModelInfo{}}
		for _, v := range o.Options {
			state.AvailableModels = append(state.AvailableModels, acpModelInfo{v.Value, v.Name})
		}
		return state
	}
	return nil
}

// acpTooManySessions refuses a session past the host's maxSessions
// (one connection's, as rpi acp has one). The number is written out, so
// that the message is a constant the compiler lays out rather than a
// string built in package init; TestACPSessionLimit checks that it is
// maxSessions.
var acpTooManySessions = &acpError{Code: acpInternalError,
	Message: "Too many sessions open: at most 64 on one connection; close one (session/close) and try again"}

// open opens a session in cwd (and dirs, its additional directories,
// checked) (file: the session file to open; "" for a new one, written at
// once) and makes it known by its id; past the host's maxSessions open
// (or being opened, or closed) it opens nothing.
func (a *acpAgent) open(cwd string, dirs []string, file string, servers []mcpServerConfig) (*acpSession, error) {
	return a.openFrom(cwd, dirs, file, "", servers)
}

// openFrom is open; with forkFrom, a new session that copies the current
// branch of that session file.
func (a *acpAgent) openFrom(cwd string, dirs []string, file, forkFrom string, servers []mcpServerConfig) (*acpSession, error) {
	if a.served == nil { // rpi serve's host counts its sessions itself, making room (openStage)
		if err := a.h.sessions.reserve(); err != nil {
			return nil, acpTooManySessions
		}
		defer a.h.sessions.release()
	}
	as := a.newSession(cwd)
	o := sessionOptions{cwd: cwd, dirs: dirs, file: file, forkFrom: forkFrom, writeNow: file == ""}
	var s *session
	var err error
	if a.served != nil {
		s, err = a.served.open(as, o) // the disk and rpi's shell: the session outlives the editor
	} else {
		o.sink, o.ui, o.files, o.commands = as, as, acpFiles{as}, acpTerminals{as}
		s, err = openSession(a.h, o)
	}
	if errors.Is(err, errSessionOpen) {
		return nil, invalidParams("Invalid field sessionId: the session is open here already")
	}
	if err != nil {
		return nil, err
	}
	s.mcp.fromClient(servers)
	if len(as.confirm) != len(a.h.set.cfg.confirm) {
		s.setConfirmTools(as.confirm) // the mode asks before MCP tools too
	}
	as.bind(s)
	return a.keep(as), nil
}

// bind makes as the view of s: its id, whether it has a title (a name, or
// a user's message a first prompt would take it from), its prompts' start.
func (as *acpSession) bind(s *session) {
	info := s.conv.info()
	as.starting, as.stopStarting = context.WithCancel(s.ctx)
	titled := info.name != "" || slices.ContainsFunc(s.conv.messages(), func(m any) bool { _, user := userText(m); return user })
	as.mu.Lock()
	as.s, as.id, as.titled = s, info.id, titled
	as.mu.Unlock()
}

// newSession is this connection's view of a session in cwd, before the
// session is opened or attached to: the approvals as --confirm sets them,
// where bash runs, the updates it will send.
func (a *acpAgent) newSession(cwd string) *acpSession {
	as := &acpSession{agent: a, always: map[string]bool{}}
	as.confirm = a.h.set.cfg.confirm
	as.approvals = acpApprovalOf(as.confirm)
	as.confirm = acpConfirmed(as.approvals, as.confirm)
	if as.approvals == "custom" {
		as.custom = slices.Clone(as.confirm)
	}
	caps := a.clientCaps()
	if caps.terminal && a.served == nil { // a session rpi serve holds runs bash in rpi's shell
		as.shell = "rpi"
	}
	as.updates = &acpUpdates{paths: acpPaths{cwd: cwd}, terminal: caps.terminalOutput,
		deferred: as.asks, inEditor: as.inEditor, send: as.send, newID: as.newID, now: a.h.env.clock.Now,
		notices: caps.notices, compactions: caps.compaction}
	return as
}

// answer is a session response: its config options and modes.
func (as *acpSession) answer(withID bool) acpSessionAnswer {
	options := as.configOptions()
	answer := acpSessionAnswer{ConfigOptions: options, Modes: as.modes(), Models: acpModelsOf(options)}
	if withID {
		answer.SessionID = as.id
	}
	return answer
}

// announce sends what follows a session response (docs/acp.md): the commands,
// the usage, then, for a session just opened (opened), the warnings of
// its opening and of its loops as notes; one open here already, loaded or
// resumed again, was shown them.
func (as *acpSession) announce(opened bool) {
	if !as.agent.isOpenAs(as) {
		return // closed as soon as it was answered: nothing to announce, no loops to start
	}
	as.send(acpAvailableCommands{"available_commands_update", acpCommandsOf(as.s.set.menuCommands())})
	as.sendUsage(nil)
	if !opened {
		return // this connection has shown the session's notes already
	}
	for _, notice := range as.s.openingNotices() {
		as.updates.noteAs(noteWarning, notice)
	}
	as.updates.noteAs(noteWarning, acpLoopsNote(as.s.conv.info().path))
	as.s.startMCP()
}

// acpLoopsNote tells of the loops a session's loops file keeps ("" when
// none): rpi acp does not run them — ACP has no way to list or remove
// them, and a session file someone else wrote must not start prompts in
// the editor unseen — and leaves the file as it is, for rpi rpc.
func acpLoopsNote(sessionPath string) string {
	read := readLoops(sessionPath)
	switch {
	case read.err != nil:
		return fmt.Sprintf("Cannot read the scheduled loops in %s: %v (rpi acp does not run loops).", read.path, read.err)
	case len(read.tasks) == 0:
		return ""
	}
	n := "1 scheduled loop"
	if len(read.tasks) > 1 {
		n = fmt.Sprintf("%d scheduled loops", len(read.tasks))
	}
	return fmt.Sprintf("This session's file keeps %s (%s). rpi acp does not run them, as an editor cannot list or remove them; "+
		"they run when the session is opened with rpi rpc, which lists and removes them.", n, read.path)
}

// acpNew opens a new session in cwd, its file written before the answer.
// Params: cwd (absolute, an existing directory), mcpServers (an array),
// [additionalDirectories]. Answer: {sessionId, configOptions, modes};
// then available_commands_update and usage_update.
func acpNew(a *acpAgent, req *acpRequest) (any, error) {
	cwd, servers, dirs, err := acpWhere(req.params, true)
	if err != nil {
		return nil, err
	}
	var as *acpSession
	return a.answerLaterOr(req, func() (any, error) {
		if err := acpIsDir(cwd); err != nil {
			return nil, err
		}
		if dirs, err = acpCheckDirectories(cwd, dirs); err != nil {
			return nil, err
		}
		if as, err = a.open(cwd, dirs, "", servers); err != nil {
			return nil, err
		}
		return as.answer(true), nil
	}, func() { as.announce(true) }, func() { a.forget(as) })
}

// acpLoad opens a session from its file, found by its id (in cwd's
// folder first, then in any) and run in cwd (an existing directory, as
// for session/new), replays its current branch as updates, and
// only then answers. A session open here already is replayed as it is.
// rpi's end stops a load, and its answer is then an error.
// Params: sessionId, cwd (absolute), mcpServers, [additionalDirectories:
// the session's whole list; a session open here already must have this
// one]. Answer: {configOptions, modes}; then available_commands_update
// and usage_update.
func acpLoad(a *acpAgent, req *acpRequest) (any, error) {
	return a.reopen(req, true)
}

// acpResume is session/load without the replay.
// Params: sessionId, cwd (absolute), [mcpServers]. Answer: as load's.
func acpResume(a *acpAgent, req *acpRequest) (any, error) {
	return a.reopen(req, false)
}

// acpFork opens a new session in cwd that copies the current branch of
// another (rpc's clone), its header naming the source's file as
// parentSession: one open here (what it has written so far, its running
// turn's entries too), or one on disk (found as session/load finds it;
// one another process has open is read as that process wrote it).
// Unstable in ACP. Params: sessionId, cwd (absolute), [mcpServers],
// [additionalDirectories].
// Answer: as session/new's; then the same updates.
func acpFork(a *acpAgent, req *acpRequest) (any, error) {
	id, err := acpSessionID(req.params)
	if err != nil {
		return nil, err
	}
	cwd, servers, dirs, err := acpWhere(req.params, false)
	if err != nil {
		return nil, err
	}
	if a.noSession {
		return nil, errNoSessions
	}
	a.mu.Lock()
	source := a.sessions[id]
	a.mu.Unlock()
	var as *acpSession
	return a.answerLaterOr(req, func() (_ any, err error) {
		if err := acpIsDir(cwd); err != nil {
			return nil, err
		}
		if dirs, err = acpCheckDirectories(cwd, dirs); err != nil {
			return nil, err
		}
		path := ""
		if source != nil {
			source.s.conv.flush() // what the source recorded is on disk
			path = source.s.conv.info().path
		} else if path, err = findSessionFile(a.h.ctx, a.store, id, cwd); err != nil {
			return nil, err
		}
		if as, err = a.openFrom(cwd, dirs, "", path, servers); err != nil {
			return nil, acpOpenError(id, err)
		}
		return as.answer(true), nil
	}, func() { as.announce(true) }, func() { a.forget(as) })
}

func (a *acpAgent) reopen(call *acpRequest, replay bool) (any, error) {
	id, err := acpSessionID(call.params)
	if err != nil {
		return nil, err
	}
	cwd, servers, dirs, err := acpWhere(call.params, replay)
	if err != nil {
		return nil, err
	}
	if a.noSession {
		return nil, errNoSessions
	}
	cursor, err := acpCursor(call.params)
	if err != nil {
		return nil, err
	}
	var as *acpSession
	opened := false // here, by this request (else it was open already)
	return a.answerLaterOr(call, func() (_ any, err error) {
		defer func() {
			if err != nil && a.h.ctx.Err() != nil { // stopped by rpi's end
				err = acpEnding(id)
			}
		}()
		var loaded func()
		var live bool // another client's session in rpi serve's host: attached to once the file is replayed
		for {
			if as, loaded, live, err = a.openOrWait(id); err != nil {
				return nil, err
			}
			if !live {
				break
			}
			// Until it is attached to, no change of the session is made
			// in place: one made before left its file, opened again.
			release, err := a.served.hold(as.s, id)
			if err == nil {
				defer release()
				break
			}
			a.detachSession(as)
			if !errors.Is(err, errStageChanged) {
				return nil, err
			}
		}
		var attached *acpAttached
		if live {
			defer func() {
				if err != nil {
					a.detachSession(as)
				}
			}()
			if cursor < 0 && replay { // the events from the file's replay on reach it
				cursor = a.served.lastSeq(as.s)
			}
		}
		if as == nil {
			defer loaded()
			if err := acpIsDir(cwd); err != nil {
				return nil, err
			}
			if dirs, err = acpCheckDirectories(cwd, dirs); err != nil {
				return nil, err
			}
			path, err := findSessionFile(a.h.ctx, a.store, id, cwd)
			if err != nil {
				return nil, err
			}
			if as, err = a.open(cwd, dirs, path, servers); err != nil {
				return nil, acpOpenError(id, err)
			}
			opened = true
		} else if err := acpSameDirectories(as, dirs); err != nil {
			return nil, err
		}
		if replay {
			for _, u := range as.updates.replay(as.s.conv.branchEntries(), as.s.decodeRecordedCall) {
				switch {
				case a.h.ctx.Err() != nil: // the rest would hold rpi's end
					return nil, acpEnding(id)
				case !a.isOpenAs(as):
					return nil, acpClosedWhileLoading(id)
				}
				as.send(u)
			}
		} else {
			as.updates.knowCards(as.s.conv.branchEntries())
		}
		if !a.isOpenAs(as) {
			return nil, acpClosedWhileLoading(id)
		}
		if live {
			latest, resync, err := a.served.attach(as, as.s, cursor)
			if err != nil {
				return nil, err
			}
			attached = &acpAttached{}
			attached.RPI.Cursor, attached.RPI.Resync = latest, resync
			as.adoptApprovals() // as another client set them before this one attached (one set since is told: settingsChanged)
		}
		answer := as.answer(false)
		answer.Meta = attached
		return answer, nil
	}, func() { as.announce(opened) }, func() {
		if opened {
			a.forget(as) // withdrawn: the session it opened is closed again
		}
	})
}

// acpSameDirectories refuses a load or resume of a session open here
// already whose additionalDirectories (dirs, as read: the complete list
// asked for) are not those it has: its settings and context files were
// read when it opened, and stay as they are until it closes.
func acpSameDirectories(as *acpSession, dirs []string) error {
	kept, err := acpCheckDirectories(as.s.set.cwd, dirs)
	if err != nil {
		return err
	}
	if !slices.Equal(kept, as.s.set.dirs) {
		return invalidParams("Invalid field additionalDirectories: the session is open here with other additional directories (%s); "+
			"close it (session/close) and open it again to change them", cmpOr(strings.Join(as.s.set.dirs, ", "), "none"))
	}
	return nil
}

// acpClosedWhileLoading answers a session/load or resume whose session a
// session/close closed before it was done: the load opened nothing.
func acpClosedWhileLoading(id string) error {
	return &acpError{Code: acpInternalError, Message: fmt.Sprintf("The session %s was closed (session/close) while it was loading: load it again to open it", id)}
}

// isOpenAs reports whether as is still the session open under its id.
func (a *acpAgent) isOpenAs(as *acpSession) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessions[as.id] == as
}

// openOrWait is the session with id when it is open here, after waiting
// for another session/load or resume opening it now (the host's
// openOrWait); nil when it is not open, and then the caller opens it and
// tells the host when it is loaded (loaded). A session the host has open
// and this connection does not (yet: session/new is opening it now) is an
// error.
func (a *acpAgent) openOrWait(id string) (as *acpSession, loaded func(), live bool, err error) {
	s := a.h.sessions.openOrWait(id)
	if s == nil {
		return nil, func() { a.h.sessions.loaded(id) }, false, nil
	}
	a.mu.Lock()
	as = a.sessions[id]
	a.mu.Unlock()
	switch {
	case as != nil:
		return as, nil, false, nil
	case a.served != nil: // live in rpi serve's host, for another client: the caller attaches to it
		as, live = a.viewOf(s, id)
		return as, nil, live, nil
	}
	return nil, nil, false, &acpError{Code: acpInternalError, Message: fmt.Sprintf("The session %s is being opened: try again once it is", id)}
}

// errNoSessions refuses what works on the sessions on disk under
// --no-session (load, resume, delete). A literal, not invalidParams:
// package variables are made before main, and fmt's first use is slow.
var errNoSessions = &acpError{Code: acpInvalidParams, Message: "Invalid field sessionId: rpi runs with --no-session: there are no sessions on disk"}

// acpOpenError is why a session file could not be opened, as the client
// reads it: another rpi holding it (lockSessionFile's refusal) says so; a
// file that is not a valid session file is named with what is wrong with
// it, as rpc's switch_session says it (the file is the user's, to mend or
// remove); anything else is internal (its details, with paths, to
// stderr).
func acpOpenError(id string, err error) error {
	var invalid *errInvalidSessionFile
	var inUse *errSessionInUse
	switch {
	case errors.As(err, &inUse):
		return &acpError{Code: acpInternalError, Message: fmt.Sprintf("The session %s is open in another rpi process: close it there (or end that process) and try again", id)}
	case errors.As(err, &invalid):
		return &acpError{Code: acpInternalError, Message: invalid.Error()}
	}
	return err
}

// findSessionFile is the file of the session whose header id is id (as
// findSession finds it); -32602 when there is none, or several claim it.
func findSessionFile(ctx context.Context, store sessionStore, id, cwd string) (string, error) {
	path, err := findSession(ctx, store, id, cwd)
	if twice := (*errSessionClaimedTwice)(nil); errors.As(err, &twice) {
		return "", invalidParams("Invalid field sessionId: %s", twice.Error())
	} else if errors.Is(err, errNoSuchSession) {
		return "", invalidParams("Invalid field sessionId: no session has the id %s", id)
	}
	return path, err
}

// acpClose cancels a session's turn (as session/cancel does: every prompt
// of the session answers cancelled), ends the processes it started,
// writes its file to the end and lets go of it, and forgets the session.
// Until all that is done the session still counts against the host's
// maxSessions, so that closing and opening in a tight loop cannot pass it.
// Params: sessionId. Answer: {}, once all that is done.
func acpClose(a *acpAgent, req *acpRequest) (any, error) {
	as, err := a.session(req.params)
	if err != nil {
		return nil, err
	}
	if a.served != nil {
		a.detachSession(as) // the host's session goes on for its other clients
		return struct{}{}, nil
	}
	a.letGo(as)
	return a.answerLater(req, func() (any, error) {
		as.s.close()
		return nil, nil
	}, nil)
}

// letGo takes as out of the connection's sessions and cancels its turn
// (the prompts waiting behind it answer cancelled too); closing it is
// the caller's.
func (a *acpAgent) letGo(as *acpSession) {
	a.mu.Lock()
	delete(a.sessions, as.id)
	a.mu.Unlock()
	as.cancel()
}

// forget closes a session the client never learned of (its opening was
// withdrawn), in the background (over rpi serve, as discardSession does).
func (a *acpAgent) forget(as *acpSession) {
	if a.served != nil {
		a.discardSession(as)
		return
	}
	a.letGo(as)
	a.h.goBackground(as.s.close)
}

// acpList lists the sessions on disk, a page at a time, newest first.
// Params: [cwd] (absolute: that directory's sessions; absent: every
// directory's), [cursor] (a nextCursor it gave). Answer: {sessions:
// [{sessionId, cwd, title, updatedAt}], [nextCursor]}; over rpi serve, a
// session live in the host has _meta.rpi {live, running, clients}.
func acpList(a *acpAgent, req *acpRequest) (any, error) {
	cwd, err := acpAbsDir(req.params, "cwd", false)
	if err != nil {
		return nil, err
	}
	cursor, err := req.params.optStr("cursor")
	if err != nil {
		return nil, err
	}
	if a.noSession {
		return acpListPage{Sessions: []acpSessionRow{}}, nil
	}
	return a.answerLater(req, func() (any, error) {
		rows, err := listSessions(a.h.ctx, a.store, cwd)
		if err != nil {
			return nil, err
		}
		rows = acpLoadableRows(rows, cwd)
		if a.served != nil {
			a.served.markLive(rows)
		}
		return acpPageOf(rows, cursor)
	}, nil)
}

// acpLoadableRows are the rows session/load can open, by their id in
// their cwd, of cwd's sessions ("": of every directory's): a session file
// whose header's id is no session's id, whose cwd is not an absolute
// path, or is not cwd (its folder may hold another directory's sessions:
// /x/a/b and /x/a-b share one), is left out, and of two files with one id
// the newer only is listed (load refuses the id, naming both files).
func acpLoadableRows(rows []sessionRow, cwd string) []sessionRow {
	seen := map[string]bool{}
	return slices.DeleteFunc(rows, func(r sessionRow) bool {
		drop := !acpIsSessionID(r.SessionID) || !filepath.IsAbs(r.Cwd) || cwd != "" && r.Cwd != cwd || seen[r.SessionID]
		seen[r.SessionID] = true
		return drop
	})
}

// acpDelete deletes a session's file (and its loops file), found by its
// id; a session open in this process, or in another rpi process (which
// holds its file's lock), cannot be deleted, nor any under --no-session.
// Params: sessionId. Answer: {}.
func acpDelete(a *acpAgent, req *acpRequest) (any, error) {
	id, err := acpSessionID(req.params)
	if err != nil {
		return nil, err
	}
	if a.noSession { // nor does it delete what it does not list
		return nil, errNoSessions
	}
	if a.isOpen(id) {
		return nil, invalidParams("Invalid field sessionId: the session %s is open; close it first (session/close)", id)
	}
	return a.answerLater(req, func() (any, error) {
		path, err := findSessionFile(a.h.ctx, a.store, id, "")
		if err != nil {
			return nil, err
		}
		if err := deleteSession(a.store, path, ""); errors.Is(err, errSessionHeld) {
			return nil, invalidParams("Invalid field sessionId: the session %s is open in an rpi process (another, or this one still closing it); close it there first", id)
		} else if err != nil {
			return nil, fmt.Errorf("session/delete %s: %w", id, err)
		}
		return nil, nil
	}, nil)
}

// ---- Prompts (docs/acp.md) ----

// acpPromptMethod runs a prompt: its blocks become one user message
// (acpPrompt), which starts a turn, or, while one runs, waits behind it
// as a follow-up. /compact and /name are answered in-band. The answer,
// {stopReason}, comes once the turn has ended, after every update it
// caused.
// Params: sessionId, prompt ([ContentBlock]). Answer: {stopReason}.
func acpPromptMethod(a *acpAgent, req *acpRequest) (any, error) {
	as, err := a.session(req.params)
	if err != nil {
		return nil, err
	}
	items, err := req.params.array("prompt", "an array of content blocks")
	if err != nil {
		return nil, err
	}
	prompt, err := acpPrompt(items)
	if err != nil {
		return nil, err
	}
	a.conn.keepOpen(req.id, as.cancel) // $/cancel_request of a prompt is session/cancel
	as.startMu.Lock()
	as.pending = append(as.pending, &acpPending{req, prompt, as.starting})
	start := !as.starter
	as.starter = true
	as.startMu.Unlock()
	if start {
		a.h.goBackground(as.startPrompts)
	}
	return acpDeferred{}, nil
}

// acpPending is a prompt received and not yet started: its request, its
// blocks, and the context its links are read under.
type acpPending struct {
	call     *acpRequest
	prompt   *acpPromptMessage
	starting context.Context
}

// startPrompts starts the pending prompts, the first first, until none
// is left; a prompt that fails to start is answered with its error.
func (as *acpSession) startPrompts() {
	for {
		as.startMu.Lock()
		if len(as.pending) == 0 {
			as.starter = false
			as.startMu.Unlock()
			return
		}
		p := as.pending[0]
		as.startMu.Unlock()
		result, err := as.agent.safely(p.call.method, func() (any, error) { return as.prompt(p) })
		if _, later := result.(acpDeferred); !later || err != nil {
			as.agent.conn.answer(p.call.id, p.call.method, result, err, false)
		}
		as.startMu.Lock()
		as.pending = slices.DeleteFunc(as.pending, func(q *acpPending) bool { return q == p }) // after a panic
		as.startMu.Unlock()
	}
}

// acpStopResult is session/prompt's answer: why the turn stopped, and
// (unstable in ACP) what its model requests used, when it ran.
type acpStopResult struct {
	StopReason string         `json:"stopReason"`
	Usage      *acpTurnTokens `json:"usage,omitempty"`
}

// acpTurnTokens is the tokens one turn's model requests used; the
// cache's only when the provider reported them.
type acpTurnTokens struct {
	InputTokens       int  `json:"inputTokens"`
	OutputTokens      int  `json:"outputTokens"`
	TotalTokens       int  `json:"totalTokens"`
	CachedReadTokens  *int `json:"cachedReadTokens,omitempty"`
	CachedWriteTokens *int `json:"cachedWriteTokens,omitempty"`
}

// acpTurnUsage sums the usage of the answers after the prompt's message
// prompt in messages (the conversation after its turn); nil when the
// message is not there (a compaction summarised it away).
func acpTurnUsage(messages []any, prompt *userMessage) *acpTurnTokens {
	at := slices.IndexFunc(messages, func(m any) bool { u, ok := m.(*userMessage); return ok && u == prompt })
	if at < 0 {
		return nil
	}
	var u acpTurnTokens
	var read, write int
	for _, m := range messages[at+1:] {
		if a, ok := m.(*assistantMessage); ok {
			u.InputTokens = addTokens(u.InputTokens, a.Usage.Input)
			u.OutputTokens = addTokens(u.OutputTokens, a.Usage.Output)
			total := cmp.Or(a.Usage.TotalTokens, addTokens(addTokens(a.Usage.Input, a.Usage.Output), addTokens(a.Usage.CacheRead, a.Usage.CacheWrite)))
			u.TotalTokens = addTokens(u.TotalTokens, total)
			read = addTokens(read, a.Usage.CacheRead)
			write = addTokens(write, a.Usage.CacheWrite)
		}
	}
	if read > 0 {
		u.CachedReadTokens = &read
	}
	if write > 0 {
		u.CachedWriteTokens = &write
	}
	return &u
}

// prompt makes the message (reading its links' files under starting,
// which a session/cancel after it ends) and starts (or queues) it,
// unless session/cancel came first (it answered then). Before it starts
// it waits (waitTurn) for what it must come after; a prompt refused
// because another session took the free slot meanwhile waits again.
func (as *acpSession) prompt(p *acpPending) (any, error) {
	text := p.prompt.text(func(path string) (string, error) { return as.readLink(p.starting, path) })
	name, rest, own := acpOwnCommand(text)
	for noted := false; ; {
		noted = as.waitTurn(p.starting, own && name == "compact", noted)
		result, again, err := as.start(p, text, name, rest, own)
		if !again {
			return result, err
		}
	}
}

// waitTurn waits, until ctx ends (a session/cancel: then the prompt is
// answered, and no longer pending), for what a prompt comes after:
// /compact (compact) for every run of the session (turns, the follow-ups
// behind them, a loop's fire), which it would stop; any prompt for the
// run a session/cancel stopped, which takes no follow-up, and, when the
// session is idle, for a place among the sessions' runs (--max-running), with
// a note the first time (noted says it was given; the result says so
// after).
func (as *acpSession) waitTurn(ctx context.Context, compact, noted bool) bool {
	wait := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for ch := as.s.runSettled(); compact && ch != nil; ch = as.s.runSettled() {
		if !wait(ch) {
			return noted
		}
	}
	as.mu.Lock()
	stopping := as.stopping
	as.mu.Unlock()
	if stopping != nil && !wait(stopping) {
		return noted
	}
	runs := &as.agent.h.runs
	for ch := runs.placeFreed(as.s); ch != nil && as.s.runSettled() == nil; ch = runs.placeFreed(as.s) {
		if !noted {
			noted = true
			as.updates.note(acpWaitingNote(runs.limit))
		}
		if !wait(ch) {
			return noted
		}
	}
	return noted
}

// acpWaitingNote says a prompt waits for a place: limit other sessions'
// turns run.
func acpWaitingNote(limit int) string {
	if limit == 1 {
		return "Waiting for a free slot: another session's turn is running (--max-running 1)."
	}
	return fmt.Sprintf("Waiting for a free slot: %d other sessions' turns are running (--max-running %d).", limit, limit)
}

// start starts (or queues) the prompt p whose text is text (name and
// rest: rpi's own command, when own), unless a session/cancel answered
// it first. again says another session took the free slot meanwhile:
// the prompt is pending again, to wait for it.
func (as *acpSession) start(p *acpPending, text, name, rest string, own bool) (_ any, again bool, _ error) {
	call := p.call
	as.startMu.Lock()
	defer as.startMu.Unlock()
	i := slices.Index(as.pending, p)
	if i < 0 {
		return acpDeferred{}, false, nil // cancelled, and answered
	}
	if own {
		as.pending = slices.Delete(as.pending, i, i+1)
		result, err := as.ownCommand(call, name, rest)
		return result, false, err
	}
	msg := &userMessage{Role: "user", Content: append(textBlocks(as.s.expandSlash(text)), p.prompt.images...),
		Timestamp: as.agent.h.env.clock.Now().UnixMilli()}
	// Refused for another session's run while start is still deciding:
	// the prompt waits again. Refused later (the acceptance comes from the
	// background when the session file is written again first): answered.
	const undecided, retried, decided = 0, 1, 2
	var state atomic.Int32
	as.s.startPrompt(msg, "followUp", func(queued bool, err error) {
		switch {
		case errors.Is(err, errElsewhere) && state.CompareAndSwap(undecided, retried):
		case err != nil:
			as.agent.conn.answer(call.id, call.method, nil, acpPromptError(err), false)
		default:
			as.title(msg)
		}
	}, func(end promptEnd) {
		result := acpStopResult{StopReason: "cancelled"}
		if end.ran {
			as.sendUsage(end.answer)
			result.Usage = acpTurnUsage(as.s.conv.messages(), msg)
		}
		if end.ran && !end.aborted {
			result.StopReason = acpStopReason(false, end.answer)
		}
		as.agent.conn.answer(call.id, call.method, result, nil, false)
	})
	again = !state.CompareAndSwap(undecided, decided)
	if !again {
		as.pending = slices.Delete(as.pending, i, i+1)
	}
	return acpDeferred{}, again, nil
}

// acpPromptError is a refused prompt's error: no usable model is -32000
// (Zed opens its login view), the rest -32603 with the core's message.
func acpPromptError(err error) error {
	code := acpInternalError
	if errors.Is(err, errNoModel) {
		code = acpAuthRequired
	}
	return &acpError{Code: code, Message: err.Error()}
}

// title sends the session's title from its first prompt, when it has no
// name: the message's first line.
func (as *acpSession) title(msg *userMessage) {
	as.mu.Lock()
	first := !as.titled
	as.titled = true
	as.mu.Unlock()
	if text, _ := userText(msg); first && summaryLine(text) != "" {
		as.send(acpSessionInfo{"session_info_update", summaryLine(text), timestamp(as.agent.h.env.clock.Now())})
	}
}

// ownCommand answers /compact and /name in-band: a note, then end_turn
// (cancelled for a compaction session/cancel stopped).
func (as *acpSession) ownCommand(call *acpRequest, name, rest string) (any, error) {
	if name == "name" {
		if err := as.s.setSessionName(rest); err != nil {
			as.updates.say("Usage: /name <title> (" + err.Error() + ")")
		} else {
			as.mu.Lock()
			as.titled = true
			as.mu.Unlock()
			as.updates.say("Session named: " + strings.TrimSpace(rest))
		}
		return acpStopResult{StopReason: "end_turn"}, nil
	}
	as.updates.takeCompaction() // an earlier (automatic) one's
	as.s.compact(rest, false, func(_ compactionResult, err error) {
		// A compaction that ran has had its note (compaction_end); one
		// that could not start has not.
		end := as.updates.takeCompaction()
		if err != nil && end == nil {
			as.updates.compactionFailed(err.Error())
		}
		reason := "end_turn"
		if end != nil && end.Aborted {
			reason = "cancelled"
		}
		as.sendUsage(nil)
		as.agent.conn.answer(call.id, call.method, acpStopResult{StopReason: reason}, nil, false)
	})
	return acpDeferred{}, nil
}

// acpCancel cancels a session's turn (rpc's abort): the prompts queued
// behind it (and those not started yet) answer cancelled at once and
// never run (a link one of them is reading is given up), the model stream, the running tool and any permission
// request end, and the running prompt answers cancelled once the run has
// stopped. An unknown session is ignored.
// Params: sessionId.
func acpCancel(a *acpAgent, params acpParams) error {
	if as, err := a.session(params); err == nil {
		as.cancel()
	}
	return nil
}

// acpSetTitle names a session (unstable in ACP): one open here (then
// session_info_update, and rpi titles it from a prompt no more), or one
// on disk that session/list shows (a session_info entry appended to its
// file, as pi's /name does). The title is trimmed; empty is refused.
// Params: sessionId, title. Answer: {title} (as stored); -32002 for a
// session that does not exist.
func acpSetTitle(a *acpAgent, req *acpRequest) (any, error) {
	id, err := acpSessionID(req.params)
	if err != nil {
		return nil, err
	}
	title, err := req.params.str("title")
	if err != nil {
		return nil, err
	}
	if title = strings.TrimSpace(title); title == "" {
		return nil, invalidParams("Invalid field title: must not be empty")
	}
	a.mu.Lock()
	as := a.sessions[id]
	a.mu.Unlock()
	return a.answerLater(req, func() (any, error) {
		if as != nil {
			if err := as.s.setSessionName(title); err != nil {
				return nil, err
			}
			as.mu.Lock()
			as.titled = true
			as.mu.Unlock()
			return acpTitleResult{title}, nil
		}
		if a.noSession {
			return nil, acpSessionNotFound(id)
		}
		path, err := findSessionFile(a.h.ctx, a.store, id, "")
		if err != nil {
			return nil, acpSessionNotFound(id)
		}
		if err := nameSessionFile(a.h.ctx, path, title, cmp.Or(a.h.env.lockWait, sessionLockWait), a.h.env.clock, a.h.goBackground); err != nil {
			return nil, acpOpenError(id, err)
		}
		return acpTitleResult{title}, nil
	}, nil)
}

// acpTitleResult is session/set_title's answer: the title stored.
type acpTitleResult struct {
	Title string `json:"title"`
}

// acpSessionNotFound is -32002, as the unstable schema has it for a
// session/set_title of a session that does not exist.
func acpSessionNotFound(id string) error {
	return &acpError{Code: acpResourceNotFound, Message: "Resource not found: no session has the id " + id}
}

// acpCancelRequest withdraws one of the client's requests not answered
// yet ($/cancel_request): a prompt as session/cancel cancels its session's
// turn (it answers cancelled); any other is answered -32800 at once,
// its work finishing unseen (a session it opened is closed again). An
// id not open (answered already) is ignored: the cancel came too late.
// Params: requestId.
func acpCancelRequest(a *acpAgent, params acpParams) error {
	id := params.raw("requestId")
	if id == nil {
		return invalidParams("Invalid field requestId: required")
	}
	if !a.conn.withdraw(id) {
		fmt.Fprintf(a.conn.mistakes, "rpi: $/cancel_request of id %s, which is not open: ignored\n", id)
	}
	return nil
}

// cancel is session/cancel's work (acpCancel). The turn is stopped
// before anything is written (a client that does not read holds up the
// answers, not the stop): the prompts not started, then those queued,
// are answered after, before the running prompt.
func (as *acpSession) cancel() {
	a := as.agent
	as.startMu.Lock()
	defer as.startMu.Unlock()
	for _, p := range as.pending {
		as.s.postCall(func() { a.conn.answer(p.call.id, p.call.method, acpStopResult{StopReason: "cancelled"}, nil, false) })
	}
	as.pending = nil
	as.stopStarting()
	as.starting, as.stopStarting = context.WithCancel(as.s.ctx)
	stopping := as.s.cancelTurn()
	as.mu.Lock()
	as.stopping = stopping
	as.mu.Unlock()
}

// ---- The session's sink ----

// send writes one update of the session.
func (as *acpSession) send(update any) {
	as.agent.conn.notify("session/update", acpUpdateOf(as.id, update))
}

func (as *acpSession) newID() string { return newUUIDv7(as.agent.h.env.clock.Now()) }

// event maps one of the core's events to the session's updates.
func (as *acpSession) event(ev event) { as.updates.event(ev.Type, ev.Data) }

func (as *acpSession) gatheredEvent(ev event) { as.updates.event(ev.Type, ev.Data) }

// flush has nothing to do: ACP's updates are written as they are made.
func (as *acpSession) flush() {}

// sendUsage sends usage_update: the context's size and the session's
// cost, all of it, as get_session_stats counts it. answer (nil: the session's current model) names the model whose
// window counts; it does not take the session's lock, which the end of a
// turn may hold.
func (as *acpSession) sendUsage(answer *assistantMessage) {
	var m *model
	if answer != nil {
		for _, c := range as.s.set.catalog.of(answer.Provider) {
			if c.ID == answer.Model {
				m = c
			}
		}
	} else {
		m = as.s.state().Model
	}
	as.send(acpUsageOf(as.s.conv.contextTokens(as.s.conv.messages()), m, as.s.conv.entryStats().Cost))
}

// ---- The session's ui ----

// show turns notify warnings and errors into notes of their severity
// (a retry's warning an info); the other one-way requests (status,
// widgets, titles, notify infos) are dropped.
func (as *acpSession) show(req uiRequest) {
	if req.Method == "notify" && (req.NotifyType == noteWarning || req.NotifyType == noteError) {
		as.updates.notify(req.NotifyType, req.Message)
	}
}

// ask asks the user through a permission request: a choice (ask_user's
// options) as one allow_once option per choice, a yes-or-no as allow and
// reject. A free-text question is a form (askInForm) when the client
// offers forms; else it cannot be asked here, and the model is told.
// The question and the choices are shown as tool titles are
// (acpShownTitle: control and format characters escaped), and the choice
// goes back as it was given.
func (as *acpSession) ask(ctx context.Context, req uiRequest) uiAnswer {
	var options []acpPermissionOption
	switch req.Method {
	case "select":
		for i, o := range req.Options {
			options = append(options, acpPermissionOption{fmt.Sprint(i), acpShownTitle(o), "allow_once"})
		}
	case "confirm":
		options = []acpPermissionOption{{"allow", "Yes", "allow_once"}, {"reject", "No", "reject_once"}}
	default:
		if as.agent.clientCaps().elicitationForm {
			return as.askInForm(ctx, req)
		}
		text := "The user cannot type an answer in this editor: ask again with options to choose from, or go on without an answer."
		return uiAnswer{value: &text}
	}
	call := as.updates.permissionCall(as.updates.current())
	if call.Title == "" || call.Title == "ask_user" {
		call.Title = acpShownTitle(req.Title)
	}
	chosen := as.agent.conn.requestPermission(ctx, as.id, call, options)
	switch {
	case chosen == "":
		return uiAnswer{cancelled: true}
	case req.Method == "confirm":
		yes := chosen == "allow"
		return uiAnswer{confirmed: &yes}
	}
	var i int
	fmt.Sscan(chosen, &i)
	return uiAnswer{value: &req.Options[i]}
}

// approve is the approval gate (docs/acp.md): the call's tool_call goes out
// first (with the diff for edit and write, and in its title where a
// symlink takes the path, as rpc's dialog says it; for one that cannot be
// done, saying so and why, as rpc's dialog says it), then a permission
// request tied to its id. allow runs it (one that cannot be done tells
// the model why); allow_always runs it and every later call of its tool
// in this session without asking; anything else (reject, a cancelled
// request, an error, a closed connection) denies it. No timeout: the
// request waits until the turn is cancelled.
func (as *acpSession) approve(ctx context.Context, a approval) bool {
	c, changes := a.call.(changer)
	switch {
	case a.failed != nil:
		_, message := a.describe()
		as.updates.cannot(a.toolCallID, message)
	case changes:
		ch := c.change()
		var before *string
		where := ch.where
		switch {
		case ch.existed && ch.before != nil:
			text := string(ch.before)
			before = &text
		case ch.existed: // too large, or the editor would not give its text
			where += " (replacing a file whose text is not shown)"
		}
		as.updates.ready(a.toolCallID, ch.path, where, before, string(ch.after))
	}
	as.mu.Lock()
	always := as.always[a.toolName]
	as.mu.Unlock()
	if !always {
		options := []acpPermissionOption{{"allow", "Allow", "allow_once"},
			{"allow_always", "Always allow " + a.toolName + " in this session", "allow_always"}, {"reject", "Reject", "reject_once"}}
		switch as.agent.conn.requestPermission(ctx, as.id, as.updates.permissionCall(a.toolCallID), options) {
		case "allow":
		case "allow_always":
			as.mu.Lock()
			as.always[a.toolName] = true
			as.mu.Unlock()
		default:
			return false
		}
	}
	as.updates.running(a.toolCallID)
	return true
}

// asks reports whether a call of tool waits for the user's approval (the
// sink asks it: it reads this front end's copy of the set, not the
// session's).
func (as *acpSession) asks(tool string, call toolCall) bool {
	as.mu.Lock()
	defer as.mu.Unlock()
	return confirms(as.confirm, tool, call) && !as.always[tool]
}

// acpConfirmed is what the core puts behind the approval gate in the
// approvals mode value: its tools, and in ask and edits every MCP tool
// its server does not mark read-only too (a server's tool may do
// anything a command can).
func acpConfirmed(value string, tools []string) []string {
	if value == "ask" || value == "edits" {
		return append(slices.Clone(tools), confirmMCPUnmarked)
	}
	return tools
}
