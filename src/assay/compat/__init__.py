"""Other harnesses' formats and names, each in a package of its own above the core it adapts."""

__all__: list[str] = []
