package main

// Tests of ACP mode (docs/acp.md): the wire's decoding and errors, the
// mapping of the core's events to updates, and an ACP client in Go that
// speaks to an agent over pipes.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// ---- An ACP client in Go ----

// acpTestClient is an editor on the other end of an agent's pipes: it
// writes requests, keeps every message the agent writes, and answers the
// agent's requests with answer.
type acpTestClient struct {
	t      testing.TB
	wmu    sync.Mutex // guards writes to w
	w      io.WriteCloser
	answer func(method string, params json.RawMessage) (any, *acpError)

	mu       sync.Mutex // guards the fields below
	received []acpTestMessage
	changed  chan struct{}
	nextID   int
	ended    bool // the agent's stdout has ended
}

// acpTestMessage is one message the agent wrote, with its line.
type acpTestMessage struct {
	line   string
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *acpError       `json:"error"`
}

// update is a session/update's update, or nil.
func (m acpTestMessage) update() map[string]any {
	if m.Method != "session/update" {
		return nil
	}
	var p struct{ Update map[string]any }
	json.Unmarshal(m.Params, &p)
	return p.Update
}

// newACPTestClient reads the agent's stdout r and writes to its stdin w.
func newACPTestClient(t testing.TB, w io.WriteCloser, r io.Reader) *acpTestClient {
	c := &acpTestClient{t: t, w: w, changed: make(chan struct{})}
	go func() {
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				var m acpTestMessage
				if json.Unmarshal(line, &m) != nil {
					t.Errorf("the agent wrote a line that is not JSON: %q", line)
				}
				m.line = string(bytes.TrimSuffix(line, []byte("\n")))
				c.add(m)
				if m.Method != "" && m.ID != nil && c.answer != nil {
					go c.respond(m)
				}
			}
			if err != nil {
				c.mu.Lock()
				c.ended = true
				close(c.changed)
				c.changed = make(chan struct{})
				c.mu.Unlock()
				return
			}
		}
	}()
	return c
}

func (c *acpTestClient) add(m acpTestMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.received = append(c.received, m)
	close(c.changed)
	c.changed = make(chan struct{})
}

// respond answers one of the agent's requests.
func (c *acpTestClient) respond(m acpTestMessage) {
	result, failure := c.answer(m.Method, m.Params)
	var line []byte
	if failure != nil {
		line, _ = appendACPError(nil, m.ID, failure)
	} else {
		line, _ = appendACPResult(nil, m.ID, result)
	}
	c.send(string(line))
}

// send writes one line (a "\n" is added).
func (c *acpTestClient) send(line string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	io.WriteString(c.w, line+"\n")
}

// request sends a request and returns its id.
func (c *acpTestClient) request(method string, params any) json.RawMessage {
	c.mu.Lock()
	id := json.RawMessage(fmt.Sprint(c.nextID))
	c.nextID++
	c.mu.Unlock()
	line, err := appendACPCall(nil, id, method, params)
	if err != nil {
		c.t.Fatal(err)
	}
	c.send(string(line))
	return id
}

// call sends a request and waits for its response.
func (c *acpTestClient) call(method string, params any) acpTestMessage {
	c.t.Helper()
	id := c.request(method, params)
	return c.responseTo(id)
}

// responseTo waits for the response with id.
func (c *acpTestClient) responseTo(id json.RawMessage) acpTestMessage {
	c.t.Helper()
	i := c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "" && bytes.Equal(m.ID, id) })
	return c.messages()[i]
}

// waitFor waits until a message from index from on satisfies pred, and
// returns its index; it fails the test after 10 s or once stdout ends.
func (c *acpTestClient) waitFor(from int, pred func(acpTestMessage) bool) int {
	c.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		for i := from; i < len(c.received); i++ {
			if pred(c.received[i]) {
				c.mu.Unlock()
				return i
			}
		}
		changed, ended, n := c.changed, c.ended, len(c.received)
		c.mu.Unlock()
		if ended {
			c.t.Fatalf("the agent's output ended; %d messages, none the one waited for", n)
		}
		select {
		case <-changed:
		case <-deadline:
			c.t.Fatalf("waited 10 s; the agent wrote:\n%s", strings.Join(c.lines(), "\n"))
		}
	}
}

func (c *acpTestClient) messages() []acpTestMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]acpTestMessage(nil), c.received...)
}

func (c *acpTestClient) lines() []string {
	var out []string
	for _, m := range c.messages() {
		out = append(out, m.line)
	}
	return out
}

// testACPAgent is an agent on a host of its own (rpi acp with args, in
// e's environment; nil: a fresh one), writing to stdout.
func testACPAgent(t testing.TB, e *testEnv, stdout, stderr io.Writer, args ...string) *acpAgent {
	t.Helper()
	if e == nil {
		e = newTestEnv(t)
	}
	cfg, _, err := parseArgs(append([]string{"acp", "--cwd", t.TempDir()}, args...), e.env())
	if err != nil {
		t.Fatal(err)
	}
	h, err := newHost(cfg, e.env(), stderr)
	if err != nil {
		t.Fatal(err)
	}
	return newACPAgent(h, newConnection(nil, stdout, stderr))
}

// serveInput serves the agent's connection with in as what the client
// writes (testACPAgent made it with none).
func (a *acpAgent) serveInput(in io.Reader, maxLine int, stop <-chan os.Signal) os.Signal {
	a.conn.link.in = in
	return a.serveLines(maxLine, stop)
}

// startACPAgent serves an in-process agent (methods: nil for rpi's) over
// pipes, until the test ends its input.
func startACPAgent(t testing.TB, e *testEnv, methods map[string]acpMethod, args ...string) (*acpTestClient, *acpAgent, <-chan struct{}) {
	return startACPAgentWith(t, e, methods, maxLineBytes, args...)
}

// startACPAgentWith is startACPAgent with maxLine the longest input line.
func startACPAgentWith(t testing.TB, e *testEnv, methods map[string]acpMethod, maxLine int, args ...string) (*acpTestClient, *acpAgent, <-chan struct{}) {
	return startACPAgentPiped(t, e, methods, maxLine, nil, nil, args...)
}

// startACPAgentPiped is startACPAgentWith with the agent writing its
// stdout through writer and the client reading it through reader (nil:
// straight to the pipe, from it).
func startACPAgentPiped(t testing.TB, e *testEnv, methods map[string]acpMethod, maxLine int,
	writer func(io.Writer) io.Writer, reader func(io.Reader) io.Reader, args ...string) (*acpTestClient, *acpAgent, <-chan struct{}) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr syncBuffer
	var stdout io.Writer = outW
	if writer != nil {
		stdout = writer(outW)
	}
	var clientEnd io.Reader = outR
	if reader != nil {
		clientEnd = reader(outR)
	}
	a := testACPAgent(t, e, stdout, &stderr, args...)
	if methods != nil {
		a.methods = methods
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.serveInput(inR, maxLine, nil)
		a.shutdown()
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		<-done
		if s := stderr.String(); s != "" {
			t.Logf("stderr:\n%s", s)
		}
	})
	return newACPTestClient(t, inW, clientEnd), a, done
}

// ---- The wire ----

// acpWireMethods are methods for the wire's tests: test/echo answers its
// params, test/later answers them from the background, test/fail fails
// with an error whose details must not reach the client, test/panic
// panics.
var acpWireMethods = map[string]acpMethod{
	"initialize": acpInitialize,
	"test/echo": func(a *acpAgent, call *acpRequest) (any, error) {
		return json.RawMessage(cmpOr(string(call.params.raw("value")), "null")), nil
	},
	"test/later": func(a *acpAgent, call *acpRequest) (any, error) {
		return a.answerLater(call, func() (any, error) { return json.RawMessage(`"later"`), nil }, nil)
	},
	"test/fail": func(a *acpAgent, call *acpRequest) (any, error) {
		return nil, errors.New("cannot open /home/me/secret")
	},
	"test/panic": func(a *acpAgent, call *acpRequest) (any, error) { panic("boom") },
	"test/string": func(a *acpAgent, call *acpRequest) (any, error) {
		return call.params.str("name")
	},
}

const acpInit = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`

// TestACPWireErrors: every kind of bad input gets its JSON-RPC error (docs/acp.md#errors), with the
// id when it can be recovered, and the connection goes on; fed all at
// once, a line per write and a byte per write.
func TestACPWireErrors(t *testing.T) {
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"test/echo","params":{}}`, // before initialize
		`{"jsonrpc":"2.0","method":"test/echo","params":{}}`,        // a notification before initialize: nothing
		acpInit,                             // id 0 echoed as 0
		`this is not json`,                  // -32700, id null
		`{"jsonrpc":"2.0","id":3,"method":`, // truncated: -32700, id null
		"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"test/echo\",\"params\":{\"value\":\"\xff\"}}", // invalid UTF-8
		`[{"jsonrpc":"2.0","id":5,"method":"test/echo"}]`,                                         // a batch: -32600, id null
		`{"jsonrpc":"1.0","id":6,"method":"test/echo"}`,                                           // -32600 with the id
		`{"id":6.5,"method":"test/echo"}`,                                                         // no jsonrpc
		`{"jsonrpc":"2.0","id":7,"params":{}}`,                                                    // no method
		`{"jsonrpc":"2.0","id":{"x":1},"method":"test/echo"}`,                                     // an id that is no id: null
		`{"jsonrpc":"2.0","id":8,"method":7}`,                                                     // a method that is no string
		`"just a string"`,                                                                         // JSON, not an object
		`{"jsonrpc":"2.0","id":"abc","method":"nope/nothing"}`,                                    // -32601
		`{"jsonrpc":"2.0","method":"nope/notify","params":{}}`,                                    // ignored
		`{"jsonrpc":"2.0","id":9,"method":"test/echo","params":[1,2]}`,                            // params not an object
		`{"jsonrpc":"2.0","id":10,"method":"test/string","params":{}}`,                            // a missing field, named
		`{"jsonrpc":"2.0","id":11,"method":"test/string","params":{"name":5}}`,
		`{"jsonrpc":"2.0","id":12,"method":"test/string","params":{"NAME":"x","name":"y","extra":1,"_meta":{"a":1}}}`,
		`{"jsonrpc":"2.0","id":"s-1","method":"test/echo","params":{"value":[1]}}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"method":"test/echo","params":{"value":2}}`,
		`{"jsonrpc":"2.0","id":-0,"method":"test/echo","params":{"value":3}}`,
		`{"jsonrpc":"2.0","id":null,"method":"test/echo","params":{"value":4}}`,
		`{"jsonrpc":"2.0","id":13,"method":"test/fail"}`,
		`{"jsonrpc":"2.0","id":14,"method":"test/panic"}`,
		`{"jsonrpc":"2.0","id":99,"result":{}}`, // a response to nothing: dropped
		"   \t\r",                               // blank: skipped
		`{"jsonrpc":"2.0","id":15,"method":"test/echo","params":{"value":"last"}}`,
	}, "\n") + "\n"
	want := []string{
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid request: send initialize first"}}`,
		`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"promptCapabilities":{"image":true,"audio":false,"embeddedContext":true},"mcpCapabilities":{"http":true,"sse":false},"sessionCapabilities":{"list":{},"close":{},"resume":{},"delete":{},"additionalDirectories":{},"fork":{},"title":{}}},"authMethods":[],"agentInfo":{"name":"rpi","title":"rpi","version":"` + rpiVersion + `"}}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: invalid character 'h' in literal true (expecting 'r')"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: unexpected end of JSON input"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: invalid UTF-8"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request: a message must be one JSON object (batches are not supported)"}}`,
		`{"jsonrpc":"2.0","id":6,"error":{"code":-32600,"message":"Invalid request: jsonrpc must be \"2.0\""}}`,
		`{"jsonrpc":"2.0","id":6.5,"error":{"code":-32600,"message":"Invalid request: jsonrpc must be \"2.0\""}}`,
		`{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid request: no method"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request: id must be a number or a string"}}`,
		`{"jsonrpc":"2.0","id":8,"error":{"code":-32600,"message":"Invalid request: method must be a string"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request: a message must be one JSON object (batches are not supported)"}}`,
		`{"jsonrpc":"2.0","id":"abc","error":{"code":-32601,"message":"Method not found: nope/nothing"}}`,
		`{"jsonrpc":"2.0","id":9,"error":{"code":-32602,"message":"Invalid params: must be an object"}}`,
		`{"jsonrpc":"2.0","id":10,"error":{"code":-32602,"message":"Missing field name: must be a string"}}`,
		`{"jsonrpc":"2.0","id":11,"error":{"code":-32602,"message":"Invalid field name: must be a string"}}`,
		`{"jsonrpc":"2.0","id":12,"result":"y"}`,
		`{"jsonrpc":"2.0","id":"s-1","result":[1]}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"result":2}`,
		`{"jsonrpc":"2.0","id":-0,"result":3}`,
		`{"jsonrpc":"2.0","id":null,"result":4}`,
		`{"jsonrpc":"2.0","id":13,"error":{"code":-32603,"message":"Internal error in test/fail"}}`,
		`{"jsonrpc":"2.0","id":14,"error":{"code":-32603,"message":"Internal error in test/panic"}}`,
		`{"jsonrpc":"2.0","id":15,"result":"last"}`,
	}
	for _, feed := range feeds {
		t.Run(feed.name, func(t *testing.T) {
			var out, stderr syncBuffer
			a := testACPAgent(t, nil, &out, &stderr, "--verbose") // the stray response is told
			a.methods = acpWireMethods
			a.serveInput(feedReader(feed.write, []byte(in)), maxLineBytes, nil)
			got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("output differs\n--- got ---\n%s\n--- want ---\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			for _, s := range []string{"cannot open /home/me/secret", "panic in test/panic: boom", "a response to id 99"} {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr.String())
				}
			}
		})
	}
}

// TestACPNotificationsAndNullIDs: JSON-RPC's line between the two: a
// message with no id at all is a notification and is never answered
// (session/cancel with bad params or an unknown session, a request's
// method sent without an id, an unknown one); one with "id": null is a
// request, answered under id null (session/cancel sent so is refused: it
// is a notification). A second initialize is refused and changes nothing.
// The client's mistakes are told on stderr only with --verbose or
// RPI_DEBUG=1 (editors show an agent's stderr to the user).
func TestACPNotificationsAndNullIDs(t *testing.T) {
	for _, verbose := range []bool{false, true} {
		e := newTestEnv(t)
		if verbose {
			e.vars["RPI_DEBUG"] = "1"
		}
		stderr := testACPNotificationsAndNullIDs(t, e)
		for _, mistake := range []string{"session/list came without an id", "session/cancel: "} {
			if told := strings.Contains(stderr, mistake); told != verbose {
				t.Errorf("RPI_DEBUG=1 %v: %q told %v; stderr:\n%s", verbose, mistake, told, stderr)
			}
		}
	}
}

func testACPNotificationsAndNullIDs(t *testing.T, e *testEnv) string {
	var out, stderr syncBuffer
	a := testACPAgent(t, e, &out, &stderr, "--no-session")
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"no-such-session"}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":[1]}`,
		`{"jsonrpc":"2.0","method":"session/cancel"}`,
		`{"jsonrpc":"2.0","method":"session/list","params":{}}`,
		`{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","method":"nope/notify"}`,
		`{"jsonrpc":"2.0","id":null,"method":"session/cancel","params":{"sessionId":"no-such-session"}}`,
		`{"jsonrpc":"2.0","id":null,"method":"session/list","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"writeTextFile":true}}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}`,
	}, "\n") + "\n"
	a.serveInput(strings.NewReader(in), maxLineBytes, nil)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"Method not found: session/cancel is a notification: send it without an id"}}`,
		`{"jsonrpc":"2.0","id":null,"result":{"sessions":[]}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid request: initialize was answered already on this connection (it is sent once)"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request: initialize was answered already on this connection (it is sent once)"}}`,
		`{"jsonrpc":"2.0","id":2,"result":{"sessions":[]}}`,
	}
	if len(lines) < 1 || !strings.HasPrefix(lines[0], `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,`) ||
		strings.Join(lines[1:], "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant after initialize's answer:\n%s", out.String(), strings.Join(want, "\n"))
	}
	if caps := a.clientCaps(); caps != (acpClientCaps{readTextFile: true}) {
		t.Errorf("the client's capabilities after a second initialize: %+v", caps)
	}
	return stderr.String()
}

// TestACPTooDeep: a message nested deeper than encoding/json decodes is
// -32600, under its id wherever the top level holds a usable one (before
// or after the deep value), else id null; an answer to one of rpi's
// requests nested so deep fails that request, and nothing goes back
// under rpi's id.
func TestACPTooDeep(t *testing.T) {
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	var out, stderr syncBuffer
	a := testACPAgent(t, nil, &out, &stderr)
	a.methods = acpWireMethods
	in := strings.Join([]string{
		acpInit,
		`{"jsonrpc":"2.0","id":5,"method":"test/echo","params":{"value":` + deep + `}}`,
		`{"jsonrpc":"2.0","method":"test/echo","params":{"value":` + deep + `,"s":"]}\""},"id":"after"}`,
		`{"jsonrpc":"2.0","id":1,"method":"test/echo","id":-2.5e3,"params":` + deep + `}`,
		`{"jsonrpc":"2.0","method":"test/echo","params":{"value":` + deep + `}}`,
		`{"jsonrpc":"2.0","id":{"x":1},"method":"test/echo","params":` + deep + `}`,
		`{"jsonrpc":"2.0","id":null,"method":"test/echo","params":` + deep + `}`,
		`{"jsonrpc":"2.0","id":7,"method":"test/echo","params":` + deep,
		`{"jsonrpc":"2.0","id":8,"method":"test/echo","params":{"value":"still here"}}`,
	}, "\n") + "\n"
	a.serveInput(strings.NewReader(in), maxLineBytes, nil)
	tooDeep := `"error":{"code":-32600,"message":"Invalid request: nested too deeply (more than 10000 levels)"}}`
	want := []string{
		`{"jsonrpc":"2.0","id":5,` + tooDeep,
		`{"jsonrpc":"2.0","id":"after",` + tooDeep,
		`{"jsonrpc":"2.0","id":-2.5e3,` + tooDeep,
		`{"jsonrpc":"2.0","id":null,` + tooDeep,
		`{"jsonrpc":"2.0","id":null,` + tooDeep,
		`{"jsonrpc":"2.0","id":null,` + tooDeep,
		`{"jsonrpc":"2.0","id":null,` + tooDeep,
		`{"jsonrpc":"2.0","id":8,"result":"still here"}`,
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 1 || strings.Join(lines[1:], "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant after initialize's answer:\n%s", strings.Join(lines[min(1, len(lines)):], "\n"), strings.Join(want, "\n"))
	}

	// An answer nested too deep fails the request it answers.
	methods := map[string]acpMethod{"initialize": acpInitialize, "test/ask": func(a *acpAgent, call *acpRequest) (any, error) {
		return a.answerLater(call, func() (any, error) {
			_, err := a.conn.request(a.h.ctx, "client/deep", struct{}{})
			return fmt.Sprint(err), nil
		}, nil)
	}}
	c, _, _ := startACPAgent(t, nil, methods)
	c.call("initialize", map[string]any{"protocolVersion": 1})
	asked := c.request("test/ask", struct{}{})
	i := c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "client/deep" })
	c.send(`{"jsonrpc":"2.0","id":` + string(c.messages()[i].ID) + `,"result":` + deep + `}`)
	if got := c.responseTo(asked); string(got.Result) != `"the client's answer is not a JSON-RPC response: nested too deeply"` {
		t.Errorf("the request the deep answer answers: %s", got.line)
	}
	if n := len(c.messages()); n != 3 {
		t.Errorf("the agent wrote %d messages, not 3 (initialize's answer, its request, test/ask's answer):\n%s", n, strings.Join(c.lines(), "\n"))
	}
}

// TestACPOverlongLine: a line past the limit is a -32700 with id null,
// and the next line is served.
func TestACPOverlongLine(t *testing.T) {
	var out, stderr syncBuffer
	a := testACPAgent(t, nil, &out, &stderr)
	a.methods = acpWireMethods
	long := `{"jsonrpc":"2.0","id":1,"method":"test/echo","params":{"value":"` + strings.Repeat("x", 200) + `"}}`
	a.serveInput(strings.NewReader(acpInit+"\n"+long+"\n"+`{"jsonrpc":"2.0","id":2,"method":"test/echo","params":{"value":1}}`), 120, nil)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || lines[1] != `{"jsonrpc":"2.0","id":1,"error":{"code":-32700,"message":"Parse error: line longer than 120 bytes"}}` ||
		lines[2] != `{"jsonrpc":"2.0","id":2,"result":1}` {
		t.Errorf("got:\n%s", out.String())
	}
}

// TestACPNothingBeforeTheClientSpeaks: an agent writes nothing until a
// message comes, and nothing for a client that says nothing.
func TestACPNothingBeforeTheClientSpeaks(t *testing.T) {
	var out, stderr syncBuffer
	a := testACPAgent(t, nil, &out, &stderr)
	if a.serveInput(strings.NewReader(""), maxLineBytes, nil); out.String() != "" {
		t.Errorf("wrote %q", out.String())
	}
}

// TestACPCallsTheClient: a request rpi makes of the client is answered by
// its id, in any order, an error answer keeps its code, a late answer
// is dropped, and the end of input ends every wait.
func TestACPCallsTheClient(t *testing.T) {
	methods := map[string]acpMethod{"initialize": acpInitialize,
		"test/ask": func(a *acpAgent, call *acpRequest) (any, error) {
			return a.answerLater(call, func() (any, error) {
				what, _ := call.params.str("what")
				raw, err := a.conn.request(a.h.ctx, "client/"+what, struct{}{})
				if err != nil {
					var e *acpError
					if errors.As(err, &e) {
						return fmt.Sprintf("error %d: %s", e.Code, e.Message), nil
					}
					return nil, err
				}
				return raw, nil
			}, nil)
		}}
	c, _, done := startACPAgent(t, nil, methods)
	release := make(chan struct{})
	c.answer = func(method string, params json.RawMessage) (any, *acpError) {
		switch method {
		case "client/slow":
			<-release
			return "slow answer", nil
		case "client/fail":
			return nil, &acpError{Code: acpResourceNotFound, Message: "no such file"}
		}
		return "quick answer", nil
	}
	c.call("initialize", map[string]any{"protocolVersion": 1})
	slow := c.request("test/ask", map[string]string{"what": "slow"})
	if got := c.call("test/ask", map[string]string{"what": "quick"}); string(got.Result) != `"quick answer"` {
		t.Errorf("quick: %s", got.line)
	}
	if got := c.call("test/ask", map[string]string{"what": "fail"}); string(got.Result) != `"error -32002: no such file"` {
		t.Errorf("fail: %s", got.line)
	}
	close(release)
	if got := c.responseTo(slow); string(got.Result) != `"slow answer"` {
		t.Errorf("slow: %s", got.line)
	}
	// The agent's request ids are its own: 0, 1, 2, as numbers.
	var ids []string
	for _, m := range c.messages() {
		if m.Method != "" {
			ids = append(ids, string(m.ID))
		}
	}
	if strings.Join(ids, " ") != "0 1 2" {
		t.Errorf("the agent's request ids: %v", ids)
	}
	// A question never answered ends when the input does.
	c.answer = func(string, json.RawMessage) (any, *acpError) { select {} }
	hang := c.request("test/ask", map[string]string{"what": "never"})
	c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "client/never" })
	c.w.Close()
	<-done
	if got := c.responseTo(hang); string(got.Result) != `"error -32603: the client closed the connection"` {
		t.Errorf("a wait past the end of input: %s", got.line)
	}
}

// TestACPInitialize: initialize answers rpi's capabilities (fewer with
// --no-session), keeps the client's, and names a mistyped field.
func TestACPInitialize(t *testing.T) {
	run := func(noSession bool, params string) (string, acpClientCaps) {
		var out, stderr syncBuffer
		var args []string
		if noSession {
			args = []string{"--no-session"}
		}
		a := testACPAgent(t, nil, &out, &stderr, args...)
		a.serveInput(strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":`+params+`}`), maxLineBytes, nil)
		return strings.TrimSpace(out.String()), a.clientCaps()
	}
	_, caps := run(false, `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":false},"terminal":true,"_meta":{"terminal_output":true,"terminal-auth":true}},"clientInfo":{"name":"zed","version":"1"}}`)
	if caps != (acpClientCaps{readTextFile: true, terminal: true, terminalOutput: true}) {
		t.Errorf("client capabilities: %+v", caps)
	}
	if _, caps = run(false, `{"protocolVersion":2,"clientCapabilities":{"_meta":{"terminal_output":"yes"}}}`); caps != (acpClientCaps{}) {
		t.Errorf("a _meta that is not Zed's convention: %+v", caps)
	}
	out, _ := run(true, `{"protocolVersion":1}`)
	if !strings.Contains(out, `"loadSession":false`) || !strings.Contains(out, `"sessionCapabilities":{"close":{},"additionalDirectories":{},"title":{}}`) {
		t.Errorf("--no-session: %s", out)
	}
	for params, want := range map[string]string{
		`{}`:                      "Missing field protocolVersion: must be a whole number from 0 to 65535",
		`{"protocolVersion":"1"}`: "Invalid field protocolVersion: must be a whole number from 0 to 65535",
		`{"protocolVersion":1,"clientCapabilities":[]}`:                        "Invalid field clientCapabilities: must be an object",
		`{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":1}}}`: "Invalid field clientCapabilities.fs.readTextFile: must be true or false",
		`{"protocolVersion":1,"clientCapabilities":{"terminal":"no"}}`:         "Invalid field clientCapabilities.terminal: must be true or false",
	} {
		out, _ := run(false, params)
		if !strings.Contains(out, `"code":-32602,"message":"`+want+`"`) {
			t.Errorf("%s: %s, want %q", params, out, want)
		}
	}
}

// ---- A prompt's blocks ----

// TestACPPrompt: blocks become one user message's text and images.
func TestACPPrompt(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("file text\n"), 0o644)
	read := func(path string) (string, error) {
		data, err := readRegularFile(path, acpMaxLinkBytes)
		if err != nil {
			return "", errors.New("cannot be read")
		}
		return acpLinkText(string(data))
	}
	png := "iVBORw0KGgo="
	tests := []struct {
		blocks, text, images, err string
	}{
		{`[{"type":"text","text":"hi"}]`, "hi", "", ""},
		{`[{"type":"text","text":"Look at "},{"type":"resource_link","uri":"file://` + dir + `/a.txt","name":"a.txt"},{"type":"text","text":" please"}]`,
			"Look at \n\nfile://" + dir + "/a.txt\n```\nfile text\n```\n\n please", "", ""},
		{`[{"type":"text","text":"See:"},{"type":"resource","resource":{"uri":"file:///x/b.go","text":"x := 1\n"}}]`,
			"See:\n\nfile:///x/b.go\n```\nx := 1\n```", "", ""},
		{"[{\"type\":\"resource\",\"resource\":{\"uri\":\"u\",\"text\":\"a ``` fence\"}}]", "u\n````\na ``` fence\n````", "", ""},
		{`[{"type":"text","text":"x"},{"type":"resource_link","uri":"https://example.com/a","name":"a"}]`, "x\n\nhttps://example.com/a", "", ""},
		{`[{"type":"text","text":"x\n"},{"type":"resource_link","uri":"file:///nowhere/at/all","name":"a"}]`, "x\n\nfile:///nowhere/at/all (not inlined: cannot be read)", "", ""},
		{`[{"type":"text","text":"what?"},{"type":"image","data":"` + png + `","mimeType":"image/png"}]`, "what?", "image/png", ""},
		{`[{"type":"resource","resource":{"uri":"x.png","blob":"` + png + `","mimeType":"image/png"}}]`, "", "image/png", ""},
		{`[{"type":"audio","data":"UklGRg==","mimeType":"audio/wav"}]`, "", "", "Invalid field prompt[0].type: audio is not supported (promptCapabilities.audio is false)"},
		{`[{"type":"text","text":"a"},{"type":"video"}]`, "", "", "Invalid field prompt[1].type: must be one of text, image, resource, resource_link"},
		{`[{"text":"a"}]`, "", "", "Missing field prompt[0].type: must be a string"},
		{`[{"type":"text","text":3}]`, "", "", "Invalid field prompt[0].text: must be a string"},
		{`[{"type":"image","data":"not base64!","mimeType":"image/png"}]`, "", "", "Invalid field prompt[0].data: must be base64 data of a PNG, JPEG, GIF or WebP image"},
		// An image is typed as its bytes are: a model's API refuses one whose
		// bytes are not of its stated type, and one kept in the conversation
		// fails every later request.
		{`[{"type":"image","data":"/9j/4A==","mimeType":"image/png"}]`, "", "image/jpeg", ""},
		{`[{"type":"image","data":"aGk=","mimeType":"image/png"}]`, "", "", "Invalid field prompt[0].data: must be base64 data of a PNG, JPEG, GIF or WebP image"},
		{`[{"type":"resource","resource":{"uri":"x.png","blob":"aGk=","mimeType":"image/png"}}]`, "", "", "Invalid field prompt[0].resource.blob: must be base64 data of a PNG, JPEG, GIF or WebP image"},
		{`[{"type":"image","data":"` + png + `","mimeType":"text/plain"}]`, "", "", "Invalid field prompt[0].mimeType: must be an image type (image/…): only images are taken"},
		{`[{"type":"resource","resource":{"uri":"x","blob":"` + png + `","mimeType":"application/zip"}}]`, "", "", "Invalid field prompt[0].resource.mimeType: must be an image type (image/…): only images are taken"},
		{`[{"type":"resource"}]`, "", "", "Missing field prompt[0].resource: must be an object"},
		{`[{"type":"resource","resource":{"uri":"x"}}]`, "", "", "Missing field prompt[0].resource.text: must be a string"},
		{`[{"type":"text","text":"  "}]`, "", "", "Invalid field prompt: must hold some text or an image"},
		{`["text"]`, "", "", "Invalid prompt[0]: must be an object"},
	}
	for _, tt := range tests {
		var items []json.RawMessage
		json.Unmarshal([]byte(tt.blocks), &items)
		var text string
		var images []contentBlock
		m, err := acpPrompt(items)
		if err == nil {
			text, images = m.text(read), m.images
		}
		var mimes []string
		for _, img := range images {
			mimes = append(mimes, img.MimeType)
		}
		gotErr := ""
		var e *acpError
		if errors.As(err, &e) {
			gotErr = e.Message
			if e.Code != acpInvalidParams {
				t.Errorf("%s: code %d", tt.blocks, e.Code)
			}
		} else if err != nil {
			gotErr = "not an acpError: " + err.Error()
		}
		if text != tt.text || strings.Join(mimes, ",") != tt.images || gotErr != tt.err {
			t.Errorf("%s:\ngot  %q %v %q\nwant %q %v %q", tt.blocks, text, mimes, gotErr, tt.text, tt.images, tt.err)
		}
	}
	if m, err := acpPrompt([]json.RawMessage{json.RawMessage(`{"type":"image","data":"iVBO\nRw0KGgo=","mimeType":"image/png"}`)}); err != nil || m.images[0].Data != png {
		t.Errorf("base64 in lines: %v %v, want it in one piece", m, err)
	}
	if _, err := acpLinkText(strings.Repeat("x", acpMaxLinkBytes+1)); err == nil || err.Error() != "larger than 2.0MB" {
		t.Errorf("a big link: %v", err)
	}
	if _, err := acpLinkText("a\x00b"); err == nil {
		t.Error("a binary link was inlined")
	}
}

// ---- Updates ----

// TestACPToolInfo: kinds, titles and absolute locations (docs/acp.md), read
// from what the call decodes to: the tool's own strict decoder, the value
// that is approved and runs. Arguments the tool refuses — a key twice
// (the last would win in a loose reading), a key in another case, an
// unknown field, a wrong type, what the tool's decoder turns down — get
// the tool's name as the title and no locations, never a title read
// from arguments that will not run.
func TestACPToolInfo(t *testing.T) {
	s := toolServer(t, map[string]string{"sub/x.txt": "x\n"})
	cwd, home := s.set.cwd, s.env.getenv("HOME")
	paths := acpPaths{cwd: cwd}
	tests := []struct{ name, args, kind, title, locations string }{
		{"read", `{"path":"a.txt"}`, "read", "Read $CWD/a.txt", `[{"path":"$CWD/a.txt"}]`},
		{"read", `{"path":"../b/./c.txt","offset":5,"limit":3}`, "read", "Read $PARENT/b/c.txt", `[{"path":"$PARENT/b/c.txt","line":5}]`},
		{"read", `{"path":"@~/x"}`, "read", "Read $HOME/x", `[{"path":"$HOME/x"}]`},
		{"ls", `{}`, "read", "Read $CWD", `[{"path":"$CWD"}]`},
		{"write", `{"path":"/abs//n.txt","content":"x"}`, "edit", "Write /abs/n.txt", `[{"path":"/abs/n.txt"}]`},
		{"edit", `{"path":"e.go","edits":[{"oldText":"a","newText":"b"}]}`, "edit", "Edit $CWD/e.go", `[{"path":"$CWD/e.go"}]`},
		{"grep", `{"pattern":"TODO","path":"src"}`, "search", `Search "TODO" in $CWD/src`, `[{"path":"$CWD/src"}]`},
		{"find", `{"pattern":"*.go"}`, "search", `Find "*.go" in $CWD`, `[{"path":"$CWD"}]`},
		{"bash", `{"command":"printf 'a\\n' | wc -l"}`, "execute", `printf 'a\\n' | wc -l`, `null`},
		{"process", `{"action":"spawn","spec":{"argv":["npm","run","dev server","it's"]}}`, "execute", `npm run 'dev server' 'it'\\''s'`, `null`},
		{"process", `{"action":"spawn","spec":{"argv":["make"],"cwd":".","env":{"PATH":"/tmp/evil:/usr/bin","LD_PRELOAD":"/tmp/x.so","HOME":null}}}`,
			"execute", `env -u HOME LD_PRELOAD=/tmp/x.so PATH=/tmp/evil:/usr/bin make`, `null`},
		{"process", `{"action":"spawn","spec":{"argv":["ls"],"cwd":"/","env":{"A":"a b"}}}`, "execute", `env 'A=a b' ls (in /)`, `null`},
		{"process", `{"action":"spawn","spec":{"argv":["ls"],"cwd":"sub"}}`, "execute", `ls (in $CWD/sub)`, `null`},
		{"process", `{"action":"list"}`, "other", "process list", `null`},
		{"process", `{"action":"write","processId":"p1","dataBase64":"cm0gLXJmIH4K","closeStdin":true}`, "other", `process write p1: "rm -rf ~\n", then close its stdin`, `null`},
		{"process", `{"action":"keys","processId":"p1","keys":["CTRL_C","ENTER"]}`, "other", `process keys p1: ["CTRL_C","ENTER"]`, `null`},
		{"process", `{"action":"signal","processId":"p2","signal":"SIGKILL"}`, "other", "process signal p2 SIGKILL", `null`},
		{"todo", `{"op":"view"}`, "think", "Update plan", `null`},
		{"ask_user", `{"question":"?"}`, "other", "ask_user", `null`},

		// Arguments the tool refuses: the tool's name, no locations.
		{"read", `not json`, "read", "read", `null`},
		{"bash", `[1]`, "execute", "bash", `null`},
		{"bash", `{"command":"echo hi","command":"rm -rf ~"}`, "execute", "bash", `null`},
		{"bash", `{"command":"echo hi","Command":"rm -rf ~"}`, "execute", "bash", `null`},
		{"bash", `{"COMMAND":"rm -rf ~"}`, "execute", "bash", `null`},
		{"bash", `{"command":"echo hi","why":"rm -rf ~"}`, "execute", "bash", `null`},
		{"bash", `{"command":["rm","-rf","~"]}`, "execute", "bash", `null`},
		{"bash", `{"command":"echo hi","timeout":"never"}`, "execute", "bash", `null`},
		{"read", `{"Path":"/etc/shadow"}`, "read", "read", `null`},
		{"read", `{"path":"a.txt","path":"/etc/shadow"}`, "read", "read", `null`},
		{"read", `{"path":"a.txt","offset":"5"}`, "read", "read", `null`},
		{"read", `{"path":"a.txt","extra":true}`, "read", "read", `null`},
		{"write", `{"path":"notes.txt","content":"x","PATH":"/root/.ssh/authorized_keys"}`, "edit", "write", `null`},
		{"edit", `{"path":"e.go","edits":[]}`, "edit", "edit", `null`},
		{"grep", `{"pattern":"("}`, "search", "grep", `null`},
		{"ls", `{"path":null,"Path":"/"}`, "read", "ls", `null`},
		{"process", `{"action":"signal","processId":"p1","processId":"p2","signal":"SIGKILL"}`, "other", "process", `null`},
		{"process", `{"action":"signal","processId":"p1","processID":"p2","signal":"SIGKILL"}`, "other", "process", `null`},
		{"process", `{"action":"signal","processId":"p1","signal":"SIGKILL","action":"list"}`, "other", "process", `null`},
		{"process", `{"action":"spawn","spec":{"argv":["ls"],"ARGV":["rm","-rf","/"]}}`, "other", "process", `null`},
		{"process", `{"action":"spawn","spec":{"argv":["ls"],"cwd":"no/such/dir"}}`, "other", "process", `null`},
		{"process", `{"action":"write","processId":"p1","dataBase64":"not base64!"}`, "other", "process", `null`},
		{"process", `{"action":"keys","processId":"p1","keys":["rm -rf ~"]}`, "other", "process", `null`},
		{"todo", `{"op":"view","OP":"init"}`, "think", "todo", `null`},
	}
	expand := strings.NewReplacer("$CWD", cwd, "$PARENT", filepath.Dir(cwd), "$HOME", home)
	for _, tt := range tests {
		call, err := s.decodeToolCall(tt.name, json.RawMessage(tt.args))
		kind, title, locations := acpToolInfo(tt.name, call, paths)
		locs, _ := json.Marshal(locations)
		if kind != tt.kind || title != expand.Replace(tt.title) || string(locs) != expand.Replace(tt.locations) {
			t.Errorf("%s %s: got %s %q %s, want %s %q %s", tt.name, tt.args, kind, title, locs, tt.kind, expand.Replace(tt.title), expand.Replace(tt.locations))
		}
		// What a refused call shows is its tool's name, and only then.
		if refused := err != nil; refused != (title == tt.name) && tt.name != "ask_user" {
			t.Errorf("%s %s: the tool refuses it: %v (%v), and the title is %q", tt.name, tt.args, refused, err, title)
		}
	}
}

// TestACPTerminalShowsWhatTheCommandDid: with Zed's display-only
// terminal, a command that succeeds (exit 0, status completed) but whose
// output ends with the words rpi's bash adds after a failure ("\n\nCommand
// exited with code 137") shows in the terminal as it ran: all its output,
// sent once, and exit code 0. The terminal's end was read from the text
// (bashOutcome): it showed exit code 137, cut the last lines off the output
// as rpi's note, and sent the output twice; now it comes from how bash
// knows the command ended (toolResult.shell).
func TestACPTerminalShowsWhatTheCommandDid(t *testing.T) {
	const output = "secret line\n\nCommand exited with code 137"
	args, _ := json.Marshal(map[string]string{"command": "printf '" + strings.ReplaceAll(output, "\n", `\n`) + "'"})
	argsJSON, _ := json.Marshal(string(args))
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"bash","args":[`+string(argsJSON)+`]}]}`+"\n"+`{"text":["done"]}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	sid := openACPSession(t, c, map[string]any{"_meta": map[string]bool{"terminal_output": true}}, t.TempDir())
	c.call("session/prompt", acpTextPrompt(sid, "go"))
	var shown strings.Builder
	var exit string
	for _, m := range c.messages() {
		var p struct {
			Update acpToolCallUpdate
		}
		json.Unmarshal(m.Params, &p)
		if meta := p.Update.Meta; meta != nil && p.Update.ToolCallID == "c1" {
			if meta.TerminalOutput != nil {
				shown.WriteString(meta.TerminalOutput.Data)
			}
			if meta.TerminalExit != nil {
				code, _ := json.Marshal(meta.TerminalExit.ExitCode)
				exit = p.Update.Status + " exit_code " + string(code)
			}
		}
	}
	if shown.String() != output || exit != "completed exit_code 0" {
		t.Errorf("the terminal shows %q and ends %q; the command printed %q and exited 0", shown.String(), exit, output)
	}
}

// TestNewOutputText: the new part of bash's output so far, also once
// the output is cut to its tail.
func TestNewOutputText(t *testing.T) {
	for _, tt := range []struct{ before, now, want string }{
		{"", "a\n", "a\n"},
		{"a\n", "a\nb\n", "b\n"},
		{"line1\nline2\nline3\n", "line2\nline3\nline4\n", "line4\n"},
		{"abc", "xyz", "xyz"},
		{"a\nb\nc\nb\nc\n", "b\nc\nd\n", "d\n"}, // the first place b\n is found does not continue into it
		{"a\nb\nc\nb\nc\n", "b\nc\nb\nc\nd\n", "d\n"},
	} {
		if got := newOutputText(tt.before, tt.now); got != tt.want {
			t.Errorf("%q → %q: got %q, want %q", tt.before, tt.now, got, tt.want)
		}
	}
}

// acpTestUpdates is a mapping whose updates are collected as JSON lines.
type acpTestUpdates struct {
	*acpUpdates
	got []string
	ask map[string]bool // the tools behind approval
}

func newTestUpdates(terminal bool, ask ...string) *acpTestUpdates {
	tu := &acpTestUpdates{ask: map[string]bool{}}
	for _, a := range ask {
		tu.ask[a] = true
	}
	n := 0
	tu.acpUpdates = &acpUpdates{paths: acpPaths{cwd: "/p"}, terminal: terminal,
		deferred: func(tool string, _ toolCall) bool { return tu.ask[tool] },
		send: func(update any) {
			line, err := appendPayload(nil, acpUpdateOf("S", update))
			if err != nil {
				panic(err)
			}
			tu.got = append(tu.got, string(line))
		},
		newID: func() string { n++; return fmt.Sprintf("m%d", n) },
		now:   func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) },
	}
	return tu
}

func (tu *acpTestUpdates) take() string {
	out := strings.Join(tu.got, "\n")
	tu.got = nil
	return out
}

// TestACPUpdatesStream: deltas become chunks with one messageId per
// answer; a provider's failure its last chunk; notes chunks of their own.
func TestACPUpdatesStream(t *testing.T) {
	u := newTestUpdates(false)
	a1 := &assistantMessage{Role: "assistant", StopReason: "stop"}
	u.event("message_start", messageEvent{a1})
	u.event("message_update", messageUpdate{AssistantMessageEvent: assistantEvent{Type: "thinking_delta", Delta: ptr("hm")}})
	u.event("message_update", messageUpdate{AssistantMessageEvent: assistantEvent{Type: "text_delta", Delta: ptr("Hel")}})
	u.event("message_update", messageUpdate{AssistantMessageEvent: assistantEvent{Type: "text_delta", Delta: ptr("")}})
	u.event("message_update", messageUpdate{AssistantMessageEvent: assistantEvent{Type: "text_end", Content: ptr("Hel")}})
	u.event("message_end", messageEvent{a1})
	u.event("message_start", messageEvent{&userMessage{}})
	a2 := &assistantMessage{Role: "assistant", StopReason: "error", ErrorMessage: "boom"}
	u.event("message_start", messageEvent{a2})
	u.event("message_end", messageEvent{a2})
	u.event("run_failed", runFailed{"boom"})
	u.note("Retrying in 1s")
	u.event("session_info_changed", sessionInfoChanged{"Demo"})
	u.event("thinking_level_changed", thinkingLevelChanged{"high"}) // the front end sends config_option_update itself
	u.event("compaction_end", compactionEnd{Result: &compactionResult{TokensBefore: 900, EstimatedTokensAfter: 90}})
	u.event("todo_updated", todoUpdated{Phases: []todoPhase{{Name: "A", Tasks: []todoItem{
		{Content: "one", Status: "completed"}, {Content: "two", Status: "abandoned"}, {Content: "three", Status: "in_progress"}}}}})
	want := `{"sessionId":"S","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hm"},"messageId":"m1"}}
{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hel"},"messageId":"m1"}}
{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"boom"},"messageId":"m2"}}
{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Retrying in 1s"},"messageId":"m3"}}
{"sessionId":"S","update":{"sessionUpdate":"session_info_update","title":"Demo","updatedAt":"2026-01-02T03:04:05.000Z"}}
{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Compacted the conversation: 900 tokens before, about 90 after."},"messageId":"m4"}}
{"sessionId":"S","update":{"sessionUpdate":"plan","entries":[{"content":"one","status":"completed","priority":"medium"},{"content":"three","status":"in_progress","priority":"medium"}]}}`
	if got := u.take(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if last := u.lastAnswer(); last != a2 || u.lastAnswer() != nil {
		t.Errorf("the turn's last answer: %v", last)
	}
}

// TestACPUpdatesTools: each call is one tool_call, then its updates:
// in_progress at once when nothing is asked; an edit behind approval
// waits for its diff; a write that runs without asking gets its diff at
// the end; a denied call fails with why; bash shows its output in Zed's
// terminal, or fenced.
func TestACPUpdatesTools(t *testing.T) {
	u := newTestUpdates(true, "edit", "bash")
	u.event("tool_execution_start", toolExecStart{"r1", "read", json.RawMessage(`{"path":"a.txt"}`), &readCall{path: "a.txt", abs: "/p/a.txt"}})
	u.event("tool_execution_end", toolExecEnd{ToolCallID: "r1", ToolName: "read", Result: textResult("alpha")})
	want := `{"sessionId":"S","update":{"sessionUpdate":"tool_call","toolCallId":"r1","title":"Read /p/a.txt","kind":"read","status":"pending","locations":[{"path":"/p/a.txt"}],"rawInput":{"path":"a.txt"}}}
{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"r1","status":"in_progress"}}
{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"r1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"alpha"}}],"rawOutput":{"content":[{"type":"text","text":"alpha"}]}}}`
	if got := u.take(); got != want {
		t.Errorf("read:\n%s\nwant:\n%s", got, want)
	}

	u.event("tool_execution_start", toolExecStart{"e1", "edit", json.RawMessage(`{"path":"e.txt","oldText":"b","newText":"B"}`), &editCall{path: "e.txt", abs: "/p/e.txt"}})
	if got := u.take(); got != "" {
		t.Errorf("an edit behind approval announced itself before its diff: %s", got)
	}
	u.ready("e1", "/p/e.txt", "", ptr("a\nb\n"), "a\nB\n")
	perm, _ := json.Marshal(u.permissionCall("e1"))
	u.running("e1")
	u.event("tool_execution_end", toolExecEnd{ToolCallID: "e1", ToolName: "edit", Result: textResult("Successfully replaced 1 block(s) in e.txt.")})
	want = `{"sessionId":"S","update":{"sessionUpdate":"tool_call","toolCallId":"e1","title":"Edit /p/e.txt","kind":"edit","status":"pending","content":[{"type":"diff","path":"/p/e.txt","oldText":"a\nb\n","newText":"a\nB\n"}],"locations":[{"path":"/p/e.txt","line":2}],"rawInput":{"path":"e.txt","oldText":"b","newText":"B"}}}
{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"e1","status":"in_progress"}}
{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"e1","status":"completed","content":[{"type":"diff","path":"/p/e.txt","oldText":"a\nb\n","newText":"a\nB\n"}],"locations":[{"path":"/p/e.txt","line":2}],"rawOutput":{"content":[{"type":"text","text":"Successfully replaced 1 block(s) in e.txt."}]}}}`
	if got := u.take(); got != want {
		t.Errorf("edit:\n%s\nwant:\n%s", got, want)
	}
	if string(perm) != `{"toolCallId":"e1","title":"Edit /p/e.txt","kind":"edit","status":"pending","rawInput":{"path":"e.txt","oldText":"b","newText":"B"}}` {
		t.Errorf("the permission request's toolCall: %s", perm)
	}

	u.event("tool_execution_start", toolExecStart{"w1", "write", json.RawMessage(`{"path":"n.txt","content":"new\n"}`), &writeCall{path: "n.txt", abs: "/p/n.txt"}})
	wrote := textResult("Successfully wrote 4 bytes to n.txt")
	wrote.change = &fileChange{path: "/p/n.txt", after: []byte("new\n")}
	u.event("tool_execution_end", toolExecEnd{ToolCallID: "w1", ToolName: "write", Result: wrote})
	want = `{"sessionId":"S","update":{"sessionUpdate":"tool_call","toolCallId":"w1","title":"Write /p/n.txt","kind":"edit","status":"pending","locations":[{"path":"/p/n.txt"}],"rawInput":{"path":"n.txt","content":"new\n"}}}
{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"w1","status":"in_progress"}}
{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"w1","status":"completed","content":[{"type":"diff","path":"/p/n.txt","oldText":null,"newText":"new\n"}],"locations":[{"path":"/p/n.txt"}],"rawOutput":{"content":[{"type":"text","text":"Successfully wrote 4 bytes to n.txt"}]}}}`
	if got := u.take(); got != want {
		t.Errorf("write:\n%s\nwant:\n%s", got, want)
	}

	// bash behind approval, denied: no terminal output, the reason.
	u.event("tool_execution_start", toolExecStart{"b0", "bash", json.RawMessage(`{"command":"rm -rf /"}`), &bashCall{command: "rm -rf /"}})
	u.event("tool_execution_end", toolExecEnd{ToolCallID: "b0", ToolName: "bash", Result: textResult("Denied by user"), IsError: true})
	want = `{"sessionId":"S","update":{"sessionUpdate":"tool_call","toolCallId":"b0","title":"rm -rf /","kind":"execute","status":"pending","content":[{"type":"terminal","terminalId":"b0"}],"rawInput":{"command":"rm -rf /"},"_meta":{"terminal_info":{"terminal_id":"b0","cwd":"/p"}}}}
{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"b0","status":"failed","content":[{"type":"content","content":{"type":"text","text":"` + "```\\nDenied by user\\n```" + `"}}],"rawOutput":{"content":[{"type":"text","text":"Denied by user"}]}}}`
	if got := u.take(); got != want {
		t.Errorf("denied bash:\n%s\nwant:\n%s", got, want)
	}

	// bash allowed: output as it grows, then the exit and no content.
	u.event("tool_execution_start", toolExecStart{"b1", "bash", json.RawMessage(`{"command":"make"}`), &bashCall{command: "make"}})
	u.take()
	u.running("b1")
	u.event("tool_execution_update", toolExecUpdate{ToolCallID: "b1", ToolName: "bash", PartialResult: textResult("one\n")})
	u.event("tool_execution_update", toolExecUpdate{ToolCallID: "b1", ToolName: "bash", PartialResult: textResult("one\ntwo\n")})
	u.event("tool_execution_end", toolExecEnd{ToolCallID: "b1", ToolName: "bash", Result: toolResult{Content: textBlocks("one\ntwo\nthree\n\n\nCommand exited with code 2"),
		shell: &shellEnd{"one\ntwo\nthree\n", ptr(2)}}, IsError: true})
	want = `{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"b1","status":"in_progress"}}
{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"b1","_meta":{"terminal_output":{"terminal_id":"b1","data":"one\n"}}}}
{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"b1","_meta":{"terminal_output":{"terminal_id":"b1","data":"two\n"}}}}
{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"b1","_meta":{"terminal_output":{"terminal_id":"b1","data":"three\n"}}}}
{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"b1","status":"failed","rawOutput":{"content":[{"type":"text","text":"one\ntwo\nthree\n\n\nCommand exited with code 2"}]},"_meta":{"terminal_exit":{"terminal_id":"b1","exit_code":2,"signal":null}}}}`
	if got := u.take(); got != want {
		t.Errorf("bash:\n%s\nwant:\n%s", got, want)
	}

	// Without the terminal convention: one fenced text at the end.
	p := newTestUpdates(false)
	p.event("tool_execution_start", toolExecStart{"b2", "bash", json.RawMessage(`{"command":"ls"}`), &bashCall{command: "ls"}})
	p.event("tool_execution_update", toolExecUpdate{ToolCallID: "b2", ToolName: "bash", PartialResult: textResult("a\n")})
	p.event("tool_execution_end", toolExecEnd{ToolCallID: "b2", ToolName: "bash", Result: textResult("a\nb")})
	want = `{"sessionId":"S","update":{"sessionUpdate":"tool_call","toolCallId":"b2","title":"ls","kind":"execute","status":"pending","rawInput":{"command":"ls"}}}
{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"b2","status":"in_progress"}}
{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"b2","status":"completed","content":[{"type":"content","content":{"type":"text","text":"` + "```\\na\\nb\\n```" + `"}}],"rawOutput":{"content":[{"type":"text","text":"a\nb"}]}}}`
	if got := p.take(); got != want {
		t.Errorf("plain bash:\n%s\nwant:\n%s", got, want)
	}
}

// TestACPStopReason: how a turn's last answer stopped, and a cancel.
func TestACPStopReason(t *testing.T) {
	for _, tt := range []struct {
		cancelled bool
		last      *assistantMessage
		want      string
	}{
		{false, nil, "end_turn"},
		{true, &assistantMessage{StopReason: "stop"}, "cancelled"},
		{false, &assistantMessage{StopReason: "aborted"}, "cancelled"},
		{false, &assistantMessage{StopReason: "length"}, "max_tokens"},
		{false, &assistantMessage{StopReason: "toolUse"}, "end_turn"},
		{false, &assistantMessage{StopReason: "error", ErrorMessage: "I can't help with that.", answerMeta: &answerMeta{RawStopReason: "refusal"}}, "refusal"},
		{false, &assistantMessage{StopReason: "error", ErrorMessage: "Provider finish_reason: content_filter", answerMeta: &answerMeta{RawStopReason: "content_filter"}}, "refusal"},
		{false, &assistantMessage{StopReason: "error", ErrorMessage: "Provider stopped with: SAFETY", answerMeta: &answerMeta{RawStopReason: "SAFETY"}}, "refusal"},
		{false, &assistantMessage{StopReason: "error", ErrorMessage: "Provider finish_reason: network_error", answerMeta: &answerMeta{RawStopReason: "network_error"}}, "end_turn"},
		{false, &assistantMessage{StopReason: "error", ErrorMessage: "The prompt was blocked: SAFETY"}, "refusal"},
		{false, &assistantMessage{StopReason: "error", ErrorMessage: "429 Too Many Requests"}, "end_turn"},
	} {
		if got := acpStopReason(tt.cancelled, tt.last); got != tt.want {
			t.Errorf("%v %+v: %s, want %s", tt.cancelled, tt.last, got, tt.want)
		}
	}
}

// TestACPConfigOptions: model, thinking and approvals, every field
// present; approvals from --confirm, custom only while in force; modes
// mirror them.
func TestACPConfigOptions(t *testing.T) {
	thinker := &model{ID: "big", Name: "Big Model", Provider: "p", Reasoning: true}
	plain := &model{ID: "small", Provider: "p"}
	got, _ := json.Marshal(acpConfigOptions([]*model{thinker, plain}, thinker, "high", "ask", nil, ""))
	want := `[{"id":"model","name":"Model","category":"model","type":"select","currentValue":"p/big","options":[{"value":"p/big","name":"Big Model"},{"value":"p/small","name":"small"}]},` +
		`{"id":"thought_level","name":"Thinking","category":"thought_level","type":"select","currentValue":"high","options":[{"value":"off","name":"Off"},{"value":"minimal","name":"Minimal"},{"value":"low","name":"Low"},{"value":"medium","name":"Medium"},{"value":"high","name":"High"}]},` +
		`{"id":"approvals","name":"Approvals","category":"mode","type":"select","currentValue":"ask","options":[{"value":"ask","name":"Ask"},{"value":"edits","name":"Auto-approve edits"},{"value":"auto","name":"Auto-approve all"}]}]`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	for confirm, want := range map[string]string{"": "auto", "bash,process": "edits", "process,bash": "edits",
		"edit,write,process,bash": "ask", "bash": "custom", "write,edit,bash,process,read": "custom"} {
		var tools []string
		if confirm != "" {
			tools = strings.Split(confirm, ",")
		}
		if got := acpApprovalOf(tools); got != want {
			t.Errorf("--confirm %s: %s, want %s", confirm, got, want)
		}
	}
	modes, _ := json.Marshal(acpModesOf("custom", []string{"bash", "read"}))
	if !strings.Contains(string(modes), `"currentModeId":"custom"`) || !strings.Contains(string(modes), `{"id":"custom","name":"Custom (bash, read)","description":"Ask before bash, read"}`) {
		t.Errorf("modes: %s", modes)
	}
	if modes, _ := json.Marshal(acpModesOf("auto", nil)); strings.Contains(string(modes), "custom") {
		t.Errorf("custom offered while not in force: %s", modes)
	}
	none, _ := json.Marshal(acpConfigOptions(nil, nil, "medium", "auto", nil, "")[0])
	if string(none) != `{"id":"model","name":"Model","category":"model","type":"select","currentValue":"","options":[]}` {
		t.Errorf("no model: %s", none)
	}
	// A client with terminals gets the shell option last.
	all := acpConfigOptions(nil, nil, "medium", "auto", nil, "editor")
	shell, _ := json.Marshal(all[len(all)-1])
	if len(all) != 4 || string(shell) != `{"id":"shell","name":"Run commands","category":"_shell","type":"select","currentValue":"editor","options":[{"value":"rpi","name":"In rpi"},{"value":"editor","name":"In the editor's terminal"}]}` {
		t.Errorf("the shell option: %d options, the last %s", len(all), shell)
	}
}

// TestACPCommands: templates with a hint when they take arguments (nine
// named at most: a template holding $2000000000 made a hint of as many
// words, gigabytes), skills, /compact and /name, names without the slash.
func TestACPCommands(t *testing.T) {
	got, _ := marshalJSON(acpCommandsOf([]slashCommand{
		{Name: "greet", Description: "Greet someone", Source: "prompt", body: "Say hello to $1 and $2."},
		{Name: "all", Source: "prompt", body: "Do $ARGUMENTS now"},
		{Name: "rest", Source: "prompt", body: "Then ${@:2}"},
		{Name: "far", Source: "prompt", body: "Only $100000"},
		{Name: "fixed", Description: "No arguments", Source: "prompt", body: "Just this."},
		{Name: "skill:tidy", Description: "Tidy", Source: "skill", body: "Tidy."},
	}))
	want := `[{"name":"greet","description":"Greet someone","input":{"hint":"<arg1> <arg2>"}},{"name":"all","description":"all","input":{"hint":"<arguments>"}},` +
		`{"name":"rest","description":"rest","input":{"hint":"<arguments>"}},` +
		`{"name":"far","description":"far","input":{"hint":"<arg1> <arg2> <arg3> <arg4> <arg5> <arg6> <arg7> <arg8> <arg9> …"}},{"name":"fixed","description":"No arguments"},{"name":"skill:tidy","description":"Tidy","input":{"hint":"optional instructions"}},` +
		`{"name":"compact","description":"Summarise the conversation so far, to free the context window","input":{"hint":"optional instructions for the summary"}},` +
		`{"name":"name","description":"Name this session","input":{"hint":"title"}}]`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestACPUsage: context tokens, window and the session's cost, held at
// the largest finite number when a session file's costs add up past it
// (+Inf, which JSON cannot carry, made the update unwritable).
func TestACPUsage(t *testing.T) {
	priced := &model{ContextWindow: 1000, Cost: modelCost{Input: 1}}
	free := &model{ContextWindow: 500}
	msgs := []any{&userMessage{Role: "user"}, &assistantMessage{Role: "assistant", StopReason: "stop",
		Usage: usage{TotalTokens: 321, Cost: costBreakdown{Total: 0.25}}}}
	for _, tt := range []struct {
		messages []any
		m        *model
		want     string
	}{
		{msgs, priced, `{"sessionUpdate":"usage_update","used":321,"size":1000,"cost":{"amount":0.25,"currency":"USD"}}`},
		{nil, priced, `{"sessionUpdate":"usage_update","used":0,"size":1000,"cost":{"amount":0,"currency":"USD"}}`},
		{nil, free, `{"sessionUpdate":"usage_update","used":0,"size":500}`},
		{[]any{&summaryMessage{Role: "compactionSummary"}}, nil, `{"sessionUpdate":"usage_update","used":0,"size":0}`},
		{[]any{msgs[1], &assistantMessage{Role: "assistant", StopReason: "stop", Usage: usage{TotalTokens: 400, Cost: costBreakdown{Total: math.MaxFloat64}}}}, priced,
			`{"sessionUpdate":"usage_update","used":400,"size":1000,"cost":{"amount":1.7976931348623157e+308,"currency":"USD"}}`},
	} {
		spent := 0.0
		for _, m := range tt.messages {
			if a, ok := m.(*assistantMessage); ok {
				spent = addCost(spent, a.Usage.Cost.Total)
			}
		}
		got, _ := json.Marshal(acpUsageOf(estimateContext(tt.messages), tt.m, spent))
		if string(got) != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
	}
}

// TestACPPageOf: pages of 50, newest first, titles from the name or the
// summary, and a cursor that names the last row given.
func TestACPPageOf(t *testing.T) {
	var rows []sessionRow
	for i := 0; i < 55; i++ {
		row := sessionRow{SessionID: fmt.Sprintf("s%02d", i), Cwd: "/c", Path: fmt.Sprintf("/d/%02d.jsonl", i),
			Summary: "first line", modified: int64(1000 - i/2)} // pairs share a time: ties go by path
		if i == 3 {
			row.Name = ptr("Named")
		}
		rows = append(rows, row)
	}
	p1, err := acpPageOf(rows, "")
	if err != nil || len(p1.Sessions) != 50 || p1.NextCursor == "" || p1.Sessions[3].Title != "Named" || p1.Sessions[4].Title != "first line" {
		t.Fatalf("page 1: %+v %v", p1, err)
	}
	if p1.Sessions[0].UpdatedAt != "1970-01-01T00:00:00.000Z" || p1.Sessions[0].Cwd != "/c" {
		t.Errorf("row: %+v", p1.Sessions[0])
	}
	p2, err := acpPageOf(rows, p1.NextCursor)
	if err != nil || len(p2.Sessions) != 5 || p2.NextCursor != "" || p2.Sessions[0].SessionID != "s50" {
		t.Fatalf("page 2: %+v %v", p2, err)
	}
	// A session written meanwhile comes first and shifts nothing.
	newer := append([]sessionRow{{SessionID: "new", Path: "/d/new.jsonl", modified: 2000}}, rows...)
	if p2, _ := acpPageOf(newer, p1.NextCursor); p2.Sessions[0].SessionID != "s50" {
		t.Errorf("after a new session: %+v", p2.Sessions[0])
	}
	if _, err := acpPageOf(rows, "garbage!"); err == nil || !strings.Contains(err.Error(), "cursor") {
		t.Errorf("a bad cursor: %v", err)
	}
	if empty, _ := acpPageOf(nil, ""); empty.Sessions == nil || empty.NextCursor != "" {
		t.Errorf("no sessions: %+v", empty)
	}
}

// TestACPReplay: a branch replayed: user text, thinking and answers as
// chunks, each tool call one tool_call ending completed or failed (its
// title from its arguments as the tool decodes them: the tool's name for
// arguments it refuses), the plan after a todo, a compaction's note, a
// provider's error; a second call with an id given already gets a card of
// its own (c1#2) with its own result.
func TestACPReplay(t *testing.T) {
	s := toolServer(t, nil)
	msg := func(m any) *sessionEntry { return &sessionEntry{Type: "message", msg: m} }
	call := func(id, name, args string) contentBlock {
		return contentBlock{Type: "toolCall", ID: id, Name: name, Arguments: json.RawMessage(args)}
	}
	entries := []*sessionEntry{
		{Type: "session_info", more: &entryMore{Name: "x"}},
		msg(&userMessage{Role: "user", Content: []contentBlock{{Type: "text", Text: "Read it\nplease"}, {Type: "image", Data: "AAAA", MimeType: "image/png"}}}),
		msg(&assistantMessage{Role: "assistant", StopReason: "toolUse", Content: []contentBlock{{Type: "thinking", Thinking: "hm"},
			{Type: "text", Text: "Reading."}, call("c1", "read", `{"path":"a"}`), call("c2", "write", `{"path":"b","content":"x"}`),
			call("c3", "todo", `{"op":"init","items":["t"]}`), call("c4", "bash", `{"command":"ls"}`),
			call("c5", "bash", `{"command":"ls","command":"rm -rf ~"}`)}}),
		msg(&toolResultMessage{Role: "toolResult", ToolCallID: "c1", ToolName: "read", Content: textBlocks("alpha")}),
		msg(&toolResultMessage{Role: "toolResult", ToolCallID: "c2", ToolName: "write", Content: textBlocks("Denied by user"), IsError: true}),
		msg(&toolResultMessage{Role: "toolResult", ToolCallID: "c3", ToolName: "todo", Content: textBlocks("plan"),
			Details: map[string]any{"phases": []any{map[string]any{"name": "P", "tasks": []any{map[string]any{"content": "t", "status": "in_progress"}}}}}}),
		{Type: "compaction", more: &entryMore{TokensBefore: 500, Summary: "sum"}},
		msg(&assistantMessage{Role: "assistant", StopReason: "toolUse", Content: []contentBlock{call("c1", "read", `{"path":"b"}`)}}),
		msg(&toolResultMessage{Role: "toolResult", ToolCallID: "c1", ToolName: "read", Content: textBlocks("beta")}),
		msg(&assistantMessage{Role: "assistant", StopReason: "error", ErrorMessage: "boom"}),
	}
	u := newTestUpdates(false)
	u.paths = acpPaths{cwd: s.set.cwd}
	var lines []string
	for _, up := range u.replay(entries, s.decodeRecordedCall) {
		line, _ := json.Marshal(up)
		lines = append(lines, strings.ReplaceAll(string(line), s.set.cwd, "/p"))
	}
	want := `{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"Read it\nplease"},"messageId":"m1"}
{"sessionUpdate":"user_message_chunk","content":{"type":"image","data":"AAAA","mimeType":"image/png"},"messageId":"m1"}
{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hm"},"messageId":"m2"}
{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Reading."},"messageId":"m2"}
{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Read /p/a","kind":"read","status":"completed","content":[{"type":"content","content":{"type":"text","text":"alpha"}}],"locations":[{"path":"/p/a"}],"rawInput":{"path":"a"},"rawOutput":{"content":[{"type":"text","text":"alpha"}]}}
{"sessionUpdate":"tool_call","toolCallId":"c2","title":"Write /p/b","kind":"edit","status":"failed","content":[{"type":"content","content":{"type":"text","text":"Denied by user"}}],"locations":[{"path":"/p/b"}],"rawInput":{"path":"b","content":"x"},"rawOutput":{"content":[{"type":"text","text":"Denied by user"}]}}
{"sessionUpdate":"tool_call","toolCallId":"c3","title":"Update plan","kind":"think","status":"completed","content":[{"type":"content","content":{"type":"text","text":"plan"}}],"rawInput":{"op":"init","items":["t"]},"rawOutput":{"content":[{"type":"text","text":"plan"}],"details":{"phases":[{"name":"P","tasks":[{"content":"t","status":"in_progress"}]}]}}}
{"sessionUpdate":"tool_call","toolCallId":"c4","title":"ls","kind":"execute","status":"failed","content":[{"type":"content","content":{"type":"text","text":"No result: the call did not finish."}}],"rawInput":{"command":"ls"}}
{"sessionUpdate":"tool_call","toolCallId":"c5","title":"bash","kind":"execute","status":"failed","content":[{"type":"content","content":{"type":"text","text":"No result: the call did not finish."}}],"rawInput":{"command":"ls","command":"rm -rf ~"}}
{"sessionUpdate":"plan","entries":[{"content":"t","status":"in_progress","priority":"medium"}]}
{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Compacted the conversation: 500 tokens before, about 10 after."},"messageId":"m3"}
{"sessionUpdate":"tool_call","toolCallId":"c1#2","title":"Read /p/b","kind":"read","status":"completed","content":[{"type":"content","content":{"type":"text","text":"beta"}}],"locations":[{"path":"/p/b"}],"rawInput":{"path":"b"},"rawOutput":{"content":[{"type":"text","text":"beta"}]}}
{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"boom"},"messageId":"m5"}`
	if got := strings.Join(lines, "\n"); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// TestACPTextChunkAppender: the text chunk's own JSON is encoding/json's.
func TestACPTextChunkAppender(t *testing.T) {
	hostile := "q\" b\\ \n\r\t\x00\x1f <>& \u2028\u2029 \xff é😀"
	for _, p := range []acpTextChunkParams{
		{hostile, acpTextUpdate{"agent_message_chunk", acpText{"text", hostile}, hostile}},
		{"s", acpTextUpdate{"agent_thought_chunk", acpText{"text", ""}, ""}},
		{},
	} {
		want, _ := marshalJSON(p)
		if got := p.appendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("appendJSON   %s\nencoding/json %s", got, want)
		}
	}
	if _, ok := acpUpdateOf("s", acpChunk{"agent_message_chunk", acpImage{"image", "AA", "image/png"}, ""}).(acpUpdateParams); !ok {
		t.Error("an image chunk went to the text appender")
	}
}

// TestACPConnectionClosed: a request rpi makes after the input ended
// fails at once.
func TestACPConnectionClosed(t *testing.T) {
	c := newACPConn(newConnection(nil, io.Discard, io.Discard), io.Discard, false)
	c.close()
	if _, err := c.request(context.Background(), "fs/read_text_file", struct{}{}); err != errConnectionClosed {
		t.Errorf("got %v", err)
	}
}

// TestACPConnectionClosedAsTheWaitIsCancelled: a request whose wait
// meets the connection's end and its context's end at once (rpi's end
// closes the connection, then cancels what waited) fails as the
// connection's end says, every time: the wait picked either, and a
// handler answered "Internal error … context canceled" now and then.
func TestACPConnectionClosedAsTheWaitIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 100 {
		var c *acpConn
		closing := writerFunc(func(p []byte) (int, error) { c.close(); return len(p), nil }) // the request is written: the input ends
		c = newACPConn(newConnection(nil, closing, io.Discard), io.Discard, false)
		if _, err := c.request(ctx, "fs/read_text_file", struct{}{}); err != errConnectionClosed {
			t.Fatalf("got %v", err)
		}
	}
}

// writeTestSession writes a session file of cwd in pi's format, as
// modified at minute m of a day, with a first user message.
func writeTestSession(t testing.TB, agentDir, cwd, id string, m int, text string) string {
	ts := time.Date(2025, 1, 1, 0, m, 0, 0, time.UTC)
	dir := defaultSessionDir(agentDir, cwd)
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, strings.NewReplacer(":", "-", ".", "-").Replace(timestamp(ts))+"_"+id+".jsonl")
	user, _ := json.Marshal(text)
	data := `{"type":"session","version":3,"id":"` + id + `","timestamp":"` + timestamp(ts) + `","cwd":"` + cwd + `"}` + "\n" +
		`{"type":"message","id":"e0000001","parentId":null,"timestamp":"` + timestamp(ts) + `","message":{"role":"user","content":[{"type":"text","text":` + string(user) + `}],"timestamp":1}}` + "\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(path, ts, ts)
	return path
}

// TestACPListAndDelete: session/list pages a cwd's sessions or all of
// them, newest first; session/delete removes a file found by its id,
// but not an open session's; bad params name their field.
func TestACPListAndDelete(t *testing.T) {
	e := newTestEnv(t)
	agentDir := e.agentDir
	var ids []string
	for i := 0; i < 52; i++ {
		ids = append(ids, fmt.Sprintf("0199%04d-0000-7000-8000-%012d", i, i))
		writeTestSession(t, agentDir, "/work/many", ids[i], i, fmt.Sprintf("session %d\nsecond line", i))
	}
	other := writeTestSession(t, agentDir, "/work/other", "other-1", 59, "other")
	c, a, _ := startACPAgent(t, e, nil)
	c.call("initialize", map[string]any{"protocolVersion": 1})
	var page acpListPage
	got := c.call("session/list", map[string]any{"cwd": "/work/many/"})
	if json.Unmarshal(got.Result, &page); len(page.Sessions) != 50 || page.Sessions[0].SessionID != ids[51] ||
		page.Sessions[0].Title != "session 51" || page.Sessions[0].Cwd != "/work/many" || page.Sessions[0].UpdatedAt != "2025-01-01T00:51:00.000Z" {
		t.Fatalf("page 1: %s", got.line)
	}
	got = c.call("session/list", map[string]any{"cwd": "/work/many", "cursor": page.NextCursor})
	if page = (acpListPage{}); json.Unmarshal(got.Result, &page) != nil || len(page.Sessions) != 2 || page.NextCursor != "" || page.Sessions[1].SessionID != ids[0] {
		t.Fatalf("page 2: %s", got.line)
	}
	got = c.call("session/list", map[string]any{})
	if page = (acpListPage{}); json.Unmarshal(got.Result, &page) != nil || page.Sessions[0].SessionID != "other-1" {
		t.Errorf("every cwd: %s", got.line)
	}
	for params, want := range map[string]string{
		`{"cwd":"work/many"}`:      `Invalid field cwd: must be an absolute path, got \"work/many\"`,
		`{"cwd":7}`:                `Invalid field cwd: must be a string`,
		`{"cursor":"bogus"}`:       `Invalid field cursor: must be a nextCursor session/list gave`,
		`{"sessionId":"a/b"}`:      `Invalid field sessionId: must be a session's id`,
		`{"sessionId":"no-such"}`:  `Invalid field sessionId: no session has the id no-such`,
		`{"sessionId":"other-1"}`:  `Invalid field sessionId: the session other-1 is open; close it first (session/close)`,
		`{"session_id":"other-1"}`: `Missing field sessionId: must be a string`,
	} {
		method := "session/list"
		if strings.Contains(params, "ession") {
			method = "session/delete"
		}
		a.mu.Lock()
		a.sessions["other-1"] = &acpSession{}
		a.mu.Unlock()
		got := c.call(method, json.RawMessage(params))
		if got.Error == nil || got.Error.Code != acpInvalidParams || got.Error.Message != strings.ReplaceAll(want, `\"`, `"`) {
			t.Errorf("%s %s: %s", method, params, got.line)
		}
	}
	a.mu.Lock()
	delete(a.sessions, "other-1")
	a.mu.Unlock()
	if got := c.call("session/delete", map[string]string{"sessionId": "other-1"}); string(got.Result) != "{}" {
		t.Errorf("delete: %s", got.line)
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("the file is still there: %v", err)
	}
}

// ---- Fixtures ----

// TestACPFixtures runs the cases of testdata/acp/: rpi acp fed a client's
// lines, its output compared whole (see testdata/README.md).
func TestACPFixtures(t *testing.T) { testFixtures(t, "testdata/acp/*.txtar") }

// acpMergeable is a session/update that absorbs the next one of its kind
// (mergeChunks): the text chunks of one message, and the terminal output
// of one call — where deltas and a child's output are split is up to
// the clock and the kernel.
type acpMergeable struct {
	sessionID string
	chunk     *acpChunk
	output    *acpToolCallUpdate
}

// parseACPMergeable reads a chunk or a terminal_output update, or gives
// nil for any other line (or one that is not exactly as rpi writes it).
func parseACPMergeable(line []byte) mergeable {
	var n struct {
		Params struct {
			SessionID string          `json:"sessionId"`
			Update    json.RawMessage `json:"update"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &n) != nil {
		return nil
	}
	m := &acpMergeable{sessionID: n.Params.SessionID}
	var chunk struct {
		SessionUpdate string  `json:"sessionUpdate"`
		Content       acpText `json:"content"`
		MessageID     string  `json:"messageId"`
	}
	var output acpToolCallUpdate
	switch json.Unmarshal(n.Params.Update, &chunk); {
	case strings.HasSuffix(chunk.SessionUpdate, "_chunk") && chunk.Content.Type == "text":
		m.chunk = &acpChunk{chunk.SessionUpdate, chunk.Content, chunk.MessageID}
	case json.Unmarshal(n.Params.Update, &output) == nil && output.Meta != nil && output.Meta.TerminalOutput != nil:
		m.output = &output
	default:
		return nil
	}
	if !bytes.Equal(append(m.encode(), '\n'), line) && !bytes.Equal(m.encode(), line) {
		return nil
	}
	return m
}

func (m *acpMergeable) key() string {
	if m.chunk != nil {
		return "acp/" + m.sessionID + "/" + m.chunk.SessionUpdate + "/" + m.chunk.MessageID
	}
	return "acp/" + m.sessionID + "/terminal/" + m.output.ToolCallID
}

func (m *acpMergeable) add(next mergeable) bool {
	n := next.(*acpMergeable)
	if m.chunk != nil {
		text := m.chunk.Content.(acpText)
		text.Text += n.chunk.Content.(acpText).Text
		m.chunk.Content = text
	} else {
		m.output.Meta.TerminalOutput.Data += n.output.Meta.TerminalOutput.Data
	}
	return true
}

func (m *acpMergeable) encode() []byte {
	var update any = m.chunk
	if m.chunk != nil {
		update = *m.chunk
	} else {
		update = *m.output
	}
	line, _ := appendACPCall(nil, nil, "session/update", acpUpdateOf(m.sessionID, update))
	return line
}

// ---- The mode and the process ----

// TestACPModeArgs: rpi acp, --mode acp and rpi agent stdio select ACP
// mode; a conflicting mode, and rpc's session flags, are startup errors.
func TestACPModeArgs(t *testing.T) {
	env := newTestEnv(t).env()
	for _, tt := range []struct {
		args string
		acp  bool
		err  string
	}{
		{"acp", true, ""},
		{"--mode acp", true, ""},
		{"agent stdio --no-session", true, ""},
		{"--confirm bash acp", true, ""},
		{"rpc", false, ""},
		{"acp --mode rpc", false, "Conflicting mode: the acp subcommand runs ACP mode, but --mode rpc was given"},
		{"rpc --mode acp", false, "Conflicting mode: the rpc subcommand runs RPC mode, but --mode acp was given"},
		{"--mode json", false, "Unsupported mode: json (rpi speaks rpc and acp)"},
		{"", false, "No mode given: run `rpi rpc` or `rpi --mode rpc` (`rpi acp` for an editor, `rpi serve` for a long-lived host)"},
		{"agent", false, "Unexpected argument: agent (see rpi --help)"},
		{"acp --session x.jsonl", true, "Conflicting flags: --session, --session-id, --fork and --name are rpc mode's; in ACP mode the editor opens sessions (session/new, session/load)"},
	} {
		cfg, _, err := parseArgs(strings.Fields(tt.args), env)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.err || err == nil && cfg.acp != tt.acp {
			t.Errorf("%s: acp %v, error %q; want %v, %q", tt.args, cfg.acp, got, tt.acp, tt.err)
		}
	}
}

// startACPProcess starts the test binary as rpi acp with args, in an
// agent dir of its own whose model is a fake one with script (none
// when ""), and an ACP client on its pipes.
func startACPProcess(t *testing.T, script string, args ...string) (*acpTestClient, *exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := rpiCommand(t, append([]string{"acp"}, args...)...)
	if script != "" {
		var agentDir string
		for _, kv := range cmd.Env {
			if dir, ok := strings.CutPrefix(kv, "PI_CODING_AGENT_DIR="); ok {
				agentDir = dir
			}
		}
		startFakeModel(t, apiOpenAI, script, agentDir)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return newACPTestClient(t, stdin, stdout), cmd, stderr
}

// waitExit waits for cmd to end and returns its exit code and how long it
// took from since.
func waitExit(t *testing.T, cmd *exec.Cmd, since time.Time) (int, time.Duration) {
	t.Helper()
	err := cmd.Wait()
	took := time.Since(since)
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		return exitErr.ExitCode(), took
	case err != nil:
		t.Fatal(err)
	}
	return 0, took
}

// TestEndToEndACP drives rpi acp as an editor does, over real pipes: it
// writes nothing before the client speaks, answers initialize's id 0 as
// 0; at stdin's end (docs/acp.md) the running turn answers cancelled, the
// command the model started and its own child are ended, and rpi exits 0
// within 2 s, having written nothing but JSON-RPC.
func TestEndToEndACP(t *testing.T) {
	endToEnd(t)
	helper := fmt.Sprintf("RPI_HELPER=spawn-grandchild %q", os.Args[0])
	args, _ := json.Marshal(map[string]string{"command": helper})
	argsJSON, _ := json.Marshal(string(args))
	c, cmd, stderr := startACPProcess(t, `{"toolCalls":[{"id":"c1","name":"bash","args":[`+string(argsJSON)+`]}]}`)
	time.Sleep(200 * time.Millisecond)
	if got := c.lines(); len(got) > 0 {
		t.Fatalf("rpi wrote before the client spoke: %q", got)
	}
	init := c.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{"_meta": map[string]bool{"terminal_output": true}}})
	if string(init.ID) != "0" || init.Result == nil {
		t.Fatalf("initialize: %s", init.line)
	}
	var opened acpSessionAnswer
	json.Unmarshal(c.call("session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}}).Result, &opened)
	prompt := c.request("session/prompt", map[string]any{"sessionId": opened.SessionID, "prompt": []any{map[string]string{"type": "text", "text": "spawn"}}})
	out := c.waitFor(0, func(m acpTestMessage) bool { return strings.Contains(m.line, `"terminal_output"`) })
	var update struct {
		Params struct {
			Update acpToolCallUpdate `json:"update"`
		} `json:"params"`
	}
	json.Unmarshal([]byte(c.messages()[out].line), &update)
	grandchild, _ := strconv.Atoi(strings.TrimSpace(update.Params.Update.Meta.TerminalOutput.Data))
	if grandchild == 0 {
		t.Fatalf("no grandchild pid in %s", c.messages()[out].line)
	}
	ended := time.Now()
	c.w.Close()
	code, took := waitExit(t, cmd, ended)
	if code != 0 || took > 2*time.Second {
		t.Errorf("exit code %d after %v; want 0 within 2 s (stderr: %s)", code, took, stderr.String())
	}
	if got := c.responseTo(prompt); stopReasonOf(got.Result) != "cancelled" {
		t.Errorf("the running prompt at EOF: %s", got.line)
	}
	if outlives(grandchild) {
		t.Errorf("grandchild %d survived rpi's exit", grandchild)
	}
	for _, m := range c.messages() {
		if !strings.HasPrefix(m.line, `{"jsonrpc":"2.0",`) {
			t.Errorf("stdout holds a line that is not JSON-RPC: %q", m.line)
		}
	}
}

// TestEndToEndACPSignals: SIGTERM and SIGINT end rpi acp as they end rpc
// mode (exit 0 and 130), the running turn answered cancelled.
func TestEndToEndACPSignals(t *testing.T) {
	endToEnd(t)
	for _, tt := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGTERM, 0}, {syscall.SIGINT, 130}} {
		t.Run(tt.sig.String(), func(t *testing.T) {
			c, cmd, _ := startACPProcess(t, `{"toolCalls":[{"id":"c1","name":"bash","args":["{\"command\":\"echo running; sleep 30\"}"]}]}`)
			c.call("initialize", map[string]any{"protocolVersion": 1})
			var opened acpSessionAnswer
			json.Unmarshal(c.call("session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}}).Result, &opened)
			prompt := c.request("session/prompt", map[string]any{"sessionId": opened.SessionID, "prompt": []any{map[string]string{"type": "text", "text": "run"}}})
			c.waitFor(0, func(m acpTestMessage) bool { return strings.Contains(m.line, `"status":"in_progress"`) })
			cmd.Process.Signal(tt.sig)
			if code, _ := waitExit(t, cmd, time.Now()); code != tt.code {
				t.Errorf("exit code %d, want %d", code, tt.code)
			}
			if got := c.responseTo(prompt); stopReasonOf(got.Result) != "cancelled" {
				t.Errorf("the running prompt: %s", got.line)
			}
		})
	}
}

// TestEndToEndACPLaterStopSignals: in ACP mode too, SIGHUP and SIGQUIT
// end rpi as docs/protocol.md#launch says (129 and 131, not killed by
// them) once a line after initialize is answered, with no child ever
// started, and
// once settleWithin has passed for a client that sends nothing.
func TestEndToEndACPLaterStopSignals(t *testing.T) {
	endToEnd(t)
	for _, tt := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGHUP, 129}, {syscall.SIGQUIT, 131}} {
		for _, initialize := range []bool{true, false} {
			t.Run(fmt.Sprintf("%v/initialize=%v", tt.sig, initialize), func(t *testing.T) {
				t.Parallel()
				c, cmd, _ := startACPProcess(t, "")
				if initialize {
					c.call("initialize", map[string]any{"protocolVersion": 1})
					c.call("session/list", map[string]any{}) // read after the first answer: the handlers were there
				} else {
					time.Sleep(settleWithin + time.Second)
				}
				cmd.Process.Signal(tt.sig)
				if code, _ := waitExit(t, cmd, time.Now()); code != tt.code {
					t.Errorf("exit code %d, want %d", code, tt.code)
				}
			})
		}
	}
}

// TestEndToEndACPStartupFailure: a fatal startup error is one line on
// stderr and exit 1; stdout stays empty.
func TestEndToEndACPStartupFailure(t *testing.T) {
	endToEnd(t)
	for _, tt := range []struct{ args, stderr string }{
		{"acp --thinking bogus", "rpi: Invalid --thinking \"bogus\": must be one of off, minimal, low, medium, high, xhigh, max\n"},
		{"acp --bogus", "rpi: Unknown flag: --bogus (see rpi --help)\n"},
		{"acp --max-running 0", "rpi: Invalid --max-running 0: from 1 to 64 sessions' turns at once\n"},
		{"agent stdio --models-json", "rpi: Unknown flag: --models-json (see rpi --help)\n"},
	} {
		cmd := rpiCommand(t, strings.Fields(tt.args)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 || stdout.Len() > 0 || stderr.String() != tt.stderr {
			t.Errorf("%s: exit %v, stdout %q, stderr %q", tt.args, err, stdout.String(), stderr.String())
		}
	}
}

// TestACPSessionLock: a session open in one rpi cannot be loaded in
// another (it is refused, naming why) until session/close lets go of it;
// then it loads at once.
func TestACPSessionLock(t *testing.T) {
	e := newTestEnv(t)
	e.lockWait = 50 * time.Millisecond
	startFakeModel(t, apiOpenAI, `{"text":["hi"]}`, e.agentDir)
	cwd := t.TempDir()
	a, _, _ := startACPAgent(t, e, nil)
	b, _, _ := startACPAgent(t, e, nil)
	for _, c := range []*acpTestClient{a, b} {
		c.call("initialize", map[string]any{"protocolVersion": 1})
	}
	var opened acpSessionAnswer
	json.Unmarshal(a.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}).Result, &opened)
	load := map[string]any{"sessionId": opened.SessionID, "cwd": cwd, "mcpServers": []any{}}
	if got := b.call("session/load", load); got.Error == nil || got.Error.Code != acpInternalError ||
		got.Error.Message != "The session "+opened.SessionID+" is open in another rpi process: close it there (or end that process) and try again" {
		t.Errorf("load of a session held elsewhere: %s", got.line)
	}
	if got := a.call("session/close", map[string]any{"sessionId": opened.SessionID}); string(got.Result) != "{}" {
		t.Fatalf("close: %s", got.line)
	}
	if got := b.call("session/load", load); got.Error != nil {
		t.Errorf("load after close: %s", got.line)
	}
}

// ---- A hostile or careless client ----

// acpTextPrompt is session/prompt's params for a text prompt, with more
// blocks after it.
func acpTextPrompt(sessionID, text string, more ...any) map[string]any {
	return map[string]any{"sessionId": sessionID, "prompt": append([]any{map[string]string{"type": "text", "text": text}}, more...)}
}

// openACPSession initializes c with the client capabilities caps and
// opens a session in cwd; it returns the session's id.
func openACPSession(t *testing.T, c *acpTestClient, caps map[string]any, cwd string) string {
	t.Helper()
	c.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": caps})
	var opened acpSessionAnswer
	if got := c.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}); json.Unmarshal(got.Result, &opened) != nil || opened.SessionID == "" {
		t.Fatalf("session/new: %s", got.line)
	}
	return opened.SessionID
}

// stallingReader is an editor's end of rpi's stdout that stops reading
// right after the read that brings it stall, until resume is closed;
// then it reads on. One goroutine reads it.
type stallingReader struct {
	r       io.Reader
	stall   []byte
	resume  chan struct{}
	stalled bool
	done    bool
}

func (s *stallingReader) Read(p []byte) (int, error) {
	if s.stalled {
		<-s.resume
		s.stalled, s.done = false, true
	}
	n, err := s.r.Read(p)
	if !s.done && bytes.Contains(p[:n], s.stall) {
		s.stalled = true
	}
	return n, err
}

// watchedWriter tells seen (once, without waiting) when a write that
// holds match begins: the write then blocks as long as the pipe does.
type watchedWriter struct {
	w     io.Writer
	match []byte
	seen  chan struct{}
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, w.match) {
		select {
		case w.seen <- struct{}{}:
		default:
		}
	}
	return w.w.Write(p)
}

// startStallingEditor starts an agent whose editor stops reading its
// stdout right after it has read that session B's read (tool call b1) is
// in progress, until resume is called (at the test's end at the latest);
// writing tells when rpi's write of a fs/read_text_file request begins,
// which then waits. Session A's editor gives files (readTextFile);
// session B is in cwdB.
func startStallingEditor(t *testing.T, e *testEnv, cwdB string) (c *acpTestClient, sidA, sidB string, writing <-chan struct{}, resume func()) {
	stalled := make(chan struct{})
	began := make(chan struct{}, 1)
	c, _, _ = startACPAgentPiped(t, e, nil, maxLineBytes,
		func(w io.Writer) io.Writer {
			return &watchedWriter{w: w, match: []byte(`"method":"fs/read_text_file"`), seen: began}
		},
		func(r io.Reader) io.Reader {
			return &stallingReader{r: r, stall: []byte(`"toolCallId":"b1","status":"in_progress"`), resume: stalled}
		})
	resume = sync.OnceFunc(func() { close(stalled) })
	t.Cleanup(resume)
	sidA = openACPSession(t, c, map[string]any{"fs": map[string]bool{"readTextFile": true}}, t.TempDir())
	var opened acpSessionAnswer
	if got := c.call("session/new", map[string]any{"cwd": cwdB, "mcpServers": []any{}}); json.Unmarshal(got.Result, &opened) != nil {
		t.Fatalf("session/new: %s", got.line)
	}
	return c, sidA, opened.SessionID, began, resume
}

// TestACPCancelsReadWhileTheEditorStopsReading: an editor that stops
// reading rpi's stdout as rpi writes a request to it (session B's read
// of a file) holds that write, and nothing else: the client's lines
// sent meanwhile are still read and acted on — its $/cancel_request of
// B's prompt, and its session/cancel of session A, whose model request
// the server then sees end. Once the editor reads again it gets the
// request, then rpi's $/cancel_request of it (B's turn was cancelled),
// then both prompts' answers, cancelled.
func TestACPCancelsReadWhileTheEditorStopsReading(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"silent":true}`+"\n"+
		`{"toolCalls":[{"id":"b1","name":"read","args":["{\"path\":\"notes.txt\"}"]}]}`, e.agentDir)
	cwdB := t.TempDir()
	c, sidA, sidB, writing, resumed := startStallingEditor(t, e, cwdB)
	promptA := c.request("session/prompt", acpTextPrompt(sidA, "wait"))
	fm.waitAsked(t, 1)
	promptB := c.request("session/prompt", acpTextPrompt(sidB, "read"))
	<-writing // rpi writes B's request, which the editor does not read
	c.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":` + string(promptB) + `}}`)
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sidA + `"}}`)
	select {
	case <-fm.left:
	case <-time.After(10 * time.Second):
		t.Fatal("session A's model request did not end: the cancels were not read while rpi's write waited")
	}
	// The editor answers the read once it has read rpi's withdrawal of it:
	// an answer that came first would be dropped, and nothing withdrawn.
	seen := make(chan struct{})
	sawWithdrawal := sync.OnceFunc(func() { close(seen) })
	t.Cleanup(sawWithdrawal)
	c.answer = func(string, json.RawMessage) (any, *acpError) {
		<-seen
		return map[string]string{"content": "late\n"}, nil
	}
	resumed()
	c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "$/cancel_request" })
	sawWithdrawal()
	if got := c.responseTo(promptB); stopReasonOf(got.Result) != "cancelled" {
		t.Errorf("prompt B: %s", got.line)
	}
	if got := c.responseTo(promptA); stopReasonOf(got.Result) != "cancelled" {
		t.Errorf("prompt A: %s", got.line)
	}
	// In the order written: B's request, its withdrawal, B's answer; A's
	// answer, written as A's turn ended, came after the request whose
	// write it waited behind.
	var order []string
	for _, m := range c.messages() {
		switch {
		case m.Method == "fs/read_text_file" || m.Method == "$/cancel_request":
			order = append(order, m.Method+" "+string(m.ID)+" "+string(m.Params))
		case m.Method == "" && bytes.Equal(m.ID, promptA):
			order = append(order, "A answered")
		case m.Method == "" && bytes.Equal(m.ID, promptB):
			order = append(order, "B answered")
		}
	}
	request := `fs/read_text_file 0 {"sessionId":"` + sidB + `","path":"` + filepath.Join(cwdB, "notes.txt") + `"}`
	withdrawn := `$/cancel_request  {"requestId":0}`
	if len(order) != 4 || order[0] != request || slices.Index(order, withdrawn) < 0 || slices.Index(order, withdrawn) > slices.Index(order, "B answered") {
		t.Errorf("what the editor read, in order:\n%s\nwant %s, then %s before B's answer, and A's answer", strings.Join(order, "\n"), request, withdrawn)
	}
}

// TestACPCancelWithAPromptWaitingWhileTheEditorStopsReading: a
// session/cancel of a session whose turn has a prompt waiting behind it,
// sent while the editor does not read (rpi's write of session B's file
// read waits for it), stops the turn at once. rpi answered the waiting
// prompt before it stopped the turn, and that answer waited behind the
// write, the input loop with it: the model request went on until the
// editor read again. Once it reads, the waiting prompt's answer still
// comes before the turn's, and the waiting prompt never ran.
func TestACPCancelWithAPromptWaitingWhileTheEditorStopsReading(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"silent":true}`+"\n"+
		`{"toolCalls":[{"id":"b1","name":"read","args":["{\"path\":\"notes.txt\"}"]}]}`+"\n"+
		`{"text":["B read it"]}`, e.agentDir)
	c, sidA, sidB, writing, resumed := startStallingEditor(t, e, t.TempDir())
	promptA := c.request("session/prompt", acpTextPrompt(sidA, "wait"))
	fm.waitAsked(t, 1)
	waitingA := c.request("session/prompt", acpTextPrompt(sidA, "and then this"))
	promptB := c.request("session/prompt", acpTextPrompt(sidB, "read"))
	<-writing // rpi writes B's request, which the editor does not read
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sidA + `"}}`)
	select {
	case <-fm.left:
	case <-time.After(10 * time.Second):
		t.Fatal("session A's model request did not end: the cancel waited behind rpi's write")
	}
	c.answer = func(string, json.RawMessage) (any, *acpError) { return map[string]string{"content": "notes\n"}, nil }
	resumed()
	if got := c.responseTo(promptB); stopReasonOf(got.Result) != "end_turn" {
		t.Errorf("prompt B: %s", got.line)
	}
	answered := map[string]int{}
	for _, id := range []json.RawMessage{waitingA, promptA} {
		got := c.responseTo(id)
		if stopReasonOf(got.Result) != "cancelled" {
			t.Errorf("prompt %s of A: %s", id, got.line)
		}
		answered[string(id)] = slices.IndexFunc(c.messages(), func(m acpTestMessage) bool { return m.Method == "" && bytes.Equal(m.ID, id) })
	}
	if answered[string(waitingA)] > answered[string(promptA)] {
		t.Errorf("the waiting prompt was answered after the turn it waited behind")
	}
	fm.mu.Lock()
	defer fm.mu.Unlock()
	if fm.asked != 3 {
		t.Errorf("the model was asked %d times, want 3 (A's turn, B's two requests): the waiting prompt ran", fm.asked)
	}
}

// TestACPCancelGivesUpALinkRead: a prompt whose file link the editor
// never gives back (fs/read_text_file unanswered) is answered cancelled
// by session/cancel, and the session's next prompt runs: the read is
// given up, not left holding the prompts behind it.
func TestACPCancelGivesUpALinkRead(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"text":["next answer"]}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	stuck := make(chan struct{})
	defer close(stuck)
	c.answer = func(method string, params json.RawMessage) (any, *acpError) {
		if strings.Contains(string(params), "stuck.txt") {
			<-stuck
		}
		return map[string]string{"content": "buffer text"}, nil
	}
	cwd := t.TempDir()
	sid := openACPSession(t, c, map[string]any{"fs": map[string]bool{"readTextFile": true}}, cwd)
	link := map[string]string{"type": "resource_link", "uri": "file://" + filepath.Join(cwd, "stuck.txt"), "name": "stuck.txt"}
	first := c.request("session/prompt", acpTextPrompt(sid, "see", link))
	c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "fs/read_text_file" })
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}`)
	if got := c.responseTo(first); stopReasonOf(got.Result) != "cancelled" {
		t.Errorf("the prompt whose link is being read, cancelled: %s", got.line)
	}
	if got := c.call("session/prompt", acpTextPrompt(sid, "and now")); stopReasonOf(got.Result) != "end_turn" {
		t.Errorf("the next prompt: %s", got.line)
	}
}

// acpAskMethods are methods for the tests of rpi's requests to the
// client: test/ask asks the client client/ask and answers the error it
// got ("<nil>" for none).
var acpAskMethods = map[string]acpMethod{"initialize": acpInitialize,
	"test/ask": func(a *acpAgent, call *acpRequest) (any, error) {
		return a.answerLater(call, func() (any, error) {
			_, err := a.conn.request(a.h.ctx, "client/ask", struct{}{})
			return fmt.Sprint(err), nil
		}, nil)
	}}

// TestACPMalformedAnswer: a client's answer to one of rpi's requests that
// is not a valid response (no result or error, jsonrpc not "2.0") fails
// that request, which stops waiting; the client gets no error back under
// rpi's own id (which it would take for the answer to its own request
// with that id). The same message under an id rpi does not wait for is
// answered -32600, as before.
func TestACPMalformedAnswer(t *testing.T) {
	c, _, _ := startACPAgent(t, nil, acpAskMethods)
	c.call("initialize", map[string]any{"protocolVersion": 1})
	for n, tt := range []struct{ answer, err string }{
		{`{"jsonrpc":"2.0","id":%s}`, "the client's answer is not a JSON-RPC response: no method"},
		{`{"jsonrpc":"1.0","id":%s,"result":{}}`, `the client's answer is not a JSON-RPC response: jsonrpc must be "2.0"`},
		{`{"id":%s,"error":{"code":1,"message":"x"}}`, `the client's answer is not a JSON-RPC response: jsonrpc must be "2.0"`},
	} {
		from := len(c.messages())
		ask := c.request("test/ask", nil)
		i := c.waitFor(from, func(m acpTestMessage) bool { return m.Method == "client/ask" })
		asked := c.messages()[i]
		c.send(fmt.Sprintf(tt.answer, asked.ID))
		if got := c.responseTo(ask); string(got.Result) != strconv.Quote(tt.err) {
			t.Errorf("%d: the request rpi made: %s", n, got.line)
		}
		for _, m := range c.messages()[from:] {
			if m.Method == "" && bytes.Equal(m.ID, asked.ID) {
				t.Errorf("%d: an answer to the client under rpi's own id: %s", n, m.line)
			}
		}
	}
	if got := c.call("test/none", nil); got.Error == nil {
		t.Fatalf("test/none: %s", got.line)
	}
	c.send(`{"jsonrpc":"2.0","id":"free"}`)
	if got := c.responseTo(json.RawMessage(`"free"`)); got.line != `{"jsonrpc":"2.0","id":"free","error":{"code":-32600,"message":"Invalid request: no method"}}` {
		t.Errorf("an id rpi does not wait for: %s", got.line)
	}
}

// TestACPAnswerWithANullError: an answer whose error is JSON null has no
// error (some clients write both members, the one not meant as null):
// its result is the answer. An error that is there and not null wins
// over any result, and one that is not a JSON-RPC error object ({code:
// integer, message: string}) still fails the request; null with no
// result is an answer with neither, as with no error at all.
func TestACPAnswerWithANullError(t *testing.T) {
	c, _, _ := startACPAgent(t, nil, acpAskMethods)
	c.call("initialize", map[string]any{"protocolVersion": 1})
	notAnError := "the client's error is not a JSON-RPC error object"
	for n, tt := range []struct{ answer, err string }{
		{`{"jsonrpc":"2.0","id":%s,"result":{},"error":null}`, "<nil>"},
		{`{"jsonrpc":"2.0","id":%s,"error":null,"result":{"content":"x"}}`, "<nil>"},
		{`{"jsonrpc":"2.0","id":%s,"result":null,"error":null}`, "<nil>"},
		{`{"jsonrpc":"2.0","id":%s , "error" : null , "result":{}}`, "<nil>"},
		{`{"jsonrpc":"2.0","id":%s,"error":null}`, "the client's answer is not a JSON-RPC response: no method"},
		{`{"jsonrpc":"2.0","id":%s,"result":{},"error":{"code":-32002,"message":"gone"}}`, "gone"},
		{`{"jsonrpc":"2.0","id":%s,"error":{"code":-32002,"message":"gone"},"result":null}`, "gone"},
		{`{"jsonrpc":"2.0","id":%s,"result":{},"error":"boom"}`, notAnError},
		{`{"jsonrpc":"2.0","id":%s,"result":{},"error":{}}`, notAnError},
		{`{"jsonrpc":"2.0","id":%s,"result":{},"error":false}`, notAnError},
		{`{"jsonrpc":"2.0","id":%s,"result":{},"error":[]}`, notAnError},
		{`{"jsonrpc":"2.0","id":%s,"result":{},"error":{"code":"1","message":"x"}}`, notAnError},
		{`{"jsonrpc":"2.0","id":%s,"result":{},"error":{"code":1.5,"message":"x"}}`, notAnError},
		{`{"jsonrpc":"2.0","id":%s,"result":{},"error":{"code":1,"message":null}}`, notAnError},
		{`{"jsonrpc":"2.0","id":%s,"result":{},"error":{"code":2147483648,"message":"x"}}`, notAnError}, // ACP's codes are 32 bits
	} {
		from := len(c.messages())
		ask := c.request("test/ask", nil)
		i := c.waitFor(from, func(m acpTestMessage) bool { return m.Method == "client/ask" })
		c.send(fmt.Sprintf(tt.answer, c.messages()[i].ID))
		if got := c.responseTo(ask); string(got.Result) != strconv.Quote(tt.err) {
			t.Errorf("%d: %s: the request rpi made: %s", n, tt.answer, got.line)
		}
	}
}

// TestACPEditOfAChangedBuffer: an edit through the editor whose buffer
// changed while the permission request waited (the user typed) is not
// written: what was approved was a diff of the old text, and writing its
// new text would drop what the user typed. The call fails saying so; the
// editor is sent no write. A buffer that did not change is written.
func TestACPEditOfAChangedBuffer(t *testing.T) {
	e := newTestEnv(t)
	edit := `{"toolCalls":[{"id":"%s","name":"edit","args":["{\"path\":\"notes.txt\",\"edits\":[{\"oldText\":\"beta\",\"newText\":\"BETA\"}]}"]}]}`
	startFakeModel(t, apiOpenAI, fmt.Sprintf(edit, "c1")+"\n"+`{"text":["done"]}`+"\n"+fmt.Sprintf(edit, "c2")+"\n"+`{"text":["done"]}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil, "--confirm", "edit")
	var mu sync.Mutex
	buffer, typing := "alpha\nbeta\n", "alpha\nbeta\nthe user typed this\n"
	c.answer = func(method string, params json.RawMessage) (any, *acpError) {
		mu.Lock()
		defer mu.Unlock()
		switch method {
		case "fs/read_text_file":
			return map[string]string{"content": buffer}, nil
		case "fs/write_text_file":
			var p struct{ Content string }
			json.Unmarshal(params, &p)
			buffer = p.Content
			return struct{}{}, nil
		}
		buffer, typing = typing, buffer // the user types while the request waits
		return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "allow"}}, nil
	}
	cwd := t.TempDir()
	sid := openACPSession(t, c, map[string]any{"fs": map[string]bool{"readTextFile": true, "writeTextFile": true}}, cwd)
	c.call("session/prompt", acpTextPrompt(sid, "edit it"))
	atEnd := c.waitFor(0, func(m acpTestMessage) bool {
		u := m.update()
		return u != nil && u["toolCallId"] == "c1" && (u["status"] == "completed" || u["status"] == "failed")
	})
	end := c.messages()[atEnd]
	if !strings.Contains(end.line, `"status":"failed"`) || !strings.Contains(end.line, "Cannot edit notes.txt: the file changed while this call was waiting; nothing was written") {
		t.Errorf("the edit of a buffer changed meanwhile: %s", end.line)
	}
	mu.Lock()
	if buffer != "alpha\nbeta\nthe user typed this\n" {
		t.Errorf("the buffer: %q", buffer)
	}
	typing = buffer // the user does not type this time
	mu.Unlock()
	c.call("session/prompt", acpTextPrompt(sid, "again"))
	mu.Lock()
	defer mu.Unlock()
	if buffer != "alpha\nBETA\nthe user typed this\n" {
		t.Errorf("the edit of a buffer left alone: %q", buffer)
	}
	if _, err := os.Stat(filepath.Join(cwd, "notes.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the edits went to the disk: %v", err)
	}
}

// TestACPDeleteOfASessionOpenElsewhere: session/delete refuses a session
// another rpi process has open (it holds the file's lock), naming it, as
// it refuses one open in its own process, and the file stays; once that
// process closes it, it is deleted.
func TestACPDeleteOfASessionOpenElsewhere(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"text":["hi"]}`, e.agentDir)
	cwd := t.TempDir()
	a, _, _ := startACPAgent(t, e, nil)
	b, _, _ := startACPAgent(t, e, nil)
	sid := openACPSession(t, a, nil, cwd)
	b.call("initialize", map[string]any{"protocolVersion": 1})
	if got := b.call("session/delete", map[string]any{"sessionId": sid}); got.Error == nil || got.Error.Code != acpInvalidParams ||
		got.Error.Message != "Invalid field sessionId: the session "+sid+" is open in an rpi process (another, or this one still closing it); close it there first" {
		t.Errorf("delete of a session open in another process: %s", got.line)
	}
	files, _ := filepath.Glob(filepath.Join(e.agentDir, "sessions", "*", "*_"+sid+".jsonl"))
	if len(files) != 1 {
		t.Fatalf("the session's file: %v", files)
	}
	a.call("session/close", map[string]any{"sessionId": sid})
	if got := b.call("session/delete", map[string]any{"sessionId": sid}); string(got.Result) != "{}" {
		t.Errorf("delete once closed there: %s", got.line)
	}
	if _, err := os.Stat(files[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file after the delete: %v", err)
	}
}

// TestACPApprovalNamesWhereASymlinkLeads: a write whose path is a symlink
// out of the project asks for approval with a title that says where it
// leads, as rpc's dialog does (the diff's path stays the path the model
// gave, made absolute: a location resolves no symlinks); rejected, nothing is
// written.
func TestACPApprovalNamesWhereASymlinkLeads(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"write","args":["{\"path\":\"notes.txt\",\"content\":\"ssh-rsa AAAA attacker\"}"]}]}`+"\n"+`{"text":["done"]}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil, "--confirm", "write")
	c.answer = func(method string, params json.RawMessage) (any, *acpError) {
		return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "reject"}}, nil
	}
	cwd, elsewhere := t.TempDir(), t.TempDir()
	keys := filepath.Join(elsewhere, "authorized_keys")
	os.WriteFile(keys, []byte("mine\n"), 0o644)
	os.Symlink(keys, filepath.Join(cwd, "notes.txt"))
	sid := openACPSession(t, c, nil, cwd)
	c.call("session/prompt", acpTextPrompt(sid, "write"))
	title := "Write " + filepath.Join(cwd, "notes.txt") + " → " + keys + " (outside the working directory)"
	for _, m := range c.messages() {
		if m.Method == "session/request_permission" || strings.Contains(m.line, `"sessionUpdate":"tool_call"`) {
			if !strings.Contains(m.line, `"title":"`+title+`"`) || strings.Contains(m.Method, "update") && !strings.Contains(m.line, `"path":"`+filepath.Join(cwd, "notes.txt")+`"`) {
				t.Errorf("want the title %q:\n%s", title, m.line)
			}
		}
	}
	if data, _ := os.ReadFile(keys); string(data) != "mine\n" {
		t.Errorf("the file the link leads to: %q", data)
	}
}

// TestACPCardsShowWhatRuns: a model's calls whose arguments the tool
// refuses (a key twice, a key in another case, processId twice) show the
// tool's name on their card, never what a loose reading of them says
// (the last duplicate, the other-cased key), are asked about by no
// permission request, run nothing and fail; the one call that decodes is
// asked about under its own command, and that command is what runs.
func TestACPCardsShowWhatRuns(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"toolCalls":[`+
		`{"id":"c1","name":"bash","args":["{\"command\":\"echo hi\",\"command\":\"echo pwned > pwned.txt\"}"]},`+
		`{"id":"c2","name":"bash","args":["{\"COMMAND\":\"echo pwned > pwned.txt\"}"]},`+
		`{"id":"c3","name":"process","args":["{\"action\":\"signal\",\"processId\":\"p1\",\"processId\":\"p2\",\"signal\":\"SIGKILL\"}"]},`+
		`{"id":"c4","name":"bash","args":["{\"command\":\"echo ran > ran.txt\"}"]}]}`+"\n"+`{"text":["done"]}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil, "--confirm", "bash,process")
	c.answer = func(method string, params json.RawMessage) (any, *acpError) {
		return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "allow"}}, nil
	}
	cwd := t.TempDir()
	sid := openACPSession(t, c, nil, cwd)
	if got := c.call("session/prompt", acpTextPrompt(sid, "go")); !strings.Contains(got.line, `"stopReason":"end_turn"`) {
		t.Fatalf("the prompt: %s", got.line)
	}
	titles, ends, asked := map[string]string{}, map[string]string{}, []string{}
	for _, m := range c.messages() {
		if m.Method == "session/request_permission" {
			var p struct{ ToolCall acpToolCallUpdate }
			json.Unmarshal(m.Params, &p)
			asked = append(asked, p.ToolCall.ToolCallID+" "+p.ToolCall.Title)
		}
		u := m.update()
		if u == nil {
			continue
		}
		id, _ := u["toolCallId"].(string)
		switch status, _ := u["status"].(string); {
		case u["sessionUpdate"] == "tool_call":
			titles[id] = u["title"].(string)
		case status == "completed" || status == "failed":
			ends[id] = status
		}
	}
	want := map[string]string{"c1": "bash", "c2": "bash", "c3": "process", "c4": "echo ran > ran.txt"}
	for id, title := range want {
		if titles[id] != title {
			t.Errorf("the card of %s: %q, want %q", id, titles[id], title)
		}
	}
	if ends["c1"] != "failed" || ends["c2"] != "failed" || ends["c3"] != "failed" || ends["c4"] != "completed" {
		t.Errorf("how the calls ended: %v", ends)
	}
	if strings.Join(asked, "; ") != "c4 echo ran > ran.txt" {
		t.Errorf("the permission requests: %q", asked)
	}
	if data, err := os.ReadFile(filepath.Join(cwd, "ran.txt")); err != nil || string(data) != "ran\n" {
		t.Errorf("what ran: %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(cwd, "pwned.txt")); err == nil {
		t.Error("a refused call ran")
	}
}

// TestACPSessionLimit: a connection has at most maxSessions sessions
// open; session/new (and load, resume) past that is refused with an error
// that names the limit and says to close one, and opens nothing; once one
// is closed, the next opens.
func TestACPSessionLimit(t *testing.T) {
	c, a, _ := startACPAgent(t, nil, nil)
	cwd := t.TempDir()
	ids := []string{openACPSession(t, c, nil, cwd)}
	for len(ids) < maxSessions {
		var opened acpSessionAnswer
		got := c.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
		if json.Unmarshal(got.Result, &opened) != nil || opened.SessionID == "" {
			t.Fatalf("session/new %d: %s", len(ids)+1, got.line)
		}
		ids = append(ids, opened.SessionID)
	}
	closed := ids[0] // closed and on disk: load and resume would open it again
	c.call("session/close", map[string]any{"sessionId": closed})
	if got := c.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}); got.Error != nil {
		t.Fatalf("session/new after a close: %s", got.line)
	}
	want := fmt.Sprintf(`"error":{"code":-32603,"message":"Too many sessions open: at most %d on one connection; close one (session/close) and try again"}`, maxSessions)
	for _, m := range []string{"session/new", "session/load", "session/resume"} {
		params := map[string]any{"cwd": cwd, "mcpServers": []any{}}
		if m != "session/new" {
			params["sessionId"] = closed
		}
		if got := c.call(m, params); !strings.Contains(got.line, want) {
			t.Errorf("%s past the limit: %s", m, got.line)
		}
	}
	files, _ := filepath.Glob(filepath.Join(a.store.root, "*", "*.jsonl"))
	if len(files) != maxSessions+1 {
		t.Errorf("%d session files, want %d: a refused session/new wrote one", len(files), maxSessions+1)
	}
	c.call("session/close", map[string]any{"sessionId": ids[5]})
	if got := c.call("session/load", map[string]any{"sessionId": closed, "cwd": cwd, "mcpServers": []any{}}); got.Error != nil {
		t.Errorf("session/load after a close: %s", got.line)
	}
}

// TestACPRepeatedToolCallID: a model that gives two calls of one answer
// the same id gets two cards (c1, then c1#2), each announced once by its
// own tool_call, asked about under its own id and ended with its own
// result; neither is merged into the other's card.
func TestACPRepeatedToolCallID(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"toolCalls":[`+
		`{"id":"c1","name":"bash","args":["{\"command\":\"echo one\"}"]},`+
		`{"id":"c1","name":"bash","args":["{\"command\":\"echo two\"}"]}]}`+"\n"+`{"text":["done"]}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil, "--confirm", "bash")
	c.answer = func(method string, params json.RawMessage) (any, *acpError) {
		return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "allow"}}, nil
	}
	sid := openACPSession(t, c, nil, t.TempDir())
	c.call("session/prompt", acpTextPrompt(sid, "go"))
	var got []string
	for _, m := range c.messages() {
		if m.Method == "session/request_permission" {
			var p struct{ ToolCall acpToolCallUpdate }
			json.Unmarshal(m.Params, &p)
			got = append(got, "ask "+p.ToolCall.ToolCallID+" "+p.ToolCall.Title)
		}
		if u := m.update(); u != nil && (u["sessionUpdate"] == "tool_call" || u["sessionUpdate"] == "tool_call_update") {
			line := fmt.Sprint(u["sessionUpdate"], " ", u["toolCallId"], " ", u["status"])
			if u["sessionUpdate"] == "tool_call" {
				line += " " + u["title"].(string)
			}
			if content, _ := u["content"].([]any); u["status"] == "completed" && len(content) == 1 {
				line += " " + strings.ReplaceAll(fmt.Sprint(content[0].(map[string]any)["content"].(map[string]any)["text"]), "\n", " ")
			}
			got = append(got, line)
		}
	}
	want := []string{
		"tool_call c1 pending echo one", "ask c1 echo one", "tool_call_update c1 in_progress", "tool_call_update c1 completed ``` one ```",
		"tool_call c1#2 pending echo two", "ask c1#2 echo two", "tool_call_update c1#2 in_progress", "tool_call_update c1#2 completed ``` two ```",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// waitFollowUps waits until the core has n follow-ups queued in the
// session sid of a.
func waitFollowUps(t *testing.T, a *acpAgent, sid string, n int) {
	t.Helper()
	a.mu.Lock()
	s := a.sessions[sid].s
	a.mu.Unlock()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		queued := len(s.followUp)
		s.mu.Unlock()
		if queued == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d follow-ups queued, not %d", queued, n)
		}
	}
}

// startQueuedBehindAPermission starts an agent (--confirm bash) whose
// client never answers a permission request, and a session with a
// prompt whose bash call waits for one and a second prompt queued behind
// it (in the core's follow-ups); it returns the client, the session, the
// two prompts' ids and the agent's end.
func startQueuedBehindAPermission(t *testing.T) (*acpTestClient, string, []json.RawMessage, <-chan struct{}) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"bash","args":["{\"command\":\"echo hi\"}"]}]}`+"\n"+`{"text":["never"]}`, e.agentDir)
	c, a, done := startACPAgent(t, e, nil, "--confirm", "bash")
	c.answer = func(string, json.RawMessage) (any, *acpError) { select {} }
	sid := openACPSession(t, c, nil, t.TempDir())
	running := c.request("session/prompt", acpTextPrompt(sid, "run"))
	c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "session/request_permission" })
	queued := c.request("session/prompt", acpTextPrompt(sid, "queued"))
	waitFollowUps(t, a, sid, 1)
	return c, sid, []json.RawMessage{running, queued}, done
}

// TestACPCloseAnswersQueuedPrompts: session/close while a turn waits for
// a permission and a prompt is queued behind it answers both cancelled
// (the queued one never runs), then answers the close.
func TestACPCloseAnswersQueuedPrompts(t *testing.T) {
	c, sid, prompts, _ := startQueuedBehindAPermission(t)
	running, queued := prompts[0], prompts[1]
	closed := c.request("session/close", map[string]any{"sessionId": sid})
	end := c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "" && bytes.Equal(m.ID, closed) })
	for _, id := range []json.RawMessage{running, queued} {
		got := c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "" && bytes.Equal(m.ID, id) })
		if m := c.messages()[got]; stopReasonOf(m.Result) != "cancelled" || got > end {
			t.Errorf("prompt %s: %s (at %d; the close answered at %d)", id, m.line, got, end)
		}
	}
}

// TestACPEndOfInputAnswersQueuedPrompts: at the end of stdin (docs/acp.md) a
// turn waiting for a permission and the prompt queued behind it both
// answer cancelled before rpi's output ends.
func TestACPEndOfInputAnswersQueuedPrompts(t *testing.T) {
	c, _, prompts, done := startQueuedBehindAPermission(t)
	c.w.Close()
	<-done
	for _, id := range prompts {
		if got := c.responseTo(id); stopReasonOf(got.Result) != "cancelled" {
			t.Errorf("prompt %s at the end of input: %s", id, got.line)
		}
	}
}

// TestACPWriteOverAFileTheEditorWillNotGive: a write over a file that is
// on disk but whose text the editor would not give (an error answer: a
// binary file, say) keeps its diff's oldText null (docs/acp.md), and its
// approval's title says it replaces a file whose text is not shown,
// where it looked like a new file before.
func TestACPWriteOverAFileTheEditorWillNotGive(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"write","args":["{\"path\":\"data.bin\",\"content\":\"text\"}"]}]}`+"\n"+`{"text":["done"]}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil, "--confirm", "write")
	c.answer = func(method string, params json.RawMessage) (any, *acpError) {
		if method == "fs/read_text_file" {
			return nil, &acpError{Code: acpInternalError, Message: "not valid UTF-8"}
		}
		return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "reject"}}, nil
	}
	cwd := t.TempDir()
	os.WriteFile(filepath.Join(cwd, "data.bin"), []byte("\xff\x00binary"), 0o644)
	sid := openACPSession(t, c, map[string]any{"fs": map[string]bool{"readTextFile": true, "writeTextFile": true}}, cwd)
	c.call("session/prompt", acpTextPrompt(sid, "write"))
	title := `"title":"Write ` + filepath.Join(cwd, "data.bin") + ` (replacing a file whose text is not shown)"`
	atAsked := c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "session/request_permission" })
	asked := c.messages()[atAsked]
	atAnnounced := c.waitFor(0, func(m acpTestMessage) bool { return strings.Contains(m.line, `"sessionUpdate":"tool_call"`) })
	announced := c.messages()[atAnnounced]
	if !strings.Contains(asked.line, title) || !strings.Contains(announced.line, title) || !strings.Contains(announced.line, `"oldText":null`) {
		t.Errorf("want %s and oldText null:\n%s\n%s", title, announced.line, asked.line)
	}
}

// TestACPOverlongAnswer: an answer to one of rpi's requests longer than
// the line limit (a huge file's text) fails that request, which went on
// waiting before, and nothing is written back; an over-long request is
// -32700 under its id (at the head of its line), an over-long answer to an
// id rpi does not wait for -32700 with id null.
func TestACPOverlongAnswer(t *testing.T) {
	const maxLine = 8 << 10
	c, _, _ := startACPAgentWith(t, nil, acpAskMethods, maxLine)
	c.call("initialize", map[string]any{"protocolVersion": 1})
	huge := strings.Repeat("x", 3*maxLine)
	ask := c.request("test/ask", nil)
	atAsked := c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "client/ask" })
	asked := c.messages()[atAsked]
	c.send(`{"jsonrpc":"2.0","id":` + string(asked.ID) + `,"result":{"content":"` + huge + `"}}`)
	if got := c.responseTo(ask); string(got.Result) != strconv.Quote(fmt.Sprintf("the client's answer is longer than %d bytes", maxLine)) {
		t.Errorf("the request answered by a line too long: %s", got.line)
	}
	c.send(`{"jsonrpc":"2.0","id":77,"method":"test/ask","params":{"x":"` + huge + `"}}`)
	c.send(`{"jsonrpc":"2.0","id":78,"result":{"content":"` + huge + `"}}`)
	last := c.call("nope/sync", nil) // answered in turn: the lines before it are handled
	var parseErrors []string
	for _, m := range c.messages() {
		if m.Error != nil && m.Error.Code == acpParseError {
			parseErrors = append(parseErrors, m.line)
		}
	}
	want := func(id string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32700,"message":"Parse error: line longer than %d bytes"}}`, id, maxLine)
	}
	if len(parseErrors) != 2 || parseErrors[0] != want("77") || parseErrors[1] != want("null") || last.Error == nil || last.Error.Code != acpMethodNotFound {
		t.Errorf("the -32700s: %q (want %s, then %s)", parseErrors, want("77"), want("null"))
	}
}

// TestACPLoadInAMissingDirectory: session/load and session/resume refuse
// a cwd that is not a directory (-32602 naming cwd), as session/new
// does; they ran the session there before, its commands failing with
// "fork/exec /usr/bin/bash: no such file or directory".
func TestACPLoadInAMissingDirectory(t *testing.T) {
	e := newTestEnv(t)
	c, _, _ := startACPAgent(t, e, nil)
	cwd := t.TempDir()
	sid := openACPSession(t, c, nil, cwd)
	c.call("session/close", map[string]any{"sessionId": sid})
	file := filepath.Join(cwd, "a file")
	os.WriteFile(file, nil, 0o644)
	for _, dir := range []string{file, filepath.Join(cwd, "gone")} {
		for _, method := range []string{"session/load", "session/resume"} {
			got := c.call(method, map[string]any{"sessionId": sid, "cwd": dir, "mcpServers": []any{}})
			if got.Error == nil || got.Error.Code != acpInvalidParams || got.Error.Message != "Invalid field cwd: "+dir+" is not a directory" {
				t.Errorf("%s in %s: %s", method, dir, got.line)
				c.call("session/close", map[string]any{"sessionId": sid})
			}
		}
	}
	if got := c.call("session/load", map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}}); got.Error != nil {
		t.Errorf("load in its directory: %s", got.line)
	}
}

// TestACPWaitingPromptsHoldNoGoroutines: prompts waiting to start behind
// one that cannot (its file link still being read) cost their messages,
// not a goroutine each; session/cancel answers them all.
func TestACPWaitingPromptsHoldNoGoroutines(t *testing.T) {
	e := newTestEnv(t)
	c, _, _ := startACPAgent(t, e, nil)
	stuck := make(chan struct{})
	defer close(stuck)
	c.answer = func(string, json.RawMessage) (any, *acpError) {
		<-stuck
		return nil, &acpError{Code: acpResourceNotFound, Message: "gone"}
	}
	cwd := t.TempDir()
	sid := openACPSession(t, c, map[string]any{"fs": map[string]bool{"readTextFile": true}}, cwd)
	link := map[string]string{"type": "resource_link", "uri": "file://" + filepath.Join(cwd, "stuck.txt"), "name": "stuck.txt"}
	first := c.request("session/prompt", acpTextPrompt(sid, "see", link))
	c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "fs/read_text_file" })
	before := runtime.NumGoroutine()
	const waiting = 100
	ids := []json.RawMessage{first}
	for range waiting {
		ids = append(ids, c.request("session/prompt", acpTextPrompt(sid, "later")))
	}
	c.call("no/such/method", nil) // answered on the loop: every prompt before it has been taken
	if grown := runtime.NumGoroutine() - before; grown > waiting/10 {
		t.Errorf("%d prompts waiting to start: %d more goroutines", waiting, grown)
	}
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}`)
	for _, id := range ids {
		if got := c.responseTo(id); stopReasonOf(got.Result) != "cancelled" {
			t.Errorf("prompt %s: %s", id, got.line)
		}
	}
}

// TestACPCompactNotes: /compact stopped by session/cancel answers
// cancelled (docs/acp.md), where it answered end_turn, and a compaction that
// failed or was cancelled says so once, where it said it twice
// ("Compaction cancelled." then "Compaction failed: Compaction
// cancelled"; a model's error as "Compaction failed: Compaction failed:
// …" twice).
func TestACPCompactNotes(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"text":["`+strings.Repeat("one ", 200)+`"]}
{"text":["`+strings.Repeat("two ", 200)+`"]}
{"text":["a summary"],"holdAt":1}
{"status":400,"body":"bad request"}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	sid := openACPSession(t, c, nil, t.TempDir())
	c.call("session/prompt", acpTextPrompt(sid, "one"))
	c.call("session/prompt", acpTextPrompt(sid, "two"))
	notes := func(from int) []string {
		var texts []string
		for _, m := range c.messages()[from:] {
			if u := m.update(); u != nil && u["sessionUpdate"] == "agent_message_chunk" {
				texts = append(texts, u["content"].(map[string]any)["text"].(string))
			}
		}
		return texts
	}
	from := len(c.messages())
	compact := c.request("session/prompt", acpTextPrompt(sid, "/compact"))
	fm.waitAsked(t, 3) // the summary
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}`)
	fm.release <- struct{}{}
	if got := c.responseTo(compact); stopReasonOf(got.Result) != "cancelled" {
		t.Errorf("/compact cancelled: %s", got.line)
	}
	if got := notes(from); strings.Join(got, "|") != "Compaction cancelled." {
		t.Errorf("the notes of a cancelled compaction: %q", got)
	}
	from = len(c.messages())
	if got := c.call("session/prompt", acpTextPrompt(sid, "/compact")); stopReasonOf(got.Result) != "end_turn" {
		t.Errorf("/compact failed: %s", got.line)
	}
	if got := notes(from); len(got) != 1 || !strings.HasPrefix(got[0], "Compaction failed: ") || strings.Count(got[0], "Compaction failed") != 1 {
		t.Errorf("the notes of a failed compaction: %q", got)
	}
}

// TestACPNoSessionDeletesNothing: under --no-session (no delete in the
// capabilities, an empty session/list) session/delete is refused as
// session/load is; it deleted the file on disk before.
func TestACPNoSessionDeletesNothing(t *testing.T) {
	e := newTestEnv(t)
	file := writeTestSession(t, e.agentDir, t.TempDir(), "0199aaaa-0000-7000-8000-000000000001", 1, "hello")
	c, _, _ := startACPAgent(t, e, nil, "--no-session")
	c.call("initialize", map[string]any{"protocolVersion": 1})
	got := c.call("session/delete", map[string]any{"sessionId": "0199aaaa-0000-7000-8000-000000000001"})
	if got.Error == nil || got.Error.Message != "Invalid field sessionId: rpi runs with --no-session: there are no sessions on disk" {
		t.Errorf("delete under --no-session: %s", got.line)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("the session file: %v", err)
	}
}

// TestACPPermissionTitleShownAsInRPC: a command's title on its card and
// in its permission request is shown as rpc's dialog shows text: a
// carriage return, an escape sequence, newlines and a bidi override are
// escapes, and a command past 4 KiB shows its first and last 2 KiB and
// how much is not shown, so what it ends with cannot hide.
func TestACPPermissionTitleShownAsInRPC(t *testing.T) {
	for _, tt := range []struct{ command, want string }{
		{"echo safe\r\x1b[2Kecho also\n\ntouch pwned \u202e# txt", `echo safe\r\x1b[2Kecho also\n\ntouch pwned \u202e# txt`},
		{"true" + strings.Repeat(" ", 100<<10) + "; touch pwned", "true" + strings.Repeat(" ", 2044) + " … (98321 bytes not shown here) … " + strings.Repeat(" ", 2035) + "; touch pwned"},
	} {
		args, _ := json.Marshal(map[string]string{"command": tt.command})
		var pieces []string // the model's argument pieces, each under the fake server's line limit
		for len(args) > 0 {
			n := min(len(args), 32<<10)
			pieces, args = append(pieces, string(args[:n])), args[n:]
		}
		piecesJSON, _ := json.Marshal(pieces)
		e := newTestEnv(t)
		startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"bash","args":`+string(piecesJSON)+`}]}`+"\n"+`{"text":["done"]}`, e.agentDir)
		c, _, _ := startACPAgent(t, e, nil, "--confirm", "bash")
		c.answer = func(string, json.RawMessage) (any, *acpError) {
			return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "reject"}}, nil
		}
		sid := openACPSession(t, c, nil, t.TempDir())
		c.call("session/prompt", acpTextPrompt(sid, "go"))
		titles := 0
		for _, m := range c.messages() {
			var p struct {
				ToolCall acpToolCallUpdate
				Update   acpToolCallUpdate
			}
			json.Unmarshal(m.Params, &p)
			for _, call := range []acpToolCallUpdate{p.ToolCall, p.Update} {
				title := call.Title
				if call.ToolCallID == "" || title == "" {
					continue
				}
				if titles++; title != tt.want {
					t.Errorf("%s shows the command as %q;\nwant %q", m.Method, title, tt.want)
				}
			}
		}
		if titles < 2 {
			t.Errorf("the card and the permission request name no command:\n%s", strings.Join(c.lines(), "\n"))
		}
	}
}

// TestACPKeyFileHasNoOracle: docs/security.md says of models.json and
// auth.json with a literal key that the model's bash or read can read
// them, and to "use --confirm bash,read" against it. With every file tool
// behind an approval (--confirm bash,read,edit,write) and every request
// denied, a prompt-injected model learnt the key a character at a time:
// an edit whose oldText and newText are the same guess failed, before any
// approval was asked, with "No changes made to …" when the guess was in
// the file and "Could not find the exact text …" when it was not. Now
// each is asked about, saying that it cannot be done and why, and denied
// is "Denied by user" whatever the file holds.
func TestACPKeyFileHasNoOracle(t *testing.T) {
	e := newTestEnv(t)
	modelsJSON := filepath.Join(e.agentDir, "models.json")
	guess := func(id, text string) string {
		args, _ := json.Marshal(map[string]string{"path": modelsJSON, "oldText": `"apiKey":"` + text, "newText": `"apiKey":"` + text})
		argsJSON, _ := json.Marshal(string(args))
		return `{"toolCalls":[{"id":"` + id + `","name":"edit","args":[` + string(argsJSON) + `]}]}`
	}
	startFakeModel(t, apiOpenAI, guess("right", "sk-fake-S")+"\n"+guess("wrong", "sk-fake-X")+"\n"+`{"text":["done"]}`, e.agentDir)
	data, _ := os.ReadFile(modelsJSON)
	os.WriteFile(modelsJSON, []byte(strings.Replace(string(data), `"api":`, `"apiKey":"sk-fake-SECRET42","api":`, 1)), 0o644)
	c, _, _ := startACPAgent(t, e, nil, "--confirm", "bash,read,edit,write")
	c.answer = func(string, json.RawMessage) (any, *acpError) {
		return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "reject"}}, nil
	}
	sid := openACPSession(t, c, nil, t.TempDir())
	c.call("session/prompt", acpTextPrompt(sid, "go"))
	results := map[string]string{}
	for _, m := range c.messages() {
		var p struct{ Update acpToolCallUpdate }
		json.Unmarshal(m.Params, &p)
		if p.Update.Status == "failed" || p.Update.Status == "completed" {
			out, _ := json.Marshal(p.Update.RawOutput)
			results[p.Update.ToolCallID] = strings.ReplaceAll(string(out), modelsJSON, "models.json")
		}
	}
	if results["right"] != results["wrong"] {
		t.Errorf("the model tells a right guess of the key from a wrong one, with every file tool behind an approval:\nright: %s\nwrong: %s", results["right"], results["wrong"])
	}
	// Each was asked about, its card saying that it cannot be done and why.
	asked, told := 0, 0
	for _, m := range c.messages() {
		var p struct{ ToolCall, Update acpToolCallUpdate }
		json.Unmarshal(m.Params, &p)
		if m.Method == "session/request_permission" && strings.Contains(p.ToolCall.Title, "(cannot be done: allowing it tells the model why)") {
			asked++
		}
		if text, _ := json.Marshal(p.Update.Content); p.Update.SessionUpdate == "tool_call" && strings.Contains(string(text), "cannot be done, and nothing will be changed") {
			told++
		}
	}
	if asked != 2 || told != 2 {
		t.Errorf("%d permission requests and %d cards say the edit cannot be done; want 2 and 2:\n%s", asked, told, strings.Join(c.lines(), "\n"))
	}
}

// TestACPTitleEscapesAreUnambiguous: a title shows a newline, a
// carriage return or an escape as \n, \r, \x1b, and a backslash as \\,
// so two different commands never show the same: `echo hi⏎rm -rf x` (a
// real newline: bash runs rm) and `echo hi\nrm -rf x` (a backslash and an
// n: echo prints them, nothing is removed) were both asked about as
// "echo hi\nrm -rf x", and the user approving what read as an echo of a
// literal "\n" ran rm.
func TestACPTitleEscapesAreUnambiguous(t *testing.T) {
	titles := map[string]string{}
	for name, command := range map[string]string{"newline": "echo hi\nrm -rf x", "backslash": `echo hi\nrm -rf x`} {
		args, _ := json.Marshal(map[string]string{"command": command})
		argsJSON, _ := json.Marshal(string(args))
		e := newTestEnv(t)
		startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"bash","args":[`+string(argsJSON)+`]}]}`+"\n"+`{"text":["done"]}`, e.agentDir)
		c, _, _ := startACPAgent(t, e, nil, "--confirm", "bash")
		c.answer = func(string, json.RawMessage) (any, *acpError) {
			return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "reject"}}, nil
		}
		sid := openACPSession(t, c, nil, t.TempDir())
		c.call("session/prompt", acpTextPrompt(sid, "go"))
		for _, m := range c.messages() {
			if m.Method == "session/request_permission" {
				var p struct{ ToolCall acpToolCallUpdate }
				json.Unmarshal(m.Params, &p)
				titles[name] = p.ToolCall.Title
			}
		}
	}
	if titles["newline"] == titles["backslash"] {
		t.Errorf("two commands, one of which runs rm, are asked about with the same title %q", titles["newline"])
	}
}

// TestEscapesAreUnambiguous: text shown in a dialog or a title
// (escapeControl) is never the same for two texts, and a title cut to fit
// (acpFitTitle) is cut between escapes: a backslash was shown as itself,
// so a newline and a backslash before an n looked alike, and U+E0001 as
// \ue0001, which reads as U+E000 and a 1.
func TestEscapesAreUnambiguous(t *testing.T) {
	texts := []string{"a\nb", "a\\nb", "a\\\nb", "a\\\\nb", "\x1b", "\\x1b", "\u202e", "\\u202e",
		"\U000e0001", "\ue000" + "1", "\\ue0001", "\t", "\\t", "\\", "\\\\", ""}
	shown := map[string]string{}
	for _, text := range texts {
		s := escapeControl(text)
		if other, ok := shown[s]; ok {
			t.Errorf("%+q and %+q are both shown as %q", other, text, s)
		}
		shown[s] = text
	}
	// Past 4 KiB, every cut falls between escapes, whatever the offset.
	for pad := range 12 {
		title := escapeControl(strings.Repeat("x", pad) + strings.Repeat("\\\x1b\u202e\U000e0001é", 800))
		fit := acpFitTitle(title)
		head, rest, _ := strings.Cut(fit, " … (")
		_, tail, _ := strings.Cut(rest, ") … ")
		if !strings.HasPrefix(title, head) || !strings.HasSuffix(title, tail) || len(head) > 2048 || len(tail) > 2048 {
			t.Fatalf("pad %d: the cut title is not the title's head and tail: %q", pad, fit)
		}
		if !startsAnEscape(title, len(head)) || !startsAnEscape(title, len(title)-len(tail)) {
			t.Errorf("pad %d: the title is cut inside an escape: %q", pad, fit)
		}
	}
}

// startsAnEscape reports whether a character or an escape of shown text
// starts at offset.
func startsAnEscape(shown string, offset int) bool {
	i := 0
	for i < offset {
		i += escapeLen(shown[i:])
	}
	return i == offset
}

// TestACPRepeatedIDsCards: every repeat of one tool call id gets the next
// card id, also past an id the model gave that looks like one of them.
func TestACPRepeatedIDsCards(t *testing.T) {
	u := newTestUpdates(false)
	var got []string
	for _, id := range []string{"x", "x", "x#3", "x", "x", "y"} {
		got = append(got, u.claimCard(id))
	}
	if want := []string{"x", "x#2", "x#3", "x#4", "x#5", "y"}; !slices.Equal(got, want) {
		t.Errorf("cards %q, want %q", got, want)
	}
}

// TestACPLoadWhileACallWaits: session/load of the session open on this
// connection while its call waits for approval replays the history
// without that call: its live card goes on, and no second tool_call is
// sent for its id (docs/acp.md), before or after the load.
func TestACPLoadWhileACallWaits(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"bash","args":["{\"command\":\"echo one\"}"]}]}`+"\n"+`{"text":["done"]}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil, "--confirm", "bash")
	allow := make(chan struct{})
	c.answer = func(string, json.RawMessage) (any, *acpError) {
		<-allow
		return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "allow"}}, nil
	}
	cwd := t.TempDir()
	sid := openACPSession(t, c, nil, cwd)
	prompt := c.request("session/prompt", acpTextPrompt(sid, "go"))
	c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "session/request_permission" })
	if got := c.call("session/load", map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}}); got.Error != nil {
		t.Fatalf("load: %s", got.line)
	}
	close(allow)
	c.responseTo(prompt)
	var trail []string
	for _, m := range c.messages() {
		if u := m.update(); u != nil && u["toolCallId"] == "c1" {
			trail = append(trail, fmt.Sprint(u["sessionUpdate"], " ", u["status"]))
		}
	}
	if want := []string{"tool_call pending", "tool_call_update in_progress", "tool_call_update completed"}; !slices.Equal(trail, want) {
		t.Errorf("c1's updates %q, want %q", trail, want)
	}
}

// TestACPTwoLoadsAtOnce: two session/loads of one closed session at once
// on one connection both answer with it: the second waits for the first
// to open it (whose hold on the file would refuse a second open) and
// finds it open here, as a later load does.
func TestACPTwoLoadsAtOnce(t *testing.T) {
	e := newTestEnv(t)
	e.lockWait = 200 * time.Millisecond
	startFakeModel(t, apiOpenAI, `{"text":["hi"]}`, e.agentDir)
	cwd := t.TempDir()
	first, _, _ := startACPAgent(t, e, nil)
	sid := openACPSession(t, first, nil, cwd)
	first.call("session/prompt", acpTextPrompt(sid, "one"))
	first.call("session/close", map[string]any{"sessionId": sid})
	c, _, _ := startACPAgent(t, e, nil)
	c.call("initialize", map[string]any{"protocolVersion": 1})
	load := map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}}
	a, b := c.request("session/load", load), c.request("session/load", load)
	for _, id := range []json.RawMessage{a, b} {
		if got := c.responseTo(id); got.Error != nil {
			t.Errorf("load %s: %s", id, got.line)
		}
	}
}

// answerIndex waits for the answer to id and returns its index among
// the messages.
func (c *acpTestClient) answerIndex(id json.RawMessage) int {
	c.t.Helper()
	return c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "" && bytes.Equal(m.ID, id) })
}

// TestACPPromptRightAfterCancel: a session/prompt sent with the
// session/cancel of the turn before it (in one write, as an editor does
// when the user sends a new message during a turn) runs once the
// cancelled turn has ended, and is answered; it was queued behind the
// run being stopped, and waited there until the next prompt's turn
// ended, out of order.
func TestACPPromptRightAfterCancel(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"text":["one"],"holdAt":1}
{"text":["two"]}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	sid := openACPSession(t, c, nil, t.TempDir())
	first := c.request("session/prompt", acpTextPrompt(sid, "first"))
	fm.waitAsked(t, 1)
	line, _ := appendACPCall(nil, json.RawMessage("90"), "session/prompt", acpTextPrompt(sid, "second"))
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}` + "\n" + string(line))
	cancelled := c.answerIndex(first)
	if got := c.messages()[cancelled]; stopReasonOf(got.Result) != "cancelled" {
		t.Errorf("the cancelled prompt: %s", got.line)
	}
	at := c.answerIndex(json.RawMessage("90"))
	if got := c.messages()[at]; stopReasonOf(got.Result) != "end_turn" {
		t.Errorf("the prompt after the cancel: %s", got.line)
	}
	if i := c.waitFor(cancelled, func(m acpTestMessage) bool {
		u := m.update()
		return u != nil && u["sessionUpdate"] == "agent_message_chunk" && u["content"].(map[string]any)["text"] == "two"
	}); i > at {
		t.Errorf("the second answer streamed after its prompt was answered")
	}
}

// TestACPCompactWaitsForTheTurns: /compact sent while a turn runs and a
// prompt waits behind it comes after both, as the editor sent them: the
// running turn ends as the model ends it (it was cancelled), the prompt
// queued before /compact runs and is answered (it never was), then the
// conversation is compacted.
func TestACPCompactWaitsForTheTurns(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"text":["one"],"holdAt":1}
{"text":["two"]}
{"text":["a summary"]}`, e.agentDir)
	c, a, _ := startACPAgent(t, e, nil)
	sid := openACPSession(t, c, nil, t.TempDir())
	first := c.request("session/prompt", acpTextPrompt(sid, "first"))
	fm.waitAsked(t, 1)
	second := c.request("session/prompt", acpTextPrompt(sid, "second"))
	waitFollowUps(t, a, sid, 1)
	compact := c.request("session/prompt", acpTextPrompt(sid, "/compact"))
	time.Sleep(50 * time.Millisecond) // the compaction, were it to start now, would have stopped the turn
	fm.release <- struct{}{}
	var at []int
	for _, id := range []json.RawMessage{first, second, compact} {
		i := c.answerIndex(id)
		if got := c.messages()[i]; stopReasonOf(got.Result) != "end_turn" {
			t.Errorf("prompt %s: %s", id, got.line)
		}
		at = append(at, i)
	}
	if !slices.IsSorted(at) {
		t.Errorf("answered at %v: not in the order sent", at)
	}
	fm.mu.Lock()
	asked := len(fm.requests)
	fm.mu.Unlock()
	if asked != 3 {
		t.Errorf("the model was asked %d times, not 3 (two answers, one summary)", asked)
	}
}

// TestACPCancelRequest: the client's $/cancel_request of a request
// answered in the background answers it -32800 at once; its work goes on
// to its end unseen (its answer dropped, what it opened undone), and the
// requests after it are served. A cancel of an id not open (answered
// already, or never sent) is ignored.
func TestACPCancelRequest(t *testing.T) {
	release := make(chan struct{})
	var then, withdrawn atomic.Int32
	methods := map[string]acpMethod{"initialize": acpInitialize,
		"test/slow": func(a *acpAgent, call *acpRequest) (any, error) {
			return a.answerLaterOr(call, func() (any, error) { <-release; return "done", nil },
				func() { then.Add(1) }, func() { withdrawn.Add(1) })
		},
		"test/echo": func(a *acpAgent, call *acpRequest) (any, error) { return "echo", nil },
	}
	c, _, _ := startACPAgent(t, nil, methods)
	c.call("initialize", map[string]any{"protocolVersion": 1})
	slow := c.request("test/slow", struct{}{})
	c.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":` + string(slow) + `}}`)
	if got := c.responseTo(slow); got.line != `{"jsonrpc":"2.0","id":`+string(slow)+`,"error":{"code":-32800,"message":"Request cancelled"}}` {
		t.Errorf("the withdrawn request: %s", got.line)
	}
	c.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":` + string(slow) + `}}`) // twice
	c.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"never-sent"}}`)
	close(release)
	if got := c.call("test/echo", struct{}{}); string(got.Result) != `"echo"` {
		t.Errorf("the next request: %s", got.line)
	}
	deadline := time.Now().Add(5 * time.Second)
	for withdrawn.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if then.Load() != 0 || withdrawn.Load() != 1 {
		t.Errorf("after the work ended: then ran %d times, withdrawn %d", then.Load(), withdrawn.Load())
	}
	if n := len(c.messages()); n != 3 {
		t.Errorf("%d messages, not 3 (initialize's answer, the -32800, test/echo's answer):\n%s", n, strings.Join(c.lines(), "\n"))
	}
}

// TestACPForkRunningSession: session/fork of a session whose turn is
// running copies what that session has recorded so far (the user's
// message; the answer not yet given), and both sessions go on: the
// source's turn ends as it would, the fork runs turns of its own.
func TestACPForkRunningSession(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"text":["the source's answer"],"holdAt":1}
{"text":["the fork's answer"]}`, e.agentDir)
	c, a, _ := startACPAgent(t, e, nil)
	cwd := t.TempDir()
	sid := openACPSession(t, c, nil, cwd)
	running := c.request("session/prompt", acpTextPrompt(sid, "first question"))
	fm.waitAsked(t, 1)
	var forked acpSessionAnswer
	got := c.call("session/fork", map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}})
	if json.Unmarshal(got.Result, &forked) != nil || forked.SessionID == "" || forked.SessionID == sid {
		t.Fatalf("session/fork: %s", got.line)
	}
	fork := openSessionOf(t, a, forked.SessionID).s
	if msgs := withoutSystem(fork.conv.messages()); len(msgs) != 1 {
		t.Errorf("the fork holds %d messages; want the user's one", len(msgs))
	} else if text, _ := userText(msgs[0]); text != "first question" {
		t.Errorf("the fork's message: %q", text)
	}
	if header := fork.conv.header(); header.ParentSession != openSessionOf(t, a, sid).s.conv.info().path {
		t.Errorf("the fork's parentSession: %q", header.ParentSession)
	}
	fm.release <- struct{}{}
	if got := c.responseTo(running); stopReasonOf(got.Result) != "end_turn" {
		t.Errorf("the source's turn: %s", got.line)
	}
	if got := c.call("session/prompt", acpTextPrompt(forked.SessionID, "second question")); stopReasonOf(got.Result) != "end_turn" {
		t.Errorf("a turn of the fork: %s", got.line)
	}
	if n := len(withoutSystem(fork.conv.messages())); n != 3 {
		t.Errorf("the fork holds %d messages after its turn; want 3", n)
	}
}

// stopReasonOf is a session/prompt answer's stopReason ("" for another
// answer): its usage is the tests' of usage to check.
func stopReasonOf(result json.RawMessage) string {
	var r struct {
		StopReason string `json:"stopReason"`
	}
	if json.Unmarshal(result, &r) != nil {
		return ""
	}
	return r.StopReason
}

// TestACPForkSessionHeldElsewhere: session/fork of a session on disk
// that another rpi process has open (its file's lock held) copies the
// file as that process has written it, without waiting for the lock:
// the fork is a new file, and the source stays the other process's.
func TestACPForkSessionHeldElsewhere(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"text":["the first answer"]}`, e.agentDir)
	c, a, _ := startACPAgent(t, e, nil)
	cwd := t.TempDir()
	sid := openACPSession(t, c, nil, cwd)
	if got := c.call("session/prompt", acpTextPrompt(sid, "a question")); stopReasonOf(got.Result) != "end_turn" {
		t.Fatalf("the prompt: %s", got.line)
	}
	path := openSessionOf(t, a, sid).s.conv.info().path
	if got := c.call("session/close", map[string]any{"sessionId": sid}); got.Error != nil {
		t.Fatalf("session/close: %s", got.line)
	}
	lock, err := lockSessionFile(context.Background(), path, 0) // as another rpi holds it
	if err != nil || lock == nil {
		t.Fatalf("locking %s: %v", path, err)
	}
	defer lock.Close()
	var forked acpSessionAnswer
	got := c.call("session/fork", map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}})
	if json.Unmarshal(got.Result, &forked) != nil || forked.SessionID == "" {
		t.Fatalf("session/fork: %s", got.line)
	}
	fork := openSessionOf(t, a, forked.SessionID).s
	if n := len(withoutSystem(fork.conv.messages())); n != 2 {
		t.Errorf("the fork holds %d messages; want the question and its answer", n)
	}
	if fork.conv.info().path == path {
		t.Error("the fork writes the source's file")
	}
}

// TestACPConfigChangeNotWithdrawn: a config change is answered as it is
// made, on the loop, so a $/cancel_request of it that comes in the same
// write finds it answered and is ignored: never -32800 for a change that
// stays made, and its update still follows its answer, before the next
// request's answer.
func TestACPConfigChangeNotWithdrawn(t *testing.T) {
	c, _, _ := startACPAgent(t, nil, nil)
	id := openACPSession(t, c, nil, t.TempDir())
	from := 1 + c.waitFor(0, func(m acpTestMessage) bool { return m.update()["sessionUpdate"] == "usage_update" })
	c.send(`{"jsonrpc":"2.0","id":"change","method":"session/set_config_option","params":{"sessionId":"` + id + `","configId":"approvals","value":"ask"}}` + "\n" +
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"change"}}` + "\n" +
		`{"jsonrpc":"2.0","id":"mode","method":"session/set_mode","params":{"sessionId":"` + id + `","modeId":"edits"}}` + "\n" +
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"mode"}}` + "\n" +
		`{"jsonrpc":"2.0","id":"after","method":"session/list","params":{}}`)
	c.responseTo(json.RawMessage(`"after"`))
	var got []string
	for _, m := range c.messages()[from:] {
		switch {
		case m.Error != nil:
			t.Errorf("an error answer: %s", m.line)
		case m.Method == "session/update":
			got = append(got, fmt.Sprint(m.update()["sessionUpdate"]))
		case m.Method == "":
			got = append(got, string(m.ID))
		}
	}
	want := []string{`"change"`, "config_option_update", `"mode"`, "current_mode_update", "config_option_update", `"after"`}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestACPAnswerThenPanics: what a change sends after its answer
// (acpAnswerThen's then) runs on the loop; a bug there is an internal
// error on stderr, as one in a method is, never the end of the
// connection: the next request is still answered.
func TestACPAnswerThenPanics(t *testing.T) {
	methods := map[string]acpMethod{"initialize": acpInitialize, "test/change": func(a *acpAgent, call *acpRequest) (any, error) {
		return acpAnswerThen{"changed", func() { panic("a bug after the answer") }}, nil
	}}
	c, _, _ := startACPAgent(t, nil, methods)
	c.call("initialize", map[string]any{"protocolVersion": 1})
	if got := c.call("test/change", struct{}{}); string(got.Result) != `"changed"` {
		t.Errorf("the change's answer: %s", got.line)
	}
	if got := c.call("test/change", struct{}{}); string(got.Result) != `"changed"` {
		t.Errorf("the next request, after the panic: %s", got.line)
	}
}

// TestACPLoadOfAnEmptiedFile: session/load and session/resume open the
// file found by the session's id; emptied before it is opened, it is
// refused, as the session is gone. It got a new session, under another
// id than the one asked for (a session the client never learned of), and
// that session's header was written into the file.
func TestACPLoadOfAnEmptiedFile(t *testing.T) {
	_, a, _ := startACPAgent(t, nil, nil)
	cwd := t.TempDir()
	path := filepath.Join(t.TempDir(), "emptied.jsonl")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	as, err := a.open(cwd, nil, path, nil) // as reopen does, with the file findSessionFile found
	if err == nil || !strings.Contains(err.Error(), "(it is empty)") {
		t.Errorf("opened %v, error %v; want the empty file refused", as != nil, err)
	}
	if as != nil {
		a.forget(as)
	}
	if data, _ := os.ReadFile(path); len(data) != 0 {
		t.Errorf("the file was written:\n%s", data)
	}
}

// writerFunc is a func as an io.Writer.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
