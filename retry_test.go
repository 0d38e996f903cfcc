package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// retryCases are failed calls' messages, most of them the examples pi
// 1.6's own lists give (its issue numbers in the comments), in the form
// the provider or rpi writes them: summary is whether pi retries the
// message (isRetryableAssistantError: a compaction's summary), answer
// whether it retries it as a failed answer, where an overflowed context
// goes to compaction instead.
var retryCases = []struct {
	provider, message string
	summary, answer   bool
}{
	// A provider's load, a 429 or a 5xx status.
	{"anthropic", `529 : {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, true, true},
	{"fake", "429 Too Many Requests: rate limited", true, true},
	{"fake", "500 Internal Server Error: internal error", true, true},
	{"fake", "502 Bad Gateway: ", true, true},
	{"fake", "520", true, true},
	{"openai", "Rate-limit reached, slow down", true, true},
	{"zai", "The service is temporarily unavailable", true, true},                    // #10965
	{"deepseek", "Server busy: server_busy", true, true},                             //
	{"gemini", "The model is currently experiencing high demand.", true, true},       //
	{"openrouter", "Provider returned error", true, true},                            // #2264
	{"gateway", "The upstream provider returned an error", true, true},               // #10842
	{"gateway", "Exceeded request buffer limit while retrying upstream", true, true}, //
	{"gateway", "unable to forward upstream response", true, true},                   // #10920
	{"gateway", "upstream_stream_read_error", true, true},                            // #10920
	{"gateway", "HTTP/2 stream failed", true, true},                                  //
	{"openai", "Network error", true, true},
	// Network, proxy and transport failures.
	{"fake", "Connection error: dial tcp 127.0.0.1:1: connect: connection refused", true, true},
	{"fake", "Connection error: the stream ended before the answer was complete", true, true},
	{"fake", "Connection error: the model server sent nothing for 5m0s (settings.json httpIdleTimeoutMs)", true, true},
	{"codex", "upstream connect error or disconnect/reset before headers. reset reason: connection failure", true, true}, // #733
	{"anthropic", `{"type":"error","error":{"type":"api_error","message":"Connection closed."}}`, true, true},            // #12064
	{"openai", "other side closed", true, true},
	{"openai", "fetch failed", true, true},
	{"google-vertex", "request to https://oauth2.googleapis.com/token failed, reason: ", true, true}, // #10996
	{"openai", "getaddrinfo EAI_AGAIN api.openai.com", true, true},
	{"openai", "read ECONNRESET", true, true},                             // #12128
	{"openai", "write EPIPE", true, true},                                 // #12128
	{"openai", "connect ETIMEDOUT 1.2.3.4:443", true, true},               // #12128
	{"openai", "400 Bad Request: READ econnreset", true, true},            // any case
	{"openai", "ECONNRESET_RETRIES exceeded", false, false},               // part of a longer identifier
	{"openai", "code E_ECONNRESET", false, false},                         //
	{"openai", "Connection reset by peer", true, true},                    //
	{"openai", "socket hang up", true, true},                              //
	{"openai", "Request timed out.", true, true},                          //
	{"openai", "terminated", true, true},                                  //
	{"openai", "WebSocket closed 1006", true, true},                       //
	{"codex", "Responses websocket connection limit reached", true, true}, // #12124
	// Streams that ended early.
	{"anthropic", "Anthropic stream ended before message_stop", true, true},                                               // #4433
	{"anthropic", "stream ended without a message_stop event", true, true},                                                // #4433
	{"bedrock", "http2 request did not get a response", true, true},                                                       // #3594
	{"codex", "stream disconnected before completion: stream closed before response.completed", true, true},               // #11057
	{"magpie", "Claude Code's stream from Anthropic was cut short after the reply had begun", true, true},                 // #11879
	{"bedrock", "The pending stream has been canceled (caused by: session timeout)", true, true},                          // #10379
	{"fake", "Server requested 120s retry delay (max: 60s). 400 Bad Request: slow down", true, true},                      // #1123
	{"openai", "An error occurred while processing your request. You can retry your request, or contact us.", true, true}, // #6019
	{"nvidia", "ResourceExhausted: too many concurrent requests", true, true},                                             //
	{"codex", "subscription_sharing_usage_unavailable", true, true},                                                       //
	// A quota, budget or billing limit: not retried, 429 or not.
	{"openai", `429 Too Many Requests: {"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}}`, false, false},
	{"opencode", `429 Too Many Requests: {"type":"error","error":{"type":"GoUsageLimitError","message":"Rate limit"}}`, false, false},
	{"opencode", `429 Too Many Requests: {"type":"error","error":{"type":"FreeUsageLimitError"}}`, false, false},
	{"opencode", "429 Too Many Requests: Monthly usage limit reached. Enable usage of your available balance.", false, false},
	{"gateway", "503 Service Unavailable: key is out of budget", false, false},
	{"gateway", "429 Too Many Requests: Quota exceeded for metric", false, false},
	{"codex", "429 Too Many Requests: subscription_sharing_usage_limit_exceeded", false, false},
	{"codex", "subscription_sharing_workplace_individual_usage_limit_exceeded", false, false},
	{"zai", `429 Too Many Requests: {"error":{"code":"1308","message":"Usage limit reached for 5 hour"}}`, false, false}, // #11537
	{"zai", `429 Too Many Requests: {"error":{"code" : 1308}}`, false, false},
	{"zai", "429 Too Many Requests: {\"error\":{\"code\":\u00a01308}}", false, false}, // JavaScript's \s takes a no-break space
	{"zai", `429 Too Many Requests: {"error":{"code":"13080"}}`, true, true},          // another code
	// Failures another attempt cannot mend.
	{"fake", "400 Bad Request: bad request", false, false},
	{"fake", "401 Unauthorized: invalid x-api-key", false, false},
	{"fake", "404 Not Found: model not found", false, false},
	{"fake", "400 Bad Request: request req_5003abc is invalid", false, false}, // a status in a longer word (#11057)
	{"fake", "400 Bad Request: sent 15000 bytes", false, false},               //
	{"fake", "The answer was cut at 128 KiB: the model server sent more than rpi keeps for one answer", false, false},
	{"fake", "Provider finish_reason: content_filter", false, false},
	{"fake", "", false, false},
	// An overflowed context: compacted, not retried, as an answer; a
	// summary's request is retried (pi checks no overflow there).
	{"ollama", "500 Internal Server Error: prompt too long; exceeded max context length by 100 tokens", true, false},
	{"anthropic", "prompt is too long: 213462 tokens > 200000 maximum (request timed out)", true, false},
	{"openai", "429 Too Many Requests: Rate limit reached: too many tokens", true, true}, // throttling, no overflow
	// JavaScript's /i and `.`: only ASCII letters fold, and `.` takes no
	// line terminator nor half of an emoji.
	{"openai", "SOCKET HANG UP", true, true},
	{"openai", "soc\u212aet hang up", false, false}, // the Kelvin sign is no k
	{"openai", "\u017focket hang up", false, false}, // nor the long s an s
	{"openai", "rate\rlimit", false, false},
	{"openai", "rate\u2028limit", false, false},
	{"openai", "rate\U0001F600limit", false, false},
	{"openai", "rate\u00e9limit", true, true},
	{"google-vertex", "request to https://a\u00a0b failed, reason: ", false, false},
	{"google-vertex", "request to https://a\u00e9b failed, reason: ", true, true},
}

// TestRetryable: which failed calls are retried, as pi 1.6 decides
// (retryable; and for an answer, not an overflowed context). With
// PI_COMPAT_CACHE naming a folder that holds pi 1.6 (scripts/pi16.sh
// installs it there) and node, each case is also put to pi's own
// isRetryableAssistantError and isContextOverflow.
func TestRetryable(t *testing.T) {
	for _, tt := range retryCases {
		m := &assistantMessage{Provider: tt.provider, StopReason: "error", ErrorMessage: tt.message}
		if got := retryable(tt.message); got != tt.summary {
			t.Errorf("%q: retryable %v, want %v", tt.message, got, tt.summary)
		}
		if got := retryable(tt.message) && !overflowed(m); got != tt.answer {
			t.Errorf("%q: an answer is retried %v, want %v", tt.message, got, tt.answer)
		}
	}
	t.Run("pi", func(t *testing.T) {
		dir := os.Getenv("PI_COMPAT_CACHE")
		if dir == "" {
			t.Skip("PI_COMPAT_CACHE is not set (the folder scripts/pi16.sh installs pi 1.6 in)")
		}
		node := needProgram(t, "node")
		dist := filepath.Join(dir, "node_modules", "@earendil-works", "pi-ai", "dist", "utils")
		script := `const [r, o] = await Promise.all([import(process.argv[1] + "/retry.js"), import(process.argv[1] + "/overflow.js")]);
let input = ""; for await (const c of process.stdin) input += c;
const out = JSON.parse(input).map(([provider, errorMessage]) => {
	const m = {role: "assistant", provider, stopReason: "error", errorMessage, usage: {input: 0, output: 0, cacheRead: 0}};
	const summary = r.isRetryableAssistantError(m);
	return [summary, summary && !o.isContextOverflow(m, 0)];
});
process.stdout.write(JSON.stringify(out));`
		var in [][2]string
		for _, tt := range retryCases {
			in = append(in, [2]string{tt.provider, tt.message})
		}
		data, _ := json.Marshal(in)
		cmd := exec.Command(node, "--input-type=module", "-e", script, dist)
		cmd.Stdin = bytes.NewReader(data)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node: %v", err)
		}
		var pi [][2]bool
		if err := json.Unmarshal(out, &pi); err != nil || len(pi) != len(retryCases) {
			t.Fatalf("node answered %s (%v)", out, err)
		}
		for i, tt := range retryCases {
			if pi[i] != [2]bool{tt.summary, tt.answer} {
				t.Errorf("%q: pi retries a summary %v, an answer %v; the case says %v, %v", tt.message, pi[i][0], pi[i][1], tt.summary, tt.answer)
			}
		}
		t.Logf("%d messages compared with pi 1.6", len(retryCases))
	})
}

// firedClock is a clock whose timers have all fallen due: AfterFunc
// calls f before it returns.
type firedClock struct{ clock }

func (firedClock) AfterFunc(_ time.Duration, f func()) func() bool {
	f()
	return func() bool { return false }
}

// TestAbortRetryAsTheWaitEnds: an abort_retry that takes the retry's
// wait (abortRetry found it and cancelled it) as the wait's timer falls
// due cancels the retry, as it was told it would (it answers once the
// run settles, after auto_retry_end "Retry cancelled"). rpi chose
// between the timer and the cancel at random, and the retry ran half of
// the time, abort_retry's answer waiting for all of it.
func TestAbortRetryAsTheWaitEnds(t *testing.T) {
	s := &session{host: &host{env: runEnv{clock: firedClock{newFakeClock()}}}}
	for range 64 {
		ctx, cancel := context.WithCancel(context.Background())
		run := &agentRun{ctx: ctx, cancel: cancel, settled: make(chan struct{})}
		s.activeRun = run
		cancelled := run.armRetry()
		if s.abortRetry() == nil {
			t.Fatal("abort_retry found no retry waiting")
		}
		if s.waitRetry(run, time.Second, cancelled) {
			t.Fatal("the retry went ahead after abort_retry cancelled its wait")
		}
		cancel()
	}
}
