//go:build unix

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// mkfifo makes a named pipe, for tests of files that are not regular.
func mkfifo(path string, mode uint32) error { return syscall.Mkfifo(path, mode) }

// TestEndToEndChildSignalsAtFirstChild: before its first child, rpi
// handles only the signals that end it, with SIGPIPE ignored (each
// handler costs startup time); its first child's start gives SIGPIPE,
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
