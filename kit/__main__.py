"""``python -m kit`` and the ``mxcompat`` script run the CLI.

The CLI is imported only when this module runs as the program: a worker the local executor spawns imports the
program's main module again, and needs none of the CLI (a tenth of a second before its first step can start).
"""


def main():
    from kit.cli import main as cli

    return cli()


if __name__ == "__main__":
    main()
