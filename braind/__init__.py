"""braind: a local memory daemon for AI agents, over plain Markdown files."""

__version__ = "0.1.0"
