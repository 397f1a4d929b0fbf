"""lighteval compatibility: its metrics in assay's metric stage (more of it moves here as the
core sheds its lighteval-specific parts). The core names nothing of lighteval's; this package
imports the core."""

__all__: list[str] = []
