package main

// rpc over rpi serve (docs/serve.md): a connection whose first line is
// not JSON-RPC. It is attached to one session at a time — a new one the
// host opens for it, or one it names in its hello or in session_attach —
// and gets that session's events, numbered (seq), after a replay of
// those it missed. Its session changes (new_session, switch_session,
// fork, clone) move this connection only: a session other clients watch
// stays as it is for them.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// servedRPC is one rpc connection of rpi serve.
type servedRPC struct {
	sh       *serveHost
	sc       *servedConn
	wire     wire
	form     int  // the stage's form of its records: formRPC, or formPi with pi's shapes
	observer bool // docs/serve.md's observer role: it watches, and may only ask

	// Its attachment: the session and this connection's view of it (a
	// new rpcServer for each session it attaches to, so that an answer
	// a handler left in the background still reaches the session it was
	// for). Changed on the connection's loop only.
	srv    *rpcServer
	st     *stage
	client *stageClient
	// announce, when set, announces the session just opened for the
	// connection (session_started, its warnings, loops and MCP servers),
	// once the answer that opened it is written.
	announce func()
}

// newServedRPCWire is newServedRPC as rpi serve makes a connection's wire.
func newServedRPCWire(sh *serveHost, sc *servedConn) servedWire { return newServedRPC(sh, sc) }

func newServedRPC(sh *serveHost, sc *servedConn) *servedRPC {
	return &servedRPC{sh: sh, sc: sc, wire: rpcWire{}, form: formRPC}
}

// handle serves one line: the first is a hello, or the host opens a new
// session for the connection, with the serve process's flags, and the
// line is its first command.
func (c *servedRPC) handle(f frame) {
	// The connection's attachment changes under its answer lock only: a
	// change answered from the background reads it (stillOn).
	c.sc.conn.answerMu.Lock()
	defer c.sc.conn.answerMu.Unlock()
	if !c.sc.queue.accepting() {
		return // refused, or detached: its connection is closing
	}
	if c.srv == nil {
		if r, isHello := decodeHello(f); isHello {
			data, err := c.hello(r)
			c.answer(r.id, "hello", data, err)
			c.announceOpened()
			return
		}
		if err := c.attachNew(sessionOptions{cwd: c.sh.h.set.cfg.cwd}); err != nil {
			c.answer(nil, "connect", nil, err)
			c.sc.conn.out.flush()
			c.sc.queue.finish(nil) // nothing to serve it with: the refusal is written, then it is closed
			return
		}
		c.announceOpened()
	}
	c.srv.handleFrameLocked(f)
	c.announceOpened() // a session the command opened for it (session_attach, a session change apart)
}

// announceOpened announces the session just opened for the connection,
// if one was.
func (c *servedRPC) announceOpened() {
	if c.announce != nil {
		announce := c.announce
		c.announce = nil
		announce()
	}
}

// decodeHello reads f as a hello line; isHello is false for any other
// line (a hello that is not valid JSON is no hello: that line fails as
// any other would).
func decodeHello(f frame) (*rpcRequest, bool) {
	if f.tooLong {
		return nil, false
	}
	r, err := decodeRequest(f.line, true, new(rpcRequest))
	if err != nil || r.typ != "hello" {
		return nil, false
	}
	return r, true
}

// answer writes a response of this connection's own (hello, and the
// refusal when no session can open for it).
func (c *servedRPC) answer(id []byte, command string, data any, err error) {
	c.sc.conn.out.send(func(buf []byte) ([]byte, error) {
		return encodeResponse(c.wire, buf, id, command, data, err)
	})
}

// end detaches the connection from its session, which goes on.
func (c *servedRPC) end() {
	if c.st != nil {
		c.st.detach(c.client)
	}
}

// helloAnswer is the answer to hello and session_attach.
type helloAnswer struct {
	SessionID string `json:"sessionId"`
	Cursor    int64  `json:"cursor"`
	Resync    bool   `json:"resync"`
}

// hello is the first line of a connection (docs/serve.md): it sets pi's
// shapes (compat: "pi"), the role (controller or observer) and attaches
// to a live session (attach, with cursor: the seq of the last event the
// client saw, whose successors are replayed) or to a new one opened with
// options (the flags a bridge passes for the session: helloOptions).
// Fields: [compat], [attach], [cursor], [role], [options].
// Answer: {sessionId, cursor (the latest event's seq), resync (true when
// the events after cursor are no longer kept)}. Events: a new session's
// session_started after the answer.
func (c *servedRPC) hello(r *rpcRequest) (_ any, err error) {
	compat, err := r.optStr("compat")
	if err != nil {
		return nil, err
	}
	wire, form := wire(rpcWire{}), formRPC
	switch compat {
	case "", "rpi":
	case "pi":
		wire, form = piWire{}, formPi
	default:
		return nil, invalid("compat", `"pi" or "rpi"`)
	}
	role, err := readRole(r)
	if err != nil {
		return nil, err
	}
	attach, err := r.optStr("attach")
	if err != nil {
		return nil, err
	}
	cursor, err := readCursor(r)
	if err != nil {
		return nil, err
	}
	var o sessionOptions
	switch {
	case attach != "" && r.has("options"):
		return nil, errors.New("Invalid hello: options are for a new session; a session attached to keeps its own")
	case attach == "" && role == "observer":
		return nil, errors.New("Invalid hello: an observer watches a session: name it (attach)")
	case attach == "":
		if o, err = c.helloOptions(r); err != nil {
			return nil, err
		}
	}
	// Read whole: the connection takes its shapes and role only now (a
	// failed hello leaves it as it was, to say hello again).
	c.wire, c.form, c.observer = wire, form, role == "observer"
	defer func() {
		if err != nil {
			c.wire, c.form, c.observer = rpcWire{}, formRPC, false
		}
	}()
	if attach != "" {
		return c.attachTo(attach, cursor)
	}
	if o.id != "" {
		return c.attachByID(o, o.id, cursor)
	}
	if o.file != "" && !o.flags.noSession && c.sh.findSessionFile(&o, *o.flags) == nil {
		if row, ok := readSessionRow(o.file); ok && row.SessionID != "" { // as for a session id: its file's
			return c.attachByID(o, row.SessionID, cursor)
		}
	}
	if err := c.attachNew(o); err != nil {
		return nil, err
	}
	return helloAnswer{SessionID: c.srv.conv.info().id, Cursor: c.st.lastSeq()}, nil
}

// readRole reads a hello's or session_attach's role.
func readRole(r *rpcRequest) (string, error) {
	if !r.has("role") {
		return "controller", nil
	}
	return r.enum("role", []string{"controller", "observer"})
}

// readCursor reads cursor: the seq of the last event the client saw
// (-1 when absent: no replay).
func readCursor(r *rpcRequest) (int64, error) {
	return r.optInt64("cursor", 0, 1<<53, -1) // 2^53: what every client's JSON numbers hold exactly
}

// helloOptions reads a hello's options: the flags a bridge was given for
// the session the host opens for it (docs/serve.md#bridges), by their
// long names, a string for a valued flag and true for a boolean one.
// Where it opens (session, session-id, name, cwd) goes in the session's
// options; the rest (model, provider, thinking, tools, no-tools,
// exclude-tools, no-session, confirm) in its own flags, over the host's,
// checked as parseArgs checks them. Any other option is refused, by name.
func (c *servedRPC) helloOptions(r *rpcRequest) (sessionOptions, error) {
	o := sessionOptions{cwd: c.sh.h.set.cfg.cwd}
	if !r.has("options") {
		return o, nil
	}
	raw, _ := r.field("options")
	var opts map[string]json.RawMessage
	if json.Unmarshal(raw, &opts) != nil || opts == nil {
		return o, invalid("options", "an object of flags and their values")
	}
	text := func(key string) (string, error) {
		var v string
		if json.Unmarshal(opts[key], &v) != nil || v == "" {
			return "", invalid("options."+key, "a non-empty string")
		}
		return v, nil
	}
	on := func(key string) (bool, error) {
		var v bool
		if json.Unmarshal(opts[key], &v) != nil || !v {
			return false, invalid("options."+key, "true")
		}
		return v, nil
	}
	flags := c.sh.h.set.cfg
	if opts["model"] != nil || opts["provider"] != nil {
		flags.model, flags.provider = "", "" // named together: neither is the host's
	}
	var noTools bool
	for _, key := range slices.Sorted(maps.Keys(opts)) {
		var err error
		switch key {
		case "session":
			o.file, err = text(key)
			o.startInEmpty = true // as --session
		case "session-id":
			if o.id, err = text(key); err == nil && !validSessionID(o.id) {
				err = invalid("options.session-id", fmt.Sprintf("letters, digits, '.', '_' and '-', at most %d", maxSessionIDLength))
			}
		case "name": // trimmed, and refused blank, as --name is
			if o.name, err = text(key); err == nil {
				if o.name = strings.TrimSpace(o.name); o.name == "" {
					err = invalid("options.name", "a non-blank string")
				}
			}
		case "cwd":
			o.cwd, err = helloCwd(text(key))
		case "model":
			flags.model, err = text(key)
		case "provider":
			flags.provider, err = text(key)
		case "thinking":
			if flags.thinking, err = text(key); err == nil && !slices.Contains(thinkingLevels, flags.thinking) {
				err = invalid("options.thinking", strings.Join(thinkingLevels, ", "))
			}
		case "tools":
			var list string
			if list, err = text(key); err == nil {
				flags.tools, err = toolsFlag("options.tools", list)
				flags.toolsGiven = true
			}
		case "no-tools":
			noTools, err = on(key)
		case "exclude-tools":
			var list string
			if list, err = text(key); err == nil {
				flags.excludeTools, err = toolList("options.exclude-tools", list, false)
			}
		case "no-session":
			flags.noSession, err = on(key)
		case "confirm":
			var list string
			if list, err = text(key); err == nil {
				flags.confirm, err = toolList("options.confirm", list, true)
			}
		default:
			err = fmt.Errorf("Invalid hello: the option %q is not taken per session (options: %s)", key, strings.Join(helloOptionNames, ", "))
		}
		if err != nil {
			return o, err
		}
	}
	if noTools { // as --no-tools
		flags.tools, flags.toolsGiven = withNoTools(flags.tools), true
	}
	if o.id != "" && o.file != "" {
		return o, errors.New("Invalid hello: options.session-id does not go with options.session")
	}
	o.flags = &flags
	return o, nil
}

// helloOptionNames are the options a hello takes.
var helloOptionNames = []string{"session", "session-id", "name", "cwd", "model", "provider", "thinking",
	"tools", "no-tools", "exclude-tools", "no-session", "confirm"}

// helloCwd checks a hello's cwd: an absolute path to a directory.
func helloCwd(dir string, err error) (string, error) {
	if err != nil {
		return "", err
	}
	if info, statErr := os.Stat(dir); !filepath.IsAbs(dir) || statErr != nil || !info.IsDir() {
		return "", invalid("options.cwd", "an absolute path to a directory")
	}
	return filepath.Clean(dir), nil
}

// ---- Attaching ----

// attachNew opens a new session as o says, in the host, and attaches the
// connection to it; its announcement is left to announce.
func (c *servedRPC) attachNew(o sessionOptions) error {
	st, err := c.sh.openStage(o)
	if err != nil {
		return err
	}
	if _, err := c.moveTo(st, -1, st.firstID, false); err != nil {
		return err
	}
	srv := c.srv
	c.announce = func() { srv.announceStart() }
	return nil
}

// attachByID attaches the connection to the session live in the host
// whose id is id (o.id, or the id in o.file's header, when it is that
// file's), as attachTo does (o's other options are for a session being
// opened: they leave it as it is, but for its cwd), or to a new session
// opened as o says when none is. Two hellos naming one id or file open
// one session: the second waits for the first's opening (openOrWait),
// then attaches.
func (c *servedRPC) attachByID(o sessionOptions, id string, cursor int64) (any, error) {
	s := c.sh.h.sessions.openOrWait(id)
	switch {
	case s == nil:
		defer c.sh.h.sessions.loaded(id)
	case o.file != "" && s.conv.info().path != o.file: // another file with that id: opening o.file fails as it would
	default:
		if err := liveAsAsked(s, id, o); err != nil {
			return nil, err
		}
		return c.attachTo(id, cursor)
	}
	if err := c.attachNew(o); err != nil {
		return nil, err
	}
	return helloAnswer{SessionID: c.srv.conv.info().id, Cursor: c.st.lastSeq()}, nil
}

// liveAsAsked refuses a hello's attaching to s, the session live in the
// host with id, when the hello's cwd is not s's (its tools work in
// another folder than the client said) or its no-session is not s's (a
// client that asked for no file would have its prompts written to one,
// or one that asked for a file none). attach names any session as it is.
func liveAsAsked(s *session, id string, o sessionOptions) error {
	inMemory := s.conv.info().path == ""
	switch {
	case s.set.cwd != o.cwd:
		return fmt.Errorf("Invalid hello: session %s is live in the host in another cwd (%s); attach names it as it is", id, s.set.cwd)
	case inMemory && !o.flags.noSession:
		return fmt.Errorf("Invalid hello: session %s is live in the host with no session file (no-session); attach names it as it is", id)
	case !inMemory && o.flags.noSession:
		return fmt.Errorf("Invalid hello: session %s is live in the host with a session file, and the hello says no-session; attach names it as it is", id)
	}
	return nil
}

// attachTo attaches the connection to the session with id: a live one,
// or one the host opens from its file. With a cursor >= 0 the events
// after it are replayed first, when they are all still kept.
func (c *servedRPC) attachTo(id string, cursor int64) (any, error) {
	st, opened, err := c.sh.stageOf(id)
	if err != nil {
		return nil, err
	}
	res, err := c.moveTo(st, cursor, id, true)
	if err != nil {
		return nil, err
	}
	if opened || res.opened {
		srv := c.srv
		c.announce = func() { srv.announceStart() }
	}
	return helloAnswer{SessionID: id, Cursor: res.cursor, Resync: res.resync}, nil
}

// moveTo detaches the connection from its session (which goes on) and
// attaches it to st's, the session with id ("": st's as it is), with a
// replay after cursor (-1: none). When st's session is closed as it is
// attached to (idle) or changed in place, and cannot be opened again
// (reopen false: a session opened for this attach, not to be opened
// again: attachStage), the connection goes back to its session, missing
// nothing of it, and the error is the answer.
func (c *servedRPC) moveTo(st *stage, cursor int64, id string, reopen bool) (attachResult, error) {
	old, oldClient := c.st, c.client
	var oldID string
	if old != nil {
		oldID = c.srv.conv.info().id
		old.detach(oldClient)
	}
	res, err := c.attachStage(st, cursor, id, reopen)
	if err != nil && old != nil {
		if again, back := c.attachStage(old, oldClient.lastSeq.Load(), oldID, true); back != nil {
			c.st, c.client, c.srv = nil, nil, nil // nothing to go back to: the next line opens a session
		} else if again.opened {
			srv := c.srv
			c.announce = func() { srv.announceStart() }
		}
	}
	return res, err
}

// attachStage attaches the connection to st's session, the one with id
// ("": st's as it is), opened again if it was closed (idle) as it was
// found, or if a change of st's session made in place (another client's,
// before this attach) left it: then it is opened from its file (opened,
// to be announced), and st stays with the session changed to. A session
// the host opened for this attach (a new one, or a copy: reopen false)
// is not opened again: another client attached to it first, and the
// attach fails.
func (c *servedRPC) attachStage(st *stage, cursor int64, id string, reopen bool) (attachResult, error) {
	c.sc.conn.out.flush()
	client := &stageClient{out: c.sc.conn.out, queue: c.sc.queue, form: c.form, observer: c.observer}
	if id == "" {
		id = st.s.conv.info().id
	}
	res, err := st.attach(client, cursor, id)
	switch {
	case err != nil && !reopen:
		return res, attachFailure(err, textClosedBeforeAttached, textChangedBeforeAttached)
	case err != nil:
		again, opened, err := c.sh.stageOf(id)
		if err != nil {
			return res, err
		}
		if res, err = again.attach(client, cursor, id); err != nil {
			return res, attachFailure(err, "The session was closed as it was attached to: attach again",
				"Another client changed the session to another as it was attached to: attach again")
		}
		st, res.opened = again, opened
	}
	c.sc.queue.whenSlow(func() []byte { return detachedRecord(client.lastSeq.Load()) })
	c.st, c.client = st, client
	c.srv = &rpcServer{session: st.s, conn: c.sc.conn, out: c.sc.conn.out, wire: c.wire, dialogs: st.dialogs, served: c}
	return res, nil
}

// attachFailure is the answer to an attach that st.attach refused (err):
// closed, when the host closed the session for being idle; changed, when
// another client changed it in place.
func attachFailure(err error, closed, changed string) error {
	if errors.Is(err, errStageChanged) {
		return errors.New(changed)
	}
	return errors.New(closed)
}

// detachedRecord is the last record of a client detached for falling
// too far behind: cursor is the seq of the last event it was sent.
func detachedRecord(cursor int64) []byte {
	return fmt.Appendf(nil, `{"type":"detached","data":{"reason":"slow","cursor":%d}}`+"\n", cursor)
}

// ---- Commands of rpi serve's own ----

// servedCommands are the rpc commands only a connection of rpi serve
// takes.
var servedCommands = lazy[map[string]handler]{build: func() map[string]handler {
	return map[string]handler{
		"hello":          (*rpcServer).helloAgainCommand,
		"session_attach": (*rpcServer).sessionAttachCommand,
		"host_status":    (*rpcServer).hostStatusCommand,
	}
}}

// observerCommands are what an observer may send besides get_* commands.
var observerCommands = []string{"session_list", "host_status", "session_attach", "hello"}

// mayObserve reports whether an observer may send the command typ.
func mayObserve(typ string) bool {
	return strings.HasPrefix(typ, "get_") || slices.Contains(observerCommands, typ)
}

// errObserver refuses an observer's command that changes something.
var errObserver = errors.New("This connection observes the session")

// helloAgainCommand refuses a hello that is not the first line.
func (s *rpcServer) helloAgainCommand(r *rpcRequest) (any, error) {
	return nil, errors.New("hello comes first on a connection; to attach to another session, send session_attach")
}

// sessionAttachCommand attaches this connection to another session (a
// live one, or one the host opens from its file), leaving its current
// one to its other clients (it goes on; idle, it closes after
// --idle-close).
// Fields: sessionId, [cursor] (the seq of the last event the client saw:
// the kept events after it are replayed), [role] (controller or
// observer; default controller).
// Answer: {sessionId, cursor, resync}, after the replay.
func (s *rpcServer) sessionAttachCommand(r *rpcRequest) (any, error) {
	id, err := r.str("sessionId")
	if err != nil {
		return nil, err
	}
	cursor, err := readCursor(r)
	if err != nil {
		return nil, err
	}
	role, err := readRole(r)
	if err != nil {
		return nil, err
	}
	c := s.served
	c.observer = role == "observer"
	return c.attachTo(id, cursor)
}

// hostStatus is the answer to host_status.
type hostStatus struct {
	Sessions    []hostSession `json:"sessions"`
	Connections int           `json:"connections"`
	Running     int           `json:"running"`
	MaxRunning  int           `json:"maxRunning"`
}

// hostSession is one live session in host_status.
type hostSession struct {
	SessionID string  `json:"sessionId"`
	Cwd       string  `json:"cwd"`
	Name      *string `json:"name"`
	Running   bool    `json:"running"`
	Clients   int     `json:"clients"`
	Cursor    int64   `json:"cursor"`
}

// hostStatusCommand answers what the host holds: its live sessions (with
// whether a turn runs, how many clients are attached and the latest
// event's seq), its connections, the turns running and their limit.
// Fields: none. Answer: {sessions, connections, running, maxRunning}.
func (s *rpcServer) hostStatusCommand(r *rpcRequest) (any, error) {
	sh := s.served.sh
	status := hostStatus{Sessions: []hostSession{}, Connections: sh.connectionCount(), MaxRunning: sh.h.runs.limit}
	for _, st := range sh.liveStages() {
		info := st.s.conv.info()
		row := hostSession{SessionID: info.id, Cwd: st.s.set.cwd, Running: st.s.isRunning(), Clients: st.clientCount(), Cursor: st.lastSeq()}
		if info.name != "" {
			row.Name = &info.name
		}
		if row.Running {
			status.Running++
		}
		status.Sessions = append(status.Sessions, row)
	}
	return status, nil
}

// ---- Session changes ----

// shared reports whether other clients are attached to the connection's
// session: a session change then moves this connection to a session of
// its own (apart) rather than changing the one they watch.
func (c *servedRPC) shared() bool { return c.st.clientCount() > 1 }

// apart opens a session as o says, with the flags of the connection's
// session, and moves the connection to it; once
// the answer (data) is written, the new session is announced as stdio's
// start announces one, then tell, if any, is sent.
func (c *servedRPC) apart(o sessionOptions, data any, tell *uiRequest) (any, error) {
	flags := c.srv.set.cfg // the session's own flags go with it
	o.flags = &flags
	st, err := c.sh.openStage(o)
	if err != nil {
		return nil, err
	}
	if _, err := c.moveTo(st, -1, st.firstID, false); err != nil {
		return nil, err
	}
	srv := c.srv
	c.announce = func() {
		srv.announceStart()
		if tell != nil {
			srv.tell(*tell)
		}
	}
	return data, nil
}

// newSessionApart is new_session on a shared session: a new session in
// the same working directory, for this connection.
func (c *servedRPC) newSessionApart(parent string) (any, error) {
	if parent != "" {
		return nil, errors.New("Invalid new_session: parentSession is taken only while no other client watches the session")
	}
	return c.apart(sessionOptions{cwd: c.srv.set.cwd}, notCancelled, nil)
}

// switchApart is switch_session in rpi serve: a session the host has
// live (this connection's, or another's) is attached to; any other is
// opened for this connection when other clients watch its session (else
// ok is false, and the session switches as over stdio). A file that is
// not there fails as over stdio, where --session would make a new
// session there.
func (c *servedRPC) switchApart(path string) (data any, ok bool, err error) {
	if st, _ := c.liveStage(path); st == nil && !c.shared() {
		return nil, false, nil
	}
	data, err = c.switchAway(path)
	return data, true, err
}

// liveStage is the stage of the session live in the host whose file is
// path (relative to the session's cwd), and that session's id; or nil.
func (c *servedRPC) liveStage(path string) (*stage, string) {
	return c.sh.liveStageAt(sessionPathIn(c.srv.set.cwd, c.srv.set.home, path))
}

// switchAway is switch_session apart from the connection's session: to
// the live session whose file path is (attached to), or to the file,
// opened for this connection.
func (c *servedRPC) switchAway(path string) (any, error) {
	if st, id := c.liveStage(path); st != nil {
		var res attachResult
		if st != c.st {
			var err error
			if res, err = c.moveTo(st, -1, id, true); err != nil {
				return nil, err
			}
		}
		srv := c.srv
		c.announce = func() { srv.sendSessionStarted() }
		if res.opened {
			c.announce = func() { srv.announceStart() }
		}
		return notCancelled, nil
	}
	path = sessionPathIn(c.srv.set.cwd, c.srv.set.home, path)
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return nil, errSessionNotFound(path)
	}
	return c.apart(sessionOptions{cwd: c.srv.set.cwd, file: path}, notCancelled, nil)
}

// errLeftSession answers a change of the connection's session that it
// asked for in place and that waited (for a run to stop, a file, a change
// before it) while the connection attached to another session: the change
// is not made.
var errLeftSession = errors.New("The session change was not made: this connection attached to another session first")

// stillOn refuses a change of srv's session, asked for in place, once the
// connection is attached elsewhere (srv is no longer its view) or has
// ended (its client detached), and makes it apart once other clients
// watch the session (errNowShared). It is asked under the connection's
// answer lock, which its loop holds while it handles a line
// (session_attach, a change apart): the connection does not move before
// the change is answered and announced. When the change is
// still the connection's to make in place, keep holds the stage's
// attachMu: no client attaches to the session until it lets go of it,
// once the change is announced (changeSession).
func (c *servedRPC) stillOn(srv *rpcServer) (keep func(), err error) {
	if c.srv != srv {
		return nil, errLeftSession
	}
	keep, on, alone := c.st.holdAlone(c.client)
	switch {
	case !on: // its connection ended: the session is no longer its to change
		return nil, errAskerGone
	case !alone:
		return nil, errNowShared
	}
	return keep, nil
}

// errAskerGone answers (to no one) a change of the session asked for in
// place whose connection ended while it waited: the change is not made,
// as the session may be another client's now.
var errAskerGone = errors.New("The session change was not made: this connection ended first")

// errNowShared is stillOn's word that other clients attached to the
// session while a change of it waited: the change is made apart
// (rpcServer.changeDone). It is never an answer.
var errNowShared = errors.New("other clients watch the session now")

// sendSessionStarted tells this connection alone which session it now
// shows (a live one it switched to: the others attached saw it start
// long ago), without a seq: it is no event of the session's.
func (s *rpcServer) sendSessionStarted() {
	header := s.conv.header()
	s.out.send(func(buf []byte) ([]byte, error) {
		return s.wire.appendEvent(buf, event{Type: "session_started", Data: header})
	})
}

// copyApart is fork and clone on a shared session: a new session for this
// connection copying the current branch up to leaf (nil: all of it; "":
// none), from what the session has written.
func (c *servedRPC) copyApart(leaf *string, data any, tell *uiRequest) (any, error) {
	c.srv.conv.flush()
	path := c.srv.conv.info().path
	if path == "" {
		return nil, errors.New("Cannot copy a session kept in memory while other clients watch it")
	}
	return c.apart(sessionOptions{cwd: c.srv.set.cwd, forkFrom: path, forkLeaf: leaf}, data, tell)
}
