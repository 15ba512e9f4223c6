"""gateway.review.sampling package."""
