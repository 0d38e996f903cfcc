package main

// The model's tools, with pi's names and parameters: what a tool is, the
// list of them, strict decoding of a call's arguments, and the bash and
// ask_user tools; read, write, ls and find are in tools_fs.go, edit in
// edit.go, grep in grep.go, todo in todos.go, process in tool_process.go.
// A tool call is decoded once, strictly, into a value that can describe
// itself (what the approval dialog shows) and run; what is approved is
// what runs.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"slices"
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
	strict      bool            // asks for strict sampling where the model's host offers it (tool_strict.go)
	strictOnce  [2]sync.Once    // strictSchemas are made once (strictFor), not once a request
	strictMade  [2]strictSchema // for any host, for Anthropic
	parseOnce   sync.Once       // parsed is decoded from accepts or schema at the tool's first call, not at startup
	parsed      map[string]any
	// decode builds the call from arguments already checked against
	// accepts (else schema).
	decode func(s *session, raw json.RawMessage) (toolCall, error)
}

// toolCall is one decoded call of a tool.
type toolCall interface {
	// describe says exactly what the call will do, for the approval
	// dialog: a title and a message whose values are escaped (docs/ui.md).
	describe() (title, message string)
	// run does it; update streams partial results.
	run(ctx context.Context, s *session, call toolRun) (toolResult, error)
}

// preparer is a call that opens what it will change before the approval
// dialog is built from it (write, edit), so that the dialog and the run
// use the same open file; release lets go of it after the run or the
// denial. prepare's error is why the call cannot be done: the call's
// result, given to the model at once when its tool is not behind the
// approval gate, and otherwise only when the user allows it (runDecoded).
type preparer interface {
	prepare(ctx context.Context, s *session) error
	release()
}

// toolRun is what a running call knows of itself.
type toolRun struct {
	id string // the model's tool call id
	// update posts a partial result (tool_execution_update); it may be
	// called under a lock of the tool's, and is delivered with what the
	// session posts next (shellOutput delivers once its lock is let go of).
	update func(toolResult)
	images imageLimits // what an image it gives is made to fit: its turn's model's profile
}

// toolResult is what a tool gives back: content for the model, details
// for the client (left out when there are none).
type toolResult struct {
	Content []contentBlock `json:"content"`
	Details any            `json:"details,omitempty"`

	change *fileChange // what a write or an edit did to its file (for a front end's diff)
	shell  *shellEnd   // how bash's command ended (for a front end's terminal)
}

// toolFailure is a tool's error that has a result of its own (an MCP
// tool's result its server marks isError, with its images): the model
// gets that result, as an error.
type toolFailure struct{ result toolResult }

func (f *toolFailure) Error() string { return joinTexts(f.result.Content) }

// shellEnd is how a bash call's command ended, as the call knows it (not
// read back from its text, which the command's output can imitate): its
// output, without the notes rpi adds for the model, and its exit code
// (nil when a signal, an abort or a timeout ended it).
type shellEnd struct {
	output   string
	exitCode *int
}

func textResult(text string) toolResult { return toolResult{Content: textBlocks(text)} }

// allTools lists every tool in the default order of --tools.
var allTools = []*tool{readTool, bashTool, editTool, writeTool, todoTool, processTool, askUserTool, lsTool, grepTool, findTool}

// defaultTools are active without --tools.
var defaultTools = []string{"read", "bash", "edit", "write", "todo", "process", "ask_user"}

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
	for _, t := range allTools {
		if t.name == name {
			return t
		}
	}
	return nil
}

func toolNames() []string {
	var names []string
	for _, t := range allTools {
		names = append(names, t.name)
	}
	return names
}

// activeTool finds a tool the model is offered.
func (s *session) activeTool(name string) *tool {
	for _, t := range s.tools() {
		if t.name == name {
			return t
		}
	}
	if strings.HasPrefix(name, "mcp__") || name == toolSearchTool.name || strings.Contains(name, "_mcp_resource") {
		return s.mcp.find(name)
	}
	return nil
}

// offeredTools are the tools the model is declared in its next request:
// the session's, then its MCP servers' (those connected by then).
func (s *session) offeredTools() []*tool {
	tools, mcp := s.tools(), s.mcp.offered()
	if len(mcp) == 0 {
		return tools
	}
	return append(slices.Clip(tools), mcp...)
}

// confirmMCPUnmarked, among the tools behind the approval gate, stands
// for every MCP tool its server does not mark read-only (readOnlyHint):
// ACP's ask and edits modes put it there.
const confirmMCPUnmarked = "mcp-unless-read-only"

// confirms reports whether a call of the tool named name waits for the
// user's approval: its name is in confirm, or, for an MCP tool, "mcp"
// (every MCP tool) or a pattern mcp__NAME__* that its name starts with.
//
// The resource tools (list_mcp_resources, …), which reach every server,
// wait whenever any MCP pattern is given. A pattern's server name is
// spelled as tool names spell it (mcp__my-server__* is mcp__my_server__).
// confirmMCPUnmarked is every MCP tool but those whose server marks them
// read-only (call says which; a call not known counts as not marked).
func confirms(confirm []string, name string, call toolCall) bool {
	resources := slices.Contains(mcpResourceToolNames, name)
	for _, c := range confirm {
		server, pattern := strings.CutSuffix(strings.TrimPrefix(c, "mcp__"), "__*")
		pattern = pattern && strings.HasPrefix(c, "mcp__")
		switch {
		case c == name:
			return true
		case c == confirmMCPUnmarked && strings.HasPrefix(name, "mcp__"):
			if mc, ok := call.(*mcpCall); !ok || !mc.tool.readOnly {
				return true
			}
		case resources && (c == "mcp" || pattern):
			return true
		case !strings.HasPrefix(name, "mcp__"):
		case c == "mcp", pattern && strings.HasPrefix(name, "mcp__"+mcpSanitize(server)+"__"):
			return true
		}
	}
	return false
}

// decodeToolCall decodes a call's arguments once, strictly: a JSON object
// whose keys are exactly the tool's parameters (no unknown, duplicate or
// differently-cased keys), each of its type. The call it returns is what
// the front ends show (the approval dialog, ACP's tool card) and what runs.
func (s *session) decodeToolCall(name string, raw json.RawMessage) (toolCall, error) {
	t := s.activeTool(name)
	if t == nil {
		return nil, fmt.Errorf("Tool %s not found", name)
	}
	return s.decodeArgs(t, raw)
}

// decodeRecordedCall decodes a call from the session's history (ACP's
// session/load replays it) with the same strict decoder as a live call,
// whether or not its tool is offered now.
func (s *session) decodeRecordedCall(name string, raw json.RawMessage) (toolCall, error) {
	t := toolNamed(name)
	if t == nil {
		return nil, fmt.Errorf("Tool %s not found", name)
	}
	return s.decodeArgs(t, raw)
}

// decodeArgs checks raw against t's parameters and builds its call; a
// panic in t's decoder is the call's error (its stack to stderr).
func (s *session) decodeArgs(t *tool, raw json.RawMessage) (call toolCall, err error) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(s.stderr, "rpi: panic in tool %s: %v\n%s", t.name, p, debug.Stack())
			call, err = nil, fmt.Errorf("Internal error in tool %s: %v", t.name, p)
		}
	}()
	if text, ok := argsNotJSON(raw); ok {
		return nil, fmt.Errorf("Invalid arguments for %s: they are not a JSON object: %s", t.name, clip(text, 200))
	}
	if err := checkArgs(raw, t.params()); err != nil {
		return nil, fmt.Errorf("Invalid arguments for %s: %v", t.name, err)
	}
	if call, err = t.decode(s, raw); err != nil {
		return nil, fmt.Errorf("Invalid arguments for %s: %v", t.name, err)
	}
	return call, nil
}

// argsNotJSON reports the text of a call's arguments that were not a
// JSON object, which the stream kept as text in one ({"_raw": text}, so
// that the call goes back to the APIs as an object): the model is told
// that, not of a field it never sent.
func argsNotJSON(raw json.RawMessage) (text string, ok bool) {
	if !bytes.HasPrefix(raw, []byte(`{"_raw":`)) {
		return "", false
	}
	var kept map[string]json.RawMessage
	if json.Unmarshal(raw, &kept) != nil || len(kept) != 1 || json.Unmarshal(kept["_raw"], &text) != nil {
		return "", false
	}
	return text, true
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
		// An int written as one is taken as it is: float64 rounds the
		// largest (math.MaxInt) up, past it.
		_, isInt := strconv.ParseInt(string(tok), 10, strconv.IntSize)
		if slices.Contains(types, "integer") && !slices.Contains(types, "number") && isInt != nil {
			switch {
			case f != math.Trunc(f):
				return fmt.Errorf("field %q must be a whole number", path)
			case f >= -float64(math.MinInt): // past an int (64 or 32 bits), which the tools decode it into
				return fmt.Errorf("field %q must be at most %d", path, math.MaxInt)
			case f < float64(math.MinInt):
				return fmt.Errorf("field %q must be at least %d", path, math.MinInt)
			}
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

// decodeChecked decodes arguments already checked by checkArgs. A whole
// number written as a fraction or with an exponent (100.0, 1e3), which
// checkArgs takes for an integer as JSON Schema does, is read as that
// integer: encoding/json refuses such a number for an int field.
func decodeChecked(raw json.RawMessage, v any) error { return json.Unmarshal(wholeNumbers(raw), v) }

// wholeNumbers is raw with every whole number that is written as a
// fraction or with an exponent (100.0, 1e3) written as an integer, and
// raw itself when it holds none.
func wholeNumbers(raw []byte) []byte {
	if !bytes.ContainsAny(raw, ".eE") {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out []byte
	copied := 0 // raw[:copied] is in out
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		n, ok := tok.(json.Number)
		if !ok || !strings.ContainsAny(string(n), ".eE") {
			continue
		}
		f, err := n.Float64()
		if err != nil || f != math.Trunc(f) || math.Abs(f) >= 1<<63 {
			continue
		}
		end := int(dec.InputOffset())
		out = append(out, raw[copied:end-len(n)]...)
		out = strconv.AppendInt(out, int64(f), 10)
		copied = end
	}
	if out == nil {
		return raw
	}
	return append(out, raw[copied:]...)
}

// ---- bash ----

type bashCall struct {
	command string
	timeout time.Duration
}

var bashTool = &tool{
	name:    "bash",
	strict:  true,
	summary: "Execute bash commands (ls, grep, find, etc.)",
	description: "Run a command with bash in the working directory. Output (stdout and stderr together) is cut to its " +
		"last 2000 lines or 50KB; the full output is then saved to a file. A nonzero exit is an error.",
	guidelines: []string{"You can inspect PI_* environment variables for current model and session details."},
	schema: schema(`{
		"type": "object",
		"properties": {
			"command": {"type": "string", "description": "The command line"},
			"timeout": {
				"type": "number",
				"minimum": 0.001,
				"maximum": 86400,
				"description": "Seconds before the command is killed (default: none)"
			}
		},
		"required": ["command"]
	}`),
	decode: func(s *session, raw json.RawMessage) (toolCall, error) {
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

func (c *bashCall) run(ctx context.Context, s *session, call toolRun) (toolResult, error) {
	if s.commands != nil {
		checkCallout("the command runner")
		end, taken, err := s.commands.runCommand(ctx, commandCall{id: call.id, command: c.command, cwd: s.set.cwd,
			timeout: c.timeout, keep: 2 * maxOutputBytes})
		switch {
		case taken && err != nil:
			return toolResult{}, err
		case taken:
			return c.endedElsewhere(ctx, end)
		}
	}
	var out *shellOutput
	var lastUpdate time.Time
	out = newShellOutput(s, func(string, string) {
		// Called with out.mu held: post the tail so far, at most every 50 ms.
		if now := s.env.clock.Now(); now.Sub(lastUpdate) >= 50*time.Millisecond {
			lastUpdate = now
			text, _ := out.combined.text()
			call.update(textResult(text))
		}
	})
	end, err := s.runShell(ctx, c.command, s.sessionEnv(), c.timeout, out)
	if err != nil {
		return toolResult{}, err
	}
	code := end.exitCode()
	res := out.finish(code, false)
	text := res.Output
	if text == "" {
		text = "(no output)"
	}
	var details any
	switch {
	case res.FullOutputPath != "":
		text += fmt.Sprintf("\n\n[Showing the last %d lines of %d. Full output: %s]",
			lineCount(res.Output), out.combined.lines(), res.FullOutputPath)
		details = map[string]string{"fullOutputPath": res.FullOutputPath}
	case res.Truncated:
		text += fmt.Sprintf("\n\n[Showing the last %d lines of %d. The full output could not be saved: %v]",
			lineCount(res.Output), out.combined.lines(), res.fullErr)
	}
	killed := "was killed by a signal"
	if _, sig := exitStatus(end.ps); sig != 0 {
		killed = "was killed by signal " + signalName(sig)
	}
	return c.result(ctx, text, details, &shellEnd{res.Output, code}, end.timedOut, killed)
}

// endedElsewhere is the result of a command a commandRunner ran, in the
// shape of rpi's own: its output cut to the same tail (the last 2000
// lines or 50KB), and a note when something was cut (there is no file
// with the rest: the runner kept only the end).
func (c *bashCall) endedElsewhere(ctx context.Context, end commandEnd) (toolResult, error) {
	output := string(cutTail([]byte(end.output), maxOutputLines, maxOutputBytes))
	text := output
	if text == "" {
		text = "(no output)"
	}
	if end.truncated || len(output) < len(end.output) {
		text += fmt.Sprintf("\n\n[Showing the last %d lines; the output before them was not kept]", lineCount(output))
	}
	killed := "ended without an exit code"
	if end.signal != "" {
		killed = "was killed by signal " + end.signal
	}
	return c.result(ctx, text, nil, &shellEnd{output, end.exitCode}, end.timedOut, killed)
}

// result is a bash call's result from its text (the output and rpi's
// notes) and how its command ended: an error unless it exited 0 (aborted,
// timed out, a nonzero exit, or killed, which says how).
func (c *bashCall) result(ctx context.Context, text string, details any, ended *shellEnd, timedOut bool, killed string) (toolResult, error) {
	code := ended.exitCode
	switch {
	case ctx.Err() != nil:
		ended.exitCode = nil
		return toolResult{Details: details, shell: ended}, errors.New(strings.TrimPrefix(text+"\n\nCommand aborted", "(no output)\n\n"))
	case timedOut:
		ended.exitCode = nil
		return toolResult{Details: details, shell: ended}, fmt.Errorf("%s\n\nCommand timed out after %g seconds", text, c.timeout.Seconds())
	case code == nil || *code != 0:
		status := killed
		if code != nil {
			status = fmt.Sprintf("exited with code %d", *code)
		}
		return toolResult{Details: details, shell: ended}, fmt.Errorf("%s\n\nCommand %s", text, status)
	}
	return toolResult{Content: textBlocks(text), Details: details, shell: ended}, nil
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
	schema: schema(`{
		"type": "object",
		"properties": {
			"question": {"type": "string"},
			"options": {"type": "array", "items": {"type": "string"}, "description": "Choices to pick from"},
			"multiline": {"type": "boolean", "description": "Ask for longer, multi-line text"},
			"placeholder": {"type": "string", "description": "Hint shown in an empty answer field"}
		},
		"required": ["question"]
	}`),
	decode: func(s *session, raw json.RawMessage) (toolCall, error) {
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

func (c *askUserCall) run(ctx context.Context, s *session, _ toolRun) (toolResult, error) {
	req := uiRequest{Method: "input", Title: c.question, Placeholder: c.placeholder}
	switch {
	case len(c.options) > 0:
		req = uiRequest{Method: "select", Title: c.question, Options: c.options}
	case c.multiline:
		req = uiRequest{Method: "editor", Title: c.question}
	}
	checkCallout("the ui's question")
	answer := s.ui.ask(ctx, req)
	if answer.cancelled || answer.value == nil {
		return textResult("The user cancelled the question without answering."), nil
	}
	return textResult(*answer.value), nil
}

// jsonResult is a tool result holding v as JSON text.
func jsonResult(v any) (toolResult, error) {
	text, err := marshalJSON(v)
	return textResult(string(text)), err
}

func schema(s string) json.RawMessage { return json.RawMessage(s) }

// fieldsTaken is one row of a tool's table of operations: an operation
// (a todo op, a process action) and the fields it takes beside the one
// that names it. A table of them is data the compiler lays out, where a
// map would be built before main.
type fieldsTaken struct {
	op     string
	fields []string
}

// fieldsTakenBy is the fields op takes in table: none for an op that is
// not in it.
func fieldsTakenBy(table []fieldsTaken, op string) []string {
	for _, row := range table {
		if row.op == op {
			return row.fields
		}
	}
	return nil
}

// jsonStrings writes a list of names as a JSON array, for a schema's enum.
func jsonStrings(names []string) string {
	return string(appendJSONStrings(nil, names))
}
