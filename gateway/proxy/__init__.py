"""gateway.proxy package."""
