package main

// What rpi does on Windows. The protocol, sessions, the agent and the file
// tools work as everywhere; bash is Git for Windows' bash.exe, found on
// PATH. What Windows cannot give a child the way Unix does is left out,
// and get_capabilities says so: no pseudo-terminals (tty:false), no
// signals but SIGINT (a CTRL_BREAK to the child's process group, which
// reaches it only when it shares rpi's console) and SIGKILL, no watchdog,
// and killing a child kills that process, not what it started.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// fallbackShell: without Git for Windows' bash.exe on PATH, running a
// command fails with exec's "executable file not found".
const fallbackShell = "bash"

// keyShell runs auth.json's and models.json's "!command" keys.
func keyShell() string { return findShell() }

// exitCode is rpi's exit code after a stop signal (§2).
func exitCode(sig os.Signal) int {
	if sig == os.Interrupt {
		return 130
	}
	return 0
}

// handledSignals are the signals watchSignals gives a handler.
var handledSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

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

// sysSignal is a signal as Go numbers it on Windows.
type sysSignal = syscall.Signal

// sigTerm asks a process to stop; on Windows that ends it.
const sigTerm = syscall.SIGTERM

// processSignals are the signals process_signal accepts here.
var processSignals = []string{"SIGINT", "SIGKILL"}

// signalNumbers maps the names rpi knows to Go's numbers.
var signalNumbers = map[string]syscall.Signal{
	"SIGINT": syscall.SIGINT, "SIGTERM": syscall.SIGTERM, "SIGKILL": syscall.SIGKILL,
}

var generateConsoleCtrlEvent = syscall.NewLazyDLL("kernel32.dll").NewProc("GenerateConsoleCtrlEvent")

// signalGroup interrupts the process group led by pid (SIGINT) or ends
// the process (SIGTERM, SIGKILL); a process already gone is not an error.
func signalGroup(pid int, sig syscall.Signal) error {
	switch sig {
	case syscall.SIGINT:
		if ok, _, err := generateConsoleCtrlEvent.Call(syscall.CTRL_BREAK_EVENT, uintptr(pid)); ok == 0 {
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

// processAlive reports whether a process with this pid exists.
func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}

// exitStatus reads a finished child's exit code; Windows has no signals
// to end a process by.
func exitStatus(ps *os.ProcessState) (code *int, signal syscall.Signal) {
	c := ps.ExitCode()
	return &c, 0
}

// ---- Files ----

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

// ---- What Windows does not have ----

// ptySupported: no pseudo-terminals; process_spawn with tty:true fails.
const ptySupported = false

func openPTY(rows, cols int) (master, slave *os.File, err error) {
	return nil, nil, errors.New("tty:true is not supported on Windows")
}

func setWindowSize(tty *os.File, rows, cols int) error { return errors.ErrUnsupported }

// specialFileSystem: no /proc or /sys to refuse.
func specialFileSystem(f *os.File) string { return "" }

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

// runWatchdog is never started on Windows.
func runWatchdog(in io.Reader, _ string) int { return 0 }
