package main

// The wire formats of the model APIs rpi speaks, over net/http with
// server-sent events: OpenAI Chat Completions, OpenAI Responses,
// Anthropic Messages and Google Gemini. Each API has a request body
// builder and a stream reader; every reader builds the answer through one
// streamer, so all four produce the same message_update events, usage and
// stop reasons.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// ---- Streaming ----

// assistantEvent is the assistantMessageEvent of a message_update: deltas
// only, never a copy of the message so far.
type assistantEvent struct {
	Type         string        `json:"type"`
	ContentIndex int           `json:"contentIndex"`
	Delta        *string       `json:"delta,omitempty"`
	Content      *string       `json:"content,omitempty"` // the block's whole text, on text_end and thinking_end
	ID           string        `json:"id,omitempty"`
	ToolName     string        `json:"toolName,omitempty"`
	ToolCall     *contentBlock `json:"toolCall,omitempty"`
}

// streamRequest is one model call.
type streamRequest struct {
	model    *model
	system   string
	messages []any
	tools    []*tool
	thinking string
	secrets  *redactor
	// runKey runs a "!command" key the first time it is needed.
	runKey keyRunner
	key    string // the model's key, resolved by callModel
}

// providerError is a failed model call; status is the HTTP status (0 for
// a network failure) and retryAfter the server's Retry-After, if any.
type providerError struct {
	status     int
	retryAfter time.Duration
	message    string
	final      bool // asking again cannot help (an answer cut at its limit): no auto-retry
}

func (e *providerError) Error() string { return e.message }

// streamer builds a streaming answer in msg and emits an event per delta.
// A block's text grows in a builder (linear in the answer's length) and is
// written into msg when the block ends, or by finish when the stream stops
// first. Everything the answer holds (text, thinking, tool arguments,
// signatures, blocks) counts towards limit: the first piece past it cuts
// the answer (cut says why) and stops the request, so a server cannot make
// rpi hold more than limit, however long it streams.
type streamer struct {
	msg  *assistantMessage
	emit func(assistantEvent)
	// blocks maps a provider's key for each open block (its index or
	// output_index) to the block's index in msg.Content.
	blocks map[int]int
	// bufs holds each block's text, thinking or argument JSON so far.
	bufs map[int]*strings.Builder
	// sigs holds a thinking block's signature as it streams (Anthropic's
	// signature_delta).
	sigs map[int]*strings.Builder

	tokens int    // the most tokens the request asked for
	limit  int    // the bytes the answer may hold (answerLimit of tokens)
	size   int    // the bytes it holds so far
	cut    error  // set once a piece passed limit; nothing is added after it
	stop   func() // ends the request once the answer is cut
}

// Bounds of one answer: answerBytesPerToken for each token asked for
// (max_tokens), never more than maxAnswerBytes. A token is a few bytes of
// text (rarely more than 16, even as escaped JSON), so only a server that
// sends far more than it was asked for reaches the bound. A block costs
// blockBytes besides its text, so a flood of empty blocks is bounded too.
const (
	answerBytesPerToken = 32
	maxAnswerBytes      = 1 << 20
	blockBytes          = 256
)

// answerLimit is what an answer to a request for tokens may hold.
func answerLimit(tokens int) int { return min(max(tokens, 1)*answerBytesPerToken, maxAnswerBytes) }

func newStreamer(msg *assistantMessage, emit func(assistantEvent)) *streamer {
	return &streamer{msg: msg, emit: emit, blocks: map[int]int{}, bufs: map[int]*strings.Builder{},
		sigs: map[int]*strings.Builder{}, limit: maxAnswerBytes, stop: func() {}}
}

// take counts n more bytes of the answer, and reports whether they fit;
// the first that do not cut the answer and stop the request.
func (st *streamer) take(n int) bool {
	if st.cut != nil {
		return false
	}
	if st.size+n <= st.limit {
		st.size += n
		return true
	}
	st.cut = &providerError{final: true, message: fmt.Sprintf("The answer was cut at %s: the model server sent more than "+
		"rpi keeps for one answer (%d bytes for each of the %d tokens asked for, and never more than %s). What came before is kept. "+
		"If the model really writes answers this long, raise its maxTokens in models.json; "+
		"a server that ignores max_tokens is cut here whatever it is asked.",
		byteSize(st.limit), answerBytesPerToken, st.tokens, byteSize(maxAnswerBytes))}
	st.stop()
	return false
}

// byteSize says n bytes in bytes, KiB or MiB.
func byteSize(n int) string {
	switch {
	case n == 1:
		return "1 byte"
	case n < 1<<10:
		return strconv.Itoa(n) + " bytes"
	case n < 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', -1, 64) + " KiB"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', -1, 64) + " MiB"
}

// keep sets *dst to s (a signature the server sends whole), counting what
// it adds; past the limit it changes nothing.
func (st *streamer) keep(dst *string, s string) {
	if st.take(max(len(s)-len(*dst), 0)) {
		*dst = s
	}
}

// appendSignature adds a piece of block i's thinking signature.
func (st *streamer) appendSignature(i int, piece string) {
	if !st.take(len(piece)) {
		return
	}
	if st.sigs[i] == nil {
		st.sigs[i] = &strings.Builder{}
	}
	st.sigs[i].WriteString(piece)
}

// startBlock opens a block for key and returns its index in msg.Content.
// Once the answer is cut, the block is added without an event.
func (st *streamer) startBlock(key int, b contentBlock) int {
	fits := st.take(blockBytes + len(b.ID) + len(b.Name) + len(b.ThoughtSignature))
	st.msg.Content = append(st.msg.Content, b)
	i := len(st.msg.Content) - 1
	st.blocks[key] = i
	st.bufs[i] = &strings.Builder{}
	if !fits {
		return i
	}
	switch b.Type {
	case "text":
		st.emit(assistantEvent{Type: "text_start", ContentIndex: i})
	case "thinking":
		st.emit(assistantEvent{Type: "thinking_start", ContentIndex: i})
	case "toolCall":
		st.emit(assistantEvent{Type: "toolcall_start", ContentIndex: i, ID: b.ID, ToolName: b.Name})
	}
	return i
}

func (st *streamer) delta(i int, text string) {
	if !st.take(len(text)) {
		return
	}
	kind := ""
	switch st.msg.Content[i].Type {
	case "text":
		kind = "text_delta"
	case "thinking":
		kind = "thinking_delta"
	case "toolCall":
		kind = "toolcall_delta"
	}
	st.bufs[i].WriteString(text)
	st.emit(assistantEvent{Type: kind, ContentIndex: i, Delta: &text})
}

// sofar is block i's text (or argument JSON) so far.
func (st *streamer) sofar(i int) string { return st.bufs[i].String() }

// settle writes block i's text or thinking so far into msg.
func (st *streamer) settle(i int) {
	b := &st.msg.Content[i]
	switch b.Type {
	case "text":
		b.Text = st.bufs[i].String()
	case "thinking":
		b.Thinking = st.bufs[i].String()
		if sig := st.sigs[i]; sig != nil {
			b.ThinkingSignature = sig.String()
		}
	}
}

// endBlock ends block i: its text, thinking or arguments go into msg,
// and an event says so (none once the answer is cut).
func (st *streamer) endBlock(i int) {
	st.settle(i)
	b := &st.msg.Content[i]
	var ev assistantEvent
	switch b.Type {
	case "text":
		text := b.Text
		ev = assistantEvent{Type: "text_end", ContentIndex: i, Content: &text}
	case "thinking":
		text := b.Thinking
		ev = assistantEvent{Type: "thinking_end", ContentIndex: i, Content: &text}
	case "toolCall":
		args := strings.TrimSpace(st.bufs[i].String())
		if args == "" {
			args = "{}"
		}
		if !json.Valid([]byte(args)) {
			raw, _ := json.Marshal(map[string]string{"_raw": args})
			args = string(raw)
		}
		b.Arguments = json.RawMessage(args)
		call := *b
		ev = assistantEvent{Type: "toolcall_end", ContentIndex: i, ToolCall: &call}
	default:
		return
	}
	if st.cut == nil {
		st.emit(ev)
	}
}

// endOpen ends the blocks still open, in the order they started.
func (st *streamer) endOpen() {
	open := slices.Sorted(maps.Values(st.blocks))
	for _, i := range open {
		st.endBlock(i)
	}
	clear(st.blocks)
}

// hasToolCalls reports whether the answer calls a tool.
func (st *streamer) hasToolCalls() bool {
	return slices.ContainsFunc(st.msg.Content, func(b contentBlock) bool { return b.Type == "toolCall" })
}

// stopAs ends the answer with stop, rpi's stop reason for the provider's
// raw one ("stop" becomes "toolUse" when the answer calls a tool), and
// prices its usage; an empty stop is a reason rpi does not know, an error.
func (st *streamer) stopAs(stop, raw string, m *model) error {
	if stop == "" {
		return &providerError{message: "The model stopped: " + raw}
	}
	if stop == "stop" && st.hasToolCalls() {
		stop = "toolUse"
	}
	st.msg.StopReason = stop
	computeCost(&st.msg.Usage, m)
	return nil
}

// finish writes the text of every block into msg, ended or not (a stream
// that failed midway keeps what it had said).
func (st *streamer) finish() {
	for i := range st.msg.Content {
		if st.bufs[i] != nil {
			st.settle(i)
		}
	}
}

// modelClient calls providers. It follows no redirect: a key sent in a
// header must not travel on to another host.
var modelClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// callModel streams one answer into msg, calling started once the provider
// has accepted the request and emit for each delta. Every secret rpi
// holds is removed from the error it returns: a server may echo a key.
func callModel(ctx context.Context, req streamRequest, msg *assistantMessage, started func(), emit func(assistantEvent)) error {
	key, err := req.model.cred.resolve(ctx, req.runKey, req.secrets)
	if err == nil {
		req.key = key
		err = streamModel(ctx, req, msg, started, emit)
	} else if ctx.Err() == nil {
		err = fmt.Errorf("No API key for %s: %v", req.model.Provider, err)
	}
	var perr *providerError
	switch {
	case errors.As(err, &perr):
		perr.message = clip(req.secrets.redact(perr.message), maxErrorBytes)
	case err != nil && ctx.Err() == nil:
		err = errors.New(clip(req.secrets.redact(err.Error()), maxErrorBytes))
	}
	return err
}

// maxErrorBytes bounds the text of a failed call (a server chooses what
// its error events say), cut after redaction so no key is cut in half.
const maxErrorBytes = 4 << 10

// clip cuts s to at most n bytes, at a character's start, marking the cut
// with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := n - len("…")
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + "…"
}

// wireAPI is one model API: where a request goes, how the key travels,
// the request body, the most tokens it asks for, and the reader of the
// streamed answer.
type wireAPI struct {
	url       func(m *model) string
	auth      func(h http.Header, key string)
	body      func(req streamRequest) any
	maxTokens func(req streamRequest) int
	read      func(body io.Reader, st *streamer, m *model) error
}

var wireAPIs = map[string]wireAPI{
	apiOpenAI: {
		url:       func(m *model) string { return m.BaseURL + "/chat/completions" },
		auth:      bearer,
		body:      func(req streamRequest) any { return openAIBody(req) },
		maxTokens: openAIMaxTokens,
		read:      readOpenAI,
	},
	apiAnthropic: {
		url: func(m *model) string { return m.BaseURL + "/v1/messages" },
		auth: func(h http.Header, key string) {
			h.Set("anthropic-version", "2023-06-01")
			if key != "" {
				h.Set("x-api-key", key)
			}
		},
		body:      func(req streamRequest) any { return anthropicBody(req) },
		maxTokens: anthropicMaxTokens,
		read:      readAnthropic,
	},
	apiResponses: {
		url:       func(m *model) string { return m.BaseURL + "/responses" },
		auth:      bearer,
		body:      func(req streamRequest) any { return responsesBody(req) },
		maxTokens: openAIMaxTokens,
		read:      readResponses,
	},
	apiGoogle: {
		url: func(m *model) string {
			return m.BaseURL + "/models/" + url.PathEscape(strings.TrimPrefix(m.ID, "models/")) + ":streamGenerateContent?alt=sse"
		},
		auth: func(h http.Header, key string) {
			if key != "" {
				h.Set("x-goog-api-key", key)
			}
		},
		body:      func(req streamRequest) any { return geminiBody(req) },
		maxTokens: func(req streamRequest) int { return req.model.MaxTokens },
		read:      readGemini,
	},
}

// bearer sends the key as "Authorization: Bearer …".
func bearer(h http.Header, key string) {
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
}

// streamModel makes the request and reads the answer into msg. The answer
// may hold answerLimit of the tokens asked for; the first piece past it
// cuts the answer and closes the connection. rpi asks for an uncompressed
// stream and refuses a compressed one: the bytes it reads are the bytes
// the server sent.
func streamModel(ctx context.Context, req streamRequest, msg *assistantMessage, started func(), emit func(assistantEvent)) error {
	st := newStreamer(msg, emit)
	defer st.finish()
	if req.model.faux {
		return streamFaux(ctx, req.model, st, started) // the offline model (faux.go)
	}
	api, ok := wireAPIs[req.model.API]
	if !ok {
		return unspokenError(req.model)
	}
	st.tokens = api.maxTokens(req)
	st.limit = answerLimit(st.tokens)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	st.stop = stop
	data, err := json.Marshal(api.body(req))
	if err != nil {
		return err
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, api.url(req.model), bytes.NewReader(data))
	if err != nil {
		return err
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Accept", "text/event-stream")
	// Set here, the transport neither asks for gzip nor inflates it.
	httpReq.Header.Set("Accept-Encoding", "identity")
	api.auth(httpReq.Header, req.key)
	for k, v := range req.model.headers {
		httpReq.Header.Set(k, v)
	}
	resp, err := modelClient.Do(httpReq)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &providerError{message: fmt.Sprintf("Connection error: %v", err)}
	}
	defer resp.Body.Close()
	if enc := resp.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return &providerError{final: true, message: fmt.Sprintf("The model server sent its answer compressed (Content-Encoding: %s) "+
			"though rpi asked for none (Accept-Encoding: identity); rpi reads only uncompressed streams. "+
			"Configure the server, or the proxy in front of it, not to compress its answers.", clip(enc, 64))}
	}
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return &providerError{status: resp.StatusCode, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After")),
			message: fmt.Sprintf("%d %s: %s", resp.StatusCode, http.StatusText(resp.StatusCode), strings.TrimSpace(string(text)))}
	}
	started()
	err = api.read(resp.Body, st, req.model)
	switch {
	case st.cut != nil:
		return st.cut
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	}
	return err
}

// parseRetryAfter reads a Retry-After header: seconds or an HTTP date.
func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return -1
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return -1
}

// events reads server-sent events, calling fn with each event's name
// and data (data lines joined by "\n"; data is fn's only while it runs).
// An event may be at most eventLimit bytes. Reading stops at the first
// event after which the answer is cut.
func (st *streamer) events(r io.Reader, fn func(name string, data []byte) (stop bool, err error)) error {
	limit := st.eventLimit()
	br := bufio.NewReaderSize(r, 64<<10)
	var name string
	var data []byte
	lines := 0
	for {
		line, tooLong, err := readLine(br, limit)
		if tooLong {
			return &providerError{message: fmt.Sprintf("Invalid response from the model server: a line longer than %d bytes", limit)}
		}
		if err != nil && (err != io.EOF || len(line) == 0) {
			if err == io.EOF {
				return &providerError{message: "Connection error: the stream ended before the answer was complete"}
			}
			return &providerError{message: fmt.Sprintf("Connection error: %v", err)}
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if lines > 0 {
				stop, err := fn(name, data)
				if st.cut != nil {
					return st.cut
				}
				if stop || err != nil {
					return err
				}
			}
			name, data, lines = "", nil, 0
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("event:")):
			name = string(bytes.TrimSpace(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			value := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
			if lines++; lines == 1 {
				data = value // the line is this loop's own: no copy
			} else {
				data = append(append(data, '\n'), value...)
			}
			if len(data) > limit {
				return &providerError{message: fmt.Sprintf("Invalid response from the model server: an event longer than %d bytes", limit)}
			}
		}
	}
}

// eventLimit bounds one server-sent event: twice what the answer may hold
// (an event that closes the answer may repeat it whole, escaped), and a
// little room for the event around it. A server that never ends a line
// cannot make rpi hold more.
func (st *streamer) eventLimit() int { return 2*st.limit + 64<<10 }

// computeCost fills usage.Cost from the model's per-million prices.
func computeCost(u *usage, m *model) {
	u.Cost = costBreakdown{
		Input:      float64(u.Input) * m.Cost.Input / 1e6,
		Output:     float64(u.Output) * m.Cost.Output / 1e6,
		CacheRead:  float64(u.CacheRead) * m.Cost.CacheRead / 1e6,
		CacheWrite: float64(u.CacheWrite) * m.Cost.CacheWrite / 1e6,
	}
	u.Cost.Total = u.Cost.Input + u.Cost.Output + u.Cost.CacheRead + u.Cost.CacheWrite
	// An absurd price in models.json must not make a cost no JSON can
	// carry (a record with +Inf could not be written at all).
	for _, c := range []*float64{&u.Cost.Input, &u.Cost.Output, &u.Cost.CacheRead, &u.Cost.CacheWrite, &u.Cost.Total} {
		if math.IsInf(*c, 1) {
			*c = math.MaxFloat64
		}
	}
	u.TotalTokens = u.Input + u.Output + u.CacheRead + u.CacheWrite
}

// ---- OpenAI Chat Completions ----

// openAIBody is a Chat Completions request, with the quirks of the
// model's host (compat): the field that caps the answer, how reasoning is
// asked for, and whether usage is asked for in the stream.
func openAIBody(req streamRequest) map[string]any {
	c := req.model.compat
	var messages []map[string]any
	if req.system != "" {
		messages = append(messages, map[string]any{"role": "system", "content": req.system})
	}
	for _, m := range contextMessages(req.messages) {
		switch m := m.(type) {
		case *userMessage:
			var parts []map[string]any
			for _, b := range m.Content {
				if b.Type == "text" {
					parts = append(parts, map[string]any{"type": "text", "text": b.Text})
				} else if b.Type == "image" && req.model.imageable {
					parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]string{"url": "data:" + b.MimeType + ";base64," + b.Data}})
				}
			}
			if len(parts) > 0 {
				messages = append(messages, map[string]any{"role": "user", "content": parts})
			}
		case *assistantMessage:
			msg := map[string]any{"role": "assistant", "content": nil}
			var text, thinking strings.Builder
			var calls []map[string]any
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					text.WriteString(b.Text)
				case "thinking":
					thinking.WriteString(b.Thinking)
				case "toolCall":
					id, _ := splitCallID(b.ID)
					calls = append(calls, map[string]any{"id": id, "type": "function",
						"function": map[string]string{"name": b.Name, "arguments": string(b.Arguments)}})
				}
			}
			if text.Len() > 0 {
				msg["content"] = text.String()
			}
			if calls != nil {
				msg["tool_calls"] = calls
			}
			if setting(c.RequiresReasoningContent, false) {
				msg["reasoning_content"] = thinking.String()
			}
			if text.Len() > 0 || calls != nil {
				messages = append(messages, msg)
			}
		case *toolResultMessage:
			id, _ := splitCallID(m.ToolCallID)
			messages = append(messages, map[string]any{"role": "tool", "tool_call_id": id, "content": resultText(m.Content)})
		}
	}
	body := map[string]any{"model": req.model.ID, "messages": messages, "stream": true,
		cmp.Or(c.MaxTokensField, "max_tokens"): openAIMaxTokens(req)}
	if setting(c.SupportsUsageInStreaming, true) {
		body["stream_options"] = map[string]bool{"include_usage": true}
	}
	if len(req.tools) > 0 {
		var tools []map[string]any
		for _, t := range req.tools {
			tools = append(tools, map[string]any{"type": "function",
				"function": map[string]any{"name": t.name, "description": t.description, "parameters": t.schema}})
		}
		body["tools"] = tools
	}
	if req.model.Reasoning {
		openAIReasoning(body, req.model, req.thinking)
	}
	return body
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
	Choices []struct {
		Delta struct {
			Content          openAIContent `json:"content"`
			ReasoningContent *string       `json:"reasoning_content"`
			Reasoning        *string       `json:"reasoning"`
			ReasoningText    *string       `json:"reasoning_text"`
			ToolCalls        []struct {
				Index    *int   `json:"index"` // absent from some servers' pieces
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// readOpenAI reads a Chat Completions stream. Text and thinking each
// stream into the open block of their kind; tool calls are keyed by
// tool_calls[].index, as the format does, so the pieces of parallel calls
// may interleave and calls without ids stay apart (a piece without an
// index continues the call with its id, or the latest one). Tool calls
// stay open until the stream ends, then end in the order they started.
func readOpenAI(body io.Reader, st *streamer, m *model) error {
	current := -1 // index of the open text or thinking block
	finish := ""
	closeCurrent := func() {
		if current >= 0 {
			st.endBlock(current)
			current = -1
		}
	}
	open := func(kind string) int {
		if current >= 0 && st.msg.Content[current].Type == kind {
			return current
		}
		closeCurrent()
		current = st.startBlock(len(st.msg.Content), contentBlock{Type: kind})
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
			i = st.startBlock(len(st.msg.Content), contentBlock{Type: "toolCall", ID: id, Name: name})
			calls = append(calls, i)
		}
		b := &st.msg.Content[i]
		b.ID, b.Name = cmp.Or(b.ID, id), cmp.Or(b.Name, name) // the first piece may lack them
		if index != nil {
			byIndex[*index] = i
		}
		if id != "" {
			byID[id] = i
		}
		return i
	}
	err := st.events(body, func(_ string, data []byte) (bool, error) {
		if string(data) == "[DONE]" {
			return true, nil
		}
		var chunk openAIChunk
		if err := json.Unmarshal(data, &chunk); err != nil {
			return true, &providerError{message: fmt.Sprintf("Invalid response from the model server: %v", err)}
		}
		if chunk.Error != nil {
			return true, &providerError{message: chunk.Error.Message}
		}
		if u := chunk.Usage; u != nil {
			cached := 0
			if u.PromptTokensDetails != nil {
				cached = u.PromptTokensDetails.CachedTokens
			}
			st.msg.Usage.Input, st.msg.Usage.CacheRead, st.msg.Usage.Output = u.PromptTokens-cached, cached, u.CompletionTokens
		}
		for _, c := range chunk.Choices {
			d := c.Delta
			for _, thinking := range []*string{d.ReasoningContent, d.Reasoning, d.ReasoningText, &d.Content.thinking} {
				if thinking != nil && *thinking != "" {
					st.delta(open("thinking"), *thinking)
					break
				}
			}
			if d.Content.text != "" {
				st.delta(open("text"), d.Content.text)
			}
			for _, tc := range d.ToolCalls {
				i := call(tc.Index, tc.ID, tc.Function.Name)
				if tc.Function.Arguments != "" {
					st.delta(i, tc.Function.Arguments)
				}
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
		return false, nil
	})
	closeCurrent()
	for _, i := range calls {
		st.endBlock(i)
	}
	if err != nil {
		return err
	}
	stop := map[string]string{"stop": "stop", "end": "stop", "": "stop", "length": "length", "tool_calls": "toolUse", "function_call": "toolUse"}
	return st.stopAs(stop[finish], finish, m)
}

// ---- Anthropic Messages ----

// thinkingBudgets are Anthropic's thinking token budgets per level.
var thinkingBudgets = map[string]int{"minimal": 1024, "low": 4096, "medium": 10240, "high": 20480, "xhigh": 32000}

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
	for _, m := range contextMessages(req.messages) {
		switch m := m.(type) {
		case *userMessage:
			var blocks []map[string]any
			for _, b := range m.Content {
				if b.Type == "text" && b.Text != "" {
					blocks = append(blocks, map[string]any{"type": "text", "text": b.Text})
				} else if b.Type == "image" && req.model.imageable {
					blocks = append(blocks, map[string]any{"type": "image", "source": map[string]string{"type": "base64", "media_type": b.MimeType, "data": b.Data}})
				}
			}
			add("user", blocks)
		case *assistantMessage:
			// A signature from another API or provider would be refused.
			signed := m.API == apiAnthropic && m.Provider == req.model.Provider
			var blocks []map[string]any
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					if b.Text != "" {
						blocks = append(blocks, map[string]any{"type": "text", "text": b.Text})
					}
				case "thinking":
					if signed && b.ThinkingSignature != "" {
						blocks = append(blocks, map[string]any{"type": "thinking", "thinking": b.Thinking, "signature": b.ThinkingSignature})
					}
				case "toolCall":
					id, _ := splitCallID(b.ID)
					blocks = append(blocks, map[string]any{"type": "tool_use", "id": id, "name": b.Name, "input": b.Arguments})
				}
			}
			add("assistant", blocks)
		case *toolResultMessage:
			id, _ := splitCallID(m.ToolCallID)
			add("user", []map[string]any{{"type": "tool_result", "tool_use_id": id, "content": resultText(m.Content), "is_error": m.IsError}})
		}
	}
	body := map[string]any{"model": req.model.ID, "messages": messages, "stream": true, "max_tokens": anthropicMaxTokens(req)}
	if req.system != "" {
		body["system"] = req.system
	}
	if len(req.tools) > 0 {
		var tools []map[string]any
		for _, t := range req.tools {
			tools = append(tools, map[string]any{"name": t.name, "description": t.description, "input_schema": t.schema})
		}
		body["tools"] = tools
	}
	if budget, ok := thinkingBudgets[req.thinking]; ok && req.model.Reasoning {
		body["thinking"] = map[string]any{"type": "enabled", "budget_tokens": budget}
	}
	return body
}

// anthropicMaxTokens is the model's maxTokens, raised to leave room for
// the answer beside a thinking budget.
func anthropicMaxTokens(req streamRequest) int {
	if budget, ok := thinkingBudgets[req.thinking]; ok && req.model.Reasoning {
		return max(req.model.MaxTokens, budget+4096)
	}
	return req.model.MaxTokens
}

type anthropicEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message struct {
		Usage anthropicUsage `json:"usage"`
	} `json:"message"`
	ContentBlock struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"content_block"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anthropicUsage `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
}

func readAnthropic(body io.Reader, st *streamer, m *model) error {
	stop := ""
	u := &st.msg.Usage
	err := st.events(body, func(_ string, data []byte) (bool, error) {
		var ev anthropicEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return true, &providerError{message: fmt.Sprintf("Invalid response from the model server: %v", err)}
		}
		switch ev.Type {
		case "message_start":
			mu := ev.Message.Usage
			u.Input, u.Output, u.CacheRead, u.CacheWrite = mu.InputTokens, mu.OutputTokens, mu.CacheReadInputTokens, mu.CacheCreationInputTokens
		case "content_block_start":
			switch ev.ContentBlock.Type {
			case "text":
				st.startBlock(ev.Index, contentBlock{Type: "text"})
			case "thinking":
				st.startBlock(ev.Index, contentBlock{Type: "thinking"})
			case "tool_use":
				st.startBlock(ev.Index, contentBlock{Type: "toolCall", ID: ev.ContentBlock.ID, Name: ev.ContentBlock.Name})
			}
		case "content_block_delta":
			i, ok := st.blocks[ev.Index]
			if !ok {
				return true, &providerError{message: "Invalid response from the model server: delta for a block that never started"}
			}
			switch ev.Delta.Type {
			case "text_delta":
				st.delta(i, ev.Delta.Text)
			case "thinking_delta":
				st.delta(i, ev.Delta.Thinking)
			case "signature_delta":
				st.appendSignature(i, ev.Delta.Signature)
			case "input_json_delta":
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
			if ev.Usage != nil {
				u.Output = ev.Usage.OutputTokens
				if ev.Usage.InputTokens > 0 {
					u.Input = ev.Usage.InputTokens
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
	if err != nil {
		return err
	}
	reasons := map[string]string{"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "": "stop", "max_tokens": "length", "tool_use": "toolUse"}
	return st.stopAs(reasons[stop], stop, m)
}

// ---- Shared by the body builders ----

// sameModel reports whether an earlier answer came from the model now
// called: only then are its signatures, reasoning items and item ids
// sent back (another model, or another API, would reject them).
func sameModel(m *assistantMessage, to *model) bool {
	return m.API == to.API && m.Provider == to.Provider && m.Model == to.ID
}

// splitCallID splits a tool call id as the Responses API makes it,
// "<call_id>|<item id>"; other ids have no item id. Every API gets the
// call id alone, so a conversation can move between APIs.
func splitCallID(id string) (callID, itemID string) {
	callID, itemID, _ = strings.Cut(id, "|")
	return callID, itemID
}

// dataURL is an image block as a data: URL.
func dataURL(b contentBlock) string { return "data:" + b.MimeType + ";base64," + b.Data }

// callArguments is a tool call's argument JSON as a string ("{}" when
// there is none).
func callArguments(b contentBlock) string {
	if len(b.Arguments) == 0 {
		return "{}"
	}
	return string(b.Arguments)
}

// maxOutputTokens caps the output asked for in one call (OpenAI's APIs).
const maxOutputTokens = 32000

// openAIMaxTokens is what OpenAI's APIs are asked for: the model's
// maxTokens, at most maxOutputTokens.
func openAIMaxTokens(req streamRequest) int { return min(req.model.MaxTokens, maxOutputTokens) }

// ---- OpenAI Responses ----

// responsesBody is a Responses API request as pi sends it: the system
// prompt as the first input item, the conversation as input items
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
	for _, msg := range contextMessages(req.messages) {
		switch msg := msg.(type) {
		case *userMessage:
			var parts []map[string]any
			for _, b := range msg.Content {
				if b.Type == "text" {
					parts = append(parts, map[string]any{"type": "input_text", "text": b.Text})
				} else if b.Type == "image" && m.imageable {
					parts = append(parts, map[string]any{"type": "input_image", "detail": "auto", "image_url": dataURL(b)})
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
					if same && b.ThinkingSignature != "" && json.Valid([]byte(b.ThinkingSignature)) {
						input = append(input, json.RawMessage(b.ThinkingSignature))
					}
				case "text":
					if b.Text == "" {
						continue
					}
					var sig struct {
						ID string `json:"id"`
					}
					if same {
						json.Unmarshal([]byte(b.TextSignature), &sig)
					}
					if sig.ID == "" {
						messageIDs++
						sig.ID = "msg_rpi_" + strconv.Itoa(messageIDs)
					}
					input = append(input, map[string]any{"type": "message", "role": "assistant", "status": "completed", "id": sig.ID,
						"content": []map[string]any{{"type": "output_text", "text": b.Text, "annotations": []any{}}}})
				case "toolCall":
					callID, itemID := splitCallID(b.ID)
					item := map[string]any{"type": "function_call", "call_id": callID, "name": b.Name, "arguments": callArguments(b)}
					if same && strings.HasPrefix(itemID, "fc_") {
						item["id"] = itemID
					}
					input = append(input, item)
				}
			}
		case *toolResultMessage:
			callID, _ := splitCallID(msg.ToolCallID)
			input = append(input, map[string]any{"type": "function_call_output", "call_id": callID,
				"output": cmp.Or(resultText(msg.Content), "(no tool output)")})
		}
	}
	body := map[string]any{"model": m.ID, "input": input, "stream": true, "store": false,
		"max_output_tokens": openAIMaxTokens(req)}
	if len(req.tools) > 0 {
		openAIHost := strings.Contains(m.BaseURL, "api.openai.com")
		var tools []map[string]any
		for _, t := range req.tools {
			tool := map[string]any{"type": "function", "name": t.name, "description": t.description, "parameters": t.schema}
			if openAIHost {
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
	return body
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
		Status string `json:"status"`
		Error  *struct {
			Code    json.RawMessage `json:"code"`
			Message string          `json:"message"`
		} `json:"error"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Usage *struct {
			InputTokens        int `json:"input_tokens"`
			InputTokensDetails struct {
				CachedTokens     int `json:"cached_tokens"`
				CacheWriteTokens int `json:"cache_write_tokens"`
			} `json:"input_tokens_details"`
			OutputTokens int `json:"output_tokens"`
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
		if name == "error" || ev.Type == "error" {
			msg := withCode(ev.Code, ev.Message)
			if ev.Error != nil {
				msg = withCode(ev.Error.Code, ev.Error.Message)
			}
			return true, &providerError{message: cmp.Or(msg, "The model server reported an error")}
		}
		i, open := st.blocks[ev.OutputIndex]
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
			if open && ev.SummaryIndex > 0 {
				st.delta(i, "\n\n")
			}
		case "response.reasoning_summary_text.delta", "response.reasoning_text.delta", "response.output_text.delta",
			"response.refusal.delta", "response.function_call_arguments.delta":
			if open && ev.Delta != "" {
				st.delta(i, ev.Delta)
			}
		case "response.function_call_arguments.done":
			if open && st.sofar(i) == "" && ev.Arguments != "" {
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
			switch item.Type {
			case "reasoning":
				var compact bytes.Buffer
				if json.Compact(&compact, ev.Item) == nil {
					st.keep(&b.ThinkingSignature, compact.String())
				}
				for _, s := range item.Summary {
					whole = append(whole, s.Text)
				}
			case "message":
				sig, _ := json.Marshal(struct {
					V  int    `json:"v"`
					ID string `json:"id"`
				}{1, item.ID})
				st.keep(&b.TextSignature, string(sig))
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
			if u := r.Usage; u != nil {
				cached, written := u.InputTokensDetails.CachedTokens, u.InputTokensDetails.CacheWriteTokens
				st.msg.Usage.Input = max(0, u.InputTokens-cached-written)
				st.msg.Usage.CacheRead, st.msg.Usage.CacheWrite, st.msg.Usage.Output = cached, written, u.OutputTokens
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
		return st.stopAs("stop", status, m)
	case status == "incomplete" && failure == "max_output_tokens":
		return st.stopAs("length", status, m)
	case status == "incomplete":
		return &providerError{message: "Response incomplete: " + failure}
	}
	return &providerError{message: cmp.Or(failure, "The response "+status)}
}

// ---- Google Gemini ----

// geminiLevelModel matches the Gemini models whose thinking is set by a
// level rather than a token budget (pi's rule: Gemini 3 pro and flash,
// Gemini 4 and later, the -latest flash aliases, Gemma 4); compiled at
// first use.
var geminiLevelModel = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(gemini-3(\.\d+)?-(pro|flash)|gemini-([4-9]|[1-9]\d)|gemini-flash(-lite)?-latest|gemma-?4)`)
})

// geminiVersion is the major version in a Gemini model id (0 if none).
func geminiVersion(id string) int {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(id, "models/"), "gemini-")
	if !ok {
		return 0
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(rest)
	}
	n, _ := strconv.Atoi(rest[:end])
	return n
}

// geminiBudget is the thinking budget of a Gemini 2.5 model per level
// (pi's table; xhigh and max get high's); -1 lets the model decide.
func geminiBudget(id, level string) int {
	i := map[string]int{"minimal": 0, "low": 1, "medium": 2}[level]
	if level == "high" || level == "xhigh" || level == "max" {
		i = 3
	}
	switch {
	case strings.Contains(id, "2.5-pro"):
		return [4]int{128, 2048, 8192, 32768}[i]
	case strings.Contains(id, "2.5-flash-lite"):
		return [4]int{512, 2048, 8192, 24576}[i]
	case strings.Contains(id, "2.5-flash"):
		return [4]int{128, 2048, 8192, 24576}[i]
	}
	return -1
}

// geminiThinking is generationConfig.thinkingConfig for the thinking level
// set: a level (Gemini 3 and later) or a budget, with the thoughts
// included unless thinking is off. Off is a budget of 0, or the lowest
// level for a model that cannot stop thinking.
func geminiThinking(m *model, thinking string) map[string]any {
	id := strings.TrimPrefix(m.ID, "models/")
	level, value := m.wireLevel(thinking)
	config := map[string]any{}
	if geminiLevelModel().MatchString(id) {
		if level == "off" {
			_, value = m.wireLevel("minimal")
		}
		config["thinkingLevel"] = strings.ToUpper(value)
	} else if level == "off" {
		config["thinkingBudget"] = 0
	} else {
		config["thinkingBudget"] = geminiBudget(id, level)
	}
	if thinking != "off" {
		config["includeThoughts"] = true
	}
	return config
}

// validSignature reports whether a thought signature is standard base64,
// the only form Gemini takes back.
func validSignature(sig string) bool {
	if sig == "" || len(sig)%4 != 0 {
		return false
	}
	_, err := base64.StdEncoding.DecodeString(sig)
	return err == nil
}

// geminiBody is a streamGenerateContent request as pi sends it: user and
// model contents (consecutive tool results in one), thoughts and thought
// signatures only back to the model that made them, function call ids
// only to Gemini 3 and later, the tools as parametersJsonSchema.
func geminiBody(req streamRequest) map[string]any {
	m := req.model
	withIDs := geminiVersion(m.ID) >= 3
	var contents []map[string]any
	toolResults := false // the last content holds tool results
	add := func(role string, parts []map[string]any, results bool) {
		if len(parts) == 0 {
			return
		}
		if n := len(contents); results && toolResults && n > 0 {
			contents[n-1]["parts"] = append(contents[n-1]["parts"].([]map[string]any), parts...)
			return
		}
		contents = append(contents, map[string]any{"role": role, "parts": parts})
		toolResults = results
	}
	for _, msg := range contextMessages(req.messages) {
		switch msg := msg.(type) {
		case *userMessage:
			var parts []map[string]any
			for _, b := range msg.Content {
				if b.Type == "text" && b.Text != "" {
					parts = append(parts, map[string]any{"text": b.Text})
				} else if b.Type == "image" && m.imageable {
					parts = append(parts, map[string]any{"inlineData": map[string]string{"mimeType": b.MimeType, "data": b.Data}})
				}
			}
			add("user", parts, false)
		case *assistantMessage:
			same := sameModel(msg, m)
			signed := func(part map[string]any, sig string) map[string]any {
				if same && validSignature(sig) {
					part["thoughtSignature"] = sig
				}
				return part
			}
			var parts []map[string]any
			for _, b := range msg.Content {
				switch b.Type {
				case "thinking":
					if same && b.Thinking != "" {
						parts = append(parts, signed(map[string]any{"thought": true, "text": b.Thinking}, b.ThinkingSignature))
					}
				case "text":
					if b.Text != "" || same && validSignature(b.TextSignature) {
						parts = append(parts, signed(map[string]any{"text": b.Text}, b.TextSignature))
					}
				case "toolCall":
					call := map[string]any{"name": b.Name, "args": json.RawMessage(callArguments(b))}
					if withIDs {
						call["id"], _ = splitCallID(b.ID)
					}
					parts = append(parts, signed(map[string]any{"functionCall": call}, b.ThoughtSignature))
				}
			}
			add("model", parts, false)
		case *toolResultMessage:
			response := map[string]string{"output": resultText(msg.Content)}
			if msg.IsError {
				response = map[string]string{"error": resultText(msg.Content)}
			}
			result := map[string]any{"name": msg.ToolName, "response": response}
			if withIDs {
				result["id"], _ = splitCallID(msg.ToolCallID)
			}
			add("user", []map[string]any{{"functionResponse": result}}, true)
		}
	}
	body := map[string]any{"contents": contents}
	if req.system != "" {
		body["systemInstruction"] = map[string]any{"parts": []map[string]string{{"text": req.system}}}
	}
	if len(req.tools) > 0 {
		var decls []map[string]any
		for _, t := range req.tools {
			decls = append(decls, map[string]any{"name": t.name, "description": t.description, "parametersJsonSchema": t.schema})
		}
		body["tools"] = []map[string]any{{"functionDeclarations": decls}}
	}
	config := map[string]any{"maxOutputTokens": m.MaxTokens}
	if m.Reasoning {
		config["thinkingConfig"] = geminiThinking(m, req.thinking)
	}
	body["generationConfig"] = config
	return body
}

// geminiChunk is one event of a Gemini stream: a piece of the answer
// with the usage so far, or an error.
type geminiChunk struct {
	Candidates []struct {
		Content struct {
			Parts []struct {
				Text             *string `json:"text"`
				Thought          bool    `json:"thought"`
				ThoughtSignature string  `json:"thoughtSignature"`
				FunctionCall     *struct {
					ID   string          `json:"id"`
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *struct {
		PromptTokenCount        int `json:"promptTokenCount"`
		CandidatesTokenCount    int `json:"candidatesTokenCount"`
		CachedContentTokenCount int `json:"cachedContentTokenCount"`
		ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
	} `json:"usageMetadata"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

// readGemini reads a Gemini stream: "data:" chunks and no end marker, the
// last chunk carrying finishReason. Consecutive thought parts make one
// thinking block and text parts one text block; a function call arrives
// whole. A call without an id (or with one already used) gets one made
// up as pi does: "<name>_<ms>_<n>".
func readGemini(body io.Reader, st *streamer, m *model) error {
	current := -1 // the open text or thinking block
	closeCurrent := func() {
		if current >= 0 {
			st.endBlock(current)
			current = -1
		}
	}
	finish, blocked := "", ""
	ids := map[string]bool{}
	err := st.events(body, func(_ string, data []byte) (bool, error) {
		var chunk geminiChunk
		if err := json.Unmarshal(data, &chunk); err != nil {
			return true, &providerError{message: fmt.Sprintf("Invalid response from the model server: %v", err)}
		}
		if e := chunk.Error; e != nil {
			return true, &providerError{message: fmt.Sprintf("%d %s: %s", e.Code, e.Status, e.Message)}
		}
		if u := chunk.UsageMetadata; u != nil {
			cached := u.CachedContentTokenCount
			st.msg.Usage.Input, st.msg.Usage.CacheRead = u.PromptTokenCount-cached, cached
			st.msg.Usage.Output = u.CandidatesTokenCount + u.ThoughtsTokenCount
		}
		if f := chunk.PromptFeedback; f != nil && f.BlockReason != "" {
			blocked = f.BlockReason
		}
		for _, c := range chunk.Candidates {
			for _, p := range c.Content.Parts {
				if call := p.FunctionCall; call != nil {
					closeCurrent()
					id := call.ID
					if id == "" || ids[id] {
						id = fmt.Sprintf("%s_%d_%d", call.Name, time.Now().UnixMilli(), len(ids)+1)
					}
					ids[id] = true
					i := st.startBlock(len(st.msg.Content), contentBlock{Type: "toolCall", ID: id, Name: call.Name, ThoughtSignature: p.ThoughtSignature})
					args := string(call.Args)
					if args == "" || args == "null" {
						args = "{}"
					}
					st.delta(i, args)
					st.endBlock(i)
					continue
				}
				if p.Text == nil {
					continue
				}
				kind := "text"
				if p.Thought {
					kind = "thinking"
				}
				if current >= 0 && st.msg.Content[current].Type != kind {
					closeCurrent()
				}
				if current < 0 {
					if *p.Text == "" && p.ThoughtSignature == "" {
						continue // the empty part that ends a stream
					}
					current = st.startBlock(len(st.msg.Content), contentBlock{Type: kind})
				}
				if *p.Text != "" {
					st.delta(current, *p.Text)
				}
				if sig := p.ThoughtSignature; sig != "" {
					if kind == "thinking" {
						st.keep(&st.msg.Content[current].ThinkingSignature, sig)
					} else {
						st.keep(&st.msg.Content[current].TextSignature, sig)
					}
				}
			}
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
		return finish != "", nil
	})
	closeCurrent()
	if err != nil {
		if blocked != "" {
			return &providerError{message: "The prompt was blocked: " + blocked}
		}
		return err
	}
	stop := map[string]string{"STOP": "stop", "MAX_TOKENS": "length", "CONTINUATION": "length"}
	return st.stopAs(stop[finish], finish, m)
}
