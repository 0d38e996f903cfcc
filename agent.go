package main

// The agent: messages, the prompt → model → tools → next turn loop, the
// steering and follow-up queues, abort and auto-retry, and the commands
// that drive them.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// ---- Messages (pi's shapes) ----

// contentBlock is one block of a message: text, thinking, image or toolCall.
type contentBlock struct {
	Type              string          `json:"type"`
	Text              string          `json:"text"`
	Thinking          string          `json:"thinking"`
	ThinkingSignature string          `json:"thinkingSignature"`
	Data              string          `json:"data"`
	MimeType          string          `json:"mimeType"`
	ID                string          `json:"id"`
	Name              string          `json:"name"`
	Arguments         json.RawMessage `json:"arguments"`
}

// MarshalJSON writes only the fields of the block's type, in pi's order.
func (b contentBlock) MarshalJSON() ([]byte, error) {
	switch b.Type {
	case "thinking":
		return encodeJSON(struct {
			Type              string `json:"type"`
			Thinking          string `json:"thinking"`
			ThinkingSignature string `json:"thinkingSignature,omitempty"`
		}{b.Type, b.Thinking, b.ThinkingSignature})
	case "image":
		return encodeJSON(struct {
			Type     string `json:"type"`
			Data     string `json:"data"`
			MimeType string `json:"mimeType"`
		}{b.Type, b.Data, b.MimeType})
	case "toolCall":
		return encodeJSON(struct {
			Type      string          `json:"type"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}{b.Type, b.ID, b.Name, b.Arguments})
	default:
		return encodeJSON(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{b.Type, b.Text})
	}
}

// encodeJSON marshals without HTML escaping, like the output writer.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), err
}

type userMessage struct {
	Role      string         `json:"role"`
	Content   []contentBlock `json:"content"`
	Timestamp int64          `json:"timestamp"`
}

type costBreakdown struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
	Total      float64 `json:"total"`
}

type usage struct {
	Input       int           `json:"input"`
	Output      int           `json:"output"`
	CacheRead   int           `json:"cacheRead"`
	CacheWrite  int           `json:"cacheWrite"`
	TotalTokens int           `json:"totalTokens"`
	Cost        costBreakdown `json:"cost"`
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
	Timestamp    int64          `json:"timestamp"`
}

type toolResultMessage struct {
	Role       string         `json:"role"`
	ToolCallID string         `json:"toolCallId"`
	ToolName   string         `json:"toolName"`
	Content    []contentBlock `json:"content"`
	Details    any            `json:"details,omitempty"`
	IsError    bool           `json:"isError"`
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

// contextMessages is what the model is sent of the conversation: failed
// and aborted answers are left out, a user bash command becomes a user
// message, and a tool call left without a result gets one saying so.
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
			for i, call := range open {
				if call.ID == m.ToolCallID {
					open = append(open[:i], open[i+1:]...)
					break
				}
			}
			out = append(out, m)
		case *userMessage:
			closeOpen()
			out = append(out, m)
		case bashExecutionMessage:
			closeOpen()
			out = append(out, &userMessage{Role: "user", Content: textBlocks(bashContextText(m)), Timestamp: m.Timestamp})
		case *summaryMessage:
			closeOpen()
			text := "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n" + m.Summary + "</summary>"
			if m.Role == "compactionSummary" {
				text = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n" + m.Summary + "\n</summary>"
			}
			out = append(out, &userMessage{Role: "user", Content: textBlocks(text), Timestamp: m.Timestamp})
		case rawMessage:
			var custom struct {
				Role    string
				Content json.RawMessage
			}
			json.Unmarshal(m, &custom)
			if text := rawText(custom.Content); custom.Role == "custom" && text != "" {
				closeOpen()
				out = append(out, &userMessage{Role: "user", Content: textBlocks(text)})
			}
		}
	}
	closeOpen()
	return out
}

// rawText is the text of a message content that is a string or blocks.
func rawText(content json.RawMessage) string {
	var text string
	if json.Unmarshal(content, &text) == nil {
		return text
	}
	var blocks []contentBlock
	json.Unmarshal(content, &blocks)
	var b strings.Builder
	for _, c := range blocks {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
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

// ---- Event payloads ----

type messageEvent struct {
	Message any `json:"message"`
}

type messageUpdate struct {
	AssistantMessageEvent assistantEvent `json:"assistantMessageEvent"`
}

type toolExecStart struct {
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Args       json.RawMessage `json:"args"`
}

type toolExecUpdate struct {
	ToolCallID    string          `json:"toolCallId"`
	ToolName      string          `json:"toolName"`
	Args          json.RawMessage `json:"args"`
	PartialResult toolResult      `json:"partialResult"`
}

type toolExecEnd struct {
	ToolCallID string     `json:"toolCallId"`
	ToolName   string     `json:"toolName"`
	Result     toolResult `json:"result"`
	IsError    bool       `json:"isError"`
}

type turnEnd struct {
	Message     *assistantMessage    `json:"message"`
	ToolResults []*toolResultMessage `json:"toolResults"`
}

type agentEnd struct {
	Messages  []any `json:"messages"`
	WillRetry bool  `json:"willRetry"`
}

type queueUpdate struct {
	Steering []string `json:"steering"`
	FollowUp []string `json:"followUp"`
}

type retryStart struct {
	Attempt      int    `json:"attempt"`
	MaxAttempts  int    `json:"maxAttempts"`
	DelayMs      int64  `json:"delayMs"`
	ErrorMessage string `json:"errorMessage"`
}

type retryEnd struct {
	Success    bool   `json:"success"`
	Attempt    int    `json:"attempt"`
	FinalError string `json:"finalError,omitempty"`
}

func (s *server) emit(typ string, data any) { s.out.write(event{Type: typ, Data: data}) }

// ---- Settings ----

// retrySettings are pi's settings.json "retry" block.
type retrySettings struct {
	MaxRetries  int `json:"maxRetries"`
	BaseDelayMs int `json:"baseDelayMs"`
}

// defaultConfirmTimeoutMs is how long an approval waits for the client
// before it counts as denied (settings.json confirmTimeoutMs).
const defaultConfirmTimeoutMs = 5 * 60 * 1000

// loadSettings reads what rpi uses of pi's settings.json in the agent dir:
// the default model, the retry timing, the compaction sizes and rpi's own
// confirmTimeoutMs. A missing file is fine.
func loadSettings(dir string) (defaultProvider, defaultModel string, retry retrySettings, compaction compactionSettings, confirmTimeoutMs int64) {
	confirmTimeoutMs = defaultConfirmTimeoutMs
	retry = retrySettings{MaxRetries: 3, BaseDelayMs: 2000}
	compaction = compactionSettings{ReserveTokens: 16384, KeepRecentTokens: 20000}
	data, err := os.ReadFile(filepath.Join(dir, "settings.json"))
	if err != nil {
		return "", "", retry, compaction, confirmTimeoutMs
	}
	var file struct {
		DefaultProvider string             `json:"defaultProvider"`
		DefaultModel    string             `json:"defaultModel"`
		Retry           retrySettings      `json:"retry"`
		Compaction      compactionSettings `json:"compaction"`
		ConfirmTimeout  int64              `json:"confirmTimeoutMs"`
	}
	json.Unmarshal(data, &file)
	if file.Retry.MaxRetries > 0 {
		retry.MaxRetries = file.Retry.MaxRetries
	}
	if file.Retry.BaseDelayMs > 0 {
		retry.BaseDelayMs = file.Retry.BaseDelayMs
	}
	if file.Compaction.ReserveTokens > 0 {
		compaction.ReserveTokens = file.Compaction.ReserveTokens
	}
	if file.Compaction.KeepRecentTokens > 0 {
		compaction.KeepRecentTokens = file.Compaction.KeepRecentTokens
	}
	if file.ConfirmTimeout > 0 {
		confirmTimeoutMs = file.ConfirmTimeout
	}
	return file.DefaultProvider, file.DefaultModel, retry, compaction, confirmTimeoutMs
}

// chooseModel picks the starting model: --model (and --provider), then
// settings.json's default, then the first usable model. The thinking
// suffix of --model ("id:high") is returned too.
func chooseModel(models []*model, provider, spec, defProvider, defModel string) (*model, string, error) {
	thinking := ""
	if spec != "" {
		id := spec
		if i := strings.LastIndex(spec, ":"); i > 0 && oneOf(spec[i+1:], thinkingLevels) {
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

// ---- The run ----

// agentRun is one run chain, from a prompt to agent_settled.
type agentRun struct {
	ctx     context.Context
	cancel  context.CancelFunc
	settled chan struct{} // closed after agent_settled

	mu          sync.Mutex
	cancelRetry context.CancelFunc // set while waiting to retry
	retryAfter  time.Duration      // the last failure's Retry-After, or -1
}

// retryable matches errors worth another attempt (pi's list).
var retryable = regexp.MustCompile(`(?i)overloaded|rate.?limit|too many requests|429|500|502|503|504|service.?unavailable|server.?error|internal.?error|connection.?error|connection.?refused|other side closed|fetch failed|upstream.?connect|reset before headers|terminated|retry delay`)

// startRun marks the agent busy; s.mu must be held.
func (s *server) startRun() *agentRun {
	ctx, cancel := context.WithCancel(s.ctx)
	run := &agentRun{ctx: ctx, cancel: cancel, settled: make(chan struct{})}
	s.run = run
	return run
}

// runAgent drives a run chain: turns until the model stops with nothing
// queued, auto-retries, and finally agent_settled.
func (s *server) runAgent(run *agentRun, pending []*userMessage) {
	defer s.background.Done()
	defer close(run.settled)
	attempt := 0
	overflowRetried := false
	for {
		last, retryErr := s.runTurns(run, pending, attempt)
		pending = nil
		if retryErr == "" {
			if attempt > 0 && last != nil && last.StopReason == "error" {
				s.emit("auto_retry_end", retryEnd{Success: false, Attempt: attempt, FinalError: last.ErrorMessage})
			}
			if s.autoCompact(run, last, overflowRetried) {
				overflowRetried, attempt = true, 0
				continue
			}
			break
		}
		attempt++
		delay := s.retryDelay(attempt, run)
		s.emit("auto_retry_start", retryStart{Attempt: attempt, MaxAttempts: s.retry.MaxRetries, DelayMs: delay.Milliseconds(), ErrorMessage: retryErr})
		s.tell(uiRequest{Method: "notify", NotifyType: "warning",
			Message: fmt.Sprintf("Retrying in %v (attempt %d of %d): %s", delay, attempt, s.retry.MaxRetries, retryErr)})
		s.status(fmt.Sprintf("retrying (attempt %d of %d)", attempt, s.retry.MaxRetries))
		if !run.waitRetry(delay) {
			s.emit("auto_retry_end", retryEnd{Success: false, Attempt: attempt, FinalError: "Retry cancelled"})
			break
		}
	}
	s.mu.Lock()
	s.run = nil
	s.flushDeferred()
	s.mu.Unlock()
	run.cancel()
	s.status("idle")
	s.emit("agent_settled", nil)
}

// retryDelay is the server's Retry-After when it gave one, else
// exponential backoff from the base delay.
func (s *server) retryDelay(attempt int, run *agentRun) time.Duration {
	run.mu.Lock()
	defer run.mu.Unlock()
	if run.retryAfter >= 0 {
		return run.retryAfter
	}
	return time.Duration(s.retry.BaseDelayMs) * time.Millisecond << (attempt - 1)
}

// waitRetry sleeps before a retry; abort or abort_retry end it early
// (false).
func (run *agentRun) waitRetry(delay time.Duration) bool {
	ctx, cancel := context.WithTimeout(run.ctx, delay)
	run.mu.Lock()
	run.cancelRetry = cancel
	run.mu.Unlock()
	<-ctx.Done()
	run.mu.Lock()
	run.cancelRetry = nil
	run.mu.Unlock()
	cancel()
	return errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// runTurns emits one agent_start … agent_end: turns until the model stops
// with nothing queued. It returns the last answer, and the error message
// when the run ended in an error worth retrying (then agent_end says
// willRetry and the failed answer leaves the context).
func (s *server) runTurns(run *agentRun, pending []*userMessage, attempt int) (*assistantMessage, string) {
	s.emit("agent_start", nil)
	var produced []any
	var last *assistantMessage
	for {
		s.emit("turn_start", nil)
		for _, m := range pending {
			s.emit("message_start", messageEvent{m})
			s.emit("message_end", messageEvent{m})
			s.appendMessage(m)
			produced = append(produced, m)
		}
		pending = nil
		answer := s.streamAnswer(run)
		last = answer
		s.appendMessage(answer)
		produced = append(produced, answer)
		if attempt > 0 && answer.StopReason != "error" && answer.StopReason != "aborted" {
			s.emit("auto_retry_end", retryEnd{Success: true, Attempt: attempt})
			attempt = 0
		}
		if answer.StopReason == "error" || answer.StopReason == "aborted" {
			s.emit("turn_end", turnEnd{answer, []*toolResultMessage{}})
			break
		}
		results := s.runTools(run, answer)
		for _, r := range results {
			produced = append(produced, r)
		}
		s.emit("turn_end", turnEnd{answer, results})
		if run.ctx.Err() != nil {
			break
		}
		if pending = s.takeQueued(true); len(pending) > 0 || len(results) > 0 {
			continue
		}
		if pending = s.takeQueued(false); len(pending) > 0 {
			continue
		}
		break
	}
	willRetry := ""
	s.mu.Lock()
	autoRetry := s.autoRetry
	s.mu.Unlock()
	if last.StopReason == "error" && autoRetry && attempt < s.retry.MaxRetries && retryable.MatchString(last.ErrorMessage) {
		willRetry = last.ErrorMessage
		s.mu.Lock()
		s.messages = s.messages[:len(s.messages)-1] // the failed answer leaves the context
		s.mu.Unlock()
	}
	s.emit("agent_end", agentEnd{Messages: produced, WillRetry: willRetry != ""})
	return last, willRetry
}

// streamAnswer asks the model for the next answer and streams it as
// message_start, message_update… and message_end.
func (s *server) streamAnswer(run *agentRun) *assistantMessage {
	s.mu.Lock()
	m := s.model
	req := streamRequest{model: m, system: s.systemPrompt(), messages: append([]any{}, s.messages...),
		tools: s.activeTools(), thinking: s.effectiveThinking()}
	s.mu.Unlock()
	msg := &assistantMessage{Role: "assistant", Content: []contentBlock{}, API: m.API, Provider: m.Provider, Model: m.ID,
		StopReason: "stop", Timestamp: time.Now().UnixMilli()}
	s.status("thinking")
	started := false
	start := func() {
		started = true
		empty := *msg
		s.emit("message_start", messageEvent{&empty})
	}
	ctx, cancel := context.WithTimeout(run.ctx, modelTimeout)
	defer cancel()
	batch := &deltaBatch{send: func(ev assistantEvent) { s.emit("message_update", messageUpdate{ev}) }}
	err := callModel(ctx, req, msg, start, batch.add)
	batch.close()
	run.mu.Lock()
	run.retryAfter = -1
	run.mu.Unlock()
	if err != nil {
		msg.StopReason = "error"
		msg.ErrorMessage = err.Error()
		var perr *providerError
		switch {
		case run.ctx.Err() != nil:
			msg.StopReason, msg.ErrorMessage = "aborted", "Request was aborted"
		case errors.Is(err, context.DeadlineExceeded):
			msg.ErrorMessage = fmt.Sprintf("Connection error: no answer within %v", modelTimeout)
		case errors.As(err, &perr):
			run.mu.Lock()
			run.retryAfter = perr.retryAfter
			run.mu.Unlock()
		}
		computeCost(&msg.Usage, m)
	}
	if !started {
		s.emit("message_start", messageEvent{msg})
	}
	s.emit("message_end", messageEvent{msg})
	return msg
}

// modelTimeout bounds one model call, from request to the end of the stream.
const modelTimeout = 10 * time.Minute

// Deltas are coalesced: consecutive deltas of one block go out as one
// message_update once deltaBatchBytes have gathered or deltaBatchDelay
// after the first, so a fast model costs a few events, not one per token.
const (
	deltaBatchBytes = 4 << 10
	deltaBatchDelay = 30 * time.Millisecond
)

// deltaBatch coalesces the deltas of a streaming answer; every other
// event first sends what is pending, so the order is kept.
type deltaBatch struct {
	send func(assistantEvent)

	mu      sync.Mutex // guards the fields below; held while sending
	pending *assistantEvent
	text    strings.Builder
	timer   *time.Timer
	closed  bool
}

func (b *deltaBatch) add(ev assistantEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ev.Delta == nil {
		b.flushLocked()
		b.send(ev)
		return
	}
	if b.pending != nil && (b.pending.Type != ev.Type || b.pending.ContentIndex != ev.ContentIndex) {
		b.flushLocked()
	}
	if b.pending == nil {
		b.pending = &assistantEvent{Type: ev.Type, ContentIndex: ev.ContentIndex}
	}
	b.text.WriteString(*ev.Delta)
	if b.text.Len() >= deltaBatchBytes {
		b.flushLocked()
	} else if b.timer == nil {
		b.timer = time.AfterFunc(deltaBatchDelay, b.flush)
	}
}

func (b *deltaBatch) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.flushLocked()
	}
}

func (b *deltaBatch) flushLocked() {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	if b.pending == nil {
		return
	}
	delta := b.text.String()
	b.pending.Delta = &delta
	b.send(*b.pending)
	b.pending = nil
	b.text.Reset()
}

// close sends what is pending; later timer firings do nothing.
func (b *deltaBatch) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
	b.closed = true
}

// runTools runs the answer's tool calls one after another. A steering
// message queued meanwhile skips the calls not yet started.
func (s *server) runTools(run *agentRun, answer *assistantMessage) []*toolResultMessage {
	results := []*toolResultMessage{}
	skip := ""
	for _, call := range answer.Content {
		if call.Type != "toolCall" {
			continue
		}
		s.emit("tool_execution_start", toolExecStart{call.ID, call.Name, call.Arguments})
		var res toolResult
		var isError bool
		switch {
		case skip != "":
			res, isError = toolResult{Content: textBlocks(skip)}, true
		default:
			res, isError = s.runTool(run.ctx, call)
		}
		s.emit("tool_execution_end", toolExecEnd{call.ID, call.Name, res, isError})
		msg := &toolResultMessage{Role: "toolResult", ToolCallID: call.ID, ToolName: call.Name, Content: res.Content,
			Details: res.Details, IsError: isError, Timestamp: time.Now().UnixMilli()}
		s.emit("message_start", messageEvent{msg})
		s.emit("message_end", messageEvent{msg})
		s.appendMessage(msg)
		results = append(results, msg)
		if skip == "" {
			switch {
			case run.ctx.Err() != nil:
				skip = "Operation aborted"
			case s.steeringQueued():
				skip = "Skipped due to queued user message."
			}
		}
	}
	return results
}

// runTool runs one tool call, streaming its updates.
func (s *server) runTool(ctx context.Context, call contentBlock) (toolResult, bool) {
	t := s.findTool(call.Name)
	if t == nil {
		return toolResult{Content: textBlocks(fmt.Sprintf("Tool %s not found", call.Name))}, true
	}
	if slices.Contains(s.cfg.confirm, call.Name) && !s.approve(ctx, call) {
		return toolResult{Content: textBlocks("Denied by user")}, true
	}
	s.status("running " + call.Name)
	update := func(partial toolResult) {
		s.emit("tool_execution_update", toolExecUpdate{call.ID, call.Name, call.Arguments, partial})
	}
	res, err := t.run(ctx, s, call.Arguments, update)
	if err != nil {
		res.Content = textBlocks(err.Error())
		return res, true
	}
	return res, false
}

// status shows the agent's current activity in the client's status bar
// (setStatus, key "rpi").
func (s *server) status(activity string) {
	s.tell(uiRequest{Method: "setStatus", StatusKey: "rpi", StatusText: activity})
}

// ---- Queues ----

func (s *server) steeringQueued() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.steering) > 0
}

// takeQueued takes the next steering (or follow-up) messages per the
// queue's mode and reports the change.
func (s *server) takeQueued(steering bool) []*userMessage {
	s.mu.Lock()
	queue, mode := &s.followUp, s.followUpMode
	if steering {
		queue, mode = &s.steering, s.steeringMode
	}
	n := len(*queue)
	if n == 0 {
		s.mu.Unlock()
		return nil
	}
	if mode == "one-at-a-time" {
		n = 1
	}
	taken := append([]*userMessage{}, (*queue)[:n]...)
	*queue = (*queue)[n:]
	s.mu.Unlock()
	s.emitQueue()
	return taken
}

// enqueue adds a user message to a queue and reports the change.
func (s *server) enqueue(steering bool, m *userMessage) {
	s.mu.Lock()
	if steering {
		s.steering = append(s.steering, m)
	} else {
		s.followUp = append(s.followUp, m)
	}
	s.mu.Unlock()
	s.emitQueue()
}

func (s *server) queueTexts() queueUpdate {
	s.mu.Lock()
	defer s.mu.Unlock()
	texts := func(q []*userMessage) []string {
		out := []string{}
		for _, m := range q {
			out = append(out, m.Content[0].Text)
		}
		return out
	}
	return queueUpdate{texts(s.steering), texts(s.followUp)}
}

func (s *server) emitQueue() { s.emit("queue_update", s.queueTexts()) }

// ---- Prompting commands ----

// userInput reads a command's message and images into a user message.
func (s *server) userInput(r *request) (*userMessage, error) {
	text, err := r.str("message")
	if err != nil {
		return nil, err
	}
	text = s.expandSlash(text)
	var images []contentBlock
	if r.has("images") {
		if err := r.decodeField("images", "an array of images", &images); err != nil {
			return nil, err
		}
	}
	if strings.TrimSpace(text) == "" && len(images) == 0 {
		return nil, invalid("message", "a non-empty string")
	}
	content := textBlocks(text)
	for _, img := range images {
		if img.Type != "image" || img.Data == "" || !strings.HasPrefix(img.MimeType, "image/") {
			return nil, invalid("images", `an array of {"type":"image","data":"<base64>","mimeType":"image/…"}`)
		}
		content = append(content, contentBlock{Type: "image", Data: img.Data, MimeType: img.MimeType})
	}
	return &userMessage{Role: "user", Content: content, Timestamp: time.Now().UnixMilli()}, nil
}

// prompt starts a run with a user message, or queues it while one runs.
// Fields: message; [images] ([{type:"image",data,mimeType}]);
// [streamingBehavior] ("steer"|"followUp", needed while a run streams).
// Answer: null once accepted (before agent_start). Events: agent_start,
// turn_start, message_start/end, message_update, tool_execution_*,
// turn_end, agent_end, agent_settled; queue_update when queued.
func (s *server) prompt(r *request) (any, error) {
	msg, err := s.userInput(r)
	if err != nil {
		return nil, err
	}
	behavior := ""
	if r.has("streamingBehavior") {
		if behavior, err = r.enum("streamingBehavior", []string{"steer", "followUp"}); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	if s.run != nil {
		s.mu.Unlock()
		if behavior == "" {
			return nil, errors.New("Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message.")
		}
		s.enqueue(behavior == "steer", msg)
		return nil, nil
	}
	if s.model == nil || !s.model.usable() {
		s.mu.Unlock()
		return nil, errors.New(noModelMessage)
	}
	s.flushDeferred()
	run := s.startRun()
	s.mu.Unlock()
	s.reply(r, nil, nil)
	s.background.Add(1)
	pending := append([]*userMessage{msg}, s.takeQueued(true)...)
	go s.runAgent(run, pending)
	return noReply{}, nil
}

// steer queues a message for the running agent: it is delivered after the
// current tool call, and the calls of that answer not yet started are
// skipped. While idle it waits for the next run.
// Fields: message, [images]. Answer: null. Events: queue_update.
func (s *server) steer(r *request) (any, error) {
	msg, err := s.userInput(r)
	if err != nil {
		return nil, err
	}
	s.enqueue(true, msg)
	return nil, nil
}

// followUpCommand queues a message delivered when the agent would otherwise stop.
// Fields: message, [images]. Answer: null. Events: queue_update.
func (s *server) followUpCommand(r *request) (any, error) {
	msg, err := s.userInput(r)
	if err != nil {
		return nil, err
	}
	s.enqueue(false, msg)
	return nil, nil
}

// abort stops the running agent: its model stream, running tool and any
// retry wait. The queues are kept. It answers after the run's agent_end and
// agent_settled; while idle, at once.
// Fields: none. Answer: null.
func (s *server) abort(r *request) (any, error) {
	s.mu.Lock()
	run := s.run
	s.mu.Unlock()
	if run == nil {
		return nil, nil
	}
	run.cancel()
	s.answerLater(r, func() (any, error) {
		<-run.settled
		return nil, nil
	})
	return noReply{}, nil
}

// abortRetry cancels a pending auto-retry wait; the run then ends with
// auto_retry_end {success:false, finalError:"Retry cancelled"} and
// agent_settled, and abortRetry answers after them. With no retry waiting
// it answers at once and changes nothing.
// Fields: none. Answer: null.
func (s *server) abortRetry(r *request) (any, error) {
	s.mu.Lock()
	run := s.run
	s.mu.Unlock()
	if run == nil {
		return nil, nil
	}
	run.mu.Lock()
	cancel := run.cancelRetry
	run.mu.Unlock()
	if cancel == nil {
		return nil, nil
	}
	cancel()
	s.answerLater(r, func() (any, error) {
		<-run.settled
		return nil, nil
	})
	return noReply{}, nil
}

// clearQueue empties both queues.
// Fields: none. Answer: {steering:[…], followUp:[…]}, the texts removed.
// Events: queue_update.
func (s *server) clearQueue(r *request) (any, error) {
	removed := s.queueTexts()
	s.mu.Lock()
	s.steering, s.followUp = nil, nil
	s.mu.Unlock()
	s.emitQueue()
	return removed, nil
}

// ---- Model commands ----

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
	for _, m := range s.models {
		if m.usable() {
			out = append(out, m)
		}
	}
	return out
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
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.usableModels() {
		if m.Provider == provider && m.ID == id {
			s.model = m
			s.record("model_change", "provider", m.Provider, "modelId", m.ID)
			return m, nil
		}
	}
	return nil, fmt.Errorf("Model not found: %s/%s", provider, id)
}

// cycleModel moves to the next usable model.
// Fields: none. Answer: {model, thinkingLevel, isScoped:false}, or null
// when fewer than two models are usable.
func (s *server) cycleModel(r *request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	models := s.usableModels()
	if len(models) < 2 {
		return nil, nil
	}
	next := models[0]
	for i, m := range models {
		if m == s.model {
			next = models[(i+1)%len(models)]
		}
	}
	s.model = next
	s.record("model_change", "provider", next.Provider, "modelId", next.ID)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	models := s.usableModels()
	if models == nil {
		models = []*model{}
	}
	return struct {
		Models []*model `json:"models"`
	}{models}, nil
}

// ---- Stats and todos ----

type tokenStats struct {
	Input      int `json:"input"`
	Output     int `json:"output"`
	CacheRead  int `json:"cacheRead"`
	CacheWrite int `json:"cacheWrite"`
	Total      int `json:"total"`
}

type sessionStats struct {
	SessionFile       any        `json:"sessionFile"`
	SessionID         string     `json:"sessionId"`
	UserMessages      int        `json:"userMessages"`
	AssistantMessages int        `json:"assistantMessages"`
	ToolCalls         int        `json:"toolCalls"`
	ToolResults       int        `json:"toolResults"`
	TotalMessages     int        `json:"totalMessages"`
	Tokens            tokenStats `json:"tokens"`
	Cost              float64    `json:"cost"`
}

// getSessionStats counts the conversation's messages, tokens and cost.
// Fields: none. Answer: pi's SessionStats.
func (s *server) getSessionStats(r *request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := sessionStats{SessionID: s.header.ID, TotalMessages: len(s.messages)}
	if s.session.path != "" {
		st.SessionFile = s.session.path
	}
	for _, m := range s.messages {
		switch m := m.(type) {
		case *userMessage:
			st.UserMessages++
		case *assistantMessage:
			st.AssistantMessages++
			for _, b := range m.Content {
				if b.Type == "toolCall" {
					st.ToolCalls++
				}
			}
			st.Tokens.Input += m.Usage.Input
			st.Tokens.Output += m.Usage.Output
			st.Tokens.CacheRead += m.Usage.CacheRead
			st.Tokens.CacheWrite += m.Usage.CacheWrite
			st.Cost += m.Usage.Cost.Total
		case *toolResultMessage:
			st.ToolResults++
		}
	}
	st.Tokens.Total = st.Tokens.Input + st.Tokens.Output + st.Tokens.CacheRead + st.Tokens.CacheWrite
	return st, nil
}

// getTodos answers the agent's todo list.
// Fields: none. Answer: {"todos":[{id, content, status}]}.
func (s *server) getTodos(r *request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return struct {
		Todos []todo `json:"todos"`
	}{append([]todo{}, s.todos...)}, nil
}

// lastAssistantText is the text of the last assistant answer that has any.
func (s *server) lastAssistantText() *string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.messages) - 1; i >= 0; i-- {
		if m, ok := s.messages[i].(*assistantMessage); ok {
			if text := strings.TrimSpace(m.text()); text != "" {
				return &text
			}
			if m.StopReason != "aborted" {
				return nil
			}
		}
	}
	return nil
}

// ---- System prompt ----

// systemPrompt is the instructions the model gets: the base text (or
// --system-prompt), the tools, --append-system-prompt, the AGENTS.md /
// CLAUDE.md context files, the date and the cwd. s.mu must be held.
func (s *server) systemPrompt() string {
	var b strings.Builder
	if s.cfg.systemPrompt != "" {
		b.WriteString(s.cfg.systemPrompt)
	} else {
		b.WriteString("You are an expert coding assistant. You help the user with their code by reading files, " +
			"running commands, editing code and writing new files.\n\nAvailable tools:\n")
		for _, t := range s.activeTools() {
			fmt.Fprintf(&b, "- %s: %s\n", t.name, t.summary)
		}
		b.WriteString("\nGuidelines:\n- Read files before editing them.\n- Use edit for precise changes and write for new files or complete rewrites.\n" +
			"- Keep answers short and concrete; show file paths clearly.")
	}
	if s.cfg.appendSystemPrompt != "" {
		b.WriteString("\n\n" + s.cfg.appendSystemPrompt)
	}
	if files := s.contextFiles; len(files) > 0 {
		b.WriteString("\n\n# Project Context\n\nProject-specific instructions and guidelines:\n\n")
		for _, f := range files {
			fmt.Fprintf(&b, "## %s\n\n%s\n\n", f.path, f.content)
		}
	}
	fmt.Fprintf(&b, "\nCurrent date: %s\nCurrent working directory: %s", time.Now().Format("2006-01-02"), s.cfg.cwd)
	return b.String()
}

type contextFile struct{ path, content string }

// loadContextFiles reads AGENTS.md (or else CLAUDE.md) from the agent dir,
// then from every directory from the root down to the cwd.
func loadContextFiles(agentDir, cwd string) []contextFile {
	dirs := []string{agentDir}
	var chain []string
	for dir := cwd; ; dir = filepath.Dir(dir) {
		chain = append([]string{dir}, chain...)
		if filepath.Dir(dir) == dir {
			break
		}
	}
	dirs = append(dirs, chain...)
	var files []contextFile
	seen := map[string]bool{}
	for _, dir := range dirs {
		for _, name := range []string{"AGENTS.md", "CLAUDE.md"} {
			path := filepath.Join(dir, name)
			if seen[path] {
				break
			}
			if data, err := os.ReadFile(path); err == nil {
				seen[path] = true
				files = append(files, contextFile{path, string(data)})
				break
			}
		}
	}
	return files
}
