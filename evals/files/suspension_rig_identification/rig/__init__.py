"""Batched quarter-car suspension rigs driven over a bump."""
