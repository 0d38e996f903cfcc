package main

// The user's interface: the ui a front end gives a session (one-way
// requests, dialogs, the approval gate), and the rpc front end's (§7):
// extension_ui_request records, fire-and-forget (notify, setStatus,
// setWidget, setTitle, set_editor_text) or dialogs that wait for an
// extension_ui_response (select, confirm, input, editor), and the command
// that delivers those answers.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// uiRequest is an extension_ui_request: the host asking the client's UI.
// Its fields are flattened beside type, id and method, as pi sends them.
type uiRequest struct {
	Type            string   `json:"type"`
	ID              string   `json:"id"`
	Method          string   `json:"method"`
	Title           string   `json:"title,omitempty"`
	Message         string   `json:"message,omitempty"`
	Options         []string `json:"options,omitempty"`
	Placeholder     string   `json:"placeholder,omitempty"`
	Prefill         string   `json:"prefill,omitempty"`
	Timeout         int64    `json:"timeout,omitempty"`
	NotifyType      string   `json:"notifyType,omitempty"`
	StatusKey       string   `json:"statusKey,omitempty"`
	StatusText      string   `json:"statusText,omitempty"`
	WidgetKey       string   `json:"widgetKey,omitempty"`
	WidgetLines     []string `json:"widgetLines,omitempty"`
	WidgetPlacement string   `json:"widgetPlacement,omitempty"`
	Text            string   `json:"text,omitempty"`
}

// uiAnswer is a client's extension_ui_response, already validated.
type uiAnswer struct {
	value     *string
	confirmed *bool
	cancelled bool
}

// ui is how a session reaches its user; the front end gives it. The rpc
// front end's is dialogs (below); ACP's maps these to session/update
// notes and session/request_permission. The core calls it with no lock
// of its own held: show in order with the events (the outbox delivers
// it), ask and approve on the goroutine that waits. A panic in show loses
// that request; one in ask or approve fails the tool call that asked.
type ui interface {
	// show sends a one-way request (notify, setStatus, setWidget,
	// setTitle, set_editor_text); nothing waits for an answer.
	show(req uiRequest)
	// ask opens a dialog (select, input, editor, confirm) and waits for
	// its answer; req.Timeout (ms; 0: none) or ctx ending cancels it.
	ask(ctx context.Context, req uiRequest) uiAnswer
	// approve asks whether a tool call may run (the approval gate) and
	// waits: true only when the user allows it.
	approve(ctx context.Context, a approval) bool
}

// approval is what the gate asks about: the call's id and tool, its
// arguments as the model sent them, and the decoded call that will run,
// whose describe() says exactly what it will do (and a write's or an
// edit's change(), the file's text before and after). failed, when not
// nil, is why the call cannot be done (preparing it failed: the edit's
// text is not in the file, the file is missing): then nothing runs, and
// the question is whether the model may be told why; the call's
// describe() and change() are not to be used. timeout is how long the
// user may take (settings.json confirmTimeoutMs); no answer is no.
type approval struct {
	toolCallID string
	toolName   string
	args       json.RawMessage
	call       toolCall
	failed     error
	timeout    time.Duration
}

// describe is what the gate shows, a title and a message (escaped): the
// call's own describe(), or for a call that cannot be done, that it
// cannot, why, and what each answer tells the model.
func (a approval) describe() (title, message string) {
	if a.failed == nil {
		return a.call.describe()
	}
	return "Tell the model why its " + a.toolName + " cannot be done?",
		"The " + a.toolName + " cannot be done, and nothing will be changed: " + showText("", a.failed.Error()) +
			"\nAllowed, the model is told this; denied, it is told only \"Denied by user\"."
}

// dialog is an extension_ui_request that waits for the client's answer.
type dialog struct {
	method  string
	options []string
	answer  chan uiAnswer // buffered: receives at most one answer
}

// dialogs is the rpc front end's ui: it writes extension_ui_request
// records, holds the open dialogs, and remembers the ids of recent
// one-way requests, so that a client answering those is not told off (§4).
type dialogs struct {
	out   *output
	clock clock

	mu      mutex[dialogsMu] // guards the fields below
	open    map[string]*dialog
	oneWay  map[string]bool
	oneWays []string // the same ids, oldest first, for forgetting
}

// maxRememberedOneWay bounds the one-way request ids kept.
const maxRememberedOneWay = 1024

func newDialogs(out *output, c clock) *dialogs {
	return &dialogs{out: out, clock: c, open: map[string]*dialog{}, oneWay: map[string]bool{}}
}

// take removes the open dialog id and returns it: whoever takes it first
// (the client's answer, or a timeout or abort) resolves it, once.
func (ds *dialogs) take(id string) *dialog {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d := ds.open[id]
	delete(ds.open, id)
	return d
}

func (ds *dialogs) rememberOneWay(id string) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.oneWay[id] = true
	ds.oneWays = append(ds.oneWays, id)
	if len(ds.oneWays) > maxRememberedOneWay {
		delete(ds.oneWay, ds.oneWays[0])
		ds.oneWays = ds.oneWays[1:]
	}
}

func (ds *dialogs) wasOneWay(id string) bool {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return ds.oneWay[id]
}

// write writes an extension_ui_request record.
func (ds *dialogs) write(req uiRequest) {
	ds.out.record(func(buf []byte) ([]byte, error) {
		data, err := marshalJSON(req)
		return append(buf, data...), err
	})
}

// show sends a fire-and-forget UI request; the client need not answer it.
func (ds *dialogs) show(req uiRequest) {
	req.Type, req.ID = "extension_ui_request", newUUIDv7(ds.clock.Now())
	ds.rememberOneWay(req.ID)
	ds.write(req)
}

// ask shows a dialog (select, confirm, input, editor) and waits for the
// client's answer. A timeout (req.Timeout ms) or ctx ending resolves it to
// cancelled; an answer and a timeout that race resolve it once, and the
// loser of the race gets nothing (a late answer is refused).
func (ds *dialogs) ask(ctx context.Context, req uiRequest) uiAnswer {
	req.Type, req.ID = "extension_ui_request", newUUIDv7(ds.clock.Now())
	d := &dialog{method: req.Method, options: req.Options, answer: make(chan uiAnswer, 1)}
	ds.mu.Lock()
	ds.open[req.ID] = d
	ds.mu.Unlock()
	ds.write(req)
	var expired <-chan struct{}
	if req.Timeout > 0 {
		done, stop := after(ds.clock, msDuration(req.Timeout))
		defer stop()
		expired = done
	}
	select {
	case a := <-d.answer:
		return a
	case <-expired:
	case <-ctx.Done():
	}
	if ds.take(req.ID) == nil {
		return <-d.answer // the client's answer won the race: it is on its way
	}
	return uiAnswer{cancelled: true}
}

// approve asks with a confirm dialog that shows exactly what the call
// will do; no answer within the timeout counts as no.
func (ds *dialogs) approve(ctx context.Context, a approval) bool {
	title, message := a.describe()
	answer := ds.ask(ctx, uiRequest{Method: "confirm", Title: title, Message: message, Timeout: a.timeout.Milliseconds()})
	return !answer.cancelled && answer.confirmed != nil && *answer.confirmed
}

// extensionUIResponseCommand delivers the client's answer to a pending dialog.
// Fields: id (of a pending extension_ui_request) and exactly one of value
// (string), confirmed (bool), cancelled (true).
// Answer: none on success, and none for an answer to a one-way request;
// a failure when the id is unknown or already answered or expired, or the
// answer is malformed. Events: none.
func (s *server) extensionUIResponseCommand(r *request) (any, error) {
	ds := s.dialogs
	id := r.idString()
	if id == nil {
		return nil, missing("id", "the id of a pending extension_ui_request")
	}
	var a uiAnswer
	given := 0
	if r.has("value") {
		v, err := r.str("value")
		if err != nil {
			return nil, err
		}
		a.value, given = &v, given+1
	}
	if r.has("confirmed") {
		c, err := r.boolean("confirmed")
		if err != nil {
			return nil, err
		}
		a.confirmed, given = &c, given+1
	}
	if r.has("cancelled") {
		c, err := r.boolean("cancelled")
		if err != nil || !c {
			return nil, invalid("cancelled", "true")
		}
		a.cancelled, given = true, given+1
	}
	if ds.wasOneWay(*id) {
		return noReply{}, nil // §4: answering a one-way request is allowed and changes nothing
	}
	if given != 1 && !s.wire.lenientUIResponses() {
		return nil, errors.New("Invalid extension_ui_response: give exactly one of value, confirmed or cancelled")
	}
	ds.mu.Lock()
	d, ok := ds.open[*id]
	if ok {
		var err error
		switch {
		case a.cancelled:
		case d.method == "confirm" && a.confirmed == nil:
			err = errors.New("Invalid extension_ui_response: a confirm dialog takes confirmed (true or false) or cancelled")
		case d.method != "confirm" && a.value == nil:
			err = fmt.Errorf("Invalid extension_ui_response: a %s dialog takes value (a string) or cancelled", d.method)
		case d.method == "select" && !slices.Contains(d.options, *a.value):
			err = fmt.Errorf("Invalid extension_ui_response: value must be one of the options: %s", strings.Join(d.options, ", "))
		}
		if err != nil {
			ds.mu.Unlock()
			return nil, err
		}
		delete(ds.open, *id)
	}
	ds.mu.Unlock()
	if !ok && s.wire.lenientUIResponses() {
		return noReply{}, nil // pi ignores an answer it has no dialog for
	}
	if !ok {
		return nil, fmt.Errorf("Unknown extension UI request id: %s (never asked, already answered or expired)", *id)
	}
	d.answer <- a
	return noReply{}, nil
}

// escapeControl shows control characters as escapes (\r, \x1b, …), so that
// text shown in a dialog cannot hide or rewrite what is around it on a
// terminal client. Newlines are escaped too: the caller lays out lines.
// A backslash is shown as \\, so that what reads as an escape is one: a
// newline (\n) and a backslash followed by an n (\\n) never look alike.
func escapeControl(s string) string { return escapeText(s, true) }

// escapeInJSON is JSON text shown as escapeControl shows text, but for its
// backslashes, which are JSON's own escapes (a backslash in a value is
// \\ already) and stay as they are.
func escapeInJSON(s string) string { return escapeText(s, false) }

// escapeText is escapeControl, with a backslash doubled or not.
func escapeText(s string, backslash bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\' && backslash:
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, `\x%02x`, r)
		case r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' || unicode.Is(unicode.Cf, r):
			// Invisible and format characters (bidi controls, zero-width
			// spaces, line separators) could hide or reorder text.
			if r > 0xffff {
				fmt.Fprintf(&b, `\U%08x`, r) // \u and four digits, then a digit, would read as two characters
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// escapeLen is the length of the character or escape (\\, \n, \x1b,
// \u202e, \U000e0001, …) text shown by escapeControl or Go's quoting
// starts with.
func escapeLen(s string) int {
	n := 1
	switch {
	case s[0] == '\\' && len(s) > 1:
		switch s[1] {
		case 'x':
			n = 4
		case 'u':
			n = 6
		case 'U':
			n = 10
		default:
			n = 2
		}
	case s[0] >= utf8.RuneSelf:
		_, n = utf8.DecodeRuneInString(s)
	}
	return min(n, len(s))
}
