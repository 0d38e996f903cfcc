package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func init() { helpers["mcp-server"] = mcpTestServer }

// mcpTestServer is a small MCP server over stdio for the tests (the test
// binary run with RPI_HELPER=mcp-server): tools on two pages of
// tools/list, each showing one kind of result; it writes a line to
// stderr and a log message, as servers do. $MCP_TEST_MODE picks a
// misbehaviour: "flood" sends 5,000 tools/list_changed and log messages
// once initialized (its tool "lists" says how many tools/list it got),
// "crash-on-call" exits at a tools/call, "alike" lists only the tools
// a-b, a_b and x__echo, "many-tools" lists 100,000 tools, "endless-cursor"
// lists a tool a page with a new nextCursor each time, "same-cursor" with
// the same one, "same-resource-cursor" resources/list so (and
// "endless-resource-cursor" with a new one each time), "no-init" never
// answers initialize, "huge" answers
// tools/list with a line over rpi's limit, "old-version" answers with a
// protocol version rpi does not speak, "big-resources" lists 20 MiB of
// resources over 20 pages, "endless-resources" a resource a page with a
// new nextCursor each time (and resources/templates/list with a result
// that is not an object), "exit-after-list" exits once it has listed its
// tools, "big-log" sends a log message of 1 MiB once initialized,
// "roots" asks rpi for its roots then and writes the answer to the file
// $MCP_TEST_ROOTS, "log-env" writes the variables named in $MCP_TEST_LOG
// (NAME,NAME) with their values to stderr and in log messages once
// initialized, then "log-env done" to stderr, "echo-env" makes echo answer the value of the
// variable its text names, "close-stdout-on-call" closes its stdout at a
// tools/call and "close-stdout-on-list" at a tools/list, each then
// sleeping, its stdin still open, for an hour; "close-stdin" closes its
// stdin at once, then asks rpi for a ping (whose answer its stdin cannot
// take) every 50 ms for an hour: a child another test forks meanwhile
// holds a copy of the pipe until it execs, and a write then still goes in.
// "listfile" lists the tools named in the file $MCP_TEST_TOOLS (a JSON
// array), in its order, each read again at every tools/list; a call of
// any tool answers "called <its name>", and one of "changed" sends
// tools/list_changed first. "change-at-first-list" tells
// tools/list_changed as the first tools/list comes (rpi's, as it
// connects), holds that list's answer until the next tools/list has been
// answered with the tools echo and added (and, with $MCP_TEST_GATE, a
// byte read from that TCP address), then answers it with echo alone:
// what rpi listed as it connected is stale.
func mcpTestServer(args []string) {
	mode := os.Getenv("MCP_TEST_MODE")
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	send := func(msg map[string]any) {
		msg["jsonrpc"] = "2.0"
		b, _ := json.Marshal(msg)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	fmt.Fprintln(os.Stderr, "test server starting")
	if pidFile := os.Getenv("MCP_TEST_PIDFILE"); pidFile != "" {
		os.WriteFile(pidFile, []byte(fmt.Sprint(os.Getpid())), 0o600)
	}
	if mode == "close-stdin" {
		os.Stdin.Close()
		for i := range int(time.Hour / (50 * time.Millisecond)) {
			send(map[string]any{"id": fmt.Sprint("ping-", i), "method": "ping"})
			time.Sleep(50 * time.Millisecond)
		}
	}
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return
		}
		mcpTestRespond(mode, line, send)
	}
}

// mcpTestLists counts the tools/list requests mcpTestServer answered.
var mcpTestLists int

// mcpTestHeld is the id of the tools/list whose answer
// "change-at-first-list" holds.
var mcpTestHeld json.RawMessage

// mcpTestRespond answers one message of rpi's as mcpTestServer does,
// through send (a request's answer last).
func mcpTestRespond(mode string, line []byte, send func(map[string]any)) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil {
		return
	}
	if m.ID != nil && m.Method == "" { // rpi's answer to the server's roots/list ("roots")
		os.WriteFile(os.Getenv("MCP_TEST_ROOTS"), line, 0o600)
		return
	}
	if m.ID == nil {
		if m.Method == "notifications/initialized" && mode == "roots" {
			send(map[string]any{"id": "r1", "method": "roots/list"})
		}
		if m.Method == "notifications/initialized" && mode == "log-env" {
			for _, name := range strings.Split(os.Getenv("MCP_TEST_LOG"), ",") {
				fmt.Fprintf(os.Stderr, "%s=%s\n", name, os.Getenv(name))
				send(map[string]any{"method": "notifications/message", "params": map[string]any{"level": "info", "logger": "env", "data": name + "=" + os.Getenv(name)}})
			}
			fmt.Fprintln(os.Stderr, "log-env done")
		}
		if m.Method == "notifications/initialized" && mode == "big-log" {
			send(map[string]any{"method": "notifications/message", "params": map[string]any{"level": "info", "logger": "big", "data": "start " + strings.Repeat("x", 1<<20)}})
		}
		if m.Method == "notifications/initialized" && mode == "flood" {
			for range 5000 {
				send(map[string]any{"method": "notifications/tools/list_changed"})
				send(map[string]any{"method": "notifications/message", "params": map[string]any{"level": "debug", "data": "flood"}})
			}
		}
		return // notifications
	}
	answer := func(result any) { send(map[string]any{"id": m.ID, "result": result}) }
	switch m.Method {
	case "initialize":
		version := "2025-06-18"
		switch mode {
		case "no-init":
			return
		case "old-version":
			version = "2023-01-01"
		}
		send(map[string]any{"method": "notifications/message", "params": map[string]any{"level": "info", "logger": "test", "data": "ready"}})
		answer(map[string]any{"protocolVersion": version, "capabilities": map[string]any{"tools": map[string]any{"listChanged": true}, "resources": map[string]any{}},
			"serverInfo": map[string]any{"name": "rpi-test", "version": "1"}})
	case "tools/list":
		mcpTestLists++
		if mode == "close-stdout-on-list" {
			mcpTestCloseStdout()
		}
		var p struct {
			Cursor string `json:"cursor"`
		}
		json.Unmarshal(m.Params, &p)
		if mode == "huge" {
			answer(map[string]any{"tools": []any{}, "padding": strings.Repeat("x", maxMCPMessage)})
			return
		}
		object := map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}
		if mode == "change-at-first-list" {
			stale := []any{map[string]any{"name": "echo", "inputSchema": object}}
			fresh := append(slices.Clone(stale), map[string]any{"name": "added", "inputSchema": object})
			switch mcpTestLists {
			case 1:
				mcpTestHeld = m.ID
				send(map[string]any{"method": "notifications/tools/list_changed"})
			case 2:
				answer(map[string]any{"tools": fresh})
				if gate := os.Getenv("MCP_TEST_GATE"); gate != "" {
					if c, err := net.Dial("tcp", gate); err == nil {
						c.Read(make([]byte, 1))
						c.Close()
					}
				}
				send(map[string]any{"id": mcpTestHeld, "result": map[string]any{"tools": stale}})
			default:
				answer(map[string]any{"tools": fresh})
			}
			return
		}
		switch mode {
		case "endless-cursor", "same-cursor": // a page of one tool, and a cursor: a new one each time, or the same
			next := p.Cursor + "+"
			if mode == "same-cursor" {
				next = "again"
			}
			answer(map[string]any{"tools": []any{map[string]any{"name": fmt.Sprint("t", len(p.Cursor)), "inputSchema": object}}, "nextCursor": next})
			return
		case "many-tools": // 100,000 tools on one page
			tools := make([]any, 100000)
			for i := range tools {
				tools[i] = map[string]any{"name": fmt.Sprint("t", i), "inputSchema": map[string]any{}}
			}
			answer(map[string]any{"tools": tools})
			return
		}
		if mode == "listfile" {
			data, _ := os.ReadFile(os.Getenv("MCP_TEST_TOOLS"))
			var names []string
			json.Unmarshal(data, &names)
			tools := []any{}
			for _, name := range names {
				tools = append(tools, map[string]any{"name": name, "description": "The tool " + name, "inputSchema": object})
			}
			answer(map[string]any{"tools": tools})
			return
		}
		if mode == "alike" { // two tools whose names differ only where a model's tool name cannot, and one named as server x's echo
			answer(map[string]any{"tools": []any{
				map[string]any{"name": "a-b", "description": "The hyphen's", "inputSchema": object},
				map[string]any{"name": "a_b", "description": "The underscore's", "inputSchema": object},
				map[string]any{"name": "x__echo", "description": "Not server x's echo", "inputSchema": object},
			}})
			return
		}
		if p.Cursor == "" {
			answer(map[string]any{"tools": []any{
				map[string]any{"name": "echo", "description": "Echo the text back", "inputSchema": object,
					"annotations": map[string]any{"readOnlyHint": true}},
			}, "nextCursor": "page-2"})
			return
		}
		answer(map[string]any{"tools": []any{
			map[string]any{"name": "structured", "inputSchema": map[string]any{}},
			map[string]any{"name": "fail", "title": "Always fails", "inputSchema": object},
			map[string]any{"name": "slow", "description": "Reports progress, then answers", "inputSchema": object},
			map[string]any{"name": "text-only", "description": "Its input is no object", "inputSchema": map[string]any{"type": "string"}},
		}})
		if mode == "exit-after-list" {
			os.Exit(4)
		}
	case "tools/call":
		var p struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Meta      struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		}
		json.Unmarshal(m.Params, &p)
		var a struct {
			Text string `json:"text"`
		}
		json.Unmarshal(p.Arguments, &a)
		if mode == "crash-on-call" {
			os.Exit(3)
		}
		if mode == "close-stdout-on-call" {
			mcpTestCloseStdout()
		}
		if mode == "listfile" {
			if p.Name == "changed" {
				send(map[string]any{"method": "notifications/tools/list_changed"})
			}
			answer(map[string]any{"content": []any{map[string]any{"type": "text", "text": "called " + p.Name}}})
			return
		}
		switch p.Name {
		case "echo":
			if mode == "echo-env" { // the value of the variable named
				a.Text = a.Text + "=" + os.Getenv(a.Text)
			}
			answer(map[string]any{"content": []any{map[string]any{"type": "text", "text": "echo: " + a.Text}}})
		case "lists":
			answer(map[string]any{"content": []any{map[string]any{"type": "text", "text": fmt.Sprint(mcpTestLists)}}})
		case "structured":
			answer(map[string]any{"content": []any{}, "structuredContent": map[string]any{"sum": 3, "args": json.RawMessage(p.Arguments)}})
		case "fail":
			content := []any{map[string]any{"type": "text", "text": "it failed: " + a.Text}}
			if a.Text == "screenshot" { // and a PNG of 4x3 px, showing why
				var b bytes.Buffer
				png.Encode(&b, flatImage(4, 3))
				content = append(content, map[string]any{"type": "image", "mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(b.Bytes())})
			}
			answer(map[string]any{"content": content, "isError": true})
		case "images": // a PNG, a JPEG said to be a PNG, text said to be a PNG, a PNG's base64 in lines
			png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n...."))
			answer(map[string]any{"content": []any{
				map[string]any{"type": "image", "mimeType": "image/png", "data": png},
				map[string]any{"type": "image", "mimeType": "image/png", "data": base64.StdEncoding.EncodeToString([]byte("\xff\xd8\xff...."))},
				map[string]any{"type": "image", "mimeType": "image/png", "data": base64.StdEncoding.EncodeToString([]byte("not an image"))},
				map[string]any{"type": "image", "mimeType": "image/png", "data": png[:8] + "\n" + png[8:]},
			}})
		case "link": // a link to one of its resources, and one to a file of the machine's
			answer(map[string]any{"content": []any{
				map[string]any{"type": "resource_link", "uri": "file:///notes.txt", "name": "notes", "mimeType": "text/plain"},
				map[string]any{"type": "resource_link", "uri": "file://" + a.Text, "name": "secret"},
			}})
		case "wide": // a PNG of 2400x10 px, then text
			var b bytes.Buffer
			png.Encode(&b, flatImage(2400, 10))
			answer(map[string]any{"content": []any{
				map[string]any{"type": "image", "mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(b.Bytes())},
				map[string]any{"type": "text", "text": "a wide one"},
			}})
		case "pieces":
			var pieces []any
			for range 40000 {
				pieces = append(pieces, map[string]any{"type": "text", "text": "ab"})
			}
			answer(map[string]any{"content": pieces, "isError": a.Text == "error"})
		case "slow":
			for i := 1; i <= 3; i++ {
				time.Sleep(600 * time.Millisecond) // 1.8 s in all: past TestMCPToolCalls's limit of 1.5 s
				send(map[string]any{"method": "notifications/progress", "params": map[string]any{"progressToken": p.Meta.ProgressToken, "progress": i, "total": 3}})
			}
			answer(map[string]any{"content": []any{map[string]any{"type": "text", "text": "slow done"}}})
		default:
			send(map[string]any{"id": m.ID, "error": map[string]any{"code": -32602, "message": "Unknown tool: " + p.Name}})
		}
	case "resources/list":
		var p struct {
			Cursor string `json:"cursor"`
		}
		json.Unmarshal(m.Params, &p)
		if mode == "endless-resource-cursor" { // a resource a page, a new nextCursor each time
			answer(map[string]any{"resources": []any{map[string]any{"uri": fmt.Sprintf("file:///%d", len(p.Cursor)), "name": "page"}}, "nextCursor": p.Cursor + "+"})
			return
		}
		if mode == "same-resource-cursor" { // a resource a page, the same nextCursor each time
			answer(map[string]any{"resources": []any{map[string]any{"uri": "file:///again", "name": "again"}}, "nextCursor": "again"})
			return
		}
		if mode == "endless-resources" { // a resource a page, a new nextCursor each time
			answer(map[string]any{"resources": []any{map[string]any{"uri": "file:///" + p.Cursor, "name": "again"}}, "nextCursor": p.Cursor + "+"})
			return
		}
		if mode == "big-resources" { // 20 pages of 1 MiB each
			page := len(p.Cursor)
			next := ""
			if page < 19 {
				next = p.Cursor + "+"
			}
			answer(map[string]any{"resources": []any{map[string]any{"uri": fmt.Sprintf("file:///%d", page), "name": "big",
				"description": strings.Repeat("x", 1<<20)}}, "nextCursor": next})
			return
		}
		if p.Cursor == "" {
			answer(map[string]any{"resources": []any{
				map[string]any{"uri": "file:///notes.txt", "name": "notes", "mimeType": "text/plain", "_meta": map[string]any{"x": 1}},
				map[string]any{"uri": "ui://widget", "name": "widget"},
			}, "nextCursor": "r2"})
			return
		}
		answer(map[string]any{"resources": []any{map[string]any{"name": "logo", "uri": "file:///logo.png", "icons": []any{}}}})
	case "resources/templates/list":
		if mode == "endless-resources" {
			answer("templates") // not an object
			return
		}
		answer(map[string]any{"resourceTemplates": []any{map[string]any{"uriTemplate": "file:///{path}", "name": "files"}}})
	case "resources/read":
		var p struct {
			URI string `json:"uri"`
		}
		json.Unmarshal(m.Params, &p)
		switch p.URI {
		case "file:///notes.txt":
			answer(map[string]any{"contents": []any{map[string]any{"uri": p.URI, "mimeType": "text/plain", "text": "remember the milk"}}})
		case "file:///dir":
			answer(map[string]any{"contents": []any{map[string]any{"uri": "file:///dir/a", "text": "A"}, map[string]any{"uri": "file:///dir/b", "mimeType": "application/json", "blob": "eyJiIjoxfQ=="}}})
		case "file:///empty":
			answer(map[string]any{"contents": []any{}})
		case "file:///invalid":
			answer(map[string]any{"contents": "not a list"})
		default:
			send(map[string]any{"id": m.ID, "error": map[string]any{"code": -32002, "message": "Resource not found"}})
		}
	case "ping":
		answer(map[string]any{})
	default:
		send(map[string]any{"id": m.ID, "error": map[string]any{"code": -32601, "message": "Method not found"}})
	}
}

// mcpTestCloseStdout closes the test server's stdout and sleeps for an
// hour, running: nothing it could answer reaches rpi.
func mcpTestCloseStdout() {
	os.Stdout.Close()
	time.Sleep(time.Hour)
}

// mcpTestHTTPServer serves mcpTestRespond over streamable HTTP: a
// request's messages as one JSON answer, or as server-sent events when
// there are several (progress) or sse is set, each line ending in
// ending ("\n" when it is empty); a notification 202; a session id from
// initialize on, required after; DELETE ends it.
type mcpTestHTTPServer struct {
	sse     bool
	ending  string
	mu      sync.Mutex
	auth    []string // the Authorization header of each POST
	deleted bool
}

func (h *mcpTestHTTPServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Method == http.MethodDelete {
		h.deleted = r.Header.Get("Mcp-Session-Id") == "session-1"
		return
	}
	body, _ := io.ReadAll(r.Body)
	h.auth = append(h.auth, r.Header.Get("Authorization"))
	initialize := strings.Contains(string(body), `"method":"initialize"`)
	if !initialize && (r.Header.Get("Mcp-Session-Id") != "session-1" || r.Header.Get("MCP-Protocol-Version") != "2025-06-18") {
		http.Error(w, "no session", http.StatusBadRequest)
		return
	}
	var msgs []map[string]any
	mcpTestRespond("", body, func(m map[string]any) { m["jsonrpc"] = "2.0"; msgs = append(msgs, m) })
	if initialize {
		w.Header().Set("Mcp-Session-Id", "session-1")
	}
	if len(msgs) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if len(msgs) == 1 && !h.sse {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(msgs[0])
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for i, m := range msgs {
		b, _ := json.Marshal(m)
		fmt.Fprint(w, strings.ReplaceAll(fmt.Sprintf("event: message\nid: %d\ndata: %s\n\n", i, b), "\n", cmp.Or(h.ending, "\n")))
	}
}

// writeMCPConfig writes the agent dir's mcp.json with one server, the
// test binary as mcpTestServer, in mode (see there).
func writeMCPConfig(t *testing.T, agentDir, name, mode string, extra map[string]any) {
	t.Helper()
	entry := map[string]any{"command": os.Args[0], "env": map[string]string{"RPI_HELPER": "mcp-server", "MCP_TEST_MODE": mode},
		"exposure": "direct"}
	for k, v := range extra {
		entry[k] = v
	}
	writeMCPServers(t, agentDir, map[string]any{name: entry})
}

// writeMCPServers writes the agent dir's mcp.json with servers, by name.
func writeMCPServers(t testing.TB, agentDir string, servers map[string]any) {
	t.Helper()
	data, _ := json.Marshal(map[string]any{"mcpServers": servers})
	if err := os.WriteFile(filepath.Join(agentDir, "mcp.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// openWithMCP opens a session in e (its mcp.json written), starts its
// servers as a front end does, and waits until those with direct tools
// are connected or failed.
func openWithMCP(t testing.TB, e *testEnv, args ...string) *session {
	t.Helper()
	s, _ := openTestSessionIn(t, e, `{"text":["ok"]}`, &recordingSink{}, &approvingUI{}, nil, args...)
	s.startMCP()
	s.mcp.awaitFirst(context.Background())
	return s
}

// openMCPSession opens a session whose agent dir has the test server as
// name, and waits until it is connected or failed.
func openMCPSession(t *testing.T, mode string, extra map[string]any) *session {
	t.Helper()
	s, _ := openMCPSessionWithModel(t, mode, extra)
	s.mcp.awaitFirst(context.Background())
	return s
}

func openMCPSessionWithModel(t *testing.T, mode string, extra map[string]any) (*session, *fakeModel) {
	t.Helper()
	e := newTestEnv(t)
	writeMCPConfig(t, e.agentDir, "helper", mode, extra)
	s, fm := openTestSessionIn(t, e, `{"text":["ok"]}`, &recordingSink{}, &approvingUI{}, nil)
	t.Cleanup(s.close)
	s.startMCP() // as a front end does once it has shown the session
	return s, fm
}

// TestMCPToolsInTheFirstRequest: the first prompt, sent as soon as the
// session opens, waits for the server with direct tools, and its request
// to the model declares them, with the server's schema.
func TestMCPToolsInTheFirstRequest(t *testing.T) {
	s, fm := openMCPSessionWithModel(t, "", nil)
	ended := make(chan promptEnd, 1)
	s.startPrompt(&userMessage{Role: "user", Content: textBlocks("hi"), Timestamp: 1}, "", func(bool, error) {}, func(end promptEnd) { ended <- end })
	waitEnded(t, ended)
	fm.mu.Lock()
	defer fm.mu.Unlock()
	body, _ := json.Marshal(fm.requests[0]["tools"])
	if !strings.Contains(string(body), `"name":"mcp__helper__echo","parameters":{"properties":{"text":{"type":"string"}},"type":"object"}`) {
		t.Errorf("the first request's tools: %s", body)
	}
}

// TestMCPToolsListed: a stdio server's tools, on two pages of
// tools/list, reach the model as mcp__<server>__<tool> once connected;
// one whose input schema is not of type object is left out.
func TestMCPToolsListed(t *testing.T) {
	s := openMCPSession(t, "", nil)
	var names []string
	for _, tl := range s.offeredTools() {
		names = append(names, tl.name)
	}
	for _, want := range []string{"mcp__helper__echo", "mcp__helper__structured", "mcp__helper__fail", "mcp__helper__slow"} {
		if !slices.Contains(names, want) {
			t.Errorf("offered %v; want %s among them", names, want)
		}
	}
	if tl := s.activeTool("mcp__helper__structured"); tl == nil || string(tl.schema) != `{"type":"object","properties":{}}` {
		t.Errorf("structured's schema: %v", tl)
	}
	// A model's API refuses a request that declares a tool whose input is
	// not an object: one such tool would fail every request.
	if slices.Contains(names, "mcp__helper__text_only") {
		t.Errorf("offered %v; a tool whose inputSchema is of type string among them", names)
	}
}

// TestMCPToolCalls: each kind of result as the model gets it — text,
// structured content as indented JSON, isError as a tool error, and an
// answer after progress reports.
func TestMCPToolCalls(t *testing.T) {
	// slow's progress resets the limit of 1.5 s, which its answer passes;
	// the limit is also the connection's (initialize, tools/list), which a
	// race build's server on a loaded machine took more than 100 ms to
	// make.
	s := openMCPSession(t, "", map[string]any{"timeout": 1.5})
	call := func(name, args string) (string, error) {
		c, err := s.decodeToolCall(name, json.RawMessage(args))
		if err != nil {
			return "", err
		}
		res, err := c.run(context.Background(), s, toolRun{id: "t", update: func(toolResult) {}})
		return joinTexts(res.Content), err
	}
	cases := []struct{ tool, args, want, err string }{
		{"mcp__helper__echo", `{"text":"hi"}`, "echo: hi", ""},
		{"mcp__helper__structured", `{"a":1}`, "{\n  \"args\": {\n    \"a\": 1\n  },\n  \"sum\": 3\n}", ""},
		{"mcp__helper__fail", `{"text":"x"}`, "", "it failed: x"},
		{"mcp__helper__slow", `{}`, "slow done", ""},
		{"mcp__helper__missing", `{}`, "", "Tool mcp__helper__missing not found"},
	}
	for _, c := range cases {
		got, err := call(c.tool, c.args)
		if got != c.want || fmt.Sprint(err) != cmp.Or(c.err, "<nil>") {
			t.Errorf("%s %s: %q, %v; want %q, %s", c.tool, c.args, got, err, c.want, cmp.Or(c.err, "no error"))
		}
	}
}

// TestMCPServerFailures: a server that never answers initialize, one
// that answers with more than the limit in one line, one that speaks
// an unknown protocol version, one that offers 100,000 tools, one whose
// tools/list pages never end, and one whose nextCursor repeats (failed
// at once, as pi fails it, not after 100 pages) each fail alone, with a
// warning that says why, and leave no process behind.
func TestMCPServerFailures(t *testing.T) {
	for mode, want := range map[string]string{
		"no-init":        "MCP server helper failed: MCP server helper did not answer in 0.2s",
		"huge":           "MCP server helper failed: MCP server helper sent a message longer than 16 MiB",
		"old-version":    `MCP server helper failed: answered initialize with protocol version "2023-01-01", which rpi does not speak`,
		"many-tools":     "MCP server helper failed: offers more than 1000 tools",
		"endless-cursor": "MCP server helper failed: listed tools over more than 100 pages",
		"same-cursor":    `MCP server helper failed: answered tools/list with the nextCursor "again" it gave before`,
	} {
		t.Run(mode, func(t *testing.T) {
			timeout := 10.0 // time to send 16 MiB on a busy machine
			if mode == "no-init" {
				timeout = 0.2
			}
			s := openMCPSession(t, mode, map[string]any{"timeout": timeout})
			awaitDialed(t, s)
			if tools := s.mcp.offered(); len(tools) != 0 {
				t.Errorf("a failed server offers %d tools", len(tools))
			}
			notices := s.openingNotices()
			if !slices.Contains(notices, want) {
				t.Errorf("warnings %q; want %q", notices, want)
			}
		})
	}
}

// awaitDialed waits until every server of s has been dialled, however
// long that takes: awaitFirst waits at most mcpFirstWait, which sending
// 16 MiB under -race on a busy machine has taken longer than.
func awaitDialed(t *testing.T, s *session) {
	t.Helper()
	s.mcp.mu.Lock()
	var waits []chan struct{}
	for _, srv := range s.mcp.on {
		waits = append(waits, srv.waiting)
	}
	s.mcp.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-time.After(2 * time.Minute): // a hang, not a slow machine
			t.Fatal("a server was still connecting after two minutes")
		}
	}
}

// TestReadMCPFileSizes: an mcp.json is read whole up to 1 MiB, past
// its first read; a bigger one is a warning that says so, and a missing
// one is no warning at all.
func TestReadMCPFileSizes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcp.json")
	if _, names, _, warning := readMCPFile(path); names != nil || warning != "" {
		t.Errorf("a missing file: %v, %q", names, warning)
	}
	padding := strings.Repeat(" ", maxResourceBytes-100)
	os.WriteFile(path, []byte(`{"mcpServers": {"a": {"command": "x"},`+padding+`"b": {"command": "y"}}}`), 0o600)
	if _, names, _, warning := readMCPFile(path); !slices.Equal(names, []string{"a", "b"}) || warning != "" {
		t.Errorf("a file of almost 1 MiB: %v, %q", names, warning)
	}
	os.WriteFile(path, []byte(`{"mcpServers": {}}`+strings.Repeat(" ", maxResourceBytes)), 0o600)
	if _, _, _, warning := readMCPFile(path); warning != "Cannot read MCP servers from "+path+": larger than 1.0MB" {
		t.Errorf("a file over 1 MiB: %q", warning)
	}
}

// TestMCPConfig: pi's mcp.json rules — a project entry with neither
// command, url nor type only overrides the user's entry; sse is refused
// with a pointer to streamable HTTP; a bad entry is skipped with a
// warning while the others load; ${VAR} and !command expand, but a
// server disabled (here by the project's override) runs none of its
// commands: they ran at every start, for a server never connected.
func TestMCPConfig(t *testing.T) {
	agentDir, cwd := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(agentDir, "mcp.json"), []byte(`{"mcpServers": {
		"fs": {"command": "npx", "args": ["-y", "server-fs", "${ROOT}"], "env": {"TOKEN": "!get-token"}},
		"old": {"type": "sse", "url": "http://localhost:1/sse"},
		"bad": {"command": 3},
		"web": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${KEY}"}, "timeout": 5}
	}}`), 0o600)
	os.MkdirAll(filepath.Join(cwd, ".pi"), 0o755)
	os.WriteFile(filepath.Join(cwd, ".pi", "mcp.json"), []byte(`{"mcpServers": {"fs": {"enabled": false, "exposure": "direct"}}}`), 0o600)
	var ran []string
	expand := func(value string, commands bool) (string, error) {
		return expandMCPValue(value, commands, envMap{"ROOT": "/srv", "KEY": "k1"}.get, func(command string) (string, error) {
			ran = append(ran, command)
			return "out of " + command, nil
		})
	}
	for _, approved := range []bool{false, true} {
		ran = nil
		servers, warnings := loadMCPConfig(agentDir, cwd, approved, nil, expand)
		var got []string
		for _, s := range servers {
			got = append(got, fmt.Sprintf("%s %s %v %s %q %q %q %s", s.name, s.transport, s.enabled, s.exposure, s.args, s.env, s.headers, s.timeout))
		}
		want := []string{
			`fs stdio true codemode ["-y" "server-fs" "/srv"] map["TOKEN":"out of get-token"] map[] 1m0s`,
			`web http true codemode [] map[] map["Authorization":"Bearer k1"] 5s`,
		}
		wantRan := []string{"get-token"}
		if approved { // fs is disabled: its values are left as written, its command not run
			want[0], wantRan = `fs stdio false direct [] map[] map[] 1m0s`, nil
		}
		if !slices.Equal(ran, wantRan) {
			t.Errorf("approved %v: the commands run: %q, want %q", approved, ran, wantRan)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("approved %v: servers\n%s\nwant\n%s", approved, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if len(warnings) != 2 || !strings.Contains(warnings[0], "MCP server bad in ") || !strings.Contains(warnings[1], "the SSE transport is not supported") {
			t.Errorf("warnings: %q", warnings)
		}
	}
}

type envMap map[string]string

func (m envMap) get(k string) string { return m[k] }

// TestMCPToolNames: pi's names — sanitised, at most 64 characters, a
// hash suffix for a long name or one another tool of the server took.
func TestMCPToolNames(t *testing.T) {
	none := func(string) bool { return false }
	long := strings.Repeat("x", 70)
	cases := []struct {
		server, tool string
		taken        func(string) bool
		want         string
	}{
		{"fs", "read_file", none, "mcp__fs__read_file"},
		{"my-server", "a.b c", none, "mcp__my_server__a_b_c"},
		{"s", "a-b", func(n string) bool { return n == "mcp__s__a_b" }, "mcp__s__a_b_" + mcpHash("s", "a-b")},
		{"s", long, none, ("mcp__s__" + long)[:55] + "_" + mcpHash("s", long)},
	}
	for _, c := range cases {
		if got := mcpToolName(c.server, c.tool, c.taken); got != c.want || len(got) > 64 {
			t.Errorf("%s/%s: %s; want %s", c.server, c.tool, got, c.want)
		}
	}
}

// mcpHash is the 8 hex digits of pi's suffix for server's tool.
func mcpHash(server, tool string) string {
	sum := sha256.Sum256([]byte(server + "\x00" + tool))
	return hex.EncodeToString(sum[:])[:8]
}

// TestEndToEndMCPServerEnds: an MCP server rpi started ends with rpi,
// whether its input ends or it gets SIGTERM (the session closes the
// server: stdin, SIGTERM, SIGKILL to its group) or rpi is killed (the
// watchdog kills the group).
func TestEndToEndMCPServerEnds(t *testing.T) {
	endToEnd(t)
	for _, how := range []string{"eof", "term", "kill"} {
		t.Run(how, func(t *testing.T) {
			agentDir, pidFile := t.TempDir(), filepath.Join(t.TempDir(), "pid")
			writeMCPConfig(t, agentDir, "helper", "", map[string]any{"env": map[string]string{"RPI_HELPER": "mcp-server", "MCP_TEST_PIDFILE": pidFile}})
			p := startRPIWith(t, withEnv("PI_CODING_AGENT_DIR="+agentDir), "rpc", "--cwd", t.TempDir())
			p.next(t) // session_started
			pid := 0
			for deadline := time.Now().Add(10 * time.Second); pid == 0; time.Sleep(10 * time.Millisecond) {
				data, _ := os.ReadFile(pidFile)
				fmt.Sscan(string(data), &pid)
				if time.Now().After(deadline) {
					t.Fatal("the MCP server never started")
				}
			}
			switch how {
			case "eof":
				p.stdin.Close()
			case "term":
				p.cmd.Process.Signal(syscall.SIGTERM)
			default:
				p.cmd.Process.Kill()
			}
			p.cmd.Wait()
			for deadline := time.Now().Add(5 * time.Second); alive(pid) && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if alive(pid) {
				t.Errorf("the MCP server (pid %d) outlived rpi", pid)
			}
		})
	}
}

// TestConfirmsMCP: --confirm mcp gates every MCP tool, mcp__NAME__* one
// server's (NAME spelled as tool names spell it), and neither gates a
// built-in tool; the resource tools, which reach every server, wait under
// any MCP pattern; ACP's ask and edits modes gate every MCP tool its
// server does not mark read-only, auto none; --confirm takes the resource tools by name, --tools no pattern.
func TestConfirmsMCP(t *testing.T) {
	cases := []struct {
		confirm  []string
		tool     string
		want     bool
		readOnly bool // the server marks the MCP tool read-only
	}{
		{[]string{"mcp"}, "mcp__fs__read_file", true, false},
		{[]string{"mcp"}, "mcp__fs__read_file", true, true},
		{[]string{"mcp"}, "bash", false, false},
		{[]string{"mcp__fs__*"}, "mcp__fs__read_file", true, false},
		{[]string{"mcp__fs__*"}, "mcp__fsx__read_file", false, false},
		{[]string{"mcp__fs__read_file"}, "mcp__fs__read_file", true, false},
		{[]string{"bash"}, "mcp__fs__read_file", false, false},
		{acpConfirmed("ask", []string{"write"}), "mcp__fs__read_file", true, false},
		{acpConfirmed("edits", nil), "mcp__x__y", true, false},
		{acpConfirmed("auto", nil), "mcp__x__y", false, false},
		// ask and edits do not ask for a tool its server marks read-only.
		{acpConfirmed("ask", nil), "mcp__fs__read_file", false, true},
		{acpConfirmed("edits", nil), "mcp__fs__read_file", false, true},
		{acpConfirmed("ask", nil), "list_mcp_resources", false, false},
		// The resource tools reach every server: any MCP pattern gates them.
		{[]string{"mcp"}, "read_mcp_resource", true, false},
		{[]string{"mcp__fs__*"}, "list_mcp_resources", true, false},
		{[]string{"bash"}, "read_mcp_resource", false, false},
		{[]string{"read_mcp_resource"}, "read_mcp_resource", true, false},
		// A pattern's server is spelled as tool names spell it.
		{[]string{"mcp__my-server__*"}, "mcp__my_server__echo", true, false},
	}
	for _, c := range cases {
		var call toolCall
		if strings.HasPrefix(c.tool, "mcp__") {
			call = &mcpCall{tool: mcpTool{readOnly: c.readOnly}}
		}
		if got := confirms(c.confirm, c.tool, call); got != c.want {
			t.Errorf("confirms(%q, %s) = %v", c.confirm, c.tool, got)
		}
	}
	if _, err := toolList("--confirm", "mcp,mcp__fs__*,bash,read_mcp_resource", true); err != nil {
		t.Errorf("--confirm with MCP patterns: %v", err)
	}
	if _, err := toolList("--tools", "mcp", false); err == nil {
		t.Error("--tools mcp was taken")
	}
}

// TestMCPToolSearch: tools of a server with pi's default exposure
// (codemode, deferred in rpi) are not declared; tool_search is, and
// loads the best matches for the next request; a second search does not
// load them again; a query that matches nothing says so.
func TestMCPToolSearch(t *testing.T) {
	s := openMCPSession(t, "", map[string]any{"exposure": "codemode", "toolExposure": map[string]string{"fail": "hidden"}})
	s.mcp.awaitAll(context.Background())
	names := func() (names []string) {
		for _, tl := range s.offeredTools() {
			if strings.HasPrefix(tl.name, "mcp__") || tl.name == "tool_search" {
				names = append(names, tl.name)
			}
		}
		return names
	}
	if got := names(); !slices.Equal(got, []string{"tool_search"}) {
		t.Fatalf("declared before a search: %v", got)
	}
	search := func(args string) string {
		c, err := s.decodeToolCall("tool_search", json.RawMessage(args))
		if err != nil {
			return err.Error()
		}
		res, err := c.run(context.Background(), s, toolRun{id: "t", update: func(toolResult) {}})
		if err != nil {
			return err.Error()
		}
		return joinTexts(res.Content)
	}
	if got := search(`{"query":"echo back"}`); got != "Loaded 1 tool. They are available from your next call:\n- mcp__helper__echo: Echo the text back" {
		t.Errorf("search: %q", got)
	}
	if got := names(); !slices.Equal(got, []string{"mcp__helper__echo", "tool_search"}) {
		t.Errorf("declared after the search: %v", got)
	}
	if got := search(`{"query":"echo"}`); got != "No matching tools found." {
		t.Errorf("a loaded tool found again: %q", got)
	}
	if got := search(`{"query":"fails always"}`); got != "No matching tools found." {
		t.Errorf("a hidden tool found: %q", got)
	}
	if got := search(`{"query":"progress","limit":0}`); got != "Invalid arguments for tool_search: limit must be a positive integer" {
		t.Errorf("limit 0: %q", got)
	}
}

// TestToolSearchRanksUnlocked: a search ranks its tools without the
// servers' lock, which get_mcp_servers, requests and tool calls wait for
// (rpi ranked under it: a second or so for a server's 8 MiB listing, on
// every search); get_mcp_servers is answered while it ranks.
func TestToolSearchRanksUnlocked(t *testing.T) {
	s := openMCPSession(t, "", map[string]any{"exposure": "deferred"})
	s.mcp.awaitAll(context.Background())
	ranked, held := false, false
	var servers []mcpServerInfo
	toolSearchRanking = func() {
		ranked = true
		if !s.mcp.mu.TryLock() {
			held = true
			return
		}
		s.mcp.mu.Unlock()
		servers = s.mcp.list() // as get_mcp_servers answers
	}
	defer func() { toolSearchRanking = nil }()
	c, err := s.decodeToolCall("tool_search", json.RawMessage(`{"query":"echo back"}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.run(context.Background(), s, toolRun{id: "t", update: func(toolResult) {}})
	if err != nil || !strings.HasPrefix(joinTexts(res.Content), "Loaded 1 tool.") {
		t.Fatalf("search: %v %v", res, err)
	}
	if !ranked || held {
		t.Fatalf("ranked %v; under the servers' lock: %v", ranked, held)
	}
	if len(servers) != 1 || servers[0].State != "connected" {
		t.Errorf("get_mcp_servers while a search ranks: %+v", servers)
	}
}

// TestToolSearchRanking: pi's rules — more query terms matched first, a
// name match above mentions in descriptions, a query that is a tool's
// name first, camelCase and plurals split and folded.
func TestToolSearchRanking(t *testing.T) {
	doc := func(name, description string) searchDoc {
		return newSearchDoc(&tool{name: name, description: description, schema: json.RawMessage(`{"type":"object","properties":{"pathName":{"type":"string"}}}`)}, "srv")
	}
	docs := []searchDoc{
		doc("mcp__srv__list_issues", "Lists the issues of a repository"),
		doc("mcp__srv__create_issue", "Creates an issue"),
		doc("mcp__srv__screenshot", "Takes a screenshot of a window"),
		doc("mcp__srv__window", "Moves a window"),
	}
	cases := map[string][]string{
		"issue":             {"mcp__srv__create_issue", "mcp__srv__list_issues"},
		"screenshot window": {"mcp__srv__screenshot", "mcp__srv__window"},
		"list_issues":       {"mcp__srv__list_issues", "mcp__srv__create_issue"},
		"the of":            nil,
	}
	for query, want := range cases {
		if got := rankTools(query, docs, 8); !slices.Equal(got, want) {
			t.Errorf("%q: %v; want %v", query, got, want)
		}
	}
	if got := rankTools("path names", docs, 8); len(got) != 4 { // a parameter's name, camelCase and plural folded
		t.Errorf("path names: %v", got)
	}
	if got := searchTerms("getHTMLPage, the Searches"); !slices.Equal(got, []string{"get", "html", "page", "search"}) {
		t.Errorf("terms: %v", got)
	}
}

// TestMCPHTTP: a streamable-HTTP server — answers as JSON and as server-
// sent events (with progress before the answer; lines ending in "\n" or
// in "\r" alone, which the format allows and rpi read as one line), the
// session id it gave and the agreed version on every later POST, the
// entry's headers with ${VAR} expanded, DELETE when the session closes.
func TestMCPHTTP(t *testing.T) {
	for name, srv := range map[string]*mcpTestHTTPServer{"json": {}, "sse": {sse: true}, "sse, lines ending in CR": {sse: true, ending: "\r"}} {
		t.Run(name, func(t *testing.T) {
			hs := httptest.NewServer(srv)
			defer hs.Close()
			e := newTestEnv(t)
			e.vars["MCP_TOKEN"] = "tok-1"
			writeMCPServers(t, e.agentDir, map[string]any{"web": map[string]any{
				"url": hs.URL + "/mcp", "headers": map[string]string{"Authorization": "Bearer ${MCP_TOKEN}"}, "exposure": "direct"}})
			s := openWithMCP(t, e)
			for _, c := range []struct{ tool, want string }{{"mcp__web__echo", "echo: hi"}, {"mcp__web__slow", "slow done"}} {
				call, err := s.decodeToolCall(c.tool, json.RawMessage(`{"text":"hi"}`))
				if err != nil {
					t.Fatalf("%s: %v (servers: %+v)", c.tool, err, s.mcp.list())
				}
				res, err := call.run(context.Background(), s, toolRun{id: "t", update: func(toolResult) {}})
				if got := joinTexts(res.Content); err != nil || got != c.want {
					t.Errorf("%s: %q, %v", c.tool, got, err)
				}
			}
			s.close()
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if !srv.deleted {
				t.Error("no DELETE of the session when it closed")
			}
			if len(srv.auth) == 0 || slices.ContainsFunc(srv.auth, func(a string) bool { return a != "Bearer tok-1" }) {
				t.Errorf("Authorization headers: %q", srv.auth)
			}
		})
	}
}

// silentStreamServer is mcpTestHTTPServer, but for a message that holds
// match, which it answers with an event stream it keeps open and silent
// until rpi closes it: then streamEnded is closed.
func silentStreamServer(match string) (hs *httptest.Server, streamEnded chan struct{}) {
	srv := &mcpTestHTTPServer{}
	streamEnded = make(chan struct{})
	hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), match) {
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			srv.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the client closed the stream
		close(streamEnded)
	}))
	return hs, streamEnded
}

// TestMCPHTTPStreamEndsWithItsRequest: an HTTP server that answers a
// tool call with an event stream and then sends nothing holds nothing
// once the call has failed for its timeout: the stream's connection is
// closed then (it was read until the session closed, a goroutine and a
// connection for each such call).
func TestMCPHTTPStreamEndsWithItsRequest(t *testing.T) {
	hs, streamEnded := silentStreamServer(`"name":"echo"`)
	defer hs.Close()
	e := newTestEnv(t)
	writeMCPServers(t, e.agentDir, map[string]any{"web": map[string]any{"url": hs.URL + "/mcp", "exposure": "direct", "timeout": 1}})
	s := openWithMCP(t, e)
	defer s.close()
	call, err := s.decodeToolCall("mcp__web__echo", json.RawMessage(`{"text":"hi"}`))
	if err != nil {
		t.Fatalf("%v (servers: %+v)", err, s.mcp.list())
	}
	if _, err := call.run(context.Background(), s, toolRun{id: "t", update: func(toolResult) {}}); err == nil || err.Error() != "MCP server web did not answer in 1s" {
		t.Errorf("the call: %v", err)
	}
	receive(t, streamEnded, "the end of the stream of the call that timed out (the session still open)")
}

// TestMCPHTTPNotificationAnswerNotKept: what a server sends back for a
// notification of rpi's (it should answer 202, no body) is not read on:
// a server that answers notifications/initialized with an event stream
// it keeps open and silent kept that stream, and a goroutine reading
// it, until the session closed (one more for each call that timed out
// or was aborted, told with notifications/cancelled).
func TestMCPHTTPNotificationAnswerNotKept(t *testing.T) {
	hs, streamEnded := silentStreamServer(`"method":"notifications/initialized"`)
	defer hs.Close()
	e := newTestEnv(t)
	writeMCPServers(t, e.agentDir, map[string]any{"web": map[string]any{"url": hs.URL + "/mcp", "exposure": "direct"}})
	s := openWithMCP(t, e)
	defer s.close()
	if st := s.mcp.state("web"); st.State != "connected" {
		t.Fatalf("server: %+v", st)
	}
	receive(t, streamEnded, "the end of the stream answering notifications/initialized (the session still open)")
}

// TestMCPHTTPFailures: a server that answers 500, one that redirects,
// one that answers HTML: each fails with a message that says so and no
// part of the URL; one that needs sign-in is in the state needs_sign_in,
// with the command that signs in — unless the entry sends its own
// Authorization header, which the server refused (a 401, or a 403 that
// asks for more access): no sign-in of pi's is sent then, and signing in
// cannot help, so it fails saying the header was refused.
func TestMCPHTTPFailures(t *testing.T) {
	ownKey := map[string]string{"Authorization": "Bearer wrong-key-0123456789"}
	cases := map[string]struct {
		handler     http.HandlerFunc
		want, state string
		headers     map[string]string
	}{
		"500": {func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) }, "MCP server web answered HTTP 500: boom", "failed", nil},
		"redirect": {func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://example.invalid/x", http.StatusFound)
		}, "MCP server web: it redirects elsewhere, which rpi does not follow", "failed", nil},
		"401": {func(w http.ResponseWriter, r *http.Request) { http.Error(w, "who", 401) }, "MCP server web needs sign-in: run `pi mcp login web`", "needs_sign_in", nil},
		"401 to its own key": {func(w http.ResponseWriter, r *http.Request) { http.Error(w, "who", 401) },
			"MCP server web refused the Authorization header its entry sends (HTTP 401): check the key in its headers", "failed", ownKey},
		"403 asking more of its own key": {func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope"`)
			http.Error(w, "more", 403)
		}, "MCP server web refused the Authorization header its entry sends (HTTP 403: it asks for more access): check the key in its headers", "failed", ownKey},
		"html": {func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<p>"))
		}, `MCP server web answered with content type "text/html", not JSON or an event stream`, "failed", nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			hs := httptest.NewServer(c.handler)
			defer hs.Close()
			e := newTestEnv(t)
			writeMCPServers(t, e.agentDir, map[string]any{"web": map[string]any{"url": hs.URL + "/mcp?key=secret-key", "exposure": "direct", "headers": c.headers}})
			s := openWithMCP(t, e)
			list := s.mcp.list()
			if len(list) != 1 || list[0].State != c.state || list[0].Error != c.want {
				t.Errorf("servers: %+v; want %s with %q", list, c.state, c.want)
			}
			if strings.Contains(fmt.Sprint(list), "secret-key") {
				t.Errorf("the URL's key in the error: %+v", list)
			}
		})
	}
}

// TestACPClientMCPServers: the servers an editor passes in session/new
// connect for that session, their tools declared (direct) and winning
// over a mcp.json entry of the same name; an env value named as a key
// is (GITHUB_TOKEN) is a key rpi redacts, and so is a URL's password
// (DATABASE_URL), another is not. (What is
// refused, and how: the fixture testdata/acp/mcp_servers_refused.txtar.)
func TestACPClientMCPServers(t *testing.T) {
	e := newTestEnv(t)
	writeMCPConfig(t, e.agentDir, "helper", "no-init", map[string]any{"timeout": 0.2}) // replaced by the editor's
	c, a, _ := startACPAgent(t, e, nil)
	c.call("initialize", map[string]any{"protocolVersion": 1})
	cwd := t.TempDir()
	stdio := map[string]any{"name": "helper", "command": os.Args[0], "args": []string{},
		"env": []map[string]string{{"name": "RPI_HELPER", "value": "mcp-server"},
			{"name": "GITHUB_TOKEN", "value": "acp-editor-token-0123"}, {"name": "MODE", "value": "plain-value-shown"},
			{"name": "DATABASE_URL", "value": "postgres://u:acp-url-password-4@localhost/db"}}}
	got := c.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{stdio}})
	var opened acpSessionAnswer
	if json.Unmarshal(got.Result, &opened) != nil || opened.SessionID == "" {
		t.Fatalf("session/new: %s", got.line)
	}
	a.mu.Lock()
	s := a.sessions[opened.SessionID].s
	a.mu.Unlock()
	var list []mcpServerInfo
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		s.mcp.awaitAll(context.Background()) // once the session is announced, its servers connect
		if list = s.mcp.list(); len(list) > 0 && list[0].State != "connecting" {
			break
		}
	}
	if len(list) != 1 || list[0].Source != "client" || list[0].State != "connected" || list[0].Exposure != "direct" {
		t.Fatalf("servers: %+v", list)
	}
	if s.activeTool("mcp__helper__echo") == nil {
		t.Error("the editor's server's tool is not offered")
	}
	if got := s.set.secrets.redact("acp-editor-token-0123 plain-value-shown acp-url-password-4"); got != "[redacted] plain-value-shown [redacted]" {
		t.Errorf("the editor's env values as redacted: %q", got)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.sessions) != 1 {
		t.Errorf("%d sessions open, want the one", len(a.sessions))
	}
}

// TestNoMCP: --no-mcp (pi's flag) connects no server: the session has
// none, and no process starts.
func TestNoMCP(t *testing.T) {
	e := newTestEnv(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	writeMCPConfig(t, e.agentDir, "helper", "", map[string]any{"env": map[string]string{"RPI_HELPER": "mcp-server", "MCP_TEST_PIDFILE": pidFile}})
	s := openWithMCP(t, e, "--no-mcp")
	if list := s.mcp.list(); len(list) != 0 {
		t.Errorf("servers with --no-mcp: %+v", list)
	}
	if _, err := os.Stat(pidFile); err == nil {
		t.Error("a server started with --no-mcp")
	}
}

// TestACPMCPToolCards: an MCP tool's card is titled <server>: <tool>, of
// kind read when the server marks the tool read-only, fetch for a fetch
// tool, other otherwise; a hostile tool name is shown escaped.
func TestACPMCPToolCards(t *testing.T) {
	cases := []struct {
		tool              mcpTool
		wantKind, wantTit string
	}{
		{mcpTool{server: "fs", remote: "read_file", readOnly: true}, "read", "fs: read_file"},
		{mcpTool{server: "fetch", remote: "fetch"}, "fetch", "fetch: fetch"},
		{mcpTool{server: "gh", remote: "create_issue"}, "other", "gh: create_issue"},
		{mcpTool{server: "x", remote: "a\u202eb\n"}, "other", `x: a\u202eb\n`},
	}
	for _, c := range cases {
		kind, title, _ := acpToolFacts("mcp__x", &mcpCall{tool: c.tool}, acpPaths{})
		if kind != c.wantKind || title != c.wantTit {
			t.Errorf("%+v: %s %q; want %s %q", c.tool, kind, title, c.wantKind, c.wantTit)
		}
	}
}

// TestMCPResources: pi's three resource tools over a server that has
// resources — every server's resources (every page, each with its
// server, without _meta, icons and an MCP app's UI), one page of one
// server with its cursor, the templates, and a read of one text, of
// several contents labelled with their URIs (a JSON blob as text), of an
// empty one; the errors pi gives. Each item keeps its fields in the
// order the server sent them (here, sorted: Go's maps).
func TestMCPResources(t *testing.T) {
	s := openMCPSession(t, "", nil)
	names := map[string]bool{}
	for _, tl := range s.offeredTools() {
		names[tl.name] = true
	}
	if !names["list_mcp_resources"] || !names["read_mcp_resource"] || !names["list_mcp_resource_templates"] {
		t.Fatalf("resource tools not declared: %v", names)
	}
	call := func(name, args string) string {
		c, err := s.decodeToolCall(name, json.RawMessage(args))
		if err != nil {
			return "decode: " + err.Error()
		}
		res, err := c.run(context.Background(), s, toolRun{id: "t", update: func(toolResult) {}})
		if err != nil {
			return "error: " + err.Error()
		}
		return joinTexts(res.Content)
	}
	cases := []struct{ tool, args, want string }{
		{"list_mcp_resources", `{}`, `{"resources":[{"server":"helper","mimeType":"text/plain","name":"notes","uri":"file:///notes.txt"},{"server":"helper","name":"logo","uri":"file:///logo.png"}]}`},
		{"list_mcp_resources", `{"server":"helper"}`, `{"server":"helper","resources":[{"server":"helper","mimeType":"text/plain","name":"notes","uri":"file:///notes.txt"}],"nextCursor":"r2"}`},
		{"list_mcp_resources", `{"server":"helper","cursor":"r2"}`, `{"server":"helper","resources":[{"server":"helper","name":"logo","uri":"file:///logo.png"}]}`},
		{"list_mcp_resources", `{"cursor":"r2"}`, "error: cursor can only be used when a server is specified"},
		{"list_mcp_resources", `{"server":"nope"}`, `error: MCP server "nope" has no resources. Servers with resources: helper`},
		{"list_mcp_resource_templates", `{}`, `{"resourceTemplates":[{"server":"helper","name":"files","uriTemplate":"file:///{path}"}]}`},
		{"read_mcp_resource", `{"server":"helper","uri":"file:///notes.txt"}`, "remember the milk"},
		{"read_mcp_resource", `{"server":"helper","uri":"file:///dir"}`, "file:///dir/a:\nA\nfile:///dir/b:\n{\"b\":1}"},
		{"read_mcp_resource", `{"server":"helper","uri":"file:///empty"}`, "Resource file:///empty is empty."},
		{"read_mcp_resource", `{"server":"helper","uri":"file:///gone"}`, "error: Resource not found"},
		{"read_mcp_resource", `{"server":"helper","uri":" "}`, "error: uri must be provided"},
		{"read_mcp_resource", `{"server":"helper"}`, `decode: Invalid arguments for read_mcp_resource: missing field "uri"`},
	}
	for _, c := range cases {
		if got := call(c.tool, c.args); got != c.want {
			t.Errorf("%s %s:\n got %s\nwant %s", c.tool, c.args, got, c.want)
		}
	}
}

// TestMCPResourceListingBound: list_mcp_resources without a server
// reads every page of each server's listing, at most 8 MiB of them (as
// a server's tools are bounded), so that a server cannot make rpi hold
// hundreds of MiB for a result the model gets 20 KB of; one past it is
// that server's error, the others' resources listed.
func TestMCPResourceListingBound(t *testing.T) {
	s := openMCPSession(t, "big-resources", nil)
	c, err := s.decodeToolCall("list_mcp_resources", json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.run(context.Background(), s, toolRun{id: "t", update: func(toolResult) {}})
	if text := joinTexts(res.Content); err != nil || !strings.HasSuffix(text, `,"errors":[{"server":"helper","error":"MCP server helper listed more than 8 MiB of resources"}]}`) {
		t.Errorf("listing 20 MiB of resources: %v, %.200q … %q", err, text, text[max(0, len(text)-200):])
	}
}

// TestMCPResourceCursorRepeated: a server whose resources/list gives a
// nextCursor it gave before fails that listing at once, as pi fails it,
// not after 100 pages of the same resources.
func TestMCPResourceCursorRepeated(t *testing.T) {
	s := openMCPSession(t, "same-resource-cursor", nil)
	c, err := s.decodeToolCall("list_mcp_resources", json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.run(context.Background(), s, toolRun{id: "t", update: func(toolResult) {}})
	if text := joinTexts(res.Content); err != nil || text != `{"resources":[],"errors":[{"server":"helper","error":"MCP server helper answered resources/list with the nextCursor \"again\" it gave before"}]}` {
		t.Errorf("a repeated cursor: %v, %.300s", err, text)
	}
}

// TestMCPServerExitsAsItConnects: a server that exits just after
// listing its tools is failed, its tools not offered, however its exit
// and its last answer meet: one whose exit was told before it counted as
// connected stayed connected, with tools that could only fail, and was
// never tried again.
func TestMCPServerExitsAsItConnects(t *testing.T) {
	for range 20 {
		s := openMCPSession(t, "exit-after-list", nil)
		for deadline := time.Now().Add(10 * time.Second); s.mcp.list()[0].State != "failed" && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		if list := s.mcp.list(); list[0].State != "failed" || !strings.Contains(list[0].Error, "exited (exit status 4)") {
			t.Fatalf("a server that exited: %+v", list)
		}
		s.close()
	}
}

// TestMCPServerCrashes: a server that exits during a call fails that call
// with a tool error saying so, is reported failed, offers no tools, and
// connects again when asked (mcp_reconnect), the session unharmed.
func TestMCPServerCrashes(t *testing.T) {
	s := openMCPSession(t, "crash-on-call", nil)
	if err := callMCPEcho(t, context.Background(), s); err == nil || err.Error() != "MCP server helper exited (exit status 3)" {
		t.Errorf("the call: %v", err)
	}
	failedThenReconnects(t, s, "exited (exit status 3)")
}

// callMCPEcho is the error of a call of the test server's echo.
func callMCPEcho(t *testing.T, ctx context.Context, s *session) error {
	t.Helper()
	c, err := s.decodeToolCall("mcp__helper__echo", json.RawMessage(`{"text":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.run(ctx, s, toolRun{id: "t", update: func(toolResult) {}})
	return err
}

// failedThenReconnects checks that the test server, its connection
// ended, is reported failed for why, offers no tools, and connects again
// when asked (mcp_reconnect).
func failedThenReconnects(t *testing.T, s *session, why string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); s.mcp.list()[0].State != "failed" && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if list := s.mcp.list(); list[0].State != "failed" || list[0].Error != why || len(s.mcp.offered()) != 0 {
		t.Errorf("after its end: %+v, %d tools offered", list, len(s.mcp.offered()))
	}
	done, err := s.mcp.reconnect("helper")
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if st := s.mcp.state("helper"); st.State != "connected" || st.ToolCount != 4 {
		t.Errorf("after mcp_reconnect: %+v", st)
	}
}

// TestMCPServerClosesStdout: a server that closes its stdout and runs on
// fails the call waiting for it at once, though its timeout is an hour,
// with a tool error saying so; it is stopped and reaped by then, is
// reported failed, offers no tools, and connects again when asked. It
// stayed connected, each request waiting out its timeout.
func TestMCPServerClosesStdout(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	s := openMCPSession(t, "close-stdout-on-call", map[string]any{"timeout": 3600,
		"env": map[string]string{"RPI_HELPER": "mcp-server", "MCP_TEST_MODE": "close-stdout-on-call", "MCP_TEST_PIDFILE": pidFile}})
	var pid int
	data, _ := os.ReadFile(pidFile) // written as it started
	if _, err := fmt.Sscan(string(data), &pid); err != nil {
		t.Fatalf("the server's pid: %q, %v", data, err)
	}
	// Only so that the test fails, not hangs, without the fix: the call
	// waits an hour otherwise.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := callMCPEcho(t, ctx, s); err == nil || err.Error() != "MCP server helper closed its stdout" {
		t.Errorf("the call: %v", err)
	}
	if alive(pid) { // reaped before its connection ended
		t.Errorf("the server (pid %d) runs on", pid)
	}
	failedThenReconnects(t, s, "closed its stdout")
}

// TestMCPLogLinesBounded: a server's log message (or stderr line) of
// 1 MiB keeps its first 16 KiB in its line of mcp.log: a
// server's every message of up to 16 MiB was written whole, past the
// file's 5 MB bound.
func TestMCPLogLinesBounded(t *testing.T) {
	e := newTestEnv(t)
	writeMCPConfig(t, e.agentDir, "helper", "big-log", nil)
	s := openWithMCP(t, e)
	defer s.close()
	var line string
	for deadline := time.Now().Add(10 * time.Second); line == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		data, _ := os.ReadFile(filepath.Join(e.agentDir, "mcp.log"))
		for _, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, "[helper] info big: start x") {
				line = l
			}
		}
	}
	if line == "" || len(line) > 16<<10+len("2026-01-01T00:00:00Z ") || !strings.HasSuffix(line, "x…") {
		t.Errorf("the log message in mcp.log: %d bytes, %.80q…", len(line), line)
	}
}

// TestMCPRootsAreURIs: the roots rpi tells a server of (roots/list) are
// file URIs of the session's directories, percent-encoded: a directory
// named with # or ? was told as a URI whose path stops there (a server
// confined to it took it as the directory before the #), and a space
// made it no URI at all.
func TestMCPRootsAreURIs(t *testing.T) {
	e := newTestEnv(t)
	cwd := filepath.Join(t.TempDir(), "my #1 project?")
	if err := os.Mkdir(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	rootsFile := filepath.Join(t.TempDir(), "roots")
	writeMCPConfig(t, e.agentDir, "helper", "roots", map[string]any{"env": map[string]string{
		"RPI_HELPER": "mcp-server", "MCP_TEST_MODE": "roots", "MCP_TEST_ROOTS": rootsFile}})
	s := openWithMCP(t, e, "--cwd", cwd)
	defer s.close()
	var data []byte
	for deadline := time.Now().Add(10 * time.Second); len(data) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		data, _ = os.ReadFile(rootsFile)
	}
	var answer struct {
		ID     string
		Result struct{ Roots []mcpRoot }
	}
	json.Unmarshal(data, &answer)
	want := "file://" + strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(filepath.ToSlash(cwd), " ", "%20"), "#", "%23"), "?", "%3F")
	if answer.ID != "r1" || len(answer.Result.Roots) != 1 || answer.Result.Roots[0].URI != want || answer.Result.Roots[0].Name != "my #1 project?" {
		t.Errorf("roots/list answered %s; want the root %s", data, want)
	}
}

// TestFileURIs: a root's URI is the file URI Node's pathToFileURL makes
// of its path, which a server's fileURLToPath takes back: a Windows
// share's server is the URI's host (file:////server/share, which rpi
// made of it, is a path no such server reads).
func TestFileURIs(t *testing.T) {
	for path, want := range map[string]string{
		"/home/me/my #1 project?": "file:///home/me/my%20%231%20project%3F",
		"C:/Users/me/code":        "file:///C:/Users/me/code",
		"//server/share/my dir":   "file://server/share/my%20dir",
	} {
		if got := slashedFileURI(path); got != want {
			t.Errorf("the URI of %s: got %s, want %s", path, got, want)
		}
	}
}

// TestMCPResultImages: an image in a result reaches the model only as
// what its bytes are — a model's API refuses an image whose bytes are
// not of the type it is said to be, and one kept in the conversation
// fails every later request: a JPEG said to be a PNG is sent as a JPEG,
// bytes that are no image are a note, and base64 broken into lines is
// sent whole.
func TestMCPResultImages(t *testing.T) {
	s := openMCPSession(t, "", nil)
	call := &mcpCall{tool: mcpTool{server: "helper", remote: "images"}, args: json.RawMessage(`{}`)}
	res, err := call.run(context.Background(), s, toolRun{id: "t", update: func(toolResult) {}})
	if err != nil {
		t.Fatal(err)
	}
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n...."))
	want := []contentBlock{
		{Type: "image", MimeType: "image/png", Data: png},
		{Type: "image", MimeType: "image/jpeg", Data: base64.StdEncoding.EncodeToString([]byte("\xff\xd8\xff...."))},
		{Type: "text", Text: "[image image/png omitted: not an image a model takes]"},
		{Type: "image", MimeType: "image/png", Data: png},
	}
	if fmt.Sprint(res.Content) != fmt.Sprint(want) {
		t.Errorf("content %+v\nwant %+v", res.Content, want)
	}
}

// TestToolResultImagesScaled: an image a tool gives (an MCP tool's) of
// more than 2000 px a side is scaled as the result enters the
// conversation, pi's note of the two sizes in a text block after it.
func TestToolResultImagesScaled(t *testing.T) {
	s := openMCPSession(t, "", nil)
	call := &mcpCall{tool: mcpTool{server: "helper", remote: "wide"}, args: json.RawMessage(`{}`)}
	res, isError, _ := s.runDecoded(context.Background(), contentBlock{Type: "toolCall", ID: "t", Name: "mcp__helper__wide"}, call, nil, imageLimits{})
	if isError || len(res.Content) != 3 {
		t.Fatalf("result %+v, %v", res.Content, isError)
	}
	if w, h, _ := imageSize(res.Content[0].Data); res.Content[0].MimeType != "image/png" || w != 2000 || h != 8 {
		t.Errorf("image %s %dx%d, want image/png 2000x8", res.Content[0].MimeType, w, h)
	}
	want := []string{"[Image: original 2400x10, displayed at 2000x8. Multiply coordinates by 1.20 to map to original image.]", "a wide one"}
	if res.Content[1].Text != want[0] || res.Content[2].Text != want[1] {
		t.Errorf("texts %q, %q; want %q", res.Content[1].Text, res.Content[2].Text, want)
	}
}

// TestMCPResultOfManyPieces: a result of 40,000 small text blocks (a
// server may send hundreds of thousands in one message) is read in time
// and memory that grow with its size: its texts were joined one by one,
// each join copying all before it, so that one result of 16 MiB kept a
// core busy for minutes. As a result and as an error, the model gets its
// start and end.
func TestMCPResultOfManyPieces(t *testing.T) {
	s := openMCPSession(t, "", nil)
	conn, timeout, err := s.mcp.conn("helper")
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"result", "error"} {
		call := &mcpCall{tool: mcpTool{server: "helper", remote: "pieces"}, args: json.RawMessage(`{"text":"` + mode + `"}`)}
		if _, err := conn.request(context.Background(), "ping", nil, timeout, false); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		res, err := call.run(context.Background(), s, toolRun{id: "t", update: func(toolResult) {}})
		runtime.ReadMemStats(&after)
		text := joinTexts(res.Content)
		if err != nil {
			text = err.Error()
		}
		if (err != nil) != (mode == "error") || !strings.HasPrefix(text, "Warning: truncated output") || !strings.HasSuffix(text, "ab\nab") {
			t.Errorf("%s: %.100q, %v", mode, text, err)
		}
		// 40,000 texts joined one by one copy 40,000²/2 × 2 bytes: 1.6 GB.
		if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 200<<20 {
			t.Errorf("%s: reading it allocated %d MiB; want at most 200", mode, allocated>>20)
		}
	}
}

// TestMCPNotificationFlood: a server that floods tools/list_changed (and
// log messages) costs a few listings, never one each: the listings run
// one at a time, the changes told meanwhile making one more.
func TestMCPNotificationFlood(t *testing.T) {
	e := newTestEnv(t)
	writeMCPConfig(t, e.agentDir, "helper", "flood", nil)
	s := openWithMCP(t, e)
	// lists is not among the listed tools: call it by its remote name.
	conn, timeout, err := s.mcp.conn("helper")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the flood is read meanwhile
	raw, err := conn.request(context.Background(), "tools/call", map[string]any{"name": "lists", "arguments": map[string]any{}}, timeout, false)
	if err != nil {
		t.Fatal(err)
	}
	var result struct {
		Content []struct{ Text string } `json:"content"`
	}
	json.Unmarshal(raw, &result)
	var lists int
	fmt.Sscan(result.Content[0].Text, &lists)
	if lists < 2 || lists > 40 { // two pages a listing: the first, and a few after the flood
		t.Errorf("%d tools/list requests for 5,000 tools/list_changed", lists)
	}
}

// TestMCPNamesKeepTheirPrefix: a server name longer than 40 characters
// is refused (a tool's name, cut at 64, would lose mcp__<server>__ and
// escape --confirm mcp__<server>__*); a tool named as another's hashed
// name does not take that name twice.
func TestMCPNamesKeepTheirPrefix(t *testing.T) {
	long := strings.Repeat("s", 41)
	_, warnings := loadMCPConfigFrom(t, `{"mcpServers":{"`+long+`":{"command":"x"}}}`)
	if len(warnings) != 1 || !strings.Contains(warnings[0], "at most 40") {
		t.Errorf("a 41-character server name: %q", warnings)
	}
	taken := map[string]bool{}
	for _, tool := range []string{"x_y_" + mcpHash("s", "x-y"), "x-y", "x_y"} {
		name := mcpToolName("s", tool, func(n string) bool { return taken[n] })
		if taken[name] {
			t.Errorf("%s named %s twice", tool, name)
		}
		taken[name] = true
	}
}

// loadMCPConfigFrom reads one user mcp.json of the given text.
func loadMCPConfigFrom(t *testing.T, text string) ([]mcpServerConfig, []string) {
	agentDir := t.TempDir()
	os.WriteFile(filepath.Join(agentDir, "mcp.json"), []byte(text), 0o600)
	return loadMCPConfig(agentDir, t.TempDir(), false, nil, func(v string, _ bool) (string, error) { return v, nil })
}

// TestMCPConnHostileLines: what a server writes that is not one plain
// message — a batch (answered in turn), garbage, an answer to nothing,
// a line past the limit — never wedges the connection.
func TestMCPConnHostileLines(t *testing.T) {
	conn := newMCPConn("x", func(string) {}, nil)
	conn.send = func(context.Context, []byte, time.Duration) error { return nil }
	answers := make(chan json.RawMessage, 2)
	for range 2 {
		go func() {
			raw, err := conn.request(context.Background(), "ping", nil, 5*time.Second, false)
			if err != nil {
				t.Error(err)
			}
			answers <- raw
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); conn.waitingFor(1) == false || conn.waitingFor(2) == false; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the requests were never sent")
		}
	}
	conn.feed([]byte("garbage\n{\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{}}\n[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"a\":1}},"))
	conn.feed([]byte("{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"b\":2}}]\n"))
	got := []string{string(<-answers), string(<-answers)}
	slices.Sort(got)
	if got[0] != `{"a":1}` || got[1] != `{"b":2}` {
		t.Errorf("answers: %q", got)
	}
	conn.feed(make([]byte, maxMCPMessage+1))
	if _, err := conn.request(context.Background(), "ping", nil, time.Second, false); err == nil || !strings.Contains(err.Error(), "longer than 16 MiB") {
		t.Errorf("after an oversized line: %v", err)
	}
}

// TestMCPAnswerWithANullError: an MCP server's answer whose error is JSON
// null has no error: its result is the answer. An error there and not
// null wins over any result; one that is not a JSON-RPC error object
// ({code: integer, message: string}) fails the request at once, saying
// so (rpi dropped the whole line, and the request waited for its
// timeout). A code is any integer, as pi and the MCP SDK take it: one
// past 32 bits, which rpi took before, is the server's error.
func TestMCPAnswerWithANullError(t *testing.T) {
	notAnError := "MCP server x answered with an error that is not a JSON-RPC error object"
	cases := []struct{ answer, result, err string }{
		{`"result":{"a":1},"error":null`, `{"a":1}`, ""},
		{`"error":null,"result":{"b":2}`, `{"b":2}`, ""},
		{`"error":null`, "", "MCP server x answered with neither result nor error"},
		{`"result":{},"error":{"code":-32602,"message":"boom"}`, "", "boom"},
		{`"error":{"code":-32602,"message":"boom"},"result":null`, "", "boom"},
		{`"result":{},"error":"boom"`, "", notAnError},
		{`"result":{},"error":{}`, "", notAnError},
		{`"result":{},"error":false`, "", notAnError},
		{`"result":{},"error":{"code":"1","message":"x"}`, "", notAnError},
		{`"result":{},"error":{"code":1.5,"message":"x"}`, "", notAnError},
		{`"result":{},"error":{"code":1,"message":7}`, "", notAnError},
		{`"error":{"code":4294967296,"message":"over quota"}`, "", "over quota"}, // an integer past 32 bits is one still (pi's and the SDK's)
	}
	conn := newMCPConn("x", func(string) {}, nil)
	sent := make(chan struct{}, len(cases))
	conn.send = func(context.Context, []byte, time.Duration) error { sent <- struct{}{}; return nil }
	for i, tt := range cases {
		done := make(chan struct{})
		var raw json.RawMessage
		var err error
		go func() {
			defer close(done)
			raw, err = conn.request(context.Background(), "ping", nil, 10*time.Second, false)
		}()
		<-sent
		conn.feed([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,%s}`+"\n", i+1, tt.answer)))
		<-done
		if string(raw) != tt.result || fmt.Sprint(err) != cmpOr(tt.err, "<nil>") {
			t.Errorf("%s: %s, %v; want %s, %s", tt.answer, raw, err, tt.result, cmpOr(tt.err, "<nil>"))
		}
	}
}

// TestACPAsksBeforeUnmarkedMCPTools: in rpi acp's ask mode an MCP tool
// its server marks read-only (echo: readOnlyHint) runs without a
// permission request and its card is a read; one not marked (fail) is
// asked about first, titled "<server>: <tool>".
func TestACPAsksBeforeUnmarkedMCPTools(t *testing.T) {
	e := newTestEnv(t)
	writeMCPConfig(t, e.agentDir, "helper", "", nil)
	startFakeModel(t, apiOpenAI, `{"toolCalls":[`+
		`{"id":"c1","name":"mcp__helper__echo","args":["{\"text\":\"hi\"}"]},`+
		`{"id":"c2","name":"mcp__helper__fail","args":["{\"text\":\"hi\"}"]}]}`+"\n"+`{"text":["done"]}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	c.answer = func(method string, params json.RawMessage) (any, *acpError) {
		return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "allow"}}, nil
	}
	sid := openACPSession(t, c, nil, t.TempDir())
	if got := c.call("session/set_mode", map[string]any{"sessionId": sid, "modeId": "ask"}); got.Error != nil {
		t.Fatalf("session/set_mode: %s", got.line)
	}
	if got := c.call("session/prompt", acpTextPrompt(sid, "go")); !strings.Contains(got.line, `"stopReason":"end_turn"`) {
		t.Fatalf("the prompt: %s", got.line)
	}
	var asked []string
	kinds := map[string]string{}
	for _, m := range c.messages() {
		if m.Method == "session/request_permission" {
			var p struct{ ToolCall acpToolCallUpdate }
			json.Unmarshal(m.Params, &p)
			asked = append(asked, p.ToolCall.ToolCallID+" "+p.ToolCall.Title)
		}
		if u := m.update(); u != nil && u["sessionUpdate"] == "tool_call" {
			kinds[u["toolCallId"].(string)] = u["kind"].(string)
		}
	}
	if strings.Join(asked, "; ") != "c2 helper: fail" {
		t.Errorf("permission requests: %q; want only c2's", asked)
	}
	if kinds["c1"] != "read" || kinds["c2"] != "other" {
		t.Errorf("card kinds: %v", kinds)
	}
}

// TestReadSSEMessageLimit: an event stream carries a message of up to
// maxMCPMessage bytes, as a JSON answer and a stdio line do; its line,
// "data: " before it, is longer than that, and was refused for it ("a
// line longer than 16 MiB"). One byte more is refused.
func TestReadSSEMessageLimit(t *testing.T) {
	for _, size := range []int{maxMCPMessage, maxMCPMessage + 1} {
		message := `"` + strings.Repeat("x", size-2) + `"`
		var got []byte
		err := readSSE(strings.NewReader("event: message\ndata: "+message+"\n\n"), func(data []byte) { got = data }, func() bool { return got != nil }, nil)
		if ok := size <= maxMCPMessage; ok != (err == nil && string(got) == message) {
			t.Errorf("a message of %d bytes: got %d bytes, %v", size, len(got), err)
		}
	}
}

// TestMCPHeaderTokenRedacted: the token of an HTTP server's Authorization
// header (as the entry gives it, or the sign-in pi stored) and the value
// of its other headers (X-Api-Key) are keys rpi holds: a tool result that
// echoes one reaches neither the model nor the client. They went out as
// the server sent them.
func TestMCPHeaderTokenRedacted(t *testing.T) {
	const token = "mcp-header-token-0123456789"
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage
			Method string
		}
		json.Unmarshal(body, &m)
		var result any
		switch m.Method {
		case "initialize":
			result = map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}}
		case "tools/list":
			result = map[string]any{"tools": []any{map[string]any{"name": "whoami", "inputSchema": map[string]any{"type": "object"}}}}
		case "tools/call":
			result = map[string]any{"content": []any{map[string]any{"type": "text",
				"text": "you sent " + r.Header.Get("Authorization") + " and key " + r.Header.Get("X-Api-Key")}}}
		default:
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
	}))
	defer hs.Close()
	e := newTestEnv(t)
	const apiKey = "mcp-api-key-9876543210"
	e.vars["MCP_TOKEN"], e.vars["MCP_KEY"] = token, apiKey
	writeMCPServers(t, e.agentDir, map[string]any{"web": map[string]any{"url": hs.URL + "/mcp",
		"headers": map[string]string{"Authorization": "Bearer ${MCP_TOKEN}", "X-Api-Key": "${MCP_KEY}"}, "exposure": "direct"}})
	fm := startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"mcp__web__whoami","args":["{}"]}]}`+"\n"+`{"text":["done"]}`, e.agentDir)
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir()})
	ps.send(`{"id":"p","type":"prompt","message":"hi"}`)
	ps.waitFor(`"type":"agent_settled"`)
	checkRedacted(t, ps, fm, []string{token, apiKey}, []string{"you sent [redacted] and key [redacted]"})
}

// checkRedacted closes ps and checks that neither its client nor the
// model got any of secrets, and that both got every text of shown.
func checkRedacted(t *testing.T, ps *processSession, fm *fakeModel, secrets, shown []string) {
	t.Helper()
	ps.close()
	fm.mu.Lock()
	defer fm.mu.Unlock()
	requests, _ := json.Marshal(fm.requests)
	for what, text := range map[string]string{"the client": string(ps.out.bytes()), "the model": string(requests)} {
		for _, secret := range secrets {
			if strings.Contains(text, secret) {
				t.Errorf("%s got %s:\n%.3000s", what, secret, text)
			}
		}
		for _, want := range shown {
			if !strings.Contains(text, want) {
				t.Errorf("%s did not get %s:\n%.3000s", what, want, text)
			}
		}
	}
}

// TestMCPEnvSecretsRedacted: a stdio server's env values that are keys —
// those named as keys are (GITHUB_TOKEN, DB_PASSWORD), and those a
// !command makes — are keys rpi holds, as an HTTP server's headers are:
// a server that echoes one puts it in no tool result, so neither the
// client nor the model sees it. So is the password of a URL in an env
// value or an arg, whatever its name (DATABASE_URL; the arg's password
// is echoed by CONN, named as no key is). Other values (a mode, a path)
// are shown.
func TestMCPEnvSecretsRedacted(t *testing.T) {
	e := newTestEnv(t)
	const token, password, made, plain = "gh-token-0123456789", "literal-password-123", "made-by-command-456", "plain-value-visible"
	const urlPassword, argPassword = "db-url-password-42", "arg-url-password-7"
	e.vars["GH"], e.vars["PLAIN"] = token, plain
	writeMCPConfig(t, e.agentDir, "helper", "echo-env", map[string]any{"env": map[string]string{
		"RPI_HELPER": "mcp-server", "MCP_TEST_MODE": "echo-env",
		"GITHUB_TOKEN": "${GH}", "DB_PASSWORD": password, "FROM_MANAGER": "!printf " + made, "PLAIN_SETTING": "${PLAIN}",
		"DATABASE_URL": "postgres://app:" + urlPassword + "@localhost/app", "CONN": argPassword},
		"args": []string{"--db", "postgres://app:" + argPassword + "@localhost/app"}})
	var calls []string
	for i, name := range []string{"GITHUB_TOKEN", "DB_PASSWORD", "FROM_MANAGER", "PLAIN_SETTING", "DATABASE_URL", "CONN"} {
		args, _ := json.Marshal(map[string]string{"text": name})
		argsJSON, _ := json.Marshal(string(args))
		calls = append(calls, fmt.Sprintf(`{"id":"c%d","name":"mcp__helper__echo","args":[%s]}`, i, argsJSON))
	}
	fm := startFakeModel(t, apiOpenAI, `{"toolCalls":[`+strings.Join(calls, ",")+`]}`+"\n"+`{"text":["done"]}`, e.agentDir)
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir()})
	ps.send(`{"id":"p","type":"prompt","message":"hi"}`)
	ps.waitFor(`"type":"agent_settled"`)
	checkRedacted(t, ps, fm, []string{token, password, made, urlPassword, argPassword},
		[]string{"GITHUB_TOKEN=[redacted]", "DB_PASSWORD=[redacted]", "FROM_MANAGER=[redacted]", "PLAIN_SETTING=" + plain,
			"DATABASE_URL=postgres://app:[redacted]@localhost/app", "CONN=[redacted]"})
}

// TestMCPEnvSecretNames: which env names make a value a key: those
// that end in a word naming one, not those where such a word comes
// before another that says what about a key the value is (its type, its
// URL, its file: AUTH_TYPE=password took "password" out of every tool
// result).
func TestMCPEnvSecretNames(t *testing.T) {
	for name, want := range map[string]bool{
		"GITHUB_TOKEN": true, "OPENAI_API_KEY": true, "api_key": true, "DB_PASSWORD": true, "AWS_SECRET_ACCESS_KEY": true,
		"GITHUB_PAT": true, "APIKEY": true, "SLACK_AUTH": true, "NPM_CONFIG__AUTH": true, "MYSQL_PWD": true,
		"PGPASSWORD": true, "accessToken": true, "clientSecret": true, "GITHUBTOKEN": true,
		"PATH": false, "HOME": false, "GIT_AUTHOR_NAME": false, "KEYBOARD": false, "TOKENIZER_MODE": false, "PASSTHROUGH": false,
		"PWD": false, "OLDPWD": false, "MONKEY": false, "BYPASS": false, "OAUTH": false,
		// about a key, not one: a word, a URL, a path, an id
		"AUTH_TYPE": false, "TOKEN_URL": false, "SECRET_NAME": false, "SSH_AUTH_SOCK": false,
		"AWS_ACCESS_KEY_ID": false, "API_KEY_FILE": false, "PASSWORD_STORE_DIR": false,
	} {
		if got := mcpEnvSecret(name, "value"); got != want {
			t.Errorf("%s: a key: %v, want %v", name, got, want)
		}
	}
	if !mcpEnvSecret("SETTING", "!pass show x") {
		t.Error("a value a !command makes is not a key")
	}
}

// TestMCPToolsNamedAlike: tools whose names are alike once sanitized are
// each named with their hash, as pi names them, whichever the server
// lists first (rpi gave the first the plain name, so a server that
// reordered its list swapped its tools' names). Two servers' tools are
// never named alike: TestMCPToolNameStaysWithItsServer.
func TestMCPToolsNamedAlike(t *testing.T) {
	s := openMCPSession(t, "alike", nil)
	for _, remote := range []string{"a-b", "a_b"} {
		name := "mcp__helper__a_b_" + mcpHash("helper", remote)
		c, err := s.decodeToolCall(name, json.RawMessage(`{"text":"x"}`))
		if mc, ok := c.(*mcpCall); err != nil || !ok || mc.tool.remote != remote {
			t.Errorf("%s: %v %v; want the tool %s", name, c, err, remote)
		}
	}
	if tl := s.activeTool("mcp__helper__a_b"); tl != nil {
		t.Errorf("mcp__helper__a_b offered (%s)", tl.description)
	}
}

// TestMCPToolNamesOrderFree: a listing's names do not hang on its order,
// however its tools are named: a tool named as another's hashed name
// (x_y_<hash of x-y>), or as its next, keeps its plain name and x-y goes
// on to the one after, whichever comes first (rpi gave the hashed name to the first, so a
// server that reordered its list swapped the two tools' names, and what
// tool_search had loaded went to the other tool).
func TestMCPToolNamesOrderFree(t *testing.T) {
	crafted := "x_y_" + mcpHash("s", "x-y")
	next := "x_y_" + mcpHash("s", "x-y")[:4] + "2" // x-y's next, as mcpToolName makes it
	listing := []string{crafted, "x-y", "x_y", next}
	var orders [][]string // every order of the listing
	var permute func(done, left []string)
	permute = func(done, left []string) {
		if len(left) == 0 {
			orders = append(orders, done)
		}
		for i := range left {
			permute(append(slices.Clone(done), left[i]), append(slices.Clone(left[:i]), left[i+1:]...))
		}
	}
	permute(nil, listing)
	var want map[string]string
	for _, order := range orders {
		m := &mcpServers{}
		srv := &mcpServer{cfg: mcpServerConfig{name: "s"}}
		m.on = []*mcpServer{srv}
		var tools []mcpTool
		for _, remote := range order {
			tools = append(tools, mcpTool{server: "s", remote: remote, tool: &tool{}})
		}
		m.mu.Lock()
		tools, _ = m.nameToolsLocked(srv, tools)
		m.mu.Unlock()
		got := map[string]string{}
		for _, tl := range tools {
			got[tl.remote] = tl.tool.name
		}
		if want == nil {
			want = got
		}
		if !maps.Equal(got, want) {
			t.Errorf("listed as %q: %v; listed as %q: %v", listing, want, order, got)
		}
	}
	if want[crafted] != "mcp__s__"+crafted || want[next] != "mcp__s__"+next || want["x-y"] != "mcp__s__x_y_"+mcpHash("s", "x-y")[:4]+"3" {
		t.Errorf("named %v", want)
	}
	names := map[string]bool{}
	for _, name := range want {
		names[name] = true
	}
	if len(names) != len(listing) {
		t.Errorf("names given twice: %v", want)
	}
}

// TestMCPInputSchemaAsOffered: a tool's input schema reaches the model as
// the server offered it, as pi passes it on: its members in the server's
// order (a model writes the arguments in it) and its numbers as written,
// type and properties added at the end when missing; rpi sorted every
// object's members and rounded numbers past 2^53.
func TestMCPInputSchemaAsOffered(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string", "maxLength": 9007199254740993}}, "required": ["path"]}`,
			`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string","maxLength":9007199254740993}},"required":["path"]}`},
		{`{"properties":{"b":{},"a":{}}}`, `{"properties":{"b":{},"a":{}},"type":"object"}`},
		{`{}`, `{"type":"object","properties":{}}`},
		{``, `{"type":"object","properties":{}}`},
	}
	for _, c := range cases {
		if got, err := mcpInputSchema(json.RawMessage(c.in)); err != nil || string(got) != c.want {
			t.Errorf("%s: %s %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{`null`, `[]`, `"object"`, `{"type":"string"}`, `{"type":["object"]}`, strings.Repeat(`{"a":`, 20000) + `{}` + strings.Repeat(`}`, 20000)} {
		if got, err := mcpInputSchema(json.RawMessage(in)); err == nil {
			t.Errorf("%.40s: %s; want it refused", in, got)
		}
	}
}

// TestMCPErrorResultImages: a result the server marks isError reaches
// the model as pi gives it, an error with its images and its details;
// rpi kept its text only, and "MCP tool helper/fail returned an error"
// for one with no text.
func TestMCPErrorResultImages(t *testing.T) {
	s := openMCPSession(t, "", nil)
	block := contentBlock{Type: "toolCall", ID: "t", Name: "mcp__helper__fail", Arguments: json.RawMessage(`{"text":"screenshot"}`)}
	call, err := s.decodeToolCall(block.Name, block.Arguments)
	if err != nil {
		t.Fatal(err)
	}
	res, isError, _ := s.runDecoded(context.Background(), block, call, nil, imageLimits{})
	var b bytes.Buffer
	png.Encode(&b, flatImage(4, 3))
	want := []contentBlock{{Type: "text", Text: "it failed: screenshot"}, {Type: "image", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(b.Bytes())}}
	if !isError || fmt.Sprint(res.Content) != fmt.Sprint(want) || fmt.Sprint(res.Details) != "map[server:helper tool:fail]" {
		t.Errorf("isError %v, content %+v, details %v; want an error of %+v", isError, res.Content, res.Details, want)
	}
}

// TestMCPResultResourceLinks: a result's resource link is told to the
// model as pi tells it, with pi's pointer to read_mcp_resource while the
// server's resources are readable (rpi left the pointer out); rpi reads
// no file a link names, on this machine or the server's.
func TestMCPResultResourceLinks(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("the secret"), 0o600)
	for _, exposure := range []string{"direct", "hidden"} {
		s := openMCPSession(t, "", map[string]any{"exposure": exposure})
		awaitDialed(t, s)
		args, _ := json.Marshal(map[string]string{"text": secret})
		call := &mcpCall{tool: mcpTool{server: "helper", remote: "link"}, args: args}
		res, err := call.run(context.Background(), s, toolRun{id: "t", update: func(toolResult) {}})
		read := `. Read it with read_mcp_resource (server "helper")`
		if exposure == "hidden" {
			read = ""
		}
		want := `[Resource file:///notes.txt "notes" (text/plain)` + read + "]\n[Resource file://" + secret + ` "secret"` + read + "]"
		if text := joinTexts(res.Content); err != nil || text != want {
			t.Errorf("%s: %q, %v; want %q", exposure, text, err, want)
		}
	}
}
