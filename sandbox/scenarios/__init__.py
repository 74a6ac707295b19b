"""Bundled scenario files (YAML); a package so they ship as package data."""
