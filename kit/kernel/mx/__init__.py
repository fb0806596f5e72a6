"""MXNet itself across releases: the calls whose form differs, training loops, a graph's internal nodes."""
