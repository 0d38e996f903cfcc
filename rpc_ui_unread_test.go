package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// unreadClient is an rpc server in this process whose client reads its
// stdout, a real pipe, only when the test says: the pipe fills and a
// write to it blocks, as a client that stops reading makes it.
type unreadClient struct {
	t    *testing.T
	s    *rpcServer
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan int
}

func newUnreadClient(t *testing.T) *unreadClient {
	t.Helper()
	e := newTestEnv(t)
	cfg, _, err := parseArgs([]string{"rpc", "--cwd", t.TempDir(), "--no-session"}, e.env())
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	c := &unreadClient{t: t, in: inW, out: bufio.NewReaderSize(outR, 64<<10), done: make(chan int, 1)}
	if c.s, err = newServer(cfg, e.env(), newConnection(inR, outW, io.Discard), io.Discard); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- c.s.serve(nil) }()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR) // whatever is left: the server's end must not wait on it
		<-c.done
		outW.Close()
		outR.Close()
	})
	for c.record()["type"] != "session_started" { // written before the command loop reads
	}
	return c
}

func (c *unreadClient) send(line string) {
	go io.WriteString(c.in, line+"\n") // the input pipe takes it once the command loop reads
}

// record reads the next whole record.
func (c *unreadClient) record() map[string]any {
	c.t.Helper()
	line, err := c.out.ReadBytes('\n')
	if err != nil {
		c.t.Fatalf("reading a record: %v", err)
	}
	var rec map[string]any
	if err := json.Unmarshal(line, &rec); err != nil {
		c.t.Fatalf("a record that is not whole JSON (%d bytes): %v", len(line), err)
	}
	return rec
}

// uiRecord reads records until the next extension_ui_request or
// extension_ui_settled, and returns it (the session's events come
// between them).
func (c *unreadClient) uiRecord() map[string]any {
	c.t.Helper()
	for {
		if rec := c.record(); strings.HasPrefix(rec["type"].(string), "extension_ui_") {
			return rec
		}
	}
}

// uiRequestTitled reads records until the extension_ui_request with this
// title, and returns it.
func (c *unreadClient) uiRequestTitled(title string) map[string]any {
	c.t.Helper()
	for {
		rec := c.record()
		if rec["type"] == "extension_ui_request" && rec["title"] == title {
			return rec
		}
	}
}

// bigTitle is a dialog's title bigger than any pipe's buffer: its
// request cannot be written whole while the client reads nothing.
var bigTitle = strings.Repeat("x", 4<<20)

// TestDialogAnsweredWhileTheClientDoesNotRead: the client reads a
// dialog's request, then stops reading while a second dialog's request
// (bigger than the pipe holds) is being written. Its answer to the first
// dialog is still taken and settles that dialog; once it reads again,
// every request arrives whole, in the order the dialogs opened.
func TestDialogAnsweredWhileTheClientDoesNotRead(t *testing.T) {
	c := newUnreadClient(t)
	ds := c.s.dialogs
	first := make(chan uiAnswer, 1)
	go func() { first <- ds.ask(context.Background(), uiRequest{Method: "confirm", Title: "first"}) }()
	firstID := c.uiRequestTitled("first")["id"].(string)

	bigCtx, cancelBig := context.WithCancel(context.Background())
	big := make(chan uiAnswer, 1)
	go func() { big <- ds.ask(bigCtx, uiRequest{Method: "input", Title: bigTitle}) }()
	// The big request's write has begun (its start is in the pipe), and
	// the rest cannot follow: the client reads nothing more for now.
	for head := []byte(`"title":"xxxx`); ; {
		b, err := c.out.Peek(min(c.out.Buffered()+1, c.out.Size()))
		if err != nil {
			t.Fatalf("%v: %.300s", err, b)
		}
		if bytes.Contains(b, head) {
			break
		}
		if len(b) == c.out.Size() {
			t.Fatalf("the big request did not come next: %.300s", b)
		}
	}

	c.send(fmt.Sprintf(`{"type":"extension_ui_response","id":%q,"confirmed":true}`, firstID))
	if a := receive(t, first, "the first dialog's answer, while the client does not read"); a.confirmed == nil || !*a.confirmed {
		t.Fatalf("the first dialog got %+v, want confirmed", a)
	}

	// A third dialog, and a one-way request after it, open while the
	// client still reads nothing: they wait behind the big request.
	third := make(chan uiAnswer, 1)
	go func() { third <- ds.ask(context.Background(), uiRequest{Method: "confirm", Title: "third"}) }()
	until(t, "the third dialog open", func() bool { return ds.openCount() == 2 })
	shown := make(chan struct{})
	go func() {
		ds.show(uiRequest{Method: "notify", Message: "fourth"})
		close(shown)
	}()
	cancelBig() // its asker waits for its request's write to go on: then it is cancelled

	// The client reads again: the big request whole, then the third, then
	// the one-way request.
	if rec := c.uiRecord(); rec["title"] != bigTitle {
		t.Fatalf("after the first request came %v, want the big one", rec["type"])
	}
	if a := receive(t, big, "the big dialog's cancellation"); !a.cancelled {
		t.Fatalf("the big dialog got %+v, want cancelled", a)
	}
	rec := c.uiRecord()
	if rec["title"] != "third" {
		t.Fatalf("after the big request came %v, want the third", rec)
	}
	c.send(fmt.Sprintf(`{"type":"extension_ui_response","id":%q,"confirmed":false}`, rec["id"]))
	if a := receive(t, third, "the third dialog's answer"); a.confirmed == nil || *a.confirmed {
		t.Fatalf("the third dialog got %+v, want not confirmed", a)
	}
	if rec := c.uiRecord(); rec["method"] != "notify" || rec["message"] != "fourth" {
		t.Fatalf("after the third request came %v, want the one-way request", rec)
	}
	receive(t, shown, "the one-way request's return")
}

// until waits for done to report true, looking again and again; it fails
// the test after 10 s.
func until(t *testing.T, what string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !done(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("%s never came", what)
		}
	}
}
