"""Misfire sampling of semantic hits and the human review queue API."""
