"""protocol: the OpenAI wire format both the gateway and the engine server speak.

Torch-free and dependency-free within the project (it imports only itself), so a
gateway in front of a remote engine never loads the engine to read a request.

=========================  ============================================================
concept                    where
=========================  ============================================================
request models, parsing    ``openai.py`` (``parse_request``: strict, 400 on bad input)
sampling parameters        ``sampling.py`` (``SamplingParams``, server defaults)
response bodies, chunks    ``responses.py`` (``response_body``, ``ChunkWriter``, ``usage``)
SSE and JSON bodies        ``http.py`` (``read_json``, ``sse``, ``EventStream``)
shared header names        ``headers.py`` (the trusted-namespace pair)
errors                     ``errors.py`` (``ApiError`` in the OpenAI shape)
=========================  ============================================================
"""
