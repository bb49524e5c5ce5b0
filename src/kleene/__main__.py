"""``python -m kleene``: the same command line as ``kleene``."""

from .cli.main import main

if __name__ == "__main__":
    main()
