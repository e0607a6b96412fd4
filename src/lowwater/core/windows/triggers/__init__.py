"""The built-in triggers."""

from lowwater.core.windows.triggers.continuous import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
)
from lowwater.core.windows.triggers.count import CountTrigger
from lowwater.core.windows.triggers.event_time import EventTimeTrigger
from lowwater.core.windows.triggers.never import NeverTrigger
from lowwater.core.windows.triggers.processing_time import ProcessingTimeTrigger
from lowwater.core.windows.triggers.purging import PurgingTrigger

__all__ = [
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "CountTrigger",
    "EventTimeTrigger",
    "NeverTrigger",
    "ProcessingTimeTrigger",
    "PurgingTrigger",
]
