"""spinscope: a kernel-aware profiler for network servers."""

__version__ = "0.1.0"
