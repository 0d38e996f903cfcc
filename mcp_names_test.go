package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// listfileServer is an mcp.json entry of the test server in mode
// "listfile": it lists the tools named in tools (a file the test writes)
// and writes its pid to pidFile.
func listfileServer(tools, pidFile, exposure string) map[string]any {
	return map[string]any{"command": os.Args[0], "exposure": exposure, "env": map[string]string{"RPI_HELPER": "mcp-server",
		"MCP_TEST_MODE": "listfile", "MCP_TEST_TOOLS": tools, "MCP_TEST_PIDFILE": pidFile}}
}

// writeToolNames writes the names a "listfile" server lists, in order.
func writeToolNames(t *testing.T, path string, names ...string) {
	t.Helper()
	data, _ := json.Marshal(names)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// runMCPTool runs the offered tool name with no arguments and is its
// result's text, or "" when no tool has that name.
func runMCPTool(t *testing.T, s *session, name string) string {
	t.Helper()
	c, err := s.decodeToolCall(name, json.RawMessage(`{}`))
	if err != nil {
		return ""
	}
	res, err := c.run(context.Background(), s, toolRun{id: "t", update: func(toolResult) {}})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return joinTexts(res.Content)
}

// mcpToolServer is the server whose tool the offered name runs, or "".
func mcpToolServer(s *session, name string) string {
	c, err := s.decodeToolCall(name, json.RawMessage(`{"text":"x"}`))
	if mc, ok := c.(*mcpCall); err == nil && ok {
		return mc.tool.server
	}
	return ""
}

// killMCPServer kills the server whose pid is in pidFile and waits until
// the session has taken its end (it is failed).
func killMCPServer(t *testing.T, s *session, name, pidFile string) {
	t.Helper()
	var pid int
	data, _ := os.ReadFile(pidFile)
	if _, err := fmt.Sscan(string(data), &pid); err != nil {
		t.Fatalf("%s's pid: %q, %v", name, data, err)
	}
	p, err := os.FindProcess(pid)
	if err == nil {
		err = p.Kill()
	}
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); s.mcp.state(name).State != "failed"; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s killed: %+v", name, s.mcp.state(name))
		}
	}
}

// reconnectMCP connects the server again and waits until it has.
func reconnectMCP(t *testing.T, s *session, name string) {
	t.Helper()
	done, err := s.mcp.reconnect(name)
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if st := s.mcp.state(name); st.State != "connected" {
		t.Fatalf("%s reconnected: %+v", name, st)
	}
}

// TestMCPToolNameStaysWithItsServer: of servers h and h__x, h's tool
// x__echo and h__x's echo would both be mcp__h__x__echo; rpi gave the
// plain name to the one listed first and the hash to the other, so once
// the one that had it ended and the other connected again first, the
// name a user approved (or the model was told of) ran the other server's
// tool. h__x is left out with a warning naming h; the name runs h's tool
// whatever connects when.
func TestMCPToolNameStaysWithItsServer(t *testing.T) {
	e := newTestEnv(t)
	dir := t.TempDir()
	pids := map[string]string{"h": filepath.Join(dir, "h.pid"), "h__x": filepath.Join(dir, "hx.pid")}
	entry := func(name, mode string) map[string]any {
		return map[string]any{"command": os.Args[0], "exposure": "direct", "env": map[string]string{"RPI_HELPER": "mcp-server",
			"MCP_TEST_MODE": mode, "MCP_TEST_PIDFILE": pids[name]}}
	}
	writeMCPServers(t, e.agentDir, map[string]any{"h": entry("h", "alike"), "h__x": entry("h__x", "")})
	s := openWithMCP(t, e)
	t.Cleanup(s.close)
	const name = "mcp__h__x__echo"
	holder := mcpToolServer(s, name)
	if holder != "h" && holder != "h__x" {
		t.Fatalf("%s runs %q (%+v)", name, holder, s.mcp.list())
	}
	other := map[string]string{"h": "h__x", "h__x": "h"}[holder]
	// The server that has the name ends; the other connects again first,
	// then it does.
	killMCPServer(t, s, holder, pids[holder])
	if slices.ContainsFunc(s.mcp.list(), func(i mcpServerInfo) bool { return i.Name == other }) {
		reconnectMCP(t, s, other)
	}
	reconnectMCP(t, s, holder)
	if got := mcpToolServer(s, name); got != holder {
		t.Errorf("%s ran %s's tool, then %s's", name, holder, got)
	}
	if holder != "h" {
		t.Errorf("%s ran server %s's tool; want h's (h__x left out)", name, holder)
	}
}

// TestMCPServerNamesThatClash: a server whose tools' names could be
// another's — its name, once sanitized, that one's and "__" then more
// (h, h__x: h's x__t and h__x's t are both mcp__h__x__t), or that one's
// and "_" (h, h_: h's _t and h_'s t) — is left out with a warning naming
// both, as one spelled alike (a-b, a_b) is; h_x, whose tools' names
// cannot be h's, is not. The one read later goes: in a file names are
// read in order, the user's file before the project's.
func TestMCPServerNamesThatClash(t *testing.T) {
	configs, warnings := loadMCPConfigFrom(t, `{"mcpServers":{"h":{"command":"x"},"h__x":{"command":"x"},"h-":{"command":"x"},"h_x":{"command":"x"},"g--y":{"command":"x"},"g":{"command":"x"}}}`)
	var names []string
	for _, c := range configs {
		names = append(names, c.name)
	}
	if !slices.Equal(names, []string{"g", "h", "h_x"}) {
		t.Errorf("servers %v", names)
	}
	for _, want := range []string{"MCP server g--y in ", "MCP server h- in ", "MCP server h__x in "} {
		i := slices.IndexFunc(warnings, func(w string) bool { return strings.HasPrefix(w, want) })
		if i < 0 {
			t.Errorf("no warning %q…: %q", want, warnings)
			continue
		}
		if other := string(want[len("MCP server ")]); !strings.Contains(warnings[i], "server "+other+"'s tools") {
			t.Errorf("the warning does not name %s: %q", other, warnings[i])
		}
	}
	if len(warnings) != 3 {
		t.Errorf("warnings %q", warnings)
	}
	// Beside an editor's servers h_ and g, h is left out (h__x, whose
	// tools' names cannot be h_'s, is kept), and g is the editor's.
	agentDir := t.TempDir()
	os.WriteFile(filepath.Join(agentDir, "mcp.json"), []byte(`{"mcpServers":{"h":{"command":"x"},"h__x":{"command":"x"},"h_x":{"command":"x"},"g":{"command":"x"}}}`), 0o600)
	configs, warnings = loadMCPConfig(agentDir, t.TempDir(), false, []string{"h_", "g"}, func(v string, _ bool) (string, error) { return v, nil })
	if len(configs) != 2 || configs[0].name != "h__x" || configs[1].name != "h_x" || len(warnings) != 1 ||
		!strings.HasPrefix(warnings[0], "MCP server h in ") || !strings.Contains(warnings[0], "server h_'s tools") {
		t.Errorf("beside the editor's servers: %+v, %q", configs, warnings)
	}
}

// TestMCPHashTwinsKeepTheirNames: two tools alike once sanitized whose
// 8-digit hashes are the same (found by trying names, as a server could)
// get the same names however the server orders its listing: rpi gave the
// hashed name to the one listed first, so a server that listed them the
// other way round on its next connection swapped their names.
func TestMCPHashTwinsKeepTheirNames(t *testing.T) {
	a, b := mcpHashTwins("helper")
	e := newTestEnv(t)
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.json")
	writeToolNames(t, tools, a, b)
	writeMCPServers(t, e.agentDir, map[string]any{"helper": listfileServer(tools, filepath.Join(dir, "pid"), "direct")})
	s := openWithMCP(t, e)
	t.Cleanup(s.close)
	runs := func() map[string]string { // by name, the tool it runs
		got := map[string]string{}
		for _, info := range s.mcp.list() {
			for _, name := range info.Tools {
				got[name] = runMCPTool(t, s, name)
			}
		}
		return got
	}
	first := runs()
	if len(first) != 2 {
		t.Fatalf("named %v", first)
	}
	writeToolNames(t, tools, b, a)
	reconnectMCP(t, s, "helper")
	if then := runs(); fmt.Sprint(then) != fmt.Sprint(first) {
		t.Errorf("listed %q, %q: %v; then the other way round: %v", a, b, first, then)
	}
}

// mcpHashTwins are two tool names of server that are alike once
// sanitized and have the same 8 hex digits of hash (mcpHash).
func mcpHashTwins(server string) (string, string) {
	seen := map[string]string{}
	for i := 0; ; i++ {
		var b strings.Builder
		b.WriteString("t")
		for bit := range 24 { // a tool named t and 24 of - and ., all sanitized as _
			b.WriteByte("-."[i>>bit&1])
		}
		name := b.String()
		h := mcpHash(server, name)
		if other, ok := seen[h]; ok {
			return other, name
		}
		seen[h] = name
	}
}

// TestMCPToolNamesKeptAcrossRelisting: a name the model was given, or
// tool_search loaded, runs the tool it was given to for the rest of the
// session, as in pi: a server that lists its tool a-b, then (telling
// tools/list_changed) a_b instead, offers a_b with its hash, not as
// mcp__helper__a_b, which ran a_b though the search had loaded a-b (and
// an approval for the name, a-b's, let a_b run).
func TestMCPToolNamesKeptAcrossRelisting(t *testing.T) {
	s, tools := openListfileSession(t, "deferred", &recordingSink{}, "a-b")
	s.mcp.awaitAll(context.Background())
	if loaded := s.mcp.search("mcp__helper__a_b", 1); len(loaded) != 1 || loaded[0].name != "mcp__helper__a_b" {
		t.Fatalf("tool_search loaded %v", loaded)
	}
	if got := runMCPTool(t, s, "mcp__helper__a_b"); got != "called a-b" {
		t.Fatalf("mcp__helper__a_b: %q", got)
	}
	writeToolNames(t, tools, "a_b", "then")
	tellToolsChanged(t, s)
	for deadline := time.Now().Add(10 * time.Second); s.mcp.state("helper").ToolCount != 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never listed again: %+v", s.mcp.list())
		}
	}
	if got := runMCPTool(t, s, "mcp__helper__a_b"); got != "" {
		t.Errorf("mcp__helper__a_b, a-b's, ran %q", got)
	}
	if tools := s.mcp.list()[0].Tools; !slices.Contains(tools, "mcp__helper__a_b_"+mcpHash("helper", "a_b")) {
		t.Errorf("listed %v", tools)
	}
}

// TestMCPToolNameTriesBounded: a tool whose hashed name, and the
// numbered names after it, the server's other tools take (named so,
// which a server can, or with hashes made alike) is left out after a
// few tries: rpi tried on, as many times as names were taken, for each
// such tool under the servers' lock, so that a server could make its
// every listing cost millions of tries.
func TestMCPToolNameTriesBounded(t *testing.T) {
	tries := 0
	name := mcpToolName("s", "x-y", func(string) bool { tries++; return tries <= 1000 })
	if name != "" || tries > maxMCPNameTries+2 {
		t.Errorf("named %q after %d tries", name, tries)
	}
}

// TestMCPToolLeftOutWhenNamesTaken: a real server whose tools take x-y's
// hashed name and every numbered one after it offers its other tools,
// x-y left out with a line in mcp.log saying so.
func TestMCPToolLeftOutWhenNamesTaken(t *testing.T) {
	hash := mcpHash("helper", "x-y")
	listing := []string{"x-y", "x_y", "x_y_" + hash}
	for n := 2; n <= maxMCPNameTries; n++ {
		listing = append(listing, fmt.Sprintf("x_y_%s%d", hash[:4], n))
	}
	e := newTestEnv(t)
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.json")
	writeToolNames(t, tools, listing...)
	writeMCPServers(t, e.agentDir, map[string]any{"helper": listfileServer(tools, filepath.Join(dir, "pid"), "direct")})
	s := openWithMCP(t, e)
	t.Cleanup(s.close)
	if st := s.mcp.state("helper"); st.State != "connected" || st.ToolCount != len(listing)-1 {
		t.Errorf("%+v; want every tool but x-y", st)
	}
	for _, name := range s.mcp.list()[0].Tools {
		if got := runMCPTool(t, s, name); got == "called x-y" {
			t.Errorf("%s runs x-y", name)
		}
	}
	log, _ := os.ReadFile(filepath.Join(e.agentDir, "mcp.log"))
	if !strings.Contains(string(log), "[helper] tool x-y: its other tools took every name it could have (left out)") {
		t.Errorf("mcp.log:\n%s", log)
	}
}

// TestMCPToolNamesKeptPastTheLimit: a server that has had more than
// maxMCPNamed names in a session keeps those of the tools it listed
// last, as it does below the limit, when it lists them on a connection
// of its own: its a-b, listed with 999 others on each of 11 connections,
// keeps mcp__helper__a_b from a_b listed on the 12th in its place. rpi
// kept them only from the connection still open (on a reconnection,
// none), and gave a_b the name the model knew as a-b's.
func TestMCPToolNamesKeptPastTheLimit(t *testing.T) {
	e := newTestEnv(t)
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.json")
	listing := func(n int, first string) []string {
		names := []string{first}
		for i := 1; i < maxMCPTools; i++ {
			names = append(names, fmt.Sprintf("c%d_t%d", n, i))
		}
		return names
	}
	writeToolNames(t, tools, listing(0, "a-b")...)
	writeMCPServers(t, e.agentDir, map[string]any{"helper": listfileServer(tools, filepath.Join(dir, "pid"), "direct")})
	s := openWithMCP(t, e)
	t.Cleanup(s.close)
	s.mcp.awaitAll(context.Background())
	for n := 1; n*(maxMCPTools-1)+1 <= maxMCPNamed-maxMCPTools; n++ {
		writeToolNames(t, tools, listing(n, "a-b")...)
		reconnectMCP(t, s, "helper")
	}
	if got := runMCPTool(t, s, "mcp__helper__a_b"); got != "called a-b" {
		t.Fatalf("mcp__helper__a_b: %q", got)
	}
	writeToolNames(t, tools, listing(99, "a_b")...)
	reconnectMCP(t, s, "helper")
	if got := runMCPTool(t, s, "mcp__helper__a_b"); got != "" {
		t.Errorf("mcp__helper__a_b, a-b's, ran %q", got)
	}
	if got := runMCPTool(t, s, "mcp__helper__a_b_"+mcpHash("helper", "a_b")); got != "called a_b" {
		t.Errorf("a_b's hashed name ran %q", got)
	}
}

// TestMCPToolsChangedReported: a server whose tools change (it tells
// tools/list_changed) is reported again with its new tool count, as pi
// reports each refresh of a server's tools: the tools changed, but no
// mcp_server_update said so, and a client showing the count kept the old.
func TestMCPToolsChangedReported(t *testing.T) {
	sink := &recordingSink{}
	s, tools := openListfileSession(t, "direct", sink, "one")
	writeToolNames(t, tools, "one", "two", "three")
	tellToolsChanged(t, s)
	reported := func() bool {
		for _, ev := range sink.all() {
			if u, ok := ev.Data.(mcpServerUpdate); ok && ev.Type == "mcp_server_update" && u.State == "connected" && u.ToolCount == 3 {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(10 * time.Second); !reported(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no mcp_server_update with the 3 tools listed again: state %+v, events %v", s.mcp.state("helper"), sink.types())
		}
	}
}

// openListfileSession opens a session whose server "helper" (a
// "listfile" server of exposure) lists first; tools is the file it lists
// from. It waits until the server is connected or failed.
func openListfileSession(t *testing.T, exposure string, sink eventSink, first ...string) (s *session, tools string) {
	t.Helper()
	e := newTestEnv(t)
	dir := t.TempDir()
	tools = filepath.Join(dir, "tools.json")
	writeToolNames(t, tools, first...)
	writeMCPServers(t, e.agentDir, map[string]any{"helper": listfileServer(tools, filepath.Join(dir, "pid"), exposure)})
	s, _ = openTestSessionIn(t, e, `{"text":["ok"]}`, sink, &approvingUI{}, nil)
	t.Cleanup(s.close)
	s.startMCP()
	s.mcp.awaitFirst(context.Background())
	return s, tools
}

// tellToolsChanged calls the listfile server's tool "changed", which
// tells tools/list_changed before it answers.
func tellToolsChanged(t *testing.T, s *session) {
	t.Helper()
	conn, timeout, err := s.mcp.conn("helper")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.request(context.Background(), "tools/call", map[string]any{"name": "changed", "arguments": map[string]any{}}, timeout, false); err != nil {
		t.Fatal(err)
	}
}
