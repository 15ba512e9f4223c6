"""Migration scripts (Alembic skips this file when it loads revisions)."""
