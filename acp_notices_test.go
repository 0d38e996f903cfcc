package main

// Tests of rpi's notes in an editor (docs/acp.md#notes-and-notices):
// notices with their severities for a client that shows them, and
// compactions as compaction updates for one that tracks them.

import (
	"encoding/json"
	"strings"
	"testing"
)

// acpUpdateLines are updates (session/update's update, as the test
// updates take them) as whole messages, for acpSchemaCheck.
func acpUpdateLines(updates string) []string {
	var lines []string
	for _, params := range strings.Split(updates, "\n") {
		if params != "" {
			lines = append(lines, `{"jsonrpc":"2.0","method":"session/update","params":`+params+`}`)
		}
	}
	return lines
}

// TestACPNoticeSeverities: for a client that shows notices, each note is
// a notice of its severity — the core's warnings and errors as such, the
// warning of a retry (after auto_retry_start, or a compaction summary's
// after summarization_retry_scheduled) and the wait for a free
// slot as info, a provider's error that ends the turn as an error, a
// compaction as info (error when it failed) for a client that does not
// track compactions — titled by its first line that is not blank, its
// other lines the description; a note with no text is no notice. /name's
// answers stay chunks: they answer the turn.
func TestACPNoticeSeverities(t *testing.T) {
	u := newTestUpdates(false)
	u.notices = true
	u.event("auto_retry_start", retryStart{Attempt: 1, MaxAttempts: 3, DelayMs: 2, ErrorMessage: "429"})
	u.notify(noteWarning, "Retrying in 2ms (attempt 1 of 3): 429")
	u.event("summarization_retry_scheduled", summaryRetryScheduled{Attempt: 1, MaxAttempts: 3, DelayMs: 2, ErrorMessage: "503"})
	u.notify(noteWarning, "Retrying the summary in 2ms (attempt 1 of 3): 503")
	u.notify(noteWarning, "Cannot write the session file")
	u.notify(noteError, "\n  \nSomething broke\r\nline two\nline three\n\n")
	u.note("Waiting for a free slot: another session's turn is running.")
	u.noteAs(noteWarning, "")
	u.noteAs(noteWarning, " \n\n")
	u.event("run_failed", runFailed{"400 Bad Request: no"})
	u.event("compaction_end", compactionEnd{Result: &compactionResult{TokensBefore: 900, EstimatedTokensAfter: 90}})
	u.event("compaction_end", compactionEnd{ErrorMessage: "Auto-compaction failed: 500"})
	u.event("compaction_end", compactionEnd{Aborted: true})
	u.compactionFailed("Nothing to compact")
	u.say("Session named: Demo")
	want := `{"sessionId":"S","update":{"sessionUpdate":"notice","severity":"info","title":"Retrying in 2ms (attempt 1 of 3): 429"}}
{"sessionId":"S","update":{"sessionUpdate":"notice","severity":"info","title":"Retrying the summary in 2ms (attempt 1 of 3): 503"}}
{"sessionId":"S","update":{"sessionUpdate":"notice","severity":"warning","title":"Cannot write the session file"}}
{"sessionId":"S","update":{"sessionUpdate":"notice","severity":"error","title":"Something broke","description":"line two\nline three"}}
{"sessionId":"S","update":{"sessionUpdate":"notice","severity":"info","title":"Waiting for a free slot: another session's turn is running."}}
{"sessionId":"S","update":{"sessionUpdate":"notice","severity":"error","title":"400 Bad Request: no"}}
{"sessionId":"S","update":{"sessionUpdate":"notice","severity":"info","title":"Compacted the conversation: 900 tokens before, about 90 after."}}
{"sessionId":"S","update":{"sessionUpdate":"notice","severity":"error","title":"Compaction failed: Auto-compaction failed: 500"}}
{"sessionId":"S","update":{"sessionUpdate":"notice","severity":"info","title":"Compaction cancelled."}}
{"sessionId":"S","update":{"sessionUpdate":"notice","severity":"error","title":"Compaction failed: Nothing to compact"}}
{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Session named: Demo"},"messageId":"m1"}}`
	got := u.take()
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	acpSchemaCheck(t, acpUpdateLines(got), nil)

	// Without notices, the same notes are chunks of their own, the
	// provider's error under its answer's id, as before.
	u = newTestUpdates(false)
	u.event("auto_retry_start", retryStart{Attempt: 1, MaxAttempts: 3, DelayMs: 2, ErrorMessage: "429"})
	u.notify(noteWarning, "Retrying in 2ms (attempt 1 of 3): 429")
	u.notify(noteError, "Something broke\nline two")
	u.event("run_failed", runFailed{"400 Bad Request: no"})
	want = `{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Retrying in 2ms (attempt 1 of 3): 429"},"messageId":"m1"}}
{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Something broke\nline two"},"messageId":"m2"}}
{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"400 Bad Request: no"}}}`
	if got := u.take(); got != want {
		t.Errorf("without notices, got:\n%s\nwant:\n%s", got, want)
	}
}

// TestACPCompactionUpdates: for a client that tracks compactions, each
// is compaction_update in_progress at its start, then its summary and
// completed, or failed with why, or cancelled, under the id its start
// gave; one that ends without a start (it could not start) gets an id of
// its own. A session's branch replays a compaction as its summary and
// completed (for another client, as its note, a chunk even when it shows
// notices: a notice is no part of the history).
func TestACPCompactionUpdates(t *testing.T) {
	u := newTestUpdates(false)
	u.compactions = true
	u.notices = true
	u.event("compaction_start", compactionStart{"manual"})
	u.event("compaction_end", compactionEnd{Reason: "manual", Result: &compactionResult{Summary: "They said hi.", TokensBefore: 900}})
	u.event("compaction_start", compactionStart{"threshold"})
	u.event("compaction_end", compactionEnd{Reason: "threshold", ErrorMessage: "Auto-compaction failed: 500"})
	u.event("compaction_start", compactionStart{"manual"})
	u.event("compaction_end", compactionEnd{Reason: "manual", Aborted: true})
	u.compactionFailed("Nothing to compact (session too small)")
	if end := u.takeCompaction(); end == nil || !end.Aborted {
		t.Errorf("the last compaction's end: %+v", end)
	}
	for _, e := range u.replay([]*sessionEntry{{Type: "compaction", more: &entryMore{TokensBefore: 500, Summary: "sum"}}}, nil) {
		u.send(e)
	}
	want := `{"sessionId":"S","update":{"sessionUpdate":"compaction_update","compactionId":"m1","status":"in_progress"}}
{"sessionId":"S","update":{"sessionUpdate":"compaction_summary_chunk","compactionId":"m1","content":{"type":"text","text":"They said hi."}}}
{"sessionId":"S","update":{"sessionUpdate":"compaction_update","compactionId":"m1","status":"completed"}}
{"sessionId":"S","update":{"sessionUpdate":"compaction_update","compactionId":"m2","status":"in_progress"}}
{"sessionId":"S","update":{"sessionUpdate":"compaction_update","compactionId":"m2","status":"failed","error":"Auto-compaction failed: 500"}}
{"sessionId":"S","update":{"sessionUpdate":"compaction_update","compactionId":"m3","status":"in_progress"}}
{"sessionId":"S","update":{"sessionUpdate":"compaction_update","compactionId":"m3","status":"cancelled"}}
{"sessionId":"S","update":{"sessionUpdate":"compaction_update","compactionId":"m4","status":"failed","error":"Compaction failed: Nothing to compact (session too small)"}}
{"sessionId":"S","update":{"sessionUpdate":"compaction_summary_chunk","compactionId":"m5","content":{"type":"text","text":"sum"}}}
{"sessionId":"S","update":{"sessionUpdate":"compaction_update","compactionId":"m5","status":"completed"}}`
	got := u.take()
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	acpSchemaCheck(t, acpUpdateLines(got), nil)

	u = newTestUpdates(false)
	u.notices = true
	for _, e := range u.replay([]*sessionEntry{{Type: "compaction", more: &entryMore{TokensBefore: 500, Summary: "sum"}}}, nil) {
		u.send(e)
	}
	if got := u.take(); got != `{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Compacted the conversation: 500 tokens before, about 10 after."},"messageId":"m1"}}` {
		t.Errorf("a compaction replayed for a client that shows notices: %s", got)
	}
}

// TestACPCompactionCancelledInAnEditor: /compact cancelled, for a client
// that tracks compactions, ends in_progress then cancelled and answers
// cancelled; every message rpi wrote is one the ACP schema allows.
func TestACPCompactionCancelledInAnEditor(t *testing.T) {
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"text":["`+strings.Repeat("one ", 200)+`"]}
{"text":["`+strings.Repeat("two ", 200)+`"]}
{"text":["a summary"],"holdAt":1}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	sid := openACPSession(t, c, map[string]any{"session": map[string]any{"compaction": map[string]any{}, "notices": map[string]any{}}}, t.TempDir())
	c.call("session/prompt", acpTextPrompt(sid, "one"))
	c.call("session/prompt", acpTextPrompt(sid, "two"))
	from := len(c.messages())
	compact := c.request("session/prompt", acpTextPrompt(sid, "/compact"))
	fm.waitAsked(t, 3) // the summary
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}`)
	fm.release <- struct{}{}
	if got := c.responseTo(compact); stopReasonOf(got.Result) != "cancelled" {
		t.Errorf("/compact cancelled: %s", got.line)
	}
	var statuses []string
	for _, m := range c.messages()[from:] {
		var p struct{ Update acpCompactionUpdate }
		if json.Unmarshal(m.Params, &p) == nil && p.Update.SessionUpdate != "" && p.Update.SessionUpdate != "usage_update" {
			statuses = append(statuses, p.Update.SessionUpdate+" "+p.Update.Status)
		}
	}
	if got := strings.Join(statuses, ", "); got != "compaction_update in_progress, compaction_update cancelled" {
		t.Errorf("the updates of a cancelled compaction: %s", got)
	}
	acpSchemaCheck(t, c.lines(), nil)
}
