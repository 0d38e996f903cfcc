//go:build unix

package main

import (
	"bytes"
	"testing"
)

// TestServeACPNoSettingsAfterClose: an ACP client that closed its view
// of a served session (session/close) gets no config_option_update for
// it after the close's answer, even when another client's change was
// being told to it as it closed. Before, the update, read once the rpc
// client's set_thinking_level had listed the session's ACP clients,
// went out after the close's answer. The test holds the ACP view's lock
// that reading its options takes, so that the update waits there as the
// view closes: the close now waits for it.
func TestServeACPNoSettingsAfterClose(t *testing.T) {
	o := serveOneSession(t)
	a := dialLines(t, o.socket)
	initializeACP(a)
	a.send(`{"jsonrpc":"2.0","id":1,"method":"session/resume","params":{"sessionId":"` + o.id + `","cwd":"` + o.cwd + `"}}`)
	acpAnswerLine(a, "1")
	var as *acpSession
	o.st.mu.Lock()
	for _, c := range o.st.clients {
		if v, ok := c.events.(*acpSession); ok {
			as = v
		}
	}
	o.st.mu.Unlock()
	if as == nil {
		t.Fatal("the ACP client is not attached")
	}
	as.mu.Lock()
	o.owner.send(`{"id":"t","type":"set_thinking_level","level":"high"}`)
	waitLockedIn(t, "configOptions", func() bool { return false })
	a.send(`{"jsonrpc":"2.0","id":2,"method":"session/close","params":{"sessionId":"` + o.id + `"}}`)
	// The close waits for the update being told, or (before) answers.
	waitLockedIn(t, "takeOff", func() bool { return answered(a, "2") })
	as.mu.Unlock()
	acpAnswerLine(a, "2")
	o.owner.answer("t")
	a.send(`{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}`)
	acpAnswerLine(a, "3")
	recs, _ := a.snapshot()
	closed := false
	for _, r := range recs {
		if answers(r, "2") {
			closed = true
		} else if closed && bytes.Contains(r.line, []byte(`"session/update"`)) {
			t.Errorf("after the close's answer: %s", r.line)
		}
	}
}
