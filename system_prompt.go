package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// The system prompt lives in the conversation, as pi 1.6 keeps it: a
// system message ({"role":"system","content":"","sections":{…},
// "toolsAdded":[…]}) before the first prompt says the whole prompt, part
// by part, and the tools; a later one says only what changed (a section
// set again, or null when it went; tools added or removed). The model is
// sent what the conversation's system messages add up to (promptReplay),
// so the session file shows what each request held. docs/sessions.md
// tells the format.

// promptSection is one named part of the system prompt, as the model
// reads it: the preamble bare, each other part inside <name>…</name>.
type promptSection struct{ name, text string }

// basePreamble begins the system prompt when neither --system-prompt nor
// a SYSTEM.md replaces it.
const basePreamble = "You are an expert coding assistant. You help the user with their code by reading files, " +
	"running commands, editing code and writing new files."

// promptSections is the system prompt the session would give now, in
// order: preamble (the base text, or --system-prompt, or SYSTEM.md);
// with the base text, tools (those in the prompt) and rules; addendum
// (--append-system-prompt or APPEND_SYSTEM.md), project_context (the
// context files: AGENTS.md, CLAUDE.md, …), skills (those the model may
// read), date, cwd and directories (the session's other directories).
// A part with nothing to say is left out.
func (s *session) promptSections() []promptSection {
	var sections []promptSection
	tools := s.tools()
	add := func(name, text string) {
		if name != "preamble" {
			text = "<" + name + ">\n" + text + "\n</" + name + ">"
		}
		sections = append(sections, promptSection{name, text})
	}
	if s.set.systemPrompt != "" {
		add("preamble", s.set.systemPrompt)
	} else {
		add("preamble", basePreamble)
		if len(tools) > 0 {
			var list strings.Builder
			for i, t := range tools {
				if i > 0 {
					list.WriteByte('\n')
				}
				fmt.Fprintf(&list, "- %s: %s", t.name, t.summary)
			}
			add("tools", list.String())
		}
		rules := []string{"Read files before editing them.",
			"Use edit for precise changes and write for new files or complete rewrites."}
		for _, t := range tools {
			rules = append(rules, t.guidelines...)
		}
		rules = append(rules, "Keep answers short and concrete; show file paths clearly.")
		add("rules", "- "+strings.Join(rules, "\n- "))
	}
	if s.set.appendSystemPrompt != "" {
		add("addendum", s.set.appendSystemPrompt)
	}
	if files := s.set.contextFiles; len(files) > 0 {
		var b strings.Builder
		b.WriteString("Project-specific instructions and guidelines:")
		for _, f := range files {
			fmt.Fprintf(&b, "\n\n<project_instructions path=\"%s\">\n%s\n</project_instructions>", escapeXML(f.path), f.content)
		}
		add("project_context", b.String())
	}
	if skills := skillsForModel(s.set.slashCommands, tools); skills != "" {
		add("skills", skills)
	}
	add("date", s.env.clock.Now().Format("2006-01-02"))
	add("cwd", filepath.ToSlash(s.set.cwd))
	if len(s.set.dirs) > 0 {
		dirs := "Additional working directories (relative paths still start from the current working directory):"
		for _, dir := range s.set.dirs {
			dirs += "\n- " + dir
		}
		add("directories", dirs)
	}
	return sections
}

// toolDeclaration is a tool as a system message declares it to the
// model: {"name","description","parameters"}, compact.
type toolDeclaration struct {
	name string
	json []byte
}

// declareTools are the declarations of tools, in their order.
func declareTools(tools []*tool) []toolDeclaration {
	out := make([]toolDeclaration, 0, len(tools))
	for _, t := range tools {
		var params bytes.Buffer
		if json.Compact(&params, t.schema) != nil || params.Len() == 0 {
			params.Reset()
			params.WriteString("{}")
		}
		decl := appendJSONString([]byte(`{"name":`), t.name)
		decl = appendJSONString(append(decl, `,"description":`...), t.description)
		decl = append(append(append(decl, `,"parameters":`...), params.Bytes()...), '}')
		out = append(out, toolDeclaration{t.name, decl})
	}
	return out
}

// transcriptPrompt is what a conversation's system messages add up to,
// replayed oldest first as pi 1.6 replays them: their content, the
// sections (a section set again keeps its place; null takes it out) and
// the tools (removed by name, added or redeclared by name).
type transcriptPrompt struct {
	content  []string
	sections []promptSection
	tools    []toolDeclaration
	found    bool // the conversation has a system message
	// sectionAt and toolAt index sections and tools by name: a hostile
	// session's message of many thousands of sections is replayed, and
	// compared, in time linear in its size.
	sectionAt, toolAt map[string]int
}

// add replays the system messages among messages, in order.
func (r *promptReplay) add(messages []any) {
	for _, m := range messages {
		if raw, ok := m.(rawMessage); ok {
			r.apply(raw)
		}
	}
}

// promptReplay is a replay under way: what left the sections or the
// tools is marked gone in place (taking it out of the middle of a list
// at each null would cost the list's length each time), and result
// leaves it out once.
type promptReplay struct {
	p                     transcriptPrompt
	sectionGone, toolGone []bool
	mentioned             map[string]bool // every tool added or removed
}

// result is the prompt replayed: its sections and tools without those
// that went, in order, indexed by name.
func (r *promptReplay) result() transcriptPrompt {
	p := r.p
	p.sections, p.tools = nil, nil
	p.sectionAt, p.toolAt = map[string]int{}, map[string]int{}
	for i, s := range r.p.sections {
		if !r.sectionGone[i] {
			p.sectionAt[s.name] = len(p.sections)
			p.sections = append(p.sections, s)
		}
	}
	for i, t := range r.p.tools {
		if !r.toolGone[i] {
			p.toolAt[t.name] = len(p.tools)
			p.tools = append(p.tools, t)
		}
	}
	return p
}

// systemMessageFields are the fields of a system message promptReplay
// and the export read.
type systemMessageFields struct {
	Content, Sections        json.RawMessage
	ToolsAdded, ToolsRemoved []json.RawMessage // each {"name",…}
}

// systemMessageOf reads a system message's fields by their exact names,
// as pi reads them (encoding/json would take "ToolsAdded" for
// toolsAdded), the last of a name given twice, as JSON.parse keeps it. A
// field of another type than a system message's stays empty.
func systemMessageOf(raw []byte) systemMessageFields {
	var m systemMessageFields
	members := objectMembers(raw)
	list := func(value []byte) []json.RawMessage {
		var items []json.RawMessage
		if json.Unmarshal(value, &items) != nil {
			return nil
		}
		return items
	}
	for _, mb := range members {
		switch string(mb.key) {
		case "content":
			m.Content = mb.value
		case "sections":
			m.Sections = mb.value
		case "toolsAdded":
			m.ToolsAdded = list(mb.value)
		case "toolsRemoved":
			m.ToolsRemoved = list(mb.value)
		}
	}
	return m
}

// apply adds raw to the replay when it is a system message. A session
// file is read as it was written, by anyone: a field of another type
// than a system message's is left out, not trusted.
func (r *promptReplay) apply(raw rawMessage) {
	if messageRole(json.RawMessage(raw)) != "system" {
		return
	}
	p := &r.p
	if p.sectionAt == nil {
		p.sectionAt, p.toolAt = map[string]int{}, map[string]int{}
	}
	m := systemMessageOf(raw)
	p.found = true
	if text := systemContentText(m.Content); text != "" {
		p.content = append(p.content, text)
	}
	eachSection(m.Sections, func(name string, text *string) {
		i, ok := p.sectionAt[name]
		switch {
		case text == nil && ok:
			r.sectionGone[i] = true
			delete(p.sectionAt, name)
		case text == nil:
		case ok:
			p.sections[i].text = *text
		default:
			p.sectionAt[name] = len(p.sections)
			p.sections = append(p.sections, promptSection{name, *text})
			r.sectionGone = append(r.sectionGone, false)
		}
	})
	if r.mentioned == nil {
		r.mentioned = map[string]bool{}
	}
	for _, removed := range m.ToolsRemoved {
		name := declaredName(removed)
		r.mentioned[name] = true
		if i, ok := p.toolAt[name]; ok {
			r.toolGone[i] = true
			delete(p.toolAt, name)
		}
	}
	for _, added := range m.ToolsAdded {
		name := declaredName(added)
		var compact bytes.Buffer
		if name == "" || json.Compact(&compact, added) != nil {
			continue
		}
		r.mentioned[name] = true
		if i, ok := p.toolAt[name]; ok {
			p.tools[i].json = compact.Bytes()
		} else {
			p.toolAt[name] = len(p.tools)
			p.tools = append(p.tools, toolDeclaration{name, compact.Bytes()})
			r.toolGone = append(r.toolGone, false)
		}
	}
}

// declaredName is the name of a tool a system message declares, "" when
// it names none (or the declaration is not an object with a string name).
func declaredName(decl json.RawMessage) string {
	var name string
	if v, ok := exactMember(decl, "name"); ok && json.Unmarshal(v, &name) == nil {
		return name
	}
	return ""
}

// systemContentText is a system message's content as text: a string, or
// the texts of a list of blocks, one per line (pi's contentText).
func systemContentText(content json.RawMessage) string {
	var text string
	if json.Unmarshal(content, &text) == nil {
		return text
	}
	var blocks []struct{ Type, Text string }
	json.Unmarshal(content, &blocks)
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// eachSection calls f with each member of a sections object, in order:
// its text, or nil for null. A member of another type is skipped.
func eachSection(sections json.RawMessage, f func(name string, text *string)) {
	if len(sections) == 0 || sections[0] != '{' {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(sections))
	dec.Token() // {
	for dec.More() {
		key, err := dec.Token()
		name, _ := key.(string)
		var value json.RawMessage
		if err != nil || dec.Decode(&value) != nil {
			return
		}
		var text string
		switch {
		case string(value) == "null":
			f(name, nil)
		case json.Unmarshal(value, &text) == nil:
			f(name, &text)
		}
	}
}

// section is the index of the section named name, or -1.
func (p *transcriptPrompt) section(name string) int {
	if i, ok := p.sectionAt[name]; ok {
		return i
	}
	return -1
}

// tool is the index of the tool named name, or -1.
func (p *transcriptPrompt) tool(name string) int {
	if i, ok := p.toolAt[name]; ok {
		return i
	}
	return -1
}

// text is the system prompt p gives the model: its content, then each
// section, apart by an empty line.
func (p *transcriptPrompt) text() string {
	var parts []string
	if content := strings.Join(p.content, "\n\n"); content != "" {
		parts = append(parts, content)
	}
	for _, s := range p.sections {
		if s.text != "" {
			parts = append(parts, s.text)
		}
	}
	return strings.Join(parts, "\n\n")
}

// update is the system message that makes p say sections and tools: the
// sections that differ (null for one that went), the tools added or
// declared anew (a changed tool is removed and added), at timestamp
// now; nil when p says them already.
func (p *transcriptPrompt) update(sections []promptSection, tools []toolDeclaration, now int64) rawMessage {
	var patch []byte
	member := func(name string) {
		if patch == nil {
			patch = []byte{'{'}
		} else {
			patch = append(patch, ',')
		}
		patch = append(appendJSONString(patch, name), ':')
	}
	for _, s := range sections {
		if i := p.section(s.name); i < 0 || p.sections[i].text != s.text {
			member(s.name)
			patch = appendJSONString(patch, s.text)
		}
	}
	for _, old := range p.sections {
		if !containsSection(sections, old.name) {
			member(old.name)
			patch = append(patch, "null"...)
		}
	}
	var added, removed [][]byte
	for _, t := range tools {
		if i := p.tool(t.name); i < 0 || !bytes.Equal(p.tools[i].json, t.json) {
			added = append(added, t.json)
		}
	}
	current := make(map[string]int, len(tools))
	for i, t := range tools {
		current[t.name] = i
	}
	for _, old := range p.tools {
		if i, ok := current[old.name]; !ok || !bytes.Equal(tools[i].json, old.json) {
			removed = append(removed, append(appendJSONString([]byte(`{"name":`), old.name), '}'))
		}
	}
	if patch == nil && added == nil && removed == nil {
		return nil
	}
	m := []byte(`{"role":"system","content":""`)
	if patch != nil {
		m = append(append(append(m, `,"sections":`...), patch...), '}')
	}
	m = fmt.Appendf(m, `,"timestamp":%d`, now)
	list := func(name string, items [][]byte) {
		if items != nil {
			m = append(append(m, `,"`+name+`":[`...), bytes.Join(items, []byte{','})...)
			m = append(m, ']')
		}
	}
	list("toolsAdded", added)
	list("toolsRemoved", removed)
	return rawMessage(append(m, '}'))
}

// containsSection reports whether sections has one named name.
func containsSection(sections []promptSection, name string) bool {
	for _, s := range sections {
		if s.name == name {
			return true
		}
	}
	return false
}

// head is p as one system message, as pi 1.6's compaction keeps it
// (its systemMessage): the whole prompt and every tool, at timestamp
// now; nil when the conversation had no system message.
func (p *transcriptPrompt) head(now int64) rawMessage {
	if !p.found {
		return nil
	}
	m := appendJSONString([]byte(`{"role":"system","content":`), strings.Join(p.content, "\n\n"))
	if len(p.sections) > 0 {
		m = append(m, `,"sections":{`...)
		for i, s := range p.sections {
			if i > 0 {
				m = append(m, ',')
			}
			m = appendJSONString(append(appendJSONString(m, s.name), ':'), s.text)
		}
		m = append(m, '}')
	}
	if len(p.tools) > 0 {
		m = append(m, `,"toolsAdded":[`...)
		for i, t := range p.tools {
			if i > 0 {
				m = append(m, ',')
			}
			m = append(m, t.json...)
		}
		m = append(m, ']')
	}
	return rawMessage(fmt.Appendf(m, `,"timestamp":%d}`, now))
}

// piBuiltinTools are pi 1.6's own tools. A session pi wrote declares
// those it offered; rpi's others (todo, process, ask_user) are to pi as
// an extension's tools, which it turns on when a transcript never
// mentioned them.
var piBuiltinTools = []string{"read", "bash", "edit", "write", "grep", "find", "ls"}

// tools are the built-in tools the session offers the model: its flags'
// (set.tools); or, when those are the default selection (no --tools list
// of names, no --no-tools or --no-builtin-tools: +name and -name entries
// change the default) and its conversation has a system message, those
// of them the conversation declared last, as pi 1.6 restores a session's
// tools when it opens it: so a session that was given fewer tools keeps
// them fewer when it is opened again. rpi's own tools the conversation
// never mentioned (not pi's built-ins) are offered too, as pi turns on an
// extension's tools a transcript never mentioned, and so are those --tools'
// +name entries add. Unlike pi's, a session never gets back a tool the
// flags and settings do not offer now: a session file names no tool into
// being (docs/sessions.md#system-messages).
func (s *session) tools() []*tool {
	cfg := s.set.cfg
	if cfg.toolsGiven && !slices.ContainsFunc(cfg.tools, isToolModifier) {
		return s.set.tools
	}
	declared, mentioned, found := s.conv.loadout()
	if !found {
		return s.set.tools
	}
	names := declared
	for _, t := range s.set.tools {
		if !slices.Contains(mentioned, t.name) && !slices.Contains(piBuiltinTools, t.name) {
			names = append(names, t.name)
		}
	}
	names = withToolModifiers(names, cfg.tools)
	return slices.DeleteFunc(slices.Clone(s.set.tools), func(t *tool) bool { return !slices.Contains(names, t.name) })
}

// declarePrompt tells the model, before it is asked, what of the system
// prompt and the tools (those to be offered) the conversation has not
// told it yet: a system message recorded in the conversation and told as
// message_start and message_end. It returns that message, or nil when
// the conversation's system messages say it all already. With
// laterMCP, an MCP tool the conversation has not declared yet is left
// for the declaration after the turn's prompts: whether its server
// connected just before the turn or during the wait for it, its tools
// are declared in the same place.
func (s *session) declarePrompt(tools []*tool, laterMCP bool) rawMessage {
	p := s.conv.prompt()
	if laterMCP {
		builtIn := s.tools()
		tools = slices.DeleteFunc(slices.Clone(tools), func(t *tool) bool {
			return !slices.Contains(builtIn, t) && p.tool(t.name) < 0
		})
	}
	m := p.update(s.promptSections(), declareTools(tools), s.env.clock.Now().UnixMilli())
	if m == nil {
		return nil
	}
	s.emit("message_start", messageEvent{m})
	s.conv.appendMessage(m) // recorded before its end is told, as every message
	s.emit("message_end", messageEvent{m})
	return m
}
