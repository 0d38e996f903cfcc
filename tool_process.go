package main

// The model's process tool: the process_* commands (docs/processes.md) as actions of one
// tool, decoded strictly, described for approval, and limited to the
// processes the model started for anything that changes one.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// processActions are the process tool's actions, and the fields each
// takes beside action: docs/processes.md's commands for the model.
var processActions = []fieldsTaken{
	{"spawn", []string{"spec"}},
	{"list", nil},
	{"describe", []string{"processId"}},
	{"logs", []string{"processId", "cursor", "limitBytes"}},
	{"write", []string{"processId", "dataBase64", "closeStdin"}},
	{"keys", []string{"processId", "keys"}},
	{"resize", []string{"processId", "cols", "rows"}},
	{"signal", []string{"processId", "signal"}},
	{"stop", []string{"processId"}},
	{"wait", []string{"processId", "timeoutMs"}},
	{"remove", []string{"processId"}},
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
	schema: schema(`{
		"type": "object",
		"properties": {
			"action": {
				"type": "string",
				"enum": ["spawn", "list", "describe", "logs", "write", "keys", "resize", "signal", "stop", "wait", "remove"]
			},
			"spec": {
				"type": "object",
				"properties": {
					"argv": {"type": "array", "items": {"type": "string"}},
					"cwd": {"type": "string"},
					"env": {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
					"tty": {"type": "boolean"},
					"terminalSize": {
						"type": "object",
						"properties": {"rows": {"type": "integer"}, "cols": {"type": "integer"}},
						"required": ["rows", "cols"]
					},
					"label": {"type": "string"},
					"timeoutMs": {"type": "integer"},
					"outputBytes": {"type": "integer"}
				},
				"required": ["argv"]
			},
			"processId": {"type": "string"},
			"cursor": {"type": "integer", "minimum": 0},
			"limitBytes": {"type": "integer", "minimum": 1, "maximum": 16777216},
			"dataBase64": {"type": "string"},
			"closeStdin": {"type": "boolean"},
			"keys": {"type": "array", "items": {"type": "string"}},
			"cols": {"type": "integer", "minimum": 1, "maximum": 65535},
			"rows": {"type": "integer", "minimum": 1, "maximum": 65535},
			"signal": {"type": "string", "enum": ` + processSignalsJSON + `},
			"timeoutMs": {"type": "integer", "minimum": 1, "maximum": 86400000}
		},
		"required": ["action"]
	}`),
	decode: decodeProcessCall,
}

func decodeProcessCall(s *session, raw json.RawMessage) (toolCall, error) {
	var fields map[string]json.RawMessage
	json.Unmarshal(raw, &fields)
	var c processCall
	json.Unmarshal(fields["action"], &c.action)
	allowed := fieldsTakenBy(processActions, c.action)
	for name, value := range fields {
		if name != "action" && string(value) != "null" && !slices.Contains(allowed, name) {
			takes := "it takes none" // list: not "it takes: ", naming nothing
			if len(allowed) > 0 {
				takes = "it takes: " + strings.Join(allowed, ", ")
			}
			return nil, fmt.Errorf("field %q does not go with action %s (%s)", name, c.action, takes)
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

// shownValue is a value for a dialog: quoted (Go's quoting escapes what
// escapeControl does, a backslash as \\ too), and cut at 200 bytes with
// the rest counted.
func shownValue(v string) string {
	if len(v) <= 200 {
		return strconv.Quote(v)
	}
	return strconv.Quote(strings.ToValidUTF8(v[:200], "")) + fmt.Sprintf("…(%d bytes in all)", len(v))
}

// dangerousEnv reports whether a variable changes what a program runs or
// loads, so that the approval dialog marks it: the loader's, the shell's,
// an interpreter's, git's, npm's, the build tools' (GOFLAGS' -toolexec,
// the C compiler, make's flags, cargo's and rustc's wrappers), the XDG
// folders (where a program finds its configuration) and the programs
// ssh, sudo and git ask a password of.
// A name is taken in any case where it is read so: on Windows (Path is
// PATH), and npm's (npm_config_ in any case).
func dangerousEnv(key string) bool {
	if upper := strings.ToUpper(key); runtime.GOOS == "windows" || strings.HasPrefix(upper, "NPM_CONFIG_") {
		key = upper
	}
	for _, prefix := range []string{"LD_", "DYLD_", "BASH_FUNC_", "GIT_", "PYTHON", "PERL", "RUBY", "NODE_", "JAVA_", "GCONV", "MALLOC_",
		"XDG_", "NPM_CONFIG_", "CARGO_", "RUSTC"} {
		if strings.HasPrefix(key, prefix) {
			return true
		}
	}
	return slices.Contains([]string{"PATH", "BASH_ENV", "ENV", "IFS", "PS4", "SHELLOPTS", "BASHOPTS", "PROMPT_COMMAND",
		"CDPATH", "HOME", "SHELL", "EDITOR", "VISUAL", "PAGER", "TMPDIR", "ZDOTDIR", "LESSOPEN", "CLASSPATH",
		"GOFLAGS", "CC", "CXX", "MAKEFLAGS", "MAKE"}, key) ||
		strings.HasSuffix(key, "_OPTIONS") || strings.HasSuffix(key, "PATH") || strings.HasSuffix(key, "LIB") ||
		strings.HasSuffix(key, "_ASKPASS")
}

func (c *processCall) describe() (string, string) {
	title := "Allow process " + c.action + "?"
	switch c.action {
	case "spawn":
		var argv []string
		for _, a := range c.spec.Argv {
			argv = append(argv, strconv.Quote(a))
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

func (c *processCall) run(ctx context.Context, s *session, call toolRun) (toolResult, error) {
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
		if cut := incompleteEnd(data); cut > 0 && cut < len(data) {
			// The page ends inside a character: the next one starts with it whole.
			logs.Cursor -= int64(len(data) - cut)
			logs.EOF = false
			data = data[:cut]
		}
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
		return done(p.resize(c.rows, c.cols, nil))
	case "signal":
		return done(p.sendSignal(signalNumber(c.signal), func() {}))
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
