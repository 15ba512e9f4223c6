"""gateway: the OpenAI-compatible front door — auth, policy, the two cache layers wired
together, the admin API, reports and the review queue.

The only package that imports the others (``semantic``, ``prefix``, ``validators``,
``protocol``); it loads the engine (and torch) only when the engine runs in-process.

=============================  ===========================================================
concept                        where
=============================  ===========================================================
the app and its lifespan       ``app.py`` (``create_app``: heavy objects built at start)
settings (only env reader)     ``settings.py`` (``get_settings()``)
errors → OpenAI shape          ``errors.py``
tables                         ``models.py`` (tenants, keys, policies, ops tables)
tenants, keys, auth cache      ``tenants.py`` (cached reads), ``auth_cache.py``
a database that hangs          ``db_rest.py`` (deadlines, rests, its own threads)
its recovery                   ``recovery.py`` (background pings end the rests)
a tenant's policy              ``policy.py``
shared request state           ``state.py`` (``GatewayState``)
metrics                        ``metrics.py``, ``metrics_auth.py`` (``/metrics`` token)
background operations          ``ops.py`` (stats writer, pool snapshots, review)
the pair verifier on hits      ``verification.py`` (load, batching), ``verifier_choice.py``
                               (dtype and precision), ``calibration.py`` (a tenant's
                               target → cut), ``calibrator.py`` (cuts kept, outages)
**proxy/**                     the request path
  routes                       ``proxy/routes.py`` (``/v1/*``), ``proxy/miss.py``
  the key and the rate limit   ``proxy/access.py``
  lookup → upstream → backfill ``proxy/pipeline.py``, ``proxy/decision.py``,
                               ``proxy/store_rest.py`` (outage rest)
  per-request cache controls   ``proxy/controls.py``, ``proxy/cacheable.py``
  upstreams and dialects       ``proxy/upstream.py``, ``proxy/dialects.py``,
                               ``proxy/http_upstream.py``, ``proxy/http_client.py``,
                               ``proxy/relay.py``,
                               ``proxy/passthrough.py``, ``proxy/inprocess.py``
  engine replicas              ``proxy/engine_pool.py``, ``proxy/hash_ring.py``
  judge band, rate limits      ``proxy/judge.py``, ``proxy/ratelimit.py``
  OpenAPI docs of /v1          ``proxy/openapi_docs.py``
**admin/**                     ``/admin``: tenants, keys, policies, cache, explain, audit
  the one writer               ``admin/service.py`` (tenants, keys), ``admin/policies.py``
**reports/**                   misfire and cache reports (JSON, HTML, plots, recorder)
**review/**                    misfire sampling and the review queue
**sync/**                      replica change feed (LISTEN/NOTIFY + poll of the log)
command line                   ``cli.py`` (entry point), ``cli_admin.py``, ``cli_output.py``,
                               ``admin_client.py``, ``doctor.py``, ``doctor_checks.py``
=============================  ===========================================================
"""
