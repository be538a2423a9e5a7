"""The full-text index: the only package that imports Whoosh, behind one interface (`braind.index.api`)."""
