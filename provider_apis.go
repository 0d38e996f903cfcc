package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// The model APIs rpi speaks (wireAPIs, one provider_*.go file each) and
// the call of a model through the API it names (streamModel).

// wireAPIs are the model APIs rpi speaks, in the order messages list
// them. A models.json model with another API is kept in the catalog, so
// that set_model can say why it cannot be used, but is never available.
var wireAPIs = []*wireAPI{openAIChat, openAIResponses, anthropicMessages, googleGemini}

// supportedAPIs are the names of wireAPIs, listed at first use.
var supportedAPIs = lazy[[]string]{build: func() []string {
	var names []string
	for _, api := range wireAPIs {
		names = append(names, api.name)
	}
	return names
}}

// wireAPINamed is the API called name, or nil when rpi does not speak it.
func wireAPINamed(name string) *wireAPI {
	for _, api := range wireAPIs {
		if api.name == name {
			return api
		}
	}
	return nil
}

// wellFormedJSON is a JSON text with what a server's parser refuses made
// U+FFFD: bytes that are not UTF-8 and the escape of a lone surrogate
// (Anthropic: "no low surrogate in string"). encoding/json writes neither
// of its own strings, but copies a json.RawMessage as it is, and a
// request carries some whole: a tool call's arguments (Anthropic's input,
// Gemini's args), as the model wrote them, and a tool's schema, as an MCP
// server sent it. One such text refused that request and, since it stays in
// the conversation or the tools, every later one.
func wellFormedJSON(data []byte) []byte {
	if utf8.Valid(data) && !bytes.Contains(data, []byte(`\ud`)) && !bytes.Contains(data, []byte(`\uD`)) {
		return data
	}
	out := make([]byte, 0, len(data))
	for i := 0; i < len(data); {
		end := bytes.IndexByte(data[i:], '\\')
		if end < 0 {
			return appendValidUTF8(out, data[i:])
		}
		out = appendValidUTF8(out, data[i:i+end])
		i += end
		if i+1 == len(data) {
			return append(out, '\\')
		}
		r := rune(-1)
		if data[i+1] == 'u' {
			r = hex4(data[i+2:])
		}
		switch {
		case !utf16.IsSurrogate(r):
			out = append(out, data[i:i+2]...) // another escape, "\\" too
			i += 2
		case r < 0xdc00 && i+12 <= len(data) && data[i+6] == '\\' && data[i+7] == 'u' && hex4(data[i+8:]) >= 0xdc00 && hex4(data[i+8:]) <= 0xdfff:
			out = append(out, data[i:i+12]...) // a pair
			i += 12
		default:
			out = append(out, `\ufffd`...)
			i += 6
		}
	}
	return out
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
	api := wireAPINamed(req.model.API)
	if api == nil {
		return unspokenError(req.model)
	}
	// A request the context window lowered to a few tokens
	// (answerTokens) still counts a short answer's of the model's own: the
	// server ends it with its length stop, and an answer's first block
	// alone (blockBytes) passes a few tokens' bytes.
	st.tokens = max(api.maxTokens(req), min(req.model.MaxTokens, shortAnswerTokens))
	st.limit = answerLimit(st.tokens)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	st.stop = stop
	data, err := json.Marshal(api.body(req))
	if err != nil {
		return err
	}
	data = wellFormedJSON(data)
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, api.url(req.model), bytes.NewReader(data))
	if err != nil {
		return err
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Accept", "text/event-stream")
	// Set here, the transport neither asks for gzip nor inflates it.
	httpReq.Header.Set("Accept-Encoding", "identity")
	api.auth(httpReq.Header, req.key)
	if api.headers != nil {
		api.headers(httpReq.Header, req)
	}
	for k, v := range req.model.headers {
		httpReq.Header.Set(k, v)
	}
	if req.model.bearer {
		bearer(httpReq.Header, req.key)
	}
	idle := watchIdle(req.idle, req.clock, stop)
	defer idle.stop()
	timedOut := req.deadline(stop)
	resp, err := modelClient.Do(httpReq)
	if timedOut() {
		if err == nil {
			resp.Body.Close()
		}
		return &providerError{message: fmt.Sprintf("Connection error: the model server sent no answer within %v (settings.json retry.provider.timeoutMs)", req.timeout)}
	}
	if err != nil {
		if idle.expired() {
			return idle.err()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &providerError{message: fmt.Sprintf("Connection error: %v", err)}
	}
	defer resp.Body.Close()
	resp.Body = idle.reader(resp.Body)
	if enc := resp.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return &providerError{final: true, message: fmt.Sprintf("The model server sent its answer compressed (Content-Encoding: %s) "+
			"though rpi asked for none (Accept-Encoding: identity); rpi reads only uncompressed streams. "+
			"Configure the server, or the proxy in front of it, not to compress its answers.", clip(req.secrets.redact(enc), 64))}
	}
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		body := string(text)
		if len(text) == maxErrorBytes {
			body = req.secrets.redactCut(body) // no part of a key the server echoed across the cut
		}
		wait, ms, ok := retryAfterOf(resp.Header)
		return &providerError{status: resp.StatusCode, retryAfter: wait, retryAfterMs: ms, hasRetryAfter: ok,
			message: fmt.Sprintf("%d %s: %s", resp.StatusCode, http.StatusText(resp.StatusCode), strings.TrimSpace(body))}
	}
	started()
	err = api.read(resp.Body, st, req.model)
	switch {
	case st.cut != nil:
		return st.cut
	case err != nil && idle.expired():
		return idle.err()
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	}
	return err
}

// deadline ends the call (cancel) once req.timeout has passed
// without the answer's headers, as pi's request timeout does on every
// API but Google's. Called when they come (or the request fails), the
// function it returns stops the timer, and reports whether it had fired.
func (req streamRequest) deadline(cancel func()) (timedOut func() bool) {
	if req.timeout <= 0 || req.model.API == apiGoogle {
		return func() bool { return false }
	}
	stop := req.clock.AfterFunc(req.timeout, cancel)
	return func() bool { return !stop() }
}

// idleWatch ends a model call (cancel) once the server has sent nothing
// for its limit: no answer's headers from the call's start, then no
// byte of the stream since the last one. A zero limit watches nothing.
// Its timer is on the session's clock, so a fixture's fake clock moves
// it. A byte only notes its time; the timer, when it comes, sets itself
// again for the rest of the limit counted from the last byte.
type idleWatch struct {
	limit   time.Duration
	clock   clock
	cancel  func()
	start   time.Time    // the call's start, on the clock (monotonic, for the real one)
	last    atomic.Int64 // the time of the call's start or its last byte, in ns since start
	fired   atomic.Bool
	stopped atomic.Bool
	timer   atomic.Pointer[func() bool] // the timer set last: its stop
}

func watchIdle(limit time.Duration, c clock, cancel func()) *idleWatch {
	w := &idleWatch{limit: limit, clock: c, cancel: cancel}
	if limit > 0 {
		w.start = c.Now()
		w.arm(limit)
	}
	return w
}

// arm sets the timer d from now. Set while stop runs, it is stopped by
// one side or the other: stop marks stopped before it reads the timer,
// arm stores the timer before it reads stopped.
func (w *idleWatch) arm(d time.Duration) {
	stop := w.clock.AfterFunc(d, w.check)
	w.timer.Store(&stop)
	if w.stopped.Load() {
		stop()
	}
}

// check is the timer: the call ends if the limit has passed since the
// last byte, else the timer is set for the rest of it.
func (w *idleWatch) check() {
	if w.stopped.Load() {
		return
	}
	quiet := w.sinceStart() - time.Duration(w.last.Load())
	if quiet < w.limit {
		w.arm(w.limit - quiet)
		return
	}
	w.fired.Store(true)
	w.cancel()
}

// sinceStart is the time since the call's start: Sub takes the real
// clock's monotonic reading, so a step of the wall clock neither ends a
// live call nor holds a silent one.
func (w *idleWatch) sinceStart() time.Duration { return w.clock.Now().Sub(w.start) }

// expired reports whether the limit passed (and the call was ended).
func (w *idleWatch) expired() bool { return w.fired.Load() }

// err is the failure of a call the limit ended: a connection error,
// which is retried.
func (w *idleWatch) err() error {
	return &providerError{message: fmt.Sprintf("Connection error: the model server sent nothing for %v (settings.json httpIdleTimeoutMs)", w.limit)}
}

func (w *idleWatch) stop() {
	w.stopped.Store(true)
	if stop := w.timer.Load(); stop != nil {
		(*stop)()
	}
}

// reader is body, each byte of which starts the limit again.
func (w *idleWatch) reader(body io.ReadCloser) io.ReadCloser {
	if w.limit <= 0 {
		return body
	}
	return idleBody{body, w}
}

type idleBody struct {
	io.ReadCloser
	w *idleWatch
}

func (b idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.last.Store(int64(b.w.sinceStart()))
	}
	return n, err
}
