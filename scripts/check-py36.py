"""Parse every module under kit/common and kit/kernel (and kit/__init__.py) with the running interpreter.

Run it with Python 3.6 (`make lint` finds one the way the kit finds interpreters): the code
both sides share and the kernel side must parse on the oldest Python a kernel runs.
Exits 1 naming each file that does not parse.
"""

import ast
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def files():
    yield os.path.join(ROOT, "kit", "__init__.py")
    for part in ("common", "kernel"):
        folder = os.path.join(ROOT, "kit", part)
        for dirpath, dirnames, names in sorted(os.walk(folder)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for name in sorted(names):
                if name.endswith(".py"):
                    yield os.path.join(dirpath, name)


def main():
    bad = []
    count = 0
    for path in files():
        count += 1
        with open(path) as f:
            source = f.read()
        try:
            ast.parse(source, path)
        except SyntaxError as e:
            bad.append("%s:%s: %s" % (os.path.relpath(path, ROOT), e.lineno, e.msg))
    for line in bad:
        print(line)
    print("%d of %d files parse on Python %s" % (count - len(bad), count, sys.version.split()[0]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
