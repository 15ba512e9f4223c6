"""gateway.reports.build package."""
