package main

// Resources: the AGENTS.md / CLAUDE.md context files that join the system
// prompt, the SYSTEM.md and APPEND_SYSTEM.md files that replace or add to
// its base text, and prompt templates and skills — Markdown files the user (and,
// when it is trusted, the project: trust.go) provides, listed by get_commands and
// expanded when a prompt starts with /name or /skill:name. Every one is
// read only if it is a regular file of at most maxResourceBytes.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
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
	Source  string `json:"source"`            // auto: discovered in its folder; local: listed in settings.json
	Scope   string `json:"scope"`             // user or project
	Origin  string `json:"origin"`            // top-level
	BaseDir string `json:"baseDir,omitempty"` // none for one listed in settings.json, as in pi
}

// firstLine is a template's description when it has none, as pi 1.6
// makes it: its first line that is not blank, as it is, cut to 60 UTF-16
// units and "..." (before a character the cut would split in two, where
// pi keeps half of it).
func firstLine(body string) string {
	for _, line := range strings.Split(body, "\n") {
		if strings.TrimFunc(line, jsSpace) == "" {
			continue
		}
		units := 0
		for i, r := range line {
			if units += utf16Len(string(r)); units > 60 {
				return line[:i] + "..."
			}
		}
		return line
	}
	return ""
}

type contextFile struct{ path, content string }

// contextFileNames are the names a folder's context file may have, as in
// pi 1.6, the one taken first: AGENTS.override.md stands in for the
// folder's AGENTS.md or CLAUDE.md (in that folder only). Each is looked
// for as spelled, so that on a file system that ignores case agents.md is
// found as AGENTS.md, as pi finds it.
var contextFileNames = []string{"AGENTS.override.md", "AGENTS.md", "AGENTS.MD", "CLAUDE.md", "CLAUDE.MD"}

// loadContextFiles reads one context file (the first of
// contextFileNames there) from the agent dir, then from every directory
// from the root down to the cwd, then the same for each of more (a
// session's other directories), in order: a folder read already (one
// above both) is not read again. A file that cannot be used is named in
// skipped and the folder's next name is tried, as pi passes over what is
// no file or cannot be read.
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
	shadowed := shadowedContextFile(cwd)
	seen := map[string]bool{}
	var over []string // the files past maxContextBytes, not read
	total := 0
	for _, dir := range dirs {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		for _, name := range contextFileNames {
			path := filepath.Join(dir, name)
			if shadowed != "" && filepath.Base(shadowed) == name && realPath(dir) == filepath.Dir(shadowed) {
				if info, err := os.Stat(path); err == nil && info.Mode().IsRegular() {
					break // the worktree's own file stands in for it
				}
			}
			if len(over) > 0 { // the rest are not read: is there one?
				if _, err := os.Stat(path); err == nil {
					over = append(over, path)
					break
				}
				continue
			}
			data, err := readRegularFile(path, maxResourceBytes)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				skipped = append(skipped, "context file "+resourceError(path, err))
				continue
			}
			if total+len(data) > maxContextBytes {
				over = append(over, path)
				break
			}
			total += len(data)
			files = append(files, contextFile{path, withoutBOM(data)})
			break
		}
	}
	if len(over) > 0 {
		which, before := over[0], "it"
		if len(over) > 1 {
			which, before = fmt.Sprintf("%s and the %d after it", over[0], len(over)-1), "them"
		}
		skipped = append(skipped, fmt.Sprintf("context file %s: the context files before %s hold %s, and rpi reads at most %s of them",
			which, before, formatSize(total), formatSize(maxContextBytes)))
	}
	return files, skipped
}

// maxContextBytes bounds the context files read, all told: each may hold
// maxResourceBytes, and a project may nest its folders as deep as a path
// goes, each with the same file (which git stores once); they are all
// held, and sent with every request.
const maxContextBytes = 8 << 20

// shadowedContextFile is, as in pi 1.6, the main checkout's context file
// that the own one of a linked worktree inside it stands in for (a
// worktree in repo/.worktrees/x, say): both are the instructions of the
// same repository, which would otherwise reach the model twice. "" when
// cwd is in no such worktree, or it has no context file of its own. The
// path is a real one (symlinks resolved), as git writes a worktree's
// gitdir.
func shadowedContextFile(cwd string) string {
	top, gitDir := "", ""
	for dir := cwd; gitDir == ""; dir = filepath.Dir(dir) {
		git := filepath.Join(dir, ".git")
		if info, err := os.Stat(git); err == nil {
			if info.IsDir() {
				return "" // a main checkout, not a linked worktree
			}
			data, _ := readRegularFile(git, 4096)
			if rest, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir: "); ok {
				top, gitDir = dir, resolvedFrom(dir, strings.TrimSpace(rest))
			}
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	if gitDir == "" {
		return ""
	}
	if _, err := os.Stat(filepath.Join(gitDir, "HEAD")); err != nil {
		return ""
	}
	common := gitDir
	if data, err := readRegularFile(filepath.Join(gitDir, "commondir"), 4096); err == nil {
		common = resolvedFrom(gitDir, strings.TrimSpace(string(data)))
	}
	common, top = realPath(common), realPath(top)
	main := filepath.Dir(common)
	// Only a worktree below the main checkout's top, whose .git is that
	// common folder (not a bare repository's folder, nor a submodule's).
	if rel, err := filepath.Rel(main, top); err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return ""
	}
	if realPath(filepath.Join(main, ".git")) != common {
		return ""
	}
	for _, name := range contextFileNames {
		if info, err := os.Stat(filepath.Join(top, name)); err == nil && info.Mode().IsRegular() {
			return filepath.Join(main, name)
		}
	}
	return ""
}

// resolvedFrom is path taken from dir when it is relative.
func resolvedFrom(dir, path string) string {
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(dir, path)
}

// realPath is path with its symlinks resolved, or as it is when that
// fails.
func realPath(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	return path
}

// withoutBOM is a file's text without the byte order mark it may start
// with, which pi strips from the instructions it reads.
func withoutBOM(data []byte) string {
	return strings.TrimPrefix(string(data), "\ufeff")
}

// systemPromptFiles picks the base system prompt and its addition as pi
// 1.6 does: --system-prompt, else the project's .pi/SYSTEM.md (only when
// the project is trusted: approved), else the agent dir's SYSTEM.md, else none
// (rpi's own text); the same for --append-system-prompt and
// APPEND_SYSTEM.md. The two are chosen apart, and a file is not combined
// with the other of its name. --system-prompt "" is none, without
// SYSTEM.md; the --append-system-prompt values (each promptFlagText,
// those given as "" left out) are joined with a blank line between, as pi
// joins them, in place of APPEND_SYSTEM.md. A file that cannot be used is
// named in skipped and the next one is tried.
func systemPromptFiles(cfg cliConfig, agentDir, cwd string, approved bool, skipped *[]string) (system, appendix string) {
	pick := func(name string) string {
		var paths []string
		if approved {
			paths = append(paths, filepath.Join(cwd, ".pi", name))
		}
		for _, path := range append(paths, filepath.Join(agentDir, name)) {
			data, err := readRegularFile(path, maxResourceBytes)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				*skipped = append(*skipped, "system prompt file "+resourceError(path, err))
				continue
			}
			return withoutBOM(data)
		}
		return ""
	}
	if cfg.systemPromptGiven && cfg.systemPrompt != "" {
		system = promptFlagText("--system-prompt", cfg.systemPrompt, cfg.cwd, skipped)
	} else if !cfg.systemPromptGiven {
		system = pick("SYSTEM.md")
	}
	if len(cfg.appendSystemPrompt) == 0 {
		return system, pick("APPEND_SYSTEM.md")
	}
	var parts []string
	for _, value := range cfg.appendSystemPrompt {
		if value != "" {
			parts = append(parts, promptFlagText("--append-system-prompt", value, cfg.cwd, skipped))
		}
	}
	return system, strings.Join(parts, "\n\n")
}

// promptFlagText is what --system-prompt or --append-system-prompt
// (flag) adds with value, as pi 1.6 reads them: the text of the file it
// names when there is one (taken from base, the command line's --cwd,
// when relative; up to maxResourceBytes), else value itself. A file that
// is there but cannot be read (a folder, one too large) is named in
// skipped, and value is taken as text, as pi takes it. The file is the
// user's, from the command line: no project trust is asked.
func promptFlagText(flag, value, base string, skipped *[]string) string {
	path := resolvePath(base, value)
	if _, err := os.Stat(path); err != nil {
		return value // no such file (or no path at all: a prompt's text)
	}
	data, err := readRegularFile(path, maxResourceBytes)
	if err != nil {
		*skipped = append(*skipped, fmt.Sprintf("%s file %s; the value is taken as text", flag, resourceError(path, err)))
		return value
	}
	return withoutBOM(data)
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
// dir/prompts, and the skills in dir/skills (skillEntries, pi's rule),
// each one that choice lets in (relative patterns taken from dir). Files
// that cannot be used are added to skipped.
func loadResources(dir, location string, kinds resourceKinds, choice *resourceChoice, skipped *[]string) []slashCommand {
	var out []slashCommand
	if kinds.templates {
		paths, note := templateFiles(dir)
		if note != "" {
			*skipped = append(*skipped, skillWalkNote(location, filepath.Join(dir, "prompts"), note))
		}
		for _, path := range paths {
			if choice.admit(path, location, "prompts", dir) {
				out = appendTemplate(out, path, location, sourceInfo{path, "auto", location, "top-level", dir}, skipped)
			}
		}
	}
	if kinds.skills {
		paths, note := skillEntries(filepath.Join(dir, "skills"), true, false)
		if note != "" {
			*skipped = append(*skipped, skillWalkNote(location, filepath.Join(dir, "skills"), note))
		}
		for _, path := range paths {
			if choice.admit(path, location, "skills", dir) {
				out = appendSkill(out, path, location, sourceInfo{path, "auto", location, "top-level", dir}, skipped)
			}
		}
	}
	return out
}

// loadAgentsSkills reads the skills of each Agent Skills folder in dirs
// (~/.agents/skills, a project's .agents/skills), with the rule of
// those folders (skillEntries), each one that choice lets in; each one's
// base is its .agents folder, which relative patterns are taken from.
func loadAgentsSkills(dirs []string, location string, choice *resourceChoice, skipped *[]string) []slashCommand {
	var out []slashCommand
	for _, dir := range dirs {
		paths, note := skillEntries(dir, true, true)
		if note != "" {
			*skipped = append(*skipped, skillWalkNote(location, dir, note))
		}
		for _, path := range paths {
			if choice.admit(path, location, "skills", filepath.Dir(dir)) {
				out = appendSkill(out, path, location, sourceInfo{path, "auto", location, "top-level", filepath.Dir(dir)}, skipped)
			}
		}
	}
	return out
}

// resourceChoice is what the patterns of settings.json's skills and
// prompts decide, for one load of them all. As in pi, a file is decided
// once, the first time it is found (a listed one before one found on its
// own): found again, it is neither loaded again nor let in by another
// list.
type resourceChoice struct {
	decided map[string]bool // a file's path: whether it is loaded
	// overrides are each list's !glob, +path and -path, by location and
	// key ("user skills"): they decide for the files found on their own
	// in that location's folders.
	overrides map[string]resourcePatterns
	notes     []string // the warnings of overrides spent (maxGlobWork)
}

// newResourceChoice gathers the patterns of the lists in listed.
func newResourceChoice(listed []listedResources, home string) *resourceChoice {
	c := &resourceChoice{decided: map[string]bool{}, overrides: map[string]resourcePatterns{}}
	for _, l := range listed {
		for key, entries := range map[string][]string{"skills": l.skills, "prompts": l.prompts} {
			_, p := splitResourceEntries(entries, home)
			if !p.none() {
				k := l.location + " " + key
				old := c.overrides[k]
				p.excludes = append(old.excludes, p.excludes...)
				p.forceIn = append(old.forceIn, p.forceIn...)
				p.forceOut = append(old.forceOut, p.forceOut...)
				c.overrides[k] = p
			}
		}
	}
	return c
}

// admit decides for a file found on its own in a location's folders
// (key "skills" or "prompts"), base being the folder its relative
// patterns are taken from: true to load it.
func (c *resourceChoice) admit(path, location, key, base string) bool {
	if c == nil {
		return true
	}
	if _, ok := c.decided[path]; ok {
		return false
	}
	on := true
	if p, ok := c.overrides[location+" "+key]; ok {
		on = p.enabled(path, base)
		if note := p.spentNote(key, location+" settings.json"); note != "" {
			c.notes = append(c.notes, note)
		}
	}
	c.decided[path] = on
	return on
}

// decide records the decision of a listed file; false when the file was
// decided before.
func (c *resourceChoice) decide(path string, on bool) bool {
	if c == nil {
		return true
	}
	if _, ok := c.decided[path]; ok {
		return false
	}
	c.decided[path] = on
	return true
}

// projectAgentsSkillDirs are the .agents/skills folders pi reads for a
// project in cwd: cwd's, then each folder's above it up to the top of
// its git repository (the folder that holds .git), or up to the root
// when it is in none; userDir (~/.agents/skills, the user's) is left
// out when it is one of them.
func projectAgentsSkillDirs(cwd, userDir string) []string {
	var dirs []string
	for dir := cwd; ; {
		if skills := filepath.Join(dir, ".agents", "skills"); skills != userDir {
			dirs = append(dirs, skills)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return dirs
		}
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return dirs
		}
		dir = parent
	}
}

// listedResources are the skills and prompts entries of one settings.json
// (pi's): files or folders, a relative one taken from base, the folder
// that holds the file (the agent dir for the user's, the project's .pi
// for the project's), a leading ~ from the home folder.
type listedResources struct {
	file, base, location string
	skills, prompts      []string
}

// skillsSetting is settings.json's skills: a list of paths, or the object
// of older versions of pi, which pi 1.6 still reads, {"customDirectories":
// [paths], "enableSkillCommands": bool} (its enableSkillCommands counts
// where the file has none of its own).
type skillsSetting struct {
	paths         []string
	enableCommand *bool
}

func (s *skillsSetting) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '{' {
		var old struct {
			CustomDirectories   []string `json:"customDirectories"`
			EnableSkillCommands *bool    `json:"enableSkillCommands"`
		}
		if err := unmarshalExact(data, &old); err != nil {
			return errSkillsSetting
		}
		s.paths, s.enableCommand = old.CustomDirectories, old.EnableSkillCommands
		return nil
	}
	if err := json.Unmarshal(data, &s.paths); err != nil {
		return errSkillsSetting
	}
	return nil
}

// errSkillsSetting says what skills must be: the decoder's own error,
// from within the value, would count its place from the value's start.
var errSkillsSetting = errors.New("skills must be a list of paths, or pi's older object of customDirectories and enableSkillCommands")

// loadListed reads the templates and skills a settings.json lists, as pi
// finds them: a listed folder holds templates in its *.md files at any
// depth, and skills as a folder's SKILL.md (a folder with one is a skill,
// nothing below it is looked at) or as a *.md file at its top; a listed
// file is one template or skill, if it ends in .md. Names starting with
// a dot and node_modules folders are passed over, and so is a folder
// reached through a symlink (pi follows it, into a loop if the link
// points up), and what the folders' ignore files list (skillIgnores). A
// path that does not exist is passed over without a word, as in pi. The
// list's patterns (resourcePatterns) then say which of the files found
// are loaded; choice records it (each file is decided once).
func loadListed(l listedResources, home string, kinds resourceKinds, choice *resourceChoice, skipped *[]string) []slashCommand {
	var out []slashCommand
	for _, list := range []struct {
		key  string
		on   bool
		list []string
	}{{"prompts", kinds.templates, l.prompts}, {"skills", kinds.skills, l.skills}} {
		if !list.on {
			continue
		}
		plain, patterns := splitResourceEntries(list.list, home)
		var all []string
		for _, entry := range plain {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			path, ok := expandTilde(entry, home)
			if !ok {
				*skipped = append(*skipped, fmt.Sprintf("%s %q in %s: there is no home folder for its ~", list.key, entry, l.file))
				continue
			}
			path = resolvePath(l.base, path)
			info, err := os.Stat(path)
			if err != nil {
				continue // as pi: a missing path is no error
			}
			switch {
			case info.IsDir() && list.key == "prompts":
				files, note := markdownFiles(path)
				if note != "" {
					*skipped = append(*skipped, skillWalkNote(l.location, path, note))
				}
				all = append(all, files...)
			case info.IsDir():
				files, note := skillEntries(path, true, false)
				if note != "" {
					*skipped = append(*skipped, skillWalkNote(l.location, path, note))
				}
				all = append(all, files...)
			case strings.HasSuffix(path, ".md") || list.key == "skills":
				all = append(all, path)
			}
		}
		on := patterns.apply(all, l.base)
		if note := patterns.spentNote(list.key, l.file); note != "" {
			*skipped = append(*skipped, note)
		}
		for i, file := range all {
			if !choice.decide(file, on[i]) || !on[i] {
				continue
			}
			source := sourceInfo{file, "local", l.location, "top-level", ""}
			switch {
			case list.key == "prompts":
				out = appendTemplate(out, file, l.location, source, skipped)
			case !strings.HasSuffix(file, ".md"):
				// As pi: a listed skill that is no .md file is passed over.
				*skipped = append(*skipped, fmt.Sprintf("%s resource %s: a skill is a Markdown file (.md)", l.location, file))
			default:
				out = appendSkill(out, file, l.location, source, skipped)
			}
		}
	}
	return out
}

// cliResources are the skills and templates --skill and
// --prompt-template name, as pi 1.6 loads them: after every other (the
// first of a name wins), with --no-skills and --no-prompt-templates too,
// and without --approve (the command line is the user's). Their scope is
// pi's for them, "temporary". Unlike a settings.json entry, a path that
// is not there is told.
func cliResources(cfg cliConfig, home string, skipped *[]string) []slashCommand {
	l := listedResources{file: "the command line", base: cfg.cwd, location: "temporary",
		skills: cfg.skills, prompts: cfg.promptTemplates}
	for _, list := range []struct {
		flag    string
		entries []string
	}{{"--prompt-template", l.prompts}, {"--skill", l.skills}} {
		for _, entry := range list.entries {
			path, ok := expandTilde(strings.TrimSpace(entry), home)
			if !ok {
				continue // loadListed tells it
			}
			path = resolvePath(l.base, path)
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				*skipped = append(*skipped, fmt.Sprintf("%s %s: there is no such file or folder", list.flag, path))
			} else if err != nil {
				*skipped = append(*skipped, fmt.Sprintf("%s %s: %v", list.flag, path, unwrapPathError(err)))
			}
		}
	}
	return loadListed(l, home, resourceKinds{templates: true, skills: true}, nil, skipped) // nil: what the command line names is not left to settings.json's patterns
}

// readCommandFile is a template's or skill's text; "", false when it cannot
// be used (named in skipped).
func readCommandFile(path, location string, skipped *[]string) (string, bool) {
	data, err := readRegularFile(path, maxResourceBytes)
	if err != nil {
		*skipped = append(*skipped, location+" resource "+resourceError(path, err))
		return "", false
	}
	return withoutBOM(data), true // as pi, which strips it before reading front matter
}

// appendTemplate adds the template in path to out: named after its file,
// described by its front matter's description or else its first line.
func appendTemplate(out []slashCommand, path, location string, source sourceInfo, skipped *[]string) []slashCommand {
	text, ok := readCommandFile(path, location, skipped)
	if !ok {
		return out
	}
	fields, body, err := frontMatter(text)
	if err != nil {
		// As pi: a template whose front matter is not YAML is skipped.
		*skipped = append(*skipped, location+" resource "+path+": front matter is not YAML rpi reads: "+err.Error())
		return out
	}
	desc := fields.text("description")
	if desc == "" {
		desc = firstLine(body)
	}
	return append(out, slashCommand{Name: strings.TrimSuffix(filepath.Base(path), ".md"), Description: desc,
		Source: "prompt", Location: location, Path: path, SourceInfo: source, body: body})
}

// appendSkill adds the skill in path to out: named by its front matter,
// or else after its folder. A skill needs a description: a SKILL.md
// without one is skipped with a warning, another .md file (a listed
// folder's, which may be any notes) without a word, as in pi.
func appendSkill(out []slashCommand, path, location string, source sourceInfo, skipped *[]string) []slashCommand {
	text, ok := readCommandFile(path, location, skipped)
	if !ok {
		return out
	}
	fields, body, err := frontMatter(text)
	if err != nil {
		// As pi: a SKILL.md whose front matter is not YAML is skipped with
		// a warning, another .md file without a word.
		if filepath.Base(path) == "SKILL.md" {
			*skipped = append(*skipped, location+" resource "+path+": front matter is not YAML rpi reads: "+err.Error())
		}
		return out
	}
	desc := fields.text("description")
	if strings.TrimFunc(desc, jsSpace) == "" {
		if filepath.Base(path) == "SKILL.md" {
			// As pi: a skill is chosen by its description, so one without is no skill.
			*skipped = append(*skipped, location+" resource "+path+": a skill needs a description in its front matter")
		}
		return out
	}
	name := fields.text("name")
	if name == "" {
		name = filepath.Base(filepath.Dir(path))
	}
	return append(out, slashCommand{Name: "skill:" + name, Description: desc,
		Source: "skill", Location: location, Path: path, SourceInfo: source,
		body: strings.TrimSpace(body), modelHidden: fields.isTrue("disable-model-invocation")})
}

// skillWarnings are pi's warnings about the skills in commands whose
// name or description the Agent Skills rules do not allow; each skill is
// used all the same, as in pi. A length counts UTF-16 units, as pi's.
func skillWarnings(commands []slashCommand) []string {
	var warnings []string
	for _, c := range commands {
		if c.Source != "skill" {
			continue
		}
		name := strings.TrimPrefix(c.Name, "skill:")
		var faults []string
		if n := utf16Len(name); n > 64 {
			faults = append(faults, fmt.Sprintf("name exceeds 64 characters (%d)", n))
		}
		if strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			faults = append(faults, "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)")
		}
		if strings.HasPrefix(name, "-") || strings.HasSuffix(name, "-") {
			faults = append(faults, "name must not start or end with a hyphen")
		}
		if strings.Contains(name, "--") {
			faults = append(faults, "name must not contain consecutive hyphens")
		}
		if n := utf16Len(c.Description); n > 1024 {
			faults = append(faults, fmt.Sprintf("description exceeds 1024 characters (%d)", n))
		}
		if len(faults) > 0 {
			warnings = append(warnings, fmt.Sprintf("Skill %q (%s): %s", name, c.Path, strings.Join(faults, "; ")))
		}
	}
	return warnings
}

// utf16Len is the length of s in UTF-16 units, as JavaScript counts it.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r > 0xFFFF {
			n++
		}
	}
	return n
}

// passedOver says whether a listed folder's walk leaves out the entry
// name, as pi's does: hidden ones and node_modules.
func passedOver(name string) bool { return strings.HasPrefix(name, ".") || name == "node_modules" }

// isRegularFile says whether path is a regular file, through a symlink
// (here, and where Windows looks for bash.exe).
func isRegularFile(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular()
}

// markdownFiles are the *.md files in dir and the folders below it, in
// name order, but for what their ignore files list (loadListed's walk
// for templates, as pi's). The walk is bounded as skillEntries's: a
// listed folder may be / or the home folder.
func markdownFiles(dir string) (paths []string, note string) {
	w := markdownWalker{left: maxSkillEntries}
	paths = w.walk(dir, "")
	return paths, walkNote(w.left, &w.ignores)
}

// markdownWalker is one walk of markdownFiles, as skillWalk is one of
// skillEntries.
type markdownWalker struct {
	left    int
	ignores skillIgnores
}

func (w *markdownWalker) walk(dir, rel string) []string {
	if w.left < 0 || w.ignores.spent {
		return nil
	}
	entries, _ := os.ReadDir(dir)
	if w.left -= len(entries); w.left < 0 {
		return nil
	}
	ig := &w.ignores
	var paths []string
	ig.load(dir, rel, entries)
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		switch {
		case ig.spent:
			return paths
		case passedOver(e.Name()):
		case e.IsDir():
			if !ig.ignoresEntry(rel, e.Name(), true) {
				paths = append(paths, w.walk(path, joinRel(rel, e.Name()))...)
			}
		case strings.HasSuffix(e.Name(), ".md") && isRegularFile(path) && !ig.ignoresEntry(rel, e.Name(), false):
			paths = append(paths, path)
		}
	}
	return paths
}

// joinRel is the path of name in the folder rel of a walk, with /.
func joinRel(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}

// skillEntries are the skill files in a skills folder, as pi finds them
// (loadListed's walk, and that of each skills folder rpi reads by
// itself): its SKILL.md alone if it has one; else the skills of each
// folder in it, in name order, and its *.md files — at the top in pi's
// own folders and listed ones, below the top in an Agent Skills folder
// (agents: ~/.agents/skills, .agents/skills), where a top-level file is
// not one. Names starting with a dot and node_modules are passed over,
// and so is what the .gitignore, .ignore and .fdignore files of the
// folders walked list (skillIgnores; a SKILL.md one lists is no skill,
// and its folder is walked as any other). A folder reached through a
// symlink (a skill linked in from elsewhere) gives its SKILL.md, if it
// holds one, but is not walked (nor are its ignore files read): pi walks
// it, into a loop if the link points up. The walk stops once the folders
// it read held maxSkillEntries entries (pi's has no bound), and reads at
// most maxIgnoreRules rules: note says so ("" when neither). A project's
// skills folder may be a link to / or hold a huge tree, and is walked at
// startup, even in a project not trusted (to count its skills).
func skillEntries(dir string, top, agents bool) (paths []string, note string) {
	w := skillWalk{agents: agents, left: maxSkillEntries}
	paths = w.walk(dir, "", top)
	return paths, walkNote(w.left, &w.ignores)
}

// walkNote says why a walk that had left entries to read, and read the
// ignore rules ig, stopped short or left rules out; "" when it did not.
func walkNote(left int, ig *skillIgnores) string {
	switch {
	case left < 0:
		return fmt.Sprintf("it holds more than %d entries; the rest is not read", maxSkillEntries)
	case ig.spent:
		return spentNote
	case ig.cut:
		return fmt.Sprintf("its ignore files hold more than %d rules, one longer than %d bytes, or more than %d bytes in all; those are not read", maxIgnoreRules, maxIgnoreRuleBytes, maxIgnoreBytes)
	}
	return ""
}

// maxSkillEntries bounds the walk of one skills folder: the entries of
// all the folders it reads.
const maxSkillEntries = 20000

// skillWalk is one walk of skillEntries: left is how many more entries
// it reads (below 0: it was cut); ignores are the rules of the ignore
// files read so far.
type skillWalk struct {
	agents  bool
	left    int
	ignores skillIgnores
}

// walk reads dir, the folder rel of the walk ("" for its top).
func (w *skillWalk) walk(dir, rel string, top bool) []string {
	if w.left < 0 || w.ignores.spent {
		return nil
	}
	entries, _ := os.ReadDir(dir)
	if w.left -= len(entries); w.left < 0 {
		return nil
	}
	ig := &w.ignores
	ig.load(dir, rel, entries)
	if path := filepath.Join(dir, "SKILL.md"); slices.ContainsFunc(entries, func(e fs.DirEntry) bool { return e.Name() == "SKILL.md" }) &&
		isRegularFile(path) && !ig.ignoresEntry(rel, "SKILL.md", false) {
		return []string{path}
	}
	var paths []string
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		switch {
		case ig.spent:
			return paths
		case passedOver(e.Name()):
		case e.IsDir():
			if !ig.ignoresEntry(rel, e.Name(), true) {
				paths = append(paths, w.walk(path, joinRel(rel, e.Name()), false)...)
			}
		case e.Type()&fs.ModeSymlink != 0 && isDir(path):
			if skill := filepath.Join(path, "SKILL.md"); isRegularFile(skill) && !ig.ignoresEntry(rel, e.Name(), true) &&
				!ig.ignoresEntry(joinRel(rel, e.Name()), "SKILL.md", false) {
				paths = append(paths, skill)
			}
		case top != w.agents && strings.HasSuffix(e.Name(), ".md") && isRegularFile(path) && !ig.ignoresEntry(rel, e.Name(), false):
			paths = append(paths, path)
		}
	}
	return paths
}

// skillWalkNote is the warning of a walk skillEntries cut short.
func skillWalkNote(location, dir, note string) string {
	return fmt.Sprintf("%s resource %s: %s", location, dir, note)
}

// isDir says whether path is a folder, through a symlink.
func isDir(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}

// menuCommands are the commands a client offers in its / menu (ACP's
// available commands): the skills only if settings.json's
// enableSkillCommands is not false. As in pi, where the setting hides
// them from the editor's completion alone, get_commands lists them and
// /skill:name runs either way.
func (set *settings) menuCommands() []slashCommand {
	if !set.skillsHidden {
		return set.slashCommands
	}
	return slices.DeleteFunc(slices.Clone(set.slashCommands), func(c slashCommand) bool { return c.Source == "skill" })
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

// templateFiles are dir/prompts/*.md, in name order, but for names
// starting with a dot, as in pi. It reads the folder rather than globbing
// its path, which would take a *, ? or [ in dir as a pattern: a project
// in q* found the templates of the project qz beside it, and one in p[1]
// none of its own.
//
// As pi, the ignore files of prompts/ leave out the files they list (of
// prompts/ alone: the folders below it are not read).
func templateFiles(dir string) (paths []string, note string) {
	entries, _ := os.ReadDir(filepath.Join(dir, "prompts"))
	var ig skillIgnores
	ig.load(filepath.Join(dir, "prompts"), "", entries)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".md") && !passedOver(e.Name()) && !ig.ignores(e.Name(), false) {
			paths = append(paths, filepath.Join(dir, "prompts", e.Name()))
		}
		if ig.spent {
			return paths, spentNote
		}
	}
	return paths, ""
}

// projectResources counts what a project in cwd holds that only trust
// (--approve, trust.json, defaultProjectTrust) loads: in ./.pi (files are those of protectedFiles there),
// and the skills of the .agents/skills folders pi reads for it
// (projectAgentsSkillDirs; userAgents is the user's).
func projectResources(cwd, userAgents string) (prompts, skills, agentsSkills int, files []string) {
	p, _ := templateFiles(filepath.Join(cwd, ".pi"))
	k, _ := skillEntries(filepath.Join(cwd, ".pi", "skills"), true, false)
	for _, dir := range projectAgentsSkillDirs(cwd, userAgents) {
		found, _ := skillEntries(dir, true, true)
		agentsSkills += len(found)
	}
	for _, name := range protectedFiles {
		if _, err := os.Stat(filepath.Join(cwd, ".pi", name)); err == nil {
			files = append(files, name)
		}
	}
	return len(p), len(k), agentsSkills, files
}

// protectedFiles are the files of a project's .pi that are read only
// when the project is trusted, as pi 1.6 counts them.
var protectedFiles = []string{"settings.json", "mcp.json", "SYSTEM.md", "APPEND_SYSTEM.md"}

// expandSlash expands a prompt starting with /skill:name or /name (a
// template); any other text comes back unchanged. As pi 1.6: a skill's
// name ends at a space, a template's at any whitespace; /skill:x is the
// skill x, else a template of that name.
func (s *session) expandSlash(text string) string {
	if after, ok := strings.CutPrefix(text, "/skill:"); ok {
		name, rest, _ := strings.Cut(after, " ")
		i := slices.IndexFunc(s.set.slashCommands, func(c slashCommand) bool { return c.Source == "skill" && c.Name == "skill:"+name })
		if i >= 0 {
			c := s.set.slashCommands[i]
			// As pi: the name and path as they are, not quoted or escaped.
			out := fmt.Sprintf("<skill name=\"%s\" location=\"%s\">\nReferences are relative to %s.\n\n%s\n</skill>",
				name, c.Path, filepath.Dir(c.Path), c.body)
			if rest = strings.TrimFunc(rest, jsSpace); rest != "" {
				out += "\n\n" + rest
			}
			return out
		}
	}
	if !strings.HasPrefix(text, "/") {
		return text
	}
	name, rest := text[1:], ""
	if i := strings.IndexFunc(name, jsSpace); i >= 0 {
		name, rest = name[:i], name[i:]
	}
	i := slices.IndexFunc(s.set.slashCommands, func(c slashCommand) bool { return c.Source == "prompt" && c.Name == name })
	if name == "" || i < 0 {
		return text
	}
	return substituteArgs(s.set.slashCommands[i].body, splitArgs(rest))
}

// splitArgs splits template arguments as pi 1.6's parseCommandArgs: on
// whitespace, with "…" and '…' quoting that opens only at the start of an
// argument; \" inside "…" (\' inside '…') is the quote itself, and a quote
// never closed is a character like another, the text after it read again.
func splitArgs(s string) []string {
	var args []string
	var cur strings.Builder
	var quote byte
	quoteStart, inArg := 0, false
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		next := i + size
		switch {
		case quote != 0 && s[i] == '\\' && next < len(s) && s[next] == quote:
			cur.WriteByte(quote)
			next++
		case quote != 0 && s[i] == quote:
			quote = 0
		case quote != 0:
			cur.WriteString(s[i:next])
		case (s[i] == '"' || s[i] == '\'') && !inArg:
			quote, quoteStart, inArg = s[i], i, true
		case jsSpace(r):
			if inArg {
				args, inArg = append(args, cur.String()), false
				cur.Reset()
			}
		default:
			cur.WriteString(s[i:next])
			inArg = true
		}
		if quote != 0 && next >= len(s) {
			// Never closed: the quote is a character, and what follows it
			// is read again as unquoted (at most twice over, once a kind).
			cur.Reset()
			cur.WriteByte(quote)
			quote, next = 0, quoteStart+1
		}
		i = next
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args
}

// templateArgument matches what a template fills with its arguments, as
// pi 1.6's: ${N:-default}, ${@:-default} and ${ARGUMENTS:-default}, ${@:N}
// and ${@:N:L}, $1…$n, $ARGUMENTS and $@ (compiled at first use).
var templateArgument = lazy[*regexp.Regexp]{build: func() *regexp.Regexp {
	return regexp.MustCompile(`\$\{(\d+|ARGUMENTS|@):-([^}]*)\}|\$\{@:(\d+)(?::(\d+))?\}|\$(\d+)|\$ARGUMENTS|\$@`)
}}

// substituteArgs fills a template as pi does: $1…$n by position (missing
// ones are empty), ${N:-default} by the N-th or, when it is missing or
// empty, the default (${@:-default} and ${ARGUMENTS:-default} likewise by
// all of them), ${@:N} with the arguments from the N-th on and ${@:N:L}
// with L of them, $ARGUMENTS and $@ with all of them, each joined with a
// space. The template is read once, left to right: text an argument or a
// default brings in is never expanded again.
func substituteArgs(body string, args []string) string {
	var out strings.Builder
	last := 0
	for _, m := range templateArgument.get().FindAllStringSubmatchIndex(body, -1) {
		out.WriteString(body[last:m[0]])
		last = m[1]
		switch {
		case m[2] >= 0: // ${N:-default}, ${@:-default}, ${ARGUMENTS:-default}
			value := ""
			if target := body[m[2]:m[3]]; target == "@" || target == "ARGUMENTS" {
				value = strings.Join(args, " ")
			} else if n, err := strconv.Atoi(target); err == nil && n >= 1 && n <= len(args) {
				value = args[n-1]
			}
			if value == "" {
				value = body[m[4]:m[5]]
			}
			out.WriteString(value)
		case m[6] >= 0: // ${@:N} or ${@:N:L}
			from := len(args) // a start too large for an int is past the end
			if n, err := strconv.Atoi(body[m[6]:m[7]]); err == nil {
				from = min(max(n-1, 0), len(args)) // ${@:0} starts at the first, as in bash
			}
			to := len(args)
			if m[8] >= 0 {
				if n, err := strconv.Atoi(body[m[8]:m[9]]); err == nil && n < to-from {
					to = from + n
				}
			}
			out.WriteString(strings.Join(args[from:to], " "))
		case m[10] >= 0: // $n
			if n, err := strconv.Atoi(body[m[10]:m[11]]); err == nil && n >= 1 && n <= len(args) {
				out.WriteString(args[n-1])
			}
		default: // $ARGUMENTS or $@
			out.WriteString(strings.Join(args, " "))
		}
	}
	out.WriteString(body[last:])
	return out.String()
}
