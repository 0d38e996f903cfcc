package main

// The model's tools: read, bash, edit, write, ls, grep, find, todo_write and
// process, with pi's names and parameters. Paths resolve against the
// session cwd.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// tool is one tool the model can call.
type tool struct {
	name        string
	summary     string // one line for the system prompt
	description string
	schema      json.RawMessage // JSON Schema of the arguments
	run         func(ctx context.Context, s *server, args json.RawMessage, update func(toolResult)) (toolResult, error)
}

// toolResult is what a tool gives back: content for the model, details
// for the client (left out when there are none).
type toolResult struct {
	Content []contentBlock `json:"content"`
	Details any            `json:"details,omitempty"`
}

func textResult(text string) toolResult { return toolResult{Content: textBlocks(text)} }

// tools lists every tool in the default order of --tools.
var tools []*tool

// defaultTools are active without --tools.
var defaultTools = []string{"read", "bash", "edit", "write", "todo_write", "process", "ask_user"}

func init() {
	tools = []*tool{readTool, bashTool, editTool, writeTool, todoWriteTool, processTool, askUserTool, lsTool, grepTool, findTool}
	toolNames = nil
	for _, t := range tools {
		toolNames = append(toolNames, t.name)
	}
}

// activeTools are the tools the model is offered.
func (s *server) activeTools() []*tool {
	names := defaultTools
	if s.cfg.toolsGiven {
		names = s.cfg.tools
	}
	var active []*tool
	for _, t := range tools {
		if slices.Contains(names, t.name) {
			active = append(active, t)
		}
	}
	return active
}

func (s *server) findTool(name string) *tool {
	for _, t := range s.activeTools() {
		if t.name == name {
			return t
		}
	}
	return nil
}

// decodeArgs reads a tool's arguments into v; required names the fields
// that must be present.
func decodeArgs(tool string, args json.RawMessage, v any, required ...string) error {
	var present map[string]json.RawMessage
	if err := json.Unmarshal(args, &present); err != nil || present == nil {
		return fmt.Errorf("Invalid arguments for %s: expected a JSON object", tool)
	}
	for _, name := range required {
		if _, ok := present[name]; !ok {
			return fmt.Errorf("Invalid arguments for %s: missing %q", tool, name)
		}
	}
	if err := json.Unmarshal(args, v); err != nil {
		return fmt.Errorf("Invalid arguments for %s: %v", tool, err)
	}
	return nil
}

// toolPath resolves a path argument: a leading @ is dropped, ~ is the home
// directory, relative paths are taken from the session cwd.
func (s *server) toolPath(p string) string {
	p = strings.TrimPrefix(p, "@")
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, _ := os.UserHomeDir()
		p = filepath.Join(home, p[1:])
	}
	return resolvePath(s.cfg.cwd, p)
}

func schema(s string) json.RawMessage { return json.RawMessage(s) }

// formatSize is pi's size text: 512B, 50.0KB, 1.2MB.
func formatSize(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%dB", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1fKB", float64(n)/1024)
	default:
		return fmt.Sprintf("%.1fMB", float64(n)/(1<<20))
	}
}

// ---- read ----

var readTool = &tool{
	name:    "read",
	summary: "Read file contents",
	description: "Read a file. Text comes back as lines (at most 2000 lines or 50KB at a time; use offset and limit to page " +
		"through long files). Images (png, jpeg, gif, webp) come back as images.",
	schema: schema(`{"type":"object","properties":{"path":{"type":"string","description":"File to read, relative to the working directory or absolute"},` +
		`"offset":{"type":"number","description":"First line to read, from 1"},"limit":{"type":"number","description":"How many lines to read"}},"required":["path"]}`),
	run: func(ctx context.Context, s *server, raw json.RawMessage, _ func(toolResult)) (toolResult, error) {
		var a struct {
			Path          string
			Offset, Limit int
		}
		if err := decodeArgs("read", raw, &a, "path"); err != nil {
			return toolResult{}, err
		}
		path := s.toolPath(a.Path)
		data, err := os.ReadFile(path)
		if err != nil {
			return toolResult{}, fmt.Errorf("Cannot read %s: %v", path, unwrapPathError(err))
		}
		if mime := imageType(data); mime != "" {
			return toolResult{Content: []contentBlock{{Type: "text", Text: "Read image file [" + mime + "]"},
				{Type: "image", Data: base64.StdEncoding.EncodeToString(data), MimeType: mime}}}, nil
		}
		lines := strings.Split(string(data), "\n")
		start := max(a.Offset, 1) - 1
		if start >= len(lines) {
			return toolResult{}, fmt.Errorf("Offset %d is beyond end of file (%d lines total)", a.Offset, len(lines))
		}
		end := len(lines)
		if a.Limit > 0 {
			end = min(start+a.Limit, len(lines))
		}
		shown, byBytes := headLines(lines[start:end], maxOutputLines, maxOutputBytes)
		if len(shown) == 0 {
			return textResult(fmt.Sprintf("[Line %d is %s, exceeds %s limit. Use bash: sed -n '%dp' %s | head -c %d]",
				start+1, formatSize(len(lines[start])), formatSize(maxOutputBytes), start+1, a.Path, maxOutputBytes)), nil
		}
		text := strings.Join(shown, "\n")
		last := start + len(shown)
		switch {
		case len(shown) < end-start:
			limit := ""
			if byBytes {
				limit = fmt.Sprintf(" (%s limit)", formatSize(maxOutputBytes))
			}
			text += fmt.Sprintf("\n\n[Showing lines %d-%d of %d%s. Use offset=%d to continue.]", start+1, last, len(lines), limit, last+1)
		case end < len(lines):
			text += fmt.Sprintf("\n\n[%d more lines in file. Use offset=%d to continue.]", len(lines)-end, end+1)
		}
		return textResult(text), nil
	},
}

// headLines keeps whole lines from the start: at most maxLines lines and
// maxBytes bytes. byBytes says the byte limit was what cut.
func headLines(lines []string, maxLines, maxBytes int) (kept []string, byBytes bool) {
	size := 0
	for i, line := range lines {
		if i == maxLines {
			return lines[:i], false
		}
		size += len(line) + 1
		if size-1 > maxBytes {
			return lines[:i], true
		}
	}
	return lines, false
}

// imageType recognises an image by its first bytes.
func imageType(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(data, []byte("\xff\xd8\xff")):
		return "image/jpeg"
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return "image/gif"
	case len(data) > 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// unwrapPathError drops the op and path an *fs.PathError repeats.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ---- write ----

var writeTool = &tool{
	name:        "write",
	summary:     "Create or overwrite files",
	description: "Write a file with the given content, creating it and its parent directories, or replacing it.",
	schema: schema(`{"type":"object","properties":{"path":{"type":"string","description":"File to write"},` +
		`"content":{"type":"string","description":"The whole new content"}},"required":["path","content"]}`),
	run: func(ctx context.Context, s *server, raw json.RawMessage, _ func(toolResult)) (toolResult, error) {
		var a struct{ Path, Content string }
		if err := decodeArgs("write", raw, &a, "path", "content"); err != nil {
			return toolResult{}, err
		}
		path := s.toolPath(a.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return toolResult{}, fmt.Errorf("Cannot create the directory of %s: %v", a.Path, unwrapPathError(err))
		}
		if err := os.WriteFile(path, []byte(a.Content), 0o644); err != nil {
			return toolResult{}, fmt.Errorf("Cannot write %s: %v", a.Path, unwrapPathError(err))
		}
		return textResult(fmt.Sprintf("Successfully wrote %d bytes to %s", len(a.Content), a.Path)), nil
	},
}

// ---- edit ----

var editTool = &tool{
	name:    "edit",
	summary: "Make surgical edits to files (find exact text and replace)",
	description: "Replace one exact, unique piece of text in a file. oldText must match the file exactly, whitespace " +
		"and newlines included, and occur exactly once.",
	schema: schema(`{"type":"object","properties":{"path":{"type":"string","description":"File to edit"},` +
		`"oldText":{"type":"string","description":"Exact text to find; must occur once"},"newText":{"type":"string","description":"Text to put in its place"}},` +
		`"required":["path","oldText","newText"]}`),
	run: func(ctx context.Context, s *server, raw json.RawMessage, _ func(toolResult)) (toolResult, error) {
		var a struct{ Path, OldText, NewText string }
		if err := decodeArgs("edit", raw, &a, "path", "oldText", "newText"); err != nil {
			return toolResult{}, err
		}
		path := s.toolPath(a.Path)
		data, err := os.ReadFile(path)
		if err != nil {
			return toolResult{}, fmt.Errorf("File not found: %s", a.Path)
		}
		content := string(data)
		crlf := strings.Contains(content, "\r\n")
		if crlf {
			content = strings.ReplaceAll(content, "\r\n", "\n")
			a.OldText = strings.ReplaceAll(a.OldText, "\r\n", "\n")
			a.NewText = strings.ReplaceAll(a.NewText, "\r\n", "\n")
		}
		switch n := strings.Count(content, a.OldText); {
		case a.OldText == "" || n == 0:
			return toolResult{}, fmt.Errorf("Could not find the exact text in %s. The old text must match exactly including all whitespace and newlines.", a.Path)
		case n > 1:
			return toolResult{}, fmt.Errorf("Found %d occurrences of the text in %s. The text must be unique. Please provide more context to make it unique.", n, a.Path)
		case a.OldText == a.NewText:
			return toolResult{}, fmt.Errorf("No changes made to %s. The replacement produced identical content.", a.Path)
		}
		line := strings.Count(content[:strings.Index(content, a.OldText)], "\n") + 1
		content = strings.Replace(content, a.OldText, a.NewText, 1)
		if crlf {
			content = strings.ReplaceAll(content, "\n", "\r\n")
		}
		info, _ := os.Stat(path)
		if err := os.WriteFile(path, []byte(content), info.Mode().Perm()); err != nil {
			return toolResult{}, fmt.Errorf("Cannot write %s: %v", a.Path, unwrapPathError(err))
		}
		return toolResult{Content: textBlocks(fmt.Sprintf("Successfully replaced text in %s.", a.Path)),
			Details: map[string]int{"firstChangedLine": line}}, nil
	},
}

// ---- bash ----

var bashTool = &tool{
	name:    "bash",
	summary: "Execute bash commands (ls, grep, find, etc.)",
	description: "Run a command with bash in the working directory. Output (stdout and stderr together) is cut to its " +
		"last 2000 lines or 50KB; the full output is then saved to a file. A nonzero exit is an error.",
	schema: schema(`{"type":"object","properties":{"command":{"type":"string","description":"The command line"},` +
		`"timeout":{"type":"number","description":"Seconds before the command is killed (default: none)"}},"required":["command"]}`),
	run: func(ctx context.Context, s *server, raw json.RawMessage, update func(toolResult)) (toolResult, error) {
		var a struct {
			Command string
			Timeout float64
		}
		if err := decodeArgs("bash", raw, &a, "command"); err != nil {
			return toolResult{}, err
		}
		var out *bashOutput
		var lastUpdate time.Time
		out = newBashOutput(s, func(string, string) {
			// Called with out.mu held: send the tail so far, at most every 50 ms.
			if time.Since(lastUpdate) >= 50*time.Millisecond {
				lastUpdate = time.Now()
				text, _ := out.combined.text()
				update(textResult(text))
			}
		})
		ps, timedOut, err := s.runShell(ctx, a.Command, time.Duration(a.Timeout*float64(time.Second)), out)
		if err != nil {
			return toolResult{}, err
		}
		code, _ := exitStatus(ps)
		res := out.finish(code, false)
		text := res.Output
		if text == "" {
			text = "(no output)"
		}
		var details any
		if res.Truncated {
			text += fmt.Sprintf("\n\n[Showing the last %d lines of %d. Full output: %s]",
				strings.Count(res.Output, "\n"), out.combined.lines(), res.FullOutputPath)
			details = map[string]string{"fullOutputPath": res.FullOutputPath}
		}
		switch {
		case ctx.Err() != nil:
			return toolResult{Details: details}, errors.New(strings.TrimPrefix(text+"\n\nCommand aborted", "(no output)\n\n"))
		case timedOut:
			return toolResult{Details: details}, fmt.Errorf("%s\n\nCommand timed out after %g seconds", text, a.Timeout)
		case code == nil || *code != 0:
			status := "was killed by a signal"
			if code != nil {
				status = fmt.Sprintf("exited with code %d", *code)
			}
			return toolResult{Details: details}, fmt.Errorf("%s\n\nCommand %s", text, status)
		}
		return toolResult{Content: textBlocks(text), Details: details}, nil
	},
}

// ---- ls ----

var lsTool = &tool{
	name:        "ls",
	summary:     "List directory contents",
	description: "List a directory, sorted by name; directories end with /. Dotfiles are included.",
	schema: schema(`{"type":"object","properties":{"path":{"type":"string","description":"Directory (default: the working directory)"},` +
		`"limit":{"type":"number","description":"Most entries to list (default 500)"}}}`),
	run: func(ctx context.Context, s *server, raw json.RawMessage, _ func(toolResult)) (toolResult, error) {
		var a struct {
			Path  string
			Limit int
		}
		if err := decodeArgs("ls", raw, &a); err != nil {
			return toolResult{}, err
		}
		limit := cmpOrInt(a.Limit, 500)
		dir := s.toolPath(a.Path)
		info, err := os.Stat(dir)
		switch {
		case err != nil:
			return toolResult{}, fmt.Errorf("Path not found: %s", dir)
		case !info.IsDir():
			return toolResult{}, fmt.Errorf("Not a directory: %s", dir)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return toolResult{}, fmt.Errorf("Cannot read directory: %v", unwrapPathError(err))
		}
		var names []string
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() {
				name += "/"
			}
			names = append(names, name)
		}
		sort.Slice(names, func(i, j int) bool { return strings.ToLower(names[i]) < strings.ToLower(names[j]) })
		return listResult(names[:min(limit, len(names))], "(empty directory)", len(names) > limit,
			fmt.Sprintf("%d entries limit reached. Use limit=%d for more", limit, 2*limit)), nil
	},
}

func cmpOrInt(n, otherwise int) int {
	if n > 0 {
		return n
	}
	return otherwise
}

// ---- walking, globs and .gitignore ----

// globRegexp turns a glob into a regexp: * and ? stay within a path
// segment, ** crosses segments, {a,b} is either.
func globRegexp(glob string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(glob); i++ {
		c := glob[i]
		switch {
		case strings.HasPrefix(glob[i:], "**/"):
			b.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(glob[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '{':
			b.WriteString("(?:")
		case c == '}':
			b.WriteString(")")
		case c == ',' && strings.Contains(b.String(), "(?:"):
			b.WriteString("|")
		case c == '[':
			end := strings.IndexByte(glob[i:], ']')
			if end < 0 {
				b.WriteString(`\[`)
				continue
			}
			b.WriteString(glob[i : i+end+1])
			i += end
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// ignoreRule is one pattern of the root .gitignore.
type ignoreRule struct {
	re       *regexp.Regexp
	anchored bool // contains a slash: matched against the whole relative path
	dirOnly  bool
}

// loadIgnore reads the .gitignore at root (negations are not supported).
func loadIgnore(root string) []ignoreRule {
	data, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	if err != nil {
		return nil
	}
	var rules []ignoreRule
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "!") {
			continue
		}
		rule := ignoreRule{dirOnly: strings.HasSuffix(line, "/")}
		line = strings.TrimSuffix(line, "/")
		rule.anchored = strings.Contains(line, "/")
		if re, err := globRegexp(strings.TrimPrefix(line, "/")); err == nil {
			rule.re = re
			rules = append(rules, rule)
		}
	}
	return rules
}

func ignored(rules []ignoreRule, rel string, isDir bool) bool {
	for _, r := range rules {
		if r.dirOnly && !isDir {
			continue
		}
		if r.anchored && r.re.MatchString(rel) || !r.anchored && r.re.MatchString(filepath.Base(rel)) {
			return true
		}
	}
	return false
}

// walk visits the files under root (or root itself when it is a file),
// skipping .git and what the root .gitignore lists, with paths relative to
// root. fn returns false to stop.
func walk(ctx context.Context, root string, fn func(rel, path string, isDir bool) bool) error {
	info, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("Path not found: %s", root)
	}
	if !info.IsDir() {
		fn(filepath.Base(root), root, false)
		return nil
	}
	rules := loadIgnore(root)
	stop := errors.New("stop")
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == root {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && d.Name() == ".git" || ignored(rules, rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !fn(rel, path, d.IsDir()) {
			return stop
		}
		return nil
	})
	if err == stop {
		return nil
	}
	return err
}

// ---- grep ----

var grepTool = &tool{
	name:    "grep",
	summary: "Search file contents for patterns (respects .gitignore)",
	description: "Search files for a regular expression (Go syntax), or literal text. Results are path:line: text, " +
		"with context lines as path-line- text. .git and what .gitignore lists are skipped.",
	schema: schema(`{"type":"object","properties":{"pattern":{"type":"string","description":"Regular expression, or text with literal"},` +
		`"path":{"type":"string","description":"Directory or file to search (default: the working directory)"},` +
		`"glob":{"type":"string","description":"Only files whose path matches this glob, e.g. *.go or src/**/*.ts"},` +
		`"ignoreCase":{"type":"boolean"},"literal":{"type":"boolean","description":"Treat pattern as plain text"},` +
		`"context":{"type":"number","description":"Lines of context around each match"},"limit":{"type":"number","description":"Most matches (default 100)"}},"required":["pattern"]}`),
	run: func(ctx context.Context, s *server, raw json.RawMessage, _ func(toolResult)) (toolResult, error) {
		var a struct {
			Pattern, Path, Glob string
			IgnoreCase, Literal bool
			Context, Limit      int
		}
		if err := decodeArgs("grep", raw, &a, "pattern"); err != nil {
			return toolResult{}, err
		}
		pattern := a.Pattern
		if a.Literal {
			pattern = regexp.QuoteMeta(pattern)
		}
		if a.IgnoreCase {
			pattern = "(?i)" + pattern
		}
		re, err := regexp.Compile(pattern)
		if err != nil {
			return toolResult{}, fmt.Errorf("Invalid pattern: %v", err)
		}
		var glob *regexp.Regexp
		if a.Glob != "" {
			if glob, err = globRegexp(a.Glob); err != nil {
				return toolResult{}, fmt.Errorf("Invalid glob: %v", err)
			}
		}
		limit := cmpOrInt(a.Limit, 100)
		var out []string
		matches, cut := 0, false
		err = walk(ctx, s.toolPath(a.Path), func(rel, path string, isDir bool) bool {
			if isDir || glob != nil && !glob.MatchString(rel) && !glob.MatchString(filepath.Base(rel)) {
				return true
			}
			data, err := os.ReadFile(path)
			if err != nil || bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
				return true // unreadable or binary
			}
			lines := strings.Split(string(data), "\n")
			shown := -1
			for i, line := range lines {
				if !re.MatchString(line) {
					continue
				}
				if matches == limit {
					cut = true
					return false
				}
				matches++
				for j := max(i-a.Context, shown+1); j <= min(i+a.Context, len(lines)-1); j++ {
					sep := "-"
					if j == i {
						sep = ":"
					}
					text := lines[j]
					if len(text) > 500 {
						text = text[:500] + "... [truncated]"
					}
					out = append(out, fmt.Sprintf("%s%s%d%s %s", rel, sep, j+1, sep, text))
					shown = j
				}
			}
			return true
		})
		if err != nil {
			return toolResult{}, err
		}
		return listResult(out, "No matches found", cut,
			fmt.Sprintf("%d matches limit reached. Use limit=%d for more, or refine pattern", limit, 2*limit)), nil
	},
}

// listResult is a tool result of lines: emptyText when there are none,
// and notice in brackets after them when the list was cut.
func listResult(lines []string, emptyText string, cut bool, notice string) toolResult {
	if len(lines) == 0 {
		return textResult(emptyText)
	}
	text := strings.Join(lines, "\n")
	if cut {
		text += "\n\n[" + notice + "]"
	}
	return textResult(text)
}

// ---- find ----

var findTool = &tool{
	name:    "find",
	summary: "Find files by glob pattern (respects .gitignore)",
	description: "Find files and directories whose path matches a glob (*, ?, **, {a,b}); a pattern without / matches " +
		"names. Paths are relative; directories end with /. .git and what .gitignore lists are skipped.",
	schema: schema(`{"type":"object","properties":{"pattern":{"type":"string","description":"Glob, e.g. *.go or src/**/test_*.py"},` +
		`"path":{"type":"string","description":"Directory to search (default: the working directory)"},"limit":{"type":"number","description":"Most results (default 1000)"}},"required":["pattern"]}`),
	run: func(ctx context.Context, s *server, raw json.RawMessage, _ func(toolResult)) (toolResult, error) {
		var a struct {
			Pattern, Path string
			Limit         int
		}
		if err := decodeArgs("find", raw, &a, "pattern"); err != nil {
			return toolResult{}, err
		}
		re, err := globRegexp(a.Pattern)
		if err != nil {
			return toolResult{}, fmt.Errorf("Invalid pattern: %v", err)
		}
		byName := !strings.Contains(a.Pattern, "/")
		limit := cmpOrInt(a.Limit, 1000)
		var found []string
		cut := false
		err = walk(ctx, s.toolPath(a.Path), func(rel, _ string, isDir bool) bool {
			subject := rel
			if byName {
				subject = filepath.Base(rel)
			}
			if !re.MatchString(subject) {
				return true
			}
			if len(found) == limit {
				cut = true
				return false
			}
			if isDir {
				rel += "/"
			}
			found = append(found, rel)
			return true
		})
		if err != nil {
			return toolResult{}, err
		}
		return listResult(found, "No files found matching pattern", cut,
			fmt.Sprintf("%d results limit reached. Use limit=%d for more, or refine pattern", limit, 2*limit)), nil
	},
}

// ---- todo_write ----

var todoStatuses = []string{"pending", "in_progress", "completed"}

var todoWriteTool = &tool{
	name:    "todo_write",
	summary: "Replace the todo list that tracks your plan",
	description: "Replace the whole todo list. Keep one item in_progress while working; mark items completed as soon " +
		"as they are done. Items keep their id when given one.",
	schema: schema(`{"type":"object","properties":{"todos":{"type":"array","items":{"type":"object","properties":{` +
		`"id":{"type":"string"},"content":{"type":"string"},"status":{"type":"string","enum":["pending","in_progress","completed"]}},` +
		`"required":["content","status"]}}},"required":["todos"]}`),
	run: func(ctx context.Context, s *server, raw json.RawMessage, _ func(toolResult)) (toolResult, error) {
		var a struct{ Todos []todo }
		if err := decodeArgs("todo_write", raw, &a, "todos"); err != nil {
			return toolResult{}, err
		}
		used := map[string]bool{}
		for _, t := range a.Todos {
			used[t.ID] = true
		}
		next := 1
		counts := map[string]int{}
		for i := range a.Todos {
			t := &a.Todos[i]
			if !oneOf(t.Status, todoStatuses) || strings.TrimSpace(t.Content) == "" {
				return toolResult{}, fmt.Errorf("Invalid arguments for todo_write: item %d needs content and a status of pending, in_progress or completed", i+1)
			}
			for t.ID == "" {
				if id := strconv.Itoa(next); !used[id] {
					t.ID, used[id] = id, true
				}
				next++
			}
			counts[t.Status]++
		}
		todos := append([]todo{}, a.Todos...)
		s.mu.Lock()
		s.todos = todos
		s.mu.Unlock()
		s.emit("todo_updated", struct {
			Todos []todo `json:"todos"`
		}{todos})
		lines := []string{}
		for _, t := range todos {
			mark := map[string]string{"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}[t.Status]
			lines = append(lines, mark+" "+t.Content)
		}
		s.tell(uiRequest{Method: "setWidget", WidgetKey: "todos", WidgetLines: lines})
		return textResult(fmt.Sprintf("Todo list updated: %d items (%d pending, %d in progress, %d completed)",
			len(todos), counts["pending"], counts["in_progress"], counts["completed"])), nil
	},
}

// ---- ask_user ----

var askUserTool = &tool{
	name:    "ask_user",
	summary: "Ask the user a question and wait for the answer",
	description: "Ask the user something only they can answer. With options the user picks one; with multiline " +
		"they write longer text; otherwise they type a short answer. The answer comes back as text.",
	schema: schema(`{"type":"object","properties":{"question":{"type":"string"},"options":{"type":"array","items":{"type":"string"},` +
		`"description":"Choices to pick from"},"multiline":{"type":"boolean","description":"Ask for longer, multi-line text"},` +
		`"placeholder":{"type":"string","description":"Hint shown in an empty answer field"}},"required":["question"]}`),
	run: func(ctx context.Context, s *server, raw json.RawMessage, _ func(toolResult)) (toolResult, error) {
		var a struct {
			Question    string
			Options     []string
			Multiline   bool
			Placeholder string
		}
		if err := decodeArgs("ask_user", raw, &a, "question"); err != nil {
			return toolResult{}, err
		}
		req := uiRequest{Method: "input", Title: a.Question, Placeholder: a.Placeholder}
		switch {
		case len(a.Options) > 0:
			req = uiRequest{Method: "select", Title: a.Question, Options: a.Options}
		case a.Multiline:
			req = uiRequest{Method: "editor", Title: a.Question}
		}
		answer := s.ask(ctx, req)
		if answer.cancelled || answer.value == nil {
			return textResult("The user cancelled the question without answering."), nil
		}
		return textResult(*answer.value), nil
	},
}

// ---- the approval gate ----

// approve asks the client whether a --confirm tool call may run, saying
// exactly what it would do. No answer within confirmTimeoutMs counts as
// no.
func (s *server) approve(ctx context.Context, call contentBlock) bool {
	var a struct {
		Path, Content, OldText, NewText, Command, Action, ProcessID, Signal, Data string
		Args                                                                      []string
	}
	json.Unmarshal(call.Arguments, &a)
	title, message := "Allow "+call.Name+"?", string(call.Arguments)
	switch call.Name {
	case "bash":
		title, message = "Allow bash?", "Run: "+a.Command
	case "write":
		what := "create it"
		if info, err := os.Stat(s.toolPath(a.Path)); err == nil {
			what = fmt.Sprintf("replace its %d bytes", info.Size())
		}
		title, message = "Allow write to "+a.Path+"?", fmt.Sprintf("Write %d bytes to %s (%s)", len(a.Content), a.Path, what)
	case "edit":
		title = "Allow edit of " + a.Path + "?"
		message = fmt.Sprintf("Replace %d lines with %d lines in %s:\n- %s\n+ %s", strings.Count(a.OldText, "\n")+1,
			strings.Count(a.NewText, "\n")+1, a.Path, clip(a.OldText), clip(a.NewText))
	case "process":
		title = "Allow process " + a.Action + "?"
		if a.Action == "start" {
			message = "Start: " + strings.TrimSpace(a.Command+" "+strings.Join(a.Args, " "))
		}
	}
	s.mu.Lock()
	timeout := s.confirmTimeoutMs
	s.mu.Unlock()
	answer := s.ask(ctx, uiRequest{Method: "confirm", Title: title, Message: message, Timeout: timeout})
	return !answer.cancelled && answer.confirmed != nil && *answer.confirmed
}

// clip shortens text for a one-line preview.
func clip(text string) string {
	text = strings.ReplaceAll(text, "\n", "⏎")
	if len(text) > 80 {
		return text[:77] + "..."
	}
	return text
}

// ---- process ----

var processActions = []string{"start", "list", "output", "write", "send_keys", "signal", "kill", "wait"}

var processTool = &tool{
	name:    "process",
	summary: "Run and control background processes (servers, watchers, REPLs)",
	description: "Manage long-running processes without blocking: start one (command, optional args, cwd, env, name, pty), " +
		"list them, read their output (processId, tail), write to stdin (processId, data), send keys (processId, keys " +
		"such as Enter or CtrlC), signal (processId, signal such as SIGTERM), kill (processId), or wait for exit " +
		"(processId, timeout in ms). The user sees their output as it happens.",
	schema: schema(`{"type":"object","properties":{"action":{"type":"string","enum":["start","list","output","write","send_keys","signal","kill","wait"]},` +
		`"command":{"type":"string"},"args":{"type":"array","items":{"type":"string"}},"cwd":{"type":"string"},` +
		`"env":{"type":"object","additionalProperties":{"type":"string"}},"name":{"type":"string"},"pty":{"type":"boolean"},` +
		`"processId":{"type":"string"},"tail":{"type":"number"},"data":{"type":"string"},"keys":{"type":"array","items":{"type":"string"}},` +
		`"signal":{"type":"string"},"timeout":{"type":"number"}},"required":["action"]}`),
	run: func(ctx context.Context, s *server, raw json.RawMessage, _ func(toolResult)) (toolResult, error) {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
			return toolResult{}, errors.New("Invalid arguments for process: expected a JSON object")
		}
		r := &request{typ: "process", fields: fields}
		action, err := r.enum("action", processActions)
		if err != nil {
			return toolResult{}, err
		}
		var data any
		switch action {
		case "start":
			p, err := s.startProcess(r, func(*process) {})
			if err != nil {
				return toolResult{}, err
			}
			data = processStartAnswer{p.id, p.child.pid}
		case "list":
			data, err = s.processList(r)
		case "output":
			data, err = s.processOutput(r)
		case "signal":
			data, err = s.processSignal(r)
		case "kill":
			data, err = s.processKill(r)
		case "write", "send_keys":
			data, err = nil, s.processInput(ctx, r, action)
		case "wait":
			data, err = s.waitForProcess(ctx, r)
		}
		if err != nil {
			return toolResult{}, err
		}
		text, _ := encodeJSON(data)
		if data == nil {
			text = []byte("done")
		}
		return textResult(string(text)), nil
	},
}

// processInput writes data or presses keys for the process tool, in order
// with the client's own writes to that process; an abort stops the wait.
func (s *server) processInput(ctx context.Context, r *request, action string) error {
	p, err := s.runningProcess(r)
	if err != nil {
		return err
	}
	var work func() error
	if action == "write" {
		data, err := r.str("data")
		if err != nil {
			return err
		}
		work = func() error { return p.writeStdin([]byte(data)) }
	} else {
		keys, err := r.optStrings("keys")
		if err != nil {
			return err
		}
		for _, key := range keys {
			if _, ok := keyBytes[key]; !ok {
				return fmt.Errorf("Invalid key %q: must be one of %s", key, strings.Join(processKeys, ", "))
			}
		}
		work = func() error {
			for _, key := range keys {
				if err := p.pressKey(key); err != nil {
					return err
				}
			}
			return nil
		}
	}
	done := make(chan error, 1)
	mine := make(chan struct{})
	p.mu.Lock()
	previous := p.lastInput
	p.lastInput = mine
	p.mu.Unlock()
	go func() {
		defer close(mine)
		<-previous
		done <- work()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return errors.New("Operation aborted")
	}
}

// waitForProcess waits for the process tool: until the process exits, the
// timeout (ms) passes, or the run is aborted.
func (s *server) waitForProcess(ctx context.Context, r *request) (any, error) {
	timeout, _, err := r.optPositive("timeout")
	if err != nil {
		return nil, err
	}
	p, err := s.lookupProcess(r)
	if err != nil {
		return nil, err
	}
	res, ok := p.waitFor(ctx, time.Duration(timeout*float64(time.Millisecond)))
	if !ok {
		return nil, errors.New("Operation aborted")
	}
	return res, nil
}
