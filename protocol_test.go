package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	os.Exit(m.Run())
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
	f := &fixture{path: path, sections: map[string]string{}}
	name := ""
	var text strings.Builder
	flush := func() {
		if name == "" {
			f.comment = text.String()
		} else {
			f.sections[name] = text.String()
			f.order = append(f.order, name)
		}
		text.Reset()
	}
	for _, line := range strings.SplitAfter(string(data), "\n") {
		trimmed := strings.TrimRight(line, "\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") {
			flush()
			name = strings.TrimSuffix(strings.TrimPrefix(trimmed, "-- "), " --")
			continue
		}
		text.WriteString(line)
	}
	flush()
	if strings.TrimSpace(f.comment) == "" {
		return nil, fmt.Errorf("%s: a fixture starts with a sentence saying what it shows", path)
	}
	if _, ok := f.sections["input.jsonl"]; !ok {
		return nil, fmt.Errorf("%s: no -- input.jsonl -- section", path)
	}
	return f, nil
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

func (f *fixture) input() []byte {
	return rawByte.ReplaceAllFunc([]byte(f.sections["input.jsonl"]), func(m []byte) []byte {
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

func (f *fixture) maxLine() int {
	n, _ := strconv.Atoi(f.option("maxLineBytes", "0"))
	return n
}

// isolate points rpi at an empty agent dir and hides the developer's API
// keys, so a test sees only the models it sets up.
func isolate(t testing.TB, agentDir string) {
	t.Setenv("PI_CODING_AGENT_DIR", agentDir)
	for _, name := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL"} {
		t.Setenv(name, "")
	}
}

func (f *fixture) args() []string {
	args := []string{"rpc"}
	for _, line := range strings.Split(f.sections["args"], "\n") {
		if line = strings.TrimSpace(line); line != "" {
			args = append(args, line)
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
func feedFixture(t testing.TB, w io.WriteCloser, input []byte, write func(io.Writer, []byte), out *watchedOutput, norm normalizer) {
	defer w.Close()
	var segment []byte
	for _, line := range bytes.SplitAfter(input, []byte("\n")) {
		times, text := 1, []byte(nil)
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

// withActualUUIDs replaces each $UUIDn in b with the UUID that placeholder
// stands for in the output so far, and $DIALOG_ID with the id of the
// latest dialog request (select, confirm, input, editor).
func withActualUUIDs(t testing.TB, b []byte, out *watchedOutput) []byte {
	if bytes.Contains(b, []byte("$DIALOG_ID")) {
		last := ""
		for _, line := range bytes.Split(out.bytes(), []byte("\n")) {
			var req uiRequest
			if json.Unmarshal(line, &req) == nil && req.Type == "extension_ui_request" && oneOf(req.Method, []string{"select", "confirm", "input", "editor"}) {
				last = req.ID
			}
		}
		if last == "" {
			t.Errorf("input names $DIALOG_ID before any dialog was asked")
		}
		b = bytes.ReplaceAll(b, []byte("$DIALOG_ID"), []byte(last))
	}
	if !uuidPlaceholder.Match(b) {
		return b
	}
	actual := map[string]string{}
	numbered(string(out.bytes()), uuidPattern, func(i int, uuid string) string {
		actual[fmt.Sprintf("$UUID%d", i)] = uuid
		return ""
	})
	return uuidPlaceholder.ReplaceAllFunc(b, func(p []byte) []byte {
		if uuid, ok := actual[string(p)]; ok {
			return []byte(uuid)
		}
		t.Errorf("input names %s before the output shows it", p)
		return p
	})
}

var uuidPlaceholder = regexp.MustCompile(`\$UUID\d+`)

// serveInProcess runs rpi with args on stdin until EOF, writing to stdout.
func serveInProcess(t testing.TB, args []string, stdin io.Reader, stdout io.Writer, maxLine int) {
	t.Helper()
	if os.Getenv("PI_CODING_AGENT_DIR") == "" {
		isolate(t, t.TempDir())
	}
	var stderr bytes.Buffer
	cfg, action, err := parseArgs(args)
	if err != nil || action != "serve" {
		run(args, stdin, stdout, &stderr, nil)
		return
	}
	s, err := newServer(cfg, stdout, &stderr)
	if err != nil {
		// A fatal init error found while setting up: run writes its one line.
		if code := run(args, stdin, stdout, &stderr, nil); code == 0 {
			t.Errorf("newServer failed (%v) but run exited 0", err)
		}
		return
	}
	if maxLine > 0 {
		s.maxLineBytes = maxLine
	}
	if code := s.serve(stdin, nil); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if stderr.Len() > 0 {
		t.Logf("stderr:\n%s", stderr.Bytes())
	}
}

// normalizer replaces what is truly nondeterministic with placeholders.
// Numbered placeholders keep identity: $UUID1 is the same value wherever it
// appears, and a second distinct value becomes $UUID2.
type normalizer struct {
	literal map[string]string // exact strings (temp dirs) → placeholder
}

var (
	uuidPattern     = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timePattern     = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`)
	msPattern       = regexp.MustCompile(`"(timestamp|durationMs)":\d+`)
	pidPattern      = regexp.MustCompile(`"pid":\d+`)
	tempLogPattern  = regexp.MustCompile(`rpi-bash-\d+\.log`)
	fileTimePattern = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z`)
	entryIDPattern  = regexp.MustCompile(`"(id|parentId|firstKeptEntryId|entryId|targetId|fromId)":"([0-9a-f]{8})"`)
)

func (n normalizer) apply(out []byte) string {
	s := string(mergeChunks(out))
	for lit, placeholder := range n.literal {
		s = strings.ReplaceAll(s, lit, placeholder)
	}
	s = numbered(s, uuidPattern, func(i int, _ string) string { return fmt.Sprintf("$UUID%d", i) })
	s = numbered(s, pidPattern, func(i int, _ string) string { return fmt.Sprintf(`"pid":$PID%d`, i) })
	s = timePattern.ReplaceAllString(s, "$$TIME")
	s = fileTimePattern.ReplaceAllString(s, "$$FILETIME")
	s = numberedGroup(s, entryIDPattern, "ENTRY")
	s = msPattern.ReplaceAllString(s, `"$1":$$MS`)
	s = numbered(s, tempLogPattern, func(i int, _ string) string { return fmt.Sprintf("rpi-bash-$N%d.log", i) })
	return s
}

// mergeChunks joins consecutive output events of the same stream into one,
// and consecutive message_update deltas of the same block, because where a
// child's output is split into chunks is up to the kernel, and where deltas
// are batched is up to the clock.
func mergeChunks(out []byte) []byte {
	type chunkEvent struct {
		Type string `json:"type"`
		Data struct {
			RequestID *string `json:"requestId,omitempty"`
			ProcessID *string `json:"processId,omitempty"`
			Stream    string  `json:"stream"`
			Chunk     string  `json:"chunk"`
		} `json:"data"`
	}
	type deltaEvent struct {
		Data messageUpdate `json:"data"`
	}
	var merged bytes.Buffer
	var pending *chunkEvent
	var pendingDelta *assistantEvent
	flush := func() {
		var data []byte
		switch {
		case pending != nil && pending.Type == "process_output":
			data, _ = encodeJSON(event{Type: pending.Type, Data: processOutputData{*pending.Data.ProcessID, pending.Data.Stream, pending.Data.Chunk}})
		case pending != nil:
			data, _ = encodeJSON(event{Type: pending.Type, Data: bashUpdate{pending.Data.RequestID, pending.Data.Stream, pending.Data.Chunk}})
		case pendingDelta != nil:
			data, _ = encodeJSON(event{Type: "message_update", Data: messageUpdate{*pendingDelta}})
		default:
			return
		}
		merged.Write(data)
		merged.WriteByte('\n')
		pending, pendingDelta = nil, nil
	}
	for _, line := range bytes.SplitAfter(out, []byte("\n")) {
		var ev chunkEvent
		var de deltaEvent
		switch {
		case bytes.HasPrefix(line, []byte(`{"type":"message_update"`)) && json.Unmarshal(line, &de) == nil && de.Data.AssistantMessageEvent.Delta != nil:
			d := de.Data.AssistantMessageEvent
			if pendingDelta != nil && pendingDelta.Type == d.Type && pendingDelta.ContentIndex == d.ContentIndex {
				joined := *pendingDelta.Delta + *d.Delta
				pendingDelta.Delta = &joined
				continue
			}
			flush()
			pendingDelta = &d
		case (bytes.HasPrefix(line, []byte(`{"type":"bash_execution_update"`)) || bytes.HasPrefix(line, []byte(`{"type":"process_output"`))) && json.Unmarshal(line, &ev) == nil:
			if pending != nil && pending.Type == ev.Type && sameID(pending.Data.RequestID, ev.Data.RequestID) &&
				sameID(pending.Data.ProcessID, ev.Data.ProcessID) && pending.Data.Stream == ev.Data.Stream {
				pending.Data.Chunk += ev.Data.Chunk
				continue
			}
			flush()
			pending = &ev
		default:
			flush()
			merged.Write(line)
		}
	}
	flush()
	return merged.Bytes()
}

func sameID(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

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

func TestFixtures(t *testing.T) {
	paths, _ := filepath.Glob("testdata/*.txtar")
	if len(paths) == 0 {
		t.Fatal("no fixtures in testdata/")
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
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

// runFixture serves a fixture's input in a fresh cwd and TMPDIR, checks
// that every output line is one JSON object and that no temp file is left
// behind, and returns the normalised output.
func runFixture(t *testing.T, f *fixture, write func(io.Writer, []byte)) string {
	cwd, tmp, agent := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", tmp)
	isolate(t, agent)
	norm := normalizer{literal: map[string]string{cwd: "$CWD", tmp: "$TMPDIR", agent: "$AGENT_DIR",
		strings.NewReplacer("/", "-").Replace(strings.TrimLeft(cwd, "/")): "$CWD_NAME"}}
	if script, ok := f.sections["model.jsonl"]; ok {
		fm := startFakeModel(t, f.option("api", apiOpenAI), script, agent)
		norm.literal[fm.server.URL] = "$MODEL_URL"
	}
	copyDir(t, "testdata/sessions", filepath.Join(cwd, "sessions"))
	for name, content := range f.sections {
		if file, ok := strings.CutPrefix(name, "agent "); ok {
			path := filepath.Join(agent, file)
			os.MkdirAll(filepath.Dir(path), 0o755)
			os.WriteFile(path, []byte(content), 0o644)
		}
		if file, ok := strings.CutPrefix(name, "file "); ok {
			path := filepath.Join(cwd, file)
			os.MkdirAll(filepath.Dir(path), 0o755)
			os.WriteFile(path, []byte(content), 0o644)
		}
	}
	args := append(f.args(), "--cwd", cwd)
	out := newWatchedOutput()
	pr, pw := io.Pipe()
	go feedFixture(t, pw, f.input(), write, out, norm)
	serveInProcess(t, args, pr, out, f.maxLine())
	pr.Close()
	checkRecords(t, out.bytes())
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("temp files left behind: %v", left)
	}
	if want, ok := f.sections["session.jsonl"]; ok {
		files, _ := filepath.Glob(filepath.Join(agent, "sessions", "*", "*.jsonl"))
		if len(files) != 1 {
			t.Fatalf("want one session file, found %v", files)
		}
		data, _ := os.ReadFile(files[0])
		// Normalised together with the output, so ids match across both.
		both := norm.apply(append(append(out.bytes(), "--\n"...), data...))
		got := both[strings.Index(both, "--\n")+3:]
		if *update {
			f.sections["session.jsonl"] = got
		} else if got != want {
			t.Errorf("session file differs\n--- got ---\n%s--- want ---\n%s", got, want)
		}
	}
	return norm.apply(out.bytes())
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

// TestEventsDocumented checks that get_capabilities' event list is exactly
// the set of events the fixtures show.
func TestEventsDocumented(t *testing.T) {
	paths, _ := filepath.Glob("testdata/*.txtar")
	shown := map[string]bool{}
	for _, path := range paths {
		f, err := parseFixture(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range recordType.FindAllStringSubmatch(f.sections["want.jsonl"], -1) {
			if m[1] != "response" && m[1] != "extension_ui_request" {
				shown[m[1]] = true
			}
		}
	}
	for _, name := range eventTypes {
		if !shown[name] {
			t.Errorf("event %s is listed in eventTypes but no fixture shows it", name)
		}
		delete(shown, name)
	}
	for name := range shown {
		t.Errorf("fixtures show event %s, which eventTypes does not list", name)
	}
}

var recordType = regexp.MustCompile(`(?m)^\{"type":"([a-z_]+)"`)

// TestCommandsDocumented checks that every registered command has a fixture
// and a README section.
func TestCommandsDocumented(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var inputs strings.Builder
	paths, _ := filepath.Glob("testdata/*.txtar")
	for _, path := range paths {
		f, _ := parseFixture(path)
		inputs.WriteString(f.sections["input.jsonl"])
	}
	for name := range commands {
		if !strings.Contains(inputs.String(), `"type":"`+name+`"`) {
			t.Errorf("command %s has no fixture", name)
		}
		if !bytes.Contains(readme, []byte("`"+name+"`")) {
			t.Errorf("command %s is not in README.md", name)
		}
	}
	for _, name := range eventTypes {
		if !bytes.Contains(readme, []byte("`"+name+"`")) {
			t.Errorf("event %s is not in README.md", name)
		}
	}
}

// ---- Framing ----

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
				go readFrames(feedReader(feed.write, []byte(tt.input)), tt.max, frames)
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
	commands["test_panic"] = func(s *server, r *request) (any, error) { panic("boom") }
	defer delete(commands, "test_panic")
	in := `{"id":"p","type":"test_panic"}` + "\n" + `{"id":"s","type":"set_auto_retry","enabled":false}` + "\n"
	var out bytes.Buffer
	serveInProcess(t, []string{"rpc", "--cwd", t.TempDir()}, strings.NewReader(in), &out, 0)
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

func startRPI(t *testing.T, args ...string) *rpiProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	agent := os.Getenv("PI_CODING_AGENT_DIR") // set by isolate, or a fresh one
	if agent == "" {
		agent = t.TempDir()
	}
	cmd.Env = append(os.Environ(), "RPI_TEST_MAIN=1", "GORACE=atexit_sleep_ms=0", "PI_CODING_AGENT_DIR="+agent,
		"OPENAI_API_KEY=", "ANTHROPIC_API_KEY=")
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
func (p *rpiProcess) until(t *testing.T, typ, id string) map[string]any {
	t.Helper()
	for {
		rec := p.next(t)
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

func TestEndToEndEOF(t *testing.T) {
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
	for _, tt := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGTERM, 0}, {syscall.SIGINT, 130}} {
		t.Run(tt.sig.String(), func(t *testing.T) {
			p := startRPI(t, "rpc", "--cwd", t.TempDir())
			p.next(t)
			p.send(t, `{"id":"b","type":"bash","command":"sleep 30"}`+"\n")
			p.send(t, `{"id":"s","type":"get_state"}`+"\n")
			p.until(t, "response", "s")
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

func TestEndToEndOverlongLine(t *testing.T) {
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
	if alive(grandchild) {
		t.Errorf("grandchild %d survived rpi's exit", grandchild)
	}
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
		{"rpc", "--thinking", "max"},
		{"rpc", "--tools", "read,teleport"},
		{"rpc", "--cwd", "/does/not/exist"},
		{"rpc", "extra"},
		{"rpc", "--session-dir", "/proc/rpi-cannot-write-here"},
		{"rpc", "--session", "testdata/sessions/not-a-session.jsonl"},
	} {
		var stdout, stderr bytes.Buffer
		isolate(t, t.TempDir())
		if slices.Contains(args, "--session") {
			args = append(args, "--cwd", ".")
		}
		code := run(args, strings.NewReader(""), &stdout, &stderr, nil)
		var rec failureResponse
		lines := strings.Count(stdout.String(), "\n")
		if err := json.Unmarshal(stdout.Bytes(), &rec); code == 0 || lines != 1 || err != nil ||
			rec.Command != "init" || rec.Success || rec.Error == "" {
			t.Errorf("rpi %q: exit %d, stdout %q: want one init failure line and a nonzero exit", args, code, stdout.String())
		}
	}
}

func TestHelpAndVersion(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"rpc", "--help"}, {"--version"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, strings.NewReader(""), &stdout, &stderr, nil); code != 0 || stdout.Len() == 0 {
			t.Errorf("rpi %q: exit %d, stdout %q", args, code, stdout.String())
		}
	}
}

// ---- Fuzzing ----

// FuzzServe feeds arbitrary stdin to rpi, with every child program (bash
// and process_start alike) replaced by /bin/true, and checks that stdout holds only whole JSON objects and
// exactly one response per non-blank line.
func FuzzServe(f *testing.F) {
	paths, _ := filepath.Glob("testdata/*.txtar")
	for _, path := range paths {
		if fx, err := parseFixture(path); err == nil {
			f.Add(fx.input())
		}
	}
	f.Add([]byte("{\"type\":\"get_state\"}\r\n\n  \n[1,2]\n\xff\xfe\n{\"id\":{},\"type\":1}"))
	cwd := f.TempDir()
	// export_html writes wherever it is told: not a thing to fuzz.
	exportHTML := commands["export_html"]
	delete(commands, "export_html")
	f.Cleanup(func() { commands["export_html"] = exportHTML })
	f.Setenv("PI_CODING_AGENT_DIR", f.TempDir())
	f.Fuzz(func(t *testing.T, input []byte) {
		cfg, _, _ := parseArgs([]string{"rpc", "--cwd", cwd, "--no-session"})
		var stdout bytes.Buffer
		s, _ := newServer(cfg, &stdout, io.Discard)
		s.command = func(string, ...string) *exec.Cmd { return exec.Command("/bin/true") }
		s.maxLineBytes = 1 << 10
		s.serve(bytes.NewReader(input), nil)
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
