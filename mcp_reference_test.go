package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The official MCP reference servers, as a user installs them from npm:
// these tests install them into their own temporary folder (npm's cache
// too), and are skipped, saying so, without npm or without the registry.
const (
	mcpEverything = "@modelcontextprotocol/server-everything@2026.8.31"
	mcpFilesystem = "@modelcontextprotocol/server-filesystem@2026.8.31"
)

// installMCPServers installs the reference servers and gives the folder
// of their programs.
func installMCPServers(t *testing.T) string {
	t.Helper()
	npm := needProgram(t, "npm")
	needProgram(t, "node")
	dir := t.TempDir()
	npmInstall(t, npm, dir, "the MCP reference servers", mcpEverything, mcpFilesystem)
	return filepath.Join(dir, "node_modules", ".bin")
}

// npmInstall installs packages into dir with npm, or skips t (noting it
// for the run's last line) where npm cannot: a registry that cannot be
// reached costs a minute at most. what names the packages in that note.
func npmInstall(t *testing.T, npm, dir, what string, packages ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append([]string{"install", "--no-audit", "--no-fund", "--silent", "--fetch-timeout=20000",
		"--fetch-retries=1", "--ignore-scripts", "--no-save", "--prefix", dir}, packages...)
	cmd := exec.CommandContext(ctx, npm, args...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(dir, ".npm"), "npm_config_update_notifier=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		skippedForPrograms.Lock()
		skippedForPrograms.tests = append(skippedForPrograms.tests, t.Name()+" (npm could not install "+what+")")
		skippedForPrograms.Unlock()
		t.Skipf("npm install %s: %v\n%s", strings.Join(packages, " "), err, out)
	}
}

// TestMCPReferenceServers: server-everything over stdio and over
// streamable HTTP, and server-filesystem over stdio, connect; their tools
// reach the model by pi's names; a call of each kind of result comes back
// as pi gives it (text, an image, an embedded resource, a file's text
// read under the session's cwd, which rpi gives as the server's root).
func TestMCPReferenceServers(t *testing.T) {
	if testing.Short() {
		t.Skip("installs packages from npm")
	}
	t.Parallel()
	bin := installMCPServers(t)
	port := freePort(t)
	e := newTestEnv(t)
	cwd := t.TempDir()
	os.WriteFile(filepath.Join(cwd, "notes.txt"), []byte("remember the milk\n"), 0o644)
	writeMCPServers(t, e.agentDir, map[string]any{
		"everything": map[string]any{"command": filepath.Join(bin, "mcp-server-everything"), "args": []string{"stdio"}, "exposure": "direct"},
		"fs":         map[string]any{"command": filepath.Join(bin, "mcp-server-filesystem"), "args": []string{cwd}, "exposure": "direct"},
		"web":        map[string]any{"url": fmt.Sprintf("http://127.0.0.1:%d/mcp", port), "exposure": "direct"},
	})
	// The HTTP server is the user's own, started before rpi.
	web := exec.Command(filepath.Join(bin, "mcp-server-everything"), "streamableHttp")
	web.Env = append(os.Environ(), fmt.Sprint("PORT=", port))
	if err := web.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { web.Process.Kill(); web.Wait() })
	waitListening(t, port)

	e.vars["PATH"] = os.Getenv("PATH") // node, for the servers' #! line
	s := openWithMCP(t, e, "--cwd", cwd)
	for _, srv := range s.mcp.list() {
		if srv.State != "connected" || len(srv.Tools) == 0 {
			t.Fatalf("%s: %s %s, %d tools", srv.Name, srv.State, srv.Error, len(srv.Tools))
		}
	}
	call := func(name, args string) (toolResult, error) {
		c, err := s.decodeToolCall(name, json.RawMessage(args))
		if err != nil {
			return toolResult{}, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return c.run(ctx, s, toolRun{id: "t", update: func(toolResult) {}})
	}
	for _, server := range []string{"everything", "web"} {
		res, err := call("mcp__"+server+"__echo", `{"message":"hi"}`)
		if got := joinTexts(res.Content); err != nil || got != "Echo: hi" {
			t.Errorf("%s echo: %q, %v", server, got, err)
		}
	}
	res, err := call("mcp__everything__get_tiny_image", `{}`)
	if err != nil || !slicesContainsType(res.Content, "image") {
		t.Errorf("get_tiny_image: %+v, %v", res.Content, err)
	}
	res, err = call("mcp__everything__get_resource_reference", `{"resourceType":"Text","resourceId":1}`)
	if err != nil || !strings.Contains(joinTexts(res.Content), "Resource 1") {
		t.Errorf("get_resource_reference: %q, %v", joinTexts(res.Content), err)
	}
	res, err = call("mcp__fs__read_text_file", fmt.Sprintf(`{"path":%q}`, filepath.Join(cwd, "notes.txt")))
	if got := joinTexts(res.Content); err != nil || got != "remember the milk\n" {
		t.Errorf("read_text_file: %q, %v", got, err)
	}
}

func slicesContainsType(blocks []contentBlock, typ string) bool {
	for _, b := range blocks {
		if b.Type == typ {
			return true
		}
	}
	return false
}

// freePort is a TCP port on the loopback that nothing listens on now.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitListening waits up to 20 s for something to listen on port.
func waitListening(t *testing.T, port int) {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", fmt.Sprint("127.0.0.1:", port)); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("nothing listens on port %d", port)
}
