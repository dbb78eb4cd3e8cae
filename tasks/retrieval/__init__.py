"""Retrieval: search strategies and their fusion over a stored index, and rerankers."""
