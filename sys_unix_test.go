//go:build unix

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mkfifo makes a named pipe, for tests of files that are not regular.
func mkfifo(path string, mode uint32) error { return syscall.Mkfifo(path, mode) }

// childrenStartAtDefaults gives each signal rpi installs a handler for
// (handledSignals, laterStopSignals, childSignals) a handler in the test
// process too, where the tests were started with it ignored (under nohup,
// SIGHUP; in a shell's background job, SIGINT and SIGQUIT). The
// in-process servers install no handlers, so their children would
// otherwise start with those signals ignored, which rpi's own never do
// (TestEndToEndDefaultSignals): process_signal SIGHUP would not end a
// sleep. Started from the test process, rpi then starts with them at their
// defaults too. Such a signal sent to the test process is dropped, as it
// was ignored.
func childrenStartAtDefaults() {
	dropped := make(chan os.Signal, 1)
	for _, sig := range slices.Concat(handledSignals, laterStopSignals, childSignals) {
		if signal.Ignored(sig) {
			signal.Notify(dropped, sig)
		}
	}
}

// TestEndToEndChildSignalsAtFirstChild: before its first child, rpi
// catches only the signals that end it (the runtime catches SIGHUP and
// SIGQUIT from the start; TestEndToEndLaterStopSignals shows when rpi
// takes them over), with SIGPIPE ignored (each handler costs startup
// time); its first child's start gives SIGPIPE,
// SIGTSTP, SIGTTIN, SIGTTOU and SIGCONT their handlers, so that children
// start with them at their defaults (TestEndToEndDefaultSignals).
func TestEndToEndChildSignalsAtFirstChild(t *testing.T) {
	endToEnd(t)
	p := startRPIWith(t, nil, "rpc", "--cwd", t.TempDir())
	p.next(t)
	// mask reads one of rpi's signal masks from /proc (bit n-1: signal n).
	mask := func(field string) uint64 {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
		if err != nil {
			t.Skip("no /proc:", err)
		}
		for _, line := range strings.Split(string(status), "\n") {
			if value, ok := strings.CutPrefix(line, field+":"); ok {
				bits, err := strconv.ParseUint(strings.TrimSpace(value), 16, 64)
				if err != nil {
					t.Fatal(err)
				}
				return bits
			}
		}
		t.Fatalf("no %s in rpi's /proc status", field)
		return 0
	}
	bits := func(sigs ...syscall.Signal) (m uint64) {
		for _, sig := range sigs {
			m |= 1 << (sig - 1)
		}
		return m
	}
	ending := bits(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	if signal.Ignored(syscall.SIGHUP) { // nohup: rpi keeps it ignored
		ending &^= bits(syscall.SIGHUP)
	}
	forChildren := bits(syscall.SIGPIPE, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGCONT)
	if caught := mask("SigCgt"); caught&ending != ending || caught&forChildren != 0 {
		t.Errorf("before the first child rpi catches %x; want %x, and none of %x", caught, ending, forChildren)
	}
	if ignored := mask("SigIgn"); ignored&forChildren != bits(syscall.SIGPIPE) {
		t.Errorf("before the first child rpi ignores %x; want SIGPIPE alone of %x", ignored, forChildren)
	}
	p.send(t, `{"id":"b","type":"bash","command":"true"}`+"\n")
	p.until(t, "response", "b")
	if caught := mask("SigCgt"); caught&(ending|forChildren) != ending|forChildren {
		t.Errorf("after the first child rpi catches %x; want all of %x", caught, ending|forChildren)
	}
	p.stdin.Close()
	p.exit(t)
}

// TestEndToEndLaterStopSignals: SIGHUP and SIGQUIT, whose handlers rpi
// installs only once it has answered the first lines that came, are in
// place for any line it reads after that: with no child ever started,
// the second get_state's answer means that either signal ends rpi as
// docs/protocol.md#launch says, with its exit code, not killed by it.
// So they are for a client that sends nothing after session_started
// (one that starts rpi ahead of its use, or waits for its user), once
// settleWithin has passed. The same in pi's shapes (--compat pi).
func TestEndToEndLaterStopSignals(t *testing.T) {
	endToEnd(t)
	clients := map[string]func(t *testing.T, p *rpiProcess){
		"answered": func(t *testing.T, p *rpiProcess) {
			p.send(t, `{"id":"1","type":"get_state"}`+"\n")
			p.until(t, "response", "1")
			p.send(t, `{"id":"2","type":"get_state"}`+"\n")
			p.until(t, "response", "2")
		},
		"no line": func(*testing.T, *rpiProcess) { time.Sleep(settleWithin + time.Second) },
	}
	for _, tt := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGHUP, 129}, {syscall.SIGQUIT, 131}} {
		for name, client := range clients {
			for _, compat := range []string{"rpi", "pi"} {
				t.Run(tt.sig.String()+"/"+name+"/"+compat, func(t *testing.T) {
					t.Parallel()
					p := startRPI(t, "rpc", "--compat", compat, "--cwd", t.TempDir())
					p.next(t)
					client(t, p)
					p.cmd.Process.Signal(tt.sig)
					if code, _ := p.exit(t); code != tt.code {
						t.Errorf("exit code %d, want %d", code, tt.code)
					}
				})
			}
		}
	}
}

// TestEndToEndSessionDirNotWritable: rpi run as a user who may not write
// to the session folder (root's, mode 0755) stops at startup with the
// init error that says why, and leaves nothing there; in a folder of
// that user's own it starts.
func TestEndToEndSessionDirNotWritable(t *testing.T) {
	endToEnd(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run rpi as nobody") // TestCheckWritableDir covers this user
	}
	dir, binary := copyForNobody(t, "rpi")
	own := filepath.Join(dir, "own")
	os.Mkdir(own, 0o755)
	os.Chown(own, 65534, 65534)
	for _, tt := range []struct{ sessions, want string }{
		{filepath.Join(dir, "sessions"), `{"type":"response","command":"init","success":false,"error":"Cannot use session directory ` + filepath.Join(dir, "sessions") + `: permission denied"}`},
		{filepath.Join(own, "sessions"), `{"type":"session_started"`},
	} {
		cmd := rpiCommand(t, "rpc", "--cwd", dir, "--session-dir", tt.sessions)
		cmd.Path, cmd.Args[0] = binary, binary
		cmd.Env = append(cmd.Env, "HOME="+dir, "PI_CODING_AGENT_DIR="+dir, "TMPDIR="+dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, _ := cmd.Output() // stdin is /dev/null: rpi ends after its first line
		if !strings.HasPrefix(string(out), tt.want) {
			t.Errorf("--session-dir %s as nobody: %s; want %s", tt.sessions, out, tt.want)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "rpi" && e.Name() != "own" {
			t.Errorf("startup left %s behind", e.Name())
		}
	}
}

// TestCanCreateIn: the session folder's check says yes for a folder the
// user may write to and leaves nothing in it. An unnamed file is made in
// a folder of the user's own where the system has them (Linux, on most
// file systems); /proc takes none, whoever asks (the kernel refuses a
// user who may not write to it before it asks /proc), so root's check
// makes a named file there instead, and /proc refuses that.
func TestCanCreateIn(t *testing.T) {
	dir := t.TempDir()
	if err := canCreateIn(dir); err != nil {
		t.Errorf("a folder of the user's own: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the check left %v behind", entries)
	}
	if canCreateUnnamedIn("/proc") {
		t.Error("/proc takes an unnamed file")
	}
	if _, err := os.Stat("/proc/self"); err == nil {
		if err := canCreateIn("/proc"); err == nil {
			t.Error("/proc takes new files, says the check")
		}
	}
}

// TestOpenRegularMissingAsOpen: where nothing is there, openRegular does
// not try the open (stat found nothing), but fails as the open would
// have: the same *fs.PathError (Op "open", the path, ENOENT), through a
// dangling symlink and a missing folder too; with O_CREATE it opens, and
// creates what a dangling symlink names, as the open does.
func TestOpenRegularMissingAsOpen(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, "target"), filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"missing", "dangling", "no/such/folder", ""} {
		path := filepath.Join(dir, name)
		if name == "" {
			path = ""
		}
		for _, flag := range []int{os.O_RDONLY, os.O_RDWR, os.O_WRONLY | os.O_APPEND} {
			_, got := openRegular(path, flag, 0)
			_, want := os.OpenFile(path, flag, 0)
			var pe *fs.PathError
			if got == nil || !errors.As(got, &pe) || pe.Op != "open" || got.Error() != want.Error() || !errors.Is(got, fs.ErrNotExist) {
				t.Errorf("openRegular(%q, %#x): %v; the open fails with %v", name, flag, got, want)
			}
		}
	}
	f, err := openRegular(filepath.Join(dir, "dangling"), os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := os.Stat(filepath.Join(dir, "target")); err != nil {
		t.Errorf("O_CREATE through a dangling symlink created nothing: %v", err)
	}
}

// TestToolsRefuseKernelFilesUnderSys: the file tools refuse the files of
// the kernel's file systems mounted under /sys (cgroup, tracefs, …) as
// they refuse those of /sys itself: a cgroup's files move and kill
// processes, and v1's release_agent makes the kernel run a program as
// root. read and a write in such a folder fail, and grep passes the
// files over.
func TestToolsRefuseKernelFilesUnderSys(t *testing.T) {
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Skip("no /proc/self/mounts:", err)
	}
	kinds := []string{"cgroup", "cgroup2", "debugfs", "tracefs", "securityfs", "configfs", "bpf", "pstore", "efivarfs", "fusectl", "selinuxfs"}
	var dir, file string
	for _, line := range strings.Split(string(mounts), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 3 || !slices.Contains(kinds, fields[2]) {
			continue
		}
		entries, _ := os.ReadDir(fields[1])
		for _, e := range entries {
			if info, err := e.Info(); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o444 != 0 {
				if f, err := os.Open(filepath.Join(fields[1], e.Name())); err == nil {
					f.Close()
					dir, file = fields[1], filepath.Join(fields[1], e.Name())
					break
				}
			}
		}
		if file != "" {
			break
		}
	}
	if file == "" {
		t.Skip("no readable file of a kernel file system under /sys here")
	}
	s := toolServer(t, nil)
	for _, tt := range []struct{ tool, args string }{
		{"read", `{"path":` + strconv.Quote(file) + `}`},
		{"write", `{"path":` + strconv.Quote(filepath.Join(dir, "rpi-test-new.txt")) + `,"content":"x"}`},
	} {
		if got, isError := callTool(t, s, tt.tool, tt.args); !isError || !strings.Contains(got, "it is a file of /sys") {
			t.Errorf("%s %s: got %q (isError %v), want it refused as a file of /sys", tt.tool, tt.args, got, isError)
		}
	}
	if got, _ := callTool(t, s, "grep", `{"pattern":"","path":`+strconv.Quote(dir)+`}`); got != "No matches found" {
		t.Errorf("grep in %s: got %q, want no matches", dir, got)
	}
}

// TestWriteKeepsTheUmask: a file write makes, and the folders it makes
// for it, have the modes the umask leaves, as pi's (0666 and 0777 less
// it): a umask of 002 gives 0664 and 0775, where rpi made 0644 and 0755.
func TestWriteKeepsTheUmask(t *testing.T) {
	old := syscall.Umask(0o002)
	defer syscall.Umask(old)
	s := toolServer(t, nil)
	if got, isError := callTool(t, s, "write", `{"path":"new/dir/f.txt","content":"x"}`); isError {
		t.Fatal(got)
	}
	for path, want := range map[string]os.FileMode{"new": 0o775, "new/dir": 0o775, "new/dir/f.txt": 0o664} {
		info, err := os.Stat(filepath.Join(s.set.cwd, path))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, info.Mode().Perm(), want)
		}
	}
}

// TestExportKeepsTheUmask: a new export page is 0666 less the umask, as
// pi writes it: it was 0644 whatever the umask, so a umask of 002 did
// not make it group-writable as every other file the user makes.
func TestExportKeepsTheUmask(t *testing.T) {
	old := syscall.Umask(0o002)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "page.html")
	if err := replaceFileWith(path, func(w *bufio.Writer) error { w.WriteString("page"); return w.Flush() }); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o664 {
		t.Errorf("the new page: %v (%v), want 0664", info.Mode(), err)
	}
}

// TestWatchdogNotStartedToForget: a line that forgets a group starts no
// watchdog, nor does any line once rpi has cleaned up (close): a child
// whose wait ended after shutdown started the watchdog again, a process
// left behind rpi's exit.
func TestWatchdogNotStartedToForget(t *testing.T) {
	exe, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1)")
	}
	w := newWatchdog(exe, nil)
	defer w.close()
	w.send("-12345", io.Discard)
	if w.pid() != 0 {
		t.Error("forgetting a group started the watchdog")
	}
	w.close()
	w.send("+12345", io.Discard)
	if w.pid() != 0 {
		t.Error("a line after close started the watchdog again")
	}
}

// TestMCPStdioEndCrashKeepsItsSignal: a stdio MCP server that dies of a
// signal of its own (a crash: SIGSEGV) is reported as exited by it, though
// rpi took its stdout's end for a close and signalled it (the stream
// ends as the process dies, often before the wait sees the exit); only
// what rpi sends (SIGTERM, SIGKILL) ending it means it closed its stdout.
// Any signal did: a crash was reported as "closed its stdout".
func TestMCPStdioEndCrashKeepsItsSignal(t *testing.T) {
	for _, c := range []struct{ sig, want string }{
		{"SEGV", "MCP server x exited (signal: segmentation fault)"},
		{"TERM", "MCP server x closed its stdout"},
		{"KILL", "MCP server x closed its stdout"},
	} {
		cmd := exec.Command("sh", "-c", "kill -"+c.sig+" $$")
		cmd.Run()
		if got := mcpStdioEnd("x", cmd.ProcessState, "stdout").Error(); got != c.want {
			t.Errorf("a server ended by SIG%s: %q, want %q", c.sig, got, c.want)
		}
	}
}
