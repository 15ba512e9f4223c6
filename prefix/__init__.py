"""prefix package."""
