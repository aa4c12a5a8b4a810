"""What to read: validation of tags, prefixes and kinds, and the byte pre-filter."""

from __future__ import annotations

import pytest

from tfguard._errors import ContractError
from tfguard.events._selection import Selection


def test_tags_and_prefixes_are_a_union():
    sel = Selection.build(tags=["a/x"], prefixes=["b/"])
    assert [sel.wants(t) for t in ("a/x", "a/y", "b/z", "c")] == [True, False, True, False]
    assert Selection.build().wants("anything")
    assert not Selection.build(tags=[]).wants("a")


def test_single_strings_are_one_name():
    sel = Selection.build(tags="loss", prefixes="grad_norm/", kinds="scalars")
    assert sel.tags == frozenset({"loss"}) and sel.prefixes == ("grad_norm/",)
    assert sel.kinds == frozenset({"scalars"})


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kinds": ("scalar",)}, "Received: kinds=\\('scalar',\\)"),
        ({"kinds": None}, "kinds"),
        ({"tags": 3}, "Received: tags=3"),
        ({"prefixes": [b"x"]}, "strings only"),
    ],
)
def test_malformed_options_raise_contract_error(kwargs, match):
    with pytest.raises(ContractError, match=match):
        Selection.build(**kwargs)


def test_needles_are_the_shortest_covering_byte_strings():
    assert Selection.build().needles() is None
    sel = Selection.build(tags=["grad_norm/a"], prefixes=["grad_norm/"], kinds=("scalars",))
    assert sel.needles() == (b"grad_norm/",)
    with_hparams = Selection.build(tags=["loss"])
    assert set(with_hparams.needles()) == {b"loss", b"_hparams_/"}
