package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSignalTables: processSignalsJSON, the process tool's enum, is
// processSignals; every one of them has a number; and signalNumbers
// gives each name and each number once, so that signalName, which takes
// the first name of a number, names the signal that was sent.
func TestSignalTables(t *testing.T) {
	if got := jsonStrings(processSignals); got != processSignalsJSON {
		t.Errorf("processSignalsJSON is %s, want jsonStrings(processSignals): %s", processSignalsJSON, got)
	}
	for _, name := range processSignals {
		if signalNumber(name) == 0 {
			t.Errorf("%s: not in signalNumbers", name)
		}
	}
	names, numbers := map[string]bool{}, map[sysSignal]bool{}
	for _, s := range signalNumbers {
		if names[s.name] || numbers[s.number] {
			t.Errorf("%s (%d): its name or number is in signalNumbers twice", s.name, int(s.number))
		}
		names[s.name], numbers[s.number] = true, true
		if signalName(s.number) != s.name || signalNumber(s.name) != s.number {
			t.Errorf("%s (%d): signalName %s, signalNumber %d", s.name, int(s.number), signalName(s.number), int(signalNumber(s.name)))
		}
	}
}

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
	endToEnd(t)
	ps := startSession(t)
	ps.send(`{"id":"big","type":"bash","command":"for i in $(seq 1 30000); do echo line$i; done; echo tail >&2"}`)
	ps.waitFor(`"id":"big"`)
	var res struct {
		Data shellResult
	}
	recs := bytes.Split(bytes.TrimSpace(ps.out.bytes()), []byte("\n"))
	if err := json.Unmarshal(recs[len(recs)-1], &res); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(res.Data.FullOutputPath)
	if err != nil {
		t.Fatal(err)
	}
	// stdout and stderr are separate pipes, so "tail" may arrive before the
	// last stdout chunk; each stream's own order is kept.
	// "tail" may even fall between two chunks of one line: without it,
	// stdout is whole and in order.
	stdout := strings.Replace(string(full), "tail\n", "", 1)
	if !res.Data.Truncated || !strings.HasPrefix(stdout, "line1\nline2\n") ||
		!strings.HasSuffix(stdout, "line29999\nline30000\n") || !strings.Contains(string(full), "tail\n") ||
		len(full) != len("tail\n")+int(linesBytes(30000)) {
		t.Errorf("truncated %v; full output %d bytes, starting %q", res.Data.Truncated, len(full), full[:20])
	}
	if len(res.Data.Output) > maxOutputBytes || !strings.Contains(res.Data.Output, "line30000\n") {
		t.Errorf("output is %d bytes ending %q: want the tail within %d bytes", len(res.Data.Output), res.Data.Output[len(res.Data.Output)-20:], maxOutputBytes)
	}
	if res.Data.Stderr != "tail\n" || strings.Count(res.Data.Stdout, "\n") != maxOutputLines || !strings.HasSuffix(res.Data.Stdout, "line30000\n") {
		t.Errorf("stderr %q, stdout %d lines", res.Data.Stderr, strings.Count(res.Data.Stdout, "\n"))
	}
	ps.close()
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
	env  *testEnv
	in   *io.PipeWriter
	out  *watchedOutput
	done chan struct{}
}

func startSession(t *testing.T) *processSession {
	return startSessionIn(t, newTestEnv(t), []string{"rpc", "--cwd", t.TempDir()})
}

// startSessionIn starts an in-process rpi with args in environment e.
func startSessionIn(t *testing.T, e *testEnv, args []string) *processSession {
	pr, pw := io.Pipe()
	ps := &processSession{t: t, env: e, in: pw, out: newWatchedOutput(), done: make(chan struct{})}
	go func() {
		if code := runRPI(t, e, args, pr, ps.out); code != 0 {
			t.Errorf("exit code %d", code)
		}
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
	return ps.records()
}

// records returns the records so far without ending the session.
func (ps *processSession) records() []map[string]any {
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

// TestShellSettings: settings.json's shellPath (a leading ~ is the home
// folder) is the shell of the user's bash and the model's, and its
// shellCommandPrefix a line run before each command, as in pi 1.6; the
// command recorded is the one given. Both were ignored.
func TestShellSettings(t *testing.T) {
	endToEnd(t)
	if runtime.GOOS == "windows" {
		t.Skip("a shell script as the shell")
	}
	e := newTestEnv(t)
	os.WriteFile(filepath.Join(e.home, "myshell"), []byte("#!/bin/sh\necho \"myshell $1\"\nexec /bin/sh \"$@\"\n"), 0o755)
	os.WriteFile(filepath.Join(e.agentDir, "settings.json"), []byte(`{"shellPath":"~/myshell","shellCommandPrefix":"GREETING=prefixed"}`), 0o600)
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir(), "--no-session"})
	ps.send(`{"id":"b","type":"bash","command":"echo $GREETING"}`)
	ps.waitFor(`"id":"b"`)
	ps.send(`{"id":"m","type":"get_messages"}`)
	ps.waitFor(`"id":"m"`)
	for _, rec := range ps.close() {
		switch rec["id"] {
		case "b":
			if out := rec["data"].(map[string]any)["output"]; out != "myshell -c\nprefixed\n" {
				t.Errorf("output %q, want the shell's line, then the prefix's variable", out)
			}
		case "m":
			msgs := rec["data"].(map[string]any)["messages"].([]any)
			if cmd := msgs[0].(map[string]any)["command"]; cmd != "echo $GREETING" {
				t.Errorf("recorded command %q", cmd)
			}
		}
	}
}

// TestShellCannotStart: a shell that does not start is named in the
// failure as it was run ("bash" when it is bash), and a settings.json
// shellPath that is not there gets pi 1.6's "Custom shell path not
// found". Every such failure said "Cannot start bash", whatever the shell.
func TestShellCannotStart(t *testing.T) {
	endToEnd(t)
	if runtime.GOOS == "windows" {
		t.Skip("file modes")
	}
	e := newTestEnv(t)
	dir := t.TempDir()
	for _, name := range []string{"myshell", "bash"} {
		os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o644) // not executable
	}
	for _, c := range []struct{ shellPath, want string }{
		{filepath.Join(dir, "missing"), "Custom shell path not found: " + filepath.Join(dir, "missing")},
		{"~/missing", "Custom shell path not found: " + filepath.Join(e.home, "missing")},
		{"rpi-no-such-shell", "Custom shell path not found: rpi-no-such-shell"},
		{filepath.Join(dir, "myshell"), "Cannot start " + filepath.Join(dir, "myshell") + ": permission denied"},
		{filepath.Join(dir, "bash"), "Cannot start bash: permission denied"},
	} {
		settings, _ := json.Marshal(map[string]string{"shellPath": c.shellPath})
		os.WriteFile(filepath.Join(e.agentDir, "settings.json"), settings, 0o600)
		sp := serveInProcess(t, e, "--cwd", t.TempDir(), "--no-session")
		sp.send(`{"id":"b","type":"bash","command":"echo hi"}`)
		sp.seen(`"id":"b"`)
		want, _ := json.Marshal(c.want)
		if line := `{"id":"b","type":"response","command":"bash","success":false,"error":` + string(want) + `}`; !bytes.Contains(sp.out.bytes(), []byte(line)) {
			t.Errorf("shellPath %q: want %s in:\n%s", c.shellPath, line, sp.out.bytes())
		}
		sp.stop()
	}
}

// TestShellCannotStartInGoneFolder: a shell that is there but cannot
// start because the session's folder was removed says so ("chdir DIR:
// no such file or directory"), not that the shell is missing: a
// configured shellPath got "Custom shell path not found", bash "Cannot
// start bash: no such file or directory".
func TestShellCannotStartInGoneFolder(t *testing.T) {
	endToEnd(t)
	if runtime.GOOS == "windows" {
		t.Skip("a folder in use cannot be removed")
	}
	e := newTestEnv(t)
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, c := range []struct{ shellPath, name string }{{sh, sh}, {"", "bash"}} {
		settings, _ := json.Marshal(map[string]string{"shellPath": c.shellPath})
		os.WriteFile(filepath.Join(e.agentDir, "settings.json"), settings, 0o600)
		cwd := filepath.Join(t.TempDir(), "project")
		os.Mkdir(cwd, 0o755)
		sp := serveInProcess(t, e, "--cwd", cwd, "--no-session")
		os.Remove(cwd)
		sp.send(`{"id":"b","type":"bash","command":"echo hi"}`)
		sp.seen(`"id":"b"`)
		want, _ := json.Marshal("Cannot start " + c.name + ": chdir " + cwd + ": no such file or directory")
		if line := `{"id":"b","type":"response","command":"bash","success":false,"error":` + string(want) + `}`; !bytes.Contains(sp.out.bytes(), []byte(line)) {
			t.Errorf("shellPath %q: want %s in:\n%s", c.shellPath, line, sp.out.bytes())
		}
		sp.stop()
	}
}

// TestShellPathRelative: a relative shellPath, which would be found in
// the session's folder (the project's choice), is ignored with a warning.
func TestShellPathRelative(t *testing.T) {
	e := newTestEnv(t)
	os.WriteFile(filepath.Join(e.agentDir, "settings.json"), []byte(`{"shellPath":"bin/sh"}`), 0o600)
	set := loadSettings(&hostSettings{agentDir: e.agentDir, home: e.home}, t.TempDir(), nil, nil)
	want := `Ignored shellPath "bin/sh" in ` + filepath.Join(e.agentDir, "settings.json") + `: it must be an absolute path, one starting with ~/, or a program's name`
	if set.shellPath != "" || !slices.Contains(set.notices, want) {
		t.Errorf("shellPath %q, notices %q", set.shellPath, set.notices)
	}
}

// spawnLine is a process_spawn command line for argv, in cwd "/".
func spawnLine(id string, argv []string, specExtra string) string {
	quoted, _ := json.Marshal(argv)
	return fmt.Sprintf(`{"id":%q,"type":"process_spawn","spec":{"argv":%s,"cwd":"/"%s}}`, id, quoted, specExtra)
}

// processIDs returns the process id answered to each process_spawn id.
func processIDs(recs []map[string]any) map[string]string {
	ids := map[string]string{}
	for _, rec := range recs {
		if rec["command"] == "process_spawn" && rec["success"] == true {
			ids[rec["id"].(string)] = rec["data"].(map[string]any)["id"].(string)
		}
	}
	return ids
}

// eventProcess is the process id an event is about.
func eventProcess(rec map[string]any) string {
	data, _ := rec["data"].(map[string]any)
	if p, ok := data["process"].(map[string]any); ok {
		return p["id"].(string)
	}
	id, _ := data["id"].(string)
	return id
}

// outputOf joins the process_output data of process id.
func outputOf(recs []map[string]any, id string) string {
	var out strings.Builder
	for _, rec := range recs {
		if rec["type"] == "process_output" && eventProcess(rec) == id {
			b, _ := base64.StdEncoding.DecodeString(rec["data"].(map[string]any)["dataBase64"].(string))
			out.Write(b)
		}
	}
	return out.String()
}

// TestProcessEventOrder floods output from several processes at once and
// checks, per process, that process_started comes first, process_exited
// last, and that the output chunks add up to exactly what was written,
// with cursors that follow each other.
func TestProcessEventOrder(t *testing.T) {
	endToEnd(t)
	ps := startSession(t)
	const n = 4
	for i := range n {
		ps.send(spawnLine(fmt.Sprintf("p%d", i), []string{"sh", "-c", "seq 1 50000"}, ""))
	}
	// Every process_exited, not the first one n times: closing stdin
	// early would kill the others.
	waitUntil(t, ps, func(out string) bool { return strings.Count(out, `"type":"process_exited"`) == n })
	recs := ps.close()
	var want bytes.Buffer
	for i := 1; i <= 50000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	ids := processIDs(recs)
	if len(ids) != n {
		t.Fatalf("%d processes started, want %d", len(ids), n)
	}
	for _, id := range ids {
		state := "before"
		var cursor float64
		for _, rec := range recs {
			if eventProcess(rec) != id {
				continue
			}
			switch rec["type"] {
			case "process_started":
				if state != "before" {
					t.Errorf("%s: process_started after %s", id, state)
				}
				state = "started"
			case "process_output":
				data := rec["data"].(map[string]any)
				if state != "started" || data["startCursor"].(float64) != cursor {
					t.Errorf("%s: output at %v while %s, cursor %v", id, data["startCursor"], state, cursor)
				}
				cursor = data["cursor"].(float64)
			case "process_exited":
				if state != "started" {
					t.Errorf("%s: process_exited while %s", id, state)
				}
				state = "exited"
			}
		}
		if got := outputOf(recs, id); state != "exited" || got != want.String() {
			t.Errorf("%s: ended %s with %d bytes of output, want exited with %d", id, state, len(got), want.Len())
		}
	}
}

// TestPTYEcho checks what the terminal's line discipline does with keys:
// typed text is echoed, and CTRL_C is echoed as ^C and interrupts.
func TestPTYEcho(t *testing.T) {
	endToEnd(t)
	ps := startSession(t)
	ps.send(spawnLine("p", []string{"cat"}, `,"tty":true`))
	ps.waitFor(`"command":"process_spawn"`) // the answer, which comes after process_started
	id := processIDs(ps.records())["p"]
	ps.send(`{"id":"w","type":"process_write","processId":"` + id + `","dataBase64":"` + base64.StdEncoding.EncodeToString([]byte("hello")) + `"}`)
	ps.send(`{"id":"k","type":"process_keys","processId":"` + id + `","keys":["ENTER"]}`)
	// CTRL_C makes the terminal flush output not yet read, so wait first.
	ps.waitForOutput(id, "hello\r\nhello\r\n")
	ps.send(`{"id":"c","type":"process_keys","processId":"` + id + `","keys":["CTRL_C"]}`)
	ps.waitFor(`"signal":"SIGINT"`)
	// The echo of the typed line, cat's copy of it, then the echoed ^C.
	if got := outputOf(ps.close(), id); got != "hello\r\nhello\r\n^C" {
		t.Errorf("terminal output %q", got)
	}
}

// TestCloseStdinOfATerminal: closeStdin with a terminal fails, naming
// what ends a terminal's input, and writes nothing of the data with it.
// It answered success and did nothing: the client believed the process
// had its end of input, and it waited for more for ever.
func TestCloseStdinOfATerminal(t *testing.T) {
	endToEnd(t)
	if !ptySupported {
		t.Skip("no PTY on this system")
	}
	ps := startSession(t)
	ps.send(spawnLine("p", []string{"cat"}, `,"tty":true`))
	ps.waitFor(`"command":"process_spawn"`)
	id := processIDs(ps.records())["p"]
	ps.send(`{"id":"w","type":"process_write","processId":"` + id + `","dataBase64":"` + base64.StdEncoding.EncodeToString([]byte("hello\n")) + `","closeStdin":true}`)
	ps.waitFor(`"id":"w"`)
	ps.send(`{"id":"a","type":"process_write","processId":"` + id + `","dataBase64":"` + base64.StdEncoding.EncodeToString([]byte("after\n")) + `"}`)
	// The terminal's echo of the line, and cat's copy of it.
	if !ps.out.waitFor("2", func([]byte) string { return strconv.Itoa(strings.Count(outputOf(ps.records(), id), "after\r\n")) }) {
		t.Fatalf("the line written after never came back twice: %q", outputOf(ps.records(), id))
	}
	recs := ps.close()
	for _, rec := range recs {
		if rec["id"] == "w" && (rec["success"] != false || !strings.Contains(fmt.Sprint(rec["error"]), "press CTRL_D")) {
			t.Errorf("closeStdin with a terminal: %v", rec)
		}
	}
	if got := outputOf(recs, id); strings.Contains(got, "hello") {
		t.Errorf("the refused write's data reached the terminal: %q", got)
	}
}

// waitForOutput waits until process id's output, all chunks joined,
// contains text.
func (ps *processSession) waitForOutput(id, text string) {
	ps.t.Helper()
	if !ps.out.waitFor(text, func(b []byte) string { return outputOf(ps.records(), id) }) {
		ps.t.Fatalf("process %s never wrote %q", id, text)
	}
}

// TestSignalReachesGrandchild checks that process_signal goes to the whole
// process group: the test binary, started as a helper, starts a grandchild
// and both die from one SIGTERM.
func TestSignalReachesGrandchild(t *testing.T) {
	endToEnd(t)
	ps := startSession(t)
	ps.send(spawnLine("p", []string{os.Args[0]}, `,"env":{"RPI_HELPER":"spawn-grandchild"}`))
	ps.waitFor(`"type":"process_output"`)
	recs := ps.records()
	id := processIDs(recs)["p"]
	grandchild, _ := strconv.Atoi(strings.TrimSpace(outputOf(recs, id)))
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
	endToEnd(t)
	p := startRPI(t, "rpc", "--cwd", t.TempDir())
	p.next(t)
	p.send(t, spawnLine("plain", []string{"sleep", "300"}, "")+"\n")
	p.send(t, spawnLine("pty", []string{"sleep", "300"}, `,"tty":true`)+"\n")
	p.send(t, spawnLine("stubborn", []string{"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"}, "")+"\n")
	p.send(t, spawnLine("family", []string{os.Args[0]}, `,"env":{"RPI_HELPER":"spawn-grandchild"}`)+"\n")
	pids := watchPIDs(t, p, 4)
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

// watchPIDs reads records until n processes have started and the two
// that print have printed; it returns their pids and the grandchild's.
func watchPIDs(t *testing.T, p *rpiProcess, n int) []int {
	var pids []int
	outputs := 0
	for len(pids) < n || outputs < 2 {
		rec := p.next(t)
		data, _ := rec["data"].(map[string]any)
		switch rec["type"] {
		case "process_started":
			pids = append(pids, int(data["process"].(map[string]any)["pid"].(float64)))
		case "process_output":
			outputs++
			text, _ := base64.StdEncoding.DecodeString(data["dataBase64"].(string))
			if pid, err := strconv.Atoi(strings.TrimSpace(string(text))); err == nil {
				pids = append(pids, pid) // the grandchild
			}
		}
	}
	return pids
}

// TestEndToEndKilledRPILeavesNoChildren kills rpi with SIGKILL while it
// runs processes, a grandchild and a user bash: the kernel's parent-death
// signal and the watchdog end every one of them, and the watchdog removes
// rpi's temp folder.
func TestEndToEndKilledRPILeavesNoChildren(t *testing.T) {
	endToEnd(t)
	tmp := t.TempDir()
	p := startRPIWith(t, withEnv("TMPDIR="+tmp), "rpc", "--cwd", t.TempDir())
	p.next(t)
	p.send(t, spawnLine("plain", []string{"sleep", "300"}, "")+"\n")
	p.send(t, spawnLine("stubborn", []string{"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"}, "")+"\n")
	p.send(t, spawnLine("family", []string{os.Args[0]}, `,"env":{"RPI_HELPER":"spawn-grandchild"}`)+"\n")
	pids := watchPIDs(t, p, 3)
	p.send(t, `{"id":"b","type":"bash","command":"seq 1 100000; sleep 300"}`+"\n")
	for {
		p.until(t, "bash_execution_update", "")
		if dirs, _ := filepath.Glob(filepath.Join(tmp, "rpi-*", "rpi-bash-*.log")); len(dirs) == 1 {
			break // the output passed the limit: rpi's temp folder holds its full copy
		}
	}
	p.cmd.Process.Kill()
	p.cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("pid %d survived rpi's SIGKILL", pid)
		}
	}
	for time.Now().Before(deadline) {
		if dirs, _ := filepath.Glob(filepath.Join(tmp, "rpi-*")); len(dirs) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("rpi's temp folder is still there after SIGKILL")
}

// TestEndToEndDefaultSignals starts rpi the way nohup and a shell's
// background job do (SIGHUP, SIGINT and SIGQUIT ignored), and with other
// signals ignored too: its children still start with every signal at its
// default, so process_signal SIGHUP ends one.
func TestEndToEndDefaultSignals(t *testing.T) {
	endToEnd(t)
	p := startRPIWith(t, func(cmd *exec.Cmd) {
		cmd.Args = append([]string{"sh", "-c", `trap '' HUP INT QUIT PIPE TSTP TTIN TTOU CONT USR1 USR2 ALRM; exec "$0" "$@"`, cmd.Path}, cmd.Args[1:]...)
		cmd.Path, _ = exec.LookPath("sh")
	}, "rpc", "--cwd", t.TempDir())
	p.next(t)
	p.send(t, spawnLine("p", []string{"sh", "-c", "grep SigIgn /proc/self/status; sleep 300"}, "")+"\n")
	var ignored string
	for ignored == "" {
		rec := p.next(t)
		if rec["type"] == "process_output" {
			text, _ := base64.StdEncoding.DecodeString(rec["data"].(map[string]any)["dataBase64"].(string))
			ignored = strings.TrimSpace(strings.TrimPrefix(string(text), "SigIgn:"))
		}
	}
	if ignored != "0000000000000000" {
		t.Errorf("the child started with ignored signals %s, want none", ignored)
	}
	ps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if !strings.Contains(string(ps), "SigIgn:") {
		t.Fatal("no /proc status for rpi")
	}
	id := ""
	for id == "" {
		p.send(t, `{"id":"l","type":"process_list"}`+"\n")
		rec := p.until(t, "response", "l")
		for _, info := range rec["data"].([]any) {
			id = info.(map[string]any)["id"].(string)
		}
	}
	p.send(t, `{"id":"hup","type":"process_signal","processId":"`+id+`","signal":"SIGHUP"}`+"\n")
	rec := p.until(t, "process_exited", "")
	if info := rec["data"].(map[string]any)["process"].(map[string]any); info["signal"] != "SIGHUP" || info["exitCode"].(float64) != 129 {
		t.Errorf("after SIGHUP: %v", info)
	}
	p.stdin.Close()
	p.exit(t)
}

// TestExitedProcessesHoldNothing starts many short processes and checks
// that, once they have exited, rpi holds no descriptor for any of them and
// little memory, though none was removed.
func TestExitedProcessesHoldNothing(t *testing.T) {
	endToEnd(t)
	ps := startSession(t)
	ps.send(`{"id":"warm","type":"get_state"}`)
	ps.waitFor(`"id":"warm"`)
	before := openFDs(t)
	const n, batch = 128, 16 // at most 16 may run at once
	for i := 0; i < n; i += batch {
		for j := i; j < i+batch; j++ {
			ps.send(spawnLine(fmt.Sprintf("p%d", j), []string{"head", "-c", "1000", "/dev/zero"}, fmt.Sprintf(`,"label":"p%d"`, j)))
		}
		for j := i; j < i+batch; j++ {
			ps.waitFor(fmt.Sprintf(`"label":"p%d","state":"exited"`, j))
		}
	}
	after := openFDs(t)
	t.Logf("open descriptors: %d before, %d after %d exited processes", before, after, n)
	if after > before+3 { // the watchdog's pipe, and slack for the runtime
		t.Errorf("%d open descriptors after %d exited processes, %d before", after, n, before)
	}
	ps.send(`{"id":"l","type":"process_list"}`)
	ps.waitFor(`"id":"l"`)
	ps.close()
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(entries)
}

// TestBackpressure checks that a client that stops reading makes the
// child wait instead of rpi buffering: rpi's memory stays bounded while a
// child floods, and every byte arrives once the client reads again.
func TestBackpressure(t *testing.T) {
	endToEnd(t)
	p := startRPI(t, "rpc", "--cwd", t.TempDir())
	p.next(t)
	p.send(t, spawnLine("flood", []string{"head", "-c", "20000000", "/dev/zero"}, "")+"\n")
	var got, pid int
	for pid == 0 { // up to the answer, which gives the child's pid
		rec := p.next(t)
		got += outputBytes(rec)
		if rec["type"] == "response" {
			pid = int(rec["data"].(map[string]any)["pid"].(float64))
		}
	}
	// Not reading: rpi's stdout pipe fills up, rpi stops reading the
	// child, and the child waits in write.
	written := waitBlockedWriting(t, pid)
	rssKB := residentKB(t, p.cmd.Process.Pid)
	t.Logf("rpi resident while its client is not reading: %d kB (the child wrote %d bytes so far)", rssKB, written)
	if rssKB == 0 || rssKB > 64<<10 {
		t.Errorf("rpi holds %d kB while its client is not reading", rssKB)
	}
	for {
		rec := p.next(t)
		got += outputBytes(rec)
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

// outputBytes is how many bytes of output a process_output record carries.
func outputBytes(rec map[string]any) int {
	if rec["type"] != "process_output" {
		return 0
	}
	b, _ := base64.StdEncoding.DecodeString(rec["data"].(map[string]any)["dataBase64"].(string))
	return len(b)
}

// waitBlockedWriting waits until process pid has stopped writing (for
// 100 ms; in write(2) where /proc/PID/wchan says so) and returns how many
// bytes it wrote. It fails when the process ends first: nothing then held
// it back.
func waitBlockedWriting(t *testing.T, pid int) int64 {
	t.Helper()
	written := func() int64 {
		stats, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
		if err != nil || !alive(pid) {
			t.Fatalf("process %d ended while its output was not being read: nothing held it back", pid)
		}
		_, after, _ := strings.Cut(string(stats), "wchar: ")
		n, _ := strconv.ParseInt(strings.Fields(after)[0], 10, 64)
		return n
	}
	deadline := time.Now().Add(30 * time.Second)
	last, still := written(), 0
	for time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		n := written()
		wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
		inWrite := strings.Contains(string(wchan), "pipe_write") || string(wchan) == "0" || len(wchan) == 0
		if n != last || !inWrite {
			last, still = n, 0
			continue
		}
		if still++; still == 10 {
			return n
		}
	}
	t.Fatalf("process %d never stopped writing", pid)
	return 0
}

// residentKB is a process's resident memory (VmRSS), or its peak (VmHWM).
func residentKB(t *testing.T, pid int, field ...string) int {
	name := "VmRSS:"
	if len(field) > 0 {
		name = field[0]
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb
		}
	}
	return 0
}

// TestBashMemoryIsFlat runs bash commands that print 200 MiB (the user's
// and the model's): rpi streams the excess to the full-output file, so its
// peak resident memory stays far below the output's size.
func TestBashMemoryIsFlat(t *testing.T) {
	t.Parallel()
	endToEnd(t)
	if testing.Short() {
		t.Skip("prints 200 MiB")
	}
	if raceDetector {
		t.Skip("a memory figure, which the race detector's shadow memory makes meaningless (and 200 MiB through it take minutes); the plain run checks it")
	}
	p := startRPI(t, "rpc", "--cwd", t.TempDir())
	p.next(t)
	p.send(t, `{"id":"b","type":"bash","command":"head -c 209715200 /dev/zero | tr '\\0' 'y' | fold -w 100"}`+"\n")
	rec := p.until(t, "response", "b")
	res := rec["data"].(map[string]any)
	if info, err := os.Stat(res["fullOutputPath"].(string)); err != nil || info.Size() < 200<<20 {
		t.Errorf("full output %v, %v", info, err)
	}
	peak := residentKB(t, p.cmd.Process.Pid, "VmHWM:")
	t.Logf("rpi's peak resident memory after 200 MiB of bash output: %d kB", peak)
	if peak > 64<<10 {
		t.Errorf("peak resident memory %d kB, want under 64 MiB", peak)
	}
	p.stdin.Close()
	p.exit(t)
}

// TestJobsDieWithTheirChild starts job-control shells whose jobs go to
// process groups of their own: when the child ends (stopped, or a user
// bashCommand that returns), its jobs end too, as they share its session.
func TestJobsDieWithTheirChild(t *testing.T) {
	endToEnd(t)
	ps := startSession(t)
	ps.send(spawnLine("j", []string{"bash", "-c", "set -m; sleep 4321 & echo $!; sleep 300"}, ""))
	ps.waitFor(`"type":"process_output"`)
	recs := ps.records()
	id := processIDs(recs)["j"]
	job, _ := strconv.Atoi(strings.TrimSpace(outputOf(recs, id)))
	ps.send(`{"id":"b","type":"bash","command":"set -m; sleep 4322 & echo $!"}`)
	ps.waitFor(`"id":"b"`)
	var bashJob int
	for _, rec := range ps.records() {
		if rec["id"] == "b" {
			bashJob, _ = strconv.Atoi(strings.TrimSpace(rec["data"].(map[string]any)["stdout"].(string)))
		}
	}
	ps.send(`{"id":"stop","type":"process_stop","processId":"` + id + `"}`)
	ps.waitFor(`"id":"stop"`)
	ps.close()
	for _, pid := range []int{job, bashJob} {
		deadline := time.Now().Add(5 * time.Second)
		for pid > 0 && alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if pid == 0 || alive(pid) {
			t.Errorf("job %d outlived its child", pid)
		}
	}
}

// TestProcessLogsCursorPastAnInt: process_logs takes a cursor past 2^31
// (a process writes more than a 32-bit int counts) on every platform.
func TestProcessLogsCursorPastAnInt(t *testing.T) {
	s := toolServer(t, nil)
	p, err := s.spawn(processSpec{Argv: []string{"true"}, Cwd: "/"}, "client", func(processInfo) {})
	if err != nil {
		t.Fatal(err)
	}
	r, rerr := decodeRequest([]byte(`{"type":"process_logs","processId":"`+p.id+`","cursor":3000000000}`), false, &rpcRequest{})
	if rerr != nil {
		t.Fatal(rerr)
	}
	if logs, err := s.processLogsCommand(r); err != nil || logs.(processLogs).RequestedCursor != 3000000000 {
		t.Errorf("process_logs with cursor 3000000000: %+v, %v", logs, err)
	}
}

// TestProcessToolListIsProcessList: the model's process tool answers list
// with process_list's answer, a bare array of ProcessInfo (ended ones
// included).
func TestProcessToolListIsProcessList(t *testing.T) {
	s := toolServer(t, nil)
	p, err := s.spawn(processSpec{Argv: []string{"true"}, Cwd: "/"}, "client", func(processInfo) {})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.wait(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	answer, _ := s.processListCommand(nil)
	want, _ := marshalJSON(answer)
	if got, isError := callTool(t, s, "process", `{"action":"list"}`); got != string(want) || isError || !strings.HasPrefix(got, `[{"id":`) {
		t.Errorf("the process tool's list:\n%s\nprocess_list's answer:\n%s", got, want)
	}
}

// TestRingShrink: a ring shrunk keeps its newest bytes, oldest first,
// and no room beside them, however it had wrapped.
func TestRingShrink(t *testing.T) {
	for limit := 1; limit <= 9; limit++ {
		for written := 0; written <= 3*limit; written++ {
			for keep := 1; keep <= limit+1; keep++ {
				r := ring{limit: limit}
				for i := range written {
					r.write([]byte{byte('a' + i)})
				}
				all := r.bytes()
				want := all[max(len(all)-keep, 0):]
				r.shrink(keep)
				if got := r.bytes(); !bytes.Equal(got, want) || r.startCursor() != r.total-int64(len(want)) || cap(r.buf) != len(want) {
					t.Errorf("limit %d, %d written, keep %d: %q (room for %d), want %q", limit, written, keep, got, cap(r.buf), want)
				}
			}
		}
	}
}

// TestProcessInputIsBounded writes to a child that never reads: writes
// wait (unanswered) until 4 MiB are waiting, and a write past that fails
// at once, naming the process and saying what to do, while the earlier
// ones still wait; stopping the process answers them.
func TestProcessInputIsBounded(t *testing.T) {
	ps := startSession(t)
	ps.send(spawnLine("sp", []string{"sleep", "1000"}, ""))
	ps.waitFor(`"id":"sp"`)
	id := processIDs(ps.records())["sp"]
	write := func(reqID string, n int) {
		data := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), n))
		ps.send(`{"id":"` + reqID + `","type":"process_write","processId":"` + id + `","dataBase64":"` + data + `"}`)
	}
	write("w1", 3<<20)
	write("w2", 2<<20)
	write("w3", 1<<20)
	write("w4", 1)
	ps.send(`{"id":"s","type":"get_state"}`)
	ps.waitFor(`"id":"s"`)
	answered := map[string]string{}
	for _, rec := range ps.records() {
		if id, ok := rec["id"].(string); ok && rec["type"] == "response" {
			answered[id], _ = rec["error"].(string)
		}
	}
	for reqID, size := range map[string]string{"w2": "2 MiB", "w4": "1 byte"} {
		want := "Cannot write " + size + " to process " + id + ": at most 4 MiB may wait to be written to a process"
		if !strings.HasPrefix(answered[reqID], want) {
			t.Errorf("%s: got %q, want it refused at once: %q…", reqID, answered[reqID], want)
		}
	}
	for _, reqID := range []string{"w1", "w3"} {
		if _, ok := answered[reqID]; ok {
			t.Errorf("%s was answered while the child reads nothing", reqID)
		}
	}
	ps.send(`{"id":"stop","type":"process_stop","processId":"` + id + `"}`)
	ps.waitFor(`"id":"stop"`)
	ps.waitFor(`"id":"w3"`)
	ps.close()
}

// sleepingChild starts, through the process tool, a child that never
// reads its stdin.
func sleepingChild(t *testing.T, s *rpcServer) *process {
	t.Helper()
	text, isError := callTool(t, s, "process", `{"action":"spawn","spec":{"argv":["sleep","1000"]}}`)
	var info processInfo
	if json.Unmarshal([]byte(text), &info); isError || info.ID == "" {
		t.Fatalf("spawn: %s", text)
	}
	p, _ := s.findProcess(info.ID)
	return p
}

// toolWrite has the process tool write n bytes to p in a run whose
// context is ctx; the result's text comes on the channel.
func toolWrite(s *rpcServer, ctx context.Context, p *process, n int) chan string {
	result := make(chan string, 1)
	go func() {
		args := `{"action":"write","processId":"` + p.id + `","dataBase64":"` + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("y"), n)) + `"}`
		res, _ := s.runTool(ctx, contentBlock{Type: "toolCall", ID: "c", Name: "process", Arguments: json.RawMessage(args)})
		result <- resultText(res.Content)
	}()
	return result
}

// waitInputs waits until n writes to p wait or are being written.
func waitInputs(t *testing.T, p *process, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		got := p.inputsPending
		p.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes pending, want %d", got, n)
		}
	}
}

// TestToolWriteBoundedAndAborted: the model's process tool goes through
// the same bound (a write past it fails at once), and a tool's write that
// waits behind a client's write the child never reads ends at once when
// the run is aborted, so the abort is not held up; so does one made after
// the abort.
func TestToolWriteBoundedAndAborted(t *testing.T) {
	s := toolServer(t, nil)
	p := sleepingChild(t, s)
	got := receive(t, toolWrite(s, context.Background(), p, 5<<20), "the refusal of a 5 MiB write by the tool to a child that never reads")
	if !strings.Contains(got, "Cannot write 5 MiB to process "+p.id) {
		t.Errorf("a 5 MiB write by the tool: %q", got)
	}
	// The client's write fills the pipe and waits.
	r, _ := decodeRequest([]byte(`{"id":"w","type":"process_write","processId":"`+p.id+`","dataBase64":"`+
		base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("z"), 1<<20))+`"}`), false, new(rpcRequest))
	s.processWriteCommand(r)
	waitInputs(t, p, 1)
	ctx, cancel := context.WithCancel(context.Background())
	result := toolWrite(s, ctx, p, 10)
	waitInputs(t, p, 2) // the tool's write is queued behind the client's
	cancel()
	if got := receive(t, result, "the answer of an aborted tool write queued behind a write the child never reads"); got != "Operation aborted" {
		t.Errorf("the aborted tool write: %q", got)
	}
	if got := receive(t, toolWrite(s, ctx, p, 10), "the answer of a tool write after the abort"); got != "Operation aborted" {
		t.Errorf("a tool write after the abort: %q", got)
	}
}

// TestAbortEndsAToolWriteInProgress: a tool's write of more than the pipe
// holds, to a child that never reads, ends at once when its run is
// aborted, whether it was still starting or already blocked writing (the
// write's deadline is set when its context ends).
func TestAbortEndsAToolWriteInProgress(t *testing.T) {
	s := toolServer(t, nil)
	p := sleepingChild(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	result := toolWrite(s, ctx, p, 2<<20)
	waitInputs(t, p, 1)
	cancel()
	if got := receive(t, result, "the answer of an aborted write to a child that never reads"); got != "Operation aborted" {
		t.Errorf("the aborted write: %q", got)
	}
}

// TestMemoryComesBack: rpi's resident memory comes back down after a
// burst. An input line just past the 64 MiB limit, once answered, leaves
// it at 32 MiB or less within a few seconds. And 300 processes that each
// print 300 kB and are never removed leave it at 64 MiB or less: an ended
// process keeps only its tail (64 KiB).
func TestMemoryComesBack(t *testing.T) {
	t.Parallel()
	endToEnd(t)
	if raceDetector {
		t.Skip("the race detector's shadow memory is not given back")
	}
	p := startRPI(t, "rpc", "--cwd", t.TempDir())
	p.next(t)
	// settled waits until rpi's resident memory is at most limitMiB, for
	// up to 5 s, and fails naming what it was.
	settled := func(what string, limitMiB int) {
		t.Helper()
		rss := 0
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if rss = residentKB(t, p.cmd.Process.Pid); rss <= limitMiB<<10 {
				t.Logf("%s: rpi resident %d kB", what, rss)
				return
			}
		}
		t.Errorf("%s: rpi still holds %d kB after 5 s, want at most %d MiB", what, rss, limitMiB)
	}
	go func() {
		w := bufio.NewWriterSize(p.stdin, 1<<20)
		chunk := bytes.Repeat([]byte("x"), 1<<20)
		for range 64 {
			w.Write(chunk)
		}
		w.WriteString("x\n")
		w.Flush()
	}()
	if rec := p.next(t); rec["command"] != "parse" {
		t.Fatalf("got %v, want the over-long line's parse failure", rec)
	}
	settled("after a line of 64 MiB + 1 byte", 32)
	for i := range 300 {
		p.send(t, spawnLine(fmt.Sprintf("p%d", i), []string{"head", "-c", "300000", "/dev/urandom"}, "")+"\n")
		p.until(t, "process_exited", "")
	}
	settled("after 300 processes that printed 300 kB each", 64)
	time.Sleep(time.Second)
	t.Logf("a second later: rpi resident %d kB", residentKB(t, p.cmd.Process.Pid))
	p.stdin.Close()
	p.exit(t)
}

// TestMemoryComesBackAfterAnImage: after a prompt with a 40 MiB image (its
// base64), answered by faux/faux-1, rpi holds the image once and gives
// back what reading, recording, writing and counting it took: within 5 s
// of the answer it is resident in at most 128 MiB (it stayed at 424 MiB,
// the image held twice, for the session's life).
func TestMemoryComesBackAfterAnImage(t *testing.T) {
	t.Parallel()
	endToEnd(t)
	if raceDetector {
		t.Skip("the race detector's shadow memory is not given back")
	}
	p := startRPIWith(t, withEnv("PI_FAUX_RESPONSE=A picture."), "rpc", "--cwd", t.TempDir(), "--model", "faux/faux-1")
	p.next(t)
	image := base64.StdEncoding.EncodeToString(append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte("rpi\x00\xff\x10"), 30<<20/6)...)) // a PNG of 40 MiB of base64
	line, _ := json.Marshal(map[string]any{"id": "p", "type": "prompt", "message": "What is in the picture?",
		"images": []map[string]string{{"type": "image", "data": image, "mimeType": "image/png"}}})
	go p.stdin.Write(append(line, '\n'))
	p.until(t, "agent_settled", "")
	rss := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if rss = residentKB(t, p.cmd.Process.Pid); rss <= 128<<10 {
			break
		}
	}
	t.Logf("rpi resident %d kB (peak %d kB)", rss, residentKB(t, p.cmd.Process.Pid, "VmHWM:"))
	if rss > 128<<10 {
		t.Errorf("rpi still holds %d kB 5 s after the answer; want at most 128 MiB", rss)
	}
	p.stdin.Close()
	p.exit(t)
}

// TestClosedSessionLeavesNoProcesses: the processes a session started
// leave the host's process table when the session closes (ACP's
// session/close here; rpi serve closes idle sessions the same way). They
// stayed in it for the host's life, each holding its output and the
// closed session itself (its conversation), and no command could remove
// them: every session/new and close in a long-lived rpi acp or rpi serve
// grew the host by what its processes and conversation held.
func TestClosedSessionLeavesNoProcesses(t *testing.T) {
	endToEnd(t)
	e := newTestEnv(t)
	spawn, _ := json.Marshal(`{"action":"spawn","spec":{"argv":["echo","hello"]}}`)
	sleeper, _ := json.Marshal(`{"action":"spawn","spec":{"argv":["sleep","30"]}}`)
	startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"process","args":[`+string(spawn)+`]},{"id":"c2","name":"process","args":[`+string(sleeper)+`]}]}`+"\n"+`{"text":["started"]}`, e.agentDir)
	c, a, _ := startACPAgent(t, e, nil)
	sid := openACPSession(t, c, nil, t.TempDir())
	if got := c.call("session/prompt", acpTextPrompt(sid, "start them")); stopReasonOf(got.Result) != "end_turn" {
		t.Fatalf("the prompt: %s", got.line)
	}
	s := openSessionOf(t, a, sid).s
	if n := len(s.processes()); n != 2 {
		t.Fatalf("%d processes after the prompt, want 2", n)
	}
	if got := c.call("session/close", map[string]any{"sessionId": sid}); string(got.Result) != "{}" {
		t.Fatalf("the close: %s", got.line)
	}
	a.h.procs.mu.Lock()
	left, order := len(a.h.procs.byID), len(a.h.procs.order)
	a.h.procs.mu.Unlock()
	if left != 0 || order != 0 {
		t.Errorf("%d processes (%d in order) left in the host's table after their session closed, want none", left, order)
	}
}

// TestEndedProcessLeavesNoTimer: a process's timeoutMs is let go of when
// the process ends. Its timer stayed armed until the timeout would have
// passed (up to a day), holding the process (its output) and its session
// after process_remove, so a client or model that started short commands
// with a long timeout kept every one of them in memory.
func TestEndedProcessLeavesNoTimer(t *testing.T) {
	endToEnd(t)
	e := newTestEnv(t)
	clock := newFakeClock()
	e.clock = clock
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir(), "--no-session"})
	ps.send(`{"id":"warm","type":"get_state"}`)
	ps.waitFor(`"id":"warm"`)
	if clock.pending() {
		t.Fatal("a timer is waiting before any process started")
	}
	ps.send(spawnLine("p", []string{"head", "-c", "1000", "/dev/zero"}, `,"timeoutMs":86400000,"label":"short"`))
	ps.waitFor(`"label":"short","state":"exited"`)
	id := processIDs(ps.records())["p"]
	ps.send(`{"id":"rm","type":"process_remove","processId":"` + id + `"}`)
	ps.waitFor(`"id":"rm"`)
	for deadline := time.Now().Add(5 * time.Second); clock.pending(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a timer still waits after the process with a timeout ended and was removed")
		}
	}
	ps.close()
}

// TestProcessLimitHoldsUnderConcurrentSpawns: spawns at once (the
// client's process_spawn beside the model's process tool, or several
// sessions of one host) never pass the limit of processes running. The
// count was taken before the child started and the process was entered
// only after, so spawns that counted at once each saw room, and more
// than 16 ran.
func TestProcessLimitHoldsUnderConcurrentSpawns(t *testing.T) {
	endToEnd(t)
	s := toolServer(t, nil)
	const tries = 4 * maxRunningProcesses
	var wg sync.WaitGroup
	var started atomic.Int32
	for range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spec := processSpec{Argv: []string{"sleep", "30"}, Cwd: "/", OutputBytes: 1024}
			if _, err := s.spawn(spec, "client", func(processInfo) {}); err == nil {
				started.Add(1)
			} else if !strings.Contains(err.Error(), "process limit reached") {
				t.Errorf("spawn: %v", err)
			}
		}()
	}
	wg.Wait()
	if n := started.Load(); n != maxRunningProcesses {
		t.Errorf("%d of %d spawns at once started a process, want %d (the limit)", n, tries, maxRunningProcesses)
	}
	for _, p := range s.processes() {
		p.stop()
	}
}

// TestBashToolCountsShownLines: the note under the model's cut bash
// output counts the lines it shows, the last one too when no newline
// ends it, as it counts the lines of all the output: 3000 lines with no
// final newline showed 2000 of them and said "the last 1999 lines of
// 3000", and one line too long to show whole said "the last 0 lines of 1".
func TestBashToolCountsShownLines(t *testing.T) {
	endToEnd(t)
	s := toolServer(t, nil)
	for command, want := range map[string]string{
		"seq 3000 | head -c -1":                       "[Showing the last 2000 lines of 3000. Full output: ",
		"seq 3000":                                    "[Showing the last 2000 lines of 3000. Full output: ",
		"head -c 60000 /dev/zero | tr '\\0' x":        "[Showing the last 1 lines of 1. Full output: ",
		"seq 2; head -c 60000 /dev/zero | tr '\\0' x": "[Showing the last 1 lines of 3. Full output: ",
	} {
		args, _ := json.Marshal(map[string]string{"command": command})
		if text, isError := callTool(t, s, "bash", string(args)); isError || !strings.Contains(text, want) {
			t.Errorf("%s: the note is %q, want %q", command, text[max(0, strings.LastIndex(text, "\n\n")):], want)
		}
	}
}

// TestEndedProcessesAreBounded: a session keeps at most maxEndedProcesses
// ended processes; past that, the one that ended first is forgotten, as
// process_remove forgets one. Ended processes stayed listed, each with up
// to 64 KiB of its output, until removed, so a client or a model that
// started short commands and never removed them grew the host without
// bound (and rpi serve's sessions live for days).
func TestEndedProcessesAreBounded(t *testing.T) {
	endToEnd(t)
	sp := serveInProcess(t, newTestEnv(t), "--cwd", t.TempDir(), "--no-session")
	const n, batch = maxEndedProcesses + 2*maxRunningProcesses, maxRunningProcesses // at most 16 run at once
	for i := 0; i < n; i += batch {
		for j := i; j < i+batch; j++ {
			sp.send(spawnLine(fmt.Sprintf("p%d", j), []string{"true"}, fmt.Sprintf(`,"label":"p%d"`, j)))
		}
		for j := i; j < i+batch; j++ {
			sp.seen(fmt.Sprintf(`"label":"p%d","state":"exited"`, j))
		}
	}
	sp.send(`{"id":"l","type":"process_list"}`)
	sp.seen(`"id":"l"`)
	var recs []map[string]any
	var list []processInfo
	for _, line := range bytes.Split(bytes.TrimSpace(sp.out.bytes()), []byte("\n")) {
		var rec map[string]any
		json.Unmarshal(line, &rec)
		recs = append(recs, rec)
		if rec["id"] == "l" {
			data, _ := json.Marshal(rec["data"])
			json.Unmarshal(data, &list)
		}
	}
	ids := processIDs(recs)
	// The first two batches ended before the later ones started: they
	// ended first, and are the ones forgotten.
	if len(list) != maxEndedProcesses {
		t.Fatalf("process_list has %d processes after %d ended, want %d", len(list), n, maxEndedProcesses)
	}
	for i, info := range list {
		if want := fmt.Sprintf("p%d", n-maxEndedProcesses+i); info.Label != want {
			t.Errorf("process_list[%d] is %s, want %s (the newest, oldest first)", i, info.Label, want)
		}
	}
	sp.send(`{"id":"old","type":"process_logs","processId":"`+ids["p0"]+`"}`,
		`{"id":"new","type":"process_logs","processId":"`+ids[fmt.Sprintf("p%d", n-1)]+`"}`)
	sp.seen(`"id":"new"`)
	if !bytes.Contains(sp.out.bytes(), []byte(`"id":"old","type":"response","command":"process_logs","success":false,"error":"process not found: `+ids["p0"]+`"`)) {
		t.Errorf("the forgotten process p0 is still found")
	}
	if !bytes.Contains(sp.out.bytes(), []byte(`"id":"new","type":"response","command":"process_logs","success":true`)) {
		t.Errorf("the newest process is not found")
	}
	procs := sp.s.procs
	procs.mu.Lock()
	byID, order, ended := len(procs.byID), len(procs.order), len(procs.ended)
	procs.mu.Unlock()
	if byID != maxEndedProcesses || order != maxEndedProcesses || ended != maxEndedProcesses {
		t.Errorf("the host's table holds %d processes (%d in order, %d ended), want %d", byID, order, ended, maxEndedProcesses)
	}
	sp.stop()
}

// TestSpawnHoldsNoCommandBack: a process_spawn whose start takes long (a
// slow disk's exec; here another start holds the table, as one under way
// does) holds up neither the commands after it nor the process list, and
// the client's later spawns start after it and answer in order. Its answer
// comes once it has started, after process_started. The start ran on the
// command loop, under the table's one lock: every command waited for it.
func TestSpawnHoldsNoCommandBack(t *testing.T) {
	endToEnd(t)
	sp := serveInProcess(t, newTestEnv(t), "--cwd", t.TempDir(), "--no-session")
	procs := sp.s.procs
	procs.startMu.Lock() // a start under way
	sp.send(spawnLine("slow", []string{"true"}, ""), spawnLine("next", []string{"true"}, ""),
		`{"id":"l","type":"process_list"}`, `{"id":"s","type":"get_state"}`)
	sp.seen(`"id":"s"`)
	out := sp.out.bytes()
	if bytes.Contains(out, []byte(`"id":"slow"`)) || bytes.Contains(out, []byte(`"id":"next"`)) {
		t.Fatalf("a spawn was answered while the table was held:\n%s", out)
	}
	if !bytes.Contains(out, []byte(`{"id":"l","type":"response","command":"process_list","success":true,"data":[]}`)) {
		t.Errorf("process_list did not answer an empty list at once:\n%s", out)
	}
	procs.startMu.Unlock()
	sp.seen(`"id":"next"`)
	out = sp.out.bytes()
	started := bytes.Index(out, []byte(`"type":"process_started"`))
	slow, next := bytes.Index(out, []byte(`"id":"slow","type":"response","command":"process_spawn","success":true`)),
		bytes.Index(out, []byte(`"id":"next","type":"response","command":"process_spawn","success":true`))
	if started < 0 || slow < started || next < slow {
		t.Errorf("want process_started, then slow's answer, then next's:\n%s", out)
	}
	sp.stop()
}

// panicAtFirstStart makes the first child sp's table starts panic (in
// the hook called as each child starts), as a bug there would.
func panicAtFirstStart(sp *servedInProcess) {
	var panicked atomic.Bool
	adopt := sp.s.procs.adopt
	sp.s.procs.adopt = func(reap func()) {
		if !panicked.Swap(true) {
			panic("a bug")
		}
		if adopt != nil {
			adopt(reap)
		}
	}
}

// TestSpawnPanicAnswered: a panic in a process_spawn's start (here in
// the table's hook called as each child starts) is answered as an
// internal error, before the client's next spawn is, as every command's
// panic is. Its start ran in the background with no answer of its own
// for a panic: the client waited for it forever.
func TestSpawnPanicAnswered(t *testing.T) {
	endToEnd(t)
	sp := serveInProcess(t, newTestEnv(t), "--cwd", t.TempDir(), "--no-session")
	panicAtFirstStart(sp)
	sp.send(spawnLine("boom", []string{"true"}, ""), spawnLine("next", []string{"true"}, ""))
	sp.seen(`"id":"next"`)
	out := sp.out.bytes()
	boom := bytes.Index(out, []byte(`{"id":"boom","type":"response","command":"process_spawn","success":false,"error":"Internal error in process_spawn: a bug"}`))
	if next := bytes.Index(out, []byte(`"id":"next"`)); boom < 0 || boom > next {
		t.Errorf("want boom's failure, then next's answer:\n%s", out)
	}
	sp.stop()
}

// TestSpawnsWaitingAreBounded: while a start is under way (the table
// held, as a slow exec holds it), a client's process_spawn commands past
// maxWaitingSpawns not yet answered fail at once with the spawn limit,
// the ones taken answer in the order they came once it is let go of, and
// every one gives its place back, the one whose start panicked too: as
// many wait again. Each waited on its own goroutine with no bound: a
// client sending spawns without end grew rpi's memory without end.
func TestSpawnsWaitingAreBounded(t *testing.T) {
	endToEnd(t)
	sp := serveInProcess(t, newTestEnv(t), "--cwd", t.TempDir(), "--no-session")
	panicAtFirstStart(sp)
	missing := []string{filepath.Join(t.TempDir(), "missing")}
	fill := func(round string, first []string) []string {
		sp.s.procs.startMu.Lock() // a start under way
		var ids []string
		for i := range maxWaitingSpawns {
			id, argv := fmt.Sprintf("%s%d", round, i), missing
			if i == 0 {
				argv = first
			}
			sp.send(spawnLine(id, argv, ""))
			ids = append(ids, id)
		}
		sp.send(spawnLine(round+"-over", []string{"true"}, ""), fmt.Sprintf(`{"id":"%s-state","type":"get_state"}`, round))
		sp.seen(`"id":"` + round + `-state"`)
		want := fmt.Sprintf(`{"id":"%s-over","type":"response","command":"process_spawn","success":false,"error":"spawn limit reached (maximum 64 process_spawn commands waiting to start)"}`, round)
		if out := sp.out.bytes(); !bytes.Contains(out, []byte(want)) {
			t.Fatalf("the spawn past the limit was not refused at once: want %s in:\n%s", want, out)
		}
		sp.s.procs.startMu.Unlock()
		sp.seen(fmt.Sprintf(`"id":"%s%d"`, round, maxWaitingSpawns-1))
		return ids
	}
	answered := func(ids []string) (order []string) {
		for line := range bytes.Lines(sp.out.bytes()) {
			var rec struct{ ID, Command, Error string }
			json.Unmarshal(line, &rec)
			if rec.Command == "process_spawn" && slices.Contains(ids, rec.ID) {
				order = append(order, rec.ID+": "+rec.Error)
			}
		}
		return order
	}
	check := func(ids []string, first string) {
		t.Helper()
		want := []string{ids[0] + ": " + first}
		for _, id := range ids[1:] {
			want = append(want, fmt.Sprintf("%s: Cannot start %s: no such file or directory", id, missing[0]))
		}
		if got := answered(ids); !slices.Equal(got, want) {
			t.Errorf("the spawns taken answered\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	// The first round's first start panics; the rest cannot start.
	check(fill("a", []string{"true"}), "Internal error in process_spawn: a bug")
	// Every place came back: as many wait again, and the first starts.
	check(fill("b", []string{"true"}), "")
	sp.stop()
}

// TestModelEndsNoClientProcess: the ended processes a session keeps are
// counted apart for the client's and the model's (the process tool's),
// so a model that starts short commands never pushes out of the list a
// process the client started, which the model may look at but not
// remove. Before, keepEnded model processes ending after the client's
// made it forgotten, as if the model had removed it.
func TestModelEndsNoClientProcess(t *testing.T) {
	endToEnd(t)
	e := newTestEnv(t)
	e.keepEnded = 2
	sp := serveInProcess(t, e, "--cwd", t.TempDir(), "--no-session")
	sp.send(spawnLine("client", []string{"true"}, `,"label":"client"`))
	sp.seen(`"label":"client","state":"exited"`)
	var procs []*process
	for range e.keepEnded + 1 {
		p, err := sp.s.spawn(processSpec{Argv: []string{"true"}, Cwd: "/", OutputBytes: defaultOutputBytes}, "tool:call", func(processInfo) {})
		if err != nil {
			t.Fatal(err)
		}
		<-p.done
		procs = append(procs, p)
	}
	var kept []string
	for _, p := range sp.s.processes() {
		kept = append(kept, p.ownerID)
	}
	if want := []string{"client", "tool:call", "tool:call"}; !slices.Equal(kept, want) {
		t.Errorf("the processes kept are owned by %v, want %v (the client's, and the model's last %d)", kept, want, e.keepEnded)
	}
	if _, err := sp.s.findProcess(procs[0].id); err == nil {
		t.Errorf("the model's process that ended first is still kept")
	}
	sp.stop()
}

// TestFullOutputFilesAreBounded: rpi keeps the newest of the full-output
// files its bash answers name, at most keepFiles of them and keepBytes
// together, removing the oldest as a newer one is named; the newest
// stays whatever its size. They were all kept until rpi exited, and
// rpi serve lives for days: every cut output of every session filled
// the disk (or a RAM-backed TMPDIR) by up to 1 GiB more.
func TestFullOutputFilesAreBounded(t *testing.T) {
	endToEnd(t)
	s := toolServer(t, nil)
	run := func() string { // seq 3000 is 3000 lines, 13893 bytes: cut, with a file
		t.Helper()
		text, isError := callTool(t, s, "bash", `{"command":"seq 3000"}`)
		_, path, ok := strings.Cut(text, "Full output: ")
		if isError || !ok {
			t.Fatalf("no full output path in %q", text[max(0, len(text)-200):])
		}
		return strings.TrimSuffix(path, "]")
	}
	exist := func(paths []string) (n []bool) {
		for _, path := range paths {
			_, err := os.Stat(path)
			n = append(n, err == nil)
		}
		return n
	}
	limit := func(files int, size int64) {
		s.temp.mu.Lock()
		s.temp.keepFiles, s.temp.keepBytes = files, size
		s.temp.mu.Unlock()
	}
	limit(3, 1<<20)
	var paths []string
	for range 5 {
		paths = append(paths, run())
	}
	if got, want := exist(paths), []bool{false, false, true, true, true}; !slices.Equal(got, want) {
		t.Errorf("with 3 files kept, after 5 the files exist: %v, want %v", got, want)
	}
	limit(64, 2*13893)
	paths = append(paths, run())
	if got, want := exist(paths), []bool{false, false, false, false, true, true}; !slices.Equal(got, want) {
		t.Errorf("with 2 files' bytes kept, after one more the files exist: %v, want %v", got, want)
	}
	limit(64, 1000)
	paths = append(paths, run())
	if got, want := exist(paths), []bool{false, false, false, false, false, false, true}; !slices.Equal(got, want) {
		t.Errorf("with fewer bytes kept than one file, the files exist: %v, want %v (the newest always)", got, want)
	}
	if data, err := os.ReadFile(paths[6]); err != nil || len(data) != 13893 {
		t.Errorf("the newest file: %d bytes, %v; want 13893", len(data), err)
	}
	s.temp.mu.Lock()
	kept, keptBytes := len(s.temp.kept), s.temp.keptBytes
	s.temp.mu.Unlock()
	if kept != 1 || keptBytes != 13893 {
		t.Errorf("%d files of %d bytes counted as kept, want 1 of 13893", kept, keptBytes)
	}
}

// TestEndedProcessHoldsNoArguments: an ended process keeps nothing of
// its argv and env. Both stayed in the process (its spec, and the
// command it was started with) for as long as it was listed: up to the
// system's limit of about 2 MiB each, so the 64 ended processes a
// session keeps could hold hundreds of MiB where their output holds 4.
func TestEndedProcessHoldsNoArguments(t *testing.T) {
	endToEnd(t)
	sp := serveInProcess(t, newTestEnv(t), "--cwd", t.TempDir(), "--no-session")
	big := strings.Repeat("x", 100<<10)
	argv := []string{"true"}
	for range 8 {
		argv = append(argv, big)
	}
	sp.send(spawnLine("p", argv, `,"env":{"BIG":"`+big+`"},"label":"big"`))
	sp.seen(`"label":"big","state":"exited"`)
	procs := sp.s.procs
	procs.mu.Lock()
	p := procs.byID[procs.order[0]]
	procs.mu.Unlock()
	p.mu.Lock()
	spec := p.spec
	p.mu.Unlock()
	p.child.mu.Lock()
	args, env := p.child.cmd.Args, p.child.cmd.Env
	p.child.mu.Unlock()
	if spec.Argv != nil || spec.Env != nil || args != nil || env != nil {
		t.Errorf("the ended process holds %d arguments and %d variables in its spec, %d and %d in its command; want none",
			len(spec.Argv), len(spec.Env), len(args), len(env))
	}
	sp.stop()
}

// TestProcessToolSessionEnv: a process the model starts with its process
// tool learns the session from its environment as the model's bash does
// (PI_SESSION_ID, PI_SESSION_FILE, PI_PROVIDER, PI_MODEL and
// PI_REASONING_LEVEL as they are when it starts, in place of those rpi
// inherited, beside the agent markers); one the client starts
// (process_spawn) gets the markers and the variables as rpi inherited
// them. The model's processes started in rpi's own environment.
func TestProcessToolSessionEnv(t *testing.T) {
	endToEnd(t)
	e := newTestEnv(t)
	e.vars["PI_SESSION_ID"] = "inherited-from-a-parent"
	e.vars["PI_REASONING_LEVEL"] = "inherited"
	cwd := t.TempDir()
	s := serverOf(t, e, "--cwd", cwd, "--model", "faux/faux-1")
	const script = `env | grep -E '^(AI_AGENT|PI_CODING_AGENT=|PI_SESSION|PI_PROVIDER|PI_MODEL|PI_REASONING)' | sort`
	// output waits for the process the process tool's answer names, and
	// gives what it printed.
	output := func(answer string) string {
		t.Helper()
		var info processInfo
		if err := json.Unmarshal([]byte(answer), &info); err != nil || info.ID == "" {
			t.Fatalf("spawn: %s", answer)
		}
		callTool(t, s, "process", `{"action":"wait","processId":"`+info.ID+`","timeoutMs":10000}`)
		logs, _ := callTool(t, s, "process", `{"action":"logs","processId":"`+info.ID+`"}`)
		var got struct{ Text string }
		json.Unmarshal([]byte(logs), &got)
		return got.Text
	}
	spec, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", script}, "cwd": cwd})
	model := output(callToolText(t, s, "process", `{"action":"spawn","spec":`+string(spec)+`}`))
	bash, _ := callTool(t, s, "bash", `{"command":`+quote(script)+`}`)
	info := s.conv.info()
	want := "AI_AGENT=rpi\nPI_CODING_AGENT=true\nPI_MODEL=faux-1\nPI_PROVIDER=faux\nPI_REASONING_LEVEL=off\n" +
		"PI_SESSION_FILE=" + info.path + "\nPI_SESSION_ID=" + info.id + "\n"
	if model != want || bash != want {
		t.Errorf("the model's process printed\n%s\nits bash\n%s\nwant\n%s", model, bash, want)
	}
	p, err := s.spawn(processSpec{Argv: []string{"sh", "-c", script}, Cwd: cwd, OutputBytes: defaultOutputBytes}, "client", func(processInfo) {})
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := json.Marshal(p.info())
	if got, want := output(string(answer)), "AI_AGENT=rpi\nPI_CODING_AGENT=true\nPI_REASONING_LEVEL=inherited\nPI_SESSION_ID=inherited-from-a-parent\n"; got != want {
		t.Errorf("the client's process printed\n%s\nwant\n%s", got, want)
	}
}

// callToolText is callTool's text, the test failing when the call did.
func callToolText(t *testing.T, s *rpcServer, name, args string) string {
	t.Helper()
	text, isError := callTool(t, s, name, args)
	if isError {
		t.Fatalf("%s %s: %s", name, args, text)
	}
	return text
}

// TestProcessCommandsWaitingAreBounded: process_wait, process_stop,
// process_write and process_keys answer in the background, each holding
// a goroutine until its process ends or reads. At most maxInputsWaiting
// writes and key presses, and maxProcessWaiters waits and stops, wait for
// one process; one more fails at once. Before, a line of ninety bytes
// held a goroutine (kilobytes) with no bound: a client sending waits, or
// writes of no bytes (closeStdin), to a process that never ends grew
// rpi's memory without end.
func TestProcessCommandsWaitingAreBounded(t *testing.T) {
	ps := startSession(t)
	ps.send(spawnLine("sp", []string{"sleep", "1000"}, ""))
	ps.waitFor(`"id":"sp"`)
	id := processIDs(ps.records())["sp"]
	big := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 1<<20)) // more than the pipe holds: it waits
	ps.send(`{"id":"big","type":"process_write","processId":"` + id + `","dataBase64":"` + big + `"}`)
	for i := range maxInputsWaiting - 1 {
		if i%2 == 0 {
			ps.send(fmt.Sprintf(`{"id":"k%d","type":"process_keys","processId":%q,"keys":["ENTER"]}`, i, id))
		} else {
			ps.send(fmt.Sprintf(`{"id":"k%d","type":"process_write","processId":%q,"closeStdin":true}`, i, id))
		}
	}
	for i := range maxProcessWaiters - 1 {
		ps.send(fmt.Sprintf(`{"id":"w%d","type":"process_wait","processId":%q}`, i, id))
	}
	ps.send(fmt.Sprintf(`{"id":"over-keys","type":"process_keys","processId":%q,"keys":["ENTER"]}`, id))
	ps.send(fmt.Sprintf(`{"id":"over-write","type":"process_write","processId":%q,"closeStdin":true}`, id))
	ps.send(fmt.Sprintf(`{"id":"stop","type":"process_stop","processId":%q}`, id))
	ps.waitFor(`"id":"stop"`) // the stop ends the process; every wait and write is answered, and gives its place back
	ps.waitFor(fmt.Sprintf(`"id":"w%d"`, maxProcessWaiters-2))
	ps.waitFor(fmt.Sprintf(`"id":"k%d"`, maxInputsWaiting-2))
	// The waits' bound, on a second process: once it is full, a wait and
	// a stop are refused; a signal ends the process, and its waits.
	ps.send(spawnLine("sp2", []string{"sleep", "1000"}, ""))
	ps.waitFor(`"id":"sp2"`)
	id2 := processIDs(ps.records())["sp2"]
	for i := range maxProcessWaiters {
		ps.send(fmt.Sprintf(`{"id":"v%d","type":"process_wait","processId":%q}`, i, id2))
	}
	ps.send(fmt.Sprintf(`{"id":"over-wait","type":"process_wait","processId":%q}`, id2))
	ps.send(fmt.Sprintf(`{"id":"over-stop","type":"process_stop","processId":%q}`, id2))
	ps.send(fmt.Sprintf(`{"id":"kill","type":"process_signal","processId":%q,"signal":"SIGKILL"}`, id2))
	ps.waitFor(fmt.Sprintf(`"id":"v%d"`, maxProcessWaiters-1))
	ps.send(fmt.Sprintf(`{"id":"after","type":"process_wait","processId":%q}`, id2))
	ps.waitFor(`"id":"after"`)
	answered := map[string]string{}
	for _, rec := range ps.records() {
		if reqID, ok := rec["id"].(string); ok && rec["type"] == "response" {
			answered[reqID], _ = rec["error"].(string)
		}
	}
	writes := fmt.Sprintf("Cannot write to process %s: %d writes and key presses to it are waiting already", id, maxInputsWaiting)
	waits := fmt.Sprintf("process %s: %d process_wait and process_stop commands wait for it already", id2, maxProcessWaiters)
	for reqID, want := range map[string]string{"over-keys": writes, "over-write": writes,
		"over-wait": "Cannot wait for " + waits, "over-stop": "Cannot stop " + waits} {
		if !strings.HasPrefix(answered[reqID], want) {
			t.Errorf("%s: got %q, want it refused at once: %q…", reqID, answered[reqID], want)
		}
	}
	for _, reqID := range []string{"w0", "stop", "v0", "kill", "after"} {
		if answered[reqID] != "" {
			t.Errorf("%s failed: %s", reqID, answered[reqID])
		}
	}
	ps.close()
}

// TestDangerousEnv: the approval dialog of a process spawn marks the
// variables that change what a program runs or loads, among them those
// a configuration folder or a password program is named by.
func TestDangerousEnv(t *testing.T) {
	for key, want := range map[string]bool{
		"LD_PRELOAD": true, "PATH": true, "BASH_ENV": true, "GIT_SSH_COMMAND": true,
		"XDG_CONFIG_HOME": true, "XDG_DATA_DIRS": true, "SSH_ASKPASS": true, "SUDO_ASKPASS": true,
		"npm_config_script_shell": true, "NPM_CONFIG_NODE_OPTIONS": true, "Npm_Config_Script_Shell": true, // npm reads any case
		"GOFLAGS": true, "CC": true, "CXX": true, "MAKEFLAGS": true, "RUSTC_WRAPPER": true, "CARGO_BUILD_RUSTC_WRAPPER": true,
		"LANG": false, "TERM": false, "COLUMNS": false, "DEBUG": false, "ASKPASS_HINT": false,
	} {
		if got := dangerousEnv(key); got != want {
			t.Errorf("dangerousEnv(%q) = %v, want %v", key, got, want)
		}
	}
}
