package main

// Credentials: pi's auth.json (literal, $VARIABLE and !command keys,
// OAuth entries), the order rpi picks a provider's key in, and keys kept
// out of every output and every child.

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// authSession is an in-process rpi with a fake model (provider "fake",
// which has no key variable of its own) and the given auth.json.
func authSession(t *testing.T, authJSON, script string, vars map[string]string) (*processSession, *fakeModel, *testEnv, string) {
	e, cwd := newTestEnv(t), t.TempDir()
	fm := startFakeModel(t, apiOpenAI, script, e.agentDir)
	if authJSON != "" {
		os.WriteFile(filepath.Join(e.agentDir, "auth.json"), []byte(authJSON), 0o600)
	}
	for k, v := range vars {
		e.vars[k] = v
	}
	return startSessionIn(t, e, []string{"rpc", "--cwd", cwd}), fm, e, cwd
}

// lastAuthorization is the Authorization header of the latest request.
func (fm *fakeModel) lastAuthorization() string {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	if len(fm.headers) == 0 {
		return ""
	}
	return fm.headers[len(fm.headers)-1].Get("Authorization")
}

// TestAuthJSONKeys checks that each form of auth.json key reaches the
// server: a literal, a $VARIABLE, and a !command, which runs once (two
// prompts, one run) without the provider keys in its environment; and
// that a child never sees a variable a key came from.
func TestAuthJSONKeys(t *testing.T) {
	endToEnd(t)
	t.Parallel()
	count := filepath.Join(t.TempDir(), "runs")
	cases := []struct {
		name, key string
		vars      map[string]string
		want      string
	}{
		{"literal", `"sk-literal-key-1234"`, nil, "Bearer sk-literal-key-1234"},
		{"variable", `"$FAKE_KEY"`, map[string]string{"FAKE_KEY": "sk-from-variable-5678"}, "Bearer sk-from-variable-5678"},
		{"braced variable", `"pre-${FAKE_KEY}-$$"`, map[string]string{"FAKE_KEY": "middle"}, "Bearer pre-middle-$"},
		{"command", `"!echo run >> ` + count + `; printf '%s' \"sk-cmd-${OPENAI_API_KEY:-none}\""`,
			map[string]string{"OPENAI_API_KEY": "sk-host-openai-key"}, "Bearer sk-cmd-none"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps, fm, _, _ := authSession(t, `{"fake":{"type":"api_key","key":`+c.key+`}}`, `{"text":["one"]}
{"text":["two"]}`, c.vars)
			ps.send(`{"id":"p1","type":"prompt","message":"Hi"}`)
			ps.waitFor(`"agent_settled"`)
			if got := fm.lastAuthorization(); got != c.want {
				t.Errorf("Authorization %q, want %q", got, c.want)
			}
			ps.send(`{"id":"p2","type":"prompt","message":"Again"}`)
			ps.waitFor(`"text":"two"`)
			ps.send(`{"id":"b","type":"bash","command":"echo \"child sees [${FAKE_KEY:-}] [${OPENAI_API_KEY:-}]\""}`)
			ps.waitFor(`"id":"b","type":"response"`)
			out := string(ps.out.bytes())
			ps.close()
			if !strings.Contains(out, `child sees [] []`) {
				t.Errorf("a child saw a key variable:\n%s", out)
			}
			if c.name == "command" {
				if runs, _ := os.ReadFile(count); string(runs) != "run\n" {
					t.Errorf("the key command ran %q, want once", runs)
				}
			}
		})
	}
}

// TestAuthJSONCommandFails checks a key command that prints nothing: the
// answer fails naming the provider and auth.json (never the command),
// and the command is not run again on the next prompt.
func TestAuthJSONCommandFails(t *testing.T) {
	endToEnd(t)
	t.Parallel()
	count := filepath.Join(t.TempDir(), "runs")
	ps, fm, _, _ := authSession(t, `{"fake":{"type":"api_key","key":"!echo run >> `+count+`; exit 3"}}`, `{"text":["never"]}`, nil)
	ps.send(`{"id":"p1","type":"prompt","message":"Hi"}`)
	ps.waitFor(`"agent_settled"`)
	ps.send(`{"id":"p2","type":"prompt","message":"Again"}`)
	secondSettled := func(b []byte) string {
		if strings.Count(string(b), `"agent_settled"`) < 2 {
			return ""
		}
		return string(b)
	}
	if !ps.out.waitFor(`"agent_settled"`, secondSettled) {
		t.Fatalf("no second agent_settled in:\n%s", ps.out.bytes())
	}
	out := string(ps.out.bytes())
	ps.close()
	if want := `"errorMessage":"No API key for fake: the command in auth.json failed (exit status 3)"`; !strings.Contains(out, want) {
		t.Errorf("output lacks %s:\n%s", want, out)
	}
	if fm.lastRequest() != nil {
		t.Errorf("a request went out without a key")
	}
	if runs, _ := os.ReadFile(count); string(runs) != "run\n" {
		t.Errorf("the key command ran %q, want once", runs)
	}
}

// TestAuthJSONCommandTimeout checks that a key command that hangs is
// killed after the timeout (not in parallel: it shortens the timeout).
func TestAuthJSONCommandTimeout(t *testing.T) {
	endToEnd(t)
	defer func(d time.Duration) { keyCommandTimeout = d }(keyCommandTimeout)
	keyCommandTimeout = 300 * time.Millisecond
	ps, _, _, _ := authSession(t, `{"fake":{"type":"api_key","key":"!sleep 30; echo late"}}`, `{"text":["never"]}`, nil)
	began := time.Now()
	ps.send(`{"id":"p","type":"prompt","message":"Hi"}`)
	ps.waitFor(`"agent_settled"`)
	out := string(ps.out.bytes())
	ps.close()
	if want := "the command in auth.json did not finish within 300ms"; !strings.Contains(out, want) {
		t.Errorf("output lacks %s:\n%s", want, out)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the prompt took %v: the command was not killed", took)
	}
}

// TestKeyRedaction checks that a key a server echoes back in an error
// body reaches neither stdout nor the session file nor an export: a
// literal auth.json key and a !command key alike.
func TestKeyRedaction(t *testing.T) {
	endToEnd(t)
	t.Parallel()
	for _, c := range []struct{ name, key, secret string }{
		{"literal", `"sk-echoed-secret-0001"`, "sk-echoed-secret-0001"},
		{"command", `"!printf sk-echoed-secret-0002"`, "sk-echoed-secret-0002"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ps, _, e, cwd := authSession(t, `{"fake":{"type":"api_key","key":`+c.key+`}}`,
				`{"status":401,"body":"{\"error\":{\"message\":\"Incorrect API key provided: `+c.secret+`\"}}"}`, nil)
			ps.send(`{"id":"p","type":"prompt","message":"Hi"}`)
			ps.waitFor(`"agent_settled"`)
			ps.send(`{"id":"e","type":"export_html","outputPath":"out.html"}`)
			ps.waitFor(`"id":"e"`)
			out := string(ps.out.bytes())
			ps.close()
			if !strings.Contains(out, "Incorrect API key provided: [redacted]") {
				t.Errorf("the error is not in the output, redacted:\n%s", out)
			}
			files, _ := filepath.Glob(filepath.Join(e.agentDir, "sessions", "*", "*.jsonl"))
			files = append(files, filepath.Join(cwd, "out.html"))
			texts := map[string]string{"stdout": out}
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				texts[f] = string(data)
			}
			for where, text := range texts {
				if strings.Contains(text, c.secret) {
					t.Errorf("the key is in %s", where)
				}
			}
		})
	}
}

// TestRedactorMadeAtFirstUse checks that the keys known at startup, and
// their escaped forms, are redacted by the replacer made at the first
// redaction, also when the first redactions come at once and a command's
// key joins meanwhile (run with -race too); short values are not.
func TestRedactorMadeAtFirstUse(t *testing.T) {
	t.Parallel()
	r := newRedactor([]string{"sk-startup/key+1", "short", "sk-startup/key+1"})
	const text = "a sk-startup/key+1 b sk-startup%2Fkey+1 c sk-startup\\/key+1 d short e sk-command-key"
	const want = "a [redacted] b [redacted] c [redacted] d short e "
	got := make([]string, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			if i == len(got)/2 {
				r.add("sk-command-key")
			}
			got[i] = r.redact(text)
		})
	}
	wg.Wait()
	for _, g := range got {
		if g != want+"sk-command-key" && g != want+"[redacted]" {
			t.Errorf("redacted %q", g)
		}
	}
	if g := r.redact(text); g != want+"[redacted]" {
		t.Errorf("after add: %q", g)
	}
	if !slices.Equal(r.secrets, []string{"sk-startup/key+1", "sk-command-key"}) {
		t.Errorf("secrets %q", r.secrets)
	}
}

// TestCredentialOrder checks the order a provider's key is taken in (pi
// 1.6): --api-key, then auth.json, then models.json's apiKey, then the
// provider's variable; an auth.json key whose variable is unset falls
// through to the provider's variable (not to models.json); an OAuth
// login is ignored with a warning; and where each key came from is kept
// from children.
func TestCredentialOrder(t *testing.T) {
	t.Parallel()
	const modelsJSON = `{"providers":{"openai":{"apiKey":"sk-from-models-json","models":[]}}}`
	env := map[string]string{"OPENAI_API_KEY": "sk-from-variable"}
	cases := []struct {
		name, auth, models, cliProvider, cliKey string
		want                                    string
	}{
		{"variable", "", "", "", "", "sk-from-variable"},
		{"models.json", "", modelsJSON, "", "", "sk-from-models-json"},
		{"auth.json", `{"openai":{"type":"api_key","key":"sk-from-auth-json"}}`, modelsJSON, "", "", "sk-from-auth-json"},
		{"--api-key", `{"openai":{"type":"api_key","key":"sk-from-auth-json"}}`, modelsJSON, "openai", "sk-from-flag", "sk-from-flag"},
		{"--api-key for another provider", `{"openai":{"type":"api_key","key":"sk-from-auth-json"}}`, "", "anthropic", "sk-from-flag", "sk-from-auth-json"},
		{"--api-key for no provider", `{"openai":{"type":"api_key","key":"sk-from-auth-json"}}`, "", "", "sk-from-flag", "sk-from-auth-json"},
		{"unset variable in auth.json", `{"openai":{"type":"api_key","key":"$NOT_SET"}}`, modelsJSON, "", "", "sk-from-variable"},
		{"oauth", `{"openai":{"type":"oauth","access":"a","refresh":"r","expires":1}}`, modelsJSON, "", "", "sk-from-models-json"},
	}
	for _, c := range cases {
		dir := t.TempDir()
		if c.auth != "" {
			os.WriteFile(filepath.Join(dir, "auth.json"), []byte(c.auth), 0o600)
		}
		if c.models != "" {
			os.WriteFile(filepath.Join(dir, "models.json"), []byte(c.models), 0o600)
		}
		setup, err := loadModels(dir, c.cliProvider, c.cliKey, func(k string) string { return env[k] })
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var key string
		for _, m := range setup.catalog.all() {
			if m.Provider == "openai" {
				key, _ = m.cred.resolve(t.Context(), nil, setup.secrets)
				break
			}
		}
		if key != c.want {
			t.Errorf("%s: key %q, want %q", c.name, key, c.want)
		}
		if setup.secrets.redact(key) != "[redacted]" {
			t.Errorf("%s: the key is not redacted", c.name)
		}
		if c.name == "oauth" && (len(setup.warnings) != 1 || !strings.Contains(setup.warnings[0], "ignored the OAuth login (pi's /login) of openai: rpi cannot use OAuth")) {
			t.Errorf("oauth: warnings %q", setup.warnings)
		}
		if c.name == "unset variable in auth.json" && !strings.Contains(strings.Join(setup.keyVars, " "), "NOT_SET") {
			t.Errorf("NOT_SET is not kept from children: %q", setup.keyVars)
		}
	}
}

// TestExpandKey checks pi's $-expansion of config values.
func TestExpandKey(t *testing.T) {
	vars := map[string]string{"A": "x", "B_2": "y"}
	lookup := func(k string) string { return vars[k] }
	for in, want := range map[string]string{
		"plain": "plain", "OPENAI_API_KEY": "OPENAI_API_KEY", "$A": "x", "${A}-$B_2": "x-y", "$$A": "$A", "$!x": "!x",
		"$": "$", "$1": "$1", "${1}": "${1}", "a$-b": "a$-b", "${A": "${A",
	} {
		if got, _, ok := expandKey(in, lookup); got != want || !ok {
			t.Errorf("expandKey(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if _, names, ok := expandKey("k-$MISSING", lookup); ok || len(names) != 1 || names[0] != "MISSING" {
		t.Errorf("an unset variable: ok %v, names %q", ok, names)
	}
}

// TestAPIKeyGoesToTheStartingProvider: --api-key is the key of the
// starting model's provider alone, as in pi — named with --provider, in
// --model provider/id, or, for a bare --model id, the provider the
// catalog lists it under first — and of no other provider (it went to
// every provider when the model was a bare id); with no model it is an
// init error.
func TestAPIKeyGoesToTheStartingProvider(t *testing.T) {
	const flagKey = "sk-from-the-flag-123"
	probe, err := loadModels(t.TempDir(), "", "", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	bare := ""
	for _, m := range probe.catalog.all() {
		if m.Provider == "anthropic" {
			bare = m.ID
			break
		}
	}
	for _, c := range []struct {
		name string
		cfg  cliConfig
		want string // the provider that gets the key
	}{
		{"--provider", cliConfig{provider: "anthropic"}, "anthropic"},
		{"--model provider/id", cliConfig{model: "openai/gpt-5"}, "openai"},
		{"a bare --model id", cliConfig{model: bare}, firstProviderOf(probe.catalog, bare)},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.apiKey = flagKey
			set, err := loadHostSettings(c.cfg, newTestEnv(t).env())
			if err != nil {
				t.Fatal(err)
			}
			given := map[string]bool{}
			for _, m := range set.catalog.all() {
				if m.cred == nil {
					continue
				}
				if key, _ := m.cred.resolve(t.Context(), nil, set.secrets); key == flagKey {
					given[m.Provider] = true
				}
			}
			if len(given) != 1 || !given[c.want] {
				t.Errorf("the key went to %v, want %s alone", slices.Sorted(maps.Keys(given)), c.want)
			}
		})
	}
	if _, err := loadHostSettings(cliConfig{apiKey: flagKey}, newTestEnv(t).env()); err != errKeyWithoutModel {
		t.Errorf("--api-key with no model: %v, want %v", err, errKeyWithoutModel)
	}
}
