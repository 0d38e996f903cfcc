package main

import (
	"flag"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// flagCorpus are command lines (split at spaces) for FuzzParseFlags:
// every spelling of a flag and its value, the ends of the flags, and
// hostile ones.
var flagCorpus = []string{
	"",
	"--cwd /tmp --no-session",
	"-cwd /tmp -no-session",
	"--cwd=/tmp --model=a/b --thinking=high",
	"--cwd= --name",
	"-t read,bash -nt -xt write -n x -nc -ns -np -a -na",
	"--tools=read --t=bash --tools grep",
	"-n one --name two -n three",
	"--no-tools=false --no-tools=true -nt=0 -nt=1 -nt=T -nt=FALSE",
	"--no-tools=maybe",
	"--no-tools= x",
	"--approve=f --no-approve=t",
	"-- --cwd /tmp",
	"--cwd /tmp -- -t read",
	"--cwd /tmp rpc",
	"rpc --cwd /tmp",
	"--cwd /tmp - --model m",
	"-",
	"--",
	"---cwd /tmp",
	"-=x",
	"--=x",
	"--=",
	"-=",
	"--cwd=a=b",
	"--é",
	"-zz",
	"--frobnicate=1 --cwd /tmp",
	"--cwd /tmp --frobnicate",
	"--thinking",
	"-t",
	"--cursor 0x10",
	"--cursor 0o17 --cursor 0b101",
	"--cursor 1_000",
	"--cursor +3",
	"--cursor -1",
	"--cursor 99999999999999999999",
	"--cursor -99999999999999999999",
	"--cursor x",
	"--cursor=",
	"--max-running=2 --max-connections 0",
	"--idle-close 5m --idle-close=90s",
	"--idle-close soon",
	"--idle-close -1h",
	"--replay-bytes 5MiB --client-queue=64KiB",
	"--replay-bytes -1",
	"--replay-bytes 2000000MiB",
	"--client-queue KiB",
	"--listen unix:a --listen=ws://127.0.0.1:1 --allow-origin x --allow-origin=y --allow-remote",
	"--connect",
	"--connect --model m",
	"--connect unix:/x --model m",
	"--connect=auto --attach s --cursor 3 --observe",
	"--connect unix:/x --connect",
	"--connect unix:/x --connect --model m",
	"-connect -",
	"--connect -- x",
	"--model --connect",
	"--model=x --connect --no-session --connect",
	"--observe=0 --observe --connect=",
	"--theme dark --no-themes --offline --no-extensions -ne --theme=light",
	"--verbose=t --verbose=TRUE --verbose=1",
	"--help",
	"-h --cwd /tmp",
	"-help=false -h=1",
	"--version -v=false",
	"--version=maybe",
	"--mode acp --compat pi --api-key k --provider p --models a,b --session-dir d",
	"--session s --session-id i --fork f --system-prompt x --append-system-prompt y",
	"--system-prompt= --append-system-prompt a --append-system-prompt= --append-system-prompt b",
	"--confirm mcp --no-mcp --exclude-tools=bash",
	"--no-context-files=false --no-skills=0 --no-prompt-templates=1",
	"  --cwd  /tmp ",
}

// FuzzParseFlags: parseFlags reads a command line (split at spaces) as
// a flag.FlagSet with the same flags does (parseWithFlagSet): every
// command line of flagCorpus in any go test, and those the fuzzer makes
// up with go test -fuzz FuzzParseFlags.
func FuzzParseFlags(f *testing.F) {
	for _, line := range flagCorpus {
		f.Add(line)
	}
	names := parserFlags(f)
	f.Fuzz(func(t *testing.T, line string) {
		checkParseFlagsAsFlagSet(t, names, strings.Split(line, " "))
	})
}

// checkParseFlagsAsFlagSet fails t unless parseFlags and
// parseWithFlagSet read args alike: the same error, the same values,
// the same flags given (as a set) and, without an error, the same
// arguments after the flags.
func checkParseFlagsAsFlagSet(t *testing.T, names, args []string) {
	t.Helper()
	start := func() (cliConfig, flagValues) {
		cfg := cliConfig{maxRunning: defaultMaxRunning, served: serveConfig{idleClose: defaultIdleClose, maxConnections: defaultMaxConnections}}
		return cfg, flagValues{cursor: -1, replayBytes: byteCount{n: defaultReplayBytes}, clientQueue: byteCount{n: defaultClientQueue}}
	}
	cfg, v := start()
	rest, given, err := parseFlags(slices.Clone(args), &cfg, &v)
	wantCfg, wantV := start()
	wantRest, wantGiven, wantErr := parseWithFlagSet(names, slices.Clone(args), &wantCfg, &wantV)
	if errorText(err) != errorText(wantErr) {
		t.Fatalf("%q: error %v; a FlagSet's: %v", args, err, wantErr)
	}
	if !reflect.DeepEqual(cfg, wantCfg) || v != wantV {
		t.Fatalf("%q: %+v %+v; with a FlagSet: %+v %+v", args, cfg, v, wantCfg, wantV)
	}
	slices.Sort(given)
	if given = slices.Compact(given); !slices.Equal(given, wantGiven) {
		t.Fatalf("%q: flags given %q; a FlagSet's: %q", args, given, wantGiven)
	}
	if err == nil && !slices.Equal(rest, wantRest) {
		t.Fatalf("%q: arguments after the flags %q; a FlagSet's: %q", args, rest, wantRest)
	}
}

// errorText is err's text; "" for nil.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// parseWithFlagSet reads args as parseArgs did before parseFlags: with a
// flag.FlagSet holding every flag of flagTarget (names), after
// connectValue. given are the names flag.FlagSet.Visit gives.
func parseWithFlagSet(names, args []string, cfg *cliConfig, v *flagValues) (rest, given []string, err error) {
	fs := flag.NewFlagSet("rpi", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, name := range names {
		switch p := flagTarget(name, cfg, v).(type) {
		case *string:
			fs.StringVar(p, name, *p, "")
		case *bool:
			fs.BoolVar(p, name, *p, "")
		case *int:
			fs.IntVar(p, name, *p, "")
		case *time.Duration:
			fs.DurationVar(p, name, *p, "")
		case flag.Value:
			fs.Var(p, name, "")
		default:
			panic("flag " + name + ": a target of no kind the flag package has")
		}
	}
	err = fs.Parse(connectValue(args, cfg, v))
	fs.Visit(func(f *flag.Flag) { given = append(given, f.Name) })
	return fs.Args(), given, err
}
