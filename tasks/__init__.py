"""The pipeline's work as small typed functions, a folder per concern in the order data flows: ``load/`` (sources ->
documents and chunks), ``context/``, ``embedding/``, ``retrieval/``, ``evaluation/``; ``stages/`` wraps them as the
index flow's Prefect tasks. ``common/`` holds what every group uses (data models, retries, rate limits, progress,
memory); ``gc`` collects the artifact store's garbage and sits above context and embedding, whose keys it derives.
A group imports only its own modules and lower groups (tests/test_architecture.py)."""
