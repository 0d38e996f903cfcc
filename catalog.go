package main

// The built-in catalog: the providers rpi knows by name, each with its
// base URL, API, key variable and a few current models. docs/models.md
// says where the entries come from and how to bring them up to date.

// hostedProvider is a provider rpi knows by name.
type hostedProvider struct {
	id      string
	baseURL string
	api     string
	keyVar  string   // the environment variable its key comes from
	models  []*model // its models, with Provider, API and BaseURL filled in
}

// chat declares a catalog model: its id and name, whether it reasons and
// takes images, its context window and output limit, its price in
// dollars per million tokens (input, output, cache read, cache write) and
// the thinking levels it takes (think's notation; "" for the default).
func chat(id, name string, reasoning, images bool, window, maxTokens int, cost modelCost, levels string) *model {
	m := &model{ID: id, Name: name, Reasoning: reasoning, Input: []string{"text"}, Cost: cost,
		ContextWindow: window, MaxTokens: maxTokens, needsKey: true}
	if images {
		m.Input = append(m.Input, "image")
	}
	if levels != "" {
		m.levels = think(levels)
	}
	return m
}

// hostedProviders is the catalog, built afresh (its models are changed
// as credentials are attached).
func hostedProviders() []*hostedProvider {
	const image = true
	providers := []*hostedProvider{
		{id: "anthropic", baseURL: "https://api.anthropic.com", api: apiAnthropic, keyVar: "ANTHROPIC_API_KEY", models: []*model{
			chat("claude-sonnet-4-5", "Claude Sonnet 4.5", true, image, 200000, 64000, modelCost{3, 15, 0.3, 3.75}, ""),
			chat("claude-opus-4-1", "Claude Opus 4.1", true, image, 200000, 32000, modelCost{15, 75, 1.5, 18.75}, ""),
			chat("claude-haiku-4-5", "Claude Haiku 4.5", true, image, 200000, 64000, modelCost{1, 5, 0.1, 1.25}, ""),
		}},
		{id: "openai", baseURL: "https://api.openai.com/v1", api: apiOpenAI, keyVar: "OPENAI_API_KEY", models: []*model{
			chat("gpt-5", "GPT-5", true, image, 400000, 128000, modelCost{1.25, 10, 0.125, 0}, ""),
			chat("gpt-5-mini", "GPT-5 mini", true, image, 400000, 128000, modelCost{0.25, 2, 0.025, 0}, ""),
			chat("gpt-4.1", "GPT-4.1", false, image, 1047576, 32768, modelCost{2, 8, 0.5, 0}, ""),
			chat("gpt-4o", "GPT-4o", false, image, 128000, 16384, modelCost{2.5, 10, 1.25, 0}, ""),
			chat("o4-mini", "o4-mini", true, image, 200000, 100000, modelCost{1.1, 4.4, 0.275, 0}, ""),
		}},
	}
	for _, p := range providers {
		for _, m := range p.models {
			m.Provider, m.API, m.BaseURL = p.id, p.api, p.baseURL
		}
	}
	return providers
}
