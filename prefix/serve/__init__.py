"""prefix.serve package."""
