"""stats.py — the statistics of the quality tables: paired comparisons over windows and intervals
for proportions. Standard library and NumPy only.

A comparison of two attentions A and B is paired: both run on the same n windows of a window set,
and d_i = (mean NLL of A on window i) - (mean NLL of B on window i), in nats per token. The tokens
of one window are not independent, the windows are treated as such (they do not overlap and lie
thousands of tokens apart), so n is the number of windows:

    paired t-test        t = mean(d) / (sd(d) / sqrt(n)), n - 1 degrees of freedom, two-sided p;
                         95 % interval mean(d) +- t_{0.975, n-1} sd(d) / sqrt(n)
    sign-flip test       under "A and B are exchangeable" each d_i is as likely to be -d_i: p is the
                         share of the 2^n sign patterns whose |mean| reaches the observed one
                         (every pattern when n <= 16; otherwise FLIPS random patterns, seeded,
                         with the observed one counted: (1 + hits) / (1 + FLIPS))
    bootstrap            percentile 95 % interval of mean(d), windows resampled BOOT times

    verdict              "better" (A's NLL lower) or "worse" when BOTH tests give p < 0.05,
                         otherwise "no significant difference" (ALPHA, per comparison; report.py's
                         holm_table gives Holm's correction over the documents' verdicts)

Passkey retrieval is a count of hits in n trials: Wilson's score interval (Wilson 1927).

The t distribution's CDF is the regularised incomplete beta function, evaluated with its continued
fraction (modified Lentz method); the quantile by bisection.
"""
import functools
import math
import os
import sys

try:
    import numpy as np
except ModuleNotFoundError:  # the t-test alone (t_test) needs only the standard library
    np = None


def _need_numpy():
    """One line and exit where a test needs NumPy and this Python has none."""
    if np is None:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../scripts"))
        from chapter_script import missing
        sys.exit(missing("numpy", setup="--quality"))


ALPHA = 0.05
FLIPS = 100000
BOOT = 10000
Z95 = 1.959963984540054


def _betacf(a, b, x):
    """Continued fraction of the incomplete beta function (converges for x < (a+1)/(a+b+2))."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 10000):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return f


def betainc(a, b, x):
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
          + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(ln) * _betacf(a, b, x) / a
    return 1.0 - math.exp(ln) * _betacf(b, a, 1.0 - x) / b


def t_sf2(t, df):
    """Two-sided tail P(|T| >= |t|) of Student's t with df degrees of freedom."""
    return betainc(df / 2.0, 0.5, df / (df + t * t))


@functools.lru_cache(maxsize=None)  # 200 bisection steps: a table asks for a few df only
def t_ppf(p, df):
    """The p quantile (p > 0.5) of Student's t, by bisection on the two-sided tail."""
    lo, hi = 0.0, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_sf2(mid, df) > 2 * (1 - p):
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def sign_flip_p(d, flips=FLIPS, seed=0):
    """Two-sided sign-flip (permutation) test of mean(d) = 0."""
    _need_numpy()
    d = np.asarray(d, dtype=np.float64)
    n, obs = len(d), abs(float(np.mean(d)))
    tol = 1e-12 * max(1.0, obs)
    if n <= 16:  # every sign pattern
        signs = 1 - 2 * ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1)
        return float(np.mean(np.abs(signs @ d) / n >= obs - tol))
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, flips, 10000):
        m = min(10000, flips - start)
        signs = rng.integers(0, 2, size=(m, n)) * 2 - 1
        hits += int(np.sum(np.abs(signs @ d) / n >= obs - tol))
    return (1 + hits) / (1 + flips)


def bootstrap_ci(d, reps=BOOT, seed=0):
    """Percentile 95 % interval of mean(d) over resamples of the windows."""
    d = np.asarray(d, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(reps, len(d)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def verdict_word(mean, p_t, p_flip, alpha=ALPHA):
    """'better' / 'worse' for A against B (d = A - B, lower NLL is better) when both tests reject
    at alpha, else 'no significant difference'."""
    if max(p_t, p_flip) >= alpha:
        return "no significant difference"
    return "better" if mean < 0 else "worse"


def t_test(a, b):
    """(mean difference, two-sided p) of the paired t-test of A's per-window values against B's
    (standard library only: what paired() reports as mean and p_t)."""
    d = [x - y for x, y in zip(a, b)]
    n = len(d)
    if n < 2:
        raise ValueError(f"a paired test needs at least 2 windows (got {n})")
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    if sd == 0.0:
        return mean, (1.0 if mean == 0.0 else 0.0)
    return mean, t_sf2(mean / (sd / math.sqrt(n)), n - 1)


_PAIRED = {}


def paired(a, b):
    """The paired comparison of per-window values a (A) and b (B): dict with n, mean, sd, t, p_t,
    ci95_t, p_signflip, ci95_boot, verdict (for A against B). Kept per process under the values
    (the tables and verdicts of one run compare the same pairs several times; the sign-flip
    test's 100,000 flips take a tenth of a second); each call returns its own copy."""
    _need_numpy()
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    key = (a.tobytes(), b.tobytes())
    if key not in _PAIRED:
        _PAIRED[key] = _paired(a, b)
    return {k: list(v) if isinstance(v, list) else v for k, v in _PAIRED[key].items()}


def _paired(a, b):
    d = a - b
    n = len(d)
    if n < 2:
        raise ValueError(f"a paired test needs at least 2 windows (got {n})")
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    if se == 0.0:
        t, p_t = (0.0, 1.0) if mean == 0.0 else (math.copysign(math.inf, mean), 0.0)
    else:
        t = mean / se
        p_t = t_sf2(t, n - 1)
    half = t_ppf(0.975, n - 1) * se
    p_flip = sign_flip_p(d)
    return dict(n=n, mean=mean, sd=sd, t=t, p_t=p_t, ci95_t=[mean - half, mean + half],
                p_signflip=p_flip, ci95_boot=list(bootstrap_ci(d)),
                verdict=verdict_word(mean, p_t, p_flip))


def wilson(hits, n, z=Z95):
    """Wilson score interval [low, high] of a proportion hits / n."""
    if n == 0:
        return [0.0, 1.0]
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [0.0 if hits == 0 else centre - half, 1.0 if hits == n else centre + half]


def fmt_p(p):
    """A p value for a table: 3 significant digits, '<1e-4' below that."""
    return "<1e-4" if p < 1e-4 else f"{p:.2g}" if p < 0.01 else f"{p:.3f}"
