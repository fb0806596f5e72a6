"""Save and load paths: an adapter per API, the C predict API, third-party checkpoints, what a load computes."""
