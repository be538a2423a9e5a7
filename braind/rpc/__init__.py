"""The socket: JSON-RPC framing, the event-loop server, params schemas, the method table, the client."""
