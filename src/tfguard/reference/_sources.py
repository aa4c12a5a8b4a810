"""The registry of data sources: which loader a data spec names.

A spec is a source name, alone (`"digits"`, `"fashion_mnist"`) or followed
by `:PATH` for a source read from a file or folder (`"npz:data/x.npz"`,
`"dir:images/"`). `SOURCES` lists each source once, with its loader (one
module per source under `tfguard.reference._loaders`) and the `load_data`
options it takes; `find_source` parses a spec and `load_spec` loads it. A
new source is one more loader module and one more `Source` here.

Example:

>>> SPECS
('digits', 'fashion_mnist', 'npz:PATH', 'dir:PATH')
>>> source, path = find_source("npz:data/x.npz")
>>> source.name, path, source.load.__name__
('npz', 'data/x.npz', 'load_npz')
>>> find_source("fashion-mnist")[0].name
'fashion_mnist'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tfguard._errors import DataError
from tfguard.reference._dataset import LoadedData
from tfguard.reference._loaders import load_digits, load_fashion_mnist, load_image_dir, load_npz

__all__ = ["SOURCES", "SPECS", "Source", "find_source", "load_spec"]


@dataclass(frozen=True)
class Source:
    """One kind of data spec and the loader that reads it.

    Args:
        name: the spec's name, e.g. `"npz"`.
        load: the loader; called with the spec's path first when
            `takes_path`, and with the `options` it takes as keywords.
        takes_path: whether the spec is `name:PATH`.
        options: the `load_data` keyword options the loader takes, e.g.
            `("image_size", "color_mode")`. Defaults to `()`.
        aliases: other names accepted for `name`. Defaults to `()`.
    """

    name: str
    load: Callable[..., LoadedData]
    takes_path: bool
    options: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()

    @property
    def usage(self) -> str:
        """How the spec is written: `name`, or `name:PATH`."""
        return f"{self.name}:PATH" if self.takes_path else self.name


SOURCES = (
    Source("digits", load_digits, takes_path=False),
    Source("fashion_mnist", load_fashion_mnist, takes_path=False, aliases=("fashion-mnist",)),
    Source("npz", load_npz, takes_path=True),
    Source("dir", load_image_dir, takes_path=True, options=("image_size", "color_mode")),
)
SPECS = tuple(source.usage for source in SOURCES)
_BY_NAME = {name: source for source in SOURCES for name in (source.name, *source.aliases)}


def _invalid(spec: object) -> DataError:
    return DataError(
        f"Received an invalid value for `data`, expected one of {', '.join(SPECS)}. "
        f"Received: data={spec!r}",
        hint="use 'digits' offline, or 'npz:path/to/file.npz' for your own arrays.",
    )


def find_source(spec: str) -> tuple[Source, str | None]:
    """Return the source a spec names and its path.

    Args:
        spec: a data spec, e.g. `"digits"` or `"npz:PATH"`.

    Returns:
        `(source, path)`; `path` is `None` for a source without one.

    Raises:
        DataError: the spec is not a string, names no source, lacks the
            path its source needs, or has one its source does not take.
    """
    if not isinstance(spec, str) or not spec:
        raise _invalid(spec)
    name, _, path = spec.partition(":")
    source = _BY_NAME.get(name)
    if source is None or source.takes_path != bool(path):
        raise _invalid(spec)
    return source, path or None


def load_spec(spec: str, **options) -> LoadedData:
    """Load the data a spec names, with the options its loader takes.

    Example:

    >>> load_spec("digits", image_size=(8, 8)).info.input_shape  # digits take no options
    (28, 28, 1)

    Args:
        spec: a data spec, see `find_source`.
        **options: `load_data`'s loader options (`image_size`, `color_mode`);
            each source gets those it takes and ignores the others.

    Returns:
        The `LoadedData` of the whole source (no limit applied).

    Raises:
        DataError: the spec is invalid, or its data is missing or malformed.
    """
    source, path = find_source(spec)
    kwargs = {key: options[key] for key in source.options if key in options}
    return source.load(path, **kwargs) if source.takes_path else source.load(**kwargs)
