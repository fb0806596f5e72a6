"""How a kernel-side program answers the host (kit.envs.kernel_process starts it): what both sides agree on.

``python -m kit.kernel.X REQUEST.json`` reads one JSON request and answers on its last stdout line that
starts with :data:`ANSWER` (what else it or MXNet prints is ignored), with one exit code convention:

- 0: the answer, a JSON object;
- 2: ``{"error", "hint"}``: the request was wrong (the user's input), nothing was done;
- 3: ``{"error", "hint"}``: the work failed in a way the program understood;
- anything else: it crashed; its stderr says why.
"""

import json
import sys

from kit.common.errors import KitError

ANSWER = "MXCOMPAT-ANSWER "


def say(answer):
    """Print ``answer`` as the program's answer line."""
    sys.stdout.write(ANSWER + json.dumps(answer, sort_keys=True) + "\n")
    sys.stdout.flush()


def serve(handler, argv=None):
    """Run ``handler(request)`` on the request file named by ``argv`` (default ``sys.argv[1:]``) and answer
    with its result; a :class:`~kit.common.errors.KitError` answers ``{"error", "hint"}`` with its exit code.
    Returns the exit code."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m %s REQUEST.json\n" % (sys.argv[0] or "kit.kernel.X"))
        return 64
    with open(args[0]) as f:
        request = json.load(f)
    try:
        answer = handler(request)
    except KitError as e:
        say({"error": e.message, "hint": e.hint})
        return e.exit_code
    say(answer)
    return 0
