"""Where a difference or an error starts: graphs compared layer by layer, a failure explained."""
