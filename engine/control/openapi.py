"""The control API's OpenAPI description, served at ``/openapi.json``.

Written by hand beside the handlers in ``server.py``: it is small, and the fuzz test
(tests/engine/test_control_api.py) drives the server from it, so a handler that answers
what this does not describe fails that test.
"""

from __future__ import annotations

from typing import Any

#: Longest change text the API takes (a mark's label included).
MAX_CHANGE_LENGTH = 500
#: Most changes one POST /changes takes.
MAX_CHANGES = 1000
#: Longest a POST /changes may wait for the change to be in force, in seconds.
MAX_WAIT_SECONDS = 30.0
DEFAULT_WAIT_SECONDS = 10.0


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ERROR = {"$ref": "#/components/schemas/Error"}


def _errors(*codes: int) -> dict[str, Any]:
    what = {
        400: "bad request: the error says what was wrong, in one line",
        401: "no token, or the wrong one",
        404: "no such thing",
        409: "the run is not in a state to do this",
    }
    return {str(code): _json(_ERROR, what[code]) for code in codes}


_CHANGE_STATE = {
    "type": "object",
    "required": ["id", "change", "in_force"],
    "properties": {
        "id": {"type": "integer", "description": "the change's id in the run's event log"},
        "change": {"type": "string", "description": "the change as the run took it"},
        "in_force": {"type": "boolean"},
        "in_force_after_ms": {
            "type": "integer",
            "description": "from the request until every worker had it in force",
        },
        "message": {"type": "string"},
        "workers_done": {"type": "integer"},
        "workers_total": {"type": "integer"},
    },
}


_CHANGE_TEXT = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_CHANGE_LENGTH,
    "pattern": "\\S",
    "description": "as typed at the cockpit's = prompt",
}


def openapi_description(version: str) -> dict[str, Any]:
    """The description of this server (``version``: flowdeck's)."""
    change_state = {
        "oneOf": [
            {"$ref": "#/components/schemas/ChangeState"},
            {"$ref": "#/components/schemas/ChangeBatch"},
        ]
    }
    return {
        "openapi": "3.0.3",
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
        "paths": {
            "/status": {
                "get": {
                    "operationId": "status",
                    "summary": "the run now: spec, settings, phase, schedule, last tick",
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/Status"}, "the run now"),
                        **_errors(401),
                    },
                }
            },
            "/changes": {
                "post": {
                    "operationId": "change",
                    "summary": "ask for a change, or several at once; answers once they are "
                    "in force or `wait` ends",
                    "parameters": [
                        {
                            "name": "wait",
                            "in": "query",
                            "required": False,
                            "description": "seconds to wait for the change to be in force "
                            f"(default {DEFAULT_WAIT_SECONDS:g}); 0 answers at once",
                            "schema": {
                                "type": "number",
                                "minimum": 0,
                                "maximum": MAX_WAIT_SECONDS,
                            },
                        }
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/ChangeRequest"}
                            }
                        },
                    },
                    "responses": {
                        "200": _json(change_state, "in force in every worker"),
                        "202": _json(change_state, "asked for, not yet in force"),
                        **_errors(400, 401, 409),
                    },
                }
            },
            "/changes/{change_id}": {
                "get": {
                    "operationId": "change_state",
                    "summary": "whether a change is in force yet",
                    "parameters": [
                        {
                            "name": "change_id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "integer", "minimum": 1},
                        }
                    ],
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/ChangeState"}, "the change"),
                        **_errors(400, 401, 404),
                    },
                }
            },
            "/stream": {
                "get": {
                    "operationId": "stream",
                    "summary": "server-sent events: status first, then tick, event, broker, "
                    "summary as they happen (each data line one JSON object)",
                    "responses": {
                        "200": {
                            "description": "an event stream until the run ends",
                            "content": {"text/event-stream": {"schema": {"type": "string"}}},
                        },
                        **_errors(401),
                    },
                }
            },
            "/stop": {
                "post": {
                    "operationId": "stop",
                    "summary": "stop publishing, let consumers drain, end the run",
                    "responses": {
                        "202": _json({"$ref": "#/components/schemas/State"}, "stopping"),
                        **_errors(401, 409),
                    },
                }
            },
            "/schedule/skip": {
                "post": {
                    "operationId": "skip_step",
                    "summary": "apply the schedule's next step now",
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/State"}, "step fired"),
                        **_errors(401, 409),
                    },
                }
            },
            "/schedule/resume": {
                "post": {
                    "operationId": "resume_schedule",
                    "summary": "let a schedule held by an operator's change go on",
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/State"}, "resumed"),
                        **_errors(401, 409),
                    },
                }
            },
            "/openapi.json": {
                "get": {
                    "operationId": "openapi",
                    "summary": "this description",
                    "responses": {
                        "200": _json({"type": "object"}, "the OpenAPI description"),
                        **_errors(401),
                    },
                }
            },
        },
        "components": {
            "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {"error": {"type": "string"}},
                },
                "ChangeRequest": {
                    "oneOf": [
                        {
                            "type": "object",
                            "required": ["change"],
                            "properties": {"change": _CHANGE_TEXT},
                            "additionalProperties": False,
                        },
                        {
                            "type": "object",
                            "required": ["changes"],
                            "properties": {
                                "changes": {
                                    "type": "array",
                                    "items": _CHANGE_TEXT,
                                    "minItems": 1,
                                    "maxItems": MAX_CHANGES,
                                }
                            },
                            "additionalProperties": False,
                        },
                    ]
                },
                "ChangeBatch": {
                    "type": "object",
                    "required": ["changes"],
                    "properties": {"changes": {"type": "array", "items": _CHANGE_STATE}},
                },
                "ChangeState": _CHANGE_STATE,
                "State": {
                    "type": "object",
                    "required": ["state"],
                    "properties": {"state": {"type": "string"}},
                },
                "Status": {
                    "type": "object",
                    "required": [
                        "run_id",
                        "name",
                        "state",
                        "spec",
                        "settings",
                        "pending",
                        "phase",
                        "schedule",
                    ],
                    "properties": {
                        "run_id": {"type": "string"},
                        "name": {"type": "string"},
                        "state": {
                            "type": "string",
                            "enum": ["starting", "running", "stopping", "ended"],
                        },
                        "started_at": {"type": "number", "nullable": True},
                        "session_dir": {"type": "string", "nullable": True},
                        "spec": {"type": "object", "description": "passwords masked"},
                        "settings": {
                            "type": "object",
                            "required": ["in_force", "requested"],
                            "properties": {
                                "in_force": {"type": "object"},
                                "requested": {"type": "object"},
                            },
                        },
                        "pending": {"type": "array", "items": {"type": "object"}},
                        "phase": {
                            "type": "object",
                            "properties": {
                                "index": {"type": "integer"},
                                "label": {"type": "string"},
                            },
                        },
                        "schedule": {"type": "object"},
                        "tick": {"type": "object", "nullable": True},
                        "summary": {"type": "object", "nullable": True},
                    },
                },
            },
        },
    }
