package main

// OpenAI Chat Completions (openai-completions), which most hosts speak:
// the request body, with each host's quirks (catalog.go), and the reader
// of its stream.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// openAIChat is the Chat Completions API.
var openAIChat = &wireAPI{
	name:    apiOpenAI,
	url:     func(m *model) string { return m.BaseURL + "/chat/completions" },
	auth:    bearer,
	body:    func(req streamRequest) any { return openAIBody(req) },
	headers: openAIChatAffinity,
	maxTokens: func(req streamRequest) int {
		return sampledTokens(req, cmp.Or(req.model.compat.MaxTokensField, "max_tokens"), openAIMaxTokens(req))
	},
	read: readOpenAI,
}

// openAIChatAffinity puts a Chat Completions request's session id in the
// headers its host routes a session's requests by, as pi 1.6 does: with
// compat sendSessionAffinityHeaders (OpenRouter, Fireworks), x-session-id
// in OpenRouter's format, else session_id (but in the "openai-nosession"
// format), x-client-request-id and x-session-affinity; and to Mistral,
// x-affinity, as pi's Mistral API does.
func openAIChatAffinity(h http.Header, req streamRequest) {
	c, id := req.model.compat, req.headerSessionID()
	switch {
	case id == "":
		return
	case c.mistral:
		h.Set("x-affinity", id)
	}
	if !setting(c.SendSessionAffinityHeaders, false) {
		return
	}
	switch c.SessionAffinityFormat {
	case "openrouter":
		h.Set("x-session-id", id)
		return
	case "", "openai":
		h["session_id"] = []string{id} // as pi writes it: Set would make it Session_id
	}
	h.Set("x-client-request-id", id)
	h.Set("x-session-affinity", id)
}

// openAIBody is a Chat Completions request, with the quirks of the
// model's host (compat): the field that caps the answer, how reasoning is
// asked for, and whether usage is asked for in the stream.
func openAIBody(req streamRequest) map[string]any {
	c := req.model.compat
	ids := newCallIDs(func(id string, n int) string {
		switch {
		case c.mistral && n > 0:
			return mistralCallID(id + "#" + strconv.Itoa(n))
		case c.mistral:
			return mistralCallID(joinedCallID(id))
		case n > 0:
			return nthCallID(id, n, maxOpenAICallID)
		}
		return openAICallID(joinedCallID(id))
	})
	var messages []map[string]any
	if req.system != "" {
		messages = append(messages, map[string]any{"role": "system", "content": req.system})
	}
	image := func(b contentBlock) map[string]any {
		if note := imageNote(req.model, b); note != "" {
			return map[string]any{"type": "text", "text": note}
		}
		return map[string]any{"type": "image_url", "image_url": map[string]string{"url": dataURL(b)}}
	}
	// A user turn; Mistral refuses one right after tool results ("Unexpected
	// role 'user' after role 'tool'"), so an assistant turn comes between,
	// as pi's requiresAssistantAfterToolResult has it.
	addUser := func(parts []map[string]any) {
		if n := len(messages); c.mistral && n > 0 && messages[n-1]["role"] == "tool" {
			messages = append(messages, map[string]any{"role": "assistant", "content": "I have processed the tool results."})
		}
		messages = append(messages, map[string]any{"role": "user", "content": parts})
	}
	// The images of a run of tool results go in a user message after it.
	var toolImages []map[string]any
	flushImages := func() {
		if len(toolImages) > 0 {
			addUser(append([]map[string]any{{"type": "text", "text": toolImagesText}}, toolImages...))
			toolImages = nil
		}
	}
	for _, m := range req.context() {
		if _, result := m.(*toolResultMessage); !result {
			flushImages()
		}
		switch m := m.(type) {
		case *userMessage:
			var parts []map[string]any
			for _, b := range m.Content {
				if b.Type == "text" {
					parts = append(parts, map[string]any{"type": "text", "text": b.Text})
				} else if b.Type == "image" {
					parts = append(parts, image(b))
				}
			}
			if len(parts) > 0 {
				addUser(parts)
			}
		case *assistantMessage:
			msg := map[string]any{"role": "assistant", "content": nil}
			var texts []string // the text blocks, but those of white space alone, as pi sends them
			var thinking []contentBlock
			// Thinking goes back only to the model that made it, as pi
			// sends it: another model would take it for its own reply.
			same := sameModel(m, req.model)
			var calls []map[string]any
			var legacy reasoningDetails
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					if strings.TrimSpace(b.Text) != "" {
						texts = append(texts, b.Text)
					}
				case "thinking":
					// Encrypted thinking (another API's) is not text.
					if same && !b.Redacted {
						thinking = append(thinking, b)
					}
				case "toolCall":
					calls = append(calls, map[string]any{"id": ids.call(b.ID), "type": "function",
						"function": map[string]string{"name": b.Name, "arguments": callArguments(b)}})
					if d := legacyReasoningDetail(b.Signature); d != nil && same {
						legacy = append(legacy, d)
					}
				}
			}
			text := strings.Join(texts, "")
			openAIThinking(msg, req.model, thinking, legacy, texts)
			if msg["content"] == nil && text != "" {
				msg["content"] = text
			}
			if calls != nil {
				msg["tool_calls"] = calls
			}
			if _, set := msg["reasoning_content"]; !set && setting(c.RequiresReasoningContent, false) && req.model.Reasoning {
				msg["reasoning_content"] = ""
			}
			if msg["content"] != nil || calls != nil {
				messages = append(messages, msg)
			}
		case *toolResultMessage:
			messages = append(messages, map[string]any{"role": "tool", "tool_call_id": ids.result(m.ToolCallID), "content": toolResultText(req.model, m.Content)})
			for _, b := range toolResultImages(req.model, m.Content) {
				toolImages = append(toolImages, image(b))
			}
		}
	}
	flushImages()
	maxTokens := openAIMaxTokens(req)
	body := map[string]any{"model": req.model.ID, "messages": messages, "stream": true,
		cmp.Or(c.MaxTokensField, "max_tokens"): maxTokens}
	if setting(c.SupportsUsageInStreaming, true) {
		body["stream_options"] = map[string]bool{"include_usage": true}
	}
	// The session's id as prompt_cache_key, to OpenAI's host, Mistral's,
	// or with long retention, as pi sends it.
	if key := req.promptCacheKey(); key != "" && (c.promptCacheKey || c.mistral || req.longCacheOf()) {
		body["prompt_cache_key"] = key
	}
	if req.longCacheOf() {
		body["prompt_cache_retention"] = "24h"
	}
	if len(req.tools) > 0 {
		var tools []map[string]any
		for _, t := range req.tools {
			fn := map[string]any{"name": t.name, "description": t.description, "parameters": t.schema}
			if setting(c.SupportsStrictMode, false) { // a host that does not take strict refuses the field
				strict, ok := t.strictFor(false)
				if ok {
					fn["parameters"] = strict
				}
				fn["strict"] = ok
			}
			tools = append(tools, map[string]any{"type": "function", "function": fn})
		}
		body["tools"] = tools
	}
	if req.model.Reasoning {
		openAIReasoning(body, req.model, req.thinking)
		openAIThinkingBudget(body, req, maxTokens)
	}
	putSampling(body, req.model, req.thinking)
	return body
}

// openAIThinking puts into msg, an earlier answer of the model called, its
// thinking as pi 1.6 sends it back (thinking holds the answer's thinking
// blocks, none when another model wrote it; legacy the encrypted entries
// an older pi kept on its tool calls; texts its text): the
// reasoning_details a block's signature holds (storedReasoningDetails,
// else legacy), and the thinking that is not white space alone, in the
// reasoning field the first such block's signature names (joined by a
// newline) when there are no reasoning_details — or, to a host that
// requiresThinkingAsText, as a text part before the answer's text, the
// blocks joined by a blank line. A block whose signature names no field
// (one rpi kept before it recorded the field) goes as reasoning_content
// to a host that wants that on every answer (DeepSeek), as rpi sent it.
func openAIThinking(msg map[string]any, m *model, thinking []contentBlock, legacy reasoningDetails, texts []string) {
	var details []byte
	for _, b := range thinking {
		if details = storedReasoningDetails(b.Signature); details != nil {
			break
		}
	}
	if details == nil && legacy != nil {
		details = legacy.appendJSON(nil)
	}
	if details != nil {
		msg["reasoning_details"] = json.RawMessage(details)
	}
	var said []string
	field := ""
	for _, b := range thinking {
		if strings.TrimSpace(b.Thinking) != "" {
			if said == nil {
				field = b.Signature
			}
			said = append(said, b.Thinking)
		}
	}
	switch {
	case said == nil:
	case setting(m.compat.RequiresThinkingAsText, false):
		parts := []map[string]string{{"type": "text", "text": strings.Join(said, "\n\n")}}
		for _, t := range texts {
			parts = append(parts, map[string]string{"type": "text", "text": t})
		}
		msg["content"] = parts
	case details != nil:
	default:
		if field == "reasoning" && m.Provider == "opencode-go" {
			field = "reasoning_content"
		}
		if !slices.Contains([]string{"reasoning", "reasoning_content", "reasoning_text"}, field) {
			if !setting(m.compat.RequiresReasoningContent, false) {
				return
			}
			field = "reasoning_content"
		}
		msg[field] = strings.Join(said, "\n")
	}
}

// openAIReasoning asks for the thinking level the way the host takes it.
// A level the model does not take moves to the nearest one it does; off
// is sent only where the host has a way to say it (or the model names a
// value for it, like "none").
func openAIReasoning(body map[string]any, m *model, thinking string) {
	c := m.compat
	level, effort := m.wireLevel(thinking)
	on := level != "off"
	sendEffort := setting(c.SupportsReasoningEffort, true) && effort != ""
	switch c.ThinkingFormat {
	case "openrouter":
		body["reasoning"] = map[string]string{"effort": cmp.Or(effort, "none")}
		return
	case "deepseek":
		body["thinking"] = map[string]string{"type": map[bool]string{true: "enabled", false: "disabled"}[on]}
		sendEffort = sendEffort && on
	case "together":
		body["reasoning"] = map[string]bool{"enabled": on}
		sendEffort = sendEffort && on
	case "zai":
		if on {
			body["thinking"] = map[string]any{"type": "enabled", "clear_thinking": false}
		} else {
			body["thinking"] = map[string]string{"type": "disabled"}
		}
		sendEffort = sendEffort && on
	case "none":
		return
	}
	if sendEffort {
		body["reasoning_effort"] = effort
	}
}

// openAIThinkingBudget caps the reasoning with the top-level field the
// host's compat names (thinkingTokenBudgetField, or
// supportsThinkingTokenBudget's thinking_token_budget), as pi 1.6 does:
// the level's budget (the user's or pi's: thinkingBudgets.of), at most
// what maxTokens (the request's max_tokens) leaves past minAnswerTokens
// for the answer; none when the session's level is off (even where the
// model cannot stop thinking) or no budget is left.
func openAIThinkingBudget(body map[string]any, req streamRequest, maxTokens int) {
	c := req.model.compat
	field := c.ThinkingTokenBudgetField
	if field == "" && setting(c.SupportsThinkingTokenBudget, false) {
		field = "thinking_token_budget"
	}
	level, _ := req.model.wireLevel(req.thinking)
	budget, ok := req.budgets.of(level)
	if field == "" || !ok || req.thinking == "off" {
		return
	}
	if budget = min(budget, max(0, maxTokens-minAnswerTokens)); budget > 0 {
		body[field] = budget
	}
}

// openAIContent is a delta's content: a string, or (Mistral) a list of
// chunks, text and thinking.
type openAIContent struct{ text, thinking string }

func (c *openAIContent) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '[' {
		var chunks []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Thinking []struct {
				Text string `json:"text"`
			} `json:"thinking"`
		}
		if err := json.Unmarshal(data, &chunks); err != nil {
			return err
		}
		for _, ch := range chunks {
			c.text += ch.Text
			for _, t := range ch.Thinking {
				c.thinking += t.Text
			}
		}
		return nil
	}
	var text *string
	if err := json.Unmarshal(data, &text); err != nil {
		return err
	}
	if text != nil {
		c.text = *text
	}
	return nil
}

type openAIChunk struct {
	Choices []openAIChoice `json:"choices"`
	Usage   *openAIUsage   `json:"usage"`
	Error   *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// openAIUsage is a Chat Completions usage, with the cached tokens where
// each host puts them, as pi 1.6 reads them (counts).
type openAIUsage struct {
	PromptTokens        tokenCount `json:"prompt_tokens"`
	CompletionTokens    tokenCount `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens     *tokenCount `json:"cached_tokens"`      // OpenAI's, OpenRouter's
		CacheWriteTokens tokenCount  `json:"cache_write_tokens"` // OpenRouter's
	} `json:"prompt_tokens_details"`
	PromptCacheHitTokens *tokenCount `json:"prompt_cache_hit_tokens"` // DeepSeek's
	CachedTokens         *tokenCount `json:"cached_tokens"`           // Kimi's
}

// counts are the usage's input (the prompt less the tokens read from and
// written to the cache), cache reads, cache writes and output: the
// cached tokens are the first given of OpenAI's, DeepSeek's and Kimi's.
func (u *openAIUsage) counts() (input, cacheRead, cacheWrite, output int) {
	var read *tokenCount
	if d := u.PromptTokensDetails; d != nil {
		read, cacheWrite = d.CachedTokens, int(d.CacheWriteTokens)
	}
	for _, r := range []*tokenCount{u.PromptCacheHitTokens, u.CachedTokens} {
		if read == nil {
			read = r
		}
	}
	if read != nil {
		cacheRead = int(*read)
	}
	return subTokens(subTokens(int(u.PromptTokens), cacheRead), cacheWrite), cacheRead, cacheWrite, int(u.CompletionTokens)
}

type openAIChoice struct {
	Delta        openAIDelta  `json:"delta"`
	FinishReason *string      `json:"finish_reason"`
	Usage        *openAIUsage `json:"usage"` // Moonshot's, when the chunk has none
}

type openAIDelta struct {
	Content          openAIContent `json:"content"`
	ReasoningContent *string       `json:"reasoning_content"`
	Reasoning        *string       `json:"reasoning"`
	ReasoningText    *string       `json:"reasoning_text"`
	// ReasoningDetails is OpenRouter's structured reasoning, kept as the
	// server sent it: readOpenAI reads what of it is an array of entries.
	ReasoningDetails rawDetails `json:"reasoning_details"`
	ToolCalls        []struct {
		Index    *int   `json:"index"` // absent from some servers' pieces
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// rawDetails is a delta's reasoning_details as the server sent it; null
// is none (nil), as decodeOpenAIDelta has it.
type rawDetails []byte

func (r *rawDetails) UnmarshalJSON(data []byte) error {
	if string(data) != "null" {
		*r = append((*r)[:0], data...)
	}
	return nil
}

// openAIIdentity is a chunk's id and model, each "" when it is not a
// string there.
func openAIIdentity(data []byte) (id, model string) {
	if !utf8.Valid(data) {
		return "", ""
	}
	var room [8]member
	members, _ := scanObject(data, room[:0])
	for _, m := range members {
		if len(m.value) == 0 || m.value[0] != '"' {
			continue
		}
		switch string(m.key) {
		case "id":
			unquote(m.value, &id)
		case "model":
			unquote(m.value, &model)
		}
	}
	return id, model
}

// decodeOpenAIDelta decodes the chunk that carries most of a stream —
// choices whose delta holds text or thinking as a string, and a
// finish_reason — without encoding/json, which allocates for every
// field of every chunk. It reports false, leaving chunk as it was, for
// anything else (tool calls, usage, an error, content as a list, a key
// spelled in another case, one given twice, invalid UTF-8): encoding/json
// decodes that. FuzzOpenAIDelta holds it to encoding/json's result.
func decodeOpenAIDelta(data []byte, chunk *openAIChunk) bool {
	if !utf8.Valid(data) {
		return false
	}
	var room [8]member
	top, ok := scanObject(data, room[:0])
	if !ok {
		return false
	}
	var choices []byte
	for _, m := range top {
		switch k := string(m.key); {
		case k == "choices" && choices == nil:
			choices = m.value
		case k == "usage" || k == "error":
			if string(m.value) != "null" {
				return false
			}
		case strings.EqualFold(k, "choices") || strings.EqualFold(k, "usage") || strings.EqualFold(k, "error"):
			return false // another spelling, or a second one: encoding/json's rules decide
		}
	}
	if choices == nil || string(choices) == "null" {
		return true
	}
	if choices[0] != '[' {
		return false
	}
	out := openAIChunk{Choices: []openAIChoice{}} // [] is an empty list, as encoding/json has it
	for i := skipSpace(choices, 1); i < len(choices) && choices[i] != ']'; {
		end := skipValue(choices, i, 0)
		if end < 0 {
			return false
		}
		c, ok := decodeOpenAIChoice(choices[i:end])
		if !ok {
			return false
		}
		out.Choices = append(out.Choices, c)
		if i = skipSpace(choices, end); i < len(choices) && choices[i] == ',' {
			i = skipSpace(choices, i+1)
		}
	}
	*chunk = out
	return true
}

// decodeOpenAIChoice is one choice of decodeOpenAIDelta's chunk.
func decodeOpenAIChoice(raw []byte) (c openAIChoice, ok bool) {
	var room [6]member
	members, ok := scanObject(raw, room[:0])
	if !ok {
		return c, false
	}
	seen := 0
	for _, m := range members {
		switch k := string(m.key); {
		case k == "delta" && seen&1 == 0:
			seen |= 1
			if string(m.value) == "null" {
				continue
			}
			if c.Delta, ok = decodeOpenAIDeltaFields(m.value); !ok {
				return c, false
			}
		case k == "finish_reason" && seen&2 == 0:
			seen |= 2
			if string(m.value) == "null" {
				continue
			}
			var reason string
			if m.value[0] != '"' || !unquote(m.value, &reason) {
				return c, false
			}
			c.FinishReason = &reason
		case k == "usage" && string(m.value) == "null":
		case strings.EqualFold(k, "delta") || strings.EqualFold(k, "finish_reason") || strings.EqualFold(k, "usage"):
			return c, false // a usage, another spelling, or a second one: encoding/json's rules decide
		}
	}
	return c, true
}

// openAIDeltaKeys are the keys of a delta that openAIChunk decodes.
var openAIDeltaKeys = []string{"content", "reasoning_content", "reasoning", "reasoning_text", "tool_calls", "reasoning_details"}

// decodeOpenAIDeltaFields is a delta of text or thinking, as strings.
func decodeOpenAIDeltaFields(raw []byte) (d openAIDelta, ok bool) {
	var room [6]member
	members, ok := scanObject(raw, room[:0])
	if !ok {
		return d, false
	}
	text := func(v []byte) (*string, bool) {
		if string(v) == "null" {
			return nil, true
		}
		var s string
		if v[0] != '"' || !unquote(v, &s) {
			return nil, false
		}
		return &s, true
	}
	seen := 0 // a bit for each key met, by its place in openAIDeltaKeys
	for _, m := range members {
		k := string(m.key)
		var target **string
		switch k {
		case "content":
			var s *string
			if s, ok = text(m.value); !ok {
				return d, false
			}
			if s != nil {
				d.Content.text = *s
			}
		case "reasoning_content":
			target = &d.ReasoningContent
		case "reasoning":
			target = &d.Reasoning
		case "reasoning_text":
			target = &d.ReasoningText
		case "tool_calls", "reasoning_details":
			if string(m.value) != "null" {
				return d, false
			}
		default:
			for _, known := range openAIDeltaKeys {
				if strings.EqualFold(k, known) {
					return d, false
				}
			}
			continue
		}
		bit := 1 << slices.Index(openAIDeltaKeys, k)
		if seen&bit != 0 {
			return d, false
		}
		seen |= bit
		if target != nil {
			if *target, ok = text(m.value); !ok {
				return d, false
			}
		}
	}
	return d, true
}

// readOpenAI reads a Chat Completions stream. Text and thinking each
// stream into the open block of their kind; tool calls are keyed by
// tool_calls[].index, as the format does, so the pieces of parallel calls
// may interleave and calls without ids stay apart (a piece without an
// index continues the call with its id, or the latest one). Tool calls
// stay open until the stream ends, then end in the order they started.
//
// A thinking block records where its thinking came from as pi 1.6 does, in
// its thinkingSignature: the name of the field that opened it
// (reasoning_content, reasoning or reasoning_text), or, when the stream
// had reasoning_details, their JSON on the answer's first thinking block
// (reasoningDetails.add joins their pieces). Either goes back to the
// model that wrote it (openAIThinking).
func readOpenAI(body io.Reader, st *streamer, m *model) error {
	current := -1       // index of the open text or thinking block
	firstThinking := -1 // the answer's first thinking block
	var details reasoningDetails
	finish := ""
	closeCurrent := func() {
		if current >= 0 {
			st.endBlock(current)
			current = -1
		}
	}
	open := func(kind, signature string) int {
		if current >= 0 && st.msg.Content[current].Type == kind {
			return current
		}
		closeCurrent()
		current = st.startBlock(len(st.msg.Content), contentBlock{Type: kind, Signature: signature})
		if kind == "thinking" && firstThinking < 0 {
			firstThinking = current
		}
		return current
	}
	var calls []int          // the tool calls' blocks, in the order they started
	byIndex := map[int]int{} // a call's tool_calls[].index → its block
	byID := map[string]int{} // a call's id → its block, for pieces without an index
	call := func(index *int, id, name string) int {
		i, ok := -1, false
		switch {
		case index != nil:
			i, ok = byIndex[*index]
		case id != "":
			i, ok = byID[id]
		case len(calls) > 0:
			i, ok = calls[len(calls)-1], true
		}
		if !ok {
			closeCurrent()
			if i = st.startBlock(len(st.msg.Content), contentBlock{Type: "toolCall", ID: id, Name: name}); i < 0 {
				return i // the answer is cut
			}
			calls = append(calls, i)
		}
		// The first piece may lack the id or the name: the first later piece
		// that has it gives it, counted as a first piece's is. Another id
		// a later piece brings is not the call's, nor kept.
		b := &st.msg.Content[i]
		if b.ID == "" && id != "" && st.take(len(id)) {
			b.ID = id
		}
		if b.Name == "" && name != "" && st.take(len(name)) {
			b.Name = name
		}
		if index != nil {
			byIndex[*index] = i
		}
		if id != "" && id == b.ID {
			byID[id] = i
		}
		return i
	}
	identified := false
	err := st.events(body, func(_ string, data []byte) (bool, error) {
		if string(data) == "[DONE]" {
			return true, nil
		}
		if !identified {
			// Every piece names the response and the model, from the
			// first that names any (pi 1.6 keeps the first id it is
			// given): they are looked for until an id came.
			id, answered := openAIIdentity(data)
			st.responded(id, answered, m.ID)
			identified = id != ""
		}
		var chunk openAIChunk
		if !decodeOpenAIDelta(data, &chunk) {
			if err := json.Unmarshal(data, &chunk); err != nil {
				return true, &providerError{message: fmt.Sprintf("Invalid response from the model server: %v", err)}
			}
		}
		if chunk.Error != nil {
			return true, &providerError{message: chunk.Error.Message}
		}
		u := chunk.Usage
		if u == nil && len(chunk.Choices) > 0 {
			u = chunk.Choices[0].Usage
		}
		if u != nil {
			mu := &st.msg.Usage
			mu.Input, mu.CacheRead, mu.CacheWrite, mu.Output = u.counts()
		}
		// The answer is the first choice, as pi 1.6 reads it: another
		// one's text or calls are not joined to it.
		for _, c := range chunk.Choices[:min(len(chunk.Choices), 1)] {
			d := c.Delta
			for _, f := range []struct {
				name     string
				thinking *string
			}{{"reasoning_content", d.ReasoningContent}, {"reasoning", d.Reasoning}, {"reasoning_text", d.ReasoningText}, {"", &d.Content.thinking}} {
				if f.thinking != nil && *f.thinking != "" {
					if f.name == "reasoning" && m.Provider == "opencode-go" {
						f.name = "reasoning_content" // pi's: the host wants it back there
					}
					st.delta(open("thinking", f.name), *f.thinking)
					break
				}
			}
			// Each entry counts towards the answer's bound as it comes, as
			// what it adds to the details held (details.cost); an entry
			// pi would not take is left out, and so is anything but an
			// array.
			eachElement(d.ReasoningDetails, func(elem []byte) {
				if detail, size, ok := parseReasoningDetail(elem); ok && st.take(details.cost(detail, size)+1) {
					if firstThinking < 0 {
						open("thinking", "")
					}
					details.add(detail)
				}
			})
			if d.Content.text != "" {
				st.delta(open("text", ""), d.Content.text)
			}
			for _, tc := range d.ToolCalls {
				i := call(tc.Index, tc.ID, tc.Function.Name)
				if tc.Function.Arguments != "" {
					st.delta(i, tc.Function.Arguments)
				}
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
				// [DONE] may not follow, as the OpenAI SDK has it (a server that
				// writes "" in every piece has not finished).
				st.finished = finish != ""
			}
		}
		return false, nil
	})
	if details != nil && firstThinking >= 0 {
		st.msg.Content[firstThinking].Signature = string(details.appendJSON(nil))
	}
	closeCurrent()
	for _, i := range calls {
		st.endBlock(i)
	}
	if err != nil {
		return err
	}
	stop := map[string]string{"stop": "stop", "end": "stop", "": "stop", "length": "length", "tool_calls": "toolUse", "function_call": "toolUse"}
	return st.stopAs(stop[finish], finish, "Provider finish_reason: "+finish, m) // pi 1.6's words
}
