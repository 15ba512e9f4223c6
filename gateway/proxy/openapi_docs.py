"""Document the OpenAI-compatible routes in the app's OpenAPI schema.

Those routes read the raw body themselves (size limit first, then validation
with the engine's own request models), so FastAPI cannot see their bodies. This
adds, to the generated schema, the request bodies (``ChatCompletionRequest`` /
``CompletionRequest`` of :mod:`protocol.openai`, the models that really
validate them) and the tenant-key bearer scheme, so clients, docs and
schemathesis see what the routes accept.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

from protocol.openai import ChatCompletionRequest, CompletionRequest

TENANT_SCHEME = "TenantKey"
_REF = "#/components/schemas/{model}"
_BODIES: dict[str, type[BaseModel]] = {
    "/v1/chat/completions": ChatCompletionRequest,
    "/v1/completions": CompletionRequest,
}


def _add_bodies(schema: dict[str, Any]) -> None:
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    components.setdefault("securitySchemes", {})[TENANT_SCHEME] = {
        "type": "http",
        "scheme": "bearer",
        "description": "A tenant API key (cg-…), issued by the admin API.",
    }
    for path, item in schema.get("paths", {}).items():
        if not path.startswith("/v1/"):
            continue
        for operation in item.values():
            operation.setdefault("security", [{TENANT_SCHEME: []}])
        model = _BODIES.get(path)
        if model is None or "post" not in item:
            continue
        body = model.model_json_schema(ref_template=_REF)
        schemas.update(body.pop("$defs", {}))
        schemas[model.__name__] = body
        ref = {"$ref": _REF.format(model=model.__name__)}
        item["post"]["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": ref}},
        }


def document_openai_routes(app: FastAPI) -> None:
    """Make ``app.openapi()`` include the OpenAI routes' request bodies and auth."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            _add_bodies(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
