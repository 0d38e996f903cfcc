package main

import "encoding/json"

// session/load's replay: a session's current branch as the updates that
// show it again — the user's text, the answers, the tool calls as cards
// with their ends — and the card ids a later call must not take again
// (docs/acp.md#sessions).

// acpDecoder decodes a recorded tool call's arguments, strictly, as the
// tool does (session.decodeRecordedCall).
type acpDecoder func(name string, args json.RawMessage) (toolCall, error)

// replay is a session's current branch as the updates a client shows:
// the user's messages as user_message_chunk, answers and thinking as
// chunks, each tool call as one tool_call already completed or failed
// (its title and locations from its arguments as decode reads them), the
// plan after each change, a compaction as its note. The whole branch is
// replayed, the messages before a compaction too, as the user saw them.
// The client's view of the session starts again with it: the replayed
// cards are the toolCallIds given (two calls with one id get two cards,
// each with its own result), so that a later call does not reuse one.
func (u *acpUpdates) replay(entries []*sessionEntry, decode acpDecoder) []any {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.cards, u.repeats = map[string]bool{}, map[string]int{}
	for _, t := range u.tools { // calls running or waiting now keep their cards
		u.cards[t.id] = true
	}
	results := map[string][]*toolResultMessage{} // by the model's id, in order
	for _, e := range entries {
		if r, ok := e.msg.(*toolResultMessage); ok {
			results[r.ToolCallID] = append(results[r.ToolCallID], r)
		}
	}
	var out []any
	for _, e := range entries {
		if e.Type == "compaction" {
			out = append(out, u.replayCompaction(e)...)
			continue
		}
		switch m := e.msg.(type) {
		case *userMessage:
			id := u.newID()
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					out = append(out, acpChunk{"user_message_chunk", acpTextBlock(b.Text), id})
				case "image":
					out = append(out, acpChunk{"user_message_chunk", acpImage{"image", b.Data, b.MimeType}, id})
				}
			}
		case *assistantMessage:
			out = append(out, u.replayAnswer(m, results, decode, u.newID())...)
		case *toolResultMessage:
			if m.ToolName == "todo" {
				if plan, ok := acpPlanOfDetails(m.Details); ok {
					out = append(out, plan)
				}
			}
		}
	}
	return out
}

// replayAnswer is one answer replayed: its thinking, its text, its tool
// calls each ended as its result says (the next result with its id;
// failed without one), and its error. Called with mu held.
func (u *acpUpdates) replayAnswer(m *assistantMessage, results map[string][]*toolResultMessage, decode acpDecoder, id string) []any {
	var out []any
	for _, b := range m.Content {
		switch b.Type {
		case "thinking":
			if b.Thinking != "" {
				out = append(out, acpChunk{"agent_thought_chunk", acpTextBlock(b.Thinking), id})
			}
		case "text":
			if b.Text != "" {
				out = append(out, acpChunk{"agent_message_chunk", acpTextBlock(b.Text), id})
			}
		case "toolCall":
			if len(results[b.ID]) == 0 && u.tools[b.ID] != nil {
				continue // the call runs or waits now: its live card goes on
			}
			call := acpToolCall{SessionUpdate: "tool_call", ToolCallID: u.claimCard(b.ID), Status: "failed", RawInput: b.Arguments}
			decoded, _ := decode(b.Name, b.Arguments)
			call.Kind, call.Title, call.Locations = acpToolInfo(b.Name, decoded, u.paths)
			if rs := results[b.ID]; len(rs) > 0 {
				r := rs[0]
				results[b.ID] = rs[1:]
				call.Content = acpResultContent(b.Name, r.Content)
				call.RawOutput = toolResult{Content: r.Content, Details: r.Details}
				if !r.IsError {
					call.Status = "completed"
				}
			} else {
				call.Content = []any{acpContentItem{"content", acpTextBlock("No result: the call did not finish.")}}
			}
			out = append(out, call)
		}
	}
	if m.StopReason == "error" && m.ErrorMessage != "" {
		out = append(out, acpChunk{"agent_message_chunk", acpTextBlock(m.ErrorMessage), id})
	}
	return out
}

// knowCards takes the tool call ids of a session's branch as given to
// the client already (session/resume: the client has the history), so
// that a later call with one of them gets a card of its own.
func (u *acpUpdates) knowCards(entries []*sessionEntry) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cards == nil {
		u.cards, u.repeats = map[string]bool{}, map[string]int{}
	}
	for _, e := range entries {
		if m, ok := e.msg.(*assistantMessage); ok {
			for _, b := range m.Content {
				if b.Type == "toolCall" {
					u.cards[b.ID] = true
				}
			}
		}
	}
}

// acpPlanOfDetails is the plan a todo result's details hold.
func acpPlanOfDetails(details any) (acpPlan, bool) {
	raw, err := json.Marshal(details)
	var d struct {
		Phases []todoPhase `json:"phases"`
	}
	if err != nil || json.Unmarshal(raw, &d) != nil || d.Phases == nil {
		return acpPlan{}, false
	}
	return acpPlanOf(d.Phases), true
}
