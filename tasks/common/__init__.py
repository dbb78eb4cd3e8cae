"""Helpers shared by every group of tasks: data models, retries, rate limits, progress, memory."""
