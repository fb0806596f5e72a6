"""Kernel side: code that runs inside every MXNet kernel.

Everything under this package must import and run on Python 3.6 with numpy 1.13
and MXNet 1.0 up to Python 3.12 / numpy 1.26 / MXNet 1.9.1: no dataclasses, no
walrus, no ``from __future__ import annotations``, no numpy API newer than 1.13;
stdlib + numpy + mxnet only.
"""
