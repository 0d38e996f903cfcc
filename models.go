package main

// Models: the built-in catalog, pi's models.json, credentials, and the
// model and thinking commands. The APIs' wire formats are in provider_*.go.

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// modelCost is a model's price in dollars per million tokens.
type modelCost struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
}

// model is pi's Model object. Its API key and headers are never encoded.
type model struct {
	ID            string    `json:"id"`
	Name          string    `json:"name"`
	API           string    `json:"api"`
	Provider      string    `json:"provider"`
	BaseURL       string    `json:"baseUrl"`
	Reasoning     bool      `json:"reasoning"`
	Input         []string  `json:"input"`
	Cost          modelCost `json:"cost"`
	ContextWindow int       `json:"contextWindow"`
	MaxTokens     int       `json:"maxTokens"`
	// PromptCache is models.json's promptCache: how long, in seconds,
	// the provider keeps a prompt cached at each retention tier (cache
	// warming; none for a built-in model, as in pi).
	PromptCache *promptCache `json:"promptCache,omitempty"`

	builtin   bool              // from the catalog, not models.json
	compat    compat            // request quirks of its host (OpenAI-compatible APIs)
	cred      *credential       // where its key comes from; nil when none is configured
	needsKey  bool              // false for a models.json provider without apiKey (a local server)
	bearer    bool              // models.json's authHeader: the key goes also as "Authorization: Bearer"
	headers   map[string]string // extra request headers from models.json
	imageable bool
	faux      bool   // the built-in offline model (faux.go)
	fauxReply string // what faux answers: PI_FAUX_RESPONSE, trimmed
	// levels is pi's thinkingLevelMap: what a level is sent as, or nil
	// for a level the model does not take. A level it does not name is
	// sent as itself, except xhigh and max, which it then does not take.
	levels map[string]*string
	// sampling and samplingByLevel are models.json's samplingParams and
	// samplingParamsByThinkingLevel: fields put last into the request
	// body of the OpenAI APIs (putSampling), their values as written.
	sampling        samplingParams
	samplingByLevel map[string]samplingParams
	// resize is models.json's inputLimits.images.resize, what its images
	// are made to fit (a field 0: the default's; imageLimits).
	resize imageLimits
}

// promptCache is a models.json promptCache: a prompt cache's lifetime in
// seconds at the short and the long retention tier (PI_CACHE_RETENTION
// "long" picks the long one).
type promptCache struct {
	Short *float64 `json:"short,omitempty"`
	Long  *float64 `json:"long,omitempty"`
}

// over is p with q's tiers over it, a new value (pi merges an override's
// so); nil when neither gives a tier.
func (p *promptCache) over(q *promptCache) *promptCache {
	if q == nil {
		return p
	}
	merged := &promptCache{}
	if p != nil {
		*merged = *p
	}
	merged.Short, merged.Long = cmp.Or(q.Short, merged.Short), cmp.Or(q.Long, merged.Long)
	if merged.Short == nil && merged.Long == nil {
		return nil
	}
	return merged
}

// checkPromptCache leaves out of *p the lifetimes pi refuses (not above
// 0), and says which; *p is nil after when none is left.
func checkPromptCache(p **promptCache) []string {
	if *p == nil {
		return nil
	}
	var problems []string
	for _, tier := range []struct {
		name  string
		value **float64
	}{{"short", &(*p).Short}, {"long", &(*p).Long}} {
		if v := *tier.value; v != nil && !(*v > 0) {
			problems = append(problems, fmt.Sprintf("ignored \"promptCache.%s\": %v is not above 0", tier.name, *v))
			*tier.value = nil
		}
	}
	if (*p).Short == nil && (*p).Long == nil {
		*p = nil
	}
	return problems
}

// ttl is how long a prompt the model is sent stays cached at the tier
// long or short, as models.json says; ok is false when it does not say.
func (p *promptCache) ttl(long bool) (time.Duration, bool) {
	if p == nil {
		return 0, false
	}
	v := p.Short
	if long {
		v = p.Long
	}
	if v == nil {
		return 0, false
	}
	return time.Duration(min(*v, float64(maxDuration/time.Second)) * float64(time.Second)), true
}

// samplingParams is a models.json samplingParams object: request body
// fields, each value as written (an object only, as in pi).
type samplingParams map[string]json.RawMessage

// over is p with q's fields over it, a new map (p may be shared).
func (p samplingParams) over(q samplingParams) samplingParams {
	merged := maps.Clone(p)
	if merged == nil {
		merged = samplingParams{}
	}
	maps.Copy(merged, q)
	return merged
}

// putSampling puts m's samplingParams into body last, over any field rpi
// set itself, as pi does: those of the thinking level the request is sent
// at (off for a model that does not think) over the model's.
func putSampling(body map[string]any, m *model, thinking string) {
	for _, params := range m.samplingAt(thinking) {
		for k, v := range params {
			body[k] = v
		}
	}
}

// samplingAt is m's samplingParams for a request sent at thinking, in the
// order they go into its body: the model's, then its level's (off for a
// model that does not think).
func (m *model) samplingAt(thinking string) []samplingParams {
	level := "off"
	if m.Reasoning {
		level, _ = m.wireLevel(thinking)
	}
	return []samplingParams{m.sampling, m.samplingByLevel[level]}
}

// sampledTokens is the most tokens an OpenAI API request asks for, its
// cap being field with the value tokens (openAIMaxTokens, or
// responsesMaxTokens), or more when its samplingParams, which go over the
// field, ask for more. What rpi keeps of one answer is counted from it
// (answerLimit): the server sends what it was asked for.
func sampledTokens(req streamRequest, field string, tokens int) int {
	var sent json.RawMessage // the field as the body has it: the level's over the model's
	for _, params := range req.model.samplingAt(req.thinking) {
		if v, ok := params[field]; ok {
			sent = v
		}
	}
	if n := 0.0; json.Unmarshal(sent, &n) == nil && n > float64(tokens) {
		tokens = int(min(n, maxAnswerBytes)) // answerLimit bounds it further
	}
	return tokens
}

// think writes a thinkingLevelMap compactly: "!off" for a level the
// model does not take, "off=none" for one sent as another word, "low" for
// one sent as itself.
func think(spec string) map[string]*string {
	levels := map[string]*string{}
	for _, word := range strings.Fields(spec) {
		if name, ok := strings.CutPrefix(word, "!"); ok {
			levels[name] = nil
			continue
		}
		name, value, ok := strings.Cut(word, "=")
		if !ok {
			value = name
		}
		levels[name] = &value
	}
	return levels
}

// levelOrder is pi's order of thinking levels, lowest first.
var levelOrder = []string{"off", "minimal", "low", "medium", "high", "xhigh", "max"}

// takes reports whether m accepts a thinking level, and what it is sent as.
func (m *model) takes(level string) (string, bool) {
	if v, named := m.levels[level]; named {
		if v == nil {
			return "", false
		}
		return *v, true
	}
	switch level {
	case "xhigh", "max":
		return "", false
	case "off":
		return "", true
	}
	return level, true
}

// wireLevel is the thinking level m gets for the level set, and what it
// is sent as: a level m does not take moves to the nearest higher level
// it takes, else to the nearest lower one (pi's rule). "off" is sent as
// the empty string unless the model names a value for it ("none").
func (m *model) wireLevel(level string) (string, string) {
	i := slices.Index(levelOrder, level)
	if i < 0 {
		i = slices.Index(levelOrder, "medium")
	}
	for j := i; j < len(levelOrder); j++ {
		if v, ok := m.takes(levelOrder[j]); ok {
			return levelOrder[j], v
		}
	}
	for j := i - 1; j >= 0; j-- {
		if v, ok := m.takes(levelOrder[j]); ok {
			return levelOrder[j], v
		}
	}
	return "off", ""
}

const (
	apiOpenAI    = "openai-completions"
	apiResponses = "openai-responses"
	apiAnthropic = "anthropic-messages"
	apiGoogle    = "google-generative-ai"
)

// speaks reports whether rpi speaks m's API (the built-in faux model's
// too; a models.json model cannot use it).
func (m *model) speaks() bool { return slices.Contains(supportedAPIs.get(), m.API) || m.faux }

// countOf is "1 model" or "3 models".
func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// unspokenError is the failure to use a model whose API rpi does not speak.
func unspokenError(m *model) error {
	return fmt.Errorf("Model %s/%s uses %s, which rpi does not speak (supported: %s)",
		m.Provider, m.ID, m.API, strings.Join(supportedAPIs.get(), ", "))
}

// keylessError says that a model rpi knows has no key, and where one goes:
// --model naming it is an init error and set_model to it fails, so a
// model without a key is never the current one.
func keylessError(m *model) error {
	return noKeyError(m.Provider, m.Provider+"/"+m.ID)
}

// noKeyError says that what (a model, or a provider) of provider has no
// key, and where one goes.
func noKeyError(provider, what string) error {
	where := "the variable its apiKey in models.json names"
	if p := hostedProviderNamed(provider); p != nil {
		where = p.keyVar
	}
	return fmt.Errorf("No API key for %s: set %s, put a key in auth.json, or pass --api-key", what, where)
}

// modelsFile is pi's models.json.
type modelsFile struct {
	Providers map[string]struct {
		BaseURL string            `json:"baseUrl"`
		API     string            `json:"api"`
		APIKey  string            `json:"apiKey"`
		Headers map[string]string `json:"headers"`
		Compat  *compat           `json:"compat"`
		// AuthHeader (pi's) sends the key also as "Authorization: Bearer"
		// (a proxy's), whatever the API's own way of sending it.
		AuthHeader bool `json:"authHeader"`
		Models     []struct {
			ID               string                    `json:"id"`
			Name             string                    `json:"name"`
			API              string                    `json:"api"`
			BaseURL          string                    `json:"baseUrl"`
			Reasoning        bool                      `json:"reasoning"`
			Input            []string                  `json:"input"`
			ContextWindow    int                       `json:"contextWindow"`
			MaxTokens        int                       `json:"maxTokens"`
			Cost             *modelCost                `json:"cost"`
			Compat           *compat                   `json:"compat"`
			ThinkingLevelMap map[string]*string        `json:"thinkingLevelMap"`
			Headers          map[string]string         `json:"headers"` // over the provider's and the override's
			SamplingParams   samplingParams            `json:"samplingParams"`
			SamplingByLevel  map[string]samplingParams `json:"samplingParamsByThinkingLevel"`
			InputLimits      *inputLimits              `json:"inputLimits"`
			PromptCache      *promptCache              `json:"promptCache"`
		} `json:"models"`
		ModelOverrides map[string]*modelOverride `json:"modelOverrides"`
	} `json:"providers"`
}

// modelOverride is an entry of a models.json provider's modelOverrides
// (pi's): fields changed of its model of that id, a built-in one or one
// the entry lists, after everything else. A field not given leaves the
// model's; cost, thinkingLevelMap, compat, samplingParams and
// samplingParamsByThinkingLevel (level by level) merge with the model's,
// the others replace it.
type modelOverride struct {
	Name             *string            `json:"name"`
	Reasoning        *bool              `json:"reasoning"`
	ThinkingLevelMap map[string]*string `json:"thinkingLevelMap"`
	Input            []string           `json:"input"`
	Cost             *struct {
		Input      *float64 `json:"input"`
		Output     *float64 `json:"output"`
		CacheRead  *float64 `json:"cacheRead"`
		CacheWrite *float64 `json:"cacheWrite"`
	} `json:"cost"`
	ContextWindow   *int                      `json:"contextWindow"`
	MaxTokens       *int                      `json:"maxTokens"`
	Headers         map[string]string         `json:"headers"` // resolved by loadModels, over the provider's
	Compat          *compat                   `json:"compat"`
	SamplingParams  samplingParams            `json:"samplingParams"`
	SamplingByLevel map[string]samplingParams `json:"samplingParamsByThinkingLevel"`
	InputLimits     *inputLimits              `json:"inputLimits"` // merged with the model's, field by field
	PromptCache     *promptCache              `json:"promptCache"` // merged with the model's, tier by tier
}

// apply changes m by o.
func (o *modelOverride) apply(m *model) {
	if o == nil {
		return
	}
	m.Name = ptrOr(o.Name, m.Name)
	m.Reasoning = ptrOr(o.Reasoning, m.Reasoning)
	if o.ThinkingLevelMap != nil { // merged: a level it maps to null the model no longer takes
		levels := maps.Clone(m.levels) // a built-in model's may be shared
		if levels == nil {
			levels = map[string]*string{}
		}
		maps.Copy(levels, o.ThinkingLevelMap)
		m.levels = levels
	}
	if o.Input != nil {
		m.Input, m.imageable = o.Input, slices.Contains(o.Input, "image")
	}
	if c := o.Cost; c != nil {
		m.Cost = modelCost{ptrOr(c.Input, m.Cost.Input), ptrOr(c.Output, m.Cost.Output),
			ptrOr(c.CacheRead, m.Cost.CacheRead), ptrOr(c.CacheWrite, m.Cost.CacheWrite)}
	}
	m.ContextWindow = ptrOr(o.ContextWindow, m.ContextWindow)
	m.MaxTokens = ptrOr(o.MaxTokens, m.MaxTokens)
	if o.Headers != nil {
		m.headers = o.Headers
	}
	m.compat = m.compat.over(o.Compat)
	if o.SamplingParams != nil {
		m.sampling = m.sampling.over(o.SamplingParams)
	}
	if o.SamplingByLevel != nil { // merged level by level
		byLevel := maps.Clone(m.samplingByLevel) // a built-in model's may be shared
		if byLevel == nil {
			byLevel = map[string]samplingParams{}
		}
		for level, params := range o.SamplingByLevel {
			if params != nil {
				byLevel[level] = byLevel[level].over(params)
			}
		}
		m.samplingByLevel = byLevel
	}
	m.resize = o.InputLimits.over(m.resize)
	m.PromptCache = m.PromptCache.over(o.PromptCache)
}

// check leaves out of o the fields pi refuses (an empty name, a size not
// above 0, inputLimits' as inputLimits.check), and says which. own is
// the resize profile of the model o is for, models.json's own (none for
// a built-in model).
func (o *modelOverride) check(own imageLimits) []string {
	var problems []string
	if o.Name != nil && *o.Name == "" {
		problems, o.Name = append(problems, `ignored "name": it is empty`), nil
	}
	for _, f := range []struct {
		name  string
		value **int
	}{{"contextWindow", &o.ContextWindow}, {"maxTokens", &o.MaxTokens}} {
		if *f.value != nil && **f.value <= 0 {
			problems = append(problems, fmt.Sprintf("ignored %q: %d is not above 0", f.name, **f.value))
			*f.value = nil
		}
	}
	problems = append(problems, checkPromptCache(&o.PromptCache)...)
	return append(problems, o.InputLimits.check(own)...)
}

// ptrOr is *p, or else when p is nil.
func ptrOr[T any](p *T, or T) T {
	if p == nil {
		return or
	}
	return *p
}

// envOrLiteral resolves a models.json value: the environment variable of
// that name when it is set, otherwise the value itself.
func envOrLiteral(v string, getenv func(string) string) string {
	if env := getenv(strings.TrimPrefix(strings.Trim(v, "${}"), "$")); env != "" && isEnvName(v) {
		return env
	}
	return v
}

// isEnvName reports whether v names an environment variable: NAME, $NAME
// or ${NAME}.
func isEnvName(v string) bool {
	return validVarName(strings.TrimPrefix(strings.TrimSuffix(strings.TrimPrefix(v, "${"), "}"), "$"))
}

// validVarName reports whether name can be an environment variable's.
func validVarName(name string) bool {
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for _, c := range name {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// modelSetup is what loadModels makes of the configuration.
type modelSetup struct {
	catalog  *modelCatalog // models.json's models, then the built-in ones
	secrets  *redactor     // every key rpi holds (a command's, once it has run)
	keyVars  []string      // the variables keys came from: children never see them
	warnings []string      // for the client at startup
}

// loadModels builds the model list: models.json's models first (a user's
// own configuration is what they want by default), then the catalog, each
// with its provider's credential (see credentials). A models.json or
// auth.json that cannot be read or is not JSON is an error; a missing one
// is not, and a provider or model it cannot use is a warning.
func loadModels(dir, cliProvider, cliKey string, getenv func(string) string) (*modelSetup, error) {
	setup := &modelSetup{keyVars: make([]string, len(hostedProviders))}
	for i, p := range hostedProviders {
		setup.keyVars[i] = p.keyVar
	}
	auth, err := loadAuth(dir, setup)
	if err != nil {
		return nil, err
	}
	var keys []string
	resolve := func(v string) string {
		if isEnvName(v) {
			setup.keyVars = append(setup.keyVars, strings.TrimPrefix(strings.Trim(v, "${}"), "$"))
		}
		value := envOrLiteral(v, getenv)
		keys = append(keys, value)
		return value
	}
	// resolveHeaders is base with the headers given over it, resolved.
	resolveHeaders := func(base, given map[string]string) map[string]string {
		headers := maps.Clone(base)
		if headers == nil {
			headers = map[string]string{}
		}
		for k, v := range given {
			headers[k] = resolve(v)
			if token, ok := schemeToken(headers[k]); ok { // a server may echo it alone
				keys = append(keys, token)
			}
		}
		return headers
	}
	path := filepath.Join(dir, "models.json")
	data, err := readRegularFile(path, maxResourceBytes)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("Cannot read %s: %v", path, unwrapPathError(err))
	}
	fileKeys := map[string]string{}            // models.json's apiKey per provider
	overrides := map[string]providerOverride{} // models.json's entries named like a built-in provider
	var models []*model
	if err == nil {
		var file modelsFile
		if err := unmarshalExact(data, &file); err != nil {
			return nil, fmt.Errorf("Invalid %s: %v", path, jsonError(data, err))
		}
		if file.Providers == nil { // a provider's block pasted as the whole file, say
			return nil, fmt.Errorf(`Invalid %s: no "providers" object; the file is {"providers": {"NAME": {"baseUrl": …, "api": …, "models": [{"id": …}]}}} (see docs/models.md)`, path)
		}
		// One provider's mistake never stops startup: its models are
		// skipped or kept out of use, with a warning.
		var unspoken []string
		for _, name := range slices.Sorted(maps.Keys(file.Providers)) {
			p := file.Providers[name]
			fileKeys[name] = p.APIKey
			headers := resolveHeaders(nil, p.Headers) // the provider's models share it (read only)
			// The resize profile of each model it lists, which its override is over.
			own := map[string]imageLimits{}
			for _, m := range p.Models {
				own[m.ID] = m.InputLimits.profile()
			}
			for _, id := range slices.Sorted(maps.Keys(p.ModelOverrides)) {
				o := p.ModelOverrides[id]
				if o == nil {
					continue
				}
				for _, problem := range o.check(own[id]) {
					setup.warnings = append(setup.warnings, fmt.Sprintf("%s: provider %s: modelOverrides %s: %s", path, name, id, problem))
				}
				if o.Headers != nil { // over the provider's
					o.Headers = resolveHeaders(headers, o.Headers)
				}
			}
			hp := hostedProviderNamed(name)
			var listed []string // the ids it lists that replace a built-in model's
			for _, m := range p.Models {
				api, baseURL := cmp.Or(m.API, p.API), cmp.Or(m.BaseURL, p.BaseURL)
				if hp != nil { // a model added to a built-in provider
					api, baseURL = cmp.Or(api, hp.api), cmp.Or(baseURL, hp.baseURLFrom(getenv))
				}
				switch {
				case m.ID == "":
					setup.warnings = append(setup.warnings, fmt.Sprintf("%s: provider %s: skipped a model without \"id\"", path, name))
					continue
				case api == "":
					setup.warnings = append(setup.warnings, fmt.Sprintf("%s: provider %s: skipped model %s: no \"api\"", path, name, m.ID))
					continue
				case baseURL == "":
					setup.warnings = append(setup.warnings, fmt.Sprintf("%s: provider %s: skipped model %s: no \"baseUrl\"", path, name, m.ID))
					continue
				}
				mod := &model{ID: m.ID, Name: cmp.Or(m.Name, m.ID), API: api, Provider: name, BaseURL: strings.TrimRight(baseURL, "/"),
					Reasoning: m.Reasoning, Input: m.Input, ContextWindow: m.ContextWindow, MaxTokens: m.MaxTokens,
					needsKey: p.APIKey != "" || keyVarOf(name) != "" || p.AuthHeader, headers: headers, levels: m.ThinkingLevelMap, bearer: p.AuthHeader,
					sampling: m.SamplingParams, samplingByLevel: m.SamplingByLevel}
				mod.compat = detectCompat(name, mod.BaseURL).over(p.Compat).over(m.Compat)
				for _, problem := range m.InputLimits.check(imageLimits{}) {
					setup.warnings = append(setup.warnings, fmt.Sprintf("%s: provider %s: model %s: %s", path, name, m.ID, problem))
				}
				mod.resize = m.InputLimits.over(imageLimits{})
				for _, problem := range checkPromptCache(&m.PromptCache) {
					setup.warnings = append(setup.warnings, fmt.Sprintf("%s: provider %s: model %s: %s", path, name, m.ID, problem))
				}
				mod.PromptCache = m.PromptCache
				if !mod.speaks() {
					unspoken = append(unspoken, fmt.Sprintf("%s/%s uses %s", name, m.ID, api))
				}
				if mod.Input == nil {
					mod.Input = []string{"text"}
				}
				if mod.ContextWindow == 0 {
					mod.ContextWindow = 128000
				}
				if mod.MaxTokens == 0 {
					mod.MaxTokens = 16384
				}
				if m.Cost != nil {
					mod.Cost = *m.Cost
				}
				p.ModelOverrides[m.ID].apply(mod) // last, as in pi
				// The model's own headers rank over all others, as in pi.
				if m.Headers != nil {
					mod.headers = resolveHeaders(mod.headers, m.Headers)
				}
				models = append(models, mod)
				listed = append(listed, m.ID)
			}
			if hp != nil { // it changes the built-in provider's own models too
				overrides[name] = providerOverride{baseURL: strings.TrimRight(p.BaseURL, "/"), compat: p.Compat, headers: headers, listed: listed,
					models: p.ModelOverrides, bearer: p.AuthHeader}
			}
		}
		if len(unspoken) > 0 {
			setup.warnings = append(setup.warnings, fmt.Sprintf("%s: left out %s whose API rpi does not speak: %s; rpi speaks %s",
				path, countOf(len(unspoken), "model", "models"), strings.Join(unspoken, ", "), strings.Join(supportedAPIs.get(), ", ")))
		}
		sortModels(models)
	}
	creds := credentials{getenv: getenv, auth: auth, fileKeys: fileKeys, cliProvider: cliProvider, cliKey: cliKey,
		commands: &keyCommands{results: map[string]*keyCommand{}}, byProvider: make(map[string]*credential, len(hostedProviders)+1), setup: setup}
	// Every provider's credential is resolved now, in the catalog's
	// order (the keys to redact, the variables to hide); the built-in
	// providers' models are made later (modelCatalog).
	catalog := &modelCatalog{listed: models, builtin: make([]builtinProvider, len(hostedProviders))}
	for _, m := range models {
		m.cred = creds.of(m.Provider)
		m.imageable = slices.Contains(m.Input, "image")
	}
	for i := range hostedProviders {
		p, b := &hostedProviders[i], &catalog.builtin[i]
		b.provider, b.cred, b.over = p, creds.of(p.id), overrides[p.id]
		b.baseURL = cmp.Or(b.over.baseURL, p.baseURLFrom(getenv)) // models.json's, as its apiKey goes before the variable
	}
	if _, replaced := fileKeys[fauxProvider]; !replaced { // a models.json provider "faux" replaces it
		faux := newFauxModel(getenv(fauxResponseVar))
		faux.cred = creds.of(faux.Provider)
		catalog.last = []*model{faux}
	}
	setup.catalog, setup.secrets = catalog, newRedactor(append(keys, creds.keys...))
	return setup, nil
}

// modelCatalog is every model rpi knows, in order: models.json's (sorted
// by provider), the built-in providers', the faux model unless
// models.json has a provider of that name, and a model adopted for
// --provider. A built-in provider's models are made at their first use:
// the first line needs at most the starting model, and a provider without
// a key has no model that can be used, so listing those that can
// (usable) never makes its models. Sessions read it from their own
// goroutines: a provider's models are made once (sync.Once), and nothing
// else in it changes after startup.
type modelCatalog struct {
	listed  []*model          // models.json's
	builtin []builtinProvider // the built-in providers, in hostedProviders' order
	last    []*model          // faux; a model adopted for --provider (added at startup)
}

// baseURLFrom is where p's models go when models.json gives no baseUrl:
// OPENAI_BASE_URL for openai when it is set, else the catalog's address.
func (p *hostedProvider) baseURLFrom(getenv func(string) string) string {
	if base := strings.TrimRight(getenv("OPENAI_BASE_URL"), "/"); p.id == "openai" && base != "" {
		return base
	}
	return p.baseURL
}

// builtinProvider is a built-in provider as this rpi has it: its base
// URL, its credential, what models.json changes of it, and its models
// once made (the same ones at every use).
type builtinProvider struct {
	provider *hostedProvider
	baseURL  string      // models.json's, else OPENAI_BASE_URL for openai, else the catalog's
	cred     *credential // nil: no key, none of its models can be used
	over     providerOverride
	once     sync.Once
	made     []*model
}

// providerOverride is what a models.json entry named like a built-in
// provider changes of that provider's own models (as in pi): their base
// URL, their compat settings, headers added to their requests, which of
// them its own models of the same id replace, and its modelOverrides.
type providerOverride struct {
	baseURL string                    // "": the provider's own
	compat  *compat                   // over what rpi detects for the host; nil: nothing
	headers map[string]string         // resolved; shared by the models (read only)
	listed  []string                  // the ids of the models it lists
	models  map[string]*modelOverride // its modelOverrides, by id (read only)
	bearer  bool                      // its authHeader
}

// compat is what p's models have of compat before modelOverrides: what
// rpi detects for the host, with models.json's entry's over it.
func (p *builtinProvider) compat() compat {
	return detectCompat(p.provider.id, p.baseURL).over(p.over.compat)
}

// models are p's models, made at the first call.
func (p *builtinProvider) models() []*model {
	p.once.Do(func() { p.made = p.provider.makeModels(p.baseURL, p.cred, p.over) })
	return p.made
}

// all lists every model, making the built-in ones not made yet.
func (c *modelCatalog) all() []*model {
	models := slices.Clone(c.listed)
	for i := range c.builtin {
		models = append(models, c.builtin[i].models()...)
	}
	return append(models, c.last...)
}

// usable lists the models that can be used (with a key, or needing none),
// in the catalog's order; of the built-in providers, it makes only the
// models of those with a key.
func (c *modelCatalog) usable() []*model {
	models := appendUsable(nil, c.listed)
	for i := range c.builtin {
		if p := &c.builtin[i]; p.cred != nil {
			models = appendUsable(models, p.models())
		}
	}
	return appendUsable(models, c.last)
}

// of lists one provider's models, in the catalog's order; of the built-in
// providers, it makes only the models of that one.
func (c *modelCatalog) of(provider string) []*model {
	models := appendOf(nil, c.listed, provider)
	for i := range c.builtin {
		if p := &c.builtin[i]; p.provider.id == provider {
			models = append(models, p.models()...)
		}
	}
	return appendOf(models, c.last, provider)
}

// appendOf appends to dst those of models whose provider is provider.
func appendOf(dst, models []*model, provider string) []*model {
	for _, m := range models {
		if m.Provider == provider {
			dst = append(dst, m)
		}
	}
	return dst
}

// providers lists the providers that have models, in the catalog's
// order, making none of them.
func (c *modelCatalog) providers() []string {
	var names []string
	add := func(name string) {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for _, m := range c.listed {
		add(m.Provider)
	}
	for i := range c.builtin {
		add(c.builtin[i].provider.id) // each has models
	}
	for _, m := range c.last {
		add(m.Provider)
	}
	return names
}

// appendUsable appends to dst those of models that can be used.
func appendUsable(dst, models []*model) []*model {
	for _, m := range models {
		if m.usable() {
			dst = append(dst, m)
		}
	}
	return dst
}

// keyVarOf is the key variable of a built-in provider; "" for another.
func keyVarOf(provider string) string {
	if p := hostedProviderNamed(provider); p != nil {
		return p.keyVar
	}
	return ""
}

// ---- Choosing the model ----

// chooseModel picks the starting model: --model (and --provider), then
// settings.json's default, then the first usable model. The thinking
// suffix of --model ("id:high") is returned too. With --provider naming a
// built-in provider, an id the catalog does not list is taken as a model
// of that provider (see modelCatalog.adopt); the caller adds it to the catalog.
// Of the built-in models it makes only those it looks at: a named
// provider's, or without one every model for --model and the usable ones
// otherwise.
func chooseModel(catalog *modelCatalog, provider, spec, defProvider, defModel string) (*model, string, error) {
	thinking := ""
	if spec != "" {
		id := spec
		if i := strings.LastIndex(spec, ":"); i > 0 && slices.Contains(thinkingLevels, spec[i+1:]) {
			id, thinking = spec[:i], spec[i+1:]
		}
		explicit := provider != ""
		if provider == "" {
			if p, rest, ok := strings.Cut(id, "/"); ok {
				provider, id = p, rest
			}
		}
		var models []*model
		if provider != "" {
			models = catalog.of(provider) // the only ones it may choose, adopt from or name
		} else {
			models = catalog.all()
		}
		var found *model // the first model of that name, when none is usable
		for _, m := range models {
			if m.ID == id && (provider == "" || m.Provider == provider) {
				if m.usable() {
					return m, thinking, nil
				}
				found = cmp.Or(found, m)
			}
		}
		if found == nil && explicit {
			found = catalog.adopt(provider, id)
		}
		switch {
		case found == nil:
		case !found.speaks():
			return nil, "", unspokenError(found)
		case found.usable(): // adopted, with the provider's key
			return found, thinking, nil
		default:
			return nil, "", keylessError(found)
		}
		// "gpt-5:ultra": a known model with a suffix that is no level.
		if i := strings.LastIndex(id, ":"); i > 0 && thinking == "" {
			for _, m := range models {
				if m.ID == id[:i] && (provider == "" || m.Provider == provider) {
					return nil, "", fmt.Errorf("Invalid --model %s: the thinking level must be one of %s",
						spec, strings.Join(thinkingLevels, ", "))
				}
			}
		}
		return nil, "", fmt.Errorf("Unknown model: %s (see get_available_models, or add it to models.json)", spec)
	}
	models := catalog.usable() // only a usable model is chosen
	for _, m := range models {
		if m.Provider == defProvider && m.ID == defModel && m.usable() {
			return m, "", nil
		}
	}
	for _, m := range models {
		// faux is never chosen on its own, only when named.
		if m.usable() && (provider == "" && !m.faux || provider != "" && m.Provider == provider) {
			return m, "", nil
		}
	}
	return nil, "", nil
}

// checkProvider checks --provider against the catalog: a provider it
// does not have is an init error naming those it has; so is one none of
// whose models can be used, when it is to choose the starting model
// (without --model, which reports its own model's failure).
func checkProvider(catalog *modelCatalog, provider string, choosing bool) error {
	models := catalog.of(provider)
	switch {
	case len(models) == 0:
		return fmt.Errorf("Unknown provider: %s (known: %s; or add it to models.json)", provider, strings.Join(catalog.providers(), ", "))
	case !choosing || slices.ContainsFunc(models, (*model).usable):
		return nil
	case !models[0].speaks():
		return unspokenError(models[0])
	}
	return noKeyError(provider, provider)
}

// adopt makes a model of a built-in provider from an id its catalog
// entry does not list (the catalog holds a few models per provider): the
// provider's URL, API, key, and models.json entry's headers and compat
// (not what its modelOverrides give one model), a 128000-token window and
// a 16384-token output limit, no reasoning settings and no prices. Nil
// when provider is not built in.
func (c *modelCatalog) adopt(provider, id string) *model {
	for i := range c.builtin {
		if b := &c.builtin[i]; b.provider.id == provider {
			return &model{ID: id, Name: id, API: b.provider.api, Provider: provider, BaseURL: b.baseURL, Input: []string{"text"},
				ContextWindow: 128000, MaxTokens: 16384, builtin: true, compat: b.compat(), cred: b.cred, needsKey: true, headers: b.over.headers, bearer: b.over.bearer}
		}
	}
	return nil
}

// availableLevels are the thinking levels model m accepts (pi 1.6's
// rule): every level without a model, only off without reasoning, else
// off to high — minus those its thinkingLevelMap maps to null — plus
// xhigh and max where the map names them.
func availableLevels(m *model) []string {
	var levels []string
	for _, level := range thinkingLevels {
		if takesLevel(m, level) {
			levels = append(levels, level)
		}
	}
	return levels
}

// takesLevel reports whether m takes a thinking level (every level when
// there is no model; only off without reasoning).
func takesLevel(m *model, level string) bool {
	switch {
	case !slices.Contains(thinkingLevels, level):
		return false
	case m == nil:
		return true
	case !m.Reasoning:
		return level == "off"
	}
	v, named := m.levels[level]
	extra := level == "xhigh" || level == "max"
	return extra && named && v != nil || !extra && (!named || v != nil)
}

// clampLevel is the level m gets for a requested one: itself when m takes
// it, else the next one up that m takes, else the next one down.
func clampLevel(m *model, level string) string {
	if takesLevel(m, level) {
		return level
	}
	i := slices.Index(thinkingLevels, level)
	for j := i + 1; j < len(thinkingLevels); j++ {
		if takesLevel(m, thinkingLevels[j]) {
			return thinkingLevels[j]
		}
	}
	for j := i - 1; j >= 0; j-- {
		if takesLevel(m, thinkingLevels[j]) {
			return thinkingLevels[j]
		}
	}
	return "off"
}

// effectiveThinking is the thinking level the current model gets: the
// level set, clamped to what the model takes (off without reasoning).
// The level set is kept clamped to the model already, as pi 1.6 keeps
// it (a level asked for that the model does not take is not remembered
// for the next model), so clamping again changes nothing.
// s.mu must be held.
func (s *session) effectiveThinking() string {
	return clampLevel(s.model, s.thinkingLevel)
}

// thinkingChanged records and reports a change of the effective thinking
// level (thinking_level_changed), when there was one.
func (s *session) thinkingChanged(before, now string) {
	if now == before {
		return
	}
	s.emit("thinking_level_changed", thinkingLevelChanged{now})
	s.conv.record("thinking_level_change", entryField{"thinkingLevel", now})
}

type thinkingLevelChanged struct {
	Level string `json:"level"`
}

// usableModels lists the models that can be called, faux only while
// listedFaux says so (current is the current model).
func (s *session) usableModels(current *model) []*model {
	var out []*model
	for _, m := range s.set.catalog.usable() {
		if listedFaux(m, current) {
			out = append(out, m)
		}
	}
	return out
}

// switchModel makes m the current model and records the change; a
// thinking level the new model takes differently is reported too. A
// level is set with it, as a scoped model's ":level" is; "" for none:
// then, as in pi, the one settings.json's modelThinkingLevels gives m,
// else its defaultThinkingLevel when a file sets one, else the level in
// force stays; clamped to m.
func (s *session) switchModel(m *model, level string) {
	s.mu.Lock()
	before := s.effectiveThinking()
	s.model = m
	if level == "" {
		level = s.set.modelThinkingLevel(m)
	}
	if level == "" && s.set.thinkingLevelSet {
		level = s.set.thinkingLevel
	}
	if level != "" {
		s.thinkingLevel = level
	}
	now := s.effectiveThinking()
	s.thinkingLevel = now
	s.mu.Unlock()
	s.conv.record("model_change", entryField{"provider", m.Provider}, entryField{"modelId", m.ID})
	s.thinkingChanged(before, now)
}

// startState is the model and thinking level a conversation starts with
// (sc: what its session file holds), decided as pi 1.6 decides them on
// every start and session change (new_session, switch_session, fork,
// clone). The model: the one --model names; else, for a conversation
// without messages, the scope's start (scope, scopeLevel: startScope),
// for one with messages the model it last used when that can be called;
// else settings.json's default. The level: --thinking's; else --model's
// ":level"; else the scope's pattern's, when the scope chose the model;
// else, for a conversation with messages, the level it recorded, or
// defaultThinkingLevel when it recorded none; else modelThinkingLevels'
// for the model; else defaultThinkingLevel. The level is clamped to the
// model, as pi 1.6 clamps it: --thinking xhigh on a model without xhigh
// starts, and stays, at high (effectiveThinking). s.mu must be held, or
// s not shared yet.
func (s *session) startState(sc sessionContext, scope *model, scopeLevel string) (*model, string) {
	set := s.set
	resumed := len(sc.messages) > 0
	m, level := s.startModel, cmp.Or(set.cfg.thinking, s.startThinking)
	if m == nil && !resumed && scope != nil {
		m, level = scope, cmp.Or(level, scopeLevel)
	}
	if m == nil && resumed {
		for _, u := range s.usableModels(s.model) {
			if u.Provider == sc.provider && u.ID == sc.modelID {
				m = u
			}
		}
	}
	if m == nil {
		m, _, _ = chooseModel(set.catalog, set.cfg.provider, "", set.defaultProvider, set.defaultModel)
	}
	if level == "" && resumed {
		level = set.thinkingLevel
		if slices.Contains(thinkingLevels, sc.thinkingLevel) {
			level = sc.thinkingLevel
		}
	}
	return m, clampLevel(m, cmp.Or(level, set.modelThinkingLevel(m), set.thinkingLevel))
}

// modelThinkingLevel is the thinking level settings.json's
// modelThinkingLevels gives m ("provider/id" exactly); "" when none
// does, or m is nil.
func (set *settings) modelThinkingLevel(m *model) string {
	if m == nil {
		return ""
	}
	return set.modelThinkingLevels[m.Provider+"/"+m.ID]
}

// setModel switches the model for the next call to the catalog's
// provider/id: a model_change entry, and thinking_level_changed when the
// new model takes the level differently. An unknown model fails with
// "Model not found: p/id", one without a key with "No API key for p/id: …",
// one whose API rpi does not speak with a message naming it.
func (s *session) setModel(provider, id string) (*model, error) {
	for _, m := range s.set.catalog.of(provider) {
		switch {
		case m.Provider != provider || m.ID != id:
		case !m.speaks():
			return nil, unspokenError(m)
		case !m.usable():
			return nil, keylessError(m)
		default:
			s.switchModel(m, "")
			return m, nil
		}
	}
	return nil, fmt.Errorf("Model not found: %s/%s", provider, id)
}

// cycledModel is what cycleModel moved to.
type cycledModel struct {
	Model         *model `json:"model"`
	ThinkingLevel string `json:"thinkingLevel"`
	IsScoped      bool   `json:"isScoped"` // the models --models (or enabledModels) names
}

// cycleModel moves to the next usable model (of the scope of --models or
// enabledModels, when given, with the thinking level its pattern gives
// it); ok is false when fewer than two are in scope.
func (s *session) cycleModel() (next cycledModel, ok bool) {
	models, scoped := s.scopedModels()
	if len(models) < 2 {
		return cycledModel{}, false
	}
	s.mu.Lock()
	to := models[0]
	for i, cur := range models {
		if cur.m == s.model {
			to = models[(i+1)%len(models)]
		}
	}
	s.mu.Unlock()
	m := to.m
	s.switchModel(m, to.level)
	s.mu.Lock()
	defer s.mu.Unlock()
	return cycledModel{m, s.effectiveThinking(), scoped}, true
}

// availableModels lists the models whose provider has credentials (or
// needs none). Keys are never included.
func (s *session) availableModels() []*model {
	s.mu.Lock()
	models := s.usableModels(s.model)
	s.mu.Unlock()
	if models == nil {
		models = []*model{}
	}
	return models
}

// ---- Thinking ----

// thinkingAnswer is what set_thinking_level answers (docs/models.md).
type thinkingAnswer struct {
	Requested string `json:"requested"`
	Level     string `json:"level"`
}

// setThinkingLevel sets the reasoning effort of the next model call. A
// level the model does not take is clamped (the next one up it takes,
// else the next one down); now is the level in force, and the one kept
// (as in pi 1.6, the level asked for is not remembered for another
// model). A change of it is recorded and reported (thinking_level_changed).
func (s *session) setThinkingLevel(level string) (now string) {
	s.mu.Lock()
	before := s.effectiveThinking()
	now = clampLevel(s.model, level)
	s.thinkingLevel = now
	s.mu.Unlock()
	s.thinkingChanged(before, now)
	return now
}

// cycleThinkingLevel moves to the next level the model takes, wrapping
// around; ok is false with a model that does not reason.
func (s *session) cycleThinkingLevel() (now string, ok bool) {
	s.mu.Lock()
	if s.model != nil && !s.model.Reasoning {
		s.mu.Unlock()
		return "", false
	}
	levels := availableLevels(s.model)
	before := s.effectiveThinking()
	now = levels[(slices.Index(levels, before)+1)%len(levels)]
	s.thinkingLevel = now
	s.mu.Unlock()
	s.thinkingChanged(before, now)
	return now, true
}

// thinkingLevelsAvailable are the levels the current model takes.
func (s *session) thinkingLevelsAvailable() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return availableLevels(s.model)
}

// The thinking levels and queue modes a session takes.
var (
	thinkingLevels = []string{"off", "minimal", "low", "medium", "high", "xhigh", "max"}
	queueModes     = []string{"all", "one-at-a-time"}
)
