package main

// The model's tools: read, bash, edit, write, ls, grep, find, todo
// (todos.go), process and ask_user, with pi's names and parameters. A tool call is
// decoded once, strictly, into a value that can describe itself (what the
// approval dialog shows) and run; what is approved is what runs.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// tool is one tool the model can call.
type tool struct {
	name        string
	summary     string // one line for the system prompt
	description string
	guidelines  []string        // for the system prompt, when the tool is offered
	schema      json.RawMessage // JSON Schema of the arguments; also what decodeToolCall enforces
	accepts     json.RawMessage // what decodeToolCall enforces instead, when the tool takes more than schema says (edit)
	parseOnce   sync.Once       // parsed is decoded from accepts or schema at the tool's first call, not at startup
	parsed      map[string]any
	// decode builds the call from arguments already checked against
	// accepts (else schema).
	decode func(s *server, raw json.RawMessage) (toolCall, error)
}

// toolCall is one decoded call of a tool.
type toolCall interface {
	// describe says exactly what the call will do, for the approval
	// dialog: a title and a message whose values are escaped (§7).
	describe() (title, message string)
	// run does it; update streams partial results.
	run(ctx context.Context, s *server, call toolRun) (toolResult, error)
}

// preparer is a call that opens what it will change before the approval
// dialog is built from it (write, edit), so that the dialog and the run
// use the same open file; release lets go of it after the run or the
// denial.
type preparer interface {
	prepare(s *server) error
	release()
}

// toolRun is what a running call knows of itself.
type toolRun struct {
	id     string // the model's tool call id
	update func(toolResult)
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
var defaultTools = []string{"read", "bash", "edit", "write", "todo", "process", "ask_user"}

func init() {
	tools = []*tool{readTool, bashTool, editTool, writeTool, todoTool, processTool, askUserTool, lsTool, grepTool, findTool}
}

// params is what the tool's arguments are checked against (accepts, else
// schema), decoded once (TestToolSchemas proves that every schema decodes).
func (t *tool) params() map[string]any {
	t.parseOnce.Do(func() {
		checked := t.schema
		if t.accepts != nil {
			checked = t.accepts
		}
		if err := json.Unmarshal(checked, &t.parsed); err != nil {
			panic("tool " + t.name + ": bad schema: " + err.Error())
		}
	})
	return t.parsed
}

func toolNamed(name string) *tool {
	for _, t := range tools {
		if t.name == name {
			return t
		}
	}
	return nil
}

func toolNames() []string {
	var names []string
	for _, t := range tools {
		names = append(names, t.name)
	}
	return names
}

// activeTool finds a tool the model is offered.
func (s *server) activeTool(name string) *tool {
	for _, t := range s.set.tools {
		if t.name == name {
			return t
		}
	}
	return nil
}

// decodeToolCall decodes a call's arguments once, strictly: a JSON object
// whose keys are exactly the tool's parameters (no unknown, duplicate or
// differently-cased keys), each of its type.
func (s *server) decodeToolCall(name string, raw json.RawMessage) (toolCall, error) {
	t := s.activeTool(name)
	if t == nil {
		return nil, fmt.Errorf("Tool %s not found", name)
	}
	if err := checkArgs(raw, t.params()); err != nil {
		return nil, fmt.Errorf("Invalid arguments for %s: %v", name, err)
	}
	call, err := t.decode(s, raw)
	if err != nil {
		return nil, fmt.Errorf("Invalid arguments for %s: %v", name, err)
	}
	return call, nil
}

// ---- Strict arguments ----

// checkArgs checks raw against a schema: the subset of JSON Schema the
// tools use (type, properties, required, additionalProperties, items,
// enum, minimum, maximum). Objects allow no property the schema does not
// name, and no key twice.
func checkArgs(raw []byte, schema map[string]any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := checkValue(dec, schema, "", false); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("expected one JSON object")
	}
	return nil
}

func checkValue(dec *json.Decoder, schema map[string]any, path string, optional bool) error {
	tok, err := dec.Token()
	if err != nil {
		return errors.New("expected one JSON object")
	}
	types := schemaTypes(schema)
	if tok == nil {
		if optional || len(types) == 0 || slices.Contains(types, "null") {
			return nil
		}
		return typeError(path, types)
	}
	allows := func(t string) bool {
		return len(types) == 0 || slices.Contains(types, t) || t == "number" && slices.Contains(types, "integer")
	}
	switch tok := tok.(type) {
	case json.Delim:
		if tok == '{' {
			if !allows("object") {
				return typeError(path, types)
			}
			return checkObject(dec, schema, path)
		}
		if !allows("array") {
			return typeError(path, types)
		}
		items, _ := schema["items"].(map[string]any)
		for i := 0; dec.More(); i++ {
			if err := checkValue(dec, items, fmt.Sprintf("%s[%d]", path, i), false); err != nil {
				return err
			}
		}
		dec.Token()
	case string:
		if !allows("string") {
			return typeError(path, types)
		}
		if enum, ok := schema["enum"].([]any); ok && !slices.Contains(enum, any(tok)) {
			var names []string
			for _, v := range enum {
				names = append(names, fmt.Sprint(v))
			}
			return fmt.Errorf("field %q must be one of %s", path, strings.Join(names, ", "))
		}
	case json.Number:
		if !allows("number") {
			return typeError(path, types)
		}
		f, err := tok.Float64()
		if err != nil {
			return typeError(path, types)
		}
		if slices.Contains(types, "integer") && !slices.Contains(types, "number") && f != float64(int64(f)) {
			return fmt.Errorf("field %q must be a whole number", path)
		}
		if lo, ok := schema["minimum"].(float64); ok && f < lo {
			return fmt.Errorf("field %q must be at least %v", path, lo)
		}
		if hi, ok := schema["maximum"].(float64); ok && f > hi {
			return fmt.Errorf("field %q must be at most %v", path, hi)
		}
	case bool:
		if !allows("boolean") {
			return typeError(path, types)
		}
	}
	return nil
}

func checkObject(dec *json.Decoder, schema map[string]any, path string) error {
	props, _ := schema["properties"].(map[string]any)
	extra, _ := schema["additionalProperties"].(map[string]any)
	var required []string
	if list, ok := schema["required"].([]any); ok {
		for _, name := range list {
			required = append(required, name.(string))
		}
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return errors.New("expected one JSON object")
		}
		key := tok.(string)
		name := key
		if path != "" {
			name = path + "." + key
		}
		if seen[key] {
			return fmt.Errorf("field %q appears twice", name)
		}
		seen[key] = true
		sub, ok := props[key].(map[string]any)
		if !ok && extra == nil {
			known := slices.Sorted(func(yield func(string) bool) {
				for k := range props {
					if !yield(k) {
						return
					}
				}
			})
			return fmt.Errorf("unknown field %q (the fields are: %s)", name, strings.Join(known, ", "))
		}
		if !ok {
			sub = extra
		}
		if err := checkValue(dec, sub, name, !slices.Contains(required, key)); err != nil {
			return err
		}
	}
	dec.Token()
	for _, name := range required {
		if !seen[name] {
			if path != "" {
				name = path + "." + name
			}
			return fmt.Errorf("missing field %q", name)
		}
	}
	return nil
}

func schemaTypes(schema map[string]any) []string {
	switch t := schema["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var types []string
		for _, v := range t {
			types = append(types, fmt.Sprint(v))
		}
		return types
	}
	return nil
}

func typeError(path string, types []string) error {
	want := strings.Join(types, " or ")
	if path == "" {
		return fmt.Errorf("expected a JSON %s", want)
	}
	return fmt.Errorf("field %q must be %s", path, want)
}

// decodeChecked decodes arguments already checked by checkArgs.
func decodeChecked(raw json.RawMessage, v any) error { return json.Unmarshal(raw, v) }

// ---- Files ----

// toolPath resolves a path argument: a leading @ is dropped, ~ is the home
// directory, relative paths are taken from the session cwd.
func (s *server) toolPath(p string) string {
	p = strings.TrimPrefix(p, "@")
	if p == "~" || strings.HasPrefix(p, "~/") {
		home := s.env.getenv("HOME")
		p = filepath.Join(home, p[1:])
	}
	return resolvePath(s.set.cwd, p)
}

// errNotRegular says a path is not a regular file.
type errNotRegular struct {
	path, kind string
}

func (e *errNotRegular) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file", e.path, e.kind)
}

// fileKind names what a mode is, for errors.
func fileKind(mode os.FileMode) string {
	switch {
	case mode.IsDir():
		return "a directory"
	case mode&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case mode&os.ModeSocket != 0:
		return "a socket"
	case mode&os.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

// ownStdio is what rpi's own stdin, stdout and stderr are, so that no
// file tool reaches them even when they are regular files.
var ownStdio = sync.OnceValue(func() []os.FileInfo {
	var infos []os.FileInfo
	for _, f := range []*os.File{os.Stdin, os.Stdout, os.Stderr} {
		if info, err := f.Stat(); err == nil {
			infos = append(infos, info)
		}
	}
	return infos
})

// openRegularSized opens path for reading (openRegular), and gives its
// size.
func openRegularSized(path string) (io.ReadCloser, int64, error) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, info.Size(), nil
}

// openRegular opens path (following symlinks) only if it is a regular
// file, not one of rpi's own stdio and not on /proc or /sys: a FIFO,
// socket or device is refused before it is opened and checked again on
// the open file, and the open itself never blocks.
func openRegular(path string, flag int, perm os.FileMode) (*os.File, error) {
	if info, err := os.Stat(path); err == nil && !info.Mode().IsRegular() {
		return nil, &errNotRegular{path, fileKind(info.Mode())}
	}
	f, err := openNonBlocking(path, flag, perm)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	kind := ""
	if !info.Mode().IsRegular() {
		kind = fileKind(info.Mode())
	}
	for _, own := range ownStdio() {
		if kind == "" && os.SameFile(info, own) {
			kind = "rpi's own stdin, stdout or stderr"
		}
	}
	if kind == "" {
		kind = specialFileSystem(f)
	}
	if kind != "" {
		f.Close()
		return nil, &errNotRegular{path, kind}
	}
	return f, nil
}

// readRegularFile reads a whole regular file (see openRegular) of at most
// limit bytes.
func readRegularFile(path string, limit int64) ([]byte, error) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %s", path, formatSize(int(limit)))
	}
	return data, nil
}

// fileError is the message for a file that cannot be used.
func fileError(verb, path string, err error) error {
	var nr *errNotRegular
	if errors.As(err, &nr) {
		return fmt.Errorf("Cannot %s %s: it is %s; the file tools only use regular files", verb, path, nr.kind)
	}
	return fmt.Errorf("Cannot %s %s: %v", verb, path, unwrapPathError(err))
}

// unwrapPathError drops the op and path an *fs.PathError repeats.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

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

// lineReader reads lines split on "\n" (a final line without one counts,
// even when empty, as strings.Split would), keeping at most keep bytes of
// each but counting its full length, so a huge line costs no memory. It
// stops with the context's error when ctx ends, even within one line.
type lineReader struct {
	ctx  context.Context
	br   *bufio.Reader
	keep int
	done bool
}

func (lr *lineReader) next() (line []byte, length int, ok bool, err error) {
	if lr.done {
		return nil, 0, false, nil
	}
	for {
		if lr.ctx.Err() != nil {
			return nil, 0, false, errors.New("Operation aborted")
		}
		chunk, rerr := lr.br.ReadSlice('\n')
		ended := rerr == nil
		if ended {
			chunk = chunk[:len(chunk)-1]
		}
		length += len(chunk)
		if room := lr.keep - len(line); room > 0 {
			line = append(line, chunk[:min(room, len(chunk))]...)
		}
		switch {
		case ended:
			return line, length, true, nil
		case rerr == bufio.ErrBufferFull:
			continue
		case rerr == io.EOF:
			lr.done = true
			return line, length, true, nil
		default:
			return nil, 0, false, rerr
		}
	}
}

// ---- read ----

// maxImageBytes is the largest image read returns.
const maxImageBytes = 20 << 20

type readCall struct {
	path, abs     string
	offset, limit int
}

var readTool = &tool{
	name:    "read",
	summary: "Read file contents",
	description: "Read a file. Text comes back as lines (at most 2000 lines or 50KB at a time; use offset and limit to page " +
		"through long files). Images (png, jpeg, gif, webp) come back as images.",
	schema: schema(`{"type":"object","properties":{"path":{"type":"string","description":"File to read, relative to the working directory or absolute"},` +
		`"offset":{"type":"integer","description":"First line to read, from 1"},"limit":{"type":"integer","description":"How many lines to read"}},"required":["path"]}`),
	decode: func(s *server, raw json.RawMessage) (toolCall, error) {
		var a struct {
			Path          string
			Offset, Limit int
		}
		err := decodeChecked(raw, &a)
		return &readCall{a.Path, s.toolPath(a.Path), a.Offset, a.Limit}, err
	},
}

func (c *readCall) describe() (string, string) {
	return "Allow read of " + escapeControl(c.path) + "?", "Read " + escapeControl(c.abs)
}

func (c *readCall) run(ctx context.Context, s *server, _ toolRun) (toolResult, error) {
	f, err := openRegular(c.abs, os.O_RDONLY, 0)
	if err != nil {
		return toolResult{}, fileError("read", c.abs, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(16)
	if mime := imageType(head); mime != "" {
		data, err := io.ReadAll(io.LimitReader(br, maxImageBytes+1))
		if err != nil {
			return toolResult{}, fileError("read", c.abs, err)
		}
		if len(data) > maxImageBytes {
			return toolResult{}, fmt.Errorf("Cannot read %s: the image is larger than %s", c.abs, formatSize(maxImageBytes))
		}
		return toolResult{Content: []contentBlock{{Type: "text", Text: "Read image file [" + mime + "]"},
			{Type: "image", Data: base64.StdEncoding.EncodeToString(data), MimeType: mime}}}, nil
	}
	start := max(c.offset, 1) - 1
	lr := &lineReader{ctx: ctx, br: br, keep: maxOutputBytes + 1}
	var shown []string
	total, size, firstLength := 0, 0, 0
	cut, byBytes := false, false
	for {
		line, length, ok, err := lr.next()
		if ctx.Err() != nil {
			return toolResult{}, errors.New("Operation aborted")
		}
		if err != nil {
			return toolResult{}, fileError("read", c.abs, err)
		}
		if !ok {
			break
		}
		if total >= start && (c.limit <= 0 || total < start+c.limit) && !cut {
			if total == start {
				firstLength = length
			}
			switch {
			case len(shown) == maxOutputLines:
				cut = true
			case size+length > maxOutputBytes:
				cut, byBytes = true, true
			default:
				shown = append(shown, string(line))
				size += length + 1
			}
		}
		total++
		if total%4096 == 0 && ctx.Err() != nil {
			return toolResult{}, errors.New("Operation aborted")
		}
	}
	if start >= total {
		return toolResult{}, fmt.Errorf("Offset %d is beyond end of file (%d lines total)", c.offset, total)
	}
	end := total
	if c.limit > 0 {
		end = min(start+c.limit, total)
	}
	if len(shown) == 0 {
		return textResult(fmt.Sprintf("[Line %d is %s, exceeds %s limit. Use bash: sed -n '%dp' %s | head -c %d]",
			start+1, formatSize(firstLength), formatSize(maxOutputBytes), start+1, c.path, maxOutputBytes)), nil
	}
	text := strings.Join(shown, "\n")
	last := start + len(shown)
	switch {
	case len(shown) < end-start:
		limit := ""
		if byBytes {
			limit = fmt.Sprintf(" (%s limit)", formatSize(maxOutputBytes))
		}
		text += fmt.Sprintf("\n\n[Showing lines %d-%d of %d%s. Use offset=%d to continue.]", start+1, last, total, limit, last+1)
	case end < total:
		text += fmt.Sprintf("\n\n[%d more lines in file. Use offset=%d to continue.]", total-end, end+1)
	}
	return textResult(text), nil
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
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// ---- write ----

type writeCall struct {
	path, abs, content string
	target             *fileTarget // what prepare opened
	where              string      // where the path leads, for the dialog
}

var writeTool = &tool{
	name:        "write",
	summary:     "Create or overwrite files",
	description: "Write a file with the given content, creating it and its parent directories, or replacing it.",
	schema: schema(`{"type":"object","properties":{"path":{"type":"string","description":"File to write"},` +
		`"content":{"type":"string","description":"The whole new content"}},"required":["path","content"]}`),
	decode: func(s *server, raw json.RawMessage) (toolCall, error) {
		var a struct{ Path, Content string }
		err := decodeChecked(raw, &a)
		return &writeCall{path: a.Path, abs: s.toolPath(a.Path), content: a.Content}, err
	},
}

// prepare opens the file, or the folder a new one will be made in.
func (c *writeCall) prepare(s *server) error {
	target, err := s.openTarget(c.path, c.abs, true)
	if err != nil {
		return fileError("write", c.path, err)
	}
	c.target, c.where = target, target.where(s)
	return nil
}

func (c *writeCall) release() {
	if c.target != nil {
		c.target.close()
	}
}

func (c *writeCall) describe() (string, string) {
	what := "create it"
	if c.target.exists() {
		what = fmt.Sprintf("replace its %d bytes", c.target.id.Size())
	}
	return "Allow write to " + escapeControl(c.path) + "?",
		fmt.Sprintf("Write %d bytes to %s%s (%s):\n%s", len(c.content), escapeControl(c.path), c.where, what, showText("+ ", c.content))
}

func (c *writeCall) run(ctx context.Context, s *server, _ toolRun) (toolResult, error) {
	if ctx.Err() != nil {
		return toolResult{}, errors.New("Operation aborted")
	}
	if err := c.target.write("write", nil, []byte(c.content)); err != nil {
		return toolResult{}, err
	}
	return textResult(fmt.Sprintf("Successfully wrote %d bytes to %s", len(c.content), c.path)), nil
}

// replaceFile sets a regular file's content (creating it with extraFlag
// os.O_CREATE), keeping its mode.
func replaceFile(path string, content []byte, extraFlag int) error {
	f, err := openRegular(path, os.O_WRONLY|extraFlag, 0o644)
	if err != nil {
		return err
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.Write(content)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// showText lays out text for a dialog, each line after prefix, with
// control characters escaped; at most maxShownBytes are shown and the
// rest is counted.
func showText(prefix, text string) string {
	const maxShownBytes = 4096
	rest := ""
	if len(text) > maxShownBytes {
		cut := maxShownBytes
		for cut > 0 && !utf8RuneStart(text[cut]) {
			cut--
		}
		rest = fmt.Sprintf("\n(%d more bytes not shown)", len(text)-cut)
		text = text[:cut]
	}
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		lines[i] = prefix + escapeControl(line)
	}
	return strings.Join(lines, "\n") + rest
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// ---- bash ----

type bashCall struct {
	command string
	timeout time.Duration
}

var bashTool = &tool{
	name:    "bash",
	summary: "Execute bash commands (ls, grep, find, etc.)",
	description: "Run a command with bash in the working directory. Output (stdout and stderr together) is cut to its " +
		"last 2000 lines or 50KB; the full output is then saved to a file. A nonzero exit is an error.",
	schema: schema(`{"type":"object","properties":{"command":{"type":"string","description":"The command line"},` +
		`"timeout":{"type":"number","minimum":0.001,"maximum":86400,"description":"Seconds before the command is killed (default: none)"}},"required":["command"]}`),
	decode: func(s *server, raw json.RawMessage) (toolCall, error) {
		var a struct {
			Command string
			Timeout float64
		}
		err := decodeChecked(raw, &a)
		return &bashCall{a.Command, time.Duration(a.Timeout * float64(time.Second))}, err
	},
}

func (c *bashCall) describe() (string, string) {
	message := "Run: " + escapeControl(c.command)
	if c.timeout > 0 {
		message += fmt.Sprintf("\nTimeout: %gs", c.timeout.Seconds())
	}
	return "Allow bash?", message
}

func (c *bashCall) run(ctx context.Context, s *server, call toolRun) (toolResult, error) {
	var out *shellOutput
	var lastUpdate time.Time
	out = newShellOutput(s.temp, s.stderr, func(string, string) {
		// Called with out.mu held: send the tail so far, at most every 50 ms.
		if time.Since(lastUpdate) >= 50*time.Millisecond {
			lastUpdate = time.Now()
			text, _ := out.combined.text()
			call.update(textResult(text))
		}
	})
	ps, timedOut, err := s.runShell(ctx, c.command, c.timeout, out)
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
		return toolResult{Details: details}, fmt.Errorf("%s\n\nCommand timed out after %g seconds", text, c.timeout.Seconds())
	case code == nil || *code != 0:
		status := "was killed by a signal"
		if code != nil {
			status = fmt.Sprintf("exited with code %d", *code)
		}
		return toolResult{Details: details}, fmt.Errorf("%s\n\nCommand %s", text, status)
	}
	return toolResult{Content: textBlocks(text), Details: details}, nil
}

// ---- ls ----

type lsCall struct {
	path, abs string
	limit     int
}

var lsTool = &tool{
	name:        "ls",
	summary:     "List directory contents",
	description: "List a directory, sorted by name; directories end with /. Dotfiles are included.",
	schema: schema(`{"type":"object","properties":{"path":{"type":"string","description":"Directory (default: the working directory)"},` +
		`"limit":{"type":"integer","minimum":1,"description":"Most entries to list (default 500)"}}}`),
	decode: func(s *server, raw json.RawMessage) (toolCall, error) {
		var a struct {
			Path  string
			Limit int
		}
		err := decodeChecked(raw, &a)
		return &lsCall{a.Path, s.toolPath(a.Path), cmpOrInt(a.Limit, 500)}, err
	},
}

func (c *lsCall) describe() (string, string) {
	return "Allow ls of " + escapeControl(c.abs) + "?", "List " + escapeControl(c.abs)
}

func (c *lsCall) run(ctx context.Context, s *server, _ toolRun) (toolResult, error) {
	info, err := os.Stat(c.abs)
	switch {
	case err != nil:
		return toolResult{}, fmt.Errorf("Path not found: %s", c.abs)
	case !info.IsDir():
		return toolResult{}, fmt.Errorf("Not a directory: %s", c.abs)
	}
	entries, err := os.ReadDir(c.abs)
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
	return listResult(names[:min(c.limit, len(names))], "(empty directory)", len(names) > c.limit,
		fmt.Sprintf("%d entries limit reached. Use limit=%d for more", c.limit, 2*c.limit)), nil
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
	depth := 0
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
			depth++
		case c == '}' && depth > 0:
			b.WriteString(")")
			depth--
		case c == ',' && depth > 0:
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
	data, err := readRegularFile(filepath.Join(root, ".gitignore"), 1<<20)
	if err != nil {
		return nil
	}
	var rules []ignoreRule
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
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

// walk visits the regular files and directories under root (or root
// itself when it is a file), skipping .git, what the root .gitignore lists,
// and everything that is neither (FIFOs, sockets, devices), with paths
// relative to root. fn returns false to stop; an ended ctx stops it too.
func walk(ctx context.Context, root string, fn func(rel, path string, isDir bool) bool) error {
	if resolved, err := filepath.EvalSymlinks(root); err == nil {
		root = resolved // a symlink to a directory is walked as that directory
	}
	info, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("Path not found: %s", root)
	}
	if !info.IsDir() {
		if info.Mode().IsRegular() {
			fn(filepath.Base(root), root, false)
		}
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
		if !d.IsDir() && !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
			return nil // FIFOs, sockets, devices
		}
		if !fn(rel, path, d.IsDir()) {
			return stop
		}
		return nil
	})
	switch {
	case err == stop:
		return nil
	case ctx.Err() != nil:
		return errors.New("Operation aborted")
	}
	return err
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

// listResult is a tool result of lines: emptyText when there are none,
// and notice in brackets after them when the list was cut.
func listResult(lines []string, emptyText string, cut bool, notice string) toolResult {
	if len(lines) == 0 {
		return textResult(emptyText)
	}
	if kept, byBytes := headLines(lines, len(lines), maxOutputBytes); byBytes {
		lines, cut = kept, true
		notice = fmt.Sprintf("Output cut at %s; %s", formatSize(maxOutputBytes), notice)
	}
	text := strings.Join(lines, "\n")
	if cut {
		text += "\n\n[" + notice + "]"
	}
	return textResult(text)
}

// ---- find ----

type findCall struct {
	pattern, abs string
	re           *regexp.Regexp
	limit        int
}

var findTool = &tool{
	name:    "find",
	summary: "Find files by glob pattern (respects .gitignore)",
	description: "Find files and directories whose path matches a glob (*, ?, **, {a,b}); a pattern without / matches " +
		"names. Paths are relative; directories end with /. .git and what .gitignore lists are skipped.",
	schema: schema(`{"type":"object","properties":{"pattern":{"type":"string","description":"Glob, e.g. *.go or src/**/test_*.py"},` +
		`"path":{"type":"string","description":"Directory to search (default: the working directory)"},"limit":{"type":"integer","minimum":1,"description":"Most results (default 1000)"}},"required":["pattern"]}`),
	decode: func(s *server, raw json.RawMessage) (toolCall, error) {
		var a struct {
			Pattern, Path string
			Limit         int
		}
		if err := decodeChecked(raw, &a); err != nil {
			return nil, err
		}
		re, err := globRegexp(a.Pattern)
		if err != nil {
			return nil, fmt.Errorf("invalid pattern: %v", err)
		}
		return &findCall{a.Pattern, s.toolPath(a.Path), re, cmpOrInt(a.Limit, 1000)}, nil
	},
}

func (c *findCall) describe() (string, string) {
	return "Allow find in " + escapeControl(c.abs) + "?", "Find " + strconv.Quote(c.pattern) + " in " + escapeControl(c.abs)
}

func (c *findCall) run(ctx context.Context, s *server, _ toolRun) (toolResult, error) {
	byName := !strings.Contains(c.pattern, "/")
	var found []string
	cut := false
	err := walk(ctx, c.abs, func(rel, _ string, isDir bool) bool {
		subject := rel
		if byName {
			subject = filepath.Base(rel)
		}
		if !c.re.MatchString(subject) {
			return true
		}
		if len(found) == c.limit {
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
		fmt.Sprintf("%d results limit reached. Use limit=%d for more, or refine pattern", c.limit, 2*c.limit)), nil
}

// ---- ask_user ----

type askUserCall struct {
	question, placeholder string
	options               []string
	multiline             bool
}

var askUserTool = &tool{
	name:    "ask_user",
	summary: "Ask the user a question and wait for the answer",
	description: "Ask the user something only they can answer. With options the user picks one; with multiline " +
		"they write longer text; otherwise they type a short answer. The answer comes back as text.",
	schema: schema(`{"type":"object","properties":{"question":{"type":"string"},"options":{"type":"array","items":{"type":"string"},` +
		`"description":"Choices to pick from"},"multiline":{"type":"boolean","description":"Ask for longer, multi-line text"},` +
		`"placeholder":{"type":"string","description":"Hint shown in an empty answer field"}},"required":["question"]}`),
	decode: func(s *server, raw json.RawMessage) (toolCall, error) {
		var a struct {
			Question    string
			Options     []string
			Multiline   bool
			Placeholder string
		}
		err := decodeChecked(raw, &a)
		return &askUserCall{a.Question, a.Placeholder, a.Options, a.Multiline}, err
	},
}

func (c *askUserCall) describe() (string, string) {
	return "Allow ask_user?", "Ask: " + escapeControl(c.question)
}

func (c *askUserCall) run(ctx context.Context, s *server, _ toolRun) (toolResult, error) {
	req := uiRequest{Method: "input", Title: c.question, Placeholder: c.placeholder}
	switch {
	case len(c.options) > 0:
		req = uiRequest{Method: "select", Title: c.question, Options: c.options}
	case c.multiline:
		req = uiRequest{Method: "editor", Title: c.question}
	}
	answer := s.ask(ctx, req)
	if answer.cancelled || answer.value == nil {
		return textResult("The user cancelled the question without answering."), nil
	}
	return textResult(*answer.value), nil
}

// ---- process ----

// processActions are the process tool's actions, and the fields each
// takes beside action: §11's commands for the model.
var processActions = map[string][]string{
	"spawn":    {"spec"},
	"list":     {},
	"describe": {"processId"},
	"logs":     {"processId", "cursor", "limitBytes"},
	"write":    {"processId", "dataBase64", "closeStdin"},
	"keys":     {"processId", "keys"},
	"resize":   {"processId", "cols", "rows"},
	"signal":   {"processId", "signal"},
	"stop":     {"processId"},
	"wait":     {"processId", "timeoutMs"},
	"remove":   {"processId"},
}

type processCall struct {
	action     string
	spec       processSpec
	processID  string
	cursor     int64
	limitBytes int
	data       []byte
	closeStdin bool
	keys       []string
	cols, rows int
	signal     string
	timeout    time.Duration
}

var processTool = &tool{
	name:    "process",
	summary: "Run and control background processes (servers, watchers, REPLs)",
	description: "Manage long-running processes without blocking. spawn starts one from spec {argv (run directly, no shell; " +
		"use [\"bash\",\"-c\",\"…\"] for a shell), cwd, env, tty, terminalSize, label, timeoutMs, outputBytes}; list, " +
		"describe, logs (output from a byte cursor), write (dataBase64 to stdin, closeStdin), keys (ENTER, CTRL_C, UP, …), " +
		"resize, signal (SIGINT, SIGKILL, …), stop, wait (timeoutMs) and remove (forget an ended process) take its " +
		"processId. The user sees the output as it happens.",
	schema: schema(`{"type":"object","properties":{"action":{"type":"string","enum":["spawn","list","describe","logs","write","keys","resize","signal","stop","wait","remove"]},` +
		`"spec":{"type":"object","properties":{"argv":{"type":"array","items":{"type":"string"}},"cwd":{"type":"string"},` +
		`"env":{"type":"object","additionalProperties":{"type":["string","null"]}},"tty":{"type":"boolean"},` +
		`"terminalSize":{"type":"object","properties":{"rows":{"type":"integer"},"cols":{"type":"integer"}},"required":["rows","cols"]},` +
		`"label":{"type":"string"},"timeoutMs":{"type":"integer"},"outputBytes":{"type":"integer"}},"required":["argv"]},` +
		`"processId":{"type":"string"},"cursor":{"type":"integer","minimum":0},"limitBytes":{"type":"integer","minimum":1,"maximum":16777216},` +
		`"dataBase64":{"type":"string"},"closeStdin":{"type":"boolean"},"keys":{"type":"array","items":{"type":"string"}},` +
		`"cols":{"type":"integer","minimum":1,"maximum":65535},"rows":{"type":"integer","minimum":1,"maximum":65535},` +
		`"signal":{"type":"string","enum":` + jsonStrings(processSignals) + `},` +
		`"timeoutMs":{"type":"integer","minimum":1,"maximum":86400000}},"required":["action"]}`),
	decode: decodeProcessCall,
}

func decodeProcessCall(s *server, raw json.RawMessage) (toolCall, error) {
	var fields map[string]json.RawMessage
	json.Unmarshal(raw, &fields)
	var c processCall
	json.Unmarshal(fields["action"], &c.action)
	allowed := processActions[c.action]
	for name, value := range fields {
		if name != "action" && string(value) != "null" && !slices.Contains(allowed, name) {
			return nil, fmt.Errorf("field %q does not go with action %s (it takes: %s)", name, c.action, strings.Join(allowed, ", "))
		}
	}
	// number reads a whole number the schema has checked (1000.0 and 1e3
	// are whole numbers too).
	number := func(name string, otherwise int64) int64 {
		var f float64
		if json.Unmarshal(fields[name], &f) != nil {
			return otherwise
		}
		return int64(f)
	}
	need := func(name string) error {
		if raw, ok := fields[name]; !ok || string(raw) == "null" {
			return fmt.Errorf("action %s needs field %q", c.action, name)
		}
		return nil
	}
	if slices.Contains(allowed, "processId") {
		if err := need("processId"); err != nil {
			return nil, err
		}
		json.Unmarshal(fields["processId"], &c.processID)
	}
	var err error
	switch c.action {
	case "spawn":
		if err := need("spec"); err != nil {
			return nil, err
		}
		if c.spec, err = decodeProcessSpec(fields["spec"], s.set.cwd); err != nil {
			return nil, err
		}
	case "logs":
		c.cursor = number("cursor", 0)
		c.limitBytes = int(number("limitBytes", defaultLogBytes))
	case "write":
		var text string
		json.Unmarshal(fields["dataBase64"], &text)
		if c.data, err = base64.StdEncoding.DecodeString(text); err != nil {
			return nil, errors.New(`field "dataBase64" must be base64`)
		}
		json.Unmarshal(fields["closeStdin"], &c.closeStdin)
		if len(c.data) == 0 && !c.closeStdin {
			return nil, errors.New(`action write needs non-empty "dataBase64", or "closeStdin": true`)
		}
	case "keys":
		json.Unmarshal(fields["keys"], &c.keys)
		if _, err := keyInput(c.keys); err != nil || len(c.keys) == 0 {
			return nil, fmt.Errorf(`field "keys" must be a non-empty array of keys, each one of %s`, strings.Join(processKeys, ", "))
		}
	case "resize":
		if err := need("cols"); err != nil {
			return nil, err
		}
		if err := need("rows"); err != nil {
			return nil, err
		}
		c.cols, c.rows = int(number("cols", 0)), int(number("rows", 0))
	case "signal":
		if err := need("signal"); err != nil {
			return nil, err
		}
		json.Unmarshal(fields["signal"], &c.signal)
	case "wait":
		c.timeout = msDuration(number("timeoutMs", 0))
	}
	return &c, nil
}

// shownValue is a value for a dialog: quoted, escaped, and cut at 200
// bytes with the rest counted.
func shownValue(v string) string {
	if len(v) <= 200 {
		return escapeControl(strconv.Quote(v))
	}
	return escapeControl(strconv.Quote(strings.ToValidUTF8(v[:200], ""))) + fmt.Sprintf("…(%d bytes in all)", len(v))
}

// dangerousEnv reports whether a variable changes what a program runs or
// loads (so the approval dialog shows its value, not only its name).
func dangerousEnv(key string) bool {
	for _, prefix := range []string{"LD_", "DYLD_", "BASH_FUNC_", "GIT_", "PYTHON", "PERL", "RUBY", "NODE_", "JAVA_", "GCONV", "MALLOC_"} {
		if strings.HasPrefix(key, prefix) {
			return true
		}
	}
	return slices.Contains([]string{"PATH", "BASH_ENV", "ENV", "IFS", "PS4", "SHELLOPTS", "BASHOPTS", "PROMPT_COMMAND",
		"CDPATH", "HOME", "SHELL", "EDITOR", "VISUAL", "PAGER", "TMPDIR", "ZDOTDIR", "LESSOPEN", "CLASSPATH"}, key) ||
		strings.HasSuffix(key, "_OPTIONS") || strings.HasSuffix(key, "PATH") || strings.HasSuffix(key, "LIB")
}

func (c *processCall) describe() (string, string) {
	title := "Allow process " + c.action + "?"
	switch c.action {
	case "spawn":
		var argv []string
		for _, a := range c.spec.Argv {
			argv = append(argv, escapeControl(strconv.Quote(a)))
		}
		lines := []string{"Start: " + strings.Join(argv, " "), "cwd: " + escapeControl(c.spec.Cwd)}
		if len(c.spec.Env) > 0 {
			var env []string
			for _, key := range slices.Sorted(func(yield func(string) bool) {
				for k := range c.spec.Env {
					if !yield(k) {
						return
					}
				}
			}) {
				v := c.spec.Env[key]
				switch {
				case v == nil:
					env = append(env, escapeControl(key)+" (removed)")
				case dangerousEnv(key):
					env = append(env, escapeControl(key)+"="+shownValue(*v)+" (changes what runs)")
				default:
					env = append(env, escapeControl(key)+"="+shownValue(*v))
				}
			}
			lines = append(lines, "env: "+strings.Join(env, ", "))
		}
		tty := "tty: no"
		if c.spec.TTY {
			rows, cols := 24, 80
			if t := c.spec.TerminalSize; t != nil {
				rows, cols = t.Rows, t.Cols
			}
			tty = fmt.Sprintf("tty: yes (%d rows × %d cols)", rows, cols)
		}
		lines = append(lines, tty)
		if c.spec.Label != "" {
			lines = append(lines, "label: "+escapeControl(c.spec.Label))
		}
		if c.spec.TimeoutMs > 0 {
			lines = append(lines, fmt.Sprintf("timeout: %d ms", c.spec.TimeoutMs))
		}
		return title, strings.Join(lines, "\n")
	case "list":
		return title, "List the background processes"
	case "describe", "logs", "wait":
		return title, fmt.Sprintf("%s process %s", c.action, escapeControl(c.processID))
	case "write":
		what := fmt.Sprintf("Write %d bytes to the stdin of process %s:\n%s", len(c.data), escapeControl(c.processID), showText("", string(c.data)))
		if c.closeStdin {
			what += "\nthen close its stdin"
		}
		return title, what
	case "keys":
		return title, fmt.Sprintf("Press %s in process %s", strings.Join(c.keys, " "), escapeControl(c.processID))
	case "signal":
		return title, fmt.Sprintf("Send %s to process %s", c.signal, escapeControl(c.processID))
	case "resize":
		return title, fmt.Sprintf("Resize the terminal of process %s to %d rows × %d cols", escapeControl(c.processID), c.rows, c.cols)
	}
	return title, fmt.Sprintf("%s process %s", c.action, escapeControl(c.processID))
}

// Run does the action. The model may look at every process (describe,
// logs, wait, list) but change only those it started: a process the
// client started is the client's to write to, signal, stop or remove.

func (c *processCall) run(ctx context.Context, s *server, call toolRun) (toolResult, error) {
	if c.action == "spawn" {
		p, err := s.spawn(c.spec, "tool:"+call.id, func(processInfo) {})
		if err != nil {
			return toolResult{}, err
		}
		return jsonResult(p.info())
	}
	if c.action == "list" {
		return jsonResult(s.listProcesses()) // process_list's answer
	}
	p, err := s.findProcess(c.processID)
	if err != nil {
		return toolResult{}, err
	}
	if !slices.Contains([]string{"describe", "logs", "wait"}, c.action) && !strings.HasPrefix(p.ownerID, "tool:") {
		return toolResult{}, fmt.Errorf("process %s was started by the client: the process tool can look at it, not %s it", p.id, c.action)
	}
	done := func(err error) (toolResult, error) {
		if err != nil {
			return toolResult{}, err
		}
		return textResult("done"), nil
	}
	switch c.action {
	case "describe":
		return jsonResult(p.info())
	case "logs":
		logs, data := p.logs(c.cursor, c.limitBytes)
		return jsonResult(struct {
			RequestedCursor int64  `json:"requestedCursor"`
			StartCursor     int64  `json:"startCursor"`
			Cursor          int64  `json:"cursor"`
			Lost            bool   `json:"lost"`
			LostBytes       int64  `json:"lostBytes"`
			EOF             bool   `json:"eof"`
			Text            string `json:"text"`
		}{logs.RequestedCursor, logs.StartCursor, logs.Cursor, logs.Lost, logs.LostBytes, logs.EOF, strings.ToValidUTF8(string(data), "\uFFFD")})
	case "write":
		return done(p.inputAndWait(ctx, c.data, c.closeStdin))
	case "keys":
		data, _ := keyInput(c.keys)
		return done(p.inputAndWait(ctx, data, false))
	case "resize":
		return done(p.resize(c.rows, c.cols))
	case "signal":
		return done(p.sendSignal(signalNumbers[c.signal], func() {}))
	case "stop":
		return jsonResult(p.stop())
	case "wait":
		info, err := p.wait(ctx, c.timeout)
		if err != nil {
			return toolResult{}, err
		}
		return jsonResult(info)
	case "remove":
		return done(s.removeProcess(p))
	}
	return toolResult{}, fmt.Errorf("unknown action %s", c.action)
}

// jsonResult is a tool result holding v as JSON text.
func jsonResult(v any) (toolResult, error) {
	text, err := marshalJSON(v)
	return textResult(string(text)), err
}

func schema(s string) json.RawMessage { return json.RawMessage(s) }

// jsonStrings writes a list of names as a JSON array, for a schema's enum.
func jsonStrings(names []string) string {
	return string(appendJSONStrings(nil, names))
}
