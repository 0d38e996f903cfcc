package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// warmSession starts rpi on the fake clock with the fake model priced
// as cost (JSON) and a promptCache of 300 s, settings.json being
// settings; the first prompt's answer reports a prompt of 50000 tokens.
func warmSession(t *testing.T, cost, settings string, vars ...string) (*processSession, *fakeModel, *fakeClock) {
	return warmSessionCache(t, cost, `{"short":300}`, settings, vars...)
}

// warmSessionCache is warmSession with the model's promptCache (JSON).
func warmSessionCache(t *testing.T, cost, cache, settings string, vars ...string) (*processSession, *fakeModel, *fakeClock) {
	return warmSessionScript(t, warmScript, cost, cache, settings, vars...)
}

// warmScript: the answers warmSession's model gives.
const warmScript = `{"text":["Hi."],"usage":{"Input":50000,"Output":2}}
{"text":["."],"usage":{"CacheRead":50000,"Output":1}}
{"text":["Bye."],"usage":{"Input":10,"CacheRead":50000,"Output":2}}
{"text":["."],"usage":{"CacheRead":50000,"Output":1}}`

// warmSessionScript is warmSessionCache with the model's answers.
func warmSessionScript(t *testing.T, script, cost, cache, settings string, vars ...string) (*processSession, *fakeModel, *fakeClock) {
	e, cwd := newTestEnv(t), t.TempDir()
	for i := 0; i+1 < len(vars); i += 2 {
		e.vars[vars[i]] = vars[i+1]
	}
	fm := startFakeModel(t, apiOpenAI, script, e.agentDir)
	models := fmt.Sprintf(`{"providers":{"fake":{"baseUrl":%q,"api":"openai-completions","models":[{"id":"fake-model",`+
		`"cost":%s,"promptCache":%s}]}}}`, fm.server.URL+"/v1", cost, cache)
	os.WriteFile(filepath.Join(e.agentDir, "models.json"), []byte(models), 0o644)
	os.WriteFile(filepath.Join(e.agentDir, "settings.json"), []byte(settings), 0o644)
	clock := newFakeClock()
	e.clock = clock
	return startSessionIn(t, e, []string{"rpc", "--cwd", cwd, "--no-session"}), fm, clock
}

const warmCost = `{"input":30,"output":15,"cacheRead":3,"cacheWrite":37.5}`

// dueAt reports whether a timer falls due exactly d from now: a cache
// refresh's, set when the clock stood still since its request, where
// the stream's own timers (30 ms, 5 minutes) are not.
func (c *fakeClock) dueAt(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.timers {
		if t.when.Equal(c.now.Add(d)) {
			return true
		}
	}
	return false
}

// request is the fake model's n-th request body.
func (fm *fakeModel) request(n int) map[string]any {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	return fm.requests[n]
}

// TestCacheWarmRefresh: at 90% of the promptCache lifetime (270 s of
// 300) the last request goes again, the same conversation with
// max_tokens 1; the refresh is scheduled again after it; a new prompt
// stops that warming (its timer is gone: the next is the new request's,
// 270 s after it).
func TestCacheWarmRefresh(t *testing.T) {
	ps, fm, clock := warmSession(t, warmCost, `{}`)
	ps.send(`{"id":"p","type":"prompt","message":"Hello?"}`)
	ps.waitFor(`"agent_settled"`)
	if !clock.dueAt(270 * time.Second) {
		t.Fatal("no refresh due at 270 s")
	}
	clock.advance(270 * time.Second)
	ps.waitFor(`"entry_appended"`)
	fm.waitAsked(t, 2)
	first, refresh := fm.request(0), fm.request(1)
	if refresh["max_tokens"] != 1.0 || !reflect.DeepEqual(first["messages"], refresh["messages"]) || !reflect.DeepEqual(first["tools"], refresh["tools"]) {
		t.Errorf("the refresh asked %v for %v; the request was %v", refresh["max_tokens"], refresh["messages"], first["messages"])
	}
	for !clock.dueAt(270 * time.Second) { // rescheduled once its answer is in (after entry_appended)
		time.Sleep(time.Millisecond)
	}
	clock.advance(100 * time.Second)
	ps.send(`{"id":"q","type":"prompt","message":"Goodbye."}`)
	ps.waitFor(`"id":"q"`)
	fm.waitAsked(t, 3)
	waitSettled(t, ps, 2)
	// The first warming's next refresh was due 170 s from now; the new
	// request's is 270 s from it.
	if clock.dueAt(170*time.Second) || !clock.dueAt(270*time.Second) {
		t.Error("the first prompt's warming was not stopped by the second")
	}
	ps.close()
}

// waitSettled waits until n agent_settled events are out.
func waitSettled(t *testing.T, ps *processSession, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); countRecords(ps.out.bytes(), "agent_settled") < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %d agent_settled", n)
		}
	}
}

// countRecords counts the records of type typ in out.
func countRecords(out []byte, typ string) int {
	n := 0
	for _, line := range bytes.Split(out, []byte("\n")) {
		var r struct{ Type string }
		if json.Unmarshal(line, &r) == nil && r.Type == typ {
			n++
		}
	}
	return n
}

// TestCacheWarmOff: with cacheWarming "off", or a model without a
// lifetime for the tier in use (PI_CACHE_RETENTION long, the model
// giving only short), no refresh is ever scheduled.
func TestCacheWarmOff(t *testing.T) {
	for _, c := range []struct {
		name, settings string
		vars           []string
	}{{"off", `{"cacheWarming":"off"}`, nil}, {"long tier", `{}`, []string{"PI_CACHE_RETENTION", "long"}}} {
		t.Run(c.name, func(t *testing.T) {
			ps, _, clock := warmSession(t, warmCost, c.settings, c.vars...)
			ps.send(`{"id":"p","type":"prompt","message":"Hello?"}`)
			ps.waitFor(`"agent_settled"`)
			if clock.dueAt(270 * time.Second) {
				t.Error("a refresh is scheduled")
			}
			ps.close()
		})
	}
}

// TestCacheWarmBelowThreshold: at prices where a refresh would save
// less than $0.05 idle the refresh is not sent (the next request is the
// new prompt's, asking for more than 1 token) and nothing is recorded.
// The decision itself is TestWarmSavings'; this one shows it is taken.
func TestCacheWarmBelowThreshold(t *testing.T) {
	ps, fm, clock := warmSession(t, `{"input":3,"output":15,"cacheRead":0.3,"cacheWrite":3.75}`, `{}`)
	ps.send(`{"id":"p","type":"prompt","message":"Hello?"}`)
	ps.waitFor(`"agent_settled"`)
	if !clock.dueAt(270 * time.Second) {
		t.Fatal("no refresh due at 270 s")
	}
	clock.advance(270 * time.Second)
	ps.send(`{"id":"q","type":"prompt","message":"Goodbye."}`)
	waitSettled(t, ps, 2)
	ps.close()
	if fm.request(1)["max_tokens"] == 1.0 || countRecords(ps.out.bytes(), "entry_appended") != 0 {
		t.Errorf("a refresh went below the threshold: %v", fm.request(1))
	}
}

// TestWarmSavings: pi's numbers: a 50000-token prompt at $3.75 a
// million to write and $0.30 to read saves $0.1575 while the agent runs
// (a refresh costs $0.015015, a miss $0.1725) and less than nothing
// idle (15% of a miss); unknown prices are no economics at all.
func TestWarmSavings(t *testing.T) {
	m := &model{Cost: modelCost{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}}
	for _, c := range []struct {
		tokens  int
		p       float64
		want    float64
		knowing bool
	}{
		{50000, 1, 0.1725 - 0.015015, true},
		{50000, warmIdleContinuation, 0.15*0.1725 - 0.015015, true},
		{0, 1, -0.000015, false},
	} {
		got, ok := warmSavings(m, c.tokens, c.p)
		if ok != c.knowing || got < c.want-1e-12 || got > c.want+1e-12 {
			t.Errorf("warmSavings(%d, %v) = %v, %v; want %v, %v", c.tokens, c.p, got, ok, c.want, c.knowing)
		}
	}
	// The threshold: $0.05 exactly is worth it, a token less is not
	// (a prompt of n tokens saves 3.15n/1e6 - 15/1e6 while running).
	at := func(tokens int) []any {
		return []any{&userMessage{}, &assistantMessage{Usage: usage{Input: tokens / 2, CacheRead: tokens - tokens/2}}}
	}
	cheap := &model{Cost: modelCost{Output: 0, CacheRead: 0, CacheWrite: 1}}
	if !warmWorth(cheap, at(50000), 1) || warmWorth(cheap, at(49999), 1) || warmWorth(cheap, at(1e6), 0) {
		t.Error("the $0.05 threshold is not where pi has it")
	}
	if _, ok := warmSavings(&model{}, 50000, 1); ok {
		t.Error("a model without prices has economics")
	}
	for _, c := range []struct {
		ttl, want time.Duration
		ok        bool
	}{{300 * time.Second, 270 * time.Second, true}, {3600 * time.Second, 3240 * time.Second, true},
		{60 * time.Second, 50 * time.Second, true}, {10 * time.Second, 0, false}, {10001 * time.Millisecond, time.Millisecond, true},
		// Lifetimes whose nine tenths a Duration cannot hold as nine times
		// them first: still 90% of them.
		{maxDuration, (maxDuration / 10 * 9).Truncate(time.Millisecond), true},
		{2e9 * time.Second, 18e8 * time.Second, true}} {
		if got, ok := warmDelay(c.ttl); got != c.want || ok != c.ok {
			t.Errorf("warmDelay(%v) = %v, %v; want %v, %v", c.ttl, got, ok, c.want, c.ok)
		}
	}
}

// TestCacheWarmStops: abort (the agent idle, its cache being warmed)
// and new_session each end the warming: no refresh is due any more.
func TestCacheWarmStops(t *testing.T) {
	ps, _, clock := warmSession(t, warmCost, `{}`)
	for i, stop := range []string{"abort", "new_session"} {
		ps.send(fmt.Sprintf(`{"id":"p%d","type":"prompt","message":"Hello?"}`, i))
		waitSettled(t, ps, i+1)
		if !clock.dueAt(270 * time.Second) {
			t.Fatalf("no refresh due at 270 s before %s", stop)
		}
		ps.send(fmt.Sprintf(`{"id":"s%d","type":%q}`, i, stop))
		ps.waitFor(fmt.Sprintf(`"id":"s%d"`, i))
		if clock.dueAt(270 * time.Second) {
			t.Errorf("a refresh is still due after %s", stop)
		}
	}
	ps.close()
}

// TestCacheWarmHugeLifetime: a models.json promptCache of 2e9 seconds
// (a hostile or mistaken one) is refreshed at 90% of it, past the hour
// warming may last: nothing is scheduled. Its nine tenths were reckoned
// as nine times it first, which overflowed to a refresh every millisecond.
func TestCacheWarmHugeLifetime(t *testing.T) {
	ps, _, clock := warmSessionCache(t, warmCost, `{"short":2e9}`, `{}`)
	ps.send(`{"id":"p","type":"prompt","message":"Hello?"}`)
	ps.waitFor(`"agent_settled"`)
	if clock.dueAt(time.Millisecond) {
		t.Error("a refresh is due in a millisecond")
	}
	ps.close()
}

// TestCacheWarmEndsWithRpi: rpi's end (its input's EOF) stops the
// warming: a refresh that is only scheduled (its timer is gone) and one
// in flight, its server silent (rpi ends, the refresh is given up, not
// recorded and not scheduled again).
func TestCacheWarmEndsWithRpi(t *testing.T) {
	t.Run("scheduled", func(t *testing.T) {
		ps, _, clock := warmSession(t, warmCost, `{}`)
		ps.send(`{"id":"p","type":"prompt","message":"Hello?"}`)
		ps.waitFor(`"agent_settled"`)
		ps.close()
		if clock.dueAt(270 * time.Second) {
			t.Error("a refresh is still due after rpi ended")
		}
	})
	t.Run("in flight", func(t *testing.T) {
		script := `{"text":["Hi."],"usage":{"Input":50000,"Output":2}}
{"silent":true}`
		ps, fm, clock := warmSessionScript(t, script, warmCost, `{"short":300}`, `{}`)
		ps.send(`{"id":"p","type":"prompt","message":"Hello?"}`)
		ps.waitFor(`"agent_settled"`)
		clock.advance(270 * time.Second)
		fm.waitAsked(t, 2)
		ps.close()
		if clock.dueAt(270*time.Second) || countRecords(ps.out.bytes(), "entry_appended") != 0 {
			t.Error("the refresh in flight at rpi's end was recorded or scheduled again")
		}
	})
}

// sleep is a machine's sleep of d: the wall clock moves on, the
// monotonic one that Go's timers and time.Now's readings go by (Linux's
// CLOCK_MONOTONIC, macOS's) does not, and no timer falls due. The
// reading is kept by hand: time.Time has no way to move one without the
// other (its second word is the monotonic reading when its first has the
// flag; Now's times here always have it).
func (c *fakeClock) sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	woke := c.now.Add(d)
	(*[2]int64)(unsafe.Pointer(&woke))[1] = (*[2]int64)(unsafe.Pointer(&c.now))[1]
	c.now = woke
}

// TestCacheWarmAfterSleep: a refresh whose timer fires after the machine
// slept past its cache entry's life is not sent (it would write the whole
// prompt to the cache again at full price), as pi reckons it by the wall
// clock; rpi went by the monotonic one, which stood still while asleep,
// and sent it. Nothing tells that a refresh was decided against, so the
// test gives it a moment (200 ms; a refresh sent came within a few) and
// then sends a new prompt: the requests are the two prompts'.
func TestCacheWarmAfterSleep(t *testing.T) {
	ps, fm, clock := warmSession(t, warmCost, `{}`)
	ps.send(`{"id":"p","type":"prompt","message":"Hello?"}`)
	ps.waitFor(`"agent_settled"`)
	clock.sleep(10 * time.Minute)
	if !clock.dueAt(270 * time.Second) {
		t.Fatal("the sleep made the refresh due")
	}
	clock.advance(270 * time.Second)
	fm.askedWithin(2, 200*time.Millisecond)
	ps.send(`{"id":"q","type":"prompt","message":"Goodbye."}`)
	waitSettled(t, ps, 2)
	ps.close()
	if fm.request(1)["max_tokens"] == 1.0 || countRecords(ps.out.bytes(), "entry_appended") != 0 {
		t.Error("a refresh was sent after the machine slept past the cache's life")
	}
}

// TestCacheWarmSilentServerCut: a refresh is bounded as every model call
// is (modelTimeout, 10 minutes, here on the fake clock): a server that
// never answers it, with httpIdleTimeoutMs 0 (no limit on its silence),
// has it given up then, and the next refresh is set. rpi waited on such
// a refresh for as long as the session lived, warming nothing more.
func TestCacheWarmSilentServerCut(t *testing.T) {
	script := `{"text":["Hi."],"usage":{"Input":50000,"Output":2}}
{"silent":true}`
	ps, fm, clock := warmSessionScript(t, script, warmCost, `{"short":300}`, `{"httpIdleTimeoutMs":0}`)
	defer ps.close() // on a failure too: the fake server's end waits for the refresh
	ps.send(`{"id":"p","type":"prompt","message":"Hello?"}`)
	ps.waitFor(`"agent_settled"`)
	clock.advance(270 * time.Second)
	fm.waitAsked(t, 2)
	waitDue(t, clock, modelTimeout, "the refresh has no bound")
	clock.advance(modelTimeout)
	waitDue(t, clock, 270*time.Second, "the silent refresh was never given up: no next refresh is set")
	ps.close()
	if countRecords(ps.out.bytes(), "entry_appended") != 0 {
		t.Error("the refresh given up was recorded")
	}
}

// waitDue waits until a timer falls due d from now (dueAt), failing with
// why when none does within 10 seconds.
func waitDue(t *testing.T, clock *fakeClock, d time.Duration, why string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !clock.dueAt(d); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(why)
		}
	}
}

// TestCacheWarmModelChangedDuringRefresh: a refresh whose answer comes
// after the model was changed records no usage and ends the warming, as
// in pi 1.6: the session has moved on (rpi recorded it, and warmed the
// old model's cache on).
func TestCacheWarmModelChangedDuringRefresh(t *testing.T) {
	e := newTestEnv(t)
	e.clock = newFakeClock()
	fm := startFakeModel(t, apiOpenAI, `{"text":["Hi."],"usage":{"Input":50000,"Output":2}}
{"text":["."],"holdAt":1,"usage":{"CacheRead":50000,"Output":1}}`, e.agentDir)
	models := fmt.Sprintf(`{"providers":{"fake":{"baseUrl":%q,"api":"openai-completions","models":[`+
		`{"id":"fake-model","cost":%s,"promptCache":{"short":300}},{"id":"other-model","cost":%[2]s,"promptCache":{"short":300}}]}}}`,
		fm.server.URL+"/v1", warmCost)
	os.WriteFile(filepath.Join(e.agentDir, "models.json"), []byte(models), 0o644)
	h, cwd := hostIn(t, e, "--no-session", "--model", "fake/fake-model")
	sink := &recordingSink{}
	s, err := openSession(h, sessionOptions{cwd: cwd, sink: sink, ui: &approvingUI{}})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan promptEnd, 1)
	s.startPrompt(&userMessage{Role: "user", Content: textBlocks("Hello?"), Timestamp: 1}, "", func(bool, error) {},
		func(end promptEnd) { ended <- end })
	waitEnded(t, ended)
	s.mu.Lock()
	w := s.warm
	s.mu.Unlock()
	if w == nil {
		t.Fatal("no warming after the prompt")
	}
	refreshed := make(chan struct{})
	go func() {
		defer close(refreshed)
		s.refreshCache(w)
	}()
	fm.waitAsked(t, 2) // the refresh is held at its first delta
	if _, err := s.setModel("fake", "other-model"); err != nil {
		t.Fatal(err)
	}
	fm.release <- struct{}{}
	receive(t, refreshed, "the refresh's end")
	if slices.Contains(sink.types(), "entry_appended") {
		t.Error("the refresh of the model switched from was recorded")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.warm != nil {
		t.Error("the warming of the model switched from goes on")
	}
}
