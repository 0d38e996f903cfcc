package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
)

// Credentials: the keys of providers — from --api-key, auth.json,
// models.json and the environment, and !command keys run once — and
// their redaction from every text that leaves rpi (docs/models.md,
// docs/security.md#keys).

// credential is where a provider's key comes from. A literal or an
// environment variable is resolved at startup; a "!command" runs on the
// first call that needs it, once for the life of rpi, and what it prints
// is the key. When the command gives no key, fallback (the provider's
// variable, as pi falls back) is used.
type credential struct {
	key      string // the key, when known at startup
	command  string // the shell command after "!", run on first use
	source   string // where it was configured, for messages
	fallback *credential
	commands *keyCommands
}

// keyRunner runs a key command and returns its trimmed output.
type keyRunner func(ctx context.Context, command string) (string, error)

// resolve returns the key, running the command the first time; a key a
// command printed joins the secrets that are redacted from every error.
func (c *credential) resolve(ctx context.Context, run keyRunner, secrets *redactor) (string, error) {
	if c == nil {
		return "", nil
	}
	if c.command == "" {
		return c.key, nil
	}
	key, err := c.commands.run(ctx, c.command, run)
	if err == nil {
		secrets.add(key)
		return key, nil
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if c.fallback != nil {
		return c.fallback.resolve(ctx, run, secrets)
	}
	return "", fmt.Errorf("the command in %s %v", c.source, err)
}

// keyCommandTimeout bounds a key command (pi's is 10 s too).
var keyCommandTimeout = 10 * time.Second

// maxKeyCommandOutput bounds what rpi keeps of a key command's output.
const maxKeyCommandOutput = 64 << 10

// runKeyCommand runs a "!command" key as every child runs: with /bin/sh
// (bash on Windows) in the session cwd, in its own process group, with the environment
// children get (no provider keys), stdin /dev/null, stderr dropped,
// killed after keyCommandTimeout. Its output, trimmed, is the key.
func (s *session) runKeyCommand(ctx context.Context, command string) (string, error) {
	var out bytes.Buffer
	overflow := false
	shell, err := keyShell()
	if err != nil {
		return "", fmt.Errorf("could not start: %v", err)
	}
	cmd := s.command(shell, "-c", command)
	cmd.Dir = s.set.cwd
	cmd.Env = s.set.childEnv
	end, err := s.runChild(ctx, cmd, keyCommandTimeout, func(stream string, p []byte) {
		switch {
		case stream != "stdout":
		case out.Len()+len(p) > maxKeyCommandOutput:
			overflow = true
		default:
			out.Write(p)
		}
	})
	key := strings.TrimSpace(out.String())
	switch {
	case err != nil:
		return "", fmt.Errorf("could not start: %v", err)
	case end.timedOut:
		return "", fmt.Errorf("did not finish within %v", keyCommandTimeout)
	case !end.ps.Success():
		return "", fmt.Errorf("failed (%v)", end.ps)
	case overflow:
		return "", fmt.Errorf("printed more than %s", formatSize(maxKeyCommandOutput))
	case key == "":
		return "", errors.New("printed nothing")
	}
	return key, nil
}

// keyCommands remembers what each key command gave (pi: cached for the
// process), so that it runs once however many providers name it.
type keyCommands struct {
	mu      mutex[keyCommandsMu] // guards results
	results map[string]*keyCommand
}

type keyCommand struct {
	mu   mutex[keyCommandMu] // held while the command runs
	done bool
	key  string
	err  error
}

func (k *keyCommands) run(ctx context.Context, command string, run keyRunner) (string, error) {
	k.mu.Lock()
	kc := k.results[command]
	if kc == nil {
		kc = &keyCommand{}
		k.results[command] = kc
	}
	k.mu.Unlock()
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if !kc.done {
		if run == nil {
			return "", errors.New("cannot run here")
		}
		key, err := run(ctx, command)
		if ctx.Err() != nil {
			return "", ctx.Err() // an abort is not the command's answer: it runs again next time
		}
		kc.done, kc.key, kc.err = true, key, err
	}
	return kc.key, kc.err
}

// credentials picks each provider's credential in pi's order: --api-key,
// then auth.json, then models.json's apiKey, then the provider's
// variable. An auth.json key that resolves to nothing falls through to
// the variable (as in pi, models.json's apiKey is then not consulted).
type credentials struct {
	getenv      func(string) string
	auth        map[string]authCredential
	fileKeys    map[string]string // models.json apiKey per provider
	cliProvider string            // the provider --api-key is for (the starting model's); no other gets it
	cliKey      string
	commands    *keyCommands
	byProvider  map[string]*credential
	keys        []string // every key resolved at startup
	setup       *modelSetup
}

// literal is a credential with a known key, or nil for an empty one.
func (cs *credentials) literal(key, source string) *credential {
	if key == "" {
		return nil
	}
	cs.keys = append(cs.keys, key)
	return &credential{key: key, source: source}
}

func (cs *credentials) of(provider string) *credential {
	if c, ok := cs.byProvider[provider]; ok {
		return c
	}
	var env *credential
	if name := keyVarOf(provider); name != "" {
		env = cs.literal(cs.getenv(name), name)
	}
	var c *credential
	switch entry, stored := cs.auth[provider]; {
	case cs.cliKey != "" && cs.cliProvider == provider:
		c = cs.literal(cs.cliKey, "--api-key")
	case stored:
		c = cs.fromAuth(entry, env)
	case cs.fileKeys[provider] != "":
		c = cs.fromModelsFile(cs.fileKeys[provider], env)
	default:
		c = env
	}
	cs.byProvider[provider] = c
	return c
}

// fromAuth resolves an auth.json key as pi does: "!command" runs on
// first use; otherwise $NAME and ${NAME} are environment variables (the
// entry's "env" first), $$ and $! a literal $ and !, and the rest
// literal text. A key with a variable that is not set resolves to
// nothing, and the provider's own variable is used instead.
func (cs *credentials) fromAuth(entry authCredential, env *credential) *credential {
	source := "auth.json"
	if command, ok := strings.CutPrefix(entry.Key, "!"); ok {
		return &credential{command: command, source: source, fallback: env, commands: cs.commands}
	}
	key, names, ok := expandKey(entry.Key, func(name string) string { return cmp.Or(entry.Env[name], cs.getenv(name)) })
	cs.setup.keyVars = append(cs.setup.keyVars, names...)
	if !ok {
		return env
	}
	return cmp.Or(cs.literal(key, source), env)
}

// fromModelsFile resolves models.json's apiKey: "!command" as in
// auth.json, otherwise the variable it names if that is set, else the
// text itself.
func (cs *credentials) fromModelsFile(apiKey string, env *credential) *credential {
	source := "models.json"
	if command, ok := strings.CutPrefix(apiKey, "!"); ok {
		return &credential{command: command, source: source, fallback: env, commands: cs.commands}
	}
	if isEnvName(apiKey) {
		cs.setup.keyVars = append(cs.setup.keyVars, strings.TrimPrefix(strings.Trim(apiKey, "${}"), "$"))
	}
	return cs.literal(envOrLiteral(apiKey, cs.getenv), source)
}

// expandKey expands $NAME, ${NAME}, $$ and $! in v (pi's config values).
// It returns the names it looked up, and ok false when one is unset.
func expandKey(v string, lookup func(string) string) (out string, names []string, ok bool) {
	var b strings.Builder
	ok = true
	for i := 0; i < len(v); i++ {
		if v[i] != '$' || i+1 == len(v) {
			b.WriteByte(v[i])
			continue
		}
		name, width := "", 0
		switch next := v[i+1]; {
		case next == '$' || next == '!':
			b.WriteByte(next)
			i++
			continue
		case next == '{':
			if end := strings.IndexByte(v[i+2:], '}'); end >= 0 && validVarName(v[i+2:i+2+end]) {
				name, width = v[i+2:i+2+end], end+3
			}
		default:
			end := i + 1
			for end < len(v) && (v[end] == '_' || v[end] >= 'A' && v[end] <= 'Z' || v[end] >= 'a' && v[end] <= 'z' || v[end] >= '0' && v[end] <= '9') {
				end++
			}
			if validVarName(v[i+1 : end]) {
				name, width = v[i+1:end], end-i
			}
		}
		if name == "" {
			b.WriteByte('$')
			continue
		}
		names = append(names, name)
		value := lookup(name)
		if value == "" {
			ok = false
		}
		b.WriteString(value)
		i += width - 1
	}
	return b.String(), names, ok
}

// authCredential is an api_key entry of pi's auth.json.
type authCredential struct {
	Key string            `json:"key"`
	Env map[string]string `json:"env"`
}

// loadAuth reads pi's auth.json ({"<provider>": {"type":"api_key",
// "key":…}}), a regular file only. An OAuth login (pi's /login) cannot be
// used by rpi: one warning names those providers, which then take their
// key from models.json or their variable. An entry of another shape is
// ignored with a warning.
func loadAuth(dir string, setup *modelSetup) (map[string]authCredential, error) {
	path := filepath.Join(dir, "auth.json")
	data, err := readRegularFile(path, maxResourceBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("Cannot read %s: %v", path, unwrapPathError(err))
	}
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	var file map[string]json.RawMessage
	if err := json.Unmarshal(data, &file); err != nil || file == nil {
		if err == nil {
			err = errors.New("expected an object")
		}
		return nil, fmt.Errorf("Invalid %s: %v", path, jsonError(data, err))
	}
	auth := map[string]authCredential{}
	var oauth []string
	for _, provider := range slices.Sorted(maps.Keys(file)) {
		var entry struct {
			Type string          `json:"type"`
			Key  json.RawMessage `json:"key"`
			Env  json.RawMessage `json:"env"`
		}
		var cred authCredential
		err := unmarshalExact(file[provider], &entry)
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typeErr): // the entry is not an object, or its type not a string
			err = errors.New(jsonMismatch(file[provider], typeErr))
		case err != nil:
		case entry.Type == "oauth":
			oauth = append(oauth, provider)
			continue
		case entry.Type != "api_key":
			err = fmt.Errorf("unknown type %q", entry.Type)
		case entry.Key != nil && json.Unmarshal(entry.Key, &cred.Key) != nil:
			err = errors.New(`"key" must be a string`)
		case entry.Env != nil && json.Unmarshal(entry.Env, &cred.Env) != nil:
			err = errors.New(`"env" must be an object of strings`)
		}
		if err != nil {
			setup.warnings = append(setup.warnings, fmt.Sprintf("%s: ignored the credential of %s: %v", path, provider, err))
			continue
		}
		auth[provider] = cred
	}
	if len(oauth) > 0 {
		setup.warnings = append(setup.warnings, fmt.Sprintf("%s: ignored the OAuth login (pi's /login) of %s: rpi cannot use OAuth; "+
			`give an API key instead ({"type":"api_key","key":…} here, apiKey in models.json, or the provider's key variable)`, path, strings.Join(oauth, ", ")))
	}
	return auth, nil
}

// redactor removes secrets from text that leaves rpi. Keys a command
// prints join it when the command has run. The replacer of the keys known
// at startup is made at the first redaction: nothing before the first
// line redacts.
type redactor struct {
	mu       mutex[redactorMu] // guards secrets and serialises add
	secrets  []string
	replacer atomic.Pointer[strings.Replacer] // nil until a key is added
	initial  func() *strings.Replacer         // the replacer of the keys known at startup, made once
}

// minSecretLength: shorter values (a local server's "x") are not secrets
// worth hiding and would mangle ordinary text.
const minSecretLength = 8

func newRedactor(secrets []string) *redactor {
	r := &redactor{}
	for _, s := range secrets {
		if len(s) >= minSecretLength && !slices.Contains(r.secrets, s) {
			r.secrets = append(r.secrets, s)
		}
	}
	known := slices.Clone(r.secrets) // add appends to r.secrets
	r.initial = sync.OnceValue(func() *strings.Replacer { return replacerOf(known) })
	return r
}

// add makes text with secret (or its URL-escaped forms) come out redacted.
func (r *redactor) add(secret string) {
	if r == nil || len(secret) < minSecretLength {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.Contains(r.secrets, secret) {
		return
	}
	r.secrets = append(r.secrets, secret)
	r.replacer.Store(replacerOf(r.secrets))
}

// replacerOf replaces each of secrets, and its escaped forms, with
// "[redacted]".
func replacerOf(secrets []string) *strings.Replacer {
	var pairs []string
	seen := map[string]bool{}
	for _, secret := range secrets {
		for _, form := range secretForms(secret) {
			if len(form) >= minSecretLength && !seen[form] {
				seen[form] = true
				pairs = append(pairs, form, "[redacted]")
			}
		}
	}
	return strings.NewReplacer(pairs...)
}

// secretForms are the ways text may hold secret: as sent, URL-escaped,
// and as a JSON string would hold it (a server's JSON error body quotes
// it with \/ or \u escapes).
func secretForms(secret string) []string {
	quoted, _ := json.Marshal(secret)
	return []string{secret, url.QueryEscape(secret), url.PathEscape(secret), string(quoted[1 : len(quoted)-1]),
		strings.ReplaceAll(secret, "/", `\/`), asciiEscaped(secret)}
}

// schemeToken is the token of a header value written after an HTTP
// authentication scheme ("Bearer <token>"): a secret of its own, since a
// server may echo it alone. Other two-word values have none ("X-Title":
// "Coding Assistant" makes no secret of "Assistant").
func schemeToken(value string) (token string, ok bool) {
	words := strings.Fields(value)
	if len(words) != 2 {
		return "", false
	}
	for _, scheme := range []string{"Bearer", "Basic", "Token", "ApiKey", "Api-Key", "Key", "Bot"} {
		if strings.EqualFold(words[0], scheme) {
			return words[1], true
		}
	}
	return "", false
}

// asciiEscaped is s with every character but letters and digits as a
// JSON \u escape.
func asciiEscaped(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c < 0x80 && (unicode.IsLetter(c) || unicode.IsDigit(c)) {
			b.WriteRune(c)
		} else {
			fmt.Fprintf(&b, `\u%04x`, c)
		}
	}
	return b.String()
}

func (r *redactor) redact(text string) string {
	if r == nil {
		return text
	}
	replacer := r.replacer.Load()
	if replacer == nil {
		replacer = r.initial()
	}
	return replacer.Replace(text)
}

// redactCut is redact for text that was cut short (the first bytes of a
// server's answer): what the cut left at its end of a secret, a start no
// replacer sees as one, goes too.
func (r *redactor) redactCut(text string) string {
	text = r.redact(text)
	if r == nil {
		return text
	}
	r.mu.Lock()
	secrets := slices.Clone(r.secrets)
	r.mu.Unlock()
	for _, secret := range secrets {
		for _, form := range secretForms(secret) {
			for n := min(len(form)-1, len(text)); n > 0; n-- {
				if strings.HasSuffix(text, form[:n]) {
					text = text[:len(text)-n]
					break
				}
			}
		}
	}
	return text
}

// MarshalJSON writes the Model object with any password in its baseUrl
// masked; keys and headers are never part of it.
func (m *model) MarshalJSON() ([]byte, error) {
	type plain model
	c := plain(*m)
	c.BaseURL = maskedBaseURL(c.BaseURL)
	return marshalJSON(c)
}

// sortModels orders models.json models by provider, then as listed.
func sortModels(models []*model) {
	slices.SortStableFunc(models, func(a, b *model) int { return strings.Compare(a.Provider, b.Provider) })
}

// usable reports whether a model can be called: it has a key or needs none.
func (m *model) usable() bool { return m.speaks() && (!m.needsKey || m.cred != nil) }

// noModelMessage says how to configure a model; it is the prompt failure
// when none is usable.
const noModelMessage = "No model available. Set a provider's key variable (ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY, " +
	"GROQ_API_KEY, OPENROUTER_API_KEY, … see docs/models.md), give it a key in auth.json, pass --api-key with --provider, " +
	"or add a server to models.json in $PI_CODING_AGENT_DIR (default ~/.pi/agent)."
