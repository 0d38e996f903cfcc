package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// fauxCall streams faux's answer for reply through callModel, the path
// every provider's answer takes; onDelta sees each text delta as it comes.
func fauxCall(ctx context.Context, reply string, onDelta func(string)) (*assistantMessage, []string, error) {
	m := newFauxModel(reply)
	msg := &assistantMessage{Role: "assistant", Content: []contentBlock{}}
	var deltas []string
	started := false
	err := callModel(ctx, streamRequest{model: m, secrets: newRedactor(nil)}, msg, func() { started = true }, func(ev assistantEvent) {
		if ev.Type == "text_delta" {
			if !started {
				panic("a delta before the answer started")
			}
			deltas = append(deltas, *ev.Delta)
			onDelta(*ev.Delta)
		}
	})
	return msg, deltas, err
}

// TestFauxDeltas: the trimmed text in deltas of at most 12 bytes, none
// splitting a character, joined into the answer; stop, zero usage.
func TestFauxDeltas(t *testing.T) {
	reply := "  Grüße aus rpi: 日本語のテキスト and more text.\n"
	msg, deltas, err := fauxCall(context.Background(), reply, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range deltas {
		// Only a cut character makes a delta shorter (by 3 bytes at most), and the last.
		if len(d) > 12 || len(d) < 10 && i < len(deltas)-1 || !utf8.ValidString(d) {
			t.Errorf("delta %q: %d bytes", d, len(d))
		}
	}
	want := strings.TrimSpace(reply)
	if got := strings.Join(deltas, ""); got != want || len(msg.Content) != 1 || msg.Content[0].Text != want {
		t.Errorf("deltas %q, message %+v; want %q", deltas, msg.Content, want)
	}
	if msg.StopReason != "stop" || msg.Usage.TotalTokens != 0 {
		t.Errorf("stopReason %q, usage %+v", msg.StopReason, msg.Usage)
	}
}

// TestFauxNoResponse: without a text, the call fails as the original's.
func TestFauxNoResponse(t *testing.T) {
	for _, reply := range []string{"", " \n\t"} {
		_, deltas, err := fauxCall(context.Background(), reply, func(string) {})
		var perr *providerError
		if !errors.As(err, &perr) || err.Error() != "No more faux responses queued" || len(deltas) > 0 {
			t.Errorf("reply %q: %v, %q", reply, err, deltas)
		}
	}
}

// TestFauxAbortMidStream: an abort (the run's context ending) after the
// first delta stops the stream there, as a provider's does; the answer
// keeps what was said.
func TestFauxAbortMidStream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msg, deltas, err := fauxCall(ctx, strings.Repeat("abcdefghijkl", 1000), func(string) { cancel() })
	if !errors.Is(err, context.Canceled) || len(deltas) != 1 || msg.Content[0].Text != "abcdefghijkl" {
		t.Errorf("err %v, %d deltas, text %q", err, len(deltas), msg.Content[0].Text)
	}
}
