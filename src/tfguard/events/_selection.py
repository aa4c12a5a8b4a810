"""What a caller asked to read: tags, tag prefixes, kinds, and image bytes.

Memory is bounded by what is asked for: a value whose tag or kind is not
selected is never decoded or kept. When tags or prefixes are given, a record
whose bytes contain none of them is not even parsed (a tag is stored verbatim
in the record, so a record without its bytes cannot hold it).

Tag filters apply to scalars, histograms, texts and images. The hparams of a
run are not addressed by tag: they are read whenever `"hparams"` is in `kinds`.

Example:

>>> sel = Selection.build(tags=["train/loss"], prefixes=["grad_norm/"], kinds=("scalars",))
>>> sel.wants("grad_norm/dense"), sel.wants("val/loss"), sel.wants_kind("histograms")
(True, False, False)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tensorboard.plugins.hparams import metadata as hparams_metadata

from tfguard._errors import ContractError
from tfguard.events._decode import KINDS

__all__ = ["Selection"]

_HPARAMS_NEEDLE = hparams_metadata.EXPERIMENT_TAG.split("/")[0].encode() + b"/"


def _names(argument: str, value: str | Iterable[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    try:
        names = tuple(value)
    except TypeError:
        raise ContractError(
            f"Received an invalid value for `{argument}`, expected a list of strings or None. "
            f"Received: {argument}={value!r}"
        ) from None
    bad = [name for name in names if not isinstance(name, str)]
    if bad:
        raise ContractError(
            f"Received an invalid value for `{argument}`, expected strings only. "
            f"Received: {argument}={value!r}"
        )
    return names


@dataclass(frozen=True)
class Selection:
    """A validated choice of what to read.

    Build it with `Selection.build`, which checks the arguments.

    Args:
        tags: exact tag names to keep, or `None` for no exact-name filter.
        prefixes: tag prefixes to keep, or `None` for no prefix filter.
        kinds: the kinds to keep, a subset of `KINDS`.
        load_images: keep the encoded bytes of images.
    """

    tags: frozenset[str] | None
    prefixes: tuple[str, ...] | None
    kinds: frozenset[str]
    load_images: bool

    @classmethod
    def build(
        cls,
        *,
        tags: str | Iterable[str] | None = None,
        prefixes: str | Iterable[str] | None = None,
        kinds: str | Iterable[str] = KINDS,
        load_images: bool = False,
    ) -> Selection:
        """Check and normalise the reading options shared by `read_run` and `read_logdir`.

        A tag is kept if it is one of `tags` or starts with one of `prefixes`;
        with both `None`, every tag is kept.

        Args:
            tags: exact tag names (a single string is one name). Defaults to `None`.
            prefixes: tag prefixes (a single string is one prefix). Defaults to `None`.
            kinds: kinds to read, from `("scalars", "histograms", "texts", "hparams",
                "images")`. Defaults to all of them.
            load_images: keep image bytes in `ImageInfo.data`. Defaults to `False`.

        Returns:
            The `Selection`.

        Raises:
            ContractError: if an argument has the wrong type or names an unknown kind.
        """
        tag_names = _names("tags", tags)
        prefix_names = _names("prefixes", prefixes)
        kind_names = _names("kinds", kinds)
        unknown = [kind for kind in kind_names or () if kind not in KINDS]
        if kind_names is None or unknown:
            raise ContractError(
                f"Received an invalid value for `kinds`, expected a list of {KINDS}. "
                f"Received: kinds={kinds!r}"
            )
        return cls(
            tags=None if tag_names is None else frozenset(tag_names),
            prefixes=prefix_names,
            kinds=frozenset(kind_names),
            load_images=bool(load_images),
        )

    def wants(self, tag: str) -> bool:
        """Return whether values of `tag` are kept (by name; see `wants_kind`)."""
        if self.tags is None and self.prefixes is None:
            return True
        if self.tags is not None and tag in self.tags:
            return True
        return self.prefixes is not None and tag.startswith(self.prefixes)

    def wants_kind(self, kind: str | None) -> bool:
        """Return whether values of `kind` are kept."""
        return kind in self.kinds

    def needles(self) -> tuple[bytes, ...] | None:
        """Byte strings one of which every wanted record contains, or `None` for all.

        Returns:
            The UTF-8 tags and prefixes (plus the hparams tag prefix when hparams
            are wanted), or `None` when no tag filter is set.
        """
        if self.tags is None and self.prefixes is None:
            return None
        found = {tag.encode("utf-8") for tag in self.tags or ()}
        found.update(prefix.encode("utf-8") for prefix in self.prefixes or ())
        if "hparams" in self.kinds:
            found.add(_HPARAMS_NEEDLE)
        # A needle contained in another one finds every record the longer one does.
        ordered = sorted(found, key=len)
        kept: list[bytes] = []
        for needle in ordered:
            if not any(short in needle for short in kept):
                kept.append(needle)
        return tuple(kept)
