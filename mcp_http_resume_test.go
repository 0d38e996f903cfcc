package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
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
				case r.Method == http.MethodGet && c.getStatus != 0:
					w.WriteHeader(c.getStatus)
				case r.Method == http.MethodGet:
					w.Header().Set("Content-Type", "text/event-stream")
					answer, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": callID.Load(), "result": map[string]any{
						"content": []any{map[string]any{"type": "text", "text": "echo: hi"}}}})
					fmt.Fprintf(w, "id: e2\ndata: %s\n\n", answer)
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
				if r.method == http.MethodGet {
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
