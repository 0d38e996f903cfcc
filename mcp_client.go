package main

// An MCP client over a server's stdio: JSON-RPC 2.0, one message per line
// (MCP's stdio transport). rpi sends requests and notifications; the
// server answers, sends notifications (progress, a changed tool list, log
// messages) and may ask rpi something (ping, roots/list), which is
// answered here. Everything the server writes is hostile: a line is
// decoded once, strictly enough to route it, and a message longer than
// maxMCPMessage ends the connection.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// mcpProtocolVersion is the version rpi asks for; a server may answer
// with another of mcpProtocolVersions (the newest it speaks).
const mcpProtocolVersion = "2025-06-18"

var mcpProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// maxMCPMessage bounds one message from a server (a tool's answer
// included), as the client's own lines are bounded.
const maxMCPMessage = 16 << 20

// mcpConn is one connection to a server: its messages out through send
// (a line to a child's stdin, or an HTTP POST), its messages in through
// handle (fed from the child's stdout, or from the HTTP answers).
type mcpConn struct {
	server string
	// send delivers one message (a JSON line with its newline) to the
	// server, waiting at most limit for it to be taken, or until ctx ends.
	send   func(ctx context.Context, line []byte, limit time.Duration) error
	stderr io.Writer         // where a panic of its goroutines is told
	log    func(line string) // the server's stderr and messages go here (mcp.log)
	// secrets are the session's keys: what a server sent is shown in a
	// log line cut only once they are out of it (redactedExcerpt).
	secrets *redactor
	// onNotify takes the server's notifications other than progress, on
	// the reader's goroutine, with no lock held.
	onNotify func(method string, params json.RawMessage)
	roots    []mcpRoot // answered to roots/list
	// onEnd is told, once, why the connection ended (with no lock held).
	onEnd func(err error)

	mu      mutex[mcpConnMu] // guards the fields below
	nextID  int64
	waiting map[int64]*mcpPending
	ended   error         // why the connection ended; nil while it is open
	done    chan struct{} // closed when it ends

	line []byte // the reader's partial line (the reader's own)
}

// mcpPending is a request waiting for its answer.
type mcpPending struct {
	reply    chan mcpReply
	progress chan struct{} // a progress notification for it: its timeout starts again (only if it asked for progress)
}

type mcpReply struct {
	result json.RawMessage
	err    error
}

// mcpRoot is one of the roots rpi tells a server of (the session's cwd,
// or one of its other directories).
type mcpRoot struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// mcpError is an error a server answered with.
type mcpError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

func (e *mcpError) Error() string { return e.Message }

func newMCPConn(server string, log func(string), secrets *redactor) *mcpConn {
	return &mcpConn{server: server, log: log, secrets: secrets, waiting: map[int64]*mcpPending{}, done: make(chan struct{})}
}

// excerpt is at most n bytes of what a server sent, for a log line.
func (c *mcpConn) excerpt(text []byte, n int) string {
	return redactedExcerpt(c.secrets, string(text[:min(len(text), n+maxSecretSpan+1)]), n) // a byte more: seen as cut
}

// maxSecretSpan bounds how far past an excerpt's end a key it cuts may
// reach: the text is redacted that far before it is cut.
const maxSecretSpan = 4 << 10

// redactedExcerpt is text with secrets out of it, cut to n bytes
// (clip): redacted before the cut, which can then leave no part of a key
// behind. Only text's first n+maxSecretSpan bytes are redacted, and a
// key that first cut leaves the start of (one longer than
// maxSecretSpan) goes too (redactCut).
func redactedExcerpt(secrets *redactor, text string, n int) string {
	if len(text) > n+maxSecretSpan {
		return clip(secrets.redactCut(text[:n+maxSecretSpan]), n)
	}
	return clip(secrets.redact(text), n)
}

// mcpStdin is the stdio transport's send: a line written to the child's
// stdin, one at a time; a server that stops reading fails the write
// after limit, never holds rpi.
type mcpStdin struct {
	server string
	stderr io.Writer
	mu     mutex[mcpWriteMu] // held while a line is written
	stdin  *os.File
	closed func() // starts stopping the server, whose stdin took no line
}

func (w *mcpStdin) send(ctx context.Context, line []byte, limit time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stdin.SetWriteDeadline(time.Now().Add(limit))
	// An abort ends a write the server does not take at once.
	defer context.AfterFunc(ctx, guarded(w.stderr, "ending an MCP write", func() { w.stdin.SetWriteDeadline(time.Now()) }))()
	if _, err := w.stdin.Write(line); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("MCP server %s does not read what rpi sends", w.server)
		}
		if w.closed != nil {
			w.closed()
		}
		return mcpStdinClosed{fmt.Errorf("MCP server %s: %v", w.server, err)}
	}
	return nil
}

// mcpStdinClosed is a write a stdio server's stdin did not take ("broken
// pipe", "file already closed"): it exited, or closed it, or rpi stopped
// it. It can take nothing more, and is being stopped; why is its
// connection's end's to say ("exited (exit status 3)"), once it is
// reaped, not the pipe's, which comes first or not by chance.
type mcpStdinClosed struct{ error }

// feed takes what the server wrote on stdout, from the child's reader:
// each whole line is one message.
func (c *mcpConn) feed(p []byte) {
	select {
	case <-c.done: // ended: what follows is dropped
		return
	default:
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(c.line)+len(p) > maxMCPMessage {
				c.end(fmt.Errorf("MCP server %s sent a message longer than %d MiB", c.server, maxMCPMessage>>20))
				c.line = nil
				return
			}
			c.line = append(c.line, p...)
			return
		}
		line := p[:i]
		if len(c.line) > 0 {
			if len(c.line)+len(line) > maxMCPMessage {
				c.end(fmt.Errorf("MCP server %s sent a message longer than %d MiB", c.server, maxMCPMessage>>20))
				c.line = nil
				return
			}
			c.line = append(c.line, line...)
			line = c.line
		}
		c.handle(line)
		c.line = c.line[:0]
		if cap(c.line) > 64<<10 { // a big answer's room is not kept
			c.line = nil
		}
		p = p[i+1:]
	}
}

// mcpMessage is any JSON-RPC message, decoded enough to route it.
type mcpMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"` // null is no error; read by resolve
}

// handle routes one message: an answer to the request that waits for it,
// a request of the server's answered, a notification passed on.
func (c *mcpConn) handle(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	if line[0] == '[' { // a batch (JSON-RPC; MCP 2025-03-26): each message in turn
		var batch []json.RawMessage
		if json.Unmarshal(line, &batch) != nil || len(batch) > 1000 {
			c.log("not a JSON-RPC batch rpi takes (ignored): " + c.excerpt(line, 200))
			return
		}
		for _, m := range batch {
			if len(m) > 0 && m[0] == '{' {
				c.handle(m)
			}
		}
		return
	}
	var m mcpMessage
	if err := json.Unmarshal(line, &m); err != nil || m.JSONRPC != "2.0" {
		c.log("not a JSON-RPC message (ignored): " + c.excerpt(line, 200))
		return
	}
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	switch {
	case m.Method != "" && hasID:
		c.answerServer(m)
	case m.Method != "":
		c.notified(m.Method, m.Params)
	case hasID:
		c.resolve(m)
	default:
		c.log("a message with neither method nor id (ignored): " + c.excerpt(line, 200))
	}
}

// resolve hands an answer to the request it answers; one that answers
// nothing rpi asked is logged and dropped.
func (c *mcpConn) resolve(m mcpMessage) {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	c.mu.Lock()
	p := c.waiting[id]
	delete(c.waiting, id)
	c.mu.Unlock()
	if err != nil || p == nil {
		c.log("an answer to no request of rpi's (id " + c.excerpt(m.ID, 40) + ", ignored)")
		return
	}
	switch {
	case len(m.Error) > 0 && string(m.Error) != "null": // an error that is null is none: some servers write both members
		code, message, ok := decodeRPCError(m.Error)
		if !ok {
			p.reply <- mcpReply{err: fmt.Errorf("MCP server %s answered with an error that is not a JSON-RPC error object", c.server)}
			return
		}
		p.reply <- mcpReply{err: &mcpError{Code: code, Message: message}}
	case len(m.Result) == 0:
		p.reply <- mcpReply{err: fmt.Errorf("MCP server %s answered with neither result nor error", c.server)}
	default:
		p.reply <- mcpReply{result: m.Result}
	}
}

// waitingFor reports whether the request id still waits for its answer.
func (c *mcpConn) waitingFor(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting[id] != nil
}

// failRequest fails the request id with err, if it still waits.
func (c *mcpConn) failRequest(id int64, err error) {
	c.mu.Lock()
	p := c.waiting[id]
	delete(c.waiting, id)
	c.mu.Unlock()
	if p != nil {
		p.reply <- mcpReply{err: err}
	}
}

// notified takes a notification: progress restarts its request's
// timeout; the rest go to onNotify.
func (c *mcpConn) notified(method string, params json.RawMessage) {
	if method == "notifications/progress" {
		var progress struct {
			Token json.RawMessage `json:"progressToken"`
		}
		if json.Unmarshal(params, &progress) == nil {
			if id, err := strconv.ParseInt(string(progress.Token), 10, 64); err == nil {
				c.mu.Lock()
				p := c.waiting[id]
				c.mu.Unlock()
				if p != nil && p.progress != nil {
					select {
					case p.progress <- struct{}{}:
					default:
					}
				}
			}
		}
		return
	}
	if c.onNotify != nil {
		c.onNotify(method, params)
	}
}

// answerServer answers a request of the server's: ping and roots/list;
// anything else is not a method rpi has.
func (c *mcpConn) answerServer(m mcpMessage) {
	var result any
	var failure *mcpError
	switch m.Method {
	case "ping":
		result = struct{}{}
	case "roots/list":
		result = map[string]any{"roots": c.roots}
	default:
		failure = &mcpError{Code: -32601, Message: "Method not found: " + m.Method}
	}
	msg := map[string]any{"jsonrpc": "2.0", "id": m.ID}
	if failure != nil {
		msg["error"] = failure
	} else {
		msg["result"] = result
	}
	if err := c.writeUnanswered(msg); err != nil {
		c.log("could not answer " + m.Method + ": " + err.Error())
	}
}

// writeUnanswered sends a message that has no answer (a notification,
// an answer to the server), waiting at most 10 s for the server to take
// it; what the server sends back for it (over HTTP) is not read on.
func (c *mcpConn) writeUnanswered(msg any) error {
	ctx, sent := context.WithCancel(context.Background())
	defer sent()
	return c.write(ctx, msg, 10*time.Second)
}

// write sends one message, waiting at most limit for the server to take
// it (a server that stops reading fails the write, never holds rpi).
func (c *mcpConn) write(ctx context.Context, msg any, limit time.Duration) error {
	line, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	select {
	case <-c.done:
		return c.endedErr()
	default:
	}
	return c.send(ctx, line, limit)
}

// notify sends a notification.
func (c *mcpConn) notify(method string, params any) error {
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	err := c.writeUnanswered(msg)
	if errors.As(err, new(mcpStdinClosed)) { // not on the server's reader (answerServer): its end waits for it
		<-c.done
		return c.endedErr()
	}
	return err
}

// request sends a request and waits for its answer: for at most timeout
// since it was sent or since the server last reported progress on it,
// until ctx ends (the server is told: notifications/cancelled), or until
// the connection ends. params may hold a "_meta" progress token set to
// the request's id (withProgress).
func (c *mcpConn) request(ctx context.Context, method string, params map[string]any, timeout time.Duration, withProgress bool) (json.RawMessage, error) {
	c.mu.Lock()
	if c.ended != nil {
		c.mu.Unlock()
		return nil, c.ended
	}
	c.nextID++
	id := c.nextID
	p := &mcpPending{reply: make(chan mcpReply, 1)}
	if withProgress {
		p.progress = make(chan struct{}, 1)
	}
	c.waiting[id] = p
	c.mu.Unlock()
	// The request's end ends what the transport still reads for it (an
	// HTTP answer's stream), whether it was answered, failed or aborted.
	ctx, ended := context.WithCancel(ctx)
	defer ended()
	forget := func() {
		c.mu.Lock()
		delete(c.waiting, id)
		c.mu.Unlock()
	}
	if params == nil {
		params = map[string]any{}
	}
	if withProgress {
		params["_meta"] = map[string]any{"progressToken": id}
	}
	if err := c.write(ctx, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}, timeout); err != nil &&
		!errors.As(err, new(mcpStdinClosed)) { // that one fails with the end, below
		forget()
		return nil, err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	// Progress starts the timeout again, up to mcpProgressCeiling times it.
	ceiling := time.NewTimer(mcpProgressCeiling * timeout)
	defer ceiling.Stop()
	cancelled := func(reason string) { // told in the background: a server that does not read holds no one
		forget()
		go guarded(c.stderr, "telling an MCP server of a cancel", func() {
			c.notify("notifications/cancelled", map[string]any{"requestId": id, "reason": reason})
		})()
	}
	for {
		select {
		case r := <-p.reply:
			return r.result, r.err
		case <-p.progress:
			timer.Reset(timeout)
		case <-timer.C:
			cancelled("timed out")
			return nil, fmt.Errorf("MCP server %s did not answer in %s", c.server, formatSeconds(timeout))
		case <-ceiling.C:
			cancelled("timed out")
			return nil, fmt.Errorf("MCP server %s reported progress but did not answer in %s", c.server, formatSeconds(mcpProgressCeiling*timeout))
		case <-ctx.Done():
			cancelled("aborted")
			return nil, ctx.Err()
		case <-c.done:
			return nil, c.endedErr()
		}
	}
}

// mcpProgressCeiling bounds how long progress reports keep a request
// alive, in timeouts.
const mcpProgressCeiling = 10

// formatSeconds writes d as pi's messages do: "60s".
func formatSeconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// end ends the connection for err: every request waiting fails with it.
func (c *mcpConn) end(err error) {
	c.mu.Lock()
	first := c.ended == nil
	if first {
		c.ended = err
		close(c.done)
	}
	c.mu.Unlock()
	if first && c.onEnd != nil {
		c.onEnd(err)
	}
}

func (c *mcpConn) endedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended
}

// logWriter is an io.Writer of whole lines to log (a server's stderr).
// Of a line longer than maxLogWriterLine its start is logged, the rest
// dropped: long enough that mcp.log's cut (maxMCPLogLine) sees it cut,
// and redacts a key it cuts in (redactedExcerpt).
type logWriter struct {
	log  func(string)
	part []byte
	long bool // the line in part is longer than maxLogWriterLine
}

// maxLogWriterLine bounds what logWriter keeps of a line.
const maxLogWriterLine = maxMCPLogLine + maxSecretSpan + 1

func (w *logWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		end := i
		if i < 0 {
			end = len(p)
		}
		if !w.long {
			take := min(end, maxLogWriterLine-len(w.part))
			w.part = append(w.part, p[:take]...)
			w.long = take < end
		}
		if i < 0 {
			break
		}
		w.log(string(w.part))
		w.part, w.long = w.part[:0], false
		p = p[i+1:]
	}
	return n, nil
}

var _ io.Writer = (*logWriter)(nil)
