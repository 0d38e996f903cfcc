package main

import (
	"bufio"
	"os"
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

// TestSessionOf: the session id is read from a /proc/<pid>/stat line
// after the last ')', so a command name with spaces and parentheses (a
// process names itself) cannot pass for other fields; a line without one
// is no session. And rpi's own stat line, read as killSession reads it,
// gives its own session.
func TestSessionOf(t *testing.T) {
	for _, tt := range []struct {
		line string
		want int
	}{
		{"123 (bash) S 1 123 123 34816 123 4194560 1", 123},
		{"77 (a) 1 2 3 (x) y) R 5 6 7 8 9", 7},
		{"77 ( ) S 5 6 7 8", 7},
		{"77 (a) S 5 6", -1},
		{"77 a S 5 6 7 8", -1},
		{"77 (a) S 5 6 x 8", -1},
	} {
		if got := sessionOf([]byte(tt.line)); got != tt.want {
			t.Errorf("sessionOf(%q) = %d, want %d", tt.line, got, tt.want)
		}
	}
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip(err)
	}
	sid, _, _ := syscall.RawSyscall(syscall.SYS_GETSID, 0, 0, 0)
	if got := sessionOf(stat); got != int(sid) {
		t.Errorf("rpi's own stat line %q: session %d, want %d", stat, got, sid)
	}
}
