package main

// ACP's session updates (docs/acp.md): the core's events
// mapped to session/update notifications — message and thought chunks,
// one tool_call per call then its updates, diffs, Zed's display-only
// terminal, the plan, usage, the session's title — and what the session
// responses carry (config options, modes, commands), and the rows of
// session/list (session/load's replay is acp_replay.go).

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ---- The shapes ----

// acpText and acpImage are ContentBlocks.
type acpText struct {
	Type string `json:"type"` // text
	Text string `json:"text"`
}

type acpImage struct {
	Type     string `json:"type"` // image
	Data     string `json:"data"`
	MimeType string `json:"mimeType"`
}

func acpTextBlock(text string) acpText { return acpText{"text", text} }

// acpChunk is a user_message_chunk, agent_message_chunk or
// agent_thought_chunk.
type acpChunk struct {
	SessionUpdate string `json:"sessionUpdate"`
	Content       any    `json:"content"`
	MessageID     string `json:"messageId,omitempty"`
}

// acpContentItem, acpDiff and acpTerminal are a tool call's content.
type acpContentItem struct {
	Type    string `json:"type"` // content
	Content any    `json:"content"`
}

type acpDiff struct {
	Type    string  `json:"type"` // diff
	Path    string  `json:"path"`
	OldText *string `json:"oldText"` // null for a new file
	NewText string  `json:"newText"`
}

type acpTerminal struct {
	Type       string `json:"type"` // terminal
	TerminalID string `json:"terminalId"`
}

type acpTerminalInfo struct {
	TerminalID string `json:"terminal_id"`
	Cwd        string `json:"cwd"`
}

type acpTerminalOutput struct {
	TerminalID string `json:"terminal_id"`
	Data       string `json:"data"`
}

type acpTerminalExit struct {
	TerminalID string  `json:"terminal_id"`
	ExitCode   *int    `json:"exit_code"`
	Signal     *string `json:"signal"`
}

// acpToolCall is a tool_call: the first and only one for its id.
type acpToolCall struct {
	SessionUpdate string          `json:"sessionUpdate"` // tool_call
	ToolCallID    string          `json:"toolCallId"`
	Title         string          `json:"title"`
	Kind          string          `json:"kind"`
	Status        string          `json:"status"`
	Content       []any           `json:"content,omitempty"`
	Locations     []acpLocation   `json:"locations,omitempty"`
	RawInput      json.RawMessage `json:"rawInput,omitempty"`
	RawOutput     any             `json:"rawOutput,omitempty"`
	Meta          *acpToolMeta    `json:"_meta,omitempty"`
}

// acpPlan is the todo plan, whole, after every change.
type acpPlan struct {
	SessionUpdate string         `json:"sessionUpdate"` // plan
	Entries       []acpPlanEntry `json:"entries"`
}

type acpPlanEntry struct {
	Content  string `json:"content"`
	Status   string `json:"status"`   // pending, in_progress, completed
	Priority string `json:"priority"` // always medium: rpi's plan has no priorities
}

// acpCommand is one entry of the client's / menu.
type acpCommand struct {
	Name        string           `json:"name"`
	Description string           `json:"description"`
	Input       *acpCommandInput `json:"input,omitempty"`
}

type acpCommandInput struct {
	Hint string `json:"hint"`
}

type acpAvailableCommands struct {
	SessionUpdate     string       `json:"sessionUpdate"` // available_commands_update
	AvailableCommands []acpCommand `json:"availableCommands"`
}

type acpCurrentMode struct {
	SessionUpdate string `json:"sessionUpdate"` // current_mode_update
	CurrentModeID string `json:"currentModeId"`
}

type acpConfigOptionUpdate struct {
	SessionUpdate string            `json:"sessionUpdate"` // config_option_update
	ConfigOptions []acpConfigOption `json:"configOptions"`
}

type acpSessionInfo struct {
	SessionUpdate string `json:"sessionUpdate"` // session_info_update
	Title         string `json:"title"`
	UpdatedAt     string `json:"updatedAt"`
}

type acpUsage struct {
	SessionUpdate string   `json:"sessionUpdate"` // usage_update
	Used          int      `json:"used"`
	Size          int      `json:"size"`
	Cost          *acpCost `json:"cost,omitempty"`
}

type acpCost struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

// acpUpdateParams are session/update's params.
type acpUpdateParams struct {
	SessionID string `json:"sessionId"`
	Update    any    `json:"update"`
}

// acpNumberedParams is session/update's params for an update of an
// event rpi serve numbered: its seq in _meta.rpi.
type acpNumberedParams struct {
	SessionID string     `json:"sessionId"`
	Update    any        `json:"update"`
	Meta      acpSeqMeta `json:"_meta"`
}

type acpSeqMeta struct {
	RPI acpSeq `json:"rpi"`
}

type acpSeq struct {
	Seq int64 `json:"seq"`
}

// acpTextChunkParams is session/update's params for a text chunk, the
// hottest record of ACP mode: it appends its own JSON, byte for byte
// what encoding/json writes for it.
type acpTextChunkParams struct {
	SessionID string        `json:"sessionId"`
	Update    acpTextUpdate `json:"update"`
}

type acpTextUpdate struct {
	SessionUpdate string  `json:"sessionUpdate"`
	Content       acpText `json:"content"`
	MessageID     string  `json:"messageId,omitempty"`
}

func (p acpTextChunkParams) appendJSON(buf []byte) []byte {
	buf = append(buf, `{"sessionId":`...)
	buf = appendJSONString(buf, p.SessionID)
	buf = append(buf, `,"update":{"sessionUpdate":`...)
	buf = appendJSONString(buf, p.Update.SessionUpdate)
	buf = append(buf, `,"content":{"type":`...)
	buf = appendJSONString(buf, p.Update.Content.Type)
	buf = append(buf, `,"text":`...)
	buf = appendJSONString(buf, p.Update.Content.Text)
	buf = append(buf, '}')
	if p.Update.MessageID != "" {
		buf = append(buf, `,"messageId":`...)
		buf = appendJSONString(buf, p.Update.MessageID)
	}
	return append(buf, "}}"...)
}

// acpUpdateOf is session/update's params for update, a text chunk by its
// own appender.
func acpUpdateOf(sessionID string, update any) any {
	if n, ok := update.(acpNumbered); ok {
		return acpNumberedParams{sessionID, n.update, acpSeqMeta{acpSeq{n.seq}}}
	}
	if c, ok := update.(acpChunk); ok {
		if text, ok := c.Content.(acpText); ok {
			return acpTextChunkParams{sessionID, acpTextUpdate{c.SessionUpdate, text, c.MessageID}}
		}
	}
	return acpUpdateParams{sessionID, update}
}

// ---- Tools: kinds, titles, locations ----

// acpPaths are what paths are built from: the session's cwd exactly as
// session/new gave it (joined and cleaned, symlinks not resolved).
type acpPaths struct {
	cwd string
}

// acpToolInfo is a call's kind, title and locations (docs/acp.md), read from
// call, what its arguments decoded to: the value that is approved and
// runs, never a second reading of the arguments. A call whose arguments
// do not decode (nil: it fails without running) gets its tool's name as
// its title and no locations. Paths are the call's own, built from the
// session's cwd (the tool's toolPath). The title is shown as the rpc
// dialog shows text: control and format characters (newlines too)
// escaped, a backslash as \\, a quoted value (a pattern, the bytes a
// process is sent) in Go's quotes, and over 4 KiB only its first and
// last 2 KiB (acpFitTitle).
func acpToolInfo(name string, call toolCall, paths acpPaths) (kind, title string, locations []acpLocation) {
	kind, title, locations = acpToolFacts(name, call, paths)
	return kind, acpFitTitle(title), locations
}

// acpShownTitle is title with its control and format characters escaped
// (a \r, an ESC or a bidi override cannot rewrite it, nor newlines push
// the rest out of a one-line card), a backslash as \\ (so that a newline
// and a backslash before an n never look alike), and cut as acpFitTitle
// cuts it.
func acpShownTitle(title string) string { return acpFitTitle(escapeControl(title)) }

// acpFitTitle is a title whose escapes are made (escapeControl, or Go's
// quoting) cut, when longer than 4 KiB, to its first and last 2 KiB
// around how many bytes are not shown, never inside an escape: what a
// long command ends with cannot hide behind the cut, and no half of an
// escape reads as another.
func acpFitTitle(title string) string {
	const maxShownBytes = 4096
	if len(title) <= maxShownBytes {
		return title
	}
	// Where each character or escape starts, up to the head's end and from
	// the tail's start.
	h, t := 0, len(title)
	for i := 0; i < len(title); {
		n := escapeLen(title[i:])
		if i+n <= maxShownBytes/2 {
			h = i + n
		}
		if i >= len(title)-maxShownBytes/2 && t == len(title) {
			t = i
		}
		i += n
	}
	return fmt.Sprintf("%s … (%d bytes not shown here) … %s", title[:h], t-h, title[t:])
}

// acpToolFacts is acpToolInfo before the title is cut to fit: each part
// of it shown already (escapeControl, or Go's quoting for a quoted value).
func acpToolFacts(name string, call toolCall, paths acpPaths) (kind, title string, locations []acpLocation) {
	switch c := call.(type) {
	case *readCall:
		loc := acpLocation{Path: c.abs}
		if c.offset > 0 {
			loc.Line = c.offset
		}
		return "read", "Read " + escapeControl(c.abs), []acpLocation{loc}
	case *lsCall:
		return "read", "Read " + escapeControl(c.abs), []acpLocation{{Path: c.abs}}
	case *writeCall:
		return "edit", "Write " + escapeControl(c.abs), []acpLocation{{Path: c.abs}}
	case *editCall:
		return "edit", "Edit " + escapeControl(c.abs), []acpLocation{{Path: c.abs}}
	case *grepCall:
		return "search", "Search " + strconv.Quote(c.pattern) + " in " + escapeControl(c.abs), []acpLocation{{Path: c.abs}}
	case *findCall:
		return "search", "Find " + strconv.Quote(c.pattern) + " in " + escapeControl(c.abs), []acpLocation{{Path: c.abs}}
	case *bashCall:
		return "execute", escapeControl(c.command), nil
	case *processCall:
		if c.action == "spawn" {
			return "execute", acpSpawnTitle(c.spec.Argv, c.spec.Env, c.spec.Cwd, paths), nil
		}
		return "other", acpProcessTitle(c), nil
	case *todoCall:
		return "think", "Update plan", nil
	case *mcpCall:
		kind := "other"
		switch {
		case c.tool.readOnly:
			kind = "read"
		case strings.EqualFold(c.tool.remote, "fetch") || strings.EqualFold(c.tool.server, "fetch"):
			kind = "fetch" // the reference fetch server's, or a server named so
		}
		return kind, escapeControl(c.tool.server) + ": " + escapeControl(c.tool.remote), nil
	}
	switch name {
	case "read", "ls":
		kind = "read"
	case "write", "edit":
		kind = "edit"
	case "grep", "find":
		kind = "search"
	case "bash":
		kind = "execute"
	case "todo":
		kind = "think"
	default:
		kind = "other"
	}
	return kind, escapeControl(name), nil
}

// acpSpawnTitle is a process spawn as a shell would read it, with all
// that decides what runs (as rpc's dialog shows it): the environment it
// changes (env -u NAME, NAME=value, by name) before its argv, and its
// directory when that is not the session's.
func acpSpawnTitle(argv []string, env map[string]*string, cwd string, paths acpPaths) string {
	var words []string
	if len(env) > 0 {
		words = append(words, "env")
		for _, name := range slices.Sorted(maps.Keys(env)) {
			if env[name] == nil {
				words = append(words, "-u", name)
			} else {
				words = append(words, name+"="+*env[name])
			}
		}
	}
	title := escapeControl(shellJoin(append(words, argv...)))
	if dir := resolvePath(paths.cwd, cwd); dir != paths.cwd {
		title += " (in " + escapeControl(dir) + ")"
	}
	return title
}

// acpProcessTitle is what a process action other than spawn does: the
// action, the process, and what goes to it (the bytes written, at most
// 200 shown; the keys; the signal).
func acpProcessTitle(c *processCall) string {
	title := strings.TrimSpace("process " + c.action + " " + escapeControl(c.processID))
	switch c.action {
	case "write":
		if len(c.data) > 0 {
			title += ": " + shownValue(string(c.data))
		}
		if c.closeStdin {
			title += ", then close its stdin"
		}
	case "keys":
		title += ": " + jsonStrings(c.keys)
	case "signal":
		title += " " + c.signal
	}
	return title
}

// shellPlain matches a word a shell reads as it is.
var shellPlain = lazy[*regexp.Regexp]{build: func() *regexp.Regexp { return regexp.MustCompile(`^[\w\-./=:,+@%]+$`) }}

// shellJoin writes argv as a shell would read it back: words with
// anything but letters, digits and -_./=:,+@% in single quotes.
func shellJoin(argv []string) string {
	words := make([]string, len(argv))
	for i, w := range argv {
		if shellPlain.get().MatchString(w) {
			words[i] = w
		} else {
			words[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(words, " ")
}

// acpResultContent is a finished call's content: its text and images
// (bash's text in one fence).
func acpResultContent(name string, content []contentBlock) []any {
	var items []any
	for _, b := range content {
		switch b.Type {
		case "text":
			text := b.Text
			if name == "bash" {
				text = acpFenced("", text)
			}
			items = append(items, acpContentItem{"content", acpTextBlock(text)})
		case "image":
			items = append(items, acpContentItem{"content", acpImage{"image", b.Data, b.MimeType}})
		}
	}
	return items
}

// ---- The mapping of one session's events ----

// acpTool is what the mapping remembers of one tool call.
type acpTool struct {
	id        string // its toolCallId on the wire (acpUpdates.claimCard)
	name      string
	args      json.RawMessage
	kind      string
	title     string
	locations []acpLocation
	diff      *acpDiff // edit's and write's: the whole file before and after
	note      string   // an edit's or write's that cannot be done: why, for its tool_call
	announced bool     // its tool_call is out
	running   bool     // its in_progress is out
	terminal  bool     // its output goes out by the _meta.terminal_* convention
	shown     string   // the output sent so far (terminal)
	editor    bool     // a bash call that runs in the editor's terminal (the shell option, as it was when the call started)
	editorID  string   // the editor's terminal it runs in, once created (its content)
}

// acpUpdates maps one session's events to its updates, in the order the
// events come (docs/acp.md), and remembers what that needs: the id of the
// answer being streamed, each tool call's state, the turn's last answer.
// send writes one update and is called with mu held, so that the updates
// keep the events' order.
type acpUpdates struct {
	paths    acpPaths
	terminal bool                                  // the client shows bash by Zed's _meta.terminal_* convention
	deferred func(tool string, call toolCall) bool // whether a call of tool waits for approval (its tool_call waits for the diff)
	inEditor func() bool                           // whether bash runs in the editor's terminal now (nil: never)
	send     func(update any)                      // writes one update
	newID    func() string                         // a fresh messageId
	now      func() time.Time                      // for session_info_update

	mu        mutex[acpUpdatesMu] // guards the fields below; held while sending
	messageID string              // the answer being streamed
	tools     map[string]*acpTool // the calls started and not ended, by the model's id
	cards     map[string]bool     // every toolCallId the client was given since the session opened (or was loaded)
	repeats   map[string]int      // per id the model repeated, the suffix its next card tries first (claimCard)
	runningID string              // the model's id of the call running (a session runs one at a time)
	last      *assistantMessage   // the turn's last answer
	thought   bool                // the thinking block being streamed had a delta
	compacted *compactionEnd      // the last compaction's end, noted (takeCompaction)

	// Notes and compactions (acp_notices.go): notices and compactions are
	// what the client offered, set once, before the first event.
	notices      bool   // the client shows notices: rpi's notes are notices
	compactions  bool   // the client tracks compactions: compaction_update, not their note
	retrying     bool   // auto_retry_start or summarization_retry_scheduled came: the warning after it is the retry's (notify)
	compactionID string // the compaction running, for a client that tracks them

	// seq is the number of the event being mapped, on a session rpi
	// serve holds (0: none): its updates carry it (_meta.rpi.seq).
	seq int64
}

// emit sends one update, numbered with the event it maps, if any; u.mu
// is held.
func (u *acpUpdates) emit(update any) {
	if u.seq != 0 {
		update = acpNumbered{update, u.seq}
	}
	u.send(update)
}

// acpNumbered is an update of an event rpi serve numbered.
type acpNumbered struct {
	update any
	seq    int64
}

// eventNumbered is event for the event numbered seq (rpi serve's).
func (u *acpUpdates) eventNumbered(typ string, data any, seq int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.seq = seq
	defer func() { u.seq = 0 }()
	u.eventLocked(typ, data)
}

// event maps one core event (its type and payload, as rpc mode writes
// them) to what it means in ACP; events that mean nothing there are
// dropped.
func (u *acpUpdates) event(typ string, data any) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.eventLocked(typ, data)
}

// eventLocked is event with u.mu held.
func (u *acpUpdates) eventLocked(typ string, data any) {
	if u.tools == nil {
		u.tools = map[string]*acpTool{}
	}
	switch d := data.(type) {
	case messageEvent:
		m, ok := d.Message.(*assistantMessage)
		switch {
		case !ok:
		case typ == "message_start":
			u.messageID, u.last = u.newID(), nil
		case typ == "message_end":
			u.last = m
		}
	case messageUpdate:
		ev := d.AssistantMessageEvent
		switch {
		case ev.Type == "thinking_start":
			u.thought = false
		case ev.Type == "thinking_end" && !u.thought && ev.Content != nil && *ev.Content != "":
			// Thinking that came whole, without deltas (encrypted, as
			// "[Reasoning redacted]"): shown as session/load replays it.
			u.emit(acpChunk{"agent_thought_chunk", acpTextBlock(*ev.Content), u.messageID})
		case ev.Delta == nil || *ev.Delta == "":
		case ev.Type == "text_delta":
			u.emit(acpChunk{"agent_message_chunk", acpTextBlock(*ev.Delta), u.messageID})
		case ev.Type == "thinking_delta":
			u.thought = true
			u.emit(acpChunk{"agent_thought_chunk", acpTextBlock(*ev.Delta), u.messageID})
		}
	case toolExecStart:
		u.toolStarted(d)
	case toolExecUpdate:
		u.toolProgress(d)
	case toolExecEnd:
		u.toolEnded(d)
	case todoUpdated:
		u.emit(acpPlanOf(d.Phases))
	case sessionInfoChanged:
		u.emit(acpSessionInfo{"session_info_update", d.Name, timestamp(u.now())})
	case retryStart, summaryRetryScheduled:
		u.retrying = true
	case compactionStart:
		u.compactionStarted()
	case compactionEnd:
		u.compactionEnded(d)
		u.compacted = &d
	case runFailed:
		if u.notices {
			u.noteLocked(noteError, d.Message)
			break
		}
		u.emit(acpChunk{"agent_message_chunk", acpTextBlock(d.Message), u.messageID})
	}
}

// note sends an info note of rpi's (acp_notices.go).
func (u *acpUpdates) note(text string) { u.noteAs(noteInfo, text) }

// takeCompaction is the end of the last compaction since the last take
// (nil: none ran), whose note has gone out.
func (u *acpUpdates) takeCompaction() *compactionEnd {
	u.mu.Lock()
	defer u.mu.Unlock()
	end := u.compacted
	u.compacted = nil
	return end
}

// acpCompactionNote is what a compaction tells the user.
func acpCompactionNote(d compactionEnd) string {
	switch {
	case d.Aborted:
		return "Compaction cancelled."
	case strings.HasPrefix(d.ErrorMessage, "Compaction failed"):
		return d.ErrorMessage
	case d.ErrorMessage != "":
		return "Compaction failed: " + d.ErrorMessage
	case d.Result != nil:
		return fmt.Sprintf("Compacted the conversation: %d tokens before, about %d after.", d.Result.TokensBefore, d.Result.EstimatedTokensAfter)
	}
	return ""
}

// lastAnswer is the turn's last answer (nil before any), and starts the
// next turn's count.
func (u *acpUpdates) lastAnswer() *assistantMessage {
	u.mu.Lock()
	defer u.mu.Unlock()
	last := u.last
	u.last = nil
	return last
}

// claimCard is the toolCallId of a new card for a call the model gave id:
// id itself the first time, else id#2, id#3… (the first not given yet),
// so that a model that gives two calls one id (in one answer, or again in
// a later one) gets two cards, not one card reset by the second call.
// Called with mu held.
func (u *acpUpdates) claimCard(id string) string {
	if u.cards == nil {
		u.cards, u.repeats = map[string]bool{}, map[string]int{}
	}
	card := id
	for n := max(u.repeats[id], 2); u.cards[card]; n++ {
		card = fmt.Sprintf("%s#%d", id, n)
		u.repeats[id] = n + 1 // the next repeat starts there: no search over the earlier ones
	}
	u.cards[card] = true
	return card
}

func (u *acpUpdates) toolStarted(d toolExecStart) {
	t := &acpTool{id: u.claimCard(d.ToolCallID), name: d.ToolName, args: d.Args}
	t.editor = d.ToolName == "bash" && u.inEditor != nil && u.inEditor()
	t.terminal = u.terminal && d.ToolName == "bash" && !t.editor // the editor's own terminal shows it instead
	t.kind, t.title, t.locations = acpToolInfo(d.ToolName, d.call, u.paths)
	u.tools[d.ToolCallID] = t
	u.runningID = d.ToolCallID
	// edit and write behind approval announce themselves with their diff
	// (ready); every other call at once.
	if (t.name == "edit" || t.name == "write") && u.deferred(t.name, d.call) {
		return
	}
	u.announce(t)
	if !u.deferred(t.name, d.call) {
		u.run(t)
	}
}

// ready announces an edit or write with the diff it will make: the whole
// file before (nil: new) and after, and for an edit its first changed
// line; where (the file target's, "" for a plain file in the working
// directory) goes into its title, so that what the user approves names
// the file that is written. It comes before the call's permission
// request.
func (u *acpUpdates) ready(id, path, where string, before *string, after string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	t := u.tools[id]
	if t == nil {
		return
	}
	if !t.announced {
		t.title += where
	}
	u.setDiff(t, path, before, after)
	u.announce(t)
}

// cannot announces an edit or write that cannot be done (preparing it
// failed) before its permission request: its title says so, and its
// content (why, from the gate's message) what allowing it does.
func (u *acpUpdates) cannot(id, why string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if t := u.tools[id]; t != nil {
		if !t.announced {
			t.title += " (cannot be done: allowing it tells the model why)"
		}
		t.note = why
		u.announce(t)
	}
}

// setDiff records a call's diff, and an edit's first changed line.
func (u *acpUpdates) setDiff(t *acpTool, path string, before *string, after string) {
	t.diff = &acpDiff{"diff", path, before, after}
	if t.name == "edit" && before != nil && len(t.locations) == 1 {
		t.locations[0].Line = firstChangedLine(*before, after)
	}
}

// current is the id of the call running ("" between calls).
func (u *acpUpdates) current() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.runningID
}

// running marks an approved call in_progress.
func (u *acpUpdates) running(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if t := u.tools[id]; t != nil {
		u.announce(t)
		u.run(t)
	}
}

// inEditorTerminal reports whether the call with the model's id is a bash
// call to run in the editor's terminal (decided when it started).
func (u *acpUpdates) inEditorTerminal(id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	t := u.tools[id]
	return t != nil && t.editor
}

// terminalCreated shows the editor's terminal a bash call runs in on its
// card (the terminal must be on a card before it is released).
func (u *acpUpdates) terminalCreated(id, terminalID string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if t := u.tools[id]; t != nil {
		t.editorID = terminalID
		u.announce(t)
		u.emit(acpToolCallUpdate{SessionUpdate: "tool_call_update", ToolCallID: t.id, Content: []any{acpTerminal{"terminal", terminalID}}})
	}
}

// permissionCall is the toolCall of a call's permission request: its id,
// title, kind, status pending and arguments.
func (u *acpUpdates) permissionCall(id string) acpToolCallUpdate {
	u.mu.Lock()
	defer u.mu.Unlock()
	call := acpToolCallUpdate{ToolCallID: id, Status: "pending"}
	if t := u.tools[id]; t != nil {
		call.ToolCallID, call.Title, call.Kind, call.RawInput = t.id, t.title, t.kind, t.args
	}
	return call
}

// announce sends the call's one tool_call, once.
func (u *acpUpdates) announce(t *acpTool) {
	if t.announced {
		return
	}
	t.announced = true
	id := t.id
	call := acpToolCall{SessionUpdate: "tool_call", ToolCallID: id, Title: t.title, Kind: t.kind, Status: "pending",
		Locations: t.locations, RawInput: t.args}
	switch {
	case t.diff != nil:
		call.Content = []any{*t.diff}
	case t.note != "":
		call.Content = []any{acpContentItem{"content", acpTextBlock(t.note)}}
	case t.terminal:
		call.Content = []any{acpTerminal{"terminal", id}}
		call.Meta = &acpToolMeta{TerminalInfo: &acpTerminalInfo{id, u.paths.cwd}}
	}
	u.emit(call)
}

// run sends the call's in_progress, once.
func (u *acpUpdates) run(t *acpTool) {
	if !t.running {
		t.running = true
		u.emit(acpToolCallUpdate{SessionUpdate: "tool_call_update", ToolCallID: t.id, Status: "in_progress"})
	}
}

// toolProgress sends a running bash call's new output to a terminal.
func (u *acpUpdates) toolProgress(d toolExecUpdate) {
	t := u.tools[d.ToolCallID]
	if t == nil || !t.terminal || len(d.PartialResult.Content) == 0 {
		return
	}
	u.announce(t)
	u.run(t)
	u.sendOutput(t, d.PartialResult.Content[0].Text)
}

// sendOutput sends what output holds beyond what was shown: bash reports
// its whole output so far (its tail, once long), not what is new.
func (u *acpUpdates) sendOutput(t *acpTool, output string) {
	fresh := newOutputText(t.shown, output)
	t.shown = output
	if fresh != "" {
		u.emit(acpToolCallUpdate{SessionUpdate: "tool_call_update", ToolCallID: t.id,
			Meta: &acpToolMeta{TerminalOutput: &acpTerminalOutput{t.id, fresh}}})
	}
}

// newOutputText is what now has that was not in before: now is before
// continued, or, once the output is cut to its tail, a later part of
// before continued (found by its first line); else all of now is new.
func newOutputText(before, now string) string {
	if strings.HasPrefix(now, before) {
		return now[len(before):]
	}
	probe, _, _ := strings.Cut(now[:min(64, len(now))], "\n") // the tail starts at a line
	probe = now[:min(len(now), len(probe)+1)]
	for k := strings.Index(before, probe); k >= 0 && probe != ""; {
		if strings.HasPrefix(now, before[k:]) {
			return now[len(before)-k:]
		}
		next := strings.Index(before[k+1:], probe)
		if next < 0 {
			break
		}
		k += next + 1
	}
	return now
}

func (u *acpUpdates) toolEnded(d toolExecEnd) {
	t := u.tools[d.ToolCallID]
	if t == nil { // a call the mapping never saw start: make it whole
		t = &acpTool{id: u.claimCard(d.ToolCallID), name: d.ToolName, terminal: u.terminal && d.ToolName == "bash"}
		t.kind, t.title, t.locations = acpToolInfo(d.ToolName, nil, u.paths)
	}
	delete(u.tools, d.ToolCallID)
	u.runningID = ""
	if c := d.Result.change; c != nil && !d.IsError && t.diff == nil {
		var before *string
		if c.existed && c.before != nil {
			text := string(c.before)
			before = &text
		}
		u.setDiff(t, c.path, before, string(c.after))
	}
	u.announce(t)
	end := acpToolCallUpdate{SessionUpdate: "tool_call_update", ToolCallID: t.id, Status: "completed", RawOutput: d.Result}
	if d.IsError {
		end.Status = "failed"
	}
	switch {
	case t.editorID != "":
		// The editor's terminal stays the card's content: it shows what
		// the command did. When how it ended is not known (the editor
		// failed to tell), the error goes below it.
		if d.Result.shell == nil {
			end.Content = append([]any{acpTerminal{"terminal", t.editorID}}, acpResultContent(t.name, d.Result.Content)...)
		}
	case t.terminal:
		if !t.running { // denied, or failed before it ran: show why
			end.Content = acpResultContent(t.name, d.Result.Content)
			break
		}
		// How the command ended, as bash knows it: never read from the
		// text, whose output can end like rpi's notes. Without it (bash
		// did not start) the text, and no exit code.
		output, code := resultText(d.Result.Content), (*int)(nil)
		if ended := d.Result.shell; ended != nil {
			output, code = ended.output, ended.exitCode
		}
		u.sendOutput(t, output)
		end.Meta = &acpToolMeta{TerminalExit: &acpTerminalExit{TerminalID: t.id, ExitCode: code}}
	case t.diff != nil && !d.IsError:
		end.Content, end.Locations = []any{*t.diff}, t.locations
	default:
		end.Content = acpResultContent(t.name, d.Result.Content)
	}
	u.emit(end)
}

// ---- Plan, usage, title ----

// acpPlanOf is the plan of the todo phases: their tasks in order,
// abandoned ones left out.
func acpPlanOf(phases []todoPhase) acpPlan {
	plan := acpPlan{SessionUpdate: "plan", Entries: []acpPlanEntry{}}
	for _, p := range phases {
		for _, t := range p.Tasks {
			if t.Status != "abandoned" {
				plan.Entries = append(plan.Entries, acpPlanEntry{t.Content, t.Status, "medium"})
			}
		}
	}
	return plan
}

// acpUsageOf is how full the context window is and what the session has
// cost: used the context's tokens (contextTokens; 0 when unknown), size the
// model's window (0 without a model), spent what the session has cost
// (entryStats; left out when it is 0 and the model has no prices).
func acpUsageOf(used *int, m *model, spent float64) acpUsage {
	u := acpUsage{SessionUpdate: "usage_update"}
	if used != nil {
		u.Used = *used
	}
	if m != nil {
		u.Size = m.ContextWindow
	}
	if spent > 0 || m != nil && m.Cost != (modelCost{}) {
		u.Cost = &acpCost{spent, "USD"}
	}
	return u
}

// acpStopReason is a turn's stopReason (docs/acp.md): cancelled when the client
// cancelled it, else by how its last answer stopped.
func acpStopReason(cancelled bool, last *assistantMessage) string {
	switch {
	case cancelled || last != nil && last.StopReason == "aborted":
		return "cancelled"
	case last == nil:
		return "end_turn"
	case last.StopReason == "length":
		return "max_tokens"
	case last.StopReason == "error" && acpRefused(last):
		return "refusal"
	}
	return "end_turn"
}

// acpRefusals are the stop reasons, as the provider gave them, of a model
// that refused to answer: Anthropic's refusal (and sensitive), OpenAI's
// content_filter, Gemini's safety stops.
var acpRefusals = []string{"refusal", "sensitive", "content_filter", "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}

// acpRefused says whether an answer that failed was a refusal: by its
// provider's stop reason (its error is pi's words for it, which for
// Anthropic may be the model's own explanation), or a blocked prompt.
func acpRefused(last *assistantMessage) bool {
	if meta := last.answerMeta; meta != nil && slices.Contains(acpRefusals, meta.RawStopReason) {
		return true
	}
	return strings.HasPrefix(last.ErrorMessage, "The prompt was blocked: ")
}

// ---- Config options, modes, commands (docs/acp.md) ----

// acpConfigOption is one of a session's config options; every field is
// present.
type acpConfigOption struct {
	ID           string           `json:"id"`
	Name         string           `json:"name"`
	Category     string           `json:"category"`
	Type         string           `json:"type"` // select
	CurrentValue string           `json:"currentValue"`
	Options      []acpConfigValue `json:"options"`
}

type acpConfigValue struct {
	Value string `json:"value"`
	Name  string `json:"name"`
}

// acpModes mirror the approvals option.
type acpModes struct {
	CurrentModeID  string    `json:"currentModeId"`
	AvailableModes []acpMode `json:"availableModes"`
}

type acpMode struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
}

// acpApprovalSets are the approvals option's values and the tools each
// asks about (docs/acp.md); custom is any other --confirm set.
var acpApprovalSets = []struct {
	value, name, description string
	tools                    []string
}{
	{"ask", "Ask", "Ask before edits, writes, commands and processes", []string{"write", "edit", "bash", "process"}},
	{"edits", "Auto-approve edits", "Ask before commands and processes only", []string{"bash", "process"}},
	{"auto", "Auto-approve all", "Never ask", []string{}},
}

// acpApprovalOf is the approvals value of a set of confirmed tools:
// ask, edits or auto when it is one of theirs, else custom.
func acpApprovalOf(confirm []string) string {
	for _, a := range acpApprovalSets {
		if len(a.tools) == len(confirm) && !slices.ContainsFunc(confirm, func(t string) bool { return !slices.Contains(a.tools, t) }) {
			return a.value
		}
	}
	return "custom"
}

// acpApprovalTools is the set of tools an approvals value asks about.
func acpApprovalTools(value string) ([]string, bool) {
	for _, a := range acpApprovalSets {
		if a.value == value {
			return a.tools, true
		}
	}
	return nil, false
}

// acpApprovalValues are the values the approvals option offers: custom
// only while it is in force (custom is the --confirm set then).
func acpApprovalValues(current string, custom []string) []acpMode {
	var values []acpMode
	for _, a := range acpApprovalSets {
		values = append(values, acpMode{a.value, a.name, a.description})
	}
	if current == "custom" {
		values = append(values, acpMode{"custom", "Custom (" + strings.Join(custom, ", ") + ")", "Ask before " + strings.Join(custom, ", ")})
	}
	return values
}

// acpThinkingName is the name a user reads for a thinking level ("" for
// one rpi does not know).
func acpThinkingName(level string) string {
	switch level {
	case "off":
		return "Off"
	case "minimal":
		return "Minimal"
	case "low":
		return "Low"
	case "medium":
		return "Medium"
	case "high":
		return "High"
	case "xhigh":
		return "Extra high"
	case "max":
		return "Max"
	}
	return ""
}

// acpShellValues are the shell option's values: where the model's bash
// runs (docs/acp.md).
var acpShellValues = []acpConfigValue{{"rpi", "In rpi"}, {"editor", "In the editor's terminal"}}

// acpConfigOptions is the full list of a session's config options: the
// model (every usable one, as <provider>/<id>), the thinking level (the
// levels the model takes), the approvals and, when the client has
// terminals (shell is not ""), where bash runs.
func acpConfigOptions(models []*model, current *model, level, approvals string, custom []string, shell string) []acpConfigOption {
	modelOption := acpConfigOption{ID: "model", Name: "Model", Category: "model", Type: "select", Options: []acpConfigValue{}}
	if current != nil {
		modelOption.CurrentValue = current.Provider + "/" + current.ID
	}
	for _, m := range models {
		modelOption.Options = append(modelOption.Options, acpConfigValue{m.Provider + "/" + m.ID, cmpOr(m.Name, m.ID)})
	}
	thinking := acpConfigOption{ID: "thought_level", Name: "Thinking", Category: "thought_level", Type: "select", CurrentValue: level}
	for _, l := range availableLevels(current) {
		thinking.Options = append(thinking.Options, acpConfigValue{l, acpThinkingName(l)})
	}
	approval := acpConfigOption{ID: "approvals", Name: "Approvals", Category: "mode", Type: "select", CurrentValue: approvals}
	for _, v := range acpApprovalValues(approvals, custom) {
		approval.Options = append(approval.Options, acpConfigValue{v.ID, v.Name})
	}
	options := []acpConfigOption{modelOption, thinking, approval}
	if shell != "" {
		options = append(options, acpConfigOption{ID: "shell", Name: "Run commands", Category: "_shell", Type: "select",
			CurrentValue: shell, Options: acpShellValues})
	}
	return options
}

// acpModesOf mirrors the approvals option as modes.
func acpModesOf(approvals string, custom []string) acpModes {
	return acpModes{approvals, acpApprovalValues(approvals, custom)}
}

func cmpOr(s, otherwise string) string {
	if s != "" {
		return s
	}
	return otherwise
}

// acpCommandsOf lists the client's / menu: the templates and skills a
// prompt can name, and rpi's own /compact and /name (a template or skill
// of one of those names is left out: rpi's runs).
func acpCommandsOf(slash []slashCommand) []acpCommand {
	commands := []acpCommand{}
	for _, c := range slash {
		if _, _, own := acpOwnCommand("/" + c.Name); own {
			continue // rpi's own command of that name is what runs
		}
		cmd := acpCommand{Name: c.Name, Description: cmpOr(c.Description, c.Name)}
		switch {
		case c.Source == "skill":
			cmd.Input = &acpCommandInput{"optional instructions"}
		case templateArguments(c.body) != "":
			cmd.Input = &acpCommandInput{templateArguments(c.body)}
		}
		commands = append(commands, cmd)
	}
	return append(commands,
		acpCommand{"compact", "Summarise the conversation so far, to free the context window", &acpCommandInput{"optional instructions for the summary"}},
		acpCommand{"name", "Name this session", &acpCommandInput{"title"}})
}

// maxHintArguments is how many arguments a template's hint names; past
// them it ends with "…".
const maxHintArguments = 9

// templateArguments is the hint for a template's arguments: <arg1>
// <arg2> … for $1 $2 … or ${1:-default} … (up to maxHintArguments),
// <arguments> for $@, $ARGUMENTS, ${@:N} or ${@:-default}; "" when it
// takes none.
func templateArguments(body string) string {
	most, all := 0, false
	for _, m := range templateArgument.get().FindAllStringSubmatch(body, -1) {
		if n, err := strconv.Atoi(m[5] + m[1]); err == nil { // $n or ${n:-default}
			most = max(most, n)
		} else {
			all = true
		}
	}
	var words []string
	for i := 1; i <= min(most, maxHintArguments); i++ {
		words = append(words, fmt.Sprintf("<arg%d>", i))
	}
	if most > maxHintArguments {
		words = append(words, "…")
	}
	if all && most == 0 {
		words = append(words, "<arguments>")
	}
	return strings.Join(words, " ")
}

// ---- session/list ----

// acpSessionRow is one session of session/list.
type acpSessionRow struct {
	SessionID string       `json:"sessionId"`
	Cwd       string       `json:"cwd"`
	Title     string       `json:"title,omitempty"`
	UpdatedAt string       `json:"updatedAt"`
	Meta      *acpLiveMeta `json:"_meta,omitempty"` // rpi serve's, on a session live in the host
}

// acpLiveMeta marks a session live in rpi serve's host: live, whether a
// turn runs, how many clients are attached.
type acpLiveMeta struct {
	RPI struct {
		Live    bool `json:"live"`
		Running bool `json:"running"`
		Clients int  `json:"clients"`
	} `json:"rpi"`
}

// acpListPage is one page of session/list.
type acpListPage struct {
	Sessions   []acpSessionRow `json:"sessions"`
	NextCursor string          `json:"nextCursor,omitempty"`
}

// acpPageSize is how many sessions a page of session/list holds.
const acpPageSize = 50

// acpPageOf is the page of rows (newest first, as listSessions orders
// them) that follows cursor ("" for the first); its nextCursor names the
// last row given, so a session written between two pages shifts nothing.
func acpPageOf(rows []sessionRow, cursor string) (acpListPage, error) {
	start := 0
	if cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		var after struct {
			Modified int64  `json:"m"`
			Path     string `json:"p"`
		}
		if err != nil || json.Unmarshal(raw, &after) != nil || after.Path == "" {
			return acpListPage{}, invalidParams("Invalid field cursor: must be a nextCursor session/list gave")
		}
		start = len(rows)
		for i, r := range rows {
			if r.modified < after.Modified || r.modified == after.Modified && r.Path > after.Path {
				start = i
				break
			}
		}
	}
	page := acpListPage{Sessions: []acpSessionRow{}}
	end := min(start+acpPageSize, len(rows))
	for _, r := range rows[start:end] {
		row := acpSessionRow{SessionID: r.SessionID, Cwd: r.Cwd, Title: acpShownTitle(r.Summary),
			UpdatedAt: timestamp(time.Unix(0, r.modified))}
		if r.Name != nil {
			row.Title = acpShownTitle(*r.Name)
		}
		if r.Live {
			row.Meta = &acpLiveMeta{}
			row.Meta.RPI.Live, row.Meta.RPI.Running, row.Meta.RPI.Clients = true, *r.Running, *r.Clients
		}
		page.Sessions = append(page.Sessions, row)
	}
	if end < len(rows) {
		last, _ := json.Marshal(struct {
			Modified int64  `json:"m"`
			Path     string `json:"p"`
		}{rows[end-1].modified, rows[end-1].Path})
		page.NextCursor = base64.RawURLEncoding.EncodeToString(last)
	}
	return page, nil
}

// acpOwnCommand reports whether text is one of rpi's own commands
// (/compact [instructions], /name <title>): its name and the rest.
func acpOwnCommand(text string) (name, rest string, ok bool) {
	for _, c := range []string{"compact", "name"} {
		if after, found := strings.CutPrefix(text, "/"+c); found && (after == "" || after[0] == ' ' || after[0] == '\n') {
			return c, strings.TrimSpace(after), true
		}
	}
	return "", "", false
}
