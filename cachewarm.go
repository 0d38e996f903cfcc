package main

// Prompt cache warming, as pi 1.6 does it: a model whose models.json
// entry (or modelOverrides) gives a promptCache lifetime for the tier in
// use has its last request sent again, asking for one token, at 90% of
// that lifetime, while settings.json's cacheWarming allows it and the
// expected savings are worth it. Each refresh is recorded as a usage
// entry of kind "cache_warm" and told as entry_appended.

import (
	"context"
	"encoding/json"
	"time"
)

// The numbers of pi's policy (pi-ai's cache-warming).
const (
	// warmMaxAge: warming never goes on past this long after the request
	// it repeats; warmMaxIdleAge once the run has settled.
	warmMaxAge     = time.Hour
	warmMaxIdleAge = 30 * time.Minute
	// warmMinSavings: a refresh is sent only when it is expected to save
	// at least this many dollars.
	warmMinSavings = 0.05
	// warmIdleContinuation: the chance that a real request comes before
	// the cache entry expires while the agent is idle.
	warmIdleContinuation = 0.15
	// warmMargin: a refresh is sent at 90% of the lifetime, but at least
	// this long before it ends; a shorter lifetime is not warmed.
	warmMargin = 10 * time.Second
)

// cacheWarm is a session's warming of one request's cache entry; the
// session's mu guards it (session.warm).
type cacheWarm struct {
	req        streamRequest // the request, asking for one token
	conv       *conversation // the conversation it was sent from
	changes    uint64        // conv.changed() then
	ttl, delay time.Duration
	started    time.Time // when the request was sent
	idle       bool      // the run that sent it has settled
	next       time.Time // when the next refresh is due
	deadline   time.Time // a refresh that starts after it is too late
	stopTimer  func() bool
	ctx        context.Context // ends a refresh under way
	cancel     context.CancelFunc
}

// warmDelay is when a cache entry that lives ttl is refreshed: at 90% of
// it, keeping warmMargin; false when it lives no longer than the margin.
func warmDelay(ttl time.Duration) (time.Duration, bool) {
	if ttl <= warmMargin {
		return 0, false
	}
	// Nine tenths without nine times first, which overflows for a
	// lifetime above 32 years (models.json may give any).
	nineTenths := ttl/10*9 + ttl%10*9/10
	return max(time.Millisecond, min(nineTenths, ttl-warmMargin).Truncate(time.Millisecond)), true
}

// warmReplayable reports whether req sent again with a one-token cap
// keeps its cache entry: not so an Anthropic request with a thinking
// budget, which is derived from max_tokens and is part of the cache key.
func warmReplayable(req streamRequest) bool {
	return req.model.API != apiAnthropic || !req.model.Reasoning || req.thinking == "off"
}

// warmSavings is what refreshing the cache entry of a prompt of tokens
// tokens is expected to save, in dollars, at a continuation probability
// p; ok is false when the model's prices say nothing of it.
func warmSavings(m *model, tokens int, p float64) (savings float64, ok bool) {
	price := func(u usage) float64 {
		computeCost(&u, m)
		return u.Cost.Total
	}
	hit := price(usage{CacheRead: tokens})
	miss := price(usage{Input: tokens})
	if m.Cost.CacheWrite > 0 {
		miss = price(usage{CacheWrite: tokens})
	}
	warm := price(usage{CacheRead: tokens, Output: 1})
	return p*max(0, miss-hit) - warm, tokens > 0 && (hit > 0 || miss > 0)
}

// warmWorth reports whether refreshing the cache entry of the last
// request of messages is expected to save at least warmMinSavings, at the
// continuation probability p.
func warmWorth(m *model, messages []any, p float64) bool {
	savings, ok := warmSavings(m, lastPromptTokens(messages), p)
	return ok && savings >= warmMinSavings
}

// lastPromptTokens is the prompt size of the last answer in messages, as
// its server reported it.
func lastPromptTokens(messages []any) int {
	for i := len(messages) - 1; i >= 0; i-- {
		if a, ok := messages[i].(*assistantMessage); ok {
			u := a.Usage
			return addTokens(addTokens(u.Input, u.CacheRead), u.CacheWrite)
		}
	}
	return 0
}

// wallNow is the time by the wall clock alone, which the warming's
// times are kept and compared by, as pi's Date.now: a cache entry's life
// goes on while the machine sleeps, but the monotonic clock Go's times
// otherwise compare by (and its timers go by) stands still then, so a
// timer that fires after a sleep past the deadline would seem in time.
func (s *session) wallNow() time.Time { return s.env.clock.Now().Round(0) }

// startCacheWarm begins warming the cache entry req writes, in place of
// any warming before (called as req is sent).
func (s *session) startCacheWarm(req streamRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopWarmLocked()
	if s.set.cacheWarming == "off" || !warmReplayable(req) || s.closing.Load() || s.warmEnded {
		return
	}
	ttl, ok := req.model.PromptCache.ttl(s.longCacheRetention())
	if !ok {
		return
	}
	delay, ok := warmDelay(ttl)
	if !ok {
		return
	}
	req.maxTokens = 1
	w := &cacheWarm{req: req, conv: s.conv, changes: s.conv.changed(), ttl: ttl, delay: delay, started: s.wallNow()}
	w.ctx, w.cancel = context.WithCancel(s.ctx)
	s.warm = w
	s.scheduleWarmLocked(w)
}

// scheduleWarmLocked sets w's next refresh, or ends w past its age limit;
// s.mu is held.
func (s *session) scheduleWarmLocked(w *cacheWarm) {
	now := s.wallNow()
	next := now.Add(w.delay)
	// A timer may fire late (a sleeping machine): half the margin is left
	// for that; a refresh later still would write the cache anew, at full
	// price, not keep it.
	w.next, w.deadline = next, next.Add((w.ttl-w.delay)/2)
	limit := w.started.Add(warmMaxAge)
	if w.idle {
		limit = w.started.Add(warmMaxIdleAge)
	}
	if next.After(limit) || !now.Before(limit) {
		s.stopWarmLocked()
		return
	}
	w.stopTimer = s.env.clock.AfterFunc(w.delay, guarded(s.stderr, "cache warming", func() {
		s.goBackground(func() { s.refreshCache(w) })
	}))
}

// stopWarmLocked ends the warming under way, a refresh in flight too;
// s.mu is held.
func (s *session) stopWarmLocked() {
	w := s.warm
	if w == nil {
		return
	}
	s.warm = nil
	if w.stopTimer != nil {
		w.stopTimer()
	}
	w.cancel()
}

// endCacheWarm ends the warming for good, a refresh in flight too, as
// rpi begins to end: none is sent while it lets running commands finish.
func (s *session) endCacheWarm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.warmEnded = true
	s.stopWarmLocked()
}

// cacheWarmSettledLocked is told that the run has settled (aborted: it
// was aborted); s.mu is held. Warming goes on while idle when
// cacheWarming is "idle", within its shorter age limit.
func (s *session) cacheWarmSettledLocked(aborted bool) {
	w := s.warm
	if w == nil {
		return
	}
	limit := w.started.Add(warmMaxIdleAge)
	if aborted || s.set.cacheWarming != "idle" || w.next.After(limit) || !s.wallNow().Before(limit) {
		s.stopWarmLocked()
		return
	}
	w.idle = true
}

// warmCurrentLocked reports whether w's request still starts what the
// model would be sent next: the same model, and a conversation that has
// only grown since; s.mu is held.
func (s *session) warmCurrentLocked(w *cacheWarm) bool {
	return s.warm == w && s.model == w.req.model && s.conv == w.conv && w.conv.changed() == w.changes
}

// refreshCache sends w's request again, when it is still current, in time
// and worth it; it runs in the background, holding no lock while the
// model is called.
func (s *session) refreshCache(w *cacheWarm) {
	s.mu.Lock()
	if s.warm != w {
		s.mu.Unlock()
		return
	}
	w.stopTimer = nil
	p := 1.0
	if w.idle {
		p = warmIdleContinuation
	}
	if !s.warmCurrentLocked(w) || s.wallNow().After(w.deadline) {
		s.stopWarmLocked()
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	if !warmWorth(w.req.model, w.conv.messages(), p) {
		s.mu.Lock()
		if s.warm == w {
			s.stopWarmLocked()
		}
		s.mu.Unlock()
		return
	}
	msg := &assistantMessage{Role: "assistant", Content: []contentBlock{}, API: w.req.model.API, Provider: w.req.model.Provider, Model: w.req.model.ID}
	// Bounded as every model call is (modelTimeout), on the session's
	// clock: a server that holds a refresh open would hold the warming.
	ctx, cancel := context.WithCancel(w.ctx)
	stopTimeout := s.env.clock.AfterFunc(modelTimeout, guarded(s.stderr, "cache warming", cancel))
	err := callModel(ctx, w.req, msg, func() {}, func(assistantEvent) {})
	stopTimeout()
	cancel()
	if err == nil {
		computeCost(&msg.Usage, w.req.model)
	}
	s.mu.Lock()
	if !s.warmCurrentLocked(w) {
		// The model or the conversation changed while the refresh ran (as
		// pi, its usage is not recorded: the session has moved on).
		if s.warm == w {
			s.stopWarmLocked()
		}
		s.mu.Unlock()
		return
	}
	var line []byte
	if err == nil {
		line, _ = w.conv.recordLine("usage", entryField{"kind", "cache_warm"}, entryField{"provider", msg.Provider},
			entryField{"model", msg.Model}, entryField{"usage", msg.Usage})
	}
	if line != nil {
		s.postEvent("entry_appended", entryAppended{json.RawMessage(line)})
	}
	s.scheduleWarmLocked(w)
	s.unlock()
}

// entryAppended is the entry_appended event: a session entry made outside
// a run's messages (pi's: a cache refresh's usage, the context_edit that
// takes a failed answer out before it is run again).
type entryAppended struct {
	Entry json.RawMessage `json:"entry"`
}

// omitAnswer takes a failed answer out of the context for good
// (conversation.omit) and tells its context_edit entry as entry_appended,
// as pi 1.6 does before a retry or a compaction runs the answer again.
func (s *session) omitAnswer(m *assistantMessage) {
	if line, _ := s.conv.omit(m); line != nil {
		s.emit("entry_appended", entryAppended{json.RawMessage(line)})
	}
}

// longCacheRetention: PI_CACHE_RETENTION=long, the prompt cache asked to
// last longer (its requests' longCache, and the warming's lifetime).
func (s *session) longCacheRetention() bool {
	return s.env.getenv("PI_CACHE_RETENTION") == "long"
}
