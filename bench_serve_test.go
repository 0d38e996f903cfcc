package main

// Benchmarks of rpi serve (docs/serve.md) beside the stdio wires: the
// built binary as a real host on a unix socket, real socket clients, and
// the local fake model (model_test.go) streaming 4,000-token answers in
// Chat Completions' SSE, byte for byte. Each figure is reported beside
// its floor, measured in the same run (docs/performance.md, "rpi serve");
// scripts/bench.sh runs them (the Serve group) and prints each target.
// TestServeKillsReattach is the correctness half of the last one: 200
// client kills mid-turn, each followed by a reattach with the last seq
// seen, and not one event lost or sent twice.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// serveTokens is how many tokens (4 bytes each) the answers of the serve
// benchmarks have.
const serveTokens = 4000

// tokenScript is one line of a fake model's script: an answer of n
// tokens of "tok ", each after delayMs.
func tokenScript(n, delayMs int) string {
	tokens := make([]string, n)
	for i := range tokens {
		tokens[i] = "tok "
	}
	script, _ := json.Marshal(map[string]any{"text": tokens, "delayMs": delayMs})
	return string(script)
}

// burstScript is one line of a fake model's script: an answer of n
// tokens of "tok " in Chat Completions' SSE, byte for byte as the fake
// model streams one (openAIStream), written in one go (its sse form)
// rather than flushed a token at a time, so that how rpi gets it does
// not hang on how busy the test process is.
func burstScript(n int) string {
	chunk := func(delta, finish string) string {
		return `data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1700000000,"model":"fake-model",` +
			`"choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}`
	}
	events := []string{chunk(`{"role":"assistant","content":""}`, "null")}
	for range n {
		events = append(events, chunk(`{"content":"tok "}`, "null"))
	}
	events = append(events, chunk(`{}`, `"stop"`), "data: [DONE]")
	script, _ := json.Marshal(map[string]any{"sse": events})
	return string(script)
}

// serveProcess is the built rpi serve, listening on a unix socket of its
// own, with an agent directory and TMPDIR of its own.
type serveProcess struct {
	cmd    *exec.Cmd
	socket string
	stderr *watchedOutput
	once   sync.Once
}

// startServeProcess starts rpi serve with agent as its agent directory
// and args after its own, and waits until it listens. It is ended
// (SIGTERM, waited for) by stop or when the benchmark ends.
func startServeProcess(b testing.TB, agent string, args ...string) *serveProcess {
	b.Helper()
	p := &serveProcess{socket: filepath.Join(shortSocketDir(b), "rpi.sock"), stderr: newWatchedOutput()}
	args = append([]string{"serve", "--listen", "unix:" + p.socket, "--cwd", b.TempDir()}, args...)
	p.cmd = exec.Command(rpiBinary(b), args...)
	p.cmd.Env = withoutKeys(append(os.Environ(), "PI_CODING_AGENT_DIR="+agent, "TMPDIR="+b.TempDir()))
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.stop)
	if !p.stderr.waitFor("listening on", func(b []byte) string { return string(b) }) {
		b.Fatalf("rpi serve never listened:\n%s", p.stderr.bytes())
	}
	return p
}

// stop ends the host (SIGTERM) and waits for it.
func (p *serveProcess) stop() {
	p.once.Do(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.cmd.Wait()
	})
}

func (p *serveProcess) pid() int { return p.cmd.Process.Pid }

// threadsCPU is the CPU time pid's threads have had so far, to the
// nanosecond: the sum over /proc/PID/task/*/schedstat (the first field,
// time on a CPU), which /proc/PID/stat's 10 ms ticks blur for an answer
// that costs a few milliseconds. A thread that has ended is no longer
// counted; Go's threads seldom end.
func threadsCPU(b testing.TB, pid int) time.Duration {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for _, task := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, task.Name()))
		if err != nil {
			continue // ended meanwhile
		}
		ns, _ := strconv.ParseInt(string(bytes.Fields(stat)[0]), 10, 64)
		total += time.Duration(ns)
	}
	return total
}

// serveClient is one connection to a host.
type serveClient struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialBenchClient(b testing.TB, socket string) *serveClient {
	b.Helper()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		b.Fatal(err)
	}
	return &serveClient{conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
}

// until reads records until one that starts with prefix and returns how
// many came before it, and that one (its first 64 KiB).
func (c *serveClient) until(prefix string) (before int, line []byte, err error) {
	start := true
	for {
		chunk, err := c.r.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			return before, nil, fmt.Errorf("reading until %s: %v", prefix, err)
		}
		if start && bytes.HasPrefix(chunk, []byte(prefix)) {
			line = bytes.Clone(chunk)
			for err == bufio.ErrBufferFull {
				_, err = c.r.ReadSlice('\n')
			}
			return before, line, nil
		}
		if start = err == nil; start {
			before++
		}
	}
}

// mustUntil is until, failing the benchmark on an error.
func (c *serveClient) mustUntil(b testing.TB, prefix string) (int, []byte) {
	b.Helper()
	n, line, err := c.until(prefix)
	if err != nil {
		b.Fatal(err)
	}
	return n, line
}

// hello sends a hello with the fields given (`"attach":…`, or none for a
// new session) and reads until its answer: it returns the answer and how
// many records came before it (the replay).
func (c *serveClient) hello(b testing.TB, fields string) (helloAnswer, int) {
	b.Helper()
	if fields != "" {
		fields = "," + fields
	}
	io.WriteString(c.conn, `{"id":"h","type":"hello"`+fields+"}\n")
	n, line := c.mustUntil(b, `{"id":"h","type":"response"`)
	var answer struct {
		Success bool
		Data    helloAnswer
	}
	if json.Unmarshal(line, &answer); !answer.Success {
		b.Fatalf("hello: %s", line)
	}
	return answer.Data, n
}

// newSession opens a new session for c (hello) and reads its
// session_started; it returns the session's id.
func (c *serveClient) newSession(b testing.TB) string {
	b.Helper()
	answer, _ := c.hello(b, "")
	c.mustUntil(b, `{"type":"session_started"`)
	return answer.SessionID
}

// servePrompt is the prompt every benchmark sends.
const servePrompt = `{"id":"p","type":"prompt","message":"Talk"}` + "\n"

// atOnce runs f(0) … f(n-1) at once and returns the first error.
func atOnce(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// serveSessions is how many sessions BenchmarkServeSessions streams at once.
const serveSessions = 64

// BenchmarkServeSessions: 64 sessions each streaming a 4,000-token answer
// at once in one rpi serve (64 connections, a session each, the prompts
// sent together, each read until agent_settled; the host runs with
// --max-running 0, as its default of 8 would queue 56 of them), beside
// the same 64 answers streamed at once by 64 separate `rpi rpc`
// processes. The figures are CPU time (threadsCPU, to the nanosecond)
// from the prompts to the last agent_settled — the host's, and the sum of the
// processes' — each iteration with a fresh host and fresh processes, so
// that opening the sessions and starting the processes are outside it;
// and the host's peak resident memory (VmHWM) beside the target, 64 ×
// 4 MiB + 16 MiB, and the sum of the processes' peaks.
//
//	go test -run '^$' -bench '^BenchmarkServeSessions$' -benchtime 2x .
func BenchmarkServeSessions(b *testing.B) {
	agent := b.TempDir()
	startFakeModel(b, apiOpenAI, burstScript(serveTokens), agent).repeat()
	var hostCPU, procsCPU time.Duration
	var hostPeak, procsPeak float64
	for b.Loop() {
		host := startServeProcess(b, agent, "--max-running", "0")
		clients := make([]*serveClient, serveSessions)
		for i := range clients {
			clients[i] = dialBenchClient(b, host.socket)
			clients[i].newSession(b)
		}
		before := threadsCPU(b, host.pid())
		err := atOnce(len(clients), func(i int) error {
			io.WriteString(clients[i].conn, servePrompt)
			_, _, err := clients[i].until(`{"type":"agent_settled"`)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		hostCPU += threadsCPU(b, host.pid()) - before
		hostPeak = max(hostPeak, statusMiB(b, host.pid(), "VmHWM"))
		closeAll(clients)
		host.stop()

		procs := make([]*benchProcess, serveSessions)
		for i := range procs {
			procs[i] = startBench(b, withoutKeys([]string{"PI_CODING_AGENT_DIR=" + agent})...)
		}
		cpu := func() (total time.Duration) {
			for _, p := range procs {
				total += threadsCPU(b, p.cmd.Process.Pid)
			}
			return total
		}
		before = cpu()
		err = atOnce(len(procs), func(i int) error {
			io.WriteString(procs[i].stdin, servePrompt)
			return procs[i].untilSettledErr()
		})
		if err != nil {
			b.Fatal(err)
		}
		procsCPU += cpu() - before
		peaks := 0.0
		for _, p := range procs {
			peaks += statusMiB(b, p.cmd.Process.Pid, "VmHWM")
			p.stop()
		}
		procsPeak = max(procsPeak, peaks)
	}
	perIteration := func(cpu time.Duration) float64 { return float64(cpu.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(perIteration(hostCPU), "host-cpu-ms")
	b.ReportMetric(perIteration(procsCPU), "procs-cpu-ms")
	b.ReportMetric(float64(hostCPU)/float64(procsCPU), "host/procs")
	b.ReportMetric(hostPeak, "host-MiB-peak")
	b.ReportMetric(procsPeak, "procs-MiB-peak-sum")
	b.ReportMetric(serveSessions*4+16, "MiB-target")
}

// untilSettledErr reads records until agent_settled.
func (p *benchProcess) untilSettledErr() error {
	for {
		line, err := p.stdout.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			return err
		}
		if bytes.HasPrefix(line, []byte(`{"type":"agent_settled"`)) {
			return nil
		}
	}
}

// serveObservers is how many observers BenchmarkServeObservers attaches.
const serveObservers = 32

// BenchmarkServeObservers: the host's CPU time for one session's
// 4,000-token answer streamed to its controller and 32 observers (each
// read until agent_settled), beside the same answer streamed to the
// controller alone; each iteration in fresh sessions of one host. burst:
// the model sends the whole answer at once (burstScript: a few events an
// answer, its deltas coalesced by 4 KiB); paced: four tokens a
// millisecond, the deltas coalesced by 30 ms (a message_update every 30
// ms or so, each written to every client). The figures are the CPU time
// (threadsCPU) over the iterations, divided by them.
//
//	go test -run '^$' -bench '^BenchmarkServeObservers$/burst' -benchtime 20x .
func BenchmarkServeObservers(b *testing.B) {
	four := make([]string, serveTokens/4)
	for i := range four {
		four[i] = "tok tok tok tok "
	}
	paced, _ := json.Marshal(map[string]any{"text": four, "delayMs": 1})
	for _, stream := range []struct{ name, script string }{
		{"burst", burstScript(serveTokens)},
		{"paced", string(paced)},
	} {
		b.Run(stream.name, func(b *testing.B) { benchObservers(b, stream.script) })
	}
}

func benchObservers(b *testing.B, script string) {
	agent := b.TempDir()
	startFakeModel(b, apiOpenAI, script, agent).repeat()
	host := startServeProcess(b, agent)
	var oneCPU, observedCPU time.Duration
	for b.Loop() {
		one := dialBenchClient(b, host.socket)
		one.newSession(b)
		before := threadsCPU(b, host.pid())
		io.WriteString(one.conn, servePrompt)
		one.mustUntil(b, `{"type":"agent_settled"`)
		oneCPU += threadsCPU(b, host.pid()) - before
		one.conn.Close()

		clients := observedSession(b, host.socket)
		before = threadsCPU(b, host.pid())
		answerAll(b, clients)
		observedCPU += threadsCPU(b, host.pid()) - before
		closeAll(clients)
	}
	perAnswer := func(cpu time.Duration) float64 { return float64(cpu.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(perAnswer(oneCPU), "one-cpu-ms")
	b.ReportMetric(perAnswer(observedCPU), "observed-cpu-ms")
	b.ReportMetric(float64(observedCPU)/float64(oneCPU), "observed/one")
}

// observedSession opens a session for a controller and attaches 32
// observers to it; the controller comes first.
func observedSession(b testing.TB, socket string) []*serveClient {
	b.Helper()
	clients := []*serveClient{dialBenchClient(b, socket)}
	sid := clients[0].newSession(b)
	for range serveObservers {
		c := dialBenchClient(b, socket)
		c.hello(b, `"attach":"`+sid+`","role":"observer"`)
		clients = append(clients, c)
	}
	return clients
}

// answerAll prompts on the first of clients and reads every one of them
// until agent_settled.
func answerAll(b testing.TB, clients []*serveClient) {
	b.Helper()
	io.WriteString(clients[0].conn, servePrompt)
	if err := atOnce(len(clients), func(i int) error {
		_, _, err := clients[i].until(`{"type":"agent_settled"`)
		return err
	}); err != nil {
		b.Fatal(err)
	}
}

// closeAll closes the clients' connections.
func closeAll(clients []*serveClient) {
	for _, c := range clients {
		c.conn.Close()
	}
}

// idleSessions is how many idle sessions BenchmarkServeIdleSession opens
// of each kind.
const idleSessions = 30

// BenchmarkServeIdleSession: the resident memory (VmRSS) an idle live
// session adds to a host: 30 sessions opened (hello) and left (the
// connection closed: the session stays live, with no client and nothing
// running), then 30 more that each streamed a 4,000-token answer before
// they were left; each kind's growth of the host's resident memory over
// the sessions. The floor is the host with no session. Each iteration is
// a fresh host.
//
//	go test -run '^$' -bench '^BenchmarkServeIdleSession$' -benchtime 1x .
func BenchmarkServeIdleSession(b *testing.B) {
	agent := b.TempDir()
	startFakeModel(b, apiOpenAI, burstScript(serveTokens), agent).repeat()
	var fresh, afterTurn, floor []float64
	for b.Loop() {
		host := startServeProcess(b, agent)
		settle := func() float64 {
			time.Sleep(500 * time.Millisecond)
			return statusMiB(b, host.pid(), "VmRSS")
		}
		idle := settle()
		for range idleSessions {
			c := dialBenchClient(b, host.socket)
			c.newSession(b)
			c.conn.Close()
		}
		opened := settle()
		for range idleSessions {
			c := dialBenchClient(b, host.socket)
			c.newSession(b)
			io.WriteString(c.conn, servePrompt)
			c.mustUntil(b, `{"type":"agent_settled"`)
			c.conn.Close()
		}
		answered := settle()
		host.stop()
		floor = append(floor, idle)
		fresh = append(fresh, (opened-idle)/idleSessions)
		afterTurn = append(afterTurn, (answered-opened)/idleSessions)
	}
	median := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	b.ReportMetric(median(floor), "host-MiB-idle")
	b.ReportMetric(median(fresh), "MiB/session-opened")
	b.ReportMetric(median(afterTurn), "MiB/session-answered")
}

// replayEvents is how many events BenchmarkServeReplay replays.
const replayEvents = 10000

// BenchmarkServeReplay: attaching to a session with a replay of 10,000
// events (hello with the cursor 10,000 events back, written → its answer
// read, every replayed record read before it), beside attaching with the
// latest cursor (nothing replayed), by turns, each on a new connection to
// one host. The session's events come from about 800 short turns, made
// once before the timing. Medians over the iterations.
//
//	go test -run '^$' -bench '^BenchmarkServeReplay$' -benchtime 20x .
func BenchmarkServeReplay(b *testing.B) {
	agent := b.TempDir()
	startFakeModel(b, apiOpenAI, `{"text":["Done."]}`, agent).repeat()
	host := startServeProcess(b, agent)
	owner := dialBenchClient(b, host.socket)
	answer, _ := owner.hello(b, "")
	var seqs []int64
	for len(seqs) <= replayEvents {
		io.WriteString(owner.conn, servePrompt)
		for {
			line, err := owner.r.ReadBytes('\n')
			if err != nil {
				b.Fatal(err)
			}
			if seq, ok := eventSeq(line); ok {
				seqs = append(seqs, seq)
			}
			if bytes.HasPrefix(line, []byte(`{"type":"agent_settled"`)) {
				break
			}
		}
	}
	cursor, latest := seqs[len(seqs)-replayEvents-1], seqs[len(seqs)-1]
	attach := func(cursor int64) (time.Duration, int) {
		c := dialBenchClient(b, host.socket)
		defer c.conn.Close()
		start := time.Now()
		got, replayed := c.hello(b, fmt.Sprintf(`"attach":%q,"cursor":%d,"role":"observer"`, answer.SessionID, cursor))
		took := time.Since(start)
		if got.Resync || got.Cursor != latest {
			b.Fatalf("attach with cursor %d: %+v, want cursor %d without resync", cursor, got, latest)
		}
		return took, replayed
	}
	var replays, attaches []time.Duration
	for b.Loop() {
		took, replayed := attach(cursor)
		if replayed != replayEvents {
			b.Fatalf("replayed %d records, want %d", replayed, replayEvents)
		}
		replays = append(replays, took)
		took, _ = attach(latest)
		attaches = append(attaches, took)
	}
	r, a := medianDuration(replays), medianDuration(attaches)
	b.ReportMetric(r, "replay-ms")
	b.ReportMetric(a, "attach-ms")
	b.ReportMetric(r/a, "replay/attach")
}

// eventSeq is the seq of a served session's event record (its last
// member); ok is false for any other record.
func eventSeq(line []byte) (seq int64, ok bool) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	i := bytes.LastIndex(line, []byte(`,"seq":`))
	if i < 0 || !bytes.HasSuffix(line, []byte("}")) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(line[i+len(`,"seq":`):len(line)-1]), 10, 64)
	return n, err == nil
}

// ---- Killed clients ----

// serveKills is how many times the client is killed mid-turn.
const serveKills = 200

// TestServeKillsReattach: a controller of a session, killed 200 times
// mid-turn (its connection closed at a random moment: before its hello's
// answer, during the replay, or while the model streams), each time
// attaching again with the seq of the last event it read whole, prompting
// when no turn runs. Over every connection it must have read every event
// once, in order, and byte for byte what an observer attached throughout
// read.
func TestServeKillsReattach(t *testing.T) {
	e := newTestEnv(t)
	// Deltas of 4 KiB, each one event (agent.go's deltaBatchBytes), one
	// each 5 ms: 30 of them, about as much as an answer of the fake model
	// may hold (its maxTokens), then the next prompt.
	deltas := make([]string, 30)
	for i := range deltas {
		deltas[i] = strings.Repeat("tok ", deltaBatchBytes/4)
	}
	script, _ := json.Marshal(map[string]any{"text": deltas, "delayMs": 5})
	startFakeModel(t, apiOpenAI, string(script), e.agentDir).repeat()
	sh := startServe(t, e, t.TempDir(), "--model", "fake/fake-model")
	seed := time.Now().UnixNano()
	stats := killAndReattach(t, func() (net.Conn, error) { return net.Dial("unix", sh.socket) }, serveKills, seed)
	if stats.lost != 0 || stats.duplicated != 0 || stats.differ != 0 || stats.resyncs != 0 {
		t.Errorf("over %d kills (%d mid-turn; the moments from seed %d), %d events: %d lost, %d duplicated, %d unlike the observer's, %d resyncs",
			stats.kills, stats.midTurn, seed, stats.events, stats.lost, stats.duplicated, stats.differ, stats.resyncs)
	}
	t.Logf("%d kills (%d mid-turn), %d events, %d reattaches answered", stats.kills, stats.midTurn, stats.events, len(stats.reattach))
	sh.end()
}

// BenchmarkServeKills: TestServeKillsReattach against the built rpi
// serve streaming 4,000-token answers: the events lost or duplicated over
// the 200 kills of each iteration (0), and the median time from a
// reattaching hello to its answer (its replay read).
//
//	go test -run '^$' -bench '^BenchmarkServeKills$' -benchtime 1x .
func BenchmarkServeKills(b *testing.B) {
	agent := b.TempDir()
	startFakeModel(b, apiOpenAI, tokenScript(serveTokens, 1), agent).repeat()
	host := startServeProcess(b, agent)
	var wrong, events int
	var reattaches []time.Duration
	for b.Loop() {
		stats := killAndReattach(b, func() (net.Conn, error) { return net.Dial("unix", host.socket) }, serveKills, int64(b.N))
		wrong += stats.lost + stats.duplicated + stats.differ + stats.resyncs
		events += stats.events
		reattaches = append(reattaches, stats.reattach...)
	}
	b.ReportMetric(float64(wrong), "lost+duplicated")
	b.ReportMetric(float64(events)/float64(b.N), "events")
	b.ReportMetric(medianDuration(reattaches), "reattach-ms")
}

// killStats is what killAndReattach saw.
type killStats struct {
	kills, midTurn int             // connections killed; of them, while a turn ran
	events         int             // the session's events
	lost           int             // events the client never read
	duplicated     int             // events it read twice
	differ         int             // events unlike the observer's (or missing from one side)
	resyncs        int             // reattaches answered resync: true
	reattach       []time.Duration // from a hello to its answer, for those answered
}

// eventLog is what one client read of a session's events.
type eventLog struct {
	mu         sync.Mutex
	lines      [][]byte
	last       int64 // the seq of the last event read whole
	running    bool  // agent_start read, and no agent_settled after it
	lost, dups int
}

// add takes one whole record; it reports whether it was an event.
func (l *eventLog) add(line []byte) bool {
	seq, ok := eventSeq(line)
	if !ok {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case seq <= l.last:
		l.dups++
		return true
	case seq > l.last+1:
		l.lost += int(seq - l.last - 1)
	}
	l.last = seq
	l.lines = append(l.lines, bytes.Clone(line))
	switch {
	case bytes.HasPrefix(line, []byte(`{"type":"agent_start"`)):
		l.running = true
	case bytes.HasPrefix(line, []byte(`{"type":"agent_settled"`)):
		l.running = false
	}
	return true
}

func (l *eventLog) state() (last int64, running bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last, l.running
}

// readInto reads conn's records into l until it fails; a hello's answer
// goes to answers. done is closed when it returns.
func readInto(conn net.Conn, l *eventLog, answers chan<- []byte) (done <-chan struct{}) {
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		r := bufio.NewReaderSize(conn, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return // a record cut by the kill was not read whole
			}
			if !l.add(line) && bytes.HasPrefix(line, []byte(`{"id":"h","type":"response"`)) {
				answers <- line
			}
		}
	}()
	return finished
}

// killAndReattach opens a session (hello) on a connection from dial, and
// an observer of it that stays; then, until the client has been killed
// kills times while a turn ran, it closes its connection at a random
// moment and attaches again with the seq of the last event it read whole,
// prompting whenever no turn runs. At the end it attaches once more,
// waits for the turn to settle and compares what it read with what the
// observer read.
func killAndReattach(t testing.TB, dial func() (net.Conn, error), kills int, seed int64) killStats {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	var stats killStats
	var client, observer eventLog
	var sid string
	var observerConn net.Conn
	var observerDone <-chan struct{}
	defer func() {
		if observerConn != nil {
			observerConn.Close()
			<-observerDone
		}
	}()
	// connect attaches the client (a new session the first time) and
	// returns its connection, the answers to its hellos, and its reader's end.
	connect := func() (net.Conn, chan []byte, <-chan struct{}) {
		conn, err := dial()
		if err != nil {
			t.Fatal(err)
		}
		answers := make(chan []byte, 1)
		done := readInto(conn, &client, answers)
		hello := `{"id":"h","type":"hello"}`
		if sid != "" {
			last, _ := client.state()
			hello = fmt.Sprintf(`{"id":"h","type":"hello","attach":%q,"cursor":%d}`, sid, last)
		}
		io.WriteString(conn, hello+"\n")
		return conn, answers, done
	}
	// answered waits for a hello's answer, and reads it.
	answered := func(answers <-chan []byte, start time.Time) bool {
		select {
		case line := <-answers:
			stats.reattach = append(stats.reattach, time.Since(start))
			var answer struct {
				Success bool
				Data    helloAnswer
			}
			if json.Unmarshal(line, &answer); !answer.Success {
				t.Fatalf("hello: %s", line)
			}
			if answer.Data.Resync {
				stats.resyncs++
			}
			if sid == "" {
				sid = answer.Data.SessionID
			}
			return true
		case <-time.After(20 * time.Second):
			t.Fatalf("no answer to a hello within 20 s")
			return false
		}
	}
	// until waits up to 20 s for cond.
	until := func(what string, cond func() bool) {
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waited 20 s for %s", what)
			}
		}
	}
	for stats.midTurn < kills {
		start := time.Now()
		conn, answers, done := connect()
		first := sid == ""
		if first || rng.Intn(5) > 0 { // else: killed before the answer, during its replay
			answered(answers, start)
			if first {
				var err error
				if observerConn, err = dial(); err != nil {
					t.Fatal(err)
				}
				observerDone = readInto(observerConn, &observer, make(chan []byte, 1))
				io.WriteString(observerConn, `{"id":"h","type":"hello","attach":"`+sid+`","cursor":0,"role":"observer"}`+"\n")
			}
			if _, running := client.state(); !running {
				io.WriteString(conn, servePrompt)
				until("the turn to start", func() bool { _, running := client.state(); return running })
			}
			time.Sleep(time.Duration(rng.Intn(8000)) * time.Microsecond)
		}
		_, running := client.state()
		conn.Close()
		<-done
		stats.kills++
		if running {
			stats.midTurn++
		}
	}
	// Once more, to the end of the turn.
	start := time.Now()
	conn, answers, done := connect()
	answered(answers, start)
	until("the turn to settle", func() bool { _, running := client.state(); return !running })
	last, _ := client.state()
	until("the observer to catch up", func() bool { seen, _ := observer.state(); return seen >= last })
	conn.Close()
	<-done
	client.mu.Lock()
	observer.mu.Lock()
	defer client.mu.Unlock()
	defer observer.mu.Unlock()
	stats.events = len(observer.lines)
	stats.lost, stats.duplicated = client.lost+observer.lost, client.dups+observer.dups
	for i := range max(len(client.lines), len(observer.lines)) {
		if i >= len(client.lines) || i >= len(observer.lines) || !bytes.Equal(client.lines[i], observer.lines[i]) {
			stats.differ++
		}
	}
	return stats
}

// BenchmarkServeObserversInProcess: BenchmarkServeObservers/burst's
// session with 32 observers, rpi serve in the test process, for
// profiling (-cpuprofile): the host's share is under serveHost, stage
// and clientQueue. Sessions left are closed after 100 ms, so that many
// iterations stay under the host's 64 sessions.
//
//	go test -run '^$' -bench '^BenchmarkServeObserversInProcess$' -benchtime 100x -cpuprofile "$d/cpu.out" -o "$d/rpi.test" .
func BenchmarkServeObserversInProcess(b *testing.B) {
	e := newTestEnv(b)
	startFakeModel(b, apiOpenAI, burstScript(serveTokens), e.agentDir).repeat()
	socket := filepath.Join(shortSocketDir(b), "rpi.sock")
	stderr, stop, done := newWatchedOutput(), make(chan os.Signal, 1), make(chan int, 1)
	args := []string{"serve", "--listen", "unix:" + socket, "--cwd", b.TempDir(), "--idle-close", "100ms"}
	go func() { done <- runProgram(args, e.env(), strings.NewReader(""), io.Discard, stderr, stop) }()
	if !stderr.waitFor("listening on", func(b []byte) string { return string(b) }) {
		b.Fatalf("rpi serve never listened:\n%s", stderr.bytes())
	}
	for b.Loop() {
		clients := observedSession(b, socket)
		answerAll(b, clients)
		closeAll(clients)
	}
	stop <- syscall.SIGTERM
	<-done
}
