// Command rpi hosts a coding agent without a terminal and speaks a
// line-delimited JSON protocol on stdin/stdout. See README.md and SPEC.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// version is what --version and get_capabilities report.
const version = "0.1.0"

func main() {
	sigs := make(chan os.Signal, 1)
	// SIGPIPE is caught so that a vanished client turns into a write error
	// (and an orderly shutdown) instead of killing rpi with its children alive.
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGPIPE)
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, sigs))
}

// run is the whole program: it parses args, serves the protocol until stdin
// ends or a signal arrives, and returns the exit code. Nothing but main
// touches the process's real stdin, stdout or signals.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	cfg, action, err := parseArgs(args)
	switch {
	case err != nil:
		return initFailure(stdout, stderr, err)
	case action == "help":
		fmt.Fprint(stdout, usageText)
		return 0
	case action == "version":
		fmt.Fprintf(stdout, "rpi %s\n", version)
		return 0
	}
	s, err := newServer(cfg, stdout, stderr)
	if err != nil {
		return initFailure(stdout, stderr, err)
	}
	return s.serve(stdin, sigs)
}

// initFailure writes the one failure line of a fatal initialization error.
func initFailure(stdout, stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "rpi: %v\n", err)
	newOutput(stdout, stderr).write(failureResponse{Type: "response", Command: "init", Error: err.Error()})
	return 1
}

const usageText = `rpi: a headless coding-agent host speaking JSONL on stdin/stdout.

Usage:
  rpi rpc [flags]          serve the RPC protocol (same as --mode rpc)
  rpi --mode rpc [flags]
  rpi --help | --version

Flags:
  --provider NAME               model provider
  --model ID                    model (provider/id, or id with --provider; optional :thinking suffix)
  --api-key KEY                 API key for the provider
  --thinking LEVEL              off, minimal, low, medium, high or xhigh
  --tools a,b,c                 active tools (read, write, edit, bash, ls, grep, find, todo_write, process, ask_user)
  --no-session                  keep the session in memory only
  --session-dir DIR             where session files go
  --session FILE                open this session file
  --name NAME                   session name
  --system-prompt TEXT          replace the base system prompt
  --append-system-prompt TEXT   append to the system prompt
  --approve                     load project resources from ./.pi/
  --confirm TOOLS               ask the client before running these tools
  --cwd DIR                     working directory (default: the current one)
`

// config holds the command line. Flags whose features arrive in later
// issues are parsed and kept so the command line never changes shape.
type config struct {
	provider           string
	model              string
	apiKey             string
	thinking           string
	tools              []string
	toolsGiven         bool
	noSession          bool
	sessionDir         string
	sessionFile        string
	name               string
	systemPrompt       string
	appendSystemPrompt string
	approve            bool
	confirm            []string
	cwd                string
}

// toolNames are the tools rpi knows (filled from tools in tools.go).
var toolNames []string

// parseArgs reads the command line. action is "serve", "help" or "version".
func parseArgs(args []string) (cfg config, action string, err error) {
	subcommand := len(args) > 0 && args[0] == "rpc"
	if subcommand {
		args = args[1:]
	}
	fs := flag.NewFlagSet("rpi", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var mode, tools, confirm string
	var help, showVersion bool
	fs.StringVar(&mode, "mode", "", "")
	fs.StringVar(&cfg.provider, "provider", "", "")
	fs.StringVar(&cfg.model, "model", "", "")
	fs.StringVar(&cfg.apiKey, "api-key", "", "")
	fs.StringVar(&cfg.thinking, "thinking", "", "")
	fs.StringVar(&tools, "tools", "", "")
	fs.BoolVar(&cfg.noSession, "no-session", false, "")
	fs.StringVar(&cfg.sessionDir, "session-dir", "", "")
	fs.StringVar(&cfg.sessionFile, "session", "", "")
	fs.StringVar(&cfg.name, "name", "", "")
	fs.StringVar(&cfg.systemPrompt, "system-prompt", "", "")
	fs.StringVar(&cfg.appendSystemPrompt, "append-system-prompt", "", "")
	fs.BoolVar(&cfg.approve, "approve", false, "")
	fs.StringVar(&confirm, "confirm", "", "")
	fs.StringVar(&cfg.cwd, "cwd", "", "")
	fs.BoolVar(&help, "help", false, "")
	fs.BoolVar(&help, "h", false, "")
	fs.BoolVar(&showVersion, "version", false, "")
	if err := fs.Parse(args); err != nil {
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
			return cfg, "", fmt.Errorf("Unknown flag: --%s (see rpi --help)", name)
		}
		return cfg, "", fmt.Errorf("Invalid arguments: %v (see rpi --help)", err)
	}
	if help {
		return cfg, "help", nil
	}
	if showVersion {
		return cfg, "version", nil
	}
	rest := fs.Args()
	if !subcommand && len(rest) > 0 && rest[0] == "rpc" {
		subcommand, rest = true, rest[1:]
	}
	if len(rest) > 0 {
		return cfg, "", fmt.Errorf("Unexpected argument: %s (see rpi --help)", rest[0])
	}
	switch {
	case subcommand && mode != "" && mode != "rpc":
		return cfg, "", fmt.Errorf("Conflicting mode: the rpc subcommand runs RPC mode, but --mode %s was given", mode)
	case !subcommand && mode == "":
		return cfg, "", errors.New("No mode given: run `rpi rpc` or `rpi --mode rpc`")
	case mode != "" && mode != "rpc":
		return cfg, "", fmt.Errorf("Unsupported mode: %s (rpi only speaks rpc)", mode)
	}
	if cfg.thinking != "" && !oneOf(cfg.thinking, thinkingLevels) {
		return cfg, "", fmt.Errorf("Invalid --thinking %q: must be one of %s", cfg.thinking, strings.Join(thinkingLevels, ", "))
	}
	if cfg.tools, err = toolList("--tools", tools); err != nil {
		return cfg, "", err
	}
	cfg.toolsGiven = tools != ""
	if cfg.confirm, err = toolList("--confirm", confirm); err != nil {
		return cfg, "", err
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

// toolList splits a comma-separated list of tool names and checks each.
func toolList(flagName, list string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	var names []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if !oneOf(name, toolNames) {
			return nil, fmt.Errorf("Invalid %s: unknown tool %q (known: %s)", flagName, name, strings.Join(toolNames, ", "))
		}
		names = append(names, name)
	}
	return names, nil
}

// Shutdown timing (§2): running commands get finishGrace to finish after
// stdin ends; children get killGrace between SIGTERM and SIGKILL; and rpi
// never waits longer than exitLimit for answers once it has killed.
const (
	finishGrace = 2 * time.Second
	killGrace   = 2 * time.Second
	exitLimit   = 5 * time.Second
)

// serve reads commands until stdin ends, the client stops reading, or a
// signal arrives; then it shuts down as §2 says and returns the exit code.
func (s *server) serve(stdin io.Reader, sigs <-chan os.Signal) int {
	s.out.write(event{Type: "session_started", Data: s.header})
	if s.notice != "" {
		s.tell(uiRequest{Method: "notify", Message: s.notice, NotifyType: "warning"})
	}
	frames := make(chan []frame, 4)
	go readFrames(stdin, s.maxLineBytes, frames)

	code := 0
	var stopSignal os.Signal
loop:
	for {
		select {
		case batch, ok := <-frames:
			if !ok {
				break loop
			}
			for _, f := range batch {
				s.handleFrame(f)
			}
		case sig := <-sigs:
			stopSignal = sig
			if sig == syscall.SIGINT {
				code = 130
			}
			break loop
		case <-s.out.gone:
			break loop
		}
	}
	s.shutdown(stopSignal == nil)
	if stopSignal != nil {
		fmt.Fprintf(s.stderr, "rpi: %v: shut down\n", stopSignal)
	}
	return code
}

// shutdown lets running commands finish (for up to finishGrace, when
// patient), then aborts what remains, kills every child's process group and
// waits for the last answers to be written.
func (s *server) shutdown(patient bool) {
	if patient {
		waitGroup(&s.background, finishGrace)
	}
	s.cancel()
	if !waitGroup(&s.children, exitLimit) || !waitGroup(&s.background, exitLimit) {
		fmt.Fprintln(s.stderr, "rpi: gave up waiting for running commands at exit")
	}
	s.removeTempFiles()
}

// waitGroup waits up to limit for wg and reports whether it finished.
func waitGroup(wg *sync.WaitGroup, limit time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
