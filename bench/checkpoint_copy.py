"""What carrying a checkpoint between nodes costs: storing a stopped attempt's checkpoint
directory (tar into Django's storage) and putting it in place on the next node (unpack),
against copying the same directory file by file on the same disk (`shutil.copytree`, what
the least a copy costs there), measured in the same run.

    python bench/checkpoint_copy.py [--mib 64,512,2048] [--files 8] [--rounds 4]

Storage is Django's file system storage under a scratch directory on the same disk, so the
figures are the packing's own cost; object storage adds its network's. Each measure runs
until its writes are on disk (sync), and the plain copy goes first in every other round.
A victim's preemptor does not wait for the store (the victim frees its GPUs first,
docs/nodes.md "Checkpoints"), but its lease and the job's next attempt do; the resumed
attempt waits for the unpack. A copy made while the binary runs starts by hard-linking the
directory's files as the binary announces the checkpoint, in the thread that reads its
output (`link`, the product's own call): what the announcement costs the node. Prints each
size's medians and the ratios to the plain copy.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpusched.settings")
SCRATCH = Path(tempfile.mkdtemp(prefix="checkpoint-bench-", dir=os.environ.get("TMPDIR")))
os.environ["GPUSCHED_MEDIA_ROOT"] = str(SCRATCH / "media")

import django  # noqa: E402

django.setup()

from workers.agent.checkpoint_copies import RunningCopies  # noqa: E402
from workers.services.checkpoints import checkpoint_pack, checkpoint_unpack  # noqa: E402

BLOCK = os.urandom(1 << 20)  # tar does not compress: the bytes' content does not matter


def write_checkpoint(directory: Path, mib: int, files: int) -> None:
    directory.mkdir(parents=True)
    for i in range(files):
        with (directory / f"shard-{i}.bin").open("wb") as fh:
            for _ in range(mib // files):
                fh.write(BLOCK)


def timed(work) -> float:
    """Seconds until the work's writes are on disk: the page cache would otherwise hide them
    in one measure and charge them to the next."""
    os.sync()
    started = time.perf_counter()
    work()
    os.sync()
    return time.perf_counter() - started


def one_round(mib: int, files: int, n: int) -> tuple[float, float, float, float]:
    source = SCRATCH / f"node-a-{n}" / "checkpoint"
    write_checkpoint(source, mib, files)
    names: list[str] = []
    copy_first = n % 2  # alternate, so neither measure always follows the other
    if copy_first:
        copy = timed(lambda: shutil.copytree(source, SCRATCH / f"node-c-{n}" / "checkpoint"))
    store = timed(lambda: names.append(checkpoint_pack(1, n, 0, source)))
    running = RunningCopies(1, n, 0, source, every_s=0, gang=False)
    link = timed(lambda: running.announce(1))
    running.close()  # drops the linked files unread
    resume = timed(lambda: checkpoint_unpack(names[0], SCRATCH / f"node-b-{n}" / "checkpoint"))
    if not copy_first:
        copy = timed(lambda: shutil.copytree(source, SCRATCH / f"node-c-{n}" / "checkpoint"))
    for node in "abc":
        shutil.rmtree(SCRATCH / f"node-{node}-{n}")
    shutil.rmtree(SCRATCH / "media")
    return store, resume, copy, link


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", default="64,512,2048", help="checkpoint sizes in MiB")
    parser.add_argument("--files", type=int, default=8, help="files a checkpoint has")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    print(f"scratch {SCRATCH}; {args.files} files a checkpoint; medians of {args.rounds}")
    print(f"{'MiB':>6} {'store s':>8} {'MB/s':>7} {'resume s':>9} {'MB/s':>7} "
          f"{'copy s':>7} {'store/copy':>10} {'resume/copy':>11} {'link ms':>8}")
    try:
        for mib in (int(m) for m in args.mib.split(",")):
            rounds = [one_round(mib, args.files, n) for n in range(args.rounds)]
            store, resume, copy, link = (statistics.median(r[i] for r in rounds)
                                         for i in range(4))
            mb = mib * 1.048576
            print(f"{mib:>6} {store:>8.2f} {mb / store:>7.0f} {resume:>9.2f} {mb / resume:>7.0f} "
                  f"{copy:>7.2f} {store / copy:>10.2f} {resume / copy:>11.2f} "
                  f"{link * 1000:>8.1f}")
    finally:
        shutil.rmtree(SCRATCH, ignore_errors=True)


if __name__ == "__main__":
    main()
