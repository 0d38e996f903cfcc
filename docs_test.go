package main

// The documentation is checked like the code: every command and event is
// documented, every JSON example parses, and every example that says it
// is real output is what a fixture shows.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docFiles are the Markdown files a clone carries as its documentation.
func docFiles(t *testing.T) []string {
	paths, _ := filepath.Glob("docs/*.md")
	paths = append([]string{"README.md"}, paths...)
	if len(paths) < 2 {
		t.Fatal("no docs/*.md")
	}
	return paths
}

// TestEventsDocumented checks that get_capabilities' event list is exactly
// the set of events the fixtures show, and that docs/protocol.md
// describes each.
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
	protocol, err := os.ReadFile("docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range eventTypes {
		if !shown[name] {
			t.Errorf("event %s is listed in eventTypes but no fixture shows it", name)
		}
		if !bytes.Contains(protocol, []byte("`"+name+"`")) {
			t.Errorf("event %s is not in docs/protocol.md", name)
		}
		delete(shown, name)
	}
	for name := range shown {
		t.Errorf("fixtures show event %s, which eventTypes does not list", name)
	}
}

var recordType = regexp.MustCompile(`(?m)^\{"type":"([a-z_]+)"`)

// TestCommandsDocumented checks that every registered command has a fixture
// and is in docs/commands.md, which lists them all.
func TestCommandsDocumented(t *testing.T) {
	doc, err := os.ReadFile("docs/commands.md")
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
		if !bytes.Contains(doc, []byte("`"+name+"`")) {
			t.Errorf("command %s is not in docs/commands.md", name)
		}
	}
}

// TestDocLinks checks that every relative link in the documentation, and
// every document rpi's own texts name, is a file of the repository (a
// clone has nothing else).
func TestDocLinks(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#\s]*)(#[^)\s]*)?\)`)
	for _, path := range docFiles(t) {
		data, _ := os.ReadFile(path)
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if target == "" || strings.Contains(target, "://") {
				continue
			}
			target = filepath.Join(filepath.Dir(path), target)
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links to %s, which is not in the repository", path, target)
			}
		}
	}
	// rpi's own texts (--help, error messages) name documents too.
	sources, _ := filepath.Glob("*.go")
	for _, path := range sources {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		data, _ := os.ReadFile(path)
		for _, doc := range regexp.MustCompile(`docs/[\w-]+\.md`).FindAllString(string(data), -1) {
			if _, err := os.Stat(doc); err != nil {
				t.Errorf("%s names %s, which is not in the repository", path, doc)
			}
		}
	}
}

// ---- Examples ----

// block is a fenced code block of a Markdown file.
type block struct {
	lang    string // what follows the opening ```
	text    string
	line    int    // where its text starts
	fixture string // the fixture its marker names ("" when none)
}

// fixtureMarker, alone on the line before a block, says the block is real
// output: an exchange the named fixture produces.
var fixtureMarker = regexp.MustCompile(`^<!-- fixture: (testdata/[\w.-]+\.txtar) -->$`)

// fencedBlocks returns the fenced code blocks of a Markdown file.
func fencedBlocks(md []byte) []block {
	var blocks []block
	var cur *block
	var text strings.Builder
	prev := ""
	for i, line := range strings.Split(string(md), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &block{lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), line: i + 2}
			if m := fixtureMarker.FindStringSubmatch(prev); m != nil {
				cur.fixture = m[1]
			}
			text.Reset()
		case cur != nil && trimmed == "```":
			cur.text = text.String()
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			text.WriteString(line + "\n")
		}
		if trimmed != "" {
			prev = trimmed
		}
	}
	return blocks
}

// TestDocExamples checks the examples of README.md and docs/*.md: a
// ```json block is one JSON value; in a block without a language (or
// ```jsonl) every line that starts with "{" is one JSON object. Blocks
// of any other language (```text for sketches with "…") are not checked.
// A block right after <!-- fixture: testdata/NAME.txtar --> must be real:
// after the fixtures' normalisation, its requests are lines of that
// fixture's input, in order, and the lines rpi wrote between two requests
// are consecutive lines of its output (or of the session file it wrote),
// in order.
func TestDocExamples(t *testing.T) {
	marked := 0
	for _, path := range docFiles(t) {
		data, _ := os.ReadFile(path)
		for _, b := range fencedBlocks(data) {
			where := fmt.Sprintf("%s:%d", path, b.line)
			switch b.lang {
			case "json":
				if !json.Valid([]byte(b.text)) {
					t.Errorf("%s: the json block is not valid JSON", where)
				}
			case "", "jsonl":
				for i, line := range strings.Split(b.text, "\n") {
					var obj map[string]any
					if strings.HasPrefix(line, "{") && (json.Unmarshal([]byte(line), &obj) != nil || obj == nil) {
						t.Errorf("%s:%d: not one JSON object: %.120s", path, b.line+i, line)
					}
				}
			}
			if b.fixture != "" {
				marked++
				checkRealExample(t, where, b)
			}
		}
	}
	if marked == 0 {
		t.Error("no example is marked as a fixture's real output")
	}
}

// docLiterals are the stand-ins examples use for the values a fixture
// run replaces: the working directory, the agent directory and HOME, and
// a local model server.
var docLiterals = map[string]string{
	"/home/me/project":      "$CWD",
	"home-me-project":       "$CWD_NAME",
	"/home/me/.pi/agent":    "$AGENT_DIR",
	"/home/me":              "$HOME",
	"http://localhost:8080": "$MODEL_URL",
}

// anyNumber turns numbered placeholders ($UUID3) into plain ones ($UUID):
// an example need not number them as the whole fixture does.
var anyNumber = regexp.MustCompile(`\$(UUID|ENTRY|PID|LOOP|N)\d+`)

func checkRealExample(t *testing.T, where string, b block) {
	f, err := parseFixture(b.fixture)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	plain := func(s string) string {
		s = strings.ReplaceAll(s, "$DIALOG_ID", "$UUID")
		return anyNumber.ReplaceAllString(s, "$$$1")
	}
	norm := normalizer{literal: docLiterals}
	var inputs []string
	for _, line := range strings.Split(f.sections["input.jsonl"], "\n") {
		if strings.HasPrefix(line, "{") {
			inputs = append(inputs, plain(strings.TrimSuffix(norm.apply([]byte(line+"\n")), "\n")))
		}
	}
	// What rpi wrote: its output, then the session file (when the
	// fixture shows it), apart so that no run of lines spans both.
	want := strings.Split(plain(f.sections["want.jsonl"]+"\n"+f.sections["session.jsonl"]), "\n")
	var example []byte
	for _, line := range strings.Split(b.text, "\n") {
		if strings.HasPrefix(line, "{") {
			example = append(example, line+"\n"...)
		}
	}
	lines := strings.Split(strings.TrimSuffix(plain(norm.apply(example)), "\n"), "\n")
	in, out := 0, 0 // where the next request and the next output line are looked for
	run := false    // the previous line was output: the next must follow it
	for _, line := range lines {
		if i := slices.Index(inputs[in:], line); i >= 0 {
			in, run = in+i+1, false
			continue
		}
		if run {
			if out < len(want) && want[out] == line {
				out++
				continue
			}
		} else if i := slices.Index(want[out:], line); i >= 0 {
			out, run = out+i+1, true
			continue
		}
		t.Errorf("%s: not what %s shows at this point (normalised):\n%s", where, b.fixture, line)
		return
	}
}

// TestDefaultToolsDocumented checks that --help and the documents give
// the default tools as rpi has them.
func TestDefaultToolsDocumented(t *testing.T) {
	want := strings.Join(defaultTools, ",")
	if !strings.Contains(usageText, want) {
		t.Errorf("--help does not give the default tools %s", want)
	}
	for _, path := range []string{"docs/protocol.md", "docs/commands.md"} {
		if data, _ := os.ReadFile(path); !strings.Contains(string(data), want) {
			t.Errorf("%s does not give the default tools %s", path, want)
		}
	}
}

// TestPerformanceDocSources: every benchmark (in bench_test.go or
// bench_big_test.go) and script docs/performance.md quotes a figure from
// exists, so each figure has a command behind it.
func TestPerformanceDocSources(t *testing.T) {
	doc, err := os.ReadFile("docs/performance.md")
	if err != nil {
		t.Fatal(err)
	}
	var bench []byte
	files, _ := filepath.Glob("bench*_test.go")
	for _, file := range files {
		data, _ := os.ReadFile(file)
		bench = append(bench, data...)
	}
	names := regexp.MustCompile(`Benchmark[A-Za-z]+`).FindAllString(string(doc), -1)
	if len(names) == 0 {
		t.Fatal("docs/performance.md names no benchmark")
	}
	for _, name := range names {
		if !strings.Contains(string(bench), "func "+name+"(") {
			t.Errorf("docs/performance.md quotes %s, which no bench*_test.go has", name)
		}
	}
	for _, script := range regexp.MustCompile(`scripts/[a-z-]+\.sh`).FindAllString(string(doc), -1) {
		if _, err := os.Stat(script); err != nil {
			t.Errorf("docs/performance.md names %s: %v", script, err)
		}
	}
}
