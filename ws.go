package main

// WebSocket (RFC 6455) as a line stream: `rpi serve`'s WebSocket
// clients, and the client `rpi rpc --connect ws://…` dials. A connection
// (wsConn) reads as the lines a unix socket would carry — each text
// message one line — and writes each line it is given as one text
// message, so the rest of rpi serves it as it serves any other stream.
// The handshake refuses a client without the token, a browser from an
// origin not allowed, and any client once the host is full, before the
// upgrade. Hostile frames close the connection with RFC 6455's code for
// what was wrong, and no message is held past the limit.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// wsGUID is what RFC 6455 appends to a client's key to make the
// server's answer (Sec-WebSocket-Accept).
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// The frames' opcodes.
const (
	wsContinuation = 0x0
	wsText         = 0x1
	wsBinary       = 0x2
	wsClose        = 0x8
	wsPing         = 0x9
	wsPong         = 0xA
)

// The close codes rpi sends.
const (
	wsNormal          = 1000
	wsProtocolError   = 1002
	wsUnsupportedData = 1003
	wsInvalidData     = 1007
	wsTooBig          = 1009
)

// wsHandshakeTimeout bounds a handshake: the 101 answer's write on the
// server, the whole exchange on the client.
const wsHandshakeTimeout = 10 * time.Second

// wsCloseWait bounds how long Close waits for its close frame to go out
// (a write in progress included) before it closes the socket anyway.
const wsCloseWait = time.Second

// wsReadChunk is the most of a frame's payload read at once: a message's
// buffer grows with the bytes that came, never with the length a frame
// claims.
const wsReadChunk = 64 << 10

// wsKeptBuffer is the largest message buffer a connection keeps for the
// next message; a bigger one goes once its message is handed out.
const wsKeptBuffer = 64 << 10

// errWsClosed is a write's error once the close frame went out.
var errWsClosed = errors.New("the WebSocket is closed")

// ---- The server's handshake ----

// wsOptions is what the host decides of its WebSocket clients.
type wsOptions struct {
	token        string      // the token a client must give; an empty one refuses every client
	allowOrigins []string    // the browser origins allowed ("http://localhost:3000"); none: no browser
	maxMessage   int         // the longest message accepted, in bytes (0: maxLineBytes)
	full         func() bool // true refuses a client with 503 (nil: never full)
	path         string      // the only path served ("" or "/": any path)
	stderr       io.Writer   // where a panic in accept is told
}

// wsHandler is the http.Handler of newWebSocketHandler.
type wsHandler struct {
	opts   wsOptions
	digest [sha256.Size]byte // the token's digest, compared in constant time
	accept func(c *wsConn)
}

// newWebSocketHandler serves WebSocket upgrades. A request is checked in
// this order, each refusal an HTTP answer before any upgrade and the
// request's connection closed after it: the path (404), GET (405), the
// upgrade's headers (426 without an upgrade to websocket or version 13,
// 400 for a bad key), the token (401; `Authorization: Bearer TOKEN`, or
// `?token=TOKEN` for browsers, which cannot set headers), the Origin
// (403 unless opts.allowOrigins names it; a request without one is no
// browser's and is allowed), then whether the host is full (503: full
// is asked before the upgrade, so the host counts a connection from
// accept, and two at once may both find a last place). Offered
// subprotocols are not taken (the ACP SDK's createWebSocketStream offers
// none unless its caller names some, and needs none back).
//
// accept runs on the http.Server's goroutine for that connection, once
// the 101 is out, and the connection lasts as long as accept: when it
// returns (or panics, which is told on opts.stderr) the connection is
// closed. http.Server.Shutdown does not wait for it nor close it (the
// connection is hijacked): the host closes its connections itself.
// The host should set the server's ReadHeaderTimeout and ReadTimeout
// (wsHandshakeTimeout) and MaxHeaderBytes (16 KiB is plenty) so that a
// client that never finishes its request is dropped: ReadHeaderTimeout
// alone leaves a refused request's body (which net/http reads after the
// answer, up to 256 KiB) without a deadline. Once upgraded, the
// connection has no deadline but the ones the host sets
// (SetReadDeadline, SetWriteDeadline).
func newWebSocketHandler(opts wsOptions, accept func(c *wsConn)) http.Handler {
	if opts.maxMessage <= 0 {
		opts.maxMessage = maxLineBytes
	}
	return &wsHandler{opts: opts, digest: sha256.Sum256([]byte(opts.token)), accept: accept}
}

// ServeHTTP checks the request, upgrades it and hands the connection to
// accept.
func (h *wsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, why := h.check(r)
	if status != 0 {
		w.Header().Set("Connection", "close")
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="rpi"`)
		}
		if status == http.StatusUpgradeRequired {
			w.Header().Set("Upgrade", "websocket")
			w.Header().Set("Sec-WebSocket-Version", "13")
		}
		http.Error(w, why, status)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		w.Header().Set("Connection", "close")
		http.Error(w, "cannot take this connection over for a WebSocket", http.StatusInternalServerError)
		return
	}
	c, err := upgradeWebSocket(conn, brw.Reader, r.Header.Get("Sec-WebSocket-Key"), h.opts.maxMessage)
	if err != nil {
		conn.Close()
		return
	}
	defer c.Close()
	guarded(h.opts.stderr, "a WebSocket connection", func() { h.accept(c) })()
}

// check says why a request may not be upgraded: an HTTP status and its
// text, or 0 when it may.
func (h *wsHandler) check(r *http.Request) (status int, why string) {
	if h.opts.path != "" && h.opts.path != "/" && r.URL.Path != h.opts.path {
		return http.StatusNotFound, "no WebSocket is served at this path"
	}
	if r.Method != http.MethodGet {
		return http.StatusMethodNotAllowed, "a WebSocket opens with GET"
	}
	if !r.ProtoAtLeast(1, 1) || !headerHasToken(r.Header, "Upgrade", "websocket") || !headerHasToken(r.Header, "Connection", "upgrade") {
		return http.StatusUpgradeRequired, "this is a WebSocket endpoint: upgrade to websocket"
	}
	if r.Header.Get("Sec-WebSocket-Version") != "13" {
		return http.StatusUpgradeRequired, "only WebSocket version 13 is spoken"
	}
	if keys := r.Header.Values("Sec-WebSocket-Key"); len(keys) != 1 || !validWebSocketKey(keys[0]) {
		return http.StatusBadRequest, "Sec-WebSocket-Key must be the base64 of 16 bytes"
	}
	if !h.tokenGiven(r) {
		return http.StatusUnauthorized, "a valid token is needed (Authorization: Bearer TOKEN, or ?token=TOKEN)"
	}
	if origin := r.Header.Get("Origin"); origin != "" && !h.originAllowed(origin) {
		return http.StatusForbidden, "this origin is not allowed (--allow-origin)"
	}
	if h.opts.full != nil && h.opts.full() {
		return http.StatusServiceUnavailable, "too many connections: try again later"
	}
	return 0, ""
}

// tokenGiven reports whether the request carries the token: as a bearer
// token if it has an Authorization header of that scheme, else as the
// token query parameter. The digests of both are compared, so that the
// time taken tells nothing of the token.
func (h *wsHandler) tokenGiven(r *http.Request) bool {
	given, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		given = r.URL.Query().Get("token")
	}
	digest := sha256.Sum256([]byte(given))
	return subtle.ConstantTimeCompare(digest[:], h.digest[:]) == 1 && h.opts.token != ""
}

// bearerToken is the token of an Authorization header of the Bearer
// scheme.
func bearerToken(header string) (string, bool) {
	scheme, token, found := strings.Cut(strings.TrimSpace(header), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
}

// originAllowed reports whether a browser's Origin is one the host
// allows (ASCII case aside, and a trailing "/" on the allowed one).
func (h *wsHandler) originAllowed(origin string) bool {
	for _, allowed := range h.opts.allowOrigins {
		if strings.EqualFold(strings.TrimSuffix(allowed, "/"), origin) {
			return true
		}
	}
	return false
}

// headerHasToken reports whether a header of a comma-separated list
// (Connection, Upgrade) holds token, ASCII case aside.
func headerHasToken(header http.Header, name, token string) bool {
	for _, value := range header.Values(name) {
		for item := range strings.SplitSeq(value, ",") {
			if strings.EqualFold(strings.TrimSpace(item), token) {
				return true
			}
		}
	}
	return false
}

// validWebSocketKey reports whether a Sec-WebSocket-Key is the base64 of
// 16 bytes, as RFC 6455 asks.
func validWebSocketKey(key string) bool {
	raw, err := base64.StdEncoding.DecodeString(key)
	return err == nil && len(raw) == 16
}

// wsAcceptKey is the Sec-WebSocket-Accept that answers a client's key.
func wsAcceptKey(key string) string {
	sum := sha1.Sum([]byte(key + wsGUID))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// upgradeWebSocket answers 101 on a connection taken over from the HTTP
// server (in, its reader, may hold frames already) and clears the
// deadlines the server set.
func upgradeWebSocket(conn net.Conn, in *bufio.Reader, key string, maxMessage int) (*wsConn, error) {
	conn.SetDeadline(time.Now().Add(wsHandshakeTimeout))
	answer := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
		wsAcceptKey(key) + "\r\n\r\n"
	if _, err := io.WriteString(conn, answer); err != nil {
		return nil, err
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return newWsConn(conn, in, false, maxMessage), nil
}

// ---- The client's handshake ----

// dialWebSocket connects to a ws:// URL as a client, giving token (if
// any) as a bearer token, and returns the connection once the server has
// accepted it: its frames are masked, and it reads and writes lines as
// the server's side does, but for the length of what it reads: the
// host's records have no limit (a session's get_messages carries every
// image of it), so a message of any length is handed out as it comes,
// never held whole, as a unix socket's bridge passes a line on. ctx
// bounds the handshake only (and 10 s at most); a refusal's error says
// the server's status and text.
func dialWebSocket(ctx context.Context, rawURL, token string) (*wsConn, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "ws" || u.Host == "" {
		return nil, fmt.Errorf("%q is not a ws://HOST:PORT[/PATH] URL", redactedURL(rawURL))
	}
	if strings.ContainsFunc(token, func(r rune) bool { return r < 0x21 || r == 0x7f }) {
		return nil, errors.New("the token holds spaces or control characters, which a header cannot carry")
	}
	address := u.Host
	if u.Port() == "" {
		address = net.JoinHostPort(u.Hostname(), "80")
	}
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", address)
	if err != nil {
		return nil, err
	}
	c, err := clientHandshake(ctx, conn, u, token)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// redactedURL is a URL as an error may show it: without its query
// (which may carry the token).
func redactedURL(rawURL string) string {
	before, _, _ := strings.Cut(rawURL, "?")
	return before
}

// clientHandshake asks the server at the other end of conn to upgrade to
// a WebSocket, and checks its answer.
func clientHandshake(ctx context.Context, conn net.Conn, u *url.URL, token string) (*wsConn, error) {
	deadline := time.Now().Add(wsHandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, guarded(nil, "ending a WebSocket handshake", func() { conn.SetDeadline(time.Unix(1, 0)) }))
	var raw [16]byte
	rand.Read(raw[:])
	key := base64.StdEncoding.EncodeToString(raw[:])
	var request strings.Builder
	fmt.Fprintf(&request, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n", u.RequestURI(), u.Host, key)
	if token != "" {
		fmt.Fprintf(&request, "Authorization: Bearer %s\r\n", token)
	}
	request.WriteString("\r\n")
	in := bufio.NewReaderSize(conn, wsReadChunk)
	resp, err := sendHandshake(conn, in, request.String())
	if !stop() {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("the WebSocket handshake with %s: %w", u.Host, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("%s refused the WebSocket: %s: %s", u.Host, resp.Status, bytes.TrimSpace(body))
	}
	if !headerHasToken(resp.Header, "Upgrade", "websocket") || !headerHasToken(resp.Header, "Connection", "upgrade") ||
		resp.Header.Get("Sec-WebSocket-Accept") != wsAcceptKey(key) {
		return nil, fmt.Errorf("%s answered 101 without a valid WebSocket upgrade", u.Host)
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return newWsConn(conn, in, true, -1), nil
}

// sendHandshake writes the client's request and reads the server's
// answer's head (a 101 has no body: what follows it in stays there).
func sendHandshake(conn net.Conn, in *bufio.Reader, request string) (*http.Response, error) {
	if _, err := io.WriteString(conn, request); err != nil {
		return nil, err
	}
	return http.ReadResponse(in, &http.Request{Method: http.MethodGet})
}

// ---- The connection ----

// wsConn is one WebSocket connection, upgraded, as a stream of lines
// (io.ReadWriteCloser). Read is for one goroutine at a time; Write and
// Close may be called from any, and the reader's own frames (a pong, the
// answer to a close) go out between whole frames of theirs, under
// writeMu.
//
// Binary messages are refused with 1003: rpi's lines are JSON, which a
// text message carries, and the ACP SDK sends and reads text only.
type wsConn struct {
	conn       net.Conn
	in         *bufio.Reader // conn's bytes, with what the handshake left in
	masks      bool          // this end is the client: its frames are masked, the peer's must not be
	maxMessage int           // the longest message taken whole; < 0: no limit, each handed out as it comes (streams)
	closed     atomic.Bool   // Close was called

	// The reader's, while one Read runs.
	message []byte // the message being read, then what is left to hand out of it
	unread  []byte // what Read has yet to hand out (of message)
	readErr error  // why reading ended (io.EOF at the peer's close)
	head    [8]byte
	control [125]byte // a control frame's payload

	// A message handed out as it comes (maxMessage < 0), between Reads.
	inMessage bool     // a text message started, its last piece not yet handed out
	frame     wsHeader // its data frame being read
	left      uint64   // the bytes of that frame still to read
	pos       int      // the mask key's position in it
	carry     []byte   // the message's last bytes so far, a character they start not yet whole

	writeMu  mutex[wsWriteMu] // held while frames go out; guards the fields below
	midLine  bool             // a line's first pieces went out as a message's frames, its end not yet
	writeErr error            // why writing ended (errWsClosed once the close frame went out)
}

// newWsConn is a connection upgraded, reading from in; masks says this
// end is the client; maxMessage < 0 takes messages of any length, as
// they come.
func newWsConn(conn net.Conn, in *bufio.Reader, masks bool, maxMessage int) *wsConn {
	return &wsConn{conn: conn, in: in, masks: masks, maxMessage: maxMessage}
}

// RemoteAddr is the peer's address.
func (c *wsConn) RemoteAddr() net.Addr { return c.conn.RemoteAddr() }

// SetReadDeadline sets the socket's read deadline; once one passes,
// reading ends (Read returns its error from then on).
func (c *wsConn) SetReadDeadline(t time.Time) error { return c.conn.SetReadDeadline(t) }

// SetWriteDeadline sets the socket's write deadline; a write it cuts
// leaves the connection unable to write (a frame may be cut): it is for
// dropping a client that does not read.
func (c *wsConn) SetWriteDeadline(t time.Time) error { return c.conn.SetWriteDeadline(t) }

// Close sends a close frame (1000) unless one went out, waiting
// wsCloseWait at most, and closes the socket. It may be called more than
// once, and from any goroutine: a Read or Write blocked ends.
func (c *wsConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.conn.SetWriteDeadline(time.Now().Add(wsCloseWait))
	c.sendClose(wsNormal, "")
	return c.conn.Close()
}

// ---- Writing ----

// Write sends p's lines: each line ("\n"-ended, the "\n" not sent) as
// one text message, and a line whose end is in a later call as a
// fragmented message (its first piece a text frame without FIN, then
// continuations, FIN at the "\n"), so that a record too big to hold goes
// out as it comes. The frames of one call go out in one write.
func (c *wsConn) Write(p []byte) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.writeErr != nil {
		return 0, c.writeErr
	}
	lines := bytes.Count(p, []byte("\n")) + 1
	room := lines * 14
	if c.masks {
		room += len(p)
	}
	arena := make([]byte, 0, room)
	frames := make(net.Buffers, 0, 2*lines)
	for rest := p; len(rest) > 0; {
		piece, after, ended := bytes.Cut(rest, []byte("\n"))
		op := byte(wsText)
		if c.midLine {
			op = wsContinuation
		}
		if ended || len(piece) > 0 {
			arena, frames = c.appendFrame(arena, frames, ended, op, piece)
		}
		c.midLine = !ended
		rest = after
	}
	if err := c.sendLocked(frames); err != nil {
		return 0, err
	}
	return len(p), nil
}

// appendFrame adds one frame to frames: its header (and, masked, its
// payload) in arena, its payload as it is when unmasked.
func (c *wsConn) appendFrame(arena []byte, frames net.Buffers, fin bool, op byte, payload []byte) ([]byte, net.Buffers) {
	start := len(arena)
	if !c.masks {
		arena = appendFrameHeader(arena, fin, op, uint64(len(payload)), nil)
		return arena, append(frames, arena[start:], payload)
	}
	var key [4]byte
	rand.Read(key[:])
	arena = appendFrameHeader(arena, fin, op, uint64(len(payload)), &key)
	at := len(arena)
	arena = append(arena, payload...)
	maskBytes(arena[at:], key, 0)
	return arena, append(frames, arena[start:])
}

// appendFrameHeader appends a frame's header: FIN, the opcode, the
// payload's length in the fewest bytes, and the mask's key if any.
func appendFrameHeader(dst []byte, fin bool, op byte, n uint64, key *[4]byte) []byte {
	first := op
	if fin {
		first |= 0x80
	}
	var masked byte
	if key != nil {
		masked = 0x80
	}
	switch {
	case n <= 125:
		dst = append(dst, first, masked|byte(n))
	case n <= 0xFFFF:
		dst = binary.BigEndian.AppendUint16(append(dst, first, masked|126), uint16(n))
	default:
		dst = binary.BigEndian.AppendUint64(append(dst, first, masked|127), uint64(n))
	}
	if key != nil {
		dst = append(dst, key[:]...)
	}
	return dst
}

// sendLocked writes frames to the socket; a failure ends writing (a
// frame may have been cut). writeMu is held.
func (c *wsConn) sendLocked(frames net.Buffers) error {
	if len(frames) == 0 {
		return nil
	}
	if _, err := frames.WriteTo(c.conn); err != nil {
		c.writeErr = err
		return err
	}
	return nil
}

// sendControl sends one control frame between whole frames (inside a
// fragmented message too, as RFC 6455 allows), unless writing has ended.
func (c *wsConn) sendControl(op byte, payload []byte) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.sendControlLocked(op, payload)
}

// sendControlLocked is sendControl with writeMu held.
func (c *wsConn) sendControlLocked(op byte, payload []byte) {
	if c.writeErr != nil {
		return
	}
	_, frame := c.appendFrame(make([]byte, 0, 14+len(payload)), nil, true, op, payload)
	c.sendLocked(frame)
}

// sendClose sends a close frame with code and why (cut to fit 125
// bytes), unless writing has ended; writing ends with it.
func (c *wsConn) sendClose(code int, why string) {
	payload := binary.BigEndian.AppendUint16(make([]byte, 0, 125), uint16(code))
	payload = append(payload, cutUTF8(why, 123)...)
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.sendControlLocked(wsClose, payload)
	if c.writeErr == nil {
		c.writeErr = errWsClosed
	}
}

// cutUTF8 is s cut to at most n bytes, at a character's start.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// maskBytes XORs b with the mask's key, starting at the key's byte pos,
// and returns the key's position after b (RFC 6455 5.3).
func maskBytes(b []byte, key [4]byte, pos int) int {
	i := 0
	for ; i < len(b) && (pos+i)&3 != 0; i++ {
		b[i] ^= key[(pos+i)&3]
	}
	if len(b)-i >= 8 {
		word := uint64(binary.LittleEndian.Uint32(key[:]))
		word |= word << 32
		for ; len(b)-i >= 8; i += 8 {
			binary.LittleEndian.PutUint64(b[i:], binary.LittleEndian.Uint64(b[i:])^word)
		}
	}
	for ; i < len(b); i++ {
		b[i] ^= key[(pos+i)&3]
	}
	return (pos + len(b)) & 3
}

// ---- Reading ----

// wsError is why the reader closed the connection: the close code sent
// and what was wrong with the peer's frames.
type wsError struct {
	code int
	why  string
}

func (e *wsError) Error() string {
	return fmt.Sprintf("the WebSocket was closed (%d): %s", e.code, e.why)
}

// Read hands out each text message received followed by "\n", a "\n" or
// "\r" in it made a space (JSON allows whitespace where a line break may
// be, and none inside a string, so a JSON message stays one line, and
// valid). A message is handed out only once whole and checked; with no
// limit (maxMessage < 0), in pieces as it comes, each checked (invalid
// UTF-8 ends reading after what came before it). Read
// returns io.EOF once the peer closed (after its close frame is
// answered, or at the socket's end, an unfinished message dropped, or
// cut with no limit) or
// Close was called, and a *wsError once the peer broke the protocol
// (after the close frame that says so).
func (c *wsConn) Read(p []byte) (int, error) {
	for len(c.unread) == 0 {
		if c.readErr != nil {
			return 0, c.readErr
		}
		if c.maxMessage < 0 {
			c.unread, c.readErr = c.readPiece()
			continue
		}
		if cap(c.message) > wsKeptBuffer {
			c.message = nil
		}
		c.unread, c.readErr = c.readMessage()
	}
	n := copy(p, c.unread)
	c.unread = c.unread[n:]
	return n, nil
}

// wsHeader is a frame's header, read.
type wsHeader struct {
	fin    bool
	op     byte
	length uint64
	masked bool
	key    [4]byte
}

// readMessage reads frames until a text message is whole, answering the
// control frames among them, and returns it as a line (in c.message).
func (c *wsConn) readMessage() ([]byte, error) {
	c.message = c.message[:0]
	started := false
	for {
		h, err := c.nextDataFrame(started)
		if err != nil {
			return nil, err
		}
		started = true
		if h.length > uint64(c.maxMessage-len(c.message)) {
			return nil, c.fail(wsTooBig, fmt.Sprintf("a message longer than %d bytes", c.maxMessage))
		}
		if err := c.readPayload(h); err != nil {
			return nil, err
		}
		if h.fin {
			break
		}
	}
	if !utf8.Valid(c.message) {
		return nil, c.fail(wsInvalidData, "a text message that is not UTF-8")
	}
	spaceLineBreaks(c.message)
	c.message = append(c.message, '\n')
	return c.message, nil
}

// nextDataFrame reads frame headers until a data frame's, answering the
// control frames before it, and refuses one that may not come now: a
// continuation without a message started, a new message inside one, a
// binary message.
func (c *wsConn) nextDataFrame(started bool) (wsHeader, error) {
	for {
		h, err := c.readHeader()
		if err != nil {
			return h, err
		}
		if h.op >= wsClose {
			if err := c.readControl(h); err != nil {
				return h, err
			}
			continue
		}
		switch {
		case h.op == wsContinuation && !started:
			return h, c.fail(wsProtocolError, "a continuation frame without a message to continue")
		case h.op != wsContinuation && started:
			return h, c.fail(wsProtocolError, "a new message inside a fragmented one")
		case h.op == wsBinary:
			return h, c.fail(wsUnsupportedData, "binary messages are not accepted: send JSON lines as text")
		}
		return h, nil
	}
}

// spaceLineBreaks makes each "\n" and "\r" in b a space.
func spaceLineBreaks(b []byte) {
	for i, x := range b {
		if x == '\n' || x == '\r' {
			b[i] = ' '
		}
	}
}

// readPiece reads the next piece of a text message of any length (up to
// wsReadChunk bytes, in c.message), answering the control frames before
// it; the message's last piece ends with "\n" (a piece of only "\n" when
// its last frame is empty). Each piece is checked for UTF-8 as it comes,
// a character cut at its end checked with the next.
func (c *wsConn) readPiece() ([]byte, error) {
	if cap(c.message) < wsReadChunk+1 {
		c.message = make([]byte, 0, wsReadChunk+1)
	}
	for c.left == 0 {
		if c.inMessage && c.frame.fin { // an empty last frame
			return c.endMessage(c.message[:0])
		}
		h, err := c.nextDataFrame(c.inMessage)
		if err != nil {
			return nil, err
		}
		c.inMessage, c.frame, c.left, c.pos = true, h, h.length, 0
	}
	piece := c.message[:min(c.left, wsReadChunk)]
	if _, err := io.ReadFull(c.in, piece); err != nil {
		return nil, c.ended(err)
	}
	c.left -= uint64(len(piece))
	if c.frame.masked {
		c.pos = maskBytes(piece, c.frame.key, c.pos)
	}
	if !c.validUTF8(piece) {
		return nil, c.fail(wsInvalidData, "a text message that is not UTF-8")
	}
	spaceLineBreaks(piece)
	if c.left == 0 && c.frame.fin {
		return c.endMessage(piece)
	}
	return piece, nil
}

// endMessage is a message's last piece, with its "\n", once no character
// is left cut at its end.
func (c *wsConn) endMessage(piece []byte) ([]byte, error) {
	c.inMessage = false
	if len(c.carry) > 0 {
		return nil, c.fail(wsInvalidData, "a text message that is not UTF-8")
	}
	return append(piece, '\n'), nil
}

// validUTF8 reports whether b, the next bytes of a message, are UTF-8 so
// far: the character c.carry started is finished first, and one b ends
// in the middle of is kept in c.carry for the next bytes.
func (c *wsConn) validUTF8(b []byte) bool {
	for len(c.carry) > 0 && len(b) > 0 && !utf8.FullRune(c.carry) {
		c.carry, b = append(c.carry, b[0]), b[1:]
	}
	if len(c.carry) > 0 {
		if !utf8.FullRune(c.carry) { // b ran out first
			return true
		}
		if !utf8.Valid(c.carry) {
			return false
		}
		c.carry = c.carry[:0]
	}
	cut := incompleteEnd(b)
	c.carry = append(c.carry, b[cut:]...)
	return utf8.Valid(b[:cut])
}

// readHeader reads a frame's header and refuses what no frame may be:
// reserved bits without an extension, an unknown opcode, a mask where
// none belongs or none where one must be, a length with its top bit set,
// a control frame fragmented or over 125 bytes.
func (c *wsConn) readHeader() (wsHeader, error) {
	var h wsHeader
	if _, err := io.ReadFull(c.in, c.head[:2]); err != nil {
		return h, c.ended(err)
	}
	first, second := c.head[0], c.head[1]
	h.fin, h.op, h.masked = first&0x80 != 0, first&0x0F, second&0x80 != 0
	h.length = uint64(second & 0x7F)
	switch {
	case first&0x70 != 0:
		return h, c.fail(wsProtocolError, "reserved bits set, with no extension agreed")
	case h.op > wsBinary && h.op < wsClose || h.op > wsPong:
		return h, c.fail(wsProtocolError, fmt.Sprintf("unknown opcode %#x", h.op))
	case h.masked == c.masks && c.masks:
		return h, c.fail(wsProtocolError, "a masked frame from the server")
	case h.masked == c.masks:
		return h, c.fail(wsProtocolError, "an unmasked frame from the client")
	}
	switch h.length {
	case 126:
		if _, err := io.ReadFull(c.in, c.head[:2]); err != nil {
			return h, c.ended(err)
		}
		h.length = uint64(binary.BigEndian.Uint16(c.head[:2]))
	case 127:
		if _, err := io.ReadFull(c.in, c.head[:8]); err != nil {
			return h, c.ended(err)
		}
		h.length = binary.BigEndian.Uint64(c.head[:8])
		if h.length>>63 != 0 {
			return h, c.fail(wsProtocolError, "a frame length with its top bit set")
		}
	}
	if h.op >= wsClose && (!h.fin || h.length > 125) {
		return h, c.fail(wsProtocolError, "a control frame fragmented or longer than 125 bytes")
	}
	if h.masked {
		if _, err := io.ReadFull(c.in, h.key[:]); err != nil {
			return h, c.ended(err)
		}
	}
	return h, nil
}

// readPayload appends a data frame's payload to c.message, unmasked, as
// it comes: the buffer grows with the bytes read, never past the limit.
func (c *wsConn) readPayload(h wsHeader) error {
	pos := 0
	for left := h.length; left > 0; {
		n := int(min(left, wsReadChunk))
		start := len(c.message)
		c.message = grown(c.message, n, c.maxMessage+1)[:start+n]
		if _, err := io.ReadFull(c.in, c.message[start:]); err != nil {
			c.message = c.message[:start]
			return c.ended(err)
		}
		if h.masked {
			pos = maskBytes(c.message[start:], h.key, pos)
		}
		left -= uint64(n)
	}
	return nil
}

// grown is b with room for n more bytes: its capacity doubles as it
// grows, but never past limit (len(b)+n must not pass it).
func grown(b []byte, n, limit int) []byte {
	need := len(b) + n
	if need <= cap(b) {
		return b
	}
	bigger := make([]byte, len(b), min(max(2*cap(b), need, 512), limit))
	copy(bigger, b)
	return bigger
}

// readControl reads a control frame's payload and acts on it: a ping is
// answered with a pong of the same payload, a pong is ignored, a close
// is answered with a close (its code, or 1000) and ends reading.
func (c *wsConn) readControl(h wsHeader) error {
	payload := c.control[:h.length]
	if _, err := io.ReadFull(c.in, payload); err != nil {
		return c.ended(err)
	}
	if h.masked {
		maskBytes(payload, h.key, 0)
	}
	switch h.op {
	case wsPing:
		c.sendControl(wsPong, payload)
		return nil
	case wsPong:
		return nil
	}
	code := wsNormal
	switch {
	case len(payload) == 1:
		return c.fail(wsProtocolError, "a close frame with a one-byte payload")
	case len(payload) >= 2:
		code = int(binary.BigEndian.Uint16(payload))
		if !validCloseCode(code) {
			return c.fail(wsProtocolError, fmt.Sprintf("a close frame with code %d, which may not be sent", code))
		}
		if !utf8.Valid(payload[2:]) {
			return c.fail(wsInvalidData, "a close frame whose reason is not UTF-8")
		}
	}
	c.sendClose(code, "")
	return io.EOF
}

// validCloseCode reports whether a peer may send code in a close frame
// (RFC 6455 7.4; 1012-1014 registered since).
func validCloseCode(code int) bool {
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1014:
		return true
	default:
		return code >= 3000 && code <= 4999
	}
}

// fail closes the connection for a protocol breach: the close frame with
// code and why goes out, and the error ends reading.
func (c *wsConn) fail(code int, why string) error {
	c.sendClose(code, why)
	return &wsError{code: code, why: why}
}

// ended is a read's error as Read returns it: the socket's end, in a
// frame or between frames, or the socket closed by Close, is io.EOF.
func (c *wsConn) ended(err error) error {
	if err == io.ErrUnexpectedEOF || c.closed.Load() {
		return io.EOF
	}
	return err
}
