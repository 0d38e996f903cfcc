package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBridgeAutoStartsHost: two rpi rpc --connect auto:unix:PATH started
// at once, with no host listening, start one rpi serve between them
// (detached, its stderr in serve.log) and both connect to it; when their
// stdin ends they exit 0 and the host goes on, until the test ends it
// with SIGTERM (its pid read from the socket: SO_PEERCRED).
func TestBridgeAutoStartsHost(t *testing.T) {
	endToEnd(t)
	sock := filepath.Join(shortSocketDir(t), "rpi.sock")
	agent := t.TempDir()
	bridges := make([]*rpiProcess, 2)
	for i := range bridges {
		bridges[i] = startRPIWith(t, withEnv("PI_CODING_AGENT_DIR="+agent), "rpc", "--connect", "auto:unix:"+sock, "--name", "bridge "+strconv.Itoa(i))
	}
	pid := 0
	t.Cleanup(func() { // nothing left running, whatever failed
		if pid > 0 && processRunning(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	for _, b := range bridges { // both already dialing, started at once
		b.send(t, `{"id":"s","type":"get_state"}`+"\n")
	}
	for i, b := range bridges {
		if rec := b.until(t, "response", "s"); !strings.Contains(mustJSONText(rec), `"sessionName":"bridge `+strconv.Itoa(i)+`"`) {
			t.Errorf("bridge %d: %v", i, rec)
		}
	}
	pid = peerPID(t, sock)
	for i, b := range bridges {
		b.stdin.Close()
		if code, rest := b.exit(t); code != 0 || rest != "" {
			t.Errorf("bridge %d: exit %d, rest %q, stderr %s", i, code, rest, b.stderr.Bytes())
		}
		if b.stderr.Len() > 0 {
			t.Errorf("bridge %d: stderr %s", i, b.stderr.Bytes())
		}
	}
	if !processRunning(pid) {
		t.Fatal("the host ended with its bridges")
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte(`{"id":"h","type":"host_status"}` + "\n"))
	var got []byte
	buf := make([]byte, 64<<10)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for !bytes.Contains(got, []byte(`"command":"host_status"`)) {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("%v: %s", err, got)
		}
		got = append(got, buf[:n]...)
	}
	conn.Close()
	for _, name := range []string{`"name":"bridge 0"`, `"name":"bridge 1"`} {
		if !bytes.Contains(got, []byte(name)) {
			t.Errorf("the host has no session %s: %s", name, got)
		}
	}
	syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for processRunning(pid) {
		if time.Now().After(deadline) {
			t.Fatal("the host did not end within 10 s of SIGTERM")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Lstat(sock); err == nil {
		t.Errorf("the socket %s is left behind", sock)
	}
	log, _ := os.ReadFile(filepath.Join(agent, "serve.log"))
	if bytes.Count(log, []byte("listening on unix:"+sock)) != 1 || bytes.Contains(log, []byte("another rpi serve")) {
		t.Errorf("serve.log: want one host started:\n%s", log)
	}
}

// mustJSONText is rec as JSON text.
func mustJSONText(rec map[string]any) string { return string(mustJSON(rec)) }

// peerPID is the pid of the process listening on the unix socket at path.
func peerPID(t *testing.T, path string) int {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var cred *syscall.Ucred
	var credErr error
	raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	})
	if credErr != nil {
		t.Fatal(credErr)
	}
	return int(cred.Pid)
}

// processRunning reports whether pid is a process that has not ended (a
// zombie no one has reaped yet has ended).
func processRunning(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
