package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSecondCompactionKeepsWhatTheFirstKept compacts twice (settings keep
// only the last answer): the second summary is asked of the first summary
// and of the answer the first compaction kept, so that answer is
// summarised, not dropped; and the context after is the new summary and
// the last answer.
func TestSecondCompactionKeepsWhatTheFirstKept(t *testing.T) {
	endToEnd(t)
	ps, fm, _ := agentSession(t, apiOpenAI, `
{"text":["First answer."]}
{"text":["Second answer."]}
{"text":["SUMMARY-ONE"]}
{"text":["Third answer."]}
{"text":["SUMMARY-TWO"]}`)
	settled := func(n int) {
		waitUntil(t, ps, func(out string) bool { return strings.Count(out, `"type":"agent_settled"`) == n })
	}
	ps.send(`{"type":"prompt","message":"FIRST-QUESTION"}`)
	settled(1)
	ps.send(`{"type":"prompt","message":"SECOND-QUESTION"}`)
	settled(2)
	ps.send(`{"id":"c1","type":"compact"}`)
	ps.waitFor(`"id":"c1"`)
	ps.send(`{"type":"prompt","message":"THIRD-QUESTION"}`)
	settled(3)
	ps.send(`{"id":"c2","type":"compact"}`)
	ps.waitFor(`"id":"c2"`)
	asked, _ := json.Marshal(fm.lastRequest())
	for _, want := range []string{"SUMMARY-ONE", "Second answer.", "THIRD-QUESTION"} {
		if !strings.Contains(string(asked), want) {
			t.Errorf("the second summary was not asked of %s:\n%s", want, asked)
		}
	}
	if strings.Contains(string(asked), "FIRST-QUESTION") || strings.Contains(string(asked), "Third answer.") {
		t.Errorf("the second summary was asked of what it should not be:\n%s", asked)
	}
	ps.send(`{"id":"m","type":"get_messages"}`)
	ps.waitFor(`"id":"m"`)
	recs := ps.close()
	for _, rec := range recs {
		if rec["id"] == "m" {
			got, _ := json.Marshal(rec["data"])
			for _, want := range []string{"SUMMARY-TWO", "Third answer."} {
				if !strings.Contains(string(got), want) {
					t.Errorf("the context lacks %s: %s", want, got)
				}
			}
			for _, gone := range []string{"SUMMARY-ONE", "Second answer."} {
				if strings.Contains(string(got), gone) {
					t.Errorf("the context still holds %s: %s", gone, got)
				}
			}
		}
	}
}

// TestCompactionSummarisesLoopPrompts: a loop's prompt is a custom message
// in the context; a compaction that cuts it off asks the summary of it too
// (it was left out, and so lost).
func TestCompactionSummarisesLoopPrompts(t *testing.T) {
	endToEnd(t)
	ps, fm, _ := agentSession(t, apiOpenAI, `
{"text":["Checked."]}
{"text":["Second answer."]}
{"text":["SUMMARY"]}`)
	ps.send(`{"id":"l","type":"loop_create","interval":"1d","prompt":"LOOP-PROMPT"}`)
	waitUntil(t, ps, func(out string) bool { return strings.Contains(out, `"type":"loop_finished"`) })
	asked := secondPromptThenCompact(t, ps, fm)
	if !strings.Contains(string(asked), "LOOP-PROMPT") || !strings.Contains(string(asked), "Checked.") {
		t.Errorf("the summary was not asked of the loop's turn:\n%s", asked)
	}
}

// TestSummaryRequestIsText: the summary is asked of the conversation as
// text, as pi asks it: an image is left out (its base64 made a request
// larger than the window, so a conversation with a screenshot could never
// be compacted) and a tool result is cut to 2,000 characters.
func TestSummaryRequestIsText(t *testing.T) {
	endToEnd(t)
	ps, fm, cwd := agentSession(t, apiOpenAI, `
{"toolCalls":[{"id":"call_1","name":"read","args":["{\"path\":\"big.txt\"}"]}]}
{"text":["FIRST-ANSWER"]}
{"text":["Second answer."]}
{"text":["SUMMARY"]}`)
	os.WriteFile(filepath.Join(cwd, "big.txt"), []byte(strings.Repeat("line of the big file\n", 2000)), 0o644)
	image := "iVBORw0KGgoA" + strings.Repeat("QUFB", 25000) // a PNG of 100 KB: below the auto-compaction threshold as rpi estimates it
	ps.send(`{"type":"prompt","message":"FIRST-QUESTION","images":[{"type":"image","data":"` + image + `","mimeType":"image/png"}]}`)
	waitUntil(t, ps, func(out string) bool { return strings.Count(out, `"type":"agent_settled"`) == 1 })
	asked := secondPromptThenCompact(t, ps, fm)
	for _, want := range []string{"FIRST-QUESTION", "FIRST-ANSWER", "big.txt", "line of the big file", "more characters truncated"} {
		if !strings.Contains(string(asked), want) {
			t.Errorf("the summary request lacks %q: %.1500s", want, asked)
		}
	}
	if strings.Contains(string(asked), "QUFBQUFB") || len(asked) > 20000 {
		t.Errorf("the summary request holds the image or all of the file: %d bytes", len(asked))
	}
}

// secondPromptThenCompact sends SECOND-QUESTION after one settled run,
// then compact, ends the session and gives the summary request.
func secondPromptThenCompact(t *testing.T, ps *processSession, fm *fakeModel) []byte {
	ps.send(`{"type":"prompt","message":"SECOND-QUESTION"}`)
	waitUntil(t, ps, func(out string) bool { return strings.Count(out, `"type":"agent_settled"`) == 2 })
	ps.send(`{"id":"c","type":"compact"}`)
	ps.waitFor(`"id":"c"`)
	ps.close()
	asked, _ := json.Marshal(fm.lastRequest())
	return asked
}

// TestOverflowWithinOneTurn: one prompt's run outgrows the window (here:
// two reads, then the provider says the context is too long). The cut
// falls within that turn, as pi cuts, at the model's answer: the prompt
// and the first read are summarised, the second read is kept, and the
// run goes on. Cut only at user messages, there was nothing to summarise
// before the kept turn, and such a run could never recover.
func TestOverflowWithinOneTurn(t *testing.T) {
	fm, recs := overflowedRun(t, `
{"toolCalls":[{"id":"call_1","name":"read","args":["{\"path\":\"one.txt\"}"]}]}
{"toolCalls":[{"id":"call_2","name":"read","args":["{\"path\":\"two.txt\"}"]}]}
{"status":400,"body":"This model's maximum context length is 100000 tokens"}
{"text":["SUMMARY"]}
{"text":["DONE"]}`)
	fm.mu.Lock()
	summaryRequest, _ := json.Marshal(fm.requests[3])
	fm.mu.Unlock()
	for _, want := range []string{"THE-PROMPT", "ONE-LINE"} {
		if !strings.Contains(string(summaryRequest), want) {
			t.Errorf("the summary was not asked of %s", want)
		}
	}
	if strings.Contains(string(summaryRequest), "TWO-LINE") {
		t.Errorf("the summary was asked of the kept read")
	}
	for _, rec := range recs {
		if rec["id"] == "m" {
			got, _ := json.Marshal(rec["data"])
			if !strings.Contains(string(got), "SUMMARY") || !strings.Contains(string(got), "TWO-LINE") || strings.Contains(string(got), "ONE-LINE") {
				t.Errorf("the context after: %.2000s", got)
			}
		}
	}
}

// TestOverflowInTheLastToolResults: when the newest answer's tool results
// alone pass keepRecentTokens, no place to cut lies after where they do,
// and the compaction kept everything ("Nothing to compact"), so an
// overflow there could never be recovered from, however much came
// before. The kept part now starts at the answer that made those calls,
// and what came before it is summarised.
func TestOverflowInTheLastToolResults(t *testing.T) {
	_, recs := overflowedRun(t, `
{"toolCalls":[{"id":"call_1","name":"read","args":["{\"path\":\"one.txt\"}"]},{"id":"call_2","name":"read","args":["{\"path\":\"two.txt\"}"]}]}
{"status":400,"body":"This model's maximum context length is 100000 tokens"}
{"text":["SUMMARY"]}
{"text":["DONE"]}`)
	for _, rec := range recs {
		if rec["id"] == "m" {
			got, _ := json.Marshal(rec["data"])
			if !strings.Contains(string(got), "SUMMARY") || !strings.Contains(string(got), "ONE-LINE") ||
				!strings.Contains(string(got), "TWO-LINE") || strings.Contains(string(got), "THE-PROMPT") {
				t.Errorf("the context after: %.2000s", got)
			}
		}
	}
}

// overflowedRun runs one prompt against a model that plays script, with
// keepRecentTokens 3000 and two files of about 2000 tokens each to read
// (one.txt of ONE-LINE, two.txt of TWO-LINE), then asks get_messages; it
// fails the test unless the run recovered from its overflow by a
// compaction and went on (DONE).
func overflowedRun(t *testing.T, script string) (*fakeModel, []map[string]any) {
	endToEnd(t)
	e, cwd := newTestEnv(t), t.TempDir()
	fm := startFakeModel(t, apiOpenAI, script, e.agentDir)
	os.WriteFile(filepath.Join(e.agentDir, "settings.json"), []byte(`{"compaction":{"keepRecentTokens":3000}}`), 0o644)
	os.WriteFile(filepath.Join(cwd, "one.txt"), []byte(strings.Repeat("ONE-LINE\n", 900)), 0o644)
	os.WriteFile(filepath.Join(cwd, "two.txt"), []byte(strings.Repeat("TWO-LINE\n", 900)), 0o644)
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd})
	ps.send(`{"type":"prompt","message":"THE-PROMPT"}`)
	ps.waitFor(`"type":"agent_settled"`)
	ps.send(`{"id":"m","type":"get_messages"}`)
	ps.waitFor(`"id":"m"`)
	recs := ps.close()
	out := string(ps.out.bytes())
	if !strings.Contains(out, `"willRetry":true`) || !strings.Contains(out, `"delta":"DONE"`) {
		var ends []string
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "compaction_end") || strings.Contains(line, "run_failed") {
				ends = append(ends, line)
			}
		}
		t.Fatalf("the run did not recover: %s", strings.Join(ends, "\n"))
	}
	return fm, recs
}

// TestOverflowed: a failed answer is taken as the context overflowing
// (auto-compaction's "overflow") when its error says so as a provider
// words it, as pi 1.6 knows them, in rpi's "STATUS TEXT: BODY" form; not
// when it is throttling that reads like one, nor another failure.
func TestOverflowed(t *testing.T) {
	for _, tt := range []struct {
		provider, message string
		want              bool
	}{
		{"anthropic", `400 Bad Request: {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 213462 tokens > 200000 maximum"}}`, true},
		{"anthropic", `413 Request Entity Too Large: {"error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}`, true},
		{"openai", `400 Bad Request: {"error":{"message":"Your input exceeds the context window of this model."}}`, true},
		{"litellm", `400 Bad Request: Requested token count exceeds the model's maximum context length of 131072 tokens`, true},
		{"vllm", `400 Bad Request: Input length (265330) exceeds model's maximum context length (262144).`, true},
		{"google", `400 Bad Request: {"error":{"message":"The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)."}}`, true},
		{"xai", `400 Bad Request: This model's maximum prompt length is 131072 but the request contains 537812 tokens.`, true},
		{"groq", `400 Bad Request: Please reduce the length of the messages or completion.`, true},
		{"openrouter", `400 Bad Request: This endpoint's maximum context length is 200000 tokens. However, you requested about 210000 tokens`, true},
		{"together", `400 Bad Request: The input (300000 tokens) is longer than the model's context length (131072 tokens).`, true},
		{"llama.cpp", `400 Bad Request: the request exceeds the available context size, try increasing it`, true},
		{"lmstudio", `400 Bad Request: tokens to keep from the initial prompt is greater than the context length`, true},
		{"kimi", `400 Bad Request: Your request exceeded model token limit: 262144 (requested: 300000)`, true},
		{"mistral", `400 Bad Request: Prompt contains 140000 tokens, too large for model with 131072 maximum context length`, true},
		{"zai", `400 Bad Request: {"code":"1261","message":"Prompt too long"}`, true},
		{"dashscope", `400 Bad Request: Range of input length should be [1, 129024]`, true},
		{"ollama", `500 Internal Server Error: prompt too long; exceeded max context length by 100 tokens`, true},
		{"cerebras", `400 Bad Request: `, true},
		{"other", `400 Bad Request: `, false},
		{"other", `413 Request Entity Too Large: `, true},
		{"bedrock", `Throttling error: Too many tokens, please wait before trying again.`, false},
		{"openai", `429 Too Many Requests: Rate limit reached for gpt-5 on tokens per min (TPM): too many tokens`, false},
		{"anthropic", `529 Overloaded: {"type":"error","error":{"type":"overloaded_error"}}`, false},
		{"openai", `Connection error: unexpected EOF`, false},
	} {
		m := &assistantMessage{Provider: tt.provider, StopReason: "error", ErrorMessage: tt.message}
		if got := overflowed(m); got != tt.want {
			t.Errorf("%s %q: overflow %v, want %v", tt.provider, tt.message, got, tt.want)
		}
	}
	if overflowed(&assistantMessage{StopReason: "stop", ErrorMessage: "prompt is too long"}) {
		t.Error("an answer that did not fail is taken as an overflow")
	}
}

// TestRecoveryFor is pi 1.6's choice after a run's last answer, for a
// model of 100,000 tokens' window and 4,096 maxTokens: an overflow the
// provider said, one it took silently (a complete answer over the
// window: compacted, not run again), Xiaomi MiMo's (stopped for its
// length without output, the input filling 99% of the window), an
// answer cut short below maxTokens; nothing for another model's answer,
// an aborted one, or counts a server made up past what an int adds.
func TestRecoveryFor(t *testing.T) {
	const maxInt = int(^uint(0) >> 1)
	m := &model{Provider: "p", ID: "m", ContextWindow: 100000, MaxTokens: 4096}
	for _, tt := range []struct {
		name                     string
		stop                     string
		input, cacheRead, output int
		provider, id, errorText  string
		window, maxTokens        int // the model's, when not m's
		want                     recovery
	}{
		{name: "error overflow", stop: "error", errorText: "400 Bad Request: prompt is too long", want: overflowRetry},
		{name: "other error", stop: "error", errorText: "500 Internal Server Error: boom", want: noRecovery},
		{name: "stop within", stop: "stop", input: 90000, cacheRead: 10000, output: 10, want: noRecovery},
		{name: "stop over", stop: "stop", input: 90000, cacheRead: 10001, output: 10, want: overflowKept},
		{name: "stop over, no window", stop: "stop", input: 200000, window: -1, want: noRecovery},
		{name: "toolUse over", stop: "toolUse", input: 200000, want: noRecovery},
		{name: "length, no output, 99%", stop: "length", input: 98000, cacheRead: 1000, want: overflowRetry},
		{name: "length, no output, under 99%", stop: "length", input: 98999, want: truncatedRetry},
		{name: "length, no output, no maxTokens", stop: "length", input: 50000, maxTokens: -1, want: noRecovery},
		{name: "length, some output, full", stop: "length", input: 99999, output: 1, want: truncatedRetry},
		{name: "length at maxTokens", stop: "length", input: 500, output: 4096, want: noRecovery},
		{name: "length below maxTokens", stop: "length", input: 500, output: 4095, want: truncatedRetry},
		{name: "length, no window", stop: "length", input: 500, output: 100, window: -1, want: truncatedRetry},
		{name: "aborted", stop: "aborted", input: 200000, want: noRecovery},
		{name: "another provider", stop: "stop", input: 200000, provider: "q", want: noRecovery},
		{name: "another model", stop: "length", output: 10, id: "n", want: noRecovery},
		{name: "another model's error", stop: "error", errorText: "prompt is too long", id: "n", want: noRecovery},
		{name: "saturated counts, stop", stop: "stop", input: maxInt, cacheRead: maxInt, output: maxInt, want: overflowKept},
		{name: "saturated counts, length", stop: "length", input: maxInt, cacheRead: maxInt, output: maxInt, want: noRecovery},
		{name: "saturated window", stop: "stop", input: maxInt, cacheRead: maxInt, window: maxInt, want: overflowKept},
	} {
		mm := *m
		if tt.window != 0 {
			mm.ContextWindow = max(tt.window, 0)
		}
		if tt.maxTokens != 0 {
			mm.MaxTokens = max(tt.maxTokens, 0)
		}
		last := &assistantMessage{Provider: "p", Model: "m", StopReason: tt.stop, ErrorMessage: tt.errorText,
			Usage: usage{Input: tt.input, CacheRead: tt.cacheRead, Output: tt.output}}
		if tt.provider != "" {
			last.Provider = tt.provider
		}
		if tt.id != "" {
			last.Model = tt.id
		}
		if got := recoveryFor(last, &mm); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	if recoveryFor(nil, m) != noRecovery || recoveryFor(&assistantMessage{StopReason: "length"}, nil) != noRecovery {
		t.Error("no answer or no model asks for a recovery")
	}
}

// TestOmittedAnswerLeavesTheContext reads a session where an answer cut
// short was compacted away (pi 1.6's context_edit with "replacement":null
// names it): the context has the summary and the kept question, not the
// cut answer (the question as an edit replaces its content); an edit
// that names no entry changes nothing.
func TestOmittedAnswerLeavesTheContext(t *testing.T) {
	answer := `{"role":"assistant","content":[{"type":"text","text":"%s"}],"api":"openai-completions","provider":"p","model":"m",` +
		`"usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"%s","timestamp":2}`
	lines := []string{
		`{"type":"session","version":3,"id":"0195f3a0-0000-7000-8000-000000000000","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}`,
		`{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"First"}],"timestamp":1}}`,
		`{"type":"message","id":"a2","parentId":"a1","timestamp":"2026-01-01T00:00:02.000Z","message":` + fmt.Sprintf(answer, "One.", "stop") + `}`,
		`{"type":"message","id":"a3","parentId":"a2","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":[{"type":"text","text":"Second"}],"timestamp":3}}`,
		`{"type":"message","id":"a4","parentId":"a3","timestamp":"2026-01-01T00:00:04.000Z","message":` + fmt.Sprintf(answer, "Cut sho", "length") + `}`,
		`{"type":"context_edit","id":"a5","parentId":"a4","timestamp":"2026-01-01T00:00:05.000Z","targetId":"a4","replacement":null}`,
		`{"type":"context_edit","id":"a6","parentId":"a5","timestamp":"2026-01-01T00:00:05.000Z","targetId":"a3","replacement":{"content":"Changed"}}`,
		`{"type":"context_edit","id":"a7","parentId":"a6","timestamp":"2026-01-01T00:00:05.000Z","replacement":null}`,
		`{"type":"compaction","id":"a8","parentId":"a7","timestamp":"2026-01-01T00:00:06.000Z","summary":"Earlier.","firstKeptEntryId":"a3","tokensBefore":9}`,
	}
	var got []string
	for _, m := range contextOfLines(t, lines) {
		b, _ := json.Marshal(m)
		got = append(got, string(b))
	}
	if len(got) != 2 || !strings.Contains(got[0], `"summary":"Earlier."`) || !strings.Contains(got[1], `"text":"Changed"`) {
		t.Errorf("context:\n%s", strings.Join(got, "\n"))
	}
}

// TestContextEditAsPi: a pi 1.6 session's context_edit entries apply as
// pi's buildSessionProjection applies them: the latest edit of an entry
// on the branch wins, a replacement changes only the content (a string
// one an answer's or a tool result's single text block), null takes the
// entry out, the compaction's summary too, and an edit summarised away by
// a compaction no longer counts.
func TestContextEditAsPi(t *testing.T) {
	head := []string{
		`{"type":"session","version":3,"id":"0195f3a0-0000-7000-8000-000000000000","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}`,
		`{"type":"message","id":"u1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"First"}],"timestamp":1}}`,
		`{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"One."}],"api":"openai-completions","provider":"p","model":"m","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":2}}`,
		`{"type":"message","id":"u2","parentId":"a1","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":[{"type":"text","text":"Second"}],"timestamp":3}}`,
	}
	edit := func(id, parent, target, replacement string) string {
		return `{"type":"context_edit","id":"` + id + `","parentId":"` + parent + `","timestamp":"2026-01-01T00:00:04.000Z","targetId":"` + target + `","replacement":` + replacement + `}`
	}
	cases := []struct {
		name  string
		lines []string
		want  []string // each message's content (or summary), as JSON
	}{
		{"a replacement of an answer", []string{edit("e1", "u2", "a1", `{"content":"Shorter."}`)},
			[]string{`[{"type":"text","text":"First"}]`, `[{"type":"text","text":"Shorter."}]`, `[{"type":"text","text":"Second"}]`}},
		{"a replacement of a user message with blocks", []string{edit("e1", "u2", "u1", `{"content":[{"type":"text","text":"Changed"}]}`)},
			[]string{`[{"type":"text","text":"Changed"}]`, `[{"type":"text","text":"One."}]`, `[{"type":"text","text":"Second"}]`}},
		{"a replacement of a custom message", []string{
			`{"type":"custom_message","id":"x1","parentId":"u2","timestamp":"2026-01-01T00:00:05.000Z","customType":"note","content":"Old note","display":true}`,
			edit("e1", "x1", "x1", `{"content":"New note"}`)},
			[]string{`[{"type":"text","text":"First"}]`, `[{"type":"text","text":"One."}]`, `[{"type":"text","text":"Second"}]`, `"New note"`}},
		{"the latest edit wins over an omission", []string{edit("e1", "u2", "a1", `null`), edit("e2", "e1", "a1", `{"content":"Back."}`)},
			[]string{`[{"type":"text","text":"First"}]`, `[{"type":"text","text":"Back."}]`, `[{"type":"text","text":"Second"}]`}},
		{"the latest omission wins over a replacement", []string{edit("e1", "u2", "a1", `{"content":"Back."}`), edit("e2", "e1", "a1", `null`)},
			[]string{`[{"type":"text","text":"First"}]`, `[{"type":"text","text":"Second"}]`}},
		{"an omitted compaction summary", []string{
			`{"type":"compaction","id":"c1","parentId":"u2","timestamp":"2026-01-01T00:00:06.000Z","summary":"Earlier.","firstKeptEntryId":"u2","tokensBefore":9}`,
			edit("e1", "c1", "c1", `null`)},
			[]string{`[{"type":"text","text":"Second"}]`}},
		{"an edit summarised away", []string{edit("e1", "u2", "u3", `null`),
			`{"type":"message","id":"u3","parentId":"e1","timestamp":"2026-01-01T00:00:05.000Z","message":{"role":"user","content":[{"type":"text","text":"Third"}],"timestamp":5}}`,
			`{"type":"compaction","id":"c1","parentId":"u3","timestamp":"2026-01-01T00:00:06.000Z","summary":"Earlier.","firstKeptEntryId":"u3","tokensBefore":9}`},
			[]string{`"Earlier."`, `[{"type":"text","text":"Third"}]`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, m := range contextOfLines(t, append(slices.Clone(head), c.lines...)) {
				b, _ := json.Marshal(m)
				var probe struct {
					Content json.RawMessage `json:"content"`
					Summary json.RawMessage `json:"summary"`
				}
				json.Unmarshal(b, &probe)
				got = append(got, cmp.Or(string(probe.Content), string(probe.Summary)))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("context:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestCompactionSummarisesTheEditedContext: a compaction's summary is
// asked of the context as context_edit entries (pi's extensions') made
// it, as pi 1.6 asks it: a message's replacement content, not what it
// replaced (a secret a redaction took out went to the summary), and no
// earlier summary an edit took out.
func TestCompactionSummarisesTheEditedContext(t *testing.T) {
	endToEnd(t)
	message := func(id, parent, role, text string) string {
		extra := ""
		if role == "assistant" {
			extra = `,"api":"openai-completions","provider":"fake","model":"fake-model","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop"`
		}
		return `{"type":"message","id":"` + id + `","parentId":"` + parent + `","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"` + role + `","content":[{"type":"text","text":"` + text + `"}]` + extra + `,"timestamp":1}}`
	}
	lines := []string{
		`{"type":"session","version":3,"id":"0195f3a0-0000-7000-8000-000000000000","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}`,
		`{"type":"thinking_level_change","id":"t1","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","thinkingLevel":"off"}`,
		message("u0", "t1", "user", "ZERO-QUESTION"),
		message("a0", "u0", "assistant", "ZERO-ANSWER"),
		`{"type":"compaction","id":"c1","parentId":"a0","timestamp":"2026-01-01T00:00:02.000Z","summary":"OLD-SUMMARY","firstKeptEntryId":"a0","tokensBefore":9}`,
		`{"type":"context_edit","id":"e1","parentId":"c1","timestamp":"2026-01-01T00:00:03.000Z","targetId":"c1","replacement":null}`,
		message("u1", "e1", "user", "FIRST-QUESTION"),
		message("a1", "u1", "assistant", "SECRET-ANSWER"),
		`{"type":"context_edit","id":"e2","parentId":"a1","timestamp":"2026-01-01T00:00:04.000Z","targetId":"a1","replacement":{"content":"REDACTED-ANSWER"}}`,
		message("u2", "e2", "user", "SECOND-QUESTION"),
		message("a2", "u2", "assistant", "SECOND-ANSWER"),
	}
	ps, fm, cwd := agentSession(t, apiOpenAI, `{"text":["SUMMARY"]}`)
	path := filepath.Join(cwd, "edited.jsonl")
	os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
	ps.send(`{"id":"sw","type":"switch_session","sessionPath":"` + path + `"}`)
	ps.waitFor(`"id":"sw"`)
	ps.send(`{"id":"c","type":"compact"}`)
	ps.waitFor(`"id":"c"`)
	ps.close()
	asked, _ := json.Marshal(fm.lastRequest())
	for _, want := range []string{"ZERO-ANSWER", "FIRST-QUESTION", "REDACTED-ANSWER"} {
		if !strings.Contains(string(asked), want) {
			t.Errorf("the summary was not asked of %s:\n%s", want, asked)
		}
	}
	for _, gone := range []string{"SECRET-ANSWER", "OLD-SUMMARY"} {
		if strings.Contains(string(asked), gone) {
			t.Errorf("the summary was asked of %s, which the context does not hold:\n%s", gone, asked)
		}
	}
}

// TestCompactInOrderWithSessionChanges: compact takes its place among
// the session changes. Sent during a run just before a switch_session,
// it compacted, now and then (whichever goroutine came first), the
// session switched to, which the client never asked to compact; now it
// compacts the session it was sent to or fails, answered before the
// switch. Sent just behind one, it compacts the session switched to: the
// switch lets go of its hold on runs before the compact's turn comes
// (it let go after, and the compact failed "A session change is in
// progress" now and then). Each case runs a few times, as the first one
// went either way.
func TestCompactInOrderWithSessionChanges(t *testing.T) {
	endToEnd(t)
	other := strings.Join([]string{
		`{"type":"session","version":3,"id":"1a2b3c4d-0000-4000-8000-000000000001","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}`,
		`{"type":"message","id":"b0000001","parentId":null,"timestamp":"2026-03-16T09:00:01.000Z","message":{"role":"user","content":"OTHER-ONE","timestamp":1}}`,
		`{"type":"message","id":"b0000002","parentId":"b0000001","timestamp":"2026-03-16T09:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Other answer."}],"api":"openai-completions","provider":"fake","model":"fake-model","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":2}}`,
		`{"type":"message","id":"b0000003","parentId":"b0000002","timestamp":"2026-03-16T09:00:03.000Z","message":{"role":"user","content":"OTHER-TWO","timestamp":3}}`,
	}, "\n") + "\n"
	answers := func(ps *processSession) (compact, sw map[string]any, compactFirst bool) {
		for _, rec := range ps.records() {
			switch rec["id"] {
			case "c":
				compact, compactFirst = rec, sw == nil
			case "sw":
				sw = rec
			}
		}
		return compact, sw, compactFirst
	}
	for i := range 8 {
		t.Run(fmt.Sprint("compact then switch ", i), func(t *testing.T) {
			ps, fm, cwd := agentSession(t, apiOpenAI, `{"text":["One."]}
{"text":["Held."],"holdAt":1}
{"text":["SUMMARY"]}`)
			path := filepath.Join(cwd, "other.jsonl")
			os.WriteFile(path, []byte(other), 0o600)
			ps.send(`{"id":"p1","type":"prompt","message":"ONE"}`)
			ps.waitFor(`"agent_settled"`)
			ps.send(`{"id":"p2","type":"prompt","message":"TWO"}`)
			fm.waitAsked(t, 2)
			ps.send(`{"id":"c","type":"compact"}` + "\n" + `{"id":"sw","type":"switch_session","sessionPath":"` + path + `"}`)
			fm.release <- struct{}{}
			ps.waitFor(`"id":"c"`)
			ps.waitFor(`"id":"sw"`)
			ps.close()
			compact, sw, compactFirst := answers(ps)
			if b, _ := os.ReadFile(path); strings.Contains(string(b), `"type":"compaction"`) {
				t.Errorf("a compact sent before switch_session compacted the session switched to:\n%s", b)
			}
			// The run the compact stopped may settle, and the compaction
			// start, before rpi reads switch_session (then the switch
			// stops it, or it ends first), or after (then it fails): each
			// is an order the client could have meant; none touches the
			// session switched to.
			outcome, _ := compact["error"].(string)
			if compact["success"] == true {
				outcome = "compacted"
			}
			switch {
			case !slices.Contains([]string{"A session change is in progress; compact once it is answered.", "Compaction cancelled", "compacted"}, outcome),
				sw["success"] != true, !compactFirst:
				t.Errorf("compact then switch_session: %v, then %v (compact answered first: %v)", compact, sw, compactFirst)
			}
		})
	}
	for i := range 4 {
		t.Run(fmt.Sprint("switch then compact ", i), func(t *testing.T) {
			ps, fm, cwd := agentSession(t, apiOpenAI, `{"text":["One."]}
{"text":["SUMMARY"]}`)
			path := filepath.Join(cwd, "other.jsonl")
			os.WriteFile(path, []byte(other), 0o600)
			ps.send(`{"id":"p1","type":"prompt","message":"ONE"}`)
			ps.waitFor(`"agent_settled"`)
			ps.send(`{"id":"sw","type":"switch_session","sessionPath":"` + path + `"}` + "\n" + `{"id":"c","type":"compact"}`)
			ps.waitFor(`"id":"c"`)
			ps.close()
			compact, sw, compactFirst := answers(ps)
			if data, _ := compact["data"].(map[string]any); data["firstKeptEntryId"] != "b0000003" || sw["success"] != true || compactFirst {
				t.Errorf("switch_session then compact: %v, then %v", sw, compact)
			}
			if asked, _ := json.Marshal(fm.lastRequest()); !strings.Contains(string(asked), "OTHER-ONE") {
				t.Errorf("the summary was not asked of the session switched to:\n%s", asked)
			}
		})
	}
}

// contextOfLines is the context of a session file made of lines, as rpi
// reads it from disk.
func contextOfLines(t *testing.T, lines []string) []any {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ss, err := loadSessionFile(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	return ss.context().messages
}

// TestEstimateLeavesOutWhatIsNeverSent: the context estimate of a
// message counts what the model is sent of it, not an answer's response
// fields, nor a tool result's durationMs or details (an edit's diff and
// patch, the size of the change again twice).
func TestEstimateLeavesOutWhatIsNeverSent(t *testing.T) {
	ms := int64(12345)
	bare := &toolResultMessage{Role: "toolResult", ToolCallID: "c", ToolName: "edit", Content: textBlocks("Successfully replaced 1 block(s) in a.txt."), Timestamp: 1}
	full := *bare
	full.DurationMs, full.Details = &ms, map[string]any{"diff": strings.Repeat("+1 line\n", 1000), "patch": strings.Repeat("+line\n", 1000), "firstChangedLine": 1}
	if got, want := estimateTokens(&full), estimateTokens(bare); got != want {
		t.Errorf("a tool result with details and durationMs is estimated at %d tokens, without them %d", got, want)
	}
	answer := &assistantMessage{Role: "assistant", Content: textBlocks("Done."), StopReason: "stop", Timestamp: 1}
	withMeta := *answer
	withMeta.answerMeta = &answerMeta{ResponseID: "resp_" + strings.Repeat("x", 200), DurationMs: &ms, ThinkingLevel: "high"}
	if got, want := estimateTokens(&withMeta), estimateTokens(answer); got != want {
		t.Errorf("an answer with its response fields is estimated at %d tokens, without them %d", got, want)
	}
}

// TestCompactAfterAFailedWriteInOrder: compact sent when the session
// file's last write failed writes the file again first, in the
// background, and still takes its place among the session changes. It
// took it only after that write, so a switch_session sent right behind
// it went first and the compact then compacted the session switched
// to, which the client never asked to compact.
func TestCompactAfterAFailedWriteInOrder(t *testing.T) {
	endToEnd(t)
	other := strings.Join([]string{
		`{"type":"session","version":3,"id":"1a2b3c4d-0000-4000-8000-000000000001","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}`,
		`{"type":"message","id":"b0000001","parentId":null,"timestamp":"2026-03-16T09:00:01.000Z","message":{"role":"user","content":"OTHER-ONE","timestamp":1}}`,
		`{"type":"message","id":"b0000002","parentId":"b0000001","timestamp":"2026-03-16T09:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Other answer."}],"api":"openai-completions","provider":"fake","model":"fake-model","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":2}}`,
		`{"type":"message","id":"b0000003","parentId":"b0000002","timestamp":"2026-03-16T09:00:03.000Z","message":{"role":"user","content":"OTHER-TWO","timestamp":3}}`,
	}, "\n") + "\n"
	for i := range 4 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			ps, _, cwd := agentSession(t, apiOpenAI, `{"text":["One."]}
{"text":["Two."]}
{"text":["SUMMARY"]}`)
			path := filepath.Join(cwd, "other.jsonl")
			os.WriteFile(path, []byte(other), 0o600)
			ps.send(`{"id":"p1","type":"prompt","message":"ONE"}`)
			ps.waitFor(`"agent_settled"`)
			ps.send(`{"id":"p2","type":"prompt","message":"TWO"}`)
			waitUntil(t, ps, func(out string) bool { return strings.Count(out, `"agent_settled"`) == 2 })
			ps.send(`{"id":"st","type":"get_state"}`)
			ps.waitFor(`"id":"st"`)
			var file string
			for _, rec := range ps.records() {
				if data, _ := rec["data"].(map[string]any); rec["id"] == "st" {
					file, _ = data["sessionFile"].(string)
				}
			}
			// A folder in its place fails the append and the whole
			// write; gone again, the next write succeeds.
			if err := errors.Join(os.Remove(file), os.Mkdir(file, 0o700)); err != nil {
				t.Fatal(err)
			}
			ps.send(`{"id":"n","type":"set_session_name","name":"named"}`)
			ps.waitFor(`Cannot write the session file`)
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			ps.send(`{"id":"c","type":"compact"}` + "\n" + `{"id":"sw","type":"switch_session","sessionPath":"` + path + `"}`)
			ps.waitFor(`"id":"c"`)
			ps.waitFor(`"id":"sw"`)
			ps.close()
			if b, _ := os.ReadFile(path); strings.Contains(string(b), `"type":"compaction"`) {
				t.Errorf("a compact sent before switch_session compacted the session switched to:\n%s", b)
			}
			compactFirst := false
			for _, rec := range ps.records() {
				if rec["id"] == "c" || rec["id"] == "sw" {
					compactFirst = rec["id"] == "c"
					break
				}
			}
			if !compactFirst {
				t.Errorf("switch_session answered before the compact sent before it")
			}
		})
	}
}

// TestEarlierFileListsNotUTF8: an earlier compaction's file names with
// bytes that are not UTF-8 (a session file written by hand, or damaged)
// are read as pi reads the file, each such byte a U+FFFD, so that names
// alike once read are listed once: rpi listed "x\ufffd.md" three times.
func TestEarlierFileListsNotUTF8(t *testing.T) {
	line := `{"type":"compaction","id":"c1","details":{"readFiles":["x` + "\xff" + `.md","x` + "\xfe" + `.md","x\ufffd.md","ｚ","😀","",7],"modifiedFiles":["m` + "\x80" + `","m�"]}}`
	f := newFileLists()
	f.addEarlier(&sessionEntry{raw: []byte(line)})
	got := f.lists()
	want := compactionDetails{ReadFiles: []string{"x\ufffd.md", "😀", "ｚ"}, ModifiedFiles: []string{"m\ufffd"}}
	if !slices.Equal(got.ReadFiles, want.ReadFiles) || !slices.Equal(got.ModifiedFiles, want.ModifiedFiles) {
		t.Errorf("the lists: %q, want %q", got, want)
	}
}
