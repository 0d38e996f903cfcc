package main

// The rpc front end: the server over one session (rpcServer), its serve
// loop, the dispatch of a line to its handler (commands.go has the table)
// and the answers, and the sink that writes the session's events as rpc
// records (rpcEvents). Its commands are in the rpc_*.go files, one per
// chapter of docs/protocol.md.

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// rpcServer is the rpc front end (docs/protocol.md) over one session: the
// command loop that reads lines and dispatches them to handlers (serve and
// handleFrame below), the wire its records take, and the dialogs its
// client answers, which are the session's ui. The session's events go
// out through rpcEvents. Each handler reads its command's fields and
// calls the session's operations, which take plain values.
type rpcServer struct {
	*session
	conn    *connection // the client's lines and the one writer of what it reads
	out     *output     // conn's writer
	wire    wire        // the shape of the records (rpcWire, or piWire in pi's mode)
	dialogs *dialogs    // the session's ui: extension_ui_request records, and the dialogs open
	served  *servedRPC  // the rpi serve connection it is a view of; nil over stdio
	// startupOver, when set, ends startup (endStartupOnSignal) once the
	// first session's resources are read (announceStart): until then a
	// SIGTERM or SIGINT ends rpi at once, as during the rest of startup.
	startupOver func()

	lastState    *stateAnswer  // the last get_state answer (getStateCommand); the command loop's alone
	queryRequest rpcRequest    // the request of each query, used again (keepsNoRequest); the command loop's alone
	spawnsBefore chan struct{} // closed once the client's last process_spawn has started or failed; the command loop's alone
}

// newServer starts the host and opens the session the command line names.
func newServer(cfg cliConfig, env runEnv, conn *connection, stderr io.Writer) (*rpcServer, error) {
	h, err := newHost(cfg, env, stderr)
	if err != nil {
		return nil, err
	}
	s := &rpcServer{conn: conn, out: conn.out, wire: rpcWire{}, dialogs: newDialogs(conn.out, env.clock)}
	if cfg.compat {
		s.wire = piWire{}
	}
	s.session, err = openSession(h, sessionOptions{cwd: cfg.cwd, sink: rpcEvents{conn.out, s.wire}, ui: s.dialogs,
		file: cfg.sessionFile, startInEmpty: true, id: cfg.sessionID, forkFrom: cfg.forkFrom, forkAll: true, name: cfg.name,
		resourcesLater: true})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// rpcEvents is the rpc front end's event sink: each event is one record
// in the wire's shape, written at once, under the output's lock, in the
// order the core reports them.
type rpcEvents struct {
	out  *output
	wire wire
}

func (e rpcEvents) event(ev event) {
	if !e.wire.sends(ev) {
		return
	}
	e.out.send(func(buf []byte) ([]byte, error) { return e.wire.appendEvent(buf, ev) })
}

func (e rpcEvents) flush() { e.out.flush() }

func (e rpcEvents) gatheredEvent(ev event) {
	if !e.wire.sends(ev) {
		return
	}
	e.out.gather(func(buf []byte) ([]byte, error) { return e.wire.appendEvent(buf, ev) })
}

// ---- Dispatch ----

// handleFrame answers one input line: exactly one response, except for a
// valid extension_ui_response, which gets none. The connection's one
// request is cleared after every line, however it was answered: a query's
// request kept by mistake shows at once, and a line refused after its
// decode (an unknown command, a wrong id, an observer's) is not kept
// alive by it until the next line comes (a big one would outlive
// memoryReturn's giving back, on an idle connection for good).
func (s *rpcServer) handleFrame(f frame) {
	s.conn.answerMu.Lock()
	defer s.conn.answerMu.Unlock()
	s.handleFrameLocked(f)
}

// handleFrameLocked is handleFrame under the connection's answer lock,
// held by its caller (rpi serve's connection, which holds it over its
// own work on the line too).
func (s *rpcServer) handleFrameLocked(f frame) {
	s.dispatchFrame(f)
	s.queryRequest = rpcRequest{}
}

// dispatchFrame is handleFrame's decode, dispatch and answer.
func (s *rpcServer) dispatchFrame(f frame) {
	if f.tooLong {
		s.gatherResponse(nil, "parse", nil, fmt.Errorf("Failed to parse command: line longer than %d bytes", s.env.maxLineBytes))
		return
	}
	r, rerr := decodeRequest(f.line, s.wire.numericIDs(), &s.queryRequest)
	if rerr != nil {
		s.gatherResponse(rerr.id, rerr.command, nil, errors.New(rerr.message))
		return
	}
	h, ok := rpcCommands()[r.typ]
	if s.served != nil {
		if own, isOwn := servedCommands.get()[r.typ]; isOwn {
			h, ok = own, true
		}
		if ok && s.served.observer && !mayObserve(r.typ) {
			s.gatherResponse(r.id, r.typ, nil, errObserver)
			return
		}
	}
	if !ok {
		s.gatherResponse(r.id, r.typ, nil, fmt.Errorf("Unknown command: %s", r.typ))
		return
	}
	if !keepsNoRequest(r.typ) {
		r = r.heldCopy()
	}
	data, err := s.safely(r.typ, func() (any, error) { return h(s, r) })
	if _, ok := data.(noReply); !ok || err != nil {
		// What the session posted before this answer — on another
		// goroutine too (a process's exit the answer reports) — goes
		// out before it.
		s.deliver()
		s.gatherResponse(r.id, r.typ, data, err)
	}
}

// reply writes the response to r.
func (s *rpcServer) reply(r *rpcRequest, data any, err error) {
	if _, ok := data.(noReply); ok && err == nil {
		return
	}
	s.writeResponse(r.id, r.typ, data, err)
}

// replyTo is how r's answer is written when it comes later: reply, as a
// function the session's operations call back.
func (s *rpcServer) replyTo(r *rpcRequest) func(data any, err error) {
	return func(data any, err error) { s.reply(r, data, err) }
}

func (s *rpcServer) writeResponse(id []byte, command string, data any, err error) {
	s.out.send(func(buf []byte) ([]byte, error) {
		return encodeResponse(s.wire, buf, id, command, data, err)
	})
}

// gatherResponse is writeResponse for the dispatcher's own answers: they
// may wait for the rest of the input batch (output.gather).
func (s *rpcServer) gatherResponse(id []byte, command string, data any, err error) {
	s.out.gather(func(buf []byte) ([]byte, error) {
		return encodeResponse(s.wire, buf, id, command, data, err)
	})
}

// announceStart is the rpc wire's prologue of a session it opened: the
// session; then its resources load, when they were left for after that
// first line, and the warnings of its opening follow; then its loops
// start and its MCP servers connect.
func (s *rpcServer) announceStart() {
	s.emit("session_started", s.conv.header())
	s.env.trace.phase("first write (session_started)")
	s.loadLaterResources()
	if s.startupOver != nil {
		s.startupOver()
		s.startupOver = nil
	}
	for _, notice := range s.openingNotices() {
		s.tell(uiRequest{Method: "notify", Message: notice, NotifyType: "warning"})
	}
	s.startLoops()
	s.startMCP()
}

// ---- State and messages ----

// rpcCapabilities is the answer to get_capabilities.
type rpcCapabilities struct {
	ProtocolVersion int      `json:"protocolVersion"`
	Version         string   `json:"version"`
	Compat          string   `json:"compat"` // "rpi", or "pi" in pi-compatible mode (docs/pi-compat.md)
	Commands        []string `json:"commands"`
	Events          []string `json:"events"`
	ProcessSignals  []string `json:"processSignals"`
	ProcessKeys     []string `json:"processKeys"`
	TTY             bool     `json:"tty"` // whether process_spawn can give a process a terminal
	Tools           []string `json:"tools"`
	MaxLineBytes    int      `json:"maxLineBytes"`
}

// ---- Serving ----

// serve reads commands until stdin ends, the client stops reading, or a
// signal arrives; then it shuts down as docs/protocol.md#launch says and returns the exit code.
func (s *rpcServer) serve(stop <-chan os.Signal) int {
	if s.env.signalsReady != nil {
		<-s.env.signalsReady
		s.env.trace.phase("waiting for the signal handlers")
	}
	s.announceStart()
	stopSignal := s.conn.serve(s.env.maxLineBytes, stop, s.handleFrame, &s.memory, s.stderr)
	s.out.flush()
	s.shutdown(stopSignal == nil)
	if stopSignal != nil {
		fmt.Fprintf(s.stderr, "rpi: %v: shut down\n", stopSignal)
		return exitCode(stopSignal)
	}
	return 0
}
