package main

// Settings: what rpi decides once and never changes after, read without
// locks. The process decides the command line, the model catalog and its
// keys, the tools offered and the environment children get
// (hostSettings); each session, when it opens, decides for its working
// directory pi's settings.json (the user's, and the project's with
// --approve), context files, prompt templates and skills (settings).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// hostSettings are the process's.
type hostSettings struct {
	cfg      config
	agentDir string                 // absolute
	home     string                 // the user's home folder (absolute), a tool's ~; "" when unknown
	shell    func() (string, error) // bash (or /bin/sh where bash is missing); looked up at first use, kept once found
	childEnv []string               // the environment children start from: rpi's, without provider keys

	catalog []*model // every model rpi knows, usable or not
	secrets *redactor
	tools   []*tool // the tools the model is offered

	// The model --model names (adopted into the catalog when --provider
	// names a built-in provider that does not list it), and its thinking
	// suffix; nil without --model.
	startModel    *model
	startThinking string

	notices []string // warnings of the catalog (models.json, auth.json), for every session's client
}

// settings are one session's, for its working directory.
type settings struct {
	*hostSettings
	cwd string

	defaultProvider string
	defaultModel    string
	retry           retrySettings
	compaction      compactionSettings
	confirmTimeout  time.Duration

	contextFiles  []contextFile
	slashCommands []slashCommand // prompt templates and skills
	notices       []string       // warnings for the client when the session opens
}

// retrySettings are pi's settings.json "retry" block.
type retrySettings struct {
	MaxRetries  int `json:"maxRetries"`
	BaseDelayMs int `json:"baseDelayMs"`
}

// compactionSettings are pi's settings.json "compaction" block.
type compactionSettings struct {
	ReserveTokens    int `json:"reserveTokens"`
	KeepRecentTokens int `json:"keepRecentTokens"`
}

// settingsFile is what rpi reads of pi's settings.json, plus its own
// confirmTimeoutMs. Absent fields keep the value they had.
type settingsFile struct {
	DefaultProvider string             `json:"defaultProvider"`
	DefaultModel    string             `json:"defaultModel"`
	Retry           retrySettings      `json:"retry"`
	Compaction      compactionSettings `json:"compaction"`
	ConfirmTimeout  int64              `json:"confirmTimeoutMs"`
}

// defaultConfirmTimeout is how long an approval waits for the client
// before it counts as denied (settings.json confirmTimeoutMs).
const defaultConfirmTimeout = 5 * time.Minute

// maxResourceBytes caps every file rpi reads at startup (settings,
// models.json, context files, templates, skills): a larger one is skipped
// with a warning.
const maxResourceBytes = 1 << 20

// agentDir is pi's configuration directory: $PI_CODING_AGENT_DIR (made
// absolute), or the home folder's .pi/agent. It is never taken relative to
// where rpi runs: started in a project that ships .pi/agent/models.json,
// rpi would use that file's server with the user's keys. With no home
// folder and no PI_CODING_AGENT_DIR it is an error that says what to set.
func agentDir(getenv func(string) string) (string, error) {
	if dir := getenv("PI_CODING_AGENT_DIR"); dir != "" {
		return filepath.Abs(dir)
	}
	home, err := homeDir(getenv)
	if err != nil {
		return "", fmt.Errorf("No home folder: %v; set %s, or PI_CODING_AGENT_DIR to the folder for models.json, auth.json, settings.json and sessions", err, homeVar)
	}
	return filepath.Join(home, ".pi", "agent"), nil
}

// homeDir is the user's home folder as os.UserHomeDir finds it ($HOME;
// %USERPROFILE% on Windows), from the environment run was given, and only
// if it is an absolute path.
func homeDir(getenv func(string) string) (string, error) {
	home := getenv(homeVar)
	switch {
	case home == "":
		return "", fmt.Errorf("%s is not set", homeVar)
	case !filepath.IsAbs(home):
		return "", fmt.Errorf("%s is %q, not an absolute path", homeVar, home)
	}
	return filepath.Clean(home), nil
}

// lookedUp is a program looked up with find at first use, and again at
// each use until it is found (Git for Windows installed while rpi runs,
// as the error of a failed lookup tells the user to).
type lookedUp struct {
	find  func() (string, error)
	mu    mutex[lookedUpMu] // guards found; held while find runs, so that it runs once at a time
	found string
}

func (l *lookedUp) path() (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.found != "" {
		return l.found, nil
	}
	path, err := l.find()
	if err == nil {
		l.found = path
	}
	return path, err
}

// loadHostSettings reads the model catalog and its keys, and chooses the
// model --model names (an unknown one fails startup).
func loadHostSettings(cfg config, env environment) (*hostSettings, error) {
	dir, err := agentDir(env.getenv)
	if err != nil {
		return nil, err
	}
	home, _ := homeDir(env.getenv) // "" with PI_CODING_AGENT_DIR and no home: ~ then stays as it is
	set := &hostSettings{cfg: cfg, agentDir: dir, home: home, shell: (&lookedUp{find: findShell}).path}
	// --api-key goes to one provider: --provider's, or --model's
	// (provider/id); only with neither does it go to every provider.
	keyProvider := cfg.provider
	if p, _, ok := strings.Cut(cfg.model, "/"); ok && keyProvider == "" {
		keyProvider = p
	}
	models, err := loadModels(dir, keyProvider, cfg.apiKey, env.getenv)
	if err != nil {
		return nil, err
	}
	set.catalog, set.secrets = models.catalog, models.secrets
	set.notices = models.warnings
	set.childEnv = withoutVariables(env.environ, models.keyVars)
	if env.hideVariables != nil {
		env.hideVariables(models.keyVars) // read: they are of no more use to rpi
	}
	env.trace.phase("catalog, auth.json, models.json")
	names := defaultTools
	if cfg.toolsGiven {
		names = cfg.tools
	}
	for _, t := range tools {
		if slices.Contains(names, t.name) && !slices.Contains(cfg.excludeTools, t.name) {
			set.tools = append(set.tools, t)
		}
	}
	if cfg.model != "" {
		m, thinking, err := chooseModel(set.catalog, cfg.provider, cfg.model, "", "")
		if err != nil {
			return nil, err
		}
		if !slices.Contains(set.catalog, m) {
			set.catalog = append(set.catalog, m) // an id adopted for --provider
		}
		set.startModel, set.startThinking = m, thinking
	}
	return set, nil
}

// loadSettings reads what a session in cwd decides when it opens: the
// user's settings.json and, with --approve, the project's; the context
// files, templates and skills. Its notices are, in order: those of the
// settings files, the catalog's, and those of the resources.
func loadSettings(h *hostSettings, cwd string, trace *startupTrace) *settings {
	set := &settings{hostSettings: h, cwd: cwd,
		retry:          retrySettings{MaxRetries: 3, BaseDelayMs: 2000},
		compaction:     compactionSettings{ReserveTokens: 16384, KeepRecentTokens: 20000},
		confirmTimeout: defaultConfirmTimeout}
	cfg := h.cfg
	set.applySettingsFile(filepath.Join(h.agentDir, "settings.json"))
	if cfg.approve {
		set.applySettingsFile(filepath.Join(cwd, ".pi", "settings.json"))
	}
	set.notices = append(set.notices, h.notices...)
	trace.phase("settings.json")
	var skipped []string
	if !cfg.noContextFiles {
		set.contextFiles, skipped = loadContextFiles(h.agentDir, cwd)
	}
	trace.phase("context files (AGENTS.md)")
	kinds := resourceKinds{templates: !cfg.noPromptTemplates, skills: !cfg.noSkills}
	set.slashCommands = loadResources(h.agentDir, "user", kinds, &skipped)
	if cfg.approve {
		set.slashCommands = append(set.slashCommands, loadResources(filepath.Join(cwd, ".pi"), "project", kinds, &skipped)...)
	} else if notice := skippedNotice(cwd); notice != "" {
		set.notices = append(set.notices, notice)
	}
	for _, s := range skipped {
		set.notices = append(set.notices, "Skipped "+s)
	}
	trace.phase("skills, prompt templates")
	return set
}

// applySettingsFile reads one settings.json over the values so far. A
// missing file changes nothing; an unreadable or invalid one is skipped
// with a warning.
func (set *settings) applySettingsFile(path string) {
	data, err := readRegularFile(path, maxResourceBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var file settingsFile
	if err == nil {
		err = json.Unmarshal(data, &file)
	}
	if err != nil {
		set.notices = append(set.notices, fmt.Sprintf("Ignored %s: %v", path, jsonError(data, err)))
		return
	}
	if file.DefaultProvider != "" || file.DefaultModel != "" {
		set.defaultProvider, set.defaultModel = file.DefaultProvider, file.DefaultModel
	}
	if file.Retry.MaxRetries > 0 {
		set.retry.MaxRetries = file.Retry.MaxRetries
	}
	if file.Retry.BaseDelayMs > 0 {
		set.retry.BaseDelayMs = file.Retry.BaseDelayMs
	}
	if file.Compaction.ReserveTokens > 0 {
		set.compaction.ReserveTokens = file.Compaction.ReserveTokens
	}
	if file.Compaction.KeepRecentTokens > 0 {
		set.compaction.KeepRecentTokens = file.Compaction.KeepRecentTokens
	}
	if file.ConfirmTimeout > 0 {
		set.confirmTimeout = msDuration(file.ConfirmTimeout)
	}
}

// jsonError says where in data a JSON error is (line and column): a
// syntax error, or a value of the wrong type.
func jsonError(data []byte, err error) error {
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	offset := int64(0)
	switch {
	case errors.As(err, &syntax):
		offset = syntax.Offset
	case errors.As(err, &typeErr):
		offset = typeErr.Offset
	}
	if offset > 0 {
		before := data[:min(int(offset), len(data))]
		line := strings.Count(string(before), "\n") + 1
		col := len(before) - strings.LastIndexByte(string(before), '\n') - 1
		return fmt.Errorf("line %d, column %d: %v", line, col, err)
	}
	return err
}

// withoutVariables is environ minus the named variables.
func withoutVariables(environ []string, names []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, name) {
			out = append(out, kv)
		}
	}
	return out
}
