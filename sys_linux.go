package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// Linux-only parts of process handling: pseudo-terminals, pipe sizes and
// the parent-death signal.

// setParentDeathSignal makes the kernel SIGKILL a child when rpi dies.
func setParentDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }

// ptySupported says whether process_spawn can give a process a terminal.
const ptySupported = true

// openPTY opens a new pseudo-terminal pair with the standard library only:
// /dev/ptmx, unlocked and named with ioctl, and a rows×cols window.
func openPTY(rows, cols int) (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	fail := func(what string, err error) (*os.File, *os.File, error) {
		master.Close()
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	var unlock int32
	if err := ioctl(master, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		return fail("unlock pty", err)
	}
	var n uint32
	if err := ioctl(master, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		return fail("name pty", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fail("open pty slave", err)
	}
	if err := setWindowSize(slave, rows, cols); err != nil {
		slave.Close()
		return fail("set pty window size", err)
	}
	return master, slave, nil
}

// setWindowSize sets a terminal's size; the kernel tells its foreground
// process group with SIGWINCH.
func setWindowSize(tty *os.File, rows, cols int) error {
	size := struct{ rows, cols, xpixel, ypixel uint16 }{uint16(rows), uint16(cols), 0, 0}
	return ioctl(tty, syscall.TIOCSWINSZ, unsafe.Pointer(&size))
}

// growPipe asks for a 1 MiB pipe buffer (Linux F_SETPIPE_SZ), so a child
// that floods its output wakes rpi far less often. It is only a hint.
func growPipe(f *os.File) {
	const setPipeSize = 1031 // F_SETPIPE_SZ
	if conn, err := f.SyscallConn(); err == nil {
		conn.Control(func(fd uintptr) {
			syscall.Syscall(syscall.SYS_FCNTL, fd, setPipeSize, 1<<20)
		})
	}
}

func ioctl(f *os.File, request uintptr, arg unsafe.Pointer) error {
	conn, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	err = conn.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, request, uintptr(arg))
	})
	if err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}

// killSession SIGKILLs every process whose session is sid (read from
// /proc/*/stat), so jobs a shell moved to their own process groups die
// with the child that leads the session.
func killSession(sid int) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == sid {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// After "pid (comm) ": state ppid pgrp session …
		fields := bytes.Fields(stat[bytes.LastIndexByte(stat, ')')+1:])
		if len(fields) > 3 {
			if s, err := strconv.Atoi(string(fields[3])); err == nil && s == sid {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// procFSMagic and sysFSMagic are the statfs types of /proc and /sys.
const (
	procFSMagic = 0x9fa0
	sysFSMagic  = 0x62656572
)

// specialFileSystem names the kernel file system f is on (/proc, /sys),
// or "": their "regular" files hold rpi's own environment and more.
func specialFileSystem(f *os.File) string { return fileSystemKind(int(f.Fd())) }

// fileSystemKind is specialFileSystem of the file open as fd.
func fileSystemKind(fd int) string {
	var st syscall.Statfs_t
	if syscall.Fstatfs(fd, &st) != nil {
		return ""
	}
	switch st.Type {
	case procFSMagic:
		return "a file of /proc"
	case sysFSMagic:
		return "a file of /sys"
	}
	return ""
}

// hideOwnEnvironment makes rpi non-dumpable: no other process of the same
// user — its children included — can read /proc/<rpi>/environ (where the
// provider keys are) or attach to it.
func hideOwnEnvironment() {
	const prSetDumpable = 4
	syscall.Syscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0)
}
