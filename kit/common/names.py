"""What a name the kit puts into a path (release, model, API, environment, run) may look like."""

import re

#: letters, digits, '.', '_', '+' and '-', starting with a letter or digit: safe as a path component
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
