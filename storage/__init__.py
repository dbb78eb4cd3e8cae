"""Storage adapters: the artifact store, the embedded BM25 and vector indexes, and index versions."""
