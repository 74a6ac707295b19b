"""Spark: a GitHub App that reviews pull requests and pushes verified fixes in about a second."""
