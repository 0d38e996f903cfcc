package main

// Benchmarks of the built binary, driven through real pipes, each beside
// a floor measured the same way. Each reports its figure as a custom
// metric. scripts/bench.sh runs them all with the -benchtime each needs
// and prints the medians that docs/performance.md quotes.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
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

var (
	buildOnce sync.Once
	benchDir  string // holds the built binary; TestMain removes it
	binPath   string
	buildErr  error
)

// rpiBinary builds the static binary once per test run, into benchDir;
// RPI_BENCH_BIN names another rpi binary to run instead (an older build,
// to measure a change by turns where bench-against.sh cannot: the
// benchmark came with the change).
func rpiBinary(b testing.TB) string {
	if bin := os.Getenv("RPI_BENCH_BIN"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rpi-bench-")
		if err != nil {
			buildErr = err
			return
		}
		benchDir = dir
		binPath = filepath.Join(dir, "rpi")
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return binPath
}

// benchProcess is the built rpi with pipes, its first line already read.
type benchProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
}

func startBench(b *testing.B, env ...string) *benchProcess {
	cmd := exec.Command(rpiBinary(b), "rpc", "--cwd", b.TempDir())
	cmd.Env = append(append(os.Environ(), "PI_CODING_AGENT_DIR="+b.TempDir()), env...)
	p := startPiped(b, cmd)
	if _, err := p.stdout.ReadBytes('\n'); err != nil {
		b.Fatal(err)
	}
	return p
}

// startPiped starts cmd with its stdin and stdout piped; it is stopped
// (stdin closed, waited for) when the benchmark ends.
func startPiped(b *testing.B, cmd *exec.Cmd) *benchProcess {
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	return &benchProcess{cmd: cmd, stdin: stdin, stdout: bufio.NewReaderSize(stdout, 1<<20)}
}

// statusMiB reads a memory figure of pid from /proc/PID/status: VmRSS
// (resident now) or VmHWM (peak resident).
func statusMiB(b *testing.B, pid int, field string) float64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return float64(kb) / 1024
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// BenchmarkStartup: exec → session_started on stdout (the mean, and the
// median, which the machine's other work moves less). Compare with
// BenchmarkStartupFloor/net-http, or see BenchmarkStartupRatio;
// RPI_TRACE_STARTUP=1 shows the phases.
func BenchmarkStartup(b *testing.B) {
	rpi := rpiStartup(b)
	var times []time.Duration
	for b.Loop() {
		times = append(times, firstLineTime(b, rpi()))
	}
	reportFirstLine(b, times)
}

// rpiStartup makes the command BenchmarkStartup times: the built rpi in a
// cwd, agent directory and TMPDIR of its own.
func rpiStartup(b *testing.B) func() *exec.Cmd {
	bin := rpiBinary(b)
	dir, agent, tmp := b.TempDir(), b.TempDir(), b.TempDir()
	return func() *exec.Cmd {
		cmd := exec.Command(bin, "rpc", "--cwd", dir)
		cmd.Env = append(os.Environ(), "PI_CODING_AGENT_DIR="+agent, "TMPDIR="+tmp)
		return cmd
	}
}

// firstLineTime starts cmd with its stdin and stdout piped and returns the
// time from exec to its first line, which must be session_started's.
func firstLineTime(b *testing.B, cmd *exec.Cmd) time.Duration {
	return lineTime(b, cmd, "", `{"type":"session_started"`)
}

// lineTime starts cmd with its stdin and stdout piped, writes input to its
// stdin at once, and returns the time from exec to the first line that
// starts with want; the lines before it must be whole.
func lineTime(b *testing.B, cmd *exec.Cmd, input, want string) time.Duration {
	took, _ := lineCost(b, cmd, input, want)
	return took
}

// lineCost is lineTime, and the page faults the process had taken when
// that line came (minorFaults): a count that, unlike the time, hardly
// moves with the machine's other work.
func lineCost(b *testing.B, cmd *exec.Cmd, input, want string) (took time.Duration, faults float64) {
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	io.WriteString(stdin, input)
	r := bufio.NewReader(stdout)
	line, err := r.ReadBytes('\n')
	for err == nil && !bytes.HasPrefix(line, []byte(want)) {
		line, err = r.ReadBytes('\n')
	}
	took = time.Since(start)
	if err != nil {
		b.Fatalf("no line starting %q before %q, %v", want, line, err)
	}
	faults = minorFaults(cmd.Process.Pid)
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
	return took, faults
}

// minorFaults is how many page faults (minor: no disk read) the process
// pid has taken so far, from /proc/<pid>/stat; 0 where there is no /proc.
// A process that has just exited and is not yet waited for still has it.
func minorFaults(pid int) float64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(stat, ')')
	if err != nil || i < 0 {
		return 0
	}
	fields := strings.Fields(string(stat[i+1:])) // from the state on: minflt is the 8th
	if len(fields) < 8 {
		return 0
	}
	n, _ := strconv.ParseFloat(fields[7], 64)
	return n
}

// reportFirstLine reports the mean and the median of times.
func reportFirstLine(b *testing.B, times []time.Duration) {
	var total time.Duration
	for _, t := range times {
		total += t
	}
	slices.Sort(times)
	b.ReportMetric(float64(total.Microseconds())/1000/float64(len(times)), "ms-to-first-line")
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "ms-median")
}

// medianDuration is the median of times in milliseconds (sorted in place).
func medianDuration(times []time.Duration) float64 {
	slices.Sort(times)
	return float64(times[len(times)/2].Microseconds()) / 1000
}

// pipeline writes n get_state commands and reads their n responses.
func (p *benchProcess) pipeline(b *testing.B, n int) {
	go func() {
		w := bufio.NewWriterSize(p.stdin, 1<<20)
		for range n {
			w.WriteString(`{"id":"s","type":"get_state"}` + "\n")
		}
		w.Flush()
	}()
	for seen := 0; seen < n; {
		chunk, err := p.stdout.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			b.Fatal(err)
		}
		seen += bytes.Count(chunk, []byte("\n"))
	}
}

// pipelinedLines is how many get_state each pipelined benchmark writes.
const pipelinedLines = 200_000

// timePipeline runs p.pipeline once per iteration and reports the answers
// a second.
func (p *benchProcess) timePipeline(b *testing.B) {
	var total time.Duration
	for b.Loop() {
		start := time.Now()
		p.pipeline(b, pipelinedLines)
		total += time.Since(start)
	}
	b.ReportMetric(float64(pipelinedLines*b.N)/total.Seconds(), "get_state/s")
}

// BenchmarkGetStatePipelined: 200,000 get_state written without waiting,
// all responses read back.
func BenchmarkGetStatePipelined(b *testing.B) {
	startBench(b).timePipeline(b)
}

// BenchmarkGetStatePipelinedFloor: the same 200,000 lines to a program
// that writes rpi's own get_state answer once per line with one plain
// write and no JSON: the floor BenchmarkGetStatePipelined is measured
// against.
func BenchmarkGetStatePipelinedFloor(b *testing.B) {
	startPipelineFloor(b).timePipeline(b)
}

// startPipelineFloor starts the floor of the pipelined benchmarks: this
// test binary as a helper that writes rpi's own get_state answer once
// per line read, with one plain write.
func startPipelineFloor(b *testing.B) *benchProcess { return startFloorHelper(b, "write-per-line") }

// startFloorHelper starts this test binary as the helper named, given
// rpi's own get_state answer to write.
func startFloorHelper(b *testing.B, helper string) *benchProcess {
	rpi := startBench(b)
	io.WriteString(rpi.stdin, `{"id":"s","type":"get_state"}`+"\n")
	record, err := rpi.stdout.ReadBytes('\n')
	if err != nil {
		b.Fatal(err)
	}
	self, _ := os.Executable()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "RPI_HELPER="+helper, "RPI_FLOOR_RECORD="+string(record))
	return startPiped(b, cmd)
}

// BenchmarkGetStatePipelinedRatio: BenchmarkGetStatePipelined over its
// floor, the two run by turns (one pipeline each per iteration), so that
// the machine's other work weighs on both alike; it reports the medians
// of their rates and their ratio. The batched floor (write-batched: one
// write of the canned answers to all the lines of each read, the I/O
// ceiling of a JSONL server) runs by turns with them: rpi/batched.
func BenchmarkGetStatePipelinedRatio(b *testing.B) {
	rpi, floor, batched := startBench(b), startPipelineFloor(b), startFloorHelper(b, "write-batched")
	var rpiRates, floorRates, batchedRates []float64
	rate := func(p *benchProcess) float64 {
		start := time.Now()
		p.pipeline(b, pipelinedLines)
		return pipelinedLines / time.Since(start).Seconds()
	}
	for b.Loop() {
		rpiRates = append(rpiRates, rate(rpi))
		floorRates = append(floorRates, rate(floor))
		batchedRates = append(batchedRates, rate(batched))
	}
	reportRatio(b, rpiRates, floorRates, "get_state/s")
	slices.Sort(batchedRates)
	b.ReportMetric(batchedRates[len(batchedRates)/2], "batched-get_state/s")
	b.ReportMetric(rpiRates[len(rpiRates)/2]/batchedRates[len(batchedRates)/2], "rpi/batched")
}

// reportRatio reports the medians of rates taken by turns from rpi and
// its floor, in unit, and the ratio of the two.
func reportRatio(b *testing.B, rpiRates, floorRates []float64, unit string) {
	slices.Sort(rpiRates)
	slices.Sort(floorRates)
	r, f := rpiRates[len(rpiRates)/2], floorRates[len(floorRates)/2]
	b.ReportMetric(r, "rpi-"+unit)
	b.ReportMetric(f, "floor-"+unit)
	b.ReportMetric(r/f, "rpi/floor")
}

// BenchmarkGetStatePipelinedPi: the same 200,000 lines to pi itself, when
// RPI_BENCH_PI names its command (scripts/bench-pi.sh installs pi 1.6 and
// sets it); skipped otherwise.
func BenchmarkGetStatePipelinedPi(b *testing.B) {
	command := os.Getenv("RPI_BENCH_PI")
	if command == "" {
		b.Skip("RPI_BENCH_PI is not set: run scripts/bench-pi.sh")
	}
	cmd := exec.Command("sh", "-c", command+" --mode rpc --no-session")
	cmd.Dir = b.TempDir()
	cmd.Env = withoutKeys(append(os.Environ(), "PI_CODING_AGENT_DIR="+b.TempDir()))
	pi := startPiped(b, cmd)
	pi.pipeline(b, 1000) // warm up: pi is ready once it answers
	pi.timePipeline(b)
}

// BenchmarkBashTrue: the round trip of `bash true`, one at a time.
func BenchmarkBashTrue(b *testing.B) {
	p := startBench(b)
	for b.Loop() {
		io.WriteString(p.stdin, `{"id":"t","type":"bash","command":"true"}`+"\n")
		for {
			line, err := p.stdout.ReadBytes('\n')
			if err != nil {
				b.Fatal(err)
			}
			if bytes.HasPrefix(line, []byte(`{"id":"t"`)) {
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/bash-true")
}

// BenchmarkMemory: resident memory when idle, after 200,000 and 1,000,000
// pipelined get_state (it must stay flat), and the peak over all of it.
// Most of what is resident idle is the binary's own pages (RssFile:
// clean, shared by every rpi running); the -anon figures are the memory
// rpi made (RssAnon), which the binary's size does not move.
func BenchmarkMemory(b *testing.B) {
	for b.Loop() {
		p := startBench(b)
		time.Sleep(200 * time.Millisecond)
		idle := statusMiB(b, p.cmd.Process.Pid, "VmRSS")
		b.ReportMetric(statusMiB(b, p.cmd.Process.Pid, "RssAnon"), "MiB-idle-anon")
		p.pipeline(b, 200_000)
		after200k := statusMiB(b, p.cmd.Process.Pid, "VmRSS")
		p.pipeline(b, 800_000)
		after1M := statusMiB(b, p.cmd.Process.Pid, "VmRSS")
		b.ReportMetric(statusMiB(b, p.cmd.Process.Pid, "RssAnon"), "MiB-after-1M-anon")
		b.ReportMetric(idle, "MiB-idle")
		b.ReportMetric(after200k, "MiB-after-200k")
		b.ReportMetric(after1M, "MiB-after-1M")
		b.ReportMetric(statusMiB(b, p.cmd.Process.Pid, "VmHWM"), "MiB-peak")
	}
}

// BenchmarkGetStateInProcess: the server's own cost per get_state, with
// real pipes but no exec, for profiling (-cpuprofile).
func BenchmarkGetStateInProcess(b *testing.B) {
	input := []byte(strings.Repeat(`{"id":"s","type":"get_state"}`+"\n", b.N))
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	go func() { inW.Write(input); inW.Close() }()
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, outR); close(done) }()
	b.ResetTimer()
	runRPI(b, newTestEnv(b), []string{"rpc", "--cwd", b.TempDir(), "--no-session"}, inR, outW)
	outW.Close()
	<-done
}

// BenchmarkHandleGetState: the command loop's own cost per get_state
// (decode, handler, encode into the output's buffer), no pipes, no
// goroutines: what the pipelined benchmarks spend beside their I/O.
func BenchmarkHandleGetState(b *testing.B) {
	s := newQuietServer(b, "--cwd", b.TempDir())
	line := []byte(`{"id":"s","type":"get_state"}`)
	b.ReportAllocs()
	for b.Loop() {
		s.handleFrame(frame{line: line})
	}
}

// BenchmarkBashTrueFloor: `bash -c true` started straight from os/exec
// with its output piped, no rpi: the floor BenchmarkBashTrue stands on.
func BenchmarkBashTrueFloor(b *testing.B) {
	for b.Loop() {
		shell, _ := findShell()
		cmd := exec.Command(shell, "-c", "true")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/bash-true")
}

// BenchmarkStartupFloor: exec → first line of two static Go programs
// built here: plain writes a line with os alone; net-http links what rpi
// must to reach the model APIs (net/http, crypto/tls, encoding/json) and
// writes one JSON line as rpi does. net-http is the floor BenchmarkStartup
// is held to.
func BenchmarkStartupFloor(b *testing.B) {
	for _, variant := range []struct{ name, source string }{
		{"plain", floorPlain},
		{"net-http", floorNetHTTP},
		{"net-http-signals", floorNetHTTPSignals},
	} {
		b.Run(variant.name, func(b *testing.B) {
			floor := buildFloor(b, variant.source)
			var times []time.Duration
			for b.Loop() {
				times = append(times, firstLineTime(b, exec.Command(floor)))
			}
			reportFirstLine(b, times)
		})
	}
}

// BenchmarkStartupRatio: rpi's startup (as BenchmarkStartup) over the
// net-http floor's, started by turns so that the machine's other work
// weighs on all alike (in a new random order each round). It reports the
// medians and their ratio, and more medians that show where the
// difference comes from: the floor with the signal handlers rpi installs
// before its first line (docs/protocol.md#launch) (floor-signals), and
// rpi's ratio to that; `rpi --version` (exec, package init, the start of
// the handlers' goroutine and flags, no server); and exec → the answer
// to a get_state written at once, beside the same for a floor that reads
// that line and answers it (floor-answer), without and with the handlers,
// and the page faults each had taken by its answer (medians; Linux): a
// count that, unlike a time, hardly moves with the machine's other work.
func BenchmarkStartupRatio(b *testing.B) {
	rpi, floor, floorSignals := rpiStartup(b), buildFloor(b, floorNetHTTP), buildFloor(b, floorNetHTTPSignals)
	floorAnswer, floorAnswerSignals := buildFloor(b, floorNetHTTPAnswer), buildFloor(b, floorNetHTTPAnswerSignals)
	const command, answer = `{"id":"first","type":"get_state"}` + "\n", `{"id":"first","type":"response"`
	var rpiTimes, floorTimes, signalsTimes, versionTimes, answerTimes, floorAnswerTimes, floorAnswerSignalsTimes []time.Duration
	var answerFaults, floorAnswerFaults, floorAnswerSignalsFaults []float64
	// Each round runs the seven in a new random order: in a fixed one,
	// a command after a different binary was measured slower than after
	// its own, and the ratios leaned with the order.
	round := []func(){
		func() { rpiTimes = append(rpiTimes, firstLineTime(b, rpi())) },
		func() { floorTimes = append(floorTimes, firstLineTime(b, exec.Command(floor))) },
		func() { signalsTimes = append(signalsTimes, firstLineTime(b, exec.Command(floorSignals))) },
		func() {
			versionTimes = append(versionTimes, lineTime(b, exec.Command(rpiBinary(b), "--version"), "", "rpi "))
		},
		func() {
			took, faults := lineCost(b, rpi(), command, answer)
			answerTimes, answerFaults = append(answerTimes, took), append(answerFaults, faults)
		},
		func() {
			took, faults := lineCost(b, exec.Command(floorAnswer), command, answer)
			floorAnswerTimes, floorAnswerFaults = append(floorAnswerTimes, took), append(floorAnswerFaults, faults)
		},
		func() {
			took, faults := lineCost(b, exec.Command(floorAnswerSignals), command, answer)
			floorAnswerSignalsTimes, floorAnswerSignalsFaults = append(floorAnswerSignalsTimes, took), append(floorAnswerSignalsFaults, faults)
		},
	}
	for b.Loop() {
		rand.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		for _, run := range round {
			run()
		}
	}
	r, f, fs := medianDuration(rpiTimes), medianDuration(floorTimes), medianDuration(signalsTimes)
	b.ReportMetric(r, "rpi-ms-median")
	b.ReportMetric(f, "floor-ms-median")
	b.ReportMetric(fs, "floor-signals-ms-median")
	b.ReportMetric(medianDuration(versionTimes), "version-ms-median")
	a, fa, fas := medianDuration(answerTimes), medianDuration(floorAnswerTimes), medianDuration(floorAnswerSignalsTimes)
	b.ReportMetric(a, "answer-ms-median")
	b.ReportMetric(fa, "floor-answer-ms-median")
	b.ReportMetric(fas, "floor-answer-signals-ms-median")
	b.ReportMetric(r/f, "rpi/floor")
	b.ReportMetric(a/fa, "answer/floor-answer")
	b.ReportMetric(r/fs, "rpi/floor-signals")
	b.ReportMetric(a/fas, "answer/floor-answer-signals")
	if fa := median(floorAnswerFaults); fa > 0 {
		b.ReportMetric(median(answerFaults), "answer-faults")
		b.ReportMetric(fa, "floor-answer-faults")
		b.ReportMetric(median(floorAnswerSignalsFaults), "floor-answer-signals-faults")
	}
}

// floorNetHTTPAnswer is floorNetHTTP answering a command instead: it
// reads one JSON line from stdin and writes an answer with its id.
var floorNetHTTPAnswer = editFloor(floorNetHTTP,
	"\tline := struct {\n\t\tType string", "\tvar command struct{ ID string }\n\tjson.NewDecoder(os.Stdin).Decode(&command)\n\tline := struct {\n\t\tID   string `json:\"id\"`\n\t\tType string",
	`}{"session_started", map[string]any{`, `}{command.ID, "response", map[string]any{`)

// floorNetHTTPSignals and floorNetHTTPAnswerSignals are those floors with
// the handlers rpi installs before its first line: the floors of a
// program that keeps rpi's signal contract (docs/protocol.md#launch).
var floorNetHTTPSignals, floorNetHTTPAnswerSignals = withHandledSignals(floorNetHTTP), withHandledSignals(floorNetHTTPAnswer)

// withHandledSignals is a floor's source with the handlers rpi installs
// before its first line (handledSignals, by number), installed the same
// way: on a goroutine, waited for before the line.
func withHandledSignals(source string) string {
	var numbers []string
	for _, sig := range handledSignals {
		numbers = append(numbers, fmt.Sprintf("syscall.Signal(%d)", sig.(syscall.Signal)))
	}
	return editFloor(source,
		`"os"`, `"os"
	"os/signal"
	"syscall"`,
		"func main() {\n", `func main() {
	installed := make(chan struct{})
	go func() {
		c := make(chan os.Signal, 16)
		signal.Notify(c, `+strings.Join(numbers, ", ")+`)
		close(installed)
	}()
`,
		"\tif err := json.NewEncoder", "\t<-installed\n\tif err := json.NewEncoder")
}

// editFloor replaces each old text of a floor's source with its new one
// (pairs: old, new, …). An old text the source lacks is a panic, so that
// a floor edited elsewhere cannot quietly become the plain one.
func editFloor(source string, pairs ...string) string {
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(source, pairs[i]) {
			panic(fmt.Sprintf("floor source lacks %q", pairs[i]))
		}
	}
	return strings.NewReplacer(pairs...).Replace(source)
}

// buildFloor builds a floor program from source, in a temp folder.
func buildFloor(b *testing.B, source string) string {
	dir := b.TempDir()
	// rpi's go.mod, so that both get the same language version and
	// GODEBUG defaults.
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		b.Fatal(err)
	}
	_, goLine, _ := strings.Cut(string(mod), "\n")
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module floor\n"+goLine), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte(source), 0o644)
	build := exec.Command("go", "build", "-o", "floor", ".")
	build.Dir, build.Env = dir, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	return filepath.Join(dir, "floor")
}

const floorPlain = `package main

import "os"

func main() { os.Stdout.Write([]byte("{\"type\":\"session_started\"}\n")) }
`

// floorNetHTTP links what rpi must to reach the model APIs: an HTTPS
// client that can make a request and decode a JSON answer (given a URL;
// the benchmark gives none), and encoding/json for its one line. Merely
// naming http.DefaultClient would let the linker drop the client.
const floorNetHTTP = `package main

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"os"
)

var client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}}

func main() {
	if len(os.Args) > 1 { // never in the benchmark: keeps the client linked, as rpi's is
		resp, err := client.Get(os.Args[1])
		if err != nil {
			os.Exit(1)
		}
		var v any
		json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
	}
	line := struct {
		Type string         ` + "`json:\"type\"`" + `
		Data map[string]any ` + "`json:\"data\"`" + `
	}{"session_started", map[string]any{
		"tls":     client.Transport.(*http.Transport).TLSClientConfig.MinVersion,
		"timeout": client.Timeout,
	}}
	if err := json.NewEncoder(os.Stdout).Encode(line); err != nil {
		os.Exit(1)
	}
}
`

// benchAgent starts the built rpi against a fake model serving script.
func benchAgent(b *testing.B, script string) *benchProcess {
	agent := b.TempDir()
	startFakeModel(b, apiOpenAI, script, agent).repeat()
	return startBench(b, withoutKeys([]string{"PI_CODING_AGENT_DIR=" + agent})...)
}

// untilSettled reads records until agent_settled and returns the bytes read.
func (p *benchProcess) untilSettled(b *testing.B) int {
	n := 0
	for {
		line, err := p.stdout.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			b.Fatal(err)
		}
		n += len(line)
		if bytes.HasPrefix(line, []byte(`{"type":"agent_settled"`)) {
			return n
		}
	}
}

// BenchmarkPromptTwoTurns: a prompt whose answer is one bash tool call
// (true) and then text, prompt → agent_settled, against the local fake
// model; reports the median over the iterations (run with -benchtime 100x).
func BenchmarkPromptTwoTurns(b *testing.B) {
	benchPrompt(b, `{"toolCalls":[{"id":"call_1","name":"bash","args":["{\"command\":\"true\"}"]}],"usage":{"input":100,"output":10}}
{"text":["Done."],"usage":{"input":120,"output":2}}`)
}

// BenchmarkPromptText: a prompt answered with text only, for comparison.
func BenchmarkPromptText(b *testing.B) {
	benchPrompt(b, `{"text":["Done."],"usage":{"input":120,"output":2}}`)
}

// benchPrompt reports the median time from prompt to agent_settled.
func benchPrompt(b *testing.B, script string) {
	p := benchAgent(b, script)
	var times []time.Duration
	for b.Loop() {
		start := time.Now()
		io.WriteString(p.stdin, `{"id":"p","type":"prompt","message":"Go"}`+"\n")
		p.untilSettled(b)
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "ms-median")
}

// BenchmarkStreamCost: stdout bytes for a 10,000-token answer (4-byte
// tokens) divided by the answer's own size.
func BenchmarkStreamCost(b *testing.B) {
	tokens := make([]string, 10000)
	for i := range tokens {
		tokens[i] = "tok "
	}
	line, _ := json.Marshal(map[string]any{"text": tokens})
	p := benchAgent(b, string(line))
	var ratio float64
	for b.Loop() {
		// A fresh session each time, so the conversation does not grow.
		io.WriteString(p.stdin, `{"id":"n","type":"new_session"}`+"\n")
		for {
			line, err := p.stdout.ReadBytes('\n')
			if err != nil {
				b.Fatal(err)
			}
			if bytes.HasPrefix(line, []byte(`{"type":"session_started"`)) {
				break
			}
		}
		io.WriteString(p.stdin, `{"id":"p","type":"prompt","message":"Talk"}`+"\n")
		ratio = float64(p.untilSettled(b)) / float64(4*len(tokens))
	}
	b.ReportMetric(ratio, "stdout/answer")
}

// cpuTime is the CPU time (user and system) pid has used so far.
func cpuTime(b *testing.B, pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name, which ends with the last ')':
	// utime and stime are the 12th and 13th, in clock ticks (100 a second).
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	utime, _ := strconv.Atoi(fields[11])
	stime, _ := strconv.Atoi(fields[12])
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// BenchmarkEventLineEndingsRatio: the time to read 2 MiB of server-sent
// event lines that end in "\r" alone, over the same lines ending in "\n"
// (the floor), read by turns in the same run: a server's choice of line
// ending must not cost rpi more. Each "\r" line searched all that was
// buffered (up to 64 KiB) for a "\n" again: 25 times the floor.
func BenchmarkEventLineEndingsRatio(b *testing.B) {
	read := func(stream string) time.Duration {
		st := newStreamer(&assistantMessage{}, func(assistantEvent) {})
		start := time.Now()
		st.events(strings.NewReader(stream), func(string, []byte) (bool, error) { return false, nil })
		return time.Since(start)
	}
	lf, cr := strings.Repeat("\n", 2<<20), strings.Repeat("\r", 2<<20)
	var lfTimes, crTimes []time.Duration
	for b.Loop() {
		lfTimes, crTimes = append(lfTimes, read(lf)), append(crTimes, read(cr))
	}
	b.ReportMetric(medianDuration(crTimes)/medianDuration(lfTimes), "cr/lf")
}

// BenchmarkStreamTokens: rpi's CPU time for one streamed answer of 1k,
// 4k, 16k and 64k tokens (4 bytes each) from the local fake model, each
// in a fresh session, divided by the tokens: constant when streaming is
// linear.
func BenchmarkStreamTokens(b *testing.B) {
	for _, n := range []int{1000, 4000, 16000, 64000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			tokens := make([]string, n)
			for i := range tokens {
				tokens[i] = "tok "
			}
			line, _ := json.Marshal(map[string]any{"text": tokens})
			p := benchAgent(b, string(line))
			var cpu time.Duration
			for b.Loop() {
				io.WriteString(p.stdin, `{"id":"n","type":"new_session"}`+"\n")
				for {
					line, err := p.stdout.ReadBytes('\n')
					if err != nil {
						b.Fatal(err)
					}
					if bytes.HasPrefix(line, []byte(`{"type":"session_started"`)) {
						break
					}
				}
				before := cpuTime(b, p.cmd.Process.Pid)
				io.WriteString(p.stdin, `{"id":"p","type":"prompt","message":"Talk"}`+"\n")
				p.untilSettled(b)
				cpu += cpuTime(b, p.cmd.Process.Pid) - before
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/answer")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(n*b.N), "cpu-ns/token")
		})
	}
}

// floodCommand is the child of BenchmarkProcessFlood and its floor: it
// writes floodBytes zero bytes, base64-encoded (76-column lines), as fast
// as it can.
const (
	floodBytes   = 512 << 20
	floodCommand = "head -c 536870912 /dev/zero | base64"
)

// BenchmarkProcessFlood: floodCommand started with process_spawn, every
// process_output read until process_exited; reports the child's output
// in MB/s and rpi's peak resident memory (VmHWM). Compare MB/s with
// BenchmarkProcessFloodFloor, or see BenchmarkProcessFloodRatio:
//
//	go test -run '^$' -bench 'ProcessFlood' -benchtime 3x -count 3 .
func BenchmarkProcessFlood(b *testing.B) {
	p := startBench(b)
	var total int64
	for b.Loop() {
		total += floodThroughRPI(b, p)
	}
	b.ReportMetric(float64(total)/1e6/b.Elapsed().Seconds(), "MB/s")
	b.ReportMetric(statusMiB(b, p.cmd.Process.Pid, "VmHWM"), "MiB-peak")
	b.ReportMetric(cpuTime(b, p.cmd.Process.Pid).Seconds()/float64(total)*1e9, "rpi-CPU-s/GB")
}

// BenchmarkProcessFloodFloor: the same child started from os/exec, its
// stdout copied to io.Discard, no rpi: the floor BenchmarkProcessFlood
// stands on.
func BenchmarkProcessFloodFloor(b *testing.B) {
	var total int64
	for b.Loop() {
		total += floodThroughCopy(b)
	}
	b.ReportMetric(float64(total)/1e6/b.Elapsed().Seconds(), "MB/s")
}

// BenchmarkProcessFloodRatio: BenchmarkProcessFlood over its floor, the
// two run by turns (one flood each per iteration), so that the machine's
// other work weighs on both alike; it reports the medians of their MB/s,
// their ratio, and rpi's peak resident memory.
func BenchmarkProcessFloodRatio(b *testing.B) {
	p := startBench(b)
	var rpiRates, floorRates []float64
	rate := func(flood func() int64) float64 {
		start := time.Now()
		n := flood()
		return float64(n) / 1e6 / time.Since(start).Seconds()
	}
	for b.Loop() {
		rpiRates = append(rpiRates, rate(func() int64 { return floodThroughRPI(b, p) }))
		floorRates = append(floorRates, rate(func() int64 { return floodThroughCopy(b) }))
	}
	reportRatio(b, rpiRates, floorRates, "MB/s")
	b.ReportMetric(statusMiB(b, p.cmd.Process.Pid, "VmHWM"), "MiB-peak")
}

// floodThroughRPI runs floodCommand with process_spawn in rpi p, reads
// every record until process_exited, and returns the child's output bytes.
func floodThroughRPI(b *testing.B, p *benchProcess) int64 {
	spawn, _ := json.Marshal(map[string]any{"id": "f", "type": "process_spawn",
		"spec": map[string]any{"argv": []string{"sh", "-c", floodCommand}, "cwd": b.TempDir()}})
	p.stdin.Write(append(spawn, '\n'))
	for {
		line, err := p.stdout.ReadSlice('\n')
		if err != nil {
			b.Fatalf("%.200s: %v", line, err)
		}
		if bytes.HasPrefix(line, []byte(`{"type":"process_exited"`)) {
			var ev struct{ Data struct{ Process processInfo } }
			if err := json.Unmarshal(line, &ev); err != nil || ev.Data.Process.ExitCode == nil || *ev.Data.Process.ExitCode != 0 {
				b.Fatalf("%s: %v", line, err)
			}
			return ev.Data.Process.OutputCursor
		}
	}
}

// floodThroughCopy runs floodCommand from os/exec, copies its stdout to
// io.Discard and returns the bytes copied.
func floodThroughCopy(b *testing.B) int64 {
	cmd := exec.Command("sh", "-c", floodCommand)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, stdout)
	if err != nil || cmd.Wait() != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkFloodInProcess: BenchmarkProcessFlood with rpi in the
// test process, for profiling (-cpuprofile).
func BenchmarkFloodInProcess(b *testing.B) {
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	done := make(chan struct{})
	go func() {
		runRPI(b, newTestEnv(b), []string{"rpc", "--cwd", b.TempDir(), "--no-session"}, inR, outW)
		outW.Close()
		close(done)
	}()
	stdout := bufio.NewReaderSize(outR, 1<<20)
	spawn, _ := json.Marshal(map[string]any{"id": "f", "type": "process_spawn",
		"spec": map[string]any{"argv": []string{"sh", "-c", floodCommand}, "cwd": b.TempDir()}})
	for b.Loop() {
		inW.Write(append(spawn, '\n'))
		for {
			line, err := stdout.ReadSlice('\n')
			if err != nil && err != bufio.ErrBufferFull {
				b.Fatal(err)
			}
			if bytes.HasPrefix(line, []byte(`{"type":"process_exited"`)) {
				break
			}
		}
	}
	inW.Close()
	io.Copy(io.Discard, outR)
	<-done
}

// ---- A model server that will not stop ----

// hugeAnswerBytes is what hugeAnswerServer streams at most: 100 MiB.
const hugeAnswerBytes = 100 << 20

// hugeAnswerAgent starts a model server (Anthropic's format) whose every
// answer is text in 4 KiB deltas, total bytes of it, one each pace (0:
// as fast as it can), until done or rpi hangs up; and an agent directory
// whose one model is served by it with maxTokens 128000, so that rpi's
// bound for its answers is the ceiling, maxAnswerBytes. It returns the
// agent directory.
func hugeAnswerAgent(b *testing.B, total int, pace time.Duration) string {
	piece := strings.Repeat("x", 4095) + " "
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"output_tokens\":0}}}\n\n"+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
		for sent := 0; sent < total; sent += len(piece) {
			if _, err := fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%q}}\n\n", piece); err != nil {
				return
			}
			if pace > 0 {
				w.(http.Flusher).Flush()
				time.Sleep(pace)
			}
		}
		fmt.Fprint(w, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"+
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":5}}\n\n"+
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	b.Cleanup(srv.Close)
	agent := b.TempDir()
	os.WriteFile(filepath.Join(agent, "models.json"), []byte(`{"providers":{"huge":{"baseUrl":"`+srv.URL+
		`","api":"anthropic-messages","models":[{"id":"m","maxTokens":128000}]}}}`), 0o644)
	return agent
}

// BenchmarkHugeAnswer: a model server streams a 100 MiB answer and rpi
// cuts it at its bound (maxAnswerBytes for this model). Each iteration is
// a fresh rpi, with its session file, that gets a prompt and is read
// until agent_settled; the figure is its peak resident memory (VmHWM),
// beside the target (twice the bound and 32 MiB) and a floor measured by
// turns: the peak of the same rpi answered 4 KiB by the same kind of
// server. Medians over the iterations (run with -benchtime 5x):
//
//	go test -run '^$' -bench 'HugeAnswer' -benchtime 5x .
func BenchmarkHugeAnswer(b *testing.B) {
	huge, small := hugeAnswerAgent(b, hugeAnswerBytes, 0), hugeAnswerAgent(b, 4<<10, 0)
	peak := func(agent string) float64 {
		p := startBench(b, withoutKeys([]string{"PI_CODING_AGENT_DIR=" + agent})...)
		io.WriteString(p.stdin, `{"id":"p","type":"prompt","message":"Write a lot"}`+"\n")
		p.untilSettled(b)
		defer p.stop()
		return statusMiB(b, p.cmd.Process.Pid, "VmHWM")
	}
	var peaks, floors []float64
	for b.Loop() {
		peaks = append(peaks, peak(huge))
		floors = append(floors, peak(small))
	}
	slices.Sort(peaks)
	slices.Sort(floors)
	b.ReportMetric(peaks[len(peaks)/2], "MiB-peak")
	b.ReportMetric(floors[len(floors)/2], "MiB-floor")
	b.ReportMetric(2*float64(maxAnswerBytes)/(1<<20)+32, "MiB-target")
}

// BenchmarkAbortHugeAnswer: while a model server streams a huge answer
// (4 KiB a millisecond), the client sends get_state and abort once three
// quarters of rpi's bound have arrived, the most an answer can hold
// before it is cut; the figures are the medians of the time to abort's
// answer (after the run's agent_settled) and, as the floor, to
// get_state's, each in a fresh rpi:
//
//	go test -run '^$' -bench 'AbortHugeAnswer' -benchtime 5x .
func BenchmarkAbortHugeAnswer(b *testing.B) {
	agent := hugeAnswerAgent(b, hugeAnswerBytes, time.Millisecond)
	var aborts, floors []float64
	for b.Loop() {
		abort, floor := abortHugeAnswer(b, agent)
		aborts, floors = append(aborts, abort), append(floors, floor)
	}
	slices.Sort(aborts)
	slices.Sort(floors)
	b.ReportMetric(aborts[len(aborts)/2], "ms-abort")
	b.ReportMetric(floors[len(floors)/2], "ms-get_state")
}

// abortHugeAnswer is one iteration of BenchmarkAbortHugeAnswer: the
// milliseconds from writing get_state and abort to each one's answer.
func abortHugeAnswer(b *testing.B, agent string) (abort, getState float64) {
	p := startBench(b, withoutKeys([]string{"PI_CODING_AGENT_DIR=" + agent})...)
	io.WriteString(p.stdin, `{"id":"p","type":"prompt","message":"Write a lot"}`+"\n")
	for text := 0; text < maxAnswerBytes*3/4; {
		line, err := p.stdout.ReadBytes('\n')
		if err != nil {
			b.Fatal(err)
		}
		if bytes.Contains(line, []byte(`"type":"text_delta"`)) {
			text += len(line)
		}
	}
	start := time.Now()
	io.WriteString(p.stdin, `{"id":"s","type":"get_state"}`+"\n"+`{"id":"a","type":"abort"}`+"\n")
	for abort == 0 || getState == 0 {
		line, err := p.stdout.ReadBytes('\n')
		if err != nil {
			b.Fatal(err)
		}
		ms := float64(time.Since(start).Microseconds()) / 1000
		switch {
		case bytes.HasPrefix(line, []byte(`{"id":"s"`)):
			getState = ms
		case bytes.HasPrefix(line, []byte(`{"id":"a"`)):
			abort = ms
		}
	}
	p.stop()
	return abort, getState
}

// stop closes rpi's stdin and waits for it to exit.
func (p *benchProcess) stop() {
	p.stdin.Close()
	p.cmd.Wait()
}

// BenchmarkRequestBodyTools is the tools' part of a request body to a
// host of strict tools (Chat Completions), which every model request
// makes: the strict schemas are made once a tool, not once a request.
func BenchmarkRequestBodyTools(b *testing.B) {
	m := &model{ID: "m", API: apiOpenAI, Provider: "deepseek", MaxTokens: 1000, compat: compat{SupportsStrictMode: ptr(true)}}
	req := streamRequest{model: m, tools: allTools, messages: []any{&userMessage{Role: "user", Content: textBlocks("hi")}}}
	b.ReportAllocs()
	for b.Loop() {
		openAIBody(req)
	}
}
