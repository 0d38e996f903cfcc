package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// toolServer is a server whose cwd is a temp dir holding files.
func toolServer(t *testing.T, files map[string]string) *rpcServer {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return newQuietServer(t, "--cwd", dir, "--no-session", "--tools", strings.Join(toolNames(), ","))
}

// newQuietServer is an rpc server with args, in the test's process, that
// reads nothing and whose output goes nowhere: for calling its parts
// straight. It is shut down when the test ends.
func newQuietServer(t testing.TB, args ...string) *rpcServer {
	cfg, _, err := parseArgs(append([]string{"rpc"}, args...), runEnv{getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	s, err := newServer(cfg, newTestEnv(t).env(), newConnection(nil, io.Discard, io.Discard), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.shutdown(false) })
	return s
}

// callTool runs a tool and returns its text (or error text) and whether it failed.
func callTool(t *testing.T, s *rpcServer, name, args string) (string, bool) {
	t.Helper()
	res, isError := s.runTool(context.Background(), contentBlock{Type: "toolCall", ID: "c", Name: name, Arguments: json.RawMessage(args)})
	var parts []string
	for _, b := range res.Content {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		} else {
			parts = append(parts, "<"+b.Type+" "+b.MimeType+">")
		}
	}
	return strings.Join(parts, "|"), isError
}

// TestToolSchemas: every tool's schema is a JSON object (they are decoded
// at first use, not at startup, so this is where a bad one shows).
func TestToolSchemas(t *testing.T) {
	for _, tl := range allTools {
		for _, raw := range []json.RawMessage{tl.schema, tl.accepts} {
			var schema map[string]any
			if err := json.Unmarshal(raw, &schema); raw != nil && (err != nil || schema["type"] != "object") {
				t.Errorf("tool %s: schema %s: %v", tl.name, raw, err)
			}
		}
	}
}

func TestTools(t *testing.T) {
	long := strings.Repeat("line\n", 2500)
	files := map[string]string{
		"a.txt":          "one\ntwo\nthree\n",
		"long.txt":       long,
		"dup.txt":        "x = 1\nx = 1\n",
		"crlf.txt":       "a\r\nb\r\n",
		"pic.png":        "\x89PNG\r\n\x1a\nrest",
		"src/main.go":    "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n",
		"src/util.go":    "package main\n// TODO: tidy\n",
		"build/out.go":   "// TODO: generated\n",
		".gitignore":     "build/\n*.log\n",
		"debug.log":      "TODO in a log\n",
		"docs/README.md": "# Docs\n",
		"docs/café.md":   "# Café\n",
	}
	tests := []struct {
		tool, args string
		want       string // the text must contain this
		isError    bool
	}{
		{"read", `{"path":"a.txt"}`, "one\ntwo\nthree\n", false},
		{"read", `{"path":"a.txt","offset":2,"limit":1}`, "two\n\n[2 more lines in file. Use offset=3 to continue.]", false},
		{"read", `{"path":"a.txt","offset":9}`, "Offset 9 is beyond end of file (4 lines total)", true},
		// offset+limit past an int (a 32-bit one, a 64-bit one) is no limit.
		{"read", `{"path":"a.txt","offset":2,"limit":2147483647}`, "two\nthree\n", false},
		{"read", fmt.Sprintf(`{"path":"long.txt","offset":2001,"limit":%d}`, math.MaxInt-1023), "line\nline\n", false},
		{"read", `{"path":"long.txt"}`, "[Showing lines 1-2000 of 2501. Use offset=2001 to continue.]", false},
		{"read", `{"path":"pic.png"}`, "Read image file [image/png]|<image image/png>", false},
		{"read", `{"path":"missing.txt"}`, "no such file or directory", true},
		{"read", `{}`, `Invalid arguments for read: missing field "path"`, true},
		{"read", `{"path":"a.txt","Path":"/etc/passwd"}`, `Invalid arguments for read: unknown field "Path" (the fields are: limit, offset, path)`, true},
		{"read", `{"path":"a.txt","path":"/etc/passwd"}`, `Invalid arguments for read: field "path" appears twice`, true},
		{"read", `{"path":7}`, `Invalid arguments for read: field "path" must be string`, true},
		{"read", `["a.txt"]`, `Invalid arguments for read: expected a JSON object`, true},
		{"read", `{"path":"a.txt","offset":1.5}`, `Invalid arguments for read: field "offset" must be a whole number`, true},
		// A whole number is one however it is written, as JSON Schema has it.
		{"read", `{"path":"a.txt","offset":2.0,"limit":1e0}`, "two\n\n[2 more lines in file. Use offset=3 to continue.]", false},
		{"read", `{"path":"a.txt", "offset" : 0.2E1 , "limit":10E-1}`, "two\n\n[2 more lines in file. Use offset=3 to continue.]", false},
		{"read", `{"path":"a.txt","offset":1e19}`, fmt.Sprintf(`Invalid arguments for read: field "offset" must be at most %d`, math.MaxInt), true},
		{"grep", `{"pattern":"e","limit":1.0}`, "[1 matches limit reached. Use limit=2 for more, or refine pattern]", false},
		{"write", `{"path":"new/dir/b.txt","content":"hello"}`, "Successfully wrote 5 bytes to new/dir/b.txt", false},
		{"edit", `{"path":"a.txt","oldText":"two","newText":"2"}`, "Successfully replaced 1 block(s) in a.txt.", false},
		{"edit", `{"path":"a.txt","oldText":"zzz","newText":"2"}`, "Could not find the exact text in a.txt.", true},
		{"edit", `{"path":"dup.txt","oldText":"x = 1","newText":"y"}`, "Found 2 occurrences of the text in dup.txt.", true},
		{"edit", `{"path":"a.txt","oldText":"one","newText":"one"}`, "No changes made to a.txt.", true},
		{"edit", `{"path":"nope.txt","oldText":"a","newText":"b"}`, "File not found: nope.txt", true},
		{"edit", `{"path":"crlf.txt","oldText":"a\nb","newText":"c\nd"}`, "Successfully replaced 1 block(s) in crlf.txt.", false},
		// The shapes edit takes are read strictly (testdata/edit/ has what they do).
		{"edit", `{"path":"a.txt"}`, "Invalid arguments for edit: edits must contain at least one replacement", true},
		{"edit", `{"path":"a.txt","edits":[]}`, "Invalid arguments for edit: edits must contain at least one replacement", true},
		{"edit", `{"path":"a.txt","oldText":"one"}`, "Invalid arguments for edit: oldText and newText go together (or give edits)", true},
		{"edit", `{"path":"a.txt","edits":"not json"}`, `Invalid arguments for edit: field "edits" is a string that does not hold a JSON list of edits: it is not JSON`, true},
		{"edit", `{"path":"a.txt","edits":"[{\"oldText\":\"one\",\"newText\":\"1\",\"why\":\"\"}]"}`, `field "edits" is a string that does not hold a JSON list of edits: unknown field "[0].why"`, true},
		{"edit", `{"path":"a.txt","edits":"[{\"oldText\":\"one\"}]"}`, `does not hold a JSON list of edits: missing field "[0].newText"`, true},
		{"edit", `{"path":"a.txt","edits":"[1]"}`, `does not hold a JSON list of edits: field "[0]" must be object`, true},
		{"edit", `{"path":"a.txt","edits":{"oldText":"one","newText":"1","Path":"x"}}`, `Invalid arguments for edit: unknown field "edits.Path"`, true},
		{"edit", `{"path":"a.txt","edits":[{"oldText":"one","newText":"1","oldText":"two"}]}`, `Invalid arguments for edit: field "edits[0].oldText" appears twice`, true},
		{"edit", `{"path":"a.txt","edits":7}`, `Invalid arguments for edit: field "edits" must be array or object or string`, true},
		{"edit", `{"path":"a.txt","Edits":[]}`, `Invalid arguments for edit: unknown field "Edits" (the fields are: edits, newText, oldText, path)`, true},
		{"bash", `{"command":"echo out; sleep 0.1; echo err >&2"}`, "out\nerr\n", false},
		{"bash", `{"command":"true"}`, "(no output)", false},
		{"bash", `{"command":"echo bad; exit 3"}`, "bad\n\n\nCommand exited with code 3", true},
		{"bash", `{"command":"sleep 5","timeout":0.1}`, "Command timed out after 0.1 seconds", true},
		{"ls", `{}`, ".gitignore\na.txt\nbuild/\ncrlf.txt", false},
		{"ls", `{"path":"a.txt"}`, "Not a directory:", true},
		{"ls", `{"path":"nowhere"}`, "Path not found:", true},
		{"ls", `{"limit":2}`, "[2 entries limit reached. Use limit=4 for more]", false},
		{"grep", `{"pattern":"TODO"}`, "src/util.go:2: // TODO: tidy", false},
		{"grep", `{"pattern":"todo","ignoreCase":true,"glob":"*.go"}`, "src/util.go:2: // TODO: tidy", false},
		{"grep", `{"pattern":"println(","literal":true,"context":1}`, "src/main.go-3- func main() {\nsrc/main.go:4: \tprintln(\"hi\")\nsrc/main.go-5- }", false},
		{"grep", `{"pattern":"nothing here"}`, "No matches found", false},
		{"grep", `{"pattern":"(unclosed"}`, "Invalid arguments for grep: invalid pattern:", true},
		{"grep", `{"pattern":"e","limit":1}`, "[1 matches limit reached. Use limit=2 for more, or refine pattern]", false},
		{"find", `{"pattern":"*.go"}`, "src/main.go\nsrc/util.go", false},
		{"find", `{"pattern":"src/**"}`, "src/main.go", false},
		{"find", `{"pattern":"*.{md,txt}","limit":1}`, "[1 results limit reached. Use limit=2 for more, or refine pattern]", false},
		{"find", `{"pattern":"*.xyz"}`, "No files found matching pattern", false},
		{"find", `{"pattern":"café*"}`, "docs/café.md", false},
		{"todo", `{"op":"init","list":[{"phase":"Build","items":["a","b"]}]}`, "2 tasks: 0 completed, 0 abandoned, 1 in progress, 1 pending.\nBuild:\n  [~] a (task-", false},
		{"todo", `{"op":"done","task":"a"}`, "  [x] a (task-", false},
		{"todo", `{"op":"finish"}`, `field "op" must be one of init, start, done`, true},
		{"todo", `{"op":"view","task":"a"}`, `field "task" does not go with op view (it takes no other field)`, true},
		{"todo", `{"op":"append","phase":"Build","items":["b"]}`, `Errors: Task "b" already exists`, true},
		{"process", `{"action":"list"}`, `[]`, false},
		{"process", `{"action":"fly"}`, `field "action" must be one of spawn, list`, true},
		{"process", `{"action":"logs","processId":"x"}`, "process not found: x", true},
		{"process", `{"action":"list","processId":"x"}`, `field "processId" does not go with action list`, true},
		{"process", `{"action":"spawn","spec":{"argv":["ls"],"Argv":["rm"]}}`, `unknown field "spec.Argv"`, true},
		{"nosuch", `{}`, "Tool nosuch not found", true},
	}
	s := toolServer(t, files)
	for _, tt := range tests {
		got, isError := callTool(t, s, tt.tool, tt.args)
		if !strings.Contains(got, tt.want) || isError != tt.isError {
			t.Errorf("%s %s:\n got %q (isError %v)\nwant it to contain %q (isError %v)", tt.tool, tt.args, got, isError, tt.want, tt.isError)
		}
	}
	// What the tools did to the files.
	for path, want := range map[string]string{"a.txt": "one\n2\nthree\n", "new/dir/b.txt": "hello", "crlf.txt": "c\r\nd\r\n"} {
		if data, _ := os.ReadFile(filepath.Join(s.set.cwd, path)); string(data) != want {
			t.Errorf("%s holds %q, want %q", path, data, want)
		}
	}
	// .gitignore'd files never show up.
	for _, args := range []string{`{"pattern":"TODO"}`, `{"pattern":"*"}`} {
		tool := "grep"
		if strings.Contains(args, `"*"`) {
			tool = "find"
		}
		if got, _ := callTool(t, s, tool, args); strings.Contains(got, "build/out.go") || strings.Contains(got, "debug.log") {
			t.Errorf("%s %s shows ignored files:\n%s", tool, args, got)
		}
	}
	if plan := s.todos; len(plan) != 1 || len(plan[0].Tasks) != 2 || plan[0].Tasks[1].Status != "in_progress" {
		t.Errorf("plan %+v: want b in progress once a is done", plan)
	}
}

// TestLsMarksSymlinkedDirectories: ls ends a symlink that leads to a
// directory with / as it does a directory, and lists a symlink to a file
// or to nothing as it is.
func TestLsMarksSymlinkedDirectories(t *testing.T) {
	s := toolServer(t, map[string]string{"real/a.txt": "a\n", "file.txt": "f\n"})
	for link, target := range map[string]string{"dirlink": "real", "filelink": "file.txt", "dangling": "nowhere", "outside": t.TempDir()} {
		if err := os.Symlink(target, filepath.Join(s.set.cwd, link)); err != nil {
			t.Fatal(err)
		}
	}
	want := "dangling\ndirlink/\nfile.txt\nfilelink\noutside/\nreal/"
	if got, isError := callTool(t, s, "ls", `{}`); got != want || isError {
		t.Errorf("ls: got %q (isError %v), want %q", got, isError, want)
	}
}

// TestSearchOfASymlinkedFileNamesIt: grep and find given a symlink to a
// file name it as they were given it, not by where it leads.
func TestSearchOfASymlinkedFileNamesIt(t *testing.T) {
	s := toolServer(t, map[string]string{"secret/target.txt": "needle\n"})
	if err := os.Symlink("secret/target.txt", filepath.Join(s.set.cwd, "notes.md")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ tool, args, want string }{
		{"grep", `{"pattern":"needle","path":"notes.md"}`, "notes.md:1: needle"},
		{"find", `{"pattern":"*.md","path":"notes.md"}`, "notes.md"},
		{"find", `{"pattern":"*.txt","path":"notes.md"}`, "No files found matching pattern"},
	} {
		if got, isError := callTool(t, s, tt.tool, tt.args); got != tt.want || isError {
			t.Errorf("%s %s: got %q (isError %v), want %q", tt.tool, tt.args, got, isError, tt.want)
		}
	}
}

// TestListsCutBySizeTellTheLimitOnlyWhenReached: ls, find and grep cut
// at 50 KB say so, and say their limit was reached only when it was (400
// long names are under ls's 500 and find's 1000, yet over 50 KB).
func TestListsCutBySizeTellTheLimitOnlyWhenReached(t *testing.T) {
	files := map[string]string{}
	for i := range 400 {
		files[fmt.Sprintf("%03d%s.txt", i, strings.Repeat("n", 200))] = "needle\n"
	}
	s := toolServer(t, files)
	for _, tt := range []struct{ tool, args, notice string }{
		{"ls", `{}`, "\n\n[50.0KB limit reached]"},
		{"find", `{"pattern":"*.txt"}`, "\n\n[50.0KB limit reached]"},
		{"grep", `{"pattern":"needle","limit":1000}`, "\n\n[50.0KB limit reached]"},
		{"ls", `{"limit":300}`, "\n\n[300 entries limit reached. Use limit=600 for more. 50.0KB limit reached]"},
		{"find", `{"pattern":"*.txt","limit":300}`, "\n\n[300 results limit reached. Use limit=600 for more, or refine pattern. 50.0KB limit reached]"},
		{"find", `{"pattern":"00*.txt","limit":5}`, "\n\n[5 results limit reached. Use limit=10 for more, or refine pattern]"},
	} {
		got, isError := callTool(t, s, tt.tool, tt.args)
		if isError || !strings.HasSuffix(got, tt.notice) || strings.Count(got, "[") != 1 {
			t.Errorf("%s %s: ends %q (isError %v), want it to end %q", tt.tool, tt.args, got[max(0, len(got)-150):], isError, tt.notice)
		}
	}
}

// TestSearchOfASubfolderSkipsWhatTheProjectIgnores: grep and find in a
// folder of a git repository skip what the .gitignore files above it
// list, each rule taken from its own folder (an anchored /build is the
// top's build only); outside a repository only the folder's own counts.
func TestSearchOfASubfolderSkipsWhatTheProjectIgnores(t *testing.T) {
	files := map[string]string{
		".gitignore":                  "node_modules/\n/build\npkg/*/gen.txt\n",
		"pkg/.gitignore":              "*.log\n",
		"pkg/app/src/a.txt":           "needle\n",
		"pkg/app/node_modules/m.txt":  "needle\n",
		"pkg/app/build/b.txt":         "needle\n",
		"pkg/app/gen.txt":             "needle\n",
		"pkg/app/debug.log":           "needle\n",
		"pkg/app/.gitignore":          "src/skip.txt\n",
		"pkg/app/src/skip.txt":        "needle\n",
		"elsewhere/.gitignore":        "*.txt\n",
		"elsewhere/inner/nothere.txt": "needle\n",
	}
	s := toolServer(t, files)
	if err := os.Mkdir(filepath.Join(s.set.cwd, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := "build/b.txt:1: needle\nsrc/a.txt:1: needle"
	if got, isError := callTool(t, s, "grep", `{"pattern":"needle","path":"pkg/app"}`); got != want || isError {
		t.Errorf("grep in pkg/app: got %q (isError %v), want %q", got, isError, want)
	}
	want = "build/b.txt\nsrc/a.txt"
	if got, isError := callTool(t, s, "find", `{"pattern":"*.txt","path":"pkg/app"}`); got != want || isError {
		t.Errorf("find in pkg/app: got %q (isError %v), want %q", got, isError, want)
	}
	// Without .git there is no repository: elsewhere/inner's search takes
	// no rule from above it.
	os.Remove(filepath.Join(s.set.cwd, ".git"))
	if got, _ := callTool(t, s, "grep", `{"pattern":"needle","path":"elsewhere/inner"}`); got != "nothere.txt:1: needle" {
		t.Errorf("grep outside a repository: got %q", got)
	}
}

// TestProcessTool drives a background process through the process tool.
func TestProcessTool(t *testing.T) {
	s := toolServer(t, nil)
	got, isError := callTool(t, s, "process", `{"action":"spawn","spec":{"argv":["cat"],"label":"echo"}}`)
	var started processInfo
	if isError || json.Unmarshal([]byte(got), &started) != nil || started.ID == "" || started.OwnerID != "tool:c" || started.Label != "echo" {
		t.Fatalf("spawn: %q", got)
	}
	id := started.ID
	for _, step := range []struct{ args, want string }{
		{`{"action":"write","processId":"` + id + `","dataBase64":"cGluZwo="}`, "done"},
		{`{"action":"write","processId":"` + id + `","closeStdin":true}`, "done"},
		{`{"action":"wait","processId":"` + id + `","timeoutMs":5000}`, `"state":"exited","pid"`},
		{`{"action":"logs","processId":"` + id + `"}`, `"eof":true,"text":"ping\n"`},
		{`{"action":"remove","processId":"` + id + `"}`, "done"},
		{`{"action":"describe","processId":"` + id + `"}`, "process not found"},
	} {
		if got, _ := callTool(t, s, "process", step.args); !strings.Contains(got, step.want) {
			t.Errorf("%s: got %q, want %q", step.args, got, step.want)
		}
	}
}

// TestProcessToolLogsKeepCharactersWhole: the process tool's logs, read
// a page at a time, end before a character the page would cut (its
// cursor too), so the next page starts with the whole character. The
// text showed U+FFFD for each half, and the model never saw the
// character. A page too small for one character still moves on.
func TestProcessToolLogsKeepCharactersWhole(t *testing.T) {
	s := toolServer(t, nil)
	got, _ := callTool(t, s, "process", `{"action":"spawn","spec":{"argv":["printf","a\u00e9\u20acz"]}}`)
	var started processInfo
	if json.Unmarshal([]byte(got), &started) != nil || started.ID == "" {
		t.Fatalf("spawn: %q", got)
	}
	id := started.ID
	callTool(t, s, "process", `{"action":"wait","processId":"`+id+`","timeoutMs":5000}`)
	for _, step := range []struct {
		cursor, limit int
		next          int
		text          string
	}{
		{0, 2, 1, "a"},
		{1, 2, 3, "é"},
		{1, 4, 3, "é"},
		{3, 3, 6, "€"},
		{3, 5, 7, "€z"},
		{1, 1, 2, "\uFFFD"},
	} {
		args := fmt.Sprintf(`{"action":"logs","processId":"%s","cursor":%d,"limitBytes":%d}`, id, step.cursor, step.limit)
		got, _ := callTool(t, s, "process", args)
		var logs struct {
			Cursor int
			Text   string
		}
		if json.Unmarshal([]byte(got), &logs) != nil || logs.Cursor != step.next || logs.Text != step.text {
			t.Errorf("logs from %d, %d bytes: got %q, want the text %q and the next cursor %d", step.cursor, step.limit, got, step.text, step.next)
		}
	}
}

// TestToolsRefuseSpecialFiles checks that the file tools touch only
// regular files: rpi's own stdio, devices and FIFOs are refused at once
// (nothing blocks), and grep and find skip a FIFO in the tree.
func TestToolsRefuseSpecialFiles(t *testing.T) {
	s := toolServer(t, map[string]string{"dir/a.txt": "needle\n"})
	fifo := filepath.Join(s.set.cwd, "dir", "pipe")
	if err := mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	os.Symlink("/dev/stdout", filepath.Join(s.set.cwd, "out"))
	for _, tt := range []struct{ tool, args, want string }{
		{"write", `{"path":"/dev/stdout","content":"{\"type\":\"response\"}"}`, "Cannot write /dev/stdout: it is"},
		{"write", `{"path":"out","content":"forged"}`, "Cannot write out: it is"},
		{"read", `{"path":"/dev/stdin"}`, "Cannot read /dev/stdin: it is"},
		{"read", `{"path":"/proc/self/fd/0"}`, "Cannot read /proc/self/fd/0: it is"},
		{"read", `{"path":"/dev/zero"}`, "Cannot read /dev/zero: it is a device"},
		{"read", `{"path":"dir/pipe"}`, "it is a named pipe (FIFO)"},
		{"write", `{"path":"dir/pipe","content":"x"}`, "it is a named pipe (FIFO)"},
		{"edit", `{"path":"dir/pipe","oldText":"a","newText":"b"}`, "it is a named pipe (FIFO)"},
		{"ls", `{"path":"dir/pipe"}`, "Not a directory"},
		{"grep", `{"pattern":"x","path":"dir/pipe"}`, "Cannot search " + fifo + ": it is a named pipe (FIFO)"},
		{"find", `{"pattern":"*","path":"dir/pipe"}`, "Cannot search " + fifo + ": it is a named pipe (FIFO)"},
		{"grep", `{"pattern":"x","path":"/dev/zero"}`, "Cannot search /dev/zero: it is a device"},
		{"grep", `{"pattern":"x","path":"/proc/self/environ"}`, "Cannot search /proc/self/environ: it is a file of /proc"},
		{"read", `{"path":"/proc/self/environ"}`, "it is a file of /proc"},
		{"read", `{"path":"/proc/self/status"}`, "it is a file of /proc"},
		{"write", `{"path":"/proc/self/comm","content":"x"}`, "it is a file of /proc"},
	} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if got, isError := callTool(t, s, tt.tool, tt.args); !isError || !strings.Contains(got, tt.want) {
				t.Errorf("%s %s: got %q (isError %v), want an error containing %q", tt.tool, tt.args, got, isError, tt.want)
			}
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s %s blocked", tt.tool, tt.args)
		}
	}
	if got, _ := callTool(t, s, "grep", `{"pattern":"needle"}`); got != "dir/a.txt:1: needle" {
		t.Errorf("grep over a tree with a FIFO: %q", got)
	}
	if got, _ := callTool(t, s, "find", `{"pattern":"*"}`); strings.Contains(got, "pipe") {
		t.Errorf("find lists the FIFO: %q", got)
	}
}

// TestToolPanicIsIsolated runs a tool that panics: the call ends with an
// error result and rpi goes on.
func TestToolPanicIsIsolated(t *testing.T) {
	s := toolServer(t, nil)
	boom := &tool{name: "boom", schema: schema(`{"type":"object"}`), parsed: map[string]any{"type": "object"},
		decode: func(*session, json.RawMessage) (toolCall, error) { return panicCall{}, nil }}
	s.set.tools = append(s.set.tools, boom)
	if got, isError := callTool(t, s, "boom", `{}`); !isError || got != "Internal error in tool boom: kaboom" {
		t.Errorf("got %q (isError %v)", got, isError)
	}
	if got, isError := callTool(t, s, "read", `{"path":"."}`); !isError || !strings.Contains(got, "a directory") {
		t.Errorf("after the panic: %q", got)
	}
}

type panicCall struct{}

func (panicCall) describe() (string, string) { return "", "" }
func (panicCall) run(context.Context, *session, toolRun) (toolResult, error) {
	panic("kaboom")
}

func TestGlobRegexp(t *testing.T) {
	for _, tt := range []struct {
		glob, path string
		match      bool
	}{
		{"*.go", "main.go", true},
		{"*.go", "src/main.go", false},
		{"src/**/*.go", "src/a/b/c.go", true},
		{"src/**/*.go", "src/c.go", true},
		{"**/test_*.py", "a/test_x.py", true},
		{"*.{md,txt}", "a.txt", true},
		{"file?.txt", "file1.txt", true},
		{"[ab].txt", "c.txt", false},
		{"[ab].txt", "b.txt", true},
		{"[a-c].txt", "b.txt", true},
		{"[!ab].txt", "c.txt", true},
		{"[!ab].txt", "a.txt", false},
		{"[!ab].txt", "!.txt", true},
		{"[^ab].txt", "a.txt", false},
		{"x[!a]y", "x/y", false},
		{"[!-a].txt", "-.txt", false},
		{"[!-a].txt", "0.txt", true},
		{"[]].txt", "].txt", true},
		{"[.*]", "x", false},
		{"[.*]", ".", true},
		{"*.[!o]", "a.c", true},
		{"*.[!o]", "a.o", false},
		{`\*.txt`, "*.txt", true},
		{`\*.txt`, "a.txt", false},
		{`\#notes`, "#notes", true},
		{`a\?`, "ab", false},
		{`a\?`, "a?", true},
		{`\\x`, `\x`, true},
		{"café*", "café.txt", true},
		{"文档/*.md", "文档/a.md", true},
		{"*.é", "x.é", true},
		{"[é]", "é", true},
		{"x?", "xé", true},
		{"a[/]b", "a/b", false},
		{"a[.-0]b", "a/b", false},
		{"a[.-0]b", "a.b", true},
		{"a[.-0]b", "a0b", true},
		{"a[--0]b", "a-b", true},
		{"a[/x]b", "axb", true},
		{`[\]]`, "]", true},
		{`[\]]`, `\]`, false},
		{`[a\-z]`, "-", true},
		{`[a\-z]`, "b", false},
		{`x[\!a]`, "x!", true},
		{`x[\!a]`, "xb", false},
		{`[\\]`, `\`, true},
	} {
		if strings.Contains(tt.glob, `\`) && filepath.Separator != '/' {
			continue // on Windows a backslash is a separator, not an escape
		}
		re, err := globRegexp(tt.glob)
		if err != nil || re.MatchString(tt.path) != tt.match {
			t.Errorf("glob %q on %q: %v, want %v", tt.glob, tt.path, err == nil && re.MatchString(tt.path), tt.match)
		}
	}
}

// TestProcessToolLeavesClientProcesses: the model's tool can look at a
// process the client started, not change it.
func TestProcessToolLeavesClientProcesses(t *testing.T) {
	s := toolServer(t, nil)
	spec, err := decodeProcessSpec(json.RawMessage(`{"argv":["sleep","30"],"cwd":"/"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.spawn(spec, "client", func(processInfo) {})
	if err != nil {
		t.Fatal(err)
	}
	if got, isError := callTool(t, s, "process", `{"action":"describe","processId":"`+p.id+`"}`); isError || !strings.Contains(got, `"ownerId":"client"`) {
		t.Errorf("describe: %q", got)
	}
	for _, action := range []string{`"action":"stop"`, `"action":"signal","signal":"SIGKILL"`, `"action":"write","closeStdin":true`} {
		if got, isError := callTool(t, s, "process", `{`+action+`,"processId":"`+p.id+`"}`); !isError || !strings.Contains(got, "was started by the client") {
			t.Errorf("%s: %q", action, got)
		}
	}
	p.stop()
}

// TestPanicsStayWhereTheyStart: a panic while a tool call is decoded
// fails that call only; one in a child's output reader, or in the timer
// that sends a streaming answer's deltas, is logged and ends nothing else.
func TestPanicsStayWhereTheyStart(t *testing.T) {
	var stderr syncBuffer
	cfg, _, err := parseArgs([]string{"rpc", "--cwd", t.TempDir(), "--no-session"}, runEnv{getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	s, err := newServer(cfg, newTestEnv(t).env(), newConnection(nil, io.Discard, &stderr), &stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer s.shutdown(false)
	boom := &tool{name: "boom", schema: schema(`{"type":"object"}`), parsed: map[string]any{"type": "object"},
		decode: func(*session, json.RawMessage) (toolCall, error) { panic("in decode") }}
	s.set.tools = append(s.set.tools, boom)
	if got, isError := callTool(t, s, "boom", `{}`); !isError || got != "Internal error in tool boom: in decode" {
		t.Errorf("a panic in decode: %q (isError %v)", got, isError)
	}

	shell, _ := s.set.shell()
	cmd := s.command(shell, "-c", "echo hi")
	done := make(chan struct{})
	go func() {
		s.runChild(context.Background(), cmd, 5*time.Second, func(string, []byte) { panic("in a reader") })
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("runChild never returned after its reader panicked")
	}

	sent := make(chan struct{})
	text := "x"
	b := &deltaBatch{stderr: &stderr, clock: realClock{}, deliver: func() {}, post: func(assistantEvent, usage) { defer close(sent); panic("in a timer") }}
	b.add(assistantEvent{Type: "text_delta", Delta: &text}, usage{})
	<-sent
	for _, want := range []string{"panic in tool boom: in decode", "panic in reading a child's stdout: in a reader", "panic in sending deltas: in a timer"} {
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(stderr.String(), want) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

// TestToolFileURLs: a file:// URL given to a tool as its path is the
// path it names, as pi 1.6's tools take one (Node's fileURLToPath):
// percent escapes decoded, host empty or localhost, the query and the
// fragment left out, after a leading @; one that names no path fails the
// call with pi's text when it runs.
func TestToolFileURLs(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file URLs of Windows paths are C:/ ones")
	}
	s := toolServer(t, map[string]string{"a b.txt": "spaced\n", "a.txt": "plain\n", "sub/x.txt": "x\n"})
	url := "file://" + filepath.ToSlash(s.set.cwd)
	for _, tt := range []struct {
		tool, args string
		want       string
		isError    bool
	}{
		{"read", `{"path":"` + url + `/a%20b.txt"}`, "spaced\n", false},
		{"read", `{"path":"` + strings.Replace(url, "file://", "file://LOCALHOST", 1) + `/a.txt"}`, "plain\n", false},
		{"read", `{"path":"@` + url + `/a.txt?x=1#y"}`, "plain\n", false},
		{"read", `{"path":"` + url + `/sub/%2e%2e/a.txt"}`, "plain\n", false},
		{"ls", `{"path":"` + url + `/sub/"}`, "x.txt", false},
		{"write", `{"path":"` + url + `/new%C3%A9.txt","content":"made"}`, "Successfully wrote 4 bytes", false},
		{"read", `{"path":"file://host` + filepath.ToSlash(s.set.cwd) + `/a.txt"}`, `File URL host must be "localhost" or empty on ` + runtime.GOOS, true},
		{"read", `{"path":"file://host:80/a.txt"}`, "Invalid URL", true},
		{"read", `{"path":"` + url + `/sub%2Fx.txt"}`, "File URL path must not include encoded / characters", true},
		{"read", `{"path":"` + url + `/%E9.txt"}`, "URI malformed", true},
		{"read", `{"path":"` + url + `/%zz.txt"}`, "URI malformed", true},
	} {
		got, isError := callTool(t, s, tt.tool, tt.args)
		if !strings.HasPrefix(got, tt.want) || isError != tt.isError {
			t.Errorf("%s %s:\n got %q (isError %v)\nwant it to start %q (isError %v)", tt.tool, tt.args, got, isError, tt.want, tt.isError)
		}
	}
	if data, err := os.ReadFile(filepath.Join(s.set.cwd, "newé.txt")); string(data) != "made" {
		t.Errorf("write through a file URL: newé.txt holds %q (%v), want made", data, err)
	}
}

// TestFileURLPathOnWindows: on Windows a file URL names a drive letter's
// path or a UNC server's, as Node's fileURLToPath reads it there.
func TestFileURLPathOnWindows(t *testing.T) {
	for _, tt := range []struct{ url, want, err string }{
		{"file:///C:/a/b%20c", `C:\a\b c`, ""},
		{"file://server/share/x", `\\server\share\x`, ""},
		{"file://localhost/c:/x", `c:\x`, ""},
		{"file:///C:", "C:", ""},
		{"file:///a", "", "File URL path must be absolute"},
		{"file:///C:/a%5Cb", "", `File URL path must not include encoded \ or / characters`},
	} {
		got, err := fileURLPath(tt.url, "windows")
		if got != tt.want || fmt.Sprint(err) != cmpOr(tt.err, "<nil>") {
			t.Errorf("%s: %q, %v; want %q, %s", tt.url, got, err, tt.want, cmpOr(tt.err, "no error"))
		}
	}
}

// TestLsOrderAsPi: ls lists a folder in pi 1.6's order (its names
// lower-cased and compared as Node's localeCompare compares them, ICU's
// root collation: white space, then punctuation and symbols in ICU's
// order, then digits, then letters, accents only where the letters tie;
// names that tie, as A and a, in byte order, as Node reads a folder),
// a folder's / added after sorting (dir/ before dir-x/). The order wanted
// is what pi 1.6's own ls gave for these names.
func TestLsOrderAsPi(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip(`names with \ " < | * ? are not Windows file names`)
	}
	want := []string{"_x", ".config/", ".Git", ".hidden", "(paren", "[br", "{cb", "@at", "#hash", "~tilde", "$dollar",
		"10ten", "1one", "2two", "A", "a", "a b", "a_b", "a-b", "a.b", "ab", "ae", "åé", "æ", "alpha", "Aø", "aø", "åø",
		"B", "b", "C", "c", "dir/", "dir-x/", "dir.d/", "Dir2/", "e", "É", "é", "eclair", "Éclair", "ecole", "École",
		"f", "f10", "f9", "iv", "Ⅳ", "ivy", "naive", "naïve", "o3", "ø٣", "o4", "strasse", "straße", "strasze",
		"x,y", "x;y", "x!y", "x?y", "x'y", `x"y`, "x*y", `x\y`, "x&y", "x%y", "x`y", "x^y", "x+y", "x<y", "x=y", "x|y",
		"Zed", "zed", "Ωmega"}
	files := map[string]string{}
	for _, name := range want {
		if dir, ok := strings.CutSuffix(name, "/"); ok {
			files[dir+"/x"] = ""
		} else {
			files[name] = ""
		}
	}
	s := toolServer(t, files)
	got, isError := callTool(t, s, "ls", `{}`)
	if isError || got != strings.Join(want, "\n") {
		t.Errorf("ls lists\n%q\nwant pi's order\n%q", strings.Split(got, "\n"), want)
	}
}
