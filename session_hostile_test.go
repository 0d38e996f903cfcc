package main

// Session files from anywhere (a shared folder, a download, a
// repository) opened by rpi: what such a file, or what lies beside it,
// can make rpi do.

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestClaimThroughASymlinkIsRefused: the claim a new session with a
// --session-id makes in a --session-dir (.ID.HASH.claim) is rpi's own
// file, opened with O_CREATE. A symlink planted at its name by someone
// who can write in that folder led rpi to make an empty file wherever it
// pointed, and to lock the file it named. Now the claim is refused, and
// nothing is made through it.
func TestClaimThroughASymlinkIsRefused(t *testing.T) {
	e := newTestEnv(t)
	cwd, elsewhere, sessions := t.TempDir(), t.TempDir(), t.TempDir()
	const id = "shared-session"
	sum := sha256.Sum256([]byte(cwd))
	claim := filepath.Join(sessions, "."+id+"."+hex.EncodeToString(sum[:8])+".claim")
	planted := filepath.Join(elsewhere, "made-through-the-link")
	if err := os.Symlink(planted, claim); err != nil {
		t.Skip("no symlinks here:", err)
	}
	var out strings.Builder
	code := runRPI(t, e, []string{"rpc", "--cwd", cwd, "--session-dir", sessions, "--session-id", id}, strings.NewReader(`{"id":"s","type":"get_state"}`+"\n"), &out)
	if _, err := os.Lstat(planted); err == nil {
		t.Errorf("a file was made where the planted claim %s leads", claim)
	}
	want := "Cannot claim session id '" + id + "' in " + sessions + ": " + claim + " is a symbolic link"
	if code == 0 || !strings.Contains(out.String(), want) {
		t.Errorf("exit %d, want an init error saying %q:\n%s", code, want, out.String())
	}
	if info, err := os.Lstat(claim); err != nil || info.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the planted link is not left as it was: %v", err)
	}
}

// TestLongSessionIDLeftOutOfTheEnvironment: the model's bash gets the
// session's id as PI_SESSION_ID, and a session file's header may hold
// any id. One longer than an environment variable may be (Linux takes
// 128 KiB, Windows 32 KiB) made every command the model ran fail to
// start ("argument list too long"), as a NUL in it would have; it is
// left out as that one is.
func TestLongSessionIDLeftOutOfTheEnvironment(t *testing.T) {
	endToEnd(t)
	id := strings.Repeat("i", 200<<10)
	path := filepath.Join(t.TempDir(), "long-id.jsonl")
	os.WriteFile(path, []byte(`{"type":"session","version":3,"id":"`+id+`","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}`+"\n"+
		`{"type":"message","id":"a1","parentId":null,"timestamp":"2026-03-16T09:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}`+"\n"), 0o644)
	ps, _, _ := agentSession(t, apiOpenAI, `{"toolCalls":[{"id":"call_1","name":"bash","args":["{\"command\":\"echo id=${#PI_SESSION_ID} file=${#PI_SESSION_FILE}\"}"]}]}
{"text":["done"]}`)
	ps.send(`{"id":"sw","type":"switch_session","sessionPath":"` + path + `"}`)
	ps.waitFor(`"id":"sw"`)
	ps.send(`{"id":"p","type":"prompt","message":"go"}`)
	ps.waitFor(`"agent_settled"`)
	ps.close()
	want := `"text":"id=0 file=` + strconv.Itoa(len(path)) + `\n"`
	if !strings.Contains(string(ps.out.bytes()), want) {
		t.Errorf("the model's bash with a session id of 200 KiB: want %s in:\n%.3000s", want, toolEnds(ps.out.bytes()))
	}
}

// toolEnds are the tool_execution_end events of out.
func toolEnds(out []byte) string {
	var ends []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, `"tool_execution_end"`) {
			ends = append(ends, line)
		}
	}
	return strings.Join(ends, "\n")
}

// TestBranchAllocatesItsPathOnly: a session's branch (walked to make its
// context on opening, before a compaction, a fork, a clone) checked each
// entry in a map as long as the chain, so a session of a million entries
// made and threw away about 50 MB on each walk. Now it makes the path
// alone.
func TestBranchAllocatesItsPathOnly(t *testing.T) {
	const n = 100_000
	ss := newSessionFile(time.Now(), "", "/x", "", "", "", true)
	for range n {
		ss.add(time.Now(), "session_info", []entryField{{"name", "x"}})
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	path := ss.branch(ss.leaf)
	runtime.ReadMemStats(&after)
	if len(path) != n {
		t.Fatalf("a branch of %d entries, want %d", len(path), n)
	}
	// The path's slice: n pointers, and little else.
	if got, most := after.TotalAlloc-before.TotalAlloc, uint64(n*8+4096); got > most {
		t.Errorf("walking a branch of %d entries allocated %d bytes, want at most %d", n, got, most)
	}
}
