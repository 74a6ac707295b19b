"""Tests of the GitHub and Cerebras adapters against the local sandbox servers."""
