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
	// server, waiting at most limit for it to be taken.
	send func(line []byte, limit time.Duration) error
	log  func(line string) // the server's stderr and messages go here (mcp.log)
	// onNotify takes the server's notifications other than progress, on
	// the reader's goroutine, with no lock held.
	onNotify func(method string, params json.RawMessage)
	roots    []mcpRoot // answered to roots/list

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
	progress chan struct{} // a progress notification for it: its timeout starts again
}

type mcpReply struct {
	result json.RawMessage
	err    error
}

// mcpRoot is one of the roots rpi tells a server of (the session's cwd).
type mcpRoot struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// mcpError is an error a server answered with.
type mcpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *mcpError) Error() string { return e.Message }

func newMCPConn(server string, log func(string)) *mcpConn {
	return &mcpConn{server: server, log: log, waiting: map[int64]*mcpPending{}, done: make(chan struct{})}
}

// mcpStdin is the stdio transport's send: a line written to the child's
// stdin, one at a time; a server that stops reading fails the write
// after limit, never holds rpi.
type mcpStdin struct {
	server string
	mu     mutex[mcpWriteMu] // held while a line is written
	stdin  *os.File
}

func (w *mcpStdin) send(line []byte, limit time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stdin.SetWriteDeadline(time.Now().Add(limit))
	if _, err := w.stdin.Write(line); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("MCP server %s does not read what rpi sends", w.server)
		}
		return fmt.Errorf("MCP server %s: %v", w.server, err)
	}
	return nil
}

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
	Error   *mcpError       `json:"error"`
}

// handle routes one message: an answer to the request that waits for it,
// a request of the server's answered, a notification passed on.
func (c *mcpConn) handle(line []byte) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	var m mcpMessage
	if err := json.Unmarshal(line, &m); err != nil || m.JSONRPC != "2.0" {
		c.log(fmt.Sprintf("not a JSON-RPC message (ignored): %.200s", line))
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
		c.log(fmt.Sprintf("a message with neither method nor id (ignored): %.200s", line))
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
		c.log(fmt.Sprintf("an answer to no request of rpi's (id %.40s, ignored)", m.ID))
		return
	}
	switch {
	case m.Error != nil:
		p.reply <- mcpReply{err: m.Error}
	case len(m.Result) == 0:
		p.reply <- mcpReply{err: fmt.Errorf("MCP server %s answered with neither result nor error", c.server)}
	default:
		p.reply <- mcpReply{result: m.Result}
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
				if p != nil {
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
	if err := c.write(msg, 10*time.Second); err != nil {
		c.log("could not answer " + m.Method + ": " + err.Error())
	}
}

// write sends one message, waiting at most limit for the server to take
// it (a server that stops reading fails the write, never holds rpi).
func (c *mcpConn) write(msg any, limit time.Duration) error {
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
	return c.send(line, limit)
}

// notify sends a notification.
func (c *mcpConn) notify(method string, params any) error {
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	return c.write(msg, 10*time.Second)
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
	p := &mcpPending{reply: make(chan mcpReply, 1), progress: make(chan struct{}, 1)}
	c.waiting[id] = p
	c.mu.Unlock()
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
	if err := c.write(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}, timeout); err != nil {
		forget()
		return nil, err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	cancelled := func(reason string) {
		forget()
		c.notify("notifications/cancelled", map[string]any{"requestId": id, "reason": reason})
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
		case <-ctx.Done():
			cancelled("aborted")
			return nil, ctx.Err()
		case <-c.done:
			return nil, c.endedErr()
		}
	}
}

// formatSeconds writes d as pi's messages do: "60s".
func formatSeconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// end ends the connection for err: every request waiting fails with it.
func (c *mcpConn) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended != nil {
		return
	}
	c.ended = err
	close(c.done)
}

func (c *mcpConn) endedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended
}

// logWriter is an io.Writer of whole lines to log (a server's stderr).
type logWriter struct {
	log  func(string)
	part []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(w.part) < 4096 {
				w.part = append(w.part, p[:min(len(p), 4096-len(w.part))]...)
			}
			break
		}
		w.log(string(append(w.part, p[:i]...)))
		w.part = w.part[:0]
		p = p[i+1:]
	}
	return n, nil
}

var _ io.Writer = (*logWriter)(nil)
