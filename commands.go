package main

// The rpc front end's dispatch table: each command type and its handler,
// the one list of what rpc mode takes (get_capabilities answers its keys).
// The handlers are in the rpc_*.go files.

import "sync"

// A handler applies one command. It returns the success data (nil is sent
// as "data":null) or an error whose text is the failure message. A handler
// whose answer waits on the outside world hands that work to the
// background (answerLater, or an operation that answers through replyTo)
// and returns noReply.
type handler func(s *rpcServer, r *rpcRequest) (any, error)

// noReply, returned by a handler, means the dispatcher writes no response:
// the answer comes later, or the command gets none (a valid
// extension_ui_response).
type noReply struct{}

// rpcCommands maps each command type to its handler; get_capabilities lists
// its keys. A command appears here only once it really works. The table
// is made at its first use, not in package init; it is not a lazy package
// variable because get_capabilities' handler reads it, so that variable's
// initializer would refer to itself (an initialization cycle).
func rpcCommands() map[string]handler {
	rpcCommandTable.once.Do(func() { rpcCommandTable.commands = newRPCCommands() })
	return rpcCommandTable.commands
}

// rpcCommandTable is rpcCommands' table, once made.
var rpcCommandTable struct {
	once     sync.Once
	commands map[string]handler
}

// newRPCCommands makes rpcCommands' table.
func newRPCCommands() map[string]handler {
	return map[string]handler{
		"get_state":                     (*rpcServer).getStateCommand,
		"get_messages":                  (*rpcServer).getMessagesCommand,
		"get_last_assistant_text":       (*rpcServer).getLastAssistantTextCommand,
		"get_capabilities":              (*rpcServer).getCapabilitiesCommand,
		"set_thinking_level":            (*rpcServer).setThinkingLevelCommand,
		"cycle_thinking_level":          (*rpcServer).cycleThinkingLevelCommand,
		"set_steering_mode":             (*rpcServer).setSteeringModeCommand,
		"set_follow_up_mode":            (*rpcServer).setFollowUpModeCommand,
		"set_auto_compaction":           (*rpcServer).setAutoCompactionCommand,
		"set_auto_retry":                (*rpcServer).setAutoRetryCommand,
		"set_session_name":              (*rpcServer).setSessionNameCommand,
		"bash":                          (*rpcServer).bashCommand,
		"abort_bash":                    (*rpcServer).abortBashCommand,
		"extension_ui_response":         (*rpcServer).extensionUIResponseCommand,
		"process_spawn":                 (*rpcServer).processSpawnCommand,
		"process_list":                  (*rpcServer).processListCommand,
		"process_describe":              (*rpcServer).processDescribeCommand,
		"process_logs":                  (*rpcServer).processLogsCommand,
		"process_write":                 (*rpcServer).processWriteCommand,
		"process_keys":                  (*rpcServer).processKeysCommand,
		"process_resize":                (*rpcServer).processResizeCommand,
		"process_signal":                (*rpcServer).processSignalCommand,
		"process_stop":                  (*rpcServer).processStopCommand,
		"process_wait":                  (*rpcServer).processWaitCommand,
		"process_remove":                (*rpcServer).processRemoveCommand,
		"prompt":                        (*rpcServer).promptCommand,
		"steer":                         (*rpcServer).steerCommand,
		"follow_up":                     (*rpcServer).followUpCommand,
		"abort":                         (*rpcServer).abortCommand,
		"abort_retry":                   (*rpcServer).abortRetryCommand,
		"clear_queue":                   (*rpcServer).clearQueueCommand,
		"set_model":                     (*rpcServer).setModelCommand,
		"cycle_model":                   (*rpcServer).cycleModelCommand,
		"get_available_models":          (*rpcServer).getAvailableModelsCommand,
		"get_session_stats":             (*rpcServer).getSessionStatsCommand,
		"get_todos":                     (*rpcServer).getTodosCommand,
		"get_mcp_servers":               (*rpcServer).getMCPServersCommand,
		"mcp_reconnect":                 (*rpcServer).mcpReconnectCommand,
		"set_todos":                     (*rpcServer).setTodosCommand,
		"todo_op":                       (*rpcServer).todoOpCommand,
		"loop_create":                   (*rpcServer).loopCreateCommand,
		"loop_update":                   (*rpcServer).loopUpdateCommand,
		"loop_list":                     (*rpcServer).loopListCommand,
		"loop_delete":                   (*rpcServer).loopDeleteCommand,
		"loop_cancel":                   (*rpcServer).loopCancelCommand,
		"new_session":                   (*rpcServer).newSessionCommand,
		"switch_session":                (*rpcServer).switchSessionCommand,
		"fork":                          (*rpcServer).forkCommand,
		"get_fork_messages":             (*rpcServer).getForkMessagesCommand,
		"export_html":                   (*rpcServer).exportHTMLCommand,
		"compact":                       (*rpcServer).compactCommand,
		"get_commands":                  (*rpcServer).getCommandsCommand,
		"get_available_thinking_levels": (*rpcServer).getAvailableThinkingLevelsCommand,
		"clone":                         (*rpcServer).cloneCommand,
		"get_entries":                   (*rpcServer).getEntriesCommand,
		"get_tree":                      (*rpcServer).getTreeCommand,
		"session_list":                  (*rpcServer).sessionListCommand,
		"session_delete":                (*rpcServer).sessionDeleteCommand,
	}
}

// keepsNoRequest reports whether command's handler is done with its
// request when it returns: the queries, which read the state and answer
// at once. Their requests are decoded into the connection's one request
// (rpcServer.queryRequest), used again line after line, so that a client
// polling them costs no allocation per line and the garbage collector far
// less work. Every other command gets a copy of its own
// (rpcRequest.heldCopy), which it may keep for a later answer. The request
// is cleared after every line (handleFrame): a query's handler that kept
// it would find it empty, and race with the clearing under -race. Name a
// command here only if its handler never keeps r.
func keepsNoRequest(command string) bool {
	switch command {
	case "get_state", "get_messages", "get_session_stats", "get_last_assistant_text", "get_capabilities",
		"get_commands", "get_available_models", "get_available_thinking_levels", "get_todos",
		"get_mcp_servers", "process_list", "loop_list":
		return true
	}
	return false
}
