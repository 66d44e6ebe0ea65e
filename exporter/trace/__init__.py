"""Tracing: the user's module run under fake tensors, recorded as functional ATen."""

from .tracer import trace

__all__ = ["trace"]
