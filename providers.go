package main

// Calling a model over net/http with server-sent events: the request,
// its limits and errors, the event reader, and the streamer through which
// every API's reader builds the answer, so that all of them produce the
// same message_update events, usage and stop reasons. Each API's wire
// format (its request body and stream reader) has a file of its own:
// provider_openai.go (OpenAI Chat Completions), provider_responses.go
// (OpenAI Responses), provider_anthropic.go (Anthropic Messages) and
// provider_google.go (Google Gemini); wireAPIs lists them.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
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
	// budgets are the user's thinking budgets (settings.json's).
	budgets thinkingBudgets
	// idle is how long the server may send nothing (no headers, then no
	// byte of the stream) before the call fails; 0: no limit.
	idle time.Duration
	// clock times idle and timeout (the session's: a fixture's may be fake).
	clock clock
	// timeout is how long the server may take to send the answer's
	// headers (settings.json retry.provider.timeoutMs), for the APIs pi
	// applies it to; 0: no limit but idle.
	timeout time.Duration
	// blockImages: the model gets a note in the place of every image
	// (settings.json images.blockImages; withoutImages).
	blockImages bool
	// maxTokens caps the answer below what answerTokens allows; 0: no
	// cap (a cache refresh asks for 1: cachewarm.go).
	maxTokens int
	// sessionID is the session's id, which OpenAI's APIs are sent as
	// prompt_cache_key and in headers (and OpenRouter as x-session-id),
	// as pi sends it; none: not sent.
	sessionID string
	// longCache: PI_CACHE_RETENTION=long, the prompt cache asked to last
	// longer (Anthropic's 1h breakpoints, OpenAI's 24h retention).
	longCache bool
}

// longCacheOf: the request asks for the long cache retention, which the
// model's host takes (compat.SupportsLongCacheRetention).
func (req streamRequest) longCacheOf() bool {
	return req.longCache && setting(req.model.compat.SupportsLongCacheRetention, true)
}

// headerSessionID is the session's id for a request header, none when
// it is not one --session-id takes (validSessionID): an id from a session
// file's header, which nothing checks, may hold a line break, which no
// header carries (the HTTP client refuses the request), or be of any
// length.
func (req streamRequest) headerSessionID() string {
	if !validSessionID(req.sessionID) {
		return ""
	}
	return req.sessionID
}

// promptCacheKey is the session's id as OpenAI's prompt_cache_key takes
// it, at most 64 characters, as pi clamps it.
func (req streamRequest) promptCacheKey() string {
	if utf8.RuneCountInString(req.sessionID) <= 64 {
		return req.sessionID
	}
	return string([]rune(req.sessionID)[:64])
}

// context is what the model is sent of the request's conversation
// (contextMessages), without its images when blockImages says so.
func (req streamRequest) context() []any {
	messages := contextMessages(req.messages)
	if req.blockImages {
		messages = withoutImages(messages)
	}
	return messages
}

// providerError is a failed model call; status is the HTTP status (0 for
// a network failure). retryAfter is the wait the server's Retry-After
// asked for, when hasRetryAfter (retryAfterMs, the same in milliseconds
// as pi counts them, past what a Duration holds): every other failure (a
// refused connection, a dropped stream, an HTTP error without the
// header) is retried after the base delay, doubled each time.
type providerError struct {
	status        int
	retryAfter    time.Duration
	retryAfterMs  float64
	hasRetryAfter bool
	message       string
	final         bool // asking again cannot help (an answer cut at its limit): no auto-retry
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

	tokens int    // the most tokens the request asked for (at least shortAnswerTokens of the model's)
	limit  int    // the bytes the answer may hold (answerLimit of tokens)
	size   int    // the bytes it holds so far
	cut    error  // set once a piece passed limit; nothing is added after it
	stop   func() // ends the request once the answer is cut
	// finished is set by a reader once the answer's last piece came (a
	// Chat Completions finish_reason): the stream may end without the
	// event that closes it.
	finished bool
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
	shortAnswerTokens   = 2048 // the least an answer is counted for, within the model's maxTokens
)

// answerLimit is what an answer to a request for tokens may hold. The
// tokens are bounded before they are multiplied: a models.json maxTokens
// of 2^26 would pass a 32-bit int, and a huge one a 64-bit int.
func answerLimit(tokens int) int {
	return min(max(tokens, 1), maxAnswerBytes/answerBytesPerToken) * answerBytesPerToken
}

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
	if i < 0 || !st.take(len(piece)) {
		return
	}
	if st.sigs[i] == nil {
		st.sigs[i] = &strings.Builder{}
	}
	st.sigs[i].WriteString(piece)
}

// startBlock opens a block for key (a thinking block with its thinking
// so far) and returns its index in msg.Content:
// -1 once the answer is cut (by this block or before), when nothing is
// added (delta, endBlock and the rest take -1 as nothing). A block still
// open under the same key ends first, with its event.
func (st *streamer) startBlock(key int, b contentBlock) int {
	if open, ok := st.blocks[key]; ok {
		st.endBlock(open)
		delete(st.blocks, key)
	}
	if !st.take(blockBytes + len(b.ID) + len(b.Name) + len(b.Signature) + len(b.Thinking)) {
		return -1
	}
	st.msg.Content = append(st.msg.Content, b)
	i := len(st.msg.Content) - 1
	st.blocks[key] = i
	st.bufs[i] = &strings.Builder{}
	st.bufs[i].WriteString(b.Thinking) // a redacted block's, which has no deltas
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
	if i < 0 || !st.take(len(text)) {
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

// fillBlock writes block i's text or thinking so far into msg.
func (st *streamer) fillBlock(i int) {
	b := &st.msg.Content[i]
	switch b.Type {
	case "text":
		b.Text = st.bufs[i].String()
	case "thinking":
		b.Thinking = st.bufs[i].String()
		if sig := st.sigs[i]; sig != nil {
			b.Signature = sig.String()
		}
	}
}

// endBlock ends block i: its text, thinking or arguments go into msg,
// and an event says so (none once the answer is cut).
func (st *streamer) endBlock(i int) {
	if i < 0 {
		return
	}
	st.fillBlock(i)
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
		// Arguments are an object: what is not JSON, or JSON of another
		// kind (an array, a number, null), is kept as text in one, so that
		// the call goes back in later requests as the APIs take it
		// (Anthropic's input and Gemini's args must be objects).
		if args[0] != '{' || !json.Valid([]byte(args)) {
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
// raw one ("stop" becomes "toolUse" when the answer calls a tool; raw is
// kept as rawStopReason), and prices its usage; an empty stop is a
// reason rpi does not know, an error that says failure (pi 1.6's words
// for it, each API's own).
func (st *streamer) stopAs(stop, raw, failure string, m *model) error {
	if raw != "" {
		st.msg.meta().RawStopReason = raw
	}
	if stop == "" {
		return &providerError{message: failure}
	}
	if stop == "stop" && st.hasToolCalls() {
		stop = "toolUse"
	}
	st.msg.StopReason = stop
	computeCost(&st.msg.Usage, m)
	return nil
}

// responded records the server's id for the response (the first one it
// gives) and the model that answered, when the server names another than
// the one asked for (asked), as pi 1.6 keeps them.
func (st *streamer) responded(id, model, asked string) {
	meta := st.msg.meta()
	if meta.ResponseID == "" {
		meta.ResponseID = id
	}
	if meta.ResponseModel == "" && model != "" && model != asked {
		meta.ResponseModel = model
	}
}

// finish writes the text of every block into msg, ended or not (a stream
// that failed midway keeps what it had said).
func (st *streamer) finish() {
	for i := range st.msg.Content {
		if st.bufs[i] != nil {
			st.fillBlock(i)
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
	if meta := msg.answerMeta; meta != nil {
		meta.ResponseID = serverLabel(req.secrets, meta.ResponseID)
		meta.ResponseModel = serverLabel(req.secrets, meta.ResponseModel)
		meta.RawStopReason = serverLabel(req.secrets, meta.RawStopReason)
	}
	return err
}

// maxLabelBytes bounds what rpi keeps of a server's name for a response,
// a model or a stop reason.
const maxLabelBytes = 256

// serverLabel is label, a name a model server gave (its id for the
// response, the model, its stop reason), or "" when it is no such name:
// longer than maxLabelBytes, with a control character, or holding a key
// rpi holds (a server may echo one).
func serverLabel(secrets *redactor, label string) string {
	if len(label) > maxLabelBytes || strings.ContainsFunc(label, unicode.IsControl) || secrets.redact(label) != label {
		return ""
	}
	return label
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

// wireAPI is one model API: its name (a model's "api"), where a request
// goes, how the key travels, the request body, the most tokens it asks
// for, and the reader of the streamed answer. Each has a file of its own
// (provider_*.go).
type wireAPI struct {
	name string
	url  func(m *model) string
	auth func(h http.Header, key string)
	body func(req streamRequest) any
	// headers, when set, adds the API's headers of req (before the
	// model's own, which win).
	headers   func(h http.Header, req streamRequest)
	maxTokens func(req streamRequest) int
	read      func(body io.Reader, st *streamer, m *model) error
}

// bearer sends the key as "Authorization: Bearer …".
func bearer(h http.Header, key string) {
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
}

// retryAfterOf is the wait a failed answer's headers ask for, as pi
// reads them: retry-after-ms (milliseconds, OpenAI's) when it holds a
// number, else Retry-After (parseRetryAfter); ms is the wait as pi
// counts it, in milliseconds, however long.
func retryAfterOf(h http.Header) (wait time.Duration, ms float64, ok bool) {
	if wait, ms, ok := waitOf(h.Get("Retry-After-Ms"), time.Millisecond); ok {
		return wait, ms, true
	}
	return parseRetryAfter(h.Get("Retry-After"))
}

// waitOf reads v as a number of units the way pi does (JavaScript's
// parseFloat: the longest number that starts it, so "5abc" is 5), and
// that number in milliseconds (ms); ok is false when none starts it, or
// it is infinite in milliseconds, which pi counts in (seconds past
// 1.79e305 are). A negative number is no wait; past what a Duration
// holds it is maxDuration: converted, it would overflow to a short or
// negative wait.
func waitOf(v string, unit time.Duration) (wait time.Duration, ms float64, ok bool) {
	ms = leadingNumber(v) * float64(unit/time.Millisecond)
	if math.IsNaN(ms) || math.IsInf(ms, 0) {
		return 0, 0, false
	}
	if ns := ms * float64(time.Millisecond); ns < float64(maxDuration) {
		return time.Duration(max(ns, 0)), ms, true
	}
	return maxDuration, ms, true
}

// leadingNumber is JavaScript's parseFloat: after leading white space,
// the longest decimal number (sign, digits, a fraction, an exponent) or
// "Infinity" that starts s; NaN when none does.
func leadingNumber(s string) float64 {
	s = strings.TrimLeftFunc(s, jsSpace)
	end := 0
	if end < len(s) && (s[end] == '+' || s[end] == '-') {
		end++
	}
	if strings.HasPrefix(s[end:], "Infinity") {
		if s[0] == '-' {
			return math.Inf(-1)
		}
		return math.Inf(1)
	}
	digits := func(i int) int {
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		return i
	}
	mantissa := digits(end)
	whole := mantissa > end
	if mantissa < len(s) && s[mantissa] == '.' {
		if fraction := digits(mantissa + 1); whole || fraction > mantissa+1 {
			mantissa = fraction
		}
	}
	if mantissa == end {
		return math.NaN()
	}
	end = mantissa
	if end < len(s) && (s[end] == 'e' || s[end] == 'E') {
		i := end + 1
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if exponent := digits(i); exponent > i {
			end = exponent
		}
	}
	n, err := strconv.ParseFloat(s[:end], 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return math.NaN()
	}
	return n // past a float64, ±Inf as in JavaScript
}

// parseRetryAfter reads a Retry-After header as pi does: a number of
// seconds (waitOf), else an HTTP date; ok is false when there is none,
// or none rpi can read (as pi, Inf).
func parseRetryAfter(v string) (wait time.Duration, ms float64, ok bool) {
	if v == "" {
		return 0, 0, false
	}
	if n := leadingNumber(v); !math.IsNaN(n) {
		return waitOf(v, time.Second)
	}
	if t, err := http.ParseTime(v); err == nil {
		now := time.Now()
		return max(t.Sub(now), 0), float64(t.UnixMilli() - now.UnixMilli()), true
	}
	return 0, 0, false
}

// events reads server-sent events, calling fn with each event's name
// and data (data lines joined by "\n"; data is fn's only while it runs);
// a byte order mark that starts the stream is skipped, and a line may end
// in "\r\n", "\n" or "\r" alone, as the format says. An event may be at
// most eventLimit bytes. Reading stops at the first event after which the
// answer is cut.
func (st *streamer) events(r io.Reader, fn func(name string, data []byte) (stop bool, err error)) error {
	limit := st.eventLimit()
	lines := eventLines{r: bufio.NewReaderSize(r, 64<<10)}
	if bom, _ := lines.r.Peek(3); string(bom) == "\uFEFF" {
		lines.r.Discard(3) // a byte order mark may start the stream
	}
	var name string
	var data []byte
	dataLines := 0
	for {
		line, tooLong, err := lines.next(limit)
		if tooLong {
			return &providerError{message: fmt.Sprintf("Invalid response from the model server: a line longer than %d bytes", limit)}
		}
		if err != nil && (err != io.EOF || len(line) == 0) {
			if err == io.EOF && st.finished {
				return nil
			}
			if err == io.EOF {
				return &providerError{message: "Connection error: the stream ended before the answer was complete"}
			}
			return &providerError{message: fmt.Sprintf("Connection error: %v", err)}
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch {
		case len(line) == 0:
			if dataLines > 0 {
				stop, err := fn(name, data)
				if st.cut != nil {
					return st.cut
				}
				if stop || err != nil {
					return err
				}
			}
			name, data, dataLines = "", nil, 0
		case string(field) == "event":
			name = string(bytes.TrimSpace(value))
		case string(field) == "data": // "data" alone is an empty data line
			if dataLines++; dataLines == 1 {
				data = value // the line is this loop's own: no copy
			} else {
				data = append(append(data, '\n'), value...)
			}
			if len(data) > limit {
				return &providerError{message: fmt.Sprintf("Invalid response from the model server: an event longer than %d bytes", limit)}
			}
		}
		// Anything else is a comment (":…"), an id or retry line, or a
		// field the format does not know: all ignored.
	}
}

// eventLines splits a server-sent event stream into lines. A line ends in
// "\r\n", "\n", or a "\r" that no "\n" follows; the "\n" of a "\r\n" may
// come in a later read than its "\r".
type eventLines struct {
	r       *bufio.Reader
	afterCR bool // the last line ended in "\r": a "\n" next ends no line
	// noLF: the first noLF bytes buffered hold no "\n". Lines that end in
	// "\r" alone are not each searched past their end for one again: that
	// went through all that was buffered (up to 64 KiB) at every line.
	noLF int
}

// next returns the next line without its ending (a copy the caller owns),
// or tooLong as soon as more than max bytes of it have come: the rest is
// not read, since the stream is given up (a server that never ends the
// line, or the stream, cannot hold rpi). A client's lines are read by
// appendInputLine instead, which reads past a refused line to serve the
// next. err is non-nil only at the end of input, possibly with a final
// partial line.
func (l *eventLines) next(max int) (line []byte, tooLong bool, err error) {
	for {
		if _, err := l.r.Peek(1); err != nil {
			return line, false, err
		}
		buf, _ := l.r.Peek(l.r.Buffered())
		if l.afterCR {
			l.afterCR = false
			if buf[0] == '\n' {
				l.discard(1)
				continue
			}
		}
		end := len(buf)
		if i := bytes.IndexByte(buf[l.noLF:], '\n'); i >= 0 {
			end = l.noLF + i
		}
		l.noLF = end
		if cr := bytes.IndexByte(buf[:end], '\r'); cr >= 0 {
			end = cr
		}
		if len(line)+end > max {
			return nil, true, nil
		}
		line = append(line, buf[:end]...)
		if end == len(buf) { // no ending yet: read on
			l.discard(end)
			continue
		}
		l.afterCR = buf[end] == '\r'
		l.discard(end + 1)
		return line, false, nil
	}
}

// discard drops the next n bytes buffered.
func (l *eventLines) discard(n int) {
	l.r.Discard(n)
	l.noLF = max(l.noLF-n, 0)
}

// eventLimit bounds one server-sent event: twice what the answer may hold
// (an event that closes the answer may repeat it whole, escaped), and a
// little room for the event around it. A server that never ends a line
// cannot make rpi hold more.
func (st *streamer) eventLimit() int { return 2*st.limit + 64<<10 }

// computeCost fills usage.Cost from the model's per-million prices. A
// count below zero (cached tokens a server reports above its prompt's, or
// a count it got wrong) is none: an answer's cost is never negative, and
// cannot take from what the session's other answers cost.
func computeCost(u *usage, m *model) {
	for _, n := range []*int{&u.Input, &u.Output, &u.CacheRead, &u.CacheWrite} {
		*n = max(*n, 0)
	}
	u.Cost = costBreakdown{
		Input:      float64(u.Input) * m.Cost.Input / 1e6,
		Output:     float64(u.Output) * m.Cost.Output / 1e6,
		CacheRead:  float64(u.CacheRead) * m.Cost.CacheRead / 1e6,
		CacheWrite: float64(u.CacheWrite) * m.Cost.CacheWrite / 1e6,
	}
	// An absurd price in models.json must not make a cost no JSON can
	// carry (a record with +Inf could not be written at all).
	for _, c := range []*float64{&u.Cost.Input, &u.Cost.Output, &u.Cost.CacheRead, &u.Cost.CacheWrite} {
		*c = addCost(*c, 0)
	}
	u.Cost.Total = addCost(addCost(u.Cost.Input, u.Cost.Output), addCost(u.Cost.CacheRead, u.Cost.CacheWrite))
	u.TotalTokens = addTokens(addTokens(u.Input, u.Output), addTokens(u.CacheRead, u.CacheWrite))
}

// ---- Shared by the body builders ----

// sameModel reports whether an earlier answer came from the model now
// called: only then are its signatures, reasoning items and item ids
// sent back (another model, or another API, would reject them).
func sameModel(m *assistantMessage, to *model) bool {
	return m.API == to.API && m.Provider == to.Provider && m.Model == to.ID
}

// splitCallID splits a tool call id as the Responses API makes it,
// "<call_id>|<item id>"; other ids have no item id. The Responses API
// gets the call id alone; the other APIs get joinedCallID.
func splitCallID(id string) (callID, itemID string) {
	callID, itemID, _ = strings.Cut(id, "|")
	return callID, itemID
}

// joinedCallID is a tool call id with a Responses item id joined to its
// call id by "_", as pi sends such an id to the other APIs: two calls may
// share a call id and differ in their item ids.
func joinedCallID(id string) string {
	if callID, itemID := splitCallID(id); itemID != "" {
		return callID + "_" + itemID
	}
	return id
}

// callIDs gives the tool call ids of one request: each call's id in the
// form its API takes (form(id, 0)), and, when another call of the request
// has that one already — two calls sharing a Responses call id, a server
// that gives every turn's call the same id or several calls no id —
// form(id, n) for the least n > 0 that no call has, which is made from a
// hash. A result goes with the id of the oldest call of its id not yet
// answered, as contextMessages pairs them.
type callIDs struct {
	form    func(id string, n int) string
	used    map[string]bool
	pending map[string][]string // a call's id → the ids its unanswered calls went with, oldest first
	// next is, for an id given before, the first n whose form of it may
	// be free: every form before it is used. A model that gives every
	// call the same id costs one form a call, not as many as came before.
	next map[string]int
}

func newCallIDs(form func(id string, n int) string) *callIDs {
	return &callIDs{form: form, used: map[string]bool{}, pending: map[string][]string{}, next: map[string]int{}}
}

// call is the id a call of id goes with.
func (c *callIDs) call(id string) string {
	n := c.next[id]
	sent := c.form(id, n)
	for c.used[sent] {
		n++
		sent = c.form(id, n)
	}
	c.next[id] = n + 1
	c.used[sent] = true
	c.pending[id] = append(c.pending[id], sent)
	return sent
}

// result is the id a result of the call id goes with.
func (c *callIDs) result(id string) string {
	q := c.pending[id]
	if len(q) == 0 {
		return c.form(id, 0)
	}
	c.pending[id] = q[1:]
	return q[0]
}

// nthCallID is id made unique as the nth (n > 0) of the ids a request
// holds in the form made at most max bytes by hashedCallID.
func nthCallID(id string, n, max int) string {
	return hashedCallID(id+"#"+strconv.Itoa(n), max)
}

// wireCallIDs are the tool call ids of a request to Anthropic or Gemini
// (wireCallID of joinedCallID).
func wireCallIDs() *callIDs {
	return newCallIDs(func(id string, n int) string {
		if n > 0 {
			return nthCallID(id, n, 64)
		}
		return wireCallID(joinedCallID(id))
	})
}

// wireCallID is a tool call id as Anthropic's tool_use ids and the
// Responses call_id take one: ^[a-zA-Z0-9_-]{1,64}$. An id of that form
// goes as it is; another — one a server made with other characters (Kimi's
// "functions.read:0"), an empty one, one longer than 64 bytes, all kept as
// they came when the conversation moves from the API that made them —
// has every other byte made "_" and ends in a hash of the whole id, so
// that two ids that differ only there stay apart. A call and its result
// go through it alike, so they still match.
func wireCallID(id string) string {
	if len(id) > 0 && len(id) <= 64 && strings.IndexFunc(id, func(r rune) bool { return !idChar(r) }) < 0 {
		return id
	}
	return hashedCallID(id, 64)
}

// maxOpenAICallID is the longest tool call id OpenAI's Chat Completions
// takes ("string too long. Expected a string with maximum length 40").
const maxOpenAICallID = 40

// openAICallID is a tool call id as Chat Completions takes one: an id of
// at most 40 bytes goes as it is (Kimi's "functions.read:0" among them,
// which its model reads), a longer one — Responses' item ids, another
// server's long ids — is made at most 40 bytes the way wireCallID makes
// an id 64, the same for a call and its result.
func openAICallID(id string) string {
	if len(id) <= maxOpenAICallID {
		return id
	}
	return hashedCallID(id, maxOpenAICallID)
}

// hashedCallID is id made at most n bytes of [a-zA-Z0-9_-]: its first
// n-9 bytes, every other byte made "_", then "_" and a hash of the whole
// id, so that two ids that differ only in what is cut or replaced stay
// apart.
func hashedCallID(id string, n int) string {
	safe := []byte(id[:min(len(id), n-9)])
	for i, c := range safe {
		if !idChar(rune(c)) {
			safe[i] = '_'
		}
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return fmt.Sprintf("%s_%08x", safe, h.Sum32())
}

// idChar reports whether c may be in a tool call id everywhere.
func idChar(c rune) bool {
	return c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// mistralCallID is a tool call id as Mistral takes one: nine letters and
// digits. An id of another form (every other API's) is nine characters of
// a hash of it, the same for a call and its result.
func mistralCallID(id string) string {
	if len(id) == 9 && strings.IndexFunc(id, func(r rune) bool { return r == '_' || r == '-' || !idChar(r) }) < 0 {
		return id
	}
	const digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	h := fnv.New64a()
	h.Write([]byte(id))
	n := h.Sum64()
	out := make([]byte, 9)
	for i := range out {
		out[i] = digits[n%62]
		n /= 62
	}
	return string(out)
}

// maxAnthropicImage is the most base64 an image may have for Anthropic,
// which refuses a larger one: since the image stays in the conversation,
// that request and every later one of the session.
const maxAnthropicImage = 5 << 20

// imageNote is "" when image b goes to m, else the note a request carries
// in its place: m does not take images, or its API not one that large.
func imageNote(m *model, b contentBlock) string {
	switch {
	case !m.imageable:
		return fmt.Sprintf("[%s image omitted: model %s/%s does not take images]", b.MimeType, m.Provider, m.ID)
	case m.API == apiAnthropic && len(b.Data) > maxAnthropicImage:
		return fmt.Sprintf("[%s image omitted: its %s of base64 is more than the %s Anthropic takes]",
			b.MimeType, byteSize(len(b.Data)), byteSize(maxAnthropicImage))
	}
	return ""
}

// toolResultText is a tool result as text: its text blocks and a note for
// each image that does not go to m (imageNote), one a line; when that is
// nothing, "(see attached image)" for a result with images that go, else
// "(no tool output)".
func toolResultText(m *model, content []contentBlock) string {
	var parts []string
	for _, b := range content {
		switch {
		case b.Type == "text":
			parts = append(parts, b.Text)
		case b.Type == "image" && imageNote(m, b) != "":
			parts = append(parts, imageNote(m, b))
		}
	}
	switch {
	case len(parts) > 0:
		return strings.Join(parts, "\n")
	case len(toolResultImages(m, content)) > 0:
		return "(see attached image)"
	}
	return "(no tool output)"
}

// toolResultImages are the images of a tool result that go to m. Only
// Anthropic's tool results hold images: the other APIs get them in a user
// message after the results (toolImagesText says what it is), as pi
// sends them.
func toolResultImages(m *model, content []contentBlock) []contentBlock {
	var images []contentBlock
	for _, b := range content {
		if b.Type == "image" && imageNote(m, b) == "" {
			images = append(images, b)
		}
	}
	return images
}

// toolImagesText starts the user message that carries the images of tool
// results.
const toolImagesText = "Attached image(s) from tool result:"

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

// thinkingBudget is the thinking token budget of a level, pi 1.6's
// (xhigh and max get high's); false for a level without one (off).
func thinkingBudget(level string) (int, bool) {
	switch level {
	case "minimal":
		return 1024, true
	case "low":
		return 2048, true
	case "medium":
		return 8192, true
	case "high", "xhigh", "max":
		return 16384, true
	}
	return 0, false
}

// thinkingBudgets are settings.json's thinkingBudgets (pi's): the user's
// token budgets of the levels minimal to high, each nil where it is not
// set. As in pi, xhigh and max take high's, and a value goes as it is,
// zero or negative too, into each API's arithmetic.
type thinkingBudgets struct {
	Minimal *int `json:"minimal"`
	Low     *int `json:"low"`
	Medium  *int `json:"medium"`
	High    *int `json:"high"`
}

// custom is the user's budget of a level; false where none is set.
func (b thinkingBudgets) custom(level string) (int, bool) {
	var n *int
	switch level {
	case "minimal":
		n = b.Minimal
	case "low":
		n = b.Low
	case "medium":
		n = b.Medium
	case "high", "xhigh", "max":
		n = b.High
	}
	if n == nil {
		return 0, false
	}
	return *n, true
}

// of is the budget of a level: the user's, else pi's (thinkingBudget);
// false for off.
func (b thinkingBudgets) of(level string) (int, bool) {
	if n, ok := b.custom(level); ok {
		return n, true
	}
	return thinkingBudget(level)
}

// over is b with the levels o sets, as pi merges a project's
// thinkingBudgets over the user's: level by level.
func (b thinkingBudgets) over(o thinkingBudgets) thinkingBudgets {
	for _, f := range []struct{ to, from **int }{{&b.Minimal, &o.Minimal}, {&b.Low, &o.Low}, {&b.Medium, &o.Medium}, {&b.High, &o.High}} {
		if *f.from != nil {
			*f.to = *f.from
		}
	}
	return b
}

// openAIMaxTokens is what OpenAI's APIs are asked for, as pi asks: the
// model's maxTokens within the context window (answerTokens).
func openAIMaxTokens(req streamRequest) int { return answerTokens(req) }

// responsesMaxTokens is what the Responses API is asked for:
// openAIMaxTokens, at least the 16 it takes (pi's floor; it refuses
// less).
func responsesMaxTokens(req streamRequest) int { return max(openAIMaxTokens(req), 16) }
