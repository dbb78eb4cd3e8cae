"""The index flow's stages as Prefect tasks, one module each: load (and diff against the live index),
contextualize, embed, publish, gate. Tasks take plain values and a home folder, never clients; their outputs are
persisted as they are made in the content-keyed artifact store, which is the cache across runs."""
