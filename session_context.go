package main

// A session's context: the conversation the leaf's branch makes (the
// latest compaction's summary, the entries it kept and those after it),
// and what each entry puts in it.

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// sessionContext is what a session says the conversation is.
type sessionContext struct {
	messages      []any
	thinkingLevel string
	provider      string
	modelID       string
	name          string
	hasThinking   bool // the branch holds a thinking_level_change entry
}

// context rebuilds the conversation from the leaf's branch: the latest
// compaction's summary first, then the entries it kept and those after
// it; the last model and thinking level on the branch; the session name.
func (ss *sessionFile) context() sessionContext {
	var c sessionContext
	path := ss.branch(ss.leaf)
	compaction := -1
	// The last of each on the branch is read, once: an entry's fields
	// are read from its line (info).
	var thinking, model *sessionEntry
	for i, e := range path {
		switch e.Type {
		case "thinking_level_change":
			thinking = e
		case "model_change":
			model = e
		case "message":
			if provider, modelID, ok := e.answeredBy(); ok {
				c.provider, c.modelID, model = provider, modelID, nil
			}
		case "compaction":
			compaction = i
		}
	}
	if thinking != nil {
		c.thinkingLevel, c.hasThinking = thinking.info().ThinkingLevel, true
	}
	if model != nil {
		info := model.info()
		c.provider, c.modelID = info.Provider, info.ModelID
	}
	for _, e := range slices.Backward(ss.entries) {
		if e.Type == "session_info" {
			c.name = strings.TrimSpace(e.info().Name)
			break
		}
	}
	start := 0
	if compaction >= 0 {
		comp := path[compaction].info()
		if head := compactionSystemMessage(path[compaction]); head != nil {
			c.messages = append(c.messages, head)
		}
		c.messages = append(c.messages, &summaryMessage{Role: "compactionSummary", Summary: comp.Summary,
			TokensBefore: comp.TokensBefore, Timestamp: entryMillis(path[compaction])})
		for start = 0; start < compaction && path[start].ID != comp.FirstKeptEntryID; start++ {
		}
		if start == compaction {
			start = compaction + 1
		}
	}
	// As pi's buildSessionProjection: the edits of the entries the
	// context is made of (the compaction, those it kept and those after),
	// the latest of each target winning.
	made := path[start:]
	if compaction >= 0 {
		made = slices.Concat(path[compaction:compaction+1], path[start:])
	}
	edits := contextEdits(made)
	if compaction >= 0 && isNull(edits[path[compaction].ID]) {
		c.messages = c.messages[:0]
	}
	for i := start; i < len(path); i++ {
		if i == compaction || i < compaction && path[i].role() == "system" {
			continue // the compaction's systemMessage stands for the system messages before it
		}
		edit, edited := edits[path[i].ID]
		if m := path[i].contextMessage(); m != nil && !isNull(edit) {
			if edited {
				m = editedMessage(m, edit)
			}
			c.messages = append(c.messages, m)
		}
	}
	return c
}

// compactionSystemMessage is the system prompt and tools a compaction
// entry kept (pi 1.6's systemMessage: what the system messages before
// it added up to), or nil when it has none that is a system message.
func compactionSystemMessage(e *sessionEntry) rawMessage {
	at, end, ok := memberValue(e.raw, "systemMessage")
	if !ok || e.raw[at] != '{' || messageRole(json.RawMessage(e.raw[at:end])) != "system" {
		return nil
	}
	clean, _ := validRaw(e.raw[at:end]) // as a message entry's: U+FFFD for bytes that are not UTF-8
	return rawMessage(clean)
}

// contextMessage is what an entry puts in the context: its message, a
// branch summary, a custom message; nil for the other entries.
func (e *sessionEntry) contextMessage() any {
	switch e.Type {
	case "message":
		if e.msg != nil {
			return e.msg
		}
	case "branch_summary":
		if info := e.info(); info.Summary != "" {
			return &summaryMessage{Role: "branchSummary", Summary: info.Summary, FromID: info.FromID, Timestamp: entryMillis(e)}
		}
	case "custom_message":
		// One reading of its line for all four (info would read it too),
		// which is what info gives of the first two.
		var m struct {
			CustomType string          `json:"customType"`
			Content    json.RawMessage `json:"content"`
			Display    bool            `json:"display"`
			Details    json.RawMessage `json:"details"`
		}
		unmarshalExact(e.raw, &m)
		m.Content, _ = validRaw(m.Content) // U+FFFD for bytes that are not UTF-8, as the decoder reads it
		m.Details, _ = validRaw(m.Details) // as its content
		fields, _ := marshalJSON(struct {
			Role       string          `json:"role"`
			CustomType string          `json:"customType"`
			Content    json.RawMessage `json:"content"`
			Display    bool            `json:"display"`
			Details    json.RawMessage `json:"details,omitempty"`
			Timestamp  int64           `json:"timestamp"`
		}{"custom", m.CustomType, m.Content, m.Display, m.Details, entryMillis(e)})
		return rawMessage(fields)
	}
	return nil
}

// answeredBy is the provider and model of an assistant message entry.
func (e *sessionEntry) answeredBy() (provider, model string, ok bool) {
	switch m := e.msg.(type) {
	case *assistantMessage:
		return m.Provider, m.Model, true
	case rawMessage:
		return textMember(m, "provider"), textMember(m, "model"), textMember(m, "role") == "assistant"
	}
	return "", "", false
}

func entryMillis(e *sessionEntry) int64 {
	t, err := time.Parse(time.RFC3339Nano, e.Timestamp)
	if err != nil {
		return 0
	}
	return t.UnixMilli()
}
