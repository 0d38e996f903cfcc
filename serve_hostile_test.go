//go:build unix

package main

// rpi serve against hostile clients (docs/serve.md): what a client of
// the socket may send or fail to read, and what may happen to the socket
// and its directory. Each attack must be refused or contained: no other
// connection, session or byte of a session file is affected, and the
// host's goroutines and file descriptors come back to their idle count.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ---- Helpers ----

// servedRecord is one line a served client reads, decoded as far as these
// tests look.
type servedRecord struct {
	Type    string          `json:"type"`
	ID      json.RawMessage `json:"id"`
	Command string          `json:"command"`
	Success *bool           `json:"success"`
	Error   string          `json:"error"`
	Method  string          `json:"method"`
	Data    json.RawMessage `json:"data"`
	Seq     int64           `json:"seq"`
	line    []byte
}

// lineClient is a raw connection to rpi serve whose lines the test reads
// (all of them, on a goroutine of its own, once started).
type lineClient struct {
	t    testing.TB
	conn net.Conn

	mu      sync.Mutex
	ids     int // for the ids of hostStatusOf
	records []servedRecord
	counts  map[string]int // records by type
	bad     []string       // lines that are no JSON object
	changed chan struct{}
	ended   bool
	done    chan struct{}
}

// dialLines connects to sh's socket; its lines are read from the start.
func dialLines(t testing.TB, socket string) *lineClient {
	t.Helper()
	c := dialLinesPaused(t, socket)
	c.start()
	return c
}

// dialLinesPaused connects without reading anything (start reads).
func dialLinesPaused(t testing.TB, socket string) *lineClient {
	t.Helper()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	c := &lineClient{t: t, conn: conn, changed: make(chan struct{}), done: make(chan struct{}), counts: map[string]int{}}
	t.Cleanup(func() { conn.Close() })
	return c
}

// start reads the connection's lines until it ends.
func (c *lineClient) start() {
	go func() {
		defer close(c.done)
		br := bufio.NewReaderSize(c.conn, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 && line[len(line)-1] == '\n' {
				var r servedRecord
				if json.Unmarshal(line, &r) != nil {
					c.mu.Lock()
					c.bad = append(c.bad, string(line))
					close(c.changed) // a wait may look at bad
					c.changed = make(chan struct{})
					c.mu.Unlock()
				} else {
					r.line = line
					c.mu.Lock()
					c.records = append(c.records, r)
					c.counts[r.Type]++
					close(c.changed)
					c.changed = make(chan struct{})
					c.mu.Unlock()
				}
			}
			if err != nil {
				c.mu.Lock()
				c.ended = true
				close(c.changed)
				c.changed = make(chan struct{})
				if len(line) > 0 && line[len(line)-1] != '\n' {
					c.bad = append(c.bad, "a cut line: "+string(line))
				}
				c.mu.Unlock()
				return
			}
		}
	}()
}

func (c *lineClient) send(line string) {
	if _, err := io.WriteString(c.conn, line+"\n"); err != nil {
		c.t.Logf("write: %v", err)
	}
}

// close closes the connection and waits for its reader.
func (c *lineClient) close() {
	c.conn.Close()
	<-c.done
}

func (c *lineClient) snapshot() ([]servedRecord, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.records), c.ended
}

// waitUntil waits (up to 30 s) until ok holds for the records read so far;
// it returns them.
func (c *lineClient) waitUntil(what string, ok func([]servedRecord, bool) bool) []servedRecord {
	c.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		c.mu.Lock()
		records, ended, changed := slices.Clone(c.records), c.ended, c.changed
		c.mu.Unlock()
		if ok(records, ended) {
			return records
		}
		if ended {
			c.t.Fatalf("the connection ended before %s; it read:\n%s", what, recordLines(records))
		}
		select {
		case <-changed:
		case <-deadline:
			c.t.Fatalf("never %s; the connection read:\n%s", what, recordLines(records))
		}
	}
}

// waitRecord waits for a record that match accepts, and returns it.
func (c *lineClient) waitRecord(what string, match func(servedRecord) bool) servedRecord {
	c.t.Helper()
	var found servedRecord
	c.waitUntil(what, func(rs []servedRecord, _ bool) bool {
		for _, r := range rs {
			if match(r) {
				found = r
				return true
			}
		}
		return false
	})
	return found
}

// answer waits for the response to the command with id.
func (c *lineClient) answer(id string) servedRecord {
	c.t.Helper()
	return c.waitRecord("the answer to "+id, func(r servedRecord) bool {
		return r.Type == "response" && string(r.ID) == `"`+id+`"`
	})
}

// waitEvents waits for n records of type typ.
func (c *lineClient) waitEvents(typ string, n int) {
	c.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		c.mu.Lock()
		k, ended, changed := c.counts[typ], c.ended, c.changed
		c.mu.Unlock()
		if k >= n {
			return
		}
		if ended {
			recs, _ := c.snapshot()
			c.t.Fatalf("the connection ended before %d %s; it read:\n%s", n, typ, recordLines(recs))
		}
		select {
		case <-changed:
		case <-deadline:
			recs, _ := c.snapshot()
			c.t.Fatalf("never %d %s; the connection read:\n%s", n, typ, recordLines(recs))
		}
	}
}

// waitEnd waits until the host closes the connection.
func (c *lineClient) waitEnd() []servedRecord {
	c.t.Helper()
	return c.waitUntil("the end of the connection", func(_ []servedRecord, ended bool) bool { return ended })
}

func recordLines(rs []servedRecord) string {
	var b strings.Builder
	for i, r := range rs {
		if i >= 40 && i < len(rs)-10 {
			if i == 40 {
				fmt.Fprintf(&b, "… %d more …\n", len(rs)-50)
			}
			continue
		}
		line := string(r.line)
		if len(line) > 300 {
			line = line[:300] + "…\n"
		}
		b.WriteString(line)
	}
	return b.String()
}

// hello says hello (as line, with id "h") and returns the answer's data.
func (c *lineClient) hello(line string) helloAnswer {
	c.t.Helper()
	c.send(line)
	r := c.answer("h")
	if r.Success == nil || !*r.Success {
		c.t.Fatalf("hello %s failed: %s", line, r.line)
	}
	var a helloAnswer
	json.Unmarshal(r.Data, &a)
	return a
}

// idleCounts are the goroutines and open files of this process.
type idleCounts struct {
	goroutines, fds int
	files           []string // where the fds lead
	stacks          []byte   // every goroutine's stack, for a baseline (idleAfter, countIdle's callers leave it out)
}

func countIdle() idleCounts {
	n := -1
	var files []string
	if entries, err := os.ReadDir("/proc/self/fd"); err == nil {
		n = len(entries)
		for _, e := range entries {
			target, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
			files = append(files, e.Name()+" "+target)
		}
	}
	return idleCounts{goroutines: runtime.NumGoroutine(), fds: n, files: files}
}

// idleAfter is countIdle once the host has done what c's last command
// set going: a host_status round trip on c. A hello's answer comes before
// the session it opened is announced (its loops and MCP servers start),
// so a count taken at the answer could miss a goroutine that starts
// then, and find one more at the end than at the start.
func idleAfter(t testing.TB, c *lineClient) idleCounts {
	t.Helper()
	hostStatusOf(t, c, "settled")
	base := countIdle()
	base.stacks = allStacks() // waitIdle's failure shows it beside the stacks then
	return base
}

// waitIdle waits until the goroutines and open files are back to base
// (or fewer): whatever the attack made has gone.
func waitIdle(t testing.TB, base idleCounts) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		now := countIdle()
		if now.goroutines <= base.goroutines && now.fds <= base.fds {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not back to idle: %d goroutines (idle: %d), %d open files (idle: %d)\nfiles now: %v\nidle: %v\n%s\n---- the goroutines at idle ----\n%s",
				now.goroutines, base.goroutines, now.fds, base.fds, now.files, base.files, allStacks(), base.stacks)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitHostStatus asks c's host_status until done holds (what says what
// it waits for), for up to 20 s.
func waitHostStatus(t testing.TB, c *lineClient, what string, done func(hostStatus) bool) hostStatus {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := hostStatusOf(t, c, "status")
		if done(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("host_status never showed %s: %+v", what, st)
		}
	}
}

// hostStatusOf asks the host's status on c (attached to some session).
func hostStatusOf(t testing.TB, c *lineClient, id string) hostStatus {
	t.Helper()
	c.mu.Lock()
	c.ids++
	id = fmt.Sprintf("%s-%d", id, c.ids)
	c.mu.Unlock()
	c.send(`{"id":"` + id + `","type":"host_status"}`)
	var st hostStatus
	if err := json.Unmarshal(c.answer(id).Data, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// seqsOf are the seqs of the events among rs, in order.
func seqsOf(rs []servedRecord) []int64 {
	var seqs []int64
	for _, r := range rs {
		if r.Seq > 0 {
			seqs = append(seqs, r.Seq)
		}
	}
	return seqs
}

// sessionFiles are the bytes of every session file under dir.
func sessionFiles(t testing.TB, dir string) map[string]string {
	files := map[string]string{}
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".jsonl") {
			b, _ := os.ReadFile(path)
			files[path] = string(b)
		}
		return nil
	})
	return files
}

// ---- Bad input ----

// TestServeHostileLines: garbage, a half line then close, a line of
// exactly the limit and one past it, each on a connection of its own,
// while a victim streams a turn on another session. Each bad connection
// gets its failures; the victim's turn and stream are as if alone; the
// host comes back to idle.
func TestServeHostileLines(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"text":["warm"]}`+"\n"+`{"text":["one ","two ","three"],"holdAt":2}`, e.agentDir)
	fm.server.Config.SetKeepAlivesEnabled(false) // no second connection to the model under load in the idle count
	sh := startServe(t, e, t.TempDir(), "--model", "fake/fake-model")
	defer sh.end()
	victim := dialLines(t, sh.socket)
	victim.hello(`{"id":"h","type":"hello"}`)
	victim.send(`{"id":"w","type":"prompt","message":"Warm up"}`) // the model's connection, kept alive, is in the idle count
	victim.waitEvents("agent_settled", 1)
	base := countIdle()
	victim.send(`{"id":"p","type":"prompt","message":"Count"}`)
	victim.waitRecord("the first delta", func(r servedRecord) bool { return bytes.Contains(r.line, []byte(`"delta":"one "`)) })

	// Garbage: every kind of bad line, on one connection.
	garbage := dialLines(t, sh.socket)
	bad := []string{"\x00\x01\x02", "{", `{"type":`, `[1,2,3]`, `"just a string"`, `{"id":{"x":1},"type":"prompt"}`,
		`{"type":"prompt","message":"x"` + strings.Repeat("}", 3), "\xff\xfe{}", `{"type":"hello","attach":"` + strings.Repeat("../", 50) + `"}`,
		`{"id":"u","type":"extension_ui_response","id":"nope","confirmed":true}`, `{"id":"a","type":"session_attach","sessionId":"../../etc/passwd"}`}
	for _, line := range bad {
		garbage.send(line)
	}
	garbage.send(`{"id":"last","type":"get_state"}`)
	garbage.answer("last")
	recs, _ := garbage.snapshot()
	if failures := countFailures(recs); failures != len(bad) {
		t.Errorf("%d bad lines got %d failures:\n%s", len(bad), failures, recordLines(recs))
	}
	garbage.close()

	// A half line, then close.
	half := dialLines(t, sh.socket)
	io.WriteString(half.conn, `{"id":"x","type":"prom`)
	half.conn.(*net.UnixConn).CloseWrite()
	half.waitEnd()
	half.close()

	// A line of exactly the limit (64 MiB), then one past it.
	if !testing.Short() {
		big := dialLines(t, sh.socket)
		head := `{"id":"big","type":"get_state","pad":"`
		pad := maxLineBytes - len(head) - 2
		w := bufio.NewWriterSize(big.conn, 1<<20)
		w.WriteString(head)
		w.Write(bytes.Repeat([]byte("a"), pad))
		w.WriteString("\"}\n")
		w.WriteString(`{"id":"over","type":"get_state","pad":"`)
		w.Write(bytes.Repeat([]byte("b"), maxLineBytes))
		w.WriteString("\"}\n")
		w.WriteString(`{"id":"after","type":"get_state"}` + "\n")
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if r := big.answer("big"); r.Success == nil || !*r.Success {
			t.Errorf("a line of exactly %d bytes failed: %.300s", maxLineBytes, r.line)
		}
		big.waitRecord("the failure of the line too long", func(r servedRecord) bool {
			return r.Success != nil && !*r.Success && strings.Contains(r.Error, "longer than")
		})
		big.answer("after")
		big.close()
	}

	fm.release <- struct{}{}
	victim.waitEvents("agent_settled", 2)
	recs, _ = victim.snapshot()
	checkContiguous(t, "the victim", seqsOf(recs), 1)
	if n := countFailures(recs); n != 0 {
		t.Errorf("the victim got %d failures:\n%s", n, recordLines(recs))
	}
	waitIdle(t, base)
}

func countFailures(rs []servedRecord) int {
	n := 0
	for _, r := range rs {
		if r.Type == "response" && r.Success != nil && !*r.Success {
			n++
		}
	}
	return n
}

// checkContiguous checks that seqs are from, from+1, … without a gap or
// a repeat.
func checkContiguous(t testing.TB, who string, seqs []int64, from int64) {
	t.Helper()
	for i, s := range seqs {
		if s != from+int64(i) {
			t.Errorf("%s: seq %d at %d, want %d (seqs %v)", who, s, i, from+int64(i), seqs)
			return
		}
	}
}

// TestServeHostileSilentConnection: a connection that sends nothing
// holds no session and stops nobody; closed, it is gone.
func TestServeHostileSilentConnection(t *testing.T) {
	e := newTestEnv(t)
	sh := startServe(t, e, t.TempDir())
	defer sh.end()
	other := dialLines(t, sh.socket)
	other.hello(`{"id":"h","type":"hello"}`)
	base := idleAfter(t, other)
	silent := dialLines(t, sh.socket)
	st := waitHostStatus(t, other, "two connections", func(st hostStatus) bool { return st.Connections == 2 })
	if len(st.Sessions) != 1 {
		t.Errorf("a silent connection has a session: %+v", st)
	}
	silent.close()
	waitHostStatus(t, other, "one connection", func(st hostStatus) bool { return st.Connections == 1 })
	waitIdle(t, base)
}

// TestServeHostileConnectCycles: connections that connect and leave at
// once, many times over, some sending a line, leave nothing behind.
func TestServeHostileConnectCycles(t *testing.T) {
	e := newTestEnv(t)
	sh := startServe(t, e, t.TempDir())
	defer sh.end()
	other := dialLines(t, sh.socket)
	other.hello(`{"id":"h","type":"hello"}`)
	base := idleAfter(t, other)
	cycles := 10000
	if testing.Short() || raceDetector {
		cycles = 2000
	}
	for i := range cycles {
		conn, err := net.Dial("unix", sh.socket)
		for tries := 0; errors.Is(err, syscall.EAGAIN) && tries < 5000; tries++ {
			time.Sleep(time.Millisecond) // the listen queue is full: the host accepts slower than this loop connects
			conn, err = net.Dial("unix", sh.socket)
		}
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if i%3 == 1 {
			io.WriteString(conn, "garbage") // a half line too
		}
		conn.Close()
	}
	waitHostStatus(t, other, "one connection", func(st hostStatus) bool { return st.Connections == 1 })
	waitIdle(t, base)
}

// TestServeHostileSessionsExhausted: clients that each send one line and
// leave (a session opened for each, as for a connection without hello)
// must not leave the host unable to open a session for the next client
// for --idle-close: a session no client watches and nothing runs in
// makes room for a new one.
func TestServeHostileSessionsExhausted(t *testing.T) {
	e := newTestEnv(t)
	sh := startServe(t, e, t.TempDir())
	defer sh.end()
	for i := range maxSessions + 1 {
		c := dialLines(t, sh.socket)
		c.send(`{"id":"x","type":"get_state"}`)
		if r := c.waitRecord("an answer", func(r servedRecord) bool { return r.Type == "response" }); r.Success == nil || !*r.Success {
			t.Fatalf("client %d, after %d that sent one line and left: %s", i+1, i, r.line)
		}
		c.close()
	}
	c := dialLines(t, sh.socket)
	c.send(`{"id":"h","type":"hello"}`)
	if r := c.answer("h"); r.Success == nil || !*r.Success {
		t.Errorf("after %d clients that sent one line and left, a new client cannot open a session: %s", maxSessions+1, r.line)
	}
}

// TestServeHostileNoRoomForASession: while every session the host may
// hold is watched, a connection whose first line is a command (no hello)
// is refused with one line saying why, then closed; the others go on.
func TestServeHostileNoRoomForASession(t *testing.T) {
	e := newTestEnv(t)
	sh := startServe(t, e, t.TempDir())
	defer sh.end()
	var held []*lineClient
	for range maxSessions {
		c := dialLines(t, sh.socket)
		c.hello(`{"id":"h","type":"hello"}`)
		held = append(held, c)
	}
	c := dialLines(t, sh.socket)
	c.send(`{"id":"x","type":"get_state"}`)
	recs := c.waitEnd()
	if len(recs) != 1 || recs[0].Command != "connect" || !strings.Contains(recs[0].Error, "Too many sessions") {
		t.Errorf("a connection with no room for its session read:\n%s", recordLines(recs))
	}
	if st := hostStatusOf(t, held[0], "s"); len(st.Sessions) != maxSessions {
		t.Errorf("sessions: %d", len(st.Sessions))
	}
}

// TestServeHostileACPFirstLine: a connection whose first line is
// JSON-RPC (ACP's initialize, which has no "type") is served as ACP, and
// refused in ACP's shape past --max-connections.
func TestServeHostileACPFirstLine(t *testing.T) {
	sh := startServe(t, newTestEnv(t), t.TempDir())
	defer sh.end()
	c := dialLines(t, sh.socket)
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	r := c.waitRecord("an answer", func(r servedRecord) bool { return r.Type == "response" || string(r.ID) == "0" })
	if !bytes.Contains(r.line, []byte(`"jsonrpc":"2.0"`)) || !bytes.Contains(r.line, []byte(`"protocolVersion":1`)) {
		t.Errorf("initialize was answered %s", r.line)
	}
	if recs, _ := c.snapshot(); slices.ContainsFunc(recs, func(r servedRecord) bool { return r.Type == "session_started" }) {
		t.Errorf("an ACP connection was served as rpc:\n%s", recordLines(recs))
	}
}

// ---- A client that does not read ----

// TestServeHostileNeverReads: a client that reads nothing while its
// session streams is detached as slow; the turn and the other clients do
// not wait for it; when it reads at last it gets what was queued, then
// the detached record whose cursor is the seq of the last event it got,
// and coming back with that cursor it misses nothing.
func TestServeHostileNeverReads(t *testing.T) {
	e := newTestEnv(t)
	// The lazy client starts reading a turn after it is detached: it gets
	// a minute for that, not rpi's 5 s, which a loaded machine (-race)
	// could take; TestClientQueueStuckWriteEnds checks the limit itself.
	e.finishWrites = time.Minute
	deltas := make([]string, 500)
	for i := range deltas {
		deltas[i] = fmt.Sprintf("%04d ", i)
	}
	script, _ := json.Marshal(map[string]any{"text": deltas})
	fm := startFakeModel(t, apiOpenAI, string(script), e.agentDir)
	fm.server.Config.SetKeepAlivesEnabled(false) // no second connection to the model under load in the idle count
	fm.cycle = true
	sh := startServe(t, e, t.TempDir(), "--model", "fake/fake-model", "--client-queue", "256KiB", "--replay-bytes", "256MiB")
	defer sh.end()
	ctl := dialLines(t, sh.socket)
	id := ctl.hello(`{"id":"h","type":"hello"}`).SessionID
	ctl.waitEvents("session_started", 1)

	// The client that never reads: its hello is read by hand, then nothing.
	lazy := dialLinesPaused(t, sh.socket)
	io.WriteString(lazy.conn, `{"id":"h","type":"hello","attach":"`+id+`","cursor":1}`+"\n")
	watcher := dialLines(t, sh.socket)
	watcher.hello(`{"id":"h","type":"hello","attach":"` + id + `","role":"observer"}`)

	// Turns until the lazy client is detached: the turns and the others
	// do not wait for it.
	deadline := time.Now().Add(30 * time.Second) // it is behind once it has taken nothing for clientStall with --client-queue waiting
	for turn := 1; ; turn++ {
		ctl.send(fmt.Sprintf(`{"id":"p%d","type":"prompt","message":"Stream"}`, turn))
		ctl.waitEvents("agent_settled", turn)
		watcher.waitEvents("agent_settled", turn)
		var clients int
		for _, s := range hostStatusOf(t, ctl, "s").Sessions {
			clients = s.Clients
		}
		if clients == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a client that reads nothing was never detached (%d turns)", turn)
		}
	}
	last := seqsOf(ctl.waitEvents2("agent_settled"))
	final := last[len(last)-1]

	lazy.start()
	recs := lazy.waitEnd()
	lazy.mu.Lock()
	if len(lazy.bad) > 0 {
		t.Errorf("the slow client read lines that are not records: %.300q", lazy.bad)
	}
	lazy.mu.Unlock()
	if len(recs) == 0 || recs[len(recs)-1].Type != "detached" {
		t.Fatalf("the slow client's last record is no detached record:\n%s", recordLines(recs))
	}
	var detached struct {
		Reason string
		Cursor int64
	}
	json.Unmarshal(recs[len(recs)-1].Data, &detached)
	seqs := seqsOf(recs)
	checkContiguous(t, "the slow client", seqs, 2)
	gotLast := int64(1)
	if len(seqs) > 0 {
		gotLast = seqs[len(seqs)-1]
	}
	if detached.Reason != "slow" || detached.Cursor != gotLast {
		t.Errorf("detached %s; the last event it got was %d", recs[len(recs)-1].line, gotLast)
	}
	if gotLast >= final {
		t.Fatalf("the slow client got every event (%d): it was never slow", final)
	}

	base := countIdle() // the slow client's connection is gone by now, or going
	back := dialLines(t, sh.socket)
	a := back.hello(fmt.Sprintf(`{"id":"h","type":"hello","attach":"%s","cursor":%d}`, id, detached.Cursor))
	if a.Resync || a.Cursor != final {
		t.Errorf("coming back with cursor %d: %+v, want cursor %d without resync", detached.Cursor, a, final)
	}
	rest, _ := back.snapshot()
	checkContiguous(t, "the slow client come back", seqsOf(rest), detached.Cursor+1)
	if s := seqsOf(rest); len(s) == 0 || s[len(s)-1] != final {
		t.Errorf("coming back, the replay ends at %v, want %d", s, final)
	}
	back.close()
	waitIdle(t, base)
}

// waitEvents2 waits for an event of type typ and returns the records.
func (c *lineClient) waitEvents2(typ string) []servedRecord {
	return c.waitUntil(typ, func(rs []servedRecord, _ bool) bool {
		return slices.ContainsFunc(rs, func(r servedRecord) bool { return r.Type == typ })
	})
}

// TestServeHostileBigEventFastReader: a record bigger than --client-queue
// (the answer to a bash command, which carries its output, cut to 50 KB,
// twice: about 100 KiB against a 64 KiB queue) reaches a client that
// reads as fast as it comes, and the client is not detached. All the
// command sends (its streamed output besides) stays under four times the
// queue, so no scheduling of rpi's writer can make the client look
// behind. A long answer's events carry its text five times
// (message_update, text_end, message_end, turn_end, agent_end): past four
// times the queue a client is detached whatever it reads, the documented
// bound, so an answer of 70 KiB made this test fail when a loaded machine
// left rpi's writer unscheduled for the burst.
func TestServeHostileBigEventFastReader(t *testing.T) {
	e := newTestEnv(t)
	sh := startServe(t, e, t.TempDir(), "--client-queue", "64KiB")
	defer sh.end()
	c := dialLines(t, sh.socket)
	c.hello(`{"id":"h","type":"hello"}`)
	c.send(`{"id":"b","type":"bash","command":"head -c 70000 /dev/zero | tr '\\0' x"}`)
	if answer := c.answer("b"); len(answer.Data) <= 64<<10 {
		t.Fatalf("the answer is %d bytes, not bigger than the queue: %.200s", len(answer.Data), answer.Data)
	}
	recs, _ := c.snapshot()
	if i := slices.IndexFunc(recs, func(r servedRecord) bool { return r.Type == "detached" }); i >= 0 {
		t.Errorf("a client reading as fast as it can was detached: %s", recs[i].line)
	}
}

// ---- Coming back ----

// TestServeHostileReplayKills: a client killed at random points of a
// stream of turns, 200 times, each time back with the seq of the last
// event it saw, misses no event and sees none twice, byte for byte what
// a client that stayed saw; its attaching races the live events.
func TestServeHostileReplayKills(t *testing.T) {
	t.Run("rpi", func(t *testing.T) { replayKills(t, "rpi", 200) })
	t.Run("pi", func(t *testing.T) { replayKills(t, "pi", 100) })
}

// replayKills is TestServeHostileReplayKills with every client in the
// shapes of compat.
func replayKills(t *testing.T, compat string, kills int) {
	e := newTestEnv(t)
	words := make([]string, 40)
	for i := range words {
		words[i] = fmt.Sprintf("w%02d ", i)
	}
	script, _ := json.Marshal(map[string]any{"text": words})
	fm := startFakeModel(t, apiOpenAI, string(script), e.agentDir)
	fm.cycle = true
	// No connection to the model outlives its answer: under load rpi's
	// HTTP client may open a second one, which the idle count would take
	// for a connection of rpi serve's left behind.
	fm.server.Config.SetKeepAlivesEnabled(false)
	sh := startServe(t, e, t.TempDir(), "--model", "fake/fake-model", "--replay-bytes", "256MiB")
	defer sh.end()
	stay := dialLines(t, sh.socket)
	id := stay.hello(`{"id":"h","type":"hello","compat":"` + compat + `"}`).SessionID

	stay.send(`{"id":"p0","type":"prompt","message":"Warm up"}`)
	stay.waitEvents("agent_settled", 1)
	base := countIdle()
	quit := make(chan struct{})
	prompting := make(chan int)
	go func() { // turns, one after another, until quit
		turns := 1
		for {
			select {
			case <-quit:
				prompting <- turns
				return
			default:
			}
			turns++
			stay.send(fmt.Sprintf(`{"id":"p%d","type":"prompt","message":"Turn %d"}`, turns, turns))
			stay.waitEvents("agent_settled", turns)
		}
	}()

	if testing.Short() {
		kills /= 4
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var seen []servedRecord
	cursor := int64(0)
	for i := range kills {
		c := dialLines(t, sh.socket)
		c.send(fmt.Sprintf(`{"id":"h","type":"hello","compat":"%s","attach":"%s","cursor":%d}`, compat, id, cursor))
		n := rng.IntN(60)
		c.waitUntil(fmt.Sprintf("%d records", n), func(rs []servedRecord, _ bool) bool { return len(rs) >= n })
		c.close()
		recs, _ := c.snapshot()
		sent := cursor        // the cursor this hello sent
		answered := int64(-1) // the answer's cursor, once it came
		for _, r := range recs {
			if r.Type == "response" && r.Command == "hello" {
				var a helloAnswer
				json.Unmarshal(r.Data, &a)
				if r.Success == nil || !*r.Success || a.Resync {
					t.Fatalf("kill %d: hello with cursor %d: %s", i, sent, r.line)
				}
				if a.Cursor < sent {
					t.Fatalf("kill %d: hello with cursor %d answered cursor %d", i, sent, a.Cursor)
				}
				answered = a.Cursor
			}
			if r.Seq > 0 && answered >= 0 && r.Seq <= answered {
				t.Fatalf("kill %d: seq %d after the answer, whose cursor is %d: the replay is not all before it", i, r.Seq, answered)
			}
			if r.Seq > 0 {
				seen = append(seen, r)
				cursor = r.Seq
			}
		}
	}
	close(quit)
	turns := <-prompting
	stay.waitEvents("agent_settled", turns)
	all := seqsOf(stay.waitEvents2("agent_settled"))
	final := all[len(all)-1]
	c := dialLines(t, sh.socket)
	c.send(fmt.Sprintf(`{"id":"h","type":"hello","compat":"%s","attach":"%s","cursor":%d}`, compat, id, cursor))
	recs := c.waitUntil("the last event", func(rs []servedRecord, _ bool) bool {
		s := seqsOf(rs)
		return len(s) > 0 && s[len(s)-1] >= final || cursor == final
	})
	for _, r := range recs {
		if r.Seq > 0 {
			seen = append(seen, r)
		}
	}
	checkContiguous(t, "the client killed and back", seqsOf(seen), 1)
	stayed, _ := stay.snapshot()
	bySeq := map[int64][]byte{}
	for _, r := range stayed {
		if r.Seq > 0 {
			bySeq[r.Seq] = r.line
		}
	}
	for _, r := range seen {
		if !bytes.Equal(bySeq[r.Seq], r.line) {
			t.Errorf("seq %d: the client back got\n%s the one that stayed\n%s", r.Seq, r.line, bySeq[r.Seq])
			break
		}
	}
	c.close()
	waitIdle(t, base)
	t.Logf("%d turns, %d events, %d kills", turns, final, kills)
}

// TestServeHostileCursors: attaching with cursors 0, -1, past any seq,
// the latest seq exactly and one past it.
func TestServeHostileCursors(t *testing.T) {
	e := newTestEnv(t)
	e.vars["PI_FAUX_RESPONSE"] = "Fine."
	sh := startServe(t, e, t.TempDir(), "--model", "faux/faux-1")
	defer sh.end()
	a := dialLines(t, sh.socket)
	id := a.hello(`{"id":"h","type":"hello"}`).SessionID
	a.send(`{"id":"p","type":"prompt","message":"Hi"}`)
	a.waitEvents("agent_settled", 1)
	latest := seqsOf(a.waitEvents2("agent_settled"))
	top := latest[len(latest)-1]
	for _, tt := range []struct {
		cursor string
		ok     bool
		resync bool
		from   int64 // first seq replayed (0: none)
	}{
		{"0", true, false, 1},
		{"-1", false, false, 0},
		{"9007199254740992", true, true, 0},
		{"9007199254740993", false, false, 0},
		{"18446744073709551616", false, false, 0},
		{"1e400", false, false, 0},
		{"1.5", false, false, 0},
		{`"3"`, false, false, 0},
		{"null", true, false, 0}, // as if absent
		{fmt.Sprint(top), true, false, 0},
		{fmt.Sprint(top - 1), true, false, top},
		{fmt.Sprint(top + 1), true, true, 0},
	} {
		c := dialLines(t, sh.socket)
		c.send(fmt.Sprintf(`{"id":"h","type":"hello","attach":"%s","cursor":%s}`, id, tt.cursor))
		r := c.answer("h")
		recs, _ := c.snapshot()
		c.close()
		if r.Success == nil || *r.Success != tt.ok {
			t.Errorf("cursor %s: %s", tt.cursor, r.line)
			continue
		}
		seqs := seqsOf(recs)
		if !tt.ok {
			if len(seqs) > 0 {
				t.Errorf("cursor %s refused, yet replayed %v", tt.cursor, seqs)
			}
			continue
		}
		var ans helloAnswer
		json.Unmarshal(r.Data, &ans)
		if ans.Resync != tt.resync || ans.Cursor != top {
			t.Errorf("cursor %s: %s, want cursor %d, resync %v", tt.cursor, r.Data, top, tt.resync)
		}
		if tt.from == 0 && len(seqs) > 0 || tt.from > 0 && (len(seqs) == 0 || seqs[0] != tt.from || seqs[len(seqs)-1] != top) {
			t.Errorf("cursor %s: replayed %v", tt.cursor, seqs)
		}
		checkContiguous(t, "cursor "+tt.cursor, seqs, tt.from)
	}
	// The first connection is as it was: nothing more came to it.
	a.send(`{"id":"s","type":"get_state"}`)
	a.answer("s")
	if s := seqsOf(a.waitEvents2("agent_settled")); s[len(s)-1] != top {
		t.Errorf("attaching others sent the first client events: %v", s)
	}
}

// ---- Roles and dialogs ----

// TestServeHostileObserver: an observer sends every command that changes
// something, and each fails; the session, its file and its other client
// are as they were.
func TestServeHostileObserver(t *testing.T) {
	e := newTestEnv(t)
	e.vars["PI_FAUX_RESPONSE"] = "Fine."
	sh := startServe(t, e, t.TempDir(), "--model", "faux/faux-1")
	defer sh.end()
	ctl := dialLines(t, sh.socket)
	id := ctl.hello(`{"id":"h","type":"hello"}`).SessionID
	ctl.send(`{"id":"p","type":"prompt","message":"Hi"}`)
	ctl.waitEvents("agent_settled", 1)
	ctl.send(`{"id":"s1","type":"get_state"}`)
	before := ctl.answer("s1")
	files := sessionFiles(t, e.agentDir)
	if len(files) == 0 {
		t.Fatal("no session file")
	}
	seqBefore := seqsOf(ctl.waitEvents2("agent_settled"))

	obs := dialLines(t, sh.socket)
	obs.hello(`{"id":"h","type":"hello","attach":"` + id + `","role":"observer"}`)
	var commands []string
	for name := range rpcCommands() {
		if !mayObserve(name) {
			commands = append(commands, name)
		}
	}
	slices.Sort(commands)
	for i, name := range commands {
		obs.send(fmt.Sprintf(`{"id":"o%d","type":%q,"message":"x","sessionPath":"/tmp/x","command":"true","name":"x","entryId":"x","level":"high","provider":"faux","modelId":"faux-1","id2":"x"}`, i, name))
	}
	for i, name := range commands {
		r := obs.answer(fmt.Sprintf("o%d", i))
		if r.Success == nil || *r.Success || r.Error != errObserver.Error() {
			t.Errorf("an observer's %s: %s", name, r.line)
		}
	}
	ctl.send(`{"id":"s2","type":"get_state"}`)
	if after := ctl.answer("s2"); !bytes.Equal(after.Data, before.Data) {
		t.Errorf("the state changed:\n%s\n%s", before.Data, after.Data)
	}
	if after := sessionFiles(t, e.agentDir); !mapsEqual(after, files) {
		t.Errorf("the session files changed")
	}
	if s := seqsOf(ctl.waitEvents2("agent_settled")); len(s) != len(seqBefore) {
		t.Errorf("the controller got events: %v", s[len(seqBefore):])
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestServeHostileDialogRace: two controllers answer one dialog at the
// same moment, many times over: exactly one answer wins each time, the
// loser is told it is settled and its answer fails, and the model is
// given the winner's.
func TestServeHostileDialogRace(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"call_1","name":"bash","args":["{\"command\":\"echo approved\"}"]}]}`+"\n"+`{"text":["Done."]}`, e.agentDir)
	fm.cycle = true
	os.WriteFile(filepath.Join(e.agentDir, "settings.json"), []byte(`{"retry":{"baseDelayMs":1},"confirmTimeoutMs":60000}`), 0o644)
	sh := startServe(t, e, t.TempDir(), "--model", "fake/fake-model", "--confirm", "bash")
	defer sh.end()
	a := dialLines(t, sh.socket)
	id := a.hello(`{"id":"h","type":"hello"}`).SessionID
	b := dialLines(t, sh.socket)
	b.hello(`{"id":"h","type":"hello","attach":"` + id + `"}`)
	rounds := 30
	if testing.Short() {
		rounds = 5
	}
	for round := 1; round <= rounds; round++ {
		a.send(fmt.Sprintf(`{"id":"p%d","type":"prompt","message":"Run it"}`, round))
		var dialog string
		for _, c := range []*lineClient{a, b} {
			c.waitUntil("the dialog", func(rs []servedRecord, _ bool) bool {
				n := 0
				for _, r := range rs {
					if r.Type == "extension_ui_request" && r.Method == "confirm" {
						n++
						json.Unmarshal(r.ID, &dialog)
					}
				}
				return n >= round
			})
		}
		go1 := make(chan struct{})
		var wg sync.WaitGroup
		for i, c := range []*lineClient{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-go1
				c.send(fmt.Sprintf(`{"id":"r%d","type":"extension_ui_response","id":%q,"confirmed":%v}`, round, dialog, i == 0))
			}()
		}
		close(go1)
		wg.Wait()
		a.waitEvents("agent_settled", round)
		b.waitEvents("agent_settled", round)
		// Each client's records about this dialog: a failure of its answer,
		// a settled notice.
		var failed, settled [2]bool
		for i, c := range []*lineClient{a, b} {
			c.send(fmt.Sprintf(`{"id":"sync%d","type":"get_state"}`, round)) // after any answer to its response
			c.answer(fmt.Sprintf("sync%d", round))
			recs, _ := c.snapshot()
			for _, r := range recs {
				if r.Type == "extension_ui_settled" && bytes.Contains(r.Data, []byte(dialog)) {
					settled[i] = true
				}
				if r.Type == "response" && r.Command == "extension_ui_response" && bytes.Contains(r.line, []byte(dialog)) {
					failed[i] = true
				}
			}
		}
		if failed[0] == failed[1] || settled[0] != failed[0] || settled[1] != failed[1] {
			t.Fatalf("round %d: answers failed %v, told settled %v: exactly one must win", round, failed, settled)
		}
		winner := 0
		if failed[0] {
			winner = 1
		}
		// The model was given the winner's answer: a's is yes, b's no.
		recs, _ := a.snapshot()
		var ends []servedRecord
		for _, r := range recs {
			if r.Type == "tool_execution_end" {
				ends = append(ends, r)
			}
		}
		if len(ends) != round {
			t.Fatalf("round %d: %d tool calls ended", round, len(ends))
		}
		denied := bytes.Contains(ends[round-1].line, []byte("Denied by user"))
		if denied != (winner == 1) {
			t.Fatalf("round %d: the %s answer won, yet the tool call ended %s", round, []string{"yes", "no"}[winner], ends[round-1].line)
		}
	}
}

// ---- The socket ----

// TestServeHostileSecondHost: a second host on the socket of a live one
// fails to start (one line, exit 1); the first goes on, its client
// untouched.
func TestServeHostileSecondHost(t *testing.T) {
	e := newTestEnv(t)
	sh := startServe(t, e, t.TempDir())
	defer sh.end()
	c := dialLines(t, sh.socket)
	c.hello(`{"id":"h","type":"hello"}`)
	var stderr bytes.Buffer
	code := runProgram([]string{"serve", "--listen", "unix:" + sh.socket, "--cwd", sh.cwd}, newTestEnv(t).env(), strings.NewReader(""), io.Discard, &stderr, make(chan os.Signal, 1))
	if want := "rpi: another rpi serve listens on " + sh.socket + "\n"; code != 1 || stderr.String() != want {
		t.Errorf("a second host: exit %d, stderr %q; want 1 and %q", code, stderr.String(), want)
	}
	if st := hostStatusOf(t, c, "s"); len(st.Sessions) != 1 {
		t.Errorf("the first host after a second tried: %+v", st)
	}
	if _, err := os.Lstat(sh.socket); err != nil {
		t.Errorf("the socket is gone: %v", err)
	}
	c2 := dialLines(t, sh.socket)
	c2.hello(`{"id":"h","type":"hello"}`)
}

// TestServeHostileStaleSocket: a socket file no one listens on is
// replaced.
func TestServeHostileStaleSocket(t *testing.T) {
	socket := filepath.Join(shortSocketDir(t), "rpi.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Lstat(socket); err != nil {
		t.Fatal("no stale socket to test with")
	}
	sh := startServeAt(t, newTestEnv(t), t.TempDir(), socket)
	defer sh.end()
	c := dialLines(t, sh.socket)
	c.hello(`{"id":"h","type":"hello"}`)
}

// TestServeHostileSocketPlaces: a directory others may write to, one
// another user owns (as root), a path that is a plain file or a symlink
// to a socket: each refused at startup with one line, exit 1, and the
// file there left as it was.
func TestServeHostileSocketPlaces(t *testing.T) {
	open := shortSocketDir(t)
	os.Chmod(open, 0o777)
	groupW := shortSocketDir(t)
	os.Chmod(groupW, 0o770)
	plain := filepath.Join(shortSocketDir(t), "rpi.sock")
	os.WriteFile(plain, []byte("mine"), 0o600)
	live := startServe(t, newTestEnv(t), t.TempDir())
	defer live.end()
	link := filepath.Join(shortSocketDir(t), "rpi.sock")
	os.Symlink(live.socket, link)
	cases := map[string]string{
		filepath.Join(open, "rpi.sock"):   "group or others may write to it",
		filepath.Join(groupW, "rpi.sock"): "group or others may write to it",
		plain:                             "is not a socket",
		link:                              "is not a socket",
	}
	if os.Geteuid() == 0 {
		other := shortSocketDir(t)
		os.Chown(other, 65534, 65534)
		cases[filepath.Join(other, "rpi.sock")] = "belongs to another user"
	}
	for socket, want := range cases {
		var stderr bytes.Buffer
		code := runProgram([]string{"serve", "--listen", "unix:" + socket, "--cwd", t.TempDir()}, newTestEnv(t).env(), strings.NewReader(""), io.Discard, &stderr, make(chan os.Signal, 1))
		if code != 1 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and one line saying %q", socket, code, stderr.String(), want)
		}
	}
	if b, _ := os.ReadFile(plain); string(b) != "mine" {
		t.Errorf("the plain file was changed")
	}
	if target, _ := os.Readlink(link); target != live.socket {
		t.Errorf("the symlink was changed")
	}
	c := dialLines(t, live.socket)
	c.hello(`{"id":"h","type":"hello"}`)
}

// TestServeHostileTooManyConnections: past --max-connections, a
// connection gets one refusal line in its first line's wire (rpc's, or
// ACP's) and is closed; the connections served are not touched.
func TestServeHostileTooManyConnections(t *testing.T) {
	e := newTestEnv(t)
	sh := startServe(t, e, t.TempDir(), "--max-connections", "2")
	defer sh.end()
	a := dialLines(t, sh.socket)
	a.hello(`{"id":"h","type":"hello"}`)
	b := dialLines(t, sh.socket)
	b.hello(`{"id":"h","type":"hello"}`)
	idleAfter(t, a)
	base := idleAfter(t, b)
	for _, tt := range []struct{ first, want string }{
		{`{"id":"h","type":"hello"}`, `{"type":"response","command":"connect","success":false,"error":"Too many connections"}`},
		{`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Too many connections"}}`},
		{"", `{"type":"response","command":"connect","success":false,"error":"Too many connections"}`},
		{"\x00garbage", `{"type":"response","command":"connect","success":false,"error":"Too many connections"}`},
	} {
		conn, err := net.Dial("unix", sh.socket)
		if err != nil {
			t.Fatal(err)
		}
		if tt.first != "" {
			io.WriteString(conn, tt.first+"\n")
		}
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		got, err := io.ReadAll(conn)
		conn.Close()
		if string(got) != tt.want+"\n" {
			t.Errorf("first line %q: got %q (%v), want %s", tt.first, got, err, tt.want)
		}
	}
	for _, c := range []*lineClient{a, b} {
		if st := hostStatusOf(t, c, "s"); st.Connections != 2 {
			t.Errorf("connections: %+v", st)
		}
	}
	waitIdle(t, base)
}

func init() {
	// serve-dial SOCKET: connect, say hello, print what comes back (or
	// why no connection was made).
	helpers["serve-dial"] = func(args []string) {
		conn, err := net.Dial("unix", args[0])
		if err != nil {
			fmt.Printf("dial: %v\n", err)
			return
		}
		io.WriteString(conn, `{"id":"h","type":"hello"}`+"\n")
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		got, err := io.ReadAll(conn)
		fmt.Printf("read %q: %v\n", got, err)
	}
}

// TestServeHostileOtherUser: a client running as another user (nobody)
// is refused: the socket's directory and mode keep it out, and with them
// opened up, its credentials do; it is answered nothing.
func TestServeHostileOtherUser(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("peer credentials are checked on Linux")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another user (nobody)")
	}
	dir, binary := copyForNobody(t, "rpi.test")
	e := newTestEnv(t)
	sh := startServe(t, e, t.TempDir())
	defer sh.end()
	owner := dialLines(t, sh.socket)
	owner.hello(`{"id":"h","type":"hello"}`)
	dial := func() string {
		cmd := exec.Command(binary, sh.socket)
		cmd.Env = []string{"RPI_HELPER=serve-dial"}
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the helper as nobody: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := dial(); !strings.Contains(out, "dial:") || !strings.Contains(out, "permission denied") {
		t.Errorf("nobody, through a private directory: %s", out)
	}
	os.Chmod(filepath.Dir(sh.socket), 0o755)
	os.Chmod(sh.socket, 0o666)
	if out := dial(); !strings.HasPrefix(out, `read "": `) {
		t.Errorf("nobody, with the socket opened to all: %s", out)
	}
	if !strings.Contains(string(sh.stderr.bytes()), "refused a connection from another user") {
		t.Errorf("no word of the refusal on stderr:\n%s", sh.stderr.bytes())
	}
	if st := hostStatusOf(t, owner, "s"); len(st.Sessions) != 1 || st.Connections != 1 {
		t.Errorf("after nobody tried: %+v", st)
	}
}

// ---- The end, and idle sessions ----

// TestServeHostileSIGTERMDuringTurn: SIGTERM while a turn streams to
// clients: rpi serve exits 0, the socket removed, the session file
// written (the user's message in it, every line whole).
func TestServeHostileSIGTERMDuringTurn(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"text":["one ","two"],"holdAt":2}`, e.agentDir)
	sh := startServe(t, e, t.TempDir(), "--model", "fake/fake-model")
	a := dialLines(t, sh.socket)
	id := a.hello(`{"id":"h","type":"hello"}`).SessionID
	b := dialLines(t, sh.socket)
	b.hello(`{"id":"h","type":"hello","attach":"` + id + `","role":"observer"}`)
	lazy := dialLinesPaused(t, sh.socket)
	io.WriteString(lazy.conn, `{"id":"h","type":"hello","attach":"`+id+`"}`+"\n")
	a.send(`{"id":"p","type":"prompt","message":"Remember the walrus"}`)
	b.waitRecord("the first delta", func(r servedRecord) bool { return bytes.Contains(r.line, []byte(`"delta":"one "`)) })
	start := time.Now()
	sh.end()
	t.Logf("rpi serve ended %v after SIGTERM", time.Since(start))
	a.waitEnd()
	b.waitEnd()
	files := sessionFiles(t, e.agentDir)
	found := false
	for path, content := range files {
		for _, line := range strings.SplitAfter(content, "\n") {
			if line == "" {
				continue
			}
			if !strings.HasSuffix(line, "\n") || !json.Valid([]byte(line)) {
				t.Errorf("%s: a line not whole: %q", path, line)
			}
		}
		found = found || strings.Contains(content, "Remember the walrus")
	}
	if !found {
		t.Errorf("the session file does not hold the prompt: %v", files)
	}
}

// TestServeHostileIdleCloseWhileBusy: a session no client watches is not
// closed while a turn runs, while a dialog waits for a controller, or
// while a process of the user's runs; once it is done it is.
func TestServeHostileIdleCloseWhileBusy(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"text":["one ","two"],"holdAt":2}`+"\n"+
		`{"toolCalls":[{"id":"call_1","name":"bash","args":["{\"command\":\"echo approved\"}"]}]}`+"\n"+`{"text":["Done."]}`, e.agentDir)
	os.WriteFile(filepath.Join(e.agentDir, "settings.json"), []byte(`{"retry":{"baseDelayMs":1},"confirmTimeoutMs":600000}`), 0o644)
	sh := startServe(t, e, t.TempDir(), "--model", "fake/fake-model", "--confirm", "bash", "--idle-close", "20ms")
	defer sh.end()
	status := dialLines(t, sh.socket)
	status.hello(`{"id":"h","type":"hello"}`)
	statusRound := 0
	live := func(id string) bool {
		statusRound++
		for _, s := range hostStatusOf(t, status, fmt.Sprintf("s%d", statusRound)).Sessions {
			if s.SessionID == id {
				return true
			}
		}
		return false
	}
	// stays checks that id stays live for many sweeps (every 10 ms).
	stays := func(what, id string) {
		t.Helper()
		for start := time.Now(); time.Since(start) < 500*time.Millisecond; {
			if !live(id) {
				t.Fatalf("the session was closed while %s", what)
			}
		}
	}
	closes := func(what, id string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); live(id); {
			if time.Now().After(deadline) {
				t.Fatalf("the session was never closed after %s", what)
			}
		}
	}

	// A turn.
	a := dialLines(t, sh.socket)
	id := a.hello(`{"id":"h","type":"hello"}`).SessionID
	a.send(`{"id":"p","type":"prompt","message":"Go"}`)
	a.waitRecord("the first delta", func(r servedRecord) bool { return bytes.Contains(r.line, []byte(`"delta":"one "`)) })
	a.close()
	stays("a turn ran", id)
	fm.release <- struct{}{}
	closes("its turn", id)

	// A dialog with no controller.
	b := dialLines(t, sh.socket)
	id = b.hello(`{"id":"h","type":"hello"}`).SessionID
	b.send(`{"id":"p","type":"prompt","message":"Run it"}`)
	b.waitRecord("the dialog", func(r servedRecord) bool { return r.Method == "confirm" })
	b.close()
	stays("a dialog waited", id)
	c := dialLines(t, sh.socket)
	c.hello(`{"id":"h","type":"hello","attach":"` + id + `"}`)
	d := c.waitRecord("the dialog again", func(r servedRecord) bool { return r.Method == "confirm" })
	c.send(`{"type":"extension_ui_response","id":` + string(d.ID) + `,"confirmed":true}`)
	c.waitEvents("agent_settled", 1)
	c.close()
	closes("its dialog", id)

	// A process of the user's.
	p := dialLines(t, sh.socket)
	id = p.hello(`{"id":"h","type":"hello"}`).SessionID
	p.send(`{"id":"b","type":"bash","command":"echo started; exec sleep 3600"}`)
	p.waitRecord("the command's start", func(r servedRecord) bool { return bytes.Contains(r.line, []byte("started")) })
	p.close()
	stays("a command ran", id)
	q := dialLines(t, sh.socket)
	q.hello(`{"id":"h","type":"hello","attach":"` + id + `"}`)
	q.send(`{"id":"x","type":"abort_bash"}`)
	q.answer("x")
	q.close()
	closes("its command", id)
}

// ---- Session changes while another client watches ----

// TestServeHostileSessionChangesWatched: new_session, clone and fork by
// one client of a session another watches move that client only; the
// watcher's session, stream and file are untouched.
func TestServeHostileSessionChangesWatched(t *testing.T) {
	e := newTestEnv(t)
	e.vars["PI_FAUX_RESPONSE"] = "Fine."
	sh := startServe(t, e, t.TempDir(), "--model", "faux/faux-1")
	defer sh.end()
	a := dialLines(t, sh.socket)
	id := a.hello(`{"id":"h","type":"hello"}`).SessionID
	a.send(`{"id":"p","type":"prompt","message":"Hi"}`)
	a.waitEvents("agent_settled", 1)
	w := dialLines(t, sh.socket)
	w.hello(`{"id":"h","type":"hello","attach":"` + id + `","role":"observer"}`)
	files := sessionFiles(t, e.agentDir)
	a.send(`{"id":"m","type":"get_messages"}`)
	var msgs struct{ Messages []json.RawMessage }
	json.Unmarshal(a.answer("m").Data, &msgs)
	for i, change := range []string{`{"id":"c%d","type":"clone"}`, `{"id":"c%d","type":"new_session"}`} {
		if i > 0 {
			a.send(`{"id":"back","type":"session_attach","sessionId":"` + id + `"}`)
			a.answer("back")
		}
		a.send(fmt.Sprintf(change, i))
		if r := a.answer(fmt.Sprintf("c%d", i)); r.Success == nil || !*r.Success {
			t.Fatalf("%s: %s", change, r.line)
		}
		a.send(fmt.Sprintf(`{"id":"st%d","type":"get_state"}`, i))
		var state struct{ SessionID string }
		json.Unmarshal(a.answer(fmt.Sprintf("st%d", i)).Data, &state)
		if state.SessionID == id || state.SessionID == "" {
			t.Errorf("%s: the client is still on the watched session", change)
		}
		a.send(fmt.Sprintf(`{"id":"p%d","type":"prompt","message":"Elsewhere"}`, i))
		a.waitEvents("agent_settled", 2+i)
	}
	w.send(`{"id":"s","type":"get_state"}`)
	var state struct{ SessionID string }
	json.Unmarshal(w.answer("s").Data, &state)
	if state.SessionID != id {
		t.Errorf("the watcher was moved to %s", state.SessionID)
	}
	recs, _ := w.snapshot()
	if s := seqsOf(recs); len(s) > 0 {
		t.Errorf("the watcher got events of other sessions: %s", recordLines(recs))
	}
	after := sessionFiles(t, e.agentDir)
	for path, content := range files {
		if after[path] != content {
			t.Errorf("%s changed", path)
		}
	}
}

// TestServeHostileCursorAfterReopen: a session closed for being idle and
// opened again (another client attached, and ran a turn) must not take a
// cursor of its first life for one of its second: a client back with the
// seq of the last event it saw before the close is told to resync, or
// replayed what it missed, never events numbered past its cursor that
// skip the ones before.
func TestServeHostileCursorAfterReopen(t *testing.T) {
	sh, id, cursor := closedFirstLife(t)
	defer sh.end()
	checkSecondLife(t, sh.socket, id, cursor, "from before the session was closed and opened again")
}

// closedFirstLife starts rpi serve with --idle-close, lives a session's
// first life (firstLife) and waits until the host has closed it for
// being idle.
func closedFirstLife(t *testing.T) (sh *servedHost, id string, cursor int64) {
	e := newTestEnv(t)
	e.vars["PI_FAUX_RESPONSE"] = "Fine."
	sh = startServe(t, e, t.TempDir(), "--model", "faux/faux-1", "--idle-close", "20ms")
	status := dialLines(t, sh.socket)
	status.hello(`{"id":"h","type":"hello"}`)
	id, cursor = firstLife(t, sh.socket)
	waitHostStatus(t, status, "the session closed", func(st hostStatus) bool {
		return !slices.ContainsFunc(st.Sessions, func(s hostSession) bool { return s.SessionID == id })
	})
	return sh, id, cursor
}

// TestServeHostileCursorAfterReopenByID: as
// TestServeHostileCursorAfterReopen, with a session of an earlier host
// attached (so numbered from this host's base), closed for being idle,
// and opened again by a hello's options.session naming it by its id (as
// a bridge passes --session ID), or by the start of it: it numbers on
// from its life before, as when named by its file.
func TestServeHostileCursorAfterReopenByID(t *testing.T) {
	e, cwd, id, _ := firstLifeOfEndedHost(t)
	for _, arg := range []string{id, id[:13]} {
		sh := startServe(t, e, cwd, "--model", "faux/faux-1", "--idle-close", "20ms")
		status := dialLines(t, sh.socket)
		status.hello(`{"id":"h","type":"hello"}`)
		a := dialLines(t, sh.socket)
		a.hello(`{"id":"h","type":"hello","attach":"` + id + `"}`)
		a.send(`{"id":"p","type":"prompt","message":"Second life"}`)
		a.waitEvents("agent_settled", 1)
		seqs := seqsOf(a.waitEvents2("agent_settled"))
		cursor := seqs[len(seqs)-1]
		a.close()
		waitHostStatus(t, status, "the session closed", func(st hostStatus) bool {
			return !slices.ContainsFunc(st.Sessions, func(s hostSession) bool { return s.SessionID == id })
		})
		checkSecondLifeOpened(t, sh.socket, `{"id":"h","type":"hello","options":{"session":"`+arg+`"}}`, id, cursor,
			"from before the session was closed and opened again by options.session "+arg)
		sh.end()
	}
}

// TestServeHostileCursorAfterRestart: as TestServeHostileCursorAfterReopen,
// with the host restarted between the two lives of the session.
func TestServeHostileCursorAfterRestart(t *testing.T) {
	e, cwd, id, cursor := firstLifeOfEndedHost(t)
	sh := startServe(t, e, cwd, "--model", "faux/faux-1")
	defer sh.end()
	checkSecondLife(t, sh.socket, id, cursor, "from the host before")
}

// firstLifeOfEndedHost is firstLife in a host (faux answering "Fine.")
// that then ends: the environment and cwd to start the next host in, the
// session's id and the client's last seq.
func firstLifeOfEndedHost(t *testing.T) (e *testEnv, cwd, id string, cursor int64) {
	e = newTestEnv(t)
	e.vars["PI_FAUX_RESPONSE"] = "Fine."
	cwd = t.TempDir()
	sh := startServe(t, e, cwd, "--model", "faux/faux-1")
	id, cursor = firstLife(t, sh.socket)
	sh.end()
	return e, cwd, id, cursor
}

// firstLife opens a session, runs one turn and leaves: the session's id
// and the seq of the last event the client saw.
func firstLife(t *testing.T, socket string) (id string, cursor int64) {
	a := dialLines(t, socket)
	id = a.hello(`{"id":"h","type":"hello"}`).SessionID
	a.send(`{"id":"p","type":"prompt","message":"First life"}`)
	a.waitEvents("agent_settled", 1)
	seqs := seqsOf(a.waitEvents2("agent_settled"))
	a.close()
	return id, seqs[len(seqs)-1]
}

// checkSecondLife attaches to the session id in its second life and runs
// turns until its seqs pass cursor; then a client back with cursor (of
// the first life, as what says) is told to resync, or replayed exactly
// the second life, never events numbered past it that skip others.
func checkSecondLife(t *testing.T, socket, id string, cursor int64, what string) {
	checkSecondLifeOpened(t, socket, `{"id":"h","type":"hello","attach":"`+id+`"}`, id, cursor, what)
}

// checkSecondLifeOpened is checkSecondLife with the second life opened
// by the hello line given.
func checkSecondLifeOpened(t *testing.T, socket, hello, id string, cursor int64, what string) {
	b := dialLines(t, socket)
	b.hello(hello)
	for turn := 1; ; turn++ {
		b.send(fmt.Sprintf(`{"id":"p%d","type":"prompt","message":"Second life"}`, turn))
		b.waitEvents("agent_settled", turn)
		if s := seqsOf(b.waitEvents2("agent_settled")); s[len(s)-1] > cursor+2 {
			break
		}
	}
	back := dialLines(t, socket)
	ans := back.hello(fmt.Sprintf(`{"id":"h","type":"hello","attach":"%s","cursor":%d}`, id, cursor))
	recs, _ := back.snapshot()
	second, _ := b.snapshot()
	if replayed := seqsOf(recs); !ans.Resync && !slices.Equal(replayed, seqsOf(second)) {
		t.Errorf("back with cursor %d %s: resync false, replayed %v; the second life was %v", cursor, what, replayed, seqsOf(second))
	}
}

// TestServeHostileCursorAfterSwitchAway: as TestServeHostileCursorAfterReopen,
// with the session's second life ended not by a close but by its only
// client changing session in place (new_session while no other client
// watches it): the session let go of numbers on, in its third life,
// above every seq of its second, so a cursor of the second is never
// taken for one of the third.
func TestServeHostileCursorAfterSwitchAway(t *testing.T) {
	sh, id, _ := closedFirstLife(t)
	defer sh.end()
	a := dialLines(t, sh.socket)
	a.hello(`{"id":"h","type":"hello","attach":"` + id + `"}`)
	a.send(`{"id":"p","type":"prompt","message":"Second life"}`)
	a.waitEvents("agent_settled", 1)
	seqs := seqsOf(a.waitEvents2("agent_settled"))
	cursor := seqs[len(seqs)-1]
	a.send(`{"id":"n","type":"new_session"}`)
	a.answer("n")
	checkSecondLife(t, sh.socket, id, cursor, "from before its client changed session in place")
}

// TestServeHostileWebSocketRequestBody: a client without the token whose
// request declares a body it never sends is refused and dropped all the
// same: net/http reads a refused request's body (up to 256 KiB) after the
// answer, to reuse the connection, and ReadHeaderTimeout bounds only the
// head, so without a bound on the whole request anyone who can reach the
// port held a connection (and its goroutine) for as long as they liked,
// any number of them, before any token was asked for.
func TestServeHostileWebSocketRequestBody(t *testing.T) {
	e := newTestEnv(t)
	e.vars["RPI_SERVE_TOKEN"] = "s3cret-token"
	sh := startServe(t, e, t.TempDir(), "--listen", "ws://127.0.0.1:0/rpi")
	defer sh.end()
	addr := regexp.MustCompile(`ws://(127\.0\.0\.1:\d+)/rpi`).FindStringSubmatch(string(sh.stderr.bytes()))
	if addr == nil {
		t.Fatalf("no ws:// address in %q", sh.stderr.bytes())
	}
	bodies := []string{"Content-Length: 100", "Transfer-Encoding: chunked"}
	conns := make([]net.Conn, len(bodies))
	for i, body := range bodies { // both at once: each is dropped only after the host's bound
		conn, err := net.Dial("tcp", addr[1])
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, "GET /rpi HTTP/1.1\r\nHost: "+addr[1]+"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"+body+"\r\n\r\n")
		conns[i] = conn
	}
	for i, conn := range conns {
		conn.SetReadDeadline(time.Now().Add(60 * time.Second)) // a hang, not a speed: the host's bound is 10 s
		answer, err := io.ReadAll(conn)
		if err != nil {
			t.Fatalf("%s: the connection is still open after the refusal: %v", bodies[i], err)
		}
		if !bytes.HasPrefix(answer, []byte("HTTP/1.1 401 ")) {
			t.Fatalf("%s: answered %q", bodies[i], answer)
		}
	}
}

// TestServeHostileWebSocketNeverReads: a WebSocket client that reads
// nothing, and floods pings whose pongs it never takes, while its
// session streams: the turns and the other client do not wait for it,
// it is detached as slow, and its connection is closed and gone, though
// nothing it was sent was ever taken.
func TestServeHostileWebSocketNeverReads(t *testing.T) {
	e := newTestEnv(t)
	e.vars["RPI_SERVE_TOKEN"] = wsTestToken
	deltas := make([]string, 500)
	for i := range deltas {
		deltas[i] = fmt.Sprintf("%04d %s ", i, strings.Repeat("x", 200)) // some 400 KB of events a turn: the host's socket buffers fill in a few turns
	}
	script, _ := json.Marshal(map[string]any{"text": deltas})
	fm := startFakeModel(t, apiOpenAI, string(script), e.agentDir)
	fm.server.Config.SetKeepAlivesEnabled(false)
	fm.cycle = true
	sh := startServe(t, e, t.TempDir(), "--model", "fake/fake-model", "--client-queue", "256KiB", "--listen", "ws://127.0.0.1:0/")
	defer sh.end()
	addr := regexp.MustCompile(`ws://(127\.0\.0\.1:\d+)/`).FindStringSubmatch(string(sh.stderr.bytes()))
	if addr == nil {
		t.Fatalf("no ws:// address in %q", sh.stderr.bytes())
	}
	ctl := dialLines(t, sh.socket)
	id := ctl.hello(`{"id":"h","type":"hello"}`).SessionID
	ctl.waitEvents("session_started", 1)
	ctl.send(`{"id":"p0","type":"prompt","message":"Stream"}`) // the session's file is open from now on
	ctl.waitEvents("agent_settled", 1)
	base := countIdle()

	lazy, _ := rawClient(t, addr[1])
	lazy.(*net.TCPConn).SetReadBuffer(4 << 10)
	lazy.Write(clientFrame(0x81, `{"id":"h","type":"hello","attach":"`+id+`"}`))
	flooding := make(chan struct{})
	go func() {
		defer close(flooding)
		for {
			if _, err := lazy.Write(clientFrame(0x89, strings.Repeat("p", 125))); err != nil {
				return // closed by the host, or by the test's end
			}
		}
	}()
	waitHostStatus(t, ctl, "the WebSocket client attached", func(st hostStatus) bool {
		return len(st.Sessions) == 1 && st.Sessions[0].Clients == 2
	})
	deadline := time.Now().Add(60 * time.Second) // a hang, not a speed: some 10 turns fill the buffers
	for turn := 1; ; turn++ {
		ctl.send(fmt.Sprintf(`{"id":"p%d","type":"prompt","message":"Stream"}`, turn))
		ctl.waitEvents("agent_settled", turn+1)
		if st := hostStatusOf(t, ctl, "s"); st.Sessions[0].Clients == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a WebSocket client that reads nothing was never detached (%d turns)", turn)
		}
	}
	waitHostStatus(t, ctl, "the WebSocket connection closed", func(st hostStatus) bool { return st.Connections == 1 })
	lazy.Close()
	<-flooding
	waitIdle(t, base)
}

// TestServeHostileSlowCommandHoldsNoOtherClient: a client whose command
// takes long on its own connection's loop (a switch_session to a file
// another rpi holds waits for it) holds up no other client of its
// session: the other's get_state is answered meanwhile.
func TestServeHostileSlowCommandHoldsNoOtherClient(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc/self/fd to see the wait begin")
	}
	sh, cwd := startServeWaitingForFiles(t)
	a := dialLines(t, sh.socket)
	id := a.hello(`{"id":"h","type":"hello"}`).SessionID
	b := dialLines(t, sh.socket)
	b.hello(`{"id":"h","type":"hello","attach":"` + id + `"}`)
	path := filepath.Join(cwd, "held.jsonl")
	held := holdSessionFile(t, path, "1a2b3c4d-0000-4000-8000-00000000000c")
	a.send(`{"id":"sw","type":"switch_session","sessionPath":"held.jsonl"}`)
	// a's loop waits for the file once it has it open beside the test.
	deadline := time.Now().Add(30 * time.Second)
	for openCount(path) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the switch never began to wait for the file")
		}
		time.Sleep(time.Millisecond)
	}
	b.send(`{"id":"s","type":"get_state"}`)
	if r := b.answer("s"); r.Success == nil || !*r.Success {
		t.Errorf("get_state: %s", r.line)
	}
	held.Close()
	if r := a.answer("sw"); r.Success == nil || !*r.Success {
		t.Errorf("the switch, once the file was let go of: %s", r.line)
	}
}

// openCount is how many of this process's descriptors have path open.
func openCount(path string) int {
	entries, _ := os.ReadDir("/proc/self/fd")
	n := 0
	for _, e := range entries {
		if target, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); target == path {
			n++
		}
	}
	return n
}

// TestServeAttachAmongPlantedFiles: a client attaches by id to a session
// whose file is in a shared --session-dir, where someone else may put
// files. The newest file whose header claimed the id won, and the
// session ran in the cwd that file's header named (a folder of the
// planter's choosing, where the tools then ran). Now a file named for
// another session ("<timestamp>_OTHER.jsonl") is no match for the id
// its header claims, and two files that both claim it are refused,
// named, rather than one picked.
func TestServeAttachAmongPlantedFiles(t *testing.T) {
	const id, other = "1a2b3c4d-0000-4000-8000-0000000000aa", "1a2b3c4d-0000-4000-8000-0000000000bb"
	for _, plantedName := range []string{"2026-03-16T10-00-00-000Z_" + id + ".jsonl", "2026-03-16T10-00-00-000Z_" + other + ".jsonl"} {
		t.Run(plantedName, func(t *testing.T) {
			cwd, dir, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
			own := "2026-03-16T09-00-00-000Z_" + id + ".jsonl"
			writeSessionHeaders(t, dir, cwd, map[string]string{id: own})
			writeSessionHeaders(t, dir, elsewhere, map[string]string{id: plantedName})
			later := time.Now().Add(time.Hour) // the planted file is the newest
			os.Chtimes(filepath.Join(dir, plantedName), later, later)
			_, socket := startServeInProcess(t, newTestEnv(t), cwd, "--session-dir", dir)
			c := dialLines(t, socket)
			c.send(`{"id":"h","type":"hello","attach":"` + id + `"}`)
			r := c.answer("h")
			if strings.HasPrefix(plantedName, "2026-03-16T10-00-00-000Z_"+other) {
				if r.Success == nil || !*r.Success {
					t.Fatalf("the session's own file was not attached: %s", r.line)
				}
				c.send(`{"id":"s","type":"get_state"}`)
				if s := c.answer("s"); !strings.Contains(string(s.line), `"sessionFile":"`+filepath.Join(dir, own)+`"`) {
					t.Errorf("attached to another file than the session's own:\n%s", s.line)
				}
				return
			}
			want := "Session " + id + " is claimed by several session files: " + filepath.Join(dir, own) + ", " + filepath.Join(dir, plantedName)
			if r.Success == nil || *r.Success || !strings.HasPrefix(r.Error, want) {
				t.Errorf("hello answered %s\nwant a failure starting %q", r.line, want)
			}
		})
	}
}
