"""The braind benchmark suite: the real daemon over its real socket, beside baselines on the same corpus."""
