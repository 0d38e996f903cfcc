package main

// rpi's notes to the user in an editor (docs/acp.md#notes-and-notices):
// each an agent_message_chunk of its own, or, when the client shows
// notices (session.notices), a notice with a severity; and compactions,
// which a client that tracks them (session.compaction) gets as
// compaction_update and compaction_summary_chunk instead of their note.

import "strings"

// The severities of rpi's notes: info (a retry, a wait for a free slot,
// a compaction done), warning (the core's warnings), error (the core's
// errors, a provider's error that ended the turn, a compaction failed).
const (
	noteInfo    = "info"
	noteWarning = "warning"
	noteError   = "error"
)

// acpNotice is a notice: one of rpi's notes, for a client that shows
// them.
type acpNotice struct {
	SessionUpdate string `json:"sessionUpdate"` // notice
	Severity      string `json:"severity"`
	Title         string `json:"title"`                 // never empty
	Description   string `json:"description,omitempty"` // the note's other lines
}

// acpNoticeOf is a note as a notice: its first line that is not blank
// the title, the lines after it (blank ones around them left out) the
// description; false for a note that is all blank.
func acpNoticeOf(severity, text string) (acpNotice, bool) {
	rest := text
	for rest != "" {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		if title := strings.TrimRight(line, "\r"); strings.TrimSpace(title) != "" {
			return acpNotice{"notice", severity, title, strings.Trim(rest, "\r\n")}, true
		}
	}
	return acpNotice{}, false
}

// acpCompactionUpdate is a compaction's state: in_progress, then
// completed, failed (with why) or cancelled.
type acpCompactionUpdate struct {
	SessionUpdate string `json:"sessionUpdate"` // compaction_update
	CompactionID  string `json:"compactionId"`
	Status        string `json:"status"`
	Error         string `json:"error,omitempty"`
}

// acpCompactionSummary is a compaction's summary (rpi sends it whole, in
// one chunk, once it is made).
type acpCompactionSummary struct {
	SessionUpdate string  `json:"sessionUpdate"` // compaction_summary_chunk
	CompactionID  string  `json:"compactionId"`
	Content       acpText `json:"content"`
}

// noteAs sends one of rpi's notes: a notice of severity when the client
// shows notices, else an agent_message_chunk of its own.
func (u *acpUpdates) noteAs(severity, text string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.noteLocked(severity, text)
}

func (u *acpUpdates) noteLocked(severity, text string) {
	switch {
	case text == "":
	case u.notices:
		if n, ok := acpNoticeOf(severity, text); ok {
			u.emit(n)
		}
	default:
		u.emit(acpChunk{"agent_message_chunk", acpTextBlock(text), u.newID()})
	}
}

// say sends an answer of rpi's own commands (/name): an
// agent_message_chunk of its own, for every client: it is the turn's
// answer, not a note.
func (u *acpUpdates) say(text string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.emit(acpChunk{"agent_message_chunk", acpTextBlock(text), u.newID()})
}

// notify sends the core's notify warning or error as a note of that
// severity; the warning that follows auto_retry_start or
// summarization_retry_scheduled (it says when the retry comes) is a
// retry's, an info.
func (u *acpUpdates) notify(kind, text string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if kind == noteWarning && u.retrying {
		kind = noteInfo
	}
	u.retrying = false
	u.noteLocked(kind, text)
}

// compactionStarted opens a compaction for a client that tracks them:
// compaction_update in_progress under a new id. Called with mu held.
func (u *acpUpdates) compactionStarted() {
	if u.compactions {
		u.compactionID = u.newID()
		u.emit(acpCompactionUpdate{"compaction_update", u.compactionID, "in_progress", ""})
	}
}

// compactionEnded tells how a compaction ended: to a client that tracks
// them, its summary (when it made one) and its compaction_update
// (completed, failed with why, or cancelled), under the id its start
// gave (a new one if none did); to another, its note. Called with mu
// held.
func (u *acpUpdates) compactionEnded(d compactionEnd) {
	if !u.compactions {
		severity := noteInfo
		if d.ErrorMessage != "" {
			severity = noteError
		}
		u.noteLocked(severity, acpCompactionNote(d))
		return
	}
	id := u.compactionID
	if id == "" {
		id = u.newID()
	}
	u.compactionID = ""
	end := acpCompactionUpdate{"compaction_update", id, "completed", ""}
	switch {
	case d.Aborted:
		end.Status = "cancelled"
	case d.ErrorMessage != "":
		end.Status, end.Error = "failed", d.ErrorMessage
	case d.Result != nil && d.Result.Summary != "":
		u.emit(acpCompactionSummary{"compaction_summary_chunk", id, acpTextBlock(d.Result.Summary)})
	}
	u.emit(end)
}

// compactionFailed tells of a compaction that could not start (why):
// a failed compaction for a client that tracks them, else an error note.
func (u *acpUpdates) compactionFailed(why string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.compactionEnded(compactionEnd{ErrorMessage: "Compaction failed: " + why})
}

// replayCompaction is a compaction of a session's branch replayed: its
// note (as an agent_message_chunk: a notice is no part of the history),
// or, for a client that tracks compactions, its summary and its end,
// completed. Called with mu held.
func (u *acpUpdates) replayCompaction(e *sessionEntry) []any {
	info := e.info()
	if !u.compactions {
		return []any{acpChunk{"agent_message_chunk", acpTextBlock(acpCompactionNote(compactionEnd{
			Result: &compactionResult{TokensBefore: info.TokensBefore, EstimatedTokensAfter: estimateTokens(&summaryMessage{Summary: info.Summary})}})), u.newID()}}
	}
	id := u.newID()
	var out []any
	if info.Summary != "" {
		out = append(out, acpCompactionSummary{"compaction_summary_chunk", id, acpTextBlock(info.Summary)})
	}
	return append(out, acpCompactionUpdate{"compaction_update", id, "completed", ""})
}
