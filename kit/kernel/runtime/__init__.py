"""The environment a kernel runs in: its fingerprint and the runtime remedy applied before ``import mxnet``."""
