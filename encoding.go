package main

// Reflection-free JSON for the records rpi writes most: the get_state
// answer and message_update deltas. Each appendJSON writes exactly what
// encoding/json writes for the same value (with SetEscapeHTML(false)), in
// the same key order; encoding_test.go checks them against it.

import (
	"bytes"
	"encoding/json"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// appendJSONFloat appends f as encoding/json writes a float64: the
// shortest form, in exponent notation only below 1e-6 or from 1e21, with
// a one-digit negative exponent unpadded. f must be finite.
func appendJSONFloat(buf []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	buf = strconv.AppendFloat(buf, f, format, -1, 64)
	if n := len(buf); format == 'e' && n >= 4 && buf[n-4] == 'e' && buf[n-3] == '-' && buf[n-2] == '0' {
		buf[n-2] = buf[n-1] // e-07 → e-7
		buf = buf[:n-1]
	}
	return buf
}

// finite reports whether every float is finite, which appendJSONFloat
// needs: encoding/json refuses NaN and ±Inf.
func finite(fs ...float64) bool {
	for _, f := range fs {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
	}
	return true
}

func (c modelCost) finiteJSON() bool { return finite(c.Input, c.Output, c.CacheRead, c.CacheWrite) }
func (m *model) finiteJSON() bool {
	return m == nil || m.Cost.finiteJSON() && (m.PromptCache == nil || finite(ptrOr(m.PromptCache.Short, 0), ptrOr(m.PromptCache.Long, 0)))
}
func (s stateData) finiteJSON() bool { return s.Model.finiteJSON() }
func (u usage) finiteJSON() bool {
	c := u.Cost
	return finite(c.Input, c.Output, c.CacheRead, c.CacheWrite, c.Total)
}
func (m messageUpdate) finiteJSON() bool { return m.Usage.finiteJSON() }

func appendJSONBool(buf []byte, b bool) []byte { return strconv.AppendBool(buf, b) }

// appendKey appends `"name":` after a comma unless it opens the object;
// name must need no escaping.
func appendKey(buf []byte, name string) []byte {
	if buf[len(buf)-1] != '{' {
		buf = append(buf, ',')
	}
	buf = append(buf, '"')
	buf = append(buf, name...)
	return append(buf, '"', ':')
}

func (s stateData) appendJSON(buf []byte) []byte {
	buf = append(buf, '{')
	buf = appendKey(buf, "model")
	if s.Model == nil {
		buf = append(buf, "null"...)
	} else {
		buf = s.Model.appendJSON(buf)
	}
	buf = appendKey(buf, "thinkingLevel")
	buf = appendJSONString(buf, s.ThinkingLevel)
	buf = appendKey(buf, "isStreaming")
	buf = appendJSONBool(buf, s.IsStreaming)
	buf = appendKey(buf, "isCompacting")
	buf = appendJSONBool(buf, s.IsCompacting)
	buf = appendKey(buf, "steeringMode")
	buf = appendJSONString(buf, s.SteeringMode)
	buf = appendKey(buf, "followUpMode")
	buf = appendJSONString(buf, s.FollowUpMode)
	buf = appendKey(buf, "sessionFile")
	if s.SessionFile != "" {
		buf = appendJSONString(buf, string(s.SessionFile))
	} else {
		buf = append(buf, "null"...)
	}
	buf = appendKey(buf, "sessionId")
	buf = appendJSONString(buf, s.SessionID)
	if s.SessionName != "" {
		buf = appendKey(buf, "sessionName")
		buf = appendJSONString(buf, s.SessionName)
	}
	buf = appendKey(buf, "autoCompactionEnabled")
	buf = appendJSONBool(buf, s.AutoCompactionEnabled)
	buf = appendKey(buf, "autoRetryEnabled")
	buf = appendJSONBool(buf, s.AutoRetryEnabled)
	buf = appendKey(buf, "messageCount")
	buf = strconv.AppendInt(buf, int64(s.MessageCount), 10)
	buf = appendKey(buf, "pendingMessageCount")
	buf = strconv.AppendInt(buf, int64(s.PendingMessageCount), 10)
	buf = appendKey(buf, "todoPhases")
	buf = appendTodoPhases(buf, s.TodoPhases)
	buf = appendKey(buf, "processCount")
	buf = strconv.AppendInt(buf, int64(s.ProcessCount), 10)
	return append(buf, '}')
}

// appendJSON writes the Model object as MarshalJSON does: any password in
// its baseUrl masked, keys and headers never.
func (m *model) appendJSON(buf []byte) []byte {
	if m == nil { // as encoding/json writes a nil *model
		return append(buf, "null"...)
	}
	buf = append(buf, '{')
	buf = appendKey(buf, "id")
	buf = appendJSONString(buf, m.ID)
	buf = appendKey(buf, "name")
	buf = appendJSONString(buf, m.Name)
	buf = appendKey(buf, "api")
	buf = appendJSONString(buf, m.API)
	buf = appendKey(buf, "provider")
	buf = appendJSONString(buf, m.Provider)
	buf = appendKey(buf, "baseUrl")
	buf = appendJSONString(buf, maskedBaseURL(m.BaseURL))
	buf = appendKey(buf, "reasoning")
	buf = appendJSONBool(buf, m.Reasoning)
	buf = appendKey(buf, "input")
	buf = appendJSONStrings(buf, m.Input)
	buf = appendKey(buf, "cost")
	buf = append(buf, '{')
	buf = appendKey(buf, "input")
	buf = appendJSONFloat(buf, m.Cost.Input)
	buf = appendKey(buf, "output")
	buf = appendJSONFloat(buf, m.Cost.Output)
	buf = appendKey(buf, "cacheRead")
	buf = appendJSONFloat(buf, m.Cost.CacheRead)
	buf = appendKey(buf, "cacheWrite")
	buf = appendJSONFloat(buf, m.Cost.CacheWrite)
	buf = append(buf, '}')
	buf = appendKey(buf, "contextWindow")
	buf = strconv.AppendInt(buf, int64(m.ContextWindow), 10)
	buf = appendKey(buf, "maxTokens")
	buf = strconv.AppendInt(buf, int64(m.MaxTokens), 10)
	if p := m.PromptCache; p != nil {
		buf = appendKey(buf, "promptCache")
		buf = append(buf, '{')
		if p.Short != nil {
			buf = appendKey(buf, "short")
			buf = appendJSONFloat(buf, *p.Short)
		}
		if p.Long != nil {
			buf = appendKey(buf, "long")
			buf = appendJSONFloat(buf, *p.Long)
		}
		buf = append(buf, '}')
	}
	return append(buf, '}')
}

// maskedBaseURL is baseURL with any password in it replaced by ***.
func maskedBaseURL(baseURL string) string {
	if !strings.Contains(baseURL, "@") {
		return baseURL // no user info, nothing to mask
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return maskUnparsedBaseURL(baseURL)
	}
	if u.User == nil {
		return baseURL
	}
	if _, has := u.User.Password(); !has {
		return baseURL
	}
	u.User = url.UserPassword(u.User.Username(), "***")
	return strings.Replace(u.String(), "%2A%2A%2A", "***", 1)
}

// maskUnparsedBaseURL masks the password of a baseURL that net/url
// refuses (a bad escape or a space anywhere, a bad port): the userinfo is
// what comes between "://" and the last "@" before the path.
func maskUnparsedBaseURL(baseURL string) string {
	scheme, rest, ok := strings.Cut(baseURL, "://")
	if !ok {
		return baseURL
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return baseURL
	}
	user, _, has := strings.Cut(authority[:at], ":")
	if !has {
		return baseURL
	}
	return scheme + "://" + user + ":***" + rest[at:]
}

func appendTodoPhases(buf []byte, phases []todoPhase) []byte {
	if phases == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, '[')
	for i, p := range phases {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, '{')
		buf = appendKey(buf, "name")
		buf = appendJSONString(buf, p.Name)
		buf = appendKey(buf, "tasks")
		if p.Tasks == nil {
			buf = append(buf, "null"...)
		} else {
			buf = append(buf, '[')
			for j, t := range p.Tasks {
				if j > 0 {
					buf = append(buf, ',')
				}
				buf = t.appendJSON(buf)
			}
			buf = append(buf, ']')
		}
		buf = append(buf, '}')
	}
	return append(buf, ']')
}

func (t todoItem) appendJSON(buf []byte) []byte {
	buf = append(buf, '{')
	buf = appendKey(buf, "id")
	buf = appendJSONString(buf, t.ID)
	buf = appendKey(buf, "content")
	buf = appendJSONString(buf, t.Content)
	buf = appendKey(buf, "status")
	buf = appendJSONString(buf, t.Status)
	buf = appendKey(buf, "dependsOn")
	buf = appendJSONStrings(buf, t.DependsOn)
	buf = appendKey(buf, "ready")
	buf = appendJSONBool(buf, t.Ready)
	buf = appendKey(buf, "blockedBy")
	if t.BlockedBy == nil {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, '[')
		for i, b := range t.BlockedBy {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, '{')
			buf = appendKey(buf, "taskId")
			buf = appendJSONString(buf, b.TaskID)
			buf = appendKey(buf, "content")
			buf = appendJSONString(buf, b.Content)
			buf = appendKey(buf, "status")
			buf = appendJSONString(buf, b.Status)
			buf = append(buf, '}')
		}
		buf = append(buf, ']')
	}
	if t.Agent != "" {
		buf = appendKey(buf, "agent")
		buf = appendJSONString(buf, t.Agent)
	}
	return append(buf, '}')
}

func (m messageUpdate) appendJSON(buf []byte) []byte {
	buf = append(buf, '{')
	buf = appendKey(buf, "assistantMessageEvent")
	buf = m.AssistantMessageEvent.appendJSON(buf)
	buf = appendKey(buf, "usage")
	buf = m.Usage.appendJSON(buf)
	return append(buf, '}')
}

func (e assistantEvent) appendJSON(buf []byte) []byte {
	buf = append(buf, '{')
	buf = appendKey(buf, "type")
	buf = appendJSONString(buf, e.Type)
	buf = appendKey(buf, "contentIndex")
	buf = strconv.AppendInt(buf, int64(e.ContentIndex), 10)
	if e.Delta != nil {
		buf = appendKey(buf, "delta")
		buf = appendJSONString(buf, *e.Delta)
	}
	if e.Content != nil {
		buf = appendKey(buf, "content")
		buf = appendJSONString(buf, *e.Content)
	}
	if e.ID != "" {
		buf = appendKey(buf, "id")
		buf = appendJSONString(buf, e.ID)
	}
	if e.ToolName != "" {
		buf = appendKey(buf, "toolName")
		buf = appendJSONString(buf, e.ToolName)
	}
	if e.ToolCall != nil { // once per tool call, not per delta
		buf = appendKey(buf, "toolCall")
		block, err := marshalJSON(e.ToolCall)
		if err != nil {
			block = []byte("null")
		}
		buf = append(buf, block...)
	}
	return append(buf, '}')
}

func (u usage) appendJSON(buf []byte) []byte {
	buf = append(buf, '{')
	buf = appendKey(buf, "input")
	buf = strconv.AppendInt(buf, int64(u.Input), 10)
	buf = appendKey(buf, "output")
	buf = strconv.AppendInt(buf, int64(u.Output), 10)
	buf = appendKey(buf, "cacheRead")
	buf = strconv.AppendInt(buf, int64(u.CacheRead), 10)
	buf = appendKey(buf, "cacheWrite")
	buf = strconv.AppendInt(buf, int64(u.CacheWrite), 10)
	buf = appendKey(buf, "totalTokens")
	buf = strconv.AppendInt(buf, int64(u.TotalTokens), 10)
	buf = appendKey(buf, "cost")
	buf = append(buf, '{')
	buf = appendKey(buf, "input")
	buf = appendJSONFloat(buf, u.Cost.Input)
	buf = appendKey(buf, "output")
	buf = appendJSONFloat(buf, u.Cost.Output)
	buf = appendKey(buf, "cacheRead")
	buf = appendJSONFloat(buf, u.Cost.CacheRead)
	buf = appendKey(buf, "cacheWrite")
	buf = appendJSONFloat(buf, u.Cost.CacheWrite)
	buf = appendKey(buf, "total")
	buf = appendJSONFloat(buf, u.Cost.Total)
	buf = append(buf, '}')
	return append(buf, '}')
}

func (h sessionHeader) appendJSON(buf []byte) []byte {
	return append(h.appendMembers(append(buf, '{')), '}')
}

// appendMembers appends the header's members, for session_started's data
// and the session file's first line.
func (h sessionHeader) appendMembers(buf []byte) []byte {
	buf = appendKey(buf, "version")
	buf = strconv.AppendInt(buf, int64(h.Version), 10)
	buf = appendKey(buf, "id")
	buf = appendJSONString(buf, h.ID)
	buf = appendKey(buf, "timestamp")
	buf = appendJSONString(buf, h.Timestamp)
	buf = appendKey(buf, "cwd")
	buf = appendJSONString(buf, h.Cwd)
	if h.ParentSession != "" {
		buf = appendKey(buf, "parentSession")
		buf = appendJSONString(buf, h.ParentSession)
	}
	return buf
}

// appendMessageJSON appends a conversation message as marshalJSON writes
// it, without reflection for rpi's message types. ok is false exactly
// when marshalJSON fails (a float that is not finite, raw JSON that is
// not valid); messageAppendable tells it beforehand, without writing.
func appendMessageJSON(buf []byte, m any) (_ []byte, ok bool) {
	switch m := m.(type) {
	case *userMessage:
		buf = append(buf, `{"role":`...)
		buf = appendJSONString(buf, m.Role)
		buf = append(buf, `,"content":`...)
		if buf, ok = appendBlocks(buf, m.Content); !ok {
			return buf, false
		}
		buf = append(buf, `,"timestamp":`...)
		buf = strconv.AppendInt(buf, m.Timestamp, 10)
		return append(buf, '}'), true
	case *assistantMessage:
		if !m.Usage.finiteJSON() {
			return buf, false
		}
		buf = append(buf, `{"role":`...)
		buf = appendJSONString(buf, m.Role)
		buf = append(buf, `,"content":`...)
		if buf, ok = appendBlocks(buf, m.Content); !ok {
			return buf, false
		}
		buf = append(buf, `,"api":`...)
		buf = appendJSONString(buf, m.API)
		buf = append(buf, `,"provider":`...)
		buf = appendJSONString(buf, m.Provider)
		buf = append(buf, `,"model":`...)
		buf = appendJSONString(buf, m.Model)
		buf = append(buf, `,"usage":`...)
		buf = m.Usage.appendJSON(buf)
		buf = append(buf, `,"stopReason":`...)
		buf = appendJSONString(buf, m.StopReason)
		if m.ErrorMessage != "" {
			buf = append(buf, `,"errorMessage":`...)
			buf = appendJSONString(buf, m.ErrorMessage)
		}
		buf = append(buf, `,"timestamp":`...)
		buf = strconv.AppendInt(buf, m.Timestamp, 10)
		if a := m.answerMeta; a != nil {
			for _, f := range [...]struct{ key, value string }{{"responseId", a.ResponseID},
				{"responseModel", a.ResponseModel}, {"rawStopReason", a.RawStopReason}} {
				if f.value != "" {
					buf = append(append(append(buf, `,"`...), f.key...), `":`...)
					buf = appendJSONString(buf, f.value)
				}
			}
			if a.DurationMs != nil {
				buf = strconv.AppendInt(append(buf, `,"durationMs":`...), *a.DurationMs, 10)
			}
			if a.ThinkingLevel != "" {
				buf = appendJSONString(append(buf, `,"thinkingLevel":`...), a.ThinkingLevel)
			}
		}
		return append(buf, '}'), true
	case *toolResultMessage:
		buf = append(buf, `{"role":`...)
		buf = appendJSONString(buf, m.Role)
		buf = append(buf, `,"toolCallId":`...)
		buf = appendJSONString(buf, m.ToolCallID)
		buf = append(buf, `,"toolName":`...)
		buf = appendJSONString(buf, m.ToolName)
		buf = append(buf, `,"content":`...)
		if buf, ok = appendBlocks(buf, m.Content); !ok {
			return buf, false
		}
		if m.Details != nil {
			buf = append(buf, `,"details":`...)
			if buf, ok = appendJSONValue(buf, m.Details); !ok {
				return buf, false
			}
		}
		buf = append(buf, `,"isError":`...)
		buf = appendJSONBool(buf, m.IsError)
		if m.DurationMs != nil {
			buf = append(buf, `,"durationMs":`...)
			buf = strconv.AppendInt(buf, *m.DurationMs, 10)
		}
		buf = append(buf, `,"timestamp":`...)
		buf = strconv.AppendInt(buf, m.Timestamp, 10)
		return append(buf, '}'), true
	case bashExecutionMessage:
		buf = append(buf, `{"role":`...)
		buf = appendJSONString(buf, m.Role)
		buf = append(buf, `,"command":`...)
		buf = appendJSONString(buf, m.Command)
		buf = append(buf, `,"output":`...)
		buf = appendJSONString(buf, m.Output)
		if m.ExitCode != nil {
			buf = append(buf, `,"exitCode":`...)
			buf = strconv.AppendInt(buf, int64(*m.ExitCode), 10)
		}
		buf = append(buf, `,"cancelled":`...)
		buf = appendJSONBool(buf, m.Cancelled)
		buf = append(buf, `,"truncated":`...)
		buf = appendJSONBool(buf, m.Truncated)
		if m.FullOutputPath != "" {
			buf = append(buf, `,"fullOutputPath":`...)
			buf = appendJSONString(buf, m.FullOutputPath)
		}
		if m.ExcludeFromContext {
			buf = append(buf, `,"excludeFromContext":true`...)
		}
		buf = append(buf, `,"timestamp":`...)
		buf = strconv.AppendInt(buf, m.Timestamp, 10)
		return append(buf, '}'), true
	case *summaryMessage:
		buf = append(buf, `{"role":`...)
		buf = appendJSONString(buf, m.Role)
		buf = append(buf, `,"summary":`...)
		buf = appendJSONString(buf, m.Summary)
		if m.TokensBefore != 0 {
			buf = append(buf, `,"tokensBefore":`...)
			buf = strconv.AppendInt(buf, int64(m.TokensBefore), 10)
		}
		if m.FromID != "" {
			buf = append(buf, `,"fromId":`...)
			buf = appendJSONString(buf, m.FromID)
		}
		buf = append(buf, `,"timestamp":`...)
		buf = strconv.AppendInt(buf, m.Timestamp, 10)
		return append(buf, '}'), true
	case rawMessage:
		return appendCompactJSON(buf, m)
	}
	return appendJSONValue(buf, m)
}

// messageAppendable reports whether appendMessageJSON can write m.
func messageAppendable(m any) bool {
	blocksOK := func(blocks []contentBlock) bool {
		for _, b := range blocks {
			if b.Type == "toolCall" && b.Arguments != nil && !json.Valid(b.Arguments) {
				return false
			}
		}
		return true
	}
	switch m := m.(type) {
	case *userMessage:
		return blocksOK(m.Content)
	case *assistantMessage:
		return m.Usage.finiteJSON() && blocksOK(m.Content)
	case *toolResultMessage:
		return blocksOK(m.Content) && valueAppendable(m.Details, 0)
	case bashExecutionMessage, *summaryMessage:
		return true
	case rawMessage:
		return json.Valid(m)
	}
	return valueAppendable(m, 0)
}

// ---- Sizes: what the token estimate counts ----

// messageJSONSize is len(json.Marshal(m)) for a conversation message —
// what the token estimate has always counted, encoding/json's escaping
// of '<', '>' and '&' included — reckoned without holding that encoding:
// the message's frame (all but its texts, images and tool arguments) is
// written small, and each text it leaves out is sized where it lies. A
// 49 MiB image costs one pass over its text and no copy. It is 0 where
// json.Marshal fails, as the estimate counted it.
func messageJSONSize(m any) int {
	if !messageAppendable(m) {
		return 0
	}
	var texts []string // left out of the frame, each written there as ""
	var args [][]byte  // tool arguments left out, each written there as null
	frame := m
	switch m := m.(type) {
	case *userMessage:
		light := *m
		light.Content = blocksFrame(m.Content, &texts, &args)
		frame = &light
	case *assistantMessage:
		light := *m
		light.Content = blocksFrame(m.Content, &texts, &args)
		frame = &light
	case *toolResultMessage:
		light := *m
		light.Content = blocksFrame(m.Content, &texts, &args)
		frame = &light
	case bashExecutionMessage:
		texts = append(texts, m.Output)
		m.Output = ""
		frame = m
	case *summaryMessage:
		light := *m
		texts, light.Summary = append(texts, m.Summary), ""
		frame = &light
	case rawMessage:
		return compactJSONSize(m)
	}
	small, _ := appendMessageJSON(nil, frame)
	size := compactJSONSize(small)
	for _, text := range texts {
		size += jsonStringSize(text) - len(`""`)
	}
	for _, raw := range args {
		size += compactJSONSize(raw) - len("null")
	}
	return size
}

// blocksFrame is blocks with their texts, thinking and image data empty
// and their tool arguments nil, which it adds to texts and args.
func blocksFrame(blocks []contentBlock, texts *[]string, args *[][]byte) []contentBlock {
	if blocks == nil {
		return nil
	}
	light := make([]contentBlock, len(blocks))
	for i, b := range blocks {
		switch b.Type {
		case "thinking":
			*texts, b.Thinking = append(*texts, b.Thinking), ""
		case "image":
			*texts, b.Data = append(*texts, b.Data), ""
		case "toolCall":
			if b.Arguments != nil {
				*args, b.Arguments = append(*args, b.Arguments), nil
			}
		default:
			*texts, b.Text = append(*texts, b.Text), ""
		}
		light[i] = b
	}
	return light
}

// jsonStringSize is the length of s as json.Marshal writes it: as
// appendJSONString writes it, and '<', '>' and '&' as \u003c…. It is
// written a piece at a time into a buffer on the stack, cut between
// characters, so only the count is kept.
func jsonStringSize(s string) int {
	const piece = 1 << 10
	var scratch [6*piece + 2]byte // a piece escaped: at most 6 bytes a byte, and the quotes
	size := len(`""`) + 5*(strings.Count(s, "<")+strings.Count(s, ">")+strings.Count(s, "&"))
	for len(s) > 0 {
		end := min(piece, len(s))
		for back := 0; back < utf8.UTFMax-1 && end < len(s) && !utf8.RuneStart(s[end]); back++ {
			end-- // not within a character: its bytes are escaped together
		}
		size += len(appendJSONString(scratch[:0], s[:end])) - len(`""`)
		s = s[end:]
	}
	return size
}

// compactJSONSize is the length of valid JSON as json.Marshal writes a
// json.RawMessage: compacted, and within strings '<', '>' and '&' as
// \u003c…, U+2028 and U+2029 as \u2028 and \u2029.
func compactJSONSize(raw []byte) int {
	size, inString, escaped := 0, false, false
	for i, c := range raw {
		switch {
		case inString:
			size++
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			case c == '<' || c == '>' || c == '&':
				size += len(`\u003c`) - 1
			case c == 0xE2 && i+2 < len(raw) && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xA8:
				size += len(`\u2028`) - len("\u2028")
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			size++
			inString = c == '"'
		}
	}
	return size
}

// appendBlocks appends content blocks (nil is null), each as its
// MarshalJSON writes it.
func appendBlocks(buf []byte, blocks []contentBlock) (_ []byte, ok bool) {
	if blocks == nil {
		return append(buf, "null"...), true
	}
	buf = append(buf, '[')
	for i, b := range blocks {
		if i > 0 {
			buf = append(buf, ',')
		}
		if buf, ok = b.appendJSON(buf); !ok {
			return buf, false
		}
	}
	return append(buf, ']'), true
}

// appendJSON writes the block as its MarshalJSON does: only the fields of
// its type.
func (b contentBlock) appendJSON(buf []byte) (_ []byte, ok bool) {
	buf = append(buf, `{"type":`...)
	buf = appendJSONString(buf, b.Type)
	switch b.Type {
	case "thinking":
		buf = append(buf, `,"thinking":`...)
		buf = appendJSONString(buf, b.Thinking)
		if b.Signature != "" {
			buf = append(buf, `,"thinkingSignature":`...)
			buf = appendJSONString(buf, b.Signature)
		}
		if b.Redacted {
			buf = append(buf, `,"redacted":true`...)
		}
	case "image":
		buf = append(buf, `,"data":`...)
		buf = appendJSONString(buf, b.Data)
		buf = append(buf, `,"mimeType":`...)
		buf = appendJSONString(buf, b.MimeType)
	case "toolCall":
		buf = append(buf, `,"id":`...)
		buf = appendJSONString(buf, b.ID)
		buf = append(buf, `,"name":`...)
		buf = appendJSONString(buf, b.Name)
		buf = append(buf, `,"arguments":`...)
		if b.Arguments == nil {
			buf = append(buf, "null"...)
		} else if buf, ok = appendCompactJSON(buf, b.Arguments); !ok {
			return buf, false
		}
		if b.Signature != "" {
			buf = append(buf, `,"thoughtSignature":`...)
			buf = appendJSONString(buf, b.Signature)
		}
	default:
		buf = append(buf, `,"text":`...)
		buf = appendJSONString(buf, b.Text)
		if b.Signature != "" {
			buf = append(buf, `,"textSignature":`...)
			buf = appendJSONString(buf, b.Signature)
		}
	}
	return append(buf, '}'), true
}

// appendCompactJSON appends raw JSON as encoding/json writes a
// json.RawMessage: compacted, and only when valid.
func appendCompactJSON(buf []byte, raw []byte) ([]byte, bool) {
	out := bytes.NewBuffer(buf)
	if json.Compact(out, raw) != nil {
		return buf, false
	}
	return out.Bytes(), true
}

// appendJSONValue appends what json.Unmarshal puts in an interface (maps
// with their keys sorted, slices, float64, string, bool, nil) as
// encoding/json writes it, and anything else by marshalJSON; false when
// that fails, or for a float that is not finite.
func appendJSONValue(buf []byte, v any) (_ []byte, ok bool) {
	switch v := v.(type) {
	case nil:
		return append(buf, "null"...), true
	case json.RawMessage: // a tool result's details, read from a session file
		return appendCompactJSON(buf, v)
	case string:
		return appendJSONString(buf, v), true
	case bool:
		return appendJSONBool(buf, v), true
	case float64:
		if !finite(v) {
			return buf, false
		}
		return appendJSONFloat(buf, v), true
	case []any:
		if v == nil {
			return append(buf, "null"...), true
		}
		buf = append(buf, '[')
		for i, item := range v {
			if i > 0 {
				buf = append(buf, ',')
			}
			if buf, ok = appendJSONValue(buf, item); !ok {
				return buf, false
			}
		}
		return append(buf, ']'), true
	case map[string]any:
		if v == nil {
			return append(buf, "null"...), true
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf = append(buf, '{')
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, k)
			buf = append(buf, ':')
			if buf, ok = appendJSONValue(buf, v[k]); !ok {
				return buf, false
			}
		}
		return append(buf, '}'), true
	}
	data, err := marshalJSON(v)
	if err != nil {
		return buf, false
	}
	return append(buf, data...), true
}

// valueAppendable reports whether appendJSONValue can write v.
func valueAppendable(v any, depth int) bool {
	switch v := v.(type) {
	case nil, string, bool:
		return true
	case json.RawMessage:
		return json.Valid(v)
	case float64:
		return finite(v)
	case []any:
		return depth < maxScanDepth && !slices.ContainsFunc(v, func(item any) bool { return !valueAppendable(item, depth+1) })
	case map[string]any:
		if depth >= maxScanDepth {
			return false
		}
		for _, item := range v {
			if !valueAppendable(item, depth+1) {
				return false
			}
		}
		return true
	}
	_, err := marshalJSON(v)
	return err == nil
}

type messageUpdate struct {
	AssistantMessageEvent assistantEvent `json:"assistantMessageEvent"`
	Usage                 usage          `json:"usage"`
}
