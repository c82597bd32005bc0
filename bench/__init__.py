"""Punctual's benchmarks: commands that print JSON (`make bench-scanner`, `make bench-cost`, ...)."""
