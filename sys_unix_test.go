//go:build unix

package main

import (
	"fmt"
	"os"
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
