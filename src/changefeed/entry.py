"""The `changefeed` console script: a plain `encode` or `decode` runs without loading the CLI's typer app (and
rich), which is most of a short run's time; anything else is cli.py's."""

from __future__ import annotations


def main() -> None:
    """Run the command line (quickcli.main: redacted output, the quick path, else typer's app)."""
    from .quickcli import main as quick_main

    quick_main(_typer_app)


def _typer_app() -> None:
    from .cli import app

    app()


if __name__ == "__main__":
    main()
