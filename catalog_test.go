package main

// The built-in catalog and the request quirks of each host.

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// catalogModel is a built-in model as loadModels sets it up.
func catalogModel(t *testing.T, provider, id string) *model {
	t.Helper()
	setup, err := loadModels(t.TempDir(), "", "", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range setup.catalog.all() {
		if m.Provider == provider && m.ID == id {
			return m
		}
	}
	t.Fatalf("no %s/%s in the catalog", provider, id)
	return nil
}

// TestCatalog checks that every provider the issue names is built in,
// with an https base URL, an API rpi speaks, a key variable, and models
// whose numbers are filled in and whose thinking levels make sense.
func TestCatalog(t *testing.T) {
	want := []string{"anthropic", "openai", "google", "deepseek", "groq", "cerebras", "xai", "openrouter", "mistral", "together", "fireworks", "huggingface"}
	var got []string
	vars := map[string]bool{}
	for _, p := range hostedProviders {
		got = append(got, p.id)
		if !strings.HasPrefix(p.baseURL, "https://") || !slices.Contains(supportedAPIs.get(), p.api) || p.keyVar == "" || vars[p.keyVar] || len(p.models) < 2 {
			t.Errorf("provider %s: %+v", p.id, p)
		}
		vars[p.keyVar] = true
		for _, m := range p.makeModels(p.baseURL, nil, providerOverride{}) {
			if m.ContextWindow <= 0 || m.MaxTokens <= 0 || m.Cost.Input <= 0 || m.Cost.Output <= 0 || m.Name == "" {
				t.Errorf("%s/%s: %+v", p.id, m.ID, m)
			}
			for _, level := range levelOrder {
				if l, _ := m.wireLevel(level); m.Reasoning {
					if _, ok := m.takes(l); !ok {
						t.Errorf("%s/%s: level %s moves to %s, which it does not take", p.id, m.ID, level, l)
					}
				}
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("providers %q, want %q", got, want)
	}
	if doc, _ := os.ReadFile("docs/models.md"); !strings.Contains(string(doc), "**"+catalogDate+"**") {
		t.Errorf("docs/models.md does not give the catalog's date, %s", catalogDate)
	}
}

// TestHostQuirks checks what each host is sent: the field that caps the
// answer (at the model's maxTokens, within its window: Kimi K3's and
// Devstral's maxTokens are the whole window, so they get what the input
// and pi's 4096 spare tokens leave), how reasoning is asked for at a level (a level a model does not
// take moves to the nearest one it does), what is left out where a host
// refuses it, and DeepSeek's reasoning_content on replayed answers.
func TestHostQuirks(t *testing.T) {
	history := []any{
		&userMessage{Role: "user", Content: textBlocks("hi")},
		// DeepSeek's own answer: its thinking goes back to it alone.
		&assistantMessage{Role: "assistant", API: apiOpenAI, Provider: "deepseek", Model: "deepseek-v4-pro", StopReason: "stop", Content: []contentBlock{{Type: "thinking", Thinking: "Hm."}, {Type: "text", Text: "Hello."}}},
		&userMessage{Role: "user", Content: textBlocks("again")},
	}
	cases := []struct {
		provider, id, level string
		want, never         []string
	}{
		{"deepseek", "deepseek-v4-pro", "high", []string{`"max_tokens":384000`, `"thinking":{"type":"enabled"}`, `"reasoning_effort":"high"`,
			`"reasoning_content":"Hm."`, `"stream_options":{"include_usage":true}`}, []string{"max_completion_tokens"}},
		{"deepseek", "deepseek-v4-pro", "off", []string{`"thinking":{"type":"disabled"}`}, []string{"reasoning_effort"}},
		{"deepseek", "deepseek-v4-pro", "xhigh", []string{`"reasoning_effort":"max"`}, nil},
		{"openrouter", "openai/gpt-5.5", "medium", []string{`"max_completion_tokens":128000`, `"reasoning":{"effort":"medium"}`}, []string{"reasoning_effort"}},
		{"openrouter", "openai/gpt-5.5", "off", []string{`"reasoning":{"effort":"none"}`}, nil},
		{"groq", "openai/gpt-oss-120b", "low", []string{`"max_completion_tokens":65536`, `"reasoning_effort":"low"`}, []string{`"max_tokens"`}},
		{"groq", "openai/gpt-oss-120b", "off", []string{`"reasoning_effort":"low"`}, nil},
		{"groq", "qwen/qwen3.8-27b", "off", []string{`"reasoning_effort":"none"`}, nil},
		{"groq", "llama-3.3-70b-versatile", "high", []string{`"max_completion_tokens":32768`}, []string{"reasoning"}},
		{"cerebras", "gpt-oss-120b", "medium", []string{`"max_completion_tokens":40960`, `"reasoning_effort":"medium"`}, nil},
		{"together", "deepseek-ai/DeepSeek-V4-Pro-0813", "xhigh", []string{`"max_tokens":384000`, `"reasoning":{"enabled":true}`, `"reasoning_effort":"high"`}, nil},
		{"together", "deepseek-ai/DeepSeek-V4-Pro-0813", "off", []string{`"reasoning":{"enabled":false}`}, []string{"reasoning_effort"}},
		{"fireworks", "accounts/fireworks/models/kimi-k3", "high", []string{`"max_completion_tokens":1044451`, `"reasoning_effort":"high"`}, nil},
		{"huggingface", "moonshotai/Kimi-K3", "medium", []string{`"max_completion_tokens":995875`, `"reasoning_effort":"high"`}, nil},
		{"mistral", "devstral-2512", "high", []string{`"max_tokens":258019`}, []string{"stream_options", "reasoning", "thinking"}},
		{"openai", "gpt-5.1", "off", []string{`"reasoning":{"effort":"none"}`, `"max_output_tokens":128000`, `"role":"developer"`}, []string{"include", "summary"}},
		{"openai", "gpt-5", "off", []string{`"reasoning":{"effort":"minimal","summary":"auto"}`, `"include":["reasoning.encrypted_content"]`}, nil},
		{"openai", "gpt-5.5", "xhigh", []string{`"reasoning":{"effort":"xhigh","summary":"auto"}`, `"strict":false`}, nil},
		{"xai", "grok-4.3", "off", []string{`"reasoning":{"effort":"none"}`, `"include":["reasoning.encrypted_content"]`}, []string{"strict"}},
		{"google", "gemini-2.5-pro", "off", []string{`"thinkingConfig":{"thinkingBudget":128}`}, nil},
	}
	for _, c := range cases {
		m := catalogModel(t, c.provider, c.id)
		readTool := &tool{name: "read", description: "Read a file", schema: json.RawMessage(`{"type":"object"}`)}
		data, _ := json.Marshal(wireAPINamed(m.API).body(streamRequest{model: m, system: "SYS", messages: history, thinking: c.level, tools: []*tool{readTool}}))
		for _, want := range c.want {
			if !strings.Contains(string(data), want) {
				t.Errorf("%s/%s at %s: request lacks %s:\n%s", c.provider, c.id, c.level, want, data)
			}
		}
		for _, never := range c.never {
			if strings.Contains(string(data), never) {
				t.Errorf("%s/%s at %s: request has %s:\n%s", c.provider, c.id, c.level, never, data)
			}
		}
	}
}

// TestHostedProviderByVariable checks that a provider's key variable is
// all it takes: with GROQ_API_KEY set, --provider groq --model <id>
// starts with that model, get_available_models lists Groq's models (and
// no provider without a key), and an id the catalog does not list is
// taken as a Groq model with Groq's URL and key.
func TestHostedProviderByVariable(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"openai/gpt-oss-120b", "moonshotai/kimi-k2-instruct"} {
		e := newTestEnv(t)
		e.vars["GROQ_API_KEY"] = "gsk_test_key_123456"
		cwd := t.TempDir()
		pr, pw := io.Pipe()
		out := newWatchedOutput()
		done := make(chan int)
		go func() {
			done <- runRPI(t, e, []string{"rpc", "--cwd", cwd, "--provider", "groq", "--model", id}, pr, out)
		}()
		io.WriteString(pw, `{"id":"s","type":"get_state"}`+"\n"+`{"id":"l","type":"get_available_models"}`+"\n")
		pw.Close()
		if code := <-done; code != 0 {
			t.Fatalf("exit %d:\n%s", code, out.bytes())
		}
		var state, list struct {
			Data struct {
				Model  *model   `json:"model"`
				Models []*model `json:"models"`
			} `json:"data"`
		}
		for _, line := range strings.Split(string(out.bytes()), "\n") {
			switch {
			case strings.HasPrefix(line, `{"id":"s"`):
				json.Unmarshal([]byte(line), &state)
			case strings.HasPrefix(line, `{"id":"l"`):
				json.Unmarshal([]byte(line), &list)
			}
		}
		if m := state.Data.Model; m == nil || m.ID != id || m.Provider != "groq" || m.BaseURL != "https://api.groq.com/openai/v1" || m.API != apiOpenAI {
			t.Errorf("%s: state model %+v\n%s", id, m, out.bytes())
		}
		var listed []string
		for _, m := range list.Data.Models {
			if m.Provider != "groq" {
				t.Errorf("%s: listed %s/%s without a key", id, m.Provider, m.ID)
			}
			listed = append(listed, m.ID)
		}
		if !slices.Contains(listed, id) || !slices.Contains(listed, "llama-3.3-70b-versatile") {
			t.Errorf("%s: listed %q", id, listed)
		}
		if strings.Contains(string(out.bytes()), "gsk_test_key") {
			t.Errorf("the key is in the output")
		}
	}
}

// madeProviders are the built-in providers whose models c has made.
func madeProviders(c *modelCatalog) []string {
	var made []string
	for i := range c.builtin {
		if c.builtin[i].made != nil {
			made = append(made, c.builtin[i].provider.id)
		}
	}
	return made
}

// usableOf are those of models that can be used, in their order.
func usableOf(models []*model) []*model {
	return slices.DeleteFunc(slices.Clone(models), func(m *model) bool { return !m.usable() })
}

// TestCatalogMadeAtFirstUse checks that starting makes the models of the
// built-in providers the starting model may come from and of no other
// (the first line needs no more): those with a key, or with --model
// provider/id or --provider and --model that provider's. And that the
// rest of rpi then sees the whole catalog: usable and of list, in its
// order and as the same models, those of all that can be used and those
// of one provider; providers names every provider of all; and
// get_available_models lists the usable ones.
func TestCatalogMadeAtFirstUse(t *testing.T) {
	t.Parallel()
	twoKeys := map[string]string{"GROQ_API_KEY": "gsk_abcdefgh", "ANTHROPIC_API_KEY": "sk-ant-abcdefgh", fauxResponseVar: "Hi."}
	for _, c := range []struct {
		keys map[string]string
		args []string
		made []string
	}{
		{map[string]string{}, nil, nil},
		{map[string]string{"GROQ_API_KEY": "gsk_abcdefgh"}, nil, []string{"groq"}},
		{twoKeys, nil, []string{"anthropic", "groq"}},
		{twoKeys, []string{"--model", "groq/llama-3.3-70b-versatile"}, []string{"groq"}},
		{twoKeys, []string{"--provider", "groq", "--model", "an-id-groq-does-not-list:high"}, []string{"groq"}},
		{twoKeys, []string{"--provider", "anthropic"}, []string{"anthropic", "groq"}}, // settings.json's default may be groq's
	} {
		e := newTestEnv(t)
		maps.Copy(e.vars, c.keys)
		os.WriteFile(filepath.Join(e.agentDir, "models.json"), []byte(`{"providers":{"groq":{"models":[{"id":"new-model"}]},`+
			`"local":{"baseUrl":"http://localhost:1/v1","api":"openai-completions","models":[{"id":"m"}]}}}`), 0o600)
		s := startedServer(t, e, c.args...)
		catalog := s.set.catalog
		if made := madeProviders(catalog); !slices.Equal(made, c.made) {
			t.Errorf("%v %v: made the models of %q at startup, want %q", c.keys, c.args, made, c.made)
		}
		usable, groq := catalog.usable(), catalog.of("groq")
		all := catalog.all()
		var providers []string
		for _, m := range all {
			if !slices.Contains(providers, m.Provider) {
				providers = append(providers, m.Provider)
			}
		}
		if !slices.Equal(usable, usableOf(all)) || !slices.Equal(catalog.all(), all) || len(madeProviders(catalog)) != len(hostedProviders) ||
			!slices.Equal(groq, slices.DeleteFunc(slices.Clone(all), func(m *model) bool { return m.Provider != "groq" })) ||
			!slices.Equal(catalog.providers(), providers) {
			t.Errorf("%v %v: usable %v, of groq %v, providers %q, all %v", c.keys, c.args, usable, groq, catalog.providers(), all)
		}
		if want := slices.DeleteFunc(usable, func(m *model) bool { return !listedFaux(m, s.model) }); !slices.Equal(s.availableModels(), want) {
			t.Errorf("%v %v: get_available_models lists %v, want %v", c.keys, c.args, s.availableModels(), want)
		}
	}
}

// TestCatalogFirstUseConcurrent checks that first uses of the catalog at
// once (sessions and commands read it from their own goroutines) make
// each provider's models once: every use sees the same models (run with
// -race too).
func TestCatalogFirstUseConcurrent(t *testing.T) {
	t.Parallel()
	keys := map[string]string{"OPENAI_API_KEY": "sk-abcdefgh", "MISTRAL_API_KEY": "mi-abcdefgh"}
	setup, err := loadModels(t.TempDir(), "", "", func(k string) string { return keys[k] })
	if err != nil {
		t.Fatal(err)
	}
	lists := make([][]*model, 16)
	var wg sync.WaitGroup
	for i := range lists {
		wg.Go(func() {
			if i%2 == 0 {
				lists[i] = setup.catalog.all()
			} else {
				lists[i] = setup.catalog.usable()
			}
		})
	}
	wg.Wait()
	all := setup.catalog.all()
	for i, list := range lists {
		if want := map[bool][]*model{true: all, false: usableOf(all)}[i%2 == 0]; !slices.Equal(list, want) {
			t.Errorf("use %d saw %v, want %v", i, list, want)
		}
	}
}

// TestMistralContentChunks checks that a Chat Completions delta whose
// content is a list of chunks (Mistral's thinking and text) streams as
// thinking and text.
func TestMistralContentChunks(t *testing.T) {
	sse := `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":[{"type":"thinking","thinking":[{"type":"text","text":"Let me see."}]}]},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":[{"type":"text","text":"Hi"}]},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}` + "\n\n" +
		"data: [DONE]\n\n"
	msg, _, err := readStream(t, apiOpenAI, sse)
	if err != nil || len(msg.Content) != 2 || msg.Content[0].Thinking != "Let me see." || msg.Content[1].Text != "Hi there" || msg.StopReason != "stop" {
		t.Errorf("err %v, message %+v", err, msg)
	}
}

// TestModelsJSONAddsToBuiltin checks that a models.json model under a
// built-in provider's name takes that provider's URL, API and key.
func TestModelsJSONAddsToBuiltin(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "models.json"), []byte(`{"providers":{"groq":{"models":[{"id":"new-model","contextWindow":8192}]}}}`), 0o600)
	setup, err := loadModels(dir, "", "", func(k string) string { return map[string]string{"GROQ_API_KEY": "gsk_abcdefgh"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	m := setup.catalog.all()[0]
	key, _ := m.cred.resolve(t.Context(), nil, setup.secrets)
	if m.ID != "new-model" || m.BaseURL != "https://api.groq.com/openai/v1" || m.API != apiOpenAI || key != "gsk_abcdefgh" || !m.usable() ||
		m.compat.MaxTokensField != "max_completion_tokens" || len(setup.warnings) > 0 {
		t.Errorf("model %+v, key %q, warnings %q", m, key, setup.warnings)
	}
}

// TestModelsJSONTypeErrors checks that a models.json value of the wrong
// type is reported by its path in the file and the type it must have, in
// words, wherever it is: at the top, in a map, in an array, after
// whitespace, under a key that needs quoting, deep in compat.
func TestModelsJSONTypeErrors(t *testing.T) {
	cases := []struct{ file, want string }{
		{`[]`, `line 1, column 1: expected an object, got an array`},
		{`{"providers": []}`, `line 1, column 15: providers: expected an object of objects, got an array`},
		{`{"providers":{"a":"x"}}`, `line 1, column 21: providers.a: expected an object, got a string`},
		{`{"providers":{"a":{"models":[{"id":"m"},{"id":"n","contextWindow":"32k"}]}}}`,
			`line 1, column 71: providers.a.models[1].contextWindow: expected a whole number, got a string`},
		{"{\"providers\":{\"a\":{\n  \"models\": [ {\"id\": \"m\",\n   \"maxTokens\" :  4096.5 } ]}}}",
			`line 3, column 24: providers.a.models[0].maxTokens: expected a whole number, got 4096.5`},
		{`{"providers":{"my.host":{"headers":{"X-Key":7}}}}`, `line 1, column 45: providers["my.host"].headers.X-Key: expected a string, got 7`},
		{`{"providers":{"a":{"models":[{"id":"m","input":"text"}]}}}`, `line 1, column 53: providers.a.models[0].input: expected an array of strings, got a string`},
		{`{"providers":{"a":{"models":[{"id":"m","reasoning":1}]}}}`, `line 1, column 52: providers.a.models[0].reasoning: expected true or false, got 1`},
		{`{"providers":{"a":{"models":[{"id":"m","cost":{"input":"3"}}]}}}`, `line 1, column 58: providers.a.models[0].cost.input: expected a number, got a string`},
		{`{"providers":{"a":{"models":[{"id":false}]}}}`, `line 1, column 40: providers.a.models[0].id: expected a string, got false`},
	}
	for _, c := range cases {
		dir := t.TempDir()
		path := filepath.Join(dir, "models.json")
		os.WriteFile(path, []byte(c.file), 0o600)
		_, err := loadModels(dir, "", "", func(string) string { return "" })
		if want := "Invalid " + path + ": " + c.want; err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", c.file, err, want)
		}
	}
}

// TestKeysOfUnmadeProviders: a provider whose models startup never made
// (here: mistral's, with --model groq/…) still has its key redacted from
// the first redaction on, and its variable kept from children; a key in
// auth.json of such a provider too. No bug: this pins that startup
// resolves every provider's credential although it makes few models.
func TestKeysOfUnmadeProviders(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	maps.Copy(e.vars, map[string]string{"GROQ_API_KEY": "gsk_abcdefgh", "MISTRAL_API_KEY": "mistral-key-from-env"})
	os.WriteFile(filepath.Join(e.agentDir, "auth.json"), []byte(`{"cerebras":{"type":"api_key","key":"cerebras-key-in-auth"}}`), 0o600)
	s := startedServer(t, e, "--model", "groq/llama-3.3-70b-versatile")
	if made := madeProviders(s.set.catalog); !slices.Equal(made, []string{"groq"}) {
		t.Fatalf("made the models of %q at startup, want groq's alone", made)
	}
	for _, key := range []string{"gsk_abcdefgh", "mistral-key-from-env", "cerebras-key-in-auth"} {
		if got := s.set.secrets.redact("a " + key + " b"); got != "a [redacted] b" {
			t.Errorf("redacted %q", got)
		}
	}
	for _, kv := range s.set.childEnv {
		if strings.HasPrefix(kv, "MISTRAL_API_KEY=") || strings.HasPrefix(kv, "GROQ_API_KEY=") {
			t.Errorf("children get %s", kv)
		}
	}
	if made := madeProviders(s.set.catalog); !slices.Equal(made, []string{"groq"}) {
		t.Errorf("redaction made the models of %q", made)
	}
}

// startedServer is an rpc server started with args after "rpc --cwd DIR
// --no-session" in e, shut down when t ends; it serves nothing.
func startedServer(t *testing.T, e *testEnv, args ...string) *rpcServer {
	t.Helper()
	return serverOf(t, e, append([]string{"--cwd", t.TempDir(), "--no-session"}, args...)...)
}

// serverOf is an rpc server started with args after "rpc" in e, shut
// down when t ends; it serves nothing.
func serverOf(t *testing.T, e *testEnv, args ...string) *rpcServer {
	t.Helper()
	cfg, _, err := parseArgs(append([]string{"rpc"}, args...), e.env())
	if err != nil {
		t.Fatal(err)
	}
	s, err := newServer(cfg, e.env(), newConnection(nil, io.Discard, io.Discard), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.shutdown(false) })
	return s
}

// TestModelsJSONReasoningCompat: models.json's compat settings for how
// thinking goes back, requiresThinkingAsText and allowEmptySignature, and
// pi's supportsEagerToolInputStreaming, supportsCacheControlOnTools and
// supportsLongCacheRetention, reach the model from its provider's compat and from its own (the
// model's winning), and one of the wrong type is reported by its path.
func TestModelsJSONReasoningCompat(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "models.json"), []byte(`{"providers":{"a":{"baseUrl":"http://127.0.0.1:1","api":"openai-completions",`+
		`"compat":{"requiresThinkingAsText":true,"allowEmptySignature":true,"supportsEagerToolInputStreaming":false,`+
		`"supportsCacheControlOnTools":false,"supportsLongCacheRetention":false},"models":[{"id":"m1"},`+
		`{"id":"m2","compat":{"requiresThinkingAsText":false,"allowEmptySignature":false,"supportsEagerToolInputStreaming":true,`+
		`"supportsCacheControlOnTools":true,"supportsLongCacheRetention":true}}]}}}`), 0o600)
	setup, err := loadModels(dir, "", "", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, m := range setup.catalog.all() {
		if m.Provider != "a" {
			continue
		}
		seen++
		want := m.ID == "m1"
		if setting(m.compat.RequiresThinkingAsText, !want) != want || setting(m.compat.AllowEmptySignature, !want) != want {
			t.Errorf("%s: requiresThinkingAsText %v, allowEmptySignature %v, want %v", m.ID,
				setting(m.compat.RequiresThinkingAsText, !want), setting(m.compat.AllowEmptySignature, !want), want)
		}
		for name, b := range map[string]*bool{"supportsEagerToolInputStreaming": m.compat.SupportsEagerToolInputStreaming,
			"supportsCacheControlOnTools": m.compat.SupportsCacheControlOnTools, "supportsLongCacheRetention": m.compat.SupportsLongCacheRetention} {
			if setting(b, want) != !want {
				t.Errorf("%s: %s %v, want %v", m.ID, name, setting(b, want), !want)
			}
		}
	}
	if seen != 2 {
		t.Errorf("%d models of provider a, want 2", seen)
	}
	path := filepath.Join(dir, "models.json")
	os.WriteFile(path, []byte(`{"providers":{"a":{"models":[{"id":"m","compat":{"allowEmptySignature":"yes"}}]}}}`), 0o600)
	_, err = loadModels(dir, "", "", func(string) string { return "" })
	if want := "Invalid " + path + ": line 1, column 76: providers.a.models[0].compat.allowEmptySignature: expected true or false, got a string"; err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// TestModelsJSONChangesBuiltinModels: a models.json entry named like a
// built-in provider, without models, changes that provider's own models
// as in pi: its baseUrl (trimmed like a listed model's, and before
// OPENAI_BASE_URL), its compat over what rpi detects, its headers (a
// variable's value, a secret), and its apiKey (a secret). The models are
// still made at their first use, and a provider without an entry keeps
// its own; a model adopted for --provider takes the entry's headers too.
func TestModelsJSONChangesBuiltinModels(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "models.json"), []byte(`{"providers":{`+
		`"groq":{"baseUrl":"http://proxy.example/groq/v1/","apiKey":"$MY_GROQ_KEY","headers":{"X-Proxy-Auth":"$PROXY_TOKEN","X-Title":"rpi"},`+
		`"compat":{"maxTokensField":"max_tokens","supportsUsageInStreaming":false}},`+
		`"openai":{"baseUrl":"http://proxy.example/openai/v1"}}}`), 0o600)
	env := map[string]string{"MY_GROQ_KEY": "gsk-from-models-json", "PROXY_TOKEN": "proxy-token-0123456789",
		"GROQ_API_KEY": "gsk-from-variable", "OPENAI_BASE_URL": "http://elsewhere.example/v1", "ANTHROPIC_API_KEY": "sk-ant-abcdefgh"}
	setup, err := loadModels(dir, "", "", func(k string) string { return env[k] })
	if err != nil || len(setup.warnings) > 0 {
		t.Fatal(err, setup.warnings)
	}
	if made := madeProviders(setup.catalog); made != nil {
		t.Errorf("loading made the models of %q", made)
	}
	groq := setup.catalog.of("groq")
	if len(groq) != len(hostedProviderNamed("groq").models) {
		t.Fatalf("groq has %d models, want the catalog's", len(groq))
	}
	for _, m := range groq {
		key, _ := m.cred.resolve(t.Context(), nil, setup.secrets)
		if !m.builtin || m.BaseURL != "http://proxy.example/groq/v1" || key != "gsk-from-models-json" ||
			!maps.Equal(m.headers, map[string]string{"X-Proxy-Auth": "proxy-token-0123456789", "X-Title": "rpi"}) ||
			m.compat.MaxTokensField != "max_tokens" || setting(m.compat.SupportsUsageInStreaming, true) {
			t.Errorf("groq/%s: base URL %q, key %q, headers %q, compat %+v", m.ID, m.BaseURL, key, m.headers, m.compat)
		}
	}
	for _, secret := range []string{"gsk-from-models-json", "proxy-token-0123456789"} {
		if got := setup.secrets.redact("a " + secret + " b"); got != "a [redacted] b" {
			t.Errorf("%q is not redacted: %q", secret, got)
		}
	}
	if m := setup.catalog.of("openai")[0]; m.BaseURL != "http://proxy.example/openai/v1" || len(m.headers) > 0 ||
		m.compat.MaxTokensField != "max_completion_tokens" {
		t.Errorf("openai/%s: base URL %q, headers %q, compat %+v", m.ID, m.BaseURL, m.headers, m.compat)
	}
	if m := setup.catalog.of("anthropic")[0]; m.BaseURL != "https://api.anthropic.com" || m.headers != nil {
		t.Errorf("anthropic/%s, without an entry: base URL %q, headers %q", m.ID, m.BaseURL, m.headers)
	}
	if m := setup.catalog.adopt("groq", "an-id-groq-does-not-list"); m == nil || m.BaseURL != "http://proxy.example/groq/v1" ||
		m.headers["X-Proxy-Auth"] != "proxy-token-0123456789" || m.compat.MaxTokensField != "max_tokens" {
		t.Errorf("adopted %+v", m)
	}
}

// TestBuiltinModelThroughProxy: a built-in provider's model, moved by
// models.json to a proxy (here the fake server), sends its request there
// with the entry's header and the provider's key, and the entry's compat
// changes the request's body (max_tokens where groq takes
// max_completion_tokens).
func TestBuiltinModelThroughProxy(t *testing.T) {
	endToEnd(t)
	body, h := groqRequest(t, `"headers":{"X-Proxy-Auth":"PROXY_TOKEN"},"compat":{"maxTokensField":"max_tokens"}`,
		map[string]string{"PROXY_TOKEN": "proxy-token-0123456789"})
	if body["model"] != "llama-3.3-70b-versatile" || body["max_tokens"] == nil || body["max_completion_tokens"] != nil ||
		h.Get("X-Proxy-Auth") != "proxy-token-0123456789" || h.Get("Authorization") != "Bearer gsk-abcdefgh" {
		t.Errorf("request %v, headers %v", body, h)
	}
}

// groqRequest is the request groq/llama-3.3-70b-versatile sends for a
// prompt, its models.json entry moving it to a fake server and holding
// entry besides; vars are set too.
func groqRequest(t *testing.T, entry string, vars map[string]string) (map[string]any, http.Header) {
	t.Helper()
	e := newTestEnv(t)
	fm := startFakeModel(t, apiOpenAI, `{"text":["Hi"]}`, e.agentDir)
	os.WriteFile(filepath.Join(e.agentDir, "models.json"), []byte(`{"providers":{"groq":{"baseUrl":"`+fm.server.URL+`/v1",`+entry+`}}}`), 0o600)
	e.vars["GROQ_API_KEY"] = "gsk-abcdefgh"
	maps.Copy(e.vars, vars)
	return promptRequest(t, e, fm, "--model", "groq/llama-3.3-70b-versatile")
}

// promptRequest is the one request fm gets for a prompt to an rpc
// session of e started with args besides.
func promptRequest(t *testing.T, e *testEnv, fm *fakeModel, args ...string) (map[string]any, http.Header) {
	t.Helper()
	ps := startSessionIn(t, e, append([]string{"rpc", "--cwd", t.TempDir(), "--no-session"}, args...))
	ps.send(`{"id":"p","type":"prompt","message":"hi"}`)
	ps.waitFor(`"type":"agent_settled"`)
	ps.close()
	fm.mu.Lock()
	defer fm.mu.Unlock()
	if len(fm.requests) != 1 {
		t.Fatalf("the server was asked %d times:\n%.3000s", len(fm.requests), ps.out.bytes())
	}
	return fm.requests[0], fm.headers[0]
}

// TestListedModelHeaders: a model models.json lists takes headers of its
// own, resolved as the provider's are (a set variable's value, redacted),
// over the provider's and its override's, as in pi; they were ignored.
func TestListedModelHeaders(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "models.json"), []byte(`{"providers":{"mine":{"baseUrl":"http://localhost:1/v1","api":"openai-completions",`+
		`"headers":{"X-A":"a","X-B":"b","X-C":"c"},"modelOverrides":{"m":{"headers":{"X-B":"B2","X-C":"C2"}}},`+
		`"models":[{"id":"m","headers":{"X-C":"$MODEL_TOKEN","X-D":"d"}},{"id":"other"}]}}}`), 0o600)
	env := map[string]string{"MODEL_TOKEN": "Bearer model-token-0123456789"}
	setup, err := loadModels(dir, "", "", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	models := setup.catalog.of("mine")
	if len(models) != 2 {
		t.Fatalf("%d models", len(models))
	}
	if want := map[string]string{"X-A": "a", "X-B": "B2", "X-C": "Bearer model-token-0123456789", "X-D": "d"}; !maps.Equal(models[0].headers, want) {
		t.Errorf("m's headers %q, want %q", models[0].headers, want)
	}
	if want := map[string]string{"X-A": "a", "X-B": "b", "X-C": "c"}; !maps.Equal(models[1].headers, want) {
		t.Errorf("other's headers %q, want the provider's %q", models[1].headers, want)
	}
	if got := setup.secrets.redact("sent model-token-0123456789"); strings.Contains(got, "model-token") {
		t.Errorf("the model's header token is not redacted: %q", got)
	}
}

// TestAuthHeader: a models.json provider's authHeader (pi's) sends the
// key also as "Authorization: Bearer", over a header of that name, for
// the models it lists and for a built-in provider's own; the API's own
// way of sending it stays. It was ignored: a proxy in front of Anthropic
// that wants a bearer token refused every request.
func TestAuthHeader(t *testing.T) {
	endToEnd(t)
	for _, c := range []struct{ name, model, entry string }{
		{"listed", "proxy/m", `"proxy":{"api":"anthropic-messages","apiKey":"PROXY_KEY","authHeader":true,` +
			`"headers":{"Authorization":"Basic eA=="},"models":[{"id":"m"}]}`},
		{"built-in", "anthropic/claude-sonnet-4-5", `"anthropic":{"authHeader":true}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newTestEnv(t)
			fm := startFakeModel(t, apiAnthropic, `{"text":["Hi"]}`, e.agentDir)
			entry := strings.Replace(c.entry, "{", `{"baseUrl":"`+fm.server.URL+`",`, 1)
			os.WriteFile(filepath.Join(e.agentDir, "models.json"), []byte(`{"providers":{`+entry+`}}`), 0o600)
			e.vars["PROXY_KEY"], e.vars["ANTHROPIC_API_KEY"] = "proxy-key-0123456789", "proxy-key-0123456789"
			if _, h := promptRequest(t, e, fm, "--model", c.model); h.Get("Authorization") != "Bearer proxy-key-0123456789" || h.Get("X-Api-Key") != "proxy-key-0123456789" {
				t.Errorf("Authorization %q, x-api-key %q", h.Get("Authorization"), h.Get("X-Api-Key"))
			}
		})
	}
}

// TestModelsJSONReplacesBuiltinModel: a model models.json lists under a
// built-in provider with the id of one of its catalog models replaces
// that model, as in pi (an entry's model of the same id replaces the
// existing one); the provider's other models stay, and one of a new id is
// added. Both were listed, the id twice.
func TestModelsJSONReplacesBuiltinModel(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "models.json"), []byte(`{"providers":{"groq":{"models":[`+
		`{"id":"llama-3.3-70b-versatile","name":"Llama (mine)","contextWindow":8192},{"id":"new-model"}]}}}`), 0o600)
	setup, err := loadModels(dir, "", "", func(k string) string { return map[string]string{"GROQ_API_KEY": "gsk_abcdefgh"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range setup.catalog.of("groq") {
		ids = append(ids, m.ID)
		if m.ID == "llama-3.3-70b-versatile" && (m.builtin || m.Name != "Llama (mine)" || m.ContextWindow != 8192) {
			t.Errorf("the listed model is %+v", m)
		}
	}
	want := []string{"llama-3.3-70b-versatile", "new-model"}
	for _, e := range hostedProviderNamed("groq").models {
		if e.id != "llama-3.3-70b-versatile" {
			want = append(want, e.id)
		}
	}
	if !slices.Equal(ids, want) {
		t.Errorf("groq's models %q, want %q", ids, want)
	}
}

// TestModelOverridesInAvailableModels: a models.json provider's
// modelOverrides change the fields they name of its model of that id, a
// built-in one (cost merged field by field) or one it lists, and
// get_available_models answers with them (promptCache too); the provider's other models
// stay as they were, and an id it has no model of changes nothing.
func TestModelOverridesInAvailableModels(t *testing.T) {
	e := newTestEnv(t)
	e.vars["GROQ_API_KEY"] = "gsk_test_key_123456"
	os.WriteFile(filepath.Join(e.agentDir, "models.json"), []byte(`{"providers":{`+
		`"groq":{"modelOverrides":{"llama-3.3-70b-versatile":{"name":"Llama (mine)","contextWindow":65536,"maxTokens":4096,`+
		`"reasoning":true,"input":["text","image"],"cost":{"input":1.5,"cacheRead":0.25},`+
		`"inputLimits":{"images":{"maxCount":4}},"promptCache":{"short":300},"samplingParams":{"temperature":0.2},`+
		`"samplingParamsByThinkingLevel":{"high":{"top_p":0.9}}},"no-such-model":{"name":"Never"}}},`+
		`"local":{"baseUrl":"http://127.0.0.1:9/v1","api":"openai-completions","models":[{"id":"m","contextWindow":1000}],`+
		`"modelOverrides":{"m":{"maxTokens":100}}}}}`), 0o600)
	out := newWatchedOutput()
	if code := runRPI(t, e, []string{"rpc", "--cwd", t.TempDir(), "--no-session"},
		strings.NewReader(`{"id":"l","type":"get_available_models"}`+"\n"), out); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out.bytes())
	}
	var list struct {
		Data struct {
			Models []*model `json:"models"`
		} `json:"data"`
	}
	for _, line := range strings.Split(string(out.bytes()), "\n") {
		if strings.HasPrefix(line, `{"id":"l"`) {
			json.Unmarshal([]byte(line), &list)
		} else if strings.Contains(line, "warning") {
			t.Errorf("a warning: %s", line)
		}
	}
	got := map[string]*model{}
	for _, m := range list.Data.Models {
		got[m.Provider+"/"+m.ID] = m
	}
	if m := got["groq/llama-3.3-70b-versatile"]; m == nil || m.Name != "Llama (mine)" || m.ContextWindow != 65536 || m.MaxTokens != 4096 ||
		!m.Reasoning || !slices.Equal(m.Input, []string{"text", "image"}) || m.Cost != (modelCost{1.5, 0.79, 0.25, 0}) ||
		m.PromptCache == nil || ptrOr(m.PromptCache.Short, 0) != 300 || m.PromptCache.Long != nil {
		t.Errorf("the overridden model is %+v", m)
	}
	for _, c := range hostedProviderNamed("groq").models {
		if m := got["groq/"+c.id]; c.id != "llama-3.3-70b-versatile" && (m == nil || m.Name != c.name ||
			m.ContextWindow != c.window || m.MaxTokens != c.maxTokens || m.Reasoning != c.reasoning || m.Cost != c.cost) {
			t.Errorf("groq/%s, not overridden, is %+v", c.id, m)
		}
	}
	if m := got["local/m"]; m == nil || m.MaxTokens != 100 || m.ContextWindow != 1000 {
		t.Errorf("the listed model is %+v", m)
	}
	if got["groq/no-such-model"] != nil || strings.Contains(string(out.bytes()), "Never") {
		t.Errorf("an override of an id groq has no model of made one:\n%s", out.bytes())
	}
}

// TestModelOverridesMerge: an override's thinkingLevelMap merges with
// the model's (null takes a level away, a name adds one), leaving the map
// other built-in models share as it was; its headers go over the
// provider's entry's and are redacted; its compat goes over the
// provider's; a name empty or a size not above 0 is a warning and
// changes nothing; and loading makes no built-in provider's models.
func TestModelOverridesMerge(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "models.json"), []byte(`{"providers":{"groq":{"headers":{"X-A":"a","X-B":"b"},`+
		`"compat":{"maxTokensField":"max_tokens"},"modelOverrides":{`+
		`"openai/gpt-oss-120b":{"thinkingLevelMap":{"off":"none","high":null,"xhigh":"xhigh"},"headers":{"X-B":"B2","X-C":"$OVERRIDE_TOKEN"},`+
		`"compat":{"supportsUsageInStreaming":false}},`+
		`"llama-3.1-8b-instant":{"name":"","contextWindow":0,"maxTokens":-1}}}}}`), 0o600)
	env := map[string]string{"GROQ_API_KEY": "gsk_abcdefgh", "CEREBRAS_API_KEY": "csk-abcdefgh", "OVERRIDE_TOKEN": "override-token-0123456789"}
	setup, err := loadModels(dir, "", "", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	wantWarnings := []string{
		dir + `/models.json: provider groq: modelOverrides llama-3.1-8b-instant: ignored "name": it is empty`,
		dir + `/models.json: provider groq: modelOverrides llama-3.1-8b-instant: ignored "contextWindow": 0 is not above 0`,
		dir + `/models.json: provider groq: modelOverrides llama-3.1-8b-instant: ignored "maxTokens": -1 is not above 0`,
	}
	if !slices.Equal(setup.warnings, wantWarnings) {
		t.Errorf("warnings %q", setup.warnings)
	}
	if made := madeProviders(setup.catalog); made != nil {
		t.Errorf("loading made the models of %q", made)
	}
	groq := map[string]*model{}
	for _, m := range setup.catalog.of("groq") {
		groq[m.ID] = m
	}
	m := groq["openai/gpt-oss-120b"]
	if levels := availableLevels(m); !slices.Equal(levels, []string{"off", "low", "medium", "xhigh"}) {
		t.Errorf("levels %q", levels)
	}
	if level, sent := m.wireLevel("off"); level != "off" || sent != "none" {
		t.Errorf("off is sent as %q (%s)", sent, level)
	}
	if levels := availableLevels(setup.catalog.of("cerebras")[0]); !slices.Equal(levels, []string{"low", "medium", "high"}) {
		t.Errorf("cerebras/gpt-oss-120b, which shares the map, takes %q", levels)
	}
	if !maps.Equal(m.headers, map[string]string{"X-A": "a", "X-B": "B2", "X-C": "override-token-0123456789"}) ||
		m.compat.MaxTokensField != "max_tokens" || setting(m.compat.SupportsUsageInStreaming, true) {
		t.Errorf("headers %q, compat %+v", m.headers, m.compat)
	}
	if got := setup.secrets.redact("a override-token-0123456789 b"); got != "a [redacted] b" {
		t.Errorf("the override's header is not redacted: %q", got)
	}
	other := groq["llama-3.3-70b-versatile"]
	if !maps.Equal(other.headers, map[string]string{"X-A": "a", "X-B": "b"}) || !setting(other.compat.SupportsUsageInStreaming, true) {
		t.Errorf("another model: headers %q, compat %+v", other.headers, other.compat)
	}
	if m := groq["llama-3.1-8b-instant"]; m.Name != "Llama 3.1 8B" || m.ContextWindow != 131072 || m.MaxTokens != 131072 {
		t.Errorf("the bad override changed %+v", m)
	}
}

// TestModelOverrideOfWrongType: an override's value of the wrong type
// stops startup as any other models.json value of the wrong type does,
// naming where it is.
func TestModelOverrideOfWrongType(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "models.json"), []byte(`{"providers":{"groq":{"modelOverrides":{"llama-3.3-70b-versatile":{"samplingParams":[1]}}}}}`), 0o600)
	_, err := loadModels(dir, "", "", func(string) string { return "" })
	want := "Invalid " + dir + `/models.json: line 1, column 85: providers.groq.modelOverrides["llama-3.3-70b-versatile"].samplingParams: expected an object, got an array`
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// TestModelOverrideCompatInRequest: an override's compat reaches the
// request its model sends (max_tokens where groq takes
// max_completion_tokens), and its headers too.
func TestModelOverrideCompatInRequest(t *testing.T) {
	endToEnd(t)
	body, h := groqRequest(t, `"modelOverrides":{"llama-3.3-70b-versatile":{"compat":{"maxTokensField":"max_tokens"},"headers":{"X-Override":"on"}}}`, nil)
	if body["model"] != "llama-3.3-70b-versatile" || body["max_tokens"] == nil || body["max_completion_tokens"] != nil || h.Get("X-Override") != "on" {
		t.Errorf("request %v, headers %v", body, h)
	}
}

// TestSamplingParamsInRequest: a listed model's samplingParams, and those
// of samplingParamsByThinkingLevel for the level the request is sent at
// (high here) over them, go into the body of both OpenAI APIs last, over
// a field rpi sets itself (the output limit), as in pi; its
// modelOverrides entry merges over them (the level's field by field).
// They were ignored.
func TestSamplingParamsInRequest(t *testing.T) {
	endToEnd(t)
	for _, c := range []struct{ api, limit string }{{apiOpenAI, "max_tokens"}, {apiResponses, "max_output_tokens"}} {
		t.Run(c.api, func(t *testing.T) {
			e := newTestEnv(t)
			fm := startFakeModel(t, c.api, `{"text":["Hi"]}`, e.agentDir)
			os.WriteFile(filepath.Join(e.agentDir, "models.json"), []byte(`{"providers":{"fake":{"baseUrl":"`+fm.server.URL+`/v1","api":"`+c.api+`",`+
				`"models":[{"id":"fake-model","reasoning":true,"samplingParams":{"temperature":0.2,"top_p":0.9,"`+c.limit+`":77},`+
				`"samplingParamsByThinkingLevel":{"high":{"top_p":0.5},"low":{"temperature":1}}}],`+
				`"modelOverrides":{"fake-model":{"samplingParams":{"seed":7},"samplingParamsByThinkingLevel":{"high":{"top_k":40}}}}}}}`), 0o600)
			body, _ := promptRequest(t, e, fm, "--model", "fake/fake-model", "--thinking", "high")
			want := map[string]any{"temperature": 0.2, "top_p": 0.5, c.limit: 77.0, "seed": 7.0, "top_k": 40.0}
			for k, v := range want {
				if body[k] != v {
					t.Errorf("%s is %v, want %v; request %v", k, body[k], v, body)
				}
			}
		})
	}
}

// TestSamplingParamsRaiseTheAnswerLimit: samplingParams that ask for more
// tokens than the model's maxTokens (max_tokens or max_output_tokens, by
// level too) raise what rpi keeps of one answer with them: the server
// answers what it was asked, and rpi cut that as a server sending more
// than asked (here 2003 bytes against 10 tokens' 320).
func TestSamplingParamsRaiseTheAnswerLimit(t *testing.T) {
	endToEnd(t)
	for _, c := range []struct{ api, limit, params string }{
		{apiOpenAI, "max_tokens", `"samplingParams":{"max_tokens":1000}`},
		{apiResponses, "max_output_tokens", `"samplingParams":{"max_output_tokens":5000},"samplingParamsByThinkingLevel":{"off":{"max_output_tokens":1000}}`},
	} {
		t.Run(c.api, func(t *testing.T) {
			e := newTestEnv(t)
			long := strings.Repeat("word ", 400) + "end"
			fm := startFakeModel(t, c.api, `{"text":["`+long+`"]}`, e.agentDir)
			os.WriteFile(filepath.Join(e.agentDir, "models.json"), []byte(`{"providers":{"fake":{"baseUrl":"`+fm.server.URL+`/v1","api":"`+c.api+`",`+
				`"models":[{"id":"fake-model","maxTokens":10,`+c.params+`}]}}}`), 0o600)
			ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir(), "--no-session", "--model", "fake/fake-model"})
			ps.send(`{"id":"p","type":"prompt","message":"hi"}`)
			ps.waitFor(`"type":"agent_settled"`)
			ps.send(`{"id":"t","type":"get_last_assistant_text"}`)
			ps.waitFor(`"id":"t"`)
			for _, rec := range ps.close() {
				if rec["id"] == "t" {
					if text, _ := rec["data"].(map[string]any)["text"].(string); text != long {
						t.Errorf("the answer kept is %d bytes, want %d:\n%.2000s", len(text), len(long), ps.out.bytes())
					}
				}
			}
			if body := fm.lastRequest(); body[c.limit] != 1000.0 {
				t.Errorf("%s is %v, want 1000", c.limit, body[c.limit])
			}
		})
	}
}

// TestModelOverrideSamplingParamsInRequest: a built-in model's
// modelOverrides entry gives it samplingParams, and those of the level
// off (the model does not think) go over them.
func TestModelOverrideSamplingParamsInRequest(t *testing.T) {
	endToEnd(t)
	body, _ := groqRequest(t, `"modelOverrides":{"llama-3.3-70b-versatile":{"samplingParams":{"temperature":0.2,"top_p":0.9},`+
		`"samplingParamsByThinkingLevel":{"off":{"top_p":0.3},"high":{"temperature":1}}}}`, nil)
	if body["temperature"] != 0.2 || body["top_p"] != 0.3 {
		t.Errorf("request %v", body)
	}
}

// TestSamplingParamsOfWrongType: a listed model's samplingParams of a
// level that is not an object stops startup, naming where it is.
func TestSamplingParamsOfWrongType(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "models.json"), []byte(`{"providers":{"x":{"models":[{"id":"m","samplingParamsByThinkingLevel":{"high":3}}]}}}`), 0o600)
	_, err := loadModels(dir, "", "", func(string) string { return "" })
	want := "Invalid " + dir + `/models.json: line 1, column 80: providers.x.models[0].samplingParamsByThinkingLevel.high: expected an object, got 3`
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// TestModelsJSONOpenAIModelsTakeOpenAIBaseURL: a model models.json lists
// under openai without a baseUrl (the entry giving none either) goes
// where openai's other models go, OPENAI_BASE_URL when it is set, as one
// replacing a built-in model of that id does; before, they went to
// api.openai.com with the key meant for the address OPENAI_BASE_URL
// names. A baseUrl of the entry's or the model's still goes first.
func TestModelsJSONOpenAIModelsTakeOpenAIBaseURL(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "models.json"), []byte(`{"providers":{"openai":{"models":[`+
		`{"id":"gpt-4o","contextWindow":8192},{"id":"my-new"},{"id":"own","baseUrl":"http://own.example/v1"}]}}}`), 0o600)
	env := map[string]string{"OPENAI_API_KEY": "sk-proxy-key-0123456789", "OPENAI_BASE_URL": "http://proxy.example/v1/"}
	setup, err := loadModels(dir, "", "", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range setup.catalog.of("openai") {
		want := "http://proxy.example/v1"
		if m.ID == "own" {
			want = "http://own.example/v1"
		}
		if m.BaseURL != want {
			t.Errorf("openai/%s goes to %q; want %q", m.ID, m.BaseURL, want)
		}
	}
}

// TestAdoptedModelTakesNoModelOverride: a model adopted for --provider
// (an id the catalog does not list) takes the provider's settings, the
// models.json entry's headers and compat among them, but not what
// modelOverrides give one of the provider's models: before, it copied the
// first built-in model's, that model's own headers (a value of a
// variable) and compat with them.
func TestAdoptedModelTakesNoModelOverride(t *testing.T) {
	dir := t.TempDir()
	first := hostedProviderNamed("groq").models[0].id
	os.WriteFile(filepath.Join(dir, "models.json"), []byte(`{"providers":{"groq":{"headers":{"X-Entry":"entry"},`+
		`"modelOverrides":{"`+first+`":{"headers":{"X-Only-That-Model":"ROUTE_TOKEN"},"compat":{"maxTokensField":"max_tokens"}}}}}}`), 0o600)
	env := map[string]string{"GROQ_API_KEY": "gsk-abcdefgh", "ROUTE_TOKEN": "route-token-0123456789"}
	setup, err := loadModels(dir, "", "", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := chooseModel(setup.catalog, "groq", "an-id-groq-does-not-list", "", "")
	if err != nil {
		t.Fatal(err)
	}
	want := detectCompat("groq", m.BaseURL)
	if !maps.Equal(m.headers, map[string]string{"X-Entry": "entry"}) || m.compat.MaxTokensField != want.MaxTokensField {
		t.Errorf("the adopted model has headers %q, compat %+v; want the entry's headers and compat %+v", m.headers, m.compat, want)
	}
}
