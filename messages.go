package main

// The conversation's messages, in pi's shapes: the user's, the model's
// answers, tool results, the user's bash commands, summaries and messages
// of kinds rpi does not model; and what the model is sent of them.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// contentBlock is one block of a message: text, thinking, image or toolCall.
// Each type has one signature at most, so one field holds it (a session
// holds a block for each few bytes of text: it is kept small).
type contentBlock struct {
	Type      string
	Text      string
	Thinking  string
	Data      string
	MimeType  string
	ID        string
	Name      string
	Arguments json.RawMessage
	// Signature is what the model's API signed the block with, written
	// as the field of its type: a text's textSignature (OpenAI Responses:
	// the message item's id; Gemini: a thought signature), a thinking's
	// thinkingSignature (Anthropic's signature; the Responses reasoning
	// item; Gemini's thought signature), a toolCall's thoughtSignature
	// (Gemini's); an image has none.
	Signature string
	// Redacted marks a thinking block the server sent encrypted
	// (Anthropic's redacted_thinking): its Thinking is "[Reasoning
	// redacted]" and its Signature the encrypted data, as pi keeps it.
	Redacted bool
}

// blockJSON is a content block as JSON has it: every type's fields.
type blockJSON struct {
	Type              string          `json:"type"`
	Text              string          `json:"text"`
	TextSignature     string          `json:"textSignature"`
	Thinking          string          `json:"thinking"`
	ThinkingSignature string          `json:"thinkingSignature"`
	Data              string          `json:"data"`
	MimeType          string          `json:"mimeType"`
	ID                string          `json:"id"`
	Name              string          `json:"name"`
	Arguments         json.RawMessage `json:"arguments"`
	ThoughtSignature  string          `json:"thoughtSignature"`
	Redacted          bool            `json:"redacted"`
}

// signatureOf is the signature a block of type typ keeps of the three a
// block's JSON may have: the one of its type.
func signatureOf(typ, text, thinking, thought string) string {
	switch typ {
	case "thinking":
		return thinking
	case "toolCall":
		return thought
	case "image":
		return ""
	}
	return text
}

// UnmarshalJSON reads a block as encoding/json reads blockJSON (null
// leaves it as it is), keeping the signature of its type (and redacted
// for a thinking block). Bytes that
// are not UTF-8 in its arguments, which a json.RawMessage keeps as they
// are, become U+FFFD, as the session decoder's fast path has them.
func (b *contentBlock) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	var j blockJSON
	if err := unmarshalExact(data, &j); err != nil {
		return err
	}
	if !utf8.Valid(j.Arguments) {
		j.Arguments = appendValidUTF8(nil, j.Arguments)
	}
	*b = contentBlock{Type: j.Type, Text: j.Text, Thinking: j.Thinking, Data: j.Data, MimeType: j.MimeType, ID: j.ID, Name: j.Name,
		Arguments: j.Arguments, Signature: signatureOf(j.Type, j.TextSignature, j.ThinkingSignature, j.ThoughtSignature),
		Redacted: j.Redacted && j.Type == "thinking"}
	return nil
}

// MarshalJSON writes only the fields of the block's type, in pi's order.
func (b contentBlock) MarshalJSON() ([]byte, error) {
	switch b.Type {
	case "thinking":
		return marshalJSON(struct {
			Type              string `json:"type"`
			Thinking          string `json:"thinking"`
			ThinkingSignature string `json:"thinkingSignature,omitempty"`
			Redacted          bool   `json:"redacted,omitempty"`
		}{b.Type, b.Thinking, b.Signature, b.Redacted})
	case "image":
		return marshalJSON(struct {
			Type     string `json:"type"`
			Data     string `json:"data"`
			MimeType string `json:"mimeType"`
		}{b.Type, b.Data, b.MimeType})
	case "toolCall":
		return marshalJSON(struct {
			Type             string          `json:"type"`
			ID               string          `json:"id"`
			Name             string          `json:"name"`
			Arguments        json.RawMessage `json:"arguments"`
			ThoughtSignature string          `json:"thoughtSignature,omitempty"`
		}{b.Type, b.ID, b.Name, b.Arguments, b.Signature})
	default:
		return marshalJSON(struct {
			Type          string `json:"type"`
			Text          string `json:"text"`
			TextSignature string `json:"textSignature,omitempty"`
		}{b.Type, b.Text, b.Signature})
	}
}

type userMessage struct {
	Role      string         `json:"role"`
	Content   []contentBlock `json:"content"`
	Timestamp int64          `json:"timestamp"`

	// ended, while the message waits or runs, is called once its turn has
	// ended (startPrompt); s.mu guards it until a run takes the message.
	ended func(promptEnd)
}

// userText joins the text blocks of a user message.
func userText(msg any) (string, bool) {
	m, ok := msg.(*userMessage)
	if !ok {
		return "", false
	}
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String(), true
}

type costBreakdown struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
	Total      float64 `json:"total"`
}

// tokenCount is a count of tokens as a model server reports it: any
// whole JSON number, held at the ends of int, so that a 32-bit build
// takes what a 64-bit one does (a count past 2^31 failed the answer
// there). null leaves it as it was; anything else is an error, as for an
// int.
type tokenCount int

func (n *tokenCount) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return &json.UnmarshalTypeError{Value: "number " + string(b), Type: reflect.TypeFor[int]()}
	}
	*n = tokenCount(max(min(v, math.MaxInt), math.MinInt)) // ParseInt holds what passes int64 at its ends
	return nil
}

// addTokens is a + b for token counts, held at the ends of int where it
// would wrap: a count read from a session file or sent by a model server
// can be any int, and a sum of them must not turn negative.
func addTokens(a, b int) int {
	switch sum := a + b; {
	case b > 0 && sum < a:
		return math.MaxInt
	case b < 0 && sum > a:
		return math.MinInt
	default:
		return sum
	}
}

// subTokens is a - b for token counts, held as addTokens holds a sum: a
// server's prompt less its cached tokens, say.
func subTokens(a, b int) int {
	switch diff := a - b; {
	case b < 0 && diff < a:
		return math.MaxInt
	case b > 0 && diff > a:
		return math.MinInt
	default:
		return diff
	}
}

// addCost is a + b for costs, held at the largest finite float64 where
// it would overflow: JSON has no infinity, so an answer holding one could
// not be written at all.
func addCost(a, b float64) float64 {
	return max(-math.MaxFloat64, min(a+b, math.MaxFloat64))
}

type usage struct {
	Input       int           `json:"input"`
	Output      int           `json:"output"`
	CacheRead   int           `json:"cacheRead"`
	CacheWrite  int           `json:"cacheWrite"`
	TotalTokens int           `json:"totalTokens"`
	Cost        costBreakdown `json:"cost"`
}

// UnmarshalJSON reads a usage as encoding/json would, each count a
// tokenCount: held at the ends of int, where a 32-bit build lost the
// whole message of a count past 2^31.
func (u *usage) UnmarshalJSON(b []byte) error {
	w := struct {
		Input       tokenCount    `json:"input"`
		Output      tokenCount    `json:"output"`
		CacheRead   tokenCount    `json:"cacheRead"`
		CacheWrite  tokenCount    `json:"cacheWrite"`
		TotalTokens tokenCount    `json:"totalTokens"`
		Cost        costBreakdown `json:"cost"`
	}{tokenCount(u.Input), tokenCount(u.Output), tokenCount(u.CacheRead), tokenCount(u.CacheWrite), tokenCount(u.TotalTokens), u.Cost}
	if err := unmarshalExact(b, &w); err != nil {
		return err
	}
	*u = usage{int(w.Input), int(w.Output), int(w.CacheRead), int(w.CacheWrite), int(w.TotalTokens), w.Cost}
	return nil
}

type assistantMessage struct {
	Role         string         `json:"role"`
	Content      []contentBlock `json:"content"`
	API          string         `json:"api"`
	Provider     string         `json:"provider"`
	Model        string         `json:"model"`
	Usage        usage          `json:"usage"`
	StopReason   string         `json:"stopReason"`
	ErrorMessage string         `json:"errorMessage,omitempty"`
	Timestamp    int64          `json:"timestamp"` // when the request began
	*answerMeta                 // nil for an answer read without any of its fields

	final bool // failed in a way a retry cannot mend (an answer cut at its limit)
}

// answerMeta is what pi 1.6 records of the response an answer came in,
// beside the answer: the server's id for it, the model that answered
// when another than the one asked for, the server's own stop reason, how
// long the response took, and the thinking level asked for. Held apart,
// so an answer read from an older session costs one pointer.
type answerMeta struct {
	ResponseID    string `json:"responseId,omitempty"`
	ResponseModel string `json:"responseModel,omitempty"`
	RawStopReason string `json:"rawStopReason,omitempty"`
	DurationMs    *int64 `json:"durationMs,omitempty"`
	ThinkingLevel string `json:"thinkingLevel,omitempty"`
}

// meta is the answer's answerMeta, made when it has none yet.
func (m *assistantMessage) meta() *answerMeta {
	if m.answerMeta == nil {
		m.answerMeta = &answerMeta{}
	}
	return m.answerMeta
}

type toolResultMessage struct {
	Role       string         `json:"role"`
	ToolCallID string         `json:"toolCallId"`
	ToolName   string         `json:"toolName"`
	Content    []contentBlock `json:"content"`
	Details    any            `json:"details,omitempty"`
	IsError    bool           `json:"isError"`
	DurationMs *int64         `json:"durationMs,omitempty"` // how long the tool ran, as pi 1.6 records it
	Timestamp  int64          `json:"timestamp"`
}

func textBlocks(text string) []contentBlock { return []contentBlock{{Type: "text", Text: text}} }

// text joins a message's text blocks.
func (m *assistantMessage) text() string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// resultText is a tool result's content as one text for the model.
func resultText(content []contentBlock) string {
	var parts []string
	for _, b := range content {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	if len(parts) == 0 {
		return "(see attached image)"
	}
	return strings.Join(parts, "\n")
}

// asUserMessage is a message the model gets as a user turn, as pi 1.6's
// convertToLlm makes it: a prompt as it is, a user bash command (unless
// left out of the context), a summary or an extension's custom message
// as user text; nil for any other message (an answer, a tool result, a
// bash command left out, a custom message without content).
func asUserMessage(m any) *userMessage {
	switch m := m.(type) {
	case *userMessage:
		return m
	case bashExecutionMessage:
		if !m.ExcludeFromContext {
			return &userMessage{Role: "user", Content: textBlocks(bashContextText(m)), Timestamp: m.Timestamp}
		}
	case *summaryMessage:
		text := "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n" + m.Summary + "</summary>"
		if m.Role == "compactionSummary" {
			text = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n" + m.Summary + "\n</summary>"
		}
		return &userMessage{Role: "user", Content: textBlocks(text), Timestamp: m.Timestamp}
	case rawMessage:
		var custom struct {
			Role      string
			Content   json.RawMessage
			Timestamp int64
		}
		json.Unmarshal(m, &custom)
		if content := rawContent(custom.Content); custom.Role == "custom" && content != nil {
			return &userMessage{Role: "user", Content: content, Timestamp: custom.Timestamp}
		}
	}
	return nil
}

// contextMessages is what the model is sent of the conversation: failed
// and aborted answers are left out, a user bash command becomes a user
// message, a tool call left without a result gets one saying so, and a
// result without its call is left out.
func contextMessages(messages []any) []any {
	var out []any
	var open []contentBlock // tool calls of the last answer still without results
	closeOpen := func() {
		for _, call := range open {
			out = append(out, &toolResultMessage{Role: "toolResult", ToolCallID: call.ID, ToolName: call.Name,
				Content: textBlocks("No result provided"), IsError: true})
		}
		open = nil
	}
	for _, m := range messages {
		switch m := m.(type) {
		case *assistantMessage:
			if m.StopReason == "error" || m.StopReason == "aborted" {
				continue
			}
			closeOpen()
			for _, b := range m.Content {
				if b.Type == "toolCall" {
					open = append(open, b)
				}
			}
			out = append(out, m)
		case *toolResultMessage:
			// A result goes with the call it answers: one whose call is not
			// open (of an answer left out, or answered already: a session
			// file another tool wrote) is refused by the APIs, at every
			// later request of the session.
			for i, call := range open {
				if call.ID == m.ToolCallID {
					open = append(open[:i], open[i+1:]...)
					out = append(out, m)
					break
				}
			}
		default:
			if u := asUserMessage(m); u != nil {
				closeOpen()
				out = append(out, u)
			}
		}
	}
	closeOpen()
	return out
}

// imagesBlocked is what the model gets in the place of an image when
// settings.json's images.blockImages is true (pi 1.6's text).
const imagesBlocked = "Image reading is disabled."

// withoutImages is messages (contextMessages') with every image of a user
// message or tool result — a prompt's, read's or another tool's, a
// custom message's — made the text imagesBlocked, as pi 1.6 does it: of
// such texts next to each other, one is kept. The conversation's own
// messages are not changed: the session keeps its images.
func withoutImages(messages []any) []any {
	out := make([]any, len(messages))
	for i, m := range messages {
		out[i] = m
		switch m := m.(type) {
		case *userMessage:
			if content, ok := blockedImages(m.Content); ok {
				blocked := *m
				blocked.Content = content
				out[i] = &blocked
			}
		case *toolResultMessage:
			if content, ok := blockedImages(m.Content); ok {
				blocked := *m
				blocked.Content = content
				out[i] = &blocked
			}
		}
	}
	return out
}

// blockedImages is content with each image made the text imagesBlocked,
// and that text left out where the block before it is that text too;
// false when content has no image (it is then kept as it is, repeated
// texts and all, as pi keeps it).
func blockedImages(content []contentBlock) ([]contentBlock, bool) {
	if !slices.ContainsFunc(content, func(b contentBlock) bool { return b.Type == "image" }) {
		return nil, false
	}
	isBlocked := func(b contentBlock) bool { return b.Type == "text" && b.Text == imagesBlocked }
	var out []contentBlock
	prev := contentBlock{}
	for _, b := range content {
		if b.Type == "image" {
			b = contentBlock{Type: "text", Text: imagesBlocked}
		}
		if !isBlocked(b) || !isBlocked(prev) {
			out = append(out, b)
		}
		prev = b
	}
	return out, true
}

// rawContent is a custom message's content as pi sends it, a user
// message of its blocks: a string as one text block; of blocks, the text
// blocks and the images (mcpImage: a note for one whose data is no image
// a model takes), in their order; nil when that holds neither text nor an
// image. Only a block's type, text, data and mimeType are read, into a
// plain struct: encoding/json goes on past a member of another type there
// (contentBlock's UnmarshalJSON would stop at it, and lose every block
// from there on).
func rawContent(content json.RawMessage) []contentBlock {
	var text string
	if json.Unmarshal(content, &text) == nil {
		if text == "" {
			return nil
		}
		return textBlocks(text)
	}
	var blocks []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Data     string `json:"data"`
		MimeType string `json:"mimeType"`
	}
	json.Unmarshal(content, &blocks)
	var out []contentBlock
	some := false
	for _, c := range blocks {
		switch c.Type {
		case "text":
			out = append(out, contentBlock{Type: "text", Text: c.Text})
			some = some || c.Text != ""
		case "image":
			if c.Data != "" {
				out = append(out, mcpImage(c.Data, c.MimeType))
				some = true
			}
		}
	}
	if !some {
		return nil
	}
	return out
}

// bashContextText is how a user bash command is told to the model (pi's text).
func bashContextText(m bashExecutionMessage) string {
	text := "Ran `" + m.Command + "`\n"
	if m.Output == "" {
		text += "(no output)"
	} else {
		text += "```\n" + strings.TrimSuffix(m.Output, "\n") + "\n```"
	}
	switch {
	case m.Cancelled:
		text += "\n\n(command cancelled)"
	case m.ExitCode != nil && *m.ExitCode != 0:
		text += fmt.Sprintf("\n\nCommand exited with code %d", *m.ExitCode)
	}
	if m.Truncated && m.FullOutputPath != "" {
		text += "\n\n[Output truncated. Full output: " + m.FullOutputPath + "]"
	}
	return text
}

// summaryMessage is pi's compactionSummary and branchSummary message.
type summaryMessage struct {
	Role         string `json:"role"`
	Summary      string `json:"summary"`
	TokensBefore int    `json:"tokensBefore,omitempty"`
	FromID       string `json:"fromId,omitempty"`
	Timestamp    int64  `json:"timestamp"`
}

// rawMessage is a message of a kind rpi does not model (an extension's
// custom message, say), kept as it was.
type rawMessage json.RawMessage

func (m rawMessage) MarshalJSON() ([]byte, error) { return json.RawMessage(m), nil }

// bashExecutionMessage is how a bash result joins the conversation (pi's shape).
type bashExecutionMessage struct {
	Role               string `json:"role"`
	Command            string `json:"command"`
	Output             string `json:"output"`
	ExitCode           *int   `json:"exitCode,omitempty"`
	Cancelled          bool   `json:"cancelled"`
	Truncated          bool   `json:"truncated"`
	FullOutputPath     string `json:"fullOutputPath,omitempty"`
	ExcludeFromContext bool   `json:"excludeFromContext,omitempty"`
	Timestamp          int64  `json:"timestamp"`
}

// promptEnd says how a prompt's turn ended, to the ended callback of
// startPrompt or queuePrompt. A turn ends when the model stops with no
// steering left and the run goes on to a follow-up, or settles.
type promptEnd struct {
	ran     bool              // false: dropped unrun (clear_queue, a session change, the session's close)
	aborted bool              // abort came during its turn
	answer  *assistantMessage // the last answer of its turn (its StopReason and ErrorMessage); nil when none
}
