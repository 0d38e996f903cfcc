package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestMCPHTTPStreamResumed: a call's event stream that ends before its
// answer, after events with ids, is resumed as pi resumes it: a GET with
// the session and the last id as Last-Event-ID, after the wait the
// server's retry field asks, and the answer comes on that stream. A
// stream without ids is not (the call fails, no GET sent); a server
// whose GETs fail with 503 gets 5 of them in a row, then the call fails;
// one that answers 405 (it offers no GET stream) gets one.
func TestMCPHTTPStreamResumed(t *testing.T) {
	const ended = "MCP server web ended its answer without the result"
	cases := map[string]struct {
		ids       bool
		getStatus int // 0: the resumed stream, with the answer
		want, err string
		wantGets  int
	}{
		"resumed":        {ids: true, want: "echo: hi", wantGets: 1},
		"no ids":         {ids: false, err: ended},
		"503 every time": {ids: true, getStatus: 503, err: ended, wantGets: mcpStreamRetries},
		"405, no stream": {ids: true, getStatus: 405, err: ended, wantGets: 1},
		"401 to the GET": {ids: true, getStatus: 401, err: ended, wantGets: 1},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			srv := &hostileMCP{}
			var callID atomic.Value // the call's id, which the resumed stream answers
			srv.respond = func(w http.ResponseWriter, r *http.Request, m hostileMessage) bool {
				switch {
				case r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") == "": // the server's own stream: none
					w.WriteHeader(http.StatusMethodNotAllowed)
				case r.Method == http.MethodGet && c.getStatus != 0:
					w.WriteHeader(c.getStatus)
				case r.Method == http.MethodGet:
					writeEchoEvent(w, "id: e2\n", callID.Load())
				case m.Method == "tools/call":
					callID.Store(m.ID)
					w.Header().Set("Content-Type", "text/event-stream")
					id := ""
					if c.ids {
						id = "id: e1\n"
					}
					fmt.Fprintf(w, "retry: 1\n%sdata: %s\n\n", id, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}}`)
				default:
					return false
				}
				return true
			}
			hs := httptest.NewServer(srv)
			defer hs.Close()
			s, _ := openHostile(t, hs.URL+"/mcp", nil)
			got, err := callEcho(t, s, "hi")
			if got != c.want || fmt.Sprint(err) != fmt.Sprint(cmpErr(c.err)) {
				t.Errorf("the call: %q, %v; want %q, %s", got, err, c.want, c.err)
			}
			s.close()
			var gets []http.Header
			for _, r := range srv.sent() {
				if r.method == http.MethodGet && r.header.Get("Last-Event-ID") != "" {
					gets = append(gets, r.header)
				}
			}
			if len(gets) != c.wantGets {
				t.Fatalf("%d GETs; want %d", len(gets), c.wantGets)
			}
			for _, h := range gets {
				if h.Get("Last-Event-ID") != "e1" || h.Get("Mcp-Session-Id") != "s-1" || h.Get("Accept") != "text/event-stream" {
					t.Errorf("a GET's headers: %v", h)
				}
			}
		})
	}
}

// TestMCPHTTPResumeCountsFromAnEvent: a resumed stream that brings an
// event before it ends starts the count of retries again, as pi counts
// them, even after the last retry the count allowed: a call whose first
// 4 GETs fail (503), whose 5th brings an event and ends, gets its answer
// on the 6th (the call failed once the count reached 5, the event
// notwithstanding).
func TestMCPHTTPResumeCountsFromAnEvent(t *testing.T) {
	srv := &hostileMCP{}
	var callID atomic.Value
	var gets atomic.Int64
	srv.respond = func(w http.ResponseWriter, r *http.Request, m hostileMessage) bool {
		switch {
		case r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") == "":
			w.WriteHeader(http.StatusMethodNotAllowed)
		case r.Method == http.MethodGet:
			switch n := gets.Add(1); {
			case n < mcpStreamRetries:
				w.WriteHeader(http.StatusServiceUnavailable)
			case n == mcpStreamRetries:
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprintf(w, "id: e2\ndata: %s\n\n", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"still working"}}`)
			default:
				if r.Header.Get("Last-Event-ID") != "e2" {
					t.Errorf("GET %d: Last-Event-ID %q, want e2", n, r.Header.Get("Last-Event-ID"))
				}
				writeEchoEvent(w, "", callID.Load())
			}
		case m.Method == "tools/call":
			callID.Store(m.ID)
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "retry: 1\nid: e1\ndata: %s\n\n", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}}`)
		default:
			return false
		}
		return true
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	s, _ := openHostile(t, hs.URL+"/mcp", nil)
	if got, err := callEcho(t, s, "hi"); got != "echo: hi" || err != nil {
		t.Errorf("the call: %q, %v", got, err)
	}
	if n := gets.Load(); n != mcpStreamRetries+1 {
		t.Errorf("%d GETs; want %d", n, mcpStreamRetries+1)
	}
}

// writeEchoEvent answers the echo tool's call id ("echo: hi") as an
// event stream of one event, its fields before the data (an id).
func writeEchoEvent(w http.ResponseWriter, fields string, id any) {
	w.Header().Set("Content-Type", "text/event-stream")
	answer, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{
		"content": []any{map[string]any{"type": "text", "text": "echo: hi"}}}})
	fmt.Fprintf(w, "%sdata: %s\n\n", fields, answer)
}

// cmpErr is text as an error's text compares ("<nil>" for none).
func cmpErr(text string) any {
	if text == "" {
		return nil
	}
	return text
}

// TestMCPHTTPResumeLeavesNothing: a call whose stream is being resumed —
// the GET held open and silent by the server — ends with the session:
// no connection to the server and no goroutine of the transport's stays.
func TestMCPHTTPResumeLeavesNothing(t *testing.T) {
	open := new(atomic.Int64)
	held := make(chan struct{}, 1)
	srv := &hostileMCP{respond: func(w http.ResponseWriter, r *http.Request, m hostileMessage) bool {
		switch {
		case r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") == "":
			w.WriteHeader(http.StatusMethodNotAllowed)
		case r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			held <- struct{}{}
			<-r.Context().Done()
		case m.Method == "tools/call":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "retry: 1\nid: e1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"x\"}}\n\n")
		default:
			return false
		}
		return true
	}}
	hs := countingServer(srv, open)
	defer hs.Close()
	s, _ := openHostile(t, hs.URL+"/mcp", nil)
	errs := make(chan error, 1)
	go func() {
		_, err := callEcho(t, s, "hi")
		errs <- err
	}()
	receive(t, held, "the resumed stream, held")
	s.close()
	if err := receive(t, errs, "the call's end"); err == nil {
		t.Errorf("the call: %v", err)
	}
	waitNothingOpen(t, open)
}

// TestMCPHTTPServerStream: once the session is initialized, rpi opens
// the server's own event stream (a GET with the session, the agreed
// version and Accept: text/event-stream), as pi does; a tool list
// changed told on it is listed again, as a stdio server's is. The
// session's close ends the stream: no connection and no goroutine of the
// transport's stays.
func TestMCPHTTPServerStream(t *testing.T) {
	open := new(atomic.Int64)
	opened, tell := make(chan http.Header, 1), make(chan struct{})
	var changed atomic.Bool
	srv := &hostileMCP{respond: func(w http.ResponseWriter, r *http.Request, m hostileMessage) bool {
		switch {
		case r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			opened <- r.Header.Clone()
			select {
			case <-tell:
			case <-r.Context().Done():
				return true
			}
			changed.Store(true)
			fmt.Fprint(w, "id: g1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case m.Method == "tools/list" && changed.Load():
			writeJSONRPC(w, m.ID, map[string]any{"tools": []any{map[string]any{"name": "echo", "inputSchema": map[string]any{"type": "object"}},
				map[string]any{"name": "added", "inputSchema": map[string]any{"type": "object"}}}})
		default:
			return false
		}
		return true
	}}
	hs := countingServer(srv, open)
	defer hs.Close()
	s, _ := openHostile(t, hs.URL+"/mcp", nil)
	h := receive(t, opened, "the GET of the server's event stream")
	if h.Get("Accept") != "text/event-stream" || h.Get("Mcp-Session-Id") != "s-1" || h.Get("MCP-Protocol-Version") != "2025-06-18" || h.Get("Last-Event-ID") != "" {
		t.Errorf("the GET's headers: %v", h)
	}
	close(tell)
	var tools []string
	for deadline := time.Now().Add(10 * time.Second); len(tools) != 2 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		tools = s.mcp.list()[0].Tools
	}
	if strings.Join(tools, " ") != "mcp__web__echo mcp__web__added" {
		t.Errorf("the tools after the change told on the server's stream: %q", tools)
	}
	s.close()
	waitNothingOpen(t, open)
}

// TestMCPHTTPServerStreamBounded: a server whose event stream ends at
// once, every time (an id and a retry time of 1 ms in it, no event), is
// opened again 5 times, each after the last id (Last-Event-ID) and at
// least 100 ms apart, then left closed with a line in mcp.log saying so.
func TestMCPHTTPServerStreamBounded(t *testing.T) {
	srv := &hostileMCP{respond: func(w http.ResponseWriter, r *http.Request, m hostileMessage) bool {
		if r.Method != http.MethodGet {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "retry: 1\nid: g1\n\n")
		return true
	}}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	s, e := openHostile(t, hs.URL+"/mcp", nil)
	const gaveUp = "[web] the server's event stream ended and could not be opened again"
	var log []byte
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(string(log), gaveUp) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		log, _ = os.ReadFile(filepath.Join(e.agentDir, "mcp.log"))
	}
	if !strings.Contains(string(log), gaveUp) {
		t.Fatalf("mcp.log:\n%s", log)
	}
	s.close()
	var resumed []string
	for _, r := range srv.sent() {
		if r.method == http.MethodGet {
			resumed = append(resumed, r.header.Get("Last-Event-ID"))
		}
	}
	if strings.Join(resumed, ",") != ",g1,g1,g1,g1,g1" {
		t.Errorf("the GETs' Last-Event-ID: %q; want none, then g1 5 times", resumed)
	}
}

// countingServer starts srv; open counts the connections to it.
func countingServer(srv http.Handler, open *atomic.Int64) *httptest.Server {
	hs := httptest.NewUnstartedServer(srv)
	hs.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		switch state {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	hs.Start()
	return hs
}

// TestMCPHTTPServerStreamAfterRefresh: a server that refuses the
// initialized notification's token (401) gets it again with a refreshed
// token, and then its own event stream is opened, as after any
// initialized it took. The stream was opened only when the first POST
// of the notification succeeded: after a refresh, never.
func TestMCPHTTPServerStreamAfterRefresh(t *testing.T) {
	gets := make(chan string, 4)
	var refused atomic.Bool
	srv := &hostileMCP{respond: func(w http.ResponseWriter, r *http.Request, m hostileMessage) bool {
		switch {
		case r.Method == http.MethodGet:
			gets <- r.Header.Get("Authorization")
			w.WriteHeader(http.StatusMethodNotAllowed)
		case m.Method == "notifications/initialized" && !refused.Swap(true):
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			w.WriteHeader(http.StatusUnauthorized)
		default:
			return false
		}
		return true
	}}
	s := openRefreshing(t, srv, func() int { return 1 })
	if state := s.mcp.list()[0].State; state != "connected" {
		t.Fatalf("state %q", state)
	}
	if auth := receive(t, gets, "the GET of the server's event stream"); auth != "Bearer at-2" {
		t.Errorf("the GET went with Authorization %q", auth)
	}
}

// openRefreshing is openSignedIn with srv as the server, beside a token
// endpoint that answers the refresh numbered refreshed() with at-<n+1>
// and rt-<n+1>.
func openRefreshing(t *testing.T, srv http.Handler, refreshed func() int) *session {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			n := refreshed()
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprint("at-", n+1), "token_type": "Bearer", "expires_in": 3600, "refresh_token": fmt.Sprint("rt-", n+1)})
			return
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return openSignedIn(t, hs.URL)
}
