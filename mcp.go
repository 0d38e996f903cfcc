package main

// A session's MCP servers (docs/mcp.md): connected in the background
// once the front end has shown the session (their configuration in
// mcp_config.go, their wire in mcp_client.go and mcp_http.go), their
// tools given to the model as mcp__<server>__<tool> from its next request
// (the calls in mcp_tools.go), ended with the session; mcp.log.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
)

// ---- A session's servers ----

// startMCP reads the session's MCP configuration (its problems are
// warnings) and connects its enabled servers, all in the background. A
// front end calls it once it has shown the session, so that what the
// servers report follows the session's announcement.
// A second call does nothing.
func (s *session) startMCP() {
	s.mcp.mu.Lock()
	started := s.mcp.loading != nil
	loading := make(chan struct{})
	if !started {
		s.mcp.loading = loading
	}
	s.mcp.mu.Unlock()
	if !started {
		s.goBackground(func() {
			defer close(loading)
			s.loadMCP()
		})
	}
}

func (s *session) loadMCP() {
	if s.set.cfg.noMCP {
		return
	}
	expand := func(value string, commands bool) (string, error) {
		return expandMCPValue(value, commands, s.env.getenv, func(command string) (string, error) {
			return s.runKeyCommand(s.ctx, command)
		})
	}
	s.mcp.mu.Lock()
	client := s.mcp.client
	s.mcp.mu.Unlock()
	var given []string
	for _, c := range client {
		given = append(given, c.name)
	}
	// The client's win over mcp.json's entries of their names, and of
	// names that clash with theirs.
	configs, warnings := loadMCPConfig(s.set.agentDir, s.set.cwd, s.set.projectTrusted, given, expand)
	configs = append(configs, client...)
	slices.SortFunc(configs, func(a, b mcpServerConfig) int { return strings.Compare(a.name, b.name) })
	s.mcp.start(configs)
	// After the servers are in: a client that reads a warning and asks
	// get_mcp_servers finds the servers kept.
	for _, w := range warnings {
		s.warn(w)
	}
}

// fromClient sets the servers the front end's client gives the session
// (before startMCP): they join mcp.json's, and win over an entry of the
// same name.
func (m *mcpServers) fromClient(servers []mcpServerConfig) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.client = servers
}

// mcpServerUpdate is the mcp_server_update event: a server's state
// changed (connecting, connected, failed).
type mcpServerUpdate struct {
	Name      string `json:"name"`
	State     string `json:"state"`
	Error     string `json:"error,omitempty"`
	ToolCount int    `json:"toolCount"`
}

// mcpServerInfo is one server as get_mcp_servers answers it.
type mcpServerInfo struct {
	Name      string   `json:"name"`
	Source    string   `json:"source"`
	Transport string   `json:"transport"`
	State     string   `json:"state"`
	Error     string   `json:"error,omitempty"`
	Tools     []string `json:"tools"`
	Exposure  string   `json:"exposure"`
}

// list is every configured server, enabled or not, by name.
func (m *mcpServers) list() []mcpServerInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	list := []mcpServerInfo{}
	for _, srv := range m.on {
		info := mcpServerInfo{Name: srv.cfg.name, Source: srv.cfg.source, Transport: srv.cfg.transport, State: srv.state,
			Error: srv.err, Tools: []string{}, Exposure: srv.cfg.exposure}
		for _, t := range srv.tools {
			info.Tools = append(info.Tools, t.tool.name)
		}
		list = append(list, info)
	}
	return list
}

// reconnect ends the server's connection, if any, and connects it again
// in the background (mcp_server_update reports how it went); done is
// closed when that attempt has ended (and its event is out).
func (m *mcpServers) reconnect(name string) (done <-chan struct{}, err error) {
	m.mu.Lock()
	i := slices.IndexFunc(m.on, func(srv *mcpServer) bool { return srv.cfg.name == name })
	if i < 0 {
		m.mu.Unlock()
		return nil, fmt.Errorf("MCP server %s is not configured", name)
	}
	srv := m.on[i]
	if !srv.cfg.enabled {
		m.mu.Unlock()
		return nil, fmt.Errorf("MCP server %s is disabled (enabled: false in its mcp.json)", name)
	}
	stop := srv.stop
	if srv.state == "connected" {
		srv.stop, srv.conn, srv.tools, srv.state = nil, nil, nil, "failed"
	}
	srv.warned = false
	m.mu.Unlock()
	if stop != nil {
		m.s.goBackground(stop)
	}
	m.connect(srv)
	m.mu.Lock()
	defer m.mu.Unlock()
	return srv.waiting, nil
}

// ask sends a request on conn, the server's connection when the call
// began, and waits for its answer (conn.request). A request that meets
// a session the server has forgotten (mcpSessionGone: its 404, as after
// a restart), or whose connection another such request ended, is sent
// once more on a new connection, as pi does: the server is connected
// again (renew) first.
func (m *mcpServers) ask(ctx context.Context, server string, conn *mcpConn, timeout time.Duration, method string, params map[string]any, progress bool) (json.RawMessage, error) {
	raw, err := conn.request(ctx, method, params, timeout, progress)
	gone := func(err error) bool { return errors.As(err, new(*mcpSessionGone)) }
	if err == nil || !gone(err) && !gone(conn.endedErr()) {
		return raw, err
	}
	fresh, err := m.renew(ctx, server, conn, err)
	if err != nil {
		return nil, err
	}
	return fresh.request(ctx, method, params, timeout, progress)
}

// renew connects the server again when stale, on which a request met a
// forgotten session (why), is still its connection, and waits for that
// connection (or the one another request started meanwhile) until ctx
// ends: the server's connection then, or why there is none. What else
// waits on stale fails with why, and is sent again as well.
func (m *mcpServers) renew(ctx context.Context, server string, stale *mcpConn, why error) (*mcpConn, error) {
	m.mu.Lock()
	i := slices.IndexFunc(m.on, func(srv *mcpServer) bool { return srv.cfg.name == server })
	if i < 0 {
		m.mu.Unlock()
		return nil, fmt.Errorf("MCP server %s is not configured", server)
	}
	srv := m.on[i]
	var stop, dial func()
	if srv.conn == stale { // the first to find the session forgotten connects again; the others wait for it
		stop = srv.stop
		srv.stop, srv.conn, srv.tools = nil, nil, nil
		dial = m.connectLocked(srv)
	}
	waiting := srv.waiting
	m.mu.Unlock()
	if dial != nil {
		stale.end(why)
		if stop != nil {
			m.s.goBackground(stop)
		}
		dial()
	}
	if waiting != nil {
		select {
		case <-waiting:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	conn, _, err := m.conn(server)
	return conn, err
}

// state is srv's state as mcp_server_update reports it.
func (m *mcpServers) state(name string) mcpServerUpdate {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, srv := range m.on {
		if srv.cfg.name == name {
			return mcpServerUpdate{Name: name, State: srv.state, Error: srv.err, ToolCount: len(srv.tools)}
		}
	}
	return mcpServerUpdate{Name: name}
}

// update reports srv's state now (mcp_server_update); no lock is held.
// The event is posted under m.mu, so that two reports of one server,
// from two goroutines, leave in the order of the states they report
// (the later state last).
func (m *mcpServers) update(srv *mcpServer) {
	m.mu.Lock()
	m.s.postEvent("mcp_server_update", mcpServerUpdate{Name: srv.cfg.name, State: srv.state, Error: srv.err, ToolCount: len(srv.tools)})
	m.mu.Unlock()
	m.s.deliver()
}

// mcpServers are the servers of one session and their state.
type mcpServers struct {
	s      *session
	mu     mutex[mcpServersMu] // guards every server's state, conn and tools, and waited
	on     []*mcpServer
	waited bool              // the first request waited for the servers with direct tools (awaitFirst)
	loaded map[string]bool   // the deferred tools tool_search loaded, by name: declared from then on
	client []mcpServerConfig // the servers the front end's client gave (ACP's mcpServers)
	// loading is closed once the configuration is read and the servers
	// are connecting (startMCP); nil before.
	loading chan struct{}
	// listedChanged, when set (by a test, before startMCP), is called
	// each time a listing of changed tools has ended, its tools taken or
	// not.
	listedChanged func()
}

// mcpServer is one server of a session.
type mcpServer struct {
	cfg          mcpServerConfig
	state        string // connecting, connected, failed, disabled
	err          string
	conn         *mcpConn
	stop         func() // ends its child; nil when none runs
	tools        []mcpTool
	hasResources bool     // its initialize said it has resources
	relisting    *mcpConn // the connection whose changed tools are being listed
	relistAgain  bool     // and they changed again meanwhile
	// changedEarly is the connection being made whose changed tools were
	// listed before it was srv's, that listing dropped: dial lists them
	// again once it is.
	changedEarly *mcpConn
	tried        time.Time // the last connection attempt
	// named is every name its tools were given this session, and a hash
	// of the server's name of the tool: a name stays its tool's
	// (nameToolsLocked); lastNamed those of its last listing, which
	// named keeps past maxMCPNamed. They outlive a connection.
	named     map[string][sha256.Size]byte
	lastNamed []string
	warned    bool // its failure was reported
	waiting   chan struct{}
}

// mcpTool is one tool of a server, as the model is offered it.
type mcpTool struct {
	server   string
	remote   string // the server's own name of it
	readOnly bool
	tool     *tool
	// search is what tool_search ranks it by, but for its name: made by
	// the first search that ranks it, outside the servers' lock, once.
	search func() *searchText
}

// mcpReconnectEvery bounds how often a failed server is tried again.
const mcpReconnectEvery = 30 * time.Second

// start connects every enabled server in the background.
func (m *mcpServers) start(configs []mcpServerConfig) {
	m.mu.Lock()
	for _, cfg := range configs {
		srv := &mcpServer{cfg: cfg, state: "disabled"}
		m.on = append(m.on, srv)
	}
	m.mu.Unlock()
	for _, srv := range m.on {
		if srv.cfg.enabled {
			m.connect(srv)
		}
	}
}

// connect starts a connection to srv in the background, unless one is
// under way.
func (m *mcpServers) connect(srv *mcpServer) {
	m.mu.Lock()
	dial := m.connectLocked(srv)
	m.mu.Unlock()
	dial()
}

// connectLocked marks srv connecting, unless it is, and returns what
// starts its connection (nothing when one is under way); the caller
// holds m.mu.
func (m *mcpServers) connectLocked(srv *mcpServer) (dial func()) {
	if srv.state == "connecting" {
		return func() {}
	}
	srv.state, srv.err, srv.tried = "connecting", "", m.s.env.clock.Now()
	done := make(chan struct{})
	srv.waiting = done
	return func() { m.dialInBackground(srv, done) }
}

// dialInBackground connects srv in the background, and reports how it
// went; done is closed then.
func (m *mcpServers) dialInBackground(srv *mcpServer, done chan struct{}) {
	m.update(srv)
	m.s.goBackground(func() {
		defer close(done)
		err := m.dial(srv)
		why := ""
		if err != nil {
			why = m.s.set.secrets.redact(err.Error()) // the server's own words may echo a key it was sent
		}
		m.mu.Lock()
		var signIn *mcpNeedsSignIn
		switch {
		case errors.As(err, &signIn):
			srv.state, srv.err = "needs_sign_in", why
		case err != nil:
			srv.state, srv.err = "failed", why
		}
		report := err != nil && !srv.warned
		srv.warned = srv.warned || err != nil
		m.mu.Unlock()
		m.update(srv)
		switch {
		case report && signIn != nil:
			m.s.warn(why) // it names the server and says what to do
		case report:
			m.s.warn(fmt.Sprintf("MCP server %s failed: %s", srv.cfg.name, why))
		}
	})
}

// dial opens a connection to srv (its process started, or its URL),
// initializes it and lists its tools.
func (m *mcpServers) dial(srv *mcpServer) error {
	s, cfg := m.s, srv.cfg
	var conn *mcpConn
	var stop func()
	var negotiated func(version string)
	initialized := func() {}
	var err error
	if cfg.transport == "http" {
		var h *mcpHTTP
		conn, h = m.openHTTP(srv)
		stop, negotiated, initialized = h.close, h.setVersion, h.initialized
	} else if conn, stop, err = m.startStdio(srv); err != nil {
		return err
	}
	// The session's end (its close, or rpi's) stops the server, as it
	// stops the session's processes; stopped before, it is forgotten.
	stopTransport := stop // stops once, however often it is called
	atEnd := context.AfterFunc(s.ctx, guarded(s.stderr, "stopping an MCP server", stopTransport))
	stop = func() {
		atEnd()
		stopTransport()
	}
	ctx := s.ctx
	hasResources := false
	init, err := conn.request(ctx, "initialize", map[string]any{
		"protocolVersion": mcpProtocolVersion,
		"capabilities":    map[string]any{"roots": map[string]any{"listChanged": false}},
		"clientInfo":      map[string]any{"name": "rpi", "version": rpiVersion},
	}, cfg.timeout, false)
	if err == nil {
		var answer struct {
			ProtocolVersion string `json:"protocolVersion"`
			Capabilities    struct {
				Resources json.RawMessage `json:"resources"`
			} `json:"capabilities"`
		}
		if json.Unmarshal(init, &answer) != nil || !slices.Contains(mcpProtocolVersions, answer.ProtocolVersion) {
			err = fmt.Errorf("answered initialize with protocol version %q, which rpi does not speak", answer.ProtocolVersion)
		} else if negotiated != nil {
			negotiated(answer.ProtocolVersion)
		}
		hasResources = len(answer.Capabilities.Resources) > 0 && string(answer.Capabilities.Resources) != "null"
	}
	if err == nil {
		if err = conn.notify("notifications/initialized", nil); err == nil {
			initialized() // the session is initialized: the server may talk now
		}
	}
	var tools []mcpTool
	if err == nil {
		tools, err = m.listTools(ctx, srv, conn)
	}
	if err != nil {
		conn.end(err)
		stop()
		return err
	}
	m.mu.Lock()
	closed := s.ctx.Err() != nil // the session closed meanwhile
	// A connection that ended meanwhile (its server exited after its
	// last answer) was told to ended before it was srv's: it fails here.
	endedErr := conn.endedErr()
	var unnamed []string
	changed := false
	if !closed && endedErr == nil {
		tools, unnamed = m.nameToolsLocked(srv, tools)
		srv.conn, srv.stop, srv.tools, srv.state, srv.hasResources = conn, stop, tools, "connected", hasResources
		changed, srv.changedEarly = srv.changedEarly == conn, nil
	}
	m.mu.Unlock()
	logUnnamed(conn, unnamed)
	switch {
	case closed:
		stop()
		return errors.New("the session closed")
	case endedErr != nil:
		stop()
		return endedErr
	case changed: // its tools changed as it connected, and that listing was dropped: listed again now
		m.notified(srv, conn, "notifications/tools/list_changed", nil)
	}
	return nil
}

// startStdio starts srv's process in its own process group, its stdout
// the connection's input and its stderr mcp.log's; stop ends it (stdin
// closed, SIGTERM, SIGKILL to the group after the grace). A server that
// closes its stdout can answer nothing more: it is stopped then, as if
// it had exited, and not left holding every request until its timeout.
func (m *mcpServers) startStdio(srv *mcpServer) (*mcpConn, func(), error) {
	s, cfg := m.s, srv.cfg
	cmd := s.command(cfg.command, cfg.args...)
	cmd.Dir = cfg.cwd
	cmd.Env = slices.Clone(s.set.childEnv)
	for _, k := range sortedKeys(cfg.env) {
		cmd.Env = append(cmd.Env, k+"="+cfg.env[k])
	}
	for _, secret := range cfg.envSecrets { // a server that echoes one puts it in no tool result
		s.set.secrets.add(secret)
	}
	log := func(line string) { s.mcpLog(cfg.name, line) }
	stderrLines := &logWriter{log: func(line string) { log("stderr: " + line) }}
	conn := newMCPConn(cfg.name, log, s.set.secrets) // before the child: its readers start with it
	m.prepare(srv, conn)
	var c *child
	var stopOnce sync.Once
	var stopping atomic.Bool
	var stoppedFor atomic.Pointer[string] // the pipe it closed while it ran, for which rpi stopped it: "stdout" or "stdin"
	stop := func() {
		stopOnce.Do(func() {
			c.stdin.Close()
			c.stop()
		})
	}
	// A pipe's end while it runs, not its exit and not rpi's stop, stops
	// it; wait then tells why (mcpStdioEnd).
	closed := func(pipe string) {
		if !c.hasExited() && !stopping.Load() {
			stoppedFor.CompareAndSwap(nil, &pipe)
			stop()
		}
	}
	started := make(chan struct{}) // c and conn.send are set: a reader may end, or answer the server, before start returns
	c, err := s.procs.start(cmd, childOptions{stdin: true, answers: true, ended: func(stream string) {
		<-started
		if stream == "stdout" {
			closed("stdout")
		}
	}}, func(stream string, p []byte) {
		if stream == "stdout" {
			<-started
			conn.feed(p)
		} else {
			stderrLines.Write(p)
		}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("could not start %s: %v", cfg.command, unwrapPathError(err))
	}
	conn.send = (&mcpStdin{server: cfg.name, stderr: s.stderr, stdin: c.stdin, closed: func() {
		go guarded(s.stderr, "stopping an MCP server", func() { closed("stdin") })()
	}}).send
	close(started)
	go guarded(s.stderr, "waiting for an MCP server", func() {
		ps := c.wait()
		pipe := ""
		if p := stoppedFor.Load(); p != nil && c.killed.Load() {
			pipe = *p
		}
		conn.end(mcpStdioEnd(cfg.name, ps, pipe))
		c.release()
	})()
	return conn, func() { stopping.Store(true); stop() }, nil
}

// mcpStdioEnd is why a stdio server's connection ended, once its process
// is reaped: it exited, or rpi stopped it for closing a pipe (stoppedFor:
// "stdout", or "stdin", which took no line) and what ended it was rpi's
// signal (SIGTERM or SIGKILL). A server whose pipe closed because it was
// exiting keeps its own exit status, which rpi's signal, come too late,
// did not change: a crash's signal (SIGSEGV) too.
func mcpStdioEnd(name string, ps *os.ProcessState, stoppedFor string) error {
	code, sig := exitStatus(ps)
	byRPI := code == nil && (sig == sigTerm || sig == syscall.SIGKILL) || code != nil && *code == killedExitCode
	if stoppedFor != "" && byRPI {
		return fmt.Errorf("MCP server %s closed its %s", name, stoppedFor)
	}
	return fmt.Errorf("MCP server %s exited (%v)", name, ps)
}

// prepare gives a new connection what every transport's has: the roots
// rpi answers with (the session's cwd, then its other directories) and
// where notifications go.
func (m *mcpServers) prepare(srv *mcpServer, conn *mcpConn) {
	for _, dir := range append([]string{m.s.set.cwd}, m.s.set.dirs...) {
		conn.roots = append(conn.roots, mcpRoot{URI: fileURI(dir), Name: filepath.Base(dir)})
	}
	conn.onNotify = func(method string, params json.RawMessage) { m.notified(srv, conn, method, params) }
	conn.onEnd = func(err error) { m.s.goBackground(func() { m.ended(srv, conn, err) }) }
	conn.stderr = m.s.stderr
}

// fileURI is the absolute path dir as a file URI, percent-encoded
// (file:///C:/x on Windows).
func fileURI(dir string) string { return slashedFileURI(filepath.ToSlash(dir)) }

// slashedFileURI is fileURI of a path written with slashes: a Windows
// share's (//server/share/x) names its server as the URI's host
// (file://server/share/x), as Node's pathToFileURL writes it.
func slashedFileURI(p string) string {
	u := url.URL{Scheme: "file", Path: p}
	if host, rest, ok := strings.Cut(strings.TrimPrefix(p, "//"), "/"); strings.HasPrefix(p, "//") && ok && host != "" {
		u.Host, u.Path = host, "/"+rest
	} else if !strings.HasPrefix(p, "/") {
		u.Path = "/" + p
	}
	return u.String()
}

// ended takes a connection's end (its process exited, it sent too much,
// it was closed): while it is srv's connection, srv is failed, its tools
// are no longer offered and what runs of it is stopped; a session that
// is closing ends its servers without reporting them.
func (m *mcpServers) ended(srv *mcpServer, conn *mcpConn, err error) {
	m.mu.Lock()
	current := srv.conn == conn
	stop := srv.stop
	if current {
		srv.conn, srv.stop, srv.state, srv.tools = nil, nil, "failed", nil
		srv.err = m.s.set.secrets.redact(strings.TrimPrefix(err.Error(), "MCP server "+srv.cfg.name+" "))
	}
	m.mu.Unlock()
	if !current {
		return
	}
	if stop != nil {
		stop()
	}
	if m.s.ctx.Err() == nil {
		m.update(srv)
	}
}

// maxMCPToolPages bounds tools/list's pages, maxMCPTools a server's tools.
// maxMCPToolList the bytes of its pages, which every request declares.
const (
	maxMCPToolPages = 100
	maxMCPTools     = 1000
	maxMCPToolList  = 8 << 20
)

// listTools is the server's tools, every page of them, not yet named
// (nameToolsLocked).
func (m *mcpServers) listTools(ctx context.Context, srv *mcpServer, conn *mcpConn) ([]mcpTool, error) {
	type remoteTool struct {
		Name        string          `json:"name"`
		Title       string          `json:"title"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Annotations struct {
			Title        string `json:"title"`
			ReadOnlyHint *bool  `json:"readOnlyHint"`
		} `json:"annotations"`
	}
	var remote []remoteTool
	cursor, listed := "", 0
	cursors := map[string]bool{} // a cursor given twice would list the same pages again (pi fails it too)
	for page := 0; ; page++ {
		if page == maxMCPToolPages {
			return nil, fmt.Errorf("listed tools over more than %d pages", maxMCPToolPages)
		}
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, err := conn.request(ctx, "tools/list", params, srv.cfg.timeout, false)
		if err != nil {
			return nil, err
		}
		if listed += len(raw); listed > maxMCPToolList {
			return nil, fmt.Errorf("listed more than %d MiB of tools", maxMCPToolList>>20)
		}
		var answer struct {
			Tools      []remoteTool `json:"tools"`
			NextCursor string       `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &answer); err != nil {
			return nil, fmt.Errorf("answered tools/list with an invalid result: %v", err)
		}
		remote = append(remote, answer.Tools...)
		if len(remote) > maxMCPTools {
			return nil, fmt.Errorf("offers more than %d tools", maxMCPTools)
		}
		if cursor = answer.NextCursor; cursor == "" {
			break
		}
		if cursors[cursor] {
			return nil, fmt.Errorf("answered tools/list with the nextCursor %q it gave before", clip(cursor, 64))
		}
		cursors[cursor] = true
	}
	var tools []mcpTool
	for _, r := range remote {
		if r.Name == "" || !utf8.ValidString(r.Name) {
			continue
		}
		schema, err := mcpInputSchema(r.InputSchema)
		if err != nil {
			conn.log(fmt.Sprintf("tool %s: %v (left out)", r.Name, err))
			continue
		}
		description := strings.TrimSpace(r.Description)
		if description == "" {
			description = cmp.Or(r.Title, r.Annotations.Title, fmt.Sprintf("MCP tool %s from server %s", r.Name, srv.cfg.name))
		}
		t := mcpTool{server: srv.cfg.name, remote: r.Name, readOnly: r.Annotations.ReadOnlyHint != nil && *r.Annotations.ReadOnlyHint}
		t.tool = &tool{summary: description, description: description, schema: schema, accepts: mcpArguments}
		listed := t.tool
		t.search = sync.OnceValue(func() *searchText { return newSearchText(listed) })
		t.tool.decode = func(s *session, raw json.RawMessage) (toolCall, error) {
			return &mcpCall{tool: t, args: raw}, nil
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// maxMCPNamed bounds the names a server's tools keep for the session
// (mcpServer.named): past it, only those of the tools it listed last
// are kept.
const maxMCPNamed = 10 * maxMCPTools

// nameToolsLocked names srv's listed tools as the model sees them, as pi
// names them (mcpToolName), from the set of names listed, never their
// order, and the names given before: a name once given to one of srv's
// tools stays that tool's for the session, as in pi (one listed later
// under an alike name gets its hash), so a name the model was told of,
// tool_search loaded or a user approved runs that tool or none. A tool
// whose plain name another listed tool shares (a-b and a_b) gets its
// hash; a hashed name that is another listed tool's plain name is that
// tool's; of two tools whose hashed names meet (a server can find names
// whose 8 digits do), the one whose name sorts first has it. No other
// server's tool has these names (mcpNamesClash). m.mu is held.
//
// It returns the tools named, and the server's names of those left out:
// tools that mcpToolName could not name.
func (m *mcpServers) nameToolsLocked(srv *mcpServer, tools []mcpTool) (named []mcpTool, left []string) {
	plain := map[string]string{} // a plain name, and the tool that has it; "" once two tools do
	for _, t := range tools {
		name := mcpSanitize("mcp__" + srv.cfg.name + "__" + t.remote)
		if remote, ok := plain[name]; ok && remote != t.remote {
			plain[name] = ""
		} else if !ok {
			plain[name] = t.remote
		}
	}
	if srv.named == nil || len(srv.named)+len(tools) > maxMCPNamed {
		kept := map[string][sha256.Size]byte{}
		for _, name := range srv.lastNamed {
			kept[name] = srv.named[name]
		}
		srv.named = kept
	}
	sorted := slices.SortedFunc(slices.Values(tools), func(a, b mcpTool) int { return strings.Compare(a.remote, b.remote) })
	given := map[string]bool{}
	for _, t := range sorted {
		owner := sha256.Sum256([]byte(t.remote))
		t.tool.name = mcpToolName(srv.cfg.name, t.remote, func(n string) bool {
			had, owned := srv.named[n]
			remote, listed := plain[n]
			return owned && had != owner || given[n] || listed && remote != t.remote
		})
		given[t.tool.name] = true
	}
	srv.lastNamed = srv.lastNamed[:0]
	for _, t := range tools {
		if t.tool.name == "" {
			left = append(left, t.remote)
			continue
		}
		srv.named[t.tool.name] = sha256.Sum256([]byte(t.remote))
		srv.lastNamed = append(srv.lastNamed, t.tool.name)
		named = append(named, t)
	}
	return named, left
}

// logUnnamed writes to mcp.log the tools nameToolsLocked left out.
func logUnnamed(conn *mcpConn, remotes []string) {
	for _, remote := range remotes {
		conn.log(fmt.Sprintf("tool %s: its other tools took every name it could have (left out)", remote))
	}
}

// exposure is how the model reaches one of srv's tools.
func (srv *mcpServer) exposure(remote string) string {
	if e, ok := srv.cfg.toolExpose[remote]; ok {
		return e
	}
	return srv.cfg.exposure
}

// mcpFirstWait bounds how long the session's first request waits for
// its servers with direct tools to connect (pi's 10 s).
const mcpFirstWait = 10 * time.Second

// awaitFirst makes the session's first request wait, up to mcpFirstWait
// or until ctx ends, for the servers whose tools are declared (direct
// exposure) that are still connecting; later requests take what is
// connected.
func (m *mcpServers) awaitFirst(ctx context.Context) {
	m.awaitLoading(ctx)
	m.mu.Lock()
	var waits []chan struct{}
	if !m.waited {
		m.waited = true
		for _, srv := range m.on {
			if srv.state == "connecting" && srv.cfg.exposure == "direct" {
				waits = append(waits, srv.waiting)
			}
		}
	}
	m.mu.Unlock()
	awaitConnections(ctx, waits)
}

// awaitAll waits, up to mcpFirstWait or until ctx ends, for every
// server still connecting (tool_search searches them all).
func (m *mcpServers) awaitAll(ctx context.Context) {
	m.awaitLoading(ctx)
	m.mu.Lock()
	var waits []chan struct{}
	for _, srv := range m.on {
		if srv.state == "connecting" {
			waits = append(waits, srv.waiting)
		}
	}
	m.mu.Unlock()
	awaitConnections(ctx, waits)
}

// awaitLoading waits until the configuration is read (startMCP), for at
// most mcpFirstWait, or until ctx ends.
func (m *mcpServers) awaitLoading(ctx context.Context) {
	m.mu.Lock()
	loading := m.loading
	m.mu.Unlock()
	if loading != nil {
		awaitConnections(ctx, []chan struct{}{loading})
	}
}

// awaitConnections waits for each of the connections' ends (waits), for
// at most mcpFirstWait in all, or until ctx ends.
func awaitConnections(ctx context.Context, waits []chan struct{}) {
	if len(waits) == 0 {
		return
	}
	limit := time.NewTimer(mcpFirstWait)
	defer limit.Stop()
	for _, w := range waits {
		select {
		case <-w:
		case <-limit.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// searchable reports whether exposure leaves a tool to tool_search:
// deferred, and pi's codemode (rpi has no code mode).
func searchable(exposure string) bool { return exposure == "deferred" || exposure == "codemode" }

// offered is the tools the model is declared now: those of connected
// servers whose exposure is direct, those tool_search loaded, and
// tool_search itself while tools are left to it (hidden ones never are).
// Failed servers due for another try are tried again in the background.
func (m *mcpServers) offered() []*tool {
	m.mu.Lock()
	var tools []*tool
	var retry []*mcpServer
	deferred := false
	now := m.s.env.clock.Now()
	for _, srv := range m.on {
		if (srv.state == "failed" || srv.state == "needs_sign_in") && srv.cfg.enabled && now.Sub(srv.tried) >= mcpReconnectEvery {
			retry = append(retry, srv)
		}
		if srv.state == "connecting" && searchable(srv.cfg.exposure) {
			deferred = true // its tools will be searchable: tool_search waits for it
		}
		if srv.state != "connected" {
			continue
		}
		for _, t := range srv.tools {
			exposure := srv.exposure(t.remote)
			switch {
			case exposure == "direct", searchable(exposure) && m.loaded[t.tool.name]:
				tools = append(tools, t.tool)
			case searchable(exposure):
				deferred = true
			}
		}
	}
	switch resources := m.resourceExposureLocked(); {
	case resources == "direct", searchable(resources) && m.loaded[listMCPResourcesTool.name]:
		tools = append(tools, mcpResourceTools...)
	case searchable(resources):
		deferred = true
	}
	if deferred || len(m.loaded) > 0 {
		tools = append(tools, toolSearchTool)
	}
	m.mu.Unlock()
	for _, srv := range retry {
		m.connect(srv)
	}
	return tools
}

// search ranks the tools left to tool_search that are not loaded yet
// against query and loads the best limit of them. The servers' lock is
// held only to take the candidates and to load the best: the ranking,
// which takes as long as the servers' listings are large, runs without
// it (get_mcp_servers, requests and tool calls wait for that lock).
func (m *mcpServers) search(query string, limit int) []*tool {
	type candidates struct {
		namespace string // the server's name and description
		tools     []mcpTool
	}
	var servers []candidates
	m.mu.Lock()
	for _, srv := range m.on {
		if srv.state != "connected" {
			continue
		}
		c := candidates{namespace: srv.cfg.name + " " + srv.cfg.description}
		for _, t := range srv.tools {
			if searchable(srv.exposure(t.remote)) && !m.loaded[t.tool.name] {
				c.tools = append(c.tools, t)
			}
		}
		servers = append(servers, c)
	}
	resources := searchable(m.resourceExposureLocked()) && !m.loaded[listMCPResourcesTool.name]
	m.mu.Unlock()

	var tools []*tool
	var docs []searchDoc
	for _, c := range servers {
		namespace := namespaceTerms(c.namespace)
		for _, t := range c.tools {
			tools = append(tools, t.tool)
			docs = append(docs, searchDocOf(t.tool.name, t.search(), namespace))
		}
	}
	if resources {
		for _, t := range mcpResourceTools {
			tools = append(tools, t)
			docs = append(docs, newSearchDoc(t, ""))
		}
	}
	if toolSearchRanking != nil {
		toolSearchRanking()
	}
	var loaded []*tool
	for _, name := range rankTools(query, docs, limit) {
		loaded = append(loaded, tools[slices.IndexFunc(tools, func(t *tool) bool { return t.name == name })])
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range loaded {
		if m.loaded == nil {
			m.loaded = map[string]bool{}
		}
		m.loaded[t.name] = true
		if slices.Contains(mcpResourceToolNames, t.name) { // the three come together, as pi registers them
			for _, t := range mcpResourceTools {
				m.loaded[t.name] = true
			}
		}
	}
	return loaded
}

// toolSearchRanking, when set (by a test), is called as a search ranks
// its candidates.
var toolSearchRanking func()

// find is the offered MCP tool named name, or nil.
func (m *mcpServers) find(name string) *tool {
	for _, t := range m.offered() {
		if t.name == name {
			return t
		}
	}
	return nil
}

// conn is srv's connection, or why there is none.
func (m *mcpServers) conn(server string) (*mcpConn, time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, srv := range m.on {
		if srv.cfg.name == server {
			if srv.conn == nil {
				return nil, 0, fmt.Errorf("MCP server %s is not connected (%s)", server, cmp.Or(srv.err, srv.state))
			}
			return srv.conn, srv.cfg.timeout, nil
		}
	}
	return nil, 0, fmt.Errorf("MCP server %s is not configured", server)
}

// notified takes a server's notification: a changed tool list is listed
// again; a log message goes to mcp.log.
func (m *mcpServers) notified(srv *mcpServer, conn *mcpConn, method string, params json.RawMessage) {
	switch method {
	case "notifications/tools/list_changed":
		// One listing at a time: changes told while one runs make one more
		// (a server that floods this notification costs two listings).
		m.mu.Lock()
		running := srv.relisting == conn // a listing of an older connection does not count
		srv.relisting, srv.relistAgain = conn, running
		m.mu.Unlock()
		if running {
			return
		}
		m.s.goBackground(func() {
			for {
				tools, err := m.listTools(m.s.ctx, srv, conn)
				var unnamed []string
				m.mu.Lock()
				taken := err == nil && srv.conn == conn
				switch {
				case taken:
					srv.tools, unnamed = m.nameToolsLocked(srv, tools)
				case err == nil && srv.state == "connecting" && conn.endedErr() == nil: // told as it connects
					srv.changedEarly = conn
				}
				again := srv.relistAgain && err == nil && srv.conn == conn && srv.relisting == conn
				if srv.relisting == conn {
					srv.relistAgain = false
					if !again {
						srv.relisting = nil
					}
				}
				m.mu.Unlock()
				logUnnamed(conn, unnamed)
				if err != nil {
					conn.log("listing the changed tools: " + err.Error())
				}
				if taken { // as pi reports each refresh of a server's tools
					m.update(srv)
				}
				if m.listedChanged != nil {
					m.listedChanged()
				}
				if !again {
					return
				}
			}
		})
	case "notifications/message":
		var msg struct {
			Level  string          `json:"level"`
			Logger string          `json:"logger"`
			Data   json.RawMessage `json:"data"`
		}
		json.Unmarshal(params, &msg)
		text := string(msg.Data)
		var s string
		if json.Unmarshal(msg.Data, &s) == nil {
			text = s
		}
		m.s.mcpLogLine(fmt.Sprintf("[%s] %s %s: %s", srv.cfg.name, msg.Level, msg.Logger, text))
	}
}

// close ends every server's child: its stdin closed, SIGTERM, SIGKILL to
// its group after the grace.
func (m *mcpServers) close() {
	m.mu.Lock()
	var stops []func()
	for _, srv := range m.on {
		if srv.stop != nil {
			stops = append(stops, srv.stop)
			srv.stop, srv.conn, srv.state = nil, nil, "disabled"
		}
	}
	m.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// ---- mcp.log ----

// mcpLog writes one line of a server's (its stderr) to mcp.log.
func (s *session) mcpLog(server, line string) {
	s.mcpLogLine(fmt.Sprintf("[%s] %s", server, line))
}

// mcpLog is <agent dir>/mcp.log, which every session's servers write to.
type mcpLog struct {
	mu mutex[mcpLogMu] // held while a line is appended
}

// maxMCPLogLine bounds what a line of mcp.log keeps of what a server
// said (a log message, a stderr line): its start.
const maxMCPLogLine = 16 << 10

// mcpLogLine appends a line to <agent dir>/mcp.log, with the time, as
// pi writes it, cut past maxMCPLogLine; past 5 MB the file moves to
// mcp.log.1. The keys the session holds (its servers' headers, env keys,
// tokens) are taken out first: a server may echo one, and users paste
// the log into bug reports.
func (s *session) mcpLogLine(line string) {
	line = strings.ToValidUTF8(redactedExcerpt(s.set.secrets, line, maxMCPLogLine), "\uFFFD")
	path := filepath.Join(s.set.agentDir, "mcp.log")
	s.host.mcpLog.mu.Lock()
	defer s.host.mcpLog.mu.Unlock()
	if info, err := os.Stat(path); err == nil && info.Size() > 5<<20 {
		os.Rename(path, path+".1")
	}
	f, err := openRegular(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", s.env.clock.Now().UTC().Format(time.RFC3339), escapeControl(line))
}
