package main

// The built-in catalog: the providers rpi knows by name, each with its
// base URL, API, key variable and a few current models, and the request
// quirks of OpenAI-compatible hosts. The entries follow pi's generated
// catalog (pi-ai 1.6.0, generated 2026-11-20); docs/models.md says how to
// bring them up to date.

import (
	"net/url"
	"slices"
	"strings"
	"sync"
)

// catalogDate is the date of pi's catalog the entries below follow.
const catalogDate = "2026-11-20"

// hostedProvider is a provider rpi knows by name.
type hostedProvider struct {
	id      string
	baseURL string
	api     string
	keyVar  string        // the environment variable its key comes from
	models  []hostedModel // its models
	strict  bool          // its models take strict tools (pi's catalog: supportsStrictMode or supportsStrictTools)
	// shortCache: it takes no long cache retention (pi's catalog:
	// supportsLongCacheRetention false).
	shortCache bool
	// affinity: its models get the session's id in routing headers
	// (pi's catalog: sendSessionAffinityHeaders).
	affinity bool
	// modelCompat is the compat pi's catalog gives some of its models
	// apart: over the provider's, under models.json's.
	modelCompat []modelCompat
}

// modelCompat is the compat of the catalog model of that id.
type modelCompat struct {
	id     string
	compat compat
}

// yes and no are the catalog's settings: their addresses are laid out
// as data, where ptr would build them at init.
var yes, no = true, false

// hostedModel declares a catalog model: its id and name, whether it
// reasons and takes images, its context window and output limit, its
// price in dollars per million tokens (input, output, cache read, cache
// write) and the thinking levels it takes (think's notation; "" for the
// default: off to high).
type hostedModel struct {
	id, name          string
	reasoning, images bool
	window, maxTokens int
	cost              modelCost
	levels            string
}

// Whether a catalog model takes images.
const textOnly, withImages = false, true

// The inputs of the catalog's models, shared by them (read only).
var (
	textInput      = []string{"text"}
	textImageInput = []string{"text", "image"}
)

// makeModels makes p's models: each with p's API, the base URL given
// (models.json or OPENAI_BASE_URL may move it), the quirks of that host
// with models.json's compat over them, models.json's headers, the
// provider's credential, and last what models.json's modelOverrides
// change of each; but not those models.json lists itself (its model of
// the same id replaces the catalog's, as in pi).
func (p *hostedProvider) makeModels(baseURL string, cred *credential, over providerOverride) []*model {
	detected := detectCompat(p.id, baseURL)
	if p.shortCache {
		detected.SupportsLongCacheRetention = ptr(false)
	}
	if p.affinity {
		detected.SendSessionAffinityHeaders = ptr(true)
	}
	if p.strict {
		detected.SupportsStrictMode, detected.SupportsStrictTools = ptr(true), ptr(true)
	}
	shared := detected.over(over.compat) // a provider's models share its base URL
	models := make([]model, len(p.models))
	made := make([]*model, 0, len(p.models))
	for i, e := range p.models {
		if slices.Contains(over.listed, e.id) {
			continue
		}
		m := &models[i]
		*m = model{ID: e.id, Name: e.name, API: p.api, Provider: p.id, BaseURL: baseURL, Reasoning: e.reasoning, Input: textInput,
			Cost: e.cost, ContextWindow: e.window, MaxTokens: e.maxTokens, builtin: true, compat: shared, cred: cred, needsKey: true, imageable: e.images,
			headers: over.headers, bearer: over.bearer}
		if e.images {
			m.Input = textImageInput
		}
		for _, own := range p.modelCompat {
			if own.id == e.id {
				m.compat = detected.over(&own.compat).over(over.compat)
			}
		}
		if e.levels != "" {
			m.levels = builtinLevels(e.levels)
		}
		over.models[e.id].apply(m) // last, as in pi
		made = append(made, m)
	}
	return made
}

// sharedLevels holds the catalog's thinking levels, one map per spec that
// every model with that spec shares (read only): a start then parses each
// spec once, not once a model.
var sharedLevels sync.Map // spec → map[string]*string

// builtinLevels is think(spec), shared.
func builtinLevels(spec string) map[string]*string {
	if levels, ok := sharedLevels.Load(spec); ok {
		return levels.(map[string]*string)
	}
	levels, _ := sharedLevels.LoadOrStore(spec, think(spec))
	return levels.(map[string]*string)
}

// Thinking levels some models share (think's notation).
const (
	lowToHigh        = "!off !minimal low medium high !xhigh !max"
	offLowToHigh     = "off=none !minimal low medium high !xhigh !max"
	lowHighMax       = "!off !minimal low !medium high !xhigh max"
	minimalToHigh    = "!off minimal low medium high !xhigh !max"
	offLowToXhigh    = "off=none !minimal low medium high xhigh !max"
	thinkingOnlyHigh = "!minimal !low !medium high !xhigh"
)

// hostedProviders is the catalog: data the linker lays out, so that none
// of it is built at startup; a provider's models are made at their first
// use (see modelCatalog).
var hostedProviders = []hostedProvider{
	{id: "anthropic", baseURL: "https://api.anthropic.com", api: apiAnthropic, keyVar: "ANTHROPIC_API_KEY", strict: true, modelCompat: []modelCompat{
		{"claude-opus-4-1", compat{SupportsStrictMode: &no, SupportsStrictTools: &no}},
	}, models: []hostedModel{
		{"claude-sonnet-4-5", "Claude Sonnet 4.5", true, withImages, 200000, 64000, modelCost{3, 15, 0.3, 3.75}, ""},
		{"claude-opus-4-1", "Claude Opus 4.1", true, withImages, 200000, 32000, modelCost{15, 75, 1.5, 18.75}, ""},
		{"claude-haiku-4-5", "Claude Haiku 4.5", true, withImages, 200000, 64000, modelCost{1, 5, 0.1, 1.25}, ""},
	}},
	{id: "openai", baseURL: "https://api.openai.com/v1", api: apiResponses, keyVar: "OPENAI_API_KEY", strict: true, modelCompat: []modelCompat{
		{"gpt-6.2-sol", compat{SupportsExplicitPromptCacheMode: &yes}},
	}, models: []hostedModel{
		{"gpt-6.2-sol", "GPT-6.2 Sol", true, withImages, 272000, 128000, modelCost{2, 10, 0.1, 2.5}, "!off !minimal low medium high xhigh max"},
		{"gpt-5.5", "GPT-5.5", true, withImages, 272000, 128000, modelCost{5, 30, 0.5, 0}, offLowToXhigh},
		{"gpt-5.1", "GPT-5.1", true, withImages, 400000, 128000, modelCost{1.25, 10, 0.125, 0}, offLowToHigh},
		{"gpt-5", "GPT-5", true, withImages, 400000, 128000, modelCost{1.25, 10, 0.125, 0}, minimalToHigh},
		{"gpt-5-mini", "GPT-5 mini", true, withImages, 400000, 128000, modelCost{0.25, 2, 0.025, 0}, minimalToHigh},
		{"gpt-4.1", "GPT-4.1", false, withImages, 1047576, 32768, modelCost{2, 8, 0.5, 0}, ""},
		{"gpt-4o", "GPT-4o", false, withImages, 128000, 16384, modelCost{2.5, 10, 1.25, 0}, ""},
		{"o4-mini", "o4-mini", true, withImages, 200000, 100000, modelCost{1.1, 4.4, 0.275, 0}, lowToHigh},
	}},
	{id: "google", baseURL: "https://generativelanguage.googleapis.com/v1beta", api: apiGoogle, keyVar: "GEMINI_API_KEY", models: []hostedModel{
		{"gemini-3.1-pro-preview", "Gemini 3.1 Pro Preview", true, withImages, 1048576, 65536, modelCost{2, 12, 0.2, 0}, lowToHigh},
		{"gemini-3-flash-preview", "Gemini 3 Flash Preview", true, withImages, 1048576, 65536, modelCost{0.5, 3, 0.05, 0}, minimalToHigh},
		// 2.5 Pro cannot stop thinking: off is its lowest budget.
		{"gemini-2.5-pro", "Gemini 2.5 Pro", true, withImages, 1048576, 65536, modelCost{1.25, 10, 0.125, 0}, "!off"},
		{"gemini-2.5-flash", "Gemini 2.5 Flash", true, withImages, 1048576, 65536, modelCost{0.3, 2.5, 0.03, 0}, ""},
	}},
	{id: "deepseek", baseURL: "https://api.deepseek.com", api: apiOpenAI, keyVar: "DEEPSEEK_API_KEY", strict: true, models: []hostedModel{
		{"deepseek-v4-pro", "DeepSeek V4 Pro", true, textOnly, 1000000, 384000, modelCost{1.32, 3.96, 0.044, 0}, "!minimal !low !medium high max"},
		{"deepseek-flash", "DeepSeek V4.1 Flash", true, withImages, 1000000, 384000, modelCost{0.3, 1.2, 0.006, 0}, "!minimal low !medium high max"},
	}},
	{id: "groq", baseURL: "https://api.groq.com/openai/v1", api: apiOpenAI, keyVar: "GROQ_API_KEY", strict: true, models: []hostedModel{
		{"llama-3.3-70b-versatile", "Llama 3.3 70B", false, textOnly, 131072, 32768, modelCost{0.59, 0.79, 0, 0}, ""},
		{"llama-3.1-8b-instant", "Llama 3.1 8B", false, textOnly, 131072, 131072, modelCost{0.05, 0.08, 0, 0}, ""},
		{"openai/gpt-oss-120b", "GPT OSS 120B", true, textOnly, 131072, 65536, modelCost{0.15, 0.6, 0.075, 0}, lowToHigh},
		{"qwen/qwen3.8-27b", "Qwen3.8 27B", true, withImages, 131072, 16384, modelCost{0.8, 4, 0, 0}, offLowToHigh},
	}},
	{id: "cerebras", baseURL: "https://api.cerebras.ai/v1", api: apiOpenAI, keyVar: "CEREBRAS_API_KEY", models: []hostedModel{
		{"gpt-oss-120b", "GPT OSS 120B", true, textOnly, 131072, 40960, modelCost{0.35, 0.75, 0.35, 0}, lowToHigh},
		{"qwen-3.8-27b", "Qwen3.8 27B", true, withImages, 131072, 40960, modelCost{0.99, 1.49, 0.99, 0}, offLowToHigh},
	}},
	{id: "xai", baseURL: "https://api.x.ai/v1", api: apiResponses, keyVar: "XAI_API_KEY", shortCache: true, models: []hostedModel{
		{"grok-4.7", "Grok 4.7", true, withImages, 500000, 500000, modelCost{2, 6, 0.5, 0}, "!off !minimal low medium high xhigh !max"},
		{"grok-4.3", "Grok 4.3", true, withImages, 1000000, 30000, modelCost{1.25, 2.5, 0.2, 0}, offLowToXhigh},
	}},
	{id: "openrouter", baseURL: "https://openrouter.ai/api/v1", api: apiOpenAI, keyVar: "OPENROUTER_API_KEY", strict: true, modelCompat: []modelCompat{
		{"deepseek/deepseek-v4.1-flash", compat{RequiresReasoningContent: &yes}},
	}, models: []hostedModel{
		{"openai/gpt-5.5", "OpenAI: GPT-5.5", true, withImages, 1050000, 128000, modelCost{5, 30, 0.5, 0}, offLowToXhigh},
		{"deepseek/deepseek-v4.1-flash", "DeepSeek: DeepSeek V4.1 Flash", true, withImages, 1048576, 943718, modelCost{0.3, 1.2, 0.006, 0}, "off=none !minimal low !medium high !xhigh max"},
		{"google/gemini-2.5-pro", "Google: Gemini 2.5 Pro", true, withImages, 1048576, 65536, modelCost{1.25, 10, 0.125, 0.375}, "!off"},
	}},
	// pi speaks Mistral's own API (mistral-conversations); rpi uses
	// the OpenAI-compatible Chat Completions endpoint of the same
	// server, without reasoning settings (see docs/models.md).
	{id: "mistral", baseURL: "https://api.mistral.ai/v1", api: apiOpenAI, keyVar: "MISTRAL_API_KEY", models: []hostedModel{
		{"devstral-2512", "Devstral 2", false, textOnly, 262144, 262144, modelCost{0.4, 2, 0.04, 0}, ""},
		{"codestral-2508", "Codestral 25.08", false, textOnly, 256000, 8192, modelCost{0.3, 0.9, 0.03, 0}, ""},
		{"mistral-large-latest", "Mistral Large (latest)", false, withImages, 1048576, 262144, modelCost{0.7, 2.1, 0.07, 0}, ""},
		{"mistral-medium-latest", "Mistral Medium (latest)", false, withImages, 262144, 262144, modelCost{1.5, 7.5, 0.15, 0}, ""},
	}},
	{id: "together", baseURL: "https://api.together.ai/v1", api: apiOpenAI, keyVar: "TOGETHER_API_KEY", modelCompat: []modelCompat{
		{"openai/gpt-oss-120b", compat{ThinkingFormat: "openai"}},
	}, models: []hostedModel{
		{"openai/gpt-oss-120b", "GPT OSS 120B", true, textOnly, 131072, 131072, modelCost{0.15, 0.6, 0, 0}, lowToHigh},
		{"deepseek-ai/DeepSeek-V4-Pro-0813", "DeepSeek V4 Pro 0813", true, textOnly, 1048576, 384000, modelCost{1.32, 3.96, 0.13, 0}, thinkingOnlyHigh},
		{"zai-org/GLM-5.3", "GLM-5.3", true, textOnly, 1048575, 262144, modelCost{1.4, 4.4, 0.26, 0}, "!minimal !low !medium"},
		{"moonshotai/Kimi-K3", "Kimi K3", true, withImages, 1048576, 1048576, modelCost{3, 15, 0.3, 0}, "!minimal !low !medium"},
	}},
	{id: "fireworks", baseURL: "https://api.fireworks.ai/inference/v1", api: apiOpenAI, keyVar: "FIREWORKS_API_KEY", strict: true, shortCache: true, affinity: true, modelCompat: []modelCompat{
		{"accounts/fireworks/models/kimi-k3", compat{RequiresReasoningContent: &yes}},
	}, models: []hostedModel{
		{"accounts/fireworks/models/glm-5p3", "GLM 5.3", true, textOnly, 1048573, 262144, modelCost{1.4, 4.4, 0.26, 0}, lowHighMax},
		{"accounts/fireworks/models/kimi-k3", "Kimi K3", true, withImages, 1048576, 1048576, modelCost{3, 15, 0.3, 0}, lowHighMax},
	}},
	{id: "huggingface", baseURL: "https://router.huggingface.co/v1", api: apiOpenAI, keyVar: "HF_TOKEN", strict: true, models: []hostedModel{
		{"openai/gpt-oss-120b", "GPT OSS 120B", true, textOnly, 131072, 131072, modelCost{0.25, 0.69, 0, 0}, lowToHigh},
		{"moonshotai/Kimi-K3", "Kimi K3", true, withImages, 1000000, 1000000, modelCost{3, 15, 0, 0}, lowHighMax},
		{"Qwen/Qwen3-Coder-480B-A35B-Instruct", "Qwen3-Coder-480B-A35B-Instruct", false, textOnly, 262144, 65536, modelCost{2, 2, 0, 0}, ""},
		{"zai-org/GLM-5.3", "GLM-5.3", true, textOnly, 1048576, 131072, modelCost{1.4, 4.4, 0, 0}, lowHighMax},
	}},
}

// hostedProviderNamed is the built-in provider called id; nil when none is.
func hostedProviderNamed(id string) *hostedProvider {
	for i := range hostedProviders {
		if hostedProviders[i].id == id {
			return &hostedProviders[i]
		}
	}
	return nil
}

// compat are the request quirks of an OpenAI-compatible host (pi's
// detectCompat): the field that caps the answer, how reasoning is asked
// for, and what the host refuses; and of an Anthropic-compatible one.
type compat struct {
	// MaxTokensField is "max_tokens" or "max_completion_tokens".
	MaxTokensField string `json:"maxTokensField"`
	// ThinkingFormat is how reasoning is asked for: "openai"
	// (reasoning_effort), "deepseek" (thinking.type), "openrouter"
	// (reasoning.effort), "together" (reasoning.enabled), "zai"
	// (thinking.type with clear_thinking), or "none".
	ThinkingFormat string `json:"thinkingFormat"`
	// SupportsReasoningEffort: reasoning_effort goes with the openai,
	// deepseek, together and zai formats.
	SupportsReasoningEffort *bool `json:"supportsReasoningEffort"`
	// SupportsUsageInStreaming: stream_options.include_usage is sent.
	SupportsUsageInStreaming *bool `json:"supportsUsageInStreaming"`
	// RequiresReasoningContent: replayed assistant turns carry
	// reasoning_content (DeepSeek's rule).
	RequiresReasoningContent *bool `json:"requiresReasoningContentOnAssistantMessages"`
	// RequiresThinkingAsText: the model's own earlier thinking goes back
	// as a text part before the answer's text, not in a reasoning field
	// (pi's, for a host that takes no reasoning field back).
	RequiresThinkingAsText *bool `json:"requiresThinkingAsText"`
	// ThinkingTokenBudgetField (Chat Completions) is a top-level field
	// that caps the reasoning tokens, which share max_tokens with the
	// answer there: "thinking_token_budget" (vLLM), "thinking_budget"
	// (Qwen, SGLang), "thinking_budget_tokens" (llama.cpp). None by
	// default; SupportsThinkingTokenBudget is pi's older name for the
	// first (openAIThinkingBudget).
	ThinkingTokenBudgetField    string `json:"thinkingTokenBudgetField"`
	SupportsThinkingTokenBudget *bool  `json:"supportsThinkingTokenBudget"`
	// AllowEmptySignature (Anthropic Messages): the model's own thinking
	// that has no signature goes back as thinking with an empty
	// signature, which some Anthropic-compatible hosts write and take,
	// instead of as text (pi's).
	AllowEmptySignature *bool `json:"allowEmptySignature"`
	// SupportsEagerToolInputStreaming (Anthropic Messages): each tool is
	// sent with eager_input_streaming; without it, the
	// fine-grained-tool-streaming beta asks for the same (pi's; true by
	// default).
	SupportsEagerToolInputStreaming *bool `json:"supportsEagerToolInputStreaming"`
	// SupportsCacheControlOnTools (Anthropic Messages): the last tool is
	// a cache breakpoint (pi's; true by default).
	SupportsCacheControlOnTools *bool `json:"supportsCacheControlOnTools"`
	// SupportsLongCacheRetention: with PI_CACHE_RETENTION=long the
	// prompt cache is asked to last longer (Anthropic's 1h breakpoints,
	// OpenAI's prompt_cache_retention 24h; pi's; true but for Together
	// and Mistral).
	SupportsLongCacheRetention *bool `json:"supportsLongCacheRetention"`
	// SupportsStrictMode (Chat Completions, Responses) and
	// SupportsStrictTools (Anthropic Messages): the host takes strict
	// tools, and the tools that ask for it go strict (tool_strict.go);
	// pi's, set for the catalog's models where pi's catalog sets them.
	SupportsStrictMode  *bool `json:"supportsStrictMode"`
	SupportsStrictTools *bool `json:"supportsStrictTools"`
	// SupportsExplicitPromptCacheMode (Responses): the model's prompt
	// cache is OpenAI's explicit mode, where the longer cache is asked as
	// prompt_cache_options {"ttl":"30m"}, not prompt_cache_retention
	// (pi's; of the catalog's models, GPT-6.2 Sol).
	SupportsExplicitPromptCacheMode *bool `json:"supportsExplicitPromptCacheMode"`
	// promptCacheKey (Chat Completions): the session's id goes as
	// prompt_cache_key, which OpenAI's host (api.openai.com) alone
	// takes without long retention, as pi sends it.
	promptCacheKey bool
	// SendSessionAffinityHeaders (Chat Completions, Anthropic Messages):
	// the session's id goes in headers the host routes a session's
	// requests by, to the machine that holds its cached prompt (pi's;
	// true for OpenRouter and the built-in Fireworks). Responses sends
	// them always, as pi does.
	SendSessionAffinityHeaders *bool `json:"sendSessionAffinityHeaders"`
	// SessionAffinityFormat is which headers: "openrouter" (x-session-id),
	// "openai" (session_id, x-client-request-id, x-session-affinity;
	// Responses: session-id and x-client-request-id) or
	// "openai-nosession" (those without the session id's own header); by
	// default "openrouter" for OpenRouter, else "openai", but Anthropic
	// Messages, which sends x-session-affinity unless "openrouter"
	// (pi's).
	SessionAffinityFormat string `json:"sessionAffinityFormat"`
	// mistral: Mistral's rules, which its host alone sets: tool call ids
	// of nine letters and digits (mistralCallID), and an assistant turn
	// between tool results and a user turn.
	mistral bool
}

// detectCompat is a host's quirks, known from the provider's name or its
// base URL's host. An unknown host (a local server) gets max_tokens,
// which every OpenAI-compatible server takes, and reasoning_effort.
func detectCompat(provider, baseURL string) compat {
	host := ""
	if u, err := url.Parse(baseURL); err == nil {
		host = u.Hostname()
	}
	is := func(id, domain string) bool {
		return provider == id || host == domain || strings.HasSuffix(host, "."+domain)
	}
	c := compat{MaxTokensField: "max_tokens", ThinkingFormat: "openai", promptCacheKey: strings.Contains(baseURL, "api.openai.com")}
	switch {
	case is("openrouter", "openrouter.ai"):
		c.MaxTokensField, c.ThinkingFormat = "max_completion_tokens", "openrouter"
		c.SendSessionAffinityHeaders, c.SessionAffinityFormat = ptr(true), "openrouter"
	case is("openai", "openai.com"), is("groq", "groq.com"), is("cerebras", "cerebras.ai"),
		is("fireworks", "fireworks.ai"), is("huggingface", "huggingface.co"):
		c.MaxTokensField = "max_completion_tokens"
	case is("xai", "x.ai"):
		c.MaxTokensField, c.SupportsReasoningEffort = "max_completion_tokens", ptr(false)
	case is("deepseek", "deepseek.com"):
		c.ThinkingFormat, c.RequiresReasoningContent = "deepseek", ptr(true)
	case is("together", "together.ai"), is("together", "together.xyz"):
		c.ThinkingFormat, c.SupportsLongCacheRetention = "together", ptr(false)
	case is("zai", "z.ai"), is("zai", "bigmodel.cn"):
		c.ThinkingFormat = "zai"
	case is("moonshotai", "moonshot.ai"), is("moonshotai", "moonshot.cn"):
		c.ThinkingFormat, c.SupportsReasoningEffort = "deepseek", ptr(false)
	case is("mistral", "mistral.ai"):
		// Mistral refuses fields it does not know (stream_options too);
		// usage comes in the last chunk anyway.
		c.ThinkingFormat, c.SupportsReasoningEffort, c.SupportsUsageInStreaming = "none", ptr(false), ptr(false)
		c.SupportsLongCacheRetention = ptr(false)
		c.mistral = true
	}
	return c
}

// over is c with the fields o sets (models.json's compat).
func (c compat) over(o *compat) compat {
	if o == nil {
		return c
	}
	if o.MaxTokensField != "" {
		c.MaxTokensField = o.MaxTokensField
	}
	if o.ThinkingFormat != "" {
		c.ThinkingFormat = o.ThinkingFormat
	}
	if o.SessionAffinityFormat != "" {
		c.SessionAffinityFormat = o.SessionAffinityFormat
	}
	if o.ThinkingTokenBudgetField != "" {
		c.ThinkingTokenBudgetField = o.ThinkingTokenBudgetField
	}
	for _, f := range []struct{ to, from **bool }{
		{&c.SupportsReasoningEffort, &o.SupportsReasoningEffort},
		{&c.SupportsUsageInStreaming, &o.SupportsUsageInStreaming},
		{&c.RequiresReasoningContent, &o.RequiresReasoningContent},
		{&c.RequiresThinkingAsText, &o.RequiresThinkingAsText},
		{&c.AllowEmptySignature, &o.AllowEmptySignature},
		{&c.SupportsThinkingTokenBudget, &o.SupportsThinkingTokenBudget},
		{&c.SupportsEagerToolInputStreaming, &o.SupportsEagerToolInputStreaming},
		{&c.SupportsCacheControlOnTools, &o.SupportsCacheControlOnTools},
		{&c.SupportsLongCacheRetention, &o.SupportsLongCacheRetention},
		{&c.SupportsStrictMode, &o.SupportsStrictMode},
		{&c.SupportsStrictTools, &o.SupportsStrictTools},
		{&c.SupportsExplicitPromptCacheMode, &o.SupportsExplicitPromptCacheMode},
		{&c.SendSessionAffinityHeaders, &o.SendSessionAffinityHeaders},
	} {
		if *f.from != nil {
			*f.to = *f.from
		}
	}
	return c
}

func ptr[T any](v T) *T { return &v }

// setting reads an optional setting.
func setting(b *bool, otherwise bool) bool {
	if b == nil {
		return otherwise
	}
	return *b
}
