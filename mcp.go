package main

// MCP servers as pi 1.6 configures them (docs/mcp.md): the user's
// <agent dir>/mcp.json and, with --approve, the project's .pi/mcp.json;
// each session connects its enabled servers in the background and gives
// their tools to the model as mcp__<server>__<tool> from its next
// request. The client's wire is in mcp_client.go.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// mcpServerConfig is one server entry, checked, its values expanded.
type mcpServerConfig struct {
	name        string
	source      string // "user" or "project"
	transport   string // "stdio" or "http"
	command     string
	args        []string
	env         map[string]string
	cwd         string
	url         string
	headers     map[string]string
	enabled     bool
	timeout     time.Duration
	exposure    string            // direct, deferred, hidden, codemode (acts as deferred)
	toolExpose  map[string]string // by the server's tool name
	description string
}

// mcpEntry is an entry as written in mcp.json; a field of the wrong type
// makes the entry invalid.
type mcpEntry struct {
	Type         *string           `json:"type"`
	Command      *string           `json:"command"`
	Args         []string          `json:"args"`
	Env          map[string]string `json:"env"`
	Cwd          *string           `json:"cwd"`
	URL          *string           `json:"url"`
	Headers      map[string]string `json:"headers"`
	Enabled      *bool             `json:"enabled"`
	Timeout      *float64          `json:"timeout"`
	Exposure     *string           `json:"exposure"`
	ToolExposure map[string]string `json:"toolExposure"`
	Description  *string           `json:"description"`
}

// mcpDefaultTimeout is a request's limit without the entry's timeout.
const mcpDefaultTimeout = 60 * time.Second

var mcpServerName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

var mcpExposures = []string{"direct", "deferred", "hidden", "codemode"}

// readMCPFile reads one mcp.json's entries by name, in the file's order
// of names sorted (JSON objects have no order rpi keeps); a missing file
// has none; a file that cannot be read or is not valid is a warning.
func readMCPFile(path string) (names []string, entries map[string]json.RawMessage, warning string) {
	data, err := readSmallFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, ""
	}
	if err != nil {
		return nil, nil, fmt.Sprintf("Cannot read MCP servers from %s: %v", path, err)
	}
	var file struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, nil, fmt.Sprintf("Cannot read MCP servers from %s: %s", path, jsonError(data, err))
	}
	for name := range file.MCPServers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, file.MCPServers, ""
}

// readSmallFile reads a configuration file, at most maxResourceBytes.
func readSmallFile(path string) ([]byte, error) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data := make([]byte, 0, 4096)
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		data = append(data, buf[:n]...)
		if len(data) > maxResourceBytes {
			return nil, fmt.Errorf("larger than %s", formatSize(maxResourceBytes))
		}
		if err != nil {
			return data, nil
		}
	}
}

// loadMCPConfig reads the user's mcp.json and, when approved, the
// project's: the servers in name order, and a warning for each file or
// entry that cannot be used (the others are kept). A project entry with
// neither command, url nor type only overrides enabled, exposure and
// toolExposure of the user's entry of that name. expand resolves ${VAR}
// and !command values.
func loadMCPConfig(agentDir, cwd string, approved bool, expand func(value string, commands bool) (string, error)) ([]mcpServerConfig, []string) {
	var warnings []string
	byName := map[string]*mcpServerConfig{}
	entries := map[string]mcpEntry{}
	read := func(path, source string) {
		names, raw, warning := readMCPFile(path)
		if warning != "" {
			warnings = append(warnings, warning)
		}
		for _, name := range names {
			var e mcpEntry
			dec := json.NewDecoder(strings.NewReader(string(raw[name])))
			if err := dec.Decode(&e); err != nil {
				warnings = append(warnings, fmt.Sprintf("MCP server %s in %s is not valid: %s", name, path, jsonError(raw[name], err)))
				continue
			}
			if !mcpServerName.MatchString(name) {
				warnings = append(warnings, fmt.Sprintf("MCP server %q in %s: a name has only letters, digits, _ and -", name, path))
				continue
			}
			if user, ok := byName[name]; ok && source == "project" && e.Command == nil && e.URL == nil && e.Type == nil {
				if err := overrideMCP(user, e); err != nil {
					warnings = append(warnings, fmt.Sprintf("MCP server %s in %s: %v", name, path, err))
				}
				continue
			}
			for other := range byName {
				if other != name && strings.ReplaceAll(other, "-", "_") == strings.ReplaceAll(name, "-", "_") {
					warnings = append(warnings, fmt.Sprintf("MCP server %s in %s: the name differs from %s only in - and _", name, path, other))
					goto next
				}
			}
			if cfg, err := checkMCPEntry(name, source, cwd, e, expand); err != nil {
				warnings = append(warnings, fmt.Sprintf("MCP server %s in %s: %v", name, path, err))
				delete(byName, name) // a project entry that is not valid does not leave the user's in place
			} else {
				byName[name] = &cfg
				entries[name] = e
			}
		next:
		}
	}
	read(filepath.Join(agentDir, "mcp.json"), "user")
	if approved {
		read(filepath.Join(cwd, ".pi", "mcp.json"), "project")
	}
	var servers []mcpServerConfig
	for _, cfg := range byName {
		servers = append(servers, *cfg)
	}
	slices.SortFunc(servers, func(a, b mcpServerConfig) int { return strings.Compare(a.name, b.name) })
	return servers, warnings
}

// overrideMCP applies a project's enabled, exposure and toolExposure to
// the user's entry.
func overrideMCP(cfg *mcpServerConfig, e mcpEntry) error {
	if e.Exposure != nil && !slices.Contains(mcpExposures, *e.Exposure) {
		return fmt.Errorf("exposure must be one of %s", strings.Join(mcpExposures, ", "))
	}
	if e.Enabled != nil {
		cfg.enabled = *e.Enabled
	}
	if e.Exposure != nil {
		cfg.exposure = *e.Exposure
	}
	if e.ToolExposure != nil {
		cfg.toolExpose = e.ToolExposure
	}
	return nil
}

// checkMCPEntry makes an entry a server: its transport, its values
// expanded, its limits.
func checkMCPEntry(name, source, cwd string, e mcpEntry, expand func(string, bool) (string, error)) (mcpServerConfig, error) {
	cfg := mcpServerConfig{name: name, source: source, enabled: true, timeout: mcpDefaultTimeout, exposure: "codemode", toolExpose: e.ToolExposure}
	kind := ""
	if e.Type != nil {
		kind = *e.Type
	}
	switch {
	case kind == "sse":
		return cfg, errors.New(`the SSE transport is not supported: use the server's streamable HTTP endpoint (often /mcp instead of /sse) with "url"`)
	case kind != "" && kind != "stdio" && kind != "http" && kind != "streamable-http":
		return cfg, fmt.Errorf("type must be stdio, http or streamable-http, not %q", kind)
	case e.Command != nil && e.URL != nil:
		return cfg, errors.New(`give either "command" (stdio) or "url" (HTTP), not both`)
	case e.Command != nil && kind != "" && kind != "stdio", e.URL != nil && kind == "stdio":
		return cfg, fmt.Errorf("type %s does not match the entry's %s", kind, map[bool]string{true: "command", false: "url"}[e.Command != nil])
	case e.Command == nil && e.URL == nil:
		return cfg, errors.New(`give "command" (a stdio server) or "url" (streamable HTTP)`)
	}
	if e.Enabled != nil {
		cfg.enabled = *e.Enabled
	}
	if e.Timeout != nil {
		if *e.Timeout <= 0 || *e.Timeout > 24*3600 {
			return cfg, errors.New("timeout is a number of seconds, more than 0")
		}
		cfg.timeout = time.Duration(*e.Timeout * float64(time.Second))
	}
	if e.Exposure != nil {
		if !slices.Contains(mcpExposures, *e.Exposure) {
			return cfg, fmt.Errorf("exposure must be one of %s", strings.Join(mcpExposures, ", "))
		}
		cfg.exposure = *e.Exposure
	}
	for tool, exposure := range e.ToolExposure {
		if !slices.Contains(mcpExposures, exposure) {
			return cfg, fmt.Errorf("toolExposure of %s must be one of %s", tool, strings.Join(mcpExposures, ", "))
		}
	}
	if e.Description != nil {
		cfg.description = *e.Description
	}
	var err error
	expandAll := func(values map[string]string, commands bool) map[string]string {
		out := map[string]string{}
		for k, v := range values {
			if err == nil {
				out[k], err = expand(v, commands)
				if err != nil {
					err = fmt.Errorf("%s: %v", k, err)
				}
			}
		}
		return out
	}
	if e.URL != nil {
		cfg.transport, cfg.url = "http", *e.URL
		cfg.headers = expandAll(e.Headers, true)
		return cfg, err
	}
	cfg.transport, cfg.command = "stdio", expandHome(*e.Command)
	if cfg.command == "" {
		return cfg, errors.New("command is empty")
	}
	for _, arg := range e.Args {
		if err == nil {
			var a string
			a, err = expand(arg, false)
			cfg.args = append(cfg.args, expandHome(a))
		}
	}
	cfg.env = expandAll(e.Env, true)
	cfg.cwd = cwd
	if e.Cwd != nil {
		cfg.cwd = resolvePath(cwd, expandHome(*e.Cwd))
	}
	return cfg, err
}

// expandHome makes a leading ~/ the home directory.
func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

var mcpVariable = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandMCPValue resolves a value as pi does: ${VAR} from the
// environment (unset: empty), and, where commands are allowed, a whole
// value "!command" as the command's trimmed output (run).
func expandMCPValue(value string, commands bool, getenv func(string) string, run func(command string) (string, error)) (string, error) {
	if command, ok := strings.CutPrefix(value, "!"); ok && commands {
		return run(command)
	}
	return mcpVariable.ReplaceAllStringFunc(value, func(v string) string { return getenv(v[2 : len(v)-1]) }), nil
}

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
	expand := func(value string, commands bool) (string, error) {
		return expandMCPValue(value, commands, s.env.getenv, func(command string) (string, error) {
			return s.runKeyCommand(s.ctx, command)
		})
	}
	configs, warnings := loadMCPConfig(s.set.agentDir, s.set.cwd, s.set.cfg.approve, expand)
	for _, w := range warnings {
		s.warn(w)
	}
	s.mcp.start(configs)
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
func (m *mcpServers) update(srv *mcpServer) {
	m.mu.Lock()
	u := mcpServerUpdate{Name: srv.cfg.name, State: srv.state, Error: srv.err, ToolCount: len(srv.tools)}
	m.mu.Unlock()
	m.s.emit("mcp_server_update", u)
}

// mcpServers are the servers of one session and their state.
type mcpServers struct {
	s      *session
	mu     mutex[mcpServersMu] // guards every server's state, conn and tools, and waited
	on     []*mcpServer
	waited bool            // the first request waited for the servers with direct tools (awaitFirst)
	loaded map[string]bool // the deferred tools tool_search loaded, by name: declared from then on
	// loading is closed once the configuration is read and the servers
	// are connecting (startMCP); nil before.
	loading chan struct{}
}

// mcpServer is one server of a session.
type mcpServer struct {
	cfg     mcpServerConfig
	state   string // connecting, connected, failed, disabled
	err     string
	conn    *mcpConn
	stop    func() // ends its child; nil when none runs
	tools   []mcpTool
	tried   time.Time // the last connection attempt
	warned  bool      // its failure was reported
	waiting chan struct{}
}

// mcpTool is one tool of a server, as the model is offered it.
type mcpTool struct {
	server   string
	remote   string // the server's own name of it
	readOnly bool
	tool     *tool
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
	if srv.state == "connecting" {
		m.mu.Unlock()
		return
	}
	srv.state, srv.err, srv.tried = "connecting", "", m.s.env.clock.Now()
	done := make(chan struct{})
	srv.waiting = done
	m.mu.Unlock()
	m.update(srv)
	m.s.goBackground(func() {
		defer close(done)
		err := m.dial(srv)
		m.mu.Lock()
		if err != nil {
			srv.state, srv.err = "failed", err.Error()
		}
		report := err != nil && !srv.warned
		srv.warned = srv.warned || err != nil
		m.mu.Unlock()
		m.update(srv)
		if report {
			m.s.warn(fmt.Sprintf("MCP server %s failed: %v", srv.cfg.name, err))
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
	var err error
	if cfg.transport == "http" {
		var h *mcpHTTP
		conn, h = m.openHTTP(srv)
		stop, negotiated = h.close, h.setVersion
	} else if conn, stop, err = m.startStdio(srv); err != nil {
		return err
	}
	// The session's end (its close, or rpi's) stops the server, as it
	// stops the session's processes.
	context.AfterFunc(s.ctx, guarded(s.stderr, "stopping an MCP server", stop))
	ctx := s.ctx
	init, err := conn.request(ctx, "initialize", map[string]any{
		"protocolVersion": mcpProtocolVersion,
		"capabilities":    map[string]any{"roots": map[string]any{"listChanged": false}},
		"clientInfo":      map[string]any{"name": "rpi", "version": rpiVersion},
	}, cfg.timeout, false)
	if err == nil {
		var answer struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if json.Unmarshal(init, &answer) != nil || !slices.Contains(mcpProtocolVersions, answer.ProtocolVersion) {
			err = fmt.Errorf("answered initialize with protocol version %q, which rpi does not speak", answer.ProtocolVersion)
		} else if negotiated != nil {
			negotiated(answer.ProtocolVersion)
		}
	}
	if err == nil {
		err = conn.notify("notifications/initialized", nil)
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
	if !closed {
		srv.conn, srv.stop, srv.tools, srv.state = conn, stop, tools, "connected"
	}
	m.mu.Unlock()
	if closed {
		stop()
		return errors.New("the session closed")
	}
	return nil
}

// startStdio starts srv's process in its own process group, its stdout
// the connection's input and its stderr mcp.log's; stop ends it (stdin
// closed, SIGTERM, SIGKILL to the group after the grace).
func (m *mcpServers) startStdio(srv *mcpServer) (*mcpConn, func(), error) {
	s, cfg := m.s, srv.cfg
	cmd := s.command(cfg.command, cfg.args...)
	cmd.Dir = cfg.cwd
	cmd.Env = slices.Clone(s.set.childEnv)
	for _, k := range sortedKeys(cfg.env) {
		cmd.Env = append(cmd.Env, k+"="+cfg.env[k])
	}
	log := func(line string) { s.mcpLog(cfg.name, line) }
	stderrLines := &logWriter{log: func(line string) { log("stderr: " + line) }}
	var conn *mcpConn
	c, err := s.procs.start(cmd, childOptions{stdin: true}, func(stream string, p []byte) {
		if stream == "stdout" {
			conn.feed(p)
		} else {
			stderrLines.Write(p)
		}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("could not start %s: %v", cfg.command, unwrapPathError(err))
	}
	conn = newMCPConn(cfg.name, log)
	conn.send = (&mcpStdin{server: cfg.name, stdin: c.stdin}).send
	m.prepare(srv, conn)
	go guarded(s.stderr, "waiting for an MCP server", func() {
		ps := c.wait()
		conn.end(fmt.Errorf("MCP server %s exited (%v)", cfg.name, ps))
		c.release()
		m.mu.Lock()
		exited := srv.conn == conn && s.ctx.Err() == nil
		if exited {
			srv.conn, srv.stop, srv.state, srv.err, srv.tools = nil, nil, "failed", fmt.Sprintf("exited (%v)", ps), nil
		}
		m.mu.Unlock()
		if exited {
			m.update(srv)
		}
	})()
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			c.stdin.Close()
			c.stop()
		})
	}
	return conn, stop, nil
}

// prepare gives a new connection what every transport's has: the roots
// rpi answers with (the session's cwd) and where notifications go.
func (m *mcpServers) prepare(srv *mcpServer, conn *mcpConn) {
	conn.roots = []mcpRoot{{URI: "file://" + filepath.ToSlash(m.s.set.cwd), Name: filepath.Base(m.s.set.cwd)}}
	conn.onNotify = func(method string, params json.RawMessage) { m.notified(srv, conn, method, params) }
}

// maxMCPToolPages bounds tools/list's pages, maxMCPTools a server's tools.
const (
	maxMCPToolPages = 100
	maxMCPTools     = 1000
)

// listTools is the server's tools, every page of them, named as the
// model sees them.
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
	cursor := ""
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
	}
	taken := map[string]bool{}
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
		name := mcpToolName(srv.cfg.name, r.Name, func(n string) bool { return taken[n] })
		taken[name] = true
		description := strings.TrimSpace(r.Description)
		if description == "" {
			description = cmp.Or(r.Title, r.Annotations.Title, fmt.Sprintf("MCP tool %s from server %s", r.Name, srv.cfg.name))
		}
		t := mcpTool{server: srv.cfg.name, remote: r.Name, readOnly: r.Annotations.ReadOnlyHint != nil && *r.Annotations.ReadOnlyHint}
		t.tool = &tool{name: name, summary: description, description: description, schema: schema, accepts: mcpArguments}
		t.tool.decode = func(s *session, raw json.RawMessage) (toolCall, error) {
			return &mcpCall{tool: t, args: raw}, nil
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// mcpArguments is what rpi checks an MCP tool's arguments against: one
// JSON object, no key twice; the server checks them against its schema.
var mcpArguments = json.RawMessage(`{"type":"object","additionalProperties":{}}`)

// mcpInputSchema is a tool's input schema as the model is given it: an
// object schema (type object and properties added when missing, as pi
// does); anything but a JSON object is refused.
func mcpInputSchema(raw json.RawMessage) (json.RawMessage, error) {
	var schema map[string]any
	if len(raw) == 0 {
		schema = map[string]any{}
	} else if err := json.Unmarshal(raw, &schema); err != nil || schema == nil {
		return nil, errors.New("its inputSchema is not a JSON object")
	}
	if _, ok := schema["type"]; !ok {
		schema["type"] = "object"
	}
	if _, ok := schema["properties"]; !ok {
		schema["properties"] = map[string]any{}
	}
	return json.Marshal(schema)
}

// mcpToolName is the model's name of a server's tool, as pi makes it:
// mcp__<server>__<tool> with every character outside [A-Za-z0-9_] as _,
// and, when longer than 64 characters or taken by another tool, cut and
// ended with _ and 8 hex digits of a hash of the two names.
func mcpToolName(server, tool string, taken func(string) bool) string {
	var b strings.Builder
	for _, r := range "mcp__" + server + "__" + tool {
		if r < 128 && (r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) <= 64 && !taken(name) {
		return name
	}
	sum := sha256.Sum256([]byte(server + "\x00" + tool))
	hash := hex.EncodeToString(sum[:])[:8]
	return name[:min(len(name), 64-len(hash)-1)] + "_" + hash
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
		if srv.state == "failed" && srv.cfg.enabled && now.Sub(srv.tried) >= mcpReconnectEvery {
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
// against query and loads the best limit of them.
func (m *mcpServers) search(query string, limit int) []*tool {
	m.mu.Lock()
	defer m.mu.Unlock()
	var candidates []*tool
	var docs []searchDoc
	for _, srv := range m.on {
		if srv.state != "connected" {
			continue
		}
		for _, t := range srv.tools {
			if searchable(srv.exposure(t.remote)) && !m.loaded[t.tool.name] {
				candidates = append(candidates, t.tool)
				docs = append(docs, newSearchDoc(t.tool, srv.cfg.name+" "+srv.cfg.description))
			}
		}
	}
	var loaded []*tool
	for _, name := range rankTools(query, docs, limit) {
		if m.loaded == nil {
			m.loaded = map[string]bool{}
		}
		m.loaded[name] = true
		loaded = append(loaded, candidates[slices.IndexFunc(candidates, func(t *tool) bool { return t.name == name })])
	}
	return loaded
}

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
		m.s.goBackground(func() {
			tools, err := m.listTools(m.s.ctx, srv, conn)
			if err != nil {
				conn.log("listing the changed tools: " + err.Error())
				return
			}
			m.mu.Lock()
			if srv.conn == conn {
				srv.tools = tools
			}
			m.mu.Unlock()
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

// ---- Calls ----

// mcpCall is one call of an MCP tool: the arguments as the model gave
// them (an object; the server checks them against its schema).
type mcpCall struct {
	tool mcpTool
	args json.RawMessage
}

func (c *mcpCall) describe() (title, message string) {
	return "Allow MCP tool " + c.tool.server + ": " + escapeControl(c.tool.remote) + "?", "Arguments: " + escapeInJSON(string(c.args))
}

func (c *mcpCall) run(ctx context.Context, s *session, call toolRun) (toolResult, error) {
	conn, timeout, err := s.mcp.conn(c.tool.server)
	if err != nil {
		return toolResult{}, err
	}
	raw, err := conn.request(ctx, "tools/call", map[string]any{"name": c.tool.remote, "arguments": c.args}, timeout, true)
	if err != nil {
		return toolResult{}, err
	}
	var result struct {
		Content           []mcpContent    `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
	if err := json.Unmarshal(raw, &result); err != nil {
		return toolResult{}, fmt.Errorf("MCP server %s answered tools/call with an invalid result: %v", c.tool.server, err)
	}
	content := mcpModelContent(result.Content, result.StructuredContent)
	text := ""
	for _, b := range content {
		if b.Type == "text" {
			text += b.Text
		}
	}
	if result.IsError {
		if text == "" {
			return toolResult{}, fmt.Errorf("MCP tool %s/%s returned an error", c.tool.server, c.tool.remote)
		}
		return toolResult{}, errors.New(limitMCPText(joinTexts(content)))
	}
	return toolResult{Content: limitMCPContent(content), Details: map[string]string{"server": c.tool.server, "tool": c.tool.remote}}, nil
}

// mcpContent is one content block of a tool's result.
type mcpContent struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Data        string `json:"data"`
	MimeType    string `json:"mimeType"`
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Size        *int   `json:"size"`
	Resource    *struct {
		URI      string  `json:"uri"`
		MimeType string  `json:"mimeType"`
		Text     *string `json:"text"`
		Blob     *string `json:"blob"`
	} `json:"resource"`
}

// mcpModelContent is what the model is given of a result, as pi gives
// it: text and images as they are, an embedded resource's text (or image,
// or a text-typed blob decoded), a note for what a model cannot take, and
// without content the structured content as indented JSON.
func mcpModelContent(blocks []mcpContent, structured json.RawMessage) []contentBlock {
	var out []contentBlock
	text := func(t string) { out = append(out, contentBlock{Type: "text", Text: t}) }
	for _, b := range blocks {
		switch b.Type {
		case "text":
			text(b.Text)
		case "image":
			out = append(out, contentBlock{Type: "image", Data: b.Data, MimeType: b.MimeType})
		case "audio":
			text("[audio " + b.MimeType + " omitted]")
		case "resource_link":
			var details []string
			if b.MimeType != "" {
				details = append(details, b.MimeType)
			}
			if b.Size != nil {
				details = append(details, formatSize(*b.Size))
			}
			d := ""
			if len(details) > 0 {
				d = " (" + strings.Join(details, ", ") + ")"
			}
			desc := ""
			if b.Description != "" {
				desc = ": " + b.Description
			}
			text(fmt.Sprintf("[Resource %s %q%s%s]", b.URI, cmp.Or(b.Title, b.Name), d, desc))
		case "resource":
			r := b.Resource
			switch {
			case r == nil:
				text("[unsupported MCP content resource]")
			case r.Text != nil:
				text(*r.Text)
			case r.Blob != nil && strings.HasPrefix(r.MimeType, "image/"):
				out = append(out, contentBlock{Type: "image", Data: *r.Blob, MimeType: r.MimeType})
			case r.Blob != nil && isTextMimeType(r.MimeType):
				data, err := base64.StdEncoding.DecodeString(*r.Blob)
				if err != nil {
					text(fmt.Sprintf("[binary resource %s (%s) omitted]", r.URI, cmp.Or(r.MimeType, "unknown type")))
				} else {
					text(string(data))
				}
			default:
				text(fmt.Sprintf("[binary resource %s (%s) omitted]", r.URI, cmp.Or(r.MimeType, "unknown type")))
			}
		default:
			text("[unsupported MCP content " + b.Type + "]")
		}
	}
	if len(blocks) == 0 && len(structured) > 0 && string(structured) != "null" {
		var v any
		if json.Unmarshal(structured, &v) == nil {
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			enc.Encode(v)
			text(strings.TrimSuffix(b.String(), "\n"))
		}
	}
	return out
}

// isTextMimeType reports whether a blob of that type is text.
func isTextMimeType(mimeType string) bool {
	t := strings.ToLower(strings.TrimSpace(strings.SplitN(mimeType, ";", 2)[0]))
	return strings.HasPrefix(t, "text/") || t == "application/json" || strings.HasSuffix(t, "+json") || strings.HasSuffix(t, "+xml")
}

// maxMCPText is how much of a result's text the model gets (pi's 20 KB):
// longer text keeps its start and end.
const maxMCPText = 20 << 10

func joinTexts(content []contentBlock) string {
	var texts []string
	for _, b := range content {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// limitMCPContent keeps a result's text within maxMCPText, as pi does:
// longer text becomes one block cut in the middle, the images follow.
func limitMCPContent(content []contentBlock) []contentBlock {
	combined := joinTexts(content)
	if len(combined) <= maxMCPText {
		if content == nil {
			return []contentBlock{}
		}
		return content
	}
	out := []contentBlock{{Type: "text", Text: limitMCPText(combined)}}
	for _, b := range content {
		if b.Type == "image" {
			out = append(out, b)
		}
	}
	return out
}

// limitMCPText cuts text longer than maxMCPText in the middle, at
// character boundaries, with pi's note of what was cut.
func limitMCPText(text string) string {
	if len(text) <= maxMCPText {
		return text
	}
	head := maxMCPText / 2
	for head > 0 && !utf8.RuneStart(text[head]) {
		head--
	}
	tail := len(text) - (maxMCPText - maxMCPText/2)
	for tail < len(text) && !utf8.RuneStart(text[tail]) {
		tail++
	}
	lines := strings.Count(text, "\n") + 1
	if strings.HasSuffix(text, "\n") {
		lines--
	}
	return fmt.Sprintf("Warning: truncated output (original token count: %d)\nTotal output lines: %d\n\n%s…%d chars truncated…%s",
		(len(text)+3)/4, lines, text[:head], utf8.RuneCountInString(text[head:tail]), text[tail:])
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

// mcpLogLine appends a line to <agent dir>/mcp.log, with the time, as
// pi writes it; past 5 MB the file moves to mcp.log.1.
func (s *session) mcpLogLine(line string) {
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
	fmt.Fprintf(f, "%s %s\n", s.env.clock.Now().UTC().Format(time.RFC3339), strings.ReplaceAll(line, "\n", " "))
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
