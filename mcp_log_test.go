package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMCPLogRedacted: the keys rpi holds for its MCP servers — a stdio
// server's env keys, an HTTP entry's header values and the token after
// its scheme, a URL's password (and the Basic authorization made of
// it), a stored sign-in's access and refresh tokens — are kept out of
// mcp.log, as they are out of tool results: a server that writes one to
// its stderr, in a log message or in a line that is not JSON-RPC (cut
// in the middle of the key) put it in the file users paste into bug
// reports.
func TestMCPLogRedacted(t *testing.T) {
	const (
		envKey      = "gh-log-token-0123456789"
		headerToken = "mcp-log-header-token-0123456789"
		apiKey      = "mcp-log-api-key-9876543210"
		password    = "url-log-password-4242"
		accessToken = "signed-in-access-token-1234"
		refresh     = "signed-in-refresh-token-5678"
	)
	hs := echoingMCPServer(func(w http.ResponseWriter, r *http.Request) {
		// A server that echoes what it was sent, and (to the sign-in)
		// what it knows.
		echoed := "sent " + r.Header.Get("Authorization") + " key " + r.Header.Get("X-Api-Key")
		if r.Header.Get("Authorization") == "Bearer "+accessToken {
			echoed += " refresh " + refresh
		}
		logMsg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/message",
			"params": map[string]any{"level": "info", "logger": "echo", "data": echoed}})
		fmt.Fprintf(w, "data: %s\n\n", logMsg)
		fmt.Fprintf(w, "data: %s%s\n\n", strings.Repeat("x", 183), r.Header.Get("Authorization")) // not JSON: logged cut at 200 bytes, inside the key
	})
	defer hs.Close()
	e := newTestEnv(t)
	e.vars["GH"], e.vars["MCP_TOKEN"], e.vars["MCP_KEY"] = envKey, headerToken, apiKey
	basicURL := strings.Replace(hs.URL, "http://", "http://app:"+password+"@", 1) + "/basic"
	writeMCPServers(t, e.agentDir, map[string]any{
		"helper": map[string]any{"command": os.Args[0], "exposure": "direct", "env": map[string]string{"RPI_HELPER": "mcp-server",
			"MCP_TEST_MODE": "log-env", "MCP_TEST_LOG": "GITHUB_TOKEN", "GITHUB_TOKEN": "${GH}"}},
		"keyed":  map[string]any{"url": hs.URL + "/keyed", "exposure": "direct", "headers": map[string]string{"Authorization": "Bearer ${MCP_TOKEN}", "X-Api-Key": "${MCP_KEY}"}},
		"basic":  map[string]any{"url": basicURL, "exposure": "direct"},
		"signed": map[string]any{"url": hs.URL + "/signed", "exposure": "direct"},
	})
	auth, _ := json.Marshal(map[string]any{"mcp__signed|" + hs.URL + "/signed": map[string]any{
		"tokens": map[string]any{"access_token": accessToken, "token_type": "Bearer", "refresh_token": refresh}}})
	os.WriteFile(filepath.Join(e.agentDir, "mcp-auth.json"), auth, 0o600)
	s := openWithMCP(t, e)
	logPath := filepath.Join(e.agentDir, "mcp.log")
	var log string
	// The stderr of the stdio server comes in on its own pipe: read until
	// its last line is in.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(log, "log-env done") && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		data, _ := os.ReadFile(logPath)
		log = string(data)
	}
	s.close()
	data, _ := os.ReadFile(logPath)
	log = string(data)
	basic := base64.StdEncoding.EncodeToString([]byte("app:" + password))
	for _, secret := range []string{envKey, headerToken, apiKey, password, basic, accessToken, refresh} {
		if strings.Contains(log, secret[:8]) {
			t.Errorf("mcp.log holds %s (or its start):\n%s", secret, log)
		}
	}
	for _, want := range []string{"[helper] stderr: GITHUB_TOKEN=[redacted]", "[helper] info env: GITHUB_TOKEN=[redacted]",
		"[keyed] info echo: sent [redacted] key [redacted]\n", "[basic] info echo: sent Basic [redacted] key \n",
		"[signed] info echo: sent Bearer [redacted] key  refresh [redacted]", "not a JSON-RPC message (ignored): xxxxx"} {
		if !strings.Contains(log, want) {
			t.Errorf("mcp.log has no %q:\n%s", want, log)
		}
	}
}

// TestMCPLogLongKeyCut: a key longer than the span redacted past an
// excerpt's end (an X-Api-Key of 6,000 bytes), echoed by a server in a
// line logged cut, is kept out of mcp.log: the text was cut past that
// span before it was redacted, which left the key's start, no longer
// whole, in the excerpt.
func TestMCPLogLongKeyCut(t *testing.T) {
	key := "long-key-" + strings.Repeat("0123456789abcdef", 375)
	hs := echoingMCPServer(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "data: %s%s\n\n", strings.Repeat("x", 100), r.Header.Get("X-Api-Key")) // not JSON: logged cut at 200 bytes, inside the key
	})
	defer hs.Close()
	e := newTestEnv(t)
	e.vars["MCP_KEY"] = key
	writeMCPServers(t, e.agentDir, map[string]any{
		"keyed": map[string]any{"url": hs.URL, "exposure": "direct", "headers": map[string]string{"X-Api-Key": "${MCP_KEY}"}},
	})
	s := openWithMCP(t, e) // connected: the line before the answer is logged
	s.close()
	data, _ := os.ReadFile(filepath.Join(e.agentDir, "mcp.log"))
	log := string(data)
	if !strings.Contains(log, "not a JSON-RPC message (ignored): xxxxx") {
		t.Fatalf("mcp.log has no line for the message that is not JSON:\n%s", log)
	}
	if strings.Contains(log, key[:8]) {
		t.Errorf("mcp.log holds the start of the key:\n%s", log)
	}
}

// TestMCPStderrLineCutInAKey: a stdio server's stderr line that comes in
// two reads, the first ending past 4 KiB of the line and inside a key,
// is logged with the key redacted. The line's start was kept to 4 KiB
// and the rest of the line glued on after it, without what lay between:
// the key, cut in two, was in mcp.log whole but for a few bytes.
func TestMCPStderrLineCutInAKey(t *testing.T) {
	key := "stderr-key-0123456789abcdefghij"
	secrets := newRedactor([]string{key})
	var lines []string
	w := &logWriter{log: func(line string) { lines = append(lines, redactedExcerpt(secrets, line, maxMCPLogLine)) }}
	w.Write([]byte(strings.Repeat("x", 4080) + key[:20]))
	w.Write([]byte(key[20:] + " and the end\n"))
	w.Write([]byte("next\n"))
	if len(lines) != 2 || lines[1] != "next" {
		t.Fatalf("logged %d lines, the last %.40q; want 2, the last \"next\"", len(lines), lines[len(lines)-1])
	}
	if strings.Contains(lines[0], key[:8]) || strings.Contains(lines[0], key[20:]) {
		t.Errorf("the line holds part of the key: %q", lines[0][4000:])
	}
	if !strings.HasPrefix(lines[0], strings.Repeat("x", 4080)) {
		t.Errorf("the line lost its start: %.40q", lines[0])
	}
}

// echoingMCPServer is an HTTP MCP server with no tools whose answer to
// tools/list is an event stream: echo writes its first events (what the
// server echoes of the request r), the answer comes after them.
func echoingMCPServer(echo func(w http.ResponseWriter, r *http.Request)) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage
			Method string
		}
		json.Unmarshal(body, &m)
		switch m.Method {
		case "initialize":
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID,
				"result": map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}}}})
		case "tools/list":
			w.Header().Set("Content-Type", "text/event-stream")
			echo(w, r)
			answer, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"tools": []any{}}})
			fmt.Fprintf(w, "data: %s\n\n", answer)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
}
