package main

// The two kinds of pattern pi 1.6 reads when it finds skills and prompt
// templates: the !glob, +path and -path entries of settings.json's skills
// and prompts (resourcePatterns), and the .gitignore, .ignore and
// .fdignore files in the folders it walks (skillIgnores).

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// isResourcePattern says whether a skills or prompts entry is one of
// pi's patterns rather than a path: !glob, +path, -path, or one with a
// * or ?. As in pi, the entry is looked at as written, spaces and all.
func isResourcePattern(entry string) bool {
	return strings.HasPrefix(entry, "!") || strings.HasPrefix(entry, "+") || strings.HasPrefix(entry, "-") ||
		strings.ContainsAny(entry, "*?")
}

// resourcePatterns are the patterns of one skills or prompts list, each
// without its mark: includes (a glob, which keeps only the listed files
// it matches), excludes (!glob), forceIn (+path) and forceOut (-path).
type resourcePatterns struct {
	includes, excludes, forceIn, forceOut []string
	home                                  string    // for a leading ~
	work                                  *globWork // what the globs may still take
}

// maxGlobWork bounds the work of one list's globs over the files they are
// matched with, counted as each pattern's length (each of its {…}
// expansions') times the path's, and a pattern's length squared for
// finding its {…}: a few seconds at worst, against settings.json's
// globs of many * and ? over thousands of files, which took minutes.
// Past it, the rest of the files are not loaded, with a warning; ten
// globs over 20,000 skills take a tenth of it.
const maxGlobWork = 1 << 30

// globWork is what is left of maxGlobWork for one list's globs; below
// 0, they are spent: a file is then matched by an exclude and by no
// include, so left out.
type globWork struct {
	left int
	told bool // the warning is given
}

// spentNote is the warning of a list's globs that were spent, once; ""
// when they were not, or it was given.
func (p resourcePatterns) spentNote(key, file string) string {
	if p.work == nil || p.work.left >= 0 || p.work.told {
		return ""
	}
	p.work.told = true
	return fmt.Sprintf("%s patterns in %s: they take too long to match the files found; the rest are not loaded", key, file)
}

// splitResourceEntries splits a list into its paths and its patterns.
func splitResourceEntries(entries []string, home string) (plain []string, p resourcePatterns) {
	p.home, p.work = home, &globWork{left: maxGlobWork}
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e, "+"):
			p.forceIn = append(p.forceIn, e[1:])
		case strings.HasPrefix(e, "-"):
			p.forceOut = append(p.forceOut, e[1:])
		case strings.HasPrefix(e, "!"):
			p.excludes = append(p.excludes, e[1:])
		case isResourcePattern(e):
			p.includes = append(p.includes, e)
		default:
			plain = append(plain, e)
		}
	}
	return plain, p
}

// apply says which of the files a list's paths gave are loaded, in
// pi's order: the includes keep those they match (all, with none), the
// excludes drop those they match, a +path takes back one it names, and
// a -path drops one it names, whatever came before. base is the folder
// relative patterns are taken from.
func (p resourcePatterns) apply(files []string, base string) []bool {
	on := make([]bool, len(files))
	for i, f := range files {
		on[i] = len(p.includes) == 0 || p.matchesGlob(f, p.includes, base, false)
		if on[i] && p.matchesGlob(f, p.excludes, base, true) {
			on[i] = false
		}
		if !on[i] && p.matchesExact(f, p.forceIn, base) {
			on[i] = true
		}
		if on[i] && p.matchesExact(f, p.forceOut, base) {
			on[i] = false
		}
	}
	return on
}

// enabled says whether a file found on its own (in the agent dir's
// skills/ or prompts/, a project's .pi, an .agents/skills folder) is
// loaded: the list's !glob, +path and -path apply to it as to a listed
// one (its includes do not), relative to base, the folder it was found
// in's base.
func (p resourcePatterns) enabled(file, base string) bool {
	on := !p.matchesGlob(file, p.excludes, base, true)
	if !on && p.matchesExact(file, p.forceIn, base) {
		on = true
	}
	if on && p.matchesExact(file, p.forceOut, base) {
		on = false
	}
	return on
}

// none says whether the list has no pattern that can drop a file found
// on its own.
func (p resourcePatterns) none() bool {
	return len(p.excludes) == 0 && len(p.forceOut) == 0
}

// patternForms are what pi matches a pattern against: the file's path
// relative to base, its name and its whole path, and for a SKILL.md the
// same of its folder; exact are those a +path or -path must equal (not
// the names). Paths are written with /.
func patternForms(file, base string) (all, exact []string) {
	rel := func(path string) string {
		if r, err := filepath.Rel(base, path); err == nil {
			return filepath.ToSlash(r)
		}
		return filepath.ToSlash(path)
	}
	all = []string{rel(file), filepath.Base(file), filepath.ToSlash(file)}
	exact = []string{all[0], all[2]}
	if filepath.Base(file) == "SKILL.md" {
		dir := filepath.Dir(file)
		all = append(all, rel(dir), filepath.Base(dir), filepath.ToSlash(dir))
		exact = append(exact, all[3], all[5])
	}
	return all, exact
}

// maxGlobBytes bounds a pattern whose {…} are expanded: a longer one is
// matched as it is written.
const maxGlobBytes = 4096

// matchesGlob says whether any of patterns matches one of the file's
// forms (patternForms), as minimatch does by default (minimatch); spent
// once the list's globs are spent (maxGlobWork).
func (p resourcePatterns) matchesGlob(file string, patterns []string, base string, spent bool) bool {
	if len(patterns) == 0 {
		return false
	}
	var left *int
	if p.work != nil {
		if p.work.left < 0 {
			return spent
		}
		left = &p.work.left
	}
	forms, _ := patternForms(file, base)
	for _, pattern := range patterns {
		pattern = filepath.ToSlash(p.tilde(pattern))
		for _, form := range forms {
			matched := minimatchWork(pattern, form, left)
			if left != nil && *left < 0 {
				return spent
			}
			if matched {
				return true
			}
		}
	}
	return false
}

// matchesExact says whether any of paths names the file: its path
// relative to base (a leading ./ allowed) or its whole path; for a
// SKILL.md, its folder's either way too. The file's name alone is not
// enough, as in pi.
func (p resourcePatterns) matchesExact(file string, paths []string, base string) bool {
	if len(paths) == 0 {
		return false
	}
	_, forms := patternForms(file, base)
	for _, path := range paths {
		if rest, ok := strings.CutPrefix(path, "./"); ok {
			path = rest
		} else if rest, ok := strings.CutPrefix(path, `.\`); ok {
			path = rest
		}
		path = filepath.ToSlash(p.tilde(path))
		if slices.Contains(forms, path) {
			return true
		}
	}
	return false
}

// tilde expands a pattern's leading ~ or ~/ to the home folder, as pi.
func (p resourcePatterns) tilde(pattern string) string {
	if pattern == "~" || strings.HasPrefix(pattern, "~/") || strings.HasPrefix(pattern, "~"+string(filepath.Separator)) {
		if expanded, ok := expandTilde(pattern, p.home); ok {
			return expanded
		}
	}
	return pattern
}

// maxBraceExpansions bounds the patterns one pattern's {a,b} and {1..9}
// expand to: the rest are not tried.
const maxBraceExpansions = 256

// minimatch says whether path matches pattern as minimatch (pi's) does
// with its default options: * and ? within one /-separated part, [...]
// classes, ** as a whole part for any number of parts, {a,b} and {1..3}
// expanded; a part starting with a dot is matched only by a pattern
// part that starts with one (nor by **). A pattern starting with # is a
// comment and matches nothing; one starting with ! matches what it
// would not. minimatch's +(…), @(…), !(…), ?(…) and *(…) are not read:
// their characters count as they are.
func minimatch(pattern, path string) bool {
	return minimatchWork(pattern, path, nil)
}

// minimatchWork is minimatch taking its work from left (maxGlobWork),
// unless it is nil; past it, left is below 0 and the answer false.
func minimatchWork(pattern, path string, left *int) bool {
	if strings.HasPrefix(pattern, "#") {
		return false
	}
	negate := false
	for strings.HasPrefix(pattern, "!") {
		negate, pattern = !negate, pattern[1:]
	}
	take := func(n int) bool {
		if left == nil {
			return true
		}
		*left -= n
		return *left >= 0
	}
	if strings.Contains(pattern, "{") && len(pattern) <= maxGlobBytes && !take(len(pattern)*len(pattern)) {
		return false
	}
	parts := strings.Split(path, "/")
	matched := false
	for _, p := range expandBraces(pattern) {
		if !take((len(p) + 1) * (len(path) + 1)) {
			return false
		}
		if globParts(strings.Split(p, "/"), parts) {
			matched = true
			break
		}
	}
	return matched != negate
}

// globParts matches a pattern's parts to a path's: reach[j] says the
// pattern parts so far match the path's first j parts.
func globParts(pattern, parts []string) bool {
	reach := make([]bool, len(parts)+1)
	next := make([]bool, len(parts)+1)
	reach[0] = true
	for i, p := range pattern {
		clear(next)
		if p == "**" {
			// ** takes no part or some, none hidden; the last one of a
			// pattern takes one at least, as minimatch's (a/** is not a).
			last, on := i == len(pattern)-1, false
			for j := 0; j <= len(parts); j++ {
				if !last {
					on = on || reach[j]
				}
				next[j] = on
				if j < len(parts) {
					on = (on || reach[j]) && !strings.HasPrefix(parts[j], ".")
				}
			}
		} else {
			for j := range parts {
				if reach[j] && globPart(p, parts[j]) {
					next[j+1] = true
				}
			}
		}
		reach, next = next, reach
	}
	return reach[len(parts)]
}

// globToken is one element of a pattern part: a literal rune, ? (any),
// * (star) or a class.
type globToken struct {
	kind   byte // 'l', '?', '*', '['
	r      rune
	class  [][2]rune
	negate bool
}

// globPart matches one part of a pattern to one of a path, in time
// bounded by the product of their lengths.
func globPart(pattern, part string) bool {
	toks := globTokens(pattern)
	if strings.HasPrefix(part, ".") && (len(toks) == 0 || toks[0].kind != 'l' || toks[0].r != '.') {
		return false
	}
	text := []rune(part)
	// reach[j]: the tokens so far match text[:j].
	reach := make([]bool, len(text)+1)
	next := make([]bool, len(text)+1)
	reach[0] = true
	for _, t := range toks {
		clear(next)
		if t.kind == '*' {
			on := false
			for j := range reach {
				on = on || reach[j]
				next[j] = on
			}
		} else {
			for j, r := range text {
				if reach[j] && t.matches(r) {
					next[j+1] = true
				}
			}
		}
		reach, next = next, reach
	}
	return reach[len(text)]
}

func (t globToken) matches(r rune) bool {
	switch t.kind {
	case '?':
		return true
	case '[':
		return classHas(t.class, r) != t.negate
	}
	return t.r == r
}

// globTokens reads a pattern part: \ escapes the next character, and a
// [ without its ] is a literal [.
func globTokens(p string) []globToken {
	var toks []globToken
	rs := []rune(p)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == '\\' && i+1 < len(rs):
			i++
			toks = append(toks, globToken{kind: 'l', r: rs[i]})
		case r == '?':
			toks = append(toks, globToken{kind: '?'})
		case r == '*':
			if len(toks) == 0 || toks[len(toks)-1].kind != '*' {
				toks = append(toks, globToken{kind: '*'})
			}
		case r == '[':
			if class, negate, end, ok := globClass(rs, i); ok {
				toks = append(toks, globToken{kind: '[', class: class, negate: negate})
				i = end
				continue
			}
			toks = append(toks, globToken{kind: 'l', r: r})
		default:
			toks = append(toks, globToken{kind: 'l', r: r})
		}
	}
	return toks
}

// globClass reads the class [...] starting at rs[start]: its ranges, !
// or ^ after [ negating it, a ] first being a member, a-z a range and
// [:alpha:] and the like POSIX's classes.
func globClass(rs []rune, start int) (class [][2]rune, negate bool, end int, ok bool) {
	i := start + 1
	if i < len(rs) && (rs[i] == '!' || rs[i] == '^') {
		negate = true
		i++
	}
	first := i
	for ; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == ']' && i > first:
			return class, negate, i, true
		case r == '[' && i+1 < len(rs) && rs[i+1] == ':':
			if close := slices.Index(rs[i+2:], ']'); close > 0 && rs[i+2+close-1] == ':' {
				if ranges, ok := posixClass(string(rs[i+2 : i+2+close-1])); ok {
					class = append(class, ranges...)
					i += 2 + close
					continue
				}
			}
			class = append(class, [2]rune{r, r})
		case r == '\\' && i+1 < len(rs):
			i++
			class = append(class, [2]rune{rs[i], rs[i]})
		case i+2 < len(rs) && rs[i+1] == '-' && rs[i+2] != ']':
			to := rs[i+2]
			if to == '\\' && i+3 < len(rs) {
				to = rs[i+3]
				i++
			}
			if r <= to {
				class = append(class, [2]rune{r, to})
			}
			i += 2
		default:
			class = append(class, [2]rune{r, r})
		}
	}
	return nil, false, 0, false
}

// posixClass is the ranges of the [:name:] class of a bracket, ASCII as
// node-ignore's (minimatch's take a few more for the Unicode letters);
// false for an unknown name.
func posixClass(name string) ([][2]rune, bool) {
	switch name {
	case "alnum":
		return [][2]rune{{'0', '9'}, {'A', 'Z'}, {'a', 'z'}}, true
	case "alpha":
		return [][2]rune{{'A', 'Z'}, {'a', 'z'}}, true
	case "blank":
		return [][2]rune{{' ', ' '}, {'\t', '\t'}}, true
	case "cntrl":
		return [][2]rune{{0, 0x1f}, {0x7f, 0x7f}}, true
	case "digit":
		return [][2]rune{{'0', '9'}}, true
	case "graph":
		return [][2]rune{{'!', '~'}}, true
	case "lower":
		return [][2]rune{{'a', 'z'}}, true
	case "print":
		return [][2]rune{{' ', '~'}}, true
	case "punct":
		return [][2]rune{{'!', '/'}, {':', '@'}, {'[', '`'}, {'{', '~'}}, true
	case "space":
		return [][2]rune{{' ', ' '}, {'\t', '\r'}}, true
	case "upper":
		return [][2]rune{{'A', 'Z'}}, true
	case "xdigit":
		return [][2]rune{{'0', '9'}, {'A', 'F'}, {'a', 'f'}}, true
	}
	return nil, false
}

func classHas(class [][2]rune, r rune) bool {
	for _, c := range class {
		if c[0] <= r && r <= c[1] {
			return true
		}
	}
	return false
}

// expandBraces expands a pattern's {a,b} lists and {1..3} or {a..c}
// ranges, as minimatch does before matching, to at most
// maxBraceExpansions patterns. A { without its } or without a comma or
// .. inside stays as it is.
func expandBraces(pattern string) []string {
	out := []string{pattern}
	if len(pattern) > maxGlobBytes {
		return out
	}
	for done := 0; done < len(out) && len(out) <= maxBraceExpansions; {
		p := out[done]
		open, close, alts := firstBraceSet(p)
		if open < 0 {
			done++
			continue
		}
		expanded := make([]string, 0, len(alts))
		for _, a := range alts {
			expanded = append(expanded, p[:open]+a+p[close+1:])
		}
		out = slices.Replace(out, done, done+1, expanded...)
	}
	if len(out) > maxBraceExpansions {
		out = out[:maxBraceExpansions]
	}
	return out
}

// firstBraceSet finds the first {…} of p that expands, and its
// alternatives; open is -1 when there is none.
func firstBraceSet(p string) (open, close int, alts []string) {
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' {
			i++
			continue
		}
		if p[i] != '{' {
			continue
		}
		depth, start := 0, i+1
		var parts []string
		for j := i + 1; j < len(p); j++ {
			switch p[j] {
			case '\\':
				j++
			case '{':
				depth++
			case ',':
				if depth == 0 {
					parts = append(parts, p[start:j])
					start = j + 1
				}
			case '}':
				if depth > 0 {
					depth--
					continue
				}
				if parts != nil {
					return i, j, append(parts, p[start:j])
				}
				if seq := braceSequence(p[i+1 : j]); seq != nil {
					return i, j, seq
				}
				j = len(p) // no comma: this { is literal
			}
		}
	}
	return -1, -1, nil
}

// braceSequence expands "1..3", "a..c" (and "1..9..2"), or nil.
func braceSequence(s string) []string {
	ends := strings.Split(s, "..")
	if len(ends) != 2 && len(ends) != 3 {
		return nil
	}
	step := 1
	if len(ends) == 3 {
		n, err := strconv.Atoi(ends[2])
		if err != nil || n == 0 {
			return nil
		}
		step = max(n, -n)
	}
	from, err1 := strconv.Atoi(ends[0])
	to, err2 := strconv.Atoi(ends[1])
	var seq []string
	switch {
	case err1 == nil && err2 == nil:
		for i := 0; i < maxBraceExpansions; i++ {
			v := from + i*step
			if from > to {
				v = from - i*step
			}
			if from <= to && v > to || from > to && v < to {
				break
			}
			seq = append(seq, strconv.Itoa(v))
		}
	case utf8.RuneCountInString(ends[0]) == 1 && utf8.RuneCountInString(ends[1]) == 1:
		a, _ := utf8.DecodeRuneInString(ends[0])
		b, _ := utf8.DecodeRuneInString(ends[1])
		for i := 0; i < maxBraceExpansions; i++ {
			v := a + rune(i*step)
			if a > b {
				v = a - rune(i*step)
			}
			if a <= b && v > b || a > b && v < b {
				break
			}
			seq = append(seq, string(v))
		}
	}
	return seq
}

// ignoreFileNames are the files whose rules a walk of a skills or
// prompts folder follows, in the order pi reads them.
var ignoreFileNames = [...]string{".gitignore", ".ignore", ".fdignore"}

// maxIgnoreRules bounds the rules one walk reads from its ignore files,
// and maxIgnoreRuleBytes each rule: a project's folders may hold any
// file, and every entry of the walk is tested against every rule that
// can match it. Rules past them are not read, with a warning.
const (
	maxIgnoreRules     = 512
	maxIgnoreRuleBytes = 1024
)

// maxIgnoreBytes bounds the bytes one walk reads of its ignore files, all
// told: a file that would pass it is not read (as rules past
// maxIgnoreRules, with a warning). A repository stores a file once
// however many folders hold it, and a project's skills are walked at
// startup also in a project not trusted: 9,000 folders each with the same
// 1 MiB .gitignore were read whole, for half a minute.
const maxIgnoreBytes = 1 << 20

// maxIgnoreWork bounds the work of testing one walk's entries against
// its rules, counted as each rule's regexp length times the length of
// the path it is tested against (what Go's regexp takes at worst):
// a second or two at worst, while a .gitignore of 20 rules over
// 20,000 entries takes some half of it. Past it the walk stops, with a
// warning, as one past maxSkillEntries does: 512 rules of many * and ?
// against 20,000 long names took minutes, before the first line, also
// in a project not trusted (its skills are counted).
const maxIgnoreWork = 1 << 29

// skillIgnores are the rules of the ignore files a walk has read so far,
// as pi reads them with node-ignore: each file's rules are taken from the
// walk's top folder (pi writes its folder in front of each, so that a
// rule of sub/.gitignore matches only below sub/), and the last rule that
// matches a path decides whether it is left out. As node-ignore's, they
// match without regard to case.
type skillIgnores struct {
	rules []skillIgnoreRule
	cut   bool // rules were left unread (maxIgnoreRules, maxIgnoreRuleBytes, maxIgnoreBytes)
	read  int  // the bytes of ignore files read (maxIgnoreBytes)
	work  int  // the work of the tests so far (maxIgnoreWork)
	spent bool // past maxIgnoreWork: the walk stops
}

type skillIgnoreRule struct {
	re       *regexp.Regexp
	negative bool   // a !rule: takes a path back
	cost     int    // the length of its regexp (maxIgnoreWork)
	under    string // "sub/": the rule matches only paths starting with it (in any case); "" for any
}

// load reads the ignore files among the entries of dir, the folder rel
// (slash-separated, "" for the top) of the walk. Reading entries, which
// the walk read anyway, costs nothing more when there are none.
func (ig *skillIgnores) load(dir, rel string, entries []fs.DirEntry) {
	for _, name := range ignoreFileNames {
		if _, found := slices.BinarySearchFunc(entries, name, func(e fs.DirEntry, n string) int { return strings.Compare(e.Name(), n) }); !found {
			continue
		}
		if len(ig.rules) >= maxIgnoreRules || ig.read >= maxIgnoreBytes {
			ig.cut = true // its rules could not be taken
			continue
		}
		data, err := readIgnoreFile(filepath.Join(dir, name), maxIgnoreBytes-ig.read)
		if err == errIgnoreBytes {
			ig.cut, ig.read = true, maxIgnoreBytes
			continue
		}
		if err != nil {
			continue // as pi: an ignore file that cannot be read counts for nothing
		}
		ig.read += len(data)
		prefix := ""
		if rel != "" {
			prefix = rel + "/"
		}
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSuffix(line, "\r")
			pattern, ok := prefixIgnoreLine(line, prefix)
			if !ok {
				continue
			}
			if len(ig.rules) >= maxIgnoreRules || len(pattern) > maxIgnoreRuleBytes {
				ig.cut = true
				continue
			}
			if rule, ok := compileIgnoreRule(pattern); ok {
				if prefix != "" && !strings.ContainsAny(prefix, `*?[\ `) && !strings.HasPrefix(prefix, "!") && !strings.HasPrefix(prefix, "#") {
					rule.under = prefix
				}
				ig.rules = append(ig.rules, rule)
			}
		}
	}
}

// errIgnoreBytes is readIgnoreFile's error for a file past its limit.
var errIgnoreBytes = errors.New("past the ignore files' bound")

// readIgnoreFile reads an ignore file of at most limit bytes (a regular
// one, as readRegularFile).
func readIgnoreFile(path string, limit int) ([]byte, error) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > limit {
		return nil, errIgnoreBytes
	}
	return data, nil
}

// prefixIgnoreLine is pi's reading of one line of an ignore file in the
// folder prefix ("sub/", "" at the top): blank lines and # comments are
// none; a leading / is dropped (so that /name at the top matches at any
// depth, as in pi) and the folder written in front, after a leading !.
// A leading \! loses its \ before that, so that at the top it negates,
// as in pi.
func prefixIgnoreLine(line, prefix string) (string, bool) {
	trimmed := strings.TrimSpace(line)
	if trimmed == "" || strings.HasPrefix(trimmed, "#") {
		return "", false
	}
	pattern, negated := line, false
	if rest, ok := strings.CutPrefix(pattern, "!"); ok {
		pattern, negated = rest, true
	} else if strings.HasPrefix(pattern, `\!`) {
		pattern = pattern[1:]
	}
	pattern = strings.TrimPrefix(pattern, "/")
	pattern = prefix + pattern
	if negated {
		pattern = "!" + pattern
	}
	return pattern, true
}

// compileIgnoreRule turns one gitignore pattern into a regexp, as
// node-ignore 7 reads it: a leading ! negates; trailing spaces are
// dropped unless the last is escaped with \; a pattern with a / before
// its end is anchored at the top, another matches at any depth; a
// trailing / matches only a folder (a folder's path is tested with a /
// at its end); * and ? match within a part, a leading **/ any folders
// before, /**/ any folders between and a trailing /** anything below;
// [...] is a class that never matches /, \ escapes. ok is false for a
// pattern node-ignore does not take (one ending in a lone \, a blank
// one, a comment) or that never matches (a [ without its ]).
func compileIgnoreRule(pattern string) (rule skillIgnoreRule, ok bool) {
	if pattern == "" || strings.Trim(pattern, " ") == "" || strings.HasPrefix(pattern, "#") {
		return rule, false
	}
	if n := len(pattern); pattern[n-1] == '\\' && (n == 1 || pattern[n-2] != '\\') {
		return rule, false
	}
	body := pattern
	if rest, ok := strings.CutPrefix(body, "!"); ok {
		rule.negative, body = true, rest
	}
	if strings.HasPrefix(body, `\!`) || strings.HasPrefix(body, `\#`) {
		body = body[1:]
	}
	body = strings.TrimPrefix(body, "\uFEFF")
	body = trimIgnoreSpaces(body)
	src, ok := ignoreSource(body)
	if !ok {
		return rule, false
	}
	re, err := regexp.Compile("(?i)" + src)
	if err != nil {
		return rule, false
	}
	rule.re, rule.cost = re, len(src)+4
	return rule, true
}

// trimIgnoreSpaces drops a pattern's trailing spaces, but for one the
// \ before it escapes.
func trimIgnoreSpaces(body string) string {
	trimmed := strings.TrimRight(body, " ")
	if trimmed == body {
		return body
	}
	slashes := len(trimmed) - len(strings.TrimRight(trimmed, `\`))
	if slashes%2 == 1 {
		return trimmed[:len(trimmed)-1] + `\ `
	}
	return trimmed
}

// ignoreSource is the regexp of a gitignore pattern (compileIgnoreRule);
// ok is false when it never matches.
func ignoreSource(body string) (string, bool) {
	if body == "" {
		return "", true // as node-ignore: an empty pattern (a lone !) matches every path
	}
	var src strings.Builder
	i := 0
	if strings.HasPrefix(body, "/") {
		src.WriteString("^")
		i = 1
	}
	if strings.HasPrefix(body[i:], "**/") {
		for strings.HasPrefix(body[i:], "**/") {
			i += 3
		}
		src.Reset()
		src.WriteString("^(?:.*/)?")
	} else if src.Len() == 0 {
		inner := strings.Contains(strings.TrimSuffix(body, "/"), "/")
		if inner {
			src.WriteString("^")
		} else {
			src.WriteString("(?:^|/)")
		}
	}
	ending := "/?$" // a file's path, or the folder's with its /
	for i < len(body) {
		c := body[i]
		switch {
		case c == '\\' && i+1 < len(body):
			r, size := utf8.DecodeRuneInString(body[i+1:])
			src.WriteString(regexp.QuoteMeta(string(r)))
			i += 1 + size
		case c == '/' && strings.HasPrefix(body[i:], "/**") && (i+3 == len(body) || body[i+3] == '/'):
			switch {
			case i+3 == len(body):
				src.WriteString("/.+")
				i = len(body)
			case i+4 == len(body):
				src.WriteString("(?:/[^/]+)+/")
				i, ending = len(body), "$"
			default:
				src.WriteString("(?:/[^/]+)*")
				i += 3
			}
		case c == '/' && i == len(body)-1:
			src.WriteString("/")
			i++
			ending = "$" // a folder's path alone
		case c == '*':
			n := len(body[i:]) - len(strings.TrimLeft(body[i:], "*"))
			if i+n == len(body) && n == 1 && i > 0 && body[i-1] == '/' && !(i == 1 && body[0] == '/') {
				src.WriteString("[^/]+")
			} else {
				src.WriteString("[^/]*")
			}
			i += n
		case c == '?':
			src.WriteString("[^/]")
			i++
		case c == '[':
			class, end, ok := ignoreClass(body, i)
			if !ok {
				return "", false
			}
			src.WriteString(class)
			i = end + 1
		default:
			r, size := utf8.DecodeRuneInString(body[i:])
			src.WriteString(regexp.QuoteMeta(string(r)))
			i += size
		}
	}
	src.WriteString(ending)
	return src.String(), true
}

// ignoreClass is the regexp of the class [...] starting at body[start],
// as node-ignore reads one (! or ^ negating it, a ] first a member, a-z
// a range, a range backwards nothing, [:alpha:] and the like), less /;
// ok is false when it has no ] (the pattern then never matches).
func ignoreClass(body string, start int) (string, int, bool) {
	rs := []rune(body[start:])
	i := 1
	negate := false
	if i < len(rs) && (rs[i] == '!' || rs[i] == '^') {
		negate = true
		i++
	}
	var class [][2]rune
	var prev rune = -1
	for {
		if i >= len(rs) {
			return "", 0, false
		}
		r := rs[i]
		switch {
		case r == '\\':
			if i+1 >= len(rs) {
				return "", 0, false
			}
			i++
			class, prev = append(class, [2]rune{rs[i], rs[i]}), rs[i]
		case r == '-' && prev >= 0 && i+1 < len(rs) && rs[i+1] != ']':
			i++
			to := rs[i]
			if to == '\\' && i+1 < len(rs) {
				i++
				to = rs[i]
			}
			if prev <= to {
				class = append(class, [2]rune{prev, to})
			}
			prev = -1
		case r == '[' && i+1 < len(rs) && rs[i+1] == ':':
			close := slices.Index(rs[i+2:], ']')
			if close < 0 {
				return "", 0, false
			}
			if close > 0 && rs[i+2+close-1] == ':' {
				ranges, ok := posixClass(string(rs[i+2 : i+2+close-1]))
				if !ok {
					return "", 0, false
				}
				class, prev = append(class, ranges...), -1
				i += 2 + close
			} else {
				class, prev = append(class, [2]rune{'[', '['}), '['
			}
		default:
			class, prev = append(class, [2]rune{r, r}), r
		}
		i++
		if i < len(rs) && rs[i] == ']' {
			end := start + len(string(rs[:i]))
			return classRegexp(class, negate), end, true
		}
	}
}

// classRegexp writes a class as a Go regexp that never matches /.
func classRegexp(class [][2]rune, negate bool) string {
	var b strings.Builder
	b.WriteString("[")
	if negate {
		b.WriteString("^/")
	}
	for _, c := range class {
		for _, part := range withoutSlash(c, negate) {
			b.WriteString(classRune(part[0]))
			if part[1] != part[0] {
				b.WriteString("-" + classRune(part[1]))
			}
		}
	}
	b.WriteString("]")
	if b.Len() == 2 {
		return "[^\\x00-\\x{10FFFF}]" // an empty class: matches nothing
	}
	return b.String()
}

// withoutSlash is a range of a class less /, unless the class is negated
// (which leaves / out itself).
func withoutSlash(c [2]rune, negate bool) [][2]rune {
	if negate || c[0] > '/' || c[1] < '/' {
		return [][2]rune{c}
	}
	var parts [][2]rune
	if c[0] < '/' {
		parts = append(parts, [2]rune{c[0], '/' - 1})
	}
	if c[1] > '/' {
		parts = append(parts, [2]rune{'/' + 1, c[1]})
	}
	return parts
}

func classRune(r rune) string {
	if r < ' ' || r > unicode.MaxASCII || strings.ContainsRune(`\]^-[`, r) {
		return `\x{` + strconv.FormatInt(int64(r), 16) + `}`
	}
	return string(r)
}

// ignores says whether the walk leaves out rel (slash-separated, from
// the walk's top), a folder when dir. Once the work of its tests passes
// maxIgnoreWork, spent is set and every path is left out.
func (ig *skillIgnores) ignores(rel string, dir bool) bool {
	if len(ig.rules) == 0 {
		return false
	}
	if ig.spent {
		return true
	}
	path := rel
	if dir {
		path += "/"
	}
	ignored := false
	for _, r := range ig.rules {
		if r.negative != ignored {
			continue // it would not change the answer
		}
		if r.under != "" && !hasFoldPrefix(path, r.under) {
			continue
		}
		if ig.work += r.cost * (len(path) + 1); ig.work > maxIgnoreWork {
			ig.spent = true
			return true
		}
		if r.re.MatchString(path) {
			ignored = !r.negative
		}
	}
	return ignored
}

// hasFoldPrefix says whether s starts with prefix, in any case (as the
// rules' regexps match).
func hasFoldPrefix(s, prefix string) bool {
	for prefix != "" {
		if s == "" {
			return false
		}
		a, n := utf8.DecodeRuneInString(s)
		b, m := utf8.DecodeRuneInString(prefix)
		if a != b && !strings.EqualFold(string(a), string(b)) {
			return false
		}
		s, prefix = s[n:], prefix[m:]
	}
	return true
}

// spentNote is the warning of a walk stopped at maxIgnoreWork.
const spentNote = "its ignore files' rules take too long to test against its entries; the rest is not read"

// ignoresEntry is ignores for an entry of the folder rel.
func (ig *skillIgnores) ignoresEntry(rel, name string, dir bool) bool {
	if rel != "" {
		name = rel + "/" + name
	}
	return ig.ignores(name, dir)
}
