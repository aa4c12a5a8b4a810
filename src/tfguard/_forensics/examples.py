"""The examples of a batch at fault: which rows a failed data check rejects, and whether they came back.

A corrupted record is usually a few rows of one batch, and it comes back
every epoch, in another batch once the data is shuffled. A violation at the
data check stage names the rows of the batch the failed check rejects
(`rows_at_fault`), each with a fingerprint of its values (`fingerprint`:
every input and target leaf of that row, hashed), and `Recurrences`
remembers the fingerprints of one model's violations: a row seen again
with the same values is in the data, not a transient fault.

Example:

>>> import numpy as np
>>> from tfguard import checks
>>> x = np.ones((4, 3), "float32")
>>> x[2, 1] = np.nan
>>> rows_at_fault(checks.finite(), x)
[{'row': 2, 'bad': 1, 'values': 3}]
>>> seen = Recurrences()
>>> first = seen.note([{"row": 2, "fingerprint": fingerprint((x, None, None), 2)}], epoch=0, batch=1)
>>> again = seen.note([{"row": 0, "fingerprint": fingerprint((x[2:3], None, None), 0)}], epoch=1, batch=9)
>>> first[0]["earlier"], again[0]["earlier"]
([], [{'epoch': 0, 'batch': 1, 'row': 2}])
"""

from __future__ import annotations

import hashlib

import keras
import numpy as np

ROWS_NAMED = 20
"""The most rows of one batch a violation names (the rest are counted)."""


def rows_at_fault(check, tensor, most: int = ROWS_NAMED) -> list[dict]:
    """`{"row", "bad", "values"}` for each row (first axis) with a value `check` rejects, at most `most` rows.

    Returns `[]` for a check that does not judge values one by one, or a
    tensor without rows (a scalar).
    """
    mask = check.bad_values(tensor)
    if mask is None:
        return []
    mask = np.asarray(mask)
    if mask.ndim == 0:
        return []
    per_row = mask.reshape(mask.shape[0], -1)
    bad = per_row.sum(axis=1)
    return [{"row": int(row), "bad": int(bad[row]), "values": int(per_row.shape[1])}
            for row in np.flatnonzero(bad)[:most]]


def fingerprint(data, row: int) -> str:
    """A short hash of one example's values: every leaf of `(x, y, sample_weight)` at `row`.

    The same example gives the same fingerprint in any batch (shuffled,
    batched otherwise); NaN values hash alike whatever their payload.
    """
    digest = hashlib.blake2b(digest_size=6)
    for leaf in keras.tree.flatten(data):
        if leaf is None:
            continue
        values = np.asarray(leaf)
        if values.ndim == 0 or row >= values.shape[0]:
            continue
        value = np.ascontiguousarray(values[row])
        if value.dtype.kind == "f":
            value = np.where(np.isnan(value), np.nan, value).astype(value.dtype)
        digest.update(str(value.dtype).encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


class Recurrences:
    """The fingerprints of one model's rows at fault, and where each was seen."""

    def __init__(self):
        self._seen: dict[str, list[dict]] = {}

    def note(self, rows: list[dict], epoch: int | None, batch: int | None) -> list[dict]:
        """Remembers `rows` (each with its `fingerprint`) at `(epoch, batch)`; returns them, each with `earlier`.

        `earlier` lists where the same values were at fault before (epoch, batch, row).
        """
        noted = []
        for row in rows:
            key = row.get("fingerprint")
            earlier = list(self._seen.get(key, [])) if key else []
            if key:
                self._seen.setdefault(key, []).append({"epoch": epoch, "batch": batch, "row": row["row"]})
            noted.append({**row, "earlier": earlier})
        return noted


def describe_rows(rows: list[dict], batch_rows: int | None) -> str:
    """The rows of a violation in words: `in example 3 of the 64 of the batch (20 of its 20 values)`.

    Example:

    >>> describe_rows([{"row": 3, "bad": 20, "values": 20}], 64)
    'in example 3 of the 64 of the batch (20 of its 20 values)'
    >>> describe_rows([{"row": 3, "bad": 1, "values": 4}, {"row": 9, "bad": 4, "values": 4}], None)
    'in 2 examples of the batch: 3 (1 of its 4 values), 9 (4 of 4)'
    """
    if not rows:
        return ""
    of = f" of the {batch_rows}" if batch_rows else ""
    if len(rows) == 1:
        (row,) = rows
        return f"in example {row['row']}{of} of the batch ({row['bad']} of its {row['values']} values)"
    named = [f"{row['row']} ({row['bad']} of its {row['values']} values)" if i == 0
             else f"{row['row']} ({row['bad']} of {row['values']})" for i, row in enumerate(rows[:5])]
    more = f" and {len(rows) - 5} more" if len(rows) > 5 else ""
    return f"in {len(rows)} examples{of} of the batch: {', '.join(named)}{more}"


def describe_recurrences(rows: list[dict]) -> str:
    """A sentence for the rows seen at fault before, with the same values, or `""`.

    Example:

    >>> describe_recurrences([{"row": 3, "earlier": [{"epoch": 0, "batch": 5, "row": 9}]}])
    'Example 3 was at fault before with the same values (epoch 0: batch 5, row 9): it is in the data, not a transient fault. Find that record and drop or impute it.'
    """
    back = [row for row in rows if row.get("earlier")]
    if not back:
        return ""
    parts = []
    for row in back[:3]:
        seen = "; ".join(f"epoch {e['epoch']}: batch {e['batch']}, row {e['row']}" if e.get("epoch") is not None
                         else f"batch {e['batch']}, row {e['row']}" for e in row["earlier"][:3])
        parts.append(f"Example {row['row']} was at fault before with the same values ({seen})")
    more = f" ({len(back) - 3} more such examples)" if len(back) > 3 else ""
    return ("; ".join(parts) + more + ": it is in the data, not a transient fault. "
            "Find that record and drop or impute it.")


__all__ = ["ROWS_NAMED", "Recurrences", "describe_recurrences", "describe_rows", "fingerprint", "rows_at_fault"]
