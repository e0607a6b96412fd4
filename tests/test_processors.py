"""The batch driver tells the paths apart by the processor protocol each one satisfies
(mypy checks the signatures; this checks the dispatch the driver makes at run time)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from lowwater.spark.general import GeneralProcessor
from lowwater.spark.keyed import KeyedProcessor
from lowwater.spark.native import NativeProcessor
from lowwater.spark.processor import JsonStateProcessor, PickledStateProcessor


@pytest.mark.parametrize("processor", [NativeProcessor, KeyedProcessor])
def test_the_native_and_keyed_paths_keep_their_control_plane_as_json(processor: type) -> None:
    assert issubclass(processor, JsonStateProcessor)
    assert not issubclass(processor, PickledStateProcessor)


def test_the_general_path_keeps_its_state_pickled() -> None:
    assert issubclass(GeneralProcessor, PickledStateProcessor)
    assert not issubclass(GeneralProcessor, JsonStateProcessor)
