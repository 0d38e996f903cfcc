package main

import (
	"maps"
	"slices"
)

// The rpc front end's commands that read the session's state or set one
// of its plain settings: get_state, get_messages, get_last_assistant_text,
// get_capabilities, get_session_stats, get_commands, the queue modes,
// auto-compaction and auto-retry (docs/commands.md).

// getSessionStatsCommand counts the conversation's messages, tokens and cost.
// Fields: none. Answer: pi's SessionStats, with contextUsage {tokens,
// contextWindow, percent} when there is a model.
func (s *rpcServer) getSessionStatsCommand(r *rpcRequest) (any, error) {
	return s.stats(), nil
}

// getCommandsCommand lists the prompt templates and skills a prompt can name.
// Fields: none. Answer: {"commands":[{name, description, source:
// "prompt"|"skill", location: "user"|"project", path}]}.
func (s *rpcServer) getCommandsCommand(r *rpcRequest) (any, error) {
	commands := s.set.slashCommands
	if commands == nil {
		commands = []slashCommand{}
	}
	return struct {
		Commands []slashCommand `json:"commands"`
	}{commands}, nil
}

// getStateCommand answers every field of the session's state, from the
// last answer's JSON when the state is the same (stateAnswer).
// Fields: none. Answer: stateData. Events: none.
func (s *rpcServer) getStateCommand(r *rpcRequest) (any, error) {
	st := s.state()
	if !st.Model.finiteJSON() {
		return st, nil // encoding/json refuses it: the answer says so
	}
	if last := s.lastState; last != nil && last.state.sameJSON(&st) {
		return last, nil
	}
	s.lastState = &stateAnswer{state: st, json: st.appendJSON(nil)}
	return s.lastState, nil
}

// stateAnswer is a get_state answer: the state and its JSON, kept so that
// a client polling get_state costs a comparison, not an encoding.
type stateAnswer struct {
	state stateData
	json  []byte
}

func (a *stateAnswer) appendJSON(buf []byte) []byte { return append(buf, a.json...) }

// getMessagesCommand answers the conversation's messages, oldest first. The
// answer, as big as the conversation, is written message by message
// (output.stream), never held whole.
// Fields: none. Answer: {"messages":[AgentMessage]}. Events: none.
func (s *rpcServer) getMessagesCommand(r *rpcRequest) (any, error) {
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
func (s *rpcServer) getLastAssistantTextCommand(r *rpcRequest) (any, error) {
	return struct {
		Text *string `json:"text"`
	}{lastAssistantText(s.conv.messages())}, nil
}

// getCapabilitiesCommand answers what this rpi accepts and emits, derived from the
// dispatch table itself so it cannot drift.
// Fields: none. Answer: capabilities. Events: none.
func (s *rpcServer) getCapabilitiesCommand(r *rpcRequest) (any, error) {
	names := slices.Collect(maps.Keys(rpcCommands()))
	if s.served != nil { // rpi serve's own: hello, session_attach, host_status
		names = slices.AppendSeq(names, maps.Keys(servedCommands.get()))
	}
	slices.Sort(names)
	toolList := []string{}
	for _, t := range s.tools() {
		toolList = append(toolList, t.name)
	}
	return rpcCapabilities{
		ProtocolVersion: 1,
		Version:         rpiVersion,
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

// setSteeringModeCommand sets how many queued steering messages one turn takes.
// Fields: mode (all|one-at-a-time). Answer: null. Events: none.
func (s *rpcServer) setSteeringModeCommand(r *rpcRequest) (any, error) {
	mode, err := r.enum("mode", queueModes)
	if err != nil {
		return nil, err
	}
	s.setQueueMode(true, mode)
	return nil, nil
}

// setFollowUpModeCommand sets how many queued follow-ups one turn takes.
// Fields: mode (all|one-at-a-time). Answer: null. Events: none.
func (s *rpcServer) setFollowUpModeCommand(r *rpcRequest) (any, error) {
	mode, err := r.enum("mode", queueModes)
	if err != nil {
		return nil, err
	}
	s.setQueueMode(false, mode)
	return nil, nil
}

// setAutoCompactionCommand turns compaction near the context window on or off.
// Fields: enabled (bool). Answer: null. Events: none.
func (s *rpcServer) setAutoCompactionCommand(r *rpcRequest) (any, error) {
	enabled, err := r.boolean("enabled")
	if err != nil {
		return nil, err
	}
	s.setAutoCompaction(enabled)
	return nil, nil
}

// setAutoRetryCommand turns retrying of failed model calls on or off.
// Fields: enabled (bool). Answer: null. Events: none.
func (s *rpcServer) setAutoRetryCommand(r *rpcRequest) (any, error) {
	enabled, err := r.boolean("enabled")
	if err != nil {
		return nil, err
	}
	s.setAutoRetry(enabled)
	return nil, nil
}
