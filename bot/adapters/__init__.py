"""Thin adapters around the outside world: GitHub (PyGithub + GraphQL) and the model (cerebras-cloud-sdk)."""
