"""Stub of IPython for the GPU timing harness (no IPython on the device)."""
