"""Run one GPU node: register it and its GPUs, then consume its own queue."""

from __future__ import annotations

import logging
import socket
import threading

from celery.signals import worker_ready, worker_shutting_down
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections, connections

from gpusched.celery import app
from workers.agent.discovery import (
    READ_TIMEOUT_S,
    DiscoveryError,
    configured_gpus,
    discover_nvml,
)
from workers.agent.gpu_reader import GpuReader
from workers.agent.gpu_watch import GpuWatch
from workers.queues import node_queue
from workers.services.checkpoints import work_root_sweep
from workers.services.fleet import node_worker_stopping
from workers.services.nodes import node_gpu_health, node_heartbeat, node_register

log = logging.getLogger(__name__)
WORK_SWEEP_S = 300.0  # how often a node removes what jobs that ended left in its work root


class Command(BaseCommand):
    help = "Register a GPU node and run its Celery worker (concurrency = GPUs, prefetch 1)."

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True)
        parser.add_argument("--gpus", type=int, help="GPU count when NVML is not used")
        parser.add_argument("--gpu-type", help="the type jobs ask for (default: from NVML's "
                            "product name with --nvml, else H100)")
        parser.add_argument("--gpu-memory-mb", type=int, default=81920)
        parser.add_argument("--region", default="")
        parser.add_argument("--island", default="", help="rack / NVLink or InfiniBand domain: "
                            "a gang larger than a node spans nodes of one island")
        parser.add_argument("--address", default=socket.getfqdn(),
                            help="host name or IP the other nodes of a gang reach this one at "
                            "(default: this host's name)")
        parser.add_argument("--nvml", action="store_true", help="discover GPUs with NVML")
        parser.add_argument("--loglevel", default="INFO")

    def _gpus(self, opts) -> tuple[str, list]:
        if opts["nvml"]:
            try:
                found = discover_nvml()
            except DiscoveryError as exc:
                raise CommandError(str(exc)) from exc
            if not found:
                raise CommandError("--nvml given but NVML found no GPU")
            return opts["gpu_type"] or found[0], found[1]
        if not opts["gpus"] or opts["gpus"] < 1:
            raise CommandError("--gpus N (N >= 1) is required without --nvml")
        return opts["gpu_type"] or "H100", configured_gpus(opts["name"], opts["gpus"],
                                                           opts["gpu_memory_mb"])

    def handle(self, *args, **opts):
        name = opts["name"]
        gpu_type, gpus = self._gpus(opts)

        def register(**_) -> None:
            # Only once the worker consumes its queue: the scheduler places work on a node as
            # soon as it is registered, and an attempt sent to a worker still booting (seconds
            # on a loaded machine) could outwait its lease and be retried for nothing.
            watch = _gpu_watch([g.uuid for g in gpus]) if opts["nvml"] else None
            node_register(name=name, gpu_type=gpu_type, gpus=gpus, region=opts["region"],
                          island=opts["island"], address=opts["address"],
                          reading=watch.report() if watch else None)
            self.stdout.write(f"node {name}: {len(gpus)} × {gpu_type}, "
                              f"queue {node_queue(name)}")
            if watch:
                watch.start()
            threading.Thread(target=_heartbeat_loop, args=(name, watch), daemon=True).start()
            threading.Thread(target=_work_sweep_loop, daemon=True).start()
            connections.close_all()  # a child forked later must not inherit this connection

        def stopping(how: str = "", **_) -> None:
            # a warm shutdown waits for the running tasks: ask their jobs to checkpoint and
            # stop now (in a thread: this runs in the worker's signal handler)
            if how == "Warm":
                threading.Thread(target=_evacuate_on_stop, args=(name,)).start()

        worker_ready.connect(register, weak=False)
        worker_shutting_down.connect(stopping, weak=False)
        connections.close_all()  # never share a DB connection with the forked pool
        app.worker_main(argv=[
            "worker", f"--hostname={name}@%h", f"--queues={node_queue(name)}",
            f"--concurrency={len(gpus)}", "--prefetch-multiplier=1", "--pool=prefork",
            f"--loglevel={opts['loglevel']}", "--without-gossip", "--without-mingle",
        ])


def _gpu_watch(uuids: list[str]) -> GpuWatch:
    """A watch over the GPUs, read once already (not yet started)."""
    beat = settings.GPUSCHED_HEARTBEAT_SECONDS
    # readings in a process of its own, replaced when late; one missing for ten beats
    # (a process stuck in the driver cannot even be killed) marks every GPU
    read = GpuReader(timeout_s=READ_TIMEOUT_S)
    watch = GpuWatch(uuids, read, every_s=beat, stale_after_s=max(3 * READ_TIMEOUT_S, 10 * beat))
    watch.read_once()
    return watch


def _heartbeat_loop(name: str, watch: GpuWatch | None) -> None:
    """Beat, and pass on what the GPU watch last read (on a node that found its GPUs with
    NVML); the watch reads in a thread of its own, so a hung driver call never stops a beat."""
    stop = threading.Event()
    while True:
        close_old_connections()
        try:
            node_heartbeat(name=name)
            report = watch.report() if watch else None
            if report is not None:
                node_gpu_health(name=name, problems=report.problems, busy=report.busy)
        except Exception:  # a database blip must not kill the node; the next beat retries
            log.warning("heartbeat of %s failed", name, exc_info=True)
            connections.close_all()
        if stop.wait(settings.GPUSCHED_HEARTBEAT_SECONDS):
            return


def _evacuate_on_stop(name: str) -> None:
    try:
        asked = node_worker_stopping(name)
        log.info("node %s stopping: %d running jobs asked to checkpoint and stop", name, asked)
    except Exception:  # the jobs then end with the node: lost, and retried
        log.warning("draining %s as it stops failed", name, exc_info=True)
    finally:
        connections.close_all()


def _work_sweep_loop() -> None:
    """From the start, every WORK_SWEEP_S: remove the directories of jobs that ended from the
    work root (a thread of its own: removing a large checkpoint must not delay a beat)."""
    stop = threading.Event()
    while True:
        close_old_connections()
        try:
            work_root_sweep(settings.GPUSCHED_WORK_ROOT)
        except Exception:  # the next round retries
            log.warning("sweeping %s failed", settings.GPUSCHED_WORK_ROOT, exc_info=True)
            connections.close_all()
        if stop.wait(WORK_SWEEP_S):
            return
