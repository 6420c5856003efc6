"""Adapters that let published agent harnesses drive a rollout's sandbox through the pipeline."""
