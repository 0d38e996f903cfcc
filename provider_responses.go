package main

// OpenAI Responses (openai-responses): the request body, with reasoning
// items and their ids sent back to the model that made them, and the
// reader of its stream.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// openAIResponses is the Responses API.
var openAIResponses = &wireAPI{
	name:      apiResponses,
	url:       func(m *model) string { return m.BaseURL + "/responses" },
	auth:      bearer,
	body:      func(req streamRequest) any { return responsesBody(req) },
	headers:   openAISessionHeaders,
	maxTokens: func(req streamRequest) int { return sampledTokens(req, "max_output_tokens", responsesMaxTokens(req)) },
	read:      readResponses,
}

// responsesBody is a Responses API request as pi sends it: the system
// promptCommand as the first input item, the conversation as input items
// (reasoning items and item ids only back to the model that made them),
// store:false, and reasoning effort with a summary, so thinking streams.
func responsesBody(req streamRequest) map[string]any {
	m := req.model
	var input []any
	if req.system != "" {
		role := "system"
		if m.Reasoning {
			role = "developer"
		}
		input = append(input, map[string]any{"role": role, "content": req.system})
	}
	messageIDs := 0
	image := func(b contentBlock) map[string]any {
		if note := imageNote(m, b); note != "" {
			return map[string]any{"type": "input_text", "text": note}
		}
		return map[string]any{"type": "input_image", "detail": "auto", "image_url": dataURL(b)}
	}
	// The images of a run of tool results go in a user message after it.
	var toolImages []map[string]any
	flushImages := func() {
		if len(toolImages) > 0 {
			parts := append([]map[string]any{{"type": "input_text", "text": toolImagesText}}, toolImages...)
			input = append(input, map[string]any{"role": "user", "content": parts})
			toolImages = nil
		}
	}
	// The call id alone, as pi sends it; two calls that share one (of
	// two items) go apart as callIDs makes them.
	ids := newCallIDs(func(id string, n int) string {
		if n > 0 {
			return nthCallID(id, n, 64)
		}
		callID, _ := splitCallID(id)
		return wireCallID(callID)
	})
	for _, msg := range req.context() {
		if _, result := msg.(*toolResultMessage); !result {
			flushImages()
		}
		switch msg := msg.(type) {
		case *userMessage:
			var parts []map[string]any
			for _, b := range msg.Content {
				if b.Type == "text" {
					parts = append(parts, map[string]any{"type": "input_text", "text": b.Text})
				} else if b.Type == "image" {
					parts = append(parts, image(b))
				}
			}
			if len(parts) > 0 {
				input = append(input, map[string]any{"role": "user", "content": parts})
			}
		case *assistantMessage:
			same := sameModel(msg, m)
			for _, b := range msg.Content {
				switch b.Type {
				case "thinking":
					if same && !b.Redacted && b.Signature != "" && json.Valid([]byte(b.Signature)) {
						input = append(input, json.RawMessage(b.Signature))
					}
				case "text":
					if b.Text == "" {
						continue
					}
					var sig struct {
						ID string `json:"id"`
					}
					if same {
						json.Unmarshal([]byte(b.Signature), &sig)
					}
					if sig.ID == "" {
						messageIDs++
						sig.ID = "msg_rpi_" + strconv.Itoa(messageIDs)
					}
					input = append(input, map[string]any{"type": "message", "role": "assistant", "status": "completed", "id": sig.ID,
						"content": []map[string]any{{"type": "output_text", "text": b.Text, "annotations": []any{}}}})
				case "toolCall":
					_, itemID := splitCallID(b.ID)
					item := map[string]any{"type": "function_call", "call_id": ids.call(b.ID), "name": b.Name, "arguments": callArguments(b)}
					if same && strings.HasPrefix(itemID, "fc_") {
						item["id"] = itemID
					}
					input = append(input, item)
				}
			}
		case *toolResultMessage:
			input = append(input, map[string]any{"type": "function_call_output", "call_id": ids.result(msg.ToolCallID),
				"output": cmp.Or(toolResultText(m, msg.Content), "(no tool output)")})
			for _, b := range toolResultImages(m, msg.Content) {
				toolImages = append(toolImages, image(b))
			}
		}
	}
	flushImages()
	body := map[string]any{"model": m.ID, "input": input, "stream": true, "store": false,
		"max_output_tokens": responsesMaxTokens(req)}
	if len(req.tools) > 0 {
		openAIHost := strings.Contains(m.BaseURL, "api.openai.com")
		var tools []map[string]any
		for _, t := range req.tools {
			tool := map[string]any{"type": "function", "name": t.name, "description": t.description, "parameters": t.schema}
			switch strict, ok := t.strictFor(false); {
			case setting(m.compat.SupportsStrictMode, false):
				if ok {
					tool["parameters"] = strict
				}
				tool["strict"] = ok
			case openAIHost:
				tool["strict"] = false // OpenAI would hold the schema to its strict subset
			}
			tools = append(tools, tool)
		}
		body["tools"] = tools
	}
	if m.Reasoning {
		level, effort := m.wireLevel(req.thinking)
		if level == "off" {
			body["reasoning"] = map[string]any{"effort": cmp.Or(effort, "none")}
		} else {
			body["reasoning"] = map[string]any{"effort": effort, "summary": "auto"}
			body["include"] = []string{"reasoning.encrypted_content"}
		}
	}
	if strings.Contains(m.BaseURL, "api.x.ai") {
		body["include"] = []string{"reasoning.encrypted_content"}
	}
	// The session's id routes its requests to the machine that holds its
	// cached prompt, as pi sends it.
	if key := req.promptCacheKey(); key != "" {
		body["prompt_cache_key"] = key
	}
	switch {
	case !req.longCacheOf():
	case setting(m.compat.SupportsExplicitPromptCacheMode, false):
		body["prompt_cache_options"] = map[string]string{"ttl": "30m"}
	default:
		body["prompt_cache_retention"] = "24h"
	}
	putSampling(body, m, req.thinking)
	return body
}

// openAISessionHeaders sends a Responses request's session id as pi does,
// whatever compat sendSessionAffinityHeaders says: in OpenRouter's format
// (compat sessionAffinityFormat) as x-session-id, else as session-id (but
// in the "openai-nosession" format) and x-client-request-id.
func openAISessionHeaders(h http.Header, req streamRequest) {
	id := req.headerSessionID()
	switch format := req.model.compat.SessionAffinityFormat; {
	case id == "":
	case format == "openrouter":
		h.Set("x-session-id", id)
	case format == "" || format == "openai":
		h.Set("session-id", id)
		fallthrough
	default:
		h.Set("x-client-request-id", id)
	}
}

// responsesEvent is one event of a Responses stream: the fields rpi reads
// of all its types.
type responsesEvent struct {
	Type         string          `json:"type"`
	OutputIndex  int             `json:"output_index"`
	SummaryIndex int             `json:"summary_index"`
	Delta        string          `json:"delta"`
	Arguments    string          `json:"arguments"`
	Item         json.RawMessage `json:"item"`
	Response     *struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Error  *struct {
			Code    json.RawMessage `json:"code"`
			Message string          `json:"message"`
		} `json:"error"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Usage *struct {
			InputTokens        tokenCount `json:"input_tokens"`
			InputTokensDetails struct {
				CachedTokens     tokenCount `json:"cached_tokens"`
				CacheWriteTokens tokenCount `json:"cache_write_tokens"`
			} `json:"input_tokens_details"`
			OutputTokens tokenCount `json:"output_tokens"`
		} `json:"usage"`
	} `json:"response"`
	// The top-level error event, in its two shapes.
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
	Error   *struct {
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
	} `json:"error"`
}

// responsesItem is an output item: a message, a reasoning item or a
// function call.
type responsesItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Summary   []struct {
		Text string `json:"text"`
	} `json:"summary"`
	Content []struct {
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	} `json:"content"`
}

// codeText is an error code as text: a JSON string unquoted, a number as
// written, null as "".
func codeText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if string(raw) == "null" {
		return ""
	}
	return string(raw)
}

// withCode is "code: message", or the message alone without a code.
func withCode(code json.RawMessage, message string) string {
	if c := codeText(code); c != "" {
		return c + ": " + message
	}
	return message
}

// readResponses reads a Responses stream. Blocks open with
// response.output_item.added and are found again by output_index; the
// stream must end with response.completed, .incomplete or .failed.
func readResponses(body io.Reader, st *streamer, m *model) error {
	status, failure := "", ""
	err := st.events(body, func(name string, data []byte) (bool, error) {
		var ev responsesEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return true, &providerError{message: fmt.Sprintf("Invalid response from the model server: %v", err)}
		}
		if ev.Type == "response.created" && ev.Response != nil {
			st.responded(ev.Response.ID, "", m.ID)
		}
		if name == "error" || ev.Type == "error" {
			msg := withCode(ev.Code, ev.Message)
			if ev.Error != nil {
				msg = withCode(ev.Error.Code, ev.Error.Message)
			}
			return true, &providerError{message: cmp.Or(msg, "The model server reported an error")}
		}
		i, open := st.blocks[ev.OutputIndex]
		// A delta goes to an open block of its kind, as pi 1.6 takes it.
		of := func(kind string) bool { return open && st.msg.Content[i].Type == kind }
		switch ev.Type {
		case "response.output_item.added":
			var item responsesItem
			json.Unmarshal(ev.Item, &item)
			switch item.Type {
			case "reasoning":
				st.startBlock(ev.OutputIndex, contentBlock{Type: "thinking"})
			case "message":
				st.startBlock(ev.OutputIndex, contentBlock{Type: "text"})
			case "function_call":
				id := item.CallID
				if item.ID != "" {
					id += "|" + item.ID // pi's form: the item id goes back with the call
				}
				st.startBlock(ev.OutputIndex, contentBlock{Type: "toolCall", ID: id, Name: item.Name})
			}
		case "response.reasoning_summary_part.added":
			if of("thinking") && ev.SummaryIndex > 0 {
				st.delta(i, "\n\n")
			}
		case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
			if of("thinking") && ev.Delta != "" {
				st.delta(i, ev.Delta)
			}
		case "response.output_text.delta", "response.refusal.delta":
			if of("text") && ev.Delta != "" {
				st.delta(i, ev.Delta)
			}
		case "response.function_call_arguments.delta":
			if of("toolCall") && ev.Delta != "" {
				st.delta(i, ev.Delta)
			}
		case "response.function_call_arguments.done":
			if of("toolCall") && st.sofar(i) == "" && ev.Arguments != "" {
				st.delta(i, ev.Arguments)
			}
		case "response.output_item.done":
			if !open {
				break
			}
			var item responsesItem
			json.Unmarshal(ev.Item, &item)
			b := &st.msg.Content[i]
			var whole []string // the item's text, for a block whose deltas never came
			// An item signs only the block its type opens (a reasoning item
			// a thinking, a message a text): one done as another type than
			// it was added as would sign a block with what its type's API
			// does not take (a text sent back with a reasoning item's id).
			switch item.Type {
			case "reasoning":
				var compact bytes.Buffer
				if b.Type == "thinking" && json.Compact(&compact, ev.Item) == nil {
					st.keep(&b.Signature, compact.String())
				}
				for _, s := range item.Summary {
					whole = append(whole, s.Text)
				}
			case "message":
				sig, _ := json.Marshal(struct {
					V  int    `json:"v"`
					ID string `json:"id"`
				}{1, item.ID})
				if b.Type == "text" {
					st.keep(&b.Signature, string(sig))
				}
				for _, c := range item.Content {
					whole = append(whole, c.Text+c.Refusal)
				}
			case "function_call":
				whole = []string{item.Arguments}
			}
			sep := "\n\n"
			if item.Type != "reasoning" {
				sep = ""
			}
			if kind := map[string]string{"reasoning": "thinking", "message": "text", "function_call": "toolCall"}[item.Type]; kind != b.Type {
				whole = nil // an item done as another type than it was added as fills no block
			}
			if text := strings.Join(whole, sep); st.sofar(i) == "" && text != "" {
				st.delta(i, text)
			}
			st.endBlock(i)
			delete(st.blocks, ev.OutputIndex)
		case "response.completed", "response.incomplete", "response.failed":
			r := ev.Response
			if r == nil {
				return true, &providerError{message: "Invalid response from the model server: " + ev.Type + " without a response"}
			}
			if r.ID != "" { // the id the response ended with is the one kept, as pi 1.6's
				st.msg.meta().ResponseID = r.ID
			}
			if u := r.Usage; u != nil {
				cached, written := int(u.InputTokensDetails.CachedTokens), int(u.InputTokensDetails.CacheWriteTokens)
				st.msg.Usage.Input = max(0, subTokens(subTokens(int(u.InputTokens), cached), written))
				st.msg.Usage.CacheRead, st.msg.Usage.CacheWrite, st.msg.Usage.Output = cached, written, int(u.OutputTokens)
			}
			status = cmp.Or(r.Status, strings.TrimPrefix(ev.Type, "response."))
			switch {
			case r.Error != nil:
				failure = withCode(r.Error.Code, r.Error.Message)
			case r.IncompleteDetails != nil:
				failure = r.IncompleteDetails.Reason
			}
			return true, nil
		}
		return false, nil
	})
	st.endOpen()
	if err != nil {
		return err
	}
	switch {
	case status == "completed" || status == "in_progress" || status == "queued":
		return st.stopAs("stop", status, "", m)
	case status == "incomplete" && failure == "max_output_tokens":
		return st.stopAs("length", status+"."+failure, "", m) // pi 1.6's rawStopReason
	case status == "incomplete":
		return &providerError{message: "Response incomplete: " + failure}
	}
	return &providerError{message: cmp.Or(failure, "The response "+status)}
}
