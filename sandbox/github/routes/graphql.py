"""`POST /graphql`: the GraphQL subset a PR bot uses, run for the calling installation."""

from __future__ import annotations

from flask import Blueprint, Response

from sandbox.github.graphql import GraphQLApi
from sandbox.github.routes.common import body, github, installation_id, json_response
from sandbox.github.state import StateError

blueprint = Blueprint("graphql", __name__)


@blueprint.post("/graphql")
def execute() -> Response:
    data = body()
    query = data.get("query")
    if not isinstance(query, str):
        raise StateError(400, "A query attribute must be specified and must be a string.")
    return json_response(GraphQLApi(github()).execute(installation_id(), query, data.get("variables")))
