"""Standard errors of a mean when docs come in clusters that share a context.

Questions written about one passage (RACE, DROP), one story (MuSR) or one subject are not
independent: a model that misreads the passage misses several of them. The usual
sd/√n then understates the uncertainty. Miller (2024), "Adding Error Bars to Evals"
(arXiv 2411.00640), eq. 4: the clustered variance of the mean adds to the independent one, over
each cluster, the cross-products of the docs' deviations from the overall mean,

    Var = s²/n + (1/n²) Σ_c Σ_{i≠j ∈ c} (x_i - x̄)(x_j - x̄),

with s² the sample variance (n - 1 in the denominator). With every doc in a cluster of its own
the second term vanishes and the plain standard error comes back exactly. No small-sample
correction is applied (statsmodels' default G/(G-1) factor is left out on purpose, so that the
formula matches the paper's): results.json's clustered stderr keeps this form.

With few clusters that form is much too small (the atlas, benchmarks/coverage_atlas.py: a
95 % interval on it covers 62 % of the time with 2 clusters, 85 % with 5). Comparisons, which
print intervals and p-values, use `cr2_variance_of_mean` instead: the CR2 (Bell-McCaffrey)
bias-reduced variance, read against Student's t with Bell-McCaffrey's degrees of freedom
(`cluster_degrees_of_freedom`: G - 1 for equal clusters, fewer when sizes differ).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np


def clustered_variance_of_mean(values: Sequence[float], clusters: Sequence[Hashable]) -> float:
    """Miller's clustered variance of mean(values); `clusters[i]` names the cluster of
    values[i]. NaN with fewer than two values, or with all of them in one cluster (one
    independent unit has no spread to measure)."""
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    if len(clusters) != n:
        raise ValueError(f"{n} values but {len(clusters)} cluster labels")
    if n < 2:
        return math.nan
    _, codes = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    if codes.max() == 0:
        return math.nan
    deviations = x - x.mean()
    plain = float(deviations @ deviations) / (n - 1) / n
    sums = np.bincount(codes, weights=deviations)
    # Σ_c (Σ_i e_i)² holds every ordered pair within a cluster, the diagonal included; the
    # diagonal Σ e_i² is removed to leave the cross-products.
    cross = float(sums @ sums) - float(deviations @ deviations)
    return plain + cross / n**2


def clustered_stderr(values: Sequence[float], clusters: Sequence[Hashable]) -> float:
    """sqrt of `clustered_variance_of_mean` (NaN where it is NaN). The variance is never
    negative: the cross-products are at least -Σe², and s²/n exceeds Σe²/n²; it is 0 only for
    values without spread (the plain standard error's convention)."""
    return math.sqrt(clustered_variance_of_mean(values, clusters))


def cr2_variance_of_mean(
    values: Sequence[float] | np.ndarray, clusters: Sequence[Hashable]
) -> float:
    """The CR2 (Bell-McCaffrey 2002) cluster-robust variance of mean(values). For a mean the
    hat matrix of cluster g is J/n, and (I - J/n)^(-1/2) scales the sum of g's residuals by
    1/sqrt(1 - n_g/n), so

        Var = (1/n²) Σ_g (Σ_{i∈g} e_i)² / (1 - n_g/n),   e_i = x_i - x̄.

    With every doc its own cluster it is s²/n exactly; with G equal clusters it is G/(G - 1)
    times the uncorrected sandwich. Read it with t(`cluster_degrees_of_freedom`).
    NaN with fewer than two values or fewer than two clusters."""
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    if len(clusters) != n:
        raise ValueError(f"{n} values but {len(clusters)} cluster labels")
    if n < 2:
        return math.nan
    _, codes = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    if codes.max() == 0:
        return math.nan
    sums = np.bincount(codes, weights=x - x.mean())
    sizes = np.bincount(codes)
    return float((sums**2 / (1.0 - sizes / n)).sum()) / n**2


def cluster_degrees_of_freedom(clusters: Sequence[Hashable]) -> float:
    """Bell-McCaffrey (2002) degrees of freedom of the t distribution a CR2 interval of a mean
    is read against: the Satterthwaite degrees of freedom of the CR2 variance under
    independent, equal-variance docs, (Σλ)²/Σλ², λ the eigenvalues of M = Σ_g c_g c_gᵀ with
    c_g the CR2-weighted column of cluster g (Imbens-Kolesár 2016, eq. 11).

    For a mean, M = D - u uᵀ with D_g = p_g / (n(1 - p_g)), u_g = p_g / sqrt(n(1 - p_g)) and
    p_g = n_g/n, so tr M and tr M² need no matrix. Equal clusters give G - 1 exactly; one big
    cluster among small ones gives far fewer (1.2 for sizes 200, 5, 5, 5, 5), which is what
    keeps the interval's coverage when cluster sizes differ (t(G - 1) covered 0.6 there).
    NaN with fewer than two clusters."""
    _, codes = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    if len(codes) == 0 or codes.max() == 0:
        return math.nan
    sizes = np.bincount(codes).astype(np.float64)
    n = float(sizes.sum())
    share = sizes / n
    diagonal = share / (n * (1.0 - share))
    outer = share**2 / (n * (1.0 - share))  # u_g²
    trace = float(diagonal.sum() - outer.sum())
    trace_square = float((diagonal**2).sum() - 2 * (diagonal * outer).sum() + outer.sum() ** 2)
    return trace**2 / trace_square


def cluster_count(clusters: Sequence[Hashable]) -> int:
    """Distinct cluster labels."""
    return len({str(c) for c in clusters})
