"""Typed memory: facts, decisions, errors and workflows in the diary; supersession, tombstones, compaction."""
