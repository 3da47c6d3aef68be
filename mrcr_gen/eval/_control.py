"""`mrcr-eval --control query-only`: a memorization control, and the test `compare` makes of it.

A control run sends each row's final query without the conversation it refers to (what exactly
is the recipe's: `EvalRecipe.query_only_messages`), and grades the reply against the row's
answer as usual. A model that never saw the row cannot know which writing the query means: on
average it scores no better than a guess: the reference floor its recipe declares for the control
(`Floor.control`, e.g. the prefix plus a random writing of the conversation). A control that
scores clearly above that floor means the model has seen the rows (public data, e.g. a dataset
published years ago).

"Clearly" is a one-sided paired t-test over the control's rows: d = score - floor per row, H0
mean(d) <= 0, H1 mean(d) > 0, flagged at p < `ALPHA`. The margin a control needs is
shown with it: t(1 - ALPHA, n - 1) x the standard error of the mean of d, which shrinks with the
number of rows. No scipy at run time: Student's t distribution is computed here (the tests check it
against scipy). The rows of a recipe that declares no control floor cannot be tested: the test
counts them (`untested`) and says so (`note`) instead of leaving them out in silence.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ._floors import control_floor
from ._items import EvalItem, EvalRecipe

QUERY_ONLY = "query-only"
CONTROLS = (QUERY_ONLY,)
ALPHA = 0.01  # one-sided: a false "memorized" on a model that never saw the rows 1 time in 100
TEST_NAME = "one-sided paired t-test of score - {floor} > 0"  # {floor}: the control floors' names


def test_name(floor_names: Sequence[str]) -> str:
    return TEST_NAME.format(floor=" / ".join(floor_names) or "floor")


def sent_messages(item: EvalItem, recipe: EvalRecipe, control: str | None) -> list[dict]:
    """The messages a row sends: its prompt, or under a control what the control keeps of it."""
    if control is None:
        return item.messages
    if control == QUERY_ONLY:
        return recipe.query_only_messages(item)
    raise ValueError(f"unknown control {control!r}; known: {', '.join(CONTROLS)}")


# --------------------------------------------------------------------------- Student's t


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes 6.4)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _continued_fraction(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with `df` degrees of freedom."""
    tail = 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_isf(p: float, df: float) -> float:
    """The t with P(T > t) = p (0 < p < 0.5), by bisection: a few dozen evaluations, once per control."""
    low, high = 0.0, 1.0
    while t_sf(high, df) > p:
        high *= 2.0
    for _ in range(100):
        middle = (low + high) / 2.0
        if t_sf(middle, df) > p:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


# --------------------------------------------------------------------------- the test


def memorization_test(
    pairs: Sequence[tuple[float, float]], alpha: float = ALPHA, *, floor_names: Sequence[str] = ()
) -> dict[str, Any]:
    """The one-sided paired t-test of (score, floor) pairs, one per row of a control (`floor_names`:
    the floors', for the test's name): the means, their difference, the margin the difference must
    exceed at `alpha` for this number of rows, t, the p-value and whether the control is flagged
    as memorized (p < alpha). Fewer than 2 rows: no test (`p_value` None, not flagged)."""
    n = len(pairs)
    result: dict[str, Any] = {
        "test": test_name(floor_names),
        "alpha": alpha,
        "rows": n,
        "control_mean": sum(s for s, _ in pairs) / n if n else None,
        "floor_mean": sum(f for _, f in pairs) / n if n else None,
        "difference": None,
        "margin": None,
        "t": None,
        "p_value": None,
        "memorized": False,
    }
    if n < 2:
        return result
    differences = [s - f for s, f in pairs]
    mean = sum(differences) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1))
    se = sd / math.sqrt(n)
    result["difference"] = mean
    result["margin"] = t_isf(alpha, n - 1) * se
    if se == 0.0:  # every row the same distance from its floor: no noise to test against
        result["p_value"] = 0.0 if mean > 0 else 1.0
    else:
        result["t"] = mean / se
        result["p_value"] = t_sf(mean / se, n - 1)
    result["memorized"] = result["p_value"] < alpha
    return result


def control_pairs(records: Sequence[dict[str, Any]], recipes: Sequence[EvalRecipe]) -> list[tuple[float, float]]:
    """(score, floor) of every graded row of a control that has a floor: the one its recipe
    declares for the control (`Floor.control`)."""
    floors = {recipe.name: control_floor(recipe) for recipe in recipes}
    pairs = []
    for r in records:
        floor = floors.get(str(r.get("recipe")))
        if floor is None or r.get("status") != "ok" or r.get("score") is None or r.get(floor.name) is None:
            continue
        pairs.append((float(r["score"]), float(r[floor.name])))
    return pairs


def control_test(records: Sequence[dict[str, Any]], recipes: Sequence[EvalRecipe]) -> dict[str, Any]:
    """`memorization_test` of a control's graded records, against the floors their recipes declare;
    rows of a recipe that declares no control floor are counted (`untested`) and named (`note`)."""
    present = [recipe for recipe in recipes if any(r.get("recipe") == recipe.name for r in records)]
    floors = [control_floor(recipe) for recipe in present or recipes]
    names = list(dict.fromkeys(floor.name for floor in floors if floor is not None))
    result = memorization_test(control_pairs(records, recipes), floor_names=names)
    unfloored = {recipe.name for recipe in recipes if control_floor(recipe) is None}
    untested = Counter(str(r.get("recipe")) for r in records if r.get("recipe") in unfloored)
    if untested:
        result["untested"] = sum(untested.values())
        result["note"] = "; ".join(
            f"{name} declares no reference floor for the control: its {n} rows are not tested"
            for name, n in sorted(untested.items())
        )
    return result


def pair_controls(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`compare`'s entries with each control placed right after its full run: the first run in the
    list that is not a control, of the same model and the same data files (by sha256). A control
    gets `full_run` (None when no such run is compared with it)."""
    full_of: dict[int, int] = {}
    for i, entry in enumerate(entries):
        if not entry.get("control"):
            continue
        entry["full_run"] = None
        for j, other in enumerate(entries):
            if not other.get("control") and other["model"] == entry["model"] and other["data"] == entry["data"]:
                full_of[i], entry["full_run"] = j, other["run"]
                break
    order: list[int] = []
    for i in range(len(entries)):
        if i not in full_of:
            order.append(i)
            order.extend(c for c, full in full_of.items() if full == i)
    return [entries[i] for i in order]


__all__ = ["ALPHA", "CONTROLS", "QUERY_ONLY", "control_test", "memorization_test", "sent_messages", "t_isf", "t_sf"]
