package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// systemPromptOf is the system prompt of a request the fake OpenAI
// model received.
func systemPromptOf(t *testing.T, body map[string]any) string {
	t.Helper()
	messages, _ := body["messages"].([]any)
	if len(messages) == 0 {
		t.Fatalf("no messages in %v", body)
	}
	first, _ := messages[0].(map[string]any)
	text, _ := first["content"].(string)
	return text
}

// TestACPAdditionalDirectories: session/new's additionalDirectories are
// the session's other directories: the cwd given again, a symlink to it
// or to one named before, and the same path with a trailing / are
// dropped; the rest, in order, are named in the system prompt after the
// cwd, their context files (AGENTS.md up from each, a file above both read
// once) join the cwd's after them, MCP servers get them as roots after
// the cwd, a file in one is read through the editor (as a write's old
// text is, there and anywhere), and a write there is
// not "outside the working directory" — one outside every root is.
func TestACPAdditionalDirectories(t *testing.T) {
	root := t.TempDir()
	cwd, lib, docs, outside := filepath.Join(root, "app"), filepath.Join(root, "lib"), filepath.Join(root, "docs"), filepath.Join(root, "elsewhere")
	for _, dir := range []string{cwd, lib, docs, outside} {
		os.Mkdir(dir, 0o755)
	}
	os.WriteFile(filepath.Join(root, "AGENTS.md"), []byte("Top rules."), 0o644)
	os.WriteFile(filepath.Join(cwd, "AGENTS.md"), []byte("App rules."), 0o644)
	os.WriteFile(filepath.Join(lib, "AGENTS.md"), []byte("Lib rules."), 0o644)
	os.WriteFile(filepath.Join(docs, "CLAUDE.md"), []byte("Docs rules."), 0o644)
	os.WriteFile(filepath.Join(lib, "notes.txt"), []byte("on disk\n"), 0o644)
	os.Symlink(cwd, filepath.Join(root, "to-app"))
	os.Symlink(lib, filepath.Join(root, "to-lib"))

	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"read","args":["{\"path\":\"../lib/notes.txt\"}"]}]}
{"toolCalls":[{"id":"c2","name":"write","args":["{\"path\":\"../lib/new.txt\",\"content\":\"x\"}"]}]}
{"toolCalls":[{"id":"c3","name":"write","args":["{\"path\":\"../elsewhere/new.txt\",\"content\":\"x\"}"]}]}
{"text":["done"]}`, e.agentDir)
	c, a, _ := startACPAgent(t, e, nil, "--confirm", "write")
	c.answer = func(method string, params json.RawMessage) (any, *acpError) {
		if method == "fs/read_text_file" {
			return map[string]string{"content": "in the buffer\n"}, nil
		}
		return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "reject"}}, nil
	}
	c.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{"fs": map[string]bool{"readTextFile": true}}})
	got := c.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{},
		"additionalDirectories": []string{lib, cwd, filepath.Join(root, "to-app"), docs + "/", filepath.Join(root, "to-lib"), lib}})
	var opened acpSessionAnswer
	if json.Unmarshal(got.Result, &opened) != nil || opened.SessionID == "" {
		t.Fatalf("session/new: %s", got.line)
	}
	s := openSessionOf(t, a, opened.SessionID).s
	if want := []string{lib, docs}; !slices.Equal(s.set.dirs, want) {
		t.Errorf("the session's directories: %q, want %q", s.set.dirs, want)
	}

	var conn mcpConn
	s.mcp.prepare(&mcpServer{}, &conn)
	roots, _ := json.Marshal(conn.roots)
	if want := fmt.Sprintf(`[{"uri":"file://%s","name":"app"},{"uri":"file://%s","name":"lib"},{"uri":"file://%s","name":"docs"}]`, cwd, lib, docs); string(roots) != want {
		t.Errorf("MCP roots:\n got %s\nwant %s", roots, want)
	}

	c.call("session/prompt", acpTextPrompt(opened.SessionID, "go"))
	prompt := systemPromptOf(t, fm.lastRequest())
	var files []int
	for _, name := range []string{"Top rules.", "App rules.", "Lib rules.", "Docs rules."} {
		if n := strings.Count(prompt, name); n != 1 {
			t.Errorf("%q is in the system prompt %d times", name, n)
		}
		files = append(files, strings.Index(prompt, name))
	}
	if !slices.IsSorted(files) {
		t.Errorf("the context files are not in the order top, app, lib, docs (at %v):\n%s", files, prompt)
	}
	wantEnd := "\n\n<cwd>\n" + cwd + "\n</cwd>\n\n<directories>\nAdditional working directories (relative paths still start from the current working directory):\n- " + lib + "\n- " + docs + "\n</directories>"
	if !strings.HasSuffix(prompt, wantEnd) {
		t.Errorf("the system prompt ends:\n%s\nwant it to end:\n%s", prompt[max(0, len(prompt)-400):], wantEnd)
	}

	var reads, titles []string
	for _, m := range c.messages() {
		var p struct {
			Path     string `json:"path"`
			ToolCall struct {
				Title string `json:"title"`
			} `json:"toolCall"`
		}
		json.Unmarshal(m.Params, &p)
		switch m.Method {
		case "fs/read_text_file":
			reads = append(reads, p.Path)
		case "session/request_permission":
			titles = append(titles, p.ToolCall.Title)
		}
	}
	if want := []string{filepath.Join(lib, "notes.txt"), filepath.Join(lib, "new.txt"), filepath.Join(outside, "new.txt")}; !slices.Equal(reads, want) {
		t.Errorf("read through the editor: %q, want %q", reads, want)
	}
	if want := []string{"Write " + filepath.Join(lib, "new.txt"), "Write " + filepath.Join(outside, "new.txt") + " (outside the working directory and the additional directories)"}; !slices.Equal(titles, want) {
		t.Errorf("permission titles:\n got %q\nwant %q", titles, want)
	}
}

// TestACPAdditionalDirectoriesRefused: each way additionalDirectories
// can be wrong is -32602 naming the field (the item, by its index), and
// nothing opens; null is none.
func TestACPAdditionalDirectoriesRefused(t *testing.T) {
	root := t.TempDir()
	cwd, ok := filepath.Join(root, "app"), filepath.Join(root, "ok")
	os.Mkdir(cwd, 0o755)
	os.Mkdir(ok, 0o755)
	os.WriteFile(filepath.Join(root, "file"), nil, 0o644)
	locked := filepath.Join(root, "locked")
	os.Mkdir(locked, 0o000)
	t.Cleanup(func() { os.Chmod(locked, 0o755) })
	many := make([]string, acpMaxDirectories+1)
	for i := range many {
		many[i] = ok
	}
	cases := []struct {
		dirs any
		want string
	}{
		{"/x", "Invalid field additionalDirectories: must be an array of absolute paths"},
		{[]any{ok, 3}, "Invalid field additionalDirectories[1]: must be an absolute path"},
		{[]any{ok, "rel/dir"}, `Invalid field additionalDirectories[1]: must be an absolute path, got "rel/dir"`},
		{[]any{ok, ""}, `Invalid field additionalDirectories[1]: must be an absolute path, got ""`},
		{[]any{ok, cwd + "/../ok"}, `Invalid field additionalDirectories[1]: "` + cwd + `/../ok" has a .. in it: give the directory's own path`},
		{[]any{ok, root + "/a\nb"}, `Invalid field additionalDirectories[1]: "` + root + `/a\nb" has a control or format character in it`},
		{[]any{ok, root + "/a\u202eb"}, `Invalid field additionalDirectories[1]: "` + root + `/a\u202eb" has a control or format character in it`},
		{many, "Invalid field additionalDirectories: at most 32 directories, got 33"},
		{[]any{ok, root + "/missing"}, "Invalid field additionalDirectories[1]: " + root + "/missing does not exist"},
		{[]any{ok, root + "/file"}, "Invalid field additionalDirectories[1]: " + root + "/file is not a directory"},
	}
	if os.Geteuid() != 0 {
		cases = append(cases, struct {
			dirs any
			want string
		}{[]any{ok, locked}, "Invalid field additionalDirectories[1]: " + locked + " cannot be read: permission denied"})
	}
	if runtime.GOOS == "linux" {
		cases = append(cases, struct {
			dirs any
			want string
		}{[]any{"/proc/self"}, "Invalid field additionalDirectories[0]: /proc/self is a directory of /proc, not a directory to work in"})
	}
	c, a, _ := startACPAgent(t, nil, nil)
	c.call("initialize", map[string]any{"protocolVersion": 1})
	for _, tc := range cases {
		got := c.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}, "additionalDirectories": tc.dirs})
		if e := got.Error; e == nil || e.Code != acpInvalidParams || e.Message != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.dirs, got.line, tc.want)
		}
	}
	a.mu.Lock()
	n := len(a.sessions)
	a.mu.Unlock()
	if n != 0 {
		t.Errorf("%d sessions opened", n)
	}
	got := c.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}, "additionalDirectories": nil})
	var opened acpSessionAnswer
	if json.Unmarshal(got.Result, &opened) != nil || opened.SessionID == "" {
		t.Fatalf("additionalDirectories null: %s", got.line)
	}
	if dirs := openSessionOf(t, a, opened.SessionID).s.set.dirs; len(dirs) != 0 {
		t.Errorf("additionalDirectories null gave %q", dirs)
	}
}

// TestACPAdditionalDirectoriesOnLoad: session/load and resume take the
// complete list: a session open here already keeps its own (the same list
// again is answered, another — none included — refused), and once closed
// it opens again with whatever list is given.
func TestACPAdditionalDirectoriesOnLoad(t *testing.T) {
	root := t.TempDir()
	cwd, lib, docs := filepath.Join(root, "app"), filepath.Join(root, "lib"), filepath.Join(root, "docs")
	for _, dir := range []string{cwd, lib, docs} {
		os.Mkdir(dir, 0o755)
	}
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"text":["unused"]}`, e.agentDir)
	c, a, _ := startACPAgent(t, e, nil)
	c.call("initialize", map[string]any{"protocolVersion": 1})
	got := c.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}, "additionalDirectories": []string{lib}})
	var opened acpSessionAnswer
	if json.Unmarshal(got.Result, &opened) != nil || opened.SessionID == "" {
		t.Fatalf("session/new: %s", got.line)
	}
	sid := opened.SessionID
	reopen := func(method string, dirs any) acpTestMessage {
		params := map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}}
		if dirs != nil {
			params["additionalDirectories"] = dirs
		}
		return c.call(method, params)
	}
	if got := reopen("session/resume", []string{lib + "/"}); got.Error != nil {
		t.Errorf("resume with the same list: %s", got.line)
	}
	if got := reopen("session/load", []string{lib, lib}); got.Error != nil {
		t.Errorf("load with the same list, lib twice: %s", got.line)
	}
	want := `"message":"Invalid field additionalDirectories: the session is open here with other additional directories (` + lib + `); close it (session/close) and open it again to change them"`
	for _, dirs := range []any{nil, []string{}, []string{docs}} {
		if got := reopen("session/resume", dirs); !strings.Contains(got.line, want) {
			t.Errorf("resume with %q:\n got %s\nwant %s", dirs, got.line, want)
		}
	}
	c.call("session/close", map[string]any{"sessionId": sid})
	if got := reopen("session/resume", []string{docs, lib}); got.Error != nil {
		t.Fatalf("resume once closed: %s", got.line)
	}
	if dirs := openSessionOf(t, a, sid).s.set.dirs; !slices.Equal(dirs, []string{docs, lib}) {
		t.Errorf("after the resume: %q", dirs)
	}
}
