package main

// An ACP connection of rpi serve (docs/serve.md#acp-connections): its
// sessions live in the host, which outlives the connection. The host
// opens them and numbers their events (each update carries its event's
// seq in _meta.rpi); a session another client opened is attached to by
// session/load or session/resume; the connection's end detaches it. The
// session's dialogs are shared by every controller attached, an ACP
// connection among them (as a dialogController).

import (
	"context"
	"errors"
	"maps"
	"slices"
)

// acpSessionHost is where an ACP connection's sessions live when it is
// rpi serve's: the host.
type acpSessionHost interface {
	// open opens a session in the host as o says (its sink and ui are
	// the host's); as gets its events and is one of its controllers.
	open(as *acpSession, o sessionOptions) (*session, error)
	// hold keeps s, a session the host has live, the session id, with no
	// change of it made in place, until release, and no later than the
	// attach that follows (held for it): a change made before is the
	// session's no more (errStageChanged; its file was left in place).
	hold(s *session, id string) (release func(), err error)
	// attach attaches as to s, held (hold); the events after cursor (-1:
	// none) that the host still keeps are replayed to it first (resync:
	// some are no longer kept, and none is).
	attach(as *acpSession, s *session, cursor int64) (latest int64, resync bool, err error)
	// lastSeq is the seq of s's latest event.
	lastSeq(s *session) int64
	// detach takes as off its session, which goes on.
	detach(as *acpSession)
	// discard takes as off its session, a session the client never
	// learned of, and closes it, unless another client is attached or
	// something of its runs (then it goes on, and idles out).
	discard(as *acpSession)
	// markLive marks the rows of sessions live in the host.
	markLive(rows []sessionRow)
	// settingsChanged tells the other ACP clients of as's session that as
	// changed its model or thinking level, or its approvals (mode).
	settingsChanged(as *acpSession, mode bool)
}

// seqEvent maps one numbered event of a session rpi serve holds.
func (as *acpSession) seqEvent(ev event, seq int64) {
	as.updates.eventNumbered(ev.Type, ev.Data, seq)
}

// wrap makes as the connection's view of s, a live session of the host
// it attaches to (session/load or resume of a session another client
// has open).
func (a *acpAgent) wrap(s *session) *acpSession {
	as := a.newSession(s.set.cwd)
	as.bind(s)
	as.adoptApprovals() // the session's, which another client may have set
	return as
}

// keep makes as, opened on this connection, its session of that id; over
// rpi serve, a view a load or resume of it on this connection took
// meanwhile (viewOf: it was live in the host as it opened) is kept
// instead, and as taken off the stage: a second view would stay attached,
// and no one would detach it.
func (a *acpAgent) keep(as *acpSession) *acpSession {
	a.mu.Lock()
	prior := a.sessions[as.id]
	if prior == nil || a.served == nil {
		a.sessions[as.id] = as
	}
	a.mu.Unlock()
	if prior == nil || a.served == nil {
		return as
	}
	a.served.detach(as)
	as.stopStarting()
	return prior
}

// viewOf is a new view of s, live in rpi serve's host, for this
// connection to attach to as id (live); or the connection's session of
// that id when it has one already (its session/new opened it meanwhile).
func (a *acpAgent) viewOf(s *session, id string) (as *acpSession, live bool) {
	view := a.wrap(s)
	a.mu.Lock()
	as = a.sessions[id]
	if as == nil {
		a.sessions[id] = view
	}
	a.mu.Unlock()
	if as != nil {
		view.stopStarting()
		return as, false
	}
	return view, true
}

// ---- The shared dialogs ----

// showDialog asks this connection's user (a permission request, or a
// form) on a goroutine of its own, and gives the dialogs the answer. Once
// the dialog is settled otherwise (another controller answered, it
// expired) the request is given up ($/cancel_request, as for a cancelled
// turn); an answer after that, or one that ends because the connection is
// gone, is dropped: the other controllers may still answer.
func (as *acpSession) showDialog(ds *dialogs, d *dialog) {
	freeText := d.approval == nil && (d.req.Method == "input" || d.req.Method == "editor")
	others := len(ds.controllers) > 1 // ds.mu is held: the agent's caps are read on the goroutine (acpAgent.mu comes first)
	as.agent.h.goBackground(func() {
		if freeText && others && !as.agent.clientCaps().elicitationForm {
			return // this editor cannot ask it: another controller may
		}
		ctx, cancel := context.WithCancel(as.s.ctx)
		defer cancel()
		go guarded(as.agent.h.stderr, "watching a dialog", func() {
			select {
			case <-d.settled: // answered elsewhere, or expired: give the request up
				cancel()
			case <-ctx.Done():
			}
		})()
		var answer uiAnswer
		if d.approval != nil {
			yes := as.approve(ctx, *d.approval)
			answer.confirmed = &yes
		} else {
			answer = as.ask(ctx, d.req)
		}
		if ctx.Err() != nil || as.agent.conn.isClosed() {
			return
		}
		ds.answer(d.req.ID, answer, as)
	})
}

// withdrawDialog has nothing to do: showDialog gives its request up once
// the dialog is settled.
func (as *acpSession) withdrawDialog(string) {}

// showOneWay shows a one-way request as the session's ui does.
func (as *acpSession) showOneWay(req uiRequest) { as.show(req) }

// detachSession takes as off the connection, leaving its session to the
// host: the prompts of this connection not started yet answer cancelled;
// the turn running goes on, for the session's other clients.
func (a *acpAgent) detachSession(as *acpSession) {
	a.mu.Lock()
	delete(a.sessions, as.id)
	a.mu.Unlock()
	as.startMu.Lock()
	for _, p := range as.pending {
		a.conn.answer(p.call.id, p.call.method, acpStopResult{StopReason: "cancelled"}, nil, false)
	}
	as.pending = nil
	as.startMu.Unlock()
	a.served.detach(as)
}

// discardSession takes as, a session the client never learned of (its
// opening was withdrawn), off the connection: the host closes it, unless
// another client has come to it or something of it runs.
func (a *acpAgent) discardSession(as *acpSession) {
	a.mu.Lock()
	delete(a.sessions, as.id)
	a.mu.Unlock()
	a.served.discard(as)
}

// detachAll is the connection's end: every session it has open is left
// to the host.
func (a *acpAgent) detachAll() {
	a.conn.close()
	a.mu.Lock()
	open := slices.Collect(maps.Values(a.sessions))
	a.mu.Unlock()
	for _, as := range open {
		a.detachSession(as)
	}
}

// servedACP is one ACP connection of rpi serve: rpi acp's agent over the
// shared host, its sessions the host's (acpSessionHost): opened in the
// host, attached to when another client has them open, left to the host
// when the connection ends.
type servedACP struct {
	sh *serveHost
	a  *acpAgent

	mu      mutex[servedACPMu] // guards the fields below
	clients map[*acpSession]*stageAttachment
	ended   bool // the connection ended: an attach made since (a request it left running) is undone
}

// stageAttachment is one of a connection's sessions on its stage.
type stageAttachment struct {
	st     *stage
	client *stageClient
}

// newServedACPWire is newServedACP as rpi serve makes a connection's wire.
func newServedACPWire(sh *serveHost, sc *servedConn) servedWire { return newServedACP(sh, sc) }

func newServedACP(sh *serveHost, sc *servedConn) *servedACP {
	c := &servedACP{sh: sh, clients: map[*acpSession]*stageAttachment{}}
	c.a = newServedACPAgent(sh.h, sc.conn, c)
	sc.queue.whenSlow(c.a.slowNotes)
	return c
}

// slowNotes are the last lines of a connection detached for falling too
// far behind (--client-queue): a note in each of its sessions, which go
// on in the host.
func (a *acpAgent) slowNotes() []byte {
	const text = "rpi serve detached this connection: it fell too far behind the session's events (--client-queue). " +
		"The session goes on: load it again (session/load) to come back."
	a.mu.Lock()
	open := slices.Collect(maps.Values(a.sessions))
	a.mu.Unlock()
	var out []byte
	for _, as := range open {
		var update any = acpChunk{"agent_message_chunk", acpTextBlock(text), as.newID()}
		if n, ok := acpNoticeOf(noteWarning, text); ok && as.updates.notices {
			update = n
		}
		if line, err := appendACPCall(nil, nil, "session/update", acpUpdateOf(as.id, update)); err == nil {
			out = append(append(out, line...), '\n')
		}
	}
	return out
}

func (c *servedACP) handle(f frame) { c.a.handleFrame(f, c.sh.h.env.maxLineBytes) }

// end leaves the connection's sessions to the host; their turns go on.
// A request still running attaches to none after it.
func (c *servedACP) end() {
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
	c.a.detachAll()
}

// open opens a session in the host and attaches as to it. The session
// is not idle before a client has attached to it; but another client
// may attach first (it is live, and host_status names it) and, before
// as attaches, change it in place, or leave and have it closed for being
// idle: then the request fails, and a new try opens it again.
func (c *servedACP) open(as *acpSession, o sessionOptions) (*session, error) {
	st, err := c.sh.openStage(o)
	if err != nil {
		return nil, err
	}
	release, err := st.holdFor(st.firstID)
	if err != nil {
		return nil, errStageChangedAsOpened
	}
	defer release()
	if _, err := c.attachStage(as, st, -1, false); errors.Is(err, errStageClosed) {
		return nil, errStageClosedAsOpened
	} else if err != nil {
		return nil, err
	}
	return st.s, nil
}

// errStageClosedAsOpened and errStageChangedAsOpened answer a
// session/new, or a load of a session the host had not live, whose
// session the host opened, and another client attached to before this
// connection did: it left, and the host closed the session for being
// idle; or it changed the session in place (new_session,
// switch_session, fork, clone).
var (
	errStageClosedAsOpened  = &acpError{Code: acpInternalError, Message: textClosedBeforeAttached}
	errStageChangedAsOpened = &acpError{Code: acpInternalError, Message: textChangedBeforeAttached}
)

// hold holds s's stage for an attach to it as the session id: once it
// is live, when another request is opening it (stageOnceOpen).
func (c *servedACP) hold(s *session, id string) (func(), error) {
	st := c.sh.stageOnceOpen(s)
	if st == nil {
		return nil, errStageClosing
	}
	return st.holdFor(id)
}

// errStageClosing answers a load or resume of a session the host is
// closing (idle). One another request is opening is waited for (hold),
// not refused.
var errStageClosing = &acpError{Code: acpInternalError, Message: "The session is being closed: load it again in a moment"}

// attach attaches as to s, live in the host and held (hold), with a
// replay after cursor.
func (c *servedACP) attach(as *acpSession, s *session, cursor int64) (int64, bool, error) {
	st := c.sh.stageFor(s)
	if st == nil {
		return 0, false, errStageClosing
	}
	res, err := c.attachStage(as, st, cursor, true)
	switch {
	case errors.Is(err, errStageClosed): // closed (idle) since it was found
		return 0, false, errStageClosing
	case errors.Is(err, errLeftMeanwhile):
		return 0, false, acpClosedWhileLoading(as.id)
	case err != nil:
		return 0, false, err
	}
	return res.cursor, res.resync, nil
}

func (c *servedACP) lastSeq(s *session) int64 {
	if st := c.sh.stageFor(s); st != nil {
		return st.lastSeq()
	}
	return 0
}

// attachStage attaches as to st, held (stage.holdFor), unless st was
// closed meanwhile (idle: errStageClosed), the connection has ended
// (errConnectionClosed), or, when known is set (as is one of the
// connection's sessions already), session/close let go of as
// (errLeftMeanwhile): then the attach is undone, as detach would have
// undone it. Whether it is is decided under c.mu, which detach takes
// after the end or the close: one of the two sees the other.
func (c *servedACP) attachStage(as *acpSession, st *stage, cursor int64, known bool) (attachResult, error) {
	client := &stageClient{events: as}
	res, ok := st.attachHeld(client, cursor)
	if !ok {
		return res, errStageClosed
	}
	c.mu.Lock()
	var err error
	switch {
	case c.ended:
		err = errConnectionClosed
	case known && !c.a.isOpenAs(as):
		err = errLeftMeanwhile
	default:
		c.clients[as] = &stageAttachment{st, client}
	}
	c.mu.Unlock()
	if err != nil {
		st.detach(client)
	}
	return res, err
}

// errLeftMeanwhile is attachStage's word that the connection let go of
// the session (session/close) as it was attached to.
var errLeftMeanwhile = errors.New("the session was closed on this connection as it was attached to")

func (c *servedACP) markLive(rows []sessionRow) { c.sh.markLive(rows) }

func (c *servedACP) settingsChanged(as *acpSession, mode bool) {
	if st := c.sh.stageFor(as.s); st != nil {
		st.settingsChanged(as, mode)
	}
}

// detach takes as off its stage.
func (c *servedACP) detach(as *acpSession) { c.takeOff(as) }

// takeOff takes as off its stage, which it returns (nil: none).
//
// Then nothing more of the session is told to its client: a change
// another client made, being told now (tellSettings), goes out before
// this returns, and one told later not at all.
func (c *servedACP) takeOff(as *acpSession) *stage {
	c.mu.Lock()
	at := c.clients[as]
	delete(c.clients, as)
	c.mu.Unlock()
	if at != nil {
		at.st.detach(at.client)
	}
	as.configMu.Lock()
	as.detached = true
	as.configMu.Unlock()
	if at == nil {
		return nil
	}
	return at.st
}

func (c *servedACP) discard(as *acpSession) {
	if st := c.takeOff(as); st != nil && st.idleFor(0) {
		c.sh.h.goBackground(func() { c.sh.closeStage(st) })
	}
}
