package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOrphansEndWithRPI: a process a command left out of its group and
// session (setsid) becomes rpi's when its parent ends (rpi is the child
// subreaper of its descendants), and rpi ends it when it ends itself —
// whether the command that started it had ended long before or still ran
// at the end of stdin. Before, it was init's, and ran on after rpi.
func TestOrphansEndWithRPI(t *testing.T) {
	endToEnd(t)
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid here")
	}
	for name, command := range map[string]string{
		"its command ended":     escapeCommand,
		"its command still ran": escapeCommand + "; sleep 300",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := startRPI(t, "rpc", "--cwd", t.TempDir(), "--no-session")
			p.next(t)
			line, _ := json.Marshal(map[string]string{"id": "b", "type": "bash", "command": command})
			p.send(t, string(line)+"\n")
			pid := 0
			for pid == 0 {
				rec := p.next(t)
				raw, _ := json.Marshal(rec)
				if m := regexp.MustCompile(`escaped (\d+)`).FindSubmatch(raw); m != nil {
					pid, _ = strconv.Atoi(string(m[1]))
				}
			}
			t.Cleanup(func() { killIfSleep(pid) }) // a failure leaves nothing behind
			p.stdin.Close()
			if code, _ := p.exit(t); code != 0 {
				t.Errorf("exit code %d (stderr: %s)", code, p.stderr.String())
			}
			for deadline := time.Now().Add(10 * time.Second); processAlive(pid); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the escaped sleep (pid %d) outlived rpi", pid)
				}
			}
		})
	}
}

// escapeCommand leaves a sleep behind in a session of its own and
// prints "escaped PID". It goes on only once the sleep is in its session
// and is a sleep (for up to 10 s): ending the shell's session before the
// sleep had left it would have killed it, and a test of what becomes of
// it would have passed without one.
const escapeCommand = `setsid sleep 300 </dev/null >/dev/null 2>&1 & p=$!
for i in $(seq 1000); do
	[ "$(cut -d' ' -f6 /proc/$p/stat)" = $p ] && [ "$(cat /proc/$p/comm)" = sleep ] && break
	sleep 0.01
done
echo escaped $p`

// killIfSleep SIGKILLs pid if it is still a sleep (not a process that
// took its pid over).
func killIfSleep(pid int) {
	if cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil && strings.HasPrefix(string(cmdline), "sleep\x00") {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestEndRoundsWithinItsGrace: rounds of ending what rpi adopted stop
// once their grace has passed even when every round finds another orphan
// and reaps it at once, as a process that starts another in a new
// session as fast as rpi kills makes them do. Before, the grace was
// looked at only while a reap waited, and such a chain held rpi's end
// for good. Each round kills all it found at once.
func TestEndRoundsWithinItsGrace(t *testing.T) {
	next, rounds := 1<<30, 0 // pids no process has: nothing is signalled
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		endRounds(10*time.Millisecond, func() []int { next++; return []int{next, next + 1} },
			func(pids []int) {
				if len(pids) != 2 {
					t.Errorf("a round killed %v, not both it found", pids)
				}
				rounds++
			},
			func(int) bool { return true })
	}()
	select {
	case <-ended:
	case <-time.After(time.Minute):
		t.Fatal("the rounds did not stop")
	}
	if rounds == 0 {
		t.Error("no round ran")
	}
}

// TestOrphansSpareAnUnreapedChild: when rpi's end gives up waiting for a
// child it started (one that outlived exitLimit), what it adopted is
// left alone: that child is os/exec's to wait for, and ending the orphans
// would have SIGKILLed and reaped it as one, so that its own wait found
// no process and killed its group by a pid that was no longer its. The
// helper is an rpi host in a process of its own (the test process's
// other children are other tests'), whose one child is never waited for
// until the host has ended.
func TestOrphansSpareAnUnreapedChild(t *testing.T) {
	endToEnd(t)
	e := newTestEnv(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(e.env().environ, "RPI_HELPER=orphans-gave-up", "RPI_TEST_CWD="+t.TempDir(), "GORACE=atexit_sleep_ms=0")
	out, err := cmd.Output()
	pid, _ := strconv.Atoi(strings.Fields(string(out) + " 0")[0])
	killIfSleep(pid) // a failure leaves nothing behind
	if err != nil || !strings.Contains(string(out), "waited for") {
		t.Errorf("%v: %s", err, out)
	}
}

func init() {
	helpers["orphans-gave-up"] = func([]string) {
		env := runEnv{getenv: os.Getenv, environ: os.Environ(), clock: realClock{}, tempDir: os.Getenv("TMPDIR"),
			maxLineBytes: maxLineBytes, executable: os.Args[0], adoptOrphans: adoptOrphans, endOrphans: endOrphans}
		cfg, _, err := parseArgs([]string{"rpc", "--cwd", os.Getenv("RPI_TEST_CWD"), "--no-session"}, env)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		h, err := newHost(cfg, env, os.Stderr)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		c, err := h.procs.start(exec.Command("sleep", "60"), childOptions{}, func(string, []byte) {})
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println(c.pid)
		h.shutdown(false) // gives up on the sleep after exitLimit
		alive := processAlive(c.pid)
		c.kill()
		if ps := c.wait(); ps == nil || !alive {
			fmt.Println("the sleep was ended and reaped by another than its wait")
			os.Exit(1)
		}
		fmt.Println("waited for")
	}
}

// TestAdoptedZombiesReaped: a process rpi adopted that exits while rpi
// runs is reaped at once (on SIGCHLD), not left a zombie until rpi ends
// (over a long rpi serve they piled up, each holding a process id) or
// until another child of rpi's ends: a command that stopped a daemon an
// earlier one left and waited for it to be gone (kill -0) waited for
// good, as a zombie answers kill -0.
func TestAdoptedZombiesReaped(t *testing.T) {
	endToEnd(t)
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid here")
	}
	p := startRPI(t, "rpc", "--cwd", t.TempDir(), "--no-session")
	p.next(t)
	bash := func(id, command string) string {
		line, _ := json.Marshal(map[string]string{"id": id, "type": "bash", "command": command})
		p.send(t, string(line)+"\n")
		raw, _ := json.Marshal(p.until(t, "response", id))
		return string(raw)
	}
	m := regexp.MustCompile(`escaped (\d+)`).FindStringSubmatch(bash("b1", escapeCommand))
	if m == nil {
		t.Fatal("no pid")
	}
	pid, _ := strconv.Atoi(m[1])
	t.Cleanup(func() { killIfSleep(pid) }) // a failure leaves nothing behind
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if parent, ok := parentOf(pid); ok && parent == p.cmd.Process.Pid {
			break // the sleep is rpi's, its shell ended
		}
		if time.Now().After(deadline) {
			t.Fatalf("the escaped sleep (pid %d) is not rpi's", pid)
		}
	}
	stop := fmt.Sprintf(`kill -9 %d; for i in $(seq 1000); do kill -0 %[1]d 2>/dev/null || break; sleep 0.01; done
kill -0 %[1]d 2>/dev/null && echo still there || echo gone`, pid)
	if answer := bash("b2", stop); !strings.Contains(answer, "gone") {
		t.Errorf("the daemon a command stopped was still there 10 s later (state %q): %s", processState(pid), answer)
	}
	p.stdin.Close()
	if code, _ := p.exit(t); code != 0 {
		t.Errorf("exit code %d (stderr: %s)", code, p.stderr.String())
	}
}

// processState is the state letter of process pid ("Z": a zombie), from
// /proc/<pid>/stat; "" when there is no such process.
func processState(pid int) string {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) == 0 {
		return ""
	}
	return fields[0]
}
