"""`TagBudget`: the distinct tags a group of runs may keep together (the watch's cap over its logdir).

The reader keeps at most `tfguard.events._collect.MAX_TAGS` tags per run,
which bounds the memory of one run. A reader that keeps many runs at once
(`tfguard watch` keeps every run it follows) also shares one budget among
them: past it, a new tag is refused (its values are counted and reported as
damage, as past `MAX_TAGS`), unless its name starts with one of `exempt`
(the tags the rules judge a whole run by: its loss, its metrics). Every tag
kept is charged, exempt or not, so `used` is what the group keeps.

Example:

>>> budget = TagBudget(2, exempt=("train/",))
>>> [budget.admits(t) for t in ("grad_norm/a", "train/loss")]
[True, True]
>>> budget.charge(2); budget.admits("grad_norm/b"), budget.admits("train/acc")
(False, True)
"""

from __future__ import annotations

__all__ = ["TagBudget"]


class TagBudget:
    """A count of distinct tags shared by several runs' collectors.

    Args:
        limit: the most tags kept together (exempt ones still count).
        exempt: tag prefixes admitted even when the budget is spent. Defaults to `()`.
    """

    def __init__(self, limit: int, *, exempt: tuple[str, ...] = ()):
        self.limit = int(limit)
        self.exempt = tuple(exempt)
        self.used = 0

    def admits(self, tag: str) -> bool:
        """Whether a new tag may be kept now."""
        return self.used < self.limit or tag.startswith(self.exempt)

    def charge(self, count: int = 1) -> None:
        """Counts `count` tags kept."""
        self.used += count

    def release(self, count: int) -> None:
        """Gives back the tags of a run that is read again from its start."""
        self.used = max(0, self.used - count)
