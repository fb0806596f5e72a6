"""From what a user asks to a finished run: the request, its plan of steps, and the matrix that runs them."""
