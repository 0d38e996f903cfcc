//go:build unix

package main

// What rpi needs from a Unix system: signals, process groups, the
// watchdog that outlives a killed rpi just long enough to kill its
// children, and opening files without blocking on FIFOs or devices.

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// findShell picks bash from PATH, or /bin/sh where bash is missing.
func findShell() (string, error) {
	if path, err := exec.LookPath("bash"); err == nil {
		return path, nil
	}
	return "/bin/sh", nil
}

// keyShell runs auth.json's and models.json's "!command" keys.
func keyShell() (string, error) { return "/bin/sh", nil }

// killedExitCode is the exit code of a child rpi killed; none here (-1):
// it ends by a signal, which exitStatus reports as such.
const killedExitCode = -1

// pageFaults is how many page faults the process has taken so far, for
// the startup trace.
func pageFaults() int64 {
	var usage syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &usage) != nil {
		return -1
	}
	return int64(usage.Minflt) + int64(usage.Majflt)
}

// exitCode is rpi's exit code after a stop signal (docs/protocol.md#launch).
func exitCode(sig os.Signal) int {
	switch sig {
	case syscall.SIGINT:
		return 130
	case syscall.SIGHUP:
		return 129
	case syscall.SIGQUIT:
		return 131
	}
	return 0
}

// handledSignals are the signals that end rpi that watchSignals gives a
// handler before the first line (docs/protocol.md#launch).
var handledSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM}

// laterStopSignals are the other signals that end rpi: they get their
// handlers once rpi has answered the first lines that came, or
// settleWithin after it started serving (host.settleIn), or before its
// first child starts, whichever comes first
// (readyLaterStopSignals). Each handler
// costs a round trip to the runtime's signal thread, and before the
// first line these two measurably delayed it (docs/performance.md).
var laterStopSignals = []os.Signal{syscall.SIGHUP, syscall.SIGQUIT}

// childSignals are the signals rpi handles only for its children's sake,
// from just before the first child starts (readyChildSignals): SIGPIPE,
// so that a child starts with it at its default, not ignored as rpi has
// it until then (a write to a reader that is gone is an error either
// way); and SIGTSTP, SIGTTIN, SIGTTOU and SIGCONT, which the Go runtime
// would otherwise leave as rpi inherited them, so that children start
// with them at their defaults instead of "ignore" (the runtime already
// gives every other signal a handler, which exec resets). Each handler
// costs a round trip to the runtime's signal thread, which is why they
// are not installed before the first line.
var childSignals = []os.Signal{syscall.SIGPIPE, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGCONT}

// signalRelay is the channel watchSignals relays from; nil until it runs
// (in-process tests never run it, and so change no signal's handling).
var signalRelay chan<- os.Signal

// laterStopSignalsReady and childSignalsReady make readyLaterStopSignals
// and readyChildSignals install their handlers once.
var laterStopSignalsReady, childSignalsReady sync.Once

// readyLaterStopSignals gives laterStopSignals their handlers, once, on
// the channel of watchSignals; it returns once they are in place.
func readyLaterStopSignals() {
	laterStopSignalsReady.Do(func() {
		if signalRelay != nil {
			signal.Notify(signalRelay, laterStopSignals...)
		}
	})
}

// readyChildSignals gives laterStopSignals and childSignals their
// handlers, once, on the channel of watchSignals; every start of a child
// calls it first.
func readyChildSignals() {
	readyLaterStopSignals()
	childSignalsReady.Do(func() {
		if signalRelay != nil {
			signal.Notify(signalRelay, childSignals...)
		}
	})
}

// watchSignals starts installing, on a goroutine of its own, the handlers
// of handledSignals (SIGINT, SIGTERM); it sends to stop the signals that
// end rpi (docs/protocol.md#launch): those two, SIGQUIT, and SIGHUP
// unless it was ignored when rpi started (nohup). SIGPIPE is ignored at
// once, so that a write to a reader that is gone is an error, not rpi's
// end. laterStopSignals and childSignals get their handlers later, on
// the same channel. The first handler makes the runtime start threads,
// which is why this runs beside the rest of startup; serve waits for
// ready before it writes the first line.
func watchSignals(stop chan<- os.Signal) (ready <-chan struct{}) {
	hupIgnored := signal.Ignored(syscall.SIGHUP)
	signal.Ignore(syscall.SIGPIPE)
	all := make(chan os.Signal, len(handledSignals)+len(laterStopSignals)+len(childSignals))
	signalRelay = all
	installed := make(chan struct{})
	go func() {
		signal.Notify(all, handledSignals...)
		close(installed)
		for sig := range all {
			ends := sig == syscall.SIGINT || sig == syscall.SIGTERM || sig == syscall.SIGQUIT ||
				sig == syscall.SIGHUP && !hupIgnored
			if ends {
				select {
				case stop <- sig:
				default:
				}
			}
			// SIGPIPE becomes a write error; the others mean nothing to rpi.
		}
	}()
	return installed
}

// startInGroup makes cmd start as the leader of a new session and process
// group (under a PTY, with the PTY as its controlling terminal), killed by
// the kernel if rpi dies first. The session holds every process group a
// job-control shell makes for its jobs, so killTree finds them all.
func startInGroup(cmd *exec.Cmd, pty bool) {
	attr := &syscall.SysProcAttr{Setsid: true, Setctty: pty}
	setParentDeathSignal(attr)
	cmd.SysProcAttr = attr
}

// startDetached makes cmd start as the leader of a new session and
// process group, with no parent-death signal: it outlives rpi (the
// rpi serve a bridge starts).
func startDetached(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}

// signalGroup sends sig to the process group led by pid; a group that is
// already gone is not an error.
func signalGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// sysSignal is a signal as the system numbers it.
type sysSignal = syscall.Signal

// sigTerm asks a process to stop.
const sigTerm = syscall.SIGTERM

// processSignals are the signals process_signal accepts (docs/processes.md).
var processSignals = []string{"SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGKILL", "SIGUSR1", "SIGUSR2", "SIGSTOP", "SIGCONT", "SIGTSTP"}

// processSignalsJSON is processSignals as a JSON array, for the process
// tool's schema: a constant, so that the schema is one too and package
// init builds nothing (TestProcessSignalsJSON checks that they agree).
const processSignalsJSON = `["SIGINT","SIGTERM","SIGHUP","SIGQUIT","SIGKILL","SIGUSR1","SIGUSR2","SIGSTOP","SIGCONT","SIGTSTP"]`

// signalNumbers are signal names and their numbers: those above and the
// others a process may end by; no two share a number.
var signalNumbers = []namedSignal{
	{"SIGINT", syscall.SIGINT}, {"SIGTERM", syscall.SIGTERM}, {"SIGKILL", syscall.SIGKILL},
	{"SIGHUP", syscall.SIGHUP}, {"SIGQUIT", syscall.SIGQUIT}, {"SIGUSR1", syscall.SIGUSR1},
	{"SIGUSR2", syscall.SIGUSR2}, {"SIGSTOP", syscall.SIGSTOP}, {"SIGCONT", syscall.SIGCONT},
	{"SIGABRT", syscall.SIGABRT}, {"SIGALRM", syscall.SIGALRM}, {"SIGBUS", syscall.SIGBUS},
	{"SIGFPE", syscall.SIGFPE}, {"SIGILL", syscall.SIGILL}, {"SIGPIPE", syscall.SIGPIPE},
	{"SIGSEGV", syscall.SIGSEGV}, {"SIGTRAP", syscall.SIGTRAP}, {"SIGTSTP", syscall.SIGTSTP},
	{"SIGTTIN", syscall.SIGTTIN}, {"SIGTTOU", syscall.SIGTTOU}, {"SIGXCPU", syscall.SIGXCPU},
	{"SIGXFSZ", syscall.SIGXFSZ}, {"SIGPROF", syscall.SIGPROF}, {"SIGSYS", syscall.SIGSYS},
	{"SIGVTALRM", syscall.SIGVTALRM}, {"SIGWINCH", syscall.SIGWINCH}, {"SIGURG", syscall.SIGURG},
}

// exitStatus reads a finished child's exit code, or the signal that killed it.
func exitStatus(ps *os.ProcessState) (code *int, signal syscall.Signal) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return nil, ws.Signal()
	}
	c := ps.ExitCode()
	return &c, 0
}

// killTree SIGKILLs what a child started: its process group and every
// process still in its session (a job-control shell's jobs).
func killTree(pid int) {
	signalGroup(pid, syscall.SIGKILL)
	killSession(pid)
}

// processAlive reports whether a process with this pid exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// ---- Files ----

// hardLinks is how many names the file info describes has (1 when the
// system does not say).
func hardLinks(info os.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// ownedByUs reports whether the file info describes is rpi's user's
// (true when the system does not say).
func ownedByUs(info os.FileInfo) bool {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid) == os.Geteuid()
	}
	return true
}

// nonBlocking is the flag that opens a FIFO without waiting for a writer.
const nonBlocking = syscall.O_NONBLOCK | syscall.O_NOCTTY

// noFollow is the flag that opens no symlink: the open fails instead.
const noFollow = syscall.O_NOFOLLOW

// removeWhileOpen: a file can be removed while it is open (and locked),
// so deleteSession holds it until it is gone.
const removeWhileOpen = true

// openNonBlocking opens path without blocking on a FIFO that has no
// writer or a device, and without making a terminal rpi's own; a FIFO
// without a reader is refused.
func openNonBlocking(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK|syscall.O_NOCTTY, perm)
	if errors.Is(err, syscall.ENXIO) {
		return nil, &errNotRegular{path, "a named pipe (FIFO)"}
	}
	return f, err
}

// canCreateIn checks that the folder dir can hold a new file. For a user
// other than root, access(2) answers it (write and search permission, on
// a file system mounted read-write) without making anything; rpi is
// never set-user-id, so the ids it checks are rpi's own. Root may write
// anywhere by permission, so for root only a create shows what the file
// system allows (/proc says yes to root's access, then refuses the file):
// canCreateIn makes an unnamed file (canCreateUnnamedIn), or where that
// is refused a named one, and removes it. Plain system calls do it: an
// *os.File would start the runtime's poller, which nothing else before
// session_started needs.
func canCreateIn(dir string) (err error) {
	if syscall.Geteuid() != 0 {
		const mayWrite, maySearch = 2, 1 // W_OK and X_OK of access(2)
		_, err := retryInterrupted(func() (int, error) { return 0, syscall.Access(dir, mayWrite|maySearch) })
		return err
	}
	if canCreateUnnamedIn(dir) {
		return nil
	}
	for range 3 { // a name taken already (a random 64 bits) is tried again
		var b [8]byte
		randomID(b[:])
		path := filepath.Join(dir, ".rpi-check-"+hex.EncodeToString(b[:]))
		var fd int
		fd, err = retryInterrupted(func() (int, error) {
			return syscall.Open(path, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0o600)
		})
		if err == nil {
			syscall.Close(fd)
			if _, err := retryInterrupted(func() (int, error) { return 0, syscall.Unlink(path) }); err != nil {
				return &os.PathError{Op: "remove", Path: path, Err: err} // names the file left behind
			}
			return nil
		}
		if err != syscall.EEXIST {
			return err
		}
	}
	return err
}

// scanFile is a file a search reads (openScan): a bare descriptor, with
// no *os.File around it.
type scanFile int

func (fd scanFile) Read(b []byte) (int, error) {
	n, err := retryInterrupted(func() (int, error) { return syscall.Read(int(fd), b) })
	switch {
	case err != nil:
		return 0, err
	case n == 0 && len(b) > 0:
		return 0, io.EOF
	}
	return n, nil
}

func (fd scanFile) Close() error { return syscall.Close(int(fd)) }

// openScan opens a file a search came across as openRegular would (only
// a regular file, never one of rpi's own stdio nor a file of /proc or
// /sys, and the open never blocks), and gives its size. It makes plain
// system calls: a search opens thousands of files, and an *os.File costs
// several calls more for each. A symlink is opened only once its target
// is known to be a regular file (opening a device can do things).
// fsKinds keeps fileSystemKind's answer for each device, so that it is
// asked once per file system, not for each file.
func openScan(path string, fsKinds map[uint64]string) (io.ReadCloser, int64, error) {
	const flags = syscall.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY | syscall.O_CLOEXEC
	fd, err := retryInterrupted(func() (int, error) { return syscall.Open(path, flags|syscall.O_NOFOLLOW, 0) })
	if err != nil { // a symlink (ELOOP, or EMLINK on some systems), or a failure openRegular tells apart
		return openRegularSized(path)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, 0, err
	}
	kind := ""
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		kind = "not a regular file"
	}
	for _, own := range ownStdio.get() {
		if own, ok := own.Sys().(*syscall.Stat_t); ok && own.Dev == st.Dev && own.Ino == st.Ino {
			kind = "rpi's own stdin, stdout or stderr"
		}
	}
	if kind == "" {
		var known bool
		if kind, known = fsKinds[uint64(st.Dev)]; !known {
			kind = fileSystemKind(fd)
			fsKinds[uint64(st.Dev)] = kind
		}
	}
	if kind != "" {
		syscall.Close(fd)
		return nil, 0, &errNotRegular{path, kind}
	}
	return scanFile(fd), st.Size, nil
}

// retryInterrupted calls call again while a signal interrupts it (EINTR),
// as package os does: on FUSE, NFS and CIFS, the runtime's own signals
// can interrupt an open or unlink.
func retryInterrupted(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		if err != syscall.EINTR {
			return n, err
		}
	}
}

// ---- Session file locks ----

// openLockable opens path to hold a lock on it: a regular file only,
// opened without blocking.
func openLockable(path string) (*os.File, error) { return openRegular(path, os.O_RDONLY, 0) }

// tryLock takes an exclusive advisory lock on f (flock), without waiting;
// false when another open file holds one (another rpi). Only rpi looks at
// the lock: reading and writing the file are not blocked.
func tryLock(f *os.File) (bool, error) {
	conn, err := f.SyscallConn()
	if err != nil {
		return false, err
	}
	var lockErr error
	if err := conn.Control(func(fd uintptr) {
		_, lockErr = retryInterrupted(func() (int, error) {
			return 0, syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
		})
	}); err != nil {
		return false, err
	}
	if lockErr == syscall.EWOULDBLOCK {
		return false, nil
	}
	return lockErr == nil, lockErr
}

// ---- The watchdog ----

// watchdogEnv, set in rpi's own environment, makes the binary the
// watchdog instead of rpi; its value is unused.
const watchdogEnv = "RPI_WATCHDOG"

// watchdog is a second copy of rpi that reads the process groups rpi
// starts (and its temp folder) from a pipe. When the pipe closes — rpi
// exited, however it died — it kills every group still listed and removes
// the folder. The kernel's parent-death signal only reaches direct
// children; this reaches their descendants too (all but those that left
// their group with setsid).
type watchdog struct {
	exe     string
	environ []string

	mu     mutex[watchdogMu] // guards the fields below
	cmd    *exec.Cmd
	pipe   *os.File
	failed bool
	closed bool // rpi has cleaned up: nothing starts it again
}

func newWatchdog(exe string, environ []string) *watchdog {
	return &watchdog{exe: exe, environ: environ}
}

// send writes one line to the watchdog, starting it first if need be. A
// watchdog that cannot start is reported once; rpi goes on without it. A
// line that forgets a group ("-pgid") starts none: with no watchdog
// running there is nothing to forget, as after close (a child's wait
// that ends after rpi's cleanup).
func (w *watchdog) send(line string, stderr io.Writer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.exe == "" || w.failed || w.closed || w.pipe == nil && strings.HasPrefix(line, "-") {
		return
	}
	if w.pipe == nil {
		r, pw, err := os.Pipe()
		if err == nil {
			cmd := exec.Command(w.exe)
			cmd.Env = append(w.environ, watchdogEnv+"=1", "GORACE=atexit_sleep_ms=0")
			cmd.Stdin = r
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			readyChildSignals()
			err = cmd.Start()
			r.Close()
			if err == nil {
				w.cmd, w.pipe = cmd, pw
			} else {
				pw.Close()
			}
		}
		if err != nil {
			w.failed = true
			fmt.Fprintf(stderr, "rpi: cannot start the watchdog (children may outlive a killed rpi): %v\n", err)
			return
		}
	}
	w.pipe.WriteString(line + "\n")
}

// pid is the watchdog's process id; 0 when it has not started.
func (w *watchdog) pid() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == nil {
		return 0
	}
	return w.cmd.Process.Pid
}

// close ends the watchdog: rpi has cleaned up itself.
func (w *watchdog) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.pipe != nil {
		w.pipe.Close()
		w.cmd.Wait()
		w.pipe, w.cmd = nil, nil
	}
}

// runWatchdog is the watchdog's main: "+pgid" adds a group, "-pgid"
// forgets one, "d/path" names the temp folder; at EOF it cleans up.
func runWatchdog(in io.Reader, _ string) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	groups := map[int]bool{}
	dir := ""
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		switch line[0] {
		case '+', '-':
			if pgid, err := strconv.Atoi(line[1:]); err == nil && pgid > 1 {
				groups[pgid] = line[0] == '+'
			}
		case 'd':
			dir = line[1:]
		}
	}
	for pgid, live := range groups {
		if live {
			killTree(pgid)
		}
	}
	if dir != "" && strings.HasPrefix(filepath.Base(dir), "rpi-") {
		os.RemoveAll(dir)
	}
	return 0
}

// homeVar names the user's home folder, as os.UserHomeDir reads it.
const homeVar = "HOME"

// listenUnixPrivate listens on a new unix socket at path that only rpi's
// user may connect to: it is made in a folder of its own that only that
// user may enter (mode 0700, beside path), made mode 0600 there, and only
// then moved to path, so it is never open to others, even for a moment.
// (Not by the umask: it is the process's, and a child another goroutine
// starts meanwhile would inherit it, and make files no one may run.)
func listenUnixPrivate(path string) (*net.UnixListener, error) {
	private, err := os.MkdirTemp(filepath.Dir(path), ".s") // a short name: a socket's path has a short limit
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(private)
	made := filepath.Join(private, "s")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: made, Net: "unix"})
	if err != nil {
		return nil, err
	}
	l.SetUnlinkOnClose(false)
	if err := os.Chmod(made, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	if err := os.Rename(made, path); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// checkSocketDir refuses a directory for the socket that another user
// owns, or that group or others may write to (they could replace the
// socket with their own).
func checkSocketDir(dir string) error {
	info, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("cannot use %s for the socket: %v", dir, err)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	switch {
	case !info.IsDir():
		return fmt.Errorf("cannot use %s for the socket: it is not a directory", dir)
	case ok && int(st.Uid) != os.Getuid():
		return fmt.Errorf("cannot use %s for the socket: it belongs to another user", dir)
	case info.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("cannot use %s for the socket: group or others may write to it (chmod go-w %s)", dir, dir)
	}
	return nil
}
