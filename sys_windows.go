package main

// What rpi does on Windows. The protocol, sessions, the agent and the file
// tools work as everywhere; bash is Git for Windows' bash.exe (findBash),
// the agent folder %USERPROFILE%\.pi\agent. What Windows cannot give a
// child the way Unix does is left out, and get_capabilities says so: no
// pseudo-terminals (tty:false), no
// signals but SIGINT (a CTRL_BREAK to the child's process group, which
// reaches it only when it shares rpi's console) and SIGKILL, no watchdog,
// and killing a child kills that process, not what it started.

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"
)

// findShell finds Git for Windows' bash.exe (findBash).
func findShell() (string, error) { return findBash(os.Getenv) }

// keyShell runs auth.json's and models.json's "!command" keys.
func keyShell() (string, error) { return findShell() }

// findBash finds the bash.exe rpi runs: the first on PATH that is neither
// WSL's (%SystemRoot%\System32\bash.exe, which runs the command in a Linux
// distribution, if one is installed at all) nor the Microsoft Store's stub
// (in a WindowsApps folder); else Git for Windows' own, beside the git.exe
// found on PATH (its installer puts only Git\cmd there by default) or in
// its usual install folders. exec.LookPath would take the first bash on
// PATH, where System32 comes first. Without one, the error says what to
// install.
func findBash(getenv func(string) string) (string, error) {
	systemRoot := cmp.Or(getenv("SystemRoot"), `C:\Windows`)
	wsl := filepath.Join(systemRoot, "System32")
	var roots []string // Git for Windows' install folders, most likely first
	for _, dir := range filepath.SplitList(getenv("PATH")) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // exec.LookPath takes no relative PATH entry either
		}
		dir = filepath.Clean(dir)
		if strings.EqualFold(dir, wsl) || strings.EqualFold(filepath.Base(dir), "WindowsApps") {
			continue
		}
		if path := filepath.Join(dir, "bash.exe"); isRegularFile(path) {
			return path, nil
		}
		if isRegularFile(filepath.Join(dir, "git.exe")) { // Git\cmd, Git\bin or Git\mingw64\bin
			roots = append(roots, filepath.Dir(dir), filepath.Dir(filepath.Dir(dir)))
		}
	}
	for _, v := range []string{"ProgramW6432", "ProgramFiles", "ProgramFiles(x86)"} {
		if dir := getenv(v); dir != "" {
			roots = append(roots, filepath.Join(dir, "Git"))
		}
	}
	if dir := getenv("LOCALAPPDATA"); dir != "" {
		roots = append(roots, filepath.Join(dir, "Programs", "Git"))
	}
	for _, root := range roots {
		for _, path := range []string{filepath.Join(root, "bin", "bash.exe"), filepath.Join(root, "usr", "bin", "bash.exe")} {
			if isRegularFile(path) {
				return path, nil
			}
		}
	}
	return "", errors.New("no bash.exe found on PATH or where Git for Windows installs it: install Git for Windows " +
		"(https://gitforwindows.org), or put the folder of its bash.exe on PATH (WSL's bash.exe in System32 is not used)")
}

// exitCode is rpi's exit code after a stop signal (docs/protocol.md#launch).
func exitCode(sig os.Signal) int {
	if sig == os.Interrupt {
		return 130
	}
	return 0
}

// handledSignals are the signals watchSignals gives a handler.
var handledSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM}

// pageFaults is not counted here (-1): the startup trace shows times
// alone.
func pageFaults() int64 { return -1 }

// readyChildSignals has nothing to do: Windows children inherit no
// signal handling.
func readyChildSignals() {}

// readyLaterStopSignals has nothing to do: watchSignals handles every
// signal that ends rpi here.
func readyLaterStopSignals() {}

// watchSignals sends Ctrl+C, Ctrl+Break and the console's close to stop;
// ready is closed once that is set up.
func watchSignals(stop chan<- os.Signal) (ready <-chan struct{}) {
	signal.Notify(stop, handledSignals...)
	installed := make(chan struct{})
	close(installed)
	return installed
}

// startInGroup starts cmd in a new process group, so that a CTRL_BREAK
// can be sent to it alone. There is no PTY to attach.
func startInGroup(cmd *exec.Cmd, pty bool) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

// startDetached makes cmd start in a process group of its own, with no
// console: it outlives rpi (the rpi serve a bridge starts).
func startDetached(cmd *exec.Cmd) {
	const detachedProcess = 0x00000008 // DETACHED_PROCESS
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP | detachedProcess}
}

// sysSignal is a signal as Go numbers it on Windows.
type sysSignal = syscall.Signal

// sigTerm asks a process to stop; on Windows that ends it.
const sigTerm = syscall.SIGTERM

// processSignals are the signals process_signal accepts here.
var processSignals = []string{"SIGINT", "SIGKILL"}

// processSignalsJSON is processSignals as a JSON array, for the process
// tool's schema: a constant, so that the schema is one too and package
// init builds nothing (TestProcessSignalsJSON checks that they agree).
const processSignalsJSON = `["SIGINT","SIGKILL"]`

// signalNumbers are the names rpi knows and Go's numbers for them.
var signalNumbers = []namedSignal{{"SIGINT", syscall.SIGINT}, {"SIGTERM", syscall.SIGTERM}, {"SIGKILL", syscall.SIGKILL}}

// generateConsoleCtrlEvent is kernel32's GenerateConsoleCtrlEvent, looked
// up at first use (not in package init).
var generateConsoleCtrlEvent = lazy[*syscall.LazyProc]{build: func() *syscall.LazyProc {
	return syscall.NewLazyDLL("kernel32.dll").NewProc("GenerateConsoleCtrlEvent")
}}

// signalGroup interrupts the process group led by pid (SIGINT) or ends
// the process (SIGTERM, SIGKILL); a process already gone is not an error.
func signalGroup(pid int, sig syscall.Signal) error {
	switch sig {
	case syscall.SIGINT:
		if ok, _, err := generateConsoleCtrlEvent.get().Call(syscall.CTRL_BREAK_EVENT, uintptr(pid)); ok == 0 {
			return fmt.Errorf("cannot interrupt process %d: %v (a CTRL_BREAK reaches only a process that shares rpi's console)", pid, err)
		}
		return nil
	case syscall.SIGTERM, syscall.SIGKILL:
		p, err := os.FindProcess(pid)
		if err != nil {
			return nil
		}
		defer p.Release()
		if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return err
		}
		return nil
	}
	return fmt.Errorf("%s cannot be sent on Windows (only %v)", signalName(sig), processSignals)
}

// killTree ends the child; Windows gives no process group to kill with it.
func killTree(pid int) { signalGroup(pid, syscall.SIGKILL) }

// adoptOrphans adopts nothing on Windows: processes there have no
// parent to be adopted by.
func adoptOrphans(reap func()) {}

// endOrphans has nothing adopted to end on Windows.
func endOrphans(keep func(pid int) bool) {}

// reapAdopted has nothing adopted to reap on Windows.
func reapAdopted(keep func(pid int) bool) {}

// waitUnreaped does not wait on Windows: the child is waited for as it
// exits, and the wait closes its handle, so a kill after that goes by its
// id alone, which Windows may have given to another process (as before;
// a second handle would keep the id, untested here).
func waitUnreaped(pid int) bool { return false }

// processAlive reports whether a process with this pid exists.
func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}

// killedExitCode is the exit code of a child rpi killed: os.Process.Kill
// is TerminateProcess with exit code 1.
const killedExitCode = 1

// exitStatus reads a finished child's exit code; Windows has no signals
// to end a process by.
func exitStatus(ps *os.ProcessState) (code *int, signal syscall.Signal) {
	c := ps.ExitCode()
	return &c, 0
}

// ---- Files ----

// hardLinks is how many names a file has: os.Stat does not say on
// Windows, so 1.
func hardLinks(info os.FileInfo) uint64 { return 1 }

// ownedByUs: Windows's owners are not told here; every file counts as
// the user's.
func ownedByUs(info os.FileInfo) bool { return true }

// nonBlocking: opening a file does not block on Windows.
const nonBlocking = 0

// noFollow: Windows has no such flag; a symlink is looked for before the
// open (os.Lstat) instead.
const noFollow = 0

// removeWhileOpen: Windows refuses to remove a file rpi has open, so
// deleteSession lets go of it just before it removes it.
const removeWhileOpen = false

// openNonBlocking opens path: Windows has no FIFOs in its file system to
// block on.
func openNonBlocking(path string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(path, flag, perm)
}

// openScan opens a file a search came across (openRegular), and gives its
// size.
func openScan(path string, fsKinds map[uint64]string) (io.ReadCloser, int64, error) {
	return openRegularSized(path)
}

// canCreateIn proves that the folder dir can hold a new file by making
// one and removing it.
func canCreateIn(dir string) error {
	f, err := os.CreateTemp(dir, ".rpi-check-*")
	if err != nil {
		return unwrapPathError(err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// ---- Session file locks ----

// openLockable opens path to hold a lock on it, sharing it for reading,
// writing and deleting: while rpi holds it, the file can still be read,
// appended to, and replaced by a rename (which os.OpenFile's handles,
// without FILE_SHARE_DELETE, would prevent).
func openLockable(path string) (*os.File, error) {
	name, err := syscall.UTF16PtrFromString(path)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	h, err := syscall.CreateFile(name, syscall.GENERIC_READ,
		syscall.FILE_SHARE_READ|syscall.FILE_SHARE_WRITE|syscall.FILE_SHARE_DELETE, nil, syscall.OPEN_EXISTING, syscall.FILE_ATTRIBUTE_NORMAL, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(h), path), nil
}

// procLockFileEx is kernel32's LockFileEx, looked up at first use (not
// in package init).
var procLockFileEx = lazy[*syscall.LazyProc]{build: func() *syscall.LazyProc {
	return syscall.NewLazyDLL("kernel32.dll").NewProc("LockFileEx")
}}

// tryLock takes an exclusive lock on f without waiting (LockFileEx); false
// when another handle holds it (another rpi). Windows's locks are
// mandatory, so the byte locked lies far past the end of any session
// file: reading and writing the file are not blocked.
func tryLock(f *os.File) (bool, error) {
	const lockExclusive, failImmediately = 0x2, 0x1
	const errLockViolation = syscall.Errno(33) // ERROR_LOCK_VIOLATION
	ol := syscall.Overlapped{Offset: 0xFFFFFFFE, OffsetHigh: 0x7FFFFFFF}
	r, _, err := procLockFileEx.get().Call(f.Fd(), lockExclusive|failImmediately, 0, 1, 0, uintptr(unsafe.Pointer(&ol)))
	if r != 0 {
		return true, nil
	}
	if err == errLockViolation {
		return false, nil
	}
	return false, err
}

// hideKeyArguments does nothing: the command line Windows shows other
// processes of the same user is its own copy, which rpi cannot reach, so a
// key given with --api-key stays visible there (docs/security.md says so).
func hideKeyArguments() error { return nil }

// hideVariables does nothing beyond os.Unsetenv (see hideKeyArguments).
func hideVariables(names []string) error { return nil }

// ---- What Windows does not have ----

// ptySupported: no pseudo-terminals; process_spawn with tty:true fails.
const ptySupported = false

func openPTY(rows, cols int) (master, slave *os.File, err error) {
	return nil, nil, errors.New("tty:true is not supported on Windows")
}

func setWindowSize(tty *os.File, rows, cols int) error { return errors.ErrUnsupported }

// specialFileSystem: no /proc or /sys to refuse.
func specialFileSystem(f *os.File) string { return "" }

// pipeBuffered is not asked of Windows' pipes (-1: not known).
func pipeBuffered(f *os.File) int64 { return -1 }

// growPipe: pipe sizes are fixed at creation here.
func growPipe(f *os.File) {}

// hideOwnEnvironment: no such control here; a process of the same user
// may read rpi's memory, keys included.
func hideOwnEnvironment() {}

// watchdogEnv would make the binary the watchdog; there is none here.
const watchdogEnv = "RPI_WATCHDOG"

// watchdog does nothing on Windows: a child of a killed rpi lives on.
type watchdog struct{}

func newWatchdog(exe string, environ []string) *watchdog { return &watchdog{} }

func (w *watchdog) send(line string, stderr io.Writer) {}

func (w *watchdog) close() {}

// pid is 0: there is no watchdog on Windows.
func (w *watchdog) pid() int { return 0 }

// runWatchdog is never started on Windows.
func runWatchdog(in io.Reader, _ string) int { return 0 }

// forgetOwnMemory: nothing was opened (see hideKeyArguments).
func forgetOwnMemory() {}

// homeVar names the user's home folder, as os.UserHomeDir reads it.
const homeVar = "USERPROFILE"

// listenUnixPrivate listens on a unix socket at path; Windows gives it
// the directory's access rules.
func listenUnixPrivate(path string) (*net.UnixListener, error) {
	return net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
}

// checkSocketDir: Windows has no mode bits to check; the directory's
// access rules apply.
func checkSocketDir(dir string) error {
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return fmt.Errorf("cannot use %s for the socket: it is not a directory", dir)
	}
	return nil
}

// peerIsOwner: Windows gives no peer credentials on unix sockets; the
// directory's access rules keep other users out.
func peerIsOwner(c *net.UnixConn) bool { return true }
