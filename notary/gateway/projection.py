"""Project proxied tool results onto the output schemas the upstream published (pure).

The gateway owns no tool catalogue: it records each tool's ``outputSchema`` from the
upstream's ``tools/list`` and shapes every proxied result the way the ``mcp`` SDK's own servers
do, so that a client validating results (the SDK's ``Client`` does) sees a conforming result:

- a tool **with** an output schema and a non-error result must carry ``structuredContent``
  that validates against it (JSON Schema, as ``ClientSession.validate_tool_result`` checks);
- if it carries none but its only text block is JSON that validates, that JSON becomes the
  ``structuredContent`` (older servers return structured output as text);
- if ``content`` is empty, the structured value is serialized into one text block, the
  backwards-compatible form the SDK's servers send to clients that read only ``content``;
- otherwise the result breaks the tool's own contract: the gateway reports
  ``gateway.UPSTREAM_TOOL_FAILED`` rather than pass on a result the client would reject.

Tools without an output schema, and ``isError`` results, pass through unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import cast

from jsonschema import SchemaError
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing import Registry

__all__ = ["OutputSchemas", "project_result"]


class OutputSchemas:
    """Tool name → output schema seen in ``tools/list``, with compiled validators.

    Compiling a schema costs far more than validating against it, so each is compiled once
    and recompiled only when the upstream publishes a different schema for the tool.
    """

    def __init__(self) -> None:
        self._schemas: dict[str, dict[str, object] | None] = {}
        self._validators: dict[str, Validator | None] = {}
        self.input_schemas: dict[str, dict[str, object] | None] = {}

    def record(self, name: str, input_schema: Mapping[str, object] | None,
               output_schema: Mapping[str, object] | None) -> None:
        self.input_schemas[name] = dict(input_schema) if input_schema is not None else None
        schema = dict(output_schema) if output_schema is not None else None
        if self._schemas.get(name, ...) != schema:
            self._schemas[name] = schema
            self._validators.pop(name, None)

    def known(self, name: str) -> bool:
        return name in self._schemas

    def schema(self, name: str) -> dict[str, object] | None:
        return self._schemas.get(name)

    def validator(self, name: str) -> Validator | None:
        """The compiled validator, or None when the tool has no (usable) output schema."""
        if name in self._validators:
            return self._validators[name]
        schema = self._schemas.get(name)
        validator: Validator | None = None
        if schema is not None:
            cls = validator_for(schema)
            try:
                cls.check_schema(schema)
                # $refs resolve within the schema document only, as in the SDK's client.
                validator = cast(Validator, cls(schema, registry=Registry()))
            except SchemaError:
                validator = None
        self._validators[name] = validator
        return validator


def _problem(validator: Validator, value: object) -> str | None:
    error = best_match(validator.iter_errors(value))
    return None if error is None else error.message


def project_result(wire: Mapping[str, object], validator: Validator | None
                   ) -> tuple[dict[str, object], str | None]:
    """(the projected result, None) or (the result unchanged, why it breaks its schema)."""
    out = dict(wire)
    if validator is None or out.get("isError") is True:
        return out, None
    content = out.get("content")
    blocks = content if isinstance(content, list) else []
    if "structuredContent" not in out:  # any JSON value, null included, counts as present
        texts = [b for b in blocks if isinstance(b, Mapping) and b.get("type") == "text"]
        if len(texts) == 1 and isinstance(texts[0].get("text"), str):
            try:
                candidate = json.loads(texts[0]["text"])
            except (ValueError, RecursionError):
                pass  # not JSON: no structured value to recover
            else:
                if _problem(validator, candidate) is None:
                    out["structuredContent"] = candidate
                    return out, None
        return out, "the tool declares an output schema but returned no structured content"
    structured = out["structuredContent"]
    problem = _problem(validator, structured)
    if problem is not None:
        return out, f"structured content does not match the tool's output schema: {problem}"
    if not blocks:
        out["content"] = [{"type": "text",
                           "text": json.dumps(structured, indent=2, ensure_ascii=False)}]
    return out, None
