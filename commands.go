package main

// The server, the dispatch table from command type to handler, and the
// commands that read or set plain state.

import (
	"errors"
	"fmt"
	"io"
	"slices"
)

// A handler applies one command. It returns the success data (nil is sent
// as "data":null) or an error whose text is the failure message. A handler
// whose answer waits on the outside world hands that work to the
// background (answerLater, or an operation that answers through replyTo)
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

// server is the rpc front end (§3–§11) over one session: the command loop
// that reads lines and dispatches them to handlers (main.go's serve, and
// handleFrame below), the wire its records take, and the dialogs its
// client answers, which are the session's ui. The session's events go
// out through rpcEvents. Each handler reads its command's fields and
// calls the session's operations, which take plain values.
type server struct {
	*session
	wire    wire     // the shape of the records (rpcWire, or piWire in pi's mode)
	dialogs *dialogs // the session's ui: extension_ui_request records, and the dialogs open
}

// newServer starts the host and opens the session the command line names.
func newServer(cfg config, env environment, stdout, stderr io.Writer) (*server, error) {
	h, err := newHost(cfg, env, stdout, stderr)
	if err != nil {
		return nil, err
	}
	s := &server{wire: rpcWire{}, dialogs: newDialogs(h.out, env.clock)}
	if cfg.compat {
		s.wire = piWire{}
	}
	s.session, err = openSession(h, sessionOptions{cwd: cfg.cwd, sink: rpcEvents{h.out, s.wire}, ui: s.dialogs,
		file: cfg.sessionFile, id: cfg.sessionID, forkFrom: cfg.forkFrom, name: cfg.name})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// rpcEvents is the rpc front end's event sink: each event is one record
// in the wire's shape, written at once, under the output's lock, in the
// order the core reports them.
type rpcEvents struct {
	out  *output
	wire wire
}

func (e rpcEvents) event(ev event) {
	e.out.record(func(buf []byte) ([]byte, error) { return e.wire.appendEvent(buf, ev) })
}

func (e rpcEvents) gatheredEvent(ev event) {
	e.out.gather(func(buf []byte) ([]byte, error) { return e.wire.appendEvent(buf, ev) })
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
	// What the session posted before this answer — on another goroutine
	// too (a process's exit the answer reports) — goes out before it.
	s.deliver()
	s.gatherResponse(r.id, r.typ, data, err)
}

// reply writes the response to r.
func (s *server) reply(r *request, data any, err error) {
	if _, ok := data.(noReply); ok && err == nil {
		return
	}
	s.writeResponse(r.id, r.typ, data, err)
}

// replyTo is how r's answer is written when it comes later: reply, as a
// function the session's operations call back.
func (s *server) replyTo(r *request) func(data any, err error) {
	return func(data any, err error) { s.reply(r, data, err) }
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

// ---- State and messages ----

// getStateCommand answers every field of the session's state.
// Fields: none. Answer: stateData. Events: none.
func (s *server) getStateCommand(r *request) (any, error) {
	return s.state(), nil
}

// getMessagesCommand answers the conversation's messages, oldest first. The
// answer, as big as the conversation, is written message by message
// (output.stream), never held whole.
// Fields: none. Answer: {"messages":[AgentMessage]}. Events: none.
func (s *server) getMessagesCommand(r *request) (any, error) {
	messages := s.conv.messages()
	if !slices.ContainsFunc(messages, func(m any) bool { return !messageAppendable(m) }) {
		s.out.stream(func(buf []byte, spill func([]byte) ([]byte, bool)) []byte {
			buf = append(appendResponseHead(buf, r.id, r.typ), `,"success":true,"data":{"messages":[`...)
			more := true
			for i, m := range messages {
				if !more {
					break
				}
				if i > 0 {
					buf = append(buf, ',')
				}
				buf, _ = appendMessageJSON(buf, m)
				buf, more = spill(buf)
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
	s.setQueueMode(true, mode)
	return nil, nil
}

// setFollowUpModeCommand sets how many queued follow-ups one turn takes.
// Fields: mode (all|one-at-a-time). Answer: null. Events: none.
func (s *server) setFollowUpModeCommand(r *request) (any, error) {
	mode, err := r.enum("mode", queueModes)
	if err != nil {
		return nil, err
	}
	s.setQueueMode(false, mode)
	return nil, nil
}

// setAutoCompactionCommand turns compaction near the context window on or off.
// Fields: enabled (bool). Answer: null. Events: none.
func (s *server) setAutoCompactionCommand(r *request) (any, error) {
	enabled, err := r.boolean("enabled")
	if err != nil {
		return nil, err
	}
	s.setAutoCompaction(enabled)
	return nil, nil
}

// setAutoRetryCommand turns retrying of failed model calls on or off.
// Fields: enabled (bool). Answer: null. Events: none.
func (s *server) setAutoRetryCommand(r *request) (any, error) {
	enabled, err := r.boolean("enabled")
	if err != nil {
		return nil, err
	}
	s.setAutoRetry(enabled)
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
	return nil, s.setSessionName(name)
}
