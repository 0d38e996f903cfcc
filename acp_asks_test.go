package main

// Tests of rpi's questions to the client (docs/acp.md): requests withdrawn
// when their turn is cancelled ($/cancel_request), and the model's
// free-text questions asked as forms (elicitation/create).

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestACPWithdrawnRequests: a request rpi stops waiting for (its context
// ended) is withdrawn with $/cancel_request naming its id, once; the
// client's late answer to it is dropped without a word on stderr, as a
// malformed one is, and nothing goes back to the client. A request
// answered before its context ended, or waiting when the input ended, is
// not withdrawn.
func TestACPWithdrawnRequests(t *testing.T) {
	var out, stderr syncBuffer
	c := newACPConn(newConnection(nil, &out, &stderr), &stderr)
	ask := func(ctx context.Context) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := c.request(ctx, "client/ask", struct{}{})
			done <- err
		}()
		return done
	}
	waitOut := func(text string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), text); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("never written: %s\nthe output:\n%s", text, out.String())
			}
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := ask(ctx)
	waitOut(`"id":0,"method":"client/ask"`)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("a withdrawn request: %v", err)
	}
	cancel()
	c.deliver(&acpMessage{id: json.RawMessage("0"), response: true, result: json.RawMessage(`{}`)})
	c.deliver(&acpMessage{id: json.RawMessage("0"), response: true, result: json.RawMessage(`{}`)}) // twice: now an answer to nothing

	ctx, cancel = context.WithCancel(context.Background())
	done = ask(ctx)
	waitOut(`"id":1,"method":"client/ask"`)
	c.deliver(&acpMessage{id: json.RawMessage("1"), response: true, result: json.RawMessage(`{}`)})
	if err := <-done; err != nil {
		t.Errorf("an answered request: %v", err)
	}
	cancel()

	done = ask(context.Background())
	waitOut(`"id":2,"method":"client/ask"`)
	c.close()
	if err := <-done; err != errConnectionClosed {
		t.Errorf("a request waiting when the input ended: %v", err)
	}

	want := `{"jsonrpc":"2.0","id":0,"method":"client/ask","params":{}}
{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":0}}
{"jsonrpc":"2.0","id":1,"method":"client/ask","params":{}}
{"jsonrpc":"2.0","id":2,"method":"client/ask","params":{}}
`
	if got := out.String(); got != want {
		t.Errorf("rpi wrote:\n%swant:\n%s", got, want)
	}
	if got := stderr.String(); got != "rpi: a response to id 0, which rpi is not waiting for: dropped\n" {
		t.Errorf("stderr (one line, for the second answer to the withdrawn request): %q", got)
	}
	acpSchemaCheck(t, strings.Split(strings.TrimSpace(out.String()), "\n")[1:2], nil)
}
