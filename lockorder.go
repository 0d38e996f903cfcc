package main

// The lock order (lockOrder): every lock of rpi by name, in the order a
// goroutine may take them, and the name each lock's type stands for. A
// lock's name is type.field (a struct and its mutex field), in backquotes
// as docs/architecture.md's lock table has it.

// lockOrder is every lock, in the order they may be taken.
var lockOrder = []struct {
	name string
	side int
}{
	{`startupWatch.mu`, coreLock},         // held while deciding whether startup or a signal came first
	{`connection.answerMu`, frontEndLock}, // held while a command is handled, and while a change is made, answers and announces itself
	{`stage.attachMu`, frontEndLock},      // held while a client attaches to a served session, and by a change of it made in place from its last check to its announcement
	{`serveHost.mu`, frontEndLock},        // rpi serve's connections and stages; never held into a session
	{`acpSession.startMu`, frontEndLock},  // held while an ACP prompt starts (the core delivers under it)
	{`outbox.deliverMu`, frontEndLock},    // held while a session's callouts are delivered
	{`stage.mu`, frontEndLock},            // held while an event is sent to every client of a served session
	{`serveHost.seqMu`, frontEndLock},     // the closed sessions' last seqs: told as an event is delivered
	{`servedACP.mu`, frontEndLock},        // an rpi serve ACP connection's sessions and their stages
	{`acpSession.configMu`, frontEndLock}, // held while an ACP session's config options are read and sent; held into the core
	{`imageScaling.mu`, coreLock},         // held while an image is decoded, scaled and encoded; taken under no core lock, takes none
	{`sessionRegistry.mu`, coreLock},      // held while an open session is looked up by id
	{`loopScheduler.fileMu`, coreLock},
	{`conversation.fileMu`, coreLock},
	{`session.mu`, coreLock},
	{`loopScheduler.mu`, coreLock},
	{`agentRun.mu`, coreLock},
	{`runPolicy.mu`, coreLock},
	{`conversation.mu`, coreLock},
	{`conversation.lockMu`, coreLock},
	{`session.noticesMu`, coreLock},
	{`deltaBatch.mu`, coreLock},
	{`keyCommand.mu`, coreLock},
	{`lookedUp.mu`, coreLock},
	{`process.mu`, coreLock},
	{`shellOutput.mu`, coreLock},
	{`processTable.startMu`, coreLock}, // held while a child starts (its fork and exec) and while what rpi adopted is reaped
	{`processTable.mu`, coreLock},
	{`userBashRuns.mu`, coreLock},
	{`tempFiles.mu`, coreLock},
	{`watchdog.mu`, coreLock},
	{`keyCommands.mu`, coreLock},
	{`mcpServers.mu`, coreLock}, // a server's state is reported (posted) under it
	{`outbox.mu`, coreLock},     // taken to post a callout, under any core lock
	{`mcpStdin.mu`, coreLock},   // held while a line is written to an MCP server's stdin
	{`mcpConn.mu`, coreLock},
	{`mcpHTTP.mu`, coreLock},
	{`mcpLog.mu`, coreLock},
	{`sinks.mu`, coreLock},
	{`memoryReturn.mu`, coreLock},
	{`helperPanic.mu`, coreLock},
	{`child.mu`, coreLock}, // held while a child is signalled or reaped; takes no other lock
	{`redactor.mu`, coreLock},
	{`acpUpdates.mu`, frontEndLock}, // ACP's sink: held while an update is sent
	{`acpSession.mu`, frontEndLock}, // asked by the sink (asks); never held into the core
	{`acpAgent.mu`, frontEndLock},
	{`acpConn.orderMu`, frontEndLock}, // held while one of rpi's ACP requests is given its id and written
	{`acpConn.mu`, frontEndLock},      // never held while anything is written
	{`dialogs.orderMu`, frontEndLock}, // held while the dialogs' queued records are written, in order
	{`dialogs.mu`, frontEndLock},      // never held while anything is written
	{`output.mu`, frontEndLock},       // stdout, or a served client's: anything may write a record
	{`clientQueue.mu`, frontEndLock},  // a served client's records waiting for its writer
	{`trustDecisions.mu`, coreLock},   // the folders' project trust: taken under any lock (a session opening), takes none
	{`sharedScans.mu`, coreLock},      // the session folders' scans under way: taken under any lock, takes none, held over no scan
	{`sessionRows.mu`, coreLock},      // the session rows listed: taken under any lock, takes none, held over no file's read
	{`wsConn.writeMu`, frontEndLock},  // a WebSocket's frames: last, a record's write goes through it
}

// The names of the lock types of lockrank.go.
func (startupWatchMu) lockName() string { return `startupWatch.mu` }
func (answerMu) lockName() string       { return `connection.answerMu` }
func (acpStartMu) lockName() string     { return `acpSession.startMu` }
func (acpConfigMu) lockName() string    { return `acpSession.configMu` }
func (deliverMu) lockName() string      { return `outbox.deliverMu` }
func (acpUpdatesMu) lockName() string   { return `acpUpdates.mu` }
func (acpSessionMu) lockName() string   { return `acpSession.mu` }
func (loopsFileMu) lockName() string    { return `loopScheduler.fileMu` }
func (convFileMu) lockName() string     { return `conversation.fileMu` }
func (sessionMu) lockName() string      { return `session.mu` }
func (loopsMu) lockName() string        { return `loopScheduler.mu` }
func (agentRunMu) lockName() string     { return `agentRun.mu` }
func (runPolicyMu) lockName() string    { return `runPolicy.mu` }
func (convMu) lockName() string         { return `conversation.mu` }
func (convLockMu) lockName() string     { return `conversation.lockMu` }
func (noticesMu) lockName() string      { return `session.noticesMu` }
func (deltaBatchMu) lockName() string   { return `deltaBatch.mu` }
func (keyCommandMu) lockName() string   { return `keyCommand.mu` }
func (lookedUpMu) lockName() string     { return `lookedUp.mu` }
func (processMu) lockName() string      { return `process.mu` }
func (shellOutputMu) lockName() string  { return `shellOutput.mu` }
func (processStartMu) lockName() string { return `processTable.startMu` }
func (processTableMu) lockName() string { return `processTable.mu` }
func (userBashMu) lockName() string     { return `userBashRuns.mu` }
func (tempFilesMu) lockName() string    { return `tempFiles.mu` }
func (watchdogMu) lockName() string     { return `watchdog.mu` }
func (registryMu) lockName() string     { return `sessionRegistry.mu` }
func (keyCommandsMu) lockName() string  { return `keyCommands.mu` }
func (outboxMu) lockName() string       { return `outbox.mu` }
func (mcpServersMu) lockName() string   { return `mcpServers.mu` }
func (mcpWriteMu) lockName() string     { return `mcpStdin.mu` }
func (mcpConnMu) lockName() string      { return `mcpConn.mu` }
func (mcpHTTPMu) lockName() string      { return `mcpHTTP.mu` }
func (mcpLogMu) lockName() string       { return `mcpLog.mu` }
func (sinksMu) lockName() string        { return `sinks.mu` }
func (memoryReturnMu) lockName() string { return `memoryReturn.mu` }
func (imageScalingMu) lockName() string { return `imageScaling.mu` }
func (helperPanicMu) lockName() string  { return `helperPanic.mu` }
func (childMu) lockName() string        { return `child.mu` }
func (redactorMu) lockName() string     { return `redactor.mu` }
func (acpAgentMu) lockName() string     { return `acpAgent.mu` }
func (acpConnMu) lockName() string      { return `acpConn.mu` }
func (acpOrderMu) lockName() string     { return `acpConn.orderMu` }
func (dialogsMu) lockName() string      { return `dialogs.mu` }
func (dialogsOrderMu) lockName() string { return `dialogs.orderMu` }
func (outputMu) lockName() string       { return `output.mu` }
func (serveHostMu) lockName() string    { return `serveHost.mu` }
func (stageMu) lockName() string        { return `stage.mu` }
func (stageAttachMu) lockName() string  { return `stage.attachMu` }
func (serveSeqsMu) lockName() string    { return `serveHost.seqMu` }
func (clientQueueMu) lockName() string  { return `clientQueue.mu` }
func (servedACPMu) lockName() string    { return `servedACP.mu` }
func (wsWriteMu) lockName() string      { return `wsConn.writeMu` }
func (trustMu) lockName() string        { return `trustDecisions.mu` }
func (sessionRowsMu) lockName() string  { return `sessionRows.mu` }
func (sharedScansMu) lockName() string  { return `sharedScans.mu` }
