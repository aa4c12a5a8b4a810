"""Keras layers by what they do to the values that pass them, listed once for every lint check.

`PASS_THROUGH_LAYERS` hand their input on as it is, at most dropped out,
noised or reshaped: the output head check reads an activation behind them
(`tfguard.lint._heads`), and the input check looks past them for the layer
that normalizes (`tfguard.lint._front`). `SCALE_PRESERVING_LAYERS` add the
layers that move, crop, pad or augment values without changing their scale
(and every `Random*` preprocessing layer, matched by name in `front`).

Example:

>>> "Dropout" in PASS_THROUGH_LAYERS, "Resizing" in PASS_THROUGH_LAYERS
(True, False)
>>> PASS_THROUGH_LAYERS < SCALE_PRESERVING_LAYERS
True
"""

from __future__ import annotations

PASS_THROUGH_LAYERS = frozenset(
    {
        "InputLayer",
        "Identity",
        "Dropout",
        "SpatialDropout1D",
        "SpatialDropout2D",
        "SpatialDropout3D",
        "GaussianNoise",
        "GaussianDropout",
        "AlphaDropout",
        "ActivityRegularization",
        "Flatten",
        "Reshape",
    }
)
"""Layer classes that pass values through: an activation before them is the output's activation."""

SCALE_PRESERVING_LAYERS = PASS_THROUGH_LAYERS | frozenset(
    {
        "Resizing",
        "CenterCrop",
        "RandAugment",
        "AugMix",
        "CutMix",
        "MixUp",
        "Equalization",
        "Solarization",
        "AutoContrast",
        "Permute",
        "Masking",
        "RepeatVector",
        "ZeroPadding1D",
        "ZeroPadding2D",
        "ZeroPadding3D",
        "Cropping1D",
        "Cropping2D",
        "Cropping3D",
    }
)
"""Layer classes that leave the scale of the values as it is: the input check looks past them."""

__all__ = ["PASS_THROUGH_LAYERS", "SCALE_PRESERVING_LAYERS"]
