"""``python -m kit`` runs the CLI."""

from kit.cli import main

if __name__ == "__main__":
    main()
