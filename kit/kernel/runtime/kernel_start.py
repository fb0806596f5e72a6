"""How every kit kernel starts: ipykernel's own launcher, except that a kernel which cannot start ends at once.

jupyter_client picks a kernel's five ports free, then the kernel binds them. When another process starting
kernels at that moment takes one in between, ipykernel raises ``Address already in use`` and then hangs in its
exit handlers, terminating its ZeroMQ context with sockets still open: alive and never ready, until the step's
start timeout (three minutes) ends it. Ended at once, the kernel is seen to die before replying, and the step
starts another on other ports straight away.
"""

import os
import sys
import traceback


def main():
    # as ipykernel's launcher: the folder it starts in off the path while it imports (the kernel puts it back)
    if sys.path and (sys.path[0] == "" or os.path.abspath(sys.path[0]) == os.getcwd()):
        del sys.path[0]
    from ipykernel import kernelapp

    app = kernelapp.IPKernelApp.instance()
    try:
        app.initialize()
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)  # not sys.exit: its exit handlers are what hang
    app.start()


if __name__ == "__main__":
    main()
