package main

// The server, the dispatch table from command type to handler, and the
// commands that read or set plain state.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
)

// A handler applies one command. It returns the success data (nil is sent
// as "data":null) or an error whose text is the failure message. A handler
// whose answer waits on the outside world hands that work to answerLater
// and returns noReply.
type handler func(s *server, r *request) (any, error)

// noReply, returned by a handler, means the dispatcher writes no response:
// the answer comes later, or the command gets none (a valid
// extension_ui_response).
type noReply struct{}

// commands maps each command type to its handler; get_capabilities lists
// its keys. A command appears here only once it really works.
var commands map[string]handler

func init() {
	commands = map[string]handler{
		"get_state":                     (*server).getStateCommand,
		"get_messages":                  (*server).getMessagesCommand,
		"get_last_assistant_text":       (*server).getLastAssistantTextCommand,
		"get_capabilities":              (*server).getCapabilitiesCommand,
		"set_thinking_level":            (*server).setThinkingLevelCommand,
		"cycle_thinking_level":          (*server).cycleThinkingLevelCommand,
		"set_steering_mode":             (*server).setSteeringModeCommand,
		"set_follow_up_mode":            (*server).setFollowUpModeCommand,
		"set_auto_compaction":           (*server).setAutoCompactionCommand,
		"set_auto_retry":                (*server).setAutoRetryCommand,
		"set_session_name":              (*server).setSessionNameCommand,
		"bash":                          (*server).bashCommand,
		"abort_bash":                    (*server).abortBashCommand,
		"extension_ui_response":         (*server).extensionUIResponseCommand,
		"process_spawn":                 (*server).processSpawnCommand,
		"process_list":                  (*server).processListCommand,
		"process_describe":              (*server).processDescribeCommand,
		"process_logs":                  (*server).processLogsCommand,
		"process_write":                 (*server).processWriteCommand,
		"process_keys":                  (*server).processKeysCommand,
		"process_resize":                (*server).processResizeCommand,
		"process_signal":                (*server).processSignalCommand,
		"process_stop":                  (*server).processStopCommand,
		"process_wait":                  (*server).processWaitCommand,
		"process_remove":                (*server).processRemoveCommand,
		"prompt":                        (*server).promptCommand,
		"steer":                         (*server).steerCommand,
		"follow_up":                     (*server).followUpCommand,
		"abort":                         (*server).abortCommand,
		"abort_retry":                   (*server).abortRetryCommand,
		"clear_queue":                   (*server).clearQueueCommand,
		"set_model":                     (*server).setModelCommand,
		"cycle_model":                   (*server).cycleModelCommand,
		"get_available_models":          (*server).getAvailableModelsCommand,
		"get_session_stats":             (*server).getSessionStatsCommand,
		"get_todos":                     (*server).getTodosCommand,
		"set_todos":                     (*server).setTodosCommand,
		"todo_op":                       (*server).todoOpCommand,
		"loop_create":                   (*server).loopCreateCommand,
		"loop_update":                   (*server).loopUpdateCommand,
		"loop_list":                     (*server).loopListCommand,
		"loop_delete":                   (*server).loopDeleteCommand,
		"loop_cancel":                   (*server).loopCancelCommand,
		"new_session":                   (*server).newSessionCommand,
		"switch_session":                (*server).switchSessionCommand,
		"fork":                          (*server).forkCommand,
		"get_fork_messages":             (*server).getForkMessagesCommand,
		"export_html":                   (*server).exportHTMLCommand,
		"compact":                       (*server).compactCommand,
		"get_commands":                  (*server).getCommandsCommand,
		"get_available_thinking_levels": (*server).getAvailableThinkingLevelsCommand,
		"clone":                         (*server).cloneCommand,
		"get_entries":                   (*server).getEntriesCommand,
		"get_tree":                      (*server).getTreeCommand,
		"session_list":                  (*server).sessionListCommand,
		"session_delete":                (*server).sessionDeleteCommand,
	}
}

var (
	thinkingLevels = []string{"off", "minimal", "low", "medium", "high", "xhigh", "max"}
	queueModes     = []string{"all", "one-at-a-time"}
)

// server is one rpi session host. What never changes after startup is in
// set; each part that changes has its own owner and lock, named here. Lock
// order: s.mu before conv.mu, p.mu and ui.mu; the output lock is always
// last (anything may write a record while holding its own lock).
type server struct {
	set    *settings // fixed at startup; read without locks
	env    environment
	out    *output
	wire   wire // the shape of the records (rpcWire, or piWire in pi's mode)
	stderr io.Writer
	// command builds every child rpi runs (exec.Command; the fuzz test
	// replaces it so that no input can run a real program).
	command func(name string, args ...string) *exec.Cmd
	// serving is set when serve starts, on the goroutine that ran startup:
	// until then a warning is kept as a startup notice, so that
	// session_started stays the first line.
	serving bool

	// ctx is cancelled at shutdown; everything running watches it.
	ctx    context.Context
	cancel context.CancelFunc
	// background counts answers and work that have still to finish.
	background sync.WaitGroup

	conv     *conversation  // the messages and the session file (own locks)
	procs    *processTable  // children: background processes, user bash (own lock)
	loops    *loopScheduler // scheduled prompts (own locks, loops.go)
	ui       *dialogs       // open dialogs (own lock)
	temp     *tempFiles     // rpi's temp folder (own lock)
	watchdog *watchdog      // kills children if rpi dies (own lock)
	memory   memoryReturn   // gives memory back after a burst (own lock, main.go)

	mu             sync.Mutex // guards the agent's state below
	model          *model     // the model the next call uses; nil when none is usable
	thinkingLevel  string
	steeringMode   string
	followUpMode   string
	autoCompaction bool
	autoRetry      bool
	phase          runPhase
	activeRun      *agentRun // the run chain in progress; nil when idle
	changing       int       // session changes waiting for the agent to stop; no run starts meanwhile
	steering       []*userMessage
	followUp       []*userMessage
	todos          []todoPhase // the plan (todos.go)
}

func newServer(cfg config, env environment, stdout, stderr io.Writer) (*server, error) {
	set, err := loadSettings(cfg, env)
	if err != nil {
		return nil, err
	}
	s := &server{
		set:            set,
		env:            env,
		out:            newOutput(stdout, stderr),
		wire:           rpcWire{},
		stderr:         stderr,
		command:        exec.Command,
		ui:             newDialogs(),
		loops:          &loopScheduler{},
		thinkingLevel:  "medium",
		steeringMode:   "one-at-a-time",
		followUpMode:   "one-at-a-time",
		autoCompaction: true,
		autoRetry:      true,
	}
	if cfg.compat {
		s.wire = piWire{}
	}
	if env.command != nil {
		s.command = env.command
	}
	s.watchdog = newWatchdog(env.executable, set.childEnv) // a child: no keys
	s.procs = newProcessTable(s.watchdog, stderr)
	s.temp = &tempFiles{parent: env.tempDir, watchdog: s.watchdog, stderr: stderr}
	if cfg.thinking != "" {
		s.thinkingLevel = cfg.thinking
	}
	m, thinking, err := chooseModel(set.catalog, cfg.provider, cfg.model, set.defaultProvider, set.defaultModel)
	if err != nil {
		return nil, err
	}
	if m != nil && !slices.Contains(set.catalog, m) {
		set.catalog = append(set.catalog, m) // an id adopted for --provider
	}
	s.model = m
	if cfg.model == "" && len(cfg.models) > 0 {
		if scoped, _ := s.scopedModels(); len(scoped) > 0 {
			s.model = scoped[0] // --models without --model starts with the first
		}
	}
	if thinking != "" {
		s.thinkingLevel = thinking
	}
	if s.conv, err = s.openConversation(); err != nil {
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
		s.gatherResponse(nil, "parse", nil, fmt.Errorf("Failed to parse command: line longer than %d bytes", s.env.maxLineBytes))
		return
	}
	r, rerr := decodeRequest(f.line, s.wire.numericIDs())
	if rerr != nil {
		s.gatherResponse(rerr.id, rerr.command, nil, errors.New(rerr.message))
		return
	}
	h, ok := commands[r.typ]
	if !ok {
		s.gatherResponse(r.id, r.typ, nil, fmt.Errorf("Unknown command: %s", r.typ))
		return
	}
	data, err := s.call(r.typ, func() (any, error) { return h(s, r) })
	if _, ok := data.(noReply); ok && err == nil {
		return
	}
	s.gatherResponse(r.id, r.typ, data, err)
}

// call runs work, turning a panic into a failure and a stack trace on
// stderr, so one bug never stops the loop.
func (s *server) call(what string, work func() (any, error)) (data any, err error) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(s.stderr, "rpi: panic in %s: %v\n%s", what, p, debug.Stack())
			data, err = nil, fmt.Errorf("Internal error in %s: %v", what, p)
		}
	}()
	return work()
}

// recoverPanic, deferred at the top of a goroutine, logs a panic with its
// stack instead of letting it end rpi.
func (s *server) recoverPanic(what string) {
	if p := recover(); p != nil {
		fmt.Fprintf(s.stderr, "rpi: panic in %s: %v\n%s", what, p, debug.Stack())
	}
}

// helperPanic keeps the first panic of the helper goroutines of one call
// (catch, deferred in each), to raise it again on the goroutine that
// waits for them (raise), where the call's own recover takes it: a bug
// in a helper then fails that call, as if it had run there, and never
// ends rpi.
type helperPanic struct {
	mu    sync.Mutex
	value any
}

func (h *helperPanic) catch() {
	if p := recover(); p != nil {
		h.keep(p)
	}
}

func (h *helperPanic) keep(p any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.value == nil {
		h.value = p
	}
}

func (h *helperPanic) raise() {
	if h.value != nil {
		panic(h.value)
	}
}

// reply writes the response to r.
func (s *server) reply(r *request, data any, err error) {
	if _, ok := data.(noReply); ok && err == nil {
		return
	}
	s.writeResponse(r.id, r.typ, data, err)
}

func (s *server) writeResponse(id []byte, command string, data any, err error) {
	s.out.record(func(buf []byte) ([]byte, error) {
		return encodeResponse(s.wire, buf, id, command, data, err)
	})
}

// gatherResponse is writeResponse for the dispatcher's own answers: they
// may wait for the rest of the input batch (output.gather).
func (s *server) gatherResponse(id []byte, command string, data any, err error) {
	s.out.gather(func(buf []byte) ([]byte, error) {
		return encodeResponse(s.wire, buf, id, command, data, err)
	})
}

// emit writes an event; pi is its payload in pi's shape when that differs.
func (s *server) emit(typ string, data, pi any) {
	s.out.record(func(buf []byte) ([]byte, error) {
		return s.wire.appendEvent(buf, event{typ, data, pi})
	})
}

// gatherEvent is emit for a writer that flushes before it waits (a
// process's reader with more of one read to send): the event may wait in
// output.gather for what follows it.
func (s *server) gatherEvent(typ string, data any) {
	s.out.gather(func(buf []byte) ([]byte, error) {
		return s.wire.appendEvent(buf, event{Type: typ, Data: data})
	})
}

// answerLater runs work in the background and answers r with its result,
// so the commands after r are not held up.
func (s *server) answerLater(r *request, work func() (any, error)) {
	s.goBackground(func() {
		data, err := s.call(r.typ, work)
		s.reply(r, data, err)
	})
}

// ---- State and messages ----

// stateData is the answer to get_state (§6), in pi's key order.
type stateData struct {
	Model                 *model      `json:"model"` // null when none is usable
	ThinkingLevel         string      `json:"thinkingLevel"`
	IsStreaming           bool        `json:"isStreaming"`
	IsCompacting          bool        `json:"isCompacting"`
	SteeringMode          string      `json:"steeringMode"`
	FollowUpMode          string      `json:"followUpMode"`
	SessionFile           any         `json:"sessionFile"` // null with --no-session
	SessionID             string      `json:"sessionId"`
	SessionName           string      `json:"sessionName,omitempty"`
	AutoCompactionEnabled bool        `json:"autoCompactionEnabled"`
	AutoRetryEnabled      bool        `json:"autoRetryEnabled"`
	MessageCount          int         `json:"messageCount"`
	PendingMessageCount   int         `json:"pendingMessageCount"`
	TodoPhases            []todoPhase `json:"todoPhases"`
	ProcessCount          int         `json:"processCount"`
}

// getStateCommand answers every field of the session's state.
// Fields: none. Answer: stateData. Events: none.
func (s *server) getStateCommand(r *request) (any, error) {
	processes := s.runningProcessCount()
	info := s.conv.info()
	s.mu.Lock()
	defer s.mu.Unlock()
	var sessionFile any
	if info.path != "" {
		sessionFile = info.path
	}
	return stateData{
		Model:                 s.model,
		ThinkingLevel:         s.effectiveThinking(),
		IsStreaming:           s.phase == running || s.phase == stopping,
		IsCompacting:          s.phase == compacting,
		SessionFile:           sessionFile,
		SteeringMode:          s.steeringMode,
		FollowUpMode:          s.followUpMode,
		SessionID:             info.id,
		SessionName:           info.name,
		AutoCompactionEnabled: s.autoCompaction,
		AutoRetryEnabled:      s.autoRetry,
		MessageCount:          info.messages,
		PendingMessageCount:   len(s.steering) + len(s.followUp),
		TodoPhases:            s.todoPlanLocked(),
		ProcessCount:          processes,
	}, nil
}

// getMessagesCommand answers the conversation's messages, oldest first. The
// answer, as big as the conversation, is written message by message
// (output.stream), never held whole.
// Fields: none. Answer: {"messages":[AgentMessage]}. Events: none.
func (s *server) getMessagesCommand(r *request) (any, error) {
	messages := s.conv.messages()
	if !slices.ContainsFunc(messages, func(m any) bool { return !messageAppendable(m) }) {
		s.out.stream(func(buf []byte, spill func([]byte) []byte) []byte {
			buf = append(appendResponseHead(buf, r.id, r.typ), `,"success":true,"data":{"messages":[`...)
			for i, m := range messages {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf, _ = appendMessageJSON(buf, m)
				buf = spill(buf)
			}
			return append(buf, "]}}"...)
		})
		return noReply{}, nil
	}
	// One that encoding/json refuses: its failure is the answer's.
	return struct {
		Messages []any `json:"messages"`
	}{messages}, nil
}

// getLastAssistantTextCommand answers the text of the last assistant answer that
// has text (an aborted empty one is skipped), or null.
// Fields: none. Answer: {"text": string|null}. Events: none.
func (s *server) getLastAssistantTextCommand(r *request) (any, error) {
	return struct {
		Text *string `json:"text"`
	}{lastAssistantText(s.conv.messages())}, nil
}

// capabilities is the answer to get_capabilities.
type capabilities struct {
	ProtocolVersion int      `json:"protocolVersion"`
	Version         string   `json:"version"`
	Compat          string   `json:"compat"` // "rpi", or "pi" in pi-compatible mode (§10)
	Commands        []string `json:"commands"`
	Events          []string `json:"events"`
	ProcessSignals  []string `json:"processSignals"`
	ProcessKeys     []string `json:"processKeys"`
	TTY             bool     `json:"tty"` // whether process_spawn can give a process a terminal
	Tools           []string `json:"tools"`
	MaxLineBytes    int      `json:"maxLineBytes"`
}

// getCapabilitiesCommand answers what this rpi accepts and emits, derived from the
// dispatch table itself so it cannot drift.
// Fields: none. Answer: capabilities. Events: none.
func (s *server) getCapabilitiesCommand(r *request) (any, error) {
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	slices.Sort(names)
	toolList := []string{}
	for _, t := range s.set.tools {
		toolList = append(toolList, t.name)
	}
	return capabilities{
		ProtocolVersion: 1,
		Version:         version,
		Compat:          s.wire.name(),
		Commands:        names,
		Events:          eventTypes,
		ProcessSignals:  processSignals,
		ProcessKeys:     processKeys,
		TTY:             ptySupported,
		Tools:           toolList,
		MaxLineBytes:    s.env.maxLineBytes,
	}, nil
}

// ---- Settings ----

// setSteeringModeCommand sets how many queued steering messages one turn takes.
// Fields: mode (all|one-at-a-time). Answer: null. Events: none.
func (s *server) setSteeringModeCommand(r *request) (any, error) {
	mode, err := r.enum("mode", queueModes)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.steeringMode = mode
	s.mu.Unlock()
	return nil, nil
}

// setFollowUpModeCommand sets how many queued follow-ups one turn takes.
// Fields: mode (all|one-at-a-time). Answer: null. Events: none.
func (s *server) setFollowUpModeCommand(r *request) (any, error) {
	mode, err := r.enum("mode", queueModes)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.followUpMode = mode
	s.mu.Unlock()
	return nil, nil
}

// setAutoCompactionCommand turns compaction near the context window on or off.
// Fields: enabled (bool). Answer: null. Events: none.
func (s *server) setAutoCompactionCommand(r *request) (any, error) {
	enabled, err := r.boolean("enabled")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.autoCompaction = enabled
	s.mu.Unlock()
	return nil, nil
}

// setAutoRetryCommand turns retrying of failed model calls on or off.
// Fields: enabled (bool). Answer: null. Events: none.
func (s *server) setAutoRetryCommand(r *request) (any, error) {
	enabled, err := r.boolean("enabled")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.autoRetry = enabled
	s.mu.Unlock()
	return nil, nil
}

// setSessionNameCommand names the session (a session_info entry, written only
// when the name changes); get_state reports it.
// Fields: name (non-empty after trimming). Answer: null. Events:
// session_info_changed before the answer, when the name changed. UI: setTitle.
func (s *server) setSessionNameCommand(r *request) (any, error) {
	name, err := r.str("name")
	if err != nil {
		return nil, err
	}
	if name = strings.TrimSpace(name); name == "" {
		return nil, errors.New("Session name cannot be empty")
	}
	changed, err := s.conv.setName(name)
	if changed {
		s.emit("session_info_changed", sessionInfoChanged{name}, nil)
		s.tell(uiRequest{Method: "setTitle", Title: name})
	}
	return nil, err
}

// sessionInfoChanged is the data of session_info_changed.
type sessionInfoChanged struct {
	Name string `json:"name"`
}
