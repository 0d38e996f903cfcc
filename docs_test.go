package main

// The documentation is checked like the code: every command and event is
// documented, every JSON example parses, and every example that says it
// is real output is what a fixture shows.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// docFiles are the Markdown files a clone carries as its documentation.
func docFiles(t *testing.T) []string {
	paths, _ := filepath.Glob("docs/*.md")
	paths = append([]string{"README.md", "CHANGELOG.md"}, paths...)
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
	for name := range rpcCommands() {
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
// cloneCommand has nothing else).
func TestDocLinks(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#\s]*)(#[^)\s]*)?\)`)
	for _, path := range docFiles(t) {
		data, _ := os.ReadFile(path)
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target, anchor := m[1], strings.TrimPrefix(m[2], "#")
			if strings.Contains(target, "://") {
				continue
			}
			if target == "" {
				target = path // a heading of this document
			} else {
				target = filepath.Join(filepath.Dir(path), target)
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links to %s, which is not in the repository", path, target)
			} else if anchor != "" && strings.HasSuffix(target, ".md") && !markdownAnchors(t, target)[anchor] {
				t.Errorf("%s links to %s#%s, a heading that document lacks", path, target, anchor)
			}
		}
	}
	// rpi's own texts (--help, error messages, comments) name documents,
	// and headings of them, too.
	sources, _ := filepath.Glob("*.go")
	for _, path := range sources {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		data, _ := os.ReadFile(path)
		for _, m := range regexp.MustCompile(`(docs/[\w-]+\.md)(?:#([\w-]+))?`).FindAllStringSubmatch(string(data), -1) {
			if _, err := os.Stat(m[1]); err != nil {
				t.Errorf("%s names %s, which is not in the repository", path, m[1])
			} else if m[2] != "" && !markdownAnchors(t, m[1])[m[2]] {
				t.Errorf("%s names %s#%s, a heading that document lacks", path, m[1], m[2])
			}
		}
	}
}

// markdownAnchors are the anchors of a Markdown document's headings, as
// GitHub makes them: lower case, each space a "-", punctuation but "-"
// and "_" dropped, and "-1", "-2", … after a heading's repeats.
func markdownAnchors(t *testing.T, path string) map[string]bool {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		heading, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if fenced || !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		anchor := strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, strings.TrimSpace(heading))
		name := anchor
		for n := 1; anchors[name]; n++ {
			name = fmt.Sprintf("%s-%d", anchor, n)
		}
		anchors[name] = true
	}
	return anchors
}

// ---- Examples ----

// block is a fenced code block of a Markdown file.
type block struct {
	lang    string // what follows the opening ```
	text    string
	line    int    // where its text starts
	fixture string // the fixture its marker names ("" when none)
	client  string // for an rpi serve fixture: the client whose view the block shows
}

// fixtureMarker, alone on the line before a block, says the block is real
// output: an exchange the named fixture produces.
var fixtureMarker = regexp.MustCompile(`^<!-- fixture: (testdata/(?:acp/|serve/)?[\w.-]+\.txtar)(?: client (\w+))? -->$`)

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
				cur.fixture, cur.client = m[1], m[2]
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
					checkTimes(t, fmt.Sprintf("%s:%d", path, b.line+i), line)
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

// msField is a field of milliseconds in a JSON line: a duration or a time.
var msField = regexp.MustCompile(`"(durationMs|delayMs|timestamp|startedAtMs|exitedAtMs)":(\d+)`)

// checkTimes checks that an example's durations look like durations and
// its times like times: the fixtures' normalisation takes any number for
// both, so a timestamp pasted as a duration would pass unnoticed.
func checkTimes(t *testing.T, where, line string) {
	for _, m := range msField.FindAllStringSubmatch(line, -1) {
		n, _ := strconv.ParseInt(m[2], 10, 64)
		isTime := n >= 1e12 // after 2001
		if wantTime := !strings.HasSuffix(m[1], "durationMs") && m[1] != "delayMs"; isTime != wantTime {
			t.Errorf("%s: %s is %s, which is not a %s", where, m[1], m[2], map[bool]string{true: "time in ms", false: "duration"}[wantTime])
		}
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
var anyNumber = regexp.MustCompile(`\$(UUID|ENTRY|PID|LOOP|N|S|SECTIONS|TOOLS)\d+`)

// shortSystem is how an example shortens a system message's sections and
// tools ({"…":"…"} and [{"…":"…"}]), which a fixture shows as $SECTIONS
// and $TOOLS.
var shortSystem = strings.NewReplacer(`"sections":{"…":"…"}`, `"sections":$SECTIONS`, `"toolsAdded":[{"…":"…"}]`, `"toolsAdded":$TOOLS`)

func checkRealExample(t *testing.T, where string, b block) {
	f, err := parseFixture(b.fixture)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	plain := func(s string) string {
		s = strings.ReplaceAll(s, "$DIALOG_ID", "$UUID")
		s = seqPattern.ReplaceAllStringFunc(s, func(m string) string { // rpi serve's numbers, as an example shows them
			if strings.HasSuffix(m, ":0") {
				return m
			}
			return m[:strings.Index(m, ":")+1] + "$S"
		})
		return anyNumber.ReplaceAllString(shortSystem.Replace(s), "$$$1")
	}
	norm := normalizer{literal: docLiterals}
	var inputs []string
	input, output := f.sections["input.jsonl"], f.sections["want.jsonl"]
	if b.client != "" { // an rpi serve fixture, as one of its clients sees it
		input, output = "", f.sections[b.client+".want.jsonl"]
		for _, line := range strings.Split(f.sections["script"], "\n") {
			if sent, ok := strings.CutPrefix(line, b.client+": "); ok {
				input += sent + "\n"
			}
		}
	}
	for _, line := range strings.Split(input, "\n") {
		if strings.HasPrefix(line, "{") {
			inputs = append(inputs, plain(strings.TrimSuffix(norm.apply([]byte(line+"\n")), "\n")))
		}
	}
	// What rpi wrote: its output, then the session file (when the
	// fixture shows it), apart so that no run of lines spans both.
	want := strings.Split(plain(output+"\n"+f.sections["session.jsonl"]), "\n")
	var example []byte
	for _, line := range strings.Split(b.text, "\n") {
		if strings.HasPrefix(line, "{") {
			example = append(example, line+"\n"...)
		}
	}
	lines := strings.Split(strings.TrimSuffix(plain(norm.apply(example)), "\n"), "\n")
	checkAnswersPaired(t, where, lines, inputs, want)
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

// checkAnswersPaired checks that each request an example shows is
// followed by its answer, when the fixture has one: an example shows a
// request with what it gets. (An answer may be shown alone: the answer to
// a bash that abort_bash cancelled, say.)
func checkAnswersPaired(t *testing.T, where string, lines, inputs, want []string) {
	type envelope struct {
		ID      json.RawMessage `json:"id"`
		Type    string          `json:"type"`
		JSONRPC string          `json:"jsonrpc"`
		Method  string          `json:"method"`
	}
	// An answer is rpc's response, or (ACP) a JSON-RPC message with an id
	// and no method.
	idOf := func(line string) (id string, answer bool) {
		var e envelope
		json.Unmarshal([]byte(line), &e)
		return string(e.ID), e.Type == "response" || e.JSONRPC != "" && e.Method == "" && e.ID != nil
	}
	answered := map[string]bool{} // ids the fixture's output answers
	for _, line := range want {
		if id, answer := idOf(line); answer && id != "" {
			answered[id] = true
		}
	}
	asked := map[string]bool{} // ids of the requests shown so far, not yet answered
	for _, line := range lines {
		id, answer := idOf(line)
		switch input := slices.Contains(inputs, line); {
		case input && !answer && id != "" && answered[id]:
			asked[id] = true
		case !input && answer:
			delete(asked, id)
		}
	}
	for id := range asked {
		t.Errorf("%s: the request with id %s is shown without its answer", where, id)
	}
}

// TestDefaultToolsDocumented checks that --help and the documents give
// the default tools as rpi has them.
func TestDefaultToolsDocumented(t *testing.T) {
	want := strings.Join(defaultTools, ",")
	if !strings.Contains(usageText(), want) {
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

// parserFlags are the flags rpi accepts, read from the source of
// flagTarget, which parseFlags asks where a flag's value goes: the
// names its switch's cases list.
func parserFlags(t testing.TB) []string {
	for path, file := range codeFiles(t) {
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Name.Name != "flagTarget" {
				continue
			}
			var names []string
			ast.Inspect(fn, func(n ast.Node) bool {
				if c, ok := n.(*ast.CaseClause); ok {
					for _, e := range c.List {
						if s, ok := e.(*ast.BasicLit); ok && s.Kind == token.STRING {
							names = append(names, strings.Trim(s.Value, `"`))
						}
					}
				}
				return true
			})
			if len(names) < 10 {
				t.Fatalf("found only %d flags in flagTarget (%s)", len(names), path)
			}
			return names
		}
	}
	t.Fatal("no func flagTarget")
	return nil
}

// helpFlag is a flag as --help writes it: -t, -nc, --thinking.
var helpFlag = regexp.MustCompile(`(?:^|[\s,/(])(--?[a-z][a-z-]*)`)

// TestHelpListsEveryFlag checks --help against the parser both ways:
// every flag rpi accepts is in --help, each written as --help writes
// short and long names (one dash for one or two letters, and pi's -nbt;
// two for more),
// and every flag --help names is one rpi accepts; and docs/protocol.md
// names each.
func TestHelpListsEveryFlag(t *testing.T) {
	accepted := map[string]bool{}
	for _, name := range parserFlags(t) {
		flag := "--" + name
		if len(name) <= 2 || name == "nbt" { // pi's -nbt: a short name of three letters
			flag = "-" + name
		}
		accepted[flag] = true
	}
	inHelp := map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(usageText(), -1) {
		inHelp[m[1]] = true
	}
	protocol, err := os.ReadFile("docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for flag := range accepted {
		if !inHelp[flag] {
			t.Errorf("rpi accepts %s, which --help does not list", flag)
		}
		if !regexp.MustCompile(`(^|[^\w-])` + flag + `([^\w-]|$)`).Match(protocol) {
			t.Errorf("rpi accepts %s, which docs/protocol.md does not name", flag)
		}
	}
	for flag := range inHelp {
		if !accepted[flag] {
			t.Errorf("--help lists %s, which rpi does not accept", flag)
		}
	}
}

// TestHelpNamesDocsThatExist: --help points at the documentation by its
// paths in the repository (README.md, docs/…), so each must be there.
func TestHelpNamesDocsThatExist(t *testing.T) {
	named := regexp.MustCompile(`\b(?:docs/[\w-]+\.md|README\.md)\b`).FindAllString(usageText(), -1)
	if len(named) < 3 {
		t.Fatalf("--help names only %v of the documentation", named)
	}
	for _, path := range named {
		if _, err := os.Stat(path); err != nil {
			t.Errorf("--help names %s: %v", path, err)
		}
	}
}

// TestVersionDocumented: the lines docs/protocol.md shows for --version
// are versionLine's for the build information they stand for, with
// rpi's version.
func TestVersionDocumented(t *testing.T) {
	protocol, _ := os.ReadFile("docs/protocol.md")
	commit := regexp.MustCompile("`(rpi [^ `]+ \\(commit ([0-9a-f]+), ([^,)]+)\\))`").FindSubmatch(protocol)
	devel := regexp.MustCompile("`(rpi [^ `]+ \\(devel\\))`").FindSubmatch(protocol)
	if commit == nil || devel == nil {
		t.Fatal("docs/protocol.md shows no --version line with a commit, or none for devel")
	}
	info := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: string(commit[2]) + "0123456789abcdef"},
		{Key: "vcs.time", Value: string(commit[3])}, {Key: "vcs.modified", Value: "false"}}}
	if want := versionLine(info); string(commit[1]) != want {
		t.Errorf("docs/protocol.md shows %s; --version prints %s", commit[1], want)
	}
	if want := versionLine(nil); string(devel[1]) != want {
		t.Errorf("docs/protocol.md shows %s; --version prints %s", devel[1], want)
	}
}

// TestHelpNamesTheSystemsVariables: --help on Windows names the
// variables Windows has (USERPROFILE, TMP and TEMP), and on Unix HOME and
// TMPDIR, each where it gives the agent folder's default.
func TestHelpNamesTheSystemsVariables(t *testing.T) {
	for goos, want := range map[string][]string{
		"linux":   {"HOME", "TMPDIR", "(default ~/.pi/agent)"},
		"windows": {"USERPROFILE", "TMP, TEMP", `(default %USERPROFILE%\.pi\agent)`, "Git for Windows' bash.exe"},
	} {
		help := helpText(goos)
		for _, w := range want {
			if !strings.Contains(help, w) {
				t.Errorf("--help on %s does not name %s", goos, w)
			}
		}
		if unwanted := map[string]string{"linux": "USERPROFILE", "windows": "TMPDIR"}[goos]; strings.Contains(help, unwanted) {
			t.Errorf("--help on %s names %s", goos, unwanted)
		}
		if m := regexp.MustCompile(`\{(agentDir|home|temp|bash)\}`).FindString(help); m != "" {
			t.Errorf("--help on %s has the placeholder %s left", goos, m)
		}
	}
}

// TestHelpListsEveryVariable checks that every environment variable rpi
// reads by name is in --help (Windows' --help for a _windows.go file) and
// in docs/protocol.md (the provider keys are listed in docs/models.md;
// RPI_WATCHDOG is rpi talking to itself).
func TestHelpListsEveryVariable(t *testing.T) {
	sources, _ := filepath.Glob("*.go")
	read := regexp.MustCompile(`(?:getenv|Getenv|LookupEnv)\("([A-Z_]+)"\)|\w+Var\s*=\s*"([A-Z_]+)"`)
	protocol, _ := os.ReadFile("docs/protocol.md")
	found := 0
	for _, path := range sources {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		data, _ := os.ReadFile(path)
		if bytes.HasPrefix(data, []byte("//go:build race\n")) {
			continue // the race build's own (docs/architecture.md), not the binary's
		}
		for _, m := range read.FindAllStringSubmatch(string(data), -1) {
			name := m[1] + m[2]
			found++
			help := helpText("linux")
			if strings.HasSuffix(path, "_windows.go") {
				help = helpText("windows")
			}
			if !strings.Contains(help, name) {
				t.Errorf("%s reads %s, which --help does not name", path, name)
			}
			if !strings.Contains(string(protocol), "`"+name) {
				t.Errorf("%s reads %s, which docs/protocol.md does not name", path, name)
			}
		}
	}
	if found < 4 {
		t.Errorf("found only %d variables read by name", found)
	}
}

// TestPiShapesDocumented checks that docs/pi-compat.md's "pi-compatible
// mode" section names every event and command whose shape differs in
// that mode beyond the flat envelope: the events emitted with a pi shape
// of their own (emit's third argument), and the commands whose handler,
// or a function it calls, answers a piOnly.
func TestPiShapesDocumented(t *testing.T) {
	doc, err := os.ReadFile("docs/pi-compat.md")
	if err != nil {
		t.Fatal(err)
	}
	section, _, _ := strings.Cut(string(doc)[strings.Index(string(doc), "## pi-compatible mode"):], "\n## pi's flags")
	sources, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	bodies := map[string]string{} // function name → its source
	files := map[string]*ast.File{}
	var shaped []string // events with a pi shape of their own
	for _, path := range sources {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, _ := os.ReadFile(path)
		file, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
				bodies[fn.Name.Name] = string(src[fset.Position(fn.Body.Pos()).Offset:fset.Position(fn.Body.End()).Offset])
			}
		}
		files[path] = file
	}
	// The payloads the two wires render apart: the types their appendEvent
	// switches on.
	reshaped := map[string]bool{}
	for _, path := range []string{"protocol.go", "rpc_pi.go"} {
		ast.Inspect(files[path], func(n ast.Node) bool {
			if fn, ok := n.(*ast.FuncDecl); ok && fn.Name.Name != "appendEvent" {
				return false
			}
			switch n := n.(type) {
			case *ast.CaseClause:
				for _, e := range n.List {
					if id, ok := e.(*ast.Ident); ok {
						reshaped[id.Name] = true
					}
				}
			case *ast.TypeAssertExpr:
				if id, ok := n.Type.(*ast.Ident); ok {
					reshaped[id.Name] = true
				}
			}
			return true
		})
	}
	// The events posted with such a payload.
	for _, file := range files {
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			if sel, isSel := call.Fun.(*ast.SelectorExpr); !isSel || sel.Sel.Name != "emit" && sel.Sel.Name != "postEvent" {
				return true
			}
			name, isLit := call.Args[0].(*ast.BasicLit)
			if lit, isComposite := call.Args[1].(*ast.CompositeLit); isLit && isComposite {
				if id, ok := lit.Type.(*ast.Ident); ok && reshaped[id.Name] {
					shaped = append(shaped, strings.Trim(name.Value, `"`))
				}
			}
			return true
		})
	}
	answersPiOnly := func(body string) bool { return strings.Contains(body, "piOnly{") }
	for name, h := range rpcCommands() {
		fn := runtime.FuncForPC(reflect.ValueOf(h).Pointer()).Name() // main.(*rpcServer).bashCommand-fm or main.(*rpcServer).bashCommand
		fn = strings.TrimSuffix(fn[strings.LastIndex(fn, ".")+1:], "-fm")
		body := bodies[fn]
		shapedHere := answersPiOnly(body)
		for callee, calleeBody := range bodies {
			if answersPiOnly(calleeBody) && strings.Contains(body, "."+callee+"(") {
				shapedHere = true
			}
		}
		if shapedHere {
			shaped = append(shaped, name)
		}
	}
	if len(shaped) < 6 {
		t.Fatalf("found only %v with a shape of their own in pi's mode", shaped)
	}
	for _, name := range shaped {
		if !strings.Contains(section, "`"+name+"`") {
			t.Errorf("%s has a shape of its own in pi's mode, which docs/pi-compat.md's pi-compatible mode section does not name", name)
		}
	}
}

// TestArchitectureListsEveryFile checks docs/architecture.md's file table
// against the repository: every non-test .go file has a row (its name in
// the first column), and every file a row names exists.
func TestArchitectureListsEveryFile(t *testing.T) {
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "| `") {
			continue
		}
		for _, m := range regexp.MustCompile("`([\\w.]+\\.go)`").FindAllStringSubmatch(cells[1], -1) {
			listed[m[1]] = true
		}
	}
	sources, _ := filepath.Glob("*.go")
	for _, path := range sources {
		if !strings.HasSuffix(path, "_test.go") && !listed[path] {
			t.Errorf("%s has no row in docs/architecture.md's file table", path)
		}
	}
	for name := range listed {
		if _, err := os.Stat(name); err != nil {
			t.Errorf("docs/architecture.md's file table lists %s, which is not in the repository", name)
		}
	}
}

// codeFiles are rpi's non-test Go files, parsed, by path.
func codeFiles(t testing.TB) map[string]*ast.File {
	t.Helper()
	sources, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for _, path := range sources {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[path] = file
	}
	return files
}

// TestFilesReadable: no file of rpi's code is longer than 1,200 lines;
// one that grows past that is split by job (docs/architecture.md).
func TestFilesReadable(t *testing.T) {
	sources, _ := filepath.Glob("*.go")
	for _, path := range sources {
		data, _ := os.ReadFile(path)
		if n := bytes.Count(data, []byte("\n")); !strings.HasSuffix(path, "_test.go") && n > 1200 {
			t.Errorf("%s has %d lines: split it by job", path, n)
		}
	}
}

// TestNoFmtBeforeMain: no package variable of rpi's is made with fmt
// (fmt.Errorf, fmt.Sprintf, …): they are made before main, on the way to
// the first line, and fmt's first use is slow.
// Calls inside a function literal, made later, are fine.
func TestNoFmtBeforeMain(t *testing.T) {
	for path, file := range codeFiles(t) {
		for _, decl := range file.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.VAR {
				continue
			}
			for _, spec := range gen.Specs {
				for _, value := range spec.(*ast.ValueSpec).Values {
					ast.Inspect(value, func(n ast.Node) bool {
						if _, ok := n.(*ast.FuncLit); ok {
							return false
						}
						if sel, ok := n.(*ast.SelectorExpr); ok {
							if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "fmt" {
								t.Errorf("%s: a package variable made with fmt.%s", path, sel.Sel.Name)
							}
						}
						return true
					})
				}
			}
		}
	}
}

// TestNothingMadeBeforeMain: rpi's own package init allocates nothing, so
// that it does not delay the first line. Its package variables are data
// the compiler lays out: no map literal, no sync.OnceValue, no string
// built from a number, no closure over a variable (lazy, in lazy.go, is
// how to make a value at its first use instead). The test builds rpi as
// a user does and reads Go's trace of package init (GODEBUG=inittrace=1)
// for --version: a package with nothing to run at init has no line, and
// one that has may take no allocation. (The test binary would not do: its
// rpi package holds the tests' variables too.)
func TestNothingMadeBeforeMain(t *testing.T) {
	endToEnd(t)
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "rpi")
	build := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := exec.Command(bin, "--version")
	run.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("rpi --version: %v\n%s", err, out)
	}
	// init main @0.9 ms, 0.002 ms clock, 0 bytes, 0 allocs
	line := regexp.MustCompile(`(?m)^init (\S+) @.*, (\d+) bytes, (\d+) allocs$`)
	traced := line.FindAllStringSubmatch(string(out), -1)
	if len(traced) == 0 {
		t.Fatalf("rpi --version with GODEBUG=inittrace=1 traced no package's init:\n%s", out)
	}
	for _, m := range traced {
		if m[1] == "main" && (m[2] != "0" || m[3] != "0") {
			t.Errorf("rpi's package init allocates before main (%s bytes, %s allocs): a package variable is built at init, "+
				"not laid out as data (go tool objdump -s '^main\\.init$' shows which)", m[2], m[3])
		}
	}
}

// TestArchitectureListsEveryLock checks that docs/architecture.md's lock
// table lists lockOrder's locks in its order, that each mutex[N] field
// (as type.field) is the lock N names and is in lockOrder, and that no
// struct holds a plain sync.Mutex.
func TestArchitectureListsEveryLock(t *testing.T) {
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)[strings.Index(string(doc), "## Locks and their order"):]
	section = section[:strings.Index(section[1:], "\n## ")+1]
	name := regexp.MustCompile("`(\\w+\\.\\w+)`")
	var listed []string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "| `") {
			listed = append(listed, name.FindStringSubmatch(line)[1])
		}
	}
	var order []string
	for _, l := range lockOrder {
		order = append(order, l.name)
	}
	if !slices.Equal(listed, order) {
		t.Errorf("docs/architecture.md's lock table, top to bottom:\n%v\nlockOrder in lockorder.go:\n%v", listed, order)
	}
	// Each mutex[N] field of a struct S is the lock N names: "S.field".
	names := map[string]string{} // name type → the lock it names
	found := map[string]bool{}
	for _, file := range codeFiles(t) {
		ast.Inspect(file, func(n ast.Node) bool {
			if fn, ok := n.(*ast.FuncDecl); ok && fn.Name.Name == "lockName" && fn.Recv != nil {
				ret := fn.Body.List[0].(*ast.ReturnStmt).Results[0].(*ast.BasicLit)
				names[fn.Recv.List[0].Type.(*ast.Ident).Name], _ = strconv.Unquote(ret.Value)
			}
			return true
		})
	}
	for _, file := range codeFiles(t) {
		ast.Inspect(file, func(n ast.Node) bool {
			spec, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := spec.Type.(*ast.StructType)
			if !ok {
				return true
			}
			for _, field := range st.Fields.List {
				if sel, ok := field.Type.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Mutex" || sel.Sel.Name == "RWMutex") && spec.Name.Name != "mutex" {
					t.Errorf("%s has a sync.%s: make it a mutex[…] of lockOrder", spec.Name.Name, sel.Sel.Name)
				}
				index, ok := field.Type.(*ast.IndexExpr)
				if !ok {
					continue
				}
				if x, isIdent := index.X.(*ast.Ident); !isIdent || x.Name != "mutex" {
					continue
				}
				for _, id := range field.Names {
					lock := spec.Name.Name + "." + id.Name
					found[lock] = true
					if got := names[index.Index.(*ast.Ident).Name]; got != lock {
						t.Errorf("%s is a mutex[%s], which names %q", lock, index.Index.(*ast.Ident).Name, got)
					}
				}
			}
			return true
		})
	}
	if len(found) < 10 {
		t.Fatalf("found only %v", found)
	}
	for _, lock := range order {
		if !found[lock] {
			t.Errorf("lockOrder has %s, which is no mutex of the code", lock)
		}
	}
}

// docCommands are the shell commands the documents give: each line of a
// fenced block without a language or marked sh/bash/shell, and each
// inline code span that starts with go, bash, ./rpi or a variable
// assignment followed by one of those. Spans may wrap across lines.
func docCommands(t *testing.T) map[string][]string {
	span := regexp.MustCompile("`([^`]+)`")
	typed := regexp.MustCompile(`^(?:[A-Z_]+=\S+ )*(?:go |bash |\./rpi\b)`)
	cmds := map[string][]string{} // document → commands
	for _, path := range append(docFiles(t), "testdata/README.md") {
		data, _ := os.ReadFile(path)
		for _, b := range fencedBlocks(data) {
			if b.lang == "" || b.lang == "sh" || b.lang == "bash" || b.lang == "shell" {
				for _, line := range strings.Split(b.text, "\n") {
					if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "{") {
						cmds[path] = append(cmds[path], line)
					}
				}
			}
		}
		prose := regexp.MustCompile("(?s)```.*?\n```").ReplaceAllString(string(data), "")
		for _, m := range span.FindAllStringSubmatch(prose, -1) {
			text := strings.Join(strings.Fields(m[1]), " ")
			if typed.MatchString(text) {
				cmds[path] = append(cmds[path], text)
			}
		}
	}
	return cmds
}

// TestDocCommands checks the commands the documents give, as typed: the
// -run and -bench patterns of go test match a test or benchmark that
// exists (a pattern matching nothing passes silently), the scripts they
// run exist, and rpi's flags are ones it accepts.
func TestDocCommands(t *testing.T) {
	var funcs []string
	sources, _ := filepath.Glob("*_test.go")
	for _, path := range sources {
		data, _ := os.ReadFile(path)
		for _, m := range regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz|Example)\w*)\(`).FindAllStringSubmatch(string(data), -1) {
			funcs = append(funcs, m[1])
		}
	}
	placeholder := regexp.MustCompile(`^[A-Z]+$|…|\[`)
	checked := 0
	for path, cmds := range docCommands(t) {
		for _, cmd := range cmds {
			cmd, _, _ := strings.Cut(cmd, " #") // a comment
			words := splitArgs(cmd)             // as sh splits it, for the quoting docs use
			for len(words) > 0 && regexp.MustCompile(`^[A-Z_]+=`).MatchString(words[0]) {
				words = words[1:]
			}
			if i := slices.IndexFunc(words, func(w string) bool { return w != "" && strings.ContainsAny(w[:1], "<>|&;") }); i >= 0 {
				words = words[:i] // the command ends at a redirection, a pipe or a list
			}
			if len(words) == 0 {
				continue
			}
			for i, w := range words {
				if strings.HasPrefix(w, "scripts/") {
					if _, err := os.Stat(w); err != nil {
						t.Errorf("%s: %q runs %s, which is not in the repository", path, cmd, w)
					}
				}
				if i+1 >= len(words) || words[0] != "go" || (w != "-run" && w != "-bench") {
					continue
				}
				pattern := words[i+1]
				top, _, _ := strings.Cut(pattern, "/")
				if pattern == "^$" || placeholder.MatchString(top) {
					continue
				}
				re, err := regexp.Compile(top)
				if err != nil {
					t.Errorf("%s: %q: %s %s is no regexp: %v", path, cmd, w, pattern, err)
					continue
				}
				checked++
				matched := false
				for _, f := range funcs {
					if strings.HasPrefix(f, "Benchmark") == (w == "-bench") && re.MatchString(f) {
						matched = true
					}
				}
				if !matched {
					t.Errorf("%s: %q: %s %s matches nothing in the tests", path, cmd, w, pattern)
				}
			}
			if words[0] == "./rpi" && len(words) > 1 && !slices.ContainsFunc(words, placeholder.MatchString) {
				checked++
				if _, _, err := parseArgs(words[1:], newTestEnv(t).env()); err != nil {
					t.Errorf("%s: %q: %v", path, cmd, err)
				}
			}
		}
	}
	if checked < 5 {
		t.Errorf("checked only %d commands", checked)
	}
}

// TestDocConfigFiles checks the configuration files the documents show,
// which a reader pastes whole: a ```json block with "providers" is a
// models.json that loads without a warning and gives a usable model of
// its own; a provider's block alone is not shown as a file; and one with
// settings.json's keys holds only keys rpi reads.
func TestDocConfigFiles(t *testing.T) {
	models, settingsFiles := 0, 0
	for _, path := range docFiles(t) {
		data, _ := os.ReadFile(path)
		for _, b := range fencedBlocks(data) {
			var top map[string]json.RawMessage
			if b.lang != "json" || json.Unmarshal([]byte(b.text), &top) != nil {
				continue
			}
			where := fmt.Sprintf("%s:%d", path, b.line)
			switch {
			case top["providers"] != nil:
				models++
				dir := t.TempDir()
				os.WriteFile(filepath.Join(dir, "models.json"), []byte(b.text), 0o600)
				setup, err := loadModels(dir, "", "", func(string) string { return "" })
				if err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
				if len(setup.warnings) > 0 {
					t.Errorf("%s: warnings: %q", where, setup.warnings)
				}
				if m := setup.catalog.all()[0]; !m.usable() || m.builtin {
					t.Errorf("%s: gives no usable model of its own", where)
				}
			case top["models"] != nil:
				t.Errorf("%s: one provider's block, which pasted as a models.json is refused: show the whole file", where)
			case top["defaultProvider"] != nil || top["retry"] != nil || top["compaction"] != nil:
				settingsFiles++
				dec := json.NewDecoder(strings.NewReader(b.text))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&settingsFile{}); err != nil {
					t.Errorf("%s: not what rpi reads of settings.json: %v", where, err)
				}
			}
		}
	}
	if models < 2 || settingsFiles < 1 {
		t.Errorf("found %d models.json and %d settings.json files in the documents", models, settingsFiles)
	}
}

// TestSettingsDocumented checks that docs/settings.md names every key rpi
// reads from settings.json (settingsFile's fields, nested ones dotted).
func TestSettingsDocumented(t *testing.T) {
	doc, err := os.ReadFile("docs/settings.md")
	if err != nil {
		t.Fatal(err)
	}
	var keys func(prefix string, typ reflect.Type) []string
	keys = func(prefix string, typ reflect.Type) []string {
		var out []string
		for f := range typ.Fields() {
			name := prefix + strings.Split(f.Tag.Get("json"), ",")[0]
			// A struct that decodes itself (skills) is one key.
			if f.Type.Kind() == reflect.Struct && !reflect.PointerTo(f.Type).Implements(reflect.TypeFor[json.Unmarshaler]()) {
				out = append(out, keys(name+".", f.Type)...)
			} else {
				out = append(out, name)
			}
		}
		return out
	}
	all := keys("", reflect.TypeFor[settingsFile]())
	if len(all) < 5 {
		t.Fatalf("settingsFile has only %v", all)
	}
	for _, key := range all {
		if !strings.Contains(string(doc), "`"+key+"`") {
			t.Errorf("rpi reads %s from settings.json, which docs/settings.md does not name", key)
		}
	}
}

// frontEndFile reports whether path is a front end's (rpc's, pi's shapes,
// ACP's) or main.go, which chooses one: the files the core never names.
func frontEndFile(path string) bool {
	return strings.HasPrefix(path, "rpc") || strings.HasPrefix(path, "acp") || strings.HasPrefix(path, "serve") || path == "commands.go" || path == "main.go"
}

// TestCoreNamesNoFrontEnd: no core file uses a name that a front end's
// file defines at its top level (a function, type, variable or
// constant): the core speaks no wire, and a front end is a layer over it
// (docs/architecture.md).
func TestCoreNamesNoFrontEnd(t *testing.T) {
	files := codeFiles(t)
	frontEnd := map[string]string{} // top-level name → the front end's file that defines it
	for path, file := range files {
		if !frontEndFile(path) {
			continue
		}
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					frontEnd[d.Name.Name] = path
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						frontEnd[s.Name.Name] = path
					case *ast.ValueSpec:
						for _, n := range s.Names {
							frontEnd[n.Name] = path
						}
					}
				}
			}
		}
	}
	var found []string
	for path, file := range files {
		if frontEndFile(path) {
			continue
		}
		keys := map[*ast.Ident]bool{} // a composite literal's field names are no uses
		ast.Inspect(file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.CompositeLit); ok {
				for _, e := range lit.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						if id, ok := kv.Key.(*ast.Ident); ok {
							keys[id] = true
						}
					}
				}
			}
			return true
		})
		seen := map[string]bool{}
		for _, id := range file.Unresolved { // names not declared in the file itself
			if from := frontEnd[id.Name]; from != "" && !keys[id] && !seen[id.Name] {
				seen[id.Name] = true
				found = append(found, fmt.Sprintf("%s uses %s (%s)", path, id.Name, from))
			}
		}
	}
	slices.Sort(found)
	for _, f := range found {
		t.Error(f)
	}
}

// TestNoContractSections: the code, docs, fixtures and scripts point at
// docs/ for what the protocol says, never at a section of a document that
// is not in the repository, nor at that document (a SPEC) at all.
func TestNoContractSections(t *testing.T) {
	paths, _ := filepath.Glob("*.go")
	for _, pattern := range []string{"*.md", "*.conf", "docs/*.md", "testdata/*.md", "testdata/*.txtar", "testdata/*/*.txtar", "scripts/*"} {
		more, _ := filepath.Glob(pattern)
		paths = append(paths, more...)
	}
	spec := regexp.MustCompile(`\bSPEC\b`)
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if path == "docs_test.go" {
			continue
		}
		for i, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "§") {
				t.Errorf("%s:%d cites a section: %s", path, i+1, strings.TrimSpace(line))
			}
			if spec.MatchString(line) {
				t.Errorf("%s:%d names a document that is not in the repository: %s", path, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// TestModelsFlagDocumented: the documents that say which model --models
// starts with say what rpi does (start_model_scope.txtar and
// start_model_scope_default.txtar show it): the scope in the order of the
// patterns, settings.json's default when the scope holds it, else the
// scope's first.
func TestModelsFlagDocumented(t *testing.T) {
	for _, path := range []string{"docs/protocol.md", "docs/pi-compat.md", "docs/models.md"} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(string(data)), " ")
		for _, want := range []string{"order of the patterns", "default when the scope holds it", "scope's first"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s does not say of --models: %q", path, want)
			}
		}
		if strings.Contains(text, "the first is the starting model") {
			t.Errorf("%s says --models' first pattern is the starting model, which it is only when settings.json's default is out of scope", path)
		}
	}
}

// TestStaticBuilds: every command the documents and scripts give that
// builds rpi (go build, go install) sets CGO_ENABLED=0, so that what it
// builds is the static binary the documents speak of, also where a C
// compiler is installed (Go then links the C library dynamically).
func TestStaticBuilds(t *testing.T) {
	builds := 0
	check := func(where, cmd string) {
		words := strings.Fields(cmd)
		env := []string{}
		for len(words) > 0 && strings.Contains(words[0], "=") {
			env, words = append(env, words[0]), words[1:]
		}
		if len(words) < 2 || words[0] != "go" || (words[1] != "build" && words[1] != "install") {
			return
		}
		builds++
		if !slices.Contains(env, "CGO_ENABLED=0") {
			t.Errorf("%s: %q builds rpi without CGO_ENABLED=0", where, cmd)
		}
	}
	for path, cmds := range docCommands(t) {
		for _, cmd := range cmds {
			check(path, cmd)
		}
	}
	scripts, _ := filepath.Glob("scripts/*.sh")
	for _, path := range scripts {
		data, _ := os.ReadFile(path)
		for i, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "#") {
				continue
			}
			// the command after a "(cd DIR &&" or "if !" that starts it
			for _, cmd := range regexp.MustCompile(`(?:^|&&|\(|!)\s*((?:[A-Z_]+=\S+\s+)*go\s+\S+)`).FindAllStringSubmatch(line, -1) {
				check(fmt.Sprintf("%s:%d", path, i+1), cmd[1])
			}
		}
	}
	if builds < 4 {
		t.Errorf("found only %d build commands", builds)
	}
}

// TestZedSnippets: each of the documents' Zed settings (a json block with
// agent_servers that the line before it says is Zed's) is in Zed's
// current form, every entry with "type": "custom".
func TestZedSnippets(t *testing.T) {
	found := 0
	for _, path := range docFiles(t) {
		data, _ := os.ReadFile(path)
		lines := strings.Split(string(data), "\n")
		for _, b := range fencedBlocks(data) {
			if b.lang != "json" || !strings.Contains(b.text, "agent_servers") {
				continue
			}
			before := ""
			for i := b.line - 3; i >= 0 && before == ""; i-- { // the last line of prose before the block
				before = strings.TrimSpace(lines[i])
			}
			if !strings.Contains(before, "Zed") {
				continue
			}
			found++
			var settings struct {
				AgentServers map[string]map[string]any `json:"agent_servers"`
			}
			if err := json.Unmarshal([]byte(b.text), &settings); err != nil {
				t.Errorf("%s:%d: %v", path, b.line, err)
			}
			for name, entry := range settings.AgentServers {
				if entry["type"] != "custom" {
					t.Errorf("%s:%d: Zed's agent_servers entry %s has no \"type\": \"custom\"", path, b.line, name)
				}
			}
		}
	}
	if found < 2 {
		t.Errorf("found only %d Zed snippets (README.md and docs/acp.md each have one)", found)
	}
}

// TestNothingBuiltCalledUnbuilt: no paragraph of the documents says that
// something is not built yet (or not implemented) while naming one of
// rpi's modes, which are all built.
func TestNothingBuiltCalledUnbuilt(t *testing.T) {
	unbuilt := regexp.MustCompile(`(?i)not (?:yet )?built|not implemented|not yet (?:built|implemented|available)`)
	for _, path := range docFiles(t) {
		data, _ := os.ReadFile(path)
		for _, para := range strings.Split(string(data), "\n\n") {
			text := strings.Join(strings.Fields(para), " ")
			if !unbuilt.MatchString(text) {
				continue
			}
			for _, mode := range []string{"rpi acp", "rpi rpc", "--mode acp", "--compat pi"} {
				if strings.Contains(text, mode) {
					t.Errorf("%s calls something unbuilt beside %s, which is built: %.200s", path, mode, text)
				}
			}
		}
	}
}

// TestReadmeIsALandingPage: README.md stays short enough to read
// through (at most 300 lines; detail goes to docs/), says first what rpi
// is, then the two commands a newcomer needs, and links the changelog.
func TestReadmeIsALandingPage(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("\n")); n > 300 {
		t.Errorf("README.md has %d lines, more than 300: move detail to docs/", n)
	}
	readme := string(data)
	intro, _, _ := strings.Cut(readme, "\n## ")
	for _, want := range []string{"rpi runs a coding agent", "go run . rpc", "go test ./..."} {
		if !strings.Contains(intro, want) {
			t.Errorf("README.md does not start with %q (before its first section)", want)
		}
	}
	if !strings.Contains(readme, "](CHANGELOG.md)") {
		t.Error("README.md does not link CHANGELOG.md")
	}
}

// TestChangelogHasTheVersion: CHANGELOG.md starts with what is not in a
// version yet, and has an entry for the version rpi reports.
func TestChangelogHasTheVersion(t *testing.T) {
	data, err := os.ReadFile("CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	headings := regexp.MustCompile(`(?m)^## (.+)$`).FindAllStringSubmatch(string(data), -1)
	if len(headings) < 2 || headings[0][1] != "Unreleased" {
		t.Fatalf("CHANGELOG.md's first section is not Unreleased: %q", headings)
	}
	if headings[1][1] != rpiVersion && !strings.HasPrefix(headings[1][1], rpiVersion+" ") {
		t.Errorf("CHANGELOG.md's newest version is %q; rpi reports %s", headings[1][1], rpiVersion)
	}
}

// TestSettleWithinDocumented: docs/protocol.md#launch gives the time
// after which SIGHUP and SIGQUIT have their handlers, for a client that
// sends nothing, as settleWithin has it.
func TestSettleWithinDocumented(t *testing.T) {
	protocol, err := os.ReadFile("docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%d ms after `session_started`", settleWithin.Milliseconds())
	if !strings.Contains(strings.Join(strings.Fields(string(protocol)), " "), want) {
		t.Errorf("docs/protocol.md does not say %q", want)
	}
}
