package main

// The Agent Client Protocol's wire (docs/acp.md): JSON-RPC 2.0, one
// message a line both ways, through the same line reader and the same one
// locked writer as the rpc wire. Input is decoded once, strictly (exact
// keys, the types each field must have: acp_decode.go); every kind of bad
// input gets its JSON-RPC error and the connection goes on. Requests the agent makes of
// the client (session/request_permission, elicitation/create, fs/*,
// terminal/*) are matched to their answers by id; one rpi stops waiting
// for (its turn was cancelled) is withdrawn with $/cancel_request.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// acpProtocolVersion is the ACP version rpi speaks.
const acpProtocolVersion = 1

// JSON-RPC's error codes, and ACP's.
const (
	acpParseError       = -32700
	acpInvalidRequest   = -32600
	acpMethodNotFound   = -32601
	acpInvalidParams    = -32602
	acpInternalError    = -32603
	acpAuthRequired     = -32000 // Zed opens its login view on it
	acpResourceNotFound = -32002
	acpRequestCancelled = -32800 // a request the client withdrew ($/cancel_request)
)

// acpError is a JSON-RPC error object: a code and a message a user reads.
type acpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *acpError) Error() string { return e.Message }

// invalidParams is a -32602 whose message names the field.
func invalidParams(format string, args ...any) *acpError {
	return &acpError{Code: acpInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// paramError makes a field error (a *fieldError: "Missing field cwd: must
// be …") a -32602 with the same message; an *acpError stays as it is.
func paramError(err error) error {
	var e *acpError
	var f *fieldError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return e
	case errors.As(err, &f):
		return &acpError{Code: acpInvalidParams, Message: f.Error()}
	}
	return err // not the params' fault: an internal error (answer hides its details)
}

// ---- Writing ----

// appendACPHead appends a message's opening: jsonrpc and, for a request
// or response, its id (nil: null).
func appendACPHead(buf []byte, id json.RawMessage, withID bool) []byte {
	buf = append(buf, `{"jsonrpc":"2.0"`...)
	if withID {
		buf = append(buf, `,"id":`...)
		if id == nil {
			id = json.RawMessage("null")
		}
		buf = append(buf, id...)
	}
	return buf
}

// appendACPResult appends a success response; a nil result is {}.
func appendACPResult(buf []byte, id json.RawMessage, result any) ([]byte, error) {
	buf = append(appendACPHead(buf, id, true), `,"result":`...)
	if result == nil {
		return append(buf, "{}}"...), nil
	}
	buf, err := appendPayload(buf, result)
	return append(buf, '}'), err
}

// appendACPError appends an error response.
func appendACPError(buf []byte, id json.RawMessage, e *acpError) ([]byte, error) {
	buf = append(appendACPHead(buf, id, true), `,"error":`...)
	buf, err := appendMarshal(buf, e)
	return append(buf, '}'), err
}

// appendACPCall appends a notification (id nil) or a request of method.
func appendACPCall(buf []byte, id json.RawMessage, method string, params any) ([]byte, error) {
	buf = appendACPHead(buf, id, id != nil)
	buf = append(buf, `,"method":`...)
	buf = appendJSONString(buf, method)
	buf = append(buf, `,"params":`...)
	buf, err := appendPayload(buf, params)
	return append(buf, '}'), err
}

// ---- The connection ----

// acpConn is one ACP connection's output and the requests rpi has made
// of the client that wait for an answer.
type acpConn struct {
	link   *connection // the client's lines and the one writer of what it reads
	out    *output     // link's writer
	stderr io.Writer
	// mistakes is where the client's own protocol mistakes are told (a
	// response to nothing rpi asked, a request sent as a notification):
	// stderr with --verbose or RPI_DEBUG=1, else nowhere — editors show
	// an agent's stderr to the user.
	mistakes io.Writer

	// orderMu is held while one of rpi's requests is given its id and
	// written, so that the client sees the ids in the order given. It is
	// taken before mu, which is let go of before the write: a client that
	// stops reading holds up rpi's next requests, never the input loop,
	// which takes mu to route answers and withdrawals.
	orderMu mutex[acpOrderMu]

	mu      mutex[acpConnMu] // guards the fields below; nothing is written under it
	nextID  int64
	waiting map[string]chan acpReply // by the id as written
	givenUp map[string]bool          // requests rpi gave up on ($/cancel_request) whose answer has not come, by id
	closed  bool                     // input ended: no answer will come
	// open are the client's requests answered in the background, by id
	// as written, until they are answered: what $/cancel_request can end
	// (withdraw).
	open map[string]*acpOpenRequest
}

// acpOpenRequest is a request of the client's not answered yet. A
// prompt's is withdrawn by its session's cancel (then it answers
// cancelled); any other's by an answer -32800 at once, its own answer
// dropped when it comes (withdrawn).
type acpOpenRequest struct {
	cancel    func() // a prompt's: its session's cancel; nil for any other
	withdrawn bool
}

// acpMaxGivenUp bounds the requests given up on remembered: past it they
// are forgotten, and a late answer to one is dropped with a line on
// stderr, as an answer to nothing rpi asked is.
const acpMaxGivenUp = 1024

// acpCancelParams is $/cancel_request's params: the id of the request
// rpi gives up on.
type acpCancelParams struct {
	RequestID json.RawMessage `json:"requestId"`
}

// acpReply is the client's answer to one of rpi's requests.
type acpReply struct {
	result  json.RawMessage
	err     *acpError
	notUTF8 bool // it had bytes that are not UTF-8, or lone surrogates' escapes, each taken as U+FFFD
}

// errConnectionClosed fails a request rpi made once the client's input
// has ended.
var errConnectionClosed = &acpError{Code: acpInternalError, Message: "the client closed the connection"}

func newACPConn(link *connection, stderr io.Writer, verbose bool) *acpConn {
	c := &acpConn{link: link, out: link.out, stderr: stderr, mistakes: io.Discard, waiting: map[string]chan acpReply{},
		givenUp: map[string]bool{}, open: map[string]*acpOpenRequest{}}
	if verbose {
		c.mistakes = stderr
	}
	return c
}

// answer writes the response to a request: result, or err as its
// JSON-RPC error. An error that is not an *acpError is an internal
// failure: its details go to stderr, the client gets a message without
// them. gather (the loop's own answers) lets it wait for the rest of the
// input batch (output.gather). It reports false, writing nothing, for a
// request the client withdrew ($/cancel_request): that was answered.
func (c *acpConn) answer(id json.RawMessage, method string, result any, err error, gather bool) bool {
	if !c.settle(id) {
		return false
	}
	encode := func(buf []byte) ([]byte, error) {
		if err != nil {
			return appendACPError(buf, id, c.wireError(method, err))
		}
		mark := len(buf)
		out, encErr := appendACPResult(buf, id, result)
		if encErr != nil {
			fmt.Fprintf(c.stderr, "rpi: %s: cannot encode the answer: %v\n", method, encErr)
			return appendACPError(buf[:mark], id, &acpError{Code: acpInternalError, Message: "Internal error in " + method})
		}
		return out, nil
	}
	if gather {
		c.out.gather(encode)
	} else {
		c.out.send(encode)
	}
	return true
}

// keepOpen notes a request answered in the background (cancel: a
// prompt's session cancel), which $/cancel_request can withdraw until
// it is answered. Called before the work that answers it starts.
func (c *acpConn) keepOpen(id json.RawMessage, cancel func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open[string(id)] = &acpOpenRequest{cancel: cancel}
}

// settle takes a request out of the open ones as it is answered; false
// when the client withdrew it (it was answered then).
func (c *acpConn) settle(id json.RawMessage) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.open[string(id)]
	delete(c.open, string(id))
	return r == nil || !r.withdrawn
}

// withdraw is the client's $/cancel_request of one of its requests: a
// prompt's session is cancelled (the prompt then answers cancelled); any
// other open request is answered -32800 at once, and its own answer
// dropped. false when no request with that id is open (answered already,
// or never sent).
func (c *acpConn) withdraw(id json.RawMessage) bool {
	c.mu.Lock()
	r := c.open[string(id)]
	switch {
	case r == nil || r.withdrawn:
		c.mu.Unlock()
		return false
	case r.cancel != nil:
		c.mu.Unlock()
		r.cancel()
		return true
	}
	r.withdrawn = true
	c.mu.Unlock()
	c.fail(id, &acpError{Code: acpRequestCancelled, Message: "Request cancelled"})
	return true
}

// wireError is err as the client gets it.
func (c *acpConn) wireError(method string, err error) *acpError {
	var e *acpError
	if errors.As(err, &e) {
		return e
	}
	fmt.Fprintf(c.stderr, "rpi: %s: %v\n", method, err)
	return &acpError{Code: acpInternalError, Message: "Internal error in " + method}
}

// fail writes an error that answers no known method (bad input).
func (c *acpConn) fail(id json.RawMessage, e *acpError) {
	c.out.gather(func(buf []byte) ([]byte, error) { return appendACPError(buf, id, e) })
}

// notify writes a notification.
func (c *acpConn) notify(method string, params any) {
	c.out.send(func(buf []byte) ([]byte, error) { return appendACPCall(buf, nil, method, params) })
}

// request sends a request to the client and waits for its answer, for ctx
// to end, or for the input to end. An error answer comes back as an
// *acpError with the client's code. When ctx ends first (the turn that
// made the request was cancelled, the session closed), rpi gives up on
// the request (giveUp).
func (c *acpConn) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	r, err := c.requestReply(ctx, method, params)
	return r.result, err
}

// requestReply is request, with the whole answer. The request is
// written under orderMu alone: a client that does not read holds up the
// requests after it, not the input loop.
func (c *acpConn) requestReply(ctx context.Context, method string, params any) (acpReply, error) {
	reply := make(chan acpReply, 1)
	c.orderMu.Lock() // the ids are written in the order given
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.orderMu.Unlock()
		return acpReply{}, errConnectionClosed
	}
	id := strconv.AppendInt(nil, c.nextID, 10)
	c.nextID++
	c.waiting[string(id)] = reply
	c.mu.Unlock()
	c.out.send(func(buf []byte) ([]byte, error) { return appendACPCall(buf, id, method, params) })
	c.orderMu.Unlock()
	select {
	case r := <-reply:
		return r.outcome()
	case <-ctx.Done():
		// The reply may have come too (the connection's end comes before
		// the cancellation it brings: shutdown): it says what ended the wait.
		select {
		case r := <-reply:
			return r.outcome()
		default:
		}
		c.giveUp(id)
		return acpReply{}, ctx.Err()
	}
}

// outcome is the reply as requestReply gives it: its error, else itself.
func (r acpReply) outcome() (acpReply, error) {
	if r.err != nil {
		return acpReply{}, r.err
	}
	return r, nil
}

// giveUp stops waiting for the answer to rpi's request id and withdraws
// it ($/cancel_request), unless the answer came meanwhile or the input has
// ended. The answer the client still owes (JSON-RPC has it answer a
// cancelled request all the same) is dropped without a word.
func (c *acpConn) giveUp(id json.RawMessage) {
	c.mu.Lock()
	if _, waiting := c.waiting[string(id)]; !waiting || c.closed {
		c.mu.Unlock()
		return
	}
	delete(c.waiting, string(id))
	if len(c.givenUp) >= acpMaxGivenUp {
		clear(c.givenUp)
	}
	c.givenUp[string(id)] = true
	c.mu.Unlock()
	// Written without c.mu, after the request, whose write has ended. An
	// answer that comes in between is dropped all the same; the client,
	// which answered, takes the withdrawal for nothing.
	c.out.send(func(buf []byte) ([]byte, error) {
		return appendACPCall(buf, nil, "$/cancel_request", acpCancelParams{id})
	})
}

// deliver hands a response to the request it answers; one that answers
// nothing rpi asked (or asked and stopped waiting for) is dropped.
func (c *acpConn) deliver(msg *acpMessage) {
	if !c.resolve(msg) {
		fmt.Fprintf(c.mistakes, "rpi: a response to id %s, which rpi is not waiting for: dropped\n", msg.id)
	}
}

// resolve hands a response to the request it answers, and reports whether
// rpi was waiting for it, or gave up on it (the answer is dropped then).
func (c *acpConn) resolve(msg *acpMessage) bool {
	c.mu.Lock()
	reply, ok := c.waiting[string(msg.id)]
	delete(c.waiting, string(msg.id))
	givenUp := c.givenUp[string(msg.id)]
	delete(c.givenUp, string(msg.id))
	c.mu.Unlock()
	if givenUp {
		return true
	}
	if ok {
		reply <- acpReply{msg.result, msg.failure, msg.notUTF8}
	}
	return ok
}

// close ends every wait for the client: the input has ended.
// isClosed reports whether the connection is closed (its input ended).
func (c *acpConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *acpConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for id, reply := range c.waiting {
		reply <- acpReply{err: errConnectionClosed}
		delete(c.waiting, id)
	}
}

// ---- Requests to the client ----

// acpCallFailed reports whether a call failed because the client does
// not have the method (-32601).
func acpMethodMissing(err error) bool {
	var e *acpError
	return errors.As(err, &e) && e.Code == acpMethodNotFound
}

// readTextFile asks the client for a file's text (fs/read_text_file):
// the editor's buffer, unsaved edits included. line (1-based) and limit
// are left out when 0. A result that is not {content: string} (an SDK
// client without the handler answers null) is an error. notUTF8 reports
// an answer that had bytes that are not UTF-8 (a file in another
// encoding), or escapes of lone surrogates, each taken as U+FFFD.
func (c *acpConn) readTextFile(ctx context.Context, sessionID, path string, line, limit int) (text string, notUTF8 bool, err error) {
	params := struct {
		SessionID string `json:"sessionId"`
		Path      string `json:"path"`
		Line      int    `json:"line,omitempty"`
		Limit     int    `json:"limit,omitempty"`
	}{sessionID, path, line, limit}
	r, err := c.requestReply(ctx, "fs/read_text_file", params)
	if err != nil {
		return "", false, err
	}
	var result struct {
		Content *string `json:"content"`
	}
	if json.Unmarshal(r.result, &result) != nil || result.Content == nil {
		return "", false, fmt.Errorf("the editor answered fs/read_text_file for %s without its content", path)
	}
	return *result.Content, r.notUTF8, nil
}

// writeTextFile has the client write a file (fs/write_text_file): the
// editor shows its review and saves it.
func (c *acpConn) writeTextFile(ctx context.Context, sessionID, path, content string) error {
	params := struct {
		SessionID string `json:"sessionId"`
		Path      string `json:"path"`
		Content   string `json:"content"`
	}{sessionID, path, content}
	_, err := c.request(ctx, "fs/write_text_file", params)
	return err
}

// acpPermissionOption is one button of a permission request.
type acpPermissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"` // allow_once, allow_always, reject_once, reject_always
}

// requestPermission asks the user (session/request_permission) about a
// tool call and returns the option chosen, or "" when the request was
// cancelled, failed or the connection closed. It waits with no timeout,
// until ctx ends. The answer is read by exact key, as the client's
// requests are: {outcome: {outcome: "selected", optionId}} with an option
// offered chooses it; anything else chooses nothing.
func (c *acpConn) requestPermission(ctx context.Context, sessionID string, call acpToolCallUpdate, options []acpPermissionOption) string {
	params := struct {
		SessionID string                `json:"sessionId"`
		ToolCall  acpToolCallUpdate     `json:"toolCall"`
		Options   []acpPermissionOption `json:"options"`
	}{sessionID, call, options}
	raw, err := c.request(ctx, "session/request_permission", params)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			fmt.Fprintf(c.stderr, "rpi: session/request_permission: %v\n", err)
		}
		return ""
	}
	result, err := paramsOf(raw, "")
	if err != nil || len(raw) == 0 || raw[0] != '{' {
		return ""
	}
	outcome, _, err := result.object("outcome")
	if err != nil {
		return ""
	}
	if kind, _ := outcome.str("outcome"); kind != "selected" {
		return ""
	}
	chosen, err := outcome.str("optionId")
	for _, o := range options {
		if err == nil && o.OptionID == chosen {
			return o.OptionID
		}
	}
	return "" // an option rpi did not offer counts as no
}

// ---- The agent's side of the connection ----

// acpMethod handles one request: it returns the result (nil is {}), an
// error (an *acpError as it is, any other as -32603), or acpDeferred
// when it answers later itself (acpAgent.answerLater).
type acpMethod func(a *acpAgent, req *acpRequest) (any, error)

// acpNotification handles one notification; it answers nothing.
type acpNotification func(a *acpAgent, params acpParams) error

// acpDeferred, returned by a method, means its answer comes later.
type acpDeferred struct{}

// acpAnswerThen, returned by a method, is its answer and what follows it:
// the loop writes result, then runs then (which sends the updates the
// change made) before it takes the next message, so that those updates
// come right after the answer, before any later message's.
type acpAnswerThen struct {
	result any
	then   func()
}

// acpRequest is one request being handled.
type acpRequest struct {
	id     json.RawMessage
	method string
	params acpParams
}

// acpClientCaps are what the client said it can do at initialize.
type acpClientCaps struct {
	readTextFile   bool // fs.readTextFile
	writeTextFile  bool // fs.writeTextFile
	terminal       bool // terminal: the terminal/* methods (the shell option's editor)
	terminalOutput bool // _meta.terminal_output: Zed's display-only terminal

	// Of ACP's newer shapes (acpOffered):
	elicitationForm bool // elicitation.form: the model's free-text questions as forms
	notices         bool // session.notices: rpi's notes as notice updates
	compaction      bool // session.compaction: compactions as compaction_update
}

// acpAgent is rpi's side of one ACP connection, over the host (the
// process: flags, the catalog, the writer, the children): the method
// tables, the client's capabilities, and the sessions open.
type acpAgent struct {
	h             *host
	conn          *acpConn
	methods       map[string]acpMethod
	notifications map[string]acpNotification
	store         sessionStore   // where session files are
	noSession     bool           // --no-session: nothing to load, list, resume or delete
	served        acpSessionHost // rpi serve's host, where the sessions live; nil for rpi acp

	// initialized is set by the loop when initialize is answered; only
	// the loop reads it.
	initialized bool

	mu       mutex[acpAgentMu] // guards the fields below
	client   acpClientCaps
	sessions map[string]*acpSession // the sessions this connection has open, by id (the host's registry holds them)
}

// handleFrame answers one input line: a request gets exactly one
// response (now or later), a notification none, a response goes to the
// request it answers.
func (a *acpAgent) handleFrame(f frame, maxLine int) {
	if f.tooLong {
		tooLong := &acpError{Code: acpParseError, Message: fmt.Sprintf("Parse error: line longer than %d bytes", maxLine)}
		// An answer too long to take (a huge file's text) fails the
		// request it answers, which would otherwise wait for ever.
		if id := acpHeadID(f.line); id != nil && a.conn.resolve(&acpMessage{id: id, response: true, failure: &acpError{
			Code: acpParseError, Message: fmt.Sprintf("the client's answer is longer than %d bytes", maxLine)}}) {
			fmt.Fprintf(a.conn.mistakes, "rpi: the client's answer to id %s is longer than %d bytes: that request failed\n", id, maxLine)
			return
		}
		a.conn.fail(acpHeadRequestID(f.line), tooLong) // under the request's id when its head shows it
		return
	}
	msg, bad, id := decodeACP(f.line)
	switch {
	case bad != nil && msg != nil && a.conn.resolve(msg):
		// a malformed answer to one of rpi's requests: that request
		// failed; the client gets nothing back under rpi's own id
		fmt.Fprintf(a.conn.mistakes, "rpi: %s (id %s)\n", msg.failure.Message, msg.id)
	case bad != nil:
		a.conn.fail(id, bad)
	case msg.response:
		a.conn.deliver(msg)
	case msg.id == nil:
		a.notification(msg)
	default:
		a.request(msg)
	}
}

// notification handles a message with a method and no id at all: it is
// never answered, whatever it holds. One whose method rpi has as a
// request is told as a mistake (a request needs an id).
func (a *acpAgent) notification(msg *acpMessage) {
	handle, ok := a.notifications[msg.method]
	if _, request := a.methods[msg.method]; request {
		fmt.Fprintf(a.conn.mistakes, "rpi: %s came without an id (a notification): it is a request, not answered\n", msg.method)
	}
	if !ok || !a.initialized {
		return // unknown notifications are ignored, as are those before initialize
	}
	params, err := paramsOf(msg.params, "")
	if err == nil {
		_, err = a.safely(msg.method, func() (any, error) { return nil, handle(a, params) })
	}
	if err != nil {
		fmt.Fprintf(a.conn.mistakes, "rpi: %s: %v\n", msg.method, err)
	}
}

// request handles a message with a method and an id — null too, which
// JSON-RPC makes a request all the same: it gets exactly one answer,
// under that id. initialize is answered once a connection: a second one
// is refused, and the client's capabilities stay those of the first.
func (a *acpAgent) request(msg *acpMessage) {
	handle, ok := a.methods[msg.method]
	_, isNotification := a.notifications[msg.method]
	switch {
	case !a.initialized && msg.method != "initialize":
		a.conn.fail(msg.id, &acpError{Code: acpInvalidRequest, Message: "Invalid request: send initialize first"})
		return
	case a.initialized && msg.method == "initialize":
		a.conn.fail(msg.id, &acpError{Code: acpInvalidRequest, Message: "Invalid request: initialize was answered already on this connection (it is sent once)"})
		return
	case !ok && isNotification:
		a.conn.fail(msg.id, &acpError{Code: acpMethodNotFound, Message: "Method not found: " + msg.method + " is a notification: send it without an id"})
		return
	case !ok:
		a.conn.fail(msg.id, &acpError{Code: acpMethodNotFound, Message: "Method not found: " + msg.method})
		return
	}
	params, err := paramsOf(msg.params, "")
	if err != nil {
		a.conn.answer(msg.id, msg.method, nil, err, true)
		return
	}
	call := &acpRequest{id: msg.id, method: msg.method, params: params}
	result, err := a.safely(msg.method, func() (any, error) { return handle(a, call) })
	if _, later := result.(acpDeferred); later && err == nil {
		return
	}
	if answer, ok := result.(acpAnswerThen); ok && err == nil {
		a.conn.answer(msg.id, msg.method, answer.result, nil, true)
		a.safely(msg.method, func() (any, error) { answer.then(); return nil, nil }) // answered: a panic is told on stderr only
		return
	}
	if err == nil && msg.method == "initialize" {
		a.initialized = true
	}
	a.conn.answer(msg.id, msg.method, result, err, true)
}

// safely runs work, turning a panic into an internal error (its stack
// to stderr), so one bug never stops the connection.
func (a *acpAgent) safely(what string, work func() (any, error)) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(a.h.stderr, "rpi: panic in %s: %v\n%s", what, p, debug.Stack())
			result, err = nil, &acpError{Code: acpInternalError, Message: "Internal error in " + what}
		}
	}()
	return work()
}

// answerLater runs work in the background and answers call with its
// result, so the messages after call are not held up; then, when it
// succeeded, runs then (nil: nothing) after the answer.
//
// The client may withdraw call meanwhile ($/cancel_request): it is
// answered -32800 at once, its work goes on to its end (so nothing is
// left half done), and then is not run.
func (a *acpAgent) answerLater(call *acpRequest, work func() (any, error), then func()) (any, error) {
	return a.answerLaterOr(call, work, then, nil)
}

// answerLaterOr is answerLater, with withdrawn run instead of then when
// the client withdrew call and its work succeeded (a session it opened
// is closed again).
func (a *acpAgent) answerLaterOr(call *acpRequest, work func() (any, error), then, withdrawn func()) (any, error) {
	a.conn.keepOpen(call.id, nil)
	a.h.goBackground(func() {
		result, err := a.safely(call.method, work)
		answered := a.conn.answer(call.id, call.method, result, err, false)
		switch {
		case err != nil:
		case answered && then != nil:
			then()
		case !answered && withdrawn != nil:
			withdrawn()
		}
	})
	return acpDeferred{}, nil
}

// clientCaps are the client's capabilities as initialize gave them.
func (a *acpAgent) clientCaps() acpClientCaps {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.client
}

// ---- initialize ----

// acpInitializeResult is initialize's answer (docs/acp.md).
type acpInitializeResult struct {
	ProtocolVersion   int               `json:"protocolVersion"`
	AgentCapabilities acpAgentCaps      `json:"agentCapabilities"`
	AuthMethods       []struct{}        `json:"authMethods"`
	AgentInfo         acpImplementation `json:"agentInfo"`
}

type acpAgentCaps struct {
	LoadSession         bool           `json:"loadSession"`
	PromptCapabilities  acpPromptCaps  `json:"promptCapabilities"`
	MCPCapabilities     acpMCPCaps     `json:"mcpCapabilities"`
	SessionCapabilities acpSessionCaps `json:"sessionCapabilities"`
}

type acpPromptCaps struct {
	Image           bool `json:"image"`
	Audio           bool `json:"audio"`
	EmbeddedContext bool `json:"embeddedContext"`
}

type acpMCPCaps struct {
	HTTP bool `json:"http"`
	SSE  bool `json:"sse"`
}

// acpSessionCaps lists the session methods rpi has, and that new, load
// and resume take additionalDirectories: each present as an empty object,
// as the schema has them.
type acpSessionCaps struct {
	List                  *struct{} `json:"list,omitempty"`
	Close                 *struct{} `json:"close,omitempty"`
	Resume                *struct{} `json:"resume,omitempty"`
	Delete                *struct{} `json:"delete,omitempty"`
	AdditionalDirectories *struct{} `json:"additionalDirectories,omitempty"`
	Fork                  *struct{} `json:"fork,omitempty"`  // unstable in ACP
	Title                 *struct{} `json:"title,omitempty"` // unstable in ACP: session/set_title
}

type acpImplementation struct {
	Name    string `json:"name"`
	Title   string `json:"title"`
	Version string `json:"version"`
}

// acpAuthenticate refuses: rpi offers no sign-in methods (authMethods
// is empty), and says where the keys of models come from instead. (logout
// is not advertised, and not a method: -32601.)
// Params: methodId. Answer: -32602.
func acpAuthenticate(a *acpAgent, req *acpRequest) (any, error) {
	return nil, invalidParams("Invalid field methodId: rpi has no sign-in methods (authMethods is empty). " +
		"The keys of models come from the environment (ANTHROPIC_API_KEY, OPENAI_API_KEY, …), " +
		"and from auth.json and models.json in rpi's agent folder (~/.pi/agent): see rpi's docs/models.md")
}

// acpInitialize answers what rpi can do, and keeps what the client can.
// Params: protocolVersion (a whole number), [clientCapabilities {fs
// {readTextFile, writeTextFile}, terminal, _meta {terminal_output},
// elicitation {form}, session {notices, compaction}}], [clientInfo].
// Answer: acpInitializeResult (protocolVersion 1 whatever the client
// asked: the client decides whether it speaks it).
func acpInitialize(a *acpAgent, req *acpRequest) (any, error) {
	p := req.params
	if _, err := p.integer("protocolVersion", 0, 65535); err != nil {
		return nil, err
	}
	var client acpClientCaps
	caps, _, err := p.object("clientCapabilities")
	if err != nil {
		return nil, err
	}
	fs, _, err := caps.object("fs")
	if err != nil {
		return nil, err
	}
	if client.readTextFile, err = fs.boolean("readTextFile", false); err != nil {
		return nil, err
	}
	if client.writeTextFile, err = fs.boolean("writeTextFile", false); err != nil {
		return nil, err
	}
	if client.terminal, err = caps.boolean("terminal", false); err != nil {
		return nil, err
	}
	client.elicitationForm, client.notices, client.compaction = acpOffered(caps)
	// _meta is an extension slot: what is not Zed's convention is ignored.
	if meta, ok, _ := caps.object("_meta"); ok {
		client.terminalOutput, _ = meta.boolean("terminal_output", false)
	}
	a.mu.Lock()
	a.client = client
	a.mu.Unlock()
	sessions := acpSessionCaps{Close: &struct{}{}, AdditionalDirectories: &struct{}{}, Title: &struct{}{}}
	if !a.noSession {
		sessions.List, sessions.Resume, sessions.Delete, sessions.Fork = &struct{}{}, &struct{}{}, &struct{}{}, &struct{}{}
	}
	return acpInitializeResult{
		ProtocolVersion: acpProtocolVersion,
		AgentCapabilities: acpAgentCaps{
			LoadSession:         !a.noSession,
			PromptCapabilities:  acpPromptCaps{Image: true, EmbeddedContext: true},
			MCPCapabilities:     acpMCPCaps{HTTP: true},
			SessionCapabilities: sessions,
		},
		AuthMethods: []struct{}{},
		AgentInfo:   acpImplementation{Name: "rpi", Title: "rpi", Version: rpiVersion},
	}, nil
}

// ---- Output helpers ----

// acpTrimNewline drops one trailing "\n" (for texts put in fences).
func acpTrimNewline(s string) string { return strings.TrimSuffix(s, "\n") }

// acpFence is a Markdown fence that no run of backticks in text closes.
func acpFence(text string) string {
	longest, run := 0, 0
	for i := 0; i < len(text); i++ {
		if text[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

// acpFenced is text in a fenced block, headed by head when not "".
func acpFenced(head, text string) string {
	var b bytes.Buffer
	if head != "" {
		b.WriteString(head + "\n")
	}
	fence := acpFence(text)
	b.WriteString(fence + "\n")
	if text != "" {
		b.WriteString(acpTrimNewline(text) + "\n")
	}
	b.WriteString(fence)
	return b.String()
}

// ---- A prompt's blocks (docs/acp.md) ----

// acpMaxLinkBytes is the largest file a resource_link inlines.
const acpMaxLinkBytes = 2 << 20

// acpBlockTypes are the ContentBlocks a prompt may hold.
const acpBlockTypes = "one of text, image, resource, resource_link"

// acpPromptMessage is a prompt's blocks decoded and checked: its pieces
// of text, the files its links name (read when the message is made), and
// its images.
type acpPromptMessage struct {
	pieces []acpPiece
	images []contentBlock
}

// acpPiece is one block's part of the message's text: text as it is, or
// a block (a fenced resource, a link's URI or its file) that stands apart.
type acpPiece struct {
	text  string
	block bool
	uri   string // a file:// link: its file is read when the text is made
	path  string
}

// acpPrompt decodes a prompt's blocks (docs/acp.md): text as it is; a resource
// with text as a fenced block headed by its URI; an image, and a resource
// whose blob is an image, as an image; a resource_link to a file:// path
// as that file, read and inlined like a resource when the message is made
// (text); other links as their URI. audio, and any other block, is a
// -32602 naming it. It reads nothing: it can run on the command loop.
func acpPrompt(items []json.RawMessage) (*acpPromptMessage, error) {
	m := &acpPromptMessage{}
	for i, item := range items {
		b, err := paramsOf(item, fmt.Sprintf("prompt[%d].", i))
		if err != nil {
			return nil, err
		}
		typ, err := b.str("type")
		if err != nil {
			return nil, err
		}
		switch typ {
		case "text":
			s, err := b.str("text")
			if err != nil {
				return nil, err
			}
			m.pieces = append(m.pieces, acpPiece{text: s})
		case "image":
			img, err := acpImageBlock(b, "data")
			if err != nil {
				return nil, err
			}
			m.images = append(m.images, img)
		case "resource":
			r, ok, err := b.object("resource")
			if err == nil && !ok {
				err = paramError(missing(b.name("resource"), "an object"))
			}
			if err != nil {
				return nil, err
			}
			uri, err := r.str("uri")
			if err != nil {
				return nil, err
			}
			if r.has("blob") {
				img, err := acpImageBlock(r, "blob")
				if err != nil {
					return nil, err
				}
				m.images = append(m.images, img)
				continue
			}
			body, err := r.str("text")
			if err != nil {
				return nil, err
			}
			m.pieces = append(m.pieces, acpPiece{text: acpFenced(uri, body), block: true})
		case "resource_link":
			uri, err := b.str("uri")
			if err == nil {
				_, err = b.optStr("name")
			}
			if err != nil {
				return nil, err
			}
			path, _ := acpFilePath(uri)
			m.pieces = append(m.pieces, acpPiece{text: uri, block: true, uri: uri, path: path})
		case "audio":
			return nil, invalidParams("Invalid field %s: audio is not supported (promptCapabilities.audio is false)", b.name("type"))
		default:
			return nil, paramError(invalid(b.name("type"), acpBlockTypes))
		}
	}
	if !slices.ContainsFunc(m.pieces, func(p acpPiece) bool { return strings.TrimSpace(p.text) != "" }) && len(m.images) == 0 {
		return nil, invalidParams("Invalid field prompt: must hold some text or an image")
	}
	return m, nil
}

// text is the message's text, the files of its links read by readFile
// (the URI, and why, when one cannot be): blocks stand apart from what
// is around them by a blank line.
func (m *acpPromptMessage) text(readFile func(path string) (string, error)) string {
	var text strings.Builder
	apart := false // the last piece was a block: text after it starts a paragraph
	for _, p := range m.pieces {
		s := p.text
		if p.path != "" {
			if body, err := readFile(p.path); err != nil {
				s = p.uri + " (not inlined: " + err.Error() + ")"
			} else {
				s = acpFenced(p.uri, body)
			}
		}
		if (p.block || apart) && text.Len() > 0 {
			text.WriteString(strings.Repeat("\n", 2-min(2, trailingNewlines(text.String()))))
		}
		text.WriteString(s)
		apart = p.block
	}
	return text.String()
}

func trailingNewlines(s string) int { return len(s) - len(strings.TrimRight(s, "\n")) }

// acpImageBlock reads an image from a block (data) or a resource (blob):
// said to be an image (image/…), and base64 data of one a model takes,
// typed as its bytes are (base64Image).
func acpImageBlock(b acpParams, dataField string) (contentBlock, error) {
	data, err := b.str(dataField)
	if err != nil {
		return contentBlock{}, err
	}
	mime, err := b.str("mimeType")
	if err != nil {
		return contentBlock{}, err
	}
	if !strings.HasPrefix(mime, "image/") {
		return contentBlock{}, paramError(invalid(b.name("mimeType"), "an image type (image/…): only images are taken"))
	}
	img, ok := base64Image(data)
	if !ok {
		return contentBlock{}, paramError(invalid(b.name(dataField), imageDataWanted))
	}
	return img, nil
}

// acpFilePath is the absolute path of a file:// URI on this machine.
func acpFilePath(uri string) (string, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || u.Host != "" && u.Host != "localhost" || !filepath.IsAbs(filepath.FromSlash(u.Path)) {
		return "", false
	}
	return filepath.Clean(filepath.FromSlash(u.Path)), true
}

// acpLinkText checks what a linked file holds before it is inlined: at
// most acpMaxLinkBytes of text.
func acpLinkText(data string) (string, error) {
	switch {
	case len(data) > acpMaxLinkBytes:
		return "", fmt.Errorf("larger than %s", formatSize(acpMaxLinkBytes))
	case !utf8.ValidString(data) || strings.IndexByte(data, 0) >= 0:
		return "", errors.New("not text")
	}
	return data, nil
}

// ---- The loop ----

// acpLocation is a place a tool call works on: an absolute path and a
// 1-based line.
type acpLocation struct {
	Path string `json:"path"`
	Line int    `json:"line,omitempty"`
}

// acpToolMeta is Zed's display-only terminal: the output of a bash call
// shown as a terminal whose id is the tool call's.
type acpToolMeta struct {
	TerminalInfo   *acpTerminalInfo   `json:"terminal_info,omitempty"`
	TerminalOutput *acpTerminalOutput `json:"terminal_output,omitempty"`
	TerminalExit   *acpTerminalExit   `json:"terminal_exit,omitempty"`
}

// acpToolCallUpdate is a tool_call_update (and, without sessionUpdate,
// the toolCall of a permission request): only what changed.
type acpToolCallUpdate struct {
	SessionUpdate string          `json:"sessionUpdate,omitempty"` // tool_call_update
	ToolCallID    string          `json:"toolCallId"`
	Title         string          `json:"title,omitempty"`
	Kind          string          `json:"kind,omitempty"`
	Status        string          `json:"status,omitempty"`
	Content       []any           `json:"content,omitempty"`
	Locations     []acpLocation   `json:"locations,omitempty"`
	RawInput      json.RawMessage `json:"rawInput,omitempty"`
	RawOutput     any             `json:"rawOutput,omitempty"`
	Meta          *acpToolMeta    `json:"_meta,omitempty"`
}
