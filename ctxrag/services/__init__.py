"""The search services: ``ctxrag mcp`` (Model Context Protocol over stdio) and ``ctxrag serve-search`` (HTTP), thin
shells over the ``Index`` the Python API opens (one search path, three doors).

``requests`` checks what a caller asks (one validator, one set of limits, for both doors); ``warm`` keeps each
index open and notices a promoted version; ``mcp_server`` and ``http_server`` are the two doors; ``token`` is the
HTTP door's bearer token. ``resident`` is a third door, for ``ctxrag search`` itself: a process left by the first
search that answers the later ones over a private Unix socket (``resident_socket``: where, ask, start; the only
module here ``ctxrag search`` imports, standard library only). Nothing here is imported by ``ctxrag --help``.
"""
