package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

// wsTestToken is the token the test servers want.
const wsTestToken = "s3cret-token"

// wsServed is what a test server's connection read: its lines, and the
// error reading ended with.
type wsServed struct {
	lines []string
	err   error
}

// startWsServer serves WebSocket upgrades on 127.0.0.1 with opts (the
// token wsTestToken and a limit of 4 KiB unless opts says otherwise):
// each connection's lines are echoed back, and what it read is sent to
// the channel returned once reading ends. It returns the server's
// host:port.
func startWsServer(t testing.TB, opts wsOptions) (string, <-chan wsServed) {
	t.Helper()
	if opts.token == "" {
		opts.token = wsTestToken
	}
	if opts.maxMessage == 0 {
		opts.maxMessage = 4 << 10
	}
	served := make(chan wsServed, 64)
	srv := httptest.NewServer(newWebSocketHandler(opts, func(c *wsConn) {
		served <- echoLines(c)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), served
}

// echoLines writes back each line c reads, until reading ends.
func echoLines(c *wsConn) wsServed {
	var s wsServed
	in := bufio.NewReader(c)
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			s.err = err
			return s
		}
		s.lines = append(s.lines, line)
		if _, err := c.Write([]byte(line)); err != nil {
			s.err = err
			return s
		}
	}
}

// rawHandshake sends a WebSocket upgrade request for path with extra
// headers (a "" value drops the header) and returns the answer, and the
// connection and its reader when it is a 101.
func rawHandshake(t testing.TB, addr, path string, headers map[string]string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(20 * time.Second)) // a regression fails, not hangs
	h := map[string]string{
		"Host": addr, "Upgrade": "websocket", "Connection": "keep-alive, Upgrade",
		"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13",
		"Authorization": "Bearer " + wsTestToken,
	}
	for k, v := range headers {
		h[k] = v
	}
	var req strings.Builder
	fmt.Fprintf(&req, "GET %s HTTP/1.1\r\n", path)
	for k, v := range h {
		if v != "" {
			fmt.Fprintf(&req, "%s: %s\r\n", k, v)
		}
	}
	req.WriteString("\r\n")
	if _, err := io.WriteString(conn, req.String()); err != nil {
		t.Fatal(err)
	}
	in := bufio.NewReader(conn)
	resp, err := http.ReadResponse(in, &http.Request{Method: "GET"})
	if err != nil {
		t.Fatal(err)
	}
	return resp, conn, in
}

// rawClient is a client that writes frames by hand, after a valid
// handshake.
func rawClient(t testing.TB, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	resp, conn, in := rawHandshake(t, addr, "/", nil)
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %s", resp.Status)
	}
	return conn, in
}

// clientFrame is a frame as a client sends it: masked with a fixed key
// (first is the header's first byte: FIN, reserved bits, opcode).
func clientFrame(first byte, payload string) []byte {
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	frame := appendFrameHeader(nil, first&0x80 != 0, first&0x0F, uint64(len(payload)), &key)
	frame[0] = first
	at := len(frame)
	frame = append(frame, payload...)
	maskBytes(frame[at:], key, 0)
	return frame
}

// readServerFrame reads one frame the server sent (unmasked).
func readServerFrame(t testing.TB, in *bufio.Reader) (fin bool, op byte, payload []byte) {
	t.Helper()
	c := newWsConn(nil, in, true, 1<<30)
	h, err := c.readHeader()
	if err != nil {
		t.Fatalf("reading the server's frame: %v", err)
	}
	payload = make([]byte, h.length)
	if _, err := io.ReadFull(in, payload); err != nil {
		t.Fatal(err)
	}
	return h.fin, h.op, payload
}

// readCloseCode reads frames until the server's close frame, and returns
// its code.
func readCloseCode(t testing.TB, in *bufio.Reader) int {
	t.Helper()
	for {
		_, op, payload := readServerFrame(t, in)
		if op == wsClose {
			if len(payload) < 2 {
				return 0
			}
			return int(binary.BigEndian.Uint16(payload))
		}
	}
}

// dialTestServer dials addr with the test token.
func dialTestServer(t testing.TB, addr string) *wsConn {
	t.Helper()
	c, err := dialWebSocket(context.Background(), "ws://"+addr+"/", wsTestToken)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// roundTrip checks that lines written through c come back whole.
func roundTrip(t testing.TB, c *wsConn, lines ...string) {
	t.Helper()
	if _, err := c.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		t.Fatal(err)
	}
	in := bufio.NewReader(c)
	for _, want := range lines {
		got, err := in.ReadString('\n')
		if err != nil || got != want+"\n" {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
	}
}

func TestWebSocketAcceptKey(t *testing.T) {
	if got := wsAcceptKey("dGhlIHNhbXBsZSBub25jZQ=="); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("accept key %q", got)
	}
	addr, _ := startWsServer(t, wsOptions{})
	resp, _, _ := rawHandshake(t, addr, "/", nil)
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" ||
		resp.Header.Get("Sec-WebSocket-Protocol") != "" {
		t.Fatalf("answer %s %v", resp.Status, resp.Header)
	}
}

// TestWebSocketRoundTrip: lines written by dialWebSocket's client reach
// the server as lines, several in one write, and come back to it;
// line breaks inside a message become spaces.
func TestWebSocketRoundTrip(t *testing.T) {
	addr, served := startWsServer(t, wsOptions{})
	c := dialTestServer(t, addr)
	roundTrip(t, c, `{"id":1,"type":"get_state"}`, `{"id":2}`, `{"text":"héllo"}`)
	c.Close()
	s := <-served
	if len(s.lines) != 3 || s.err != io.EOF {
		t.Fatalf("served %q, %v", s.lines, s.err)
	}

	conn, in := rawClient(t, addr)
	conn.Write(clientFrame(0x81, "{\"a\":\r\n1}"))
	if _, _, payload := readServerFrame(t, in); string(payload) != `{"a":  1}` {
		t.Fatalf("echoed %q", payload)
	}
}

// TestWebSocketAsLineStream: rpi's own framing and writer take a
// WebSocket as they take stdio: readFrames gets each message as a line,
// and output's records (one bigger than a write's piece) arrive as one
// message each.
func TestWebSocketAsLineStream(t *testing.T) {
	big := `{"s":"` + strings.Repeat("z", 3*writeChunk) + `"}`
	srv := httptest.NewServer(newWebSocketHandler(wsOptions{token: wsTestToken}, func(c *wsConn) {
		batches := make(chan []frame)
		go readFrames(c, maxLineBytes, batches, nil)
		o := newOutput(c, io.Discard)
		for batch := range batches {
			for _, f := range batch {
				o.send(func(buf []byte) ([]byte, error) { return append(buf, f.line...), nil })
			}
			o.send(func(buf []byte) ([]byte, error) { return append(buf, big...), nil })
		}
	}))
	defer srv.Close()
	c := dialTestServer(t, srv.Listener.Addr().String())
	defer c.Close()
	in := bufio.NewReader(c)
	c.Write([]byte(`{"id":1}` + "\n"))
	for _, want := range []string{`{"id":1}`, big} {
		if got, err := in.ReadString('\n'); err != nil || got != want+"\n" {
			t.Fatalf("read %d bytes, %v", len(got), err)
		}
	}
}

// TestWebSocketFragmentedMessage: a message in three frames, a ping
// between them, is one line; the ping is answered with its payload.
func TestWebSocketFragmentedMessage(t *testing.T) {
	addr, served := startWsServer(t, wsOptions{})
	conn, in := rawClient(t, addr)
	var frames []byte
	frames = append(frames, clientFrame(0x01, `{"a":`)...)
	frames = append(frames, clientFrame(0x89, "are you there")...)
	frames = append(frames, clientFrame(0x00, `"b`)...)
	frames = append(frames, clientFrame(0x8A, "unasked pong")...)
	frames = append(frames, clientFrame(0x80, `c"}`)...)
	conn.Write(frames)
	if fin, op, payload := readServerFrame(t, in); !fin || op != wsPong || string(payload) != "are you there" {
		t.Fatalf("%v %#x %q", fin, op, payload)
	}
	if fin, op, payload := readServerFrame(t, in); !fin || op != wsText || string(payload) != `{"a":"bc"}` {
		t.Fatalf("%v %#x %q", fin, op, payload)
	}
	conn.Write(clientFrame(0x88, "\x03\xe8"))
	if code := readCloseCode(t, in); code != wsNormal {
		t.Fatalf("close answered with %d", code)
	}
	if s := <-served; len(s.lines) != 1 || s.err != io.EOF {
		t.Fatalf("served %q, %v", s.lines, s.err)
	}
}

// TestWebSocketLineInPieces: a line written in several calls goes out as
// one fragmented message (text without FIN, continuations, FIN at the
// end), and arrives as one line; both ways.
func TestWebSocketLineInPieces(t *testing.T) {
	big := strings.Repeat("x", 300<<10)
	pieces := []string{`{"a":"`, big, big + `"}` + "\n" + `{"b":1}` + "\n"}
	srv := httptest.NewServer(newWebSocketHandler(wsOptions{token: wsTestToken, maxMessage: 1 << 20}, func(c *wsConn) {
		for _, p := range pieces {
			if _, err := c.Write([]byte(p)); err != nil {
				return
			}
		}
		echoLines(c)
	}))
	defer srv.Close()
	conn, in := rawClient(t, srv.Listener.Addr().String())
	var message []byte
	for i := 0; ; i++ {
		fin, op, payload := readServerFrame(t, in)
		if want := byte(wsContinuation); i == 0 && op != wsText || i > 0 && op != want {
			t.Fatalf("frame %d has opcode %#x", i, op)
		}
		message = append(message, payload...)
		if fin {
			break
		}
	}
	if want := `{"a":"` + big + big + `"}`; string(message) != want {
		t.Fatalf("message of %d bytes, want %d", len(message), len(want))
	}
	if fin, op, payload := readServerFrame(t, in); !fin || op != wsText || string(payload) != `{"b":1}` {
		t.Fatalf("%v %#x %q", fin, op, payload)
	}
	conn.Close()

	c := dialTestServer(t, srv.Listener.Addr().String())
	defer c.Close()
	lines := bufio.NewReaderSize(c, 16)
	for _, want := range []string{`{"a":"` + big + big + `"}`, `{"b":1}`} {
		if got, err := lines.ReadString('\n'); err != nil || got != want+"\n" {
			t.Fatalf("read %d bytes, %v", len(got), err)
		}
	}
	for _, p := range pieces {
		c.Write([]byte(p))
	}
	for _, want := range []string{`{"a":"` + big + big + `"}`, `{"b":1}`} {
		if got, err := lines.ReadString('\n'); err != nil || got != want+"\n" {
			t.Fatalf("echo: read %d bytes, %v", len(got), err)
		}
	}
}

// TestWebSocketPongsBetweenFrames: while lines go out in pieces from
// one goroutine, the pongs the reader sends for a stream of pings go
// between whole frames only: every message the client reads is a text
// frame, continuations, FIN, with control frames only between them.
func TestWebSocketPongsBetweenFrames(t *testing.T) {
	const lines, pings = 200, 300
	piece := strings.Repeat("y", 5000)
	srv := httptest.NewServer(newWebSocketHandler(wsOptions{token: wsTestToken}, func(c *wsConn) {
		written := make(chan struct{})
		go func() {
			defer close(written)
			for i := range lines {
				c.Write([]byte(fmt.Sprintf(`{"n":%d,"s":"`, i)))
				c.Write([]byte(piece))
				c.Write([]byte(`"}` + "\n"))
			}
		}()
		io.Copy(io.Discard, c)
		<-written
	}))
	defer srv.Close()
	conn, in := rawClient(t, srv.Listener.Addr().String())
	go func() {
		for i := range pings {
			conn.Write(clientFrame(0x89, fmt.Sprint(i)))
		}
	}()
	var message []byte
	messages, pongs := 0, 0
	for messages < lines || pongs < pings {
		fin, op, payload := readServerFrame(t, in)
		switch {
		case op == wsPong:
			if string(payload) != fmt.Sprint(pongs) {
				t.Fatalf("pong %d says %q", pongs, payload)
			}
			pongs++
		case op == wsText && message == nil, op == wsContinuation && message != nil:
			message = append(message, payload...)
			if fin {
				if want := fmt.Sprintf(`{"n":%d,"s":"%s"}`, messages, piece); string(message) != want {
					t.Fatalf("message %d: %q", messages, message)
				}
				message = nil
				messages++
			}
		default:
			t.Fatalf("opcode %#x with a message at %d bytes", op, len(message))
		}
	}
	conn.Write(clientFrame(0x88, "\x03\xe8"))
	if code := readCloseCode(t, in); code != wsNormal {
		t.Fatalf("closed with %d", code)
	}
}

// TestWebSocketHostileFrames: each breach of RFC 6455 closes the
// connection with its code, and reading ends with it; a second
// connection is served as if nothing happened.
func TestWebSocketHostileFrames(t *testing.T) {
	twoGiB := appendFrameHeader(nil, true, wsText, 2<<30, &[4]byte{1, 2, 3, 4})
	topBit := append([]byte{0x81, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 1}, 1, 2, 3, 4)
	cases := []struct {
		name   string
		frames []byte
		code   int // the close code expected; 0: the stream just ends
	}{
		{"unmasked", []byte("\x81\x02{}"), wsProtocolError},
		{"two GiB", twoGiB, wsTooBig},
		{"length's top bit", topBit, wsProtocolError},
		{"control over 125 bytes", clientFrame(0x89, strings.Repeat("p", 126)), wsProtocolError},
		{"fragmented control", clientFrame(0x09, "p"), wsProtocolError},
		{"reserved bits", clientFrame(0xC1, "{}"), wsProtocolError},
		{"unknown data opcode", clientFrame(0x83, "{}"), wsProtocolError},
		{"unknown control opcode", clientFrame(0x8B, ""), wsProtocolError},
		{"continuation without a start", clientFrame(0x80, "{}"), wsProtocolError},
		{"text inside a fragmented message", append(clientFrame(0x01, "{"), clientFrame(0x81, "}")...), wsProtocolError},
		{"binary", clientFrame(0x82, "{}"), wsUnsupportedData},
		{"invalid UTF-8", clientFrame(0x81, "\"\xff\xfe\""), wsInvalidData},
		{"UTF-8 cut between fragments is fine, not at the end", append(clientFrame(0x01, "\"\xc3"), clientFrame(0x80, "\xa9\xc3")...), wsInvalidData},
		{"past the limit", clientFrame(0x81, strings.Repeat("x", 4<<10+1)), wsTooBig},
		{"past the limit in fragments", append(clientFrame(0x01, strings.Repeat("x", 3<<10)), clientFrame(0x80, strings.Repeat("x", 1<<10+1))...), wsTooBig},
		{"close with one byte", clientFrame(0x88, "\x03"), wsProtocolError},
		{"close with a code never sent", clientFrame(0x88, "\x03\xed"), wsProtocolError},
		{"close with a reason not UTF-8", clientFrame(0x88, "\x03\xe8\xff"), wsInvalidData},
		{"close with a code of its own", clientFrame(0x88, "\x0f\xa0bye"), 4000},
		{"an unfinished fragment, then the end", clientFrame(0x01, "{\"a\":"), 0},
		{"a frame cut short, then the end", clientFrame(0x81, "{\"a\":1}")[:9], 0},
	}
	addr, served := startWsServer(t, wsOptions{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, in := rawClient(t, addr)
			conn.Write(tc.frames)
			if tc.code == 0 {
				conn.(*net.TCPConn).CloseWrite()
				if code := readCloseCode(t, in); code != wsNormal {
					t.Fatalf("closed with %d", code)
				}
			} else if code := readCloseCode(t, in); code != tc.code {
				t.Fatalf("closed with %d, want %d", code, tc.code)
			}
			s := <-served
			var wsErr *wsError
			switch {
			case len(s.lines) > 0:
				t.Fatalf("lines read: %q", s.lines)
			case tc.code == 0 || tc.code == 4000:
				if s.err != io.EOF {
					t.Fatalf("reading ended with %v", s.err)
				}
			case !errors.As(s.err, &wsErr) || wsErr.code != tc.code:
				t.Fatalf("reading ended with %v", s.err)
			}
			conn.Close()
			c := dialTestServer(t, addr)
			roundTrip(t, c, `{"after":"`+tc.name+`"}`)
			c.Close()
			<-served
		})
	}
}

// TestWebSocketClaimedLengthNotAllocated: a frame that claims nearly
// the limit and brings 10 bytes costs a buffer for what came, not for
// what it claimed.
func TestWebSocketClaimedLengthNotAllocated(t *testing.T) {
	capacity := make(chan int, 1)
	srv := httptest.NewServer(newWebSocketHandler(wsOptions{token: wsTestToken, maxMessage: 64 << 20}, func(c *wsConn) {
		io.Copy(io.Discard, c)
		capacity <- cap(c.message)
	}))
	defer srv.Close()
	conn, _ := rawClient(t, srv.Listener.Addr().String())
	frame := appendFrameHeader(nil, true, wsText, 60<<20, &[4]byte{})
	conn.Write(append(frame, "0123456789"...))
	conn.(*net.TCPConn).CloseWrite()
	if got := <-capacity; got > wsReadChunk {
		t.Fatalf("a buffer of %d bytes for 10", got)
	}
}

// TestWebSocketRefused: the handshake's refusals, before any upgrade.
func TestWebSocketRefused(t *testing.T) {
	var full atomic.Bool
	addr, _ := startWsServer(t, wsOptions{path: "/acp", allowOrigins: []string{"https://editor.example/"}, full: full.Load})
	cases := []struct {
		name    string
		path    string
		headers map[string]string
		status  int
	}{
		{"no token", "/acp", map[string]string{"Authorization": ""}, 401},
		{"wrong token", "/acp", map[string]string{"Authorization": "Bearer s3cret-tokem"}, 401},
		{"token of another scheme", "/acp", map[string]string{"Authorization": "Basic " + wsTestToken}, 401},
		{"wrong token in the query", "/acp?token=nope", map[string]string{"Authorization": ""}, 401},
		{"the token in the query", "/acp?token=" + wsTestToken, map[string]string{"Authorization": ""}, 101},
		{"the scheme in lower case", "/acp", map[string]string{"Authorization": "bearer " + wsTestToken}, 101},
		{"a foreign origin", "/acp", map[string]string{"Origin": "https://evil.example"}, 403},
		{"an allowed origin", "/acp", map[string]string{"Origin": "https://editor.example"}, 101},
		{"a foreign origin without the token", "/acp", map[string]string{"Origin": "https://evil.example", "Authorization": ""}, 401},
		{"another path", "/other", nil, 404},
		{"no upgrade", "/acp", map[string]string{"Upgrade": ""}, 426},
		{"no Connection: upgrade", "/acp", map[string]string{"Connection": "keep-alive"}, 426},
		{"version 8", "/acp", map[string]string{"Sec-WebSocket-Version": "8"}, 426},
		{"a key of 15 bytes", "/acp", map[string]string{"Sec-WebSocket-Key": "AAAAAAAAAAAAAAAAAAAA"}, 400},
		{"a subprotocol offered", "/acp", map[string]string{"Sec-WebSocket-Protocol": "acp"}, 101},
	}
	for _, tc := range cases {
		resp, _, _ := rawHandshake(t, addr, tc.path, tc.headers)
		if resp.StatusCode != tc.status || resp.StatusCode == 101 && resp.Header.Get("Sec-WebSocket-Protocol") != "" {
			t.Errorf("%s: %s", tc.name, resp.Status)
		}
	}
	full.Store(true)
	if resp, _, _ := rawHandshake(t, addr, "/acp", nil); resp.StatusCode != 503 {
		t.Errorf("full: %s", resp.Status)
	}
	if resp, _, _ := rawHandshake(t, addr, "/acp", map[string]string{"Authorization": ""}); resp.StatusCode != 401 {
		t.Errorf("full, without the token: %s", resp.Status)
	}
	if resp, _, _ := rawHandshake(t, addr, "/acp", map[string]string{"Authorization": ""}); resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("a 401 without WWW-Authenticate")
	}
	_, err := dialWebSocket(context.Background(), "ws://"+addr+"/acp", "wrong")
	if err == nil || !strings.Contains(err.Error(), "401 Unauthorized") {
		t.Errorf("dialing with the wrong token: %v", err)
	}
	if _, err := dialWebSocket(context.Background(), "http://"+addr+"/acp?token=x", ""); err == nil || strings.Contains(err.Error(), "token=") {
		t.Errorf("dialing http://: %v", err)
	}
	emptyToken := httptest.NewServer(newWebSocketHandler(wsOptions{}, func(*wsConn) {}))
	defer emptyToken.Close()
	if resp, _, _ := rawHandshake(t, emptyToken.Listener.Addr().String(), "/", map[string]string{"Authorization": "Bearer "}); resp.StatusCode != 401 {
		t.Errorf("a server without a token: %s", resp.Status)
	}
}

// TestWebSocketClose: Close sends 1000 and the peer's Read ends with
// io.EOF; a second Close does nothing; a write after it fails.
func TestWebSocketClose(t *testing.T) {
	addr, served := startWsServer(t, wsOptions{})
	c := dialTestServer(t, addr)
	roundTrip(t, c, `{}`)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("{}\n")); err == nil {
		t.Fatal("a write after Close")
	}
	if n, err := c.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("a read after Close: %d, %v", n, err)
	}
	if s := <-served; s.err != io.EOF {
		t.Fatalf("the server's reading ended with %v", s.err)
	}

	srv := httptest.NewServer(newWebSocketHandler(wsOptions{token: wsTestToken}, func(c *wsConn) {
		c.Write([]byte("{\"bye\":true}\n"))
	}))
	defer srv.Close()
	c = dialTestServer(t, srv.Listener.Addr().String())
	got, err := io.ReadAll(c)
	if string(got) != "{\"bye\":true}\n" || err != nil {
		t.Fatalf("read %q, %v", got, err)
	}
	c.Close()
}

// TestWebSocketPanicContained: a panic in accept is told on stderr and
// closes that connection only.
func TestWebSocketPanicContained(t *testing.T) {
	var stderr syncBuffer
	srv := httptest.NewServer(newWebSocketHandler(wsOptions{token: wsTestToken, stderr: &stderr}, func(c *wsConn) {
		panic("a bug")
	}))
	defer srv.Close()
	c := dialTestServer(t, srv.Listener.Addr().String())
	if _, err := io.ReadAll(c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "panic in a WebSocket connection: a bug") {
		t.Fatalf("stderr: %q", stderr.String())
	}
}

// TestWebSocketGoroutinesEnd: after many connections, opened and closed
// from either side, the goroutines are back to what they were.
func TestWebSocketGoroutinesEnd(t *testing.T) {
	srv := httptest.NewServer(newWebSocketHandler(wsOptions{token: wsTestToken}, func(c *wsConn) {
		in := bufio.NewReader(c)
		for {
			line, err := in.ReadString('\n')
			if err != nil || line == "{\"bye\":1}\n" {
				return
			}
			c.Write([]byte(line))
		}
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	before := runtime.NumGoroutine()
	for i := range 60 {
		c := dialTestServer(t, addr)
		roundTrip(t, c, fmt.Sprintf(`{"n":%d}`, i))
		if i%2 == 0 {
			c.Write([]byte("{\"bye\":1}\n"))
			io.Copy(io.Discard, c)
		}
		c.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond) // polling the count, not waiting for an event
	}
}

// FuzzWebSocketFrames: any bytes after a valid handshake never panic the
// reader, and what it hands out are whole lines of UTF-8 within the
// limit, from a buffer never bigger than the limit.
func FuzzWebSocketFrames(f *testing.F) {
	f.Add(clientFrame(0x81, `{"id":1}`))
	f.Add(append(append(clientFrame(0x01, "{"), clientFrame(0x89, "ping")...), clientFrame(0x80, "}")...))
	f.Add(clientFrame(0x88, "\x03\xe8bye"))
	f.Add(appendFrameHeader(nil, true, wsText, 2<<30, &[4]byte{}))
	f.Add(clientFrame(0x81, strings.Repeat("é", 600)))
	const limit = 1 << 10
	var stderr syncBuffer
	results := make(chan string, 1)
	srv := httptest.NewServer(newWebSocketHandler(wsOptions{token: wsTestToken, maxMessage: limit, stderr: &stderr}, func(c *wsConn) {
		var problem string
		var line []byte
		buf := make([]byte, 100)
		for problem == "" {
			n, err := c.Read(buf)
			if cap(c.message) > limit+1 {
				problem = fmt.Sprintf("a buffer of %d bytes", cap(c.message))
			}
			line = append(line, buf[:n]...)
			if i := bytes.IndexByte(line, '\n'); i >= 0 {
				if i != len(line)-1 || i > limit || !utf8.Valid(line) || bytes.IndexByte(line, '\r') >= 0 {
					problem = fmt.Sprintf("handed out %q", line)
				}
				line = line[:0]
			}
			if err != nil {
				if len(line) > 0 {
					problem = fmt.Sprintf("a line without its end: %q", line)
				}
				break
			}
		}
		results <- problem
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	f.Fuzz(func(t *testing.T, data []byte) {
		conn, in := rawClient(t, addr)
		go func() {
			conn.Write(data)
			conn.(*net.TCPConn).CloseWrite()
		}()
		io.Copy(io.Discard, in)
		if problem := <-results; problem != "" {
			t.Fatal(problem)
		}
		if s := stderr.String(); s != "" {
			t.Fatal(s)
		}
	})
}

// TestWebSocketClientTakesLongMessages: the client (rpi rpc --connect
// ws://…, a bridge) takes a server's message of any length, as a unix
// socket's bridge takes a line of any length: the host's records have no
// limit (a session's get_messages, an agent_end, carry every image of
// it), only a client's lines have one. It hands the message out as it
// comes, from a buffer that never holds it whole; UTF-8 is still checked
// (a character cut between frames is fine, an invalid byte is not).
func TestWebSocketClientTakesLongMessages(t *testing.T) {
	long := `{"s":"` + strings.Repeat("é", maxLineBytes/2) + `"}`
	srv := httptest.NewServer(newWebSocketHandler(wsOptions{token: wsTestToken}, func(c *wsConn) {
		c.Write([]byte(long[:7])) // a message in pieces, its first "é" cut between frames
		c.Write([]byte(long[7:] + "\n" + `{"after":1}` + "\n"))
		c.Write([]byte("{\"bad\":\"\xff\"}\n"))
		io.Copy(io.Discard, c)
	}))
	defer srv.Close()
	c := dialTestServer(t, srv.Listener.Addr().String())
	defer c.Close()
	lines := bufio.NewReaderSize(c, 64<<10)
	got, err := lines.ReadString('\n')
	if err != nil || got != long+"\n" {
		t.Fatalf("read %d bytes, %v; want %d", len(got), err, len(long)+1)
	}
	if cap(c.message) > 2*wsReadChunk {
		t.Errorf("a buffer of %d bytes for the message", cap(c.message))
	}
	if got, err := lines.ReadString('\n'); err != nil || got != `{"after":1}`+"\n" {
		t.Fatalf("read %q, %v", got, err)
	}
	var wsErr *wsError
	if _, err := io.ReadAll(lines); !errors.As(err, &wsErr) || wsErr.code != wsInvalidData {
		t.Fatalf("invalid UTF-8: reading ended with %v", err)
	}
}

// TestWebSocketUTF8InPieces: a message checked piece by piece (a client's,
// of any length) is found UTF-8 exactly when it is whole, wherever its
// pieces are cut.
func TestWebSocketUTF8InPieces(t *testing.T) {
	texts := []string{"", "abc", "é", "héllo €uro 𝄞 done", "\xff", "a\xc3", "\xc3a", "\xe2\x82", "\xe0\x80\x80",
		"\xed\xa0\x80", "\xf4\x90\x80\x80", "𝄞\x80", "\x80𝄞", "é\xf0\x9d\x84", "\xf0\x9d\x84\x9e\x9e", "€€€\xe2\x82\xacx\xc0\xaf"}
	for _, text := range texts {
		for i := 0; i <= len(text); i++ {
			for j := i; j <= len(text); j++ {
				c := &wsConn{}
				valid := true
				for _, piece := range []string{text[:i], text[i:j], text[j:]} {
					valid = valid && c.validUTF8([]byte(piece))
				}
				valid = valid && len(c.carry) == 0
				if valid != utf8.ValidString(text) {
					t.Errorf("%q cut at %d and %d: valid %v", text, i, j, valid)
				}
			}
		}
	}
}
