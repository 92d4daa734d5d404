"""`watchrun mcp`: the seed's `watch` tool for agents, over the Model Context Protocol (stdio)."""
