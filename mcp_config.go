package main

// MCP servers as pi 1.6 configures them: the user's <agent dir>/mcp.json and,
// with --approve, the project's .pi/mcp.json, read and checked as pi reads
// them, their ${VAR} and !command values expanded.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// mcpServerConfig is one server entry, checked, its values expanded.
type mcpServerConfig struct {
	name        string
	source      string // "user" or "project"
	transport   string // "stdio" or "http"
	command     string
	args        []string
	env         map[string]string
	envSecrets  []string // the keys in its env and args (mcpStdioSecrets): redacted from every tool result
	cwd         string
	url         string
	headers     map[string]string
	oauth       mcpOAuthSettings // the client a stored sign-in was made as (HTTP)
	enabled     bool
	timeout     time.Duration
	exposure    string            // direct, deferred, hidden, codemode (acts as deferred)
	toolExpose  map[string]string // by the server's tool name
	description string
}

// mcpEntry is an entry as written in mcp.json; a field of the wrong type
// makes the entry invalid.
type mcpEntry struct {
	Type         *string           `json:"type"`
	Command      *string           `json:"command"`
	Args         []string          `json:"args"`
	Env          map[string]string `json:"env"`
	Cwd          *string           `json:"cwd"`
	URL          *string           `json:"url"`
	Headers      map[string]string `json:"headers"`
	Enabled      *bool             `json:"enabled"`
	Timeout      *float64          `json:"timeout"`
	Exposure     *string           `json:"exposure"`
	ToolExposure map[string]string `json:"toolExposure"`
	OAuth        *mcpOAuthEntry    `json:"oauth"`
	Description  *string           `json:"description"`
}

// mcpOAuthEntry is an HTTP entry's "oauth" object: how pi signs in to the
// server, which a refresh of that sign-in follows (mcp_oauth.go).
type mcpOAuthEntry struct {
	ClientID              *string  `json:"clientId"`
	ClientSecret          *string  `json:"clientSecret"`
	ClientName            *string  `json:"clientName"`
	ClientRegistration    *string  `json:"clientRegistration"`
	CallbackURL           *string  `json:"callbackUrl"`
	CallbackPort          *float64 `json:"callbackPort"`
	AuthServerMetadataURL *string  `json:"authServerMetadataUrl"`
}

// deref is *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// mcpDefaultTimeout is a request's limit without the entry's timeout.
const mcpDefaultTimeout = 60 * time.Second

// mcpServerName is what a server's name may be: pi's characters, at
// most 40 of them, so that every tool's name keeps mcp__<server>__ whole
// (--confirm mcp__<server>__* reaches them all).
var mcpServerName = lazy[*regexp.Regexp]{build: func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`) }}

var mcpExposures = []string{"direct", "deferred", "hidden", "codemode"}

// mcpToolPrefix is what each of server's tools' names begins with.
func mcpToolPrefix(server string) string { return "mcp__" + mcpSanitize(server) + "__" }

// mcpNamesClash reports whether two servers' tools could be given one
// name: their names are alike once sanitized (a-b, a_b), or one's tool
// prefix begins the other's (h and h__x: h's x__t and h__x's t are both
// mcp__h__x__t; h and h_: h's _t and h_'s t). Servers whose names do not
// clash never share a name, plain or hashed: every name keeps its
// server's prefix whole (mcpServerName).
func mcpNamesClash(a, b string) bool {
	pa, pb := mcpToolPrefix(a), mcpToolPrefix(b)
	return strings.HasPrefix(pa, pb) || strings.HasPrefix(pb, pa)
}

// mcpClash says why server name is left out for other (mcpNamesClash).
func mcpClash(name, other string) string {
	if mcpSanitize(name) == mcpSanitize(other) {
		return "the name differs from " + other + " only in - and _"
	}
	return fmt.Sprintf("its tools' names (%s…) could be server %s's tools' (%s…): rename one of the two", mcpToolPrefix(name), other, mcpToolPrefix(other))
}

// readMCPFile reads one mcp.json's entries by name, in the file's order
// of names sorted (JSON objects have no order rpi keeps); a missing file
// has none; a file that cannot be read or is not valid is a warning.
func readMCPFile(path string) (data []byte, names []string, entries map[string]json.RawMessage, warning string) {
	data, err := readSmallFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil, ""
	}
	if err != nil {
		return nil, nil, nil, fmt.Sprintf("Cannot read MCP servers from %s: %v", path, err)
	}
	var file struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := unmarshalExact(data, &file); err != nil {
		return nil, nil, nil, fmt.Sprintf("Cannot read MCP servers from %s: %s", path, jsonError(data, err))
	}
	for name := range file.MCPServers {
		names = append(names, name)
	}
	sort.Strings(names)
	return data, names, file.MCPServers, ""
}

// mcpEntryError is err, of decoding the entry text of an mcp.json whose
// text is data, saying where in the file it is (at the first copy of
// the entry's text: two entries written alike fail alike).
func mcpEntryError(data, entry []byte, err error) error {
	var typeErr *json.UnmarshalTypeError
	if at := bytes.Index(data, entry); at >= 0 && errors.As(err, &typeErr) {
		return fmt.Errorf("%s: %s", lineColumn(data, int64(at)+typeErr.Offset), jsonMismatch(entry, typeErr))
	}
	return jsonError(entry, err)
}

// readSmallFile reads a configuration file, at most maxResourceBytes.
func readSmallFile(path string) ([]byte, error) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Read into the heap: a buffer on the stack would grow the stack of
	// the goroutine that reads mcp.json at startup, file or no file.
	data, err := io.ReadAll(io.LimitReader(f, maxResourceBytes+1))
	if len(data) > maxResourceBytes {
		return nil, fmt.Errorf("larger than %s", formatSize(maxResourceBytes))
	}
	return data, err
}

// loadMCPConfig reads the user's mcp.json and, when approved, the
// project's: the servers in name order, and a warning for each file or
// entry that cannot be used (the others are kept). A project entry with
// neither command, url nor type only overrides enabled, exposure and
// toolExposure of the user's entry of that name. An entry whose tools'
// names could be another's (mcpNamesClash) is left out: the one read
// later, or the one that clashes with a server the front end's client
// gives (given, whose names' entries are theirs: left out too). expand
// resolves ${VAR} and !command values, of the enabled servers only, once
// the project's overrides are applied: a disabled server runs none of
// its commands.
func loadMCPConfig(agentDir, cwd string, approved bool, given []string, expand func(value string, commands bool) (string, error)) ([]mcpServerConfig, []string) {
	var warnings []string
	byName := map[string]*mcpServerConfig{}
	entries, paths := map[string]mcpEntry{}, map[string]string{} // each server's entry as written, and its file
	read := func(path, source string) {
		data, names, raw, warning := readMCPFile(path)
		if warning != "" {
			warnings = append(warnings, warning)
		}
		for _, name := range names {
			var e mcpEntry
			dec := json.NewDecoder(bytes.NewReader(exactData(raw[name], &e)))
			if err := dec.Decode(&e); err != nil {
				warnings = append(warnings, fmt.Sprintf("MCP server %s in %s is not valid: %s", name, path, mcpEntryError(data, raw[name], err)))
				continue
			}
			if !mcpServerName.get().MatchString(name) {
				warnings = append(warnings, fmt.Sprintf("MCP server %q in %s: a name has only letters, digits, _ and -, at most 40", name, path))
				continue
			}
			if user, ok := byName[name]; ok && source == "project" && e.Command == nil && e.URL == nil && e.Type == nil {
				if err := overrideMCP(user, e); err != nil {
					warnings = append(warnings, fmt.Sprintf("MCP server %s in %s: %v", name, path, err))
				}
				continue
			}
			if slices.Contains(given, name) {
				continue // the client's server of that name replaces it
			}
			for _, other := range append(slices.Clone(given), slices.Sorted(maps.Keys(byName))...) {
				if other != name && mcpNamesClash(name, other) {
					warnings = append(warnings, fmt.Sprintf("MCP server %s in %s: %s", name, path, mcpClash(name, other)))
					goto next
				}
			}
			if cfg, err := checkMCPEntry(name, source, cwd, e); err != nil {
				warnings = append(warnings, fmt.Sprintf("MCP server %s in %s: %v", name, path, err))
				delete(byName, name) // a project entry that is not valid does not leave the user's in place
			} else {
				byName[name] = &cfg
				entries[name] = e
				paths[name] = path
			}
		next:
		}
	}
	read(filepath.Join(agentDir, "mcp.json"), "user")
	if approved {
		read(filepath.Join(cwd, ".pi", "mcp.json"), "project")
	}
	var servers []mcpServerConfig
	for _, cfg := range byName {
		servers = append(servers, *cfg)
	}
	slices.SortFunc(servers, func(a, b mcpServerConfig) int { return strings.Compare(a.name, b.name) })
	kept := servers[:0]
	for _, cfg := range servers {
		if cfg.enabled {
			if err := expandMCPEntry(&cfg, entries[cfg.name], expand); err != nil {
				warnings = append(warnings, fmt.Sprintf("MCP server %s in %s: %v", cfg.name, paths[cfg.name], err))
				continue
			}
		}
		kept = append(kept, cfg)
	}
	return kept, warnings
}

// overrideMCP applies a project's enabled, exposure and toolExposure to
// the user's entry.
func overrideMCP(cfg *mcpServerConfig, e mcpEntry) error {
	if e.Exposure != nil && !slices.Contains(mcpExposures, *e.Exposure) {
		return fmt.Errorf("exposure must be one of %s", strings.Join(mcpExposures, ", "))
	}
	if e.Enabled != nil {
		cfg.enabled = *e.Enabled
	}
	if e.Exposure != nil {
		cfg.exposure = *e.Exposure
	}
	if e.ToolExposure != nil {
		cfg.toolExpose = e.ToolExposure
	}
	return nil
}

// checkMCPEntry makes an entry a server: its transport, its command or
// URL, its limits; expandMCPEntry adds the values that are expanded.
func checkMCPEntry(name, source, cwd string, e mcpEntry) (mcpServerConfig, error) {
	cfg := mcpServerConfig{name: name, source: source, enabled: true, timeout: mcpDefaultTimeout, exposure: "codemode", toolExpose: e.ToolExposure}
	kind := ""
	if e.Type != nil {
		kind = *e.Type
	}
	switch {
	case kind == "sse":
		return cfg, errors.New(`the SSE transport is not supported: use the server's streamable HTTP endpoint (often /mcp instead of /sse) with "url"`)
	case kind != "" && kind != "stdio" && kind != "http" && kind != "streamable-http":
		return cfg, fmt.Errorf("type must be stdio, http or streamable-http, not %q", kind)
	case e.Command != nil && e.URL != nil:
		return cfg, errors.New(`give either "command" (stdio) or "url" (HTTP), not both`)
	case e.Command != nil && kind != "" && kind != "stdio", e.URL != nil && kind == "stdio":
		return cfg, fmt.Errorf("type %s does not match the entry's %s", kind, map[bool]string{true: "command", false: "url"}[e.Command != nil])
	case e.Command == nil && e.URL == nil:
		return cfg, errors.New(`give "command" (a stdio server) or "url" (streamable HTTP)`)
	}
	if e.Enabled != nil {
		cfg.enabled = *e.Enabled
	}
	if e.Timeout != nil {
		if *e.Timeout <= 0 || *e.Timeout > 24*3600 {
			return cfg, errors.New("timeout is a number of seconds, more than 0")
		}
		cfg.timeout = time.Duration(*e.Timeout * float64(time.Second))
	}
	if e.Exposure != nil {
		if !slices.Contains(mcpExposures, *e.Exposure) {
			return cfg, fmt.Errorf("exposure must be one of %s", strings.Join(mcpExposures, ", "))
		}
		cfg.exposure = *e.Exposure
	}
	for tool, exposure := range e.ToolExposure {
		if !slices.Contains(mcpExposures, exposure) {
			return cfg, fmt.Errorf("toolExposure of %s must be one of %s", tool, strings.Join(mcpExposures, ", "))
		}
	}
	if e.Description != nil {
		cfg.description = *e.Description
	}
	if e.URL != nil {
		cfg.transport, cfg.url = "http", *e.URL
		if o := e.OAuth; o != nil {
			cfg.oauth = mcpOAuthSettings{clientID: deref(o.ClientID), clientName: deref(o.ClientName),
				registration: deref(o.ClientRegistration), callbackURL: deref(o.CallbackURL), metadataURL: deref(o.AuthServerMetadataURL)}
			if o.CallbackPort != nil {
				cfg.oauth.callbackPort = int(*o.CallbackPort)
			}
		}
		return cfg, nil
	}
	cfg.transport, cfg.command = "stdio", expandHome(*e.Command)
	if cfg.command == "" {
		return cfg, errors.New("command is empty")
	}
	cfg.cwd = cwd
	if e.Cwd != nil {
		cfg.cwd = resolvePath(cwd, expandHome(*e.Cwd))
	}
	return cfg, nil
}

// expandMCPEntry gives cfg, made of e by checkMCPEntry, the values
// expand resolves: an HTTP server's headers, a stdio server's args and
// env. As pi: the oauth values as written, but clientSecret's ${VAR} or
// !command, resolved when a refresh needs it (a secret that cannot be had
// fails the refresh, not the connection).
func expandMCPEntry(cfg *mcpServerConfig, e mcpEntry, expand func(string, bool) (string, error)) error {
	var err error
	// field names the map in the error: an "env TOKEN: its command
	// failed (exit status 4)" says which value's !command it was.
	expandAll := func(field string, values map[string]string, commands bool) map[string]string {
		out := map[string]string{}
		for k, v := range values {
			if err == nil {
				out[k], err = expand(v, commands)
				if err != nil {
					err = fmt.Errorf("%s %s: its command %v", field, k, err)
				}
			}
		}
		return out
	}
	if cfg.transport == "http" {
		cfg.headers = expandAll("headers", e.Headers, true)
		if e.OAuth != nil && e.OAuth.ClientSecret != nil {
			secret := *e.OAuth.ClientSecret
			cfg.oauth.secretOf = func() (string, error) { return expand(secret, true) }
		}
		return err
	}
	for _, arg := range e.Args {
		if err == nil {
			var a string
			a, err = expand(arg, false)
			cfg.args = append(cfg.args, expandHome(a))
		}
	}
	cfg.env = expandAll("env", e.Env, true)
	cfg.envSecrets = mcpStdioSecrets(cfg.args, cfg.env, e.Env)
	return err
}

// mcpStdioSecrets are the keys a stdio server is given: each env value
// that is one (mcpEnvSecret; written holds the values as written, before
// ${VAR} and !command, nil for an editor's, which are literal), and the
// password of a URL that is an arg or an env value
// (postgres://user:password@host/db, under DATABASE_URL or not).
func mcpStdioSecrets(args []string, env, written map[string]string) []string {
	var secrets []string
	for _, k := range sortedKeys(env) {
		if mcpEnvSecret(k, written[k]) {
			secrets = append(secrets, env[k])
		} else if password := urlPassword(env[k]); password != "" {
			secrets = append(secrets, password)
		}
	}
	for _, arg := range args {
		if password := urlPassword(arg); password != "" {
			secrets = append(secrets, password)
		}
	}
	return secrets
}

// urlPassword is the password in s when s is a URL with one; "" if not.
func urlPassword(s string) string {
	if !strings.Contains(s, "://") || !strings.Contains(s, "@") {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return ""
	}
	password, _ := u.User.Password()
	return password
}

// mcpEnvSecret reports whether a stdio server's env value is a key rpi
// holds, as a header's value is: one a !command makes (a password
// manager's), or one whose name ends in a word that names a key — its
// last part between underscores (GITHUB_TOKEN, OPENAI_API_KEY,
// MYSQL_PWD, NPM_CONFIG__AUTH), or its end when written in one word or
// camelCase (PGPASSWORD, accessToken; not KEY, PASS or AUTH, which end
// MONKEY, BYPASS and OAUTH too). A part before the last is not enough: it
// names what is about a key (AUTH_TYPE, TOKEN_URL, SECRET_NAME,
// SSH_AUTH_SOCK, AWS_ACCESS_KEY_ID, KEY_FILE), whose value — a word, a
// URL, a path — taken out of every tool result would garble the results
// (AUTH_TYPE=password took every "password" out of every file read).
func mcpEnvSecret(name, value string) bool {
	if strings.HasPrefix(value, "!") {
		return true
	}
	upper := strings.ToUpper(name)
	parts := strings.Split(upper, "_")
	switch parts[len(parts)-1] {
	case "KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "AUTH", "PAT":
		return true
	case "PWD": // MYSQL_PWD; PWD alone is the working directory
		return len(parts) > 1
	}
	for _, word := range []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "APIKEY"} {
		if strings.HasSuffix(upper, word) {
			return true
		}
	}
	return false
}

// expandHome makes a leading ~/ the home directory.
func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

var mcpVariable = lazy[*regexp.Regexp]{build: func() *regexp.Regexp { return regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`) }}

// expandMCPValue resolves a value as pi does: ${VAR} from the
// environment (unset: empty), and, where commands are allowed, a whole
// value "!command" as the command's trimmed output (run).
func expandMCPValue(value string, commands bool, getenv func(string) string, run func(command string) (string, error)) (string, error) {
	if command, ok := strings.CutPrefix(value, "!"); ok && commands {
		return run(command)
	}
	return mcpVariable.get().ReplaceAllStringFunc(value, func(v string) string { return getenv(v[2 : len(v)-1]) }), nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
