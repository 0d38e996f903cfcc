package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCutTail(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		maxLines int
		maxBytes int
		want     string
	}{
		{"under both limits", "a\nb\n", 5, 100, "a\nb\n"},
		{"line limit", "1\n2\n3\n4\n", 2, 100, "3\n4\n"},
		{"line limit, no final newline", "1\n2\n3", 2, 100, "2\n3"},
		{"byte limit keeps whole lines", "aaaa\nbbbb\ncc\n", 10, 7, "cc\n"},
		{"byte limit exact", "aaaa\nbbbb\n", 10, 10, "aaaa\nbbbb\n"},
		{"last line alone too long keeps its end", "x\n0123456789", 10, 4, "6789"},
		{"cut never splits a character", "x\nééé", 10, 5, "éé"},
	}
	for _, tt := range tests {
		if got := string(cutTail([]byte(tt.in), tt.maxLines, tt.maxBytes)); got != tt.want {
			t.Errorf("%s: cutTail(%q, %d, %d) = %q, want %q", tt.name, tt.in, tt.maxLines, tt.maxBytes, got, tt.want)
		}
	}
}

func TestUTF8Stream(t *testing.T) {
	var u utf8Stream
	euro := "€" // three bytes
	var got []string
	got = append(got, u.next([]byte("a"+euro[:1])))
	got = append(got, u.next([]byte(euro[1:2])))
	got = append(got, u.next([]byte(euro[2:]+"b")))
	got = append(got, u.next([]byte{0xff, 'c'}))
	got = append(got, u.next([]byte{0xe2}))
	got = append(got, u.flush())
	want := []string{"a", "", euro + "b", "\xffc", "", "\xe2"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("chunk %d = %q, want %q", i, got[i], want[i])
		}
	}
}

// TestBashFullOutput checks that a truncated bash answer names a temp file
// holding the whole output, interleaved as it came, and that rpi removes
// the file when it exits.
func TestBashFullOutput(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	pr, pw := io.Pipe()
	out := newWatchedOutput()
	done := make(chan struct{})
	go func() {
		serveInProcess(t, []string{"rpc", "--cwd", t.TempDir()}, pr, out, 0)
		close(done)
	}()
	io.WriteString(pw, `{"id":"big","type":"bash","command":"for i in $(seq 1 30000); do echo line$i; done; echo tail >&2"}`+"\n")
	if !out.waitFor(`"id":"big"`, func(b []byte) string { return string(b) }) {
		t.Fatal("no answer")
	}
	var res struct {
		Data bashResult
	}
	lines := bytes.Split(bytes.TrimSpace(out.bytes()), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], &res); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(res.Data.FullOutputPath)
	if err != nil {
		t.Fatal(err)
	}
	// stdout and stderr are separate pipes, so "tail" may arrive before the
	// last stdout chunk; each stream's own order is kept.
	if !res.Data.Truncated || !strings.HasPrefix(string(full), "line1\nline2\n") ||
		!strings.Contains(string(full), "line29999\nline30000\n") || !strings.Contains(string(full), "tail\n") ||
		len(full) != len("tail\n")+int(linesBytes(30000)) {
		t.Errorf("truncated %v; full output %d bytes, starting %q", res.Data.Truncated, len(full), full[:20])
	}
	if len(res.Data.Output) > maxOutputBytes || !strings.Contains(res.Data.Output, "line30000\n") {
		t.Errorf("output is %d bytes ending %q: want the tail within %d bytes", len(res.Data.Output), res.Data.Output[len(res.Data.Output)-20:], maxOutputBytes)
	}
	if res.Data.Stderr != "tail\n" || strings.Count(res.Data.Stdout, "\n") != maxOutputLines || !strings.HasSuffix(res.Data.Stdout, "line30000\n") {
		t.Errorf("stderr %q, stdout %d lines", res.Data.Stderr, strings.Count(res.Data.Stdout, "\n"))
	}
	pw.Close()
	<-done
	if _, err := os.Stat(res.Data.FullOutputPath); !os.IsNotExist(err) {
		t.Errorf("full output file still there after exit: %v", err)
	}
}

// linesBytes is the size of "line1\n" … "lineN\n".
func linesBytes(n int) int64 {
	var total int64
	for i := 1; i <= n; i++ {
		total += int64(len("line\n") + len(strconv.Itoa(i)))
	}
	return total
}

// processSession is an in-process rpi whose output records can be read as
// they come, for tests that check properties rather than exact lines.
type processSession struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *watchedOutput
	done chan struct{}
}

func startSession(t *testing.T) *processSession {
	pr, pw := io.Pipe()
	ps := &processSession{t: t, in: pw, out: newWatchedOutput(), done: make(chan struct{})}
	go func() {
		serveInProcess(t, []string{"rpc", "--cwd", t.TempDir()}, pr, ps.out, 0)
		close(ps.done)
	}()
	return ps
}

func (ps *processSession) send(line string) { io.WriteString(ps.in, line+"\n") }

// waitFor waits until the raw output contains text.
func (ps *processSession) waitFor(text string) {
	ps.t.Helper()
	if !ps.out.waitFor(text, func(b []byte) string { return string(b) }) {
		ps.t.Fatalf("never saw %s in:\n%.2000s", text, ps.out.bytes())
	}
}

// close ends stdin and waits for rpi to exit; it returns every record.
func (ps *processSession) close() []map[string]any {
	ps.in.Close()
	<-ps.done
	var recs []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(ps.out.bytes()), []byte("\n")) {
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			ps.t.Fatalf("bad record %q", line)
		}
		recs = append(recs, rec)
	}
	return recs
}

// processIDs returns the processId answered to each process_start id.
func processIDs(recs []map[string]any) map[string]string {
	ids := map[string]string{}
	for _, rec := range recs {
		if rec["command"] == "process_start" && rec["success"] == true {
			ids[rec["id"].(string)] = rec["data"].(map[string]any)["processId"].(string)
		}
	}
	return ids
}

// TestProcessEventOrder floods output from several processes at once and
// checks, per process, that process_started comes first, process_exited
// last, and that the output chunks add up to exactly what was written.
func TestProcessEventOrder(t *testing.T) {
	ps := startSession(t)
	const n = 4
	for i := range n {
		ps.send(fmt.Sprintf(`{"id":"p%d","type":"process_start","command":"seq 1 50000; seq 1 1000 >&2"}`, i))
	}
	for range n {
		ps.waitFor(`"type":"process_exited"`)
	}
	time.Sleep(100 * time.Millisecond)
	recs := ps.close()
	var want bytes.Buffer
	for i := 1; i <= 50000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	for _, id := range processIDs(recs) {
		state := "before"
		var stdout strings.Builder
		for _, rec := range recs {
			data, _ := rec["data"].(map[string]any)
			if data == nil || data["processId"] != id {
				continue
			}
			switch rec["type"] {
			case "process_started":
				if state != "before" {
					t.Errorf("%s: process_started after %s", id, state)
				}
				state = "started"
			case "process_output":
				if state != "started" {
					t.Errorf("%s: output while %s", id, state)
				}
				if data["stream"] == "stdout" {
					stdout.WriteString(data["chunk"].(string))
				}
			case "process_exited":
				if state != "started" {
					t.Errorf("%s: process_exited while %s", id, state)
				}
				state = "exited"
			}
		}
		if state != "exited" || stdout.String() != want.String() {
			t.Errorf("%s: ended %s with %d bytes of stdout, want exited with %d", id, state, stdout.Len(), want.Len())
		}
	}
}

// TestPTYEcho checks what the terminal's line discipline does with keys:
// typed text is echoed, and CtrlC is echoed as ^C and interrupts.
func TestPTYEcho(t *testing.T) {
	ps := startSession(t)
	ps.send(`{"id":"p","type":"process_start","command":"cat","pty":true}`)
	ps.waitFor(`"type":"process_started"`)
	id := processIDs(ps.records())["p"]
	ps.send(`{"id":"w","type":"process_write","processId":"` + id + `","data":"hello"}`)
	ps.send(`{"id":"k","type":"process_send_keys","processId":"` + id + `","keys":["Enter"]}`)
	// CtrlC makes the terminal flush output not yet read, so wait first.
	ps.waitForOutput(id, "hello\r\nhello\r\n")
	ps.send(`{"id":"c","type":"process_send_keys","processId":"` + id + `","keys":["CtrlC"]}`)
	ps.waitFor(`"signal":"SIGINT"`)
	var output strings.Builder
	for _, rec := range ps.close() {
		if data, _ := rec["data"].(map[string]any); rec["type"] == "process_output" {
			output.WriteString(data["chunk"].(string))
		}
	}
	// The echo of the typed line, cat's copy of it, then the echoed ^C.
	if got := output.String(); got != "hello\r\nhello\r\n^C" {
		t.Errorf("terminal output %q", got)
	}
}

// waitForOutput waits until process id's output, all chunks joined,
// contains text.
func (ps *processSession) waitForOutput(id, text string) {
	ps.t.Helper()
	joined := func(b []byte) string {
		var all strings.Builder
		for _, line := range bytes.Split(b, []byte("\n")) {
			var rec struct {
				Type string
				Data processOutputData
			}
			if json.Unmarshal(line, &rec) == nil && rec.Type == "process_output" && rec.Data.ProcessID == id {
				all.WriteString(rec.Data.Chunk)
			}
		}
		return all.String()
	}
	if !ps.out.waitFor(text, joined) {
		ps.t.Fatalf("process %s never wrote %q", id, text)
	}
}

// records returns the records so far without ending the session.
func (ps *processSession) records() []map[string]any {
	var recs []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(ps.out.bytes()), []byte("\n")) {
		var rec map[string]any
		if json.Unmarshal(line, &rec) == nil {
			recs = append(recs, rec)
		}
	}
	return recs
}

// TestSignalReachesGrandchild checks that process_signal goes to the whole
// process group: the test binary, started as a helper, starts a grandchild
// and both die from one SIGTERM.
func TestSignalReachesGrandchild(t *testing.T) {
	ps := startSession(t)
	ps.send(fmt.Sprintf(`{"id":"p","type":"process_start","command":%q,"args":[],"env":{"RPI_HELPER":"spawn-grandchild"}}`, os.Args[0]))
	ps.waitFor(`"stream":"stdout"`)
	recs := ps.records()
	id := processIDs(recs)["p"]
	var grandchild int
	for _, rec := range recs {
		if data, _ := rec["data"].(map[string]any); rec["type"] == "process_output" {
			grandchild, _ = strconv.Atoi(strings.TrimSpace(data["chunk"].(string)))
		}
	}
	if !alive(grandchild) {
		t.Fatalf("grandchild %d is not running", grandchild)
	}
	ps.send(`{"id":"sig","type":"process_signal","processId":"` + id + `","signal":"SIGTERM"}`)
	ps.waitFor(`"signal":"SIGTERM"`)
	deadline := time.Now().Add(5 * time.Second)
	for alive(grandchild) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(grandchild) {
		t.Errorf("grandchild %d survived SIGTERM to the group", grandchild)
	}
	ps.close()
}

// TestEndToEndNoOrphanProcesses starts processes of every kind — plain, a
// PTY, one that ignores SIGTERM, one with a grandchild — then closes stdin:
// each gets its process_exited, rpi exits 0, and /proc shows none of them.
func TestEndToEndNoOrphanProcesses(t *testing.T) {
	p := startRPI(t, "rpc", "--cwd", t.TempDir())
	p.next(t)
	p.send(t, `{"id":"plain","type":"process_start","command":"sleep 300"}`+"\n")
	p.send(t, `{"id":"pty","type":"process_start","command":"sleep 300","pty":true}`+"\n")
	p.send(t, `{"id":"stubborn","type":"process_start","command":"trap '' TERM; echo ready; while :; do sleep 0.05; done"}`+"\n")
	p.send(t, fmt.Sprintf(`{"id":"family","type":"process_start","command":%q,"args":[],"env":{"RPI_HELPER":"spawn-grandchild"}}`+"\n", os.Args[0]))
	var pids []int
	outputs := 0
	for len(pids) < 4 || outputs < 2 {
		rec := p.next(t)
		data, _ := rec["data"].(map[string]any)
		switch rec["type"] {
		case "process_started":
			pids = append(pids, int(data["pid"].(float64)))
		case "process_output":
			outputs++
			if pid, err := strconv.Atoi(strings.TrimSpace(data["chunk"].(string))); err == nil {
				pids = append(pids, pid) // the grandchild
			}
		}
	}
	p.stdin.Close()
	code, rest := p.exit(t)
	if code != 0 || strings.Count(rest, `"type":"process_exited"`) != 4 {
		t.Errorf("exit %d; want 0 and four process_exited in:\n%s", code, rest)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d survived rpi's exit", pid)
		}
	}
}

// TestBackpressure checks that a client that stops reading makes the
// child wait instead of rpi buffering: rpi's memory stays bounded while a
// child floods, and every byte arrives once the client reads again.
func TestBackpressure(t *testing.T) {
	p := startRPI(t, "rpc", "--cwd", t.TempDir())
	p.next(t)
	p.send(t, `{"id":"flood","type":"process_start","command":"head -c 20000000 /dev/zero | tr '\\0' x"}`+"\n")
	time.Sleep(1500 * time.Millisecond) // not reading: rpi's stdout pipe fills up
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var rssKB int
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rssKB, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	t.Logf("rpi resident while its client is not reading: %d kB", rssKB)
	if rssKB == 0 || rssKB > 64<<10 {
		t.Errorf("rpi holds %d kB while its client is not reading", rssKB)
	}
	var got int
	for {
		rec := p.next(t)
		if rec["type"] == "process_output" {
			got += len(rec["data"].(map[string]any)["chunk"].(string))
		}
		if rec["type"] == "process_exited" {
			break
		}
	}
	if got != 20_000_000 {
		t.Errorf("got %d bytes of output, want 20000000", got)
	}
	p.stdin.Close()
	p.exit(t)
}
