"""Remedies: the fixes a migrating user applies to a cell that fails, registered by kind and tried in order."""
