"""validators package."""
