package main

// Resources: the AGENTS.md / CLAUDE.md context files that join the system
// prompt, and prompt templates and skills — Markdown files the user (and,
// with --approve, the project) provides, listed by get_commands and
// expanded when a prompt starts with /name or /skill:name. Every one is
// read only if it is a regular file of at most maxResourceBytes.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// slashCommand is one entry of get_commands.
type slashCommand struct {
	Name        string     `json:"name"`
	Description string     `json:"description"`
	Source      string     `json:"source"`   // prompt or skill
	Location    string     `json:"location"` // user or project
	Path        string     `json:"path"`
	SourceInfo  sourceInfo `json:"sourceInfo"`

	body        string // the template or skill text, front matter removed
	modelHidden bool   // a skill the model is not told of (disable-model-invocation: true)
}

// sourceInfo says where a command comes from, as pi 1.6 gives it.
type sourceInfo struct {
	Path    string `json:"path"`
	Source  string `json:"source"` // auto: discovered in its folder
	Scope   string `json:"scope"`  // user or project
	Origin  string `json:"origin"` // top-level
	BaseDir string `json:"baseDir"`
}

// frontMatterFields are the "key: value" lines of front matter, each value
// as written (spaces around it trimmed).
type frontMatterFields map[string]string

// text is a field's value without the quotes around it, if it has a pair
// ("…" or '…'); a quote inside or at one end only is part of the text.
func (f frontMatterFields) text(key string) string {
	v := f[key]
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

// isTrue says whether a field is YAML's true as pi reads it: true, True or
// TRUE, not quoted (a quoted "true" is text), a comment after it allowed.
func (f frontMatterFields) isTrue(key string) bool {
	value, _, _ := strings.Cut(f[key], " #")
	switch strings.TrimSpace(value) {
	case "true", "True", "TRUE":
		return true
	}
	return false
}

// frontMatter splits "---\nkey: value\n---\nbody" into its fields and body.
// As pi, "\r\n" and "\r" are read as "\n" throughout.
func frontMatter(text string) (frontMatterFields, string) {
	fields := frontMatterFields{}
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
	rest, ok := strings.CutPrefix(text, "---\n")
	if !ok {
		return fields, text
	}
	head, body, ok := strings.Cut(rest, "\n---")
	if !ok {
		return fields, text
	}
	for _, line := range strings.Split(head, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	// As pi: a body after front matter is trimmed.
	return fields, strings.TrimSpace(body)
}

// firstLine is a template's description when it has none: its first
// non-empty line, cut to 60 characters.
func firstLine(body string) string {
	for _, line := range strings.Split(body, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			if len(line) > 60 {
				return line[:60] + "..."
			}
			return line
		}
	}
	return ""
}

type contextFile struct{ path, content string }

// loadContextFiles reads AGENTS.md (or else CLAUDE.md) from the agent dir,
// then from every directory from the root down to the cwd, then the same
// for each of more (a session's other directories), in order: a file read
// already (a folder above both) is not read again. Files that cannot be
// used are named in skipped.
func loadContextFiles(agentDir, cwd string, more ...string) (files []contextFile, skipped []string) {
	dirs := []string{agentDir}
	for _, top := range append([]string{cwd}, more...) {
		var chain []string
		for dir := top; ; dir = filepath.Dir(dir) {
			chain = append(chain, dir)
			if filepath.Dir(dir) == dir {
				break
			}
		}
		slices.Reverse(chain)
		dirs = append(dirs, chain...)
	}
	seen := map[string]bool{}
	for _, dir := range dirs {
		for _, name := range []string{"AGENTS.md", "CLAUDE.md"} {
			path := filepath.Join(dir, name)
			if seen[path] {
				break
			}
			data, err := readRegularFile(path, maxResourceBytes)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			seen[path] = true
			if err != nil {
				skipped = append(skipped, "context file "+resourceError(path, err))
				break
			}
			files = append(files, contextFile{path, string(data)})
			break
		}
	}
	return files, skipped
}

// resourceError says why a resource file was skipped.
func resourceError(path string, err error) string {
	var nr *errNotRegular
	if errors.As(err, &nr) {
		return fmt.Sprintf("%s: it is %s", path, nr.kind)
	}
	return fmt.Sprintf("%s: %v", path, unwrapPathError(err))
}

// resourceKinds says which resources to read (--no-prompt-templates,
// --no-skills leave theirs out).
type resourceKinds struct{ templates, skills bool }

// loadResources reads the templates and skills of one location: *.md in
// dir/prompts, and dir/skills/<name>/SKILL.md. Files that cannot be used
// are added to skipped.
func loadResources(dir, location string, kinds resourceKinds, skipped *[]string) []slashCommand {
	var out []slashCommand
	read := func(path string) (string, bool) {
		data, err := readRegularFile(path, maxResourceBytes)
		if err != nil {
			*skipped = append(*skipped, location+" resource "+resourceError(path, err))
			return "", false
		}
		return string(data), true
	}
	var prompts, skills []string
	if kinds.templates {
		prompts = templateFiles(dir)
	}
	if kinds.skills {
		skills = skillFiles(dir)
	}
	for _, path := range prompts {
		text, ok := read(path)
		if !ok {
			continue
		}
		fields, body := frontMatter(text)
		desc := fields.text("description")
		if desc == "" {
			desc = firstLine(body)
		}
		out = append(out, slashCommand{Name: strings.TrimSuffix(filepath.Base(path), ".md"), Description: desc,
			Source: "prompt", Location: location, Path: path, SourceInfo: sourceInfo{path, "auto", location, "top-level", dir}, body: body})
	}
	for _, path := range skills {
		text, ok := read(path)
		if !ok {
			continue
		}
		fields, body := frontMatter(text)
		desc := fields.text("description")
		if strings.TrimSpace(desc) == "" {
			// As pi: a skill is chosen by its description, so one without is no skill.
			*skipped = append(*skipped, location+" resource "+path+": a skill needs a description in its front matter")
			continue
		}
		name := fields.text("name")
		if name == "" {
			name = filepath.Base(filepath.Dir(path))
		}
		out = append(out, slashCommand{Name: "skill:" + name, Description: desc,
			Source: "skill", Location: location, Path: path, SourceInfo: sourceInfo{path, "auto", location, "top-level", dir},
			body: strings.TrimSpace(body), modelHidden: fields.isTrue("disable-model-invocation")})
	}
	return out
}

// withoutDuplicates keeps the first template and the first skill of each
// name, as pi does, in pi's order: the templates, then the skills, each
// in the order found (the project's first, so that they win). Each one
// left out is named in skipped with the file that won. A file found
// twice (through a symlink, or an agent dir inside the project's .pi) is
// left out without a word.
func withoutDuplicates(found []slashCommand, skipped *[]string) []slashCommand {
	slices.SortStableFunc(found, func(a, b slashCommand) int {
		return strings.Compare(a.Source, b.Source) // "prompt" before "skill"
	})
	kept := make([]slashCommand, 0, len(found))
	files := map[string]bool{}
	for _, c := range found {
		file := c.Path
		if real, err := filepath.EvalSymlinks(file); err == nil {
			file = real
		}
		if files[file] {
			continue
		}
		i := slices.IndexFunc(kept, func(k slashCommand) bool { return k.Source == c.Source && k.Name == c.Name })
		if i >= 0 {
			what := "prompt template /" + c.Name
			if c.Source == "skill" {
				what = "skill " + strings.TrimPrefix(c.Name, "skill:")
			}
			*skipped = append(*skipped, fmt.Sprintf("%s %s (%s): %s has the same name and is used",
				c.Location, what, c.Path, kept[i].Path))
			continue
		}
		files[file] = true
		kept = append(kept, c)
	}
	return kept
}

// skillsForModel is the part of the system prompt that lists the skills
// the model may read by itself when a task matches one, in the shape pi
// gives it (an <available_skills> block, every value XML-escaped); "" when
// the model has neither read nor bash to read a file with, or no skill is
// for it.
func skillsForModel(commands []slashCommand, tools []*tool) string {
	var how string
	switch {
	case slices.ContainsFunc(tools, func(t *tool) bool { return t.name == "read" }):
		how = "with the read tool"
	case slices.ContainsFunc(tools, func(t *tool) bool { return t.name == "bash" }):
		how = "with bash"
	default:
		return ""
	}
	var list strings.Builder
	for _, c := range commands {
		if c.Source != "skill" || c.modelHidden {
			continue
		}
		fmt.Fprintf(&list, "  <skill>\n    <name>%s</name>\n    <description>%s</description>\n    <location>%s</location>\n  </skill>\n",
			escapeXML(strings.TrimPrefix(c.Name, "skill:")), escapeXML(c.Description), escapeXML(c.Path))
	}
	if list.Len() == 0 {
		return ""
	}
	return "Skills hold instructions for particular kinds of task. When a task matches a skill's description, " +
		"read the skill's file " + how + " before you start. Paths in a skill are relative to its directory " +
		"(the folder that holds the file); use absolute paths in tool calls.\n\n<available_skills>\n" +
		list.String() + "</available_skills>"
}

// xmlEscapes replaces pi's five characters, and line breaks, so that each
// value stays on its line whatever a file or folder name holds (made at
// first use).
var xmlEscapes = lazy[*strings.Replacer]{build: func() *strings.Replacer {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;",
		"\n", "&#10;", "\r", "&#13;")
}}

// escapeXML makes text safe inside an element of the skills block: it
// cannot close the element, or the block, or open another.
func escapeXML(text string) string { return xmlEscapes.get().Replace(text) }

// templateFiles are dir/prompts/*.md, in name order. Like skillFiles, it
// reads the folder rather than globbing its path, which would take a *, ?
// or [ in dir as a pattern: a project in q* found the templates of the
// project qz beside it, and one in p[1] none of its own.
func templateFiles(dir string) []string {
	var paths []string
	entries, _ := os.ReadDir(filepath.Join(dir, "prompts"))
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".md") {
			paths = append(paths, filepath.Join(dir, "prompts", e.Name()))
		}
	}
	return paths
}

// skillFiles are dir/skills/<name>/SKILL.md that exist, in name order.
func skillFiles(dir string) []string {
	var paths []string
	entries, _ := os.ReadDir(filepath.Join(dir, "skills"))
	for _, e := range entries {
		path := filepath.Join(dir, "skills", e.Name(), "SKILL.md")
		if _, err := os.Lstat(path); err == nil {
			paths = append(paths, path)
		}
	}
	return paths
}

// projectResources counts what ./.pi holds, to say what was skipped.
func projectResources(cwd string) (prompts, skills int, settings, mcp bool) {
	p, k := templateFiles(filepath.Join(cwd, ".pi")), skillFiles(filepath.Join(cwd, ".pi"))
	_, err := os.Stat(filepath.Join(cwd, ".pi", "settings.json"))
	_, mcpErr := os.Stat(filepath.Join(cwd, ".pi", "mcp.json"))
	return len(p), len(k), err == nil, mcpErr == nil
}

// expandSlash expands a prompt starting with /skill:name or /name (a
// template); any other text comes back unchanged.
func (s *session) expandSlash(text string) string {
	if !strings.HasPrefix(text, "/") {
		return text
	}
	name, rest, _ := strings.Cut(text[1:], " ")
	name = strings.TrimSpace(name)
	// As pi: /skill:x is the skill x before any template of that name.
	i := slices.IndexFunc(s.set.slashCommands, func(c slashCommand) bool { return c.Name == name && c.Source == "skill" })
	if i < 0 {
		i = slices.IndexFunc(s.set.slashCommands, func(c slashCommand) bool { return c.Name == name })
	}
	if i < 0 {
		return text
	}
	c := s.set.slashCommands[i]
	rest = strings.TrimSpace(rest)
	if c.Source == "skill" {
		// As pi: the name and path as they are, not quoted or escaped.
		out := fmt.Sprintf("<skill name=\"%s\" location=\"%s\">\nReferences are relative to %s.\n\n%s\n</skill>",
			strings.TrimPrefix(c.Name, "skill:"), c.Path, filepath.Dir(c.Path), c.body)
		if rest != "" {
			out += "\n\n" + rest
		}
		return out
	}
	return substituteArgs(c.body, splitArgs(rest))
}

// splitArgs splits template arguments like a shell: on spaces and tabs,
// with "…" and '…' quoting.
func splitArgs(s string) []string {
	var args []string
	var cur strings.Builder
	quote, inArg := rune(0), false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inArg = r, true
		case r == ' ' || r == '\t':
			if inArg {
				args, inArg = append(args, cur.String()), false
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
			inArg = true
		}
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args
}

// templateArgument matches what a template fills with its arguments: $1…$n,
// ${@:N} and ${@:N:L}, $ARGUMENTS and $@ (compiled at first use).
var templateArgument = lazy[*regexp.Regexp]{build: func() *regexp.Regexp {
	return regexp.MustCompile(`\$(\d+)|\$\{@:(\d+)(?::(\d+))?\}|\$ARGUMENTS|\$@`)
}}

// substituteArgs fills a template as pi does: $1…$n by position (missing
// ones are empty), ${@:N} with the arguments from the N-th on and ${@:N:L}
// with L of them, $ARGUMENTS and $@ with all of them, each joined with a
// space. The template is read once, left to right: text an argument
// brings in is never expanded again.
func substituteArgs(body string, args []string) string {
	var out strings.Builder
	last := 0
	for _, m := range templateArgument.get().FindAllStringSubmatchIndex(body, -1) {
		out.WriteString(body[last:m[0]])
		last = m[1]
		switch {
		case m[2] >= 0: // $n
			if n, err := strconv.Atoi(body[m[2]:m[3]]); err == nil && n >= 1 && n <= len(args) {
				out.WriteString(args[n-1])
			}
		case m[4] >= 0: // ${@:N} or ${@:N:L}
			from := len(args) // a start too large for an int is past the end
			if n, err := strconv.Atoi(body[m[4]:m[5]]); err == nil {
				from = min(max(n-1, 0), len(args)) // ${@:0} starts at the first, as in bash
			}
			to := len(args)
			if m[6] >= 0 {
				if n, err := strconv.Atoi(body[m[6]:m[7]]); err == nil && n < to-from {
					to = from + n
				}
			}
			out.WriteString(strings.Join(args[from:to], " "))
		default: // $ARGUMENTS or $@
			out.WriteString(strings.Join(args, " "))
		}
	}
	out.WriteString(body[last:])
	return out.String()
}
