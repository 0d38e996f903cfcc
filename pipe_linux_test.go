package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// pipeHolds is how many bytes wait in the pipe r reads from (-1: not
// known).
func pipeHolds(r *os.File) int {
	var n int32
	if ioctl(r, syscall.TIOCINQ, unsafe.Pointer(&n)) != nil {
		return -1
	}
	return int(n)
}

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
