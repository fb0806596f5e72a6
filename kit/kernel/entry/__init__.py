"""Entry points: what the train, reload and investigate notebooks call; the ``python -m`` programs the host starts."""
