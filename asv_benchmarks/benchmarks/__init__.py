"""asv benchmarks of jitgrad (run from ``asv_benchmarks/``; see its README.md)."""
