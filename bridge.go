package main

// The bridges (docs/serve.md#bridges): rpi rpc --connect and rpi acp
// --connect copy stdio to and from a running rpi serve, line for line,
// so that a client that spawns a stdio agent gets sessions that outlive
// it. A bridge parses nothing it copies; an rpc bridge writes one line of
// its own first, a hello built from its flags, when they ask for one.
// With --connect auto it starts rpi serve when none listens.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// sessionFlagOption tells whether flag, by any name it has, is one for
// the session the host opens for an rpc bridge, and gives the long name
// a hello's options give it.
func sessionFlagOption(flag string) (option string, forSession bool) {
	switch flag {
	case "model", "provider", "thinking", "tools", "no-tools", "exclude-tools",
		"name", "session", "session-id", "no-session", "confirm", "cwd":
		return flag, true
	case "t":
		return "tools", true
	case "nt":
		return "no-tools", true
	case "xt":
		return "exclude-tools", true
	case "n":
		return "name", true
	}
	return "", false
}

// bridgeOwnFlags are the flags a bridge reads itself, or that change
// nothing anywhere (pi's presentation flags): never told as ignored.
var bridgeOwnFlags = []string{"connect", "attach", "cursor", "observe", "compat", "mode",
	"verbose", "no-themes", "theme", "use-theme", "tui-mode", "offline", "no-extensions", "ne", "extension", "e"}

// connectValue gives --connect its optional value: --connect at the end,
// or followed by another flag, is --connect= (the default socket). The
// other flags' values are stepped over as parseFlags reads them (cfg and v
// only tell flagTarget's kinds). It changes a copy of args, made only
// for such a --connect.
func connectValue(args []string, cfg *cliConfig, v *flagValues) []string {
	var out []string // args with --connect= for --connect; nil: args as they are
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" || arg == "-" || !strings.HasPrefix(arg, "-") {
			break
		}
		name := strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-")
		if strings.Contains(name, "=") {
			continue
		}
		if name == "connect" {
			if i+1 == len(args) || strings.HasPrefix(args[i+1], "-") {
				if out == nil {
					out = slices.Clone(args)
				}
				out[i] = arg + "="
			}
			continue
		}
		target := flagTarget(name, cfg, v)
		if target == nil {
			break // parseFlags refuses it
		}
		if _, isBool := target.(*bool); isBool {
			continue
		}
		i++ // its value
	}
	if out == nil {
		return args
	}
	return out
}

// bridgeFlags reads a bridge's flags once parseArgs has read the rest:
// nil without --connect. given are the flags given, by the names
// parseFlags returns; v holds their values besides cfg's. The flags for
// the session the host opens go in options (an rpc bridge's without
// --attach); every other flag given is listed as ignored, in the order
// of the names.
func bridgeFlags(given []string, args []string, cfg cliConfig, v *flagValues) (*bridgeConfig, error) {
	b := bridgeConfig{connect: v.connect, attach: v.attach, cursor: v.cursor, observe: v.observe}
	own := slices.Contains(given, "attach") || slices.Contains(given, "cursor") || slices.Contains(given, "observe")
	switch {
	case !slices.Contains(given, "connect") && own:
		return nil, errors.New("Conflicting flags: --attach, --cursor and --observe are a bridge's (rpi rpc --connect)")
	case !slices.Contains(given, "connect"):
		return nil, nil
	case cfg.serve:
		return nil, errors.New("Conflicting flags: --connect is rpi rpc's and rpi acp's (a bridge to a running rpi serve)")
	case cfg.acp && own:
		return nil, errors.New("Conflicting flags: --attach, --cursor and --observe are rpc's; an ACP client opens and loads its sessions itself")
	case slices.Contains(given, "cursor") && (b.attach == "" || b.cursor < 0):
		return nil, errors.New("Invalid --cursor: the seq of the last event seen (0 or more), with --attach")
	case b.observe && b.attach == "":
		return nil, errors.New("Conflicting flags: --observe goes with --attach (an observer watches a session)")
	}
	if _, _, err := bridgeAddress(b.connect, ""); err != nil {
		return nil, err
	}
	b.options = map[string]any{}
	names := slices.Clone(given)
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		option, forSession := sessionFlagOption(name)
		switch {
		case slices.Contains(bridgeOwnFlags, name):
		case !forSession || cfg.acp || b.attach != "":
			b.ignored = append(b.ignored, typedFlag(args, name))
		case option == "cwd":
			b.options[option] = cfg.cwd
		case option == "session" && sessionArgIsPath(cfg.sessionFile):
			b.options[option] = resolvePath(cfg.cwd, cfg.sessionFile) // the bridge's, not the host's
		default:
			target := flagTarget(name, &cfg, v)
			if _, isBool := target.(*bool); isBool {
				b.options[option] = true
			} else {
				b.options[option] = flagText(target)
			}
		}
	}
	return &b, nil
}

// bridgeAddress reads --connect's value: the address to dial
// (unix:PATH or ws://…), and whether to start rpi serve when none
// listens there (auto, auto:unix:PATH). "" and auto are the default
// socket, unix:<agentDir>/rpi.sock.
func bridgeAddress(text, agentDir string) (addr string, auto bool, err error) {
	if rest, ok := strings.CutPrefix(text, "auto"); ok && (rest == "" || strings.HasPrefix(rest, ":unix:")) {
		text, auto = strings.TrimPrefix(rest, ":"), true
	}
	if text == "" {
		return "unix:" + filepath.Join(agentDir, "rpi.sock"), auto, nil
	}
	a, err := parseListenAddress(text)
	if err != nil {
		return "", false, fmt.Errorf("Invalid --connect %q: unix:PATH, ws://HOST:PORT[/PATH], auto or auto:unix:PATH (nothing: the default socket)", text)
	}
	return a.String(), auto, nil
}

// bridgeHello is the hello an rpc bridge writes first (docs/serve.md).
type bridgeHello struct {
	Type    string         `json:"type"`
	Compat  string         `json:"compat,omitempty"`
	Attach  string         `json:"attach,omitempty"`
	Cursor  *int           `json:"cursor,omitempty"`
	Role    string         `json:"role,omitempty"`
	Options map[string]any `json:"options,omitempty"`
}

// helloLine is the line an rpc bridge writes before what it copies; nil
// when its flags ask for no hello.
func (b *bridgeConfig) helloLine(compat bool) []byte {
	h := bridgeHello{Type: "hello", Attach: b.attach, Options: b.options}
	if compat {
		h.Compat = "pi"
	}
	if b.cursor >= 0 {
		h.Cursor = &b.cursor
	}
	if b.observe {
		h.Role = "observer"
	}
	if h.Compat == "" && h.Attach == "" && len(h.Options) == 0 {
		return nil
	}
	line, _ := json.Marshal(h)
	return append(line, '\n')
}

// runBridge is rpi rpc --connect and rpi acp --connect: it connects to
// the host (starting it, with auto), writes the hello its flags ask for,
// then copies stdin to the host and the host's output to stdout until
// stdin ends (0, once the host has written what it had for this
// connection) or the host closes the connection (1). It cannot connect:
// one stderr line, 1.
func runBridge(cfg cliConfig, env runEnv, stdin io.Reader, stdout, stderr io.Writer, stop chan os.Signal) int {
	readyLaterStopSignals() // a bridge has no first line to hurry
	b := cfg.bridge
	if len(b.ignored) > 0 {
		fmt.Fprintf(stderr, "rpi: a bridge passes on no %s: the host's own flags hold (docs/serve.md#bridges)\n", strings.Join(b.ignored, ", "))
	}
	dir, err := agentDir(env.getenv)
	if err != nil {
		fmt.Fprintf(stderr, "rpi: %v\n", err)
		return 1
	}
	addr, auto, _ := bridgeAddress(b.connect, dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go guarded(stderr, "watching for a signal while connecting", func() {
		select {
		case sig := <-stop:
			select {
			case stop <- sig: // told once more, for runBridge's end
			default:
			}
			cancel()
		case <-ctx.Done():
		}
	})()
	var conn io.ReadWriteCloser
	switch {
	case strings.HasPrefix(addr, "ws://"):
		conn, err = dialBridgeWebSocket(ctx, env.getenv, dir, addr)
	default:
		conn, err = dialServe(ctx, addr)
		if err != nil && auto && hostAbsent(err) {
			conn, err = startServeAndDial(ctx, env, addr, dir)
		}
	}
	if err != nil && ctx.Err() != nil { // a signal came while connecting
		select {
		case sig := <-stop:
			return exitCode(sig)
		default:
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "rpi: cannot connect to rpi serve at %s: %v\n", addr, err)
		return 1
	}
	cancel()
	defer conn.Close()
	if hello := b.helloLine(cfg.compat && !cfg.acp); hello != nil && !cfg.acp {
		if _, err := conn.Write(hello); err != nil {
			fmt.Fprintf(stderr, "rpi: cannot write to rpi serve at %s: %v\n", addr, err)
			return 1
		}
	}
	return copyBridge(conn, stdin, stdout, stderr, stop, addr)
}

// copyBridge copies stdin to conn and conn to stdout. When stdin ends,
// conn's write side is closed (the host reads its end) and what the host
// still writes is copied until it closes: 0; as rpi's own output at its
// end, a copy the client takes nothing of for endStall is given up then
// (output.end), and the rest is not copied. When the host closes first:
// one stderr line, 1. A stop signal ends it at once.
func copyBridge(conn io.ReadWriteCloser, stdin io.Reader, stdout, stderr io.Writer, stop chan os.Signal, addr string) int {
	fromHost, toHost := make(chan error, 1), make(chan error, 1)
	out := newOutput(stdout, stderr)
	go guarded(stderr, "copying the host's output", func() {
		err := errors.New("the copy failed")
		defer func() { fromHost <- err }()
		_, err = io.Copy(bridgeOut{out}, conn)
	})()
	go guarded(stderr, "copying the client's input", func() {
		err := errors.New("the copy failed")
		defer func() { toHost <- err }()
		_, err = io.Copy(conn, stdin)
	})()
	select {
	case err := <-toHost:
		out.end() // a client that ended its input and stopped reading does not hold the bridge
		if err == nil {
			closeWrite(conn)
		}
		select {
		case <-fromHost:
		case sig := <-stop:
			return exitCode(sig)
		}
		if err != nil {
			fmt.Fprintf(stderr, "rpi: rpi serve at %s closed the connection\n", addr)
			return 1
		}
		return 0
	case err := <-fromHost:
		if err != nil {
			fmt.Fprintf(stderr, "rpi: the connection to rpi serve at %s failed: %v\n", addr, err)
		} else {
			fmt.Fprintf(stderr, "rpi: rpi serve at %s closed the connection\n", addr)
		}
		return 1
	case sig := <-stop:
		return exitCode(sig)
	}
}

// bridgeOut is a bridge's stdout: what it copies goes through an output,
// which gives a write up once the bridge ends and the client takes
// nothing of it (output.write).
type bridgeOut struct{ o *output }

// Write writes p as it is: the host's records are whole already.
func (b bridgeOut) Write(p []byte) (int, error) {
	o := b.o
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.writeLocked(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// closeWrite tells the host the client's input has ended: the write side
// of the connection is closed (a unix socket's half-close); a connection
// that cannot half-close is left as it is, until the host closes it.
func closeWrite(conn io.ReadWriteCloser) {
	if c, ok := conn.(interface{ CloseWrite() error }); ok {
		c.CloseWrite()
	}
}

// maxSocketPath is the longest path of a unix socket: the systems'
// limit (104 bytes on macOS and the BSDs, 108 on Linux, with its
// terminating zero). rpi serve makes its socket in a folder of its own
// beside the path first (listenUnixPrivate), whose path must fit too; a
// bridge dials no longer one.
const maxSocketPath = 103

// dialServe connects to rpi serve at addr: unix:PATH (or, once ws.go
// is in, ws://…).
func dialServe(ctx context.Context, addr string) (io.ReadWriteCloser, error) {
	switch {
	case strings.HasPrefix(addr, "unix:"):
		path := strings.TrimPrefix(addr, "unix:")
		if len(path) > maxSocketPath { // the system's "invalid argument" would not say why
			return nil, fmt.Errorf("the path is too long for a unix socket (at most about %d bytes): rpi serve listens on none such", maxSocketPath)
		}
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}
	return nil, fmt.Errorf("unknown address %s", addr)
}

// dialBridgeWebSocket connects to rpi serve's WebSocket listener at addr
// with the token (RPI_SERVE_TOKEN, else the one in <agent dir>/serve-token,
// which a host on this machine made).
func dialBridgeWebSocket(ctx context.Context, getenv func(string) string, agentDir, addr string) (io.ReadWriteCloser, error) {
	token := getenv("RPI_SERVE_TOKEN")
	if token == "" {
		data, err := os.ReadFile(filepath.Join(agentDir, "serve-token"))
		if err != nil {
			return nil, fmt.Errorf("no token: set RPI_SERVE_TOKEN, or run the bridge where the host's %s is", filepath.Join(agentDir, "serve-token"))
		}
		token = strings.TrimSpace(string(data))
	}
	c, err := dialWebSocket(ctx, addr, token)
	if err != nil {
		return nil, err
	}
	return halfClosingWebSocket{c}, nil
}

// halfClosingWebSocket is a WebSocket whose write side closes with the
// whole connection: a WebSocket has no half-close, so the bridge's end of
// input closes it (what the host had still to send for it is lost, its
// session goes on).
type halfClosingWebSocket struct{ *wsConn }

func (w halfClosingWebSocket) CloseWrite() error { return w.Close() }

// hostAbsent reports whether a dial failed because no host listens: the
// socket is missing, or no one accepts on it (a host killed).
func hostAbsent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED)
}

// startWait is how long a bridge started rpi serve is waited for.
const startWait = 5 * time.Second

// startServeAndDial starts rpi serve listening on addr (a unix socket),
// detached — a session and process group of its own, no stdin or stdout,
// its stderr appended to <agent dir>/serve.log — and connects once it
// listens. Bridges starting at once take turns by a lock file beside the
// socket: the first starts the host, the others find it listening.
func startServeAndDial(ctx context.Context, env runEnv, addr, agentDir string) (io.ReadWriteCloser, error) {
	path, ok := strings.CutPrefix(addr, "unix:")
	if !ok {
		return nil, errors.New("--connect auto starts rpi serve on a unix socket only")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	unlock, err := lockStart(ctx, path+".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	if conn, err := dialServe(ctx, addr); err == nil || !hostAbsent(err) {
		return conn, err // another bridge started it meanwhile
	}
	exited, err := startDetachedServe(env, addr, agentDir)
	if err != nil {
		return nil, fmt.Errorf("cannot start rpi serve: %v", err)
	}
	deadline := time.Now().Add(startWait)
	for {
		conn, err := dialServe(ctx, addr)
		if err == nil || !hostAbsent(err) {
			return conn, err
		}
		select {
		case <-exited:
			if conn, err := dialServe(ctx, addr); err == nil {
				return conn, nil // another host listens there (it lost the race)
			}
			return nil, fmt.Errorf("rpi serve exited at once: see %s", filepath.Join(agentDir, "serve.log"))
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("rpi serve did not listen within %v: see %s", startWait, filepath.Join(agentDir, "serve.log"))
		}
	}
}

// lockStart takes the lock file at path (made when missing), waiting
// for another bridge that holds it, up to startWait and a little more.
func lockStart(ctx context.Context, path string) (unlock func(), err error) {
	if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		f.Close()
	}
	f, err := openLockable(path)
	if err != nil {
		return nil, fmt.Errorf("cannot take %s: %v", path, err)
	}
	deadline := time.Now().Add(startWait + time.Second)
	for {
		locked, err := tryLock(f)
		switch {
		case err != nil:
			f.Close()
			return nil, fmt.Errorf("cannot take %s: %v", path, err)
		case locked:
			return func() { f.Close() }, nil
		case time.Now().After(deadline):
			f.Close()
			return nil, fmt.Errorf("another bridge holds %s and started no rpi serve", path)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// startDetachedServe starts rpi's own binary as rpi serve --listen addr,
// in the bridge's working directory and environment; exited is closed
// when it ends.
func startDetachedServe(env runEnv, addr, agentDir string) (exited chan struct{}, err error) {
	if env.executable == "" {
		return nil, errors.New("rpi's own binary is unknown")
	}
	logPath := filepath.Join(agentDir, "serve.log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	command := env.command
	if command == nil {
		command = exec.Command
	}
	cmd := command(env.executable, "serve", "--listen", addr)
	cmd.Env, cmd.Stderr = env.environ, log
	startDetached(cmd)
	readyChildSignals()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited = make(chan struct{})
	go guarded(nil, "waiting for the rpi serve a bridge started", func() {
		defer close(exited)
		cmd.Wait()
	})()
	return exited, nil
}
