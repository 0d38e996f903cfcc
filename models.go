package main

// Models: the built-in catalog, pi's models.json, credentials, and the two
// streaming APIs (OpenAI Chat Completions and Anthropic Messages) over
// net/http with server-sent events.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// modelCost is a model's price in dollars per million tokens.
type modelCost struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
}

// model is pi's Model object. Its API key and headers are never encoded.
type model struct {
	ID            string    `json:"id"`
	Name          string    `json:"name"`
	API           string    `json:"api"`
	Provider      string    `json:"provider"`
	BaseURL       string    `json:"baseUrl"`
	Reasoning     bool      `json:"reasoning"`
	Input         []string  `json:"input"`
	Cost          modelCost `json:"cost"`
	ContextWindow int       `json:"contextWindow"`
	MaxTokens     int       `json:"maxTokens"`

	apiKey    string            // resolved credential; empty when none
	needsKey  bool              // false for a models.json provider without apiKey (a local server)
	headers   map[string]string // extra request headers from models.json
	imageable bool
}

const (
	apiOpenAI    = "openai-completions"
	apiAnthropic = "anthropic-messages"
)

// builtinModels is the small catalog of current OpenAI and Anthropic models.
func builtinModels() []*model {
	openai := func(id, name string, reasoning bool, window, max int, cost modelCost) *model {
		return &model{ID: id, Name: name, API: apiOpenAI, Provider: "openai", BaseURL: "https://api.openai.com/v1",
			Reasoning: reasoning, Input: []string{"text", "image"}, Cost: cost, ContextWindow: window, MaxTokens: max, needsKey: true}
	}
	anthropic := func(id, name string, window, max int, cost modelCost) *model {
		return &model{ID: id, Name: name, API: apiAnthropic, Provider: "anthropic", BaseURL: "https://api.anthropic.com",
			Reasoning: true, Input: []string{"text", "image"}, Cost: cost, ContextWindow: window, MaxTokens: max, needsKey: true}
	}
	return []*model{
		anthropic("claude-sonnet-4-5", "Claude Sonnet 4.5", 200000, 64000, modelCost{3, 15, 0.3, 3.75}),
		anthropic("claude-opus-4-1", "Claude Opus 4.1", 200000, 32000, modelCost{15, 75, 1.5, 18.75}),
		anthropic("claude-haiku-4-5", "Claude Haiku 4.5", 200000, 64000, modelCost{1, 5, 0.1, 1.25}),
		openai("gpt-5", "GPT-5", true, 400000, 128000, modelCost{1.25, 10, 0.125, 0}),
		openai("gpt-5-mini", "GPT-5 mini", true, 400000, 128000, modelCost{0.25, 2, 0.025, 0}),
		openai("gpt-4.1", "GPT-4.1", false, 1047576, 32768, modelCost{2, 8, 0.5, 0}),
		openai("gpt-4o", "GPT-4o", false, 128000, 16384, modelCost{2.5, 10, 1.25, 0}),
		openai("o4-mini", "o4-mini", true, 200000, 100000, modelCost{1.1, 4.4, 0.275, 0}),
	}
}

// modelsFile is pi's models.json.
type modelsFile struct {
	Providers map[string]struct {
		BaseURL string            `json:"baseUrl"`
		API     string            `json:"api"`
		APIKey  string            `json:"apiKey"`
		Headers map[string]string `json:"headers"`
		Models  []struct {
			ID            string     `json:"id"`
			Name          string     `json:"name"`
			API           string     `json:"api"`
			BaseURL       string     `json:"baseUrl"`
			Reasoning     bool       `json:"reasoning"`
			Input         []string   `json:"input"`
			ContextWindow int        `json:"contextWindow"`
			MaxTokens     int        `json:"maxTokens"`
			Cost          *modelCost `json:"cost"`
		} `json:"models"`
	} `json:"providers"`
}

// envOrLiteral resolves a models.json value: the environment variable of
// that name when it is set, otherwise the value itself.
func envOrLiteral(v string, getenv func(string) string) string {
	if env := getenv(strings.TrimPrefix(strings.Trim(v, "${}"), "$")); env != "" && isEnvName(v) {
		return env
	}
	return v
}

// isEnvName reports whether v names an environment variable: NAME, $NAME
// or ${NAME}.
func isEnvName(v string) bool {
	v = strings.TrimPrefix(strings.TrimSuffix(strings.TrimPrefix(v, "${"), "}"), "$")
	if v == "" {
		return false
	}
	for _, c := range v {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// providerKeyVars are the environment variables the built-in providers
// take their keys from. Children never see them (nor any variable a
// models.json key or header names).
var providerKeyVars = []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}

// loadModels builds the model list: models.json's models first (a user's
// own configuration is what they want by default), then the catalog, each
// with its credential resolved. It also returns every secret it resolved
// (for redaction) and the variables they came from. A models.json that
// cannot be read or is invalid is an error; a missing one is not.
func loadModels(dir, cliProvider, cliKey string, getenv func(string) string) (models []*model, secrets *redactor, keyVars, warnings []string, err error) {
	keyVars = slices.Clone(providerKeyVars)
	var keys []string
	resolve := func(v string) string {
		if isEnvName(v) {
			keyVars = append(keyVars, strings.TrimPrefix(strings.Trim(v, "${}"), "$"))
		}
		value := envOrLiteral(v, getenv)
		keys = append(keys, value)
		return value
	}
	path := filepath.Join(dir, "models.json")
	data, err := readRegularFile(path, maxResourceBytes)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil, nil, fmt.Errorf("Cannot read %s: %v", path, unwrapPathError(err))
	}
	if err == nil {
		var file modelsFile
		if err := json.Unmarshal(data, &file); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("Invalid %s: %v", path, jsonError(data, err))
		}
		for name, p := range file.Providers {
			for _, m := range p.Models {
				api, baseURL := cmp.Or(m.API, p.API), cmp.Or(m.BaseURL, p.BaseURL)
				switch {
				case m.ID == "":
					return nil, nil, nil, nil, fmt.Errorf("Invalid %s: provider %s: model missing \"id\"", path, name)
				case baseURL == "":
					return nil, nil, nil, nil, fmt.Errorf("Invalid %s: provider %s: \"baseUrl\" is required", path, name)
				case api != apiOpenAI && api != apiAnthropic:
					return nil, nil, nil, nil, fmt.Errorf("Invalid %s: provider %s, model %s: \"api\" must be %s or %s", path, name, m.ID, apiOpenAI, apiAnthropic)
				}
				mod := &model{ID: m.ID, Name: cmp.Or(m.Name, m.ID), API: api, Provider: name, BaseURL: strings.TrimRight(baseURL, "/"),
					Reasoning: m.Reasoning, Input: m.Input, ContextWindow: m.ContextWindow, MaxTokens: m.MaxTokens,
					needsKey: p.APIKey != "", headers: map[string]string{}}
				if mod.Input == nil {
					mod.Input = []string{"text"}
				}
				if mod.ContextWindow == 0 {
					mod.ContextWindow = 128000
				}
				if mod.MaxTokens == 0 {
					mod.MaxTokens = 16384
				}
				if m.Cost != nil {
					mod.Cost = *m.Cost
				}
				if p.APIKey != "" {
					mod.apiKey = resolve(p.APIKey)
				}
				for k, v := range p.Headers {
					mod.headers[k] = resolve(v)
				}
				models = append(models, mod)
			}
		}
		sortModels(models)
	}
	for _, m := range builtinModels() {
		switch m.Provider {
		case "openai":
			m.apiKey = getenv("OPENAI_API_KEY")
			if base := getenv("OPENAI_BASE_URL"); base != "" {
				m.BaseURL = strings.TrimRight(base, "/")
			}
		case "anthropic":
			m.apiKey = getenv("ANTHROPIC_API_KEY")
		}
		keys = append(keys, m.apiKey)
		models = append(models, m)
	}
	if cliKey != "" {
		keys = append(keys, cliKey)
		for _, m := range models {
			if cliProvider == "" || m.Provider == cliProvider {
				m.apiKey = cliKey
			}
		}
	}
	for _, m := range models {
		m.imageable = slices.Contains(m.Input, "image")
	}
	return models, newRedactor(keys), keyVars, nil, nil
}

// redactor removes secrets from text that leaves rpi.
type redactor struct{ replacer *strings.Replacer }

// minSecretLength: shorter values (a local server's "x") are not secrets
// worth hiding and would mangle ordinary text.
const minSecretLength = 8

func newRedactor(secrets []string) *redactor {
	var pairs []string
	seen := map[string]bool{}
	for _, secret := range secrets {
		for _, form := range []string{secret, url.QueryEscape(secret), url.PathEscape(secret)} {
			if len(form) >= minSecretLength && !seen[form] {
				seen[form] = true
				pairs = append(pairs, form, "[redacted]")
			}
		}
	}
	return &redactor{strings.NewReplacer(pairs...)}
}

func (r *redactor) redact(text string) string {
	if r == nil {
		return text
	}
	return r.replacer.Replace(text)
}

// MarshalJSON writes the Model object with any password in its baseUrl
// masked; keys and headers are never part of it.
func (m *model) MarshalJSON() ([]byte, error) {
	type plain model
	c := plain(*m)
	if u, err := url.Parse(c.BaseURL); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "***")
			c.BaseURL = strings.Replace(u.String(), "%2A%2A%2A", "***", 1)
		}
	}
	return marshalJSON(c)
}

// sortModels orders models.json models by provider, then as listed.
func sortModels(models []*model) {
	slices.SortStableFunc(models, func(a, b *model) int { return strings.Compare(a.Provider, b.Provider) })
}

// usable reports whether a model can be called: it has a key or needs none.
func (m *model) usable() bool { return !m.needsKey || m.apiKey != "" }

// noModelMessage says how to configure a model; it is the prompt failure
// when none is usable.
const noModelMessage = "No model available. Set OPENAI_API_KEY or ANTHROPIC_API_KEY, pass --api-key with --provider, " +
	"or add an OpenAI-compatible server to models.json in $PI_CODING_AGENT_DIR (default ~/.pi/agent); see README.md."

// ---- Streaming ----

// assistantEvent is the assistantMessageEvent of a message_update: deltas
// only, never a copy of the message so far.
type assistantEvent struct {
	Type         string        `json:"type"`
	ContentIndex int           `json:"contentIndex"`
	Delta        *string       `json:"delta,omitempty"`
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
}

// providerError is a failed model call; status is the HTTP status (0 for
// a network failure) and retryAfter the server's Retry-After, if any.
type providerError struct {
	status     int
	retryAfter time.Duration
	message    string
}

func (e *providerError) Error() string { return e.message }

// streamer builds a streaming answer in msg and emits an event per delta.
type streamer struct {
	msg  *assistantMessage
	emit func(assistantEvent)
	// open blocks by provider index: each content block of msg as it grows.
	blocks map[int]int
	args   map[int]*strings.Builder
}

func (st *streamer) startBlock(key int, b contentBlock) int {
	st.msg.Content = append(st.msg.Content, b)
	i := len(st.msg.Content) - 1
	st.blocks[key] = i
	switch b.Type {
	case "text":
		st.emit(assistantEvent{Type: "text_start", ContentIndex: i})
	case "thinking":
		st.emit(assistantEvent{Type: "thinking_start", ContentIndex: i})
	case "toolCall":
		st.args[i] = &strings.Builder{}
		st.emit(assistantEvent{Type: "toolcall_start", ContentIndex: i, ID: b.ID, ToolName: b.Name})
	}
	return i
}

func (st *streamer) delta(i int, text string) {
	b := &st.msg.Content[i]
	kind := ""
	switch b.Type {
	case "text":
		b.Text += text
		kind = "text_delta"
	case "thinking":
		b.Thinking += text
		kind = "thinking_delta"
	case "toolCall":
		st.args[i].WriteString(text)
		kind = "toolcall_delta"
	}
	st.emit(assistantEvent{Type: kind, ContentIndex: i, Delta: &text})
}

func (st *streamer) endBlock(i int) {
	b := &st.msg.Content[i]
	switch b.Type {
	case "text":
		st.emit(assistantEvent{Type: "text_end", ContentIndex: i})
	case "thinking":
		st.emit(assistantEvent{Type: "thinking_end", ContentIndex: i})
	case "toolCall":
		args := strings.TrimSpace(st.args[i].String())
		if args == "" {
			args = "{}"
		}
		if !json.Valid([]byte(args)) {
			raw, _ := json.Marshal(map[string]string{"_raw": args})
			args = string(raw)
		}
		b.Arguments = json.RawMessage(args)
		call := *b
		st.emit(assistantEvent{Type: "toolcall_end", ContentIndex: i, ToolCall: &call})
	}
}

// modelClient calls providers. It follows no redirect: a key sent in a
// header must not travel on to another host.
var modelClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// callModel streams one answer into msg, calling started once the provider
// has accepted the request and emit for each delta. Every secret rpi
// holds is removed from the error it returns: a server may echo a key.
func callModel(ctx context.Context, req streamRequest, msg *assistantMessage, started func(), emit func(assistantEvent)) error {
	err := streamModel(ctx, req, msg, started, emit)
	var perr *providerError
	switch {
	case errors.As(err, &perr):
		perr.message = req.secrets.redact(perr.message)
	case err != nil && ctx.Err() == nil:
		err = errors.New(req.secrets.redact(err.Error()))
	}
	return err
}

func streamModel(ctx context.Context, req streamRequest, msg *assistantMessage, started func(), emit func(assistantEvent)) error {
	st := &streamer{msg: msg, emit: emit, blocks: map[int]int{}, args: map[int]*strings.Builder{}}
	var (
		url  string
		body any
	)
	headers := map[string]string{"Content-Type": "application/json", "Accept": "text/event-stream"}
	if req.model.API == apiAnthropic {
		url, body = req.model.BaseURL+"/v1/messages", anthropicBody(req)
		headers["anthropic-version"] = "2023-06-01"
		if req.model.apiKey != "" {
			headers["x-api-key"] = req.model.apiKey
		}
	} else {
		url, body = req.model.BaseURL+"/chat/completions", openAIBody(req)
		if req.model.apiKey != "" {
			headers["Authorization"] = "Bearer " + req.model.apiKey
		}
	}
	for k, v := range req.model.headers {
		headers[k] = v
	}
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return err
	}
	for k, v := range headers {
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
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return &providerError{status: resp.StatusCode, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After")),
			message: fmt.Sprintf("%d %s: %s", resp.StatusCode, http.StatusText(resp.StatusCode), strings.TrimSpace(string(text)))}
	}
	started()
	if req.model.API == apiAnthropic {
		err = readAnthropic(resp.Body, st, req.model)
	} else {
		err = readOpenAI(resp.Body, st, req.model)
	}
	if err != nil && ctx.Err() != nil {
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

// sseEvents reads server-sent events, calling fn with each event's name
// and data (data lines joined by "\n").
func sseEvents(r io.Reader, fn func(name, data string) (stop bool, err error)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var name string
	var data []string
	for {
		line, err := br.ReadString('\n')
		if err != nil && (err != io.EOF || line == "") {
			if err == io.EOF {
				return &providerError{message: "Connection error: the stream ended before the answer was complete"}
			}
			return &providerError{message: fmt.Sprintf("Connection error: %v", err)}
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if len(data) > 0 {
				if stop, err := fn(name, strings.Join(data, "\n")); stop || err != nil {
					return err
				}
			}
			name, data = "", nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(line[len("data:"):], " "))
		}
	}
}

// computeCost fills usage.Cost from the model's per-million prices.
func computeCost(u *usage, m *model) {
	u.Cost = costBreakdown{
		Input:      float64(u.Input) * m.Cost.Input / 1e6,
		Output:     float64(u.Output) * m.Cost.Output / 1e6,
		CacheRead:  float64(u.CacheRead) * m.Cost.CacheRead / 1e6,
		CacheWrite: float64(u.CacheWrite) * m.Cost.CacheWrite / 1e6,
	}
	u.Cost.Total = u.Cost.Input + u.Cost.Output + u.Cost.CacheRead + u.Cost.CacheWrite
	u.TotalTokens = u.Input + u.Output + u.CacheRead + u.CacheWrite
}

// ---- OpenAI Chat Completions ----

// openAIEffort maps a thinking level to reasoning_effort.
func openAIEffort(level string) string {
	if level == "xhigh" {
		return "high"
	}
	return level
}

func openAIBody(req streamRequest) map[string]any {
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
			var text strings.Builder
			var calls []map[string]any
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					text.WriteString(b.Text)
				case "toolCall":
					calls = append(calls, map[string]any{"id": b.ID, "type": "function",
						"function": map[string]string{"name": b.Name, "arguments": string(b.Arguments)}})
				}
			}
			if text.Len() > 0 {
				msg["content"] = text.String()
			}
			if calls != nil {
				msg["tool_calls"] = calls
			}
			if text.Len() > 0 || calls != nil {
				messages = append(messages, msg)
			}
		case *toolResultMessage:
			messages = append(messages, map[string]any{"role": "tool", "tool_call_id": m.ToolCallID, "content": resultText(m.Content)})
		}
	}
	body := map[string]any{
		"model": req.model.ID, "messages": messages, "stream": true,
		"stream_options": map[string]bool{"include_usage": true},
	}
	if strings.Contains(req.model.BaseURL, "api.openai.com") {
		body["max_completion_tokens"] = min(req.model.MaxTokens, 32000)
	} else {
		body["max_tokens"] = min(req.model.MaxTokens, 32000)
	}
	if len(req.tools) > 0 {
		var tools []map[string]any
		for _, t := range req.tools {
			tools = append(tools, map[string]any{"type": "function",
				"function": map[string]any{"name": t.name, "description": t.description, "parameters": t.schema}})
		}
		body["tools"] = tools
	}
	if req.model.Reasoning && req.thinking != "off" {
		body["reasoning_effort"] = openAIEffort(req.thinking)
	}
	return body
}

type openAIChunk struct {
	Choices []struct {
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			ReasoningText    *string `json:"reasoning_text"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
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

func readOpenAI(body io.Reader, st *streamer, m *model) error {
	current := -1 // index of the open content block
	finish := ""
	closeCurrent := func() {
		if current >= 0 {
			st.endBlock(current)
			current = -1
		}
	}
	open := func(kind string, b contentBlock) int {
		if current >= 0 && st.msg.Content[current].Type == kind && (kind != "toolCall" || b.ID == "") {
			return current
		}
		closeCurrent()
		current = st.startBlock(len(st.msg.Content), b)
		return current
	}
	err := sseEvents(body, func(_, data string) (bool, error) {
		if data == "[DONE]" {
			return true, nil
		}
		var chunk openAIChunk
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
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
			for _, thinking := range []*string{d.ReasoningContent, d.Reasoning, d.ReasoningText} {
				if thinking != nil && *thinking != "" {
					st.delta(open("thinking", contentBlock{Type: "thinking"}), *thinking)
					break
				}
			}
			if d.Content != nil && *d.Content != "" {
				st.delta(open("text", contentBlock{Type: "text"}), *d.Content)
			}
			for _, tc := range d.ToolCalls {
				i := open("toolCall", contentBlock{Type: "toolCall", ID: tc.ID, Name: tc.Function.Name})
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
	if err != nil {
		return err
	}
	switch finish {
	case "stop", "end", "":
		st.msg.StopReason = "stop"
	case "length":
		st.msg.StopReason = "length"
	case "tool_calls", "function_call":
		st.msg.StopReason = "toolUse"
	default:
		return &providerError{message: "The model stopped: " + finish}
	}
	computeCost(&st.msg.Usage, m)
	return nil
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
			var blocks []map[string]any
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					if b.Text != "" {
						blocks = append(blocks, map[string]any{"type": "text", "text": b.Text})
					}
				case "thinking":
					if b.ThinkingSignature != "" {
						blocks = append(blocks, map[string]any{"type": "thinking", "thinking": b.Thinking, "signature": b.ThinkingSignature})
					}
				case "toolCall":
					blocks = append(blocks, map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": b.Arguments})
				}
			}
			add("assistant", blocks)
		case *toolResultMessage:
			add("user", []map[string]any{{"type": "tool_result", "tool_use_id": m.ToolCallID, "content": resultText(m.Content), "is_error": m.IsError}})
		}
	}
	body := map[string]any{"model": req.model.ID, "messages": messages, "stream": true, "max_tokens": req.model.MaxTokens}
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
		body["max_tokens"] = max(req.model.MaxTokens, budget+4096)
	}
	return body
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
	err := sseEvents(body, func(_, data string) (bool, error) {
		var ev anthropicEvent
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
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
				st.msg.Content[i].ThinkingSignature += ev.Delta.Signature
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
	switch stop {
	case "end_turn", "stop_sequence", "pause_turn", "":
		st.msg.StopReason = "stop"
	case "max_tokens":
		st.msg.StopReason = "length"
	case "tool_use":
		st.msg.StopReason = "toolUse"
	default:
		return &providerError{message: "The model stopped: " + stop}
	}
	computeCost(u, m)
	return nil
}

// ---- Choosing the model ----

// chooseModel picks the starting model: --model (and --provider), then
// settings.json's default, then the first usable model. The thinking
// suffix of --model ("id:high") is returned too.
func chooseModel(models []*model, provider, spec, defProvider, defModel string) (*model, string, error) {
	thinking := ""
	if spec != "" {
		id := spec
		if i := strings.LastIndex(spec, ":"); i > 0 && slices.Contains(thinkingLevels, spec[i+1:]) {
			id, thinking = spec[:i], spec[i+1:]
		}
		if provider == "" {
			if p, rest, ok := strings.Cut(id, "/"); ok {
				provider, id = p, rest
			}
		}
		for _, m := range models {
			if m.ID == id && (provider == "" || m.Provider == provider) {
				return m, thinking, nil
			}
		}
		return nil, "", fmt.Errorf("Unknown model: %s (see get_available_models, or add it to models.json)", spec)
	}
	for _, m := range models {
		if m.Provider == defProvider && m.ID == defModel && m.usable() {
			return m, "", nil
		}
	}
	for _, m := range models {
		if m.usable() && (provider == "" || m.Provider == provider) {
			return m, "", nil
		}
	}
	return nil, "", nil
}

// effectiveThinking is the thinking level the current model gets: off for
// a model without reasoning, otherwise the level set (also while there is
// no model). s.mu must be held.
func (s *server) effectiveThinking() string {
	if s.model != nil && !s.model.Reasoning {
		return "off"
	}
	return s.thinkingLevel
}

// usableModels lists the models that can be called.
func (s *server) usableModels() []*model {
	var out []*model
	for _, m := range s.set.catalog {
		if m.usable() {
			out = append(out, m)
		}
	}
	return out
}

// switchModel makes m the current model and records the change.
func (s *server) switchModel(m *model) {
	s.mu.Lock()
	s.model = m
	s.mu.Unlock()
	s.conv.record("model_change", field{"provider", m.Provider}, field{"modelId", m.ID})
}

// setModel switches the model for the next call.
// Fields: provider, modelId. Answer: the Model object; a model that is
// unknown or has no credentials fails with "Model not found: p/id".
func (s *server) setModel(r *request) (any, error) {
	provider, err := r.str("provider")
	if err != nil {
		return nil, err
	}
	id, err := r.str("modelId")
	if err != nil {
		return nil, err
	}
	for _, m := range s.usableModels() {
		if m.Provider == provider && m.ID == id {
			s.switchModel(m)
			return m, nil
		}
	}
	return nil, fmt.Errorf("Model not found: %s/%s", provider, id)
}

// cycleModel moves to the next usable model.
// Fields: none. Answer: {model, thinkingLevel, isScoped:false}, or null
// when fewer than two models are usable.
func (s *server) cycleModel(r *request) (any, error) {
	models := s.usableModels()
	if len(models) < 2 {
		return nil, nil
	}
	s.mu.Lock()
	next := models[0]
	for i, m := range models {
		if m == s.model {
			next = models[(i+1)%len(models)]
		}
	}
	s.mu.Unlock()
	s.switchModel(next)
	s.mu.Lock()
	defer s.mu.Unlock()
	return struct {
		Model         *model `json:"model"`
		ThinkingLevel string `json:"thinkingLevel"`
		IsScoped      bool   `json:"isScoped"`
	}{next, s.effectiveThinking(), false}, nil
}

// getAvailableModels lists the models whose provider has credentials (or
// needs none). Keys are never included.
// Fields: none. Answer: {"models":[Model]}.
func (s *server) getAvailableModels(r *request) (any, error) {
	models := s.usableModels()
	if models == nil {
		models = []*model{}
	}
	return struct {
		Models []*model `json:"models"`
	}{models}, nil
}

// ---- Thinking ----

// thinkingAnswer is what set_thinking_level answers (§11).
type thinkingAnswer struct {
	Requested string `json:"requested"`
	Level     string `json:"level"`
}

// setThinkingLevel sets the reasoning effort used for the next model call;
// an unchanged effective level writes no session entry.
// Fields: level (off|minimal|low|medium|high|xhigh). Answer: {requested,
// level (the level in force: off for a model without reasoning)}.
func (s *server) setThinkingLevel(r *request) (any, error) {
	level, err := r.enum("level", thinkingLevels)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	before := s.effectiveThinking()
	s.thinkingLevel = level
	now := s.effectiveThinking()
	s.mu.Unlock()
	if now != before {
		s.conv.record("thinking_level_change", field{"thinkingLevel", now})
	}
	return thinkingAnswer{level, now}, nil
}

// cycleThinkingLevel moves to the next thinking level; with a model that
// does not reason (or none) it answers null and nothing changes.
// Fields: none. Answer: {"level":…} or null.
func (s *server) cycleThinkingLevel(r *request) (any, error) {
	s.mu.Lock()
	if s.model == nil || !s.model.Reasoning {
		s.mu.Unlock()
		return nil, nil
	}
	i := slices.Index(thinkingLevels, s.thinkingLevel)
	s.thinkingLevel = thinkingLevels[(i+1)%len(thinkingLevels)]
	level := s.thinkingLevel
	s.mu.Unlock()
	s.conv.record("thinking_level_change", field{"thinkingLevel", level})
	return struct {
		Level string `json:"level"`
	}{level}, nil
}
