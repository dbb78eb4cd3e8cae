"""TEST EQUIPMENT, not product code and never a source of quality or cost figures.

The local HTTP API simulators (Anthropic, Voyage, Cohere; base in ``_http``), the noida-db Elasticsearch emulator
(``es_emulator``) and a real Prefect server (``prefect_server``). Their pytest fixtures are in ``tests/conftest.py``
(``anthropic_simulator``, ``voyage_simulator``, ``cohere_simulator``, ``es_emulator_url``) and
``tests/flows/conftest.py`` (``prefect_server``); the ``test_*`` modules here check the simulators themselves.
"""
