package main

// The original system's offline model, faux/faux-1: no key, no network.
// Each call answers the text of PI_FAUX_RESPONSE, trimmed, streamed in
// 12-byte text deltas through the same streamer as every provider, so
// message_update events, usage, stop reasons and aborts are what a real
// model gives. With the variable unset or empty a call fails with "No
// more faux responses queued". It is what a newcomer or a client's CI can
// run rpi on with no model server at all.

import (
	"context"
	"strings"
	"unicode/utf8"
)

const (
	apiFaux         = "faux"
	fauxProvider    = "faux"
	fauxDeltaBytes  = 12 // the original's chunk size
	fauxNoResponse  = "No more faux responses queued"
	fauxResponseVar = "PI_FAUX_RESPONSE"
)

// newFauxModel is faux/faux-1 as the original describes it (a 128000-token
// window, 16384 output tokens, text only, no reasoning, no price) with the
// answer it gives: reply, the variable's text ("" when unset), trimmed.
func newFauxModel(reply string) *model {
	reply = strings.ToValidUTF8(strings.TrimSpace(reply), "\uFFFD")
	return &model{ID: "faux-1", Name: "Faux Model", API: apiFaux, Provider: fauxProvider, BaseURL: "http://localhost:0",
		Input: []string{"text"}, ContextWindow: 128000, MaxTokens: 16384, faux: true, fauxReply: reply}
}

// listedFaux reports whether get_available_models and cycle_model offer
// m: every model but faux, which only while it has an answer to give or
// is the current model (so a client never sees it by surprise).
func listedFaux(m, current *model) bool {
	return !m.faux || m.fauxReply != "" || m == current
}

// streamFaux streams m's answer into st like a provider's reader: it
// starts the answer once "accepted", sends the text in 12-byte deltas
// (never splitting a character), and stops as a provider does when ctx
// ends (an abort).
func streamFaux(ctx context.Context, m *model, st *streamer, started func()) error {
	if m.fauxReply == "" {
		return &providerError{message: fauxNoResponse}
	}
	started()
	text := m.fauxReply
	i := st.startBlock(0, contentBlock{Type: "text"})
	for len(text) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(fauxDeltaBytes, len(text))
		for n < len(text) && !utf8.RuneStart(text[n]) {
			n-- // back to the start of the character cut in two (the text is valid UTF-8)
		}
		st.delta(i, text[:n])
		text = text[n:]
	}
	st.endOpen()
	return st.stopAs("stop", "stop", "", m)
}
