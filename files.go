package main

// Files as the tools and rpi use them: paths taken from the working
// directory, only regular files opened (never a FIFO, a device, /proc or
// rpi's own stdio, and never an open that blocks), errors that name the
// file, and lines read without holding a huge one.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"unicode/utf8"
)

// toolPath resolves a path argument: a leading @ is dropped, ~ is the home
// folder (when rpi knows one), a file:// URL is the path it names
// (fileURLPath), relative paths are taken from the session cwd. err is
// why a file URL names no path (the path is then the URL as given, for
// the approval dialog): the call fails with it when it runs (pathFailed).
func (s *session) toolPath(p string) (string, error) {
	p = strings.TrimPrefix(p, "@")
	if s.set.home != "" && (p == "~" || strings.HasPrefix(p, "~/") || strings.HasPrefix(p, "~"+string(filepath.Separator))) {
		p = filepath.Join(s.set.home, p[1:])
	}
	if strings.HasPrefix(p, "file://") {
		path, err := fileURLPath(p, runtime.GOOS)
		if err != nil {
			return p, err
		}
		p = path
	}
	return resolvePath(s.set.cwd, p), nil
}

// pathFailed is the call of a tool whose path names none (a file URL
// toolPath cannot read): it fails with err when it runs, as pi's tool
// does, and asks approval (when its tool needs it) for the path as given.
type pathFailed struct {
	tool, path string
	err        error
}

func (c *pathFailed) describe() (string, string) {
	return "Allow " + c.tool + " of " + escapeControl(c.path) + "?", escapeControl(c.err.Error())
}

func (c *pathFailed) run(context.Context, *session, toolRun) (toolResult, error) {
	return toolResult{}, c.err
}

// fileURLPath is the path a file:// URL names, as pi 1.6's tools read
// one (Node's fileURLToPath, with its error texts): the query and the
// fragment left out, a backslash taken for a slash, the host empty or
// localhost (on Windows a host is a UNC server), no encoded / (nor \ on
// Windows), the percent escapes decoded as UTF-8. Dot segments are left
// to resolvePath, which cleans the path as Node's URL parser does.
func fileURLPath(u, goos string) (string, error) {
	rest := strings.ReplaceAll(strings.TrimPrefix(u, "file://"), `\`, "/")
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i]
	}
	host, path := rest, "/"
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		host, path = rest[:i], rest[i:]
	}
	if host = strings.ToLower(host); host == "localhost" {
		host = ""
	}
	if strings.Contains(strings.Trim(host, "[]"), ":") && !strings.HasPrefix(host, "[") || strings.ContainsAny(host, " %<>^|") {
		return "", errors.New("Invalid URL") // a port, or a character no host has
	}
	lower := strings.ToLower(path)
	windows := goos == "windows"
	switch {
	case windows && (strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c")):
		return "", errors.New(`File URL path must not include encoded \ or / characters`)
	case !windows && strings.Contains(lower, "%2f"):
		return "", errors.New("File URL path must not include encoded / characters")
	case !windows && host != "":
		return "", fmt.Errorf(`File URL host must be "localhost" or empty on %s`, goos)
	}
	// As JavaScript's decodeURIComponent: a % not before two hex digits,
	// or escapes that are no UTF-8, are malformed.
	decoded, err := url.PathUnescape(path)
	if err != nil || !utf8.ValidString(decoded) {
		return "", errors.New("URI malformed")
	}
	if !windows {
		return decoded, nil
	}
	decoded = strings.ReplaceAll(decoded, "/", `\`)
	if host != "" {
		return `\\` + host + decoded, nil
	}
	if len(decoded) < 3 || decoded[2] != ':' || !('a' <= decoded[1]|32 && decoded[1]|32 <= 'z') {
		return "", errors.New("File URL path must be absolute")
	}
	return decoded[1:], nil
}

// errNotRegular says a path is not a regular file.
type errNotRegular struct {
	path, kind string
}

func (e *errNotRegular) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file", e.path, e.kind)
}

// fileKind names what a mode is, for errors.
func fileKind(mode os.FileMode) string {
	switch {
	case mode.IsDir():
		return "a directory"
	case mode&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case mode&os.ModeSocket != 0:
		return "a socket"
	case mode&os.ModeDevice != 0:
		return "a device"
	case mode&os.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

// ownStdio is what rpi's own stdin, stdout and stderr are, so that no
// file tool reaches them even when they are regular files.
var ownStdio = lazy[[]os.FileInfo]{build: func() []os.FileInfo {
	var infos []os.FileInfo
	for _, f := range []*os.File{os.Stdin, os.Stdout, os.Stderr} {
		if info, err := f.Stat(); err == nil {
			infos = append(infos, info)
		}
	}
	return infos
}}

// openRegularSized opens path for reading (openRegular), and gives its
// size.
func openRegularSized(path string) (io.ReadCloser, int64, error) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, info.Size(), nil
}

// openRegular opens path (following symlinks) only if it is a regular
// file, not one of rpi's own stdio and not on /proc or /sys: a FIFO,
// socket or device is refused before it is opened and checked again on
// the open file, and the open itself never blocks. Where nothing is
// there (and the open would create nothing), the open is not tried: it
// would fail the same way, and startup looks for many files it seldom
// finds (AGENTS.md in every folder up the tree, auth.json, …).
func openRegular(path string, flag int, perm os.FileMode) (*os.File, error) {
	info, err := os.Stat(path)
	if err == nil && !info.Mode().IsRegular() {
		return nil, &errNotRegular{path, fileKind(info.Mode())}
	}
	if pe, ok := err.(*fs.PathError); ok && pe.Err == syscall.ENOENT && flag&os.O_CREATE == 0 {
		return nil, &fs.PathError{Op: "open", Path: path, Err: pe.Err}
	}
	f, err := openNonBlocking(path, flag, perm)
	if err != nil {
		return nil, err
	}
	info, err = f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	kind := ""
	if !info.Mode().IsRegular() {
		kind = fileKind(info.Mode())
	}
	for _, own := range ownStdio.get() {
		if kind == "" && os.SameFile(info, own) {
			kind = "rpi's own stdin, stdout or stderr"
		}
	}
	if kind == "" {
		kind = specialFileSystem(f)
	}
	if kind != "" {
		f.Close()
		return nil, &errNotRegular{path, kind}
	}
	return f, nil
}

// checkRegular checks a path that another program will open by its name
// (the editor, in ACP mode) as openRegular would open it, reading
// nothing: a file that exists must be one openRegular opens, and what it
// is comes back, to make sure after that the path still leads there; a
// name that leads to no file (nil, nil) must not be in a folder of /proc
// or /sys, where the other program's /proc/self/fd/3 is its own. The
// error is openRegular's, as the file tools give it.
func checkRegular(path string) (os.FileInfo, error) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if err == nil {
		defer f.Close()
		return f.Stat()
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	_, _, _, dir, perr := openNewFilePlace(path)
	if perr != nil {
		return nil, err
	}
	dir.Close()
	return nil, nil
}

// readRegularFile reads a whole regular file (see openRegular) of at most
// limit bytes. A larger one is an *fs.PathError, which names the path
// once however the caller words it (unwrapPathError).
func readRegularFile(path string, limit int64) ([]byte, error) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("it is larger than %s", formatSize(int(limit)))}
	}
	return data, nil
}

// fileError is the message for a file that cannot be used.
func fileError(verb, path string, err error) error {
	var nr *errNotRegular
	if errors.As(err, &nr) {
		return fmt.Errorf("Cannot %s %s: it is %s; the file tools only use regular files", verb, path, nr.kind)
	}
	return fmt.Errorf("Cannot %s %s: %v", verb, path, unwrapPathError(err))
}

// unwrapPathError drops the op and path an *fs.PathError repeats.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// formatSize is pi's size text: 512B, 50.0KB, 1.2MB.
func formatSize(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%dB", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1fKB", float64(n)/1024)
	default:
		return fmt.Sprintf("%.1fMB", float64(n)/(1<<20))
	}
}

// lineReader reads lines split on "\n" (a final line without one counts,
// even when empty, as strings.Split would), keeping at most keep bytes of
// each but counting its full length, so a huge line costs no memory. It
// stops with the context's error when ctx ends, even within one line.
type lineReader struct {
	ctx  context.Context
	br   *bufio.Reader
	keep int
	done bool
}

func (lr *lineReader) next() (line []byte, length int, ok bool, err error) {
	if lr.done {
		return nil, 0, false, nil
	}
	for {
		if lr.ctx.Err() != nil {
			return nil, 0, false, errors.New("Operation aborted")
		}
		chunk, rerr := lr.br.ReadSlice('\n')
		ended := rerr == nil
		if ended {
			chunk = chunk[:len(chunk)-1]
		}
		length += len(chunk)
		if room := lr.keep - len(line); room > 0 {
			line = append(line, chunk[:min(room, len(chunk))]...)
		}
		switch {
		case ended:
			return line, length, true, nil
		case rerr == bufio.ErrBufferFull:
			continue
		case rerr == io.EOF:
			lr.done = true
			return line, length, true, nil
		default:
			return nil, 0, false, rerr
		}
	}
}

// resolvePath makes path absolute against dir.
func resolvePath(dir, path string) string {
	if path == "" {
		return dir
	}
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(dir, path)
}

// sessionPathIn resolves a path naming a session file or folder
// (switch_session's sessionPath, --session, --fork, --session-dir, a
// hello's session) as pi 1.6's resolvePath does: a leading ~, alone or
// before a separator, is the home folder (when rpi knows one), and a
// relative path is taken from dir.
func sessionPathIn(dir, home, path string) string {
	expanded, _ := expandTilde(path, home) // no home: the ~ stays, as it does for a tool's path
	return resolvePath(dir, expanded)
}

// maxResourceBytes caps every file rpi reads at startup (settings,
// models.json, context files, templates, skills): a larger one is skipped
// with a warning.
const maxResourceBytes = 1 << 20

// writeFileWhole replaces path with data: written to a new file beside
// it (with mode), then renamed over it, so that a crash leaves the old
// file or the new, never a part.
func writeFileWhole(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
