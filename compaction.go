package main

// Compaction: the older part of the conversation summarised by the model
// into one compaction entry, on the compact command or automatically near
// the context window (and after an overflow, with one retry).

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// compactionResult is the answer to compact and compaction_end's result.
type compactionResult struct {
	Summary              string            `json:"summary"`
	FirstKeptEntryID     string            `json:"firstKeptEntryId"`
	TokensBefore         int               `json:"tokensBefore"`
	EstimatedTokensAfter int               `json:"estimatedTokensAfter"`
	Usage                usage             `json:"usage"`
	Details              compactionDetails `json:"details"`
}

// compactionDetails are the files the summarised part of the
// conversation read (and did not change) and changed, each list sorted
// as JavaScript sorts strings (by UTF-16 units), as pi 1.6 lists them.
type compactionDetails struct {
	ReadFiles     []string `json:"readFiles"`
	ModifiedFiles []string `json:"modifiedFiles"`
}

// compactionStart and compactionEnd are the data of compaction_start and
// compaction_end.
type compactionStart struct {
	Reason string `json:"reason"`
}

type compactionEnd struct {
	Reason       string            `json:"reason"`
	Result       *compactionResult `json:"result"`
	Aborted      bool              `json:"aborted"`
	WillRetry    bool              `json:"willRetry"`
	ErrorMessage string            `json:"errorMessage,omitempty"`
}

// summaryRetryScheduled and summaryRetryAttemptStart are the data of
// summarization_retry_scheduled and summarization_retry_attempt_start: a
// failed summary request is retried as a failed answer is (auto-retry).
type summaryRetryScheduled struct {
	Attempt      int    `json:"attempt"`
	MaxAttempts  int    `json:"maxAttempts"`
	DelayMs      int64  `json:"delayMs"`
	ErrorMessage string `json:"errorMessage"`
}

type summaryRetryAttemptStart struct {
	Source string `json:"source"` // compaction (rpi makes no branch summaries)
	Reason string `json:"reason"` // the compaction's: manual, threshold or overflow
}

// estimateTokens guesses a message's size in tokens: 4 bytes each of its
// JSON (contextSize).
func estimateTokens(m any) int {
	return contextSize(m) / 4
}

// contextSize is the bytes of m's JSON (messageJSONSize, which does not
// make it) but for what the model is never sent of it: an answer's
// response details (answerMeta), a tool result's durationMs, whose
// digits go with the clock, and its details (an edit's diff and patch,
// which would count a large edit three times).
func contextSize(m any) int {
	switch v := m.(type) {
	case *assistantMessage:
		if v.answerMeta != nil {
			light := *v
			light.answerMeta = nil
			m = &light
		}
	case *toolResultMessage:
		if v.DurationMs != nil || v.Details != nil {
			light := *v
			light.DurationMs, light.Details = nil, nil
			m = &light
		}
	}
	return messageJSONSize(m)
}

// compactionTokens is how full the context is for compaction's
// decisions and its tokensBefore, as pi 1.6 reckons it
// (estimateProjectedContextTokens): the last valid answer's reported
// usage (an answer not failed, not aborted, with tokens) plus an
// estimate of each message after it; or, when there is no such answer
// since the branch's latest compaction or context edit (its usage
// counted what they took out), an estimate of every message, the system
// prompt once (its latest message).
func (c *conversation) compactionTokens(messages []any) int {
	usageHolds, _ := c.sinceCompaction()
	return projectedTokens(messages, usageHolds)
}

// projectedTokens is compactionTokens of messages, whose last valid
// answer's usage is trusted when usageHolds.
func projectedTokens(messages []any, usageHolds bool) int {
	if usageHolds {
		for i := len(messages) - 1; i >= 0; i-- {
			if a, ok := messages[i].(*assistantMessage); ok && validUsage(a) {
				total := usageTokens(a.Usage)
				for _, m := range messages[i+1:] {
					total = addTokens(total, estimateTokens(m))
				}
				return total
			}
		}
	}
	total, system := 0, -1
	for i, m := range messages {
		if r, ok := m.(rawMessage); ok && messageRole(json.RawMessage(r)) == "system" {
			system = i
			continue
		}
		total = addTokens(total, estimateTokens(m))
	}
	if system >= 0 {
		total = addTokens(total, estimateTokens(messages[system]))
	}
	return total
}

// validUsage reports whether an answer's usage says how full the
// context was: it neither failed nor was aborted, and it has tokens.
func validUsage(a *assistantMessage) bool {
	return a.StopReason != "error" && a.StopReason != "aborted" && usageTokens(a.Usage) > 0
}

// sinceCompaction walks the current branch back from its leaf to its
// latest compaction: usageHolds is whether an answer with a valid usage
// comes before (nearer the leaf than) any compaction or context edit;
// edited is whether the context holds a context edit, as pi 1.6's
// projection does: one on the way, or one among the entries the
// compaction kept (before it in the file).
func (c *conversation) sinceCompaction() (usageHolds, edited bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ss := c.sessionFile
	e := ss.byID[ss.leaf]
	for ; e != nil && e.Type != "compaction"; e = ss.parent(e) {
		switch {
		case e.Type == "context_edit":
			edited = true
		case e.Type == "message" && !edited && !usageHolds:
			if a, ok := e.msg.(*assistantMessage); ok && validUsage(a) {
				usageHolds = true
			}
		}
	}
	if e != nil && !edited {
		keptEdit, firstKept := false, e.info().FirstKeptEntryID
		for k := ss.parent(e); k != nil; k = ss.parent(k) {
			keptEdit = keptEdit || k.Type == "context_edit"
			if k.ID == firstKept {
				edited = keptEdit
				break
			}
		}
	}
	return usageHolds, edited
}

// lastAnswer is the context's last answer (a failed or aborted one too);
// nil when it has none.
func (c *conversation) lastAnswer() *assistantMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.msgs) - 1; i >= 0; i-- {
		if a, ok := c.msgs[i].(*assistantMessage); ok {
			return a
		}
	}
	return nil
}

// answeredSinceCompaction reports whether an answer of the context came
// after the branch's latest compaction (or the branch has none), as pi
// 1.6 asks before it checks an answer for a compaction: one the
// compaction kept counted, in its usage, what the compaction took out.
func (c *conversation) answeredSinceCompaction(a *assistantMessage) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ss := c.sessionFile
	for e := ss.byID[ss.leaf]; e != nil; e = ss.parent(e) {
		switch {
		case e.msg == any(a):
			return true
		case e.Type == "compaction":
			return false
		}
	}
	return true
}

// thresholdTokens is how full the context is when its last answer is
// last, as pi 1.6 decides a threshold compaction: with a context edit in
// the context (after the latest compaction or among the entries it
// kept), compactionTokens; else the last answer's usage, taken as it is
// when not zero (a negative count, which only a session file can hold,
// compacts nothing, as in pi); for an answer without one or a failed
// one, the last answer with a usage and an estimate of the messages
// after it (known is false when that answer came before the latest
// compaction: its usage counted what the compaction took out, so there
// is nothing to go by, and no compaction), or an estimate of every
// message when none has a usage.
func (c *conversation) thresholdTokens(last *assistantMessage, messages []any) (tokens int, known bool) {
	usageHolds, edited := c.sinceCompaction()
	if edited {
		return projectedTokens(messages, usageHolds), true
	}
	if t := usageTokens(last.Usage); t != 0 && last.StopReason != "error" {
		return t, true
	}
	for i := len(messages) - 1; i >= 0; i-- {
		if a, ok := messages[i].(*assistantMessage); ok && validUsage(a) {
			if !usageHolds {
				return 0, false
			}
			return projectedTokens(messages, true), true
		}
	}
	total := 0
	for _, m := range messages {
		total = addTokens(total, estimateTokens(m))
	}
	return total, true
}

// compactionPlan is what a compaction will summarise and keep.
type compactionPlan struct {
	model        *model
	summarise    []any  // the messages before the kept turns
	firstKept    string // the entry the kept part starts at
	tokensBefore int
	files        fileLists
}

// planCompaction decides what to summarise: everything before the most
// recent turns worth keepRecentTokens (the cut falls on a user message).
// After an earlier compaction that is its summary, the entries it kept
// and those since: what came before its kept part is in its summary. It
// fails when there is no usable model or nothing new to summarise.
func (s *session) planCompaction() (*compactionPlan, error) {
	s.mu.Lock()
	m := s.model
	s.mu.Unlock()
	if m == nil || !m.usable() {
		return nil, errors.New(noModelMessage)
	}
	plan := &compactionPlan{model: m, tokensBefore: s.conv.compactionTokens(s.conv.messages()), files: newFileLists()}
	path := s.conv.branchEntries()
	from := 0    // where what is not summarised yet begins
	made := path // the entries the context is made of, whose edits count (as ss.context)
	var previous *sessionEntry
	for i := len(path) - 1; i >= 0 && previous == nil; i-- {
		if path[i].Type == "compaction" {
			previous, from = path[i], i+1
			firstKept := previous.info().FirstKeptEntryID // read from its line once, not once an entry
			if kept := slices.IndexFunc(path[:i], func(e *sessionEntry) bool { return e.ID == firstKept }); kept >= 0 {
				from = kept
			}
			made = slices.Concat(path[i:i+1], path[from:])
		}
	}
	// What is summarised is what the context has: without what a
	// context_edit took out (an earlier summary too), with what one put
	// in place of a message's content, as pi 1.6 summarises it.
	edits := contextEdits(made)
	omit := map[string]bool{}
	for id, replacement := range edits {
		omit[id] = isNull(replacement)
	}
	if previous != nil {
		plan.files.addEarlier(previous)
	}
	if previous != nil && !omit[previous.ID] {
		plan.summarise = []any{&summaryMessage{Role: "compactionSummary", Summary: previous.info().Summary}}
	}
	// As pi cuts: back from the newest message until keepRecentTokens are
	// kept, then forward to the nearest entry the kept part can start at,
	// within a turn too when one turn alone is larger than that. Where
	// none lies after (the newest answer's tool results alone are more),
	// back to the nearest before: pi keeps everything then, and an
	// overflow there could never be recovered from.
	var cuts []int
	for i := from; i < len(path); i++ {
		if canStartKept(path[i]) && !omit[path[i].ID] {
			cuts = append(cuts, i)
		}
	}
	start := len(path)
	if len(cuts) > 0 {
		start = cuts[0]
	}
	kept, keepRecent := 0, s.set.compaction.forModel(m).KeepRecentTokens
	for i := len(path) - 1; i >= from; i-- {
		if path[i].Type != "message" || failedAnswer(path[i]) || omit[path[i].ID] {
			continue
		}
		if kept += path[i].msgSize / 4; kept >= keepRecent {
			for _, c := range cuts { // the first at or after i, else the last before
				start = c
				if c >= i {
					break
				}
			}
			break
		}
	}
	older := 0 // the messages summarised besides an earlier summary
	for _, e := range path[from:start] {
		msg := e.contextMessage()
		// A system message is the prompt, not the conversation: the
		// compaction keeps it whole (systemMessage), as pi 1.6.
		if msg == nil || omit[e.ID] || e.role() == "system" {
			continue
		}
		if edit, edited := edits[e.ID]; edited {
			msg = editedMessage(msg, edit)
		}
		plan.summarise = append(plan.summarise, msg)
		older++
		if a, ok := msg.(*assistantMessage); ok {
			plan.files.addCalls(a)
		}
	}
	if start <= from || start >= len(path) || older == 0 {
		return nil, errors.New("Nothing to compact (session too small)")
	}
	plan.firstKept = path[start].ID
	return plan, nil
}

// canStartKept reports whether what a compaction keeps can start at an
// entry: a user message or the model's answer (never a tool result, whose
// call would be summarised away, nor a failed answer, which the context
// leaves out), the user's bash, a custom message, a branch summary.
func canStartKept(e *sessionEntry) bool {
	switch e.Type {
	case "custom_message", "branch_summary":
		return true
	case "message":
		switch e.role() {
		case "user", "bashExecution":
			return true
		case "assistant":
			return !failedAnswer(e)
		}
	}
	return false
}

// failedAnswer reports whether an entry is an answer that failed or was
// aborted: the context leaves it out.
func failedAnswer(e *sessionEntry) bool {
	a, ok := e.msg.(*assistantMessage)
	return ok && (a.StopReason == "error" || a.StopReason == "aborted")
}

// summarise carries out a plan for a compaction of reason: the plan's
// model writes the summary, a compaction entry records it, and the
// context becomes the summary plus the kept turns. Abort (run's context)
// cancels it.
func (s *session) summarise(run *agentRun, plan *compactionPlan, instructions, reason string) (compactionResult, error) {
	transcript := summaryTranscript(contextMessages(plan.summarise))
	prompt := "Summarise the conversation below so that work on it can go on without it: the goal, decisions made, " +
		"files read and changed, the current state, and what remains to do. Be concise and concrete."
	if instructions != "" {
		prompt += "\n\nAlso: " + instructions
	}
	answer := &assistantMessage{Role: "assistant", Content: []contentBlock{}}
	req := streamRequest{model: plan.model, system: "You write summaries of coding conversations.", thinking: "off", secrets: s.set.secrets, runKey: s.runKeyCommand, idle: s.set.httpIdle, clock: s.env.clock,
		messages: []any{&userMessage{Role: "user", Content: textBlocks(prompt + "\n\n<conversation>\n" + transcript + "\n</conversation>")}}}
	req.timeout = s.set.retry.requestTimeout()
	req.sessionID, req.longCache = s.conv.info().id, s.longCacheRetention()
	if err := s.summaryAnswer(run, req, answer, reason); err != nil {
		return compactionResult{}, err
	}
	summary := strings.TrimSpace(answer.text())
	if summary == "" {
		return compactionResult{}, errors.New("Compaction failed: the model gave an empty summary")
	}
	details := plan.files.lists()
	res := compactionResult{Summary: summary + details.text(), FirstKeptEntryID: plan.firstKept, TokensBefore: plan.tokensBefore,
		Usage: answer.Usage, Details: details}
	fields := []entryField{{"summary", res.Summary}, {"firstKeptEntryId", res.FirstKeptEntryID},
		{"tokensBefore", res.TokensBefore}, {"details", res.Details}, {"usage", res.Usage}}
	// As pi 1.6: the compaction keeps the system prompt and tools the
	// conversation had, whole, since the system messages it summarised
	// leave the context.
	kept := s.conv.prompt()
	if head := kept.head(s.env.clock.Now().UnixMilli()); head != nil {
		fields = append(fields, entryField{"systemMessage", head})
	}
	if err := s.conv.compacted(fields); err != nil {
		return compactionResult{}, fmt.Errorf("Compaction failed: %v", err)
	}
	for _, m := range s.conv.messages() {
		res.EstimatedTokensAfter += estimateTokens(m)
	}
	return res, nil
}

// summaryAnswer asks for the summary (into answer), retrying a failure
// as a failed answer is retried (retries, retryWait): each retry is told
// by summarization_retry_scheduled before its wait and
// summarization_retry_attempt_start after it, and once any was,
// summarization_retry_finished tells the end, whether the summary came,
// the retries ran out or abort ended them (during the wait too).
func (s *session) summaryAnswer(run *agentRun, req streamRequest, answer *assistantMessage, reason string) error {
	attempt := 0
	defer func() {
		if attempt > 0 {
			s.emit("summarization_retry_finished", nil)
		}
	}()
	cancelled := errors.New("Compaction cancelled")
	for {
		*answer = assistantMessage{Role: "assistant", Content: []contentBlock{}}
		ctx, cancel := context.WithTimeout(run.ctx, modelTimeout)
		err := callModel(ctx, req, answer, func() {}, func(assistantEvent) {})
		cancel()
		switch {
		case err == nil:
			return nil
		case run.ctx.Err() != nil:
			return cancelled
		}
		message, retryAfter, final := s.callFailure(err)
		if !s.retries(attempt, message, final) {
			return fmt.Errorf("Compaction failed: %s", message)
		}
		attempt++
		delay := s.retryWait(attempt, retryAfter)
		elapsed, stop := after(s.env.clock, delay) // set before it is told: a fake clock's test can move it then
		s.emit("summarization_retry_scheduled", summaryRetryScheduled{Attempt: attempt, MaxAttempts: s.set.retry.MaxRetries,
			DelayMs: delay.Milliseconds(), ErrorMessage: message})
		s.tell(uiRequest{Method: "notify", NotifyType: "warning",
			Message: fmt.Sprintf("Retrying the summary in %v (attempt %d of %d): %s", delay, attempt, s.set.retry.MaxRetries, message)})
		select {
		case <-elapsed:
		case <-run.ctx.Done():
		}
		stop()
		if run.ctx.Err() != nil {
			return cancelled
		}
		s.emit("summarization_retry_attempt_start", summaryRetryAttemptStart{Source: "compaction", Reason: reason})
	}
}

// maxSummaryToolResult is how many characters of a tool result the
// summary is asked of, as in pi.
const maxSummaryToolResult = 2000

// summaryTranscript is the conversation as the summary is asked of it,
// as pi writes it: "[User]: …", "[Assistant thinking]: …", "[Assistant]:
// …", "[Assistant tool calls]: name(arguments); …" and "[Tool result]: …",
// text only (an image's base64 would fill the window), each tool result
// cut to maxSummaryToolResult characters.
func summaryTranscript(messages []any) string {
	var parts []string
	blocksOf := func(content []contentBlock, typ string) []string {
		var out []string
		for _, b := range content {
			switch {
			case b.Type != typ:
			case typ == "text":
				out = append(out, b.Text)
			case typ == "thinking":
				out = append(out, b.Thinking)
			case typ == "toolCall":
				out = append(out, b.Name+"("+string(b.Arguments)+")")
			}
		}
		return out
	}
	add := func(label string, texts []string, sep string) {
		if text := strings.Join(texts, sep); text != "" {
			parts = append(parts, label+text)
		}
	}
	for _, m := range messages {
		switch m := m.(type) {
		case *userMessage:
			add("[User]: ", blocksOf(m.Content, "text"), "")
		case *assistantMessage:
			add("[Assistant thinking]: ", blocksOf(m.Content, "thinking"), "\n")
			add("[Assistant]: ", blocksOf(m.Content, "text"), "\n")
			add("[Assistant tool calls]: ", blocksOf(m.Content, "toolCall"), "; ")
		case *toolResultMessage:
			text := []rune(strings.Join(blocksOf(m.Content, "text"), ""))
			if len(text) > maxSummaryToolResult {
				text = append(text[:maxSummaryToolResult:maxSummaryToolResult],
					[]rune(fmt.Sprintf("\n\n[... %d more characters truncated]", len(text)-maxSummaryToolResult))...)
			}
			add("[Tool result]: ", []string{string(text)}, "")
		}
	}
	return strings.Join(parts, "\n\n")
}

// fileLists are the files a compaction's summarised part read and
// changed, gathered as pi 1.6 gathers them: the earlier compaction's
// lists, then the path of each read, write and edit the model called.
type fileLists struct{ read, modified map[string]bool }

func newFileLists() fileLists {
	return fileLists{read: map[string]bool{}, modified: map[string]bool{}}
}

// addEarlier adds the lists of an earlier compaction's details, unless
// an extension wrote it (fromHook), as pi does: what it summarised is in
// this summary too, so its files are.
func (f fileLists) addEarlier(e *sessionEntry) {
	line := e.line()
	if hook, ok := exactMember(line, "fromHook"); ok && truthy(hook) {
		return
	}
	details, _ := exactMember(line, "details")
	details, _ = validRaw(details) // as pi reads the file: each byte that is not UTF-8 a U+FFFD
	addNames(f.read, details, "readFiles")
	addNames(f.modified, details, "modifiedFiles")
}

// addNames adds to set the non-empty strings of the array that is the
// member list of details (anything else in it is passed over).
func addNames(set map[string]bool, details []byte, list string) {
	raw, _ := exactMember(details, list)
	var names []json.RawMessage
	if json.Unmarshal(raw, &names) != nil {
		return
	}
	for _, raw := range names {
		var name string
		if len(raw) > 0 && raw[0] == '"' && unquote(raw, &name) && name != "" {
			set[name] = true
		}
	}
}

// truthy reports whether a JSON value is true as JavaScript tests it.
func truthy(v []byte) bool {
	switch string(v) {
	case "false", "null", "0", `""`, "-0":
		return false
	}
	return true
}

// addCalls adds the files an answer's tool calls read and changed: a
// call's "path" argument, when it is a non-empty string.
func (f fileLists) addCalls(a *assistantMessage) {
	for _, c := range a.Content {
		if c.Type != "toolCall" || c.Name != "read" && c.Name != "write" && c.Name != "edit" {
			continue
		}
		var path string
		if raw, ok := exactMember(c.Arguments, "path"); !ok || raw[0] != '"' || !unquote(raw, &path) || path == "" {
			continue
		}
		if c.Name == "read" {
			f.read[path] = true
		} else {
			f.modified[path] = true
		}
	}
}

// lists are the files read and not changed, and those changed, each
// sorted by UTF-16 units.
func (f fileLists) lists() compactionDetails {
	d := compactionDetails{ReadFiles: []string{}, ModifiedFiles: []string{}}
	for name := range f.read {
		if !f.modified[name] {
			d.ReadFiles = append(d.ReadFiles, name)
		}
	}
	for name := range f.modified {
		d.ModifiedFiles = append(d.ModifiedFiles, name)
	}
	slices.SortFunc(d.ReadFiles, compareUTF16)
	slices.SortFunc(d.ModifiedFiles, compareUTF16)
	return d
}

// text is what pi 1.6 appends to a summary: the lists in tags, after a
// blank line (nothing when both are empty).
func (d compactionDetails) text() string {
	var sections []string
	if len(d.ReadFiles) > 0 {
		sections = append(sections, "<read-files>\n"+strings.Join(d.ReadFiles, "\n")+"\n</read-files>")
	}
	if len(d.ModifiedFiles) > 0 {
		sections = append(sections, "<modified-files>\n"+strings.Join(d.ModifiedFiles, "\n")+"\n</modified-files>")
	}
	if len(sections) == 0 {
		return ""
	}
	return "\n\n" + strings.Join(sections, "\n\n")
}

// compareUTF16 orders strings as JavaScript's sort does: by UTF-16 code
// units, where a character past U+FFFF (two units, the first from
// U+D800) comes before U+E000–U+FFFF.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return cmp.Compare(utf16Key(ra), utf16Key(rb))
		}
		a, b = a[na:], b[nb:]
	}
	return cmp.Compare(len(a), len(b))
}

// utf16Key is a character's UTF-16 units as one number that orders as
// they do: the first unit in the high half.
func utf16Key(r rune) uint32 {
	if hi, lo := utf16.EncodeRune(r); hi != utf8.RuneError {
		return uint32(hi)<<16 | uint32(lo)
	}
	return uint32(r) << 16
}

// compact summarises the older part of the conversation (a running
// agent is aborted first) as a run of its own, which abort reaches (it
// then fails with "Compaction cancelled"); done gets the result, after
// compaction_start and compaction_end. When the session file's last write
// failed, it is written again first, in the background. leaveQueued: what
// is queued when it ends waits for the next prompt, as pi 1.6 leaves it
// (rpc's compact, during which a prompt is refused as in pi); else it
// goes on as an agent run (ACP's /compact, whose later prompts it queues).
func (s *session) compact(instructions string, leaveQueued bool, done func(compactionResult, error)) {
	// Its turn among the session changes is taken now, in order with the
	// commands around it, not once the file is written.
	after, turn := s.takeChangeTurn()
	if s.conv.writeFailed() {
		s.goBackground(func() {
			if after != nil {
				<-after
			}
			if err := s.conv.writable(); err != nil {
				done(compactionResult{}, err)
				close(turn)
				return
			}
			s.compactNow(nil, turn, instructions, leaveQueued, done)
		})
		return
	}
	s.compactNow(after, turn, instructions, leaveQueued, done)
}

// compactNow takes its turn among the session changes (changeSession):
// it starts once the changes asked for before it are applied, on the
// session they left, and a change asked for after it waits until it has
// started, then stops it as it stops a run (a change already waiting
// then makes it fail as one in progress does). It never compacts a
// session a change sent after it made current. after and turn are its
// turn (takeChangeTurn).
func (s *session) compactNow(after <-chan struct{}, turn chan struct{}, instructions string, leaveQueued bool, done func(compactionResult, error)) {
	if busy := s.holdRuns(); !busy && isClosed(after) {
		// The plan reads only memory: made now, a too-small session fails
		// in order, and the compaction starts before the next command.
		s.startCompaction(instructions, leaveQueued, done)
		close(turn)
		return
	}
	settled := s.abort()
	s.goBackground(func() {
		defer close(turn)
		if after != nil {
			<-after
		}
		if settled != nil {
			<-settled
		}
		s.startCompaction(instructions, leaveQueued, done)
	})
}

// startCompaction plans the compaction and starts its run; the caller
// holds runs (holdRuns), and the start ends that hold.
func (s *session) startCompaction(instructions string, leaveQueued bool, done func(compactionResult, error)) {
	plan, err := s.planCompaction()
	if err != nil {
		s.releaseRuns()
		done(compactionResult{}, err)
		s.startWaitingLoops() // a loop's fire that waited for the compaction
		return
	}
	s.mu.Lock()
	run, err := s.tryStartRunLocked(compacting, true)
	if run != nil {
		run.leaveQueued = leaveQueued // in the step it starts: a prompt then is refused
	}
	s.mu.Unlock()
	if err == errChanging {
		err = errors.New("A session change is in progress; compact once it is answered.")
	}
	if err != nil {
		done(compactionResult{}, err)
		return
	}
	s.goBackground(func() { s.compactRun(run, plan, instructions, done) })
}

// compactRun carries out a plan as a run of its own (so abort reaches
// it), settles the run, and passes the result to done once the session
// is idle, before the run counts as settled: a prompt sent on seeing the
// answer finds the session idle (it could fail as "already processing"),
// and an abort that stopped it is answered after it.
func (s *session) compactRun(run *agentRun, plan *compactionPlan, instructions string, done func(compactionResult, error)) {
	s.emit("compaction_start", compactionStart{"manual"})
	res, err := s.summarise(run, plan, instructions, "manual")
	end := compactionEnd{Reason: "manual", Aborted: run.ctx.Err() != nil}
	if err == nil {
		end.Result = &res
	} else if !end.Aborted {
		end.ErrorMessage = err.Error()
	}
	s.emit("compaction_end", end)
	run.settling = func() { done(res, err) }
	next := s.settle(run)
	if next != nil { // the run goes on with what was queued: settling is for its end no more
		run.settling = nil
		done(res, err)
		s.runAgent(run, next, goingOn)
	}
}

// contextOverflow matches provider errors that say the context is too
// long, as pi 1.6 knows them (compiled at first use): Anthropic's "prompt
// is too long" and 413 request_too_large, OpenAI's, Gemini's "input token
// count … exceeds the maximum", xAI's, Groq's, OpenRouter's, Together's,
// Mistral's, Bedrock's, llama.cpp's, LM Studio's, Ollama's, Kimi's, z.ai's,
// DashScope's, GitHub Copilot's, DS4's, and the generic ones; a bare 413.
var contextOverflow = lazy[*regexp.Regexp]{build: func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)prompt (?:is )?too long|prompt exceeds max length|request_too_large|input is too long for requested model|` +
		`exceeds the context window|exceeds (?:the )?(?:model'?s )?maximum context length(?: of [\d,]+ tokens?|\s*\([\d,]+\))|` +
		`context window exceeded|input token count.*exceeds the maximum|maximum prompt length is \d+|reduce the length of the messages|` +
		`maximum context length is \d+ tokens|exceeds (?:the )?maximum allowed input length of [\d,]+ tokens?|` +
		`input \(\d+ tokens\) is longer than the model'?s context length \(\d+ tokens\)|exceeds the limit of \d+|` +
		`exceeds the available context size|greater than the context length|context window exceeds limit|exceeded model token limit|` +
		`too large for model with \d+ maximum context length|prompt has [\d,]+ tokens?, but the configured context size is [\d,]+ tokens?|` +
		`model_context_window_exceeded|range of input length should be|context[_ ]length[_ ]exceeded|too many tokens|token limit exceeded|` +
		`^(?:[\w -]+ API error \(413\):|413(?:\s|:|$))`)
}}

// notOverflow matches errors that can read like an overflow but are not
// (throttling: Bedrock's "Too many tokens, please wait"), which pi 1.6
// leaves out too.
var notOverflow = lazy[*regexp.Regexp]{build: func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)^(?:Throttling error|Service unavailable):|rate limit|too many requests`)
}}

// cerebrasOverflow is Cerebras's overflow: a 400 or 413 with no body, as
// rpi words a failed request ("400 Bad Request: ").
var cerebrasOverflow = lazy[*regexp.Regexp]{build: func() *regexp.Regexp {
	return regexp.MustCompile(`^4(?:00|13) [^:]*:\s*$`)
}}

// overflowed reports whether a failed answer says the context was too
// long (pi 1.6's isContextOverflow of an error).
func overflowed(m *assistantMessage) bool {
	text := m.ErrorMessage
	if m.StopReason != "error" || text == "" || notOverflow.get().MatchString(text) {
		return false
	}
	return contextOverflow.get().MatchString(text) || m.Provider == "cerebras" && cerebrasOverflow.get().MatchString(text)
}

// recovery is what auto-compaction makes of a run's last answer, as pi
// 1.6 decides it.
type recovery int

const (
	noRecovery     recovery = iota
	overflowKept            // a complete answer over the window: compact, keep it, no retry
	overflowRetry           // the context overflowed: compact without the answer, run again
	truncatedRetry          // cut short below the model's maxTokens: compact without it, run again
)

// recoveryFor is pi 1.6's isContextOverflow and isRecoverableLength of
// the last answer, for the model in use m; an answer of another model
// (the user switched during the run) or an aborted one asks for none.
// Besides an error that says so, the context overflowed when a complete
// answer reports more input (with what was read from the cache) than the
// window, and when an answer stopped for its length without a token of
// output and its input fills 99% of the window (Xiaomi MiMo cuts the
// input to fit). An answer stopped for its length is cut short when it
// wrote fewer tokens than the model's own maxTokens (rpi asks for less
// near a full window: answerTokens). Counts are added as floats: a
// server's usage can be anything an int holds.
func recoveryFor(last *assistantMessage, m *model) recovery {
	if last == nil || m == nil || last.StopReason == "aborted" || last.Provider != m.Provider || last.Model != m.ID {
		return noRecovery
	}
	input, window := float64(last.Usage.Input)+float64(last.Usage.CacheRead), float64(m.ContextWindow)
	switch {
	case overflowed(last):
		return overflowRetry
	case m.ContextWindow <= 0:
	case last.StopReason == "stop" && input > window:
		return overflowKept
	case last.StopReason == "length" && last.Usage.Output == 0 && input >= window*0.99:
		return overflowRetry
	}
	if last.StopReason == "length" && m.MaxTokens > 0 && last.Usage.Output < m.MaxTokens {
		return truncatedRetry
	}
	return noRecovery
}

// autoCompact is pi 1.6's check of the last answer for a compaction: at
// a run's end, and before a prompt is sent (beforePrompt: the context's
// last answer, an aborted one too, so that a session opened past the
// threshold or a model switched to a smaller window compacts then). It
// compacts when the context nears the window (reason "threshold"), or
// when the answer overflowed it or was cut short (reason "overflow";
// recoveryFor). A failed or cut-short answer leaves the context for good
// before the compaction and the caller runs again, once: when that is
// asked again before a user message or a good answer (s.recoveryTried),
// compaction_end says the recovery failed. An answer from before the
// branch's latest compaction asks for nothing: its usage counted what
// the compaction took out. It reports whether a compaction started
// (runAutoCompaction) and whether to retry.
func (s *session) autoCompact(run *agentRun, last *assistantMessage, beforePrompt bool) (started, retry bool) {
	s.mu.Lock()
	enabled, m, tried := s.autoCompaction, s.model, s.recoveryTried
	s.mu.Unlock()
	// A run the user stopped (during a tool, after an answer cut short)
	// is neither compacted nor run again: pi's run ends in an aborted
	// answer there.
	if !enabled || m == nil || last == nil || run.ctx.Err() != nil || !beforePrompt && last.StopReason == "aborted" ||
		!s.conv.answeredSinceCompaction(last) {
		return false, false
	}
	rec := recoveryFor(last, m)
	retry = rec == overflowRetry || rec == truncatedRetry
	reason := ""
	switch {
	case rec != noRecovery:
		reason = "overflow"
	default:
		tokens, known := s.conv.thresholdTokens(last, s.conv.messages())
		if !known || tokens <= m.ContextWindow-s.set.compaction.forModel(m).ReserveTokens {
			return false, false
		}
		reason = "threshold"
	}
	if retry && tried {
		text := "Context overflow recovery failed after one compact-and-retry attempt. Try reducing context or switching to a larger-context model."
		if rec == truncatedRetry {
			text = "Truncated response recovery failed after one compact-and-retry attempt."
		}
		s.emit("compaction_end", compactionEnd{Reason: reason, ErrorMessage: text})
		return false, false
	}
	if retry {
		s.setRecoveryTried(true)
		s.omitAnswer(last) // the failed attempt is not part of what gets compacted, nor sent again
	}
	return s.runAutoCompaction(run, reason, retry)
}

// compactBetweenTurns is pi 1.6's check before each turn of a run after
// its first: a context past the threshold of the model in use's window
// (compactionTokens) is compacted (reason "threshold") before the next
// answer is asked. A run the user stopped is not. It reports whether a
// compaction started.
func (s *session) compactBetweenTurns(run *agentRun) bool {
	s.mu.Lock()
	enabled, m := s.autoCompaction, s.model
	s.mu.Unlock()
	if !enabled || m == nil || m.ContextWindow <= 0 || run.ctx.Err() != nil ||
		s.conv.compactionTokens(s.conv.messages()) <= m.ContextWindow-s.set.compaction.forModel(m).ReserveTokens {
		return false
	}
	started, _ := s.runAutoCompaction(run, "threshold", false)
	return started
}

// runAutoCompaction compacts for reason, as pi 1.6's _runAutoCompaction:
// nothing at all, no event either, when there is nothing to compact (or
// no usable model); else compaction_start, the summary, compaction_end
// (willRetry: retry) and a notice. It reports whether it started
// (compaction_start was written) and whether the caller is to run again
// (retried: retry, and the compaction was made).
func (s *session) runAutoCompaction(run *agentRun, reason string, retry bool) (started, retried bool) {
	plan, err := s.planCompaction()
	if err != nil {
		return false, false
	}
	s.emit("compaction_start", compactionStart{reason})
	s.setPhase(compacting)
	defer s.setPhase(running)
	res, err := s.summarise(run, plan, "", reason)
	switch {
	case run.ctx.Err() != nil:
		s.emit("compaction_end", compactionEnd{Reason: reason, Aborted: true})
		return true, false
	case err != nil:
		prefix := "Auto-compaction failed: "
		if reason == "overflow" {
			prefix = "Context overflow recovery failed: "
		}
		s.emit("compaction_end", compactionEnd{Reason: reason, ErrorMessage: prefix + strings.TrimPrefix(err.Error(), "Compaction failed: ")})
		return true, false
	}
	s.emit("compaction_end", compactionEnd{Reason: reason, Result: &res, WillRetry: retry})
	s.tell(uiRequest{Method: "notify", NotifyType: "info",
		Message: fmt.Sprintf("Compacted the conversation (%d tokens before; %s)", res.TokensBefore, reason)})
	return true, retry
}

// setRecoveryTried records whether an overflow or cut-short answer was
// compacted away and the run went on again (autoCompact): as in pi 1.6,
// it holds until a user message enters or an answer ends neither failed
// nor cut short, across runs, and a session change ends it.
func (s *session) setRecoveryTried(tried bool) {
	s.mu.Lock()
	s.recoveryTried = tried
	s.mu.Unlock()
}
