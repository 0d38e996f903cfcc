package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTooManyLoopsText: errTooManyLoops, whose number is written out so
// that package init builds nothing for it, says maxLoops.
func TestTooManyLoopsText(t *testing.T) {
	if want := fmt.Sprintf("maximum of %d scheduled tasks reached", maxLoops); errTooManyLoops.Error() != want {
		t.Errorf("errTooManyLoops says %q, want %q", errTooManyLoops, want)
	}
}

func TestLoopInterval(t *testing.T) {
	for _, tt := range []struct {
		in   any
		secs int64
		err  string
	}{
		{"300", 300, ""}, {"3s", 3, ""}, {"5m", 300, ""}, {"2h", 7200, ""}, {"1d", 86400, ""}, {" 7 ", 7, ""},
		{float64(90), 90, ""},
		{"0", 0, "invalid interval: interval value must be greater than 0"},
		{"0m", 0, "invalid interval: interval value must be greater than 0"},
		{"5x", 0, `invalid interval: invalid interval suffix: "x" (expected s, m, h, or d)`},
		{"m", 0, `invalid interval: invalid interval format: "m" (expected e.g. 300, 5m, 2h, 1d)`},
		{"-5m", 0, `invalid interval: invalid interval format: "-5m" (expected e.g. 300, 5m, 2h, 1d)`},
		{"1.5h", 0, `invalid interval: invalid interval format: "1.5h" (expected e.g. 300, 5m, 2h, 1d)`},
		{"", 0, "invalid interval: interval cannot be empty"},
		{"99999999999999999999", 0, `invalid interval: interval too large: "99999999999999999999"`},
		{"50000000d", 0, `invalid interval: interval too large: "50000000d"`},
		{float64(1 << 33), 0, `invalid interval: interval too large: 8589934592`},
		{float64(1e300), 0, `invalid interval: interval too large: 1e+300`},
		{float64(0.5), 0, "invalid interval: interval must be a whole number of seconds"},
		{float64(-1), 0, "invalid interval: interval value must be greater than 0"},
	} {
		secs, err := parseLoopInterval(tt.in)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if secs != tt.secs || got != tt.err {
			t.Errorf("%v: got %d, %q; want %d, %q", tt.in, secs, got, tt.secs, tt.err)
		}
	}
}

func TestLoopScheduleAndMessage(t *testing.T) {
	for secs, want := range map[int64]string{1: "every 1 second", 3: "every 3 seconds", 60: "every 1 minute",
		90: "every 90 seconds", 300: "every 5 minutes", 7200: "every 2 hours", 86400: "every 1 day", 172800: "every 2 days"} {
		if got := (&loopTask{IntervalSecs: secs}).schedule(); got != want {
			t.Errorf("%d: %q, want %q", secs, got, want)
		}
	}
	// The model gets a loop's message as the user's text.
	msg := loopMessage(&loopTask{ID: "0123456789ab", IntervalSecs: 3, Prompt: "Check it"}, time.UnixMilli(5))
	var m map[string]any
	json.Unmarshal(msg, &m)
	if m["role"] != "custom" || m["customType"] != "Loop 0123456789ab · every 3 seconds" || m["content"] != "Check it" || m["display"] != true {
		t.Errorf("message: %s", msg)
	}
	ctx := contextMessages([]any{msg})
	if u, ok := ctx[0].(*userMessage); len(ctx) != 1 || !ok || u.Content[0].Text != "Check it" {
		t.Errorf("context: %#v", ctx)
	}
}

// TestDurableLoopSurvivesRestart runs rpi twice on one session file:
// durable loops made in the first run (one of them fired at once, failing
// for want of a model) are saved beside the file and come back in the
// second with restored:true, as they were, and a notify; a memory-only
// one does not.
func TestDurableLoopSurvivesRestart(t *testing.T) {
	endToEnd(t)
	e := newTestEnv(t)
	dir := t.TempDir()
	session := filepath.Join(dir, "work.jsonl")
	args := []string{"rpc", "--cwd", dir, "--session", session}
	var first syncBuffer
	runRPI(t, e, args, strings.NewReader(
		`{"id":"d","type":"loop_create","interval":"1h","prompt":"Nightly report","durable":true,"fireImmediately":false}`+"\n"+
			`{"id":"m","type":"loop_create","interval":"1h","prompt":"Memory only","fireImmediately":false}`+"\n"+
			`{"id":"f","type":"loop_create","interval":"2h","prompt":"Fires at once","durable":true}`+"\n"+
			`{"id":"l","type":"loop_list"}`+"\n"), &first)
	var list struct{ Data []loopTaskJSON }
	for _, line := range strings.Split(first.String(), "\n") {
		if strings.HasPrefix(line, `{"id":"l",`) {
			json.Unmarshal([]byte(line), &list)
		}
	}
	tasks := list.Data
	if len(tasks) != 3 || !tasks[0].Durable || tasks[2].RunCount != 1 || !strings.Contains(first.String(), `"type":"loop_failed"`) {
		t.Fatalf("first run:\n%s", first.String())
	}
	for _, task := range tasks {
		if !strings.Contains(first.String(), `{"type":"loop_removed","data":{"task_id":"`+task.ID+`","reason":"shutdown"}}`) {
			t.Errorf("no loop_removed for %s at shutdown:\n%s", task.ID, first.String())
		}
	}
	saved, err := os.ReadFile(session + ".loops.json")
	if err != nil || strings.Contains(string(saved), "Memory only") {
		t.Fatalf("loops file: %s (%v)", saved, err)
	}

	var second syncBuffer
	runRPI(t, e, args, strings.NewReader(`{"id":"l","type":"loop_list"}`+"\n"), &second)
	nightly, _ := json.Marshal(tasks[0])
	fired, _ := json.Marshal(tasks[2])
	want := []string{
		`{"type":"loop_created","data":{"task":` + string(nightly) + `,"restored":true}}`,
		`{"type":"loop_created","data":{"task":` + string(fired) + `,"restored":true}}`,
		`{"id":"l","type":"response","command":"loop_list","success":true,"data":[` + string(nightly) + `,` + string(fired) + `]}`,
	}
	// After the loops, a notify says they came back.
	lines := strings.Split(second.String(), "\n")
	if len(lines) < 5 || !slices.Equal(lines[1:3], want[:2]) || lines[4] != want[2] ||
		!strings.HasPrefix(lines[3], `{"type":"extension_ui_request",`) || !strings.Contains(lines[3], `"message":"Restored 2 scheduled loops from `) {
		t.Errorf("second run:\n%s\nwant after session_started:\n%s", second.String(), strings.Join(want, "\n"))
	}

	// Updating and deleting durable loops rewrite the file; deleting the
	// last one removes it.
	var third syncBuffer
	runRPI(t, e, args, strings.NewReader(`{"id":"u","type":"loop_update","taskId":"`+tasks[0].ID+`","prompt":"Weekly report"}`+"\n"+
		`{"id":"x","type":"loop_delete","taskId":"`+tasks[2].ID+`"}`+"\n"), &third)
	saved, _ = os.ReadFile(session + ".loops.json")
	if !strings.Contains(string(saved), "Weekly report") || strings.Contains(string(saved), "Fires at once") {
		t.Errorf("after update and delete: %s\n%s", saved, third.String())
	}
	var fourth syncBuffer
	runRPI(t, e, args, strings.NewReader(`{"id":"x","type":"loop_cancel","taskId":"`+tasks[0].ID+`"}`+"\n"), &fourth)
	if _, err := os.Stat(session + ".loops.json"); !errors.Is(err, os.ErrNotExist) || !strings.Contains(fourth.String(), `"reason":"cancelled"`) {
		t.Errorf("the loops file is still there (%v):\n%s", err, fourth.String())
	}
}

// TestLoopsFileOnlyRegular: a loops file that is not a regular file is
// neither read nor replaced.
func TestLoopsFileOnlyRegular(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.jsonl.loops.json")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readLoopsFile(path); err == nil {
		t.Errorf("read a directory")
	}
	if err := writeLoopsFile(path, []loopTaskJSON{{ID: "0123456789ab", IntervalSecs: 1, Prompt: "x", Durable: true}}); err == nil {
		t.Errorf("replaced a directory")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

// TestLoopCapHoldsForCreatesAtOnce: loops created at once, when one more
// would reach the cap, add exactly one, round after round: the cap is
// checked again where the loop is added (each create counted first, then
// added, passed it).
func TestLoopCapHoldsForCreatesAtOnce(t *testing.T) {
	s, _ := openTestSession(t, `{"text":["unused"]}`, &recordingSink{}, &approvingUI{}, nil)
	for round := range 100 {
		s.loops.mu.Lock()
		s.loops.tasks = nil
		s.loops.mu.Unlock()
		for i := range maxLoops - 1 {
			if _, err := s.addLoop("1h", fmt.Sprint("loop ", i), false, false); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var added atomic.Int32
		start := make(chan struct{})
		for i := range 8 {
			wg.Go(func() {
				<-start
				if _, err := s.addLoop("1h", fmt.Sprint("at once ", i), false, false); err == nil {
					added.Add(1)
				} else if err != errTooManyLoops {
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		if n := s.loops.count(); added.Load() != 1 || n != maxLoops {
			t.Fatalf("round %d: %d created at once, %d loops in all; want 1 and %d", round, added.Load(), n, maxLoops)
		}
	}
}

// TestLoopTimerSetAtItsTime: the loop timer is set for the loop's next
// fire as a time, not as a delay from a now read before it, so a clock
// that moves in between (a test's fake clock, advanced the moment the
// client reads loop_create's answer, while rpi still arms the timer) does
// not move the fire out of reach. Here the clock passes the loop's time
// while no timer is set; armed then, the loop fires at once.
func TestLoopTimerSetAtItsTime(t *testing.T) {
	e := newTestEnv(t)
	clock := newFakeClock()
	e.clock = clock
	sink := &recordingSink{}
	s, _ := openTestSessionIn(t, e, `{"text":["done"]}`, sink, &approvingUI{}, nil)
	if _, err := s.addLoop("1s", "check", false, false); err != nil {
		t.Fatal(err)
	}
	s.loops.mu.Lock()
	if s.loops.stopTimer != nil {
		s.loops.stopTimer() // as if the timer were not set yet
		s.loops.stopTimer = nil
	}
	s.loops.mu.Unlock()
	clock.advance(2 * time.Second)
	s.loops.mu.Lock()
	s.armLoopsLocked()
	s.loops.mu.Unlock()
	for deadline := time.Now().Add(10 * time.Second); !slices.Contains(sink.types(), "loop_fired"); {
		if time.Now().After(deadline) {
			t.Fatalf("the loop never fired; events: %v", sink.types())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLoopPromptLimit: a loop's prompt is at most maxLoopPrompt bytes as
// the loops file holds it, so that 50 loops of the longest prompts still
// make a file a restore reads: with no limit, a few long prompts made a
// file past 4 MiB, and every loop of the session was lost at its restore.
// A prompt of quotes or control characters counts as escaped.
func TestLoopPromptLimit(t *testing.T) {
	if want := fmt.Sprintf("loop prompt too long: at most %d bytes as saved in the loops file (%d loops must fit in its %d MiB)",
		maxLoopPrompt, maxLoops, maxLoopsFile>>20); errLoopPromptTooLong.Error() != want {
		t.Errorf("errLoopPromptTooLong says %q, want %q", errLoopPromptTooLong, want)
	}
	endToEnd(t)
	e := newTestEnv(t)
	dir := t.TempDir()
	session := filepath.Join(dir, "work.jsonl")
	args := []string{"rpc", "--cwd", dir, "--session", session}
	create := func(id, prompt string) string {
		line, _ := json.Marshal(map[string]any{"id": id, "type": "loop_create", "interval": int64(maxLoopSeconds), "prompt": prompt,
			"durable": true, "fireImmediately": false})
		return string(line) + "\n"
	}
	longest := []string{strings.Repeat("x", maxLoopPrompt), strings.Repeat(`"`, maxLoopPrompt/2), strings.Repeat("\x01", maxLoopPrompt/6)}
	input := create("long", strings.Repeat("x", maxLoopPrompt+1)) + create("quotes", strings.Repeat(`"`, maxLoopPrompt/2+1)) +
		create("controls", strings.Repeat("\x01", maxLoopPrompt/6+1))
	for i := range maxLoops {
		input += create(fmt.Sprint("c", i), longest[i%len(longest)])
	}
	var first syncBuffer
	runRPI(t, e, args, strings.NewReader(input+`{"id":"l","type":"loop_list"}`+"\n"), &first)
	for _, id := range []string{"long", "quotes", "controls"} {
		if want := `{"id":"` + id + `","type":"response","command":"loop_create","success":false,"error":"` + errLoopPromptTooLong.Error() + `"}`; !strings.Contains(first.String(), want) {
			t.Errorf("no %s in the output", want)
		}
	}
	if n := strings.Count(first.String(), `"command":"loop_create","success":true`); n != maxLoops {
		t.Fatalf("%d loops created, want %d", n, maxLoops)
	}
	var list struct{ Data []loopTaskJSON }
	for _, line := range strings.Split(first.String(), "\n") {
		if strings.HasPrefix(line, `{"id":"l",`) {
			json.Unmarshal([]byte(line), &list)
		}
	}
	var second syncBuffer
	runRPI(t, e, args, strings.NewReader(`{"id":"u","type":"loop_update","taskId":"`+list.Data[0].ID+`","prompt":"`+strings.Repeat("x", maxLoopPrompt+1)+`"}`+"\n"), &second)
	if !strings.Contains(second.String(), fmt.Sprintf(`"message":"Restored %d scheduled loops from `, maxLoops)) ||
		!strings.Contains(second.String(), `{"id":"u","type":"response","command":"loop_update","success":false,"error":"`+errLoopPromptTooLong.Error()+`"}`) {
		t.Errorf("second run:\n%.2000s", second.String())
	}
}

// TestLoopsFileReadBounded: a loops file is read within bounds whatever
// it holds. Its 4 MiB of entries that are no loop ({} each, some 1.4
// million) cost about what the file does, not hundreds of bytes each
// (they made rpi allocate 1.2 GB, its heap growing to some 480 MB, at
// each open of the session); a symbolic link is refused as it is by the
// write, which never replaced one, so that the loops it led to could not
// be deleted for good; a runCount loop_create could not have made is not
// valid.
func TestLoopsFileReadBounded(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.jsonl.loops.json")
	n := (maxLoopsFile - 40) / 3
	huge := `{"version":1,"tasks":[` + strings.Repeat("{},", n-1) + `{}]}`
	if err := os.WriteFile(path, []byte(huge), 0o600); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	tasks, invalid, err := readLoopsFile(path)
	runtime.ReadMemStats(&after)
	if len(tasks) != 0 || invalid != n || err != nil {
		t.Errorf("%d empty entries: %d tasks, %d invalid, %v", n, len(tasks), invalid, err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16*maxLoopsFile { // about 10 MiB; 19 MiB with -race
		t.Errorf("reading a file of %d bytes allocated %d MiB", len(huge), grew>>20)
	}

	task := func(id string, runCount int64) string {
		return fmt.Sprintf(`{"id":%q,"intervalSecs":60,"prompt":"Check","durable":true,"createdAt":"2026-12-01T00:00:00.000Z","lastFiredAt":null,"expiresAt":"2026-12-08T00:00:00.000Z","runCount":%d}`, id, runCount)
	}
	for _, tt := range []struct {
		name, file   string
		valid, wrong int
		err          string
	}{
		{"valid", `{"version":1,"tasks":[` + task("0123456789ab", 3) + `]}`, 1, 0, ""},
		{"negative runCount", `{"version":1,"tasks":[` + task("0123456789ab", -1) + `]}`, 0, 1, ""},
		{"runCount past what a client reads exactly", `{"version":1,"tasks":[` + task("0123456789ab", 1<<53) + `]}`, 0, 1, ""},
		{"tasks null", `{"version":1,"tasks":null}`, 0, 0, ""},
		{"tasks twice: the last counts", `{"version":1,"tasks":[` + task("0123456789ab", 0) + `],"tasks":[{},` + task("ba9876543210", 0) + `]}`, 1, 1, ""},
		{"tasks not an array", `{"version":1,"tasks":{}}`, 0, 0, "not a loops file: "},
		{"a task of the wrong type", `{"version":1,"tasks":[` + task("0123456789ab", 0) + `,{"id":5}]}`, 0, 0, "not a loops file: "},
		{"another version", `{"version":2,"tasks":[]}`, 0, 0, "unsupported loop state version 2; expected 1"},
	} {
		if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
			t.Fatal(err)
		}
		tasks, invalid, err := readLoopsFile(path)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if len(tasks) != tt.valid || invalid != tt.wrong || !strings.HasPrefix(got, tt.err) || (tt.err == "") != (got == "") {
			t.Errorf("%s: %d tasks, %d invalid, %q; want %d, %d, %q", tt.name, len(tasks), invalid, got, tt.valid, tt.wrong, tt.err)
		}
	}

	link := filepath.Join(dir, "link.jsonl.loops.json")
	if err := os.Symlink(path, link); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	want := link + " is a symbolic link, not a regular file"
	if _, _, err := readLoopsFile(link); err == nil || err.Error() != want {
		t.Errorf("read through a symbolic link: %v, want %s", err, want)
	}
	if err := writeLoopsFile(link, nil); err == nil || err.Error() != want {
		t.Errorf("removing a symbolic link: %v, want %s", err, want)
	}
}

// TestLoopRestoreEventsBounded: a restore announces each id of the
// loops file once, and at most maxLoops of them, expired ones included:
// a file that repeated an expired loop, or held thousands of them, had a
// loop_removed written for every entry, the same task_id again and
// again, for loops the client was never told of.
func TestLoopRestoreEventsBounded(t *testing.T) {
	sink := &recordingSink{}
	s, _ := openTestSession(t, `{"text":["unused"]}`, sink, &approvingUI{}, nil)
	session := filepath.Join(t.TempDir(), "s.jsonl")
	task := func(id, expires string) string {
		return fmt.Sprintf(`{"id":%q,"intervalSecs":3600,"prompt":"Check","durable":true,"createdAt":"2001-01-01T00:00:00.000Z","lastFiredAt":null,"expiresAt":%q,"runCount":0}`, id, expires)
	}
	var tasks []string
	for range 3 {
		tasks = append(tasks, task("0000000000aa", "2001-01-08T00:00:00.000Z"))
	}
	for i := range 2 * maxLoops {
		tasks = append(tasks, task(fmt.Sprintf("%012x", i+1), "2001-01-08T00:00:00.000Z"))
	}
	tasks = append(tasks, task("ffffffffffff", "2999-01-01T00:00:00.000Z"))
	if err := os.WriteFile(session+".loops.json", []byte(`{"version":1,"tasks":[`+strings.Join(tasks, ",")+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s.moveLoops(readLoops(session))
	s.announceLoops()
	s.afterLoopsWrites(func() {}) // the file rewritten
	seen := map[string]int{}
	announced := 0
	for _, ev := range sink.all() {
		if ev.Type == "loop_removed" || ev.Type == "loop_created" {
			data, _ := json.Marshal(ev.Data)
			var e struct {
				TaskID string `json:"task_id"`
				Task   struct{ ID string }
			}
			json.Unmarshal(data, &e)
			seen[e.TaskID+e.Task.ID]++
			announced++
		}
	}
	if announced > maxLoops || seen["0000000000aa"] != 1 {
		t.Errorf("%d loops announced (%d times 0000000000aa), want at most %d, each once", announced, seen["0000000000aa"], maxLoops)
	}
	if saved, err := os.ReadFile(session + ".loops.json"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file kept: %.300s (%v)", saved, err)
	}
}

// TestLoopFireAfterFailedChange: a loop's fire that comes while a
// session change reads what it needs (runs are held) waits, and starts
// once the change has failed: it waited for some other run to settle,
// and every later fire of the loop was skipped as already_queued. (The
// fixture loop_fire_after_failed_change shows a compaction's.)
func TestLoopFireAfterFailedChange(t *testing.T) {
	sink := &recordingSink{}
	s, _ := openTestSession(t, `{"text":["Checked."]}`, sink, &approvingUI{}, nil)
	done := make(chan error, 1)
	s.changeSession(nil, func() error {
		if _, err := s.addLoop("1h", "Check", true, false); err != nil {
			return err
		}
		s.fireDueLoops() // its first fire, while the change reads
		return errors.New("not a session file")
	}, func() error {
		t.Error("the change was made")
		return nil
	}, changeAsker{}, func(err error) { done <- err })
	if err := <-done; err == nil || err.Error() != "not a session file" {
		t.Fatalf("the change: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); !slices.Contains(sink.types(), "loop_finished"); {
		if time.Now().After(deadline) {
			t.Fatalf("the fire never ran; events: %v", sink.types())
		}
		time.Sleep(time.Millisecond)
	}
	if types := sink.types(); slices.Index(types, "loop_queued") > slices.Index(types, "loop_fired") {
		t.Errorf("events: %v", types)
	}
}

// TestLoopRestoreKeepsExpiry: a restored loop's expiry, brought to at
// most 7 days from the restore, is saved: the file kept the expiry it
// held (2999 here), so that a loop that had not fired before the
// session closed got 7 more days at each restore, and never expired.
func TestLoopRestoreKeepsExpiry(t *testing.T) {
	s, _ := openTestSession(t, `{"text":["unused"]}`, &recordingSink{}, &approvingUI{}, nil)
	session := filepath.Join(t.TempDir(), "s.jsonl")
	file := `{"version":1,"tasks":[{"id":"0123456789ab","intervalSecs":86400,"prompt":"Check","durable":true,"createdAt":"2999-01-01T00:00:00.000Z","lastFiredAt":null,"expiresAt":"2999-01-08T00:00:00.000Z","runCount":0}]}`
	if err := os.WriteFile(session+".loops.json", []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	s.moveLoops(readLoops(session))
	s.announceLoops()
	var tasks []*loopTask
	var err error
	s.afterLoopsWrites(func() { tasks, _, err = readLoopsFile(session + ".loops.json") })
	if latest := s.env.clock.Now().Add(loopLifetime); err != nil || len(tasks) != 1 || tasks[0].ExpiresAt.After(latest) {
		saved, _ := os.ReadFile(session + ".loops.json")
		t.Errorf("the file after the restore: %s (%v); want it to expire by %s", saved, err, timestamp(latest))
	}
}

// TestLoopDeletedWhileItsFileIsRead: a change to the session's own file
// again (switch_session to it) reads the loops file while a loop_delete
// sent behind it deletes one of its loops; the deleted loop does not
// come back, whichever of the two comes first (here the read: the
// interleaving a pipelined loop_delete met now and then). rpi restored
// it from the file as read, after loop_delete had answered true.
//
// The file read may be named otherwise than the session's own (a path
// through a symlinked folder, "./" in it): it is still the session's own
// file, found so by what it is, not by its spelling. Spelled otherwise,
// the file was read, and the deleted loop came back.
func TestLoopDeletedWhileItsFileIsRead(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Skip("no symlinks here:", err)
	}
	for name, spelling := range map[string]string{
		"the same spelling":  filepath.Join(dir, "s.jsonl"),
		"a symlinked folder": filepath.Join(link, "s.jsonl"),
		"./ in the path":     dir + string(filepath.Separator) + "." + string(filepath.Separator) + "s.jsonl",
	} {
		t.Run(name, func(t *testing.T) {
			testLoopDeletedWhileItsFileIsRead(t, filepath.Join(dir, "s.jsonl"), spelling)
			os.Remove(filepath.Join(dir, "s.jsonl.loops.json"))
		})
	}
}

func testLoopDeletedWhileItsFileIsRead(t *testing.T, session, spelling string) {
	s, _ := openTestSession(t, `{"text":["unused"]}`, &recordingSink{}, &approvingUI{}, nil)
	s.moveLoops(readLoops(session)) // the session's loops file is session's
	s.announceLoops()
	kept, err := s.addLoop("1h", "Kept", false, true)
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := s.addLoop("2h", "Deleted", false, true)
	if err != nil {
		t.Fatal(err)
	}
	read := s.readLoopsNow(spelling) // the change reads the file: both loops in it
	if len(read.tasks) != 2 {
		t.Fatalf("read %d loops, want 2", len(read.tasks))
	}
	s.mu.Lock()
	s.loops.mu.Lock()
	s.dropLoopLocked(s.loops.findLocked(deleted.ID), "deleted", false) // as loop_delete does
	s.saveLoopsLocked()
	s.loops.mu.Unlock()
	s.unlock()
	s.moveLoops(read) // the change applies itself
	s.announceLoops()
	var ids []string
	s.loops.mu.Lock()
	for _, task := range s.loops.tasks {
		ids = append(ids, task.ID)
	}
	s.loops.mu.Unlock()
	if !slices.Equal(ids, []string{kept.ID}) {
		t.Errorf("loops after the change: %v, want only %s (%s was deleted)", ids, kept.ID, deleted.ID)
	}
	var saved []*loopTask
	s.afterLoopsWrites(func() { saved, _, err = readLoopsFile(session + ".loops.json") })
	if err != nil || len(saved) != 1 || saved[0].ID != kept.ID {
		t.Errorf("the file keeps %d loops (%v), want only %s", len(saved), err, kept.ID)
	}
}
