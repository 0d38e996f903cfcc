package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
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
		s, _ := openTestSessionIn(t, e, `{"text":["ok"]}`, &recordingSink{}, &approvingUI{}, nil)
		defer s.close()
		s.mcp.listedChanged = hook
		s.startMCP()
		s.mcp.awaitFirst(context.Background())
		if got := waitForTools(s, "helper", want); got != want {
			t.Errorf("tools %q; want %q", got, want)
		}
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
		s, _ := openTestSessionIn(t, e, `{"text":["ok"]}`, &recordingSink{}, &approvingUI{}, nil)
		defer s.close()
		s.mcp.listedChanged = hook
		s.startMCP()
		s.mcp.awaitFirst(context.Background())
		if got := waitForTools(s, "helper", want); got != want {
			t.Errorf("tools %q; want %q", got, want)
		}
	})
}
