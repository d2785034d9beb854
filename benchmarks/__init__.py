"""Benchmarks of agui-meta: ``python -m benchmarks.run`` (see benchmarks/README.md)."""
