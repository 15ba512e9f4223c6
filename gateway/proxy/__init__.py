"""The request path: ``/v1`` routes, the semantic pipeline, upstreams and engine replicas."""
