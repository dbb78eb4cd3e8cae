"""Prefect flows of ctxrag: ``index_corpus`` and ``evaluate_index``."""

import os

# In a checkout ctxrag/flows links to flows/: the flows load from their real files, so Prefect names a flow's entrypoint
# as prefect.yaml does (flows/index.py:index_corpus, not ctxrag/flows/index.py:...). A no-op in an installed package.
__path__[:] = [os.path.realpath(entry) for entry in __path__]
