"""KV tiers below the GPU pool: L2 host memory, L3 disk and Redis (seed 003)."""
