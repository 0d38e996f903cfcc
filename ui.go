package main

// The user's interface: the ui a front end gives a session (one-way
// requests, dialogs, the approval gate), what the approval shows, and how
// text from outside is escaped before a user reads it. The rpc front
// end's ui is in rpc_ui.go, ACP's in acp_sessions.go.

import (
	"context"
	"encoding/json"
	"fmt"
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
	return `Tell the model why its ` + a.toolName + ` cannot be done?`,
		`The ` + a.toolName + ` cannot be done, and nothing will be changed: ` + showText("", a.failed.Error()) + "\n" +
			`Allowed, the model is told this; denied, it is told only "Denied by user".`
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

// showText lays out text for a dialog, each line after prefix, with
// control characters escaped. A text longer than maxShownBytes shows its
// first and its last half of that, and between them how many bytes are
// not shown: what a long text ends with (a command after pages of
// harmless lines) cannot hide behind the cut.
func showText(prefix, text string) string {
	const maxShownBytes = 4096
	lines := func(text string) string {
		lines := strings.Split(text, "\n")
		for i, line := range lines {
			lines[i] = prefix + escapeControl(line)
		}
		return strings.Join(lines, "\n")
	}
	if len(text) <= maxShownBytes {
		return lines(text)
	}
	head, hidden, tail := cutMiddle(text, maxShownBytes)
	return fmt.Sprintf("%s\n(%d bytes not shown here; the last %d bytes follow)\n%s",
		lines(head), hidden, len(tail), lines(tail))
}
