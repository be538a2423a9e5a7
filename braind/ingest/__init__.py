"""From disk to index: the watcher marks paths, the debouncer settles them, the syncer reads and indexes them."""
