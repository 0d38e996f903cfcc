package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// holdOutput leaves a sleep behind in a session of its own that still
// holds the command's output, and prints "escaped PID" once the sleep is
// there (as escapeCommand does): rpi waits for the output to end after
// the shell exits, up to killGrace.
const holdOutput = `setsid sleep 300 & p=$!
for i in $(seq 1000); do
	[ "$(cut -d' ' -f6 /proc/$p/stat)" = $p ] && [ "$(cat /proc/$p/comm)" = sleep ] && break
	sleep 0.01
done
echo escaped $p`

// killEscaped SIGKILLs the sleep that text says escaped, if still a sleep.
func killEscaped(text string) {
	if m := regexp.MustCompile(`escaped (\d+)`).FindStringSubmatch(text); m != nil {
		pid, _ := strconv.Atoi(m[1])
		killIfSleep(pid)
		// TestAbortCutsOutputHeldByAnEscapee's, still waiting for its
		// aborted file: the test's folder may be gone before it looked.
		if cmdline, err := os.ReadFile("/proc/" + m[1] + "/cmdline"); err == nil && strings.Contains(string(cmdline), "[ ! -e aborted ]") {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// TestTimeoutAfterTheCommandExited: a command that exited by itself, with
// code 0, well within its timeout is not told as timed out when the
// timeout passes only while rpi waits for its output to end (a process
// it left in a session of its own holds it). The model's bash said
// "Command timed out after 1 seconds", and the user's bash answered
// "cancelled":true with "exitCode":0.
func TestTimeoutAfterTheCommandExited(t *testing.T) {
	endToEnd(t)
	s := toolServer(t, nil)
	args, _ := json.Marshal(map[string]any{"command": holdOutput, "timeout": 1})
	text, isError := callTool(t, s, "bash", string(args))
	killEscaped(text)
	if isError || strings.Contains(text, "timed out") {
		t.Errorf("the model's bash: error %v, %q; want the exit 0 it had", isError, text)
	}

	ps := startSession(t)
	line, _ := json.Marshal(map[string]any{"id": "b", "type": "bash", "command": holdOutput, "timeout": 1})
	ps.send(string(line))
	ps.waitFor(`"id":"b"`)
	for _, rec := range ps.close() {
		if rec["id"] == "b" {
			data, _ := rec["data"].(map[string]any)
			killEscaped(data["output"].(string))
			if data["cancelled"] != false || data["exitCode"] != float64(0) {
				t.Errorf("the user's bash: %v; want not cancelled, exit code 0", data)
			}
		}
	}
}

// TestAbortCutsOutputHeldByAnEscapee: an aborted bash (the model's, and
// the user's abort_bash) answers once what its output holds is read,
// without waiting for a process the command left in a session of its own
// that still holds that output. rpi waited killGrace (2 s) for it, and
// read what it wrote meanwhile ("late", a second after the abort).
func TestAbortCutsOutputHeldByAnEscapee(t *testing.T) {
	endToEnd(t)
	// The escapee writes "late" a second after the abort, then holds on.
	command := func(dir string) string {
		return `cd ` + dir + `; setsid sh -c 'i=0; while [ ! -e aborted ] && [ $i -lt 1000 ]; do i=$((i+1)); sleep 0.01; done; sleep 1; echo late; exec sleep 300' & p=$!
for i in $(seq 1000); do
	[ "$(cut -d' ' -f6 /proc/$p/stat)" = $p ] && break
	sleep 0.01
done
echo escaped $p; touch ready; sleep 300`
	}
	// abortOnce waits for the command's ready file, then makes aborted
	// and aborts.
	abortOnce := func(t *testing.T, dir string, abort func()) {
		for {
			if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		os.WriteFile(filepath.Join(dir, "aborted"), nil, 0o600)
		abort()
	}
	t.Run("the model's bash", func(t *testing.T) {
		dir := t.TempDir()
		s := toolServer(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go abortOnce(t, dir, cancel)
		args, _ := json.Marshal(map[string]any{"command": command(dir)})
		res, _ := s.runTool(ctx, contentBlock{Type: "toolCall", ID: "c", Name: "bash", Arguments: args})
		text := res.Content[0].Text
		killEscaped(text)
		if !strings.Contains(text, "escaped") || strings.Contains(text, "late") || !strings.HasSuffix(text, "Command aborted") {
			t.Errorf("the aborted bash answered %q; want its output without what came after the abort", text)
		}
	})
	t.Run("the user's bash", func(t *testing.T) {
		dir := t.TempDir()
		ps := startSession(t)
		line, _ := json.Marshal(map[string]any{"id": "b", "type": "bash", "command": command(dir)})
		ps.send(string(line))
		abortOnce(t, dir, func() { ps.send(`{"id":"a","type":"abort_bash"}`) })
		ps.waitFor(`"id":"b"`)
		for _, rec := range ps.close() {
			if rec["id"] == "b" {
				data, _ := rec["data"].(map[string]any)
				output := data["output"].(string)
				killEscaped(output)
				if !strings.Contains(output, "escaped") || strings.Contains(output, "late") || data["cancelled"] != true {
					t.Errorf("the aborted bash answered %v; want its output without what came after the abort", data)
				}
			}
		}
	})
}

// TestBashToolNamesTheSignal: a command a signal ended is told to the
// model with the signal's name, as one run in the editor's terminal is:
// a crash (SIGSEGV) and the kernel's out-of-memory killer (SIGKILL) were
// both "Command was killed by a signal".
func TestBashToolNamesTheSignal(t *testing.T) {
	endToEnd(t)
	s := toolServer(t, nil)
	for command, want := range map[string]string{
		"ulimit -c 0; kill -SEGV $$": "Command was killed by signal SIGSEGV",
		"kill -KILL $$":              "Command was killed by signal SIGKILL",
	} {
		args, _ := json.Marshal(map[string]any{"command": command})
		if text, isError := callTool(t, s, "bash", string(args)); !isError || !strings.HasSuffix(text, want) {
			t.Errorf("%s: error %v, %q; want it to end %q", command, isError, text, want)
		}
	}
}

// TestForkingJobDiesWithItsCommand: a job-control shell's job that forks
// as fast as it can, in a process group of its own in the command's
// session, leaves nothing behind once the command is answered. One look
// through /proc killed what it saw, and what a job forked meanwhile (past
// where the look was) ran on: now and then several sleeps outlived the
// answer, until rpi ended.
func TestForkingJobDiesWithItsCommand(t *testing.T) {
	endToEnd(t)
	s := toolServer(t, nil)
	args, _ := json.Marshal(map[string]any{"command": `echo $$; set -m; (while :; do (sleep 300) & done) >/dev/null 2>&1 & sleep 0.1`})
	for range 10 {
		text, isError := callTool(t, s, "bash", string(args))
		sid, err := strconv.Atoi(strings.TrimSpace(text))
		if isError || err != nil {
			t.Fatalf("the command answered %q", text)
		}
		left := sessionMembers(sid)
		for deadline := time.Now().Add(5 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = sessionMembers(sid) {
			time.Sleep(10 * time.Millisecond) // what rpi killed takes a moment to die
		}
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL) // of this test's command: its session
		}
		if len(left) > 0 {
			t.Fatalf("processes %v of the command's session outlived its answer", left)
		}
	}
}

// sessionMembers are the live processes (not zombies) of session sid but
// its leader.
func sessionMembers(sid int) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == sid {
			continue
		}
		if stat, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
			if f := statFields(stat); len(f) > 3 && f[0] != "Z" && f[3] == strconv.Itoa(sid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// TestBashToolFullOutputNotSaved: when the full output of a cut command
// cannot be saved (rpi's temp folder cannot be made), the model is told
// so, and why, not pointed to a file: it was told "Full output: " and no
// path.
func TestBashToolFullOutputNotSaved(t *testing.T) {
	endToEnd(t)
	e := newTestEnv(t)
	e.tmp = filepath.Join(t.TempDir(), "gone")
	cfg, _, err := parseArgs([]string{"rpc", "--cwd", t.TempDir(), "--no-session"}, runEnv{getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	s, err := newServer(cfg, e.env(), newConnection(nil, io.Discard, io.Discard), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.shutdown(false) })
	text, _ := callTool(t, s, "bash", `{"command":"seq 3000"}`)
	note := text[strings.LastIndex(text, "\n\n")+2:]
	if want := "[Showing the last 2000 lines of 3000. The full output could not be saved: "; !strings.HasPrefix(note, want) ||
		!strings.Contains(note, "no such file or directory") {
		t.Errorf("the note is %q, want it to start %q and say why", note, want)
	}
}

// TestTempFolderMadeAgain: a command that removes rpi's temp folder (a
// model cleaning up /tmp) does not keep the full output of later cut
// commands from being saved: rpi makes the folder again. Every later one
// failed for the rest of rpi's life.
func TestTempFolderMadeAgain(t *testing.T) {
	endToEnd(t)
	s := toolServer(t, nil)
	fullPath := func() string {
		text, _ := callTool(t, s, "bash", `{"command":"seq 3000"}`)
		m := regexp.MustCompile(`Full output: (/\S+)\]$`).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("no full output in %q", text[strings.LastIndex(text, "\n\n"):])
		}
		return m[1]
	}
	args, _ := json.Marshal(map[string]string{"command": "rm -r " + filepath.Dir(fullPath())})
	if text, isError := callTool(t, s, "bash", string(args)); isError {
		t.Fatal(text)
	}
	if _, err := os.Stat(fullPath()); err != nil {
		t.Error(err)
	}
}

// TestKillSessionsKillsAPidTakenAgain: a process of a session that is
// killed, reaped, and whose pid a process the job forks then takes (a
// fork bomb takes every free pid; pid_max is often 32768) is killed by
// the next look: it was passed over as one killed before, and, found
// by no look, it outlived the command. The pid is made to be taken again
// through ns_last_pid, which only root may write.
func TestKillSessionsKillsAPidTakenAgain(t *testing.T) {
	endToEnd(t)
	leader := exec.Command("bash", "-c", `while read l; do sleep 300 & echo $!; done`)
	leader.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	in, _ := leader.StdinPipe()
	outPipe, _ := leader.StdoutPipe()
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	sid := leader.Process.Pid
	t.Cleanup(func() {
		for _, pid := range sessionMembers(sid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		leader.Process.Kill()
		leader.Wait()
	})
	out := bufio.NewReader(outPipe)
	fork := func() int {
		io.WriteString(in, "\n")
		line, err := out.ReadString('\n')
		pid, _ := strconv.Atoi(strings.TrimSpace(line))
		if err != nil || pid == 0 {
			t.Fatalf("the leader answered %q, %v", line, err)
		}
		return pid
	}
	sids := map[int]bool{sid: true}
	killed := map[int]string{}
	for range 20 {
		first := fork()
		if !killSessionsLook(sids, killed) {
			t.Fatal("the first look found nothing")
		}
		for deadline := time.Now().Add(5 * time.Second); processAlive(first) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond) // bash reaps it
		}
		if os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(first-1)), 0) != nil {
			t.Skip("cannot choose the next pid (ns_last_pid) here")
		}
		if again := fork(); again != first {
			continue // another process took it first
		}
		killSessionsLook(sids, killed)
		for deadline := time.Now().Add(5 * time.Second); len(sessionMembers(sid)) > 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond) // what was killed takes a moment to die
		}
		if left := sessionMembers(sid); len(left) > 0 {
			t.Fatalf("process %v, on a pid killed before, outlived the look", left)
		}
		return
	}
	t.Skip("the pid was taken by another process each time")
}
