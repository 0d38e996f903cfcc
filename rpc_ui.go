package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The rpc front end's ui (docs/ui.md): extension_ui_request records,
// fire-and-forget (notify, setStatus, setWidget, setTitle,
// set_editor_text) or dialogs that wait for an extension_ui_response
// (select, confirm, input, editor), and the command that delivers those
// answers.

// dialog is a request of the session's ui that waits for an answer:
// an extension_ui_request (select, confirm, input, editor), or an
// approval, which rpc asks as a confirm dialog.
type dialog struct {
	req      uiRequest     // as sent: sent again to a controller that attaches while it is open
	approval *approval     // the approval it asks for (nil: a question)
	answer   chan uiAnswer // buffered: receives at most one answer
	settled  chan struct{} // closed once it is answered, expired or cancelled
}

// A dialogController shows a session's dialogs to one client: an rpc
// connection (rpcController) or, on a session rpi serve holds, an ACP one.
// Its methods are called with the dialogs' lock held, and never wait (a
// record for the client is queued: queueLocked): an answer comes back
// later through dialogs.answer (and is dropped once d.settled is closed).
type dialogController interface {
	showDialog(ds *dialogs, d *dialog)
	// withdrawDialog: dialog id was answered by another controller, or
	// expired (told only on a session rpi serve holds).
	withdrawDialog(id string)
	// showOneWay sends a one-way request.
	showOneWay(req uiRequest)
}

// rpcController is an rpc connection as a dialog controller of ds: it
// is written extension_ui_request records, and extension_ui_settled when
// a dialog is withdrawn. Each is queued (ds.queueLocked) and written once
// ds.mu is let go of.
type rpcController struct {
	out *output
	ds  *dialogs
}

func (c rpcController) showDialog(_ *dialogs, d *dialog) {
	c.ds.queueLocked(c.out, uiRequestRecord(d.req))
}

func (c rpcController) showOneWay(req uiRequest) { c.ds.queueLocked(c.out, uiRequestRecord(req)) }

func (c rpcController) withdrawDialog(id string) {
	c.ds.queueLocked(c.out, func(buf []byte) ([]byte, error) {
		buf = append(buf, `{"type":"extension_ui_settled","data":{"id":`...)
		return append(appendJSONString(buf, id), "}}"...), nil
	})
}

// dialogs is a session's ui as rpc has it: it shows its requests to the
// session's controllers, holds the open dialogs, and remembers the ids of
// recent one-way requests, so that a client answering those is not told
// off (docs/protocol.md). Over stdio there is one controller, the client.
// A session rpi serve holds has every controller attached to it (attach):
// each gets every request, a dialog open when one attaches is shown to it
// too, the first answer wins, and the others are told the dialog is
// withdrawn; a dialog asked with no controller attached waits for one.
type dialogs struct {
	clock clock
	// served: the session is rpi serve's; a dialog that times out or is
	// cancelled is withdrawn from every controller (stdio's one client
	// is told nothing, as pi tells it nothing).
	served bool

	// orderMu is held while the records queued are written (writeQueued),
	// in the order they were queued; taken before mu, which is let go of
	// before the writes, so that a client that stops reading holds up the
	// next records and not whoever answers, cancels or opens a dialog.
	orderMu mutex[dialogsOrderMu]

	mu          mutex[dialogsMu]   // guards the fields below, and the order of the records queued
	controllers []dialogController // where requests go, in the order they attached
	open        map[string]*dialog
	oneWay      map[string]bool
	oneWays     []string       // the same ids, oldest first, for forgetting
	queued      []queuedRecord // the records for the rpc controllers, in order, not yet written
	queuedTotal uint64         // how many records were ever queued: a hold of mu that moved it writes them
}

// queuedRecord is a record for an rpc controller, queued under the
// dialogs' lock and written after it (writeQueued).
type queuedRecord struct {
	out    *output
	encode func(buf []byte) ([]byte, error)
}

// queueLocked queues a record for out; whoever holds ds.mu writes it once
// it lets go of it (unlock). ds.mu is held.
func (ds *dialogs) queueLocked(out *output, encode func(buf []byte) ([]byte, error)) {
	ds.queued = append(ds.queued, queuedRecord{out, encode})
	ds.queuedTotal++
}

// lock takes ds.mu; unlock(mark) lets it go and writes what the hold
// queued, so that each record is written before its queuer goes on.
func (ds *dialogs) lock() (mark uint64) {
	ds.mu.Lock()
	return ds.queuedTotal
}

// unlock lets ds.mu go, taken by lock (mark), and, when the hold queued a
// record, writes the records queued (writeQueued). A hold that queued
// nothing (the stdio client's own answer) never waits for the client.
func (ds *dialogs) unlock(mark uint64) {
	queued := ds.queuedTotal != mark
	ds.mu.Unlock()
	if queued {
		ds.writeQueued()
	}
}

// writeQueued writes every record queued, in order, outside ds.mu: a
// write the client does not take holds up only orderMu. The records of a
// writer waiting for orderMu are written by the one that holds it, or
// are still queued once it has it; either way they are written before it
// returns, after every record queued before them.
func (ds *dialogs) writeQueued() {
	ds.orderMu.Lock()
	defer ds.orderMu.Unlock()
	ds.mu.Lock()
	records := ds.queued
	ds.queued = nil
	ds.mu.Unlock()
	for _, r := range records {
		r.out.send(r.encode)
	}
}

// maxRememberedOneWay bounds the one-way request ids kept.
const maxRememberedOneWay = 1024

// newDialogs is a ui whose requests go to out (nil: to the controllers
// that attach).
func newDialogs(out *output, c clock) *dialogs {
	ds := &dialogs{clock: c, open: map[string]*dialog{}, oneWay: map[string]bool{}}
	if out != nil {
		ds.controllers = []dialogController{rpcController{out, ds}}
	}
	return ds
}

// attach makes c a controller: the dialogs open now are shown to it, and
// every request from now on, until detach.
func (ds *dialogs) attach(c dialogController) (detach func()) {
	defer ds.unlock(ds.lock())
	ds.controllers = append(ds.controllers, c)
	for _, d := range ds.open {
		c.showDialog(ds, d)
	}
	return func() {
		ds.mu.Lock()
		defer ds.mu.Unlock()
		ds.controllers = slices.DeleteFunc(ds.controllers, func(o dialogController) bool { return o == c })
	}
}

// openCount is how many dialogs wait for an answer.
func (ds *dialogs) openCount() int {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return len(ds.open)
}

// take removes the open dialog id and returns it: whoever takes it first
// (the client's answer, or a timeout or abort) resolves it, once.
func (ds *dialogs) take(id string) *dialog {
	defer ds.unlock(ds.lock())
	d := ds.removeLocked(id)
	if d != nil && ds.served {
		ds.withdrawLocked(id, nil)
	}
	return d
}

// removeLocked takes dialog id out of the open ones and marks it settled;
// nil when it is not open. ds.mu is held.
func (ds *dialogs) removeLocked(id string) *dialog {
	d := ds.open[id]
	if d != nil {
		delete(ds.open, id)
		close(d.settled)
	}
	return d
}

// answer resolves dialog id with a, from the controller by, unless it is
// resolved already (then a is dropped: another answer won); the other
// controllers are told it is withdrawn.
func (ds *dialogs) answer(id string, a uiAnswer, by dialogController) {
	mark := ds.lock()
	d := ds.removeLocked(id)
	if d != nil {
		ds.withdrawLocked(id, by)
	}
	ds.unlock(mark)
	if d != nil {
		d.answer <- a
	}
}

// withdrawLocked tells every controller but answeredBy that dialog id is
// withdrawn. ds.mu is held.
func (ds *dialogs) withdrawLocked(id string, answeredBy dialogController) {
	for _, c := range ds.controllers {
		if c != answeredBy {
			c.withdrawDialog(id)
		}
	}
}

func (ds *dialogs) rememberOneWay(id string) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.oneWay[id] = true
	ds.oneWays = append(ds.oneWays, id)
	if len(ds.oneWays) > maxRememberedOneWay {
		delete(ds.oneWay, ds.oneWays[0])
		ds.oneWays = ds.oneWays[1:]
	}
}

func (ds *dialogs) wasOneWay(id string) bool {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return ds.oneWay[id]
}

// write sends a one-way request to every controller.
func (ds *dialogs) write(req uiRequest) {
	defer ds.unlock(ds.lock())
	for _, c := range ds.controllers {
		c.showOneWay(req)
	}
}

// uiRequestRecord encodes req as an extension_ui_request record.
func uiRequestRecord(req uiRequest) func(buf []byte) ([]byte, error) {
	return func(buf []byte) ([]byte, error) {
		data, err := marshalJSON(req)
		return append(buf, data...), err
	}
}

// show sends a fire-and-forget UI request; the client need not answer it.
func (ds *dialogs) show(req uiRequest) {
	req.Type, req.ID = "extension_ui_request", newUUIDv7(ds.clock.Now())
	ds.rememberOneWay(req.ID)
	ds.write(req)
}

// ask shows a dialog (select, confirm, input, editor) and waits for the
// client's answer. A timeout (req.Timeout ms) or ctx ending resolves it to
// cancelled; an answer and a timeout that race resolve it once, and the
// loser of the race gets nothing (a late answer is refused).
func (ds *dialogs) ask(ctx context.Context, req uiRequest) uiAnswer {
	return ds.wait(ctx, req, nil)
}

// wait opens a dialog for req (asking for approval a, when not nil),
// shows it to every controller and waits for its answer, a timeout or
// ctx's end, as ask says.
func (ds *dialogs) wait(ctx context.Context, req uiRequest, a *approval) uiAnswer {
	req.Type, req.ID = "extension_ui_request", newUUIDv7(ds.clock.Now())
	d := &dialog{req: req, approval: a, answer: make(chan uiAnswer, 1), settled: make(chan struct{})}
	mark := ds.lock()
	ds.open[req.ID] = d
	for _, c := range ds.controllers {
		c.showDialog(ds, d)
	}
	ds.unlock(mark)
	var expired <-chan struct{}
	if req.Timeout > 0 {
		done, stop := after(ds.clock, msDuration(req.Timeout))
		defer stop()
		expired = done
	}
	select {
	case a := <-d.answer:
		return a
	case <-expired:
	case <-ctx.Done():
	}
	if ds.take(req.ID) == nil {
		return <-d.answer // an answer won the race: it is on its way
	}
	return uiAnswer{cancelled: true}
}

// approve asks with a confirm dialog that shows exactly what the call
// will do; no answer within the timeout counts as no.
func (ds *dialogs) approve(ctx context.Context, a approval) bool {
	title, message := a.describe()
	answer := ds.wait(ctx, uiRequest{Method: "confirm", Title: title, Message: message, Timeout: a.timeout.Milliseconds()}, &a)
	return !answer.cancelled && answer.confirmed != nil && *answer.confirmed
}

// extensionUIResponseCommand delivers the client's answer to a pending dialog.
// Fields: id (of a pending extension_ui_request) and exactly one of value
// (string), confirmed (bool), cancelled (true).
// Answer: none on success, and none for an answer to a one-way request;
// a failure when the id is unknown or already answered or expired, or the
// answer is malformed. Events: none.
func (s *rpcServer) extensionUIResponseCommand(r *rpcRequest) (any, error) {
	ds := s.dialogs
	id := r.idString()
	if id == nil {
		return nil, missing("id", "the id of a pending extension_ui_request")
	}
	var a uiAnswer
	given := 0
	if r.has("value") {
		v, err := r.str("value")
		if err != nil {
			return nil, err
		}
		a.value, given = &v, given+1
	}
	if r.has("confirmed") {
		c, err := r.boolean("confirmed")
		if err != nil {
			return nil, err
		}
		a.confirmed, given = &c, given+1
	}
	if r.has("cancelled") {
		c, err := r.boolean("cancelled")
		if err != nil || !c {
			return nil, invalid("cancelled", "true")
		}
		a.cancelled, given = true, given+1
	}
	if ds.wasOneWay(*id) {
		return noReply{}, nil // docs/protocol.md: answering a one-way request is allowed and changes nothing
	}
	if given != 1 && !s.wire.lenientUIResponses() {
		return nil, errors.New("Invalid extension_ui_response: give exactly one of value, confirmed or cancelled")
	}
	mark := ds.lock()
	d, ok := ds.open[*id]
	if ok {
		var err error
		switch {
		case a.cancelled:
		case d.req.Method == "confirm" && a.confirmed == nil:
			err = errors.New("Invalid extension_ui_response: a confirm dialog takes confirmed (true or false) or cancelled")
		case d.req.Method != "confirm" && a.value == nil:
			err = fmt.Errorf("Invalid extension_ui_response: a %s dialog takes value (a string) or cancelled", d.req.Method)
		case d.req.Method == "select" && !slices.Contains(d.req.Options, *a.value):
			err = fmt.Errorf("Invalid extension_ui_response: value must be one of the options: %s", strings.Join(d.req.Options, ", "))
		}
		if err != nil {
			ds.unlock(mark)
			return nil, err
		}
		ds.removeLocked(*id)
		ds.withdrawLocked(*id, rpcController{s.out, ds})
	}
	ds.unlock(mark)
	if !ok && s.wire.lenientUIResponses() {
		return noReply{}, nil // pi ignores an answer it has no dialog for
	}
	if !ok {
		return nil, fmt.Errorf("Unknown extension UI request id: %s (never asked, already answered or expired)", *id)
	}
	d.answer <- a
	return noReply{}, nil
}
