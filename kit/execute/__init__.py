"""Executing steps: one notebook on one release's kernel, and the executors (local pool, Dask) that run them."""
