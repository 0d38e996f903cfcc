package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitForTools waits until server's tools are want (space-separated),
// for at most 10 s: the tools it has then.
func waitForTools(s *session, server, want string) string {
	got := ""
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, info := range s.mcp.list() {
			if info.Name == server {
				got = strings.Join(info.Tools, " ")
			}
		}
		if got == want {
			break
		}
	}
	return got
}

// onceRelisted is a hook for mcpServers.listedChanged, and the channel
// it closes at its first call.
func onceRelisted() (hook func(), relisted chan struct{}) {
	relisted = make(chan struct{})
	var once sync.Once
	return func() { once.Do(func() { close(relisted) }) }, relisted
}

// checkToolsRelisted opens a session in e (its mcp.json written) whose
// listings of changed tools call hook, starts its servers, and checks
// that the server helper's tools become want.
func checkToolsRelisted(t *testing.T, e *testEnv, hook func(), want string) {
	t.Helper()
	s, _ := openTestSessionIn(t, e, `{"text":["ok"]}`, &recordingSink{}, &approvingUI{}, nil)
	defer s.close()
	s.mcp.listedChanged = hook
	s.startMCP()
	s.mcp.awaitFirst(context.Background())
	if got := waitForTools(s, "helper", want); got != want {
		t.Errorf("tools %q; want %q", got, want)
	}
}

// TestMCPToolsChangedAsItConnects: a server that tells
// tools/list_changed as rpi connects it, before rpi has made it one of
// the session's servers, and answers the listing that notification
// brings before the listing rpi made to connect (stale by then), has its
// tools listed again once it is connected: the listing the notification
// brought was dropped, the server left with its stale tools, over stdio
// and over HTTP alike.
func TestMCPToolsChangedAsItConnects(t *testing.T) {
	const want = "mcp__helper__echo mcp__helper__added"
	t.Run("stdio", func(t *testing.T) {
		gate, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer gate.Close()
		hook, relisted := onceRelisted()
		opened := make(chan struct{})
		defer close(opened)
		go func() { // the server's stale answer waits until rpi has taken the listing the change brought
			c, err := gate.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			select {
			case <-relisted:
				c.Write([]byte{1})
			case <-opened:
			}
		}()
		e := newTestEnv(t)
		writeMCPConfig(t, e.agentDir, "helper", "change-at-first-list", map[string]any{
			"env": map[string]string{"RPI_HELPER": "mcp-server", "MCP_TEST_MODE": "change-at-first-list", "MCP_TEST_GATE": gate.Addr().String()}})
		checkToolsRelisted(t, e, hook, want)
	})
	t.Run("http", func(t *testing.T) {
		object := map[string]any{"type": "object"}
		fresh := []any{map[string]any{"name": "echo", "inputSchema": object}, map[string]any{"name": "added", "inputSchema": object}}
		hook, relisted := onceRelisted()
		var mu sync.Mutex
		lists := 0
		srv := &hostileMCP{respond: func(w http.ResponseWriter, r *http.Request, m hostileMessage) bool {
			if m.Method != "tools/list" {
				return false
			}
			mu.Lock()
			lists++
			n := lists
			mu.Unlock()
			if n > 1 {
				writeJSONRPC(w, m.ID, map[string]any{"tools": fresh})
				return true
			}
			// The change, told on this listing's stream; its stale answer
			// once rpi has taken the listing the change brought.
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-relisted:
			case <-r.Context().Done():
				return true
			}
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"tools\":[{\"name\":\"echo\",\"inputSchema\":{\"type\":\"object\"}}]}}\n\n", m.ID)
			return true
		}}
		hs := httptest.NewServer(srv)
		defer hs.Close()
		e := newTestEnv(t)
		writeMCPServers(t, e.agentDir, map[string]any{"helper": map[string]any{"url": hs.URL + "/mcp", "exposure": "direct"}})
		checkToolsRelisted(t, e, hook, want)
	})
}

// TestMCPHTTPServerStreamRefreshesTheSignIn: a server that refuses its
// own event stream's GET with a 401 (the stored sign-in's token
// expired) gets the GET once more with a refreshed token, as pi's
// transport refreshes it for any request: the stream was left closed,
// with a line in mcp.log. A second 401 is not refreshed again.
func TestMCPHTTPServerStreamRefreshesTheSignIn(t *testing.T) {
	for name, refusals := range map[string]int{"refused once": 1, "refused twice": 2} {
		t.Run(name, func(t *testing.T) {
			gets := make(chan string, 8)
			var mu sync.Mutex
			refused, refreshes := 0, 0
			srv := &hostileMCP{respond: func(w http.ResponseWriter, r *http.Request, m hostileMessage) bool {
				if r.Method != http.MethodGet {
					return false
				}
				gets <- r.Header.Get("Authorization")
				mu.Lock()
				refuse := refused < refusals
				refused++
				mu.Unlock()
				if refuse {
					w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
					w.WriteHeader(http.StatusUnauthorized)
					return true
				}
				w.WriteHeader(http.StatusMethodNotAllowed)
				return true
			}}
			s := openRefreshing(t, srv, func() int {
				mu.Lock()
				defer mu.Unlock()
				refreshes++
				return refreshes
			})
			if state := s.mcp.list()[0].State; state != "connected" {
				t.Fatalf("state %q", state)
			}
			if auth := receive(t, gets, "the GET of the server's event stream"); auth != "Bearer at-1" {
				t.Errorf("the first GET went with Authorization %q", auth)
			}
			if auth := receive(t, gets, "the GET again, after a refresh"); auth != "Bearer at-2" {
				t.Errorf("the second GET went with Authorization %q", auth)
			}
			if refusals == 2 {
				const gaveUp = "[web] the server's event stream: HTTP 401"
				waitForFile(t, filepath.Join(s.set.agentDir, "mcp.log"), gaveUp)
			}
			s.close()
			mu.Lock()
			defer mu.Unlock()
			if refreshes != 1 || len(gets) != 0 {
				t.Errorf("%d refreshes, %d GETs more", refreshes, len(gets))
			}
		})
	}
}

// TestMCPResourcePagesBound: a server whose resources/list gives a new
// nextCursor at every page fails that listing after 100 pages, with
// pi's text for it, which names the method: the text said only "listed
// over more than 100 pages".
func TestMCPResourcePagesBound(t *testing.T) {
	s := openMCPSession(t, "endless-resource-cursor", nil)
	c, err := s.decodeToolCall("list_mcp_resources", json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.run(context.Background(), s, toolRun{id: "t", update: func(toolResult) {}})
	if text := joinTexts(res.Content); err != nil || text != `{"resources":[],"errors":[{"server":"helper","error":"MCP resources/list exceeded 100 pages"}]}` {
		t.Errorf("endless pages: %v, %.300s", err, text)
	}
}

// fixtureMCPServers are the MCP servers over HTTP a fixture's
// mcpHTTPServer option starts, by the first part of the path: /json/mcp
// and /sse/mcp speak mcpTestRespond (answers as JSON, or as event
// streams), /500/mcp answers every message HTTP 500 "internal trouble",
// /401/mcp 401 with a bearer challenge, /html/mcp 200 with an HTML page,
// and /redirect/mcp redirects to /json/mcp.
func fixtureMCPServers() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/json/mcp", &mcpTestHTTPServer{})
	mux.Handle("/sse/mcp", &mcpTestHTTPServer{sse: true})
	mux.HandleFunc("/500/mcp", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "internal trouble", http.StatusInternalServerError)
	})
	mux.HandleFunc("/401/mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		w.WriteHeader(http.StatusUnauthorized)
	})
	mux.HandleFunc("/html/mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html>a login page</html>")
	})
	mux.HandleFunc("/redirect/mcp", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/json/mcp", http.StatusFound)
	})
	return mux
}

// TestMCPHTTPServerStreamAccepted: a server that answers the GET of its
// own event stream with 202 and no body (or any answer that is not an
// event stream, a status other than 408, 429 and 5xx) is not asked
// again, as pi asks it no more (its transport takes such an answer as
// an error no retry helps); rpi writes why in mcp.log, where pi says
// nothing.
func TestMCPHTTPServerStreamAccepted(t *testing.T) {
	srv := &hostileMCP{respond: func(w http.ResponseWriter, r *http.Request, m hostileMessage) bool {
		if r.Method != http.MethodGet {
			return false
		}
		w.WriteHeader(http.StatusAccepted)
		return true
	}}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	s, e := openHostile(t, hs.URL+"/mcp", nil)
	waitForFile(t, filepath.Join(e.agentDir, "mcp.log"), `[web] the server's event stream: content type "", not an event stream`)
	if got, err := callEcho(t, s, "hi"); err != nil {
		t.Errorf("a call after: %q, %v", got, err)
	}
	s.close()
	gets := 0
	for _, r := range srv.sent() {
		if r.method == http.MethodGet {
			gets++
		}
	}
	if gets != 1 {
		t.Errorf("%d GETs; want 1", gets)
	}
}
