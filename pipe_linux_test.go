package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestEndToEndStdoutPipeGrown: once rpi has answered its first line (the
// second answer shows it has settled in), its stdout pipe holds 1 MiB, so
// that a client reading a flood wakes rpi less often; until then it is
// left as the client made it, since asking costs startup time.
func TestEndToEndStdoutPipeGrown(t *testing.T) {
	endToEnd(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := rpiCommand(t, "rpc", "--cwd", t.TempDir(), "--no-session")
	cmd.Stdout = w
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer cmd.Wait()
	defer stdin.Close()
	pipeSize := func() int {
		const getPipeSize = 1032 // F_GETPIPE_SZ
		size, _, errno := syscall.Syscall(syscall.SYS_FCNTL, r.Fd(), getPipeSize, 0)
		if errno != 0 {
			t.Fatal(errno)
		}
		return int(size)
	}
	out := bufio.NewReader(r)
	readUntil := func(prefix string) {
		for {
			line, err := out.ReadString('\n')
			if err != nil {
				t.Fatalf("reading rpi's output: %v", err)
			}
			if strings.HasPrefix(line, prefix) {
				return
			}
		}
	}
	readUntil(`{"type":"session_started"`)
	stdin.Write([]byte(`{"id":"1","type":"get_state"}` + "\n"))
	readUntil(`{"id":"1"`)
	stdin.Write([]byte(`{"id":"2","type":"get_state"}` + "\n"))
	readUntil(`{"id":"2"`)
	if size := pipeSize(); size != 1<<20 {
		t.Errorf("rpi's stdout pipe holds %d bytes once it settled in; want 1 MiB", size)
	}
}

// TestSessionOf: a process's session is its own, a child started as the
// leader of a new session has its pid as its session, and a process that
// is gone has none.
func TestSessionOf(t *testing.T) {
	own, _, _ := syscall.RawSyscall(syscall.SYS_GETSID, 0, 0, 0)
	if got, ok := sessionOf(os.Getpid()); !ok || got != int(own) {
		t.Errorf("rpi's own session: %d, %v; want %d", got, ok, own)
	}
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if got, ok := sessionOf(pid); !ok || got != pid {
		t.Errorf("a session leader's session: %d, %v; want %d", got, ok, pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if got, ok := sessionOf(pid); ok {
		t.Errorf("a process that is gone has session %d", got)
	}
}

// TestWaitUnreaped: waitUnreaped returns once the child has exited and
// leaves it a zombie: its pid is still its own (kill(pid, 0) finds it,
// /proc says Z), and the wait that reaps it later still gets its exit
// status.
func TestWaitUnreaped(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 0.05; exit 3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !waitUnreaped(pid) {
		cmd.Wait()
		t.Fatal("waitUnreaped failed")
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("the exited child's pid is gone before it was reaped: %v", err)
	}
	if stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err != nil || !strings.Contains(string(stat), ") Z ") {
		t.Errorf("not a zombie: %q, %v", stat, err)
	}
	cmd.Wait()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Errorf("the reaping wait: %v, want exit code 3", cmd.ProcessState)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Error("the reaped child's pid is still in use")
	}
}

// TestChildReapedLast: a child that has exited stays a zombie, its pid its
// own, until its output has drained (here held by a reader that waits for
// the test), and is reaped at the end of wait with its exit status; a
// signal after that is not sent.
func TestChildReapedLast(t *testing.T) {
	table := newProcessTable(&watchdog{}, io.Discard, nil)
	release := make(chan struct{})
	c, err := table.start(exec.Command("sh", "-c", "echo x; exit 5"), childOptions{}, func(string, []byte) { <-release })
	if err != nil {
		t.Fatal(err)
	}
	defer c.release()
	ended := make(chan *os.ProcessState, 1)
	go func() { ended <- c.wait() }()
	<-c.exited
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(c.pid) + "/stat")
	close(release)
	if err != nil || !strings.Contains(string(stat), ") Z ") {
		t.Errorf("the exited child while its output drains: %q, %v; want a zombie", stat, err)
	}
	if ps := <-ended; ps == nil || ps.ExitCode() != 5 {
		t.Errorf("wait: %v, want exit code 5", ps)
	}
	if err := syscall.Kill(c.pid, 0); err == nil {
		t.Error("the child's pid is still in use after wait")
	}
	if err := c.signalGroup(syscall.SIGKILL); err != nil {
		t.Errorf("a signal after the reaping: %v, want none sent", err)
	}
}

// TestProcessTailKeptForSlowClient: a process that wrote its output and
// exited while the client read nothing keeps all of it, however long the
// client takes: the output still in its pipe when the grace for a
// descendant holding the pipe ran out is read before the pipe is closed
// (it was cut, losing up to the pipe's 1 MiB). Under a terminal too,
// which holds more than TIOCINQ tells: the line discipline's 4 KiB, and
// up to 8 KiB before it (the end of that was cut). Whether that was
// lost depends on how the kernel splits the reads: several processes
// make it all but sure.
func TestProcessTailKeptForSlowClient(t *testing.T) {
	endToEnd(t) // waits out killGrace
	for name, c := range map[string]struct {
		// More than the reader takes at once (256 KiB from a pipe, what
		// the line discipline holds from a terminal: 4 KiB), so the rest
		// waits in the pipe while the reader waits on the client; less
		// than the pipe (1 MiB) or the terminal (12 KiB) holds.
		size, processes int
		spec            string
	}{
		"pipe":     {768 << 10, 1, ""},
		"terminal": {10000, 16, `,"tty":true`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			inR, inW := io.Pipe()
			outR, outW := io.Pipe() // no buffer: rpi waits on each write until read
			done := make(chan struct{})
			go func() {
				defer close(done)
				runRPI(t, newTestEnv(t), []string{"rpc", "--cwd", dir, "--no-session"}, inR, outW)
				outW.Close()
			}()
			defer func() { inW.Close(); io.Copy(io.Discard, outR); <-done }()
			out := bufio.NewReader(outR)
			next := func() map[string]any {
				t.Helper()
				line, err := out.ReadBytes('\n')
				if err != nil {
					t.Fatalf("reading rpi's output: %v", err)
				}
				var rec map[string]any
				if err := json.Unmarshal(line, &rec); err != nil {
					t.Fatalf("%v: %s", err, line)
				}
				return rec
			}
			next() // session_started
			// The processes write once every one has started: rpi
			// answers each spawn before it reads the next.
			start := filepath.Join(dir, "start")
			for i := range c.processes {
				// No newline: a terminal passes each byte as it is.
				script := fmt.Sprintf("until [ -e %s ]; do sleep 0.01; done; head -c %d /dev/zero | tr '\\0' x; : > %s", start, c.size, filepath.Join(dir, fmt.Sprint("written", i)))
				io.WriteString(inW, spawnLine(fmt.Sprint("p", i), []string{"sh", "-c", script}, c.spec)+"\n")
				for rec := next(); rec["command"] != "process_spawn"; rec = next() {
				}
			}
			os.WriteFile(start, nil, 0o644)
			for i := range c.processes {
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					if _, err := os.Stat(filepath.Join(dir, fmt.Sprint("written", i))); err == nil {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the process did not write its output: does its pipe hold less here?")
					}
				}
			}
			time.Sleep(killGrace + time.Second) // the grace runs out while the client reads nothing
			got := map[string]float64{}
			for exited := 0; exited < c.processes; {
				time.Sleep(10 * time.Millisecond) // and then slowly: the readers wait on each event
				switch rec := next(); rec["type"] {
				case "process_output":
					got[eventProcess(rec)] = rec["data"].(map[string]any)["cursor"].(float64)
				case "process_exited":
					exited++
				}
			}
			if len(got) != c.processes {
				t.Fatalf("output of %d processes, want %d", len(got), c.processes)
			}
			for id, n := range got {
				if n != float64(c.size) {
					t.Errorf("the client got %v bytes of process %s's output, want %d", n, id, c.size)
				}
			}
		})
	}
}

// TestProcessEndsWhileDescendantHoldsOutput: a process whose descendant
// left its group and session and holds its output pipe still ends, its
// pipe cut once what it held is read: whether the descendant is silent or
// writes without a pause, and under a terminal too.
func TestProcessEndsWhileDescendantHoldsOutput(t *testing.T) {
	endToEnd(t) // waits out killGrace
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid here")
	}
	for name, c := range map[string]struct{ descendant, spec string }{
		"silent":           {"exec sleep 20", ""},
		"writing":          {"while :; do echo x; done", ""},
		"silent terminal":  {"exec sleep 20", `,"tty":true`},
		"writing terminal": {"while :; do echo x; done", `,"tty":true`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ps := startSession(t)
			pidFile := filepath.Join(t.TempDir(), "pid")
			t.Cleanup(func() { // the silent one outlives the test
				if b, err := os.ReadFile(pidFile); err == nil {
					if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
			// The child waits for the descendant to be in its own session:
			// its group is killed as it ends.
			script := fmt.Sprintf("setsid sh -c 'echo $$ > %[1]s; %[2]s' & until [ -s %[1]s ]; do sleep 0.01; done; echo started", pidFile, c.descendant)
			ps.send(spawnLine("p", []string{"sh", "-c", script}, c.spec))
			deadline := time.Now().Add(killGrace + 10*time.Second)
			for !strings.Contains(string(ps.out.bytes()), `"type":"process_exited"`) {
				if time.Now().After(deadline) {
					t.Fatal("no process_exited while a descendant holds the process's output")
				}
				time.Sleep(10 * time.Millisecond)
			}
			ps.close()
		})
	}
}

// TestCutOffCountsReadInFlight: what the reader has read but not yet
// counted when cutOff measures the pipe is in neither the fill nor taken:
// the pipe is not closed while output written before the cut is still in
// it (cutOff's target fell short by that read, up to 256 KiB, and closed
// the pipe on the 44 KiB after it). The pipe's writer stays open, as a
// descendant holding it.
func TestCutOffCountsReadInFlight(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	growPipe(w)
	const size = 300 << 10
	w.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := w.Write(make([]byte, size)); err != nil {
		t.Skipf("the pipe holds less than %d bytes here: %v", size, err)
	}
	c := &child{table: &processTable{ending: make(chan struct{})}, pipes: []*os.File{r}, taken: make([]atomic.Int64, 1)}
	buf := make([]byte, size)
	n, err := io.ReadFull(r, buf[:readSize]) // the read in flight
	if err != nil {
		t.Fatal(err)
	}
	done, cut := make(chan struct{}), make(chan bool)
	go func() { cut <- c.cutOff(done) }()
	time.Sleep(50 * time.Millisecond) // cutOff measures the pipe meanwhile
	c.taken[0].Add(int64(n))          // and only now is the read counted
	time.Sleep(5 * cutOffPoll)
	if held := pipeBuffered(r); held != size-readSize {
		t.Fatalf("the pipe holds %d bytes (-1: closed), want the %d written before the cut", held, size-readSize)
	}
	m, err := io.ReadFull(r, buf[readSize:])
	if err != nil {
		t.Fatal(err)
	}
	c.taken[0].Add(int64(m)) // all taken: cutOff closes the pipe
	close(done)
	if !<-cut {
		t.Error("cutOff gave up")
	}
}
