package main

// Tests of the conversation's writer and the loops writer (the command
// loop's writes done in the background) where they meet session changes,
// session_delete and panics.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// serveSessionCopy serves, in this process, a copy of pi-v3.jsonl at rel
// in a new cwd as the session (args follow), once its startup is done:
// session_started is out, and so is the answer to a first command, which
// rpi reads only after it has restored the session's loops (a test may
// then change the session's files and its ui).
func serveSessionCopy(t *testing.T, rel string, args ...string) (sp *servedInProcess, file string) {
	t.Helper()
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"text":["unused"]}`, e.agentDir)
	cwd := t.TempDir()
	data, err := os.ReadFile("testdata/sessions/pi-v3.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(cwd, rel)
	os.MkdirAll(filepath.Dir(file), 0o755)
	os.WriteFile(file, data, 0o644)
	sp = serveInProcess(t, e, append([]string{"--cwd", cwd, "--session", file}, args...)...)
	sp.seen(`"type":"session_started"`)
	sp.send(`{"id":"started","type":"get_state"}`)
	sp.seen(`"id":"started"`)
	return sp, file
}

// answeredAfter waits a moment for the answer to id while the disk holds
// (it may come, or wait for the disk), then calls release (the disk is
// back) and waits for the answer.
func (sp *servedInProcess) answeredAfter(id string, release func()) {
	answered := make(chan struct{})
	go func() {
		sp.out.waitFor(`"id":"`+id+`"`, func(b []byte) string { return string(b) })
		close(answered)
	}()
	select {
	case <-answered:
	case <-time.After(500 * time.Millisecond):
	}
	release()
	<-answered
}

// waitForFile waits until the file at path holds want, while rpi runs.
func waitForFile(t *testing.T, path, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if data, err := os.ReadFile(path); err == nil && bytes.Contains(data, []byte(want)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %s", path, want)
		}
	}
}

// succeeded fails unless id's answer was a success.
func (sp *servedInProcess) succeeded(id, command string) {
	sp.t.Helper()
	if out := sp.out.bytes(); !bytes.Contains(out, []byte(`"id":"`+id+`","type":"response","command":"`+command+`","success":true`)) {
		sp.t.Errorf("%s did not succeed:\n%s", id, out)
	}
}

// TestSwitchToTheCurrentSessionKeepsItsQueuedEntries: set_session_name's
// entry is still queued for the writer (the disk holds) when
// switch_session reloads the same file; the reloaded session has the
// name, and so does the file once the disk is back.
func TestSwitchToTheCurrentSessionKeepsItsQueuedEntries(t *testing.T) {
	sp, file := serveSessionCopy(t, "s.jsonl")
	sp.s.conv.fileMu.Lock() // the disk stops answering
	sp.send(`{"id":"name","type":"set_session_name","name":"renamed"}`,
		`{"id":"sw","type":"switch_session","sessionPath":"s.jsonl"}`)
	sp.answeredAfter("sw", sp.s.conv.fileMu.Unlock)
	sp.renamedInMemoryAndOnDisk(file)
}

// renamedInMemoryAndOnDisk stops rpi after checking that its session is
// named "renamed", and that the file at path says so too.
func (sp *servedInProcess) renamedInMemoryAndOnDisk(path string) {
	sp.t.Helper()
	sp.send(`{"id":"state","type":"get_state"}`)
	sp.seen(`"id":"state"`)
	if !bytes.Contains(sp.out.bytes(), []byte(`"sessionName":"renamed"`)) {
		sp.t.Errorf("the reloaded session lacks the name:\n%s", sp.out.bytes())
	}
	sp.stop()
	if saved, _ := os.ReadFile(path); !bytes.Contains(saved, []byte(`"name":"renamed"`)) {
		sp.t.Errorf("the session file lacks the name:\n%s", saved)
	}
}

// TestSwitchToTheCurrentSessionAfterLoopDelete: a durable loop is deleted
// while the loops file's write is still queued (the disk holds), then
// switch_session reloads the same session: the loop stays deleted, in the
// session and in the file once the disk is back.
func TestSwitchToTheCurrentSessionAfterLoopDelete(t *testing.T) {
	sp, file := serveSessionCopy(t, "s.jsonl")
	sp.send(`{"id":"loop","type":"loop_create","interval":"1h","prompt":"p","fireImmediately":false,"durable":true}`)
	sp.seen(`"id":"loop"`)
	for { // the loop is on disk; then the disk stops answering
		sp.s.loops.fileMu.Lock()
		if _, err := os.Stat(file + ".loops.json"); err == nil {
			break
		}
		sp.s.loops.fileMu.Unlock()
		runtime.Gosched()
	}
	sp.s.loops.mu.Lock()
	id := sp.s.loops.tasks[0].ID
	sp.s.loops.mu.Unlock()
	sp.send(`{"id":"del","type":"loop_delete","taskId":"`+id+`"}`,
		`{"id":"sw","type":"switch_session","sessionPath":"s.jsonl"}`)
	sp.answeredAfter("sw", sp.s.loops.fileMu.Unlock)
	sp.send(`{"id":"list","type":"loop_list"}`)
	sp.seen(`"id":"list"`)
	if out := sp.out.bytes(); bytes.Contains(out, []byte(`"restored":true`)) || !bytes.Contains(out, []byte(`"command":"loop_list","success":true,"data":[]}`)) {
		t.Errorf("the deleted loop came back:\n%s", out)
	}
	sp.stop()
	if _, err := os.Stat(file + ".loops.json"); !os.IsNotExist(err) {
		t.Errorf("the loops file is still there: %v", err)
	}
}

// TestPanicInASessionChangesReadIsAnswered: a panic while a session
// change reads its file (a bug that a crafted file finds) fails the
// change, whose command is answered, instead of leaving it unanswered.
func TestPanicInASessionChangesReadIsAnswered(t *testing.T) {
	sp := serveInProcess(t, newTestEnv(t), "--cwd", t.TempDir())
	sp.seen(`"type":"session_started"`)
	outcome := make(chan error, 1)
	sp.s.changeSession(nil, func() error { panic("in the read") }, func() error { return nil }, changeAsker{}, func(err error) { outcome <- err })
	select {
	case err := <-outcome:
		if err == nil || !strings.Contains(err.Error(), "in the read") {
			t.Errorf("the change's outcome: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the change was never answered")
	}
	sp.stop()
}

// TestWriterGoesOnAfterAPanic: a panic in the conversation's writer (in
// its warning that an append failed, here) ends that write only: the
// next entry from the command loop is written, long before rpi ends.
func TestWriterGoesOnAfterAPanic(t *testing.T) {
	sp, file := serveSessionCopy(t, "s.jsonl")
	warn := sp.s.conv.warn
	panicked := make(chan struct{})
	sp.s.conv.warn = func(string) { close(panicked); panic("in the warning") }
	os.Remove(file) // the append fails: the writer warns
	sp.send(`{"id":"one","type":"set_session_name","name":"one"}`)
	<-panicked
	sp.s.conv.mu.Lock()
	sp.s.conv.warn = warn
	sp.s.conv.mu.Unlock()
	sp.send(`{"id":"two","type":"set_session_name","name":"two"}`)
	waitForFile(t, file, `"name":"two"`)
	sp.stop()
}

// TestLoopsWriterGoesOnAfterAPanic: a panic in the loops writer (in its
// warning that a write failed, here) ends that writer only: the next
// durable loop's file is written while rpi runs.
func TestLoopsWriterGoesOnAfterAPanic(t *testing.T) {
	sp, file := serveSessionCopy(t, "s.jsonl")
	panicked := make(chan struct{})
	sp.s.ui = panickingUI{sp.s.ui, panicked}
	loops := file + ".loops.json"
	os.Mkdir(loops, 0o755) // not a regular file: the write fails, and its warning panics
	sp.send(`{"id":"a","type":"loop_create","interval":"1h","prompt":"a","fireImmediately":false,"durable":true}`)
	<-panicked
	os.Remove(loops)
	sp.send(`{"id":"b","type":"loop_create","interval":"1h","prompt":"b","fireImmediately":false,"durable":true}`)
	waitForFile(t, loops, `"prompt":"b"`)
	sp.stop()
}

// panickingUI panics at its first warning (closing panicked), and
// otherwise is ui.
type panickingUI struct {
	ui
	panicked chan struct{}
}

func (p panickingUI) show(req uiRequest) {
	if req.NotifyType == "warning" {
		select {
		case <-p.panicked:
		default:
			close(p.panicked)
			panic("in the warning")
		}
	}
	p.ui.show(req)
}

// TestSessionLeftBeforeItsFileIsWritten: a fork (written whole, by the
// writer, as it holds an answer) is left for another session before the
// writer has written it (the disk holds): once written, its file is let
// go of, so switching back to it works.
func TestSessionLeftBeforeItsFileIsWritten(t *testing.T) {
	sp, file := serveSessionCopy(t, "s.jsonl")
	data, _ := os.ReadFile(file)
	os.WriteFile(filepath.Join(filepath.Dir(file), "other.jsonl"), data, 0o644)
	sp.s.conv.fileMu.Lock() // the disk stops answering
	sp.send(`{"id":"fork","type":"fork","entryId":"a1000005"}`)
	sp.seen(`"id":"fork"`)
	forked := sp.s.conv.info().path
	sp.send(`{"id":"away","type":"switch_session","sessionPath":"other.jsonl"}`)
	sp.seen(`"id":"away"`)
	sp.s.conv.fileMu.Unlock()
	waitForFile(t, forked, `"type":"session"`) // the writer writes the fork's file
	line, _ := json.Marshal(map[string]string{"id": "back", "type": "switch_session", "sessionPath": forked})
	sp.send(string(line))
	sp.seen(`"id":"back"`)
	sp.succeeded("back", "switch_session")
	sp.stop()
}

// TestDeletedSessionsLoopsFileStaysDeleted: a durable loop's file write
// is still queued (the disk holds) when its session is left (new_session)
// and deleted: the loops file does not come back after the delete.
func TestDeletedSessionsLoopsFileStaysDeleted(t *testing.T) {
	sp, file := serveSessionCopy(t, "sessions/s.jsonl", "--session-dir", "sessions")
	sp.s.loops.fileMu.Lock() // the loops file's disk stops answering
	sp.send(`{"id":"loop","type":"loop_create","interval":"1h","prompt":"p","fireImmediately":false,"durable":true}`,
		`{"id":"new","type":"new_session"}`)
	sp.seen(`"id":"new"`)
	sp.send(`{"id":"del","type":"session_delete","sessionPath":"sessions/s.jsonl"}`)
	sp.answeredAfter("del", sp.s.loops.fileMu.Unlock)
	sp.stop()
	sp.succeeded("del", "session_delete")
	if _, err := os.Stat(file + ".loops.json"); !os.IsNotExist(err) {
		t.Errorf("the deleted session's loops file is back: %v", err)
	}
}

// TestDeleteTheSessionJustLeft: session_delete of the session new_session
// has just left, while the writer has not yet let go of its file (the
// disk holds): the delete waits for that and deletes it, instead of
// refusing it as held.
func TestDeleteTheSessionJustLeft(t *testing.T) {
	sp, _ := serveSessionCopy(t, "sessions/s.jsonl", "--session-dir", "sessions")
	sp.s.conv.fileMu.Lock() // the disk stops answering
	sp.send(`{"id":"new","type":"new_session"}`)
	sp.seen(`"id":"new"`)
	sp.send(`{"id":"del","type":"session_delete","sessionPath":"sessions/s.jsonl"}`)
	sp.answeredAfter("del", sp.s.conv.fileMu.Unlock)
	sp.stop()
	sp.succeeded("del", "session_delete")
}

// TestSwitchToTheCurrentSessionWhileAnswering: switch_session to the
// current file, twice at once (the second by another path), while an
// answer streams. The file is read again first, then the answer is
// aborted and saved: the reloaded session still has it, in memory and on
// disk, and the next answer hangs under it. The second switch reads the
// file once the first is applied, so it takes the first's hold over: the
// file stays held.
func TestSwitchToTheCurrentSessionWhileAnswering(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"text":["partial ","rest"],"holdAt":2}`+"\n"+`{"text":["second answer"]}`, e.agentDir)
	cwd := t.TempDir()
	data, err := os.ReadFile("testdata/sessions/pi-v3.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(cwd, "s.jsonl")
	os.WriteFile(file, data, 0o644)
	sp := serveInProcess(t, e, "--cwd", cwd, "--session", file)
	sp.seen(`"type":"session_started"`)
	sp.send(`{"id":"p","type":"prompt","message":"first question"}`)
	sp.seen(`"delta":"partial "`)
	sp.send(`{"id":"sw","type":"switch_session","sessionPath":"s.jsonl"}`,
		`{"id":"sw2","type":"switch_session","sessionPath":"./x/../s.jsonl"}`)
	sp.seen(`"id":"sw2"`)
	sp.succeeded("sw", "switch_session")
	sp.succeeded("sw2", "switch_session")
	sp.send(`{"id":"msgs","type":"get_messages"}`)
	sp.seen(`"id":"msgs"`)
	if out := sp.out.bytes(); !bytes.Contains(out[bytes.LastIndex(out, []byte(`"id":"msgs"`)):], []byte(`"stopReason":"aborted"`)) {
		t.Errorf("the reloaded session lost the aborted answer:\n%s", out)
	}
	sp.s.conv.flush() // the sessions left let go of their holds
	if lock, _ := lockSessionFile(context.Background(), file, 0); lock != nil {
		lock.Close()
		t.Errorf("after the switches nothing holds %s: another rpi could write it", file)
	}
	sp.send(`{"id":"p2","type":"prompt","message":"second question"}`)
	sp.seen(`"type":"agent_end"`)
	sp.stop()

	// Walk from the file's last entry to its root: the aborted answer is
	// on the way.
	parents := map[string]string{}
	aborted, last := "", ""
	for _, line := range sessionLines(t, file)[1:] {
		var e struct {
			ID, ParentID string
			Message      struct{ StopReason string }
		}
		json.Unmarshal([]byte(line), &e)
		parents[e.ID], last = e.ParentID, e.ID
		if e.Message.StopReason == "aborted" {
			aborted = e.ID
		}
	}
	if aborted == "" {
		t.Fatalf("the file lacks the aborted answer:\n%s", strings.Join(sessionLines(t, file), "\n"))
	}
	for id := last; id != aborted; id = parents[id] {
		if id == "" {
			t.Fatalf("the aborted answer fell off the conversation:\n%s", strings.Join(sessionLines(t, file), "\n"))
		}
	}
}

// TestSwitchToTheCurrentSessionTakesLaterWrites: an entry made after
// switch_session read the current file again, and still queued when the
// reloaded session takes over the file's hold, is written all the same
// (in the reloaded session's name), and that session has it.
func TestSwitchToTheCurrentSessionTakesLaterWrites(t *testing.T) {
	sp, file := serveSessionCopy(t, "s.jsonl")
	reloaded, err := sp.s.conv.open(context.Background(), file, 0) // switch_session's read
	if err != nil {
		t.Fatal(err)
	}
	diskBack := holdElsewhere(&sp.s.conv.fileMu) // the disk holds
	sp.send(`{"id":"name","type":"set_session_name","name":"renamed"}`)
	sp.seen(`"id":"name"`)
	sp.s.useSessionIn(sp.s.conv, reloaded) // switch_session's change
	diskBack()
	sp.renamedInMemoryAndOnDisk(file)
}

// holdElsewhere takes l on a goroutine of its own, as a writer stuck on
// the disk would, until the function it returns is called: the test's
// own goroutine holds no lock of the core's meanwhile.
func holdElsewhere(l sync.Locker) (letGo func()) {
	held, done := make(chan struct{}), make(chan struct{})
	go func() {
		l.Lock()
		close(held)
		<-done
		l.Unlock()
	}()
	<-held
	return func() { close(done) }
}

// TestWriteUnderWayWhenTheHoldIsHandedOn: the writer took a write of the
// current session from its queue just before switch_session to the same
// file handed the session's hold to the session read again; the write
// goes on under that hold instead of being refused by rpi's own lock.
func TestWriteUnderWayWhenTheHoldIsHandedOn(t *testing.T) {
	sp, file := serveSessionCopy(t, "s.jsonl")
	c := sp.s.conv
	c.mu.Lock()
	left := c.sessionFile
	c.mu.Unlock()
	reloaded, err := c.open(context.Background(), file, 0)
	if err != nil {
		t.Fatal(err)
	}
	sp.s.useSessionIn(c, reloaded) // the hold goes over to reloaded
	c.fileMu.Lock()
	err = c.holdFile(left) // the write taken before the change
	c.fileMu.Unlock()
	if err != nil {
		t.Errorf("a write of the session left was refused: %v", err)
	}
	sp.stop()
}

// TestEmptySessionFileHeldUntilItsHeader: an empty file that --session
// starts a new session in is held from when it is found empty, by the
// session started there (openSessionFileOrEmpty hands it the hold), until
// its header is in it and after. rpi let go of it in between: another rpi
// that found it empty too could start its own session there, and the
// header of whichever wrote second went after the other's session, two
// sessions in one file. switch_session refuses an empty file (as a file
// that is no valid session) and leaves it unheld.
func TestEmptySessionFileHeldUntilItsHeader(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ss, hold, err := openSessionFileOrEmpty(context.Background(), empty, 0)
	if ss != nil || hold == nil || !isEmptySessionFile(err) {
		t.Fatalf("an empty file: session %v, hold %v, %v", ss, hold, err)
	}
	if other, err := lockSessionFile(context.Background(), empty, 0); other != nil {
		other.Close()
		t.Errorf("another rpi could take the file found empty")
	} else if _, inUse := err.(*errSessionInUse); !inUse {
		t.Errorf("another rpi taking the file: %v", err)
	}
	hold.Close()

	sp := serveInProcess(t, newTestEnv(t), "--cwd", dir, "--session", empty)
	sp.seen(`"type":"session_started"`)
	if other, _ := lockSessionFile(context.Background(), empty, 0); other != nil {
		other.Close()
		t.Errorf("another rpi could take the file of the session started in it")
	}
	sp.s.conv.flush()
	id := sp.s.conv.info().id
	lines := sessionLines(t, empty)
	if len(lines) == 0 || !strings.HasPrefix(lines[0], `{"type":"session","version":3,"id":"`+id+`"`) {
		t.Errorf("the file, for session %s:\n%s", id, strings.Join(lines, "\n"))
	}
	other := filepath.Join(dir, "other-empty.jsonl")
	os.WriteFile(other, nil, 0o600)
	sp.send(`{"id":"sw","type":"switch_session","sessionPath":"other-empty.jsonl"}`)
	sp.seen(`"id":"sw"`)
	if out := sp.out.bytes(); !bytes.Contains(out, []byte(`"id":"sw","type":"response","command":"switch_session","success":false,"error":"Not a valid session file: `+other+` (it is empty)"}`)) {
		t.Errorf("switch_session to an empty file:\n%s", out)
	}
	if lock, err := lockSessionFile(context.Background(), other, 0); err != nil {
		t.Errorf("the empty file switch_session refused is still held: %v", err)
	} else if lock != nil {
		lock.Close()
	}
	sp.stop()
}

// TestSwitchToTheCurrentSessionEmptied: switch_session to the current
// session's own file, emptied outside rpi, is refused as any empty file
// is, the session stays as it was, and nothing is written there. (When
// switch_session started new sessions in empty files, one there did not
// get the file's hold from the session it replaced, and its entries went
// in with no header.)
func TestSwitchToTheCurrentSessionEmptied(t *testing.T) {
	sp, file := serveSessionCopy(t, "s.jsonl")
	id := sp.s.conv.info().id
	if err := os.Truncate(file, 0); err != nil {
		t.Fatal(err)
	}
	sp.send(`{"id":"sw","type":"switch_session","sessionPath":"s.jsonl"}`)
	sp.seen(`"id":"sw"`)
	if out := sp.out.bytes(); !bytes.Contains(out, []byte(`"id":"sw","type":"response","command":"switch_session","success":false,"error":"Not a valid session file: `+file+` (it is empty`)) {
		t.Errorf("switch_session to the emptied file:\n%s", out)
	}
	sp.s.conv.flush()
	if now := sp.s.conv.info().id; now != id {
		t.Errorf("the session is %s, was %s", now, id)
	}
	if data, _ := os.ReadFile(file); len(data) != 0 {
		t.Errorf("the switch wrote the file:\n%s", data)
	}
	sp.stop()
}
