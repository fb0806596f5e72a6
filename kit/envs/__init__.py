"""MXNet environments: the release table, interpreters, uv, system libraries, kernelspecs, release selection."""
