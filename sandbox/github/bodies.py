"""GitHub's limits on what a request may carry: body lengths, check-run output, annotations and actions.

Comment and review bodies: at most 65,536 characters ("Body is too long (maximum is 65536 characters)").
Check runs (https://docs.github.com/en/rest/checks/runs#create-a-check-run): ``output.summary`` and
``output.text`` at most 65,535 characters, counted by GitHub in UTF-8 bytes; at most 50 annotations per
request; at most 3 actions, each label and identifier at most 20 characters and description at most 40.
"""

from __future__ import annotations

from sandbox.github.shapes import Json
from sandbox.github.state import StateError

BODY_MAX = 65_536
OUTPUT_MAX = 65_535
ANNOTATIONS_MAX = 50
ACTIONS_MAX = 3
ACTION_FIELDS_MAX = {"label": 20, "identifier": 20, "description": 40}


def check_body(resource: str, body: str) -> None:
    """Refuse a comment or review body over 65,536 characters with GitHub's 422."""
    if len(body) > BODY_MAX:
        raise StateError(
            422,
            "Validation Failed",
            [
                {
                    "resource": resource,
                    "code": "custom",
                    "field": "body",
                    "message": f"Body is too long (maximum is {BODY_MAX} characters)",
                }
            ],
        )


def check_run_fields(data: Json) -> None:
    """Refuse a check run create/update body that breaks GitHub's output, annotation or action limits."""
    output = data.get("output") or {}
    for key in ("summary", "text"):
        value = output.get(key)
        if not isinstance(value, str):
            continue
        if len(value) > OUTPUT_MAX:
            supplied = f"Only {OUTPUT_MAX} characters are allowed; {len(value)} were supplied."
            raise StateError(422, f"Invalid request.\n\n{supplied}")
        if len(value.encode("utf-8", "surrogatepass")) > OUTPUT_MAX:
            raise StateError(
                422,
                "Validation Failed",
                [
                    {
                        "resource": "CheckRun",
                        "code": "custom",
                        "field": key,
                        "message": f"{key} exceeds a maximum bytesize of {OUTPUT_MAX}",
                    }
                ],
            )
    annotations = output.get("annotations") or []
    if len(annotations) > ANNOTATIONS_MAX:
        raise StateError(
            422,
            f"Invalid request.\n\nOnly {ANNOTATIONS_MAX} annotations are allowed per request; "
            f"{len(annotations)} were supplied.",
        )
    actions = data.get("actions") or []
    if len(actions) > ACTIONS_MAX:
        raise StateError(
            422, f"Invalid request.\n\nOnly {ACTIONS_MAX} actions are allowed; {len(actions)} were supplied."
        )
    for action in actions:
        for field, limit in ACTION_FIELDS_MAX.items():
            value = str(action.get(field) or "")
            if not value:
                raise StateError(422, f"Invalid request.\n\nNo value for the action's {field}.")
            if len(value) > limit:
                raise StateError(
                    422,
                    f"Invalid request.\n\nThe action's {field} is {len(value)} characters long; "
                    f"at most {limit} are allowed.",
                )
