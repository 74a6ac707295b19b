"""Tests of the GitHub and model adapters against the local sandbox servers."""
