"""Misfire and cache-efficiency reports: statistics, sections, HTML and plots, and the
per-request recorder that feeds them."""
