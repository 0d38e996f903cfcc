package main

// The session's statistics (get_session_stats, ACP's usage_update): its
// messages, tokens and cost counted over the whole session file as pi 1.6
// counts them, and how full the context window is.

import "encoding/json"

type tokenStats struct {
	Input      int `json:"input"`
	Output     int `json:"output"`
	CacheRead  int `json:"cacheRead"`
	CacheWrite int `json:"cacheWrite"`
	Total      int `json:"total"`
}

type sessionStats struct {
	SessionFile       any           `json:"sessionFile"`
	SessionID         string        `json:"sessionId"`
	UserMessages      int           `json:"userMessages"`
	AssistantMessages int           `json:"assistantMessages"`
	ToolCalls         int           `json:"toolCalls"`
	ToolResults       int           `json:"toolResults"`
	TotalMessages     int           `json:"totalMessages"`
	Tokens            tokenStats    `json:"tokens"`
	Cost              float64       `json:"cost"`
	ContextUsage      *contextUsage `json:"contextUsage,omitempty"`
}

// contextUsage is how full the context window is (pi 1.6): tokens and
// percent are null when unknown (right after a compaction).
type contextUsage struct {
	Tokens        *int     `json:"tokens"`
	ContextWindow int      `json:"contextWindow"`
	Percent       *float64 `json:"percent"`
}

// estimateContext is pi's estimate of the context's size: the last valid
// answer's reported total, plus chars/4 for every message after it (the
// bytes of its JSON, messageJSONSize); with no valid answer, chars/4 of
// all of it — unknown (nil) when a compaction summary has no answer after
// it yet.
func estimateContext(messages []any) *int {
	base, from := 0, 0
	for i := len(messages) - 1; i >= 0; i-- {
		a, ok := messages[i].(*assistantMessage)
		if ok && a.StopReason != "error" && a.StopReason != "aborted" && a.Usage.TotalTokens > 0 {
			base, from = a.Usage.TotalTokens, i+1
			break
		}
		if m, ok := messages[i].(*summaryMessage); ok && m.Role == "compactionSummary" {
			return nil
		}
	}
	for _, m := range messages[from:] {
		base = addTokens(base, (contextSize(m)+3)/4)
	}
	return &base
}

// stats counts the session's messages, tokens and cost, and how full
// the context window is (when there is a model).
func (s *session) stats() sessionStats {
	info := s.conv.info()
	messages := s.conv.messages()
	st := s.conv.entryStats()
	st.SessionID = info.id
	if info.path != "" {
		st.SessionFile = info.path
	}
	s.mu.Lock()
	m := s.model
	s.mu.Unlock()
	if m != nil && m.ContextWindow > 0 {
		cu := &contextUsage{Tokens: s.conv.contextTokens(messages), ContextWindow: m.ContextWindow}
		if cu.Tokens != nil {
			percent := float64(*cu.Tokens) / float64(m.ContextWindow) * 100
			cu.Percent = &percent
		}
		st.ContextUsage = cu
	}
	return st
}

// entryStats counts what pi 1.6's getSessionStats counts, over every
// entry of the session file (every branch, and what compactions took out
// of the conversation, failed and aborted answers among them): the
// message entries by role, the tool calls of the answers, and the tokens
// and cost of the answers, of the usage entries (a prompt cache refresh,
// "cache_warm") and of the summaries' own requests (a compaction or
// branch summary entry's "usage"). The messages are those decoded when
// the entries were read or made; only the few other entries with a usage
// have it read from their line.
func (c *conversation) entryStats() sessionStats {
	var st sessionStats
	add := func(u usage) {
		st.Tokens.Input = addTokens(st.Tokens.Input, u.Input)
		st.Tokens.Output = addTokens(st.Tokens.Output, u.Output)
		st.Tokens.CacheRead = addTokens(st.Tokens.CacheRead, u.CacheRead)
		st.Tokens.CacheWrite = addTokens(st.Tokens.CacheWrite, u.CacheWrite)
		st.Cost = addCost(st.Cost, u.Cost.Total)
	}
	var d jsonIn
	c.mu.Lock()
	for _, e := range c.sessionFile.entries {
		switch e.Type {
		case "usage", "compaction", "branch_summary":
			if u, ok := entryUsage(e.raw, &d); ok {
				add(u)
			}
			continue
		case "message":
		default:
			continue
		}
		st.TotalMessages++
		switch m := e.msg.(type) {
		case *userMessage:
			st.UserMessages++
		case *assistantMessage:
			st.AssistantMessages++
			for _, b := range m.Content {
				if b.Type == "toolCall" {
					st.ToolCalls++
				}
			}
			add(m.Usage)
		case *toolResultMessage:
			st.ToolResults++
		}
	}
	c.mu.Unlock()
	st.Tokens.Total = addTokens(addTokens(st.Tokens.Input, st.Tokens.Output), addTokens(st.Tokens.CacheRead, st.Tokens.CacheWrite))
	return st
}

// contextTokens is estimateContext of messages, the conversation, but
// unknown (nil) until an answer with a usage came after the current
// branch's latest compaction, as pi 1.6 has it: the answers a compaction
// kept come after its summary in the conversation, yet their usage
// counted the history it took out.
func (c *conversation) contextTokens(messages []any) *int {
	c.mu.Lock()
	ss := c.sessionFile
	for e := ss.byID[ss.leaf]; e != nil; {
		if e.Type == "compaction" {
			c.mu.Unlock()
			return nil
		}
		if a, ok := e.msg.(*assistantMessage); ok && e.Type == "message" && validUsage(a) {
			break
		}
		if e.ParentID == nil {
			break
		}
		e = ss.byID[*e.ParentID]
	}
	c.mu.Unlock()
	return estimateContext(messages)
}

// entryUsage is the "usage" member of an entry's line (an object), read
// with d; false when the line has none.
func entryUsage(line []byte, d *jsonIn) (u usage, ok bool) {
	at, end, ok := memberValue(line, "usage")
	if !ok || line[at] != '{' {
		return usage{}, false
	}
	d.reset(line[at:end])
	d.usage(&u)
	if d.fail {
		u = usage{}
		if json.Unmarshal(line[at:end], &u) != nil {
			return usage{}, false
		}
	}
	return u, true
}
