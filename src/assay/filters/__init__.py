"""Filters: post-process model responses before scoring, exactly as lm-eval does.

Built-in filters register themselves when their module is imported; `FILTERS.get(name)` imports
the right module on first use.
"""

from assay.filters.base import (
    FILTERS,
    Filter,
    FilterEnsemble,
    build_filter_ensemble,
    register_filter,
)

__all__ = ["FILTERS", "Filter", "FilterEnsemble", "build_filter_ensemble", "register_filter"]
