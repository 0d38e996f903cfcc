package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The fixtures of rpi serve (testdata/serve/*.txtar): several clients on
// one host. Their script section says which client writes each line
// ("a: {…}"), and waits as the stdio fixtures do, for one client's output
// ("#wait a TEXT", "#waitn a N TEXT"); "#connect a" connects a client
// before it writes (a client connects when it first writes), "#close a"
// closes its connection, "#sleep D" lets rpi's timers run (--idle-close),
// "#release" lets the fake model (a model.jsonl section) go on.
// Each client's output is a want section of its own (a.want.jsonl, …),
// all of them normalised together, so that $UUID1 is the same session in
// every client's.
func TestServeFixtures(t *testing.T) {
	paths, _ := filepath.Glob("testdata/serve/*.txtar")
	if len(paths) == 0 {
		t.Fatal("no fixtures in testdata/serve")
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			t.Parallel()
			f, err := parseFixture(path)
			if err != nil {
				t.Fatal(err)
			}
			got := runServeFixture(t, f)
			for _, name := range slices.Sorted(maps.Keys(got)) {
				section := name + ".want.jsonl"
				if *update {
					f.sections[section] = got[name]
					if !slices.Contains(f.order, section) {
						f.order = append(f.order, section)
					}
					continue
				}
				if want := f.sections[section]; got[name] != want {
					t.Errorf("client %s: output differs\n--- got ---\n%s--- want ---\n%s", name, got[name], want)
				}
			}
			if *update {
				if err := os.WriteFile(path, f.format(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// servedHost is an rpi serve running in this process, for a test.
type servedHost struct {
	t      *testing.T
	env    *testEnv
	socket string
	cwd    string
	stderr *watchedOutput
	stdout *watchedOutput
	stop   chan os.Signal
	done   chan int
}

// shortSocketDir is a new directory for a test's socket, private to the
// user, whose path is short enough for a unix socket's (the test's
// temporary directory may not be); removed when the test ends.
func shortSocketDir(t testing.TB) string {
	dir, err := os.MkdirTemp("/tmp", "rpi-sock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startServeAt is startServe on a socket path of the test's choosing.
func startServeAt(t *testing.T, e *testEnv, cwd, socket string, args ...string) *servedHost {
	t.Helper()
	sh := &servedHost{t: t, env: e, cwd: cwd, socket: socket,
		stderr: newWatchedOutput(), stdout: newWatchedOutput(), stop: make(chan os.Signal, 1), done: make(chan int, 1)}
	args = append([]string{"serve", "--listen", "unix:" + sh.socket, "--cwd", cwd}, args...)
	go func() { sh.done <- runProgram(args, e.env(), strings.NewReader(""), sh.stdout, sh.stderr, sh.stop) }()
	if !sh.stderr.waitFor("listening on", func(b []byte) string { return string(b) }) {
		t.Fatalf("rpi serve never listened:\n%s", sh.stderr.bytes())
	}
	return sh
}

// startServe starts rpi serve in e with args, listening on a socket of
// its own, and waits until it listens.
func startServe(t *testing.T, e *testEnv, cwd string, args ...string) *servedHost {
	t.Helper()
	return startServeAt(t, e, cwd, filepath.Join(shortSocketDir(t), "rpi.sock"), args...)
}

// end sends SIGTERM and checks that rpi serve exits 0, having written
// nothing on stdout and removed its socket.
func (sh *servedHost) end() {
	sh.t.Helper()
	sh.stop <- syscall.SIGTERM
	select {
	case code := <-sh.done:
		if code != 0 {
			sh.t.Errorf("rpi serve exited %d:\n%s", code, sh.stderr.bytes())
		}
	case <-time.After(10 * time.Second):
		sh.t.Fatalf("rpi serve did not end within 10 s of SIGTERM:\n%s", sh.stderr.bytes())
	}
	if out := sh.stdout.bytes(); len(out) > 0 {
		sh.t.Errorf("rpi serve wrote to stdout: %q", out)
	}
	if _, err := os.Lstat(sh.socket); err == nil {
		sh.t.Errorf("the socket %s is left behind", sh.socket)
	}
}

// servedClient is one test client of rpi serve.
type servedClient struct {
	conn net.Conn
	out  *watchedOutput
	read chan struct{} // closed when the connection's reader is done
}

// connect connects a client that reads everything into its output.
func (sh *servedHost) connect() *servedClient {
	sh.t.Helper()
	conn, err := net.Dial("unix", sh.socket)
	if err != nil {
		sh.t.Fatal(err)
	}
	c := &servedClient{conn: conn, out: newWatchedOutput(), read: make(chan struct{})}
	go func() {
		defer close(c.read)
		io.Copy(c.out, conn)
	}()
	sh.t.Cleanup(func() { conn.Close(); <-c.read })
	return c
}

func (c *servedClient) send(line string) { io.WriteString(c.conn, line+"\n") }

// waitFor waits until the client's output holds text n times.
func (c *servedClient) waitFor(t testing.TB, text string, n int) {
	t.Helper()
	if !c.out.waitFor(text, func(b []byte) string {
		if bytes.Count(b, []byte(text)) >= n {
			return text
		}
		return ""
	}) {
		t.Fatalf("never saw %s (%d times) in:\n%s", text, n, c.out.bytes())
	}
}

// runServeFixture runs f's script against a fresh rpi serve and returns
// each client's normalised output.
func runServeFixture(t *testing.T, f *fixture) map[string]string {
	e, cwd, norm, fm := fixtureWorld(t, f)
	for name, content := range f.sections {
		if file, ok := strings.CutPrefix(name, "agent "); ok {
			path := filepath.Join(e.agentDir, file)
			os.MkdirAll(filepath.Dir(path), 0o755)
			os.WriteFile(path, []byte(content), 0o644)
		}
	}
	var args []string
	for _, line := range strings.Split(f.sections["args"], "\n") {
		if line = strings.TrimSpace(line); line != "" {
			args = append(args, line)
		}
	}
	sh := startServe(t, e, cwd, args...)
	clients := map[string]*servedClient{}
	client := func(name string) *servedClient {
		if clients[name] == nil {
			clients[name] = sh.connect()
		}
		return clients[name]
	}
	// all is every client's output, in the order of their names: what
	// placeholders are numbered in.
	all := func() []byte {
		var b []byte
		for _, name := range slices.Sorted(maps.Keys(clients)) {
			b = append(b, clients[name].out.bytes()...)
		}
		return b
	}
	sc := bufio.NewScanner(strings.NewReader(f.sections["script"]))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fieldsOf := strings.Fields(line)
		switch {
		case strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "#connect "):
			client(fieldsOf[1])
		case strings.HasPrefix(line, "#close "):
			c := client(fieldsOf[1])
			c.conn.Close()
			<-c.read
		case strings.TrimSpace(line) == "#release":
			fm.release <- struct{}{}
		case strings.HasPrefix(line, "#sleep "):
			d, err := time.ParseDuration(fieldsOf[1])
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			time.Sleep(d)
		case strings.HasPrefix(line, "#wait ") || strings.HasPrefix(line, "#waitn "):
			name, n, text := fieldsOf[1], 1, strings.TrimSpace(strings.SplitN(line, " ", 3)[2])
			if strings.HasPrefix(line, "#waitn ") {
				parts := strings.SplitN(line, " ", 4)
				fmt.Sscan(parts[2], &n)
				text = strings.TrimSpace(parts[3])
			}
			c := client(name)
			if !c.out.waitFor(text, func(b []byte) string {
				if strings.Count(norm.apply(b), text) >= n {
					return text
				}
				return ""
			}) {
				t.Fatalf("%s: never seen; client %s's output:\n%s", line, name, norm.apply(c.out.bytes()))
			}
		default:
			name, rest, ok := strings.Cut(line, ": ")
			if !ok || strings.HasPrefix(line, "#") {
				t.Fatalf("script line %q: want \"NAME: LINE\" or a directive", line)
			}
			whole := newWatchedOutput()
			whole.Write(all())
			rest = strings.NewReplacer("$CWD_NAME", strings.NewReplacer("/", "-").Replace(strings.TrimLeft(cwd, "/")),
				"$CWD_PARENT", filepath.Dir(cwd), "$CWD", cwd, "$AGENT_DIR", e.agentDir).Replace(rest)
			client(name).send(string(withActualUUIDs(t, []byte(rest), whole)))
		}
	}
	for _, c := range clients {
		c.conn.Close()
		<-c.read
	}
	sh.end()
	if left, _ := os.ReadDir(e.tmp); len(left) > 0 {
		t.Errorf("temp files left behind: %v", left)
	}
	// Normalised together (a separator line between clients), then split.
	const separator = "\n#--client--\n"
	var joined []byte
	names := slices.Sorted(maps.Keys(clients))
	for i, name := range names {
		if i > 0 {
			joined = append(joined, separator...)
		}
		checkRecords(t, clients[name].out.bytes())
		joined = append(joined, clients[name].out.bytes()...)
	}
	parts := strings.Split(seqPlaceholders(norm.apply(joined)), separator)
	got := map[string]string{}
	for i, name := range names {
		got[name] = parts[i]
	}
	return got
}

// seqPattern finds the seq of an event and the cursor of an answer.
var seqPattern = regexp.MustCompile(`"(seq|cursor)":(\d+)`)

// seqPlaceholders numbers the seqs and cursors of s by value, smallest
// first: $S1, $S2, … (a cursor of 0, no event yet, stays 0). Where rpi
// batches a model's deltas is up to the clock, so how many events a turn
// has is too; merged (mergeChunks keeps the seq of the last), every
// value that remains gets the same placeholder whatever the batching, and
// identity holds: a cursor is $S8 exactly when it is the seq of the
// event shown as $S8.
func seqPlaceholders(s string) string {
	var values []int
	for _, m := range seqPattern.FindAllStringSubmatch(s, -1) {
		if n, _ := strconv.Atoi(m[2]); n > 0 && !slices.Contains(values, n) {
			values = append(values, n)
		}
	}
	slices.Sort(values)
	return seqPattern.ReplaceAllStringFunc(s, func(m string) string {
		sub := seqPattern.FindStringSubmatch(m)
		n, _ := strconv.Atoi(sub[2])
		if n == 0 {
			return m
		}
		return fmt.Sprintf(`"%s":$S%d`, sub[1], slices.Index(values, n)+1)
	})
}

// TestServeWebSocket: one host on a unix socket and on WebSocket; a
// WebSocket client without the token is refused before the upgrade; one
// with it opens a session, and a unix-socket client attaches to that
// session and sees the WebSocket client's turn, numbered alike.
func TestServeWebSocket(t *testing.T) {
	e := newTestEnv(t)
	e.vars["RPI_SERVE_TOKEN"] = "s3cret-token"
	e.vars["PI_FAUX_RESPONSE"] = "Over the web."
	sh := startServe(t, e, t.TempDir(), "--model", "faux/faux-1", "--listen", "ws://127.0.0.1:0/rpi")
	m := regexp.MustCompile(`ws://127\.0\.0\.1:\d+/rpi`).FindString(string(sh.stderr.bytes()))
	if m == "" {
		t.Fatalf("no ws:// address in %q", sh.stderr.bytes())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := dialWebSocket(ctx, m, "wrong"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a wrong token: %v, want a 401", err)
	}
	ws, err := dialWebSocket(ctx, m, "s3cret-token")
	if err != nil {
		t.Fatal(err)
	}
	wsOut := newWatchedOutput()
	wsRead := make(chan struct{})
	go func() { defer close(wsRead); io.Copy(wsOut, ws) }()
	io.WriteString(ws, `{"id":"h","type":"hello"}`+"\n")
	if !wsOut.waitFor(`"type":"session_started"`, func(b []byte) string { return string(b) }) {
		t.Fatalf("no session_started over WebSocket: %s", wsOut.bytes())
	}
	var hello struct{ Data helloAnswer }
	json.Unmarshal(bytes.SplitN(wsOut.bytes(), []byte("\n"), 2)[0], &hello)
	watcher := sh.connect()
	watcher.send(`{"id":"h","type":"hello","attach":"` + hello.Data.SessionID + `","role":"observer"}`)
	watcher.waitFor(t, `"command":"hello"`, 1)
	io.WriteString(ws, `{"id":"p","type":"prompt","message":"Hi"}`+"\n")
	watcher.waitFor(t, `"type":"agent_settled","seq":`, 1)
	if !wsOut.waitFor(`"type":"agent_settled","seq":`, func(b []byte) string { return string(b) }) {
		t.Fatalf("no agent_settled over WebSocket: %s", wsOut.bytes())
	}
	seqs := func(b []byte) []string { return regexp.MustCompile(`"seq":\d+`).FindAllString(string(b), -1) }
	if got, want := seqs(watcher.out.bytes()), seqs(wsOut.bytes())[1:]; !slices.Equal(got, want) {
		t.Errorf("the observer saw seqs %v, the WebSocket client %v (after its session_started)", got, want)
	}
	ws.Close()
	<-wsRead
	sh.end()
}

// TestClientQueueOfAGiB: --client-queue 1GiB takes a client's records
// (four times it passed a 32-bit int: every client was behind at once).
func TestClientQueueOfAGiB(t *testing.T) {
	w, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	q := newClientQueue(w, 1<<30, io.Discard)
	for _, rec := range []string{"{}\n", "{}\n"} {
		if _, err := q.Write([]byte(rec)); err != nil {
			t.Fatalf("a record refused: %v", err)
		}
	}
}

// TestClosedSeqsBounded: the host keeps the last seqs of the
// maxClosedSeqs sessions closed last, not one per session ever closed; a
// session it let go of, opened again, numbers on above its last seq all
// the same (above every seq let go of), so that a cursor from before its
// close is never taken for one after. A session closed again takes no
// second place.
func TestClosedSeqsBounded(t *testing.T) {
	sh := &serveHost{started: time.Now()}
	base := sh.seqBase()
	path := func(i int) string { return fmt.Sprintf("/sessions/%d.jsonl", i) }
	last := func(i int) int64 { return base + 1000 - int64(i) } // the first closed numbered highest
	for i := range maxClosedSeqs + 10 {
		sh.rememberClosed(path(i), last(i))
	}
	if len(sh.closedSeqs) != maxClosedSeqs || len(sh.closedOrder) != maxClosedSeqs {
		t.Fatalf("kept %d seqs in %d places; want %d", len(sh.closedSeqs), len(sh.closedOrder), maxClosedSeqs)
	}
	for i := range 10 {
		if got := sh.firstSeq(path(i)); got < last(i) {
			t.Errorf("session %d, let go of, numbers on from %d, below its last seq %d", i, got, last(i))
		}
	}
	kept := maxClosedSeqs + 9
	if got := sh.firstSeq(path(kept)); got != last(kept) {
		t.Errorf("session %d, kept, numbers on from %d; want its last seq %d", kept, got, last(kept))
	}
	sh.rememberClosed(path(kept), last(kept)+5)
	if len(sh.closedOrder) != maxClosedSeqs || sh.firstSeq(path(kept)) != last(kept)+5 {
		t.Errorf("closed again: %d places, numbers on from %d", len(sh.closedOrder), sh.firstSeq(path(kept)))
	}
	if got := sh.firstSeq("/sessions/new.jsonl"); got < base || got < last(0) {
		t.Errorf("a session never closed here numbers on from %d; want at least %d and %d", got, base, last(0))
	}
}

// TestClosedSeqReopenedWhileClosing: a session opened again while the
// host is still closing it (its file already let go of, its last seq not
// yet remembered: idle-close racing a client's attach, which was told to
// attach again in a moment) must number on above every seq of its life
// being closed, not from what the host remembered before it. st.mu held
// keeps closeStage in that window (it reads the stage's last seq there).
func TestClosedSeqReopenedWhileClosing(t *testing.T) {
	h, cwd := startTestHost(t, "")
	sh := &serveHost{h: h, conns: map[*servedConn]struct{}{}, stages: map[*session]*stage{}, started: time.Now()}
	first, err := sh.openStage(sessionOptions{cwd: cwd, writeNow: true})
	if err != nil {
		t.Fatal(err)
	}
	id := first.s.conv.info().id
	sh.closeStage(first)
	second, opened, err := sh.stageOf(id) // numbers on from its first life's last seq
	if err != nil || !opened {
		t.Fatalf("opened again: %v (opened %v)", err, opened)
	}
	for range 5 {
		second.event(event{Type: "notify", Data: map[string]any{}})
	}
	last := second.lastSeq()
	second.mu.Lock()
	closed := make(chan struct{})
	go func() { defer close(closed); sh.closeStage(second) }()
	for deadline := time.Now().Add(10 * time.Second); slices.Contains(h.sessions.list(), second.s); {
		if time.Now().After(deadline) {
			second.mu.Unlock()
			t.Fatal("the session never let go of its file")
		}
		time.Sleep(time.Millisecond)
	}
	type reopened struct {
		st  *stage
		err error
	}
	third := make(chan reopened, 1)
	go func() {
		st, _, err := sh.stageOf(id)
		third <- reopened{st, err}
	}()
	var got reopened
	select {
	case got = <-third: // while closeStage is still in its window
	case <-time.After(100 * time.Millisecond):
	}
	second.mu.Unlock()
	<-closed
	if got.st == nil && got.err == nil {
		got = <-third
	}
	if got.err != nil {
		t.Fatalf("opened a third time: %v", got.err)
	}
	if seq := got.st.lastSeq(); seq < last {
		t.Errorf("opened again while its close was finishing, the session numbers on from %d, below %d, the last seq of its life before (a cursor from it is taken for one of this life)", seq, last)
	}
}

// TestClientQueueStuckWriteEnds: a client that takes nothing of a write
// in progress is still let go of within finishWriteLimit once it leaves
// (finish) or falls behind (slow): the deadline also cuts the write that
// was blocked when that happened, not only the writes after it, so the
// connection is closed and its goroutines end.
func TestClientQueueStuckWriteEnds(t *testing.T) {
	for _, how := range []string{"finish", "slow"} {
		t.Run(how, func(t *testing.T) {
			ours, peer := net.Pipe() // the peer never reads: a write to it blocks
			defer peer.Close()
			q := newClientQueue(ours, 64<<10, io.Discard)
			go q.pump()
			if _, err := q.Write([]byte("{}\n")); err != nil {
				t.Fatal(err)
			}
			finished := make(chan struct{})
			if how == "finish" {
				go func() { defer close(finished); q.finish(nil) }()
			} else {
				record := []byte(`{"s":"` + strings.Repeat("x", 16<<10) + `"}` + "\n")
				for refused := false; !refused; {
					_, err := q.Write(record)
					refused = err != nil
				}
				go func() { defer close(finished); <-q.drained }()
			}
			select {
			case <-finished:
			case <-time.After(60 * time.Second): // a hang, not a speed: finishWriteLimit is 5 s
				t.Fatal("a client that reads nothing is never let go of: the write in progress has no deadline")
			}
			peer.SetReadDeadline(time.Now().Add(60 * time.Second))
			if _, err := io.Copy(io.Discard, peer); err != nil {
				t.Fatalf("the connection is not closed: %v", err)
			}
		})
	}
}

// TestClientQueueSlowReaderFinishes: a client that is leaving, and that
// reads what waits for it steadily, gets all of it, however long that
// takes: finishWithin bounds each write it takes nothing of (docs:
// "a client that takes nothing of it within 5 seconds is closed"), not
// the whole. The deadline was set once, when the client left, so a
// client still reading a large answer (get_messages with images, to a
// bridge whose input had ended) was cut finishWithin later, mid-record.
// The reader here sleeps between its reads for more than finishWithin in
// all, and takes each write (about writeChunkBytes) well within it.
func TestClientQueueSlowReaderFinishes(t *testing.T) {
	ours, peer := net.Pipe()
	defer peer.Close()
	q := newClientQueue(ours, 64<<20, io.Discard)
	q.finishWithin = 3 * time.Second
	go q.pump()
	record := []byte(`{"s":"` + strings.Repeat("x", 64<<10) + `"}` + "\n")
	const records = 40 // 40 reads of a record, 100 ms apart: 4 s in all, a write of 4 records in 0.4 s
	for range records {
		if _, err := q.Write(record); err != nil {
			t.Fatal(err)
		}
	}
	go q.finish(nil)
	got := 0
	buf := make([]byte, len(record))
	peer.SetReadDeadline(time.Now().Add(2 * time.Minute)) // a hang, not a speed
	for {
		n, err := io.ReadFull(peer, buf)
		got += n
		if err != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got != records*len(record) {
		t.Errorf("a client reading steadily after it left got %d bytes of %d: its writes were cut", got, records*len(record))
	}
}
