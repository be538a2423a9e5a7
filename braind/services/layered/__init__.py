"""Layered memory: SOUL.md, MEMORY.md and logfiles, their tools and their part of the injection block."""
