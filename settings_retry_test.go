package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRetryLimitSettings: how settings.json's retry.maxAgentDelayMs,
// retry.provider.timeoutMs and retry.provider.maxRetryDelayMs (and its
// former name, retry.maxDelayMs) are read, the user's file then the
// project's: pi 1.6's defaults; 0 or less keeps the value so far, but a
// maxRetryDelayMs of 0 lifts the limit; a value past a Duration is the
// longest; a value of the wrong type has the file ignored with a warning.
func TestRetryLimitSettings(t *testing.T) {
	for _, c := range []struct {
		name, user, project string
		agent, server, req  time.Duration
		notice              string
	}{
		{name: "defaults", agent: time.Minute, server: time.Minute},
		{name: "set", user: `{"retry":{"maxAgentDelayMs":1500,"provider":{"timeoutMs":30000,"maxRetryDelayMs":5000}}}`,
			agent: 1500 * time.Millisecond, server: 5 * time.Second, req: 30 * time.Second},
		{name: "zero or less keeps", user: `{"retry":{"maxAgentDelayMs":0,"provider":{"timeoutMs":-1,"maxRetryDelayMs":-5}}}`,
			agent: time.Minute, server: time.Minute},
		{name: "no server limit", user: `{"retry":{"provider":{"maxRetryDelayMs":0}}}`, agent: time.Minute},
		{name: "former name", user: `{"retry":{"maxDelayMs":7000}}`, agent: time.Minute, server: 7 * time.Second},
		{name: "former name under the new", user: `{"retry":{"maxDelayMs":7000,"provider":{"maxRetryDelayMs":9000}}}`,
			agent: time.Minute, server: 9 * time.Second},
		{name: "project over user", user: `{"retry":{"maxAgentDelayMs":3000,"provider":{"maxRetryDelayMs":0}}}`,
			project: `{"retry":{"maxAgentDelayMs":2000,"provider":{"timeoutMs":1000}}}`, agent: 2 * time.Second, req: time.Second},
		{name: "huge", user: `{"retry":{"maxAgentDelayMs":9223372036854775807,"provider":{"timeoutMs":9223372036854775807,"maxRetryDelayMs":9223372036854775807}}}`,
			agent: maxDuration, server: maxDuration, req: maxDuration},
		{name: "a string", user: `{"retry":{"provider":{"timeoutMs":"30000"}}}`, agent: time.Minute, server: time.Minute,
			notice: "retry.provider.timeoutMs: expected a whole number, got a string"},
		{name: "a fraction", user: `{"retry":{"maxAgentDelayMs":1.5}}`, agent: time.Minute, server: time.Minute,
			notice: "retry.maxAgentDelayMs: expected a whole number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			set := &settings{retry: retrySettings{MaxRetries: 3, BaseDelayMs: 2000}}
			for _, text := range []string{c.user, c.project} {
				if text != "" {
					path := filepath.Join(t.TempDir(), "settings.json")
					os.WriteFile(path, []byte(text), 0o600)
					set.applySettingsFile(path)
				}
			}
			r := set.retry
			if r.agentDelayLimit() != c.agent || r.serverWaitLimit() != c.server || r.requestTimeout() != c.req {
				t.Errorf("maxAgentDelayMs %v, maxRetryDelayMs %v, timeoutMs %v; want %v, %v, %v",
					r.agentDelayLimit(), r.serverWaitLimit(), r.requestTimeout(), c.agent, c.server, c.req)
			}
			if notices := strings.Join(set.notices, "\n"); c.notice == "" && notices != "" || !strings.Contains(notices, c.notice) {
				t.Errorf("notices %q, want one with %q", notices, c.notice)
			}
		})
	}
}

// TestRetryAfterMs: a failed answer's retry-after-ms header (OpenAI's,
// in milliseconds) is read before Retry-After, as pi 1.6 reads them
// (JavaScript's parseFloat: the number that starts the text); when it
// holds no number (NaN, Inf, text), Retry-After is. A negative number
// is no wait, as in pi.
func TestRetryAfterMs(t *testing.T) {
	for _, tc := range []struct {
		ms, after string
		want      time.Duration
		ok        bool
	}{
		{"1500", "30", 1500 * time.Millisecond, true},
		{"0.5", "", 500 * time.Microsecond, true},
		{"0", "30", 0, true},
		{"", "30", 30 * time.Second, true},
		{"-5", "30", 0, true},
		{"NaN", "30", 30 * time.Second, true},
		{"Inf", "", 0, false},
		{"Infinity", "30", 30 * time.Second, true},
		{"soon", "", 0, false},
		{"1e300", "", maxDuration, true},
		{"1e400", "30", 30 * time.Second, true}, // past a float64, as pi's Infinity: Retry-After then
		{"1e400", "", 0, false},
		{"250ms", "", 250 * time.Millisecond, true},
		{"", "5abc", 5 * time.Second, true},
		{"", "2.5e1s", 25 * time.Second, true},
		{"", "1e", time.Second, true},
		{"", ".5", 500 * time.Millisecond, true},
		{"", "5.", 5 * time.Second, true},
		{"", "+2", 2 * time.Second, true},
		{"", "-3", 0, true},
		{"", ".", 0, false},
		{"", "-Infinity", 0, false},
		{"", "0x10", 0, true},
		{"", "-.e5", 0, false},
		{"", "+.5e-1x", 50 * time.Millisecond, true},
		{"", "1_000", time.Second, true},
		{"", "\u00a07", 7 * time.Second, true},
		{"", "1e305", maxDuration, true},
		{"", "1e306", 0, false},                        // pi's seconds × 1000 is Infinity: no wait it can read, the backoff then
		{"", "Wed, 21 Oct 2015 07:28:00 GMT", 0, true}, // a date gone by: no wait
	} {
		h := http.Header{}
		if tc.ms != "" {
			h.Set("retry-after-ms", tc.ms)
		}
		if tc.after != "" {
			h.Set("Retry-After", tc.after)
		}
		if got, _, ok := retryAfterOf(h); got != tc.want || ok != tc.ok {
			t.Errorf("retry-after-ms %q, Retry-After %q: %v %v, want %v %v", tc.ms, tc.after, got, ok, tc.want, tc.ok)
		}
	}
}
