"""The faces people and agents use: the `braind` command, the MCP bridge, the agent hook."""
