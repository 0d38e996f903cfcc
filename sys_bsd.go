//go:build unix && !linux

package main

import (
	"errors"
	"net"
	"os"
	"syscall"
)

// Where rpi has no PTY support (every Unix but Linux, for now), a process
// cannot ask for a terminal and get_capabilities says so.

const ptySupported = false

func openPTY(rows, cols int) (master, slave *os.File, err error) {
	return nil, nil, errors.New("tty:true needs Linux; this rpi was built for another system")
}

func setWindowSize(tty *os.File, rows, cols int) error { return errors.ErrUnsupported }

// pipeBuffered cannot tell here how many bytes wait in a pipe (-1).
func pipeBuffered(f *os.File) int64 { return -1 }

// growPipe does nothing where F_SETPIPE_SZ does not exist.
func growPipe(f *os.File) {}

// setParentDeathSignal: no such signal here; the watchdog still cleans up.
func setParentDeathSignal(attr *syscall.SysProcAttr) {}

// killSession has no portable way to find a session's members here; the
// process group is killed.
func killSession(sid int) {}

// adoptOrphans adopts nothing here (FreeBSD's procctl(PROC_REAP_ACQUIRE)
// is not used yet): what a command leaves out of its group and session
// is init's.
func adoptOrphans(reap func()) {}

// endOrphans has nothing adopted to end here.
func endOrphans(keep func(pid int) bool) {}

// reapAdopted has nothing adopted to reap here.
func reapAdopted(keep func(pid int) bool) {}

// waitUnreaped does not wait here: the child is reaped as it is waited
// for (child.wait).
func waitUnreaped(pid int) bool { return false }

// specialFileSystem: nothing to refuse beyond non-regular files here.
func specialFileSystem(f *os.File) string { return "" }

func fileSystemKind(fd int) string { return "" }

// hideOwnEnvironment: no such control here.
func hideOwnEnvironment() {}

// hideKeyArguments does nothing: these systems have no /proc/self/mem to
// write the command line's memory through, so a key given with --api-key
// stays visible to ps (docs/security.md says so).
func hideKeyArguments() error { return nil }

// hideVariables does nothing beyond os.Unsetenv (see hideKeyArguments).
func hideVariables(names []string) error { return nil }

// forgetOwnMemory: nothing was opened (see hideKeyArguments).
func forgetOwnMemory() {}

// peerIsOwner: these systems' peer credentials are not in Go's syscall
// package; the socket's mode (0600, in a directory only rpi's user may
// write to) keeps other users out.
func peerIsOwner(c *net.UnixConn) bool { return true }

// canCreateUnnamedIn is false: these systems have no unnamed files
// (O_TMPFILE), and only a named file made and removed tells whether dir
// takes new files.
func canCreateUnnamedIn(dir string) bool { return false }
