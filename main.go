// Command rpi hosts a coding agent without a terminal and speaks a
// line-delimited JSON protocol on stdin/stdout. See README.md and docs/.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"time"
)

// version is what --version and get_capabilities report.
const version = "0.2.0"

func main() {
	hideOwnEnvironment() // the watchdog too: no other process reads its memory
	if dir, ok := os.LookupEnv(watchdogEnv); ok {
		forgetOwnMemory() // the watchdog has no keys to overwrite
		os.Exit(runWatchdog(os.Stdin, dir))
	}
	stop := make(chan os.Signal, 1)
	signalsReady := watchSignals(stop)
	trace := newStartupTrace(os.Stderr)
	// rpi parses a copy of its arguments: the originals, which the kernel
	// shows as /proc/<rpi>/cmdline to every process, lose their keys.
	args := make([]string, len(os.Args)-1)
	for i, arg := range os.Args[1:] {
		args[i] = strings.Clone(arg)
	}
	if err := hideKeyArguments(); err != nil {
		fmt.Fprintf(os.Stderr, "rpi: cannot hide --api-key from other processes: %v\n", err)
	}
	// A client reading a flood of output then wakes rpi (and rpi it) far
	// less often; only a hint, and nothing when stdout is not a pipe.
	growPipe(os.Stdout)
	env := hostEnvironment()
	env.trace = trace
	env.signalsReady = signalsReady
	env.exit = os.Exit
	env.hideVariables = hideOwnVariables
	trace.phase("main: environment")
	os.Exit(run(args, env, os.Stdin, os.Stdout, os.Stderr, stop))
}

// keyArguments says which of a command line's arguments hold a key, and
// where in each the key starts: all of K in --api-key K, what follows the
// "=" in --api-key=K.
func keyArguments(args []string) map[int]int {
	keys := map[int]int{}
	for i, arg := range args {
		name, _, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		switch {
		case !strings.HasPrefix(arg, "-") || name != "api-key":
		case hasValue:
			keys[i] = strings.Index(arg, "=") + 1
		case i+1 < len(args):
			keys[i+1] = 0
		}
	}
	return keys
}

// hideOwnVariables removes the variables rpi read keys from from its own
// environment, both the runtime's copy and the memory the kernel shows as
// /proc/<rpi>/environ, once the keys are read.
func hideOwnVariables(names []string) {
	set := variablesNamed(os.Environ(), names) // nothing else to overwrite
	for _, name := range names {
		os.Unsetenv(name)
	}
	if len(set) == 0 {
		forgetOwnMemory()
		return
	}
	if err := hideVariables(set); err != nil {
		fmt.Fprintf(os.Stderr, "rpi: cannot clear the key variables in rpi's own memory: %v\n", err)
	}
	forgetOwnMemory() // the last of what rpi overwrites in its own memory
}

// variablesNamed returns those of names that environ names, with a
// value or empty. An empty one may still hide a key: a raw execve can
// name a variable twice, and Go keeps only the first copy (os.Environ
// shows "NAME="), while the memory /proc/<rpi>/environ shows still holds
// the second; hideVariables overwrites every copy there.
func variablesNamed(environ, names []string) []string {
	var named []string
	for _, name := range names {
		if slices.ContainsFunc(environ, func(kv string) bool { return strings.HasPrefix(kv, name+"=") }) {
			named = append(named, name)
		}
	}
	return named
}

// environment is everything rpi takes from the machine besides its
// arguments and stdio, so that tests can give each run its own.
type environment struct {
	getenv       func(string) string
	environ      []string // the variables children start from (before provider keys are removed)
	clock        clock
	tempDir      string // where rpi's own temp folder goes
	maxLineBytes int
	executable   string // rpi's binary, started again as the watchdog; "" for none
	program      string // the name rpi was started as ("pi" selects pi's shapes)
	// command builds every child rpi runs; nil is exec.Command (the fuzz
	// test replaces it so that no input can run a real program).
	command func(name string, args ...string) *exec.Cmd
	trace   *startupTrace // the phases of startup on stderr; nil for none
	// signalsReady, when set, is closed once rpi's signal handlers are
	// installed; the first line waits for it.
	signalsReady <-chan struct{}
	// exit ends the process at once (os.Exit); nil in in-process tests.
	exit func(code int)
	// hideVariables, once the keys are read, removes the variables they
	// came from from rpi's own environment; nil in in-process tests.
	hideVariables func(names []string)
	// lockWait is how long opening a session file another rpi holds
	// waits for it (0: sessionLockWait).
	lockWait time.Duration
}

// hostEnvironment is the real machine's.
func hostEnvironment() environment {
	exe, _ := os.Executable()
	return environment{getenv: os.Getenv, environ: os.Environ(), clock: realClock{}, tempDir: os.TempDir(),
		maxLineBytes: maxLineBytes, executable: exe, program: filepath.Base(os.Args[0])}
}

// run is the whole program: it parses args, serves the protocol until stdin
// ends or a signal arrives, and returns the exit code. Nothing but main
// touches the process's real stdin, stdout, environment or signals.
func run(args []string, env environment, stdin io.Reader, stdout, stderr io.Writer, stop chan os.Signal) int {
	cfg, action, err := parseArgs(args, env)
	env.trace.phase("flags")
	switch {
	case err != nil && cfg.acp:
		fmt.Fprintf(stderr, "rpi: %v\n", err) // ACP's stdout carries ACP messages only
		return 1
	case err != nil:
		return initFailure(stdout, stderr, err)
	case action == "help":
		fmt.Fprint(stdout, usageText)
		return 0
	case action == "version" && cfg.compat:
		fmt.Fprintln(stdout, piVersion)
		return 0
	case action == "version":
		fmt.Fprintf(stdout, "rpi %s\n", version)
		return 0
	}
	// Startup reads files a project controls and can take seconds (a
	// large --session or --fork). It runs on this goroutine, whose stack
	// has grown already: a new goroutine's stack would grow again, which
	// costs about as much as the rest of startup. So a signal that comes
	// meanwhile is taken by endStartupOnSignal.
	if cfg.acp {
		return runACP(cfg, env, stdin, stdout, stderr, stop)
	}
	startupOver := endStartupOnSignal(env, stop, stderr)
	s, err := newServer(cfg, env, stdout, stderr)
	startupOver()
	if err != nil {
		return initFailure(stdout, stderr, err)
	}
	return s.serve(stdin, stop)
}

// endStartupOnSignal watches stop while startup runs: a signal then ends
// the process at once through env.exit, with its §2 exit code. The func it
// returns marks startup over; a signal after that is left on stop for
// serve. Without env.exit (in-process tests) it watches nothing.
func endStartupOnSignal(env environment, stop chan os.Signal, stderr io.Writer) (over func()) {
	if env.exit == nil {
		return func() {}
	}
	var w startupWatch
	done := make(chan struct{})
	go guard(stderr, "watching startup for a signal", func() {
		select {
		case sig := <-stop:
			w.mu.Lock()
			select {
			case <-done: // startup ended meanwhile: serve's signal now
				select {
				case stop <- sig:
				default: // another signal is already waiting for serve
				}
			default:
				// A stderr nobody reads must not keep rpi from ending.
				written := make(chan struct{})
				go func() {
					fmt.Fprintf(stderr, "rpi: %v during startup: exiting\n", sig)
					close(written)
				}()
				select {
				case <-written:
				case <-time.After(time.Second):
				}
				env.exit(exitCode(sig))
			}
			w.mu.Unlock()
		case <-done:
		}
	})()
	return func() {
		w.mu.Lock()
		close(done)
		w.mu.Unlock()
	}
}

// startupWatch is what endStartupOnSignal decides under: whether startup
// or a signal came first.
type startupWatch struct {
	mu mutex[startupWatchMu] // held while deciding who acts on a signal
}

// initFailure writes the one failure line of a fatal initialization error.
func initFailure(stdout, stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "rpi: %v\n", err)
	newOutput(stdout, stderr).record(func(buf []byte) ([]byte, error) {
		return encodeResponse(rpcWire{}, buf, nil, "init", nil, err)
	})
	return 1
}

// usageText is --help's text on the system rpi runs on.
var usageText = helpText(runtime.GOOS)

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

const usageTemplate = `rpi: a headless coding-agent host speaking JSONL on stdin/stdout.

Usage:
  rpi rpc [flags]          serve the RPC protocol (same as --mode rpc)
  rpi --mode rpc [flags]
  rpi acp [flags]          serve the Agent Client Protocol, for editors (same as
                           --mode acp and rpi agent stdio; docs/acp.md)
  rpi --help | --version

Flags:
  --provider NAME               model provider
  --model ID                    model (provider/id, or id with --provider; optional :thinking suffix)
  --models a,b                  the models cycle_model goes through (globs; provider/id or id)
  --api-key KEY                 API key for the provider
  --thinking LEVEL              off, minimal, low, medium, high, xhigh or max
  -t, --tools a,b,c             the model's tools (default read,bash,edit,write,todo,process,ask_user;
                                also ls, grep, find)
  -nt, --no-tools               no tools at all
  -xt, --exclude-tools a,b      leave these tools out
  --no-session                  keep the session in memory only
  --session-dir DIR             where session files go
  --session FILE                open this session file
  --session-id ID               the cwd's session with this id (made when missing)
  --fork FILE                   start a new session as a copy of this one
  -n, --name NAME               session name
  --system-prompt TEXT          replace the base system prompt
  --append-system-prompt TEXT   append to the system prompt
  -nc, --no-context-files       do not read AGENTS.md / CLAUDE.md
  -ns, --no-skills              no skills
  -np, --no-prompt-templates    no prompt templates
  -a, --approve                 load the project's own resources from ./.pi/ (settings, templates, skills)
  -na, --no-approve             do not (the default)
  --confirm TOOLS               ask the client before running these tools
  --cwd DIR                     working directory (default: the current one)
  --compat pi                   pi 1.6's shapes (flat events; also RPI_COMPAT=pi, or run as "pi")
  -h, --help                    this text
  -v, --version                 rpi's version (pi's, bare, with pi's shapes)
  Accepted for pi's clients, without effect: --no-themes, --theme X, --offline,
  -ne/--no-extensions, --no-mcp, --verbose.

Environment:
  PI_CODING_AGENT_DIR   models.json, auth.json, settings.json, sessions (default {agentDir})
  {home} your home folder; rpi needs it or PI_CODING_AGENT_DIR
  OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, GROQ_API_KEY, …
                        provider keys (all of them in docs/models.md)
  OPENAI_BASE_URL       another base URL for the openai provider
  PI_FAUX_RESPONSE      what the offline model faux/faux-1 answers (--model faux/faux-1)
  RPI_COMPAT=pi         pi 1.6's shapes, as --compat pi
  RPI_TRACE_STARTUP=1   how long each phase of startup took, on stderr
  {temp}
{bash}

Without --model, rpi starts with settings.json's default or the first model
that can be used (docs/settings.md); "model":null in get_state means none
can. The protocol: docs/protocol.md and docs/commands.md; writing a client:
docs/clients.md.

Example:
  echo '{"id":"1","type":"get_state"}' | rpi rpc --no-session
  PI_FAUX_RESPONSE='Hello from rpi' rpi rpc --model faux/faux-1
`

// piVersion is the pi release whose RPC rpi speaks; in pi-compatible mode
// --version prints it bare, as pi does (clients such as pi-acp parse it).
const piVersion = "1.6.0"

// config holds the command line.
type config struct {
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
	name               string
	systemPrompt       string
	appendSystemPrompt string
	noContextFiles     bool
	noSkills           bool
	noPromptTemplates  bool
	approve            bool
	confirm            []string
	cwd                string
	compat             bool // pi's shapes (§10)
	acp                bool // ACP mode (§12): rpi acp, --mode acp, rpi agent stdio
}

// parseArgs reads the command line (and the environment's RPI_COMPAT and
// program name, which also select pi's shapes). action is "serve",
// "help" or "version".
func parseArgs(args []string, env environment) (cfg config, action string, err error) {
	subcommand, args := modeSubcommand(args)
	fs := flag.NewFlagSet("rpi", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var mode, tools, exclude, models, confirm, compat, ignored string
	var help, showVersion, noTools, noApprove, ignoredBool bool
	fs.StringVar(&mode, "mode", "", "")
	fs.StringVar(&cfg.provider, "provider", "", "")
	fs.StringVar(&cfg.model, "model", "", "")
	fs.StringVar(&models, "models", "", "")
	fs.StringVar(&cfg.apiKey, "api-key", "", "")
	fs.StringVar(&cfg.thinking, "thinking", "", "")
	fs.StringVar(&tools, "tools", "", "")
	fs.StringVar(&tools, "t", "", "")
	fs.BoolVar(&noTools, "no-tools", false, "")
	fs.BoolVar(&noTools, "nt", false, "")
	fs.StringVar(&exclude, "exclude-tools", "", "")
	fs.StringVar(&exclude, "xt", "", "")
	fs.BoolVar(&cfg.noSession, "no-session", false, "")
	fs.StringVar(&cfg.sessionDir, "session-dir", "", "")
	fs.StringVar(&cfg.sessionFile, "session", "", "")
	fs.StringVar(&cfg.sessionID, "session-id", "", "")
	fs.StringVar(&cfg.forkFrom, "fork", "", "")
	fs.StringVar(&cfg.name, "name", "", "")
	fs.StringVar(&cfg.name, "n", "", "")
	fs.StringVar(&cfg.systemPrompt, "system-prompt", "", "")
	fs.StringVar(&cfg.appendSystemPrompt, "append-system-prompt", "", "")
	fs.BoolVar(&cfg.noContextFiles, "no-context-files", false, "")
	fs.BoolVar(&cfg.noContextFiles, "nc", false, "")
	fs.BoolVar(&cfg.noSkills, "no-skills", false, "")
	fs.BoolVar(&cfg.noSkills, "ns", false, "")
	fs.BoolVar(&cfg.noPromptTemplates, "no-prompt-templates", false, "")
	fs.BoolVar(&cfg.noPromptTemplates, "np", false, "")
	fs.BoolVar(&cfg.approve, "approve", false, "")
	fs.BoolVar(&cfg.approve, "a", false, "")
	fs.BoolVar(&noApprove, "no-approve", false, "")
	fs.BoolVar(&noApprove, "na", false, "")
	fs.StringVar(&confirm, "confirm", "", "")
	fs.StringVar(&cfg.cwd, "cwd", "", "")
	fs.StringVar(&compat, "compat", "", "")
	// pi's presentation flags: accepted so that pi's clients can launch
	// rpi with pi's arguments; rpi has no themes, extensions or MCP, and
	// never goes online on its own.
	for _, name := range []string{"no-themes", "offline", "no-extensions", "ne", "no-mcp", "verbose"} {
		fs.BoolVar(&ignoredBool, name, false, "")
	}
	fs.StringVar(&ignored, "theme", "", "")
	fs.BoolVar(&help, "help", false, "")
	fs.BoolVar(&help, "h", false, "")
	fs.BoolVar(&showVersion, "version", false, "")
	fs.BoolVar(&showVersion, "v", false, "")
	err = fs.Parse(args)
	cfg.acp = subcommand == "acp" || mode == "acp" // known this far: an error goes out as that mode's
	if err != nil {
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
			return cfg, "", fmt.Errorf("Unknown flag: %s (see rpi --help)", typedFlag(args, name))
		}
		// The flag package names a flag with one dash: name it as typed.
		named := regexp.MustCompile(`(argument: | for | for flag )-([\w-]+)`)
		text := named.ReplaceAllStringFunc(err.Error(), func(m string) string {
			i := strings.LastIndex(m, " -")
			return m[:i+1] + typedFlag(args, m[i+2:])
		})
		return cfg, "", fmt.Errorf("Invalid arguments: %s (see rpi --help)", text)
	}
	switch {
	case compat != "" && compat != "pi" && compat != "rpi":
		return cfg, "", fmt.Errorf("Invalid --compat %q: must be pi or rpi", compat)
	case compat != "":
		cfg.compat = compat == "pi"
	default:
		cfg.compat = env.getenv("RPI_COMPAT") == "pi" || env.program == "pi"
	}
	if help {
		return cfg, "help", nil
	}
	if showVersion {
		return cfg, "version", nil
	}
	rest := fs.Args()
	if subcommand == "" {
		subcommand, rest = modeSubcommand(rest)
	}
	if len(rest) > 0 {
		return cfg, "", fmt.Errorf("Unexpected argument: %s (see rpi --help)", rest[0])
	}
	cfg.acp = subcommand == "acp" || mode == "acp"
	switch {
	case subcommand != "" && mode != "" && mode != subcommand:
		return cfg, "", fmt.Errorf("Conflicting mode: the %s subcommand runs %s mode, but --mode %s was given", subcommand, strings.ToUpper(subcommand), mode)
	case subcommand == "" && mode == "":
		return cfg, "", errors.New("No mode given: run `rpi rpc` or `rpi --mode rpc` (`rpi acp` for an editor)")
	case mode != "" && mode != "rpc" && mode != "acp":
		return cfg, "", fmt.Errorf("Unsupported mode: %s (rpi speaks rpc and acp)", mode)
	case cfg.acp && (cfg.sessionFile != "" || cfg.sessionID != "" || cfg.forkFrom != "" || cfg.name != ""):
		return cfg, "", errors.New("Conflicting flags: --session, --session-id, --fork and --name are rpc mode's; in ACP mode the editor opens sessions (session/new, session/load)")
	case cfg.approve && noApprove:
		return cfg, "", errors.New("Conflicting flags: --approve and --no-approve")
	case cfg.sessionID != "" && (cfg.sessionFile != "" || cfg.noSession):
		return cfg, "", errors.New("Conflicting flags: --session-id goes with neither --session nor --no-session")
	case cfg.forkFrom != "" && (cfg.sessionFile != "" || cfg.noSession):
		return cfg, "", errors.New("Conflicting flags: --fork goes with neither --session nor --no-session")
	case cfg.sessionID != "" && !validSessionID(cfg.sessionID):
		return cfg, "", fmt.Errorf("Invalid --session-id %q: letters, digits, '.', '_' and '-', starting and ending with a letter or digit", cfg.sessionID)
	}
	if cfg.thinking != "" && !slices.Contains(thinkingLevels, cfg.thinking) {
		return cfg, "", fmt.Errorf("Invalid --thinking %q: must be one of %s", cfg.thinking, strings.Join(thinkingLevels, ", "))
	}
	if cfg.tools, err = toolList("--tools", tools); err != nil {
		return cfg, "", err
	}
	cfg.toolsGiven = tools != "" || noTools
	if noTools {
		cfg.tools = []string{}
	}
	if cfg.excludeTools, err = toolList("--exclude-tools", exclude); err != nil {
		return cfg, "", err
	}
	if cfg.confirm, err = toolList("--confirm", confirm); err != nil {
		return cfg, "", err
	}
	for _, m := range strings.Split(models, ",") {
		if m = strings.TrimSpace(m); m != "" {
			cfg.models = append(cfg.models, m)
		}
	}
	if strings.TrimSpace(cfg.name) == "" && cfg.name != "" {
		return cfg, "", errors.New("Invalid --name: must not be blank")
	}
	if cfg.cwd == "" {
		if cfg.cwd, err = os.Getwd(); err != nil {
			return cfg, "", fmt.Errorf("Cannot determine the working directory: %v", err)
		}
	}
	if cfg.cwd, err = filepath.Abs(cfg.cwd); err != nil {
		return cfg, "", fmt.Errorf("Invalid --cwd: %v", err)
	}
	if info, err := os.Stat(cfg.cwd); err != nil || !info.IsDir() {
		return cfg, "", fmt.Errorf("Invalid --cwd: %s is not a directory", cfg.cwd)
	}
	return cfg, "serve", nil
}

// modeSubcommand takes the subcommand that names a mode off the front of
// args: rpc, acp, or the original system's spelling of ACP mode, agent
// stdio. It returns "" and args when there is none.
func modeSubcommand(args []string) (string, []string) {
	switch {
	case len(args) > 0 && (args[0] == "rpc" || args[0] == "acp"):
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

// validSessionID is pi's rule for --session-id.
func validSessionID(id string) bool {
	for i, c := range id {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && ((c != '.' && c != '_' && c != '-') || i == 0 || i == len(id)-1) {
			return false
		}
	}
	return id != ""
}

// toolList splits a comma-separated list of tool names and checks each.
func toolList(flagName, list string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	var names []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if toolNamed(name) == nil {
			return nil, fmt.Errorf("Invalid %s: unknown tool %q (known: %s)", flagName, name, strings.Join(toolNames(), ", "))
		}
		names = append(names, name)
	}
	return names, nil
}

// Shutdown timing (§2): running commands get finishGrace to finish after
// stdin ends (rpc mode); children get killGrace between SIGTERM and
// SIGKILL (a session closed, a process's context ended), but endKillGrace
// once rpi ends, and a child's output pipe that something it started
// holds is cut killGrace after it exited, endPipeGrace once rpi ends; so
// rpi ends within its promise (ACP: 2 s after stdin's end) even with a
// child that ignores SIGTERM. rpi never waits longer than exitLimit for
// answers once it has killed.
// bigLineBytes is the size from which an input line's memory is given
// back to the system once it is handled (memoryReturn).
const bigLineBytes = 4 << 20

const (
	finishGrace  = 2 * time.Second
	killGrace    = 2 * time.Second
	endKillGrace = time.Second
	endPipeGrace = 250 * time.Millisecond
	exitLimit    = 5 * time.Second
)

// readInput reads stdin's frames (readFrames) on a goroutine of its own;
// inputEnded is closed once it has read the last.
func readInput(stdin io.Reader, maxLine int, stderr io.Writer) (frames <-chan []frame, inputEnded <-chan struct{}) {
	ch, ended := make(chan []frame, 4), make(chan struct{})
	go guard(stderr, "reading input", func() {
		defer close(ended)
		readFrames(stdin, maxLine, ch)
	})()
	return ch, ended
}

// watchEnd watches, beside a command loop, for what ends rpi: a signal on
// stop, or the end of input. The loop itself may be held by a write to a
// client that stopped reading (its answer to get_messages, say), so the
// watcher starts the output's end (output.end): such a write is given up
// within endStall, and the loop, free again, takes the signal from
// signalled (there before the write is given up) or sees the input's
// end. stopWatching ends the watcher.
func watchEnd(out *output, stop <-chan os.Signal, inputEnded <-chan struct{}) (signalled <-chan os.Signal, stopWatching func()) {
	sigs, quit, done := make(chan os.Signal, 1), make(chan struct{}), make(chan struct{})
	go guard(out.stderr, "watching for the end", func() {
		defer close(done)
		for {
			select {
			case sig := <-stop:
				sigs <- sig // before the end: a write given up finds it there
				out.end()
				return
			case <-inputEnded:
				out.end()
				inputEnded = nil // a signal may still come while the loop ends
			case <-quit:
				return
			}
		}
	})()
	return sigs, func() { close(quit); <-done }
}

// ---- Memory ----

// memoryReturn gives the system back, soon after a burst is over, the
// memory it needed (a huge input line, the output ring of a process that
// ended, a run that allocated much): the Go runtime would keep it for
// minutes, as the heap it may grow into. A return is two full
// collections, so there is at most one every memoryReturnGap.
type memoryReturn struct {
	stderr    io.Writer             // where a panic in the return is told
	mu        mutex[memoryReturnMu] // guards the fields below
	clock     clock
	timer     func() bool // stops the coming return, when one is set
	again     bool        // asked for while the coming return was set: one more follows it
	closed    bool        // shut down: no more returns
	allocated uint64      // the bytes allocated in all, as afterRun last saw them
}

const memoryReturnGap = 500 * time.Millisecond

// soon asks for a return within memoryReturnGap. Asked while one is
// coming — which may be under way already, too early for what the asker
// just let go of — it asks for one more after that.
func (m *memoryReturn) soon() {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
	case m.timer != nil:
		m.again = true
	default:
		m.timer = m.clock.AfterFunc(memoryReturnGap, guard(m.stderr, "giving memory back", m.give))
	}
}

// give is a return: two full collections, the memory they free given
// back. The first leaves what sync.Pools hold for one more (encoding/json
// keeps its buffers there, each as big as the largest value it wrote:
// an event with a 40 MiB image kept 80 MiB alive).
func (m *memoryReturn) give() {
	runtime.GC()
	debug.FreeOSMemory()
	m.mu.Lock()
	m.timer = nil
	again := m.again
	m.again = false
	m.mu.Unlock()
	if again {
		m.soon()
	}
}

// runAllocatedBytes is how much may be allocated between the ends of two
// runs before afterRun gives memory back.
const runAllocatedBytes = 64 << 20

// afterRun asks for a return (soon) at the end of a run when
// runAllocatedBytes or more were allocated since the last run ended: an
// image of tens of MiB read, recorded and sent to the model leaves a few
// times its size behind, which the runtime would keep for minutes as the
// heap it may grow into. (A run that only streamed costs a collection.)
func (m *memoryReturn) afterRun() {
	allocated := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(allocated)
	if allocated[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	now := allocated[0].Value.Uint64()
	m.mu.Lock()
	big := now-m.allocated >= runAllocatedBytes
	m.allocated = now
	m.mu.Unlock()
	if big {
		m.soon()
	}
}

// close cancels a coming return.
func (m *memoryReturn) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if m.timer != nil {
		m.timer()
	}
}

// ---- Startup trace ----

// startupTrace, with RPI_TRACE_STARTUP=1, writes to stderr how long each
// phase of startup took, from main's first line to session_started. What
// comes before main (the runtime and every package's init) shows with
// GODEBUG=inittrace=1.
type startupTrace struct {
	w           io.Writer
	start, last time.Time
	own         time.Duration // spent writing the trace, left out of every figure
}

// newStartupTrace is nil, which traces nothing, unless RPI_TRACE_STARTUP=1.
func newStartupTrace(w io.Writer) *startupTrace {
	if os.Getenv("RPI_TRACE_STARTUP") != "1" {
		return nil
	}
	now := time.Now()
	return &startupTrace{w: w, start: now, last: now}
}

// phase reports the phase that has just ended.
func (t *startupTrace) phase(name string) {
	if t == nil {
		return
	}
	now := time.Now()
	fmt.Fprintf(t.w, "rpi: startup: %7.3f ms %-32s (%.3f ms since main)\n",
		float64(now.Sub(t.last).Microseconds())/1000, name, float64((now.Sub(t.start)-t.own).Microseconds())/1000)
	t.last = time.Now()
	t.own += t.last.Sub(now)
}

// ---- Clock ----

// clock is where rpi's timers come from: the real one, or a fake one in
// tests whose time moves only when the test says so.
type clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed; stop
	// cancels it and reports whether it did so before f ran.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// after returns a channel closed once d has passed on c, and a stop func.
func after(c clock, d time.Duration) (<-chan struct{}, func() bool) {
	done := make(chan struct{})
	return done, c.AfterFunc(d, func() { close(done) })
}
