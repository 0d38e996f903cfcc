package main

// A live session of rpi serve as its clients see it (docs/serve.md): its
// stage numbers every event (seq), keeps the latest for replay, and sends
// each to every client attached, through the client's own bounded queue,
// so that the turn and the other clients never wait for a slow one.

import (
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
)

// ---- A client's queue ----

// clientQueue is what one connection's output writes into: the records
// wait here, in order, and a goroutine of their own (pump) writes them to
// the socket, so a write never waits for the client. Past limit bytes
// waiting, the client is slow: what waits is still written, then its
// last record (last, built then), and the connection is closed; nothing
// more is taken. A replay is queued beside the limit (it is the stage's
// kept bytes, written as the client reads them).
type clientQueue struct {
	w            io.WriteCloser
	limit        int
	stderr       io.Writer
	finishWithin time.Duration // each write of what waits for a client leaving or slow has this long (finishWriteLimit)

	mu      mutex[clientQueueMu] // guards the fields below
	items   []pendingWrite       // what waits, in order
	counted int                  // the bytes of the records not yet written that count against limit (not a replay's)
	slow    bool                 // fell behind (behind): nothing more is taken
	writing time.Time            // when the write to the client in progress began (zero: none)
	done    bool                 // finish was called: nothing more is taken
	failed  bool                 // a write to the client failed
	last    func() []byte        // the record that ends a slow client's stream (nil: none)
	limited bool                 // the writes have the deadline of the end (finishWithin each)
	wake    chan struct{}        // a send says items or done changed (one kept)
	drained chan struct{}        // closed when pump has returned
}

// pendingWrite is one write waiting for the client: counted when it counts
// against the limit (a replay's does not).
type pendingWrite struct {
	b       []byte
	counted bool
}

// errClientGone is a write to a client whose connection is gone, or
// that was detached as slow.
var errClientGone = errors.New("the client is gone")

func newClientQueue(w io.WriteCloser, limit int, stderr io.Writer) *clientQueue {
	return &clientQueue{w: w, limit: limit, stderr: stderr, finishWithin: finishWriteLimit, wake: make(chan struct{}, 1), drained: make(chan struct{})}
}

// Write queues p (the output's records, whole), copied. It never waits.
// Once the client is behind, a write is refused, nothing more is taken,
// and the client is detached once what waits is written.
func (q *clientQueue) Write(p []byte) (int, error) {
	return q.take(slices.Clone(p))
}

// take queues p as it is: it is not copied, and must not change.
func (q *clientQueue) take(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.slow || q.done || q.failed {
		return 0, errClientGone
	}
	if q.behind() {
		q.becomeSlow()
		return 0, errClientGone
	}
	q.items = append(q.items, pendingWrite{p, true})
	q.counted += len(p)
	q.signal()
	return len(p), nil
}

func (q *clientQueue) queues() {}

// accepting reports whether a record written now is taken, deciding it:
// a client that fell behind (behind) is slow from now on, and Write
// refuses what it is given. Called under the output's lock, before the
// write of the record it asks for, it answers what that Write does: only
// the pump runs meanwhile, and it only lowers what waits.
func (q *clientQueue) accepting() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.behind() {
		q.becomeSlow()
	}
	return !q.slow && !q.done && !q.failed
}

// clientStall is how long a client may take nothing (no write of about
// writeChunkBytes done) while more than the limit waits for it.
const clientStall = time.Second

// behind reports whether the client fell too far behind: more than limit
// bytes wait while it has taken nothing of the write in progress for
// clientStall, or more than four times limit wait at all. (A burst bigger
// than the limit — a long run's agent_end carries every message of it —
// is not the client's slowness, as long as it reads.) q.mu is held.
func (q *clientQueue) behind() bool {
	stalled := !q.writing.IsZero() && time.Since(q.writing) > clientStall
	return int64(q.counted) > 4*int64(q.limit) || q.counted > q.limit && stalled // 4*limit: past a 32-bit int from 512 MiB
}

// becomeSlow marks the client slow: nothing more is taken, and each
// write of what waits has finishWithin. q.mu is held.
func (q *clientQueue) becomeSlow() {
	q.slow = true
	q.limitWrites()
}

// limitWrites gives the write to the client in progress finishWithin
// from now, and each write after it as much from its start (writeItems):
// the client is leaving or slow, and one that takes nothing must not
// keep its connection (and pump) for ever, while one that reads what
// waits, however long it is, gets it. q.mu is held.
func (q *clientQueue) limitWrites() {
	if q.limited {
		return
	}
	q.limited = true
	q.setWriteDeadline()
}

// setWriteDeadline puts the deadline of the client's writes finishWithin
// from now. q.mu is held.
func (q *clientQueue) setWriteDeadline() {
	if d, ok := q.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		d.SetWriteDeadline(time.Now().Add(q.finishWithin))
	}
}

// queueReplay queues the kept records of a replay, beside the limit.
func (q *clientQueue) queueReplay(records [][]byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.slow || q.done || q.failed {
		return
	}
	for _, r := range records {
		q.items = append(q.items, pendingWrite{b: r})
	}
	q.signal()
}

// whenSlow sets the record that ends a slow client's stream.
func (q *clientQueue) whenSlow(last func() []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.last = last
}

// signal wakes pump; q.mu is held.
func (q *clientQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// finish takes nothing more; what waits is written, each write given
// finishWriteLimit, and then the connection is closed.
func (q *clientQueue) finish(last []byte) {
	q.mu.Lock()
	if !q.done && last != nil && !q.failed {
		q.items = append(q.items, pendingWrite{b: last})
	}
	q.done = true
	q.limitWrites()
	q.signal()
	q.mu.Unlock()
	<-q.drained
}

// finishWriteLimit is how long each write of what waits for a client
// that is leaving (or slow) may take: one it takes nothing of.
const finishWriteLimit = 5 * time.Second

// pump writes what waits to the client until finish (or a slow client's
// end), then closes the connection.
func (q *clientQueue) pump() {
	defer close(q.drained)
	defer q.w.Close()
	for {
		q.mu.Lock()
		items := q.items
		q.items = nil
		ending := q.done || q.slow
		var last func() []byte
		if len(items) == 0 && q.slow && q.last != nil {
			last, q.last = q.last, nil
		}
		q.mu.Unlock()
		if last != nil { // built outside the lock: it may take the wire's own
			items = []pendingWrite{{b: last()}}
		}
		if len(items) > 0 {
			if err := q.writeItems(items); err != nil {
				q.fail()
				return
			}
			continue
		}
		if ending {
			return
		}
		<-q.wake
	}
}

// writeChunkBytes is about how much of what waits one write hands the
// client: the stall behind measures is the time since the last such
// write was taken.
const writeChunkBytes = 256 << 10

// writeItems writes items to the client, in writes of about writeChunkBytes:
// one writev each on a socket (net.Buffers), a write a record on any
// other writer (a WebSocket's). What each write took no longer counts
// against the limit.
func (q *clientQueue) writeItems(items []pendingWrite) error {
	for len(items) > 0 {
		n, size, counted := 0, 0, 0
		for n < len(items) && (n == 0 || size < writeChunkBytes) {
			size += len(items[n].b)
			if items[n].counted {
				counted += len(items[n].b)
			}
			n++
		}
		buffers := make(net.Buffers, n)
		for i := range n {
			buffers[i] = items[i].b
		}
		q.mu.Lock()
		q.writing = time.Now()
		if q.limited { // finishWithin for each write, not for all that waits
			q.setWriteDeadline()
		}
		q.mu.Unlock()
		_, err := buffers.WriteTo(q.w)
		q.mu.Lock()
		q.writing = time.Time{}
		q.counted -= counted
		q.mu.Unlock()
		if err != nil {
			return err
		}
		items = items[n:]
	}
	return nil
}

// fail marks the client gone: its writes fail, and the connection's
// loop sees its output gone.
func (q *clientQueue) fail() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.failed = true
	q.items = nil
}

// ---- The stage ----

// stage is a live session as rpi serve shows it: every event numbered
// (seq: 1, 2, … per session, no gaps), the latest kept for replay (up to
// replayBytes, as rpc records), each sent to every client attached, in
// order. The session's ui is its dialogs, shared by its controllers.
type stage struct {
	s           *session
	firstID     string // the id of the session it was opened with (openStage): a change made in place makes its session another
	dialogs     *dialogs
	replayBytes int

	// attachMu is held while a client attaches (attach, holdFor), and by
	// a change of the session made in place (servedRPC.stillOn) from its
	// last check that no other client watches the session to its
	// session_started: a client attaches before that check, and the
	// change moves its asker apart, or after the announcement, and finds
	// the session changed.
	attachMu mutex[stageAttachMu]

	mu         mutex[stageMu] // guards the fields below; held while an event is sent to every client
	seq        int64
	kept       []keptEvent // the latest events, oldest first
	keptBytes  int
	clients    []*stageClient
	forms      [wireForms]bool // the forms rendered for every event from now on: those clients attached have asked for
	idleSince  time.Time       // when its last client left (zero: a client is attached)
	closed     bool            // closed for being idle: no client may attach
	everServed bool            // a client has attached: before that, the client it was opened for is on its way, and it is not idle
	path       string          // the file of the session numbered now, as of its session_started ("": none)

	// left tells the host of a file the session left in place for another
	// (rememberClosed), with the seq of that file's last event; entered
	// asks it the last seq of a file the session changed to in place,
	// when the host closed it before (closedSeq).
	left    func(path string, last int64)
	entered func(path string) (last int64, closedHere bool)
}

// The forms an event is kept in: rpi's rpc records and pi's.
const (
	formRPC = iota
	formPi
	wireForms
)

// keptEvent is one event as sent: its number, and its record in each
// form rendered, with its "\n" (nil: a form not rendered, or an event that
// wire does not send).
type keptEvent struct {
	ev       event // the event itself, for an ACP client's replay (its updates are that client's own)
	seq      int64
	forms    [wireForms][]byte
	rendered [wireForms]bool // the forms it was rendered in (a nil record in one: that wire does not send it)
}

func (k keptEvent) size() int { return len(k.forms[formRPC]) + len(k.forms[formPi]) + 32 }

// stageClient is one connection attached to a stage: an rpc one, written
// records in its form, or an ACP one, given the events as values (events).
type stageClient struct {
	events   acpEventClient // an ACP connection's view of the session (nil: an rpc one)
	out      *output
	queue    *clientQueue
	form     int  // formRPC or formPi
	observer bool // may only watch (docs/serve.md's roles)
	// lastSeq is the seq of the last event taken into its queue.
	lastSeq atomic.Int64
	detach  func() // from the dialogs, for a controller
}

// event numbers ev, keeps it, and sends it to every client attached.
// The session's outbox calls it, one event at a time, in order.
func (st *stage) event(ev event) {
	if ev.Type == "session_started" {
		st.sessionChanged()
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.seq++
	k := keptEvent{ev: ev, seq: st.seq}
	for form, wanted := range st.forms {
		if !wanted && form != formRPC {
			continue
		}
		w := wireOfForm(form)
		k.rendered[form] = true
		if !w.sends(ev) {
			continue
		}
		rec, err := w.appendEvent(nil, ev)
		if err != nil {
			rec = nil
		}
		k.forms[form] = append(withSeq(rec, st.seq), '\n') // as a replay writes it
	}
	st.keepEvent(k)
	for _, c := range st.clients {
		if c.events != nil {
			c.events.seqEvent(ev, k.seq)
			continue
		}
		c.send(k)
	}
}

// acpEventClient is an ACP connection's view of a served session: it maps
// each numbered event to its updates, and is a controller of its dialogs.
type acpEventClient interface {
	seqEvent(ev event, seq int64)
	// settingsChanged tells its client that another client changed the
	// session's model or thinking level, or its approvals (mode).
	settingsChanged(mode bool)
	dialogController
}

// settingsChanged tells every ACP client attached but by (the one that
// made the change; nil: an rpc client made it) that the session's model
// or thinking level, or its approvals (mode), changed. It is called once
// the change is made, with no lock of the core held; each client reads
// the session as it stands and writes to its own queue, outside st.mu.
func (st *stage) settingsChanged(by acpEventClient, mode bool) {
	st.mu.Lock()
	var others []acpEventClient
	for _, c := range st.clients {
		if c.events != nil && c.events != by {
			others = append(others, c.events)
		}
	}
	st.mu.Unlock()
	for _, e := range others {
		e.settingsChanged(mode)
	}
}

func (st *stage) gatheredEvent(ev event) { st.event(ev) }

// sessionChanged, before a session_started is numbered, tells the host
// of the file the session left in place (new_session, switch_session,
// fork or clone while no other client watched it), with the seq of its
// last event, as a close does: opened again, it numbers on above every
// seq it had here. Every event of that file's came before this one (the
// outbox keeps their order). A file changed to that the host closed
// before (or that a session left) numbers on from its last seq, as when
// it is opened again: the events kept, numbered lower, are let go of,
// and a cursor among them is told resync.
func (st *stage) sessionChanged() {
	st.mu.Lock()
	s, tell, entered := st.s, st.left, st.entered
	st.mu.Unlock()
	if s == nil || tell == nil { // still opening: its first file
		return
	}
	path := s.conv.info().path
	st.mu.Lock()
	left, last := st.path, st.seq
	st.path = path
	st.mu.Unlock()
	if left == path {
		return
	}
	if left != "" {
		tell(left, last)
	}
	if path == "" || entered == nil {
		return
	}
	if seq, closedHere := entered(path); closedHere {
		st.mu.Lock()
		if seq > st.seq {
			st.seq, st.kept, st.keptBytes = seq, nil, 0
		}
		st.mu.Unlock()
	}
}

func (st *stage) flush() {}

// wireOfForm is the wire that renders form.
func wireOfForm(form int) wire {
	if form == formPi {
		return piWire{}
	}
	return rpcWire{}
}

// withSeq is an event record with "seq":N as its last member.
func withSeq(rec []byte, seq int64) []byte {
	if len(rec) == 0 || rec[len(rec)-1] != '}' {
		return nil
	}
	rec = append(rec[:len(rec)-1], `,"seq":`...)
	rec = strconv.AppendInt(rec, seq, 10)
	return append(rec, '}')
}

// keepEvent adds k to the kept events, dropping the oldest past replayBytes.
// st.mu is held.
func (st *stage) keepEvent(k keptEvent) {
	st.kept = append(st.kept, k)
	st.keptBytes += k.size()
	drop := 0
	for st.keptBytes > st.replayBytes && drop < len(st.kept)-1 {
		st.keptBytes -= st.kept[drop].size()
		drop++
	}
	if drop > 0 {
		st.kept = slices.Delete(st.kept, 0, drop)
	}
}

// send writes k's record in c's form to c, unless its queue takes no
// more; lastSeq follows what was taken.
func (c *stageClient) send(k keptEvent) {
	rec := k.forms[c.form]
	if rec == nil {
		if c.queue.accepting() {
			c.lastSeq.Store(k.seq) // an event its wire does not send: seen, as far as it goes
		}
		return
	}
	if c.out.queueShared(c.queue, rec) {
		c.lastSeq.Store(k.seq)
	}
}

// queueShared queues rec, a record the stage keeps (with its "\n"), to q,
// o's writer, after what o has pending: the stage's own bytes, shared by
// every client and never changed, rather than a copy for each client. It
// reports whether q took it.
func (o *output) queueShared(q *clientQueue, rec []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flushLocked()
	if o.err != nil {
		return false
	}
	if _, err := q.take(rec); err != nil { // as flushLocked takes a failed write
		o.err = err
		close(o.gone)
		return false
	}
	return true
}

// attachResult is what attaching to a stage gives the client: the seq
// of the session's latest event, and whether its cursor was too old to
// replay from.
type attachResult struct {
	cursor int64
	resync bool
	opened bool // the session was opened again from its file as it was attached to (servedRPC.attachStage): it is to be announced
}

// attach adds c to the stage, as attachHeld, when its session is still
// the one with id (the caller looked it up by id; "": whatever it is
// now). A stage closed meanwhile (idle) refuses, errStageClosed; one
// whose session a change made in place has made another (its file left:
// open it again), errStageChanged.
func (st *stage) attach(c *stageClient, cursor int64, id string) (attachResult, error) {
	release, err := st.holdFor(id)
	if err != nil {
		return attachResult{}, err
	}
	defer release()
	res, ok := st.attachHeld(c, cursor)
	if !ok {
		return res, errStageClosed
	}
	return res, nil
}

// errStageClosed is attach's word that the host closed the stage's
// session for being idle: it is attached to no more.
var errStageClosed = errors.New("the session was closed for being idle")

// The answers to an attach to a session the host opened for it (a new
// one, or one from its file) that another client attached to first, and
// then left, the host closing it for being idle, or changed in place,
// before this connection attached: try again opens it again.
const (
	textClosedBeforeAttached  = "The session was closed for being idle before this connection attached to it: try again"
	textChangedBeforeAttached = "Another client changed the session to another before this connection attached to it: try again"
)

// errStageChanged is holdFor's word that the stage's session is no longer
// the one asked for: a change of it made in place came first, and left
// that session's file, to be opened again.
var errStageChanged = errors.New("the session changed in place")

// holdFor takes st.attachMu (release lets go of it) when st's session is
// still the one with id ("": any); else it takes nothing and fails
// errStageChanged. Held, no change of the session is made in place, and
// attachHeld may attach clients.
func (st *stage) holdFor(id string) (release func(), err error) {
	st.attachMu.Lock()
	if id != "" && st.s.conv.info().id != id {
		st.attachMu.Unlock()
		return nil, errStageChanged
	}
	return st.attachMu.Unlock, nil
}

// holdAlone takes st.attachMu (release lets go of it) when c, the client
// asking, is attached and no other client is (alone); else it takes
// nothing, and on says whether c is attached (a client gone no longer is,
// and a session it leaves to another is that one's). Held, no client
// attaches: a change of the session made in place holds it until the
// change is announced, so that no client comes to watch a session that
// changes under it.
func (st *stage) holdAlone(c *stageClient) (release func(), on, alone bool) {
	st.attachMu.Lock()
	st.mu.Lock()
	on = slices.Contains(st.clients, c)
	alone = on && len(st.clients) == 1
	st.mu.Unlock()
	if !alone {
		st.attachMu.Unlock()
		return nil, on, false
	}
	return st.attachMu.Unlock, true, true
}

// attachHeld adds c to the stage; st.attachMu is held (holdFor). With a
// cursor (>= 0), the kept events after it are queued to c first, unless
// some are no longer kept (or were not kept in c's form): then nothing
// is, and the answer says resync. A stage closed meanwhile (idle)
// refuses (ok false).
func (st *stage) attachHeld(c *stageClient, cursor int64) (res attachResult, ok bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return res, false
	}
	res.cursor = st.seq
	if c.events != nil && cursor >= 0 && cursor < st.seq { // an ACP client: the events replayed as values, mapped by it
		if len(st.kept) == 0 || st.kept[0].seq > cursor+1 {
			res.resync = true
		} else {
			for _, k := range st.kept[cursor+1-st.kept[0].seq:] {
				c.events.seqEvent(k.ev, k.seq)
			}
		}
		cursor = -1
	}
	if cursor >= 0 && cursor < st.seq {
		records, complete := st.replayAfter(cursor, c.form)
		if complete {
			c.out.flush() // what the connection wrote before comes first
			c.queue.queueReplay(records)
		} else {
			res.resync = true
		}
	} else if cursor > st.seq {
		res.resync = true
	}
	c.lastSeq.Store(st.seq)
	if c.events == nil {
		st.forms[c.form] = true
	}
	st.clients = append(st.clients, c)
	st.idleSince, st.everServed = time.Time{}, true
	switch {
	case c.observer:
	case c.events != nil:
		c.detach = st.dialogs.attach(c.events)
	default:
		c.detach = st.dialogs.attach(rpcController{c.out, st.dialogs})
	}
	return res, true
}

// replayAfter is the kept records after cursor in form; complete is false
// when one is missing (dropped, or not rendered in form).
func (st *stage) replayAfter(cursor int64, form int) (records [][]byte, complete bool) {
	if len(st.kept) == 0 || st.kept[0].seq > cursor+1 {
		return nil, false
	}
	for _, k := range st.kept[cursor+1-st.kept[0].seq:] {
		if !k.rendered[form] {
			return nil, false
		}
		if rec := k.forms[form]; rec != nil {
			records = append(records, rec)
		}
	}
	return records, true
}

// detach takes c off the stage.
func (st *stage) detach(c *stageClient) {
	st.mu.Lock()
	defer st.mu.Unlock()
	i := slices.Index(st.clients, c)
	if i < 0 {
		return
	}
	st.clients = slices.Delete(st.clients, i, i+1)
	if c.detach != nil {
		c.detach()
	}
	if len(st.clients) == 0 {
		st.idleSince = time.Now()
	}
}

// clientCount is how many clients are attached.
func (st *stage) clientCount() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.clients)
}

// lastSeq is the seq of the session's latest event.
func (st *stage) lastSeq() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.seq
}

// idleFor reports whether no client has been attached for d while
// nothing of the session's ran; if so, the stage is closed to attaching.
// A session that is busy (a turn, a dialog, a process) is idle from when
// it is done; one no client has attached to yet is not: it was opened
// for a client that attaches next (openStage).
func (st *stage) idleFor(d time.Duration) bool {
	busy := st.s.busy() || st.dialogs.openCount() > 0
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case len(st.clients) > 0 || st.closed || !st.everServed:
		return false
	case busy || st.idleSince.IsZero():
		st.idleSince = time.Now()
		return false
	case time.Since(st.idleSince) < d:
		return false
	}
	st.closed = true
	return true
}
