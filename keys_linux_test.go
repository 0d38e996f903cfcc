package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestKeysHiddenFromOtherUsers runs rpi as a user who is not root (nobody),
// as users run it: a process that is not root and has made itself
// non-dumpable may no longer open its own /proc/self/mem, so rpi must
// overwrite its --api-key and key variables through the file it opened
// before. /proc/<rpi>/cmdline, which every user can read, must not show
// the key, and rpi must not warn that it could not hide it. It needs root
// to start a process as another user.
func TestKeysHiddenFromOtherUsers(t *testing.T) {
	endToEnd(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run rpi as another user; TestKeysOutOfReach covers this user")
	}
	dir, binary := copyForNobody(t, "rpi")
	const argKey, envKey = "sk-from-the-command-line-31", "sk-from-the-environment-57"
	p := startRPIWith(t, func(cmd *exec.Cmd) {
		cmd.Path, cmd.Args[0] = binary, binary
		cmd.Dir = dir
		cmd.Env = append(cmd.Env, "OPENAI_API_KEY="+envKey, "HOME="+dir, "PI_CODING_AGENT_DIR="+dir, "TMPDIR="+dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}, "rpc", "--cwd", dir, "--no-session", "--provider", "anthropic", "--api-key", argKey)
	p.next(t) // session_started: startup, and the hiding, are over
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.cmd.Process.Pid), "cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cmdline), "--api-key") || strings.Contains(string(cmdline), argKey) {
		t.Errorf("/proc/<rpi>/cmdline of rpi run as nobody: %q", cmdline)
	}
	environ, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.cmd.Process.Pid), "environ")) // root may read it
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(environ), envKey) {
		t.Errorf("/proc/<rpi>/environ of rpi run as nobody holds the key")
	}
	p.stdin.Close()
	p.exit(t)
	if strings.Contains(p.stderr.String(), "cannot") {
		t.Errorf("rpi run as nobody warned: %s", p.stderr.String())
	}
}

// TestKeyVariableNamedTwice: an environment can name a variable twice (a
// raw execve does not merge them), the first copy empty and the second a
// key; os.Getenv sees only the first. rpi still overwrites the key in the
// memory /proc/<rpi>/environ shows.
func TestKeyVariableNamedTwice(t *testing.T) {
	endToEnd(t)
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc")
	}
	const key = "sk-named-twice-83"
	cmd := rpiCommand(t, "rpc", "--cwd", t.TempDir(), "--no-session")
	env := append(cmd.Env, "OPENAI_API_KEY=", "OPENAI_API_KEY="+key) // exec.Cmd would keep one
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	defer inW.Close()
	defer outR.Close()
	pid, err := syscall.ForkExec(cmd.Path, cmd.Args, &syscall.ProcAttr{Env: env, Files: []uintptr{inR.Fd(), outW.Fd(), os.Stderr.Fd()}})
	inR.Close()
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(outR).ReadBytes('\n'); err != nil { // session_started: the keys are read
		t.Fatal(err)
	}
	environ, readErr := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	inW.Close()
	var status syscall.WaitStatus
	syscall.Wait4(pid, &status, 0, nil)
	if readErr != nil {
		t.Skipf("rpi's environ cannot be read here (not root): %v", readErr)
	}
	if bytes.Contains(environ, []byte(key)) {
		t.Errorf("/proc/<rpi>/environ still holds the key named second:\n%q", environ)
	}
}
