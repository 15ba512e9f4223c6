"""gateway.admin.routes package."""
