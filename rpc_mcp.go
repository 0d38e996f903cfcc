package main

// The rpc front end's MCP commands (docs/mcp.md): the servers' states
// and their tools, and a server connected again. They are rpi's own: pi's
// RPC has none (in pi's mode they are answered to a client that asks,
// and mcp_server_update is not sent).

// getMCPServersCommand answers every configured MCP server of the
// session, enabled or not, by name.
// Fields: none. Answer: {servers: [{name, source, transport, state,
// [error], tools, exposure}]}.
func (s *rpcServer) getMCPServersCommand(r *rpcRequest) (any, error) {
	return struct {
		Servers []mcpServerInfo `json:"servers"`
	}{s.mcp.list()}, nil
}

// mcpReconnectCommand ends the named server's connection, if any, and
// connects it again; it answers once that attempt has ended.
// Fields: name. Events: mcp_server_update (connecting, then connected or
// failed). Answer: {name, state, [error], toolCount}, after them.
func (s *rpcServer) mcpReconnectCommand(r *rpcRequest) (any, error) {
	name, err := r.str("name")
	if err != nil {
		return nil, err
	}
	done, err := s.mcp.reconnect(name)
	if err != nil {
		return nil, err
	}
	s.answerLater(r.typ, s.replyTo(r), func() (any, error) {
		<-done
		return s.mcp.state(name), nil
	})
	return noReply{}, nil
}
