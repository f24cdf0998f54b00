"""The Locust side of `fleetlab bench loadtest`: the sync requests fleetlab's virtual phones
make, from a Locust FastHttpUser. Each user registers a device, then syncs with the body a
phone with nothing to report sends. At the end it writes what it did and the CPU it used to
the file in FLEETLAB_BENCH_OUT (JSON), for the bench to compare per CPU-second."""
import itertools
import json
import os
import resource
import time

from locust import FastHttpUser, constant, events, task

KEY = os.environ["FLEETLAB_KEY_SYNC"]
THINK = float(os.environ.get("FLEETLAB_BENCH_THINK", "0.01"))
_ids = itertools.count()
_tally = {"requests": 0, "failures": 0, "started": None, "cpu_at_start": None}


def _cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@events.test_start.add_listener
def _start(environment, **kwargs):
    _tally["started"] = time.monotonic()
    _tally["cpu_at_start"] = _cpu_seconds()


@events.request.add_listener
def _count(request_type, name, response_time, response_length, exception, **kwargs):
    _tally["requests"] += 1
    if exception is not None:
        _tally["failures"] += 1


@events.quitting.add_listener
def _write(environment, **kwargs):
    out = os.environ.get("FLEETLAB_BENCH_OUT")
    if not out or _tally["started"] is None:
        return
    stats = environment.stats.total
    with open(out, "w") as f:
        json.dump({
            "requests": _tally["requests"],
            "failures": _tally["failures"],
            "wall_seconds": time.monotonic() - _tally["started"],
            "cpu_seconds": _cpu_seconds() - _tally["cpu_at_start"],
            "p50_ms": stats.get_response_time_percentile(0.5),
            "p99_ms": stats.get_response_time_percentile(0.99),
        }, f)


class SyncPhone(FastHttpUser):
    wait_time = constant(THINK)

    def on_start(self):
        self.device = "locust-%d-%d" % (os.getpid(), next(_ids))
        self.headers = {"x-api-key": KEY, "x-device-id": self.device, "content-type": "application/json"}
        self.client.post("/api/v1/mobile/devices/register", headers=self.headers,
                         json={"device_id": self.device, "platform": "android", "app_version": "locust"})
        self.body = json.dumps({"device_id": self.device, "status_updates": [], "approval_requests": [],
                                "step_delegations": [], "command_acks": []})

    @task
    def sync(self):
        self.client.post("/api/v1/mobile/sync", headers=self.headers, data=self.body)
