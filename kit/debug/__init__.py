"""When a cell is red: investigate it layer by layer, bisect releases, bundle evidence, convert with a remedy."""
