package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"
)

// A handler applies one command. It returns the success data (nil is sent
// as "data":null) or an error whose text is the failure message. A handler
// whose answer waits on the outside world hands that work to answerLater
// and returns noReply.
type handler func(s *server, r *request) (any, error)

// noReply, returned by a handler, means the dispatcher writes no response:
// the answer comes later from answerLater, or the command gets none (a
// valid extension_ui_response).
type noReply struct{}

// commands maps each command type to its handler; get_capabilities lists
// its keys. A command appears here only once it really works.
var commands map[string]handler

func init() {
	commands = map[string]handler{
		"get_state":               (*server).getState,
		"get_messages":            (*server).getMessages,
		"get_last_assistant_text": (*server).getLastAssistantText,
		"get_capabilities":        (*server).getCapabilities,
		"set_thinking_level":      (*server).setThinkingLevel,
		"cycle_thinking_level":    (*server).cycleThinkingLevel,
		"set_steering_mode":       (*server).setSteeringMode,
		"set_follow_up_mode":      (*server).setFollowUpMode,
		"set_auto_compaction":     (*server).setAutoCompaction,
		"set_auto_retry":          (*server).setAutoRetry,
		"set_session_name":        (*server).setSessionName,
		"bash":                    (*server).bash,
		"abort_bash":              (*server).abortBash,
		"extension_ui_response":   (*server).extensionUIResponse,
		"process_start":           (*server).processStart,
		"process_list":            (*server).processList,
		"process_output":          (*server).processOutput,
		"process_write":           (*server).processWrite,
		"process_send_keys":       (*server).processSendKeys,
		"process_signal":          (*server).processSignal,
		"process_kill":            (*server).processKill,
		"process_wait":            (*server).processWait,
		"process_remove":          (*server).processRemove,
		"prompt":                  (*server).prompt,
		"steer":                   (*server).steer,
		"follow_up":               (*server).followUpCommand,
		"abort":                   (*server).abort,
		"abort_retry":             (*server).abortRetry,
		"clear_queue":             (*server).clearQueue,
		"set_model":               (*server).setModel,
		"cycle_model":             (*server).cycleModel,
		"get_available_models":    (*server).getAvailableModels,
		"get_session_stats":       (*server).getSessionStats,
		"get_todos":               (*server).getTodos,
		"new_session":             (*server).newSessionCommand,
		"switch_session":          (*server).switchSession,
		"fork":                    (*server).fork,
		"get_fork_messages":       (*server).getForkMessages,
		"export_html":             (*server).exportHTML,
		"compact":                 (*server).compact,
		"get_commands":            (*server).getCommands,
	}
}

var (
	thinkingLevels = []string{"off", "minimal", "low", "medium", "high", "xhigh"}
	queueModes     = []string{"all", "one-at-a-time"}
)

// server is one rpi session host: its configuration, its output and the
// state the commands read and change.
type server struct {
	cfg          config
	out          *output
	stderr       io.Writer
	header       sessionHeader
	maxLineBytes int
	shell        string // bash, or /bin/sh where bash is missing
	// command builds every child rpi runs (exec.Command; the fuzz test
	// replaces it so that no input can run a real program).
	command func(name string, args ...string) *exec.Cmd

	// ctx is cancelled at shutdown; everything running watches it.
	ctx    context.Context
	cancel context.CancelFunc
	// background counts answers that background work has still to write.
	background sync.WaitGroup
	// children counts background processes whose process_exited is not out yet.
	children sync.WaitGroup

	mu               sync.Mutex // guards every field below
	thinkingLevel    string
	steeringMode     string
	followUpMode     string
	autoCompaction   bool
	autoRetry        bool
	sessionName      string
	messages         []any
	bashRuns         map[*bashRun]bool
	models           []*model
	model            *model    // the model the next call uses; nil when none is usable
	run              *agentRun // the running agent, nil when idle
	steering         []*userMessage
	followUp         []*userMessage
	deferred         []any // user bash results waiting for the run to end
	todos            []todo
	retry            retrySettings
	compaction       compactionSettings
	isCompacting     bool
	session          *session
	sessionDir       string // where new session files go; "" with --no-session or --session
	contextFiles     []contextFile
	slashCommands    []slashCommand // prompt templates and skills
	confirmTimeoutMs int64
	notice           string // a warning for the client at startup
	processes        map[string]*process
	processOrder     []string // process ids, oldest first
	dialogs          map[string]*dialog
	tempFiles        []string
}

// sessionHeader is the data of session_started and the first line of a
// session file (minus its "type").
type sessionHeader struct {
	Version       int    `json:"version"`
	ID            string `json:"id"`
	Timestamp     string `json:"timestamp"`
	Cwd           string `json:"cwd"`
	ParentSession string `json:"parentSession,omitempty"`
}

func newServer(cfg config, stdout, stderr io.Writer) (*server, error) {
	now := time.Now()
	s := &server{
		cfg:            cfg,
		out:            newOutput(stdout, stderr),
		stderr:         stderr,
		header:         sessionHeader{Version: 3, ID: newUUIDv7(now), Timestamp: timestamp(now), Cwd: cfg.cwd},
		maxLineBytes:   maxLineBytes,
		shell:          findShell(),
		command:        exec.Command,
		thinkingLevel:  "medium",
		steeringMode:   "one-at-a-time",
		followUpMode:   "one-at-a-time",
		autoCompaction: true,
		autoRetry:      true,
		sessionName:    cfg.name,
		bashRuns:       map[*bashRun]bool{},
		processes:      map[string]*process{},
		dialogs:        map[string]*dialog{},
	}
	if cfg.thinking != "" {
		s.thinkingLevel = cfg.thinking
	}
	dir := agentDir()
	models, err := loadModels(dir, cfg.provider, cfg.apiKey)
	if err != nil {
		return nil, err
	}
	defProvider, defModel, retry, compaction, confirmTimeout := loadSettings(dir)
	s.confirmTimeoutMs = confirmTimeout
	m, thinking, err := chooseModel(models, cfg.provider, cfg.model, defProvider, defModel)
	if err != nil {
		return nil, err
	}
	if thinking != "" {
		s.thinkingLevel = thinking
	}
	s.models, s.model, s.retry, s.compaction = models, m, retry, compaction
	s.contextFiles = loadContextFiles(dir, cfg.cwd)
	s.slashCommands = loadResources(dir, "user")
	if cfg.approve {
		s.slashCommands = append(s.slashCommands, loadResources(filepath.Join(cfg.cwd, ".pi"), "project")...)
	} else {
		s.notice = skippedNotice(cfg.cwd)
	}
	if err := s.openSession(dir); err != nil {
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// ---- Dispatch ----

// handleFrame answers one input line: exactly one response, except for a
// valid extension_ui_response, which gets none.
func (s *server) handleFrame(f frame) {
	if f.tooLong {
		s.out.write(failureResponse{Type: "response", Command: "parse",
			Error: fmt.Sprintf("Failed to parse command: line longer than %d bytes", s.maxLineBytes)})
		return
	}
	r, rerr := decodeRequest(f.line)
	if rerr != nil {
		s.out.write(failureResponse{ID: rerr.id, Type: "response", Command: rerr.command, Error: rerr.message})
		return
	}
	h, ok := commands[r.typ]
	if !ok {
		s.reply(r, nil, fmt.Errorf("Unknown command: %s", r.typ))
		return
	}
	data, err := s.call(h, r)
	s.reply(r, data, err)
}

// call runs a handler, turning a panic into a failure for that command and
// a stack trace on stderr, so one bug never stops the loop.
func (s *server) call(h func(*server, *request) (any, error), r *request) (data any, err error) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(s.stderr, "rpi: panic in %s: %v\n%s", r.typ, p, debug.Stack())
			data, err = nil, fmt.Errorf("Internal error in %s: %v", r.typ, p)
		}
	}()
	return h(s, r)
}

// reply writes the response to r.
func (s *server) reply(r *request, data any, err error) {
	if err != nil {
		s.out.write(failureResponse{ID: r.id, Type: "response", Command: r.typ, Error: err.Error()})
		return
	}
	if _, ok := data.(noReply); ok {
		return
	}
	s.out.write(successResponse{ID: r.id, Type: "response", Command: r.typ, Success: true, Data: data})
}

// answerLater runs work in the background and answers r with its result,
// so the commands after r are not held up. The returned channel is closed
// once the answer has been written.
func (s *server) answerLater(r *request, work func() (any, error)) <-chan struct{} {
	answered := make(chan struct{})
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		defer close(answered)
		data, err := s.call(func(*server, *request) (any, error) { return work() }, r)
		s.reply(r, data, err)
	}()
	return answered
}

// ---- State and messages ----

// stateData is the answer to get_state (§6), in pi's key order.
type stateData struct {
	Model                 any    `json:"model"` // a Model, or null when none is usable
	ThinkingLevel         string `json:"thinkingLevel"`
	IsStreaming           bool   `json:"isStreaming"`
	IsCompacting          bool   `json:"isCompacting"`
	SteeringMode          string `json:"steeringMode"`
	FollowUpMode          string `json:"followUpMode"`
	SessionFile           any    `json:"sessionFile"` // null with --no-session
	SessionID             string `json:"sessionId"`
	SessionName           string `json:"sessionName,omitempty"`
	AutoCompactionEnabled bool   `json:"autoCompactionEnabled"`
	AutoRetryEnabled      bool   `json:"autoRetryEnabled"`
	MessageCount          int    `json:"messageCount"`
	PendingMessageCount   int    `json:"pendingMessageCount"`
	Todos                 []todo `json:"todos"`
	ProcessCount          int    `json:"processCount"`
}

// todo is one entry of the agent's todo list.
type todo struct {
	ID      string `json:"id"`
	Content string `json:"content"`
	Status  string `json:"status"`
}

// getState answers every field of the session's state.
// Fields: none. Answer: stateData. Events: none.
func (s *server) getState(r *request) (any, error) {
	running := s.runningProcesses()
	s.mu.Lock()
	defer s.mu.Unlock()
	var model, sessionFile any
	if s.model != nil {
		model = s.model
	}
	if s.session.path != "" {
		sessionFile = s.session.path
	}
	return stateData{
		Model:                 model,
		ThinkingLevel:         s.effectiveThinking(),
		IsStreaming:           s.run != nil,
		IsCompacting:          s.isCompacting,
		SessionFile:           sessionFile,
		SteeringMode:          s.steeringMode,
		FollowUpMode:          s.followUpMode,
		SessionID:             s.header.ID,
		SessionName:           s.sessionName,
		AutoCompactionEnabled: s.autoCompaction,
		AutoRetryEnabled:      s.autoRetry,
		MessageCount:          len(s.messages),
		PendingMessageCount:   len(s.steering) + len(s.followUp),
		Todos:                 append([]todo{}, s.todos...),
		ProcessCount:          running,
	}, nil
}

// getMessages answers the conversation's messages, oldest first.
// Fields: none. Answer: {"messages":[AgentMessage]}. Events: none.
func (s *server) getMessages(r *request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return struct {
		Messages []any `json:"messages"`
	}{append([]any{}, s.messages...)}, nil
}

// getLastAssistantText answers the text of the last assistant answer that
// has text (an aborted empty one is skipped), or null.
// Fields: none. Answer: {"text": string|null}. Events: none.
func (s *server) getLastAssistantText(r *request) (any, error) {
	return struct {
		Text *string `json:"text"`
	}{s.lastAssistantText()}, nil
}

// capabilities is the answer to get_capabilities.
type capabilities struct {
	ProtocolVersion int      `json:"protocolVersion"`
	Version         string   `json:"version"`
	Commands        []string `json:"commands"`
	Events          []string `json:"events"`
	ProcessSignals  []string `json:"processSignals"`
	ProcessKeys     []string `json:"processKeys"`
	Tools           []string `json:"tools"`
	MaxLineBytes    int      `json:"maxLineBytes"`
}

// getCapabilities answers what this rpi accepts and emits, derived from the
// dispatch table itself so it cannot drift.
// Fields: none. Answer: capabilities. Events: none.
func (s *server) getCapabilities(r *request) (any, error) {
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	slices.Sort(names)
	var toolList []string
	for _, t := range s.activeTools() {
		toolList = append(toolList, t.name)
	}
	if toolList == nil {
		toolList = []string{}
	}
	return capabilities{
		ProtocolVersion: 1,
		Version:         version,
		Commands:        names,
		Events:          eventTypes,
		ProcessSignals:  processSignals,
		ProcessKeys:     processKeys,
		Tools:           toolList,
		MaxLineBytes:    s.maxLineBytes,
	}, nil
}

// ---- Settings ----

// setThinkingLevel sets the reasoning effort used for the next model call.
// Fields: level (off|minimal|low|medium|high|xhigh). Answer: null. Events: none.
func (s *server) setThinkingLevel(r *request) (any, error) {
	level, err := r.enum("level", thinkingLevels)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.thinkingLevel = level
	s.record("thinking_level_change", "thinkingLevel", s.effectiveThinking())
	s.mu.Unlock()
	return nil, nil
}

// cycleThinkingLevel moves to the next thinking level; with a model that
// does not reason (or none) it answers null and nothing changes.
// Fields: none. Answer: {"level":…} or null. Events: none.
func (s *server) cycleThinkingLevel(r *request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.model == nil || !s.model.Reasoning {
		return nil, nil
	}
	i := slices.Index(thinkingLevels, s.thinkingLevel)
	s.thinkingLevel = thinkingLevels[(i+1)%len(thinkingLevels)]
	s.record("thinking_level_change", "thinkingLevel", s.thinkingLevel)
	return struct {
		Level string `json:"level"`
	}{s.thinkingLevel}, nil
}

// setSteeringMode sets how many queued steering messages one turn takes.
// Fields: mode (all|one-at-a-time). Answer: null. Events: none.
func (s *server) setSteeringMode(r *request) (any, error) {
	mode, err := r.enum("mode", queueModes)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.steeringMode = mode
	s.mu.Unlock()
	return nil, nil
}

// setFollowUpMode sets how many queued follow-ups one turn takes.
// Fields: mode (all|one-at-a-time). Answer: null. Events: none.
func (s *server) setFollowUpMode(r *request) (any, error) {
	mode, err := r.enum("mode", queueModes)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.followUpMode = mode
	s.mu.Unlock()
	return nil, nil
}

// setAutoCompaction turns compaction near the context window on or off.
// Fields: enabled (bool). Answer: null. Events: none.
func (s *server) setAutoCompaction(r *request) (any, error) {
	enabled, err := r.boolean("enabled")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.autoCompaction = enabled
	s.mu.Unlock()
	return nil, nil
}

// setAutoRetry turns retrying of failed model calls on or off.
// Fields: enabled (bool). Answer: null. Events: none.
func (s *server) setAutoRetry(r *request) (any, error) {
	enabled, err := r.boolean("enabled")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.autoRetry = enabled
	s.mu.Unlock()
	return nil, nil
}

// setSessionName names the session (a session_info entry); get_state
// reports it.
// Fields: name (non-empty after trimming). Answer: null. UI: setTitle.
func (s *server) setSessionName(r *request) (any, error) {
	name, err := r.str("name")
	if err != nil {
		return nil, err
	}
	if name = strings.TrimSpace(name); name == "" {
		return nil, errors.New("Session name cannot be empty")
	}
	s.mu.Lock()
	s.sessionName = name
	s.record("session_info", "name", name)
	s.mu.Unlock()
	s.tell(uiRequest{Method: "setTitle", Title: name})
	return nil, nil
}

// ---- Extension UI ----

// extensionUIResponse delivers the client's answer to a pending dialog.
// Fields: id (of a pending extension_ui_request) and exactly one of value
// (string), confirmed (bool), cancelled (true).
// Answer: none on success; a failure when the id is unknown or already
// answered, or the answer is malformed. Events: none.
func (s *server) extensionUIResponse(r *request) (any, error) {
	id := r.idString()
	if id == nil {
		return nil, errors.New("Missing field id: must be the id of a pending extension_ui_request")
	}
	var a uiAnswer
	given := 0
	if r.has("value") {
		v, err := r.str("value")
		if err != nil {
			return nil, err
		}
		a.value, given = &v, given+1
	}
	if r.has("confirmed") {
		c, err := r.boolean("confirmed")
		if err != nil {
			return nil, err
		}
		a.confirmed, given = &c, given+1
	}
	if r.has("cancelled") {
		c, err := r.boolean("cancelled")
		if err != nil || !c {
			return nil, invalid("cancelled", "true")
		}
		a.cancelled, given = true, given+1
	}
	if given != 1 {
		return nil, errors.New("Invalid extension_ui_response: give exactly one of value, confirmed or cancelled")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.dialogs[*id]
	if !ok {
		return nil, fmt.Errorf("Unknown extension UI request id: %s (never asked, already answered or expired)", *id)
	}
	switch {
	case a.cancelled:
	case d.method == "confirm" && a.confirmed == nil:
		return nil, errors.New("Invalid extension_ui_response: a confirm dialog takes confirmed (true or false) or cancelled")
	case d.method != "confirm" && a.value == nil:
		return nil, fmt.Errorf("Invalid extension_ui_response: a %s dialog takes value (a string) or cancelled", d.method)
	case d.method == "select" && !oneOf(*a.value, d.options):
		return nil, fmt.Errorf("Invalid extension_ui_response: value must be one of the options: %s", strings.Join(d.options, ", "))
	}
	delete(s.dialogs, *id)
	d.answer <- a
	return noReply{}, nil
}

// ---- Temp files ----

// createTempFile makes a temp file that rpi removes when it exits.
func (s *server) createTempFile(pattern string) (*os.File, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.tempFiles = append(s.tempFiles, f.Name())
	s.mu.Unlock()
	return f, nil
}

func (s *server) removeTempFiles() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range s.tempFiles {
		os.Remove(name)
	}
	s.tempFiles = nil
}
