"""Models the kit did not train: a user's own checkpoint (check-model), MXNet's own checker's files (MBCC)."""
