"""Benchmarks that print figures side by side (``python -m bench`` runs them all)."""
