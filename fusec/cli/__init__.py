"""The command line's subcommands (``demo``, ``cache``); ``python -m fusec`` (``fusec/__main__.py``) dispatches."""
