package main

// Session files from anywhere (a shared folder, a download, a
// repository) opened by rpi: what such a file, or what lies beside it,
// can make rpi do.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

// TestVersion1FileOfTinyEntries: a version 1 file has no ids, so its
// entries can be 13 bytes each ({"type":"a"}). Migrating them decoded
// each line into a map and encoded it again by reflection: opening such
// a file allocated about 106 times its size (a 100 MiB download, 10 GiB)
// and held 19 times it. Now each migrated line is the line with its id
// and parentId added.
func TestVersion1FileOfTinyEntries(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"type":"session","id":"v1","timestamp":"t","cwd":"/x"}` + "\n")
	for b.Len() < 4<<20 {
		b.WriteString(`{"type":"a"}` + "\n")
	}
	path := filepath.Join(t.TempDir(), "v1.jsonl")
	os.WriteFile(path, []byte(b.String()), 0o644)
	size := float64(b.Len())
	b.Reset()
	runtime.GC()
	var before, after, live runtime.MemStats
	runtime.ReadMemStats(&before)
	ss, err := loadSessionFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ss.context() // as opening it makes its context
	runtime.ReadMemStats(&after)
	runtime.GC()
	runtime.ReadMemStats(&live)
	allocated, held := float64(after.TotalAlloc-before.TotalAlloc)/size, float64(int64(live.HeapAlloc)-int64(before.HeapAlloc))/size
	// Each entry holds about 235 bytes, whatever its line's size (the
	// entry, its line with an id and parentId added, its place in byID):
	// 18 times a 13-byte line. A version 3 file's least entries
	// ({"type":"a","id":"1"} and on) hold 8 times their size.
	if allocated > 40 || held > 20 {
		t.Errorf("opening %.0f bytes of version 1 entries allocated %.1f times that, and holds %.1f times it", size, allocated, held)
	}
	first, second := ss.entries[0], ss.entries[1]
	if first.ParentID != nil || second.ParentID == nil || *second.ParentID != first.ID || len(second.ID) != 8 {
		t.Errorf("the entries are not chained: %s, %s", first.line(), second.line())
	}
	if line := string(second.line()); line != `{"type":"a","id":"`+second.ID+`","parentId":"`+first.ID+`"}` {
		t.Errorf("a migrated line: %s", line)
	}
	runtime.KeepAlive(ss)
	// An id or parent a version 1 line gives is not pi's to keep: the
	// first entry is the root, each other hangs under the one before
	// (rpi took a first line's parentId, and refused the file as a loop
	// when a later line had that id).
	os.WriteFile(path, []byte(`{"type":"session","id":"v1","timestamp":"t","cwd":"/x"}`+"\n"+
		`{"type":"a","parentId":"b"}`+"\n"+`{"type":"a","id":"b"}`+"\n"), 0o644)
	if ss, err := loadSessionFile(context.Background(), path); err != nil {
		t.Error(err)
	} else if first, second := ss.entries[0], ss.entries[1]; first.ParentID != nil || second.ID != "b" || *second.ParentID != first.ID {
		t.Errorf("the entries are not chained: %s, %s", first.line(), second.line())
	}
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

// writeOneMessageSession writes a session file with the id id holding a
// thinking level and a user message: rpi adds no entry as it opens it.
func writeOneMessageSession(t *testing.T, path, id string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(`{"type":"session","version":3,"id":"`+id+`","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}`+"\n"+
		`{"type":"thinking_level_change","id":"a0","parentId":null,"timestamp":"2026-03-16T09:00:00.000Z","thinkingLevel":"off"}`+"\n"+
		`{"type":"message","id":"a1","parentId":"a0","timestamp":"2026-03-16T09:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSessionFileEmptiedWhileOpen: another program empties the session
// file while rpi has it open (`: > file`, an editor's truncate), or cuts
// it inside its header line. rpi appended its next entry to what was
// left, a file with no header that nothing opens again (pi refuses it,
// as rpi does); it writes the file again from memory instead, as it does
// when the file vanishes, and says so.
func TestSessionFileEmptiedWhileOpen(t *testing.T) {
	for name, keep := range map[string]int64{"emptied": 0, "cut in its header": 10} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.jsonl")
			writeOneMessageSession(t, path, "1a2b3c4d-0000-4000-8000-000000000001")
			ps := startSessionIn(t, newTestEnv(t), []string{"rpc", "--cwd", t.TempDir(), "--session", path})
			ps.send(`{"id":"s","type":"get_state"}`)
			ps.waitFor(`"id":"s"`)
			if err := os.Truncate(path, keep); err != nil {
				t.Fatal(err)
			}
			ps.send(`{"id":"n","type":"set_session_name","name":"after"}`)
			ps.waitFor(`"id":"n"`)
			ps.close()
			ss, err := loadSessionFile(context.Background(), path)
			if err != nil {
				data, _ := os.ReadFile(path)
				t.Fatalf("the file cannot be opened again: %v\n%s", err, data)
			}
			if sc := ss.context(); sc.name != "after" || len(sc.messages) != 1 {
				t.Errorf("the file holds the name %q and %d messages, want the name and the message", sc.name, len(sc.messages))
			}
			if !bytes.Contains(ps.out.bytes(), []byte(`"message":"Cannot append to the session file `+path)) {
				t.Errorf("the client was not told:\n%s", ps.out.bytes())
			}
		})
	}
}

// TestSessionFileSwappedWhileOpen: the session file is replaced while
// rpi has it open (renamed over by an editor; here a hard link) with a
// file another rpi holds (a symlink put there is not followed at all:
// TestSessionFileSwappedForASymlinkWhileOpen). rpi kept its hold on the file it had
// read, so its next entry went into the other rpi's file, which two rpis
// then wrote at once: each chaining entries to its own last one, the
// other's lost on the next load. Before each append rpi now makes sure
// it holds the file at the path: here it cannot, so nothing of it goes
// into the other's file, and the client is told.
func TestSessionFileSwappedWhileOpen(t *testing.T) {
	dir := t.TempDir()
	mine, theirs := filepath.Join(dir, "mine.jsonl"), filepath.Join(dir, "theirs.jsonl")
	writeOneMessageSession(t, mine, "1a2b3c4d-0000-4000-8000-000000000000")
	writeOneMessageSession(t, theirs, "1a2b3c4d-0000-4000-8000-000000000001")
	other := startSessionIn(t, newTestEnv(t), []string{"rpc", "--cwd", t.TempDir(), "--session", theirs})
	other.send(`{"id":"s","type":"get_state"}`)
	other.waitFor(`"id":"s"`)
	before, _ := os.ReadFile(theirs)
	ps := startSessionIn(t, newTestEnv(t), []string{"rpc", "--cwd", t.TempDir(), "--session", mine})
	ps.send(`{"id":"s","type":"get_state"}`)
	ps.waitFor(`"id":"s"`)
	os.Remove(mine)
	if err := os.Link(theirs, mine); err != nil {
		t.Skip("no hard links here:", err)
	}
	ps.send(`{"id":"n","type":"set_session_name","name":"mine"}`)
	ps.waitFor(`"id":"n"`)
	ps.waitFor("Cannot write the session file " + mine + ": Session file " + mine + " is in use by another rpi process")
	ps.close()
	other.close()
	if after, _ := os.ReadFile(theirs); !bytes.Equal(before, after) {
		t.Errorf("the file another rpi holds was written:\n%s", after)
	}
}

// TestSessionFileSwappedForASymlinkWhileOpen: someone else who may write
// in the session folder (a shared --session-dir) swaps the session file
// rpi has open for a symlink to a file of theirs choosing (~/.bashrc).
// rpi followed it: its next entry was appended to that file, and a file
// written whole (a version 2 file brought to version 3) replaced it. A
// path that was a regular file when the session was opened is not
// written through a symlink put there since: nothing is appended or
// written where it leads, the link stays, and the client is told as of
// any other write that fails. (A file given as a symlink is written where
// it leads: TestSymlinkedSessionFileStaysALink.)
func TestSessionFileSwappedForASymlinkWhileOpen(t *testing.T) {
	v2, err := os.ReadFile("testdata/sessions/pi-v2.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, whole := range []bool{false, true} {
		name := map[bool]string{false: "an append", true: "a file written whole"}[whole]
		t.Run(name, func(t *testing.T) {
			e, dir := newTestEnv(t), t.TempDir()
			startFakeModel(t, apiOpenAI, `{"text":["hello"]}`, e.agentDir)
			path, target := filepath.Join(dir, "s.jsonl"), filepath.Join(t.TempDir(), "bashrc")
			if whole {
				os.WriteFile(path, v2, 0o644)
			} else {
				writeOneMessageSession(t, path, "1a2b3c4d-0000-4000-8000-000000000001")
			}
			const kept = "alias ls='ls --color'\n"
			os.WriteFile(target, []byte(kept), 0o644)
			ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir(), "--session", path})
			ps.send(`{"id":"s","type":"get_state"}`)
			ps.waitFor(`"id":"s"`)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, path); err != nil {
				t.Skip("no symlinks here:", err)
			}
			if whole {
				ps.send(`{"id":"p","type":"prompt","message":"through the link"}`)
				ps.waitFor(`"type":"agent_settled"`)
			} else {
				ps.send(`{"id":"n","type":"set_session_name","name":"through the link"}`)
				ps.waitFor(`"id":"n"`)
			}
			quoted, _ := json.Marshal(path)
			inJSON := string(quoted[1 : len(quoted)-1])
			ps.waitFor(`"message":"Cannot write the session file ` + inJSON + `: it was swapped for a symbolic link while the session was open`)
			ps.send(`{"id":"p2","type":"prompt","message":"again"}`)
			ps.waitFor(`"id":"p2"`)
			ps.close()
			if data, _ := os.ReadFile(target); string(data) != kept {
				t.Errorf("the file the planted link leads to was written:\n%s", data)
			}
			if info, err := os.Lstat(path); err != nil || info.Mode()&os.ModeSymlink == 0 {
				t.Errorf("the planted link is gone: %v", err)
			}
			if !bytes.Contains(ps.out.bytes(), []byte(`"id":"p2","type":"response","command":"prompt","success":false,"error":"Cannot write the session file `+inJSON+`: it was swapped`)) {
				t.Errorf("a prompt did not fail while the file cannot be written:\n%s", ps.out.bytes())
			}
		})
	}
}

// TestSessionIDAmongPlantedFiles: --session-id ID (or --session ID) in a shared
// --session-dir opens the file whose header has that id and names the
// working directory. Someone else who may write there put a file
// claiming the same id and folder, named to sort first: rpi opened it,
// its conversation (of the planter's writing) the session's, and wrote
// the user's next prompts into the planter's file. Two files that claim
// one id are refused, named, rather than one picked; a file named for
// another session ("<timestamp>_OTHER.jsonl") is no match for the id its
// header claims.
func TestSessionIDAmongPlantedFiles(t *testing.T) {
	const id, other = "1a2b3c4d-0000-4000-8000-0000000000aa", "1a2b3c4d-0000-4000-8000-0000000000bb"
	for _, run := range []struct{ flag, plantedName string }{
		{"--session-id", "2026-03-16T08-00-00-000Z_" + id + ".jsonl"},
		{"--session-id", "2026-03-16T08-00-00-000Z_" + other + ".jsonl"},
		{"--session", "2026-03-16T08-00-00-000Z_" + id + ".jsonl"},
		{"--session", "2026-03-16T08-00-00-000Z_" + other + ".jsonl"},
	} {
		plantedName := run.plantedName
		t.Run(run.flag+" "+plantedName, func(t *testing.T) {
			e, cwd, dir := newTestEnv(t), t.TempDir(), t.TempDir()
			own, planted := filepath.Join(dir, "2026-03-16T09-00-00-000Z_"+id+".jsonl"), filepath.Join(dir, plantedName)
			for path, text := range map[string]string{own: "my own question", planted: "a planted question"} {
				os.WriteFile(path, []byte(`{"type":"session","version":3,"id":"`+id+`","timestamp":"2026-03-16T09:00:00.000Z","cwd":"`+cwd+`"}`+"\n"+
					`{"type":"message","id":"a1","parentId":null,"timestamp":"2026-03-16T09:00:01.000Z","message":{"role":"user","content":"`+text+`","timestamp":1}}`+"\n"), 0o644)
			}
			var out strings.Builder
			later := time.Now().Add(time.Hour) // the planted file is the newest too
			os.Chtimes(planted, later, later)
			code := runRPI(t, e, []string{"rpc", "--cwd", cwd, "--session-dir", dir, run.flag, id}, strings.NewReader(`{"id":"m","type":"get_messages"}`+"\n"), &out)
			if strings.Contains(plantedName, other) {
				if code != 0 || !strings.Contains(out.String(), "my own question") {
					t.Errorf("exit %d, want the session's own file opened:\n%s", code, out.String())
				}
				return
			}
			want := "Session " + id + " is claimed by several session files: " + planted + ", " + own
			if code == 0 || !strings.Contains(out.String(), want) {
				t.Errorf("exit %d, want an init error saying %q:\n%s", code, want, out.String())
			}
		})
	}
}

// TestSessionLinkRetargetedWhileOpen: a session file given as a symbolic
// link (written where it leads: TestSymlinkedSessionFileStaysALink) whose
// link someone else who may write in its folder makes lead elsewhere
// while the session is open (to ~/.bashrc) is written there no more:
// rpi appended its next entries to whatever the link led to by then.
func TestSessionLinkRetargetedWhileOpen(t *testing.T) {
	e, dir := newTestEnv(t), t.TempDir()
	startFakeModel(t, apiOpenAI, `{"text":["hello"]}`, e.agentDir)
	real, link, target := filepath.Join(dir, "real.jsonl"), filepath.Join(dir, "link.jsonl"), filepath.Join(t.TempDir(), "bashrc")
	writeOneMessageSession(t, real, "1a2b3c4d-0000-4000-8000-000000000002")
	if err := os.Symlink(real, link); err != nil {
		t.Skip("no symlinks here:", err)
	}
	const kept = "alias ls='ls --color'\n"
	os.WriteFile(target, []byte(kept), 0o644)
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir(), "--session", link})
	ps.send(`{"id":"s","type":"get_state"}`)
	ps.waitFor(`"id":"s"`)
	os.Remove(link)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	ps.send(`{"id":"n","type":"set_session_name","name":"through the link"}`)
	ps.waitFor(`"id":"n"`)
	quoted, _ := json.Marshal(link)
	ps.waitFor(`"message":"Cannot write the session file ` + string(quoted[1:len(quoted)-1]) + `: its symbolic link was made to lead elsewhere`)
	ps.close()
	if data, _ := os.ReadFile(target); string(data) != kept {
		t.Errorf("the file the retargeted link leads to was written:\n%s", data)
	}
}

// TestSessionLinkAppendedWhereItLed: an entry of a session given as a
// link goes to the file the link led to when the session opened, and the
// open follows no link: a link made to lead elsewhere after
// linkedSince's check (between it and the open) is not written through.
func TestSessionLinkAppendedWhereItLed(t *testing.T) {
	dir := t.TempDir()
	real, link, other := filepath.Join(dir, "real.jsonl"), filepath.Join(dir, "link.jsonl"), filepath.Join(dir, "bashrc")
	os.WriteFile(real, []byte("{}\n"), 0o644)
	os.WriteFile(other, []byte("kept\n"), 0o644)
	if err := os.Symlink(real, link); err != nil {
		t.Skip("no symlinks here:", err)
	}
	isLink, target := linkOf(link)
	ss := &sessionFile{path: link, link: isLink, linkTarget: target}
	os.Remove(link)
	os.Symlink(other, link) // after the check
	path, follow := ss.writtenPath()
	if err := appendLine(path, []byte("{}"), false, follow); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(other); string(data) != "kept\n" {
		t.Errorf("written through the link made to lead elsewhere: %q", data)
	}
	if data, _ := os.ReadFile(real); string(data) != "{}\n{}\n" {
		t.Errorf("the file the link led to: %q", data)
	}
}

// TestSmallInfoEntriesHeldCompactly: a session of many small session_info
// or custom_message entries (a name set again and again, an extension's
// notes). Each entry kept its line and, beside it, its fields decoded
// into a struct of every entry type's fields (224 bytes): such a session
// held 4.5 (session_info) and 3.8 (custom_message) times its size, where
// one of small messages holds 2.2. Now an entry that keeps its line reads
// its fields from it when asked, and holds no copy of them.
func TestSmallInfoEntriesHeldCompactly(t *testing.T) {
	for _, kind := range []struct{ typ, fields string }{
		{"session_info", `"name":"%c"`},
		{"custom_message", `"customType":"note","content":"%c","display":true`},
	} {
		t.Run(kind.typ, func(t *testing.T) {
			var b strings.Builder
			b.WriteString(`{"type":"session","version":3,"id":"0f0e8a52-1c4f-4a2e-9d6b-3c1f2e4d5a6b","timestamp":"2026-03-01T09:00:00.000Z","cwd":"/x"}` + "\n")
			const n = 50_000
			for i := 1; i <= n; i++ {
				parent := `"` + fmt.Sprintf("%08x", i-1) + `"`
				if i == 1 {
					parent = "null"
				}
				fmt.Fprintf(&b, `{"type":%q,"id":"%08x","parentId":%s,"timestamp":"2026-03-01T09:00:%02d.000Z",`+kind.fields+"}\n",
					kind.typ, i, parent, i%60, 'a'+i%26)
			}
			path := filepath.Join(t.TempDir(), "s.jsonl")
			os.WriteFile(path, []byte(b.String()), 0o644)
			size := float64(b.Len())
			b.Reset()
			runtime.GC()
			var before, live runtime.MemStats
			runtime.ReadMemStats(&before)
			ss, err := loadSessionFile(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&live)
			// What is held: the entry (112 bytes), its line, its id and
			// timestamp, its place in byID and in entries.
			if held := float64(int64(live.HeapAlloc)-int64(before.HeapAlloc)) / size; held > 3 {
				t.Errorf("opening %.0f bytes of %s entries holds %.1f times that", size, kind.typ, held)
			}
			c := ss.context()
			last := string(rune('a' + n%26))
			switch kind.typ {
			case "session_info":
				if c.name != last || len(c.messages) != 0 {
					t.Errorf("the name is %q (want %q), %d messages", c.name, last, len(c.messages))
				}
			case "custom_message":
				got, _ := json.Marshal(c.messages[len(c.messages)-1])
				if len(c.messages) != n || !strings.Contains(string(got), `"customType":"note","content":"`+last+`","display":true`) {
					t.Errorf("%d messages, the last %s", len(c.messages), got)
				}
			}
			runtime.KeepAlive(ss)
		})
	}
}
