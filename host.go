package main

// The host: what belongs to the process, whatever sessions it serves —
// the command line and the model catalog with its keys (hostSettings),
// the children and their watchdog, rpi's temp
// folder, memory given back after a burst, the background work and the
// open sessions shutdown waits for — and how a goroutine that fails is
// kept from taking rpi down.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// host is the process. What never changes after startup is in set; each
// part that changes has its own owner and lock.
type host struct {
	set    *hostSettings // fixed at startup; read without locks
	env    runEnv
	stderr io.Writer
	// command builds every child rpi runs (exec.Command; the fuzz test
	// replaces it so that no input can run a real program).
	command func(name string, args ...string) *exec.Cmd

	// ctx is cancelled at shutdown; every session's context derives from it.
	ctx    context.Context
	cancel context.CancelFunc
	// background counts answers and work that have still to finish.
	background workCount

	procs    *processTable // children: background processes, user bash (own lock)
	temp     *tempFiles    // rpi's temp folder (own lock)
	watchdog *watchdog     // kills children if rpi dies (own lock)
	memory   memoryReturn  // gives memory back after a burst (own lock)
	mcpLog   mcpLog        // mcp.log, which every session's MCP servers write to (own lock)

	sessions sessionRegistry // the open sessions, by id, for every front end (own lock)

	runs runPolicy // which sessions run (at most --max-running at once)
}

// newHost reads what the process decides at startup (loadHostSettings).
func newHost(cfg cliConfig, env runEnv, stderr io.Writer) (*host, error) {
	set, err := loadHostSettings(cfg, env)
	if err != nil {
		return nil, err
	}
	h := &host{set: set, env: env, stderr: stderr, command: exec.Command, runs: runPolicy{limit: max(cfg.maxRunning, 1)}}
	if env.command != nil {
		h.command = env.command
	}
	h.watchdog = newWatchdog(env.executable, set.childEnv) // a child: no keys
	h.procs = newProcessTable(h.watchdog, stderr, env.adoptOrphans)
	h.procs.reapAdopted = env.reapAdopted
	if env.keepEnded > 0 {
		h.procs.keepEnded = env.keepEnded
	}
	h.temp = &tempFiles{parent: env.tempDir, watchdog: h.watchdog, stderr: stderr, keepFiles: maxKeptFiles, keepBytes: maxKeptBytes}
	h.memory.stderr, h.memory.clock = stderr, env.clock
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h, nil
}

// openSessions is a copy of the list of open sessions.
func (h *host) openSessions() []*session { return h.sessions.list() }

// maxSessions is how many sessions a host may have open at once: each
// holds its file's lock, its settings and resources, and goroutines while
// it runs, so a client that opens sessions without closing them is
// stopped here rather than by the machine.
const maxSessions = 64

// errTooManySessions refuses a session past maxSessions.
var errTooManySessions = errors.New("too many sessions open")

// sessionRegistry is the host's open sessions, found by id, whichever
// front end opened them, with the openings in progress: a session opened,
// being opened or being closed counts against maxSessions, and a second
// opening of one session file waits for the first (openOrWait). A
// session being closed still counts until it is closed, and is found no
// more: opening its file again waits for the file's lock.
type sessionRegistry struct {
	mu      mutex[registryMu]        // guards the fields below
	open    []*session               // in the order they opened
	opening int                      // sessions being opened, not in open yet
	loading map[string]chan struct{} // by id, the opening of that session's file now; closed when it is done
}

// list is a copy of the open sessions.
func (r *sessionRegistry) list() []*session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.open)
}

// find is the open session whose id is id, or nil.
func (r *sessionRegistry) find(id string) *session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.findLocked(id)
}

// findLocked is find with r.mu held. A session's id is its
// conversation's, which rpc's session changes replace: it is read afresh
// (conversation.mu comes after the registry's lock).
func (r *sessionRegistry) findLocked(id string) *session {
	for _, s := range r.open {
		if !s.closing.Load() && s.conv.info().id == id {
			return s
		}
	}
	return nil
}

// reserve counts one session being opened, unless maxSessions are open
// or being opened; release ends that count once the opening is
// done (add has made it open, or it failed).
func (r *sessionRegistry) reserve() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.open)+r.opening >= maxSessions {
		return errTooManySessions
	}
	r.opening++
	return nil
}

func (r *sessionRegistry) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opening--
}

// add makes s open; an error (and s stays out) when ending says the host
// is shutting down, which closes the sessions it lists, not this one, or
// when a session with its id is open already (opened meanwhile by
// another request: the first stays).
func (r *sessionRegistry) add(s *session, ending func() bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case ending():
		return errors.New("rpi is shutting down")
	case r.findLocked(s.conv.info().id) != nil:
		return errSessionOpen
	}
	r.open = append(r.open, s)
	return nil
}

// errSessionOpen refuses to open a session that is open already.
var errSessionOpen = errors.New("the session is open already")

// remove takes s out of the open sessions once it is closed.
func (r *sessionRegistry) remove(s *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open = slices.DeleteFunc(r.open, func(o *session) bool { return o == s })
}

// openOrWait is the open session with id, after waiting for another
// opening of its file now (which holds the file: this one would wait for
// the lock and fail); nil when it is not open, and then the caller opens
// it and calls loaded when done.
func (r *sessionRegistry) openOrWait(id string) *session {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if s := r.findLocked(id); s != nil {
			return s
		}
		opening := r.loading[id]
		if opening == nil {
			break
		}
		r.mu.Unlock()
		<-opening
		r.mu.Lock()
	}
	if r.loading == nil {
		r.loading = map[string]chan struct{}{}
	}
	r.loading[id] = make(chan struct{})
	return nil
}

// loaded ends the opening of the session with id (openOrWait): the
// openings waiting for it go on.
func (r *sessionRegistry) loaded(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.loading[id])
	delete(r.loading, id)
}

// runPolicy decides how many sessions of the host may run at once:
// limit (--max-running). A session's run claims a place (tryStartRun,
// under its s.mu) and lets it go when it settles.
type runPolicy struct {
	limit   int
	mu      mutex[runPolicyMu] // guards the fields below; taken under a session's mu, briefly
	running []*session         // the sessions whose run is in progress
	freed   chan struct{}      // closed when a run that let go of its place has settled (wake), then replaced
}

// claim gives s a place, unless it has one or limit sessions run.
func (p *runPolicy) claim(s *session) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case slices.Contains(p.running, s):
		return true
	case len(p.running) >= p.limit:
		return false
	}
	p.running = append(p.running, s)
	return true
}

// release lets go of s's place: its run is over (s.mu may be held:
// settle releases it before it reports the end of the turns, so that a
// prompt for another session sent on that report is not refused).
func (p *runPolicy) release(s *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running = slices.DeleteFunc(p.running, func(o *session) bool { return o == s })
}

// wake tells the prompts waiting for a place (placeFreed) that one may
// be free: called once the run that let go of it has settled and its end
// has been told (after its agent_settled and its turns' answers), so that
// a waiting prompt's turn comes after the end of the one it waited for.
func (p *runPolicy) wake() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.freed != nil {
		close(p.freed)
		p.freed = nil
	}
}

// placeFreed is a channel closed when a place has been let go of, while every
// place is taken by other sessions than s; nil when s could run now.
func (p *runPolicy) placeFreed(s *session) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.running) < p.limit || slices.Contains(p.running, s) {
		return nil
	}
	if p.freed == nil {
		p.freed = make(chan struct{})
	}
	return p.freed
}

// endRun is s's run settling: another session may run now, and the fires
// of its loops that waited start (startWaitingLoops); what the run left
// behind goes back to the system (afterRun). s.mu is not held.
func (h *host) endRun(s *session) {
	h.runs.release(s)
	h.runs.wake()
	h.memory.afterRun()
	for _, o := range h.openSessions() {
		if o != s {
			o.startWaitingLoops()
		}
	}
}

// shutdown ends every session's loops, lets running commands finish (for
// up to finishGrace, when patient), then refuses new children, aborts what
// remains, lets go of the session files once the last answers and entries
// are written, and waits for every child's process group to be killed.
func (h *host) shutdown(patient bool) {
	sessions := h.openSessions()
	for _, s := range sessions {
		s.stopLoops()
		s.endCacheWarm()
	}
	if patient {
		h.background.wait(finishGrace)
	}
	h.procs.close()
	h.cancel() // no session opens from now on (openSession)
	finished := h.background.wait(exitLimit)
	// The last entry is written: another rpi may have the session file
	// now, while the children are still being killed. A session opened
	// meanwhile (a load that ended as rpi began to end) is closed too.
	for _, s := range h.openSessions() {
		s.conv.close()
	}
	reaped := waitGroup(&h.procs.children, exitLimit)
	if !reaped || !finished {
		fmt.Fprintln(h.stderr, "rpi: gave up waiting for running commands at exit")
	}
	// What rpi adopted ends only once every child it started is reaped:
	// one still running is os/exec's to wait for, and would be taken for
	// an orphan. The watchdog is kept, asked for once each child is found,
	// so that one started meanwhile (background work that has not ended)
	// is known.
	if reaped && h.env.endOrphans != nil {
		h.procs.endAdopted(h.env.endOrphans)
	}
	h.temp.removeAll()
	h.watchdog.close()
	h.memory.close()
}

// settleIn is what a stdio wire does once it has answered the first
// lines that came, or settleWithin after it started serving when that
// has not come (its connection's whenIdle): the work startup leaves so
// as not to delay them. Before it reads on: SIGHUP's and SIGQUIT's
// handlers, and a 1 MiB pipe for out, its stdout, when that is a pipe (a
// client reading a flood of output then wakes rpi, and rpi it, far less
// often; only a hint). In the background: the sweep of temp folders that
// dead rpis left.
func (h *host) settleIn(out io.Writer) {
	readyLaterStopSignals()
	if f, ok := out.(*os.File); ok {
		growPipe(f)
	}
	h.goBackground(func() { sweepTempDirs(h.env.tempDir) })
}

// goBackground runs work on its own goroutine, counted for shutdown; a
// panic in it is logged and does not take rpi down.
func (h *host) goBackground(work func()) {
	h.background.add()
	go func() {
		defer h.background.done()
		guarded(h.stderr, "background work", work)()
	}()
}

// answerLater runs work in the background and passes its result to
// answer, so that the commands after it are not held up: an answer that
// waits on the outside world. A panic in work is a failure.
func (h *host) answerLater(what string, answer func(data any, err error), work func() (any, error)) {
	h.goBackground(func() {
		data, err := h.safely(what, work)
		answer(data, err)
	})
}

// waitGroup waits up to limit for wg and reports whether it finished.
// workCount counts work under way, as a sync.WaitGroup does, but work
// may also be added while a wait is under way, from any goroutine (an MCP
// server's end, told by its reader as rpi ends, is background work too):
// the wait ends when the count is zero, or at its limit.
type workCount struct {
	n    atomic.Int64
	idle chan struct{} // a done that brought the count to zero (one kept)
	once sync.Once
}

func (w *workCount) init() { w.once.Do(func() { w.idle = make(chan struct{}, 1) }) }

func (w *workCount) add() { w.init(); w.n.Add(1) }

func (w *workCount) done() {
	w.init()
	if w.n.Add(-1) == 0 {
		select {
		case w.idle <- struct{}{}:
		default:
		}
	}
}

// wait waits until no work is counted, at most limit; false when the
// limit came first.
func (w *workCount) wait(limit time.Duration) bool {
	w.init()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for w.n.Load() != 0 {
		select {
		case <-w.idle:
		case <-deadline.C:
			return false
		}
	}
	return true
}

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

// ---- Panics ----

// safely runs work, turning a panic into a failure and a stack trace on
// stderr, so one bug never stops the loop.
func (h *host) safely(what string, work func() (any, error)) (data any, err error) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(h.stderr, "rpi: panic in %s: %v\n%s", what, p, debug.Stack())
			data, err = nil, fmt.Errorf("Internal error in %s: %v", what, p)
		}
	}()
	return work()
}

// guarded returns f wrapped so that a panic in it is logged to stderr, with
// its stack, and goes no further. Every goroutine and callback that runs
// rpi's code starts through it — go guarded(…)(), time.AfterFunc(d,
// guarded(…)), context.AfterFunc(ctx, guarded(…)) — so that a bug in one
// ends only that piece of work, never rpi: the one whose work must end
// with an answer says so in a deferred call of its own (a write's answer,
// a tool's result, a run's failure). Goroutines that only wait on a
// channel or a WaitGroup and close another need none.
func guarded(stderr io.Writer, what string, f func()) func() {
	if stderr == nil {
		stderr = io.Discard
	}
	return func() {
		defer func() {
			if p := recover(); p != nil {
				fmt.Fprintf(stderr, "rpi: panic in %s: %v\n%s", what, p, debug.Stack())
			}
		}()
		f()
	}
}

// helperPanic keeps the first panic of the helper goroutines of one call
// (catch, deferred in each), to raise it again on the goroutine that
// waits for them (raise), where the call's own recover takes it: a bug
// in a helper then fails that call, as if it had run there, and never
// ends rpi.
type helperPanic struct {
	mu    mutex[helperPanicMu]
	value any
}

func (h *helperPanic) catch() {
	if p := recover(); p != nil {
		h.keep(p)
	}
}

func (h *helperPanic) keep(p any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.value == nil {
		h.value = p
	}
}

func (h *helperPanic) raise() {
	if h.value != nil {
		panic(h.value)
	}
}

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
		m.timer = m.clock.AfterFunc(memoryReturnGap, guarded(m.stderr, "giving memory back", m.give))
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
//
// It reads runtime.MemStats (a stop of the world of microseconds, once a
// run), not runtime/metrics, whose package init builds a table on every
// start (about a third of what main's own init costs).
func (m *memoryReturn) afterRun() {
	var stats runtime.MemStats
	runtime.ReadMemStats(&stats)
	now := stats.TotalAlloc
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

// Shutdown timing (docs/protocol.md#launch): running commands get finishGrace to finish after
// stdin ends (rpc mode); children get killGrace between SIGTERM and
// SIGKILL (a session closed, a process's context ended), but endKillGrace
// once rpi ends, and a child's output pipe that something it started
// holds is cut killGrace after it exited, endPipeGrace once rpi ends; so
// rpi ends within its promise (ACP: 2 s after stdin's end) even with a
// child that ignores SIGTERM. rpi never waits longer than exitLimit for
// answers once it has killed.
const (
	finishGrace  = 2 * time.Second
	killGrace    = 2 * time.Second
	endKillGrace = time.Second
	endPipeGrace = 250 * time.Millisecond
	// endOrphansGrace bounds the end of what rpi's commands left behind
	// and rpi adopted (endOrphans), after its own children are reaped.
	endOrphansGrace = 250 * time.Millisecond
	exitLimit       = 5 * time.Second
)

// hostSettings are the process's.
type hostSettings struct {
	cfg      cliConfig
	agentDir string                 // absolute
	home     string                 // the user's home folder (absolute), a tool's ~; "" when unknown
	shell    func() (string, error) // bash (or /bin/sh where bash is missing); looked up at first use, kept once found
	childEnv []string               // the environment children start from: rpi's, without provider keys

	catalog *modelCatalog // every model rpi knows, usable or not
	secrets *redactor

	// The model --model names (adopted into the catalog when --provider
	// names a built-in provider that does not list it), and its thinking
	// suffix; nil without --model.
	startModel    *model
	startThinking string

	notices []string // warnings of the catalog (models.json, auth.json), for every session's client

	// defaultTrust is the user's settings.json defaultProjectTrust, read
	// once; trust, the projects decided so far (projectTrust).
	defaultTrust string
	trust        trustDecisions
}

// toolsOf are the tools cfg's flags (--tools, --no-tools,
// --exclude-tools) offer the model, over settings.json's defaultTools
// (defaults, resolved: defaultToolNames). A --tools of only +name and
// -name entries changes defaults; one of names replaces them.
func toolsOf(cfg cliConfig, defaults []string) []*tool {
	names := defaults
	switch {
	case !cfg.toolsGiven:
	case slices.ContainsFunc(cfg.tools, isToolModifier):
		names = withToolModifiers(defaults, cfg.tools)
	default:
		names = cfg.tools
	}
	var tools []*tool
	for _, t := range allTools {
		if slices.Contains(names, t.name) && !slices.Contains(cfg.excludeTools, t.name) {
			tools = append(tools, t)
		}
	}
	return tools
}

// withNoTools is the entries of --tools (or a hello's options.tools)
// given with --no-tools, as pi 1.6 takes them: --no-tools empties the
// default selection, so +name and -name entries change an empty one, and
// tools' names, which replace it, stay as they are; no entries, no tool.
func withNoTools(entries []string) []string {
	if slices.ContainsFunc(entries, isToolModifier) {
		return withToolModifiers([]string{}, entries)
	}
	if entries == nil {
		return []string{}
	}
	return entries
}

// isToolModifier is whether a defaultTools or --tools entry is +name
// (add the tool) or -name (take it away) rather than a tool's name.
func isToolModifier(entry string) bool {
	return strings.HasPrefix(entry, "+") || strings.HasPrefix(entry, "-")
}

// withToolModifiers is names changed by the +name and -name entries of
// entries, in order; their other entries are passed over.
func withToolModifiers(names, entries []string) []string {
	names = slices.Clone(names)
	for _, e := range entries {
		if !isToolModifier(e) || len(e) == 1 {
			continue
		}
		i := slices.Index(names, e[1:])
		switch {
		case e[0] == '+' && i < 0:
			names = append(names, e[1:])
		case e[0] == '-' && i >= 0:
			names = slices.Delete(names, i, i+1)
		}
	}
	return names
}

// defaultToolNames are the tools settings.json's defaultTools (entries,
// the files' merged: settings.defaultToolEntries) turns on: its names,
// else rpi's defaultTools when it has only +name and -name entries, then
// changed by those. nil entries (no file sets it) are rpi's defaults; an
// empty list, no tool. Names rpi has no tool of are kept and come to
// nothing, as in pi, where they may be an extension's.
func defaultToolNames(entries []string) []string {
	if entries == nil {
		return defaultTools
	}
	names := slices.DeleteFunc(slices.Clone(entries), isToolModifier)
	if len(names) == 0 && len(entries) > 0 {
		names = defaultTools
	}
	return withToolModifiers(names, entries)
}

// errKeyWithoutModel refuses --api-key given with no model to say which
// provider it is for.
var errKeyWithoutModel = errors.New("--api-key is the key of the starting model's provider: name the model with --model provider/id (or --provider with --model id)")

// firstProviderOf is the provider the catalog lists the model spec (a
// bare id, with or without a :thinking suffix) under first; "" when none
// has it.
func firstProviderOf(catalog *modelCatalog, spec string) string {
	id := spec
	if i := strings.LastIndex(spec, ":"); i > 0 && slices.Contains(thinkingLevels, spec[i+1:]) {
		id = spec[:i]
	}
	for _, m := range catalog.all() {
		if m.ID == id {
			return m.Provider
		}
	}
	return ""
}

// loadHostSettings reads the model catalog and its keys, and chooses the
// model --model names (an unknown one fails startup).
func loadHostSettings(cfg cliConfig, env runEnv) (*hostSettings, error) {
	dir, err := agentDir(env.getenv)
	if err != nil {
		return nil, err
	}
	home, _ := homeDir(env.getenv) // "" with PI_CODING_AGENT_DIR and no home: ~ then stays as it is
	set := &hostSettings{cfg: cfg, agentDir: dir, home: home, shell: (&lookedUp{find: findShell}).path}
	// --api-key goes to one provider, the starting model's, as in pi:
	// --provider's, or --model's (provider/id, or the provider the
	// catalog lists a bare id under first). Without a model it is
	// refused: it would have gone to every provider.
	keyProvider := cfg.provider
	if p, _, ok := strings.Cut(cfg.model, "/"); ok && keyProvider == "" {
		keyProvider = p
	}
	if cfg.apiKey != "" && keyProvider == "" {
		if cfg.model == "" {
			return nil, errKeyWithoutModel
		}
		probe, err := loadModels(dir, "", "", env.getenv)
		if err != nil {
			return nil, err
		}
		keyProvider = firstProviderOf(probe.catalog, cfg.model)
	}
	models, err := loadModels(dir, keyProvider, cfg.apiKey, env.getenv)
	if err != nil {
		return nil, err
	}
	set.catalog, set.secrets = models.catalog, models.secrets
	set.notices = models.warnings
	user, userPath := hostUserSettings(dir)
	var notice string
	set.defaultTrust, notice = defaultProjectTrust(user, userPath)
	if notice != "" {
		set.notices = append(set.notices, notice)
	}
	if cfg.sessionDir != "" { // --session-dir ~/x, as pi 1.6 takes it (a shell leaves --session-dir=~/x as it is)
		set.cfg.sessionDir = sessionPathIn(cfg.cwd, home, cfg.sessionDir)
	} else {
		var notices []string
		set.cfg.sessionDir, notices = sessionDirSetting(cfg, user, userPath, home, env.getenv, set.projectTrust(cfg.cwd).trusted)
		set.notices = append(set.notices, notices...)
	}
	proxy, notice := settingsProxy(user, userPath)
	if notice != "" {
		set.notices = append(set.notices, notice)
	}
	set.childEnv = withProxy(withAgentMarkers(withoutVariables(env.environ, models.keyVars)), proxy, env.setenv)
	if env.hideVariables != nil {
		env.hideVariables(models.keyVars) // read: they are of no more use to rpi
	}
	env.trace.phase("catalog, auth.json, models.json")
	if cfg.provider != "" {
		if err := checkProvider(set.catalog, cfg.provider, cfg.model == ""); err != nil {
			return nil, err
		}
	}
	if cfg.model != "" {
		m, thinking, err := chooseModel(set.catalog, cfg.provider, cfg.model, "", "")
		if err != nil {
			return nil, err
		}
		if !slices.Contains(set.catalog.of(m.Provider), m) {
			set.catalog.last = append(set.catalog.last, m) // an id adopted for --provider
		}
		set.startModel, set.startThinking = m, thinking
	}
	if len(cfg.models) > 0 {
		warnings, err := checkModelPatterns(set.catalog.usable(), cfg.models)
		if err != nil {
			return nil, err
		}
		set.notices = append(set.notices, warnings...)
	}
	return set, nil
}
