"""prefix.tiers package."""
