package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// acpSDK is the ACP SDK whose WebSocket client TestServeACPSDKWebSocket
// runs: a client of rpi serve that nobody here wrote.
const acpSDK = "@agentclientprotocol/sdk@2.4.0"

// installACPSDK installs the SDK (into RPI_ACP_SDK_CACHE when set, kept
// between runs; else into the test's temporary folder) and gives its
// folder; the test is skipped, saying so, without npm or the registry.
func installACPSDK(t *testing.T) string {
	t.Helper()
	npm := needProgram(t, "npm")
	dir := os.Getenv("RPI_ACP_SDK_CACHE")
	if dir == "" {
		dir = t.TempDir()
	}
	sdk := filepath.Join(dir, "node_modules", "@agentclientprotocol", "sdk")
	if data, err := os.ReadFile(filepath.Join(sdk, "package.json")); err == nil && strings.Contains(string(data), `"version": "2.4.0"`) {
		return sdk
	}
	npmInstall(t, npm, dir, acpSDK, acpSDK)
	return sdk
}

// nodeWithWebSocket is how to run node with a global WebSocket: node 22
// has one; node 20 and 21 behind a flag. Older: skipped.
func nodeWithWebSocket(t *testing.T) []string {
	node := needProgram(t, "node")
	out, err := exec.Command(node, "-p", "process.versions.node").Output()
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimSpace(string(out)), ".", 2)[0])
	switch {
	case err != nil || major < 20:
		t.Skipf("node %s has no WebSocket (the ACP SDK's client needs node 20 or later)", strings.TrimSpace(string(out)))
	case major < 22:
		return []string{node, "--experimental-websocket", "--no-warnings"}
	}
	return []string{node}
}

// TestServeACPSDKWebSocket: the official ACP SDK 2.4's WebSocket client
// (createWebSocketStream) against rpi serve: initialize, session/new and
// a prompt over one connection; then, as the SDK says to reconnect, a new
// connection, initialize and session/load of the session the host still
// holds (its history replayed), and a prompt there. Every agent message
// chunk of a turn carries its event's seq; a replayed one none.
func TestServeACPSDKWebSocket(t *testing.T) {
	if testing.Short() {
		t.Skip("installs the ACP SDK from npm")
	}
	t.Parallel()
	node := nodeWithWebSocket(t)
	sdk := installACPSDK(t)
	e := newTestEnv(t)
	e.vars["RPI_SERVE_TOKEN"] = "sdk-token"
	e.vars["PI_FAUX_RESPONSE"] = "Hello over the SDK."
	cwd := t.TempDir()
	sh := startServe(t, e, cwd, "--model", "faux/faux-1", "--listen", "ws://127.0.0.1:0/acp")
	url := regexp.MustCompile(`ws://127\.0\.0\.1:\d+/acp`).FindString(string(sh.stderr.bytes()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	script, _ := filepath.Abs("testdata/serve-sdk/client.mjs")
	cmd := exec.CommandContext(ctx, node[0], append(node[1:], script, sdk, url, "sdk-token", cwd)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the SDK client: %v\nstdout: %s\nstderr: %s\nrpi's stderr: %s", err, out, exitStderr(err), sh.stderr.bytes())
	}
	type chunk struct {
		Kind, Text string
		Seq        *int64
	}
	var got struct {
		LoadSession bool
		SessionID   string
		Turn1       struct {
			StopReason string
			Chunks     []chunk
		}
		Loaded []chunk
		Turn2  struct {
			StopReason string
			Chunks     []chunk
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !got.LoadSession || got.Turn1.StopReason != "end_turn" || got.Turn2.StopReason != "end_turn" {
		t.Fatalf("loadSession %v, stop reasons %q and %q", got.LoadSession, got.Turn1.StopReason, got.Turn2.StopReason)
	}
	said := func(cs []chunk, numbered bool) string {
		var b strings.Builder
		for _, c := range cs {
			if (c.Seq != nil) != numbered {
				t.Errorf("%s %q: seq %v, want numbered %v", c.Kind, c.Text, c.Seq, numbered)
			}
			b.WriteString(c.Kind + ":" + c.Text + " ")
		}
		return b.String()
	}
	if s := said(got.Turn1.Chunks, true); s != "agent_message_chunk:Hello over the SDK. " {
		t.Errorf("turn 1: %s", s)
	}
	if s := said(got.Loaded, false); s != "user_message_chunk:Hello agent_message_chunk:Hello over the SDK. " {
		t.Errorf("the load replayed: %s", s)
	}
	if s := said(got.Turn2.Chunks, true); s != "agent_message_chunk:Hello over the SDK. " {
		t.Errorf("turn 2: %s", s)
	}
	sh.end()
}

// exitStderr is what a command that failed wrote to stderr.
func exitStderr(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}
