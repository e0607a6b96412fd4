"""Watermarks: generators, strategies, the classic assigners and per-partition combining."""

from lowwater.core.watermarks.assigner import (
    FieldTimestampAssigner,
    IngestionTimeAssigner,
    RecordTimestampAssigner,
    TimestampAssigner,
    as_timestamp_assigner,
)
from lowwater.core.watermarks.bounded import (
    AscendingTimestampsWatermarks,
    BoundedOutOfOrdernessWatermarks,
)
from lowwater.core.watermarks.combined import CombinedWatermarkStatus, PartialWatermark
from lowwater.core.watermarks.event import WatermarkEvent, WatermarkEventKind
from lowwater.core.watermarks.generator import WatermarkGenerator
from lowwater.core.watermarks.idleness import IdlenessTimer, WatermarksWithIdleness
from lowwater.core.watermarks.legacy import (
    AscendingTimestampExtractor,
    AssignerWithPeriodicWatermarks,
    AssignerWithPunctuatedWatermarks,
    BoundedOutOfOrdernessTimestampExtractor,
    FailingHandler,
    IgnoringHandler,
    LoggingHandler,
    MonotonyViolationHandler,
    legacy_watermarks,
    monotony_violation_handler,
)
from lowwater.core.watermarks.multiplexer import WatermarkOutputMultiplexer
from lowwater.core.watermarks.no_watermarks import NoWatermarksGenerator
from lowwater.core.watermarks.punctuated import PunctuatedWatermarks
from lowwater.core.watermarks.recording import RecordingOutput
from lowwater.core.watermarks.strategy import (
    PartitionWatermarking,
    WatermarkGeneratorContext,
    WatermarkStrategy,
)
from lowwater.core.watermarks.time_lag import TimeLagWatermarkGenerator
from lowwater.core.watermarks.valve import StatusWatermarkValve
from lowwater.core.watermarks.watermark import Watermark, WatermarkOutput

__all__ = [
    "AscendingTimestampExtractor",
    "AscendingTimestampsWatermarks",
    "AssignerWithPeriodicWatermarks",
    "AssignerWithPunctuatedWatermarks",
    "BoundedOutOfOrdernessTimestampExtractor",
    "BoundedOutOfOrdernessWatermarks",
    "CombinedWatermarkStatus",
    "FailingHandler",
    "FieldTimestampAssigner",
    "IdlenessTimer",
    "IgnoringHandler",
    "IngestionTimeAssigner",
    "LoggingHandler",
    "MonotonyViolationHandler",
    "NoWatermarksGenerator",
    "PartialWatermark",
    "PartitionWatermarking",
    "PunctuatedWatermarks",
    "RecordTimestampAssigner",
    "RecordingOutput",
    "StatusWatermarkValve",
    "TimeLagWatermarkGenerator",
    "TimestampAssigner",
    "Watermark",
    "WatermarkEvent",
    "WatermarkEventKind",
    "WatermarkGenerator",
    "WatermarkGeneratorContext",
    "WatermarkOutput",
    "WatermarkOutputMultiplexer",
    "WatermarkStrategy",
    "WatermarksWithIdleness",
    "as_timestamp_assigner",
    "legacy_watermarks",
    "monotony_violation_handler",
]
