"""The untrusted-disk boundary: validating memory files, writing them durably, rewrites, daemon state, migration."""
