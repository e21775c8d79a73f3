"""An admission check that lets big workloads start only in business hours (Mon-Fri, 09:00-17:00 UTC)."""

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from kadmit.checks import AdmissionCheckPlugin, CheckContext, Pending, Ready, Verdict, plugin_settings


class BusinessHoursCheck(AdmissionCheckPlugin[None]):
    controller_name = "example.com/business-hours"

    def __init__(self, small_pod_count: int = 4) -> None:
        self.small_pod_count = small_pod_count  # workloads this small may run at any time

    @classmethod
    def from_configuration(
        cls, configuration: Mapping[str, Any], registry: Any = None
    ) -> "BusinessHoursCheck":
        # admissionChecks.settings.business-hours.smallPodCount in kadmit's configuration file
        count = plugin_settings(configuration, "business-hours").get("smallPodCount", 4)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"admissionChecks.settings.business-hours.smallPodCount: not a count: {count!r}")
        return cls(count)

    async def evaluate(self, workload: dict[str, Any], context: CheckContext[None]) -> Verdict:
        pods = sum(ps.get("count", 1) for ps in workload["spec"]["podSets"])
        if pods <= self.small_pod_count:
            return Ready(f"{pods} pods: small enough for any time")
        if context.now.weekday() < 5 and 9 <= context.now.hour < 17:
            return Ready("within business hours")
        opening = next_opening(context.now)
        return Pending(
            f"{pods} pods wait for business hours, from {opening:%a %H:%M} UTC",
            recheck_after=(opening - context.now).total_seconds(),
        )


def next_opening(now: datetime) -> datetime:
    day = now.replace(hour=9, minute=0, second=0, microsecond=0)
    if now >= day:
        day += timedelta(days=1)
    while day.weekday() >= 5:
        day += timedelta(days=1)
    return day
