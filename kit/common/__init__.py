"""Code both sides import: Python 3.6-clean, stdlib and numpy only, never mxnet.

The verdicts, tolerance and metrics, release versions and what each release can do,
artifacts on disk, reference cases, synthetic data, the tables and charts notebooks
render, and the kit's exceptions.
"""
