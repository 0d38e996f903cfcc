package main

import (
	"bytes"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// runningBridge is a bridge (rpi rpc --connect, rpi acp --connect) run
// in this process, its stdin a pipe the test writes.
type runningBridge struct {
	stdin  *io.PipeWriter
	stdout *watchedOutput
	stderr *watchedOutput
	done   chan int
}

// startBridge runs rpi with args (a bridge's) in e.
func startBridge(t *testing.T, e *testEnv, args ...string) *runningBridge {
	t.Helper()
	in, w := io.Pipe()
	b := &runningBridge{stdin: w, stdout: newWatchedOutput(), stderr: newWatchedOutput(), done: make(chan int, 1)}
	go func() { b.done <- runProgram(args, e.env(), in, b.stdout, b.stderr, make(chan os.Signal, 1)) }()
	t.Cleanup(func() { w.Close(); in.Close() })
	return b
}

func (b *runningBridge) send(line string) { io.WriteString(b.stdin, line+"\n") }

// waitFor waits until the bridge's stdout holds text n times.
func (b *runningBridge) waitFor(t *testing.T, text string, n int) {
	t.Helper()
	if !b.stdout.waitFor(text, func(out []byte) string {
		if bytes.Count(out, []byte(text)) >= n {
			return text
		}
		return ""
	}) {
		t.Fatalf("never saw %s (%d times) in:\n%s\nstderr:\n%s", text, n, b.stdout.bytes(), b.stderr.bytes())
	}
}

// end closes the bridge's stdin and checks that it exits with code.
func (b *runningBridge) end(t *testing.T, code int) {
	t.Helper()
	b.stdin.Close()
	b.exited(t, code)
}

// exited checks that the bridge exits with code.
func (b *runningBridge) exited(t *testing.T, code int) {
	t.Helper()
	select {
	case got := <-b.done:
		if got != code {
			t.Errorf("the bridge exited %d, want %d; stderr:\n%s", got, code, b.stderr.bytes())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the bridge did not exit; stderr:\n%s", b.stderr.bytes())
	}
}

// TestBridgeCopiesLines: rpi rpc --connect copies lines both ways; with
// no flag that asks for a hello it writes none (the host opens a session
// with its own flags, session_started first); when its stdin ends it
// exits 0, and the host and the session go on.
func TestBridgeCopiesLines(t *testing.T) {
	e := newTestEnv(t)
	sh := startServe(t, e, t.TempDir(), "--model", "faux/faux-1")
	b := startBridge(t, e, "rpc", "--connect", "unix:"+sh.socket)
	b.send(`{"id":"s","type":"get_state"}`)
	b.waitFor(t, `"command":"get_state"`, 1)
	out := string(b.stdout.bytes())
	if !strings.HasPrefix(out, `{"type":"session_started"`) || strings.Contains(out, `"command":"hello"`) {
		t.Errorf("want session_started then the answer, and no hello; got:\n%s", out)
	}
	b.end(t, 0)
	if errs := b.stderr.bytes(); len(errs) > 0 {
		t.Errorf("stderr: %s", errs)
	}
	c := sh.connect()
	c.send(`{"id":"h","type":"host_status"}`)
	c.waitFor(t, `"command":"host_status"`, 1)
	if !strings.Contains(string(c.out.bytes()), `"clients":0`) {
		t.Errorf("the bridge's session is gone from the host:\n%s", c.out.bytes())
	}
	sh.end()
}

// TestBridgeHelloOptions: an rpc bridge's session flags go in its hello's
// options and apply to the session the host opens for it; its hello's
// answer (no id) comes first on stdout; a flag it does not pass on is
// named on stderr, once.
func TestBridgeHelloOptions(t *testing.T) {
	e := newTestEnv(t)
	sh := startServe(t, e, t.TempDir(), "--model", "faux/faux-1")
	b := startBridge(t, e, "rpc", "--connect", "unix:"+sh.socket, "--name", "bridged",
		"-t", "read,ls", "--no-session", "--approve", "--no-themes")
	b.send(`{"id":"s","type":"get_state"}`)
	b.waitFor(t, `"command":"get_state"`, 1)
	b.send(`{"id":"c","type":"get_capabilities"}`)
	b.waitFor(t, `"command":"get_capabilities"`, 1)
	out := string(b.stdout.bytes())
	for _, want := range []string{`"sessionName":"bridged"`, `"sessionFile":null`, `"tools":["read","ls"]`} {
		if !strings.Contains(out, want) {
			t.Errorf("want %s in:\n%s", want, out)
		}
	}
	if !strings.HasPrefix(out, `{"type":"response","command":"hello","success":true,`) {
		t.Errorf("the hello's answer is not first:\n%s", out)
	}
	b.end(t, 0)
	if got, want := string(b.stderr.bytes()), "rpi: a bridge passes on no --approve: the host's own flags hold (docs/serve.md#bridges)\n"; got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
	sh.end()
}

// TestBridgeCompatPi: --compat pi (or RPI_COMPAT=pi) gives the
// connection pi's shapes through the hello.
func TestBridgeCompatPi(t *testing.T) {
	e := newTestEnv(t)
	sh := startServe(t, e, t.TempDir(), "--model", "faux/faux-1")
	e.vars["RPI_COMPAT"] = "pi"
	b := startBridge(t, e, "rpc", "--connect", "unix:"+sh.socket)
	b.send(`{"id":"c","type":"get_capabilities"}`)
	b.waitFor(t, `"command":"get_capabilities"`, 1)
	if out := string(b.stdout.bytes()); !strings.Contains(out, `"compat":"pi"`) {
		t.Errorf("the connection does not have pi's shapes:\n%s", out)
	}
	b.end(t, 0)
	sh.end()
}

// TestBridgeAttachObserve: --attach ID --cursor N --observe attaches to a
// session another client has: the events after N are replayed, and the
// bridge's client may only watch.
func TestBridgeAttachObserve(t *testing.T) {
	e := newTestEnv(t)
	e.vars["PI_FAUX_RESPONSE"] = "Hello from the host."
	sh := startServe(t, e, t.TempDir(), "--model", "faux/faux-1")
	c := sh.connect()
	c.send(`{"id":"h","type":"hello"}`)
	c.waitFor(t, `"type":"session_started"`, 1)
	c.send(`{"id":"p","type":"prompt","message":"Hi"}`)
	c.waitFor(t, `"type":"agent_settled"`, 1)
	id := jsonField(t, c.out.bytes(), "sessionId")
	b := startBridge(t, e, "rpc", "--connect", "unix:"+sh.socket, "--attach", id, "--cursor", "1", "--observe")
	b.waitFor(t, `"command":"hello"`, 1)
	b.send(`{"id":"p","type":"prompt","message":"Not mine"}`)
	b.waitFor(t, `"command":"prompt"`, 1)
	out := string(b.stdout.bytes())
	for _, want := range []string{`"seq":2}`, `"delta":"Hello from the host."`, `"resync":false`, `"error":"This connection observes the session"`} {
		if !strings.Contains(out, want) {
			t.Errorf("want %s in:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"seq":1}`) {
		t.Errorf("an event up to the cursor was replayed:\n%s", out)
	}
	b.end(t, 0)
	sh.end()
}

// jsonField is the first string value of key in out's lines.
func jsonField(t *testing.T, out []byte, key string) string {
	t.Helper()
	_, rest, ok := strings.Cut(string(out), `"`+key+`":"`)
	value, _, ok2 := strings.Cut(rest, `"`)
	if !ok || !ok2 {
		t.Fatalf("no %s in:\n%s", key, out)
	}
	return value
}

// TestBridgeACP: rpi acp --connect copies an ACP client's lines: the
// host answers initialize and opens a session; no hello is written.
func TestBridgeACP(t *testing.T) {
	e := newTestEnv(t)
	sh := startServe(t, e, t.TempDir(), "--model", "faux/faux-1")
	cwd := t.TempDir()
	b := startBridge(t, e, "acp", "--connect", "unix:"+sh.socket, "--compat", "pi")
	b.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	b.waitFor(t, `"agentCapabilities"`, 1)
	b.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"` + cwd + `","mcpServers":[]}}`)
	b.waitFor(t, `"sessionId"`, 1)
	if out := string(b.stdout.bytes()); !strings.HasPrefix(out, `{"jsonrpc":"2.0","id":1,"result":`) {
		t.Errorf("want initialize's answer first:\n%s", out)
	}
	b.end(t, 0)
	sh.end()
}

// TestBridgeHostCloses: when the host ends first, the bridge exits 1
// with one stderr line.
func TestBridgeHostCloses(t *testing.T) {
	e := newTestEnv(t)
	sh := startServe(t, e, t.TempDir(), "--model", "faux/faux-1")
	b := startBridge(t, e, "rpc", "--connect", "unix:"+sh.socket)
	b.send(`{"id":"s","type":"get_state"}`)
	b.waitFor(t, `"command":"get_state"`, 1)
	sh.end()
	b.exited(t, 1)
	if got := string(b.stderr.bytes()); got != "rpi: rpi serve at unix:"+sh.socket+" closed the connection\n" {
		t.Errorf("stderr %q", got)
	}
}

// TestBridgeCannotConnect: no host, no auto: one stderr line, exit 1,
// nothing on stdout.
func TestBridgeCannotConnect(t *testing.T) {
	e := newTestEnv(t)
	sock := shortSocketDir(t) + "/none.sock"
	for _, mode := range []string{"rpc", "acp"} {
		b := startBridge(t, e, mode, "--connect", "unix:"+sock)
		b.exited(t, 1)
		errs := string(b.stderr.bytes())
		if !strings.HasPrefix(errs, "rpi: cannot connect to rpi serve at unix:"+sock+": ") || strings.Count(errs, "\n") != 1 {
			t.Errorf("%s: stderr %q", mode, errs)
		}
		if out := b.stdout.bytes(); len(out) > 0 {
			t.Errorf("%s: stdout %q", mode, out)
		}
	}
	b := startBridge(t, e, "rpc", "--connect", "ws://127.0.0.1:1/")
	b.exited(t, 1)
	if errs := string(b.stderr.bytes()); !strings.Contains(errs, "no token: set RPI_SERVE_TOKEN") {
		t.Errorf("ws: stderr %q", errs)
	}
}

// TestBridgeWebSocket: a bridge to rpi serve's WebSocket listener, with
// the token from RPI_SERVE_TOKEN, copies lines as one to the socket does.
func TestBridgeWebSocket(t *testing.T) {
	e := newTestEnv(t)
	e.vars["RPI_SERVE_TOKEN"] = "bridge-token"
	sh := startServe(t, e, t.TempDir(), "--model", "faux/faux-1", "--listen", "ws://127.0.0.1:0")
	addr := regexp.MustCompile(`ws://127\.0\.0\.1:\d+`).FindString(string(sh.stderr.bytes()))
	b := startBridge(t, e, "rpc", "--connect", addr, "--name", "over-ws")
	b.send(`{"id":"s","type":"get_state"}`)
	b.waitFor(t, `"command":"get_state"`, 1)
	if out := string(b.stdout.bytes()); !strings.Contains(out, `"sessionName":"over-ws"`) {
		t.Errorf("the hello's options did not reach the host over WebSocket:\n%s", out)
	}
	b.end(t, 0)
	sh.end()
}

// TestBridgeFlags: --connect's optional value, the hello a bridge's
// flags build, and the flags it refuses.
func TestBridgeFlags(t *testing.T) {
	e := newTestEnv(t)
	cwd, _ := os.Getwd()
	parse := func(args ...string) (*bridgeConfig, error) {
		cfg, _, err := parseArgs(args, e.env())
		return cfg.bridge, err
	}
	for _, tc := range []struct {
		args    []string
		connect string
		hello   string
	}{
		{[]string{"rpc", "--connect"}, "", ""},
		{[]string{"rpc", "--connect", "--model", "faux/faux-1"}, "", `{"type":"hello","options":{"model":"faux/faux-1"}}`},
		{[]string{"rpc", "--name", "--connect", "--connect"}, "", `{"type":"hello","options":{"name":"--connect"}}`},
		{[]string{"rpc", "--connect", "auto", "-nt", "--session", "s.jsonl"}, "auto",
			`{"type":"hello","options":{"no-tools":true,"session":"` + cwd + `/s.jsonl"}}`},
		{[]string{"rpc", "--connect", "--session", "019adf3c", "-e", "builtin:mcp"}, "", `{"type":"hello","options":{"session":"019adf3c"}}`}, // an id, for the host to find
		{[]string{"--mode", "rpc", "--connect=auto:unix:/tmp/x.sock", "--compat", "pi"}, "auto:unix:/tmp/x.sock", `{"type":"hello","compat":"pi"}`},
		{[]string{"rpc", "--connect", "unix:/tmp/x.sock", "--attach", "abc", "--cursor", "7", "--observe", "--model", "m"}, "unix:/tmp/x.sock",
			`{"type":"hello","attach":"abc","cursor":7,"role":"observer"}`},
		{[]string{"acp", "--connect", "--model", "faux/faux-1"}, "", ""},
		{[]string{"rpc", "--connect", "--cwd", "/"}, "", `{"type":"hello","options":{"cwd":"/"}}`},
	} {
		b, err := parse(tc.args...)
		if err != nil || b == nil {
			t.Errorf("%q: %v (bridge %v)", tc.args, err, b)
			continue
		}
		hello := strings.TrimSuffix(string(b.helloLine(slices.Contains(tc.args, "pi") && tc.args[0] != "acp")), "\n")
		if tc.args[0] == "acp" {
			hello = ""
		}
		if b.connect != tc.connect || hello != tc.hello {
			t.Errorf("%q: connect %q, hello %s; want %q, %s", tc.args, b.connect, hello, tc.connect, tc.hello)
		}
	}
	if b, _ := parse("rpc", "--connect", "--attach", "x", "--model", "m", "--approve"); !slices.Equal(b.ignored, []string{"--approve", "--model"}) {
		t.Errorf("ignored %q", b.ignored)
	}
	if b, _ := parse("acp", "--connect", "--model", "m", "--cwd", "/"); !slices.Equal(b.ignored, []string{"--cwd", "--model"}) {
		t.Errorf("acp: ignored %q", b.ignored)
	}
	for _, tc := range []struct {
		text, addr string
		auto       bool
	}{
		{"", "unix:/agent/rpi.sock", false}, {"auto", "unix:/agent/rpi.sock", true},
		{"unix:/x.sock", "unix:/x.sock", false}, {"auto:unix:/x.sock", "unix:/x.sock", true},
		{"ws://127.0.0.1:9/rpi", "ws://127.0.0.1:9/rpi", false},
	} {
		if addr, auto, err := bridgeAddress(tc.text, "/agent"); addr != tc.addr || auto != tc.auto || err != nil {
			t.Errorf("--connect %q: %s, %v, %v; want %s, %v", tc.text, addr, auto, err, tc.addr, tc.auto)
		}
	}
	for _, tc := range []struct{ args, err string }{
		{"rpc --attach x", "Conflicting flags: --attach, --cursor and --observe are a bridge's (rpi rpc --connect)"},
		{"serve --connect", "Conflicting flags: --connect is rpi rpc's and rpi acp's (a bridge to a running rpi serve)"},
		{"acp --connect --observe", "Conflicting flags: --attach, --cursor and --observe are rpc's; an ACP client opens and loads its sessions itself"},
		{"rpc --connect --cursor 3", "Invalid --cursor: the seq of the last event seen (0 or more), with --attach"},
		{"rpc --connect --observe", "Conflicting flags: --observe goes with --attach (an observer watches a session)"},
		{"rpc --connect tcp:1", `Invalid --connect "tcp:1": unix:PATH, ws://HOST:PORT[/PATH], auto or auto:unix:PATH (nothing: the default socket)`},
	} {
		if _, err := parse(strings.Fields(tc.args)...); err == nil || err.Error() != tc.err {
			t.Errorf("%s: %v, want %s", tc.args, err, tc.err)
		}
	}
}

// TestBridgeEndsWithAStalledClient: a bridge whose client ended its input
// and stopped reading, but keeps stdout open, ends as rpi does
// (docs/protocol.md): what the host still writes for it and the client
// takes nothing of is given up, and the bridge exits 0, where it waited
// on the client for good.
func TestBridgeEndsWithAStalledClient(t *testing.T) {
	host, conn := net.Pipe()
	defer host.Close()
	stdin, input := io.Pipe()
	stdout, out := io.Pipe() // nobody reads
	defer stdout.Close()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- copyBridge(conn, stdin, out, &stderr, make(chan os.Signal, 1), "unix:test") }()
	host.Write([]byte(`{"type":"agent_end","messages":[]}` + "\n")) // taken by the bridge, which blocks on stdout
	input.Close()
	host.Close() // the host is done
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit code %d, want 0 (stderr: %s)", code, stderr.String())
		}
	case <-time.After(endStall + 10*time.Second):
		t.Fatal("the bridge waits on a client that stopped reading")
	}
	if !strings.Contains(stderr.String(), "took no output") {
		t.Errorf("stderr does not say the output was given up: %q", stderr.String())
	}
}
