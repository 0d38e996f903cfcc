package main

// The scope of cycle_model: the models --models (else settings.json's
// enabledModels) names, each with the thinking level its pattern gives
// it, resolved as pi 1.6 resolves them (docs/models.md).

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"
)

// scopedModel is one model of the scope and the thinking level a
// ":level" after its pattern gives it: "" for none, when the level in
// force stays as it is.
type scopedModel struct {
	m     *model
	level string
}

// scopeWarning is what resolving a pattern reports: pi's code for it
// (no-match, ambiguous or invalid-thinking-level) and pi's text.
type scopeWarning struct {
	code, pattern, message string
}

// resolveScope resolves patterns against models (those that can be
// used), as pi 1.6 does, into the scope in the order of the patterns:
// each pattern's models in the order of models, a model once (with the
// level of the first pattern that names it).
//
// A pattern with * ? or [ is a glob, without regard to case, over
// provider/id or id, with an optional ":level" after it; an exact id or
// provider/id that merely contains such a character (model[1m]) is that
// model. Any other pattern is a model reference: an exact id or
// provider/id (either without regard to case), else the models whose
// id or name contains it (an alias rather than a dated id, then the
// latest); a ":level" after it that is no level is a warning, and the
// model is still in scope. A reference several providers offer is a
// warning and brings in all of them.
func resolveScope(patterns []string, models []*model) (scope []scopedModel, warnings []scopeWarning) {
	add := func(m *model, level string) {
		if !slices.ContainsFunc(scope, func(s scopedModel) bool { return s.m.Provider == m.Provider && s.m.ID == m.ID }) {
			scope = append(scope, scopedModel{m, level})
		}
	}
	ambiguous := func(pattern string, candidates []*model) {
		var providers []string
		for _, m := range candidates {
			if !slices.Contains(providers, m.Provider) {
				providers = append(providers, m.Provider)
			}
		}
		slices.SortFunc(providers, localeCompare)
		warnings = append(warnings, scopeWarning{"ambiguous", pattern, `Pattern "` + pattern + `" matches several providers: ` +
			strings.Join(providers, ", ") + ". Use provider/id to choose one."})
	}
	for _, pattern := range patterns {
		var r modelReference
		if strings.ContainsAny(pattern, "*?[") {
			r = resolveGlob(pattern, models)
		} else {
			r = resolveReference(pattern, models, false)
		}
		if len(r.models) == 0 {
			warnings = append(warnings, scopeWarning{"no-match", pattern, `No models match pattern "` + pattern + `"`})
			continue
		}
		if r.warning != "" {
			warnings = append(warnings, scopeWarning{"invalid-thinking-level", pattern, r.warning})
		}
		if r.ambiguous {
			ambiguous(pattern, r.models)
		}
		for _, m := range r.models {
			add(m, r.level)
		}
	}
	return scope, warnings
}

// modelReference is what a pattern resolves to: its models (none when
// it names none; one, or those of several providers when ambiguous),
// the thinking level its suffix gives them, and the warning an invalid
// suffix is.
type modelReference struct {
	models    []*model
	ambiguous bool
	level     string
	warning   string
}

// resolveGlob resolves a pattern with a glob character: the exact model
// it names, else the models the glob matches.
func resolveGlob(pattern string, models []*model) modelReference {
	glob, level, ok := splitLevel(pattern)
	if !ok {
		glob, level = pattern, ""
	}
	r := resolveReference(glob, models, true)
	if len(r.models) == 0 {
		lower := strings.ToLower(glob)
		for _, m := range models {
			if globMatch(lower, strings.ToLower(m.Provider+"/"+m.ID)) || globMatch(lower, strings.ToLower(m.ID)) {
				r.models = append(r.models, m)
			}
		}
	}
	r.level = level
	return r
}

// globMatch is path.Match, a bad pattern matching nothing.
func globMatch(pattern, name string) bool {
	ok, _ := path.Match(pattern, name)
	return ok
}

// resolveReference resolves text as pi's resolveModelReference: exact,
// an id or provider/id only; else also the models whose id or name
// contains it, and a ":level" suffix (an invalid one a warning).
func resolveReference(text string, models []*model, exact bool) modelReference {
	text = strings.TrimSpace(text)
	if text == "" {
		return modelReference{}
	}
	return resolveText(text, models, exact)
}

func resolveText(text string, models []*model, exact bool) modelReference {
	if r := selectReference(text, models, !exact); len(r.models) > 0 || exact {
		return r
	}
	if r := selectFuzzy(fuzzyMatches(text, models)); len(r.models) > 0 {
		return r
	}
	if base, level, ok := splitLevel(text); ok {
		r := resolveText(base, models, exact)
		if r.warning == "" {
			r.level = level
		}
		return r
	}
	i := strings.LastIndex(text, ":")
	if i < 0 {
		return modelReference{}
	}
	r := resolveText(text[:i], models, exact)
	if len(r.models) > 0 {
		r.level = ""
		r.warning = `Invalid thinking level "` + text[i+1:] + `" in pattern "` + text + `". Using default instead.`
	}
	return r
}

// splitLevel splits a thinking level off text's last colon; ok is false
// when what follows it is no level (an id's own colon, as in Ollama's
// "qwen2.5-coder:7b").
func splitLevel(text string) (base, level string, ok bool) {
	i := strings.LastIndex(text, ":")
	if i < 0 || !slices.Contains(thinkingLevels, text[i+1:]) {
		return text, "", false
	}
	return text[:i], text[i+1:], true
}

// splitProvider splits text at the slash after the longest provider
// (without regard to case) it starts with: provider ids may hold a slash
// themselves. ok is false when it starts with none, or nothing follows.
func splitProvider(text string, models []*model) (provider, modelText string, ok bool) {
	for _, m := range models {
		prefix := strings.TrimSpace(m.Provider)
		if prefix == "" || ok && len(provider) >= len(m.Provider) || len(prefix) > len(text) {
			continue
		}
		j := strings.IndexByte(text[len(prefix):], '/')
		if j < 0 {
			continue
		}
		j += len(prefix)
		if rest := strings.TrimSpace(text[j+1:]); rest != "" && strings.EqualFold(strings.TrimSpace(text[:j]), prefix) {
			provider, modelText, ok = m.Provider, rest, true
		}
	}
	return provider, modelText, ok
}

// selectReference is the model text names exactly: a provider/id (the
// provider's own id first, then the whole text as another provider's
// id, then with fuzzy what the id part matches of the provider's
// models), else the models whose id is the whole text; ambiguous when
// those are of several providers and no provider was named.
func selectReference(text string, models []*model, fuzzy bool) modelReference {
	var raw []*model
	for _, m := range models {
		if strings.EqualFold(m.ID, text) {
			raw = append(raw, m)
		}
	}
	var named *model
	if provider, modelText, ok := splitProvider(text, models); ok {
		var own []*model
		for _, m := range models {
			if m.Provider == provider {
				own = append(own, m)
			}
		}
		if i := slices.IndexFunc(own, func(m *model) bool { return strings.EqualFold(m.ID, modelText) }); i >= 0 {
			named = own[i]
		} else if i := slices.IndexFunc(raw, func(m *model) bool { return m.Provider == provider }); i >= 0 {
			named = raw[i]
		} else if fuzzy {
			named = bestFuzzyMatch(fuzzyMatches(modelText, own))
		}
	}
	if named != nil {
		return modelReference{models: []*model{named}} // every model here can be used: the named provider wins
	}
	return ofProviders(raw)
}

// ofProviders is a reference to candidates: the first when they are of
// one provider, else all of them, ambiguous.
func ofProviders(candidates []*model) modelReference {
	for _, m := range candidates {
		if m.Provider != candidates[0].Provider {
			return modelReference{models: candidates, ambiguous: true}
		}
	}
	if len(candidates) == 0 {
		return modelReference{}
	}
	return modelReference{models: candidates[:1]}
}

// fuzzyMatches are the models whose id or name contains text, without
// regard to case.
func fuzzyMatches(text string, models []*model) []*model {
	lower := strings.ToLower(text)
	var matches []*model
	for _, m := range models {
		if strings.Contains(strings.ToLower(m.ID), lower) || strings.Contains(strings.ToLower(m.Name), lower) {
			matches = append(matches, m)
		}
	}
	return matches
}

// selectFuzzy is the best of matches; ambiguous when several providers
// offer its id.
func selectFuzzy(matches []*model) modelReference {
	best := bestFuzzyMatch(matches)
	if best == nil {
		return modelReference{}
	}
	var tied []*model
	for _, m := range matches {
		if m.ID == best.ID {
			tied = append(tied, m)
		}
	}
	return ofProviders(tied)
}

// bestFuzzyMatch prefers an alias (claude-sonnet-4-5) to a dated id
// (claude-sonnet-4-5-20250929), then the id that sorts last (the latest
// version), the first of equals; nil without matches.
func bestFuzzyMatch(matches []*model) *model {
	pool := matches
	if aliases := slices.DeleteFunc(slices.Clone(matches), func(m *model) bool { return !isAlias(m.ID) }); len(aliases) > 0 {
		pool = aliases
	}
	var best *model
	for _, m := range pool {
		if best == nil || localeCompare(m.ID, best.ID) > 0 {
			best = m
		}
	}
	return best
}

// isAlias reports whether id is no dated version: it does not end in a
// dash and eight digits, or ends in -latest.
func isAlias(id string) bool {
	if strings.HasSuffix(id, "-latest") || len(id) < 9 || id[len(id)-9] != '-' {
		return true
	}
	return strings.ContainsFunc(id[len(id)-8:], func(r rune) bool { return r < '0' || r > '9' })
}

// localeCompare orders strings as JavaScript's localeCompare does the
// ids and provider names pi sorts, near enough: ASCII punctuation in
// ICU's order (collationPunctuation), then other symbols, digits and
// letters without regard to case, and only then lower case before upper.
func localeCompare(a, b string) int {
	weight := func(r rune) (int, rune) {
		switch {
		case unicode.IsLetter(r):
			return 3, unicode.ToLower(r)
		case unicode.IsDigit(r):
			return 2, r
		}
		if i := strings.IndexRune(collationPunctuation, r); i >= 0 {
			return 0, rune(i)
		}
		return 1, r
	}
	ra, rb := []rune(a), []rune(b)
	for i := 0; i < len(ra) && i < len(rb); i++ {
		ca, wa := weight(ra[i])
		cb, wb := weight(rb[i])
		if c := cmp.Compare(ca, cb); c != 0 {
			return c
		}
		if wa != wb {
			return cmp.Compare(wa, wb)
		}
	}
	if c := cmp.Compare(len(ra), len(rb)); c != 0 {
		return c
	}
	for i := range ra {
		if ra[i] != rb[i] { // the same letter in another case
			if unicode.IsUpper(ra[i]) {
				return 1
			}
			return -1
		}
	}
	return 0
}

// collationPunctuation is ICU's root order of ASCII's spaces,
// punctuation and symbols.
const collationPunctuation = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$"

// scopeCandidates are the models a pattern is resolved against: those
// that can be used and get_available_models lists (current is the
// current model).
func scopeCandidates(models []*model, current *model) []*model {
	var out []*model
	for _, m := range models {
		if m.usable() && listedFaux(m, current) {
			out = append(out, m)
		}
	}
	return out
}

// checkModelPatterns checks --models against the models that can be used
// (those get_available_models lists at startup): a pattern that matches
// none is a warning, and --models none of whose patterns matches any, which
// would scope cycle_model to nothing, an init error. A pattern several
// providers match, or with an invalid thinking level, is a warning with
// pi's text.
func checkModelPatterns(models []*model, patterns []string) (warnings []string, err error) {
	scope, found := resolveScope(patterns, scopeCandidates(models, nil))
	if len(scope) == 0 {
		return nil, fmt.Errorf("Invalid --models %s: it matches no model that can be used (see get_available_models)", strings.Join(patterns, ","))
	}
	for _, w := range found {
		if w.code == "no-match" {
			w.message = fmt.Sprintf("--models %s: matches no model that can be used (see get_available_models); the other patterns do", w.pattern)
		}
		warnings = append(warnings, w.message)
	}
	return warnings, nil
}

// scopedModels are the models cycle_model goes through: the usable ones,
// or those --models (else settings.json's enabledModels) names
// (resolveScope), with the thinking level each pattern gives them.
func (s *session) scopedModels() (models []scopedModel, scoped bool) {
	s.mu.Lock()
	usable := s.usableModels(s.model)
	s.mu.Unlock()
	patterns := s.set.scopePatterns()
	if len(patterns) == 0 {
		for _, m := range usable {
			models = append(models, scopedModel{m, ""})
		}
		return models, false
	}
	models, _ = resolveScope(patterns, usable)
	return models, true
}

// startScope is scopedStart when the scope picks the model a
// conversation starts with: --model names none and --models (or
// enabledModels) gives patterns; nil otherwise.
func (s *session) startScope() (*model, string) {
	if s.startModel != nil || len(s.set.scopePatterns()) == 0 {
		return nil, ""
	}
	return s.scopedStart()
}

// scopedStart is the model the scope (--models, else enabledModels)
// starts with when --model names none, and the level its pattern gives
// it, as pi picks them: settings.json's default when the scope holds it,
// else the scope's first; nil when the scope is empty.
func (s *session) scopedStart() (*model, string) {
	scope, _ := s.scopedModels()
	for _, sm := range scope {
		if sm.m.Provider == s.set.defaultProvider && sm.m.ID == s.set.defaultModel {
			return sm.m, sm.level
		}
	}
	if len(scope) == 0 {
		return nil, ""
	}
	return scope[0].m, scope[0].level
}
