"""Tests of the worker runtime, cancellation and job context."""
