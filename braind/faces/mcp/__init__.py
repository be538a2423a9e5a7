"""`braind mcp`: the agent tools, resources and prompts over MCP on stdio, relayed to the daemon."""
