"""The control API's OpenAPI description, served at ``/openapi.json``.

Its schemas are generated from the wire types (``wire.py``) the server validates requests
with and builds its answers from; only the operations are listed here, one row each. The
fuzz test (tests/engine/test_control_api.py) drives the server from this document and
checks every answer against it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from flowdeck.engine.control.wire import SCHEMAS, ChangeId, WaitSeconds

_REF = "#/components/schemas/{name}"
_ERRORS = {
    400: "bad request: the error says what was wrong, in one line",
    401: "no token, or the wrong one",
    404: "no such thing",
    409: "the run is not in a state to do this",
}

_EVENT_STREAM = {"text/event-stream": {"schema": {"type": "string"}}}


class _Operation(NamedTuple):
    """One operation: its answers map a status to (body, what it means), a body being a
    wire schema's name, a tuple of them (one of), a literal schema, or None for a stream."""

    method: str
    path: str
    operation_id: str
    summary: str
    request: str | None
    answers: dict[int, tuple[Any, str]]
    errors: tuple[int, ...]


_CHANGE_ANSWER = ("ChangeState", "ChangeBatch")
_OPERATIONS = (
    _Operation("get", "/status", "status", "the run now: spec, settings, phase, schedule, "
               "last tick", None, {200: ("Status", "the run now")}, (401,)),
    _Operation("post", "/changes", "change", "ask for a change, or several at once; answers "
               "once they are in force or `wait` ends", "ChangeRequest",
               {200: (_CHANGE_ANSWER, "in force in every worker"),
                202: (_CHANGE_ANSWER, "asked for, not yet in force")}, (400, 401, 409)),
    _Operation("get", "/changes/{change_id}", "change_state", "whether a change is in force "
               "yet", None, {200: ("ChangeState", "the change")}, (400, 401, 404)),
    _Operation("get", "/stream", "stream", "server-sent events: status first, then tick, "
               "event, broker, summary as they happen (each data line one JSON object)",
               None, {200: (None, "an event stream until the run ends")}, (401,)),
    _Operation("post", "/stop", "stop", "stop publishing, let consumers drain, end the run",
               None, {202: ("State", "stopping")}, (401, 409)),
    _Operation("post", "/schedule/skip", "skip_step", "apply the schedule's next step now",
               None, {200: ("State", "step fired")}, (401, 409)),
    _Operation("post", "/schedule/resume", "resume_schedule", "let a schedule held by an "
               "operator's change go on", None, {200: ("State", "resumed")}, (401, 409)),
    _Operation("post", "/autotune", "autotune", "start the autopilot on a setting from "
               "where the run is now (it waits out a draining backlog, steps the setting, "
               "judges each step by the run's own figures and leaves the run at the "
               "report's recommendation); its steps show as events", "AutotuneRequest",
               {202: ("AutotuneState", "started")}, (400, 401, 409)),
    _Operation("get", "/autotune", "autotune_state", "the autopilot: where it is, what it "
               "said, its choice", None, {200: ("AutotuneState", "the autopilot")},
               (401, 404)),
    _Operation("post", "/autotune/stop", "autotune_stop", "stop the autopilot; the setting "
               "stays at the value in force", None,
               {200: ("AutotuneState", "stopped")}, (401, 409)),
    _Operation("get", "/openapi.json", "openapi", "this description", None,
               {200: ({"type": "object"}, "the OpenAPI description")}, (401,)),
)  # fmt: skip

_PARAMETERS: dict[str, list[dict[str, Any]]] = {
    "/changes": [{"name": "wait", "in": "query", "required": False, "schema": WaitSeconds}],
    "/changes/{change_id}": [
        {"name": "change_id", "in": "path", "required": True, "schema": ChangeId}
    ],
}


def _schema(body: Any) -> dict[str, Any]:
    if isinstance(body, dict):
        return body
    if isinstance(body, tuple):
        return {"oneOf": [_schema(one) for one in body]}
    return {"$ref": _REF.format(name=body)}


def _content(body: Any, what: str) -> dict[str, Any]:
    if body is None:
        return {"description": what, "content": _EVENT_STREAM}
    return {"description": what, "content": {"application/json": {"schema": _schema(body)}}}


def _described(op: _Operation) -> dict[str, Any]:
    described: dict[str, Any] = {
        "operationId": op.operation_id,
        "summary": op.summary,
        "responses": {
            **{str(code): _content(*answer) for code, answer in op.answers.items()},
            **{str(code): _content("Error", _ERRORS[code]) for code in op.errors},
        },
    }
    if op.path in _PARAMETERS:
        described["parameters"] = [
            {**p, "schema": msgspec.json.schema(p["schema"])} for p in _PARAMETERS[op.path]
        ]
    if op.request is not None:
        described["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _schema(op.request)}},
        }
    return described


def openapi_description(version: str) -> dict[str, Any]:
    """The description of this server (``version``: flowdeck's)."""
    _, schemas = msgspec.json.schema_components(SCHEMAS, ref_template=_REF)
    # Exactly one of "change" and "changes" (ChangeRequest.__post_init__; no other field is
    # taken), which JSON Schema says as the number of properties.
    schemas["ChangeRequest"].update(minProperties=1, maxProperties=1)
    paths: dict[str, dict[str, Any]] = {}
    for op in _OPERATIONS:
        paths.setdefault(op.path, {})[op.method] = _described(op)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "flowdeck control API",
            "version": version,
            "description": (
                "Watch and steer one running flowdeck run: its status, changes in the "
                "cockpit's grammar (inflight=200, prefetch=60, publishers=+5, pause, "
                'mark "label"), a stream of its ticks and events, stop. Every request '
                "needs the run's token as 'Authorization: Bearer TOKEN'."
            ),
        },
        "security": [{"token": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas,
        },
    }
