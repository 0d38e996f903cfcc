package main

// MCP's streamable-HTTP transport: each message rpi sends is a POST to
// the server's URL; the server answers a request with one JSON message or
// with a stream of server-sent events that carries its notifications and
// then the answer, and a notification with 202; a stream that ends
// before its answer is resumed with a GET (readAnswer), and the server's
// own stream is a GET opened once the session is initialized (listen).
// The session id the server
// gives (Mcp-Session-Id) and the protocol version agreed on go with every
// later POST; closing sends DELETE. Redirects are not followed (a server
// that sends rpi elsewhere fails), and nothing of a URL or a header is
// written to a message (they may hold a key).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// mcpHTTP is one server's HTTP transport.
type mcpHTTP struct {
	server  string
	url     string
	headers map[string]string
	signIn  *mcpSignIn // the sign-in pi stored for the server; nil when its entry sends its own Authorization
	secrets *redactor  // the session's keys, which the tokens sent join
	conn    *mcpConn
	stderr  io.Writer
	client  *http.Client
	ctx     context.Context // ends when the connection is closed: the streams' reads end
	cancel  context.CancelFunc
	once    sync.Once

	mu      mutex[mcpHTTPMu] // guards session and version
	session string           // Mcp-Session-Id, once the server gave one
	token   string           // the stored sign-in's access token last sent, which DELETE sends too
	version string           // the protocol version agreed on, once it is
}

// openHTTP makes srv's HTTP connection; nothing is sent before
// initialize.
func (m *mcpServers) openHTTP(srv *mcpServer) (*mcpConn, *mcpHTTP) {
	cfg := srv.cfg
	conn := newMCPConn(cfg.name, func(line string) { m.s.mcpLog(cfg.name, line) }, m.s.set.secrets)
	h := &mcpHTTP{server: cfg.name, url: cfg.url, headers: cfg.headers, conn: conn, stderr: m.s.stderr, secrets: m.s.set.secrets}
	// The entry's header values (an X-Api-Key's as an Authorization's) are
	// keys rpi holds, as models.json's are, and so is a token written
	// after a scheme: a server that echoes one puts it in no tool result.
	for _, v := range cfg.headers {
		h.secrets.add(v)
		if token, ok := schemeToken(v); ok {
			h.secrets.add(token)
		}
	}
	// user:PASSWORD@, which goes as Basic authorization: the header's
	// token is a key too.
	if u, err := url.Parse(cfg.url); err == nil && u.User != nil {
		if password, ok := u.User.Password(); ok {
			h.secrets.add(password)
			h.secrets.add(base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + password)))
		}
	}
	h.signIn = newMCPSignIn(m.s.set.agentDir, cfg, m.s.env.clock.Now, m.s.goBackground)
	if h.signIn != nil {
		h.signIn.secrets = h.secrets
	}
	h.ctx, h.cancel = context.WithCancel(m.s.ctx)
	h.client = &http.Client{
		Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, ResponseHeaderTimeout: cfg.timeout,
			TLSHandshakeTimeout: 10 * time.Second, MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute},
		CheckRedirect: func(*http.Request, []*http.Request) error { return errMCPRedirect },
	}
	conn.send = h.sendSignedIn
	m.prepare(srv, conn)
	return conn, h
}

// maxMCPErrorBody bounds what an HTTP error's message shows of its body.
const maxMCPErrorBody = 300

var errMCPRedirect = errors.New("it redirects elsewhere, which rpi does not follow")

func hasHeader(headers map[string]string, name string) bool {
	for k := range headers {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

func (h *mcpHTTP) setVersion(version string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.version = version
}

// initialized opens the server's own event stream (listen): dial calls
// it once the server has taken notifications/initialized, when the
// server may talk.
func (h *mcpHTTP) initialized() {
	go guarded(h.stderr, "reading an MCP server's event stream", h.listen)()
}

// sendSignedIn POSTs one message and waits at most limit for the
// answer's head; its body is read in the background, each message in it
// handled. With a stored sign-in, the POST carries its access token; a
// 401 has it refreshed and the message sent once more.
func (h *mcpHTTP) sendSignedIn(reqCtx context.Context, line []byte, limit time.Duration) error {
	token := ""
	if h.signIn != nil {
		token = h.signIn.token(reqCtx)
	}
	err := h.post(reqCtx, line, limit, token)
	var rejected *mcpRejected
	if !errors.As(err, &rejected) || h.signIn == nil || rejected.needsScope {
		return h.signInError(err, nil)
	}
	fresh, rerr := h.signIn.refresh(reqCtx, token)
	if rerr != nil {
		return h.signInError(err, rerr)
	}
	return h.signInError(h.post(reqCtx, line, limit, fresh), nil)
}

// mcpRejected is a server's 401 (or a 403 asking for more scope, status):
// the request needs a sign-in.
type mcpRejected struct {
	status     int
	needsScope bool
}

func (*mcpRejected) Error() string { return "rejected" }

// signInError is err as the user reads it: a 401 says how to sign in,
// with why a refresh could not help (refresh's error) when there was one;
// for an entry that sends its own Authorization header, it says that
// header was refused (a sign-in of pi's is not sent then).
func (h *mcpHTTP) signInError(err, refresh error) error {
	var rejected *mcpRejected
	if !errors.As(err, &rejected) {
		return err
	}
	if hasHeader(h.headers, "Authorization") {
		status := fmt.Sprintf("HTTP %d", rejected.status)
		if rejected.needsScope {
			status += ": it asks for more access"
		}
		return fmt.Errorf("MCP server %s refused the Authorization header its entry sends (%s): check the key in its headers", h.server, status)
	}
	why := ""
	switch {
	case rejected.needsScope:
		why = " (it asks for more access)"
	case refresh != nil && !errors.Is(refresh, errSignInNeeded) && !errors.Is(refresh, context.Canceled):
		why = " (the stored sign-in could not be refreshed: " + h.redact(refresh.Error()) + ")"
	}
	return &mcpNeedsSignIn{fmt.Sprintf("MCP server %s needs sign-in%s: run `pi mcp login %s`", h.server, why, h.server)}
}

// asksMoreScope reports whether a bearer challenge (WWW-Authenticate)
// asks for more scope: its error is insufficient_scope.
func asksMoreScope(challenge string) bool {
	c := strings.ToLower(challenge)
	return strings.Contains(c, `error="insufficient_scope"`) || strings.Contains(c, "error=insufficient_scope")
}

// mcpSessionGone is a server's 404 to the session rpi sent: the server
// has forgotten it (it restarted, or ended the session), and a new
// connection is needed (mcpServers.ask).
type mcpSessionGone struct{ error }

func (e *mcpSessionGone) Unwrap() error { return e.error }

// mcpNeedsSignIn is a server that refuses rpi until the user signs in
// with pi: its state is needs_sign_in, not failed.
type mcpNeedsSignIn struct{ text string }

func (e *mcpNeedsSignIn) Error() string { return e.text }

// post sends one message with token ("" for none) as its bearer.
func (h *mcpHTTP) post(reqCtx context.Context, line []byte, limit time.Duration, token string) error {
	ctx, cancelCtx := context.WithCancel(h.ctx)
	stopAbort := context.AfterFunc(reqCtx, guarded(h.stderr, "an MCP request's abort", cancelCtx)) // an abort ends the POST, and the reading of its answer
	cancel := func() {
		stopAbort()
		cancelCtx()
	}
	headTimer := time.AfterFunc(limit, guarded(h.stderr, "an MCP request's limit", cancel))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(line))
	if err != nil {
		headTimer.Stop()
		cancel()
		return fmt.Errorf("MCP server %s: its url is not valid", h.server)
	}
	h.setHeaders(req)
	h.useToken(req, token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := h.client.Do(req)
	timedOut := !headTimer.Stop()
	if err != nil {
		cancel()
		return h.failure(err, timedOut, limit)
	}
	if timedOut { // the limit passed as the head came: the answer's reading is cancelled already
		resp.Body.Close()
		cancel()
		return fmt.Errorf("MCP server %s did not answer in %s", h.server, formatSeconds(limit))
	}
	h.keepSession(resp)
	var sent struct {
		ID *int64 `json:"id"`
	}
	json.Unmarshal(line, &sent)
	// answered fails the request line was (when it was one) unless the
	// server has answered it by the end of its answer's body.
	answered := func() {
		if sent.ID != nil {
			h.conn.failRequest(*sent.ID, fmt.Errorf("MCP server %s ended its answer without the result", h.server))
		}
	}
	if resp.StatusCode == http.StatusAccepted {
		resp.Body.Close()
		cancel()
		answered()
		return nil
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, maxMCPErrorBody))
		resp.Body.Close()
		cancel()
		// The server's words may echo a key it was sent, escaped as JSON
		// or URLs escape it (the session's redactor knows those forms), or
		// cut by the snippet's end.
		text := h.secrets.redact(h.redact(string(snippet), token))
		if len(snippet) == maxMCPErrorBody {
			text = h.secrets.redactCut(text)
		}
		detail := escapeControl(strings.TrimSpace(text))
		if detail != "" {
			detail = ": " + detail
		}
		// A 401, or a 403 that asks for more scope (a step-up, as MCP's
		// authorization has it), needs a sign-in, as pi finds.
		moreScope := asksMoreScope(resp.Header.Get("WWW-Authenticate"))
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden && moreScope {
			return &mcpRejected{status: resp.StatusCode, needsScope: moreScope}
		}
		err := fmt.Errorf("MCP server %s answered HTTP %d%s", h.server, resp.StatusCode, detail)
		if resp.StatusCode == http.StatusNotFound && req.Header.Get("Mcp-Session-Id") != "" {
			return &mcpSessionGone{err}
		}
		return err
	}
	kind, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch kind {
	case "application/json":
		go guarded(h.stderr, "reading an MCP answer", func() {
			defer answered()
			defer cancel()
			defer resp.Body.Close()
			body, err := io.ReadAll(io.LimitReader(resp.Body, maxMCPMessage+1))
			switch {
			case len(body) > maxMCPMessage:
				h.conn.end(fmt.Errorf("MCP server %s sent a message longer than %d MiB", h.server, maxMCPMessage>>20))
			case err != nil:
				if ctx.Err() == nil { // not cut by rpi (its request ended, the connection closed)
					h.conn.log("reading an answer: " + err.Error())
				}
			default:
				h.conn.handle(body)
			}
		})()
	case "text/event-stream":
		go guarded(h.stderr, "reading an MCP event stream", func() {
			defer answered()
			defer cancel()
			h.readAnswer(ctx, resp.Body, sent.ID)
		})()
	default:
		resp.Body.Close()
		cancel()
		return fmt.Errorf("MCP server %s answered with content type %q, not JSON or an event stream", h.server, escapeControl(kind))
	}
	return nil
}

// Reconnecting an event stream, as pi does: at most mcpStreamRetries
// times in a row (an event received starts the count again), waiting
// 1 s, then twice as long each time up to 30 s, or the time the
// server's retry field asks (at least 100 ms).
const (
	mcpStreamRetries  = 5
	mcpStreamDelay    = time.Second
	mcpStreamMaxDelay = 30 * time.Second
)

// maxSSEEventID bounds the event id kept to resume a stream with (sent
// back as Last-Event-ID): a longer one is ignored.
const maxSSEEventID = 1 << 10

// readAnswer reads the event stream that answers the request id (nil
// for none) until it has brought the answer (a server that keeps it open
// holds nothing). A stream that ends or breaks first, after events with
// ids, is resumed as pi resumes it: a GET with the last id as
// Last-Event-ID (streamRetries, backoff); without ids, or once the
// retries are spent, the request fails.
func (h *mcpHTTP) readAnswer(ctx context.Context, body io.ReadCloser, id *int64) {
	done := func() bool { return id != nil && !h.conn.waitingFor(*id) }
	var cursor sseCursor
	for attempt := 0; ; {
		var err error
		if body != nil {
			err = readSSE(body, h.conn.handle, done, &cursor)
			body.Close()
			body = nil
			if err != nil && ctx.Err() == nil && !done() {
				h.conn.log("reading an event stream: " + err.Error())
			}
			if errors.Is(err, errEventTooLong) && id != nil { // the call fails saying why, as a JSON answer's would
				h.conn.failRequest(*id, fmt.Errorf("MCP server %s sent a message longer than %d MiB", h.server, maxMCPMessage>>20))
				return
			}
		}
		if cursor.received {
			attempt = 0
		}
		if done() || ctx.Err() != nil || id == nil || !cursor.hasID || attempt >= mcpStreamRetries {
			return
		}
		cursor.received = false
		if !sleepCtx(ctx, cursor.delay(attempt)) {
			return
		}
		attempt++
		var retry bool
		body, retry, err = h.openStream(ctx, cursor.lastID, true)
		if err != nil && ctx.Err() == nil {
			h.conn.log("resuming an event stream: " + err.Error())
		}
		if err != nil && !retry {
			return
		}
	}
}

// listen reads the server's own event stream (a GET), which carries what
// it sends unasked (a changed tool list, a log message, a request of its
// own), as pi does once the session is initialized: a 405 says the
// server offers none. A stream that ends or breaks is opened again
// (resumed after its last id) as an answer's stream is (readAnswer's
// backoff): an event received, or a stream that stayed open longer than
// the longest wait, starts the count of retries again; once they are
// spent, or at an error no retry helps, the server's stream is left
// closed, with a line in mcp.log. The connection's close ends it.
func (h *mcpHTTP) listen() {
	var cursor sseCursor
	never := func() bool { return false }
	for attempt := 0; ; {
		body, retry, err := h.openStream(h.ctx, cursor.lastID, cursor.hasID)
		if err == nil {
			opened := time.Now()
			err = readSSE(body, h.conn.handle, never, &cursor)
			body.Close()
			retry = !errors.Is(err, errEventTooLong)
			if cursor.received || time.Since(opened) > mcpStreamMaxDelay {
				attempt = 0
			}
		}
		switch {
		case h.ctx.Err() != nil || errors.Is(err, errNoGetStream):
			return
		case !retry:
			h.conn.log("the server's event stream: " + err.Error())
			return
		case attempt >= mcpStreamRetries:
			h.conn.log("the server's event stream ended and could not be opened again")
			return
		}
		cursor.received = false
		if !sleepCtx(h.ctx, cursor.delay(attempt)) {
			return
		}
		attempt++
	}
}

// sleepCtx waits d, or until ctx ends: false then.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// errNoGetStream is a server's 405 to a GET: it offers no event stream
// of its own.
var errNoGetStream = errors.New("the server offers no GET stream (405)")

// errStreamRefused is a server's 401 to a GET.
var errStreamRefused = errors.New("HTTP 401")

// openStream GETs the server's event stream, resuming after lastID when
// resume is set. retry tells whether a failure is worth trying again
// (the connection failed, or 408, 429, 5xx), as pi has it. With a
// stored sign-in, the GET carries its access token, and a 401 has it
// refreshed and the GET sent once more, as a POST is (send).
func (h *mcpHTTP) openStream(ctx context.Context, lastID string, resume bool) (body io.ReadCloser, retry bool, err error) {
	token := ""
	if h.signIn != nil {
		token = h.signIn.token(ctx)
	}
	body, retry, err = h.getStream(ctx, lastID, resume, token)
	if errors.Is(err, errStreamRefused) && h.signIn != nil {
		if fresh, rerr := h.signIn.refresh(ctx, token); rerr == nil {
			body, retry, err = h.getStream(ctx, lastID, resume, fresh)
		}
	}
	return body, retry, err
}

// getStream is openStream's GET, with token ("" for none) as its bearer.
func (h *mcpHTTP) getStream(ctx context.Context, lastID string, resume bool, token string) (body io.ReadCloser, retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url, nil)
	if err != nil {
		return nil, false, fmt.Errorf("its url is not valid")
	}
	h.setHeaders(req)
	h.useToken(req, token)
	req.Header.Set("Accept", "text/event-stream")
	if resume {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, true, withoutURL(err)
	}
	h.keepSession(resp)
	kind, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode == http.StatusMethodNotAllowed:
		resp.Body.Close()
		return nil, false, errNoGetStream
	case resp.StatusCode == http.StatusUnauthorized:
		resp.Body.Close()
		return nil, false, errStreamRefused
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		resp.Body.Close()
		s := resp.StatusCode
		return nil, s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500, fmt.Errorf("HTTP %d", s)
	case kind != "text/event-stream":
		resp.Body.Close()
		return nil, false, fmt.Errorf("content type %q, not an event stream", escapeControl(kind))
	}
	return resp.Body, false, nil
}

// useToken sends token, when there is one, as req's bearer, and keeps
// it as the one last sent (which DELETE sends too).
func (h *mcpHTTP) useToken(req *http.Request, token string) {
	if token == "" {
		return
	}
	h.secrets.add(token)
	req.Header.Set("Authorization", "Bearer "+token)
	h.mu.Lock()
	h.token = token
	h.mu.Unlock()
}

// keepSession keeps the session id resp gives, when it is one.
func (h *mcpHTTP) keepSession(resp *http.Response) {
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" && isSessionID(id) {
		h.mu.Lock()
		h.session = id
		h.mu.Unlock()
	}
}

// failure is why a POST got no answer, without the URL (which may hold
// a key).
func (h *mcpHTTP) failure(err error, timedOut bool, limit time.Duration) error {
	err = withoutURL(err)
	switch {
	case errors.Is(err, errMCPRedirect):
		return fmt.Errorf("MCP server %s: %v", h.server, err)
	case timedOut:
		return fmt.Errorf("MCP server %s did not answer in %s", h.server, formatSeconds(limit))
	case h.ctx.Err() != nil:
		return fmt.Errorf("MCP server %s: the connection was closed", h.server)
	}
	return fmt.Errorf("MCP server %s cannot be reached: %v", h.server, err)
}

// redact takes the values of the entry's headers (a key, a token, and
// the token after its scheme: schemeToken) and the secrets more out of
// text a server sent, which may echo what it was sent.
func (h *mcpHTTP) redact(text string, more ...string) string {
	for _, v := range append(slices.Collect(maps.Values(h.headers)), more...) {
		token, _ := schemeToken(v)
		for _, secret := range []string{v, token} {
			if len(secret) >= 4 {
				text = strings.ReplaceAll(text, secret, "[redacted]")
			}
		}
	}
	return text
}

// setHeaders adds the entry's headers, the session id and the agreed
// version to req.
func (h *mcpHTTP) setHeaders(req *http.Request) {
	for k, v := range h.headers {
		req.Header.Set(k, v)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.session != "" {
		req.Header.Set("Mcp-Session-Id", h.session)
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	if h.version != "" {
		req.Header.Set("MCP-Protocol-Version", h.version)
	}
}

// close ends the server's session (DELETE, when it gave one, for at most
// 2 s) and every stream still read.
func (h *mcpHTTP) close() {
	h.once.Do(func() {
		h.mu.Lock()
		session := h.session
		h.mu.Unlock()
		if session != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if req, err := http.NewRequestWithContext(ctx, http.MethodDelete, h.url, nil); err == nil {
				h.setHeaders(req)
				if resp, err := h.client.Do(req); err == nil {
					resp.Body.Close()
				}
			}
			cancel()
		}
		h.cancel()
		h.client.CloseIdleConnections()
		h.conn.end(fmt.Errorf("MCP server %s: the connection was closed", h.server))
	})
}

// maxMCPSessionID bounds the session id rpi keeps (and sends with every
// request): MCP asks for visible ASCII and sets no length, and pi takes
// any; 8 KiB is more than a server needs (a UUID, a signed token) and
// as much as common proxies take of one header line.
const maxMCPSessionID = 8 << 10

// isSessionID reports whether id can be an Mcp-Session-Id: visible ASCII,
// at most maxMCPSessionID bytes.
func isSessionID(id string) bool {
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return len(id) <= maxMCPSessionID
}

// isHeaderText reports whether b is printable ASCII (spaces too): text
// an HTTP header can carry as it is.
func isHeaderText(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// errEventTooLong ends an event stream whose event (or one line of it)
// is longer than maxMCPMessage.
var errEventTooLong = errors.New("an event longer than 16 MiB")

// sseCursor is what a stream's reading has seen that resuming it needs:
// the last event id (hasID once there is one), the server's retry time,
// and whether an event came since received was last reset.
type sseCursor struct {
	lastID   string
	hasID    bool
	retry    time.Duration // 0: none given
	received bool
}

// delay is the wait before reconnect attempt (0 the first): the server's
// retry time when it gave one, else a backoff from mcpStreamDelay.
func (c *sseCursor) delay(attempt int) time.Duration {
	if c.retry > 0 {
		return min(max(c.retry, 100*time.Millisecond), mcpStreamMaxDelay)
	}
	return min(mcpStreamDelay<<attempt, mcpStreamMaxDelay)
}

// readSSE reads server-sent events and hands each message event's data
// to handle; an event longer than maxMCPMessage ends the stream. Lines
// are split as a model server's are (eventLines): "\r\n", "\n" or "\r"
// alone, a byte order mark first skipped. cursor (when not nil) keeps
// the ids and retry times the stream gives.
func readSSE(r io.Reader, handle func([]byte), done func() bool, cursor *sseCursor) error {
	if cursor == nil {
		cursor = &sseCursor{}
	}
	lines := eventLines{r: bufio.NewReaderSize(r, 64<<10)}
	if bom, _ := lines.r.Peek(3); string(bom) == "\uFEFF" {
		lines.r.Discard(3)
	}
	var data []byte
	hasData := false
	for {
		// A line may hold a whole message after its "data: ": the
		// message's own bound is the data's, below.
		line, tooLong, err := lines.next(maxMCPMessage + len("data: "))
		if tooLong {
			return errEventTooLong
		}
		if err != nil && len(line) == 0 {
			return err
		}
		switch {
		case len(line) == 0: // the event's end
			if hasData {
				cursor.received = true
				handle(data)
			}
			data, hasData = data[:0], false
			if done() {
				return nil
			}
		case line[0] == ':': // a comment
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "id": // kept to resume with, when it can go in a header
				if len(value) <= maxSSEEventID && isHeaderText(value) {
					cursor.lastID, cursor.hasID = string(value), true
				}
				continue
			case "retry":
				if ms, err := strconv.ParseUint(string(value), 10, 32); err == nil {
					cursor.retry = time.Duration(ms) * time.Millisecond
				}
				continue
			case "data":
			default:
				continue // event: an MCP message is in data
			}
			if len(data)+len(value) > maxMCPMessage {
				return errEventTooLong
			}
			if hasData {
				data = append(data, '\n')
			}
			data, hasData = append(data, value...), true
		}
	}
}
