"""The local GitHub's routes, one Flask blueprint per area of GitHub's API."""

from flask import Blueprint

from sandbox.github.routes import (
    actions,
    apps,
    archives,
    checks,
    git,
    graphql,
    issues,
    manifest,
    pulls,
    repos,
    web,
)

BLUEPRINTS: tuple[Blueprint, ...] = tuple(
    module.blueprint
    for module in (apps, repos, archives, git, pulls, issues, checks, actions, graphql, manifest, web)
)
