package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
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

// pipeBuffered is how many bytes wait in the pipe (or terminal) f reads
// from: -1 when it cannot be known (f closed).
func pipeBuffered(f *os.File) int64 {
	var n int32
	if ioctl(f, syscall.TIOCINQ, unsafe.Pointer(&n)) != nil {
		return -1
	}
	return int64(n)
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

// killSession SIGKILLs every process whose session is sid, so jobs a
// shell moved to their own process groups die with the child that leads
// the session. It runs after every child and asks the session of every
// process on the machine: one getsid each, no file opened (reading
// /proc/<pid>/stat took three system calls and the kernel's formatting
// of the whole line).
func killSession(sid int) { killSessions(map[int]bool{sid: true}) }

// killSessions SIGKILLs every process whose session is one of sids but
// its leader, as killSession does, in one look through /proc — and again
// while a look finds one not killed before: a job that forks as fast as
// it can forks while it is killed, and a look has passed the new pid by
// then. A process that is SIGKILLed forks no more, so each look finds
// fewer; maxSessionLooks bounds them.
func killSessions(sids map[int]bool) {
	killed := map[int]string{} // dying ones stay listed, as zombies, for a while
	for range maxSessionLooks {
		if !killSessionsLook(sids, killed) {
			return
		}
	}
}

// killSessionsLook is one look of killSessions: it kills each process of
// sids (but their leaders) and says whether it found one not in killed,
// which holds each pid's start time. A pid killed, reaped and taken again
// by a process the job forked (a fork bomb takes every free pid) is that
// new process: killed again, and found when it started at another time
// (a start time counts clock ticks: one in the same tick is killed, not
// found). Only a zombie, dead already, is passed over.
func killSessionsLook(sids map[int]bool, killed map[int]string) (found bool) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || sids[pid] {
			continue
		}
		if s, ok := sessionOf(pid); !ok || !sids[s] {
			continue
		}
		start, seen := killed[pid]
		now, zombie := startTime(pid)
		if seen && start == now && zombie {
			continue
		}
		syscall.Kill(pid, syscall.SIGKILL)
		if !seen || start != now {
			killed[pid], found = now, true
		}
	}
	return found
}

// startTime is when process pid started (the 22nd field of
// /proc/<pid>/stat), as it is written there, and whether it is a zombie;
// "" when it is gone.
func startTime(pid int) (start string, zombie bool) {
	stat, err := readProcFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", true
	}
	if fields := statFields(stat); len(fields) > 19 {
		return fields[19], fields[0] == "Z" || fields[0] == "X"
	}
	return "", true
}

// maxSessionLooks is the most looks through /proc killSessions takes.
const maxSessionLooks = 100

// adoptOrphans makes rpi the child subreaper of its descendants
// (PR_SET_CHILD_SUBREAPER): a process whose parent ends — one a command
// left behind out of its process group and session, with setsid or a
// double fork — becomes rpi's child instead of init's, so that rpi finds
// it at its end (endOrphans). It runs once, before the first child starts;
// from then on each SIGCHLD calls reap, which reaps what was adopted and
// has exited (reapAdopted), so that it does not stay a zombie — one that
// answers kill -0, so that a command waiting for a daemon it stopped to be
// gone would wait for good.
func adoptOrphans(reap func()) {
	adoption.Do(func() {
		const prSetChildSubreaper = 36
		_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
		adopting = errno == 0
		if adopting {
			exits := make(chan os.Signal, 1) // signals that come during a reap make one more
			signal.Notify(exits, syscall.SIGCHLD)
			go guarded(nil, "waiting for SIGCHLD", func() {
				for range exits {
					guarded(nil, "reaping what rpi adopted", reap)() // a panic stops one reap, not the next
				}
			})()
		}
	})
}

var (
	adoption sync.Once
	adopting bool // rpi is the subreaper of its descendants (set once, by adoption)
)

// endOrphans ends, at rpi's end, what it adopted (adoptOrphans): once
// every child rpi started is reaped, its other children but those keep
// names (the watchdog) are processes its commands left behind. Each is
// SIGKILLed with its process group and session, and reaped; what they
// started becomes rpi's as they die, and goes the same way, round after
// round, for at most endOrphansGrace.
func endOrphans(keep func(pid int) bool) {
	adoption.Do(func() {}) // no child ever started: nothing was adopted
	if !adopting {
		return
	}
	endRounds(endOrphansGrace, func() []int { return childrenOf(os.Getpid(), keep) }, killOrphans, reapOrphan)
}

// endRounds kills what orphans lists and reaps each, round after round,
// until a round finds none or grace has passed: checked before each round
// too, so that a process that starts another in a new session as fast as
// rpi kills (each round finding one, reaped at once) does not hold rpi.
func endRounds(grace time.Duration, orphans func() []int, kill func([]int), reap func(int) bool) {
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		pids := orphans()
		if len(pids) == 0 {
			return
		}
		kill(pids)
		for _, pid := range pids {
			for !reap(pid) {
				if !time.Now().Before(deadline) {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
}

// killOrphans SIGKILLs each of pids with the group and the session it
// leads, if it does: one look through /proc for all the sessions, not
// one each (a thousand orphans on a busy machine took seconds).
func killOrphans(pids []int) {
	sids := map[int]bool{}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
		signalGroup(pid, syscall.SIGKILL)
		sids[pid] = true
	}
	killSessions(sids)
}

// reapAdopted reaps, while rpi runs, the processes it adopted that have
// exited, so that they do not stay zombies until its end: each child of
// rpi's threads (/proc/self/task/*/children) but those keep names, waited
// for without waiting (WNOHANG: one still running is left). keep is
// asked once the pid is found. A kernel that does not list children
// (no CONFIG_PROC_CHILDREN) leaves them to endOrphans.
func reapAdopted(keep func(pid int) bool) {
	adoption.Do(func() {}) // no child ever started: nothing was adopted
	if !adopting {
		return
	}
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		list, err := readProcFile("/proc/self/task/" + task.Name() + "/children")
		if err != nil {
			continue
		}
		for field := range strings.FieldsSeq(string(list)) {
			if pid, err := strconv.Atoi(field); err == nil && !keep(pid) {
				reapOrphan(pid)
			}
		}
	}
}

// reapOrphan reaps the adopted process pid if it has exited: true once
// it is gone (reaped now, or not rpi's child any more).
func reapOrphan(pid int) bool {
	var status syscall.WaitStatus
	got, err := syscall.Wait4(pid, &status, syscall.WNOHANG, nil)
	return got == pid || err != nil && err != syscall.EINTR
}

// childrenOf lists the processes whose parent is ppid, from each one's
// /proc/<pid>/stat, but those keep names. keep is asked once the parent
// is read: a child its owner started meanwhile (the watchdog, which holds
// its lock until it knows the pid) is known to it by then.
func childrenOf(ppid int, keep func(pid int) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var children []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if parent, ok := parentOf(pid); ok && parent == ppid && !keep(pid) {
			children = append(children, pid)
		}
	}
	return children
}

// parentOf is the parent of process pid, the field after the state that
// follows the command's name in parentheses in /proc/<pid>/stat; false
// when the process is gone.
func parentOf(pid int) (int, bool) {
	stat, err := readProcFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	fields := statFields(stat)
	if len(fields) < 2 {
		return 0, false
	}
	parent, err := strconv.Atoi(fields[1])
	return parent, err == nil
}

// statFields are the fields of a /proc/<pid>/stat line from the third
// on, after "pid (comm) ": the command's name may hold ")" and spaces
// itself, so it ends at the last ")". None when there is no ")".
func statFields(stat []byte) []string {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return nil
	}
	return strings.Fields(string(stat[end+1:]))
}

// waitUnreaped waits for the child pid to exit without reaping it
// (waitid with WNOWAIT): it stays a zombie, its pid and the group and
// session it leads its own, until it is waited for. False if the wait
// failed (the child is not rpi's to wait for).
func waitUnreaped(pid int) bool {
	const pPID = 1     // P_PID: idtype of one process
	var info [128]byte // a siginfo_t, not read
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info)),
			syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return errno == 0
		}
	}
}

// sessionOf is the session id of the process pid; false when there is no
// such process (gone already).
func sessionOf(pid int) (int, bool) {
	sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(pid), 0, 0)
	return int(sid), errno == 0
}

// procFSMagic and sysFSMagic are the statfs types of /proc and /sys.
const (
	procFSMagic = 0x9fa0
	sysFSMagic  = 0x62656572
)

// kernelUnderSys are the statfs types of the kernel's other file systems
// that are mounted under /sys: cgroup (v1, whose release_agent root's
// write makes the kernel run a program, and v2), debugfs, tracefs,
// securityfs, configfs, bpf, pstore, efivarfs, fusectl and selinuxfs.
var kernelUnderSys = [...]uint32{0x27e0eb, 0x63677270, 0x64626720, 0x74726163, 0x73636673, 0x62656570,
	0xcafe4a11, 0x6165676c, 0xde5e81e4, 0x65735543, 0xf97cff8c}

// binfmtMiscMagic is the statfs type of /proc/sys/fs/binfmt_misc, whose
// files say which program runs a kind of file.
const binfmtMiscMagic = 0x42494e4d

// specialFileSystem names the kernel file system f is on (/proc, /sys,
// and those mounted under them), or "": their "regular" files hold rpi's
// own environment and more, and writing them changes the system.
func specialFileSystem(f *os.File) string { return fileSystemKind(int(f.Fd())) }

// fileSystemKind is specialFileSystem of the file open as fd.
func fileSystemKind(fd int) string {
	var st syscall.Statfs_t
	if syscall.Fstatfs(fd, &st) != nil {
		return ""
	}
	switch {
	case st.Type == procFSMagic, st.Type == binfmtMiscMagic:
		return "a file of /proc"
	case st.Type == sysFSMagic, slices.Contains(kernelUnderSys[:], uint32(st.Type)):
		return "a file of /sys"
	}
	return ""
}

// hideOwnEnvironment makes rpi non-dumpable: no other process of the same
// user — its children included — can read /proc/<rpi>/environ (where the
// provider keys are) or attach to it. It first opens /proc/self/mem
// (ownMemory): once rpi is non-dumpable the kernel lets only root open
// that file, rpi's own included, and hideKeyArguments and hideVariables
// still have keys to overwrite through it. Plain descriptors, not
// *os.File: the first *os.File would start the runtime's poller, which
// startup does without.
func hideOwnEnvironment() {
	if fd, err := syscall.Open("/proc/self/mem", syscall.O_RDWR|syscall.O_CLOEXEC, 0); err == nil {
		ownMemory = fd
	}
	const prSetDumpable = 4
	syscall.Syscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0)
}

// ownMemory is the descriptor of /proc/self/mem opened while rpi could
// still open it (-1 when it could not, or in a process that never hid
// itself, such as the tests' in-process servers: overwriteOwn then opens
// it).
var ownMemory = -1

// forgetOwnMemory closes ownMemory once nothing is left to overwrite.
func forgetOwnMemory() {
	if ownMemory >= 0 {
		syscall.Close(ownMemory)
		ownMemory = -1
	}
}

// hideKeyArguments overwrites with '*' the keys on rpi's command line
// (keyArguments) in the memory the kernel shows as /proc/<rpi>/cmdline,
// which every process of every user may read, non-dumpable or not. rpi
// parses a copy of its arguments. The memory is written through
// /proc/self/mem at the addresses /proc/self/stat gives, so what is
// written is exactly what the kernel shows.
func hideKeyArguments() error {
	if len(keyArguments(os.Args)) == 0 {
		return nil // nothing to overwrite: no need to read /proc
	}
	return overwriteOwn(argStartField, func(data []byte) (ranges [][2]int) {
		args := strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
		offsets := make([]int, len(args))
		for i := 1; i < len(args); i++ {
			offsets[i] = offsets[i-1] + len(args[i-1]) + 1
		}
		for i, from := range keyArguments(args) {
			ranges = append(ranges, [2]int{offsets[i] + from, offsets[i] + len(args[i])})
		}
		return ranges
	})
}

// hideVariables overwrites with '*' the values of the named variables in
// the memory the kernel shows as /proc/<rpi>/environ (os.Unsetenv changes
// only the runtime's copy), so that not even a process allowed to read
// that file (root) finds the keys there.
func hideVariables(names []string) error {
	return overwriteOwn(envStartField, func(data []byte) (ranges [][2]int) {
		at := 0
		for _, kv := range strings.Split(string(data), "\x00") {
			if name, value, ok := strings.Cut(kv, "="); ok && slices.Contains(names, name) && value != "" {
				ranges = append(ranges, [2]int{at + len(name) + 1, at + len(kv)})
			}
			at += len(kv) + 1
		}
		return ranges
	})
}

// The fields of /proc/self/stat (counted from 1) where the command line's
// and the environment's addresses begin: start, then end.
const (
	argStartField = 48
	envStartField = 50
)

// overwriteOwn reads the range of rpi's memory that /proc/self/stat's
// fields startField and startField+1 give, and writes '*' over the byte
// ranges pick finds in it.
func overwriteOwn(startField int, pick func(data []byte) [][2]int) error {
	stat, err := readProcFile("/proc/self/stat")
	if err != nil {
		return err
	}
	fields := statFields(stat)
	if len(fields) < startField-1 {
		return fmt.Errorf("/proc/self/stat has %d fields", len(fields)+2)
	}
	start, err1 := strconv.ParseInt(fields[startField-3], 10, 64)
	end, err2 := strconv.ParseInt(fields[startField-2], 10, 64)
	if err1 != nil || err2 != nil || start <= 0 || end <= start || end-start > 1<<24 {
		return fmt.Errorf("/proc/self/stat gives no usable addresses (%s, %s)", fields[startField-3], fields[startField-2])
	}
	mem := ownMemory
	if mem < 0 {
		if mem, err = syscall.Open("/proc/self/mem", syscall.O_RDWR|syscall.O_CLOEXEC, 0); err != nil {
			return &os.PathError{Op: "open", Path: "/proc/self/mem", Err: err}
		}
		defer syscall.Close(mem)
	}
	data := make([]byte, end-start)
	if n, err := syscall.Pread(mem, data, start); err != nil || n != len(data) {
		return fmt.Errorf("read /proc/self/mem: %d of %d bytes (%v)", n, len(data), err)
	}
	for _, r := range pick(data) {
		stars := bytes.Repeat([]byte("*"), r[1]-r[0])
		if n, err := syscall.Pwrite(mem, stars, start+int64(r[0])); err != nil || n != len(stars) {
			return fmt.Errorf("write /proc/self/mem: %d of %d bytes (%v)", n, len(stars), err)
		}
	}
	return nil
}

// readProcFile reads a small file of /proc whole through a plain
// descriptor (see hideOwnEnvironment).
func readProcFile(path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	var data []byte
	buf := make([]byte, 4096)
	for {
		n, err := retryInterrupted(func() (int, error) { return syscall.Read(fd, buf) })
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n <= 0 {
			return data, nil
		}
		data = append(data, buf[:n]...)
	}
}

// peerIsOwner reports whether the process at the other end of c runs as
// rpi's user, or as root (its credentials, SO_PEERCRED).
func peerIsOwner(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return false
	}
	return cred.Uid == 0 || int(cred.Uid) == os.Getuid()
}

// canCreateUnnamedIn reports whether dir takes an unnamed file (open
// with O_TMPFILE), made and closed, which removes it: a create that
// leaves no name in dir, not even for a moment, and costs less than a
// named file made and removed. Any refusal is false, not an answer:
// where the kernel or the file system has no unnamed files, or refuses
// them for a reason of its own (a security module, a sandbox's filter),
// a named file tells.
func canCreateUnnamedIn(dir string) bool {
	const oTmpfile = 0x400000 | syscall.O_DIRECTORY // O_TMPFILE, which package syscall lacks
	fd, err := retryInterrupted(func() (int, error) {
		return syscall.Open(dir, oTmpfile|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o600)
	})
	if err != nil {
		return false
	}
	syscall.Close(fd)
	return true
}
