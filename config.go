package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The command line: rpi's flags and modes (config, parseArgs) and what
// --help says (docs/protocol.md#launch).

// usageText is --help's text on the system rpi runs on (made when asked:
// nothing is built at startup that the first line does not need).
func usageText() string { return helpText(runtime.GOOS) }

// helpText is --help's text on goos: the home folder's variable and the
// temp folder's differ on Windows.
func helpText(goos string) string {
	r := strings.NewReplacer("{agentDir}", "~/.pi/agent", "{home}", "HOME                 ",
		"{temp}", "TMPDIR                where rpi keeps its temp files", "{bash}\n", "")
	if goos == "windows" {
		r = strings.NewReplacer("{agentDir}", `%USERPROFILE%\.pi\agent`, "{home}", "USERPROFILE          ",
			"{temp}", "TMP, TEMP             where rpi keeps its temp files (the first one set)",
			"{bash}", "  PATH, ProgramFiles, LOCALAPPDATA\n                        where rpi looks for Git for Windows' bash.exe (not WSL's)")
	}
	return r.Replace(usageTemplate)
}

// piVersion is the pi release whose RPC rpi speaks; in pi-compatible mode
// --version prints it bare, as pi does (clients such as pi-acp parse it).
const piVersion = "1.6.0"

// cliConfig holds the command line.
type cliConfig struct {
	provider           string
	model              string
	models             []string // --models: the scope of cycle_model
	apiKey             string
	thinking           string
	tools              []string
	toolsGiven         bool
	excludeTools       []string
	noSession          bool
	sessionDir         string
	sessionFile        string
	sessionID          string
	forkFrom           string
	continueRecent     bool     // -c, --continue: the cwd's most recent session
	skills             []string // --skill: more skills, over --no-skills
	promptTemplates    []string // --prompt-template: more templates, over --no-prompt-templates
	name               string
	systemPrompt       string
	systemPromptGiven  bool     // --system-prompt given, "" too (which leaves SYSTEM.md unread)
	appendSystemPrompt []string // --append-system-prompt, each given (repeatable)
	noContextFiles     bool
	noSkills           bool
	noPromptTemplates  bool
	approve            bool
	noApprove          bool // --no-approve: the project is not trusted, whatever trust.json says
	noMCP              bool // --no-mcp: no MCP server connects
	confirm            []string
	cwd                string
	compat             bool // pi's shapes (docs/pi-compat.md)
	acp                bool // ACP mode (docs/acp.md): rpi acp, --mode acp, rpi agent stdio
	verbose            bool // --verbose or RPI_DEBUG=1: the client's protocol mistakes are told on stderr
	maxRunning         int  // --max-running: how many sessions' turns run at once (rpi acp's and rpi serve's sessions)
	serve              bool // rpi serve (docs/serve.md): a long-lived host on a socket
	served             serveConfig
	bridge             *bridgeConfig // rpi rpc --connect, rpi acp --connect (docs/serve.md#bridges); nil: none
}

// bridgeConfig holds a bridge's flags (docs/serve.md#bridges): where it
// connects, and what its hello says.
type bridgeConfig struct {
	connect string // --connect's value: "" (the default socket), unix:PATH, ws://…, auto, auto:unix:PATH
	attach  string // --attach: the session to attach to
	cursor  int    // --cursor: the seq of the last event seen (-1: none)
	observe bool   // --observe: attach as an observer
	// options are the flags for the session the host opens for it, by
	// their long names: a string for a valued flag, true for a boolean.
	options map[string]any
	ignored []string // the flags given that a bridge does not pass on, as typed
}

// serveConfig holds rpi serve's own flags (docs/serve.md).
type serveConfig struct {
	listen         []string      // --listen: unix:PATH or ws://HOST:PORT[/PATH]; the default socket when none
	replayBytes    int           // --replay-bytes: the events each live session keeps for replay
	clientQueue    int           // --client-queue: the bytes a client may fall behind before it is detached
	idleClose      time.Duration // --idle-close: a session with no client and nothing running closes after it
	maxConnections int           // --max-connections
	allowRemote    bool          // --allow-remote: a WebSocket listener on an address other than loopback
	allowOrigins   []string      // --allow-origin: browser origins a WebSocket connection may come from
}

// The defaults of rpi serve's flags.
const (
	defaultReplayBytes    = 16 << 20
	defaultClientQueue    = 8 << 20
	minClientQueue        = 64 << 10
	defaultIdleClose      = 30 * time.Minute
	defaultMaxConnections = 256
)

// defaultMaxRunning is how many sessions' turns run at once without
// --max-running.
const defaultMaxRunning = 8

// sessionFlagsGiven names the flags that choose a session, of those
// given, that --fork (withNoSession: --no-session too) or --session-id
// cannot go with: "--session, --no-session".
func sessionFlagsGiven(cfg cliConfig, v flagValues, withNoSession bool) string {
	var given []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"--session", cfg.sessionFile != ""}, {"--no-session", withNoSession && cfg.noSession},
		{"--continue", cfg.continueRecent}, {"--resume", v.resume}} {
		if f.set {
			given = append(given, f.name)
		}
	}
	return strings.Join(given, ", ")
}

// parseArgs reads the command line (and the environment's RPI_COMPAT and
// program name, which also select pi's shapes). action is "serve",
// "help" (--help, or rpi help) or "version" (--version, or rpi version).
func parseArgs(args []string, env runEnv) (cfg cliConfig, action string, err error) {
	subcommand, args := modeSubcommand(args)
	word := "" // rpi help, rpi version: --help and --version as words
	if subcommand == "" && len(args) > 0 && (args[0] == "help" || args[0] == "version") {
		word, args = args[0], args[1:]
	}
	cfg.maxRunning = defaultMaxRunning
	cfg.served = serveConfig{idleClose: defaultIdleClose, maxConnections: defaultMaxConnections}
	v := flagValues{cursor: -1, replayBytes: byteCount{n: defaultReplayBytes}, clientQueue: byteCount{n: defaultClientQueue}}
	rest, given, err := parseFlags(args, &cfg, &v)
	cfg.systemPromptGiven = slices.Contains(given, "system-prompt")
	cfg.verbose = cfg.verbose || env.getenv("RPI_DEBUG") == "1"
	cfg.acp = subcommand == "acp" || v.mode == "acp" // known this far: an error goes out as that mode's
	cfg.serve = subcommand == "serve"
	if err != nil {
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
			return cfg, "", fmt.Errorf("Unknown flag: %s (see rpi --help)", typedFlag(args, name))
		}
		// parseFlags names a flag with one dash, as the flag package does:
		// name it as typed.
		named := regexp.MustCompile(`(argument: | for | for flag )-([\w-]+)`)
		text := named.ReplaceAllStringFunc(err.Error(), func(m string) string {
			i := strings.LastIndex(m, " -")
			return m[:i+1] + typedFlag(args, m[i+2:])
		})
		return cfg, "", fmt.Errorf("Invalid arguments: %s (see rpi --help)", text)
	}
	switch {
	case v.compat != "" && v.compat != "pi" && v.compat != "rpi":
		return cfg, "", fmt.Errorf("Invalid --compat %q: must be pi or rpi", v.compat)
	case v.compat != "":
		cfg.compat = v.compat == "pi"
	default:
		cfg.compat = env.getenv("RPI_COMPAT") == "pi" || env.program == "pi"
	}
	if v.help || word == "help" {
		return cfg, "help", nil
	}
	if v.showVersion || word == "version" {
		return cfg, "version", nil
	}
	if subcommand == "" {
		subcommand, rest = modeSubcommand(rest)
	}
	if len(rest) > 0 {
		return cfg, "", fmt.Errorf("Unexpected argument: %s (see rpi --help)", rest[0])
	}
	cfg.acp = subcommand == "acp" || v.mode == "acp"
	cfg.serve = subcommand == "serve"
	cfg.served.replayBytes, cfg.served.clientQueue = v.replayBytes.n, v.clientQueue.n
	switch {
	case cfg.serve && v.mode != "": // before the others, which would name a SERVE mode or refuse --mode serve
		return cfg, "", errors.New("Conflicting mode: rpi serve takes no --mode (a connection's first message picks its wire)")
	case subcommand != "" && v.mode != "" && v.mode != subcommand:
		return cfg, "", fmt.Errorf("Conflicting mode: the %s subcommand runs %s mode, but --mode %s was given", subcommand, strings.ToUpper(subcommand), v.mode)
	case subcommand == "" && v.mode == "":
		return cfg, "", errors.New("No mode given: run `rpi rpc` or `rpi --mode rpc` (`rpi acp` for an editor, `rpi serve` for a long-lived host)")
	case v.mode != "" && v.mode != "rpc" && v.mode != "acp":
		return cfg, "", fmt.Errorf("Unsupported mode: %s (rpi speaks rpc and acp)", v.mode)
	case cfg.serve && (cfg.sessionFile != "" || cfg.sessionID != "" || cfg.forkFrom != "" || cfg.name != ""):
		return cfg, "", errors.New("Conflicting flags: --session, --session-id, --fork and --name open one session; rpi serve opens a session for each client (a client's hello options name one)")
	case !cfg.serve && serveFlagGiven(given):
		return cfg, "", errors.New("Conflicting flags: --listen, --replay-bytes, --client-queue, --idle-close, --max-connections, --allow-remote and --allow-origin are rpi serve's")
	case cfg.acp && (cfg.sessionFile != "" || cfg.sessionID != "" || cfg.forkFrom != "" || cfg.name != ""):
		return cfg, "", errors.New("Conflicting flags: --session, --session-id, --fork and --name are rpc mode's; in ACP mode the editor opens sessions (session/new, session/load)")
	case cfg.approve && cfg.noApprove:
		return cfg, "", errors.New("Conflicting flags: --approve and --no-approve")
	case (cfg.acp || cfg.serve) && (cfg.continueRecent || v.resume):
		return cfg, "", errors.New("Conflicting flags: --continue and --resume are rpc mode's")
	case cfg.forkFrom != "" && (cfg.sessionFile != "" || cfg.noSession || cfg.continueRecent || v.resume):
		return cfg, "", fmt.Errorf("Conflicting flags: --fork cannot be combined with %s", sessionFlagsGiven(cfg, v, true))
	case cfg.sessionID != "" && (cfg.sessionFile != "" || cfg.continueRecent || v.resume):
		return cfg, "", fmt.Errorf("Conflicting flags: --session-id cannot be combined with %s", sessionFlagsGiven(cfg, v, false))
	case v.resume && !cfg.noSession && cfg.sessionFile == "":
		return cfg, "", errors.New("--resume picks a session in a terminal, which rpc mode has not: --continue opens the cwd's most recent one, --session ID (or the start of it) any")
	case cfg.sessionID != "" && !validSessionID(cfg.sessionID):
		return cfg, "", fmt.Errorf("Invalid --session-id %q: letters, digits, '.', '_' and '-', starting and ending with a letter or digit, at most %d of them", cfg.sessionID, maxSessionIDLength)
	}
	switch {
	case cfg.serve && cfg.maxRunning == 0:
		cfg.maxRunning = maxSessions // no limit: every open session may run
	case cfg.maxRunning < 1 || cfg.maxRunning > maxSessions:
		return cfg, "", fmt.Errorf("Invalid --max-running %d: from 1 to %d sessions' turns at once", cfg.maxRunning, maxSessions)
	}
	if v.clientQueue.n < minClientQueue {
		return cfg, "", fmt.Errorf("Invalid --client-queue %s: at least 64KiB", &v.clientQueue)
	}
	if err := cfg.served.check(); err != nil {
		return cfg, "", err
	}
	if cfg.thinking != "" && !slices.Contains(thinkingLevels, cfg.thinking) {
		return cfg, "", fmt.Errorf("Invalid --thinking %q: must be one of %s", cfg.thinking, strings.Join(thinkingLevels, ", "))
	}
	if cfg.tools, err = toolsFlag("--tools", v.tools); err != nil {
		return cfg, "", err
	}
	cfg.toolsGiven = v.tools != "" || v.noTools || v.noBuiltinTools
	if v.noTools || v.noBuiltinTools {
		// -nbt empties the default selection as --no-tools does: rpi has
		// no extension tools for it to keep, and MCP tools stay with both.
		cfg.tools = withNoTools(cfg.tools)
	}
	if cfg.excludeTools, err = toolList("--exclude-tools", v.exclude, false); err != nil {
		return cfg, "", err
	}
	if cfg.confirm, err = toolList("--confirm", v.confirm, true); err != nil {
		return cfg, "", err
	}
	for _, m := range strings.Split(v.models, ",") {
		if m = strings.TrimSpace(m); m != "" {
			cfg.models = append(cfg.models, m)
		}
	}
	if strings.TrimSpace(cfg.name) == "" && cfg.name != "" {
		return cfg, "", errors.New("Invalid --name: must not be blank")
	}
	cfg.name = strings.TrimSpace(cfg.name) // as pi 1.6 takes it
	if cfg.cwd == "" {
		if cfg.cwd, err = os.Getwd(); err != nil {
			return cfg, "", fmt.Errorf("Cannot determine the working directory: %v", err)
		}
	}
	if cfg.cwd, err = filepath.Abs(cfg.cwd); err != nil {
		return cfg, "", fmt.Errorf("Invalid --cwd: %v", err)
	}
	switch info, err := os.Stat(cfg.cwd); {
	case errors.Is(err, fs.ErrNotExist):
		return cfg, "", fmt.Errorf("Invalid --cwd: %s does not exist", cfg.cwd)
	case err != nil:
		return cfg, "", fmt.Errorf("Invalid --cwd: %s: %v", cfg.cwd, unwrapPathError(err))
	case !info.IsDir():
		return cfg, "", fmt.Errorf("Invalid --cwd: %s is not a directory", cfg.cwd)
	}
	if cfg.bridge, err = bridgeFlags(given, args, cfg, &v); err != nil {
		return cfg, "", err
	}
	return cfg, "serve", nil
}

// flagValues holds what the flags set besides cfg's fields: the values
// parseArgs checks or combines before they reach cfg, and those it drops
// (pi's flags that change nothing in rpi).
type flagValues struct {
	mode, tools, exclude, models, confirm, compat string
	noTools, help, showVersion                    bool
	noBuiltinTools, resume                        bool // -nbt, --resume
	connect, attach                               string
	cursor                                        int
	observe                                       bool
	replayBytes, clientQueue                      byteCount
	ignored                                       string // --theme, --use-theme, --tui-mode, --extension (each repeatable)
	ignoredBool                                   bool   // --no-themes, --offline, --no-extensions
}

// flagTarget is where the flag called name (without its dashes) puts its
// value: a *string, *bool, *int, *time.Duration, *byteCount or
// *stringList in cfg or v. nil: rpi has no such flag. A case lists a
// flag's long and short names, or flags that share a value.
func flagTarget(name string, cfg *cliConfig, v *flagValues) any {
	switch name {
	case "mode":
		return &v.mode
	case "provider":
		return &cfg.provider
	case "model":
		return &cfg.model
	case "models":
		return &v.models
	case "api-key":
		return &cfg.apiKey
	case "thinking":
		return &cfg.thinking
	case "tools", "t":
		return &v.tools
	case "no-tools", "nt":
		return &v.noTools
	case "no-builtin-tools", "nbt":
		return &v.noBuiltinTools
	case "exclude-tools", "xt":
		return &v.exclude
	case "no-session":
		return &cfg.noSession
	case "session-dir":
		return &cfg.sessionDir
	case "session":
		return &cfg.sessionFile
	case "session-id":
		return &cfg.sessionID
	case "fork":
		return &cfg.forkFrom
	case "continue", "c":
		return &cfg.continueRecent
	case "resume", "r":
		return &v.resume
	case "name", "n":
		return &cfg.name
	case "system-prompt":
		return &cfg.systemPrompt
	case "append-system-prompt":
		return (*stringList)(&cfg.appendSystemPrompt)
	case "no-context-files", "nc":
		return &cfg.noContextFiles
	case "no-skills", "ns":
		return &cfg.noSkills
	case "no-prompt-templates", "np":
		return &cfg.noPromptTemplates
	case "skill":
		return (*stringList)(&cfg.skills)
	case "prompt-template":
		return (*stringList)(&cfg.promptTemplates)
	case "approve", "a":
		return &cfg.approve
	case "no-approve", "na":
		return &cfg.noApprove
	case "confirm":
		return &v.confirm
	case "cwd":
		return &cfg.cwd
	case "compat":
		return &v.compat
	case "no-mcp":
		return &cfg.noMCP
	case "connect":
		return &v.connect
	case "attach":
		return &v.attach
	case "cursor":
		return &v.cursor
	case "observe":
		return &v.observe
	case "verbose":
		return &cfg.verbose
	case "max-running":
		return &cfg.maxRunning
	case "listen":
		return (*stringList)(&cfg.served.listen)
	case "replay-bytes":
		return &v.replayBytes
	case "client-queue":
		return &v.clientQueue
	case "idle-close":
		return &cfg.served.idleClose
	case "max-connections":
		return &cfg.served.maxConnections
	case "allow-remote":
		return &cfg.served.allowRemote
	case "allow-origin":
		return (*stringList)(&cfg.served.allowOrigins)
	// pi's presentation flags: accepted so that pi's clients can launch
	// rpi with pi's arguments; rpi has no themes or extensions, and never
	// goes online on its own.
	case "no-themes", "offline", "no-extensions", "ne":
		return &v.ignoredBool
	case "theme", "use-theme", "tui-mode", "extension", "e":
		return &v.ignored
	case "help", "h":
		return &v.help
	case "version", "v":
		return &v.showVersion
	}
	return nil
}

// parseFlags reads the flags at the front of args into their targets
// (flagTarget), as Go's flag package would. It returns the arguments
// after the flags, and the names of the flags given, in their order,
// without dashes and as typed (t and tools are two names). -x and --x are
// one flag; a value is --x=v or --x v, a boolean's only --x=v (--x alone
// is true); "--" ends the flags, and so does "-" or an argument not
// starting with "-". Its errors are the flag package's, word for word,
// naming a flag with one dash; a value that does not parse is stored all
// the same, as there (false, 0s, 0 or the int's limit).
//
// A flag.FlagSet did this before: defining its sixty-odd flags (a map,
// and a Flag for each) cost, at every start, about as much as all the
// rest of reading the command line.
func parseFlags(args []string, cfg *cliConfig, v *flagValues) (rest, given []string, err error) {
	args = connectValue(args, cfg, v)
	for len(args) > 0 {
		arg := args[0]
		if len(arg) < 2 || arg[0] != '-' {
			break
		}
		name := arg[1:]
		if arg == "--" {
			return args[1:], given, nil
		} else if arg[1] == '-' {
			name = arg[2:]
		}
		if name[0] == '-' || name[0] == '=' {
			return args, given, fmt.Errorf("bad flag syntax: %s", arg)
		}
		args = args[1:]
		name, value, hasValue := strings.Cut(name, "=")
		target := flagTarget(name, cfg, v)
		if target == nil {
			return args, given, fmt.Errorf("flag provided but not defined: -%s", name)
		}
		if p, ok := target.(*bool); ok {
			if hasValue {
				b, err := strconv.ParseBool(value)
				*p = b // false when value does not parse, as with the flag package
				if err != nil {
					return args, given, fmt.Errorf("invalid boolean value %q for -%s: parse error", value, name)
				}
			} else {
				*p = true
			}
			given = append(given, name)
			continue
		}
		if !hasValue {
			if len(args) == 0 {
				return args, given, fmt.Errorf("flag needs an argument: -%s", name)
			}
			value, args = args[0], args[1:]
		}
		if err := setFlag(target, value); err != nil {
			return args, given, fmt.Errorf("invalid value %q for flag -%s: %v", value, name, err)
		}
		given = append(given, name)
	}
	return args, given, nil
}

// setFlag stores the value of a flag that takes one in target (see
// flagTarget), with the flag package's errors for a value that does not
// parse.
func setFlag(target any, value string) error {
	switch p := target.(type) {
	case *string:
		*p = value
	case *int:
		n, err := strconv.ParseInt(value, 0, strconv.IntSize)
		*p = int(n)
		if errors.Is(err, strconv.ErrRange) {
			return errors.New("value out of range")
		} else if err != nil {
			return errors.New("parse error")
		}
	case *time.Duration:
		d, err := time.ParseDuration(value)
		*p = d
		if err != nil {
			return errors.New("parse error")
		}
	case *byteCount:
		return p.Set(value)
	case *stringList:
		return p.Set(value)
	default:
		panic("setFlag: a target flagTarget does not give")
	}
	return nil
}

// flagText is the value of a flag, from its target (see flagTarget), as
// text: what a bridge passes on.
func flagText(target any) string {
	switch p := target.(type) {
	case *string:
		return *p
	case *bool:
		return strconv.FormatBool(*p)
	case *int:
		return strconv.Itoa(*p)
	case *time.Duration:
		return p.String()
	case *byteCount:
		return p.String()
	case *stringList:
		return p.String()
	}
	panic("flagText: a target flagTarget does not give")
}

// modeSubcommand takes the subcommand that names a mode off the front of
// args: rpc, acp, or the original system's spelling of ACP mode, agent
// stdio. It returns "" and args when there is none.
func modeSubcommand(args []string) (string, []string) {
	switch {
	case len(args) > 0 && (args[0] == "rpc" || args[0] == "acp" || args[0] == "serve"):
		return args[0], args[1:]
	case len(args) > 1 && args[0] == "agent" && args[1] == "stdio":
		return "acp", args[2:]
	}
	return "", args
}

// typedFlag is flag name as args spell it (-t, --thinking), else as
// --help does: one dash for a name of one or two letters, two for longer.
func typedFlag(args []string, name string) string {
	for _, arg := range args {
		arg, _, _ = strings.Cut(arg, "=")
		if arg == "-"+name || arg == "--"+name {
			return arg
		}
	}
	if len(name) <= 2 {
		return "-" + name
	}
	return "--" + name
}

// maxSessionIDLength is the longest --session-id: its file's name
// ("<timestamp>_<id>.jsonl", 31 more) and its loops' (".loops.json", 11
// more again) stay within the 255 bytes a file system takes, so that no
// session starts whose every write fails.
const maxSessionIDLength = 200

// validSessionID is pi's rule for --session-id, and a length a file name
// holds (maxSessionIDLength).
func validSessionID(id string) bool {
	if len(id) > maxSessionIDLength {
		return false
	}
	for i, c := range id {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && ((c != '.' && c != '_' && c != '-') || i == 0 || i == len(id)-1) {
			return false
		}
	}
	return id != ""
}

// toolList splits a comma-separated list of tool names and checks each;
// with mcp, "mcp" (every MCP tool) and patterns mcp__NAME__* (a server's
// tools) are taken too.
func toolList(flagName, list string, mcp bool) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	var names []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		mcpPattern := mcp && (name == "mcp" || strings.HasPrefix(name, "mcp__") || slices.Contains(mcpResourceToolNames, name))
		if toolNamed(name) == nil && !mcpPattern {
			return nil, fmt.Errorf("Invalid %s: unknown tool %q (known: %s)", flagName, name, strings.Join(toolNames(), ", "))
		}
		names = append(names, name)
	}
	return names, nil
}

// toolsFlag is the entries of --tools (or a hello's options.tools):
// tools' names, which replace the default tools, or only +name and -name
// entries, which add to them and take from them (toolsOf).
func toolsFlag(flagName, list string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	entries := strings.Split(list, ",")
	names := make([]string, len(entries))
	for i, e := range entries {
		e = strings.TrimSpace(e)
		entries[i], names[i] = e, e
		if isToolModifier(e) {
			names[i] = e[1:]
		}
	}
	if n := len(slices.DeleteFunc(slices.Clone(entries), isToolModifier)); n > 0 && n < len(entries) {
		return nil, fmt.Errorf("Invalid %s: tool names cannot be mixed with +name or -name entries", flagName)
	}
	if _, err := toolList(flagName, strings.Join(names, ","), false); err != nil {
		return nil, err
	}
	return entries, nil
}

const usageTemplate = `rpi: a headless coding-agent host speaking JSONL on stdin/stdout.

Usage:
  rpi rpc [flags]          serve the RPC protocol (same as --mode rpc)
  rpi --mode rpc [flags]
  rpi acp [flags]          serve the Agent Client Protocol, for editors (same as
                           --mode acp and rpi agent stdio; docs/acp.md)
  rpi serve [flags]        a long-lived host on a socket: clients attach to its
                           sessions, leave, and attach again (docs/serve.md)
  rpi rpc --connect [ADDR] [flags], rpi acp --connect [ADDR]
                           a bridge: stdio copied to and from a running rpi serve
  rpi help | --help        this text
  rpi version | --version  rpi's version, and the commit it was built from

Flags:
  --provider NAME               model provider
  --model ID                    model (provider/id, or id with --provider; optional :thinking suffix)
  --models a,b                  the models cycle_model goes through (globs, or ids matched as pi does;
                                each with an optional :thinking suffix)
  --api-key KEY                 API key for the provider
  --thinking LEVEL              off, minimal, low, medium, high, xhigh or max
  -t, --tools a,b,c             the model's tools (default read,bash,edit,write,todo,process,ask_user
                                or settings.json's defaultTools; also ls, grep, find); with only
                                +NAME,-NAME entries, tools added to and taken from that default
  -nt, --no-tools               no tools by default (with --tools, its tools; +NAME adds to none)
  -nbt, --no-builtin-tools      the same in rpi (MCP tools stay with both)
  -xt, --exclude-tools a,b      leave these tools out
  --no-session                  keep the session in memory only
  --session-dir DIR             where session files go
  --session FILE|ID             open this session file, or the session with this id (or id prefix)
  -c, --continue                open the cwd's most recent session (a new one when none)
  --session-id ID               the cwd's session with this id (made when missing;
                                with --fork, the copy's id)
  --fork FILE|ID                start a new session in the cwd as a copy of that one
  -n, --name NAME               session name
  --system-prompt TEXT          replace the base system prompt: the text, or the file it names
                                ("": the base text, without SYSTEM.md)
  --append-system-prompt TEXT   add to the system prompt, repeatable: the text, or the file it names
  -nc, --no-context-files       do not read AGENTS.md / CLAUDE.md
  -ns, --no-skills              no skills
  -np, --no-prompt-templates    no prompt templates
  --skill PATH                  load this skill file or folder too, repeatable (also with -ns)
  --prompt-template PATH        load this template file or folder too, repeatable (also with -np)
  -a, --approve                 trust the project: load its own resources from ./.pi/ (settings, templates, skills)
  -na, --no-approve             do not, whatever trust.json or defaultProjectTrust says
  --confirm TOOLS               ask the client before running these tools (mcp: every MCP
                                tool; mcp__NAME__*: one server's)
  --no-mcp                      connect no MCP server (mcp.json's, or an editor's)
  --cwd DIR                     working directory (default: the current one)
  --compat pi                   pi 1.6's shapes (flat events; also RPI_COMPAT=pi, or run as "pi")
  --max-running N               rpi acp, rpi serve: how many sessions' turns run at once (default 8); a prompt past them waits
  --verbose                     rpi acp: the client's protocol mistakes on stderr (also RPI_DEBUG=1)
  --listen ADDR                 rpi serve: unix:PATH or ws://HOST:PORT[/PATH], repeatable
                                (default unix:<agent dir>/rpi.sock)
  --replay-bytes N              rpi serve: events kept per session for replay (default 16MiB)
  --client-queue N              rpi serve: how far a client may fall behind before it is detached (default 8MiB)
  --idle-close D                rpi serve: close a session with no client and nothing running after D (default 30m)
  --max-connections N           rpi serve: connections at once (default 256)
  --allow-remote                rpi serve: a ws:// listener on an address other than loopback
  --allow-origin ORIGIN         rpi serve: a browser origin WebSocket clients may come from, repeatable
  --connect [ADDR]              rpi rpc, rpi acp: a bridge, stdio to and from a running rpi serve
                                at ADDR (unix:PATH; nothing: the default socket; auto or
                                auto:unix:PATH: start rpi serve when none listens); docs/serve.md
  --attach ID                   rpi rpc --connect: attach to the host's session ID
  --cursor N                    rpi rpc --connect --attach: replay the events after seq N
  --observe                     rpi rpc --connect --attach: watch the session, as an observer
  -h, --help                    this text (also: rpi help)
  -v, --version                 rpi's version and the commit and date it was built from
                                (pi's version, bare, with pi's shapes; also: rpi version)
  Accepted for pi's clients, without effect: --no-themes, --theme X, --use-theme X,
  --tui-mode X, --offline, -ne/--no-extensions, -e/--extension X. -r/--resume (pi's
  session picker) is an error: rpc mode has no terminal to pick in.

Environment:
  PI_CODING_AGENT_DIR   models.json, auth.json, settings.json, sessions (default {agentDir})
  PI_CODING_AGENT_SESSION_DIR
                        where session files go without --session-dir (over settings.json's sessionDir)
  {home} your home folder; rpi needs it or PI_CODING_AGENT_DIR
  OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, GROQ_API_KEY, …
                        provider keys (all of them in docs/models.md)
  OPENAI_BASE_URL       another base URL for the openai provider
  PI_FAUX_RESPONSE      what the offline model faux/faux-1 answers (--model faux/faux-1)
  PI_CACHE_RETENTION=long
                        warm a model's long prompt cache tier (models.json promptCache)
  RPI_COMPAT=pi         pi 1.6's shapes, as --compat pi
  RPI_TRACE_STARTUP=1   how long each phase of startup took, and its page faults, on stderr
  RPI_SERVE_TOKEN       rpi serve: the token WebSocket clients give (else <agent dir>/serve-token)
  {temp}
{bash}

Without --model, rpi starts with settings.json's default or the first model
that can be used (docs/settings.md); "model":null in get_state means none
can.

The documentation is not in this binary: it is README.md and docs/ in rpi's
source repository, at the commit rpi --version names. The protocol:
docs/protocol.md and docs/commands.md; writing a client: docs/clients.md.

Example:
  echo '{"id":"1","type":"get_state"}' | rpi rpc --no-session
  PI_FAUX_RESPONSE='Hello from rpi' rpi rpc --model faux/faux-1
`

// rpiVersion is rpi's release: --version prints it with the commit it was
// built from (versionLine), and get_capabilities, ACP's agentInfo and
// MCP's clientInfo report it alone.
const rpiVersion = "0.2.0"

// versionLine is what --version prints: rpi's version and, from the
// build information Go embeds (go build in a git clone), the commit it
// was built from and that commit's date, "dirty" when the tree had
// changes not committed; "devel" without that information (go run, go
// test, a build outside a clone, -buildvcs=false).
func versionLine(info *debug.BuildInfo) string {
	var revision, date string
	dirty := false
	if info != nil {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				date = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if revision == "" {
		return "rpi " + rpiVersion + " (devel)"
	}
	build := "commit " + revision[:min(len(revision), 12)]
	if date != "" {
		build += ", " + date
	}
	if dirty {
		build += ", dirty"
	}
	return "rpi " + rpiVersion + " (" + build + ")"
}

// stringList is a flag that may be given many times, each value kept.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// byteCount is a flag that counts bytes: a plain integer, or one with a
// KiB or MiB suffix, up to maxByteCount. It keeps the text given, so that
// an error names the value as the user wrote it (8MiB, not 8388608).
type byteCount struct {
	n    int
	text string // as given; "" for a default
}

// maxByteCount is the largest byteCount: 1 TiB, or what an int holds
// where that is less (32-bit systems).
const maxByteCount = min(1<<40, math.MaxInt)

func (b *byteCount) String() string { return cmp.Or(b.text, strconv.Itoa(b.n)) }

func (b *byteCount) Set(given string) error {
	v, unit := given, 1
	switch {
	case strings.HasSuffix(v, "KiB"):
		v, unit = strings.TrimSuffix(v, "KiB"), 1<<10
	case strings.HasSuffix(v, "MiB"):
		v, unit = strings.TrimSuffix(v, "MiB"), 1<<20
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxByteCount/unit {
		return errors.New("a byte count: an integer, or one with a KiB or MiB suffix")
	}
	*b = byteCount{n * unit, given}
	return nil
}

// serveFlagGiven reports whether one of rpi serve's own flags was given
// (given: parseFlags's names).
func serveFlagGiven(given []string) bool {
	for _, name := range given {
		switch name {
		case "listen", "replay-bytes", "client-queue", "idle-close", "max-connections", "allow-remote", "allow-origin":
			return true
		}
	}
	return false
}

// check refuses values of rpi serve's flags it cannot work with.
func (c serveConfig) check() error {
	switch {
	case c.idleClose <= 0:
		return fmt.Errorf("Invalid --idle-close %v: a duration above zero, as 30s or 30m", c.idleClose)
	case c.maxConnections < 1:
		return fmt.Errorf("Invalid --max-connections %d: at least 1", c.maxConnections)
	}
	for _, text := range c.listen {
		addr, err := parseListenAddress(text)
		if err != nil {
			return err
		}
		if addr.ws != nil && !loopbackHost(addr.ws.Hostname()) && !c.allowRemote {
			return fmt.Errorf("Invalid --listen %s: %s is not this machine's loopback address; listening there needs --allow-remote", text, addr.ws.Hostname())
		}
	}
	return nil
}

// listenAddress is one --listen value: a unix socket's path, or a
// WebSocket URL.
type listenAddress struct {
	unix string   // absolute path; "" for a WebSocket
	ws   *url.URL // ws://HOST:PORT[/PATH]
}

func (a listenAddress) String() string {
	if a.ws != nil {
		return a.ws.String()
	}
	return "unix:" + a.unix
}

// parseListenAddress reads unix:PATH (a relative path is the working
// directory's) or ws://HOST:PORT[/PATH].
func parseListenAddress(addr string) (listenAddress, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if path == "" {
			return listenAddress{}, fmt.Errorf("Invalid --listen %q: unix:PATH needs a path", addr)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return listenAddress{}, fmt.Errorf("Invalid --listen %q: %v", addr, err)
		}
		return listenAddress{unix: abs}, nil
	}
	u, err := url.Parse(addr)
	if err != nil || u.Scheme != "ws" || u.Host == "" || u.Port() == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return listenAddress{}, fmt.Errorf("Invalid --listen %q: unix:PATH or ws://HOST:PORT[/PATH]", addr)
	}
	return listenAddress{ws: u}, nil
}

// loopbackHost reports whether host names this machine only.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
