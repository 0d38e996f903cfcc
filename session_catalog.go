package main

// The session catalog (docs/commands.md session_list, session_delete): the session files
// on disk, listed without loading them and deleted only where they
// belong. pi has no command for this (its clients read the folder
// themselves); these are the original system's. The core takes plain
// values, not a request, so that the ACP mode's session/list and
// session/delete (docs/acp.md) are the same code.
//
// What a row costs: a file is read for at most catalogHeadBytes from its
// start and catalogTailBytes from its end, whatever its size, so a 1 GiB
// session costs as much as a small one. The header gives the id and cwd;
// the first user message found in the head gives the summary; the last
// session_info in head or tail gives the name. messageCount is exact for
// a file read whole (up to catalogHeadBytes) and null for a larger one:
// counting its messages would mean reading all of it.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

const (
	catalogHeadBytes   = 256 << 10 // read from a file's start; a file this small is read whole
	catalogTailBytes   = 64 << 10  // read from the end of a larger one, for a late rename
	catalogSummaryRune = 80        // a summary's length at most, in characters
	catalogNameRunes   = 200       // a name's length at most, in characters
	catalogCwdRunes    = 4096      // a header's cwd's, in characters: Linux's PATH_MAX is 4096 bytes
	catalogIDRunes     = 1024      // a header's id's: pi's are 36 characters, rpi's at most maxSessionIDLength
)

// sessionStore is where session files live: root is pi's sessions folder
// (<agent dir>/sessions, one folder per working directory, named by
// defaultSessionDir), or with flat a --session-dir holding the files of
// every working directory itself.
type sessionStore struct {
	root string
	flat bool
}

// sessionRow is one session of session_list: the original's row fields.
type sessionRow struct {
	SessionID     string  `json:"sessionId"`
	Name          *string `json:"name"` // null when the session has none
	Cwd           string  `json:"cwd"`
	Path          string  `json:"path"`
	Summary       string  `json:"summary"`       // the first user message's first line, ≤ 80 characters ("" when none was read)
	ModifiedEpoch int64   `json:"modifiedEpoch"` // the file's modification time, in seconds
	Size          int64   `json:"size"`          // in bytes
	MessageCount  *int    `json:"messageCount"`  // null when the file is too large to count cheaply
	// rpi serve's, on a session live in the host: live (true), whether a
	// turn runs, how many clients are attached
	Live    bool  `json:"live,omitempty"`
	Running *bool `json:"running,omitempty"`
	Clients *int  `json:"clients,omitempty"`

	modified int64 // in nanoseconds, for the order
}

// listSessions lists the sessions of cwd, or of every working directory
// when cwd is "", newest first (ties by path). The cwd's sessions are the
// files of its folder; in a flat store, the files whose header names cwd
// (pi's rule for a --session-dir). Anything that is not a session file
// (another name, a symlink, a file whose first line is no session header)
// is skipped, and so is a file whose path is not UTF-8; a folder that cannot be read too, except the root or the
// cwd's own folder. It stops when ctx ends.
//
// Listings of one folder share its scans (listScans): a client that asks
// for a thousand at once makes rpi read the folder twice, not a thousand
// times at once.
func listSessions(ctx context.Context, store sessionStore, cwd string) ([]sessionRow, error) {
	folder := "" // every working directory's
	switch {
	case store.flat:
		folder = store.root // read whole, cwd's rows picked after
	case cwd != "":
		folder = defaultSessionDir(filepath.Dir(store.root), cwd) // the root is <agent dir>/sessions
	}
	rows, err := listScans.share(ctx, scanKey{store, folder}, func(ctx context.Context) ([]sessionRow, error) {
		return scanSessions(ctx, store, folder)
	})
	if err != nil {
		return nil, err
	}
	mine := make([]sessionRow, 0, len(rows)) // the caller's to change (rpi serve marks live sessions)
	for _, row := range rows {
		if !store.flat || cwd == "" || row.Cwd == cwd {
			mine = append(mine, row)
		}
	}
	return mine, nil
}

// scanSessions reads the rows of the session files of folder, or when it
// is "" of every folder of the store's root, newest first, as
// listSessions gives them (of every working directory in a flat store).
func scanSessions(ctx context.Context, store sessionStore, folder string) ([]sessionRow, error) {
	var dirs []string
	single := folder != "" // one folder: the flat one, or the cwd's
	switch {
	case single:
		dirs = []string{folder}
	default:
		entries, err := os.ReadDir(store.root)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("Cannot list sessions in %s: %v", store.root, unwrapPathError(err))
		}
		for _, e := range entries {
			if e.Type().IsDir() { // a symlink to a folder is not followed
				dirs = append(dirs, filepath.Join(store.root, e.Name()))
			}
		}
	}
	rows := []sessionRow{}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil && single && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("Cannot list sessions in %s: %v", dir, unwrapPathError(err))
		}
		for _, e := range entries {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// A path that is not UTF-8 could not be given back as it is
			// (JSON would make its bytes U+FFFD): not listed.
			if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".jsonl") || !utf8.ValidString(filepath.Join(dir, e.Name())) {
				continue
			}
			if row, ok := listedRows.read(filepath.Join(dir, e.Name()), e); ok {
				rows = append(rows, row)
			}
		}
	}
	if listScanRead != nil {
		listScanRead(dirs)
	}
	slices.SortFunc(rows, func(a, b sessionRow) int {
		return cmp.Or(cmp.Compare(b.modified, a.modified), strings.Compare(a.Path, b.Path))
	})
	return rows, nil
}

// scanKey names a scan: the store, and the folder read ("": all of them).
type scanKey struct {
	store  sessionStore
	folder string
}

// sharedScans are the scans of session folders under way, each shared by
// the listings of its folder. A listing that comes while none runs starts
// one; one that comes while one runs waits for the next, which starts
// when that one ends (the folder may have changed since it began) and
// answers every listing that came in the meantime. So a folder is read
// by one scan at a time, and at most twice for any number of listings
// that come together; every answer was read after its listing came.
type sharedScans struct {
	mu    mutex[sharedScansMu]
	scans map[scanKey]*folderScans // only while one runs
}

// folderScans are a folder's scan under way and the one that follows it
// (nil when no listing waits).
type folderScans struct{ running, next *folderScan }

// folderScan is one scan and its answer, which done tells has come.
type folderScan struct {
	done     chan struct{}
	claimed  bool // a listing runs it
	panicked bool // its scan ended with a panic
	rows     []sessionRow
	err      error
}

// listScans is the process's: every store's.
var listScans sharedScans

// share is the answer of a scan of key that starts after this call began,
// run by scan (with the ctx of the listing that runs it; a listing whose
// shared scan ended with another's context ends runs one of its own).
// The rows are shared: the caller copies what it changes.
func (s *sharedScans) share(ctx context.Context, key scanKey, scan func(context.Context) ([]sessionRow, error)) ([]sessionRow, error) {
	for {
		s.mu.Lock()
		if s.scans == nil {
			s.scans = map[scanKey]*folderScans{}
		}
		f := s.scans[key]
		if f == nil {
			f = &folderScans{}
			s.scans[key] = f
		}
		c := f.running
		if c == nil {
			c = &folderScan{done: make(chan struct{}), claimed: true}
			f.running = c
		} else {
			if f.next == nil {
				f.next = &folderScan{done: make(chan struct{})}
			}
			c = f.next
			running := f.running
			s.mu.Unlock()
			if listScanJoined != nil {
				listScanJoined([]string{key.folder})
			}
			<-running.done // it ends: a scan stops when its context does
			s.mu.Lock()
			if c.claimed { // another listing runs it
				s.mu.Unlock()
				<-c.done
				if c.panicked {
					continue
				}
				if c.err != nil && ctx.Err() == nil && (errors.Is(c.err, context.Canceled) || errors.Is(c.err, context.DeadlineExceeded)) {
					continue // the context that ended was the other listing's
				}
				return c.rows, c.err
			}
			c.claimed = true // f.running is c: the scan that ended made it so
		}
		s.mu.Unlock()
		return s.run(ctx, key, f, c, scan)
	}
}

// run runs c's scan, then lets the folder's next one start and answers
// the listings that wait for c. A scan that panics does so too (the panic
// goes on to this listing's recover): those listings run one of their own.
func (s *sharedScans) run(ctx context.Context, key scanKey, f *folderScans, c *folderScan, scan func(context.Context) ([]sessionRow, error)) ([]sessionRow, error) {
	c.panicked = true
	defer func() {
		s.mu.Lock()
		if f.running, f.next = f.next, nil; f.running == nil {
			delete(s.scans, key)
		}
		s.mu.Unlock()
		close(c.done)
	}()
	c.rows, c.err = scan(ctx)
	c.panicked = false
	return c.rows, c.err
}

// listScanRead and listScanJoined are the tests' view of the scans: a
// scan has read its folders (dirs), and is about to answer; a listing
// waits for the next scan of its folder. Nil otherwise.
var listScanRead, listScanJoined func(dirs []string)

// catalogEntry is what a row needs of a session entry.
type catalogEntry struct {
	Type    string          `json:"type"`
	Name    *string         `json:"name"`
	Message json.RawMessage `json:"message"`
}

// readSessionRow reads a session file's row; ok is false when it is not
// a session file.
func readSessionRow(path string) (row sessionRow, ok bool) {
	row, ok, _ = readSessionRowInfo(path)
	return row, ok
}

// readSessionRowInfo is readSessionRow, and the status of the file the
// row was read from (nil when it could not be opened).
func readSessionRowInfo(path string) (row sessionRow, ok bool, info os.FileInfo) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return row, false, nil
	}
	defer f.Close()
	info, err = f.Stat()
	if err != nil {
		return row, false, nil
	}
	row, ok = sessionRowOf(f, info.Size())
	row.Path, row.ModifiedEpoch, row.Size, row.modified = path, info.ModTime().Unix(), info.Size(), info.ModTime().UnixNano()
	return row, ok, info
}

// sessionRows keeps the rows listSessions has read, by path, each with
// the status of the file it was read from: a file listed again that is
// still the same file (its device and inode), of the same size and
// modification time, is not read again. Paging through a folder's
// sessions (ACP's session/list, 50 a page) read every file of the folder
// for each page. A file written in place to the same size, within the
// clock tick of its last change or with its modification time put back
// (by whoever may write it), is the one change this misses; rpi and pi
// only append to a session file or replace it whole. What the rows
// hold is bounded (maxListedRowBytes); past it they are all forgotten.
type sessionRows struct {
	mu    mutex[sessionRowsMu]
	rows  map[string]listedRow
	bytes int
}

// listedRow is a row sessionRows keeps, and the status it was read with.
type listedRow struct {
	info os.FileInfo
	row  sessionRow
	ok   bool
}

// maxListedRowBytes bounds the text of the rows sessionRows keeps.
const maxListedRowBytes = 32 << 20

// listedRows is the process's: every session store's rows, by path.
var listedRows sessionRows

// read is the row of the file at path, which e lists: the one kept when
// the file is unchanged, else read (and kept).
func (c *sessionRows) read(path string, e os.DirEntry) (sessionRow, bool) {
	now, err := e.Info()
	if err != nil {
		return readSessionRow(path)
	}
	c.mu.Lock()
	kept, found := c.rows[path]
	c.mu.Unlock()
	if found && kept.info.Size() == now.Size() && kept.info.ModTime().Equal(now.ModTime()) && os.SameFile(kept.info, now) {
		return kept.row, kept.ok
	}
	row, ok, info := readSessionRowInfo(path)
	if info == nil {
		return row, ok
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, found := c.rows[path]; found {
		c.bytes -= old.row.keptBytes()
	}
	if c.rows == nil || c.bytes+row.keptBytes() > maxListedRowBytes {
		c.rows, c.bytes = map[string]listedRow{}, 0
	}
	c.rows[path], c.bytes = listedRow{info, row, ok}, c.bytes+row.keptBytes()
	return row, ok
}

// keptBytes is about what sessionRows spends on keeping r: its text, and
// a guess at the rest (the map's slot, the file's status).
func (r sessionRow) keptBytes() int {
	n := 512 + len(r.Path) + len(r.SessionID) + len(r.Cwd) + len(r.Summary)
	if r.Name != nil {
		n += len(*r.Name)
	}
	return n
}

// sessionRowOf reads the row's fields from a session file's content of
// size bytes, reading no more than its head and tail.
func sessionRowOf(f io.ReaderAt, size int64) (row sessionRow, ok bool) {
	whole := size <= catalogHeadBytes
	head := bufio.NewReaderSize(io.NewSectionReader(f, 0, catalogHeadBytes), 64<<10)
	first, err := readHeaderLineFrom(head)
	if err != nil && (err != io.EOF || !whole) {
		return row, false // no whole first line within the head
	}
	header, ok := parseSessionHeader(first)
	if !ok {
		return row, false
	}
	// Cut as a long name is: a longer cwd names no directory, a longer id
	// none a client gives, and each is kept, and sent, with every row.
	row.SessionID, row.Cwd = clipRunes(header.ID, catalogIDRunes), clipRunes(header.Cwd, catalogCwdRunes)
	messages, summarized := 0, false
	var d jsonIn
	var e catalogEntry
	take := func(line []byte, namesOnly bool) {
		if !readCatalogEntry(line, &d, &e) || namesOnly && e.Type != "session_info" {
			return
		}
		switch e.Type {
		case "session_info":
			row.Name = nil
			if e.Name != nil && strings.TrimSpace(*e.Name) != "" {
				name := clipRunes(strings.TrimSpace(*e.Name), catalogNameRunes)
				row.Name = &name
			}
		case "message":
			messages++
			if summarized {
				break
			}
			if text, isUser := userText(decodeMessage(e.Message)); isUser && strings.TrimSpace(text) != "" {
				row.Summary, summarized = summaryLine(text), true
			}
		}
	}
	for {
		line, err := head.ReadBytes('\n')
		if err != nil && !whole {
			break // the line the head cuts: the tail has what follows
		}
		if len(bytes.TrimSpace(line)) > 0 {
			take(line, false)
		}
		if err != nil {
			break
		}
	}
	if whole {
		row.MessageCount = &messages
		return row, true
	}
	// A larger file: its last lines, for a name given later on.
	start := max(size-catalogTailBytes-1, catalogHeadBytes-1) // from the byte before a line the head did not take
	tail := make([]byte, size-start)
	n, _ := f.ReadAt(tail, start)
	tail = tail[:n]
	if i := bytes.IndexByte(tail, '\n'); i >= 0 {
		tail = tail[i+1:] // the first line is cut (or ends just before the tail)
		for _, line := range bytes.Split(tail, []byte("\n")) {
			if bytes.Contains(line, []byte(`"session_info"`)) { // only names count here
				take(line, true)
			}
		}
	}
	return row, true
}

// readCatalogEntry reads into e what a row needs of a session line, as
// json.Unmarshal reads it (the decoder's fast path, or encoding/json for
// a line the fast path does not take); false when the line is not a
// JSON object of that shape. A listing reads every line of a file of up
// to catalogHeadBytes, and encoding/json read about 70 MB a second.
func readCatalogEntry(line []byte, d *jsonIn, e *catalogEntry) bool {
	*e = catalogEntry{}
	d.reset(line)
	var seen uint32
	d.object(func(key []byte) {
		switch string(key) {
		case "type":
			d.once(&seen, 0)
			d.name(&e.Type)
		case "name":
			d.once(&seen, 1)
			if !d.null() {
				var name string
				d.str(&name)
				e.Name = &name
			}
		case "message":
			d.once(&seen, 2)
			d.raw(&e.Message)
		default:
			d.skip() // a key that differs from one of these only in case too
		}
	})
	if !d.fail && skipSpace(line, d.i) == len(line) {
		return true
	}
	*e = catalogEntry{}
	if unmarshalExact(line, e) != nil {
		return false
	}
	e.Message, _ = validRaw(e.Message) // as the fast path keeps it
	return true
}

// readSessionHeaderAt reads the header of the session file at path as
// the session list reads it (a whole line within its first
// catalogHeadBytes); ok is false when it is no session file.
func readSessionHeaderAt(path string) (h sessionHeader, ok bool) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return h, false
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return h, false
	}
	first, err := readHeaderLineFrom(bufio.NewReader(io.LimitReader(f, catalogHeadBytes)))
	if err != nil && (err != io.EOF || info.Size() > catalogHeadBytes) {
		return h, false
	}
	return parseSessionHeader(first)
}

// readHeaderLineFrom reads the line of r, the start of a file, that the
// loader takes as the header (readHeaderLine): the first that
// passedOverBeforeHeader keeps, a byte order mark first skipped.
func readHeaderLineFrom(r *bufio.Reader) ([]byte, error) {
	for first := true; ; first = false {
		line, err := r.ReadBytes('\n')
		if first {
			line = bytes.TrimPrefix(line, byteOrderMark)
		}
		if trimmed, blank := trimLine(line); !passedOverBeforeHeader(trimmed, blank) || err != nil {
			return line, err
		}
	}
}

// parseSessionHeader reads a session file's first line: a header has
// type "session" and an id. Its version is read as loadSessionFile reads
// it (3.0 as 3).
func parseSessionHeader(line []byte) (sessionHeader, bool) {
	var header struct {
		Type string `json:"type"`
		sessionHeader
	}
	if unmarshalExact(plainWholeNumbers(line, headerInts, false), &header) != nil || header.Type != "session" || header.ID == "" {
		return sessionHeader{}, false
	}
	return header.sessionHeader, true
}

// summaryLine is the first non-blank line of text, at most 80 characters
// (cut with "…").
func summaryLine(text string) string {
	line := ""
	for l := range strings.Lines(text) {
		if line = strings.TrimSpace(l); line != "" {
			break
		}
	}
	return clipRunes(line, catalogSummaryRune)
}

// clipRunes is s when it has at most n characters, else its first n-1
// (without white space at their end) and "…".
func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	cut, count := 0, 0
	for i := range s {
		if count == n-1 {
			cut = i
			break
		}
		count++
	}
	return strings.TrimSpace(s[:cut]) + "…"
}

// deleteSession removes the session file at path (absolute) and its loops
// file. It refuses, deleting nothing, the current session (current, ""
// for none), a session file an rpi process holds (this one, whatever
// session it is switching to, or another: see lockSessionFile), and any
// path that is not a session file inside store's tree (a file of one of
// its project folders, or of the flat folder), judged after symlinks and
// ".." are resolved; removeSessionIn then checks and removes it again
// through the folders themselves.
func deleteSession(store sessionStore, path, current string) error {
	notOurs := func(why string) error {
		return fmt.Errorf("Cannot delete %s: %s", path, why)
	}
	if current != "" && sameSessionPath(path, current) {
		return errors.New("Cannot delete the current session")
	}
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, os.ErrNotExist) {
		return errSessionNotFound(path)
	}
	if err != nil {
		return notOurs(unwrapPathError(err).Error())
	}
	if current != "" && sameSessionPath(real, current) {
		return errors.New("Cannot delete the current session")
	}
	outside := "it is not in a project's folder of the session directory " + store.root
	depth := 2 // a project's folder, then the file
	if store.flat {
		outside, depth = "it is not in the session directory "+store.root, 1
	}
	root, err := filepath.EvalSymlinks(store.root)
	if err != nil {
		return notOurs(outside)
	}
	rel, err := filepath.Rel(root, real)
	if err != nil || !filepath.IsLocal(rel) || len(strings.Split(rel, string(filepath.Separator))) != depth {
		return notOurs(outside)
	}
	if !strings.HasSuffix(real, ".jsonl") {
		return notOurs("it is not a session file")
	}
	if err := removeSessionIn(root, rel); err != nil {
		return fmt.Errorf("Cannot delete %s: %w", path, err)
	}
	return nil
}

// errSessionHeld says a session file to delete is held by an rpi process
// (the lock of lockSessionFile): this one or another.
var errSessionHeld = errors.New("the session is open in an rpi process (this one or another); close it there first")

// removeSessionIn removes the session file rel (a name, or a project
// folder's name and a name) of the folder root, and its loops file, all
// through root opened as an os.Root: a folder swapped for a symlink that
// leads out of root meanwhile is not followed, and the file is checked
// (a regular file with a session header) on the descriptor it is removed
// under, while holding it: when an rpi process holds it (the lock of
// lockSessionFile), nothing is removed.
func removeSessionIn(root, rel string) error {
	dir, err := os.OpenRoot(root)
	if err != nil {
		return unwrapPathError(err)
	}
	defer dir.Close()
	name := rel
	if folder, file, ok := strings.Cut(rel, string(filepath.Separator)); ok {
		project, err := dir.OpenRoot(folder)
		if err != nil {
			return unwrapPathError(err)
		}
		defer project.Close()
		dir, name = project, file
	}
	info, err := dir.Lstat(name)
	if err != nil {
		return unwrapPathError(err)
	}
	if !info.Mode().IsRegular() {
		return errors.New("it is not a session file")
	}
	f, err := dir.OpenFile(name, os.O_RDONLY|nonBlocking, 0)
	if err != nil {
		return unwrapPathError(err)
	}
	defer f.Close()
	held, err := f.Stat()
	if err != nil || !os.SameFile(info, held) {
		return errors.New("it changed while it was being deleted")
	}
	// As the session list reads it (sessionRowOf): a line that the head's
	// limit cuts, rather than the file's end, is no whole line, and what
	// it holds there may be a header that runs on into no JSON.
	first, err := readHeaderLineFrom(bufio.NewReader(io.LimitReader(f, catalogHeadBytes)))
	if _, ok := parseSessionHeader(first); !ok || err != nil && (err != io.EOF || held.Size() > catalogHeadBytes) {
		return errors.New("it is not a session file")
	}
	switch ok, err := tryLock(f); {
	case err != nil:
		return err
	case !ok:
		return errSessionHeld
	}
	if now, err := dir.Lstat(name); err != nil || !os.SameFile(info, now) {
		return errors.New("it changed while it was being deleted")
	}
	if !removeWhileOpen {
		f.Close()
	}
	if err := dir.Remove(name); err != nil {
		return unwrapPathError(err)
	}
	loops := loopsFileOf(name)
	if info, err := dir.Lstat(loops); err == nil && info.Mode().IsRegular() {
		dir.Remove(loops)
	}
	return nil
}

// sameSessionPath reports whether two paths name the same session file:
// the same path once symlinks are resolved (a file not written yet
// resolves through its folder), or the same file on disk.
func sameSessionPath(a, b string) bool {
	resolve := func(p string) string {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return real
		}
		if dir, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			return filepath.Join(dir, filepath.Base(p))
		}
		return filepath.Clean(p)
	}
	if resolve(a) == resolve(b) {
		return true
	}
	ia, errA := os.Stat(a)
	ib, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(ia, ib)
}

// ---- The commands ----

// sessionStore is this server's: --session-dir (flat), else pi's
// sessions folder in the agent directory.
func (s *session) sessionStore() sessionStore { return storeOf(s.set.cfg, s.set.agentDir) }

// storeOf is the session store of cfg's --session-dir (flat), else pi's
// sessions folder in agentDir.
func storeOf(cfg cliConfig, agentDir string) sessionStore {
	if dir := cfg.sessionDir; dir != "" {
		return sessionStore{root: resolvePath(cfg.cwd, dir), flat: true}
	}
	return sessionStore{root: filepath.Join(agentDir, "sessions")}
}

// findSession is the file of the session whose header id is id: in cwd's
// folder first (when cwd is not ""), else in any; errNoSuchSession when
// there is none. A file named for another session is no match
// (namedForAnother), and several that claim the id are refused, named
// (errSessionClaimedTwice): in a shared --session-dir one may be
// someone else's, with a cwd of their choosing for the session to run in.
func findSession(ctx context.Context, store sessionStore, id, cwd string) (string, error) {
	scopes := []string{""}
	if cwd != "" && !store.flat {
		scopes = []string{cwd, ""}
	}
	for _, scope := range scopes {
		rows, err := listSessions(ctx, store, scope)
		if err != nil {
			return "", err
		}
		if path, err := oneSessionFile(id, claimsOf(rows, id)); path != "" || err != nil {
			return path, err
		}
	}
	return "", errNoSuchSession
}

// claimsOf is the paths of the rows that claim the session id: their
// header's id, in a file not named pi's way for another session
// (namedForAnother).
func claimsOf(rows []sessionRow, id string) []string {
	var paths []string
	for _, r := range rows {
		if r.SessionID == id && !namedForAnother(filepath.Base(r.Path), id) {
			paths = append(paths, r.Path)
		}
	}
	return paths
}

// errNoSuchSession: no session file has the id asked for.
var errNoSuchSession = errors.New("no session has that id")

// findSessionArg resolves what --session and --continue name, as pi 1.6
// does, into o.file: a --session argument with no '/' or '\' that does
// not end in .jsonl is a session id, or the start of one
// (findSessionByID); --continue, with neither --session nor --no-session,
// is the cwd's session file written last, or a new session when it has
// none.
func (s *session) findSessionArg(o *sessionOptions) error {
	cfg := s.set.cfg
	switch {
	case cfg.noSession:
	case o.file != "" && o.startInEmpty && !sessionArgIsPath(o.file):
		path, err := findSessionByID(s.ctx, s.sessionStore(), o.file, o.cwd)
		if err != nil {
			return err
		}
		o.file = path
	case o.file == "" && o.id == "" && o.forkFrom == "" && cfg.continueRecent:
		rows, err := listSessions(s.ctx, s.sessionStore(), o.cwd)
		if err != nil {
			return err
		}
		if len(rows) > 0 { // newest first
			o.file = rows[0].Path
		}
	}
	return nil
}

// sessionArgIsPath is pi's rule for a --session argument: one with a '/'
// or '\', or ending in .jsonl, is a file's path; any other an id.
func sessionArgIsPath(arg string) bool {
	return strings.ContainsAny(arg, `/\`) || strings.HasSuffix(arg, ".jsonl")
}

// findSessionByID is the file of the session --session ID names
// (sessionByID). rpc mode cannot ask, as pi's terminal does, whether to
// fork another project's session into cwd: finding one there is an error
// that names it.
func findSessionByID(ctx context.Context, store sessionStore, id, cwd string) (string, error) {
	row, inCwd, err := sessionByID(ctx, store, id, cwd)
	switch {
	case err != nil:
		return "", err
	case !inCwd:
		return "", fmt.Errorf("Session found in different project: %s (rpc mode cannot ask whether to fork it into the current one: --fork %s does)", row.Cwd, row.Path)
	}
	return row.Path, nil
}

// sessionByID is the session an id, or the start of one, names, as pi 1.6
// finds it for --session ID and --fork ID: among cwd's sessions the one
// with that id, else the one written last whose id starts with it; else
// the same among every project's (with --session-dir, every file there).
// inCwd says which; none is pi's "No session found matching 'ID'". The
// one with that id is found as findSession finds it: several files that
// claim it are refused, a file named for another session is no match.
func sessionByID(ctx context.Context, store sessionStore, id, cwd string) (row sessionRow, inCwd bool, err error) {
	for _, scope := range []string{cwd, ""} {
		rows, err := listSessions(ctx, store, scope)
		if err != nil {
			return sessionRow{}, false, err
		}
		path, err := oneSessionFile(id, claimsOf(rows, id))
		if err != nil {
			return sessionRow{}, false, err
		}
		i := slices.IndexFunc(rows, func(r sessionRow) bool { return path != "" && r.Path == path })
		if i < 0 {
			i = slices.IndexFunc(rows, func(r sessionRow) bool {
				return strings.HasPrefix(r.SessionID, id) && !namedForAnother(filepath.Base(r.Path), r.SessionID)
			})
		}
		if i >= 0 {
			return rows[i], scope != "", nil
		}
	}
	return sessionRow{}, false, fmt.Errorf("No session found matching '%s'", id)
}
