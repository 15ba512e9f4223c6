"""prefix.core package."""
