"""Exits from MXNet: an artifact exported to ONNX and run in ONNX Runtime."""
