"""Phases 1-2 of an epoch: requirements (shapes, candidates) and the model as arrays.

`build_model(snapshot) -> EpochModel`; `EpochModel.lm` is the matrix form every backend in
optalloc.solve receives. The math is documented in models/formulation.md.
"""

from optalloc.model.build import DEFINES, EpochModel, build_model
from optalloc.model.matrix import LinearModel, ModelBuilder

__all__ = ["DEFINES", "EpochModel", "LinearModel", "ModelBuilder", "build_model"]
