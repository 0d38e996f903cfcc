package main

// rpi's MCP client over HTTP, and the sign-ins it refreshes, against
// hostile parties: an MCP server, an authorization server, a project's
// files. Each party is a local server of the test's; what it must not
// get (a token), or must not make rpi do (read without end, keep a
// connection), is checked on its side.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hostileMCP is an MCP server over streamable HTTP whose answers a test
// takes over where it likes (respond); it records every request.
// Unless respond answers: initialize gives session "s-1" (session, when
// set, names the one it gives), a notification 202, tools/list one tool
// (echo), tools/call its text echoed, DELETE 200.
type hostileMCP struct {
	respond func(w http.ResponseWriter, r *http.Request, m hostileMessage) bool
	session string

	mu       sync.Mutex
	requests []hostileRequest
}

// hostileMessage is a message rpi POSTed, decoded enough to answer it.
type hostileMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// hostileRequest is a request the server got: its method, headers and
// message.
type hostileRequest struct {
	method string
	header http.Header
	msg    hostileMessage
}

func (h *hostileMCP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m hostileMessage
	json.Unmarshal(body, &m)
	h.mu.Lock()
	h.requests = append(h.requests, hostileRequest{r.Method, r.Header.Clone(), m})
	respond := h.respond
	session := h.session
	h.mu.Unlock()
	if respond != nil && respond(w, r, m) {
		return
	}
	if r.Method == http.MethodDelete {
		return
	}
	var result any
	switch m.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", cmp.Or(session, "s-1"))
		result = map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}}}
	case "tools/list":
		result = map[string]any{"tools": []any{map[string]any{"name": "echo", "inputSchema": map[string]any{"type": "object"}}}}
	case "tools/call":
		var p struct {
			Arguments struct{ Text string } `json:"arguments"`
		}
		json.Unmarshal(m.Params, &p)
		result = map[string]any{"content": []any{map[string]any{"type": "text", "text": "echo: " + p.Arguments.Text}}}
	default:
		w.WriteHeader(http.StatusAccepted)
		return
	}
	writeJSONRPC(w, m.ID, result)
}

// writeJSONRPC answers the request id with result, as one JSON message.
func writeJSONRPC(w http.ResponseWriter, id json.RawMessage, result any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

// sent is what the server got, in order.
func (h *hostileMCP) sent() []hostileRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hostileRequest(nil), h.requests...)
}

// callEcho calls the server web's echo tool with text: its text, or
// the call's error.
func callEcho(t *testing.T, s *session, text string) (string, error) {
	t.Helper()
	call, err := s.decodeToolCall("mcp__web__echo", json.RawMessage(`{"text":"`+text+`"}`))
	if err != nil {
		t.Fatalf("%v (servers: %+v)", err, s.mcp.list())
	}
	res, err := call.run(context.Background(), s, toolRun{id: "t", update: func(toolResult) {}})
	return joinTexts(res.Content), err
}

// openHostile opens a session whose mcp.json has the server web at url
// (with entry's other fields), and waits for it to connect or fail.
func openHostile(t *testing.T, url string, entry map[string]any) (*session, *testEnv) {
	t.Helper()
	e := newTestEnv(t)
	fields := map[string]any{"url": url, "exposure": "direct"}
	for k, v := range entry {
		fields[k] = v
	}
	writeMCPServers(t, e.agentDir, map[string]any{"web": fields})
	s := openWithMCP(t, e)
	t.Cleanup(s.close)
	return s, e
}

// TestMCPHTTPHostileEchoInConnectError: a server that echoes the key it
// was sent (the entry's header, the stored sign-in's token) in its
// answer to initialize — as a JSON-RPC error, or in an HTTP error's body
// escaped as JSON escapes it or cut where rpi cuts the body — gets it
// into no state, event or warning the client sees.
func TestMCPHTTPHostileEchoInConnectError(t *testing.T) {
	const key = "hdr/key+0123456789" // a / and a +: JSON and URLs escape them
	cases := map[string]struct {
		respond func(w http.ResponseWriter, r *http.Request, m hostileMessage) bool
		shown   string // what the client sees where the key was
	}{
		"JSON-RPC error": {func(w http.ResponseWriter, r *http.Request, m hostileMessage) bool {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID,
				"error": map[string]any{"code": -32000, "message": "not welcome: " + r.Header.Get("X-Api-Key")}})
			return true
		}, "not welcome: [redacted]"},
		"HTTP error, JSON-escaped": {func(w http.ResponseWriter, r *http.Request, m hostileMessage) bool {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			b, _ := json.Marshal(map[string]string{"error": "key " + r.Header.Get("X-Api-Key")})
			w.Write([]byte(strings.ReplaceAll(string(b), "/", `\/`)))
			return true
		}, `key [redacted]`},
		// rpi shows an error body's first 300 bytes: the key's first 10.
		"HTTP error, the key cut": {func(w http.ResponseWriter, r *http.Request, m hostileMessage) bool {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, "%s%s", strings.Repeat("x", 290), r.Header.Get("X-Api-Key"))
			return true
		}, `xxx","toolCount"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			srv := &hostileMCP{respond: c.respond}
			hs := httptest.NewServer(srv)
			defer hs.Close()
			e := newTestEnv(t)
			e.vars["MCP_KEY"] = key
			writeMCPServers(t, e.agentDir, map[string]any{"web": map[string]any{"url": hs.URL + "/mcp",
				"headers": map[string]string{"X-Api-Key": "${MCP_KEY}"}, "exposure": "direct"}})
			startFakeModel(t, apiOpenAI, `{"text":["ok"]}`, e.agentDir)
			ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir()})
			ps.waitFor(`"state":"failed"`)
			ps.send(`{"id":"s","type":"get_mcp_servers"}`)
			ps.waitFor(`"id":"s"`)
			ps.close()
			out := string(ps.out.bytes())
			for _, form := range []string{"key+0", "0123456789"} { // as sent, JSON-escaped or cut
				if strings.Contains(out, form) {
					t.Errorf("the client got the key (%s):\n%s", form, out)
				}
			}
			if !strings.Contains(out, c.shown) {
				t.Errorf("the client did not get %s:\n%s", c.shown, out)
			}
		})
	}
}

var _ = fmt.Sprint
var _ = net.Dial
var _ = os.Getpid
var _ = filepath.Join
var _ = runtime.NumGoroutine
var _ atomic.Int64
var _ = time.Now
