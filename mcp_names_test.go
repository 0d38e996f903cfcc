package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

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
