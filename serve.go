package main

// rpi serve (docs/serve.md): one long-lived host on a socket. Clients
// connect, and a connection's first message picks its wire (ACP, or rpc);
// the host owns the sessions, which outlive the connections that opened
// them: a client attaches, leaves and attaches again without losing a
// turn or an event. This file has the listeners, the connections and the
// host's end; serve_stage.go has a live session's events (numbered, kept
// for replay, sent to every client attached); rpc_serve.go rpc's
// commands of its own (hello, session_attach, host_status).

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// serveHost is rpi serve: the host, its listeners, the connections served
// and the stages of the live sessions.
type serveHost struct {
	h     *host
	cfg   serveConfig
	wires servedWires

	mu        mutex[serveHostMu]       // guards the fields below
	conns     map[*servedConn]struct{} // the connections served now
	stages    map[*session]*stage      // the live sessions' stages
	ending    bool                     // shutting down: no connection is taken
	listeners []net.Listener
	where     []string  // what each listener listens on, as --listen spells it
	sockets   []string  // the unix sockets made, removed at the end
	started   time.Time // when the host started (seqBase)
	// staged is closed (and forgotten) when openStage makes a stage live:
	// a lookup that found a session open in the host before its stage
	// was waits for it (stageOnceOpen). nil: no one waits.
	staged chan struct{}
	// unstaging are the sessions closeStage took out of stages and is
	// closing, until they are closed (the registry finds them meanwhile).
	unstaging map[*session]struct{}

	seqMu mutex[serveSeqsMu] // guards the fields below
	// closedSeqs are the seqs of the last events of the sessions closed,
	// or that left their file in place (stage.sessionChanged), by file:
	// opened again, a session numbers on from there, so that a cursor
	// from before its close is never taken for one after. It holds the
	// maxClosedSeqs closed last (closedOrder, oldest first); forgottenSeq
	// is the highest of those it let go of, where a session not found
	// numbers on from (rememberClosed, firstSeq).
	closedSeqs   map[string]int64
	closedOrder  []string
	forgottenSeq int64
	// closing are the files of the sessions being closed, each closed
	// once the session's last seq is remembered: one opened again
	// meanwhile (its file already let go of) waits for it (firstSeq).
	closing map[string]chan struct{}

	served sync.WaitGroup // the connections' goroutines

	// opened, in tests, is called with each stage openStage opens, once
	// it is live in the host, before the client it was opened for
	// attaches (nil: nothing is).
	opened func(*stage)
	// registered, in tests, is called with each session openStage opens,
	// once it is open in the host (found by its id), before its stage is
	// live (nil: nothing is).
	registered func(*session)
}

// servedConn is one client's connection to the host.
type servedConn struct {
	rwc   io.ReadWriteCloser
	queue *clientQueue
	conn  *connection
}

// runServe is rpi serve: it starts the host, listens, serves connections
// until SIGTERM or SIGINT, then ends as docs/serve.md says. Nothing is
// written to stdout; one stderr line says where it listens; a startup
// error is one stderr line and exit 1.
func runServe(cfg cliConfig, env runEnv, stderr io.Writer, stop chan os.Signal, wires servedWires) int {
	startupOver := endStartupOnSignal(env, stop, stderr)
	h, err := newHost(cfg, env, stderr)
	if err != nil {
		startupOver()
		fmt.Fprintf(stderr, "rpi: %v\n", err)
		return 1
	}
	sh := &serveHost{h: h, cfg: cfg.served, wires: wires, conns: map[*servedConn]struct{}{}, stages: map[*session]*stage{}, started: env.clock.Now()}
	err = sh.listen()
	startupOver()
	if err != nil {
		sh.closeListeners()
		for _, path := range sh.sockets { // made before a later address failed
			os.Remove(path)
		}
		h.shutdown(false)
		fmt.Fprintf(stderr, "rpi: %v\n", err)
		return 1
	}
	for _, notice := range h.set.notices {
		fmt.Fprintf(stderr, "rpi: %s\n", notice)
	}
	if env.signalsReady != nil {
		<-env.signalsReady
	}
	readyLaterStopSignals()
	fmt.Fprintf(stderr, "rpi serve: listening on %s\n", strings.Join(sh.where, " and "))
	for i, l := range sh.listeners {
		if strings.HasPrefix(sh.where[i], "unix:") {
			go guarded(stderr, "accepting connections", func() { sh.accept(l) })()
		}
	}
	sweep := sh.sweepIdle()
	h.goBackground(func() { sweepTempDirs(env.tempDir) })
	sig := <-stop
	fmt.Fprintf(stderr, "rpi: %v: shutting down\n", sig)
	sweep()
	sh.shutdown()
	return 0
}

// listen opens every --listen address, the default socket when none is
// given.
func (sh *serveHost) listen() error {
	addrs := sh.cfg.listen
	if len(addrs) == 0 {
		addrs = []string{"unix:" + filepath.Join(sh.h.set.agentDir, "rpi.sock")}
	}
	for _, text := range addrs {
		addr, err := parseListenAddress(text)
		if err != nil {
			return err
		}
		if addr.ws != nil {
			if err := sh.listenWebSocket(addr); err != nil {
				return err
			}
			continue
		}
		l, err := listenUnix(addr.unix)
		if err != nil {
			return err
		}
		sh.listeners = append(sh.listeners, l)
		sh.where = append(sh.where, addr.String())
		sh.sockets = append(sh.sockets, addr.unix)
	}
	return nil
}

// listenUnix makes the unix socket path, mode 0600, in a directory owned
// by rpi's user that neither group nor others may write to. A socket no
// one listens on is replaced; one someone listens on is refused.
func listenUnix(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot make %s for the socket: %v", dir, err)
	}
	if err := checkSocketDir(dir); err != nil {
		return nil, err
	}
	if info, err := os.Lstat(path); err == nil {
		if info.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("%s is not a socket: remove it, or listen elsewhere (--listen unix:PATH)", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("another rpi serve listens on %s", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("cannot replace the stale socket %s: %v", path, err)
		}
	}
	if len(path) > maxSocketPath || len(filepath.Dir(path))+len("/.s1234567890/s") > maxSocketPath {
		return nil, fmt.Errorf("cannot listen on %s: the path is too long for a unix socket (at most about %d bytes, its folder's %d); listen on a shorter one (--listen unix:PATH)",
			path, maxSocketPath, maxSocketPath-len("/.s1234567890/s"))
	}
	l, err := listenUnixPrivate(path)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %v", path, err)
	}
	l.SetUnlinkOnClose(false) // removed by shutdown, which knows it is rpi's own
	return l, nil
}

// accept takes l's connections until l is closed.
func (sh *serveHost) accept(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			fmt.Fprintf(sh.h.stderr, "rpi: accepting a connection: %v\n", err)
			time.Sleep(50 * time.Millisecond) // out of file descriptors: let some go
			continue
		}
		if uc, ok := c.(*net.UnixConn); ok && !peerIsOwner(uc) {
			fmt.Fprintln(sh.h.stderr, "rpi: refused a connection from another user")
			c.Close()
			continue
		}
		sh.take(c)
	}
}

// take serves rwc on its own goroutine, unless the host is ending or has
// --max-connections already: then it answers the refusal the first line's
// wire would read, and closes it (refused). done is closed once the
// connection is over.
func (sh *serveHost) take(rwc io.ReadWriteCloser) (done <-chan struct{}) {
	over := make(chan struct{})
	sh.mu.Lock()
	if sh.ending {
		sh.mu.Unlock()
		rwc.Close()
		close(over)
		return over
	}
	if len(sh.conns) >= sh.cfg.maxConnections {
		sh.mu.Unlock()
		sh.served.Add(1)
		go guarded(sh.h.stderr, "refusing a connection", func() {
			defer sh.served.Done()
			defer close(over)
			refuseConnection(rwc)
		})()
		return over
	}
	sc := &servedConn{rwc: rwc, queue: newClientQueue(rwc, sh.cfg.clientQueue, sh.h.stderr)}
	sc.queue.finishWithin = cmp.Or(sh.h.env.finishWrites, finishWriteLimit)
	sc.conn = &connection{in: rwc, out: newOutput(sc.queue, sh.h.stderr)}
	sh.conns[sc] = struct{}{}
	sh.served.Add(2)
	sh.mu.Unlock()
	go guarded(sh.h.stderr, "writing to a client", func() {
		defer sh.served.Done()
		sc.queue.pump()
	})()
	go guarded(sh.h.stderr, "serving a connection", func() {
		defer sh.served.Done()
		defer close(over)
		sh.serveConn(sc)
	})()
	return over
}

// refuseConnection answers a connection past --max-connections: one line
// in the wire its first line picks (a JSON-RPC error with id null for
// ACP, an rpc failure otherwise), then it is closed. A client that sends
// nothing within a second gets the rpc line.
func refuseConnection(rwc io.ReadWriteCloser) {
	defer rwc.Close()
	if d, ok := rwc.(interface{ SetReadDeadline(time.Time) error }); ok {
		d.SetReadDeadline(time.Now().Add(time.Second))
	}
	head := make([]byte, 4096)
	n, _ := rwc.Read(head)
	line := `{"type":"response","command":"connect","success":false,"error":"Too many connections"}` + "\n"
	if isACPFirstLine(head[:n]) {
		line = `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Too many connections"}}` + "\n"
	}
	if d, ok := rwc.(interface{ SetWriteDeadline(time.Time) error }); ok {
		d.SetWriteDeadline(time.Now().Add(time.Second))
	}
	io.WriteString(rwc, line)
}

// isACPFirstLine reports whether a connection's first line is a JSON-RPC
// request (ACP's initialize, or any JSON-RPC message: rpc's lines carry no
// "jsonrpc" member): that connection speaks ACP. It is read as a JSON
// object, not as an rpc command (which needs a "type" that JSON-RPC has
// not).
func isACPFirstLine(line []byte) bool {
	line = headLine(line)
	if !utf8.Valid(line) {
		return false
	}
	members, ok := scanObject(line, nil)
	if !ok { // deeper than scanObject goes: encoding/json's view
		var fields map[string]json.RawMessage
		if json.Unmarshal(line, &fields) != nil {
			return false
		}
		_, has := fields["jsonrpc"]
		return has
	}
	return slices.ContainsFunc(members, func(m member) bool { return string(m.key) == "jsonrpc" })
}

// headLine is b up to its first newline.
func headLine(b []byte) []byte {
	if i := slices.Index(b, '\n'); i >= 0 {
		return b[:i]
	}
	return b
}

// A servedWire is a connection's wire: it handles each of its lines,
// and its end.
type servedWire interface {
	handle(frame)
	end()
}

// servedWires are the wires a connection may speak, each made by the file
// of that front end (rpc_serve.go, acp_served.go), which stands on this
// one: the host knows no wire's names, and main gives it them.
type servedWires struct {
	acp, rpc func(sh *serveHost, sc *servedConn) servedWire
}

// serveConn serves one connection until it ends: its first line picks
// the wire; then each line goes to that wire's handler. When it ends, it
// detaches from its sessions, which go on.
func (sh *serveHost) serveConn(sc *servedConn) {
	defer sh.forgetConn(sc)
	var wire servedWire
	maxLine := sh.h.env.maxLineBytes
	sc.conn.serve(maxLine, nil, func(f frame) {
		if wire == nil {
			if !f.tooLong && isACPFirstLine(f.line) {
				wire = sh.wires.acp(sh, sc)
			} else {
				wire = sh.wires.rpc(sh, sc)
			}
		}
		wire.handle(f)
	}, &sh.h.memory, sh.h.stderr)
	if wire != nil {
		wire.end()
	}
}

// forgetConn ends sc: what it was sent is written (for a little while:
// a client that reads nothing is not waited for), and it is closed.
func (sh *serveHost) forgetConn(sc *servedConn) {
	sc.conn.out.flush()
	sc.queue.finish(nil)
	sh.mu.Lock()
	delete(sh.conns, sc)
	sh.mu.Unlock()
}

// connectionCount is how many connections are served now.
func (sh *serveHost) connectionCount() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return len(sh.conns)
}

// closeListeners stops taking connections.
func (sh *serveHost) closeListeners() {
	sh.mu.Lock()
	sh.ending = true
	listeners := slices.Clone(sh.listeners)
	sh.mu.Unlock()
	for _, l := range listeners {
		l.Close()
	}
}

// shutdown ends rpi serve: no more connections; every turn cancelled,
// every session file written, every child ended (the host's shutdown);
// every connection closed; the sockets removed.
func (sh *serveHost) shutdown() {
	sh.closeListeners()
	sh.h.shutdown(false)
	sh.mu.Lock()
	conns := make([]*servedConn, 0, len(sh.conns))
	for sc := range sh.conns {
		conns = append(conns, sc)
	}
	sh.mu.Unlock()
	for _, sc := range conns {
		sc.rwc.Close()
	}
	waitGroup(&sh.served, exitLimit)
	for _, path := range sh.sockets {
		os.Remove(path)
	}
}

// ---- The live sessions ----

// openStage opens a new session in the host as o says, its events to a
// new stage, its ui the stage's dialogs. The caller attaches the client
// it is for to that session (firstID): until a client has attached, the
// stage is not idle.
func (sh *serveHost) openStage(o sessionOptions) (*stage, error) {
	if err := sh.h.sessions.reserve(); err != nil {
		if !sh.closeIdlest() || sh.h.sessions.reserve() != nil {
			return nil, errHostFull
		}
	}
	defer sh.h.sessions.release()
	st := &stage{dialogs: newDialogs(nil, sh.h.env.clock), replayBytes: sh.cfg.replayBytes}
	cfg := sh.h.set.cfg
	if o.flags != nil {
		cfg = *o.flags
	}
	if o.file != "" && !cfg.noSession {
		// The file, by its path, is what its last seq here is kept by.
		if err := sh.findSessionFile(&o, cfg); err != nil {
			return nil, err
		}
		st.seq = sh.firstSeq(o.file)
	}
	st.dialogs.served = true
	o.sink, o.ui = st, st.dialogs
	s, err := openSession(sh.h, o)
	if err != nil {
		return nil, err
	}
	info := s.conv.info()
	st.mu.Lock()
	st.s, st.firstID, st.path, st.left, st.entered = s, info.id, info.path, sh.rememberClosed, sh.closedSeq
	st.mu.Unlock()
	if sh.registered != nil {
		sh.registered(s)
	}
	sh.mu.Lock()
	sh.stages[s] = st
	if sh.staged != nil {
		close(sh.staged)
		sh.staged = nil
	}
	sh.mu.Unlock()
	if sh.opened != nil {
		sh.opened(st)
	}
	return st, nil
}

// findSessionFile makes o.file, a hello's session id (or the start of
// one) or path relative to o.cwd, the file's absolute path, as the
// session would find it (cfg: the session's flags).
func (sh *serveHost) findSessionFile(o *sessionOptions, cfg cliConfig) error {
	if o.startInEmpty && !sessionArgIsPath(o.file) {
		path, err := findSessionByID(sh.h.ctx, storeOf(cfg, sh.h.set.agentDir), o.file, o.cwd)
		if err != nil {
			return err
		}
		o.file = path
	}
	o.file = sessionPathIn(o.cwd, sh.h.set.home, o.file)
	return nil
}

// liveStageAt is the stage of the session live in the host whose file is
// path (absolute), and that session's id; or nil.
func (sh *serveHost) liveStageAt(path string) (*stage, string) {
	for _, st := range sh.liveStages() {
		if info := st.s.conv.info(); info.path == path {
			return st, info.id
		}
	}
	return nil, ""
}

// errHostFull refuses a session past maxSessions in the host, none of
// them idle; an *acpError, so that an ACP client reads it as an rpc
// client does. TestServeACPNewAtTheLimit checks that 64 is maxSessions.
var errHostFull = &acpError{Code: acpInternalError, Message: "Too many sessions open: at most 64 in one host; close some (or let them idle out)"}

// stageOf is the stage of the session with id: a live one, or one opened
// from its file (in the serve process's cwd's folder first, then any;
// opened true).
func (sh *serveHost) stageOf(id string) (st *stage, opened bool, err error) {
	if s := sh.h.sessions.openOrWait(id); s != nil {
		// A session another request is opening (open in the host, its
		// stage not live yet) is waited for, not refused: its stage
		// follows at once. So only a session being closed is refused.
		if st := sh.stageOnceOpen(s); st != nil {
			return st, false, nil
		}
		return nil, false, fmt.Errorf("Session %s is being closed: attach again in a moment", id)
	}
	defer sh.h.sessions.loaded(id)
	cfg := sh.h.set.cfg
	if cfg.noSession {
		return nil, false, fmt.Errorf("Session not found: %s (rpi serve runs with --no-session: only live sessions can be attached)", id)
	}
	path, err := findSession(sh.h.ctx, storeOf(cfg, sh.h.set.agentDir), id, cfg.cwd)
	var twice *errSessionClaimedTwice
	if errors.As(err, &twice) {
		return nil, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("Session not found: %s", id)
	}
	cwd := cfg.cwd // the session's own, when it is still a directory
	if row, ok := readSessionRow(path); ok && filepath.IsAbs(row.Cwd) {
		if info, err := os.Stat(row.Cwd); err == nil && info.IsDir() {
			cwd = row.Cwd
		}
	}
	st, err = sh.openStage(sessionOptions{cwd: cwd, file: path})
	return st, err == nil, err
}

// markLive marks the rows of sessions live in the host: live, running,
// clients.
func (sh *serveHost) markLive(rows []sessionRow) {
	live := map[string]*stage{}
	for _, st := range sh.liveStages() {
		live[st.s.conv.info().path] = st
	}
	for i := range rows {
		if st := live[rows[i].Path]; st != nil {
			running, clients := st.s.isRunning(), st.clientCount()
			rows[i].Live, rows[i].Running, rows[i].Clients = true, &running, &clients
		}
	}
}

// stageFor is s's stage; nil once it is closed.
func (sh *serveHost) stageFor(s *session) *stage {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.stages[s]
}

// stageOnceOpen is the stage of s, a session open in the host (found by
// its id); when another request is opening it (it is open, and its stage
// not live yet: openStage makes it live next, whatever happens), once it
// is. nil when s is being closed (closeStage, or the host's end). Every
// session open in rpi serve's host is opened by openStage, which makes
// its stage live right after it opened, and only closeStage and the
// host's end take one out: a session with no stage that is not closing
// is being opened, and whether it is is decided under sh.mu, which
// openStage takes to make the stage live.
func (sh *serveHost) stageOnceOpen(s *session) *stage {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for {
		if st := sh.stages[s]; st != nil {
			return st
		}
		if _, closing := sh.unstaging[s]; closing || s.closing.Load() {
			return nil
		}
		if sh.staged == nil {
			sh.staged = make(chan struct{})
		}
		staged := sh.staged
		sh.mu.Unlock()
		<-staged
		sh.mu.Lock()
	}
}

// liveStages are the stages of the live sessions, in the order they opened.
func (sh *serveHost) liveStages() []*stage {
	var list []*stage
	for _, s := range sh.h.openSessions() {
		if st := sh.stageFor(s); st != nil {
			list = append(list, st)
		}
	}
	return list
}

// sweepIdle closes, now and then, the sessions no client has attached for
// --idle-close while nothing of theirs ran (a turn, a dialog, a process);
// stop ends it.
func (sh *serveHost) sweepIdle() (stop func()) {
	every := min(max(sh.cfg.idleClose/4, 10*time.Millisecond), 5*time.Second)
	ticker := time.NewTicker(every)
	quit, done := make(chan struct{}), make(chan struct{})
	go guarded(sh.h.stderr, "closing idle sessions", func() {
		defer close(done)
		for {
			select {
			case <-ticker.C:
				for _, st := range sh.liveStages() {
					if st.idleFor(sh.cfg.idleClose) {
						sh.closeStage(st)
					}
				}
			case <-quit:
				return
			}
		}
	})()
	return func() { ticker.Stop(); close(quit); <-done }
}

// seqBase is where a session this host opens from its file, and has not
// had open before, starts numbering: above every number an earlier host
// gave it (the host's start, in seconds since 2026, times 2^20: a
// session numbered a million events a second of the earlier host's life
// stays below it), so that a cursor from an earlier host is past the
// latest seq or before the first kept, and gets resync. Still below
// 2^53, which JavaScript's numbers hold exactly.
func (sh *serveHost) seqBase() int64 {
	const since = 1767225600 // 2026-01-01T00:00:00Z
	return max(sh.started.Unix()-since, 1) << 20
}

// closeIdlest makes room for a session when the host holds all it may:
// it closes the first (oldest) session with no client and nothing
// running, as --idle-close would later. false: there was none.
func (sh *serveHost) closeIdlest() bool {
	for _, st := range sh.liveStages() {
		if st.idleFor(0) {
			sh.closeStage(st)
			return true
		}
	}
	return false
}

// closeStage closes st's session, which no client may attach to any more.
func (sh *serveHost) closeStage(st *stage) {
	path := st.s.conv.info().path
	sh.mu.Lock()
	delete(sh.stages, st.s)
	if sh.unstaging == nil {
		sh.unstaging = map[*session]struct{}{}
	}
	sh.unstaging[st.s] = struct{}{} // until it is closing for the registry too (stageOnceOpen)
	sh.mu.Unlock()
	defer func() {
		sh.mu.Lock()
		delete(sh.unstaging, st.s)
		sh.mu.Unlock()
	}()
	var closed chan struct{}
	sh.seqMu.Lock()
	if path != "" && sh.closing[path] == nil {
		if sh.closing == nil {
			sh.closing = map[string]chan struct{}{}
		}
		closed = make(chan struct{})
		sh.closing[path] = closed
	}
	sh.seqMu.Unlock()
	st.s.close()
	if path != "" {
		sh.rememberClosed(path, st.lastSeq())
	}
	if closed != nil {
		sh.seqMu.Lock()
		delete(sh.closing, path)
		sh.seqMu.Unlock()
		close(closed)
	}
}

// maxClosedSeqs is how many closed sessions' last seqs the host keeps.
const maxClosedSeqs = 4096

// rememberClosed keeps last, the seq of the last event of the session of
// file path, which was just closed; past maxClosedSeqs, the oldest kept
// is let go of, and its seq raises forgottenSeq.
func (sh *serveHost) rememberClosed(path string, last int64) {
	sh.seqMu.Lock()
	defer sh.seqMu.Unlock()
	if sh.closedSeqs == nil {
		sh.closedSeqs = map[string]int64{}
	}
	if _, kept := sh.closedSeqs[path]; !kept {
		sh.closedOrder = append(sh.closedOrder, path)
	}
	sh.closedSeqs[path] = last
	if len(sh.closedOrder) > maxClosedSeqs {
		oldest := sh.closedOrder[0]
		sh.closedOrder = slices.Delete(sh.closedOrder, 0, 1) // the slice stays as long as its bound
		sh.forgottenSeq = max(sh.forgottenSeq, sh.closedSeqs[oldest])
		delete(sh.closedSeqs, oldest)
	}
}

// firstSeq is the seq a session opened from file numbers on from: its
// last one here, if it was closed here and is still remembered; else
// above every seq the host let go of and every earlier host's (seqBase).
// While the host is closing the session of file, it waits for that to
// end: the file is let go of before the session's last seq is known.
func (sh *serveHost) firstSeq(file string) int64 {
	if seq, closedHere := sh.closedSeq(file); closedHere {
		return seq
	}
	sh.seqMu.Lock()
	defer sh.seqMu.Unlock()
	return max(sh.seqBase(), sh.forgottenSeq)
}

// closedSeq is the last seq of the session of file, when the host closed
// it (or a session left it in place) and still remembers it; it waits
// for a close of it under way, as firstSeq does.
func (sh *serveHost) closedSeq(file string) (seq int64, closedHere bool) {
	sh.seqMu.Lock()
	defer sh.seqMu.Unlock()
	for sh.closing[file] != nil {
		closed := sh.closing[file]
		sh.seqMu.Unlock()
		<-closed
		sh.seqMu.Lock()
	}
	seq, closedHere = sh.closedSeqs[file]
	return seq, closedHere
}

// ---- ACP connections ----

// listenWebSocket listens for WebSocket connections at addr (ws.go):
// each needs the token (serveToken), a browser's its origin allowed.
func (sh *serveHost) listenWebSocket(addr listenAddress) error {
	token, err := serveToken(sh.h.env.getenv, sh.h.set.agentDir)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", addr.ws.Host)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %v", addr, err)
	}
	handler := newWebSocketHandler(wsOptions{token: token, allowOrigins: sh.cfg.allowOrigins, maxMessage: sh.h.env.maxLineBytes,
		full: func() bool { return sh.connectionCount() >= sh.cfg.maxConnections }, path: addr.ws.Path, stderr: sh.h.stderr},
		func(c *wsConn) { <-sh.take(c) }) // the connection lasts as long as this call
	server := &http.Server{Handler: handler, ReadHeaderTimeout: wsHandshakeTimeout, ReadTimeout: wsHandshakeTimeout, MaxHeaderBytes: 16 << 10,
		ErrorLog: log.New(sh.h.stderr, "rpi: ", 0)}
	sh.listeners = append(sh.listeners, l)
	sh.where = append(sh.where, "ws://"+l.Addr().String()+addr.ws.Path)
	sh.served.Add(1)
	go guarded(sh.h.stderr, "serving WebSocket connections", func() {
		defer sh.served.Done()
		server.Serve(l) // until l is closed
		server.Close()  // connections still in their handshake
	})()
	return nil
}

// serveToken is the token a WebSocket client must give: RPI_SERVE_TOKEN,
// else the one in <agent dir>/serve-token, made once (32 random bytes,
// hex, mode 0600). A token file others may read is refused.
func serveToken(getenv func(string) string, agentDir string) (string, error) {
	if token := getenv("RPI_SERVE_TOKEN"); token != "" {
		return token, nil
	}
	path := filepath.Join(agentDir, "serve-token")
	if f, err := openRegular(path, os.O_RDONLY, 0); err == nil {
		defer f.Close()
		if info, err := f.Stat(); err == nil && info.Mode().Perm()&0o077 != 0 && runtime.GOOS != "windows" {
			return "", fmt.Errorf("%s may be read by others (chmod 600 %s)", path, path)
		}
		data, err := io.ReadAll(io.LimitReader(f, 4096))
		if token := strings.TrimSpace(string(data)); err == nil && token != "" {
			return token, nil
		}
		return "", fmt.Errorf("cannot read the token in %s: it is empty", path)
	}
	random := make([]byte, 32)
	rand.Read(random)
	token := hex.EncodeToString(random)
	if err := os.MkdirAll(agentDir, 0o700); err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) { // made meanwhile by another host: read it
		return serveToken(getenv, agentDir)
	}
	if err != nil {
		return "", fmt.Errorf("cannot make %s: %v", path, err)
	}
	defer f.Close()
	if _, err := io.WriteString(f, token+"\n"); err != nil {
		return "", fmt.Errorf("cannot write %s: %v", path, err)
	}
	return token, nil
}
