"""Speed benchmarks: scripts that print wall time, CPU time and ratios (never asserted)."""
