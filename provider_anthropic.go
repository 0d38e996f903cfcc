package main

// Anthropic Messages (anthropic-messages): the request body, with
// thinking as a token budget, and the reader of its stream.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// anthropicMessages is the Messages API.
var anthropicMessages = &wireAPI{
	name: apiAnthropic,
	url:  func(m *model) string { return m.BaseURL + "/v1/messages" },
	auth: func(h http.Header, key string) {
		h.Set("anthropic-version", "2023-06-01")
		if key != "" {
			h.Set("x-api-key", key)
		}
	},
	body:      func(req streamRequest) any { return anthropicBody(req) },
	headers:   anthropicHeaders,
	maxTokens: anthropicMaxTokens,
	read:      readAnthropic,
}

// anthropicHeaders are anthropicBetas and, with compat
// sendSessionAffinityHeaders (OpenRouter), the session's id as pi 1.6
// sends it: x-session-id in OpenRouter's format, else x-session-affinity.
func anthropicHeaders(h http.Header, req streamRequest) {
	anthropicBetas(h, req)
	if id := req.headerSessionID(); id != "" && setting(req.model.compat.SendSessionAffinityHeaders, false) {
		if req.model.compat.SessionAffinityFormat == "openrouter" {
			h.Set("x-session-id", id)
		} else {
			h.Set("x-session-affinity", id)
		}
	}
}

// anthropicBetas sets the anthropic-beta header as pi 1.6 sets it: the
// fine-grained tool streaming beta for a host that takes no
// eager_input_streaming on its tools, and with thinking the interleaved
// thinking beta, so that Claude may think between tool calls. A model's
// own anthropic-beta header (models.json) replaces it.
func anthropicBetas(h http.Header, req streamRequest) {
	var betas []string
	if len(req.tools) > 0 && !setting(req.model.compat.SupportsEagerToolInputStreaming, true) {
		betas = append(betas, "fine-grained-tool-streaming-2025-05-14")
	}
	if _, ok := anthropicBudget(req, anthropicMaxTokens(req)); ok {
		betas = append(betas, "interleaved-thinking-2025-05-14")
	}
	if len(betas) > 0 {
		h.Set("anthropic-beta", strings.Join(betas, ","))
	}
}

// redactedThinking is the text of a thinking block the server sent
// encrypted, pi's.
const redactedThinking = "[Reasoning redacted]"

func anthropicBody(req streamRequest) map[string]any {
	var messages []map[string]any
	add := func(role string, blocks []map[string]any) {
		if len(blocks) == 0 {
			return
		}
		if n := len(messages); n > 0 && messages[n-1]["role"] == role {
			messages[n-1]["content"] = append(messages[n-1]["content"].([]map[string]any), blocks...)
			return
		}
		messages = append(messages, map[string]any{"role": role, "content": blocks})
	}
	// The images of error results, sent after the run of results.
	var errorImages []map[string]any
	ids := wireCallIDs()
	for _, m := range anthropicImages(req.model, req.context()) {
		if _, result := m.(*toolResultMessage); !result {
			add("user", errorImages)
			errorImages = nil
		}
		switch m := m.(type) {
		case *userMessage:
			var blocks []map[string]any
			for _, b := range m.Content {
				if b.Type == "text" && strings.TrimSpace(b.Text) != "" { // Anthropic refuses a blank text block
					blocks = append(blocks, map[string]any{"type": "text", "text": b.Text})
				} else if b.Type == "image" {
					blocks = append(blocks, anthropicImage(req.model, b))
				}
			}
			add("user", blocks)
		case *assistantMessage:
			// Thinking goes back only to the model that made it, as pi sends
			// it: another model (even another Claude of the same provider)
			// may refuse its signature, or take it for its own reply.
			signed := sameModel(m, req.model)
			var blocks []map[string]any
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					if strings.TrimSpace(b.Text) != "" {
						blocks = append(blocks, map[string]any{"type": "text", "text": b.Text})
					}
				case "thinking":
					if b.Redacted {
						// Only the model that encrypted it can read it.
						if signed && b.Signature != "" {
							blocks = append(blocks, map[string]any{"type": "redacted_thinking", "data": b.Signature})
						}
					} else if signed && strings.TrimSpace(b.Signature) != "" {
						blocks = append(blocks, map[string]any{"type": "thinking", "thinking": b.Thinking, "signature": b.Signature})
					} else if signed && strings.TrimSpace(b.Thinking) != "" {
						// No signature (an answer cut before it came, a host that
						// signs nothing): as pi sends it, as text, or to a host
						// that takes it (allowEmptySignature) as thinking with
						// an empty signature.
						if setting(req.model.compat.AllowEmptySignature, false) {
							blocks = append(blocks, map[string]any{"type": "thinking", "thinking": b.Thinking, "signature": ""})
						} else {
							blocks = append(blocks, map[string]any{"type": "text", "text": b.Thinking})
						}
					}
				case "toolCall":
					blocks = append(blocks, map[string]any{"type": "tool_use", "id": ids.call(b.ID), "name": b.Name, "input": json.RawMessage(callArguments(b))})
				}
			}
			add("assistant", blocks)
		case *toolResultMessage:
			id := ids.result(m.ToolCallID)
			var content any = toolResultText(req.model, m.Content)
			if images := toolResultImages(req.model, m.Content); len(images) > 0 && m.IsError {
				// Anthropic refuses an error result that holds anything but
				// text: its images follow the run of results, as pi sends them.
				content = errorResultText(req.model, m.Content)
				errorImages = append(errorImages, map[string]any{"type": "text",
					"text": fmt.Sprintf("Images from the error result of tool call %s (%s):", id, m.ToolName)})
				for _, b := range images {
					errorImages = append(errorImages, anthropicImage(req.model, b))
				}
			} else if len(images) > 0 {
				var blocks []map[string]any
				if text := content.(string); strings.TrimSpace(text) != "" { // Anthropic refuses a blank text block
					blocks = append(blocks, map[string]any{"type": "text", "text": text})
				}
				for _, b := range images {
					blocks = append(blocks, anthropicImage(req.model, b))
				}
				content = blocks
			}
			add("user", []map[string]any{{"type": "tool_result", "tool_use_id": id, "content": content, "is_error": m.IsError}})
		}
	}
	add("user", errorImages)
	// Three cache breakpoints, as pi sets them: the last tool, the system
	// prompt (with the tools before it) and the conversation up to its
	// last user turn; an hour long with PI_CACHE_RETENTION=long. The API
	// caches nothing it is not asked to.
	ephemeral := map[string]string{"type": "ephemeral"}
	if req.longCacheOf() {
		ephemeral["ttl"] = "1h"
	}
	if n := len(messages); n > 0 && messages[n-1]["role"] == "user" {
		blocks := messages[n-1]["content"].([]map[string]any)
		blocks[len(blocks)-1]["cache_control"] = ephemeral
	}
	maxTokens := anthropicMaxTokens(req)
	body := map[string]any{"model": req.model.ID, "messages": messages, "stream": true, "max_tokens": maxTokens}
	if req.system != "" {
		body["system"] = []map[string]any{{"type": "text", "text": req.system, "cache_control": ephemeral}}
	}
	if len(req.tools) > 0 {
		var tools []map[string]any
		for _, t := range req.tools {
			def := map[string]any{"name": t.name, "description": t.description, "input_schema": t.schema}
			if setting(req.model.compat.SupportsStrictTools, false) {
				if strict, ok := t.strictFor(true); ok {
					def["input_schema"], def["strict"] = strict, true
				}
			}
			if setting(req.model.compat.SupportsEagerToolInputStreaming, true) {
				def["eager_input_streaming"] = true
			}
			tools = append(tools, def)
		}
		if setting(req.model.compat.SupportsCacheControlOnTools, true) {
			tools[len(tools)-1]["cache_control"] = ephemeral
		}
		body["tools"] = tools
	}
	if budget, ok := anthropicBudget(req, maxTokens); ok {
		// Summarised, as older Claude 4 models think by default and pi
		// asks of every model (newer ones default to none).
		body["thinking"] = map[string]any{"type": "enabled", "budget_tokens": budget, "display": "summarized"}
	}
	return body
}

// errorResultText is an error tool result as Anthropic is sent it, text
// alone: its text blocks and the notes of images that do not go
// (imageNote), one a line, and for each run of images that go, a line
// saying they come after the results.
func errorResultText(m *model, content []contentBlock) string {
	var parts []string
	attached := false
	for _, b := range content {
		switch {
		case b.Type == "text":
			parts, attached = append(parts, b.Text), false
		case b.Type == "image" && imageNote(m, b) != "":
			parts, attached = append(parts, imageNote(m, b)), false
		case b.Type == "image" && !attached:
			parts, attached = append(parts, "(image attached after the tool results)"), true
		}
	}
	return strings.Join(parts, "\n")
}

// anthropicImage is an image block, or the note that goes in its place
// (imageNote).
func anthropicImage(m *model, b contentBlock) map[string]any {
	if note := imageNote(m, b); note != "" {
		return map[string]any{"type": "text", "text": note}
	}
	return map[string]any{"type": "image", "source": map[string]string{"type": "base64", "media_type": b.MimeType, "data": b.Data}}
}

// anthropicMaxTokens is the model's maxTokens (asking for more than a
// model writes is refused, 400) within the context window (answerTokens:
// input and max_tokens over the window are refused too), the thinking
// budget within it (anthropicBudget). Pi asks the same: its
// adjustMaxTokensForThinking adds the budget to the clamped maxTokens,
// within the model's, and clamps that again, which comes back to the
// clamped maxTokens for every budget rpi sends (none below 1024).
func anthropicMaxTokens(req streamRequest) int { return answerTokens(req) }

// Bounds of Anthropic's thinking budget: the least the API takes, and the
// room it leaves the answer within max_tokens (pi's).
const (
	minThinkingBudget = 1024
	minAnswerTokens   = 1024
)

// anthropicBudget is the thinking budget of a request asking for
// maxTokens (anthropicMaxTokens), false for none: the level's (the user's
// or pi's: thinkingBudgets.of), lowered to leave minAnswerTokens of
// maxTokens for the answer, as pi lowers it. Where that leaves less than
// minThinkingBudget (a model with a small maxTokens, a window nearly
// full) the request goes without thinking: pi sends 1024 there, or the
// little left, and Anthropic refuses both (a budget below 1024, or not
// below max_tokens).
func anthropicBudget(req streamRequest, maxTokens int) (int, bool) {
	budget, ok := req.budgets.of(req.thinking)
	if !ok || !req.model.Reasoning {
		return 0, false
	}
	budget = min(budget, maxTokens-minAnswerTokens)
	return budget, budget >= minThinkingBudget
}

type anthropicEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message struct {
		ID    string         `json:"id"`
		Model string         `json:"model"`
		Usage anthropicUsage `json:"usage"`
	} `json:"message"`
	ContentBlock struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name"`
		Data string `json:"data"` // a redacted_thinking block's
		// What a text or thinking block may start with, before its deltas.
		Text      string `json:"text"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
	} `json:"content_block"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
		StopDetails *struct {
			Explanation string `json:"explanation"` // a refusal's
		} `json:"stop_details"`
	} `json:"delta"`
	Usage *anthropicDeltaUsage `json:"usage"` // message_delta's
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// anthropicDeltaUsage is a message_delta's usage: a count left out (or
// null) is none given, and leaves the answer's as it was.
type anthropicDeltaUsage struct {
	InputTokens              *tokenCount `json:"input_tokens"`
	OutputTokens             *tokenCount `json:"output_tokens"`
	CacheReadInputTokens     *tokenCount `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *tokenCount `json:"cache_creation_input_tokens"`
}

type anthropicUsage struct {
	InputTokens              tokenCount `json:"input_tokens"`
	OutputTokens             tokenCount `json:"output_tokens"`
	CacheReadInputTokens     tokenCount `json:"cache_read_input_tokens"`
	CacheCreationInputTokens tokenCount `json:"cache_creation_input_tokens"`
}

func readAnthropic(body io.Reader, st *streamer, m *model) error {
	stop, explanation := "", ""
	u := &st.msg.Usage
	err := st.events(body, func(_ string, data []byte) (bool, error) {
		var ev anthropicEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return true, &providerError{message: fmt.Sprintf("Invalid response from the model server: %v", err)}
		}
		switch ev.Type {
		case "message_start":
			st.responded(ev.Message.ID, ev.Message.Model, m.ID)
			mu := ev.Message.Usage
			u.Input, u.Output, u.CacheRead, u.CacheWrite = int(mu.InputTokens), int(mu.OutputTokens), int(mu.CacheReadInputTokens), int(mu.CacheCreationInputTokens)
		case "content_block_start":
			switch ev.ContentBlock.Type {
			// A block's text, thinking or signature given at its start is
			// its first piece, as pi 1.6 takes it.
			case "text":
				if i := st.startBlock(ev.Index, contentBlock{Type: "text"}); i >= 0 && ev.ContentBlock.Text != "" {
					st.delta(i, ev.ContentBlock.Text)
				}
			case "thinking":
				i := st.startBlock(ev.Index, contentBlock{Type: "thinking"})
				if i >= 0 && ev.ContentBlock.Thinking != "" {
					st.delta(i, ev.ContentBlock.Thinking)
				}
				if i >= 0 && ev.ContentBlock.Signature != "" {
					st.appendSignature(i, ev.ContentBlock.Signature)
				}
			case "redacted_thinking":
				// Encrypted thinking, which must go back as it came with
				// the turn's tool use: kept as pi keeps it.
				st.startBlock(ev.Index, contentBlock{Type: "thinking", Thinking: redactedThinking, Signature: ev.ContentBlock.Data, Redacted: true})
			case "tool_use":
				st.startBlock(ev.Index, contentBlock{Type: "toolCall", ID: ev.ContentBlock.ID, Name: ev.ContentBlock.Name})
			}
		case "content_block_delta":
			// A delta goes to an open block of its kind, as pi 1.6 takes
			// it: one for a block rpi does not keep (a server tool's
			// server_tool_use) or of another kind is passed over.
			i, ok := st.blocks[ev.Index]
			if !ok {
				break
			}
			switch kind := st.msg.Content[i].Type; {
			case ev.Delta.Type == "text_delta" && kind == "text":
				st.delta(i, ev.Delta.Text)
			case ev.Delta.Type == "thinking_delta" && kind == "thinking":
				st.delta(i, ev.Delta.Thinking)
			case ev.Delta.Type == "signature_delta" && kind == "thinking":
				st.appendSignature(i, ev.Delta.Signature)
			case ev.Delta.Type == "input_json_delta" && kind == "toolCall":
				st.delta(i, ev.Delta.PartialJSON)
			}
		case "content_block_stop":
			if i, ok := st.blocks[ev.Index]; ok {
				st.endBlock(i)
				delete(st.blocks, ev.Index)
			}
		case "message_delta":
			if ev.Delta.StopReason != "" {
				stop = ev.Delta.StopReason
			}
			if d := ev.Delta.StopDetails; d != nil {
				explanation = d.Explanation
			}
			if du := ev.Usage; du != nil { // the counts it gives, as pi 1.6 takes them
				for _, c := range []struct {
					given *tokenCount
					count *int
				}{{du.InputTokens, &u.Input}, {du.OutputTokens, &u.Output}, {du.CacheReadInputTokens, &u.CacheRead},
					{du.CacheCreationInputTokens, &u.CacheWrite}} {
					if c.given != nil {
						*c.count = int(*c.given)
					}
				}
			}
		case "message_stop":
			return true, nil
		case "error":
			msg := "The model server reported an error"
			if ev.Error != nil {
				msg = ev.Error.Type + ": " + ev.Error.Message
			}
			return true, &providerError{message: msg}
		}
		return false, nil
	})
	st.endOpen() // a block the stream never ended (no content_block_stop) ends with it
	if err != nil {
		return err
	}
	reasons := map[string]string{"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "": "stop", "max_tokens": "length", "tool_use": "toolUse"}
	// What another stop is, in pi 1.6's words.
	failure := "Unhandled stop reason: " + stop
	switch stop {
	case "refusal":
		failure = cmp.Or(explanation, "The model refused to complete the request")
	case "sensitive":
		failure = "Provider stopped with: sensitive"
	}
	return st.stopAs(reasons[stop], stop, failure, m)
}
