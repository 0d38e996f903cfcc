package main

// The answer's token limit within the context window: every API asks for
// the model's maxTokens lowered so that the request's estimated input and
// the answer fit the window, as pi 1.6 asks (its clampMaxTokensToContext,
// with its estimate of the input, estimateContextTokens).

import (
	"bytes"
	"encoding/json"
	"math"
	"unicode/utf16"
)

// The room pi keeps in the window besides the estimated input: at least
// windowSafetyTokens, and windowSafetyRatio of the input while that leaves
// the answer minRatioRoom (OpenRouter counts the input up to 12% above a
// provider's count, and refuses a request over the window before routing
// it); past that only windowSafetyTokens, and the answer at most
// minRatioRoom.
const (
	windowSafetyTokens = 4096
	windowSafetyRatio  = 0.15
	minRatioRoom       = 32768
)

// Pi's estimate: 3.5 characters (UTF-16 code units, as JavaScript counts
// a string's length) a token, an image as 4800 characters.
const (
	charsPerTokenTimes2 = 7 // 3.5 characters a token, in halves
	imageChars          = 4800
)

// answerTokens is what a request asks the model to write at most: the
// model's maxTokens, lowered so that it and the input (inputTokens) fit
// the context window with pi's margin, at least 1; a model without a
// window keeps its maxTokens. A request's own cap (maxTokens) lowers it.
func answerTokens(req streamRequest) int {
	tokens := fitWindow(req.model.ContextWindow, inputTokens(req), req.model.MaxTokens)
	if req.maxTokens > 0 {
		tokens = min(tokens, req.maxTokens)
	}
	return tokens
}

// fitWindow is pi's clampMaxTokensToContext: maxTokens within window less
// input and the margin.
func fitWindow(window, input, maxTokens int) int {
	if window <= 0 {
		return max(1, maxTokens)
	}
	margin := max(windowSafetyTokens, int(math.Ceil(float64(input)*windowSafetyRatio)))
	// Held at the ends of int (subTokens): a server may report any context.
	room := subTokens(subTokens(window, input), margin)
	if room < minRatioRoom {
		room = min(minRatioRoom, subTokens(subTokens(window, input), windowSafetyTokens))
	}
	return min(maxTokens, max(1, room))
}

// inputTokens is pi's estimate of a request's input: the usage the last
// answer reported (the conversation up to it, as the server counted it)
// and the estimate of each message after it; without such an answer, the
// estimate of the system prompt, the tools and every message. An answer
// counts when it did not fail or stop, reported some usage, and is no
// older than a message before it: an older one (kept across a compaction,
// whose summary now comes first) reported a conversation that is gone.
// Messages are those pi's convertToLlm makes (failed answers too; their
// text is counted), with images blocked when the request says so.
func inputTokens(req streamRequest) int {
	var messages []any
	for _, m := range req.messages {
		switch m.(type) {
		case *assistantMessage, *toolResultMessage:
			messages = append(messages, m)
		default:
			if u := asUserMessage(m); u != nil {
				messages = append(messages, u)
			}
		}
	}
	if req.blockImages {
		messages = withoutImages(messages)
	}
	last, reported := -1, 0
	latest := int64(math.MinInt64)
	for i, m := range messages {
		var at int64
		switch m := m.(type) {
		case *userMessage:
			at = m.Timestamp
		case *toolResultMessage:
			at = m.Timestamp
		case *assistantMessage:
			at = m.Timestamp
			if n := usageTokens(m.Usage); n > 0 && at >= latest && m.StopReason != "aborted" && m.StopReason != "error" {
				last, reported = i, n
			}
		}
		latest = max(latest, at)
	}
	if last >= 0 {
		tokens := reported
		for _, m := range messages[last+1:] {
			tokens = addTokens(tokens, messageTokens(m)) // the usage may be any count
		}
		return tokens
	}
	tokens := systemTokens(req)
	for _, m := range messages {
		tokens += messageTokens(m)
	}
	return tokens
}

// usageTokens is the context an answer's usage reports: its total, or the
// sum of its parts where the server sent no total (pi's
// calculateContextTokens), held at the ends of int as a server's counts
// can be anything (addTokens).
func usageTokens(u usage) int {
	if u.TotalTokens != 0 {
		return u.TotalTokens
	}
	return addTokens(addTokens(u.Input, u.Output), addTokens(u.CacheRead, u.CacheWrite))
}

// systemTokens is pi's estimate of the system prompt and of the tools (as
// the JSON of their name, description and parameters), each apart.
func systemTokens(req streamRequest) int {
	tokens := charTokens(jsLength(req.system))
	if len(req.tools) == 0 {
		return tokens
	}
	type declaration struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	var decls []declaration
	for _, t := range req.tools {
		decls = append(decls, declaration{t.name, t.description, t.schema})
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as JSON.stringify writes it
	if enc.Encode(decls) != nil {
		return tokens + charTokens(len("[unserializable]"))
	}
	return tokens + charTokens(jsLength(string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))))
}

// messageTokens is pi's estimate of one message (estimateMessageTokens):
// of a user turn or a tool result, its text and images; of an answer, its
// text, thinking, and each tool call's name and arguments.
func messageTokens(m any) int {
	var content []contentBlock
	switch m := m.(type) {
	case *userMessage:
		content = m.Content
	case *toolResultMessage:
		content = m.Content
	case *assistantMessage:
		chars := 0
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				chars += jsLength(b.Text)
			case "thinking":
				chars += jsLength(b.Thinking)
			default:
				args := []byte(callArguments(b))
				var compact bytes.Buffer
				if json.Compact(&compact, args) == nil {
					args = compact.Bytes()
				}
				chars += jsLength(b.Name) + jsLength(string(args))
			}
		}
		return charTokens(chars)
	}
	chars := 0
	for _, b := range content {
		if b.Type == "text" {
			chars += jsLength(b.Text)
		} else {
			chars += imageChars
		}
	}
	return charTokens(chars)
}

// charTokens is chars characters in tokens, rounded up.
func charTokens(chars int) int { return (2*chars + charsPerTokenTimes2 - 1) / charsPerTokenTimes2 }

// jsLength is the length of s as JavaScript counts it: UTF-16 code units
// (a byte that is not UTF-8 counts as one, U+FFFD).
func jsLength(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}
