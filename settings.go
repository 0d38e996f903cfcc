package main

// Settings: what rpi decides once and never changes after, read without
// locks. The process decides the command line, the model catalog and its
// keys, the tools offered and the environment children get
// (hostSettings); each session, when it opens, decides for its working
// directory pi's settings.json (the user's, and the project's when the
// project is trusted: trust.go), context files, prompt templates and
// skills (settings).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// settings are one session's, for its working directory.
type settings struct {
	*hostSettings
	cwd  string
	dirs []string // the other directories it works in (sessionOptions.dirs)
	// cfg are the session's flags: the host's, or those a served
	// client's hello gave it (sessionOptions.flags), in place of
	// hostSettings' own; tools, the tools they offer the model over
	// settings.json's defaultTools (toolsOf).
	cfg   cliConfig
	tools []*tool
	// projectTrusted is whether cwd's project is trusted (projectTrust):
	// its own resources load.
	projectTrusted bool
	// defaultToolEntries are settings.json's defaultTools, the project's
	// over the user's (a list of only +name and -name entries goes after
	// the one before, any other replaces it); nil when no file sets it.
	defaultToolEntries []string
	// modelThinkingLevels are settings.json's starting thinking levels of
	// models ("provider/id"), the project's keys over the user's.
	modelThinkingLevels map[string]string

	defaultProvider string
	defaultModel    string
	retry           retrySettings
	compaction      compactionSettings
	confirmTimeout  time.Duration
	httpIdle        time.Duration // settings.json httpIdleTimeoutMs; 0: none
	keepImageSize   bool          // settings.json images.autoResize false: images are not scaled (fitImage)
	blockImages     bool          // settings.json images.blockImages: the model is sent no image (withoutImages)
	shellPath       string        // settings.json shellPath: the shell rpi runs commands with ("": bash, looked up)
	// A new session's starting state (pi's keys): its thinking level
	// before a flag or the session file says otherwise, its queue modes,
	// and whether it compacts and retries on its own.
	thinkingLevel              string
	thinkingLevelSet           bool // a file sets defaultThinkingLevel: a model switch moves to it (switchModel)
	steeringMode, followUpMode string
	autoCompaction, autoRetry  bool
	// cacheWarming is the user's settings.json cacheWarming (pi reads it
	// from there only): "off", "streaming" or "idle" (the default).
	cacheWarming string
	shellPrefix  string // settings.json shellCommandPrefix: a line run before every shell command
	// enabledModels are settings.json's patterns of the models
	// cycle_model goes through when --models is not given; nil when
	// none is set or none matches a usable model (scopePatterns).
	enabledModels []string

	// thinkingBudgets are settings.json's: the user's budgets of the levels.
	thinkingBudgets thinkingBudgets

	// systemPrompt and appendSystemPrompt are the flags' or the files'
	// (systemPromptFiles); "" for none.
	systemPrompt, appendSystemPrompt string

	contextFiles  []contextFile
	slashCommands []slashCommand // prompt templates and skills
	notices       []string       // warnings for the client when the session opens

	// listed are the skills and prompts settings.json files list, the
	// user's then the project's; skillsHidden is enableSkillCommands
	// false (menuCommands).
	listed       []listedResources
	skillsHidden bool
}

// retrySettings are pi's settings.json "retry" block.
type retrySettings struct {
	MaxRetries  int   `json:"maxRetries"`
	BaseDelayMs int64 `json:"baseDelayMs"` // 64 bits on every system: a wait past an int32's ms saturates (retryBackoff)
	Enabled     *bool `json:"enabled"`     // read into settings.autoRetry
	// The waits' limits and the request timeout (takeLimits), ms as
	// BaseDelayMs is.
	MaxAgentDelayMs int64  `json:"maxAgentDelayMs"` // the backoff's longest wait; 0: the default
	MaxDelayMs      *int64 `json:"maxDelayMs"`      // pi's former name of provider.maxRetryDelayMs
	Provider        struct {
		TimeoutMs       int64  `json:"timeoutMs"`       // 0: none but httpIdleTimeoutMs
		MaxRetryDelayMs *int64 `json:"maxRetryDelayMs"` // nil: the default; 0: no limit
	} `json:"provider"`
}

// The defaults of retry.maxAgentDelayMs and retry.provider.maxRetryDelayMs
// (pi 1.6's).
const (
	defaultMaxAgentDelay = time.Minute
	defaultMaxServerWait = time.Minute
)

// takeLimits reads a file's retry.maxAgentDelayMs and retry.provider's
// timeoutMs and maxRetryDelayMs over r's. A value of 0 or less keeps
// r's, but a maxRetryDelayMs of 0 lifts the limit, as in pi; the former
// retry.maxDelayMs stands for it in a file that does not set it (pi
// moves it there).
func (r *retrySettings) takeLimits(file retrySettings) {
	if file.MaxAgentDelayMs > 0 {
		r.MaxAgentDelayMs = file.MaxAgentDelayMs
	}
	if file.Provider.TimeoutMs > 0 {
		r.Provider.TimeoutMs = file.Provider.TimeoutMs
	}
	limit := file.Provider.MaxRetryDelayMs
	if limit == nil {
		limit = file.MaxDelayMs
	}
	if limit != nil && *limit >= 0 {
		r.Provider.MaxRetryDelayMs = limit
	}
}

// agentDelayLimit is the longest wait of the backoff (maxAgentDelayMs).
func (r retrySettings) agentDelayLimit() time.Duration {
	if r.MaxAgentDelayMs > 0 {
		return msDuration(r.MaxAgentDelayMs)
	}
	return defaultMaxAgentDelay
}

// serverWaitLimit is the longest wait a server's Retry-After may ask
// for (provider.maxRetryDelayMs); 0: no limit.
func (r retrySettings) serverWaitLimit() time.Duration {
	if r.Provider.MaxRetryDelayMs == nil {
		return defaultMaxServerWait
	}
	return msDuration(*r.Provider.MaxRetryDelayMs)
}

// requestTimeout is how long a model server may take to send its
// answer's headers (provider.timeoutMs); 0: as long as httpIdleTimeoutMs
// lets it.
func (r retrySettings) requestTimeout() time.Duration { return msDuration(r.Provider.TimeoutMs) }

// compactionSettings are pi's settings.json "compaction" block.
type compactionSettings struct {
	ReserveTokens    int   `json:"reserveTokens"`
	KeepRecentTokens int   `json:"keepRecentTokens"`
	Enabled          *bool `json:"enabled"` // read into settings.autoCompaction
	// ModelOverrides (pi 1.6's) are the token settings of one model, by
	// its exact "provider/id"; each one set goes over the ordinary one.
	ModelOverrides map[string]compactionOverride `json:"modelOverrides"`
}

// compactionOverride is one model's entry of compaction.modelOverrides.
type compactionOverride struct {
	ReserveTokens    *int `json:"reserveTokens"`
	KeepRecentTokens *int `json:"keepRecentTokens"`
}

// forModel is c as it holds for model m (nil: none): with the tokens
// modelOverrides gives m.
func (c compactionSettings) forModel(m *model) compactionSettings {
	if m == nil {
		return c
	}
	o, ok := c.ModelOverrides[m.Provider+"/"+m.ID]
	if !ok {
		return c
	}
	if o.ReserveTokens != nil {
		c.ReserveTokens = *o.ReserveTokens
	}
	if o.KeepRecentTokens != nil {
		c.KeepRecentTokens = *o.KeepRecentTokens
	}
	return c
}

// takeOverrides merges a file's compaction.modelOverrides into c's, field
// by field, as pi merges the user's and the project's objects: a
// negative number is passed over (pi's must be whole and not negative).
func (c *compactionSettings) takeOverrides(file map[string]compactionOverride) {
	for key, o := range file {
		if c.ModelOverrides == nil {
			c.ModelOverrides = map[string]compactionOverride{}
		}
		merged := c.ModelOverrides[key]
		if o.ReserveTokens != nil && *o.ReserveTokens >= 0 {
			merged.ReserveTokens = o.ReserveTokens
		}
		if o.KeepRecentTokens != nil && *o.KeepRecentTokens >= 0 {
			merged.KeepRecentTokens = o.KeepRecentTokens
		}
		c.ModelOverrides[key] = merged
	}
}

// settingsFile is what rpi reads of pi's settings.json, plus its own
// confirmTimeoutMs. Absent fields keep the value they had.
type settingsFile struct {
	// ThinkingBudgets (pi's) go over the earlier file's level by level.
	ThinkingBudgets thinkingBudgets `json:"thinkingBudgets"`

	DefaultProvider string             `json:"defaultProvider"`
	DefaultModel    string             `json:"defaultModel"`
	Retry           retrySettings      `json:"retry"`
	Compaction      compactionSettings `json:"compaction"`
	ConfirmTimeout  int64              `json:"confirmTimeoutMs"`
	HTTPIdle        *int64             `json:"httpIdleTimeoutMs"`
	Images          struct {
		AutoResize  *bool `json:"autoResize"`
		BlockImages *bool `json:"blockImages"`
	} `json:"images"`
	ShellPath            string          `json:"shellPath"`
	ShellCommandPrefix   *string         `json:"shellCommandPrefix"`
	DefaultThinkingLevel string          `json:"defaultThinkingLevel"`
	SteeringMode         string          `json:"steeringMode"`
	FollowUpMode         string          `json:"followUpMode"`
	CacheWarming         json.RawMessage `json:"cacheWarming"`
	// EnabledModels replaces the patterns of the file before it, even
	// when empty; nil when the file does not set it.
	EnabledModels []string `json:"enabledModels"`
	SessionDir    string   `json:"sessionDir"` // read once, for the host (sessionDirSetting)
	HTTPProxy     string   `json:"httpProxy"`  // the user's file's alone: settingsProxy
	// DefaultProjectTrust is the user's file's alone (defaultProjectTrust).
	DefaultProjectTrust string `json:"defaultProjectTrust"`

	// DefaultTools is the tools a session starts with, as entries
	// (settings.defaultToolEntries); nil when the file does not set it.
	DefaultTools        []string          `json:"defaultTools"`
	ModelThinkingLevels map[string]string `json:"modelThinkingLevels"`

	// Skills and Prompts (pi's) are files or folders, loaded with those
	// of the other file (loadListed).
	Skills              skillsSetting `json:"skills"`
	Prompts             []string      `json:"prompts"`
	EnableSkillCommands *bool         `json:"enableSkillCommands"`
}

// defaultConfirmTimeout is how long an approval waits for the client
// before it counts as denied (settings.json confirmTimeoutMs).
const defaultConfirmTimeout = 5 * time.Minute

// defaultHTTPIdle is how long a model server may send nothing — no
// answer's headers, then no byte of its stream — before the call fails
// as a connection error, which is retried (pi 1.6's httpIdleTimeoutMs;
// 0 there turns it off).
const defaultHTTPIdle = 5 * time.Minute

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

// loadSettings reads what a session in cwd (and dirs, the other
// directories it works in) decides when it opens: the user's
// settings.json and, when the project is trusted (projectTrust), the
// project's (cwd's). Its notices are, in order: those of the settings
// files, the catalog's and enabledModels'; loadResources's follow them.
func loadSettings(h *hostSettings, cwd string, dirs []string, trace *startupTrace) *settings {
	set := &settings{hostSettings: h, cwd: cwd, dirs: slices.Clone(dirs), cfg: h.cfg,
		retry:          retrySettings{MaxRetries: 3, BaseDelayMs: 2000},
		compaction:     compactionSettings{ReserveTokens: 16384, KeepRecentTokens: 20000},
		confirmTimeout: defaultConfirmTimeout, httpIdle: defaultHTTPIdle,
		thinkingLevel: "medium", steeringMode: "one-at-a-time", followUpMode: "one-at-a-time", autoCompaction: true, autoRetry: true,
		cacheWarming: "idle"}
	cfg := h.cfg
	set.applySettingsFile(filepath.Join(h.agentDir, "settings.json"))
	trust := h.projectTrust(cwd)
	set.projectTrusted = trust.trusted
	if trust.notice != "" {
		set.notices = append(set.notices, trust.notice)
	}
	if set.projectTrusted {
		set.applySettingsFile(filepath.Join(cwd, ".pi", "settings.json"))
	}
	set.tools = toolsOf(cfg, defaultToolNames(set.defaultToolEntries))
	set.notices = append(set.notices, h.notices...)
	set.checkEnabledModels()
	trace.phase("settings.json")
	return set
}

// loadResources reads what a session's settings leave to its resources:
// the context files (of cwd, then of dirs), the system prompt files,
// templates and skills. It returns their notices.
func (set *settings) loadResources(trace *startupTrace) (notices []string) {
	h, cfg, cwd, dirs := set.hostSettings, set.cfg, set.cwd, set.dirs
	var skipped []string
	if !cfg.noContextFiles {
		set.contextFiles, skipped = loadContextFiles(h.agentDir, cwd, dirs...)
	}
	set.systemPrompt, set.appendSystemPrompt = systemPromptFiles(cfg, h.agentDir, cwd, set.projectTrusted, &skipped)
	trace.phase("context files (AGENTS.md)")
	kinds := resourceKinds{templates: !cfg.noPromptTemplates, skills: !cfg.noSkills}
	// As pi, so that the first of a name wins: the project's listed ones,
	// its .pi's, its .agents/skills' (cwd's first), then the user's listed
	// ones, the agent dir's and ~/.agents/skills'.
	var userAgents string
	if set.home != "" {
		userAgents = filepath.Join(set.home, ".agents", "skills")
	}
	// Each file is decided once, in pi's order: the project's listed
	// ones, the user's, then those found on their own.
	choice := newResourceChoice(set.listed, set.home)
	listed := func(location string) []slashCommand {
		var out []slashCommand
		for _, l := range set.listed {
			if l.location == location {
				out = append(out, loadListed(l, set.home, kinds, choice, &skipped)...)
			}
		}
		return out
	}
	found := listed("project")
	userListed := listed("user")
	if set.projectTrusted {
		found = append(found, loadResources(filepath.Join(cwd, ".pi"), "project", kinds, choice, &skipped)...)
		if kinds.skills {
			found = append(found, loadAgentsSkills(projectAgentsSkillDirs(cwd, userAgents), "project", choice, &skipped)...)
		}
	} else if notice := skippedNotice(cwd, userAgents); notice != "" {
		notices = append(notices, notice)
	}
	found = append(found, userListed...)
	found = append(found, loadResources(h.agentDir, "user", kinds, choice, &skipped)...)
	if kinds.skills && userAgents != "" {
		found = append(found, loadAgentsSkills([]string{userAgents}, "user", choice, &skipped)...)
	}
	found = append(found, cliResources(cfg, set.home, &skipped)...)
	skipped = append(skipped, choice.notes...)
	set.slashCommands = withoutDuplicates(found, &skipped)
	for _, s := range skipped {
		notices = append(notices, "Skipped "+s)
	}
	notices = append(notices, skillWarnings(set.slashCommands)...)
	trace.phase("skills, prompt templates")
	return notices
}

// readSettingsFile reads one settings.json: found is false when there
// is none, and err says why one that is there cannot be used.
func readSettingsFile(path string) (file settingsFile, found bool, err error) {
	data, err := readRegularFile(path, maxResourceBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return file, false, nil
	}
	if err == nil {
		err = unmarshalExact(data, &file)
	}
	if err != nil {
		return settingsFile{}, true, jsonError(data, err)
	}
	return file, true, nil
}

// isUserFile reports whether path is the user's settings.json (in the
// agent folder), not a project's.
func (set *settings) isUserFile(path string) bool {
	return path == filepath.Join(set.agentDir, "settings.json")
}

// applySettingsFile reads one settings.json over the values so far. A
// missing file changes nothing; an unreadable or invalid one is skipped
// with a warning.
func (set *settings) applySettingsFile(path string) {
	file, found, err := readSettingsFile(path)
	if !found {
		return
	}
	if err != nil {
		set.notices = append(set.notices, fmt.Sprintf("Ignored %s: %v", path, unwrapPathError(err)))
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
	set.retry.takeLimits(file.Retry)
	if file.Compaction.ReserveTokens > 0 {
		set.compaction.ReserveTokens = file.Compaction.ReserveTokens
	}
	if file.Compaction.KeepRecentTokens > 0 {
		set.compaction.KeepRecentTokens = file.Compaction.KeepRecentTokens
	}
	set.compaction.takeOverrides(file.Compaction.ModelOverrides)
	if file.ConfirmTimeout > 0 {
		set.confirmTimeout = msDuration(file.ConfirmTimeout)
	}
	if file.HTTPIdle != nil && *file.HTTPIdle >= 0 {
		set.httpIdle = msDuration(*file.HTTPIdle)
	}
	if file.Images.AutoResize != nil {
		set.keepImageSize = !*file.Images.AutoResize
	}
	if file.Images.BlockImages != nil {
		set.blockImages = *file.Images.BlockImages
	}
	if shell := file.ShellPath; shell != "" {
		if home, ok := expandTilde(shell, set.home); ok {
			shell = home
		}
		// A relative path would be found in the session's folder, which
		// the project chooses; a bare name is looked up on PATH.
		if filepath.IsAbs(shell) || !strings.ContainsRune(shell, '/') && !strings.ContainsRune(shell, filepath.Separator) {
			set.shellPath = shell
		} else {
			set.notices = append(set.notices, fmt.Sprintf("Ignored shellPath %q in %s: it must be an absolute path, one starting with ~/, or a program's name", file.ShellPath, path))
		}
	}
	if len(file.Skills.paths) > 0 || len(file.Prompts) > 0 {
		location := "project"
		if set.isUserFile(path) {
			location = "user"
		}
		set.listed = append(set.listed, listedResources{path, filepath.Dir(path), location, file.Skills.paths, file.Prompts})
	}
	enable := file.EnableSkillCommands
	if enable == nil {
		enable = file.Skills.enableCommand
	}
	if enable != nil {
		set.skillsHidden = !*enable
	}
	if file.ShellCommandPrefix != nil {
		set.shellPrefix = *file.ShellCommandPrefix
	}
	if file.EnabledModels != nil {
		set.enabledModels = file.EnabledModels
	}
	if tools := file.DefaultTools; tools != nil {
		if set.defaultToolEntries != nil && !slices.ContainsFunc(tools, func(e string) bool { return !isToolModifier(e) }) {
			tools = append(slices.Clip(set.defaultToolEntries), tools...)
		}
		set.defaultToolEntries = tools
	}
	for _, key := range slices.Sorted(maps.Keys(file.ModelThinkingLevels)) {
		if level := file.ModelThinkingLevels[key]; slices.Contains(thinkingLevels, level) {
			if set.modelThinkingLevels == nil {
				set.modelThinkingLevels = map[string]string{}
			}
			set.modelThinkingLevels[key] = level
		} else {
			set.notices = append(set.notices, fmt.Sprintf("Ignored modelThinkingLevels %q: %q in %s: it must be one of %s", key, level, path, strings.Join(thinkingLevels, ", ")))
		}
	}
	set.thinkingBudgets = set.thinkingBudgets.over(file.ThinkingBudgets)
	if file.Retry.Enabled != nil {
		set.autoRetry = *file.Retry.Enabled
	}
	if file.Compaction.Enabled != nil {
		set.autoCompaction = *file.Compaction.Enabled
	}
	switch level := file.DefaultThinkingLevel; {
	case slices.Contains(thinkingLevels, level):
		set.thinkingLevel, set.thinkingLevelSet = level, true
	case level != "":
		set.notices = append(set.notices, fmt.Sprintf("Ignored defaultThinkingLevel %q in %s: it must be one of %s", level, path, strings.Join(thinkingLevels, ", ")))
	}
	for _, m := range []struct {
		key, value string
		to         *string
	}{{"steeringMode", file.SteeringMode, &set.steeringMode}, {"followUpMode", file.FollowUpMode, &set.followUpMode}} {
		switch m.value {
		case "all", "one-at-a-time":
			*m.to = m.value
		case "":
		default:
			set.notices = append(set.notices, fmt.Sprintf(`Ignored %s %q in %s: it must be "all" or "one-at-a-time"`, m.key, m.value, path))
		}
	}
	set.takeCacheWarming(file.CacheWarming, path)
}

// takeCacheWarming takes a settings file's cacheWarming: the user's
// only, as pi reads it; a project's is said to be ignored.
func (set *settings) takeCacheWarming(raw json.RawMessage, path string) {
	if raw == nil {
		return
	}
	if !set.isUserFile(path) {
		set.notices = append(set.notices, fmt.Sprintf("Ignored cacheWarming in %s: only the user's settings.json (in the agent folder) sets it", path))
		return
	}
	var mode string
	if json.Unmarshal(raw, &mode) != nil {
		set.notices = append(set.notices, fmt.Sprintf(`Ignored cacheWarming in %s: it is not a string; it must be "off", "streaming" or "idle"`, path))
	} else if !slices.Contains([]string{"off", "streaming", "idle"}, mode) {
		set.notices = append(set.notices, fmt.Sprintf(`Ignored cacheWarming %q in %s: it must be "off", "streaming" or "idle"`, mode, path))
	} else {
		set.cacheWarming = mode
	}
}

// expandTilde is p with a leading ~ (alone, or before a separator) made
// the home folder, as pi's normalizePath has it; ok is false when p has
// such a ~ and there is no home folder, or none: p is then as it was.
func expandTilde(p, home string) (string, bool) {
	rest, ok := strings.CutPrefix(p, "~")
	if !ok || rest != "" && !os.IsPathSeparator(rest[0]) {
		return p, true
	}
	if home == "" {
		return p, false
	}
	return filepath.Join(home, rest), true
}

// checkEnabledModels keeps settings.json's enabledModels only where they
// scope cycle_model: not under --models, which replaces them whole (as in
// pi). A pattern that matches no usable model is a warning, with pi's
// text, as are one several providers match and an invalid ":level"
// (resolveScope); patterns none of which matches one scope nothing, as in pi
// (cycle_model goes through every usable model), where --models that
// match none fail startup (checkModelPatterns).
func (set *settings) checkEnabledModels() {
	if len(set.cfg.models) > 0 || len(set.enabledModels) == 0 {
		set.enabledModels = nil
		return
	}
	scope, warnings := resolveScope(set.enabledModels, scopeCandidates(set.catalog.usable(), nil))
	for _, w := range warnings {
		set.notices = append(set.notices, w.message)
	}
	if len(scope) == 0 {
		set.enabledModels = nil
	}
}

// scopePatterns are the patterns of the models cycle_model goes through
// and a session without --model starts within: --models', else
// settings.json's enabledModels; nil: every usable model.
func (set *settings) scopePatterns() []string {
	if len(set.cfg.models) > 0 {
		return set.cfg.models
	}
	return set.enabledModels
}

// sessionDirSetting is the folder new session files go in when
// --session-dir does not say, as pi 1.6 has it: PI_CODING_AGENT_SESSION_DIR,
// else settings.json's sessionDir (the project's over the user's, and the
// project's only when trusted, as all of its settings: pi reads it even
// from a project it does not trust); "" for pi's folder for the cwd in the
// agent directory. A leading ~ is the home folder, and a relative path is
// taken from the working directory, as --session-dir's is. It is read
// once, for the host's working directory, and holds for every session the
// host opens, as the flag does. user is the user's file, read at userPath
// (hostUserSettings). A settings.json that cannot be used gives none
// (loadSettings tells the client why).
func sessionDirSetting(cfg cliConfig, user settingsFile, userPath, home string, getenv func(string) string, trusted bool) (dir string, notices []string) {
	dir, from := getenv("PI_CODING_AGENT_SESSION_DIR"), fmt.Sprintf("PI_CODING_AGENT_SESSION_DIR %q", getenv("PI_CODING_AGENT_SESSION_DIR"))
	if dir == "" {
		if user.SessionDir != "" {
			dir, from = user.SessionDir, fmt.Sprintf("sessionDir %q in %s", user.SessionDir, userPath)
		}
		if trusted {
			path := filepath.Join(cfg.cwd, ".pi", "settings.json")
			if file, _, err := readSettingsFile(path); err == nil && file.SessionDir != "" {
				dir, from = file.SessionDir, fmt.Sprintf("sessionDir %q in %s", file.SessionDir, path)
			}
		}
	}
	if dir == "" {
		return "", nil
	}
	expanded, ok := expandTilde(dir, home)
	if !ok {
		return "", []string{fmt.Sprintf("Ignored %s: there is no home folder for its ~", from)}
	}
	return resolvePath(cfg.cwd, expanded), nil
}

// withoutVariables is environ minus the named variables; nil when none is
// left. On Windows a name is the same in any case (os.Getenv reads a key
// from anthropic_api_key as from ANTHROPIC_API_KEY): every spelling goes.
func withoutVariables(environ []string, names []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(names, func(n string) bool {
			return n == name || runtime.GOOS == "windows" && strings.EqualFold(n, name)
		}) {
			out = append(out, kv)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// withAgentMarkers is environ with the two variables that tell a child
// it runs under a coding agent, as pi 1.6 sets them for its own
// (AI_AGENT=pi there): AI_AGENT=rpi, and PI_CODING_AGENT=true (by which
// a child knows it runs inside pi), in place of any rpi inherited.
func withAgentMarkers(environ []string) []string {
	return append(withoutVariables(environ, []string{"AI_AGENT", "PI_CODING_AGENT"}), agentMarkers...)
}

// agentMarkers are the two variables withAgentMarkers sets, as NAME=value.
var agentMarkers = []string{"AI_AGENT=rpi", "PI_CODING_AGENT=true"}

// hostUserSettings is the user's settings.json in the agent directory dir
// and its path, read once for what the host takes of it (sessionDir,
// httpProxy). A file that cannot be used is none here, without a word: a
// session opening reads it again and says why.
func hostUserSettings(dir string) (settingsFile, string) {
	path := filepath.Join(dir, "settings.json")
	file, _, _ := readSettingsFile(path) // none when it cannot be used
	return file, path
}

// settingsProxy is the httpProxy of the user's settings.json, read at path
// (pi 1.6's), "" for none. Only the user's file counts, as in pi: a
// project's could send every model request, keys and all, through a
// server of its choosing. A value that is no URL is ignored with a notice
// that does not repeat it (it may hold a password): Go's requests would go
// without a proxy, as they do for such a HTTP_PROXY, without a word.
func settingsProxy(user settingsFile, path string) (proxy, notice string) {
	proxy = strings.TrimSpace(user.HTTPProxy)
	if proxy == "" {
		return "", ""
	}
	// As Go reads a proxy variable: as it is, else as a host with http://.
	if _, err := url.Parse(proxy); err != nil {
		if _, err := url.Parse("http://" + proxy); err != nil {
			return "", fmt.Sprintf("Ignored httpProxy in %s: it is not a URL (http://host:port, special characters of a user or password %%-encoded)", path)
		}
	}
	return proxy, ""
}

// proxyVariables are the variables settings.json's httpProxy fills, as pi
// fills them: each only where the environment has it in neither case (a
// user's http_proxy is read before HTTP_PROXY, here as in pi).
var proxyVariables = []string{"HTTP_PROXY", "HTTPS_PROXY"}

// withProxy is environ with proxy in proxyVariables where unset, for the
// children; setenv (nil for none) sets them in rpi's own environment, for
// its own requests (models, MCP servers, OAuth), which Go's
// ProxyFromEnvironment reads at the first. The same proxy reaches both,
// as pi's process.env does.
func withProxy(environ []string, proxy string, setenv func(name, value string) error) []string {
	if proxy == "" {
		return environ
	}
	for _, name := range proxyVariables {
		if slices.ContainsFunc(environ, func(kv string) bool { k, _, _ := strings.Cut(kv, "="); return strings.EqualFold(k, name) }) {
			continue
		}
		environ = append(slices.Clip(environ), name+"="+proxy)
		if setenv != nil {
			setenv(name, proxy)
		}
	}
	return environ
}

// skippedNotice is the warning sent at startup when the project holds
// resources that only a trusted project loads (projectResources); "" when there
// are none.
func skippedNotice(cwd, userAgents string) string {
	prompts, skills, agentsSkills, files := projectResources(cwd, userAgents)
	var parts []string
	if prompts > 0 {
		parts = append(parts, fmt.Sprintf("prompt templates: %d", prompts))
	}
	if skills > 0 {
		parts = append(parts, fmt.Sprintf("skills: %d", skills))
	}
	parts = append(parts, files...)
	var where []string
	if len(parts) > 0 {
		where = append(where, ".pi/ ("+strings.Join(parts, ", ")+")")
	}
	if agentsSkills > 0 {
		where = append(where, fmt.Sprintf(".agents/skills/ (skills: %d)", agentsSkills))
	}
	if len(where) == 0 {
		return ""
	}
	return "Skipped project resources in " + strings.Join(where, " and ") + ": start rpi with --approve (or trust the folder with pi's /trust) to load them."
}
