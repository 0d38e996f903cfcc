package main

// Models: the built-in catalog, pi's models.json, credentials, and the
// model and thinking commands. The APIs' wire formats are in providers.go.

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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

	apiKey    string            // resolved credential; empty when none
	needsKey  bool              // false for a models.json provider without apiKey (a local server)
	headers   map[string]string // extra request headers from models.json
	imageable bool
	// levels is pi's thinkingLevelMap: what a level is sent as, or nil
	// for a level the model does not take. A level it does not name is
	// sent as itself, except xhigh and max, which it then does not take.
	levels map[string]*string
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

// supportedAPIs are the model APIs rpi speaks. A models.json model with
// another API is kept in the catalog, so that set_model can say why it
// cannot be used, but is never available.
var supportedAPIs = []string{apiOpenAI, apiResponses, apiAnthropic, apiGoogle}

// speaks reports whether rpi speaks m's API.
func (m *model) speaks() bool { return slices.Contains(supportedAPIs, m.API) }

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
		m.Provider, m.ID, m.API, strings.Join(supportedAPIs, ", "))
}

// builtinModels is the small catalog of current OpenAI and Anthropic models.
func builtinModels() []*model {
	openai := func(id, name string, reasoning bool, window, max int, cost modelCost) *model {
		return &model{ID: id, Name: name, API: apiOpenAI, Provider: "openai", BaseURL: "https://api.openai.com/v1",
			Reasoning: reasoning, Input: []string{"text", "image"}, Cost: cost, ContextWindow: window, MaxTokens: max, needsKey: true}
	}
	anthropic := func(id, name string, window, max int, cost modelCost) *model {
		return &model{ID: id, Name: name, API: apiAnthropic, Provider: "anthropic", BaseURL: "https://api.anthropic.com",
			Reasoning: true, Input: []string{"text", "image"}, Cost: cost, ContextWindow: window, MaxTokens: max, needsKey: true}
	}
	return []*model{
		anthropic("claude-sonnet-4-5", "Claude Sonnet 4.5", 200000, 64000, modelCost{3, 15, 0.3, 3.75}),
		anthropic("claude-opus-4-1", "Claude Opus 4.1", 200000, 32000, modelCost{15, 75, 1.5, 18.75}),
		anthropic("claude-haiku-4-5", "Claude Haiku 4.5", 200000, 64000, modelCost{1, 5, 0.1, 1.25}),
		openai("gpt-5", "GPT-5", true, 400000, 128000, modelCost{1.25, 10, 0.125, 0}),
		openai("gpt-5-mini", "GPT-5 mini", true, 400000, 128000, modelCost{0.25, 2, 0.025, 0}),
		openai("gpt-4.1", "GPT-4.1", false, 1047576, 32768, modelCost{2, 8, 0.5, 0}),
		openai("gpt-4o", "GPT-4o", false, 128000, 16384, modelCost{2.5, 10, 1.25, 0}),
		openai("o4-mini", "o4-mini", true, 200000, 100000, modelCost{1.1, 4.4, 0.275, 0}),
	}
}

// modelsFile is pi's models.json.
type modelsFile struct {
	Providers map[string]struct {
		BaseURL string            `json:"baseUrl"`
		API     string            `json:"api"`
		APIKey  string            `json:"apiKey"`
		Headers map[string]string `json:"headers"`
		Models  []struct {
			ID            string     `json:"id"`
			Name          string     `json:"name"`
			API           string     `json:"api"`
			BaseURL       string     `json:"baseUrl"`
			Reasoning     bool       `json:"reasoning"`
			Input         []string   `json:"input"`
			ContextWindow int        `json:"contextWindow"`
			MaxTokens     int        `json:"maxTokens"`
			Cost          *modelCost `json:"cost"`
		} `json:"models"`
	} `json:"providers"`
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
	v = strings.TrimPrefix(strings.TrimSuffix(strings.TrimPrefix(v, "${"), "}"), "$")
	if v == "" {
		return false
	}
	for _, c := range v {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// providerKeyVars are the environment variables the built-in providers
// take their keys from. Children never see them (nor any variable a
// models.json key or header names).
var providerKeyVars = []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}

// loadModels builds the model list: models.json's models first (a user's
// own configuration is what they want by default), then the catalog, each
// with its credential resolved. It also returns every secret it resolved
// (for redaction) and the variables they came from. A models.json that
// cannot be read or is not JSON is an error; a missing one is not, and a
// provider or model it cannot use is a warning.
func loadModels(dir, cliProvider, cliKey string, getenv func(string) string) (models []*model, secrets *redactor, keyVars, warnings []string, err error) {
	keyVars = slices.Clone(providerKeyVars)
	var keys []string
	resolve := func(v string) string {
		if isEnvName(v) {
			keyVars = append(keyVars, strings.TrimPrefix(strings.Trim(v, "${}"), "$"))
		}
		value := envOrLiteral(v, getenv)
		keys = append(keys, value)
		return value
	}
	path := filepath.Join(dir, "models.json")
	data, err := readRegularFile(path, maxResourceBytes)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil, nil, fmt.Errorf("Cannot read %s: %v", path, unwrapPathError(err))
	}
	if err == nil {
		var file modelsFile
		if err := json.Unmarshal(data, &file); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("Invalid %s: %v", path, jsonError(data, err))
		}
		// One provider's mistake never stops startup: its models are
		// skipped or kept out of use, with a warning.
		var unspoken []string
		for _, name := range slices.Sorted(maps.Keys(file.Providers)) {
			p := file.Providers[name]
			for _, m := range p.Models {
				api, baseURL := cmp.Or(m.API, p.API), cmp.Or(m.BaseURL, p.BaseURL)
				switch {
				case m.ID == "":
					warnings = append(warnings, fmt.Sprintf("%s: provider %s: skipped a model without \"id\"", path, name))
					continue
				case api == "":
					warnings = append(warnings, fmt.Sprintf("%s: provider %s: skipped model %s: no \"api\"", path, name, m.ID))
					continue
				case baseURL == "":
					warnings = append(warnings, fmt.Sprintf("%s: provider %s: skipped model %s: no \"baseUrl\"", path, name, m.ID))
					continue
				}
				mod := &model{ID: m.ID, Name: cmp.Or(m.Name, m.ID), API: api, Provider: name, BaseURL: strings.TrimRight(baseURL, "/"),
					Reasoning: m.Reasoning, Input: m.Input, ContextWindow: m.ContextWindow, MaxTokens: m.MaxTokens,
					needsKey: p.APIKey != "", headers: map[string]string{}}
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
				if p.APIKey != "" {
					mod.apiKey = resolve(p.APIKey)
				}
				for k, v := range p.Headers {
					mod.headers[k] = resolve(v)
				}
				models = append(models, mod)
			}
		}
		if len(unspoken) > 0 {
			warnings = append(warnings, fmt.Sprintf("%s: left out %s whose API rpi does not speak: %s; rpi speaks %s",
				path, countOf(len(unspoken), "model", "models"), strings.Join(unspoken, ", "), strings.Join(supportedAPIs, ", ")))
		}
		sortModels(models)
	}
	for _, m := range builtinModels() {
		switch m.Provider {
		case "openai":
			m.apiKey = getenv("OPENAI_API_KEY")
			if base := getenv("OPENAI_BASE_URL"); base != "" {
				m.BaseURL = strings.TrimRight(base, "/")
			}
		case "anthropic":
			m.apiKey = getenv("ANTHROPIC_API_KEY")
		}
		keys = append(keys, m.apiKey)
		models = append(models, m)
	}
	if cliKey != "" {
		keys = append(keys, cliKey)
		for _, m := range models {
			if cliProvider == "" || m.Provider == cliProvider {
				m.apiKey = cliKey
			}
		}
	}
	for _, m := range models {
		m.imageable = slices.Contains(m.Input, "image")
	}
	return models, newRedactor(keys), keyVars, warnings, nil
}

// redactor removes secrets from text that leaves rpi.
type redactor struct{ replacer *strings.Replacer }

// minSecretLength: shorter values (a local server's "x") are not secrets
// worth hiding and would mangle ordinary text.
const minSecretLength = 8

func newRedactor(secrets []string) *redactor {
	var pairs []string
	seen := map[string]bool{}
	for _, secret := range secrets {
		for _, form := range []string{secret, url.QueryEscape(secret), url.PathEscape(secret)} {
			if len(form) >= minSecretLength && !seen[form] {
				seen[form] = true
				pairs = append(pairs, form, "[redacted]")
			}
		}
	}
	return &redactor{strings.NewReplacer(pairs...)}
}

func (r *redactor) redact(text string) string {
	if r == nil {
		return text
	}
	return r.replacer.Replace(text)
}

// MarshalJSON writes the Model object with any password in its baseUrl
// masked; keys and headers are never part of it.
func (m *model) MarshalJSON() ([]byte, error) {
	type plain model
	c := plain(*m)
	if u, err := url.Parse(c.BaseURL); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "***")
			c.BaseURL = strings.Replace(u.String(), "%2A%2A%2A", "***", 1)
		}
	}
	return marshalJSON(c)
}

// sortModels orders models.json models by provider, then as listed.
func sortModels(models []*model) {
	slices.SortStableFunc(models, func(a, b *model) int { return strings.Compare(a.Provider, b.Provider) })
}

// usable reports whether a model can be called: it has a key or needs none.
func (m *model) usable() bool { return m.speaks() && (!m.needsKey || m.apiKey != "") }

// noModelMessage says how to configure a model; it is the prompt failure
// when none is usable.
const noModelMessage = "No model available. Set OPENAI_API_KEY or ANTHROPIC_API_KEY, pass --api-key with --provider, " +
	"or add an OpenAI-compatible server to models.json in $PI_CODING_AGENT_DIR (default ~/.pi/agent); see README.md."

// ---- Choosing the model ----

// chooseModel picks the starting model: --model (and --provider), then
// settings.json's default, then the first usable model. The thinking
// suffix of --model ("id:high") is returned too.
func chooseModel(models []*model, provider, spec, defProvider, defModel string) (*model, string, error) {
	thinking := ""
	if spec != "" {
		id := spec
		if i := strings.LastIndex(spec, ":"); i > 0 && slices.Contains(thinkingLevels, spec[i+1:]) {
			id, thinking = spec[:i], spec[i+1:]
		}
		if provider == "" {
			if p, rest, ok := strings.Cut(id, "/"); ok {
				provider, id = p, rest
			}
		}
		var unspoken *model
		for _, m := range models {
			if m.ID == id && (provider == "" || m.Provider == provider) {
				if m.speaks() {
					return m, thinking, nil
				}
				unspoken = cmp.Or(unspoken, m)
			}
		}
		if unspoken != nil {
			return nil, "", unspokenError(unspoken)
		}
		return nil, "", fmt.Errorf("Unknown model: %s (see get_available_models, or add it to models.json)", spec)
	}
	for _, m := range models {
		if m.Provider == defProvider && m.ID == defModel && m.usable() {
			return m, "", nil
		}
	}
	for _, m := range models {
		if m.usable() && (provider == "" || m.Provider == provider) {
			return m, "", nil
		}
	}
	return nil, "", nil
}

// effectiveThinking is the thinking level the current model gets: off for
// a model without reasoning, otherwise the level set (also while there is
// no model). s.mu must be held.
func (s *server) effectiveThinking() string {
	if s.model != nil && !s.model.Reasoning {
		return "off"
	}
	return s.thinkingLevel
}

// usableModels lists the models that can be called.
func (s *server) usableModels() []*model {
	var out []*model
	for _, m := range s.set.catalog {
		if m.usable() {
			out = append(out, m)
		}
	}
	return out
}

// switchModel makes m the current model and records the change.
func (s *server) switchModel(m *model) {
	s.mu.Lock()
	s.model = m
	s.mu.Unlock()
	s.conv.record("model_change", field{"provider", m.Provider}, field{"modelId", m.ID})
}

// setModel switches the model for the next call.
// Fields: provider, modelId. Answer: the Model object; a model that is
// unknown or has no credentials fails with "Model not found: p/id", one
// whose API rpi does not speak with a message naming the API.
func (s *server) setModel(r *request) (any, error) {
	provider, err := r.str("provider")
	if err != nil {
		return nil, err
	}
	id, err := r.str("modelId")
	if err != nil {
		return nil, err
	}
	for _, m := range s.set.catalog {
		switch {
		case m.Provider != provider || m.ID != id:
		case !m.speaks():
			return nil, unspokenError(m)
		case m.usable():
			s.switchModel(m)
			return m, nil
		}
	}
	return nil, fmt.Errorf("Model not found: %s/%s", provider, id)
}

// cycleModel moves to the next usable model.
// Fields: none. Answer: {model, thinkingLevel, isScoped:false}, or null
// when fewer than two models are usable.
func (s *server) cycleModel(r *request) (any, error) {
	models := s.usableModels()
	if len(models) < 2 {
		return nil, nil
	}
	s.mu.Lock()
	next := models[0]
	for i, m := range models {
		if m == s.model {
			next = models[(i+1)%len(models)]
		}
	}
	s.mu.Unlock()
	s.switchModel(next)
	s.mu.Lock()
	defer s.mu.Unlock()
	return struct {
		Model         *model `json:"model"`
		ThinkingLevel string `json:"thinkingLevel"`
		IsScoped      bool   `json:"isScoped"`
	}{next, s.effectiveThinking(), false}, nil
}

// getAvailableModels lists the models whose provider has credentials (or
// needs none). Keys are never included.
// Fields: none. Answer: {"models":[Model]}.
func (s *server) getAvailableModels(r *request) (any, error) {
	models := s.usableModels()
	if models == nil {
		models = []*model{}
	}
	return struct {
		Models []*model `json:"models"`
	}{models}, nil
}

// ---- Thinking ----

// thinkingAnswer is what set_thinking_level answers (§11).
type thinkingAnswer struct {
	Requested string `json:"requested"`
	Level     string `json:"level"`
}

// setThinkingLevel sets the reasoning effort used for the next model call;
// an unchanged effective level writes no session entry.
// Fields: level (off|minimal|low|medium|high|xhigh). Answer: {requested,
// level (the level in force: off for a model without reasoning)}.
func (s *server) setThinkingLevel(r *request) (any, error) {
	level, err := r.enum("level", thinkingLevels)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	before := s.effectiveThinking()
	s.thinkingLevel = level
	now := s.effectiveThinking()
	s.mu.Unlock()
	if now != before {
		s.conv.record("thinking_level_change", field{"thinkingLevel", now})
	}
	return thinkingAnswer{level, now}, nil
}

// cycleThinkingLevel moves to the next thinking level; with a model that
// does not reason (or none) it answers null and nothing changes.
// Fields: none. Answer: {"level":…} or null.
func (s *server) cycleThinkingLevel(r *request) (any, error) {
	s.mu.Lock()
	if s.model == nil || !s.model.Reasoning {
		s.mu.Unlock()
		return nil, nil
	}
	i := slices.Index(thinkingLevels, s.thinkingLevel)
	s.thinkingLevel = thinkingLevels[(i+1)%len(thinkingLevels)]
	level := s.thinkingLevel
	s.mu.Unlock()
	s.conv.record("thinking_level_change", field{"thinkingLevel", level})
	return struct {
		Level string `json:"level"`
	}{level}, nil
}
