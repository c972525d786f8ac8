#!/usr/bin/env python3
"""The statistics of the quality tables (CTest quality.stats): quality/stats.py against values
computed independently. The paired t-test on the per-window differences -.052, +.012, -.017,
-.067 (a comparison once reported as significant from 4 windows) gives p = 0.179 and the 95 %
interval [-0.0875, +0.0255]; Student's t quantiles (2.0395 for 31 degrees of freedom, 3.1824 for
3, 12.706 for 1); the two-sided tail of t = 1 with 1 degree of freedom is 1/2; the exact sign-flip
test counts sign patterns (d = 1, 2, 3, 4: 2 of 16 reach |mean| 2.5) and its random version is
within 0.003 of the exact one on 18 windows; Wilson's interval of 0/25 is [0, 0.1332] and of
12/25 [0.3003, 0.6650]; a verdict needs both tests below 0.05; the standard-library t-test equals the paired one's; Holm's
adjusted p of 0.04, 0.01, 0.03 are 0.06, 0.03, 0.06. Exit 0 when every check passes."""
import itertools
import sys

import numpy as np

import stats
from checks import check, finish


def main():
    r = stats.paired([-.052, .012, -.017, -.067], [0, 0, 0, 0])
    check(abs(r["p_t"] - 0.1791) < 5e-4 and abs(r["ci95_t"][0] + 0.0875) < 5e-4
          and abs(r["ci95_t"][1] - 0.0255) < 5e-4,
          f"4 windows: p {r['p_t']:.4f}, 95% CI [{r['ci95_t'][0]:+.4f}, {r['ci95_t'][1]:+.4f}]")
    check(r["verdict"] == "no significant difference" and r["p_signflip"] == 0.25,
          f"4 windows: exact sign-flip p {r['p_signflip']} (4 of 16 sign patterns), "
          f"verdict '{r['verdict']}'")
    for df, q in ((31, 2.039513), (3, 3.182446), (1, 12.706205)):
        got = stats.t_ppf(0.975, df)
        check(abs(got - q) < 1e-4, f"t quantile 0.975, {df} df: {got:.6f} (want {q})")
    check(abs(stats.t_sf2(1.0, 1) - 0.5) < 1e-12, "two-sided tail of t = 1, 1 df: 1/2")
    check(stats.sign_flip_p([1, 2, 3, 4]) == 2 / 16, "exact sign-flip: d = 1..4, p = 2/16")
    d = np.random.default_rng(3).normal(0.02, 0.05, 18)
    obs = abs(d.mean())
    exact = np.mean([abs(np.dot(s, d)) / 18 >= obs - 1e-12
                     for s in itertools.product((-1, 1), repeat=18)])
    mc = stats.sign_flip_p(d)
    check(abs(mc - exact) < 0.003, f"random sign flips {mc:.4f} vs exact {exact:.4f} (18 windows)")
    lo, hi = stats.wilson(0, 25)
    check(lo == 0 and abs(hi - 0.1332) < 1e-4, f"Wilson 0/25: [{lo:.4f}, {hi:.4f}]")
    lo, hi = stats.wilson(12, 25)
    check(abs(lo - 0.3003) < 1e-4 and abs(hi - 0.6650) < 1e-4, f"Wilson 12/25: [{lo:.4f}, {hi:.4f}]")
    a = np.linspace(3.0, 3.5, 32)
    better = stats.paired(a - 0.05 + 0.01 * np.sin(np.arange(32)), a)
    check(better["verdict"] == "better" and better["p_t"] < 1e-4, "a consistent gain: 'better'")
    check(stats.paired(a + 0.05 + 0.01 * np.sin(np.arange(32)), a)["verdict"] == "worse",
          "a consistent loss: 'worse'")
    check(stats.verdict_word(-0.1, 0.01, 0.06) == "no significant difference"
          and stats.verdict_word(-0.1, 0.06, 0.01) == "no significant difference",
          "one test alone at p < 0.05 is no verdict")
    m, p = stats.t_test([-.052, .012, -.017, -.067], [0, 0, 0, 0])
    check(abs(p - r["p_t"]) < 1e-12 and abs(m - r["mean"]) < 1e-15,
          f"t_test (standard library) = paired's mean and p_t: {m:.4f}, {p:.4f}")
    # Holm (1979): sorted p 0.01, 0.03, 0.04 of m = 3 -> 0.03, max(0.06, 0.03), max(0.04, 0.06)
    import report
    got = report.holm([0.04, 0.01, 0.03])
    check(all(abs(a - b) < 1e-12 for a, b in zip(got, [0.06, 0.03, 0.06])),
          f"Holm's adjusted p of 0.04, 0.01, 0.03: {got} (want 0.06, 0.03, 0.06)")
    check(report.holm([0.5, 0.9]) == [1.0, 1.0], "Holm's adjusted p is at most 1")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
