package main

import (
	"regexp"
	"strings"
)

// Which failed model calls are worth another attempt: pi 1.6's
// isRetryableAssistantError, for an answer (auto-retry) and for a
// compaction's summary alike. Its lists are JavaScript regular
// expressions (case-insensitive, with look-arounds, `.` and `\s` as
// JavaScript reads them); here each is written for Go's regexp and
// matched against the message with its ASCII letters lowered, which is
// what JavaScript's /i does: "K" (the Kelvin sign) or "ſ" is no "k" or
// "s" to it, as it would be to Go's (?i). A look-behind or look-ahead
// for a character that is not a letter or digit becomes such a
// character or the text's start or end: only whether the text matches
// counts. Like every regexp of rpi, they are compiled at first use.

// As JavaScript reads them: `.` is any UTF-16 code unit but a line
// terminator (an emoji is two, so `.?` cannot take one), and `\s` is
// JavaScript's whitespace, Unicode's spaces and "\v" among them.
const (
	jsDotClass      = `[^\n\r\x{2028}\x{2029}\x{10000}-\x{10FFFF}]`
	jsSpaceClass    = `[\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}]`
	jsNotSpaceClass = `[^\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}]`
)

// jsPattern joins patterns written in lower case as pi writes them (`.?`,
// `\s`, `\S` in JavaScript's sense) into one Go regexp.
func jsPattern(patterns ...string) *regexp.Regexp {
	js := strings.NewReplacer(`.?`, jsDotClass+`?`, `\s`, jsSpaceClass, `\S`, jsNotSpaceClass)
	return regexp.MustCompile(js.Replace(strings.Join(patterns, "|")))
}

// notRetryable is pi's list of a provider's limits that another attempt
// soon cannot lift: a plan's or account's quota, budget or billing. It
// wins over retryable (a 429 that says "insufficient_quota" is not
// retried).
var notRetryable = lazy[*regexp.Regexp]{build: func() *regexp.Regexp {
	return jsPattern(
		// OpenCode Go and free-tier limits (429 error types), and its
		// subscription-limit text.
		"gousagelimiterror",
		"freeusagelimiterror",
		"monthly usage limit reached",
		"available balance",
		// Quota, budget and billing exhaustion (OpenAI's insufficient_quota).
		"insufficient_quota",
		"out of budget",
		"quota exceeded",
		"billing",
		// Sign in with ChatGPT: the subscription's or the workspace's usage
		// limit, which resets after hours.
		"subscription_sharing_usage_limit_exceeded",
		"subscription_sharing_workplace_individual_usage_limit_exceeded",
		// Zhipu/Z.ai's code 1308: the plan's usage limit, sent as a 429.
		`"code"\s*:\s*"?1308(?:[^0-9]|$)`,
	)
}}

// retryableError is pi's list of transient failures: a provider's load,
// a 429 or 5xx status, a network, proxy or stream failure, a retry delay
// over its limit (callFailure's message), a provider's advice to retry.
var retryableError = lazy[*regexp.Regexp]{build: func() *regexp.Regexp {
	return jsPattern(
		"overloaded",
		"server_busy",
		"servers are currently busy",
		"currently experiencing high demand",
		"model is at capacity",
		"rate.?limit",
		"too many requests",
		// A status code, not part of a longer word or number (a request id).
		"(?:^|[^a-z0-9])(?:429|500|502|503|504|520|524)(?:[^a-z0-9]|$)",
		"service.?(?:is.?)?(?:temporarily.?)?unavailable",
		"server.?error",
		"internal.?error",
		"provider.?returned.?(?:an.?)?error",
		"exceeded request buffer limit while retrying upstream",
		"unable to forward upstream",
		"upstream.?request.?failed",
		"upstream_stream_read_error",
		"stream was interrupted",
		"http/?2 stream failed",
		"network.?error",
		"connection.?error",
		"connection.?refused",
		"connection.?lost",
		"connection.?closed",
		"other side closed",
		"fetch failed",
		`request to \S+ failed, reason:`,
		"getaddrinfo",
		// A socket error's bare code ("read ECONNRESET"), not part of a
		// longer identifier.
		"(?:^|[^a-z0-9_])(?:econnreset|econnaborted|econnrefused|etimedout|epipe)(?:[^a-z0-9_]|$)",
		"connection reset by peer",
		"enotfound",
		"eai_again",
		"upstream.?connect",
		"reset before headers",
		"socket hang up",
		"socket connection was closed",
		"timed? out",
		"timeout",
		"terminated",
		"websocket.?closed",
		"websocket.?error",
		"websocket.?connection.?limit.?reached",
		// A stream that ended early.
		"ended without",
		"stream ended before message_stop",
		"stream ended before a terminal response event",
		"http2 request did not get a response",
		"stream disconnected before completion",
		"cut short after the reply had begun",
		"pending stream has been canceled",
		"retry delay",
		"you can retry your request",
		"try your request again",
		"please retry your request",
		"resourceexhausted",
		"subscription_sharing_usage_unavailable",
		"subscription_sharing_user_unavailable",
	)
}}

// retryable reports whether a failed call's error message is worth
// another attempt, as pi 1.6's isRetryableAssistantError decides: it
// names a transient failure, and no quota, budget or billing limit.
func retryable(message string) bool {
	if message == "" {
		return false
	}
	text := string(asciiLower(nil, []byte(message)))
	return !notRetryable.get().MatchString(text) && retryableError.get().MatchString(text)
}
