"""The engine, its asynchronous front and its OpenAI-compatible HTTP server."""
