"""`python -m bench`: run the benchmark suite."""

from bench.cli import main

if __name__ == "__main__":  # worker processes re-import this module under another name
    raise SystemExit(main())
