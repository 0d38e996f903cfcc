// rpi hosts a coding agent without a terminal: one static binary that
// speaks a line-delimited JSON protocol on stdin and stdout (rpi rpc, pi's
// shapes with --compat pi) and the Agent Client Protocol (rpi acp), over
// one core — the sessions, the agent, its model, tools and files.
//
// A reading order for a newcomer:
//
//   - README.md, then docs/protocol.md (the wire from the outside) and
//     docs/architecture.md (the files, goroutines and locks, and the rules
//     that hold between them);
//   - main.go: run, the whole program given its environment; config.go
//     and environment.go, what it is given;
//   - host.go: what belongs to the process; session.go: one conversation
//     and its agent, and the outbox through which the core calls its front
//     end;
//   - rpc.go and commands.go: the rpc front end and its dispatch table,
//     then its commands, one rpc_*.go file per chapter of the docs;
//   - prompting.go and agent.go: a prompt becomes a run, the run's turns;
//   - providers.go and provider_*.go: the model over HTTP and SSE;
//   - tools.go, tools_fs.go, edit.go, grep.go: the model's tools;
//   - conversation.go, session_file.go, sessionline.go: the conversation
//     and pi's session file it is written to;
//   - acp.go, acp_sessions.go, acp_updates.go: the ACP front end over the
//     same session.
//
// lockrank.go holds the lock order, which race builds check; every test
// file says at its top what it shows, and testdata/README.md how the
// fixtures read.
package main
