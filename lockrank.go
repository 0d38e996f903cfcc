package main

// The lock order, as a table the race build checks (lockrank_race.go;
// the Go runtime's lockrank is the model): every lock of rpi is a
// mutex[name], whose name type says which lock it is, and lockOrder
// (lockorder.go) says the order they may be taken in. A goroutine may
// take a lock only while every lock it holds comes before it in
// lockOrder; and where the core calls a front end (a sink, a ui, a
// callback: checkCallout) it holds no lock of the core's. In a race
// build a breach ends the program with both stacks' worth of what was
// held, so a lock cycle fails the first test that takes its two halves,
// one after the other, without the unlucky interleaving that would
// deadlock. Other builds take plain sync.Mutexes. docs/architecture.md
// explains each lock; docs_test.go keeps the two lists the same.

import "sync"

// mutex is a sync.Mutex whose rank is its name type's (lockOrder). The
// race build gives it Lock and Unlock of its own, which check the order.
type mutex[N lockName] struct{ sync.Mutex }

// lockName names one lock of lockOrder.
type lockName interface{ lockName() string }

// A lock's side: the core's locks are never held while the core calls a
// front end; a front end's are its own business, in the order below.
const (
	frontEndLock = iota
	coreLock
)

// The names, one type each (the type parameter of mutex).
type (
	startupWatchMu struct{}
	answerMu       struct{}
	acpStartMu     struct{}
	acpConfigMu    struct{}
	deliverMu      struct{}
	acpUpdatesMu   struct{}
	acpSessionMu   struct{}
	loopsFileMu    struct{}
	convFileMu     struct{}
	sessionMu      struct{}
	loopsMu        struct{}
	agentRunMu     struct{}
	runPolicyMu    struct{}
	convMu         struct{}
	convLockMu     struct{}
	noticesMu      struct{}
	deltaBatchMu   struct{}
	keyCommandMu   struct{}
	lookedUpMu     struct{}
	trustMu        struct{}
	sessionRowsMu  struct{}
	sharedScansMu  struct{}
	processMu      struct{}
	shellOutputMu  struct{}
	processStartMu struct{}
	processTableMu struct{}
	userBashMu     struct{}
	tempFilesMu    struct{}
	watchdogMu     struct{}
	registryMu     struct{}
	keyCommandsMu  struct{}
	outboxMu       struct{}
	mcpServersMu   struct{}
	mcpWriteMu     struct{}
	mcpConnMu      struct{}
	mcpHTTPMu      struct{}
	mcpLogMu       struct{}
	sinksMu        struct{}
	memoryReturnMu struct{}
	imageScalingMu struct{}
	helperPanicMu  struct{}
	childMu        struct{}
	redactorMu     struct{}
	acpAgentMu     struct{}
	acpConnMu      struct{}
	acpOrderMu     struct{}
	dialogsMu      struct{}
	dialogsOrderMu struct{}
	outputMu       struct{}
	serveHostMu    struct{}
	stageMu        struct{}
	stageAttachMu  struct{}
	serveSeqsMu    struct{}
	clientQueueMu  struct{}
	servedACPMu    struct{}
	wsWriteMu      struct{}
)
