"""AWAC-discrete on CartPole: tau 0.02 against the default, paired by seed."""
import csv

import numpy as np

from super_sac.sweep.stats import stratified_bootstrap_ci

ev = "experiments/benchmarks/results/cartpole_awacd_tau02/evaluations"
def curve(cfg, s):
    with open(f"{ev}/{cfg}_CartPole-v1_seed{s}.csv") as f:
        r = list(csv.DictReader(f))
    return np.array([float(x["env_steps"]) for x in r]), np.array([float(x["return_mean"]) for x in r])
stats = {}
for cfg in ("awac_discrete", "awacd_tau02"):
    rows = []
    for s in range(5):
        t, y = curve(cfg, s)
        first = t[np.argmax(y >= 475)] if (y >= 475).any() else np.nan
        rows.append(dict(first=first, solved=(y >= 475).sum(), n=len(y), final=y[-1], last3=y[-3:].mean(), auc=y.mean(), dips=[(int(a), round(b,1)) for a, b in zip(t, y) if a > first and b < 475]))
    stats[cfg] = rows
    print(cfg, [(int(r["first"]), int(r["solved"]), r["n"], round(r["final"],1), round(r["last3"],1), round(r["auc"],1)) for r in rows])
    for s, r in enumerate(rows): print("   seed", s, "dips after first 475:", r["dips"])
for k in ("first", "solved", "final", "last3", "auc"):
    d = [b[k] - a[k] for a, b in zip(stats["awac_discrete"], stats["awacd_tau02"])]
    m, lo, hi = stratified_bootstrap_ci([d], np.mean)
    print(f"{k}: tau0.02 - default per seed {np.round(d,1).tolist()} mean {m:.1f} [{lo:.1f}, {hi:.1f}]")
