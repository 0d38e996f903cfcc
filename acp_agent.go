package main

// rpi in ACP mode (docs/acp.md): the method table, the agent over the
// host, its loop and its shutdown.

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// acpMethods maps each method to its handler; acpNotifications each
// notification rpi takes. Both are made when the first ACP agent starts,
// not in package init.
var (
	acpMethods = lazy[map[string]acpMethod]{build: func() map[string]acpMethod {
		return map[string]acpMethod{
			"initialize":                acpInitialize,
			"session/new":               acpNew,
			"session/load":              acpLoad,
			"session/resume":            acpResume,
			"session/list":              acpList,
			"session/delete":            acpDelete,
			"session/close":             acpClose,
			"session/prompt":            acpPromptMethod,
			"session/set_config_option": acpSetConfigOption,
			"session/set_mode":          acpSetMode,
			"authenticate":              acpAuthenticate,
			"session/fork":              acpFork,
			"session/set_title":         acpSetTitle,
			"session/set_model":         acpSetModel,
		}
	}}
	acpNotifications = lazy[map[string]acpNotification]{build: func() map[string]acpNotification {
		return map[string]acpNotification{
			"session/cancel":   acpCancel,
			"$/cancel_request": acpCancelRequest,
		}
	}}
)

// newACPAgent is ACP's front end over h, with rpi's method tables.
func newACPAgent(h *host, conn *connection) *acpAgent {
	return newServedACPAgent(h, conn, nil)
}

// newServedACPAgent is ACP's front end over h whose sessions live in
// served (rpi serve's host; nil: the connection's own).
func newServedACPAgent(h *host, conn *connection, served acpSessionHost) *acpAgent {
	cfg := h.set.cfg
	store := sessionStore{root: filepath.Join(h.set.agentDir, "sessions")}
	if cfg.sessionDir != "" {
		store = sessionStore{root: resolvePath(cfg.cwd, cfg.sessionDir), flat: true}
	}
	return &acpAgent{h: h, conn: newACPConn(conn, h.stderr, cfg.verbose), methods: acpMethods.get(), notifications: acpNotifications.get(),
		store: store, noSession: cfg.noSession, sessions: map[string]*acpSession{}, served: served}
}

// runACP is rpi in ACP mode (docs/acp.md): it starts the host and serves
// the connection until stdin ends or a signal comes, then shuts down as
// docs/acp.md says. A fatal startup error is one line on stderr and exit 1;
// stdout carries nothing but ACP messages.
func runACP(cfg cliConfig, env runEnv, stdin io.Reader, stdout, stderr io.Writer, stop chan os.Signal) int {
	startupOver := endStartupOnSignal(env, stop, stderr)
	h, err := newHost(cfg, env, stderr)
	startupOver()
	if err != nil {
		fmt.Fprintf(stderr, "rpi: %v\n", err)
		return 1
	}
	for _, notice := range h.set.notices {
		fmt.Fprintf(stderr, "rpi: %s\n", notice)
	}
	conn := newConnection(stdin, stdout, stderr)
	conn.readAhead(env.maxLineBytes, stderr) // while the signal handlers come
	conn.whenIdle = func() { h.settleIn(stdout) }
	a := newACPAgent(h, conn)
	if env.signalsReady != nil {
		<-env.signalsReady
	}
	env.trace.phase("ready for initialize")
	sig := a.serveLines(env.maxLineBytes, stop)
	a.shutdown()
	if sig != nil {
		fmt.Fprintf(stderr, "rpi: %v: shut down\n", sig)
		return exitCode(sig)
	}
	return 0
}

// serveLines serves the connection (connection.serve) until its input
// ends, the client stops reading, or a signal arrives (which it returns;
// nil otherwise). Nothing is written before the client speaks.
func (a *acpAgent) serveLines(maxLine int, stop <-chan os.Signal) os.Signal {
	defer a.conn.out.flush()
	return a.conn.link.serve(maxLine, stop, func(f frame) { a.handleFrame(f, maxLine) }, &a.h.memory, a.h.stderr)
}

// shutdown ends the connection (docs/acp.md): every wait for the client ends,
// every turn is cancelled (every prompt, queued ones too, answers
// cancelled), every child ended, every session file written and let go
// of.
func (a *acpAgent) shutdown() {
	a.conn.close()
	a.h.procs.close() // the children of the turns cancelled now get SIGTERM, and SIGKILL after endKillGrace
	a.mu.Lock()
	open := slices.Collect(maps.Values(a.sessions))
	a.mu.Unlock()
	for _, as := range open {
		as.cancel()
	}
	a.h.shutdown(false)
	a.conn.out.flush()
}

// acpEnding answers a session/load or resume that rpi's end stopped.
func acpEnding(id string) error {
	return &acpError{Code: acpInternalError, Message: fmt.Sprintf("rpi is shutting down: the session %s was not loaded", id)}
}
