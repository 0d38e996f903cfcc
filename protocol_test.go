package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the want.jsonl section of every fixture from rpi's output")

// TestMain lets the test binary stand in for programs: with RPI_TEST_MAIN=1
// it is rpi itself (for end-to-end tests of real stdin EOF and signals);
// with RPI_HELPER=name it is one of the helper programs below.
func TestMain(m *testing.M) {
	if _, ok := os.LookupEnv(watchdogEnv); ok {
		os.Exit(runWatchdog(os.Stdin, ""))
	}
	if name := os.Getenv("RPI_HELPER"); name != "" {
		helper, ok := helpers[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown helper %q\n", name)
			os.Exit(2)
		}
		helper(os.Args[1:])
		os.Exit(0)
	}
	if os.Getenv("RPI_TEST_MAIN") == "1" {
		main()
		return
	}
	// Fixtures wait on children and timers far more than on the CPU: run
	// more of them at once than there are cores, unless told otherwise.
	flag.Parse()
	childrenStartAtDefaults()
	if f := flag.Lookup("test.parallel"); f != nil && f.Value.String() == strconv.Itoa(runtime.GOMAXPROCS(0)) {
		f.Value.Set("8")
	}
	code := m.Run()
	reportSkippedForPrograms()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// endToEnd marks a slow end-to-end test (real processes, signals, memory,
// example clients): go test -short skips it and runs the fixtures and the
// quick checks, in seconds.
func endToEnd(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("end to end: skipped with -short")
	}
}

// helpers are the programs the test binary can impersonate.
var helpers = map[string]func(args []string){
	// spawn-grandchild starts a long sleep in the background, prints its pid
	// and waits forever itself.
	"spawn-grandchild": func(args []string) {
		cmd := exec.Command("sleep", "300")
		cmd.Start()
		fmt.Println(cmd.Process.Pid)
		time.Sleep(time.Hour)
	},
	// write-per-line is the floor of BenchmarkGetStatePipelined: for each
	// input line it writes $RPI_FLOOR_RECORD with one plain write, no JSON.
	"write-per-line": func(args []string) {
		record := []byte(os.Getenv("RPI_FLOOR_RECORD"))
		in := bufio.NewReaderSize(os.Stdin, 64<<10)
		for {
			if _, err := in.ReadSlice('\n'); err != nil && err != bufio.ErrBufferFull {
				return
			}
			if _, err := os.Stdout.Write(record); err != nil {
				return
			}
		}
	},
	// write-batched is the batched floor of BenchmarkGetStatePipelinedRatio,
	// the I/O ceiling of a JSONL server: for each read of input, it writes
	// $RPI_FLOOR_RECORD once per whole line read, in one write.
	"write-batched": func(args []string) {
		record := []byte(os.Getenv("RPI_FLOOR_RECORD"))
		in, out := make([]byte, 256<<10), []byte(nil)
		for {
			n, err := os.Stdin.Read(in)
			out = out[:0]
			for range bytes.Count(in[:n], []byte("\n")) {
				out = append(out, record...)
			}
			if _, werr := os.Stdout.Write(out); err != nil || werr != nil {
				return
			}
		}
	},
}

// ---- Fixtures ----

// fixture is one testdata/*.txtar case: a sentence saying what it shows,
// then sections.
type fixture struct {
	path     string
	comment  string
	sections map[string]string
	order    []string
}

func parseFixture(path string) (*fixture, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f := &fixture{path: path}
	f.comment, f.sections, f.order = splitSections(string(data))
	if strings.TrimSpace(f.comment) == "" {
		return nil, fmt.Errorf("%s: a fixture starts with a sentence saying what it shows", path)
	}
	_, input := f.sections["input.jsonl"]
	_, script := f.sections["script"] // rpi serve's (serve_test.go)
	if !input && !script {
		return nil, fmt.Errorf("%s: no -- input.jsonl -- (or, for rpi serve, -- script --) section", path)
	}
	if err := f.knownParts(script); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return f, nil
}

// The sections and options each runner acts on: any other is refused
// (knownParts), not ignored, so that a comparison a fixture means (its
// stderr, its exit code) is never left out by a misspelling, or by the
// runner, rpi serve's, that does not make it.
var (
	fixtureSections      = []string{"input.jsonl", "want.jsonl", "options", "args", "model.jsonl", "stderr", "session.jsonl", "requests.jsonl"}
	fixtureFiles         = []string{"file ", "agent ", "home ", "symlink "}
	fixtureOptions       = []string{"api", "clock", "env", "exit", "hide", "holdLock", "holdStart", "keepEnded", "lockWait", "maxLineBytes", "mcpHTTPServer", "oauthExpires", "oauthServer", "subcommand", "systemMessages"}
	serveFixtureSections = []string{"script", "options", "args", "model.jsonl"}
	serveFixtureOptions  = []string{"api", "env", "hide", "systemMessages"}
)

// knownParts refuses a section or option the fixture's runner does not
// act on (script: rpi serve's), and, for rpi serve's, a want section of
// a client its script never names.
func (f *fixture) knownParts(script bool) error {
	sections, files, options := fixtureSections, fixtureFiles, fixtureOptions
	clients := map[string]bool{}
	if script {
		sections, files, options = serveFixtureSections, []string{"agent "}, serveFixtureOptions
		for _, line := range strings.Split(f.sections["script"], "\n") {
			if fields := strings.Fields(line); strings.HasPrefix(line, "#") && len(fields) > 1 {
				clients[fields[1]] = true
			} else if name, _, ok := strings.Cut(line, ": "); ok {
				clients[name] = true
			}
		}
	}
	for _, name := range f.order {
		client, isWant := strings.CutSuffix(name, ".want.jsonl")
		switch {
		case slices.Contains(sections, name):
		case slices.ContainsFunc(files, func(p string) bool { return strings.HasPrefix(name, p) }):
		case script && isWant && clients[client]:
		case script && isWant:
			return fmt.Errorf("section -- %s --: the script names no client %s", name, client)
		default:
			return fmt.Errorf("section -- %s --: not one this fixture's runner acts on", name)
		}
	}
	for _, line := range strings.Split(f.sections["options"], "\n") {
		if name, _, _ := strings.Cut(strings.TrimSpace(line), " "); name != "" && !slices.Contains(options, name) {
			return fmt.Errorf("option %q: not one this fixture's runner acts on", name)
		}
	}
	return nil
}

// splitSections splits a txtar-style file into the text before its first
// "-- NAME --" line and its sections, in order.
func splitSections(data string) (comment string, sections map[string]string, order []string) {
	sections = map[string]string{}
	name := ""
	var text strings.Builder
	flush := func() {
		if name == "" {
			comment = text.String()
		} else {
			sections[name] = text.String()
			order = append(order, name)
		}
		text.Reset()
	}
	for _, line := range strings.SplitAfter(data, "\n") {
		trimmed := strings.TrimRight(line, "\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") {
			flush()
			name = strings.TrimSuffix(strings.TrimPrefix(trimmed, "-- "), " --")
			continue
		}
		text.WriteString(line)
	}
	flush()
	return comment, sections, order
}

func (f *fixture) format() []byte {
	var b bytes.Buffer
	b.WriteString(f.comment)
	for _, name := range f.order {
		fmt.Fprintf(&b, "-- %s --\n%s", name, f.sections[name])
	}
	return b.Bytes()
}

// rawByte lets fixture input hold bytes a text file cannot show: \xHH.
var rawByte = regexp.MustCompile(`\\x[0-9a-fA-F]{2}`)

// repeated lets fixture input hold text too long to read: $REPEAT(N,TEXT)
// is TEXT (no ")") N times over, before \xHH is replaced.
var repeated = regexp.MustCompile(`\$REPEAT\(([0-9]+),([^)]*)\)`)

func (f *fixture) input() []byte {
	in := repeated.ReplaceAllFunc([]byte(f.sections["input.jsonl"]), func(m []byte) []byte {
		parts := repeated.FindSubmatch(m)
		n, _ := strconv.Atoi(string(parts[1]))
		return bytes.Repeat(parts[2], n)
	})
	return rawByte.ReplaceAllFunc(in, func(m []byte) []byte {
		b, _ := strconv.ParseUint(string(m[2:]), 16, 8)
		return []byte{byte(b)}
	})
}

// option reads one of the harness's own settings (not rpi flags) from the
// options section: "name value".
func (f *fixture) option(name, otherwise string) string {
	for _, line := range strings.Split(f.sections["options"], "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	return otherwise
}

// options reads an option that may have no value: "name" alone, or
// "name value".
func (f *fixture) options(name string) (value string, ok bool) {
	for _, line := range strings.Split(f.sections["options"], "\n") {
		if line = strings.TrimSpace(line); line == name {
			return "", true
		} else if v, found := strings.CutPrefix(line, name+" "); found {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// envVars are the variables the options section gives rpi ("env NAME
// value", one a line): what rpi's getenv answers, as the real environment
// would.
func (f *fixture) envVars() map[string]string {
	vars := map[string]string{}
	for _, line := range strings.Split(f.sections["options"], "\n") {
		if rest, ok := strings.CutPrefix(line, "env "); ok {
			name, value, _ := strings.Cut(rest, " ")
			vars[name] = value
		}
	}
	return vars
}

func (f *fixture) maxLine() int {
	n, _ := strconv.Atoi(f.option("maxLineBytes", "0"))
	return n
}

// testEnv is an isolated environment for an in-process rpi: its own agent
// dir, HOME and TMPDIR, no API keys, and the real clock unless a test
// gives it a fake one. Tests that use it can run in parallel.
type testEnv struct {
	agentDir, home, tmp string
	vars                map[string]string // the environment rpi reads; set before it starts
	clock               clock
	maxLineBytes        int
	command             func(string, ...string) *exec.Cmd
	lockWait            time.Duration // for a session file another rpi holds (0: rpi's own)
	finishWrites        time.Duration // for a served client that is leaving or slow (0: rpi's own)
	keepEnded           int           // the ended processes a session keeps (0: rpi's own)
}

func newTestEnv(t testing.TB) *testEnv {
	e := &testEnv{agentDir: t.TempDir(), home: t.TempDir(), tmp: t.TempDir(), clock: realClock{}, maxLineBytes: maxLineBytes}
	e.vars = map[string]string{"PI_CODING_AGENT_DIR": e.agentDir, "HOME": e.home, "TMPDIR": e.tmp, "PATH": os.Getenv("PATH")}
	return e
}

// hiddenVars are the host's variables a test run never passes on: rpi's
// own, the proxies (a test's servers are its own) and every built-in
// provider's key variable.
var hiddenVars = append([]string{"PI_CODING_AGENT_DIR", "PI_CODING_AGENT_SESSION_DIR", "HOME", "TMPDIR", "OPENAI_BASE_URL", "RPI_COMPAT",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"}, catalogKeyVars()...)

// catalogKeyVars are the built-in providers' key variables.
func catalogKeyVars() []string {
	var vars []string
	for _, p := range hostedProviders {
		vars = append(vars, p.keyVar)
	}
	return vars
}

// withoutKeys is environ with every built-in provider's key variable empty.
func withoutKeys(environ []string) []string {
	for _, v := range catalogKeyVars() {
		environ = append(environ, v+"=")
	}
	return environ
}

// env is the environment rpi gets: the host's (for children), without
// anything of the developer's that rpi reads, plus the test's variables.
func (e *testEnv) env() runEnv {
	environ := withoutVariables(os.Environ(), hiddenVars)
	for k, v := range e.vars {
		if !slices.Contains(hiddenVars, k) || v != "" {
			environ = append(withoutVariables(environ, []string{k}), k+"="+v)
		}
	}
	vars := maps.Clone(e.vars)
	return runEnv{getenv: func(k string) string { return vars[k] }, environ: environ, clock: e.clock,
		tempDir: e.tmp, maxLineBytes: e.maxLineBytes, executable: os.Args[0], command: e.command, lockWait: e.lockWait, finishWrites: e.finishWrites,
		keepEnded: e.keepEnded}
}

// syncBuffer is a bytes.Buffer several goroutines may write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runRPI runs rpi in-process, as main does, with args and e's
// environment until stdin ends; it returns the exit code.
func runRPI(t testing.TB, e *testEnv, args []string, stdin io.Reader, stdout io.Writer) int {
	code, _ := runRPIStderr(t, e, args, stdin, stdout)
	return code
}

// runRPIStderr is runRPI that also returns what rpi wrote to stderr.
func runRPIStderr(t testing.TB, e *testEnv, args []string, stdin io.Reader, stdout io.Writer) (int, string) {
	var stderr syncBuffer
	code := runProgram(args, e.env(), stdin, stdout, &stderr, nil)
	out := stderr.String()
	if out != "" {
		t.Logf("stderr:\n%s", out)
	}
	return code, out
}

// args are rpi's arguments: the mode (acp for a case in testdata/acp/,
// else rpc; none with the option "subcommand none", serve with
// "subcommand serve"), --cwd cwd, then the args section's, with \xHH as
// the byte (a blank value, say) and $CWD and $AGENT_DIR as those
// directories (replace). The section's come last, so that a flag there
// can lack its value.
func (f *fixture) args(cwd string, replace *strings.Replacer) []string {
	args := []string{"rpc"}
	if filepath.Base(filepath.Dir(f.path)) == "acp" {
		args = []string{"acp"}
	}
	switch sub := f.option("subcommand", ""); sub {
	case "":
	case "none":
		args = nil
	default:
		args = []string{sub}
	}
	args = append(args, "--cwd", cwd)
	for _, line := range strings.Split(f.sections["args"], "\n") {
		if line = replace.Replace(strings.TrimSpace(line)); line != "" {
			args = append(args, rawByte.ReplaceAllStringFunc(line, func(m string) string {
				b, _ := strconv.ParseUint(m[2:], 16, 8)
				return string([]byte{byte(b)})
			}))
		}
	}
	return args
}

// feeds are the ways a fixture's input is written to rpi's stdin: all at
// once, a line per write, and a byte per write, so that framing bugs cannot
// hide behind a lucky buffer size.
var feeds = []struct {
	name  string
	write func(w io.Writer, b []byte)
}{
	{"bulk", func(w io.Writer, b []byte) { w.Write(b) }},
	{"lines", func(w io.Writer, b []byte) {
		for _, line := range bytes.SplitAfter(b, []byte("\n")) {
			w.Write(line)
		}
	}},
	{"bytes", func(w io.Writer, b []byte) {
		for i := range b {
			w.Write(b[i : i+1])
		}
	}},
}

// feedReader returns a reader of data written by feed, for framing tests.
func feedReader(write func(io.Writer, []byte), data []byte) io.Reader {
	pr, pw := io.Pipe()
	go func() { write(pw, data); pw.Close() }()
	return pr
}

// watchedOutput is rpi's stdout in tests: it lets the feeder wait until an
// output line contains some text.
type watchedOutput struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newWatchedOutput() *watchedOutput { return &watchedOutput{changed: make(chan struct{})} }

func (w *watchedOutput) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.changed)
	w.changed = make(chan struct{})
	return w.buf.Write(p)
}

func (w *watchedOutput) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.buf.Bytes())
}

// waitFor waits until the output, seen through seen, contains text, or
// gives up after 20 s.
func (w *watchedOutput) waitFor(text string, seen func([]byte) string) bool {
	deadline := time.After(20 * time.Second)
	for {
		w.mu.Lock()
		out, changed := bytes.Clone(w.buf.Bytes()), w.changed
		w.mu.Unlock()
		if strings.Contains(seen(out), text) {
			return true
		}
		select {
		case <-changed:
		case <-deadline:
			return false
		}
	}
}

// feedFixture writes input to w with feed, obeying "#wait TEXT" lines:
// like a client waiting for an answer, it pauses until the normalised
// output contains TEXT (written as the want section shows it); "#waitn N
// TEXT" waits until it contains TEXT N times. A $UUIDn in
// the input is replaced by the UUID that placeholder stands for in the
// output so far, so a case can name a processId rpi generated.
func feedFixture(t testing.TB, w io.WriteCloser, input []byte, write func(io.Writer, []byte), out *watchedOutput, norm normalizer, clock *fakeClock, model *fakeModel, held *heldStarts) {
	defer w.Close()
	defer func() {
		if held.release() { // so rpi is not left waiting
			t.Errorf("the option holdStart needs a #release in the input")
		}
	}()
	var segment []byte
	for _, line := range bytes.SplitAfter(input, []byte("\n")) {
		times, text := 1, []byte(nil)
		rest, advance := bytes.CutPrefix(line, []byte("#advance "))
		rest, expire := bytes.CutPrefix(rest, []byte("#expire "))
		if advance || expire {
			write(w, withActualUUIDs(t, segment, out))
			segment = nil
			d, err := time.ParseDuration(string(bytes.TrimSpace(rest)))
			if err != nil || clock == nil {
				t.Errorf("%s: needs a duration and the option clock fake", bytes.TrimSpace(line))
				return
			}
			// #expire: a timer set from the background may not be set yet;
			// wait until one falls within the step, so the step fires it.
			for deadline := time.Now().Add(20 * time.Second); expire && !clock.dueWithin(d); {
				if time.Now().After(deadline) {
					t.Errorf("#expire %s: no timer falls within it", d)
					return
				}
				time.Sleep(time.Millisecond)
			}
			clock.advance(d)
			continue
		}
		if rest, ok := bytes.CutPrefix(line, []byte("#asked ")); ok {
			write(w, withActualUUIDs(t, segment, out))
			segment = nil
			n, err := strconv.Atoi(string(bytes.TrimSpace(rest)))
			if err != nil || model == nil {
				t.Errorf("%s: needs a count and a -- model.jsonl -- section", bytes.TrimSpace(line))
				return
			}
			// The request reaches the fake model on its own time: a timer
			// expired before it would end the call before it is asked.
			if !model.askedWithin(n, 20*time.Second) {
				t.Errorf("%s: the fake model was never asked %d times", bytes.TrimSpace(line), n)
				return
			}
			continue
		}
		if bytes.Equal(bytes.TrimSpace(line), []byte("#release")) {
			write(w, withActualUUIDs(t, segment, out))
			segment = nil
			if held.release() {
				continue
			}
			if model == nil {
				t.Errorf("#release needs a -- model.jsonl -- section or the option holdStart")
				return
			}
			model.release <- struct{}{}
			continue
		}
		if rest, ok := bytes.CutPrefix(line, []byte("#waitdata ")); ok {
			write(w, withActualUUIDs(t, segment, out))
			segment = nil
			var want string
			if err := json.Unmarshal(bytes.TrimSpace(rest), &want); err != nil {
				t.Errorf("#waitdata %s: needs a JSON string", rest)
				return
			}
			if !out.waitFor(want, processData) {
				t.Errorf("#waitdata %s: never seen in the processes' output", rest)
				return
			}
			continue
		}
		if rest, ok := bytes.CutPrefix(line, []byte("#waitn ")); ok {
			n, after, _ := bytes.Cut(rest, []byte(" "))
			times, _ = strconv.Atoi(string(n))
			text = after
		} else if rest, ok := bytes.CutPrefix(line, []byte("#wait ")); ok {
			text = rest
		} else {
			segment = append(segment, line...)
			continue
		}
		write(w, withActualUUIDs(t, segment, out))
		segment = nil
		text = bytes.TrimSpace(text)
		seen := func(b []byte) string {
			if strings.Count(norm.apply(b), string(text)) >= times {
				return string(text)
			}
			return ""
		}
		if !out.waitFor(string(text), seen) {
			t.Errorf("#wait %s: never seen %d times in the output", text, times)
			return
		}
	}
	write(w, withActualUUIDs(t, segment, out))
}

// processData is every process's output so far, decoded and joined.
func processData(out []byte) string {
	var all strings.Builder
	for _, line := range bytes.Split(out, []byte("\n")) {
		var ev struct {
			Type string
			Data processOutputData
		}
		if json.Unmarshal(line, &ev) == nil && ev.Type == "process_output" {
			all.Write(ev.Data.Data)
		}
	}
	return all.String()
}

// withActualUUIDs replaces each $UUIDn in b with the UUID that placeholder
// stands for in the output so far, and $DIALOG_ID with the id of the
// latest dialog request (select, confirm, input, editor).
func withActualUUIDs(t testing.TB, b []byte, out *watchedOutput) []byte {
	if bytes.Contains(b, []byte("$DIALOG_ID")) {
		last := ""
		for _, line := range bytes.Split(out.bytes(), []byte("\n")) {
			var req uiRequest
			if json.Unmarshal(line, &req) == nil && req.Type == "extension_ui_request" && slices.Contains([]string{"select", "confirm", "input", "editor"}, req.Method) {
				last = req.ID
			}
		}
		if last == "" {
			t.Errorf("input names $DIALOG_ID before any dialog was asked")
		}
		b = bytes.ReplaceAll(b, []byte("$DIALOG_ID"), []byte(last))
	}
	if !uuidPlaceholder.Match(b) && !loopPlaceholder.Match(b) && !entryPlaceholder.Match(b) {
		return b
	}
	actual := map[string]string{}
	numbered(string(out.bytes()), uuidPattern, func(i int, uuid string) string {
		actual[fmt.Sprintf("$UUID%d", i)] = uuid
		return ""
	})
	numberedLoopIDs(string(out.bytes()), func(i int, id string) {
		actual[fmt.Sprintf("$LOOP%d", i)] = id
	})
	entries := map[string]bool{}
	for _, m := range entryIDPattern.FindAllStringSubmatch(string(out.bytes()), -1) {
		if !entries[m[2]] {
			entries[m[2]] = true
			actual[fmt.Sprintf("$ENTRY%d", len(entries))] = m[2]
		}
	}
	replace := func(p []byte) []byte {
		if id, ok := actual[string(p)]; ok {
			return []byte(id)
		}
		t.Errorf("input names %s before the output shows it", p)
		return p
	}
	return entryPlaceholder.ReplaceAllFunc(loopPlaceholder.ReplaceAllFunc(uuidPlaceholder.ReplaceAllFunc(b, replace), replace), replace)
}

var entryPlaceholder = regexp.MustCompile(`\$ENTRY\d+`)

var uuidPlaceholder = regexp.MustCompile(`\$UUID\d+`)

var loopPlaceholder = regexp.MustCompile(`\$LOOP\d+`)

// normalizer replaces what is truly nondeterministic with placeholders.
// Numbered placeholders keep identity: $UUID1 is the same value wherever it
// appears, and a second distinct value becomes $UUID2.
type normalizer struct {
	literal map[string]string // exact strings (temp dirs) → placeholder
	hide    []string          // UI request methods left out (option "hide setStatus")
	// fullSystem keeps system messages' sections and tools as they are
	// (option "systemMessages full"); else each is a placeholder
	// numbered by its content (abbreviatedSystem).
	fullSystem bool
}

var (
	uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timePattern = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`)
	// msPattern and pidPattern also match inside a JSON string, quotes
	// escaped: a tool's result that is a process's JSON.
	msPattern      = regexp.MustCompile(`(\\?")(timestamp|durationMs|startedAtMs|exitedAtMs)(\\?":)\d+`)
	pidPattern     = regexp.MustCompile(`(\\?"pid\\?":)(\d+)`)
	tempLogPattern = regexp.MustCompile(`rpi-bash-\d+\.log`)
	tempDirPattern = regexp.MustCompile(`rpi-\d+-[0-9a-f]{8}`)
	// promptDatePattern is the date in the system prompt's date section.
	promptDatePattern = regexp.MustCompile(`(<date>\\n)\d{4}-\d\d-\d\d(\\n</date>)`)
	fileTimePattern   = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z`)
	entryIDPattern    = regexp.MustCompile(`"(id|parentId|firstKeptEntryId|entryId|targetId|fromId|leafId|activeLeafId)":"([0-9a-f]{8})"`)
	// loopIDPattern finds a loop's 12 hex digits where rpi writes them.
	loopIDPattern = regexp.MustCompile(`("(?:id|task_id)":"|Loop |loop with id )([0-9a-f]{12})\b`)
)

func (n normalizer) apply(out []byte) string {
	if len(n.hide) > 0 {
		var kept []byte
		for _, line := range bytes.SplitAfter(out, []byte("\n")) {
			if !slices.ContainsFunc(n.hide, func(m string) bool {
				return bytes.HasPrefix(line, []byte(`{"type":"extension_ui_request",`)) && bytes.Contains(line, []byte(`"method":"`+m+`"`))
			}) {
				kept = append(kept, line...)
			}
		}
		out = kept
	}
	s := string(mergeChunks(out))
	literals := slices.Collect(maps.Keys(n.literal))
	slices.SortFunc(literals, func(a, b string) int { return len(b) - len(a) })
	for _, lit := range literals {
		s = strings.ReplaceAll(s, lit, n.literal[lit])
	}
	s = numbered(s, uuidPattern, func(i int, _ string) string { return fmt.Sprintf("$UUID%d", i) })
	s = numberedPIDs(s)
	s = timePattern.ReplaceAllString(s, "$$TIME")
	s = fileTimePattern.ReplaceAllString(s, "$$FILETIME")
	s = numberedGroup(s, entryIDPattern, "ENTRY")
	s = numberedLoopIDs(s, nil)
	s = msPattern.ReplaceAllString(s, `$1$2$3$$MS`)
	s = numbered(s, tempLogPattern, func(i int, _ string) string { return fmt.Sprintf("rpi-bash-$N%d.log", i) })
	s = tempDirPattern.ReplaceAllString(s, "$$RPI_TEMP")
	s = promptDatePattern.ReplaceAllString(s, `$1$$DATE$2`)
	if !n.fullSystem {
		s = abbreviatedSystem(s)
	}
	return s
}

// abbreviatedSystem is s with the sections and the tools of each system
// message (and of a compaction's systemMessage) made $SECTIONSn and
// $TOOLSn, numbered by content: the same prompt is the same placeholder,
// a changed one another. Only the fixtures about system messages show
// them whole (some 8 KB a copy, the tools' schemas most of it).
func abbreviatedSystem(s string) string {
	b := []byte(s)
	seen := map[string]string{}
	var out []byte
	for {
		at, name := -1, ""
		for _, key := range []string{`"sections":{`, `"toolsAdded":[`} {
			if i := bytes.Index(b, []byte(key)); i >= 0 && (at < 0 || i < at) {
				at, name = i, key
			}
		}
		if at < 0 {
			return string(append(out, b...))
		}
		start := at + len(name) - 1
		end := skipValue(b, start, 0)
		if end < 0 {
			return string(append(out, b...))
		}
		kind := "SECTIONS"
		if name == `"toolsAdded":[` {
			kind = "TOOLS"
		}
		value := kind + string(b[start:end])
		if _, ok := seen[value]; !ok {
			count := 1
			for v := range seen {
				if strings.HasPrefix(v, kind) {
					count++
				}
			}
			seen[value] = fmt.Sprintf("$%s%d", kind, count)
		}
		out = append(append(out, b[:start]...), seen[value]...)
		b = b[end:]
	}
}

// mergeChunks joins consecutive output events of one stream into one
// (bash_execution_update, process_output), and consecutive message_update
// deltas of one block, because where a child's output is split into
// chunks is up to the kernel, and where deltas are batched is up to the
// clock.
func mergeChunks(out []byte) []byte {
	var merged bytes.Buffer
	var pending mergeable
	flush := func() {
		if pending != nil {
			merged.Write(pending.encode())
			merged.WriteByte('\n')
			pending = nil
		}
	}
	for _, line := range bytes.SplitAfter(out, []byte("\n")) {
		next := parseMergeable(line)
		if next != nil && pending != nil && pending.key() == next.key() && pending.add(next) {
			continue
		}
		flush()
		if next != nil {
			pending = next
			continue
		}
		merged.Write(line)
	}
	flush()
	return merged.Bytes()
}

// mergeable is an event that can absorb the next one of its kind.
type mergeable interface {
	key() string
	add(next mergeable) bool
	encode() []byte
}

func parseMergeable(line []byte) mergeable {
	inner := parseChunk(line)
	if inner == nil {
		return nil
	}
	var numbered struct{ Seq *int64 } // rpi serve's events carry their seq
	json.Unmarshal(line, &numbered)
	if numbered.Seq == nil {
		return inner
	}
	return &seqChunk{inner, *numbered.Seq}
}

// seqChunk is a chunk of rpi serve's, numbered: merged, it keeps the seq
// of the last event it took in.
type seqChunk struct {
	inner mergeable
	seq   int64
}

func (c *seqChunk) key() string { return c.inner.key() }
func (c *seqChunk) add(next mergeable) bool {
	n, ok := next.(*seqChunk)
	if !ok || !c.inner.add(n.inner) {
		return false
	}
	c.seq = n.seq
	return true
}
func (c *seqChunk) encode() []byte { return withSeq(c.inner.encode(), c.seq) }

func parseChunk(line []byte) mergeable {
	switch {
	case bytes.HasPrefix(line, []byte(`{"jsonrpc":"2.0","method":"session/update",`)):
		return parseACPMergeable(line)
	case bytes.HasPrefix(line, []byte(`{"type":"message_update","data":`)):
		var ev struct{ Data messageUpdate }
		if json.Unmarshal(line, &ev) == nil && ev.Data.AssistantMessageEvent.Delta != nil {
			return &deltaChunk{ev.Data}
		}
	case bytes.HasPrefix(line, []byte(`{"type":"bash_execution_update","data":`)):
		var ev struct{ Data bashUpdate }
		if json.Unmarshal(line, &ev) == nil {
			return &bashChunk{ev.Data}
		}
	case bytes.HasPrefix(line, []byte(`{"type":"process_output","data":`)):
		var ev struct{ Data processOutputData }
		if json.Unmarshal(line, &ev) == nil {
			return &processChunk{ev.Data}
		}
	}
	return nil
}

func encodeTestEvent(typ string, data any) []byte {
	b, _ := rpcWire{}.appendEvent(nil, event{Type: typ, Data: data})
	return b
}

type deltaChunk struct{ u messageUpdate }

func (c *deltaChunk) key() string {
	return fmt.Sprintf("delta/%s/%d", c.u.AssistantMessageEvent.Type, c.u.AssistantMessageEvent.ContentIndex)
}
func (c *deltaChunk) add(next mergeable) bool {
	n := next.(*deltaChunk).u
	joined := *c.u.AssistantMessageEvent.Delta + *n.AssistantMessageEvent.Delta
	c.u.AssistantMessageEvent.Delta = &joined
	c.u.Usage = n.Usage // the usage as of the last delta
	return true
}
func (c *deltaChunk) encode() []byte { return encodeTestEvent("message_update", c.u) }

type bashChunk struct{ u bashUpdate }

func (c *bashChunk) key() string {
	id := "<none>"
	if c.u.RequestID != nil {
		id = *c.u.RequestID
	}
	return "bash/" + id + "/" + c.u.Stream
}
func (c *bashChunk) add(next mergeable) bool {
	c.u.Chunk += next.(*bashChunk).u.Chunk
	return true
}
func (c *bashChunk) encode() []byte { return encodeTestEvent("bash_execution_update", c.u) }

type processChunk struct{ d processOutputData }

func (c *processChunk) key() string { return "process/" + c.d.ID }
func (c *processChunk) add(next mergeable) bool {
	n := next.(*processChunk).d
	if n.StartCursor != c.d.Cursor {
		return false
	}
	c.d.Data = append(c.d.Data, n.Data...)
	c.d.Cursor = n.Cursor
	return true
}
func (c *processChunk) encode() []byte { return encodeTestEvent("process_output", c.d) }

// numberedPIDs replaces each distinct pid with $PIDn, n counting from 1
// in order of first appearance, whether its quotes are escaped or not.
func numberedPIDs(s string) string {
	seen := map[string]int{}
	return pidPattern.ReplaceAllStringFunc(s, func(m string) string {
		sub := pidPattern.FindStringSubmatch(m)
		if seen[sub[2]] == 0 {
			seen[sub[2]] = len(seen) + 1
		}
		return fmt.Sprintf("%s$PID%d", sub[1], seen[sub[2]])
	})
}

// numberedGroup numbers the second group of each match, keeping the
// first: "parentId":"a1b2c3d4" becomes "parentId":"$ENTRY1".
func numberedGroup(s string, re *regexp.Regexp, prefix string) string {
	seen := map[string]string{}
	return re.ReplaceAllStringFunc(s, func(m string) string {
		sub := re.FindStringSubmatch(m)
		p, ok := seen[sub[2]]
		if !ok {
			p = fmt.Sprintf("%s%d", prefix, len(seen)+1)
			seen[sub[2]] = p
		}
		return fmt.Sprintf(`"%s":"%s"`, sub[1], "$"+p)
	})
}

// numberedLoopIDs replaces each distinct loop id with $LOOPn, n counting
// from 1 in order of first appearance, calling found (when not nil) with
// each new one.
func numberedLoopIDs(s string, found func(int, string)) string {
	seen := map[string]string{}
	return loopIDPattern.ReplaceAllStringFunc(s, func(m string) string {
		sub := loopIDPattern.FindStringSubmatch(m)
		p, ok := seen[sub[2]]
		if !ok {
			p = fmt.Sprintf("$LOOP%d", len(seen)+1)
			seen[sub[2]] = p
			if found != nil {
				found(len(seen), sub[2])
			}
		}
		return sub[1] + p
	})
}

// numbered replaces each distinct match of re with name(i), i counting
// distinct values from 1 in order of first appearance.
func numbered(s string, re *regexp.Regexp, name func(int, string) string) string {
	seen := map[string]string{}
	return re.ReplaceAllStringFunc(s, func(m string) string {
		if p, ok := seen[m]; ok {
			return p
		}
		seen[m] = name(len(seen)+1, m)
		return seen[m]
	})
}

func TestFixtures(t *testing.T) { testFixtures(t, "testdata/*.txtar") }

// testFixtures runs the fixtures that match pattern, each fed three ways
// (or, with -update, rewrites their want sections).
func testFixtures(t *testing.T, pattern string) {
	paths, _ := filepath.Glob(pattern)
	if len(paths) == 0 {
		t.Fatalf("no fixtures match %s", pattern)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			t.Parallel()
			f, err := parseFixture(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, feed := range feeds {
				if *update && feed.name != "bulk" {
					continue
				}
				got := runFixture(t, f, feed.write)
				if *update {
					f.sections["want.jsonl"] = got
					if !slices.Contains(f.order, "want.jsonl") {
						f.order = append(f.order, "want.jsonl")
					}
					if err := os.WriteFile(path, f.format(), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if want := f.sections["want.jsonl"]; got != want {
					t.Errorf("fed %s: output differs\n--- got ---\n%s--- want ---\n%s", feed.name, got, want)
				}
			}
		})
	}
}

// runFixture serves a fixture's input in a fresh cwd, agent dir and
// TMPDIR, checks the exit code, that every output line is one JSON object
// and that no temp file is left behind, and returns the normalised output.
func runFixture(t *testing.T, f *fixture, write func(io.Writer, []byte)) string {
	e, cwd, norm, fm := fixtureWorld(t, f)
	if n := f.maxLine(); n > 0 {
		e.maxLineBytes = n
	}
	e.keepEnded, _ = strconv.Atoi(f.option("keepEnded", "0"))
	var fake *fakeClock
	if f.option("clock", "real") == "fake" {
		fake = newFakeClock()
		e.clock = fake
	}
	copyDir(t, "testdata/sessions", filepath.Join(cwd, "sessions"))
	oauthURL := ""
	if _, ok := f.options("oauthServer"); !ok {
		if _, ok := f.options("oauthExpires"); ok {
			t.Fatal("oauthExpires without oauthServer: it would do nothing")
		}
	}
	if fail, ok := f.options("oauthServer"); ok {
		// An MCP server behind OAuth, at $OAUTH_URL/mcp, and its
		// authorization server's token endpoint, $OAUTH_URL/token.
		o := &oauthTestServer{valid: "at-never", refresh: "rt-1", fail: fail}
		if expires, ok := f.options("oauthExpires"); ok {
			if err := json.Unmarshal([]byte(expires), &o.expires); err != nil {
				t.Fatalf("oauthExpires %s: %v", expires, err)
			}
		}
		hs := httptest.NewServer(o)
		t.Cleanup(hs.Close)
		oauthURL = hs.URL
		norm.literal[oauthURL] = "$OAUTH_URL"
	}
	mcpURL := ""
	if _, ok := f.options("mcpHTTPServer"); ok {
		// MCP servers over HTTP without OAuth, at $MCP_URL/<kind>/mcp
		// (fixtureMCPServers).
		hs := httptest.NewServer(fixtureMCPServers())
		t.Cleanup(hs.Close)
		mcpURL = hs.URL
		norm.literal[mcpURL] = "$MCP_URL"
	}
	cwdName := strings.NewReplacer("/", "-").Replace(strings.TrimLeft(cwd, "/"))
	for name, content := range f.sections {
		// A file's name may hold the cwd's session folder name, its
		// content the cwd (a session header, say) or the folder above it
		// (trust.json's decision for it).
		name = strings.ReplaceAll(name, "$CWD_NAME", cwdName)
		content = strings.NewReplacer("$CWD_PARENT", filepath.Dir(cwd), "$CWD", cwd).Replace(content)
		if file, ok := strings.CutPrefix(name, "agent "); ok {
			if fm != nil {
				content = strings.ReplaceAll(content, "$MODEL_URL", fm.server.URL)
			}
			content = strings.ReplaceAll(content, "$TEST_BINARY", os.Args[0]) // a helper program (RPI_HELPER)
			if oauthURL != "" {
				content = strings.ReplaceAll(content, "$OAUTH_URL", oauthURL)
			}
			if mcpURL != "" {
				content = strings.ReplaceAll(content, "$MCP_URL", mcpURL)
			}
			path := filepath.Join(e.agentDir, file)
			os.MkdirAll(filepath.Dir(path), 0o755)
			os.WriteFile(path, []byte(content), 0o644)
		}
		if file, ok := strings.CutPrefix(name, "home "); ok { // in HOME
			path := filepath.Join(e.home, file)
			os.MkdirAll(filepath.Dir(path), 0o755)
			os.WriteFile(path, []byte(content), 0o644)
		}
		if file, ok := strings.CutPrefix(name, "file "); ok {
			path := filepath.Join(cwd, file)
			os.MkdirAll(filepath.Dir(path), 0o755)
			os.WriteFile(path, []byte(content), 0o644)
		}
		if link, ok := strings.CutPrefix(name, "symlink "); ok { // in the working directory (or the agent's), to the path its content names
			path := filepath.Join(cwd, link)
			if inAgent, ok := strings.CutPrefix(link, "agent "); ok {
				path = filepath.Join(e.agentDir, inAgent)
			}
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.Symlink(strings.TrimSpace(content), path); err != nil {
				t.Fatal(err)
			}
		}
	}
	dirs := strings.NewReplacer("$CWD_NAME", cwdName, "$CWD", cwd, "$AGENT_DIR", e.agentDir)
	args := f.args(cwd, dirs)
	if d := f.option("lockWait", ""); d != "" {
		var err error
		if e.lockWait, err = time.ParseDuration(d); err != nil {
			t.Fatalf("option lockWait: %v", err)
		}
	}
	if name := f.option("holdLock", ""); name != "" {
		// Held as another rpi holds a session file: a lock of its own
		// open file, for the whole run.
		path := filepath.Join(cwd, name)
		if inAgent, ok := strings.CutPrefix(name, "agent "); ok {
			path = filepath.Join(e.agentDir, strings.ReplaceAll(inAgent, "$CWD_NAME", cwdName))
		}
		held, err := os.Open(path)
		if err != nil {
			t.Fatalf("option holdLock: %v", err)
		}
		defer held.Close()
		if ok, err := tryLock(held); !ok {
			t.Fatalf("option holdLock: cannot lock %s: %v", name, err)
		}
	}
	out := newWatchedOutput()
	pr, pw := io.Pipe()
	input := dirs.Replace(string(f.input()))
	var held *heldStarts
	if name := f.option("holdStart", ""); name != "" {
		held = &heldStarts{name: name, released: make(chan struct{})}
		e.command = held.command
	}
	go feedFixture(t, pw, []byte(input), write, out, norm, fake, fm, held)
	code, stderr := runRPIStderr(t, e, args, pr, out)
	pr.Close()
	checkRecords(t, out.bytes())
	if want := f.option("exit", ""); want != "" {
		if strconv.Itoa(code) != want {
			t.Errorf("exit code %d, want %s", code, want)
		}
	} else if initFailed := bytes.HasPrefix(out.bytes(), []byte(`{"type":"response","command":"init"`)); initFailed != (code != 0) {
		t.Errorf("exit code %d, with output starting %.80q", code, out.bytes())
	}
	if _, ok := f.sections["stderr"]; ok {
		f.compareSection(t, "stderr", "stderr differs", norm, out.bytes(), []byte(stderr))
	}
	if left, _ := os.ReadDir(e.tmp); len(left) > 0 {
		t.Errorf("temp files left behind: %v", left)
	}
	if _, ok := f.sections["session.jsonl"]; ok {
		files, _ := filepath.Glob(filepath.Join(e.agentDir, "sessions", "*", "*.jsonl"))
		if len(files) != 1 {
			t.Fatalf("want one session file, found %v", files)
		}
		data, _ := os.ReadFile(files[0])
		f.compareSection(t, "session.jsonl", "session file differs", norm, out.bytes(), data)
	}
	if _, ok := f.sections["requests.jsonl"]; ok {
		if fm == nil {
			t.Fatal("a -- requests.jsonl -- section needs a -- model.jsonl -- section")
		}
		f.compareSection(t, "requests.jsonl", "the model's requests differ", norm, out.bytes(), fm.conversations())
	}
	return norm.apply(out.bytes())
}

// compareSection compares the section name with extra (what says how
// they differ, in the error), or with -update rewrites it: normalised
// together with the output out, so that ids match across both.
func (f *fixture) compareSection(t *testing.T, name, what string, norm normalizer, out, extra []byte) {
	t.Helper()
	both := norm.apply(append(append(slices.Clip(out), "--\n"...), extra...))
	got := both[strings.Index(both, "--\n")+3:]
	if *update {
		f.sections[name] = got
	} else if want := f.sections[name]; got != want {
		t.Errorf("%s\n--- got ---\n%s--- want ---\n%s", what, got, want)
	}
}

// heldStarts holds rpi's starts of one program (the option holdStart
// NAME) until the input says #release, as a start waits for its exec on
// a slow disk, so a case can show what comes of starts waiting.
type heldStarts struct {
	name     string        // the program, as argv[0] names it
	released chan struct{} // closed at #release
	once     sync.Once
}

// command is exec.Command, waiting first while starts of name are held.
func (h *heldStarts) command(name string, args ...string) *exec.Cmd {
	if name == h.name {
		<-h.released
	}
	return exec.Command(name, args...)
}

// release lets the held starts go on; false when nothing was held (no
// holdStart, or released already).
func (h *heldStarts) release() (released bool) {
	if h != nil {
		h.once.Do(func() { close(h.released); released = true })
	}
	return released
}

// fixtureWorld is where a fixture runs: a fresh environment whose cwd,
// agent dir, HOME and TMPDIR are each fixtureDirBytes long, with the
// variables of its options, its fake model when it has a model.jsonl
// section, and the normaliser of what rpi writes there.
func fixtureWorld(t *testing.T, f *fixture) (e *testEnv, cwd string, norm normalizer, fm *fakeModel) {
	e = newTestEnv(t)
	cwd = fixedLengthDir(t)
	e.agentDir, e.home, e.tmp = fixedLengthDir(t), fixedLengthDir(t), fixedLengthDir(t)
	e.vars["PI_CODING_AGENT_DIR"], e.vars["HOME"], e.vars["TMPDIR"] = e.agentDir, e.home, e.tmp
	maps.Copy(e.vars, f.envVars())
	norm = normalizer{literal: map[string]string{cwd: "$CWD", e.tmp: "$TMPDIR", e.agentDir: "$AGENT_DIR", e.home: "$HOME",
		strings.NewReplacer("/", "-").Replace(strings.TrimLeft(cwd, "/")): "$CWD_NAME"},
		hide: strings.Fields(f.option("hide", "")), fullSystem: f.option("systemMessages", "") == "full"}
	if script, ok := f.sections["model.jsonl"]; ok {
		fm = startFakeModel(t, f.option("api", apiOpenAI), script, e.agentDir)
		norm.literal[fm.server.URL] = "$MODEL_URL"
	}
	return e, cwd, norm, fm
}

// fixtureDirBytes is the length of every directory a fixture runs in (its
// cwd, agent dir, HOME and TMPDIR). rpi counts the bytes of the paths it
// puts into the conversation — usage_update's used is a quarter of the
// conversation's bytes, and a tool call names its file by absolute path —
// so a fixture's counts hold only for paths of one length, wherever the
// test's temporary directory is.
const fixtureDirBytes = 160

// fixedLengthDir is a new temporary directory whose path, symlinks
// resolved (macOS's /var is /private/var), is fixtureDirBytes long: a
// t.TempDir() with a folder named to pad it.
func fixedLengthDir(t *testing.T) string {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pad := fixtureDirBytes - len(base) - len(string(filepath.Separator))
	if pad < 1 {
		t.Fatalf("the temporary directory %s is too long for a fixture's directories of %d bytes: set a shorter TMPDIR", base, fixtureDirBytes)
	}
	dir := filepath.Join(base, strings.Repeat("d", pad))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fakeClock is a clock whose time moves only when a test advances it
// (#advance in a fixture), so timeouts need no waiting.
type fakeClock struct {
	mu     sync.Mutex // guards the fields below
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	when time.Time
	f    func()
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addTimer(c.now.Add(d), f)
}

// addTimer sets a timer for when; c.mu is held.
func (c *fakeClock) addTimer(when time.Time, f func()) func() bool {
	t := &fakeTimer{when: when, f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		n := len(c.timers)
		c.timers = slices.DeleteFunc(c.timers, func(x *fakeTimer) bool { return x == t })
		return len(c.timers) < n
	}
}

// AfterFuncAt calls f at once when t is not after the clock's now, else
// when an advance reaches t.
func (c *fakeClock) AfterFuncAt(t time.Time, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.After(c.now) {
		go f()
		return func() bool { return false }
	}
	return c.addTimer(t, f)
}

// dueWithin reports whether a timer falls due within d from now.
func (c *fakeClock) dueWithin(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.timers {
		if !t.when.After(c.now.Add(d)) {
			return true
		}
	}
	return false
}

// pending reports whether a timer is waiting.
func (c *fakeClock) pending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers) > 0
}

// advance moves time on by d and fires the timers that are due.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool {
		if !t.when.After(c.now) {
			due = append(due, t)
			return true
		}
		return false
	})
	c.mu.Unlock()
	for _, t := range due {
		go t.f()
	}
}

// copyDir copies the files of src into dst.
func copyDir(t testing.TB, src, dst string) {
	entries, _ := os.ReadDir(src)
	os.MkdirAll(dst, 0o755)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err == nil {
			os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644)
		}
	}
}

// checkRecords fails unless out is whole lines, each one JSON object.
func checkRecords(t testing.TB, out []byte) {
	t.Helper()
	if len(out) > 0 && out[len(out)-1] != '\n' {
		t.Errorf("output does not end with a newline")
	}
	for _, line := range bytes.SplitAfter(out, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(line, &obj); err != nil || obj == nil {
			t.Errorf("output line is not a JSON object: %q", line)
		}
	}
}

// ---- Framing ----

// TestReaderEndsWithItsLoop: a reader whose batches nobody takes any
// more (the loop ended: its client's output was given up, or a signal
// came, while the client wrote on) ends once quit is closed, instead of
// waiting on a batch for ever; in rpi serve that was a goroutine and its
// lines kept for each such connection.
func TestReaderEndsWithItsLoop(t *testing.T) {
	quit := make(chan struct{})
	frames, ended := readInput(endlessLines{}, 1<<20, io.Discard, quit)
	<-frames // reading; the next batches fill the channel, and one waits
	close(quit)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader still waits on a batch nobody takes")
	}
}

func TestFraming(t *testing.T) {
	tests := []struct {
		name  string
		input string
		max   int
		want  []string // frames; "!" is a too-long frame
	}{
		{"lf", "a\nb\n", 100, []string{"a", "b"}},
		{"crlf", "a\r\nb\r\n", 100, []string{"a", "b"}},
		{"one cr stripped", "a\r\r\n", 100, []string{"a\r"}},
		{"lone cr does not split", "a\rb\n", 100, []string{"a\rb"}},
		{"final line without lf", "a\nb", 100, []string{"a", "b"}},
		{"final line with cr only", "a\r", 100, []string{"a"}},
		{"blank lines skipped", "\n \t\n\r\na\n\n", 100, []string{"a"}},
		{"u2028 is content", "a\u2028b\u2029c\n", 100, []string{"a\u2028b\u2029c"}},
		{"at the limit", "12345\nx\n", 5, []string{"12345", "x"}},
		{"over the limit", "123456\nx\n", 5, []string{"!", "x"}},
		{"over the limit at eof", "x\n123456", 5, []string{"x", "!"}},
		{"long line over the buffer", strings.Repeat("y", 200<<10) + "\nz\n", 300 << 10, []string{strings.Repeat("y", 200<<10), "z"}},
		{"long line over the limit", strings.Repeat("y", 200<<10) + "\nz\n", 100 << 10, []string{"!", "z"}},
	}
	for _, tt := range tests {
		for _, feed := range feeds {
			t.Run(tt.name+"/"+feed.name, func(t *testing.T) {
				frames := make(chan []frame)
				go readFrames(feedReader(feed.write, []byte(tt.input)), tt.max, frames, nil)
				var got []string
				for batch := range frames {
					for _, f := range batch {
						if f.tooLong {
							got = append(got, "!")
						} else {
							got = append(got, string(f.line))
						}
					}
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("frames %q, want %q", short(got), short(tt.want))
				}
			})
		}
	}
}

func short(lines []string) []string {
	var out []string
	for _, l := range lines {
		if len(l) > 20 {
			l = fmt.Sprintf("%s…(%d bytes)", l[:10], len(l))
		}
		out = append(out, l)
	}
	return out
}

// TestPanicBecomesFailure registers a command that panics and checks that
// it gets a failure response and the loop goes on.
func TestPanicBecomesFailure(t *testing.T) {
	rpcCommands()["test_panic"] = func(s *rpcServer, r *rpcRequest) (any, error) { panic("boom") }
	defer delete(rpcCommands(), "test_panic")
	in := `{"id":"p","type":"test_panic"}` + "\n" + `{"id":"s","type":"set_auto_retry","enabled":false}` + "\n"
	var out bytes.Buffer
	runRPI(t, newTestEnv(t), []string{"rpc", "--cwd", t.TempDir()}, strings.NewReader(in), &out)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		`{"id":"p","type":"response","command":"test_panic","success":false,"error":"Internal error in test_panic: boom"}`,
		`{"id":"s","type":"response","command":"set_auto_retry","success":true,"data":null}`,
	}
	if len(lines) != 3 || !slices.Equal(lines[1:], want) {
		t.Errorf("got\n%s\nwant session_started then\n%s", out.Bytes(), strings.Join(want, "\n"))
	}
}

func TestUUIDv7(t *testing.T) {
	now := time.UnixMilli(0x0123456789ab)
	seen := map[string]bool{}
	for range 1000 {
		id := newUUIDv7(now)
		if !strings.HasPrefix(id, "01234567-89ab-7") || !strings.ContainsAny(id[19:20], "89ab") {
			t.Fatalf("%s: want timestamp 01234567-89ab, version 7, variant 10", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
	}
}

// ---- End to end: the test binary re-run as rpi ----

// rpiProcess is rpi running as a real process with pipes.
type rpiProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr bytes.Buffer
}

func startRPI(t *testing.T, args ...string) *rpiProcess { return startRPIWith(t, nil, args...) }

// rpiCommand is the test binary as rpi with args, its own agent dir, HOME
// and TMPDIR and no keys.
func rpiCommand(t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(withoutVariables(os.Environ(), hiddenVars), "RPI_TEST_MAIN=1", "GORACE=atexit_sleep_ms=0",
		"PI_CODING_AGENT_DIR="+t.TempDir(), "HOME="+t.TempDir(), "TMPDIR="+t.TempDir())
	return cmd
}

// startRPIWith starts rpiCommand(args) with pipes; configure (if not nil)
// adjusts the command before it starts.
func startRPIWith(t *testing.T, configure func(*exec.Cmd), args ...string) *rpiProcess {
	t.Helper()
	cmd := rpiCommand(t, args...)
	if configure != nil {
		configure(cmd)
	}
	p := &rpiProcess{cmd: cmd}
	cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdout = bufio.NewReader(out)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return p
}

// withEnv sets variables in an rpi started by startRPIWith.
func withEnv(vars ...string) func(*exec.Cmd) {
	return func(cmd *exec.Cmd) { cmd.Env = append(cmd.Env, vars...) }
}

// next reads one output record.
func (p *rpiProcess) next(t *testing.T) map[string]any {
	t.Helper()
	line, err := p.stdout.ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading stdout: %v (stderr: %s)", err, p.stderr.Bytes())
	}
	var rec map[string]any
	if err := json.Unmarshal(line, &rec); err != nil {
		t.Fatalf("not JSON: %q", line)
	}
	return rec
}

// until reads records until one has the given type and id (id "" = none).
// A record that does not name the type is skipped undecoded (a flood of
// process output would cost more to decode than to make).
func (p *rpiProcess) until(t *testing.T, typ, id string) map[string]any {
	t.Helper()
	marker := []byte(`"type":"` + typ + `"`)
	for {
		line, err := p.stdout.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading stdout: %v (stderr: %s)", err, p.stderr.Bytes())
		}
		if !bytes.Contains(line, marker) {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		if rec["type"] == typ && (id == "" || rec["id"] == id) {
			return rec
		}
	}
}

func (p *rpiProcess) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, line); err != nil {
		t.Fatal(err)
	}
}

// exit waits for rpi to end and returns its exit code and remaining output.
func (p *rpiProcess) exit(t *testing.T) (int, string) {
	t.Helper()
	rest, _ := io.ReadAll(p.stdout)
	err := p.cmd.Wait()
	if exitErr, ok := err.(*exec.ExitError); ok {
		return exitErr.ExitCode(), string(rest)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(rest)
}

// TestEndToEndStartupTrace: RPI_TRACE_STARTUP=1 writes a line to stderr
// for each phase of startup, with its time, its page faults (counted
// where the system counts them) and the time since main, the last one
// the write of session_started; stdout is as without it.
func TestEndToEndStartupTrace(t *testing.T) {
	endToEnd(t)
	p := startRPIWith(t, func(cmd *exec.Cmd) { cmd.Env = append(cmd.Env, "RPI_TRACE_STARTUP=1") }, "rpc", "--cwd", t.TempDir())
	if rec := p.next(t); rec["type"] != "session_started" {
		t.Fatalf("first record %v, want session_started", rec)
	}
	p.stdin.Close()
	p.exit(t)
	faults := `\d+`
	if runtime.GOOS == "windows" {
		faults = "-"
	}
	line := regexp.MustCompile(`^rpi: startup: +\d+\.\d{3} ms +` + faults + ` faults  (.+?) +\(\d+\.\d{3} ms since main\)$`)
	var phases []string
	for _, l := range strings.Split(strings.TrimSpace(p.stderr.String()), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("stderr line %q is not a phase's", l)
		}
		phases = append(phases, m[1])
	}
	// The resources load after the first line: nothing in it needs them.
	later := []string{"first write (session_started)", "context files (AGENTS.md)", "skills, prompt templates"}
	if len(phases) < 5 || phases[0] != "main: environment" || !slices.Equal(phases[len(phases)-3:], later) {
		t.Errorf("phases %q: want main: environment first, then the write of session_started and the resources last", phases)
	}
}

func TestEndToEndEOF(t *testing.T) {
	endToEnd(t)
	p := startRPI(t, "rpc", "--cwd", t.TempDir())
	if rec := p.next(t); rec["type"] != "session_started" {
		t.Fatalf("first record %v, want session_started", rec)
	}
	// A final line without "\n" is still a command.
	p.send(t, `{"id":"last","type":"get_state"}`)
	p.stdin.Close()
	code, rest := p.exit(t)
	if code != 0 || !strings.Contains(rest, `"id":"last"`) {
		t.Errorf("exit %d, output %q: want 0 and the last command answered", code, rest)
	}
}

func TestEndToEndSignals(t *testing.T) {
	endToEnd(t)
	for _, tt := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGTERM, 0}, {syscall.SIGINT, 130}, {syscall.SIGHUP, 129}, {syscall.SIGQUIT, 131}} {
		t.Run(tt.sig.String(), func(t *testing.T) {
			p := startRPI(t, "rpc", "--cwd", t.TempDir())
			p.next(t)
			// Signalled once the bash is running (its first output shows it).
			p.send(t, `{"id":"b","type":"bash","command":"echo running; sleep 30"}`+"\n")
			p.until(t, "bash_execution_update", "")
			p.cmd.Process.Signal(tt.sig)
			code, rest := p.exit(t)
			if code != tt.code {
				t.Errorf("exit code %d, want %d", code, tt.code)
			}
			if !strings.Contains(rest, `"id":"b","type":"response","command":"bash","success":true,"data":{"exitCode":null`) ||
				!strings.Contains(rest, `"cancelled":true`) {
				t.Errorf("the running bash was not answered as cancelled: %q", rest)
			}
		})
	}
}

// TestEndStartupOnSignal: a signal while startup runs ends the process at
// once with the exit code docs/protocol.md#launch gives; once startup is over it is left for serve.
func TestEndStartupOnSignal(t *testing.T) {
	exited := make(chan int, 1)
	var stderr syncBuffer
	env := runEnv{exit: func(code int) { exited <- code; runtime.Goexit() }}

	stop := make(chan os.Signal, 1)
	endStartupOnSignal(env, stop, &stderr) // startup never ends here
	stop <- syscall.SIGINT
	if code := <-exited; code != 130 || !strings.Contains(stderr.String(), "during startup: exiting") {
		t.Errorf("during startup: exit code %d, stderr %q; want 130 and the notice", code, stderr.String())
	}

	stop = make(chan os.Signal, 1)
	over := endStartupOnSignal(env, stop, &stderr)
	over()
	stop <- syscall.SIGTERM
	// The watcher may still take it, but then puts it back.
	if sig := <-stop; sig != syscall.SIGTERM {
		t.Errorf("after startup: %v left on stop, want SIGTERM", sig)
	}
	select {
	case code := <-exited:
		t.Errorf("after startup: exit(%d) called; the signal is serve's", code)
	default:
	}
}

// TestEndToEndStartupWarningAfterFirstLine forks a session whose copy
// cannot be written (over the file size limit `ulimit -f` sets): the
// warning that causes comes as a notify after session_started, which stays
// the first line.
func TestEndToEndStartupWarningAfterFirstLine(t *testing.T) {
	endToEnd(t)
	var src strings.Builder
	src.WriteString(`{"type":"session","version":3,"id":"1a2b3c4d-0000-4000-8000-000000000009","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/tmp"}` + "\n")
	parent := "null"
	for i := range 200 { // questions and answers: a fork with an answer is written at once
		id, role := fmt.Sprintf(`"e%07d"`, i), []string{"user", "assistant"}[i%2]
		fmt.Fprintf(&src, `{"type":"message","id":%s,"parentId":%s,"timestamp":"2026-03-16T09:00:01.000Z","message":{"role":%q,"content":[{"type":"text","text":"%s"}],"timestamp":1773651601000}}`+"\n",
			id, parent, role, strings.Repeat("x", 200))
		parent = id
	}
	from := filepath.Join(t.TempDir(), "big.jsonl")
	if err := os.WriteFile(from, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startRPIWith(t, func(cmd *exec.Cmd) {
		// 16 blocks of 512 bytes: far less than the 80 KB copy.
		cmd.Args = append([]string{"sh", "-c", `ulimit -f 16 && exec "$0" "$@"`, cmd.Path}, cmd.Args[1:]...)
		cmd.Path, _ = exec.LookPath("sh")
	}, "rpc", "--cwd", t.TempDir(), "--fork", from)
	if rec := p.next(t); rec["type"] != "session_started" {
		t.Fatalf("first line %v, want session_started", rec)
	}
	// Startup notices come before the answer to the first command.
	p.send(t, `{"id":"s","type":"get_state"}`+"\n")
	warned := false
	for rec := p.next(t); rec["id"] != "s"; rec = p.next(t) {
		msg, _ := rec["message"].(string)
		warned = warned || rec["type"] == "extension_ui_request" && strings.Contains(msg, "Cannot write the session file")
	}
	if !warned {
		t.Errorf("no warning that the forked copy cannot be written (stderr: %s)", p.stderr.Bytes())
	}
	p.stdin.Close()
	p.exit(t)
}

// TestEndToEndNobodyReadsFirstLine starts rpi with its stdout a pipe
// nobody reads: writing its first line fails, and SIGPIPE never kills it,
// whether or not its handlers are installed yet (SIGPIPE is ignored until
// they are). rpi then ends as at EOF (exit 0) although stdin stays open;
// after an init failure, with exit code 1.
func TestEndToEndNobodyReadsFirstLine(t *testing.T) {
	endToEnd(t)
	for _, tt := range []struct {
		name string
		args []string
		code int
	}{
		{"session_started", []string{"rpc", "--cwd", t.TempDir()}, 0},
		{"init failure", []string{"rpc", "--no-such-flag"}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			r.Close()
			cmd := rpiCommand(t, tt.args...)
			cmd.Stdout = w
			stdin, _ := cmd.StdinPipe()
			defer stdin.Close()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				code := 0
				if exitErr, ok := err.(*exec.ExitError); ok {
					code = exitErr.ExitCode() // -1 when a signal killed it
				} else if err != nil {
					t.Fatal(err)
				}
				if code != tt.code {
					t.Errorf("rpi ended with %v, want exit code %d after the failed write", err, tt.code)
				}
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("rpi still running 30 s after its first write failed")
			}
		})
	}
}

func TestEndToEndOverlongLine(t *testing.T) {
	endToEnd(t)
	p := startRPI(t, "rpc", "--cwd", t.TempDir())
	p.next(t)
	go func() {
		w := bufio.NewWriterSize(p.stdin, 1<<20)
		chunk := bytes.Repeat([]byte("x"), 1<<20)
		for range 64 {
			w.Write(chunk)
		}
		w.WriteString("x\n" + `{"id":"after","type":"get_state"}` + "\n")
		w.Flush()
		p.stdin.Close()
	}()
	rec := p.next(t)
	if rec["command"] != "parse" || rec["error"] != "Failed to parse command: line longer than 67108864 bytes" {
		t.Errorf("got %v, want the over-long parse failure", rec)
	}
	if rec := p.next(t); rec["id"] != "after" || rec["success"] != true {
		t.Errorf("got %v, want the next line answered", rec)
	}
	if code, _ := p.exit(t); code != 0 {
		t.Errorf("exit code %d", code)
	}
}

func TestEndToEndLineAtLimit(t *testing.T) {
	endToEnd(t)
	p := startRPI(t, "rpc", "--cwd", t.TempDir())
	p.next(t)
	go func() {
		head := `{"id":"big","type":"get_state","pad":"`
		tail := `"}`
		w := bufio.NewWriterSize(p.stdin, 1<<20)
		w.WriteString(head)
		w.Write(bytes.Repeat([]byte("x"), maxLineBytes-len(head)-len(tail)))
		w.WriteString(tail + "\n")
		w.Flush()
		p.stdin.Close()
	}()
	if rec := p.next(t); rec["id"] != "big" || rec["success"] != true {
		t.Errorf("a line of exactly maxLineBytes: got %v, want it answered", rec)
	}
	p.exit(t)
}

// TestEndToEndNoOrphans checks that on EOF a running bash's whole process
// group, grandchildren included, is gone when rpi exits.
func TestEndToEndNoOrphans(t *testing.T) {
	t.Parallel()
	endToEnd(t)
	p := startRPI(t, "rpc", "--cwd", t.TempDir())
	p.next(t)
	helper := fmt.Sprintf("RPI_HELPER=spawn-grandchild %q", os.Args[0])
	p.send(t, `{"id":"b","type":"bash","command":`+strconv.Quote(helper)+`}`+"\n")
	update := p.until(t, "bash_execution_update", "")
	grandchild, _ := strconv.Atoi(strings.TrimSpace(update["data"].(map[string]any)["chunk"].(string)))
	if grandchild == 0 {
		t.Fatalf("no grandchild pid in %v", update)
	}
	p.stdin.Close()
	if code, _ := p.exit(t); code != 0 {
		t.Errorf("exit code %d", code)
	}
	if outlives(grandchild) {
		t.Errorf("grandchild %d survived rpi's exit", grandchild)
	}
}

// outlives reports whether pid, killed, is still alive after 10 s: a
// SIGKILL takes effect once the process next runs, which a busy machine
// may delay.
func outlives(pid int) bool {
	for deadline := time.Now().Add(10 * time.Second); alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return true
		}
	}
	return false
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func TestInitFailures(t *testing.T) {
	for _, args := range [][]string{
		{"rpc", "--mode", "json"},
		{"--mode", "tui"},
		{},
		{"rpc", "--nope"},
		{"rpc", "--thinking", "ultra"},
		{"rpc", "--approve", "--no-approve"},
		{"rpc", "--compat", "node"},
		{"rpc", "--session-id", "-bad-"},
		{"rpc", "--session-id", strings.Repeat("a", maxSessionIDLength+1)}, // its file's name would be too long to write
		{"rpc", "--tools", "read,teleport"},
		{"rpc", "--cwd", "/does/not/exist"},
		{"rpc", "extra"},
		{"rpc", "--session-dir", "/proc/rpi-cannot-write-here"},
		{"rpc", "--session", "testdata/sessions/not-a-session.jsonl"},
	} {
		var stdout bytes.Buffer
		if slices.Contains(args, "--session") {
			args = append(args, "--cwd", ".")
		}
		code := runRPI(t, newTestEnv(t), args, strings.NewReader(""), &stdout)
		var rec struct {
			Type, Command, Error string
			Success              bool
		}
		lines := strings.Count(stdout.String(), "\n")
		if err := json.Unmarshal(stdout.Bytes(), &rec); code == 0 || lines != 1 || err != nil ||
			rec.Type != "response" || rec.Command != "init" || rec.Success || rec.Error == "" {
			t.Errorf("rpi %q: exit %d, stdout %q: want one init failure line and a nonzero exit", args, code, stdout.String())
		}
	}
}

// TestFlagErrorsNameTheFlagAsTyped: the flag package writes every flag
// with one dash; rpi's errors name it as the command line did.
func TestFlagErrorsNameTheFlagAsTyped(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"rpc", "--thinking"}, "Invalid arguments: flag needs an argument: --thinking (see rpi --help)"},
		{[]string{"rpc", "-t"}, "Invalid arguments: flag needs an argument: -t (see rpi --help)"},
		{[]string{"rpc", "--no-session=maybe"}, `Invalid arguments: invalid boolean value "maybe" for --no-session: parse error (see rpi --help)`},
		{[]string{"rpc", "--frobnicate=1"}, "Unknown flag: --frobnicate (see rpi --help)"},
		{[]string{"rpc", "-zz"}, "Unknown flag: -zz (see rpi --help)"},
	} {
		_, _, err := parseArgs(c.args, newTestEnv(t).env())
		if err == nil || err.Error() != c.want {
			t.Errorf("rpi %q: %v, want %s", c.args, err, c.want)
		}
	}
}

// TestHelpAndVersion checks --help and --version, and the words a user
// types for them (rpi help, rpi version). The test binary has no build
// information, so --version says devel (TestVersionNamesTheCommit builds
// one that has).
func TestHelpAndVersion(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		compat  string // RPI_COMPAT
		program string
		want    string // the start of stdout
	}{
		{[]string{"--help"}, "", "rpi", "rpi: a headless"},
		{[]string{"rpc", "--help"}, "", "rpi", "rpi: a headless"},
		{[]string{"help"}, "", "rpi", "rpi: a headless"},
		{[]string{"--version"}, "", "rpi", "rpi " + rpiVersion + " (devel)\n"},
		{[]string{"version"}, "", "rpi", "rpi " + rpiVersion + " (devel)\n"},
		{[]string{"version", "--compat", "pi"}, "", "rpi", piVersion + "\n"},
		{[]string{"--version"}, "pi", "rpi", piVersion + "\n"},
		{[]string{"--version"}, "", "pi", piVersion + "\n"},
		{[]string{"-v", "--compat", "pi"}, "", "rpi", piVersion + "\n"},
	} {
		e := newTestEnv(t)
		e.vars["RPI_COMPAT"] = tt.compat
		env := e.env()
		env.program = tt.program
		var stdout bytes.Buffer
		if code := runProgram(tt.args, env, strings.NewReader(""), &stdout, io.Discard, nil); code != 0 || !strings.HasPrefix(stdout.String(), tt.want) {
			t.Errorf("rpi %q (RPI_COMPAT=%q, as %s): exit %d, stdout %q, want it to start %q", tt.args, tt.compat, tt.program, code, stdout.String(), tt.want)
		}
	}
}

// TestVersionNamesTheCommit builds rpi as a user would, with go build in
// a git clone (here a new repository of rpi's sources, one commit of a
// fixed date, and a file not committed), and checks that --version names
// that commit and its date, and says dirty. (One build: each costs
// seconds. TestVersionLine has the other cases.)
func TestVersionNamesTheCommit(t *testing.T) {
	endToEnd(t)
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	repo, bin := t.TempDir(), filepath.Join(t.TempDir(), "rpi")
	sources, _ := filepath.Glob("*.go")
	for _, name := range append(sources, "go.mod") {
		if data, err := os.ReadFile(name); err == nil && !strings.HasSuffix(name, "_test.go") {
			os.WriteFile(filepath.Join(repo, name), data, 0o644)
		}
	}
	run := func(env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	const date = "2026-12-03T10:00:00Z"
	gitEnv := []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_DATE=" + date, "GIT_COMMITTER_DATE=" + date}
	run(gitEnv, "git", "init", "-q")
	run(gitEnv, "git", "add", ".")
	run(gitEnv, "git", "-c", "user.name=rpi", "-c", "user.email=rpi@example.com", "commit", "-q", "-m", "rpi")
	commit := strings.TrimSpace(run(gitEnv, "git", "rev-parse", "HEAD"))
	os.WriteFile(filepath.Join(repo, "notes.txt"), []byte("not committed\n"), 0o644)
	// GOFLAGS set here, since a user's go env may say -buildvcs=false.
	run([]string{"GOFLAGS=-buildvcs=true", "CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", bin, ".")
	if got, want := run(nil, bin, "--version"), "rpi "+rpiVersion+" (commit "+commit[:12]+", "+date+", dirty)\n"; got != want {
		t.Errorf("--version: %q, want %q", got, want)
	}
}

// TestVersionLine checks --version's line for each kind of build
// information: none (go run, go test), a commit, a commit with changes.
func TestVersionLine(t *testing.T) {
	vcs := func(kv ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{}
		for i := 0; i < len(kv); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return info
	}
	const rev = "1918e83c9a1b5d2e3f4a5b6c7d8e9f0a1b2c3d4e"
	for _, c := range []struct {
		info *debug.BuildInfo
		want string
	}{
		{nil, "rpi " + rpiVersion + " (devel)"},
		{vcs("-buildmode", "exe"), "rpi " + rpiVersion + " (devel)"},
		{vcs("vcs", "git", "vcs.revision", rev, "vcs.time", "2026-12-04T23:30:00Z", "vcs.modified", "false"),
			"rpi " + rpiVersion + " (commit 1918e83c9a1b, 2026-12-04T23:30:00Z)"},
		{vcs("vcs.revision", rev, "vcs.time", "2026-12-04T23:30:00Z", "vcs.modified", "true"),
			"rpi " + rpiVersion + " (commit 1918e83c9a1b, 2026-12-04T23:30:00Z, dirty)"},
	} {
		if got := versionLine(c.info); got != c.want {
			t.Errorf("versionLine(%v) = %q, want %q", c.info, got, c.want)
		}
	}
}

// TestSessionIDAndFork: --session-id names a new session and opens it again
// by its id; --fork starts a new session holding a copy of another.
func TestSessionIDAndFork(t *testing.T) {
	e, cwd := newTestEnv(t), t.TempDir()
	startFakeModel(t, apiOpenAI, `{"text":["hello"]}`, e.agentDir)
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd, "--session-id", "my-id.1"})
	ps.send(`{"id":"p","type":"prompt","message":"hi"}`)
	ps.waitFor(`"type":"agent_settled"`)
	ps.close()
	files, _ := filepath.Glob(filepath.Join(defaultSessionDir(e.agentDir, cwd), "*_my-id.1.jsonl"))
	if len(files) != 1 {
		t.Fatalf("session files %v", files)
	}
	again := startSessionIn(t, e, []string{"rpc", "--cwd", cwd, "--session-id", "my-id.1"})
	again.send(`{"id":"s","type":"get_state"}`)
	again.waitFor(`"id":"s"`)
	again.close()
	if out := string(again.out.bytes()); !strings.Contains(out, `"sessionId":"my-id.1"`) || !strings.Contains(out, `"messageCount":3`) {
		t.Errorf("--session-id did not reopen the session:\n%s", out)
	}
	forked := startSessionIn(t, e, []string{"rpc", "--cwd", cwd, "--fork", files[0]})
	forked.send(`{"id":"s","type":"get_state"}`)
	forked.waitFor(`"id":"s"`)
	forked.close()
	if out := string(forked.out.bytes()); strings.Contains(out, `"sessionId":"my-id.1"`) || !strings.Contains(out, `"messageCount":3`) ||
		!strings.Contains(out, `"parentSession":"`+files[0]) {
		t.Errorf("--fork:\n%s", out)
	}
}

// TestForkIDOfSeveral: --fork with the start of two sessions' ids copies
// the newer one, as pi 1.6 takes the first of its newest-first list.
func TestForkIDOfSeveral(t *testing.T) {
	e, cwd := newTestEnv(t), t.TempDir()
	dir := defaultSessionDir(e.agentDir, cwd)
	os.MkdirAll(dir, 0o755)
	var paths []string
	for i, id := range []string{"abc-1", "abc-2"} {
		path := filepath.Join(dir, "2026-03-16T09-00-00-000Z_"+id+".jsonl")
		header := `{"type":"session","version":3,"id":"` + id + `","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}` + "\n"
		if err := os.WriteFile(path, []byte(header), 0o644); err != nil {
			t.Fatal(err)
		}
		// abc-2 is the newer, though abc-1 comes first by name
		when := time.Date(2026, 3, 16, 9+i, 0, 0, 0, time.UTC)
		if err := os.Chtimes(path, when, when); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd, "--fork", "abc"})
	ps.send(`{"id":"s","type":"get_state"}`)
	ps.waitFor(`"id":"s"`)
	ps.close()
	if out := string(ps.out.bytes()); !strings.Contains(out, `"parentSession":"`+paths[1]+`"`) {
		t.Errorf("--fork abc did not copy the newer session %s:\n%s", paths[1], out)
	}
}

// ---- Fuzzing ----

// FuzzServe feeds arbitrary stdin to rpi, with every child program (bash
// and process_spawn alike) replaced by /bin/true, and checks that stdout holds only whole JSON objects and
// exactly one response per non-blank line.
func FuzzServe(f *testing.F) {
	endToEnd(f)
	paths, _ := filepath.Glob("testdata/*.txtar")
	for _, path := range paths {
		if fx, err := parseFixture(path); err == nil {
			f.Add(fx.input())
		}
	}
	f.Add([]byte("{\"type\":\"get_state\"}\r\n\n  \n[1,2]\n\xff\xfe\n{\"id\":{},\"type\":1}"))
	cwd := f.TempDir()
	// export_html writes wherever it is told: not a thing to fuzz.
	exportHTML := rpcCommands()["export_html"]
	delete(rpcCommands(), "export_html")
	f.Cleanup(func() { rpcCommands()["export_html"] = exportHTML })
	e := newTestEnv(f)
	e.command = func(string, ...string) *exec.Cmd { return exec.Command("/bin/true") }
	e.maxLineBytes = 1 << 10
	f.Fuzz(func(t *testing.T, input []byte) {
		var stdout bytes.Buffer
		runProgram([]string{"rpc", "--cwd", cwd, "--no-session"}, e.env(), bytes.NewReader(input), &stdout, io.Discard, nil)
		checkRecords(t, stdout.Bytes())
		responses := 0
		for _, line := range bytes.Split(stdout.Bytes(), []byte("\n")) {
			var rec struct{ Type string }
			if json.Unmarshal(line, &rec) == nil && rec.Type == "response" {
				responses++
			}
		}
		want := 0
		for _, line := range bytes.Split(input, []byte("\n")) {
			if !isBlank(bytes.TrimSuffix(line, []byte("\r"))) {
				want++
			}
		}
		if responses != want {
			t.Errorf("%d responses for %d non-blank lines; output:\n%s", responses, want, stdout.Bytes())
		}
	})
}

// copyForNobody copies this test binary, as name, into a new temp folder
// that user nobody may enter (with every folder above it up to the temp
// dir), for a test that runs it as nobody; it returns the folder and the
// copy.
func copyForNobody(t *testing.T, name string) (dir, binary string) {
	dir = t.TempDir()
	for d := dir; d != filepath.Dir(d) && strings.HasPrefix(d, os.TempDir()) && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	binary = filepath.Join(dir, name)
	copyFile(t, exe, binary)
	return dir, binary
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWhenIdleWithoutPause: a connection's whenIdle (on stdio: SIGHUP's
// and SIGQUIT's handlers, docs/protocol.md#launch) runs, once, on serve's
// goroutine, also when serve never finds its input idle after an answer:
// a client that sends nothing, and one whose lines never stop coming.
// (handle and whenIdle share a plain counter: under -race, whenIdle on
// another goroutine is a data race.)
func TestWhenIdleWithoutPause(t *testing.T) {
	for _, tt := range []struct {
		name  string
		input func() (io.Reader, func())
		pause time.Duration // each line's handling
	}{
		{"no line", func() (io.Reader, func()) { r, w := io.Pipe(); return r, func() { w.Close() } }, 0},
		{"a flood", func() (io.Reader, func()) { return endlessLines{}, func() {} }, 100 * time.Microsecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in, closeIn := tt.input()
			defer closeIn()
			c := newConnection(in, io.Discard, io.Discard)
			idle := make(chan struct{})
			steps := 0 // serve's goroutine's
			c.whenIdle = func() {
				steps++
				close(idle) // a second call panics
			}
			handle := func(frame) {
				steps++
				time.Sleep(tt.pause)
			}
			stop := make(chan os.Signal, 1)
			done := make(chan os.Signal)
			go func() { done <- c.serve(1<<20, stop, handle, &memoryReturn{}, io.Discard) }()
			select {
			case <-idle:
			case <-time.After(3 * time.Second):
				t.Error("whenIdle did not run within 3 s")
			}
			stop <- os.Interrupt
			if sig := <-done; sig != os.Interrupt {
				t.Errorf("serve returned %v, want the signal", sig)
			}
		})
	}
}

// TestWhenIdleAfterFirstAnswers: whenIdle runs once serve has handled
// the lines that came first and written their answers out, before it
// handles the next line, and once only (docs/protocol.md#launch: a line
// answered after that finds SIGHUP's and SIGQUIT's handlers).
func TestWhenIdleAfterFirstAnswers(t *testing.T) {
	in, w := io.Pipe()
	defer w.Close()
	var out syncBuffer
	c := newConnection(in, &out, io.Discard)
	handled, idle := 0, make(chan string, 2)
	c.whenIdle = func() { idle <- fmt.Sprintf("%d handled, out %q", handled, out.String()) }
	handle := func(f frame) {
		handled++
		c.out.gather(func(buf []byte) ([]byte, error) { return append(buf, f.line...), nil }) // the line with its \n
	}
	c.readAhead(1<<20, io.Discard) // the first lines wait, read, as on stdio
	go w.Write([]byte("a\nb\nc\n"))
	for deadline := time.Now().Add(3 * time.Second); len(c.frames) == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	stop := make(chan os.Signal, 1)
	done := make(chan os.Signal)
	go func() { done <- c.serve(1<<20, stop, handle, &memoryReturn{}, io.Discard) }()
	if got, want := <-idle, `3 handled, out "a\nb\nc\n"`; got != want {
		t.Errorf("whenIdle ran with %s; want %s", got, want)
	}
	w.Write([]byte("d\n"))
	time.Sleep(2 * settleWithin)
	stop <- os.Interrupt
	<-done
	if len(idle) != 0 || out.String() != "a\nb\nc\nd\n" {
		t.Errorf("whenIdle ran again (%d), or out %q", len(idle), out.String())
	}
}

// endlessLines is input whose lines never end: {} after {}.
type endlessLines struct{}

func (endlessLines) Read(p []byte) (int, error) {
	n := 0
	for ; n+3 <= len(p); n += 3 {
		copy(p[n:], "{}\n")
	}
	return n, nil
}

// TestPromptImagesAsTheirBytes: an image a client sends with prompt,
// steer or follow_up is kept as what its bytes are — a model's API
// refuses an image whose bytes are not of its stated type, and one kept
// in the conversation fails every later request: a JPEG said to be a
// PNG is kept as a JPEG, its base64 in one piece, and bytes that are no
// image are refused.
func TestPromptImagesAsTheirBytes(t *testing.T) {
	endToEnd(t)
	p := startRPIWith(t, withEnv("PI_FAUX_RESPONSE=A picture."), "rpc", "--cwd", t.TempDir(), "--model", "faux/faux-1", "--no-session")
	p.next(t)
	text := base64.StdEncoding.EncodeToString([]byte("not an image at all"))
	for _, command := range []string{"prompt", "steer", "follow_up"} {
		p.send(t, `{"id":"bad","type":"`+command+`","message":"Look","images":[{"type":"image","data":"`+text+`","mimeType":"image/png"}]}`+"\n")
		rec := p.until(t, "response", "bad")
		if rec["success"] != false || rec["error"] != "Invalid field images[0].data: must be base64 data of a PNG, JPEG, GIF or WebP image" {
			t.Errorf("%s of text said to be a PNG: %v", command, rec)
		}
	}
	jpeg := base64.StdEncoding.EncodeToString([]byte("\xff\xd8\xff\xe0 a JPEG"))
	p.send(t, `{"id":"p","type":"prompt","message":"Look","images":[{"type":"image","data":"`+jpeg[:4]+`\n`+jpeg[4:]+`","mimeType":"image/png"}]}`+"\n")
	p.until(t, "agent_settled", "")
	p.send(t, `{"id":"m","type":"get_messages"}`+"\n")
	rec := p.until(t, "response", "m")
	data, _ := json.Marshal(rec["data"])
	want := `{"data":"` + jpeg + `","mimeType":"image/jpeg","type":"image"}`
	if !strings.Contains(string(data), want) {
		t.Errorf("messages %s\nwant the image %s", data, want)
	}
}

// TestSessionIDEndOfAnother: --session-id c is the session c, not the
// cwd's session a_c whose file name ("<time>_a_c.jsonl") ends in _c:
// it makes a new session c, and --fork with --session-id c is not refused
// as taken.
func TestSessionIDEndOfAnother(t *testing.T) {
	e, cwd := newTestEnv(t), t.TempDir()
	startFakeModel(t, apiOpenAI, `{"text":["hello"]}`, e.agentDir)
	dir := defaultSessionDir(e.agentDir, cwd)
	os.MkdirAll(dir, 0o755)
	other := filepath.Join(dir, "2026-03-16T09-00-00-000Z_a_c.jsonl")
	header := `{"type":"session","version":3,"id":"a_c","timestamp":"2026-03-16T09:00:00.000Z","cwd":"` + cwd + `"}` + "\n"
	if err := os.WriteFile(other, []byte(header), 0o644); err != nil {
		t.Fatal(err)
	}
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd, "--session-id", "c"})
	ps.send(`{"id":"s","type":"get_state"}`)
	ps.waitFor(`"id":"s"`)
	ps.close()
	if out := string(ps.out.bytes()); !strings.Contains(out, `"sessionId":"c"`) {
		t.Errorf("--session-id c opened another session:\n%s", out)
	}
	if got, _ := sessionFileWithID(dir, "c", ""); got != "" {
		t.Errorf("sessionFileWithID(c) = %s, want none", got)
	}
	if got, _ := sessionFileWithID(dir, "a_c", ""); got != other {
		t.Errorf("sessionFileWithID(a_c) = %s, want %s", got, other)
	}
}

// TestSessionEnvNUL: a session file whose header id holds a NUL (a
// hostile or corrupt file) does not stop the model's bash commands: a
// value no environment can hold is left out, and the command runs.
func TestSessionEnvNUL(t *testing.T) {
	e, cwd := newTestEnv(t), t.TempDir()
	startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"call_1","name":"bash","args":["{\"command\":\"echo ran-$PI_CODING_AGENT\"}"]}]}
{"text":["Done."]}`, e.agentDir)
	path := filepath.Join(cwd, "s.jsonl")
	header := `{"type":"session","version":3,"id":"a\u0000b","timestamp":"2026-03-16T09:00:00.000Z","cwd":"` + cwd + `"}` + "\n"
	if err := os.WriteFile(path, []byte(header), 0o644); err != nil {
		t.Fatal(err)
	}
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd, "--session", path})
	ps.send(`{"id":"p","type":"prompt","message":"run it"}`)
	ps.waitFor(`"type":"agent_settled"`)
	ps.close()
	if out := string(ps.out.bytes()); !strings.Contains(out, `ran-true`) {
		t.Errorf("the bash command did not run:\n%s", out)
	}
}

// TestForkSkippedLines: --fork of a file with a line that is no session
// entry says what the copy leaves out, as opening that file says it; a
// torn last line (an entry another pi is writing as it is copied) goes
// unreported there as it does there.
func TestForkSkippedLines(t *testing.T) {
	e, cwd := newTestEnv(t), t.TempDir()
	startFakeModel(t, apiOpenAI, `{"text":["hello"]}`, e.agentDir)
	src := filepath.Join(t.TempDir(), "src.jsonl")
	content := `{"type":"session","version":3,"id":"src-1","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}
not an entry
{"type":"message","id":"a1","parentId":null,"timestamp":"2026-03-16T09:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1}}
{"type":"message","id":"a2","parentId":"a1","timestamp":"2026-03-16T09:00:02.000Z","message":{"role":"assis`
	if err := os.WriteFile(src, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd, "--fork", src})
	ps.send(`{"id":"s","type":"get_state"}`)
	ps.waitFor(`"id":"s"`)
	ps.close()
	if out := string(ps.out.bytes()); !strings.Contains(out, "Skipped 1 line(s) of "+src+" that are not session entries (line [2])") {
		t.Errorf("--fork left out a line without a word:\n%s", out)
	}
}

// TestSessionIDSharedSessionDir: in a --session-dir, which holds every
// project's files, --session-id X is the working directory's session X
// (its header names the cwd), as listing there is: another project's
// session X is neither opened in this one nor a reason to refuse --fork
// --session-id X.
func TestSessionIDSharedSessionDir(t *testing.T) {
	e, cwd, dir := newTestEnv(t), t.TempDir(), t.TempDir()
	startFakeModel(t, apiOpenAI, `{"text":["hello"]}`, e.agentDir)
	other := filepath.Join(dir, "2026-03-16T09-00-00-000Z_shared.jsonl")
	content := `{"type":"session","version":3,"id":"shared","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/other/project"}
{"type":"message","id":"a1","parentId":null,"timestamp":"2026-03-16T09:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"theirs"}],"timestamp":1}}
`
	if err := os.WriteFile(other, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--session-id", "shared"},
		{"--fork", other, "--session-id", "shared"},
	} {
		var stdout bytes.Buffer // an init error ends rpi before it reads: no pipe to block on
		runRPI(t, e, append([]string{"rpc", "--cwd", cwd, "--session-dir", dir}, args...),
			strings.NewReader(`{"id":"s","type":"get_state"}`+"\n"), &stdout)
		out := stdout.String()
		if strings.Contains(out, `"sessionFile":"`+other+`"`) || strings.Contains(out, "already exists") || !strings.Contains(out, `"sessionId":"shared"`) {
			t.Errorf("%q with another project's session shared in the --session-dir:\n%s", args, out)
		}
	}
	if b, _ := os.ReadFile(other); string(b) != content {
		t.Errorf("the other project's session changed:\n%s", b)
	}
}
