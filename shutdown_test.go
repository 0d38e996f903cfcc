package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bigSessionID is the id writeBigSession gives its sessions.
const bigSessionID = "0f0e8a52-1c4f-4a2e-9d6b-3c1f2e4d5a6b"

// TestEndingWithAStalledClient: a client that stops reading stdout while
// rpi writes a big answer — rpc's get_messages, written in pieces, and
// ACP's session/load replay — cannot keep rpi alive: SIGTERM, SIGINT and
// the end of stdin each end it with its usual exit code within 3 s (the
// blocked write is given up), the session's last entry is on disk, and
// what reached the client is whole records, but for one cut at the very
// end.
func TestEndingWithAStalledClient(t *testing.T) {
	endToEnd(t)
	for _, mode := range []string{"rpc", "acp"} {
		for _, end := range []string{"SIGTERM", "SIGINT", "EOF"} {
			t.Run(mode+"/"+end, func(t *testing.T) {
				t.Parallel() // each waits a second for its client, most of it idle
				dir := t.TempDir()
				file := filepath.Join(dir, "big.jsonl")
				writeBigSession(t, file, dir, 8<<20)
				var cmd *exec.Cmd
				var input string
				if mode == "rpc" {
					cmd = rpiCommand(t, "rpc", "--cwd", dir, "--session", file)
					input = `{"id":"n","type":"set_session_name","name":"the last entry"}` + "\n" +
						`{"id":"m","type":"get_messages"}` + "\n"
				} else {
					cmd = rpiCommand(t, "acp", "--session-dir", dir)
					load, _ := json.Marshal(map[string]any{"sessionId": bigSessionID, "cwd": dir, "mcpServers": []any{}})
					input = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}` + "\n" +
						`{"jsonrpc":"2.0","id":1,"method":"session/load","params":` + string(load) + "}\n"
				}
				out := startStalledClient(t, cmd, input)
				ended := time.Now()
				want := 0
				switch end {
				case "SIGTERM":
					cmd.Process.Signal(syscall.SIGTERM)
				case "SIGINT":
					cmd.Process.Signal(syscall.SIGINT)
					want = 130
				case "EOF":
					out.stdin.Close()
				}
				code, took := out.wait(t, ended)
				if code != want || took > 3*time.Second {
					t.Errorf("exit code %d after %v; want %d within 3 s (stderr: %s)", code, took, want, out.stderr.String())
				}
				t.Logf("exited %d after %v", code, took)
				written, _ := io.ReadAll(out.stdout)
				lines := bytes.Split(written, []byte("\n"))
				for _, line := range lines[:len(lines)-1] { // the last may be cut by the exit
					if !json.Valid(line) {
						t.Errorf("a record that is not whole before the end: %.200q", line)
					}
				}
				if mode == "rpc" {
					if data, _ := os.ReadFile(file); !bytes.Contains(data, []byte(`"name":"the last entry"`)) {
						t.Errorf("the session file lacks the entry of set_session_name")
					}
				}
			})
		}
	}
}

// stalledClient is rpi started with input written and its stdout read by
// nobody until it has exited.
type stalledClient struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File
	stderr *syncBuffer
}

// startStalledClient starts cmd, writes input to it and returns once rpi
// is blocked writing to a full stdout pipe.
func startStalledClient(t *testing.T, cmd *exec.Cmd, input string) *stalledClient {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &stalledClient{cmd: cmd, stdout: r, stderr: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = w, c.stderr
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); r.Close() })
	io.WriteString(c.stdin, input)
	// The pipe is full once what it holds stops growing.
	held, since := -1, time.Now()
	for deadline := time.Now().Add(30 * time.Second); ; {
		n := int(pipeBuffered(r))
		if n < 0 { // not known on this system: give rpi time
			time.Sleep(3 * time.Second)
			return c
		}
		if n != held {
			held, since = n, time.Now()
		} else if n > 0 && time.Since(since) > 300*time.Millisecond {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("rpi's stdout pipe did not fill (it holds %d bytes; stderr: %s)", n, c.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wait waits up to 10 s for rpi to exit and returns its exit code and how
// long it took from since; it fails the test if rpi is still running.
func (c *stalledClient) wait(t *testing.T, since time.Time) (int, time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		took := time.Since(since)
		if exit, ok := err.(*exec.ExitError); ok {
			return exit.ExitCode(), took
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, took
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-done
		t.Fatalf("rpi still ran 10 s later (stderr: %s)", c.stderr.String())
		return 0, 0
	}
}

// TestEndStopsALoad: SIGTERM or the end of stdin while rpi acp loads a
// big session — while it waits for the file another process holds,
// while it reads the file, and while it replays it to a client that
// reads everything — stops the load: its answer is an error saying rpi
// is shutting down, not the replay of every message and a success, and
// rpi exits at once (0, within 2 s).
func TestEndStopsALoad(t *testing.T) {
	endToEnd(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "big.jsonl")
	messages := writeBigSession(t, file, dir, 32<<20)
	for _, end := range []string{"SIGTERM", "EOF"} {
		for _, moment := range []string{"lock", "read", "replay"} {
			t.Run(end+"/"+moment, func(t *testing.T) {
				if moment == "lock" { // as another rpi that holds the session
					lock, err := lockSessionFile(context.Background(), file, 0)
					if err != nil {
						t.Fatal(err)
					}
					defer lock.Close()
				}
				c, cmd, stderr := startACPProcess(t, "", "--session-dir", dir)
				c.call("initialize", map[string]any{"protocolVersion": 1})
				load := c.request("session/load", map[string]any{"sessionId": bigSessionID, "cwd": dir, "mcpServers": []any{}})
				switch moment {
				case "lock", "read": // rpi has the file open
					waitOpen(t, cmd.Process.Pid, file, map[string]int{"lock": 1, "read": 2}[moment])
				case "replay":
					c.waitFor(0, func(m acpTestMessage) bool { return m.Method == "session/update" })
				}
				ended := time.Now()
				if end == "SIGTERM" {
					cmd.Process.Signal(syscall.SIGTERM)
				} else {
					c.w.Close()
				}
				c.waitEnd()
				code, took := waitExit(t, cmd, ended)
				if code != 0 || took > 2*time.Second {
					t.Errorf("exit code %d after %v; want 0 within 2 s (stderr: %s)", code, took, stderr.String())
				}
				replayed := 0
				for _, m := range c.messages() {
					if m.Method == "session/update" {
						replayed++
					}
				}
				answer := c.responseTo(load)
				if answer.Error == nil || !strings.Contains(answer.Error.Message, "shutting down") || replayed >= messages {
					t.Errorf("%d of %d messages replayed, then %.300s; want the load stopped", replayed, messages, answer.line)
				}
				t.Logf("exited after %v; %d of %d messages replayed", took, replayed, messages)
			})
		}
	}
}

// TestEndWithinThePromise: at the end of stdin rpi exits within what its
// docs promise — ACP 2 s (docs/acp.md), rpc 4 s (docs/protocol.md: 2 s for
// running commands to finish, then SIGTERM and SIGKILL 1 s later) — also
// when its running command ignores SIGTERM, and when something that
// command started left its session and holds its output open. A child
// that ignored SIGTERM got SIGKILL only after killGrace (2 s), and the
// pipe an escaped one held was cut 2 s after that: ACP took 2.01 s, or
// 4 s. The bounds are the promises themselves: rpi needs about 1 s
// (endKillGrace, and endPipeGrace more for the held pipe) in ACP and 3 s
// in rpc, which leaves at least 0.7 s for a loaded machine.
func TestEndWithinThePromise(t *testing.T) {
	endToEnd(t)
	commands := map[string]string{"ignores SIGTERM": "trap '' TERM; echo running; while :; do sleep 0.1; done"}
	if _, err := exec.LookPath("setsid"); err == nil {
		commands["holds its output"] = "trap '' TERM; setsid sleep 5 & echo running; while :; do sleep 0.1; done"
	}
	for name, command := range commands {
		t.Run("acp/"+name, func(t *testing.T) {
			t.Parallel()
			args, _ := json.Marshal(map[string]string{"command": command})
			argsJSON, _ := json.Marshal(string(args))
			c, cmd, stderr := startACPProcess(t, `{"toolCalls":[{"id":"c1","name":"bash","args":[`+string(argsJSON)+`]}]}`)
			c.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{"_meta": map[string]bool{"terminal_output": true}}})
			var opened acpSessionAnswer
			json.Unmarshal(c.call("session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}}).Result, &opened)
			c.request("session/prompt", acpTextPrompt(opened.SessionID, "run"))
			c.waitFor(0, func(m acpTestMessage) bool { return strings.Contains(m.line, `"data":"running\n"`) }) // the trap is set
			ended := time.Now()
			c.w.Close()
			if code, took := waitExit(t, cmd, ended); code != 0 || took > 2*time.Second {
				t.Errorf("exit code %d after %v at the end of stdin; want 0 within 2 s (stderr: %s)", code, took, stderr.String())
			} else {
				t.Logf("exited after %v", took)
			}
		})
		t.Run("rpc/"+name, func(t *testing.T) {
			t.Parallel()
			p := startRPI(t, "rpc", "--cwd", t.TempDir(), "--no-session")
			p.next(t)
			line, _ := json.Marshal(map[string]string{"id": "b", "type": "bash", "command": command})
			p.send(t, string(line)+"\n")
			p.until(t, "bash_execution_update", "")
			ended := time.Now()
			p.stdin.Close()
			if code, _ := p.exit(t); code != 0 || time.Since(ended) > 4*time.Second {
				t.Errorf("exit code %d after %v at the end of stdin; want 0 within 4 s (stderr: %s)", code, time.Since(ended), p.stderr.String())
			} else {
				t.Logf("exited after %v", time.Since(ended))
			}
		})
	}
}

// TestEndStopsASwitch: SIGTERM while rpc's switch_session waits for a
// session file another process holds (up to 5 s) stops the wait: the
// switch fails saying so and rpi exits 0 within 2 s.
func TestEndStopsASwitch(t *testing.T) {
	endToEnd(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "held.jsonl")
	writeBigSession(t, file, dir, 1<<20)
	lock, err := lockSessionFile(context.Background(), file, 0) // as another rpi that holds it
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	p := startRPI(t, "rpc", "--cwd", dir, "--no-session")
	p.next(t)
	line, _ := json.Marshal(map[string]string{"id": "s", "type": "switch_session", "sessionPath": file})
	p.send(t, string(line)+"\n")
	waitOpen(t, p.cmd.Process.Pid, file, 1)
	ended := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	code, rest := p.exit(t)
	if took := time.Since(ended); code != 0 || took > 2*time.Second {
		t.Errorf("exit code %d after %v; want 0 within 2 s (stderr: %s)", code, took, p.stderr.String())
	}
	if !strings.Contains(rest, `"id":"s","type":"response","command":"switch_session","success":false,"error":"Stopped waiting for session file`) {
		t.Errorf("switch_session's answer: %s", rest)
	}
}

// waitOpen waits until process pid has path open n times (its lock and
// the reading of it), as /proc shows; where there is no /proc, 100 ms.
func waitOpen(t *testing.T, pid int, path string, n int) {
	t.Helper()
	fds := fmt.Sprintf("/proc/%d/fd", pid)
	if _, err := os.Stat(fds); err != nil {
		time.Sleep(100 * time.Millisecond)
		return
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		entries, _ := os.ReadDir(fds)
		open := 0
		for _, e := range entries {
			if target, _ := os.Readlink(filepath.Join(fds, e.Name())); target == path {
				open++
			}
		}
		if open >= n {
			return
		}
	}
	t.Fatalf("rpi did not open %s %d times within 10 s", path, n)
}

// waitEnd waits until the client has read the agent's stdout to its end
// (a test then waits for the agent: exec's Wait closes the pipe), for
// at most 10 s.
func (c *acpTestClient) waitEnd() {
	c.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		changed, ended := c.changed, c.ended
		c.mu.Unlock()
		if ended {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			c.t.Fatalf("the agent's stdout did not end within 10 s")
		}
	}
}

// TestOutputGivesUpAtTheEnd: while rpi serves, a write the client does
// not take waits for it; once rpi is ending (output.end), such a write is
// given up after endStall, whatever the writer — an io.Pipe nobody reads
// (no deadline reaches it: its write stays blocked until the reader
// goes) or an *os.File pipe (its deadline ends the write at once) — and
// so is everything after it, a record streamed in pieces included, which
// stops being encoded.
func TestOutputGivesUpAtTheEnd(t *testing.T) {
	for _, kind := range []string{"io.Pipe", "os.Pipe"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var r io.Closer
			var w io.Writer
			if kind == "io.Pipe" {
				r, w = io.Pipe()
			} else {
				pr, pw, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer pw.Close()
				r, w = pr, pw
			}
			defer r.Close() // an io.Pipe's write given up ends here
			o := newOutput(w, io.Discard)
			piece := bytes.Repeat([]byte("x"), maxPending)
			spills := 0
			streamed := make(chan struct{})
			go func() {
				defer close(streamed)
				o.stream(func(buf []byte, spill func([]byte) ([]byte, bool)) []byte {
					for range 64 << 20 / maxPending { // 64 MiB, far more than a pipe holds
						more := false
						spills++
						if buf, more = spill(append(buf, piece...)); !more {
							break
						}
					}
					return buf
				})
			}()
			select {
			case <-streamed:
				t.Fatal("the stream ended before rpi did, with nobody reading")
			case <-time.After(200 * time.Millisecond):
			}
			ended := time.Now()
			o.end()
			select {
			case <-streamed:
			case <-time.After(endStall + 5*time.Second):
				t.Fatal("the blocked write was not given up")
			}
			if took := time.Since(ended); took < endStall/2 {
				t.Errorf("given up after %v; want about endStall (%v)", took, endStall)
			}
			if spills > 4 {
				t.Errorf("%d pieces encoded after the write was given up", spills)
			}
			select {
			case <-o.gone:
			default:
				t.Error("gone is open after a write was given up")
			}
			wrote := make(chan struct{})
			go func() {
				o.send(func(buf []byte) ([]byte, error) { return append(buf, `{"after":true}`...), nil })
				close(wrote)
			}()
			select {
			case <-wrote:
			case <-time.After(10 * time.Second): // it waits on nothing: only a loaded machine is slow
				t.Error("a record after the write given up waited")
			}
			if kind == "os.Pipe" { // the deadline ended the write: nothing is left behind
				select {
				case <-o.wrote:
				case <-time.After(10 * time.Second):
					t.Error("the write given up still runs")
				}
			}
		})
	}
}

// TestOutputWaitsForASlowReaderAtTheEnd: once rpi is ending, a write the
// client takes slowly — a pipe read 16 KiB at a time, a third of
// endStall apart, the whole of it taking longer than endStall — is
// written whole: only a client that takes nothing for endStall is given
// up on. (With the pieces of 64 KiB rpi writes while it serves, this
// reader took none of them whole within endStall, and was given up.)
func TestOutputWaitsForASlowReaderAtTheEnd(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	got := make(chan int)
	go func() {
		n, buf := 0, make([]byte, 16<<10)
		for {
			time.Sleep(endStall / 3)
			k, err := io.ReadFull(pr, buf)
			n += k
			if err != nil {
				got <- n
				return
			}
		}
	}()
	o := newOutput(pw, io.Discard)
	o.end()
	record := bytes.Repeat([]byte("x"), 2*writeChunk) // eight reads: longer than endStall in all
	o.send(func(buf []byte) ([]byte, error) { return append(buf, record...), nil })
	pw.Close()
	if n := <-got; n != len(record)+1 {
		t.Errorf("the slow reader got %d bytes of %d", n, len(record)+1)
	}
}

// TestStallIsCountedInLooks: a write at the end is given up only once
// stallLooks looks in a row find it on the same begun piece. Looks that
// find no piece begun (its goroutine has not run yet: a CI run under load
// lost the rest of TestLoopPromptLimit's output so), or a new piece each
// time (a slow client), never give it up, however many there are; the
// ticks here are sent by hand, so no clock is involved.
func TestStallIsCountedInLooks(t *testing.T) {
	for _, c := range []struct {
		name    string
		pieces  func(look int) int64 // the pieces begun by each look
		givenUp bool
	}{
		{"not begun", func(int) int64 { return 0 }, false},
		{"a new piece each look", func(look int) int64 { return int64(look + 1) }, false},
		{"a new piece every other look", func(look int) int64 { return int64(look/2 + 1) }, false},
		{"begun late, then stalled", func(look int) int64 { return int64(min(1, max(0, look-3*stallLooks))) }, true},
		{"stalled on its third piece", func(look int) int64 { return int64(min(3, look+1)) }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := newOutput(io.Discard, io.Discard)
			ticks := make(chan time.Time) // unbuffered: each send is one look taken
			result := make(chan bool, 1)
			go func() {
				done, _ := o.awaitStall(ticks)
				result <- !done
			}()
			const looks = 6 * stallLooks
			for look := range looks {
				o.pieces.Store(c.pieces(look))
				select {
				case ticks <- time.Time{}:
					continue
				case givenUp := <-result:
					if !givenUp || !c.givenUp {
						t.Fatalf("ended at look %d (given up: %v); want given up: %v", look, givenUp, c.givenUp)
					}
					return
				}
			}
			o.wrote <- nil // the write ends
			if givenUp := <-result; givenUp != c.givenUp {
				t.Errorf("after %d looks given up: %v; want %v", looks, givenUp, c.givenUp)
			}
		})
	}
}

// TestStallEndedAtTheLastLook: a write that ends just as the look that
// would give it up comes is not given up: rpi used to take whichever of
// the two it saw first, and half the time gave up a write that had been
// taken whole, dropping all that came after it.
func TestStallEndedAtTheLastLook(t *testing.T) {
	for range 32 {
		o := newOutput(io.Discard, io.Discard)
		o.pieces.Store(1)
		ticks := make(chan time.Time)
		result := make(chan bool, 1)
		go func() {
			done, _ := o.awaitStall(ticks)
			result <- done
		}()
		for range stallLooks { // the look that finds the piece, and all but the last after it
			ticks <- time.Time{}
		}
		o.wrote <- nil // the write ends as the last look comes: whichever it sees first, nothing is given up
		select {
		case ticks <- time.Time{}:
			if done := <-result; !done {
				t.Fatal("a write that had ended was given up")
			}
		case done := <-result: // it saw the end first
			if !done {
				t.Fatal("a write that had ended was given up")
			}
		}
	}
}
