"""`gpusched`: the API from a shell. Answers are printed as JSON; a refusal goes to stderr as
`error: <status> <code>: <message>` with exit status 2. `wait` and `submit --wait` exit 0
when the job (every job named) succeeded, 1 when one ended otherwise, 3 when one had not
ended by `--timeout`.

    export GPUSCHED_URL=https://gpusched.example GPUSCHED_API_KEY=gs_…
    gpusched submit "a red fox in the snow" --gpus 2 --param expected_duration_s=90 --wait
    gpusched list --state QUEUED --label campaign:winter
    gpusched cancel --label campaign:winter
    gpusched erase --label user:u-1234 --yes
    gpusched output 42 fox.mp4
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from gpusched_client.client import Client
from gpusched_client.errors import ApiError, Json, PartlySubmitted, Unreachable, WaitTimeout


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        client = Client(args.url, args.key)
        return args.run(client, args)
    except WaitTimeout as exc:
        _print(exc.job if len(exc.waiting) == 1 else exc.waiting)
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except (ApiError, Unreachable, ValueError) as exc:  # a refusal, no answer, a bad argument
        unreachable = "unreachable: " if isinstance(exc, Unreachable) else ""
        print(f"error: {unreachable}{exc}", file=sys.stderr)
        return 2


def _submit(client: Client, args: argparse.Namespace) -> int:
    fields = _given(min_gpus=args.min_gpus, gpu_types=args.gpu_type, project=args.project,
                    time_limit_s=args.time_limit, labels=_labels(args.label),
                    after=args.after, params=_params(args.param),
                    after_mode="ended" if args.after_end else None)
    job = client.submit(args.prompt, gpus=args.gpus, idempotency_key=args.idempotency_key,
                        dry_run=args.dry_run, **fields)
    if not args.wait or args.dry_run:
        _print(job)
        return 0
    return _ended(client.wait(job["id"], timeout=args.timeout))


def _batch(client: Client, args: argparse.Namespace) -> int:
    jobs = [json.loads(line) for line in args.file if line.strip()]
    try:
        _print(client.submit_many(jobs, idempotency_key=args.idempotency_key))
    except PartlySubmitted as exc:
        _print(exc.made)  # what was made before the refusal: a retry with the key skips it
        raise
    return 0


def _act(client: Client, args: argparse.Namespace) -> int:
    labels = getattr(args, "label", None)
    if labels and args.job is not None or not labels and args.job is None:
        raise ValueError("name a job, or its labels with --label KEY:VALUE, not both")
    if args.act == "erase" and not args.yes:
        raise ValueError("an erasure is for good: say --yes")
    if not labels:
        _print(getattr(client, args.act)(args.job))
        return 0
    answer = getattr(client, f"{args.act}_labelled")(labels)
    _print(answer)
    refused = answer.get("refused")
    if refused:  # the rest stay held: the credits or a budget no longer cover them
        print(f"error: 402 {refused['code']}: {refused['message']}", file=sys.stderr)
        return 2
    return 0


def _amend(client: Client, args: argparse.Namespace) -> int:
    changes = _given(gpus=args.gpus, min_gpus=args.min_gpus, gpu_types=args.gpu_type,
                     time_limit_s=args.time_limit, urgency_s=args.urgency)
    if not changes:
        raise ValueError("name at least one change")
    _print(client.amend(args.job, **changes))
    return 0


def _relax(client: Client, args: argparse.Namespace) -> int:
    job = client.relax(args.job)
    if job is None:
        print(f"error: job {args.job} is offered no relaxation now", file=sys.stderr)
        return 1
    _print(job)
    return 0


def _settle(client: Client, args: argparse.Namespace) -> int:
    """make-project, set-project, set-member: the settings given (`none` clears a cap or a
    budget)."""
    settings = _settings(weight=args.weight, running_gpu_cap=args.cap,
                         monthly_limit=args.budget)
    if not settings and args.settle != "make_project":
        raise ValueError("name at least one setting")
    _print(getattr(client, args.settle)(args.name, **settings))
    return 0


def _set_organization(client: Client, args: argparse.Namespace) -> int:
    settings = _settings(monthly_limit=args.budget, low_credits_threshold=args.low_credits,
                         erase_after_hours=args.erase_after_hours)
    if not settings:
        raise ValueError("name at least one setting")
    _print(client.set_organization(**settings))
    return 0


def _remove_member(client: Client, args: argparse.Namespace) -> int:
    _print(client.remove_member(args.name))
    return 0


def _read(client: Client, args: argparse.Namespace) -> int:
    answer = getattr(client, args.read)()
    _print(answer if isinstance(answer, dict | list) else list(answer))  # keys: pages
    return 0


def _wait(client: Client, args: argparse.Namespace) -> int:
    if len(args.job) == 1:
        return _ended(client.wait(args.job[0], timeout=args.timeout))
    jobs = client.wait_all(args.job, timeout=args.timeout)
    _print(jobs)
    return 0 if all(job["state"] == "SUCCEEDED" for job in jobs) else 1


def _output(client: Client, args: argparse.Namespace) -> int:
    print(client.output(args.job, args.path))
    return 0


def _log(client: Client, args: argparse.Namespace) -> int:
    sys.stdout.write(client.log(args.job, stream="stderr" if args.stderr else "stdout",
                                tail=args.tail, attempt=args.attempt))
    return 0


NONE = "none"


def _settings(**options: object) -> Json:
    """The settings given, `none` as null: no cap, no budget, no retention."""
    return {name: None if value == NONE else value for name, value in _given(**options).items()}


def _whole_or_none(text: str) -> int | str:
    """A cap or a budget: a whole number, or `none` for no cap, no budget."""
    return NONE if text.lower() == NONE else int(text)


def _ended(job: Json) -> int:
    _print(job)
    return 0 if job["state"] == "SUCCEEDED" else 1


def _given(**options: object) -> Json:
    """The options the command line gave (an option left out is None)."""
    return {name: value for name, value in options.items() if value is not None}


def _labels(pairs: Sequence[str] | None) -> Json | None:
    """`key:value` pairs, as `list --label` finds them again."""
    if not pairs:
        return None
    labels = dict(pair.partition(":")[::2] for pair in pairs)
    if any(not key for key in labels):
        raise ValueError("--label takes key:value")
    return labels


def _params(pairs: Sequence[str] | None) -> Json | None:
    """`key=value` pairs; a value that reads as JSON is that (90, true, [1, 2]), else text."""
    if not pairs:
        return None
    params = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--param takes key=value, not {pair!r}")
        try:
            params[key] = json.loads(value)
        except ValueError:
            params[key] = value
    return params


def _print(answer) -> None:
    print(json.dumps(answer, indent=2, ensure_ascii=False))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpusched", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="the service (default: $GPUSCHED_URL)")
    parser.add_argument("--key", help="an API key (default: $GPUSCHED_API_KEY)")
    commands = parser.add_subparsers(required=True, metavar="command")

    submit = commands.add_parser("submit", help="submit a job")
    submit.add_argument("prompt")
    submit.add_argument("--gpus", type=int, default=1)
    submit.add_argument("--min-gpus", type=int)
    submit.add_argument("--gpu-type", action="append", help="in order of preference")
    submit.add_argument("--project")
    submit.add_argument("--time-limit", type=int, metavar="SECONDS")
    submit.add_argument("--label", action="append", metavar="KEY:VALUE")
    submit.add_argument("--after", type=int, action="append", metavar="JOB")
    submit.add_argument("--after-end", action="store_true",
                        help="run once the --after jobs end, however they end")
    submit.add_argument("--param", action="append", metavar="KEY=VALUE")
    submit.add_argument("--idempotency-key", help="the same key gets the same job")
    submit.add_argument("--dry-run", action="store_true", help="what it would do; keep nothing")
    submit.add_argument("--wait", action="store_true", help="until it ends")
    submit.add_argument("--timeout", type=float, metavar="SECONDS", help="of --wait")
    submit.set_defaults(run=_submit)

    batch = commands.add_parser("batch", help="submit the jobs of a file, 100 a request")
    batch.add_argument("file", type=argparse.FileType("r"),
                       help="JSON lines, each a job as POST /api/v1/jobs takes it (- : stdin)")
    batch.add_argument("--idempotency-key", help="the same key again makes only what is missing")
    batch.set_defaults(run=_batch)

    act = commands.add_parser("show", help="show a job")
    act.add_argument("job", type=int)
    act.set_defaults(run=_act, act="job")
    for name, what in (("cancel", "cancel a job, or every job with --label"),
                       ("hold", "hold a job, or every job with --label"),
                       ("release", "release a held job, or every job with --label"),
                       ("erase", "erase an ended job's prompt, output and logs for good, or "
                                 "every ended job's with --label (with --yes)")):
        act = commands.add_parser(name, help=what)
        act.add_argument("job", type=int, nargs="?")
        act.add_argument("--label", action="append", metavar="KEY:VALUE",
                         help="instead of a job, those that carry each label")
        act.set_defaults(run=_act, act=name)
    act.add_argument("--yes", action="store_true", help="erase: nothing brings it back")

    amend = commands.add_parser("amend", help="change what a waiting job asks for")
    amend.add_argument("job", type=int)
    amend.add_argument("--gpus", type=int)
    amend.add_argument("--min-gpus", type=int)
    amend.add_argument("--gpu-type", action="append", help="in order of preference")
    amend.add_argument("--time-limit", type=int, metavar="SECONDS",
                       help="alone, shortens a running job's too")
    amend.add_argument("--urgency", type=int, metavar="SECONDS")
    amend.set_defaults(run=_amend)

    relax = commands.add_parser("relax", help="take the what-if a waiting job is offered")
    relax.add_argument("job", type=int)
    relax.set_defaults(run=_relax)

    wait = commands.add_parser("wait", help="until a job ends, or every job named")
    wait.add_argument("job", type=int, nargs="+")
    wait.add_argument("--timeout", type=float, metavar="SECONDS")
    wait.set_defaults(run=_wait)

    listing = commands.add_parser("list", help="jobs, newest first")
    listing.add_argument("--state")
    listing.add_argument("--project")
    listing.add_argument("--label", action="append", default=[], metavar="KEY:VALUE")
    listing.add_argument("--limit", type=int, default=100, help="at most this many")
    listing.set_defaults(run=_list)

    summary = commands.add_parser("summary", help="jobs by state, GPU-hours and credits")
    summary.add_argument("--project")
    summary.add_argument("--label", action="append", default=[], metavar="KEY:VALUE")
    summary.set_defaults(run=_summary)

    history = commands.add_parser("history", help="a job's moves and changes, newest first")
    history.add_argument("job", type=int)
    history.set_defaults(run=_history)

    usage = commands.add_parser("usage", help="a month's credits and GPU-hours, by project "
                                              "and GPU type")
    usage.add_argument("--month", metavar="YYYY-MM", help="this month by default")
    usage.add_argument("--label", action="append", default=[], metavar="KEY:VALUE")
    usage.set_defaults(run=_usage)

    for name, what in (("queue", "your waiting jobs, first in line first"),
                       ("credits", "credits available and held, budgets, transfers"),
                       ("projects", "projects: weights, caps, GPUs held, budgets"),
                       ("members", "members: roles, weights, caps, GPUs held, budgets"),
                       ("organization", "tier, limits and use, dedicated nodes, settings"),
                       ("gpu_types", "GPU types you may ask for: GPUs, dedicated, prices")):
        commands.add_parser(name.replace("_", "-"), help=what).set_defaults(run=_read,
                                                                           read=name)
    commands.add_parser("keys", help="API keys: scope, user, last use, expiry, live or not"
                        ).set_defaults(run=_read, read="api_keys")
    commands.add_parser("audit", help="what people and operators changed, newest first"
                        ).set_defaults(run=_read, read="audit_trail")

    for name, what in (("make-project", "make a project"), ("set-project", "set a project"),
                       ("set-member", "set a member's share, cap and budget")):
        settle = commands.add_parser(name, help=what)
        settle.add_argument("name", help="the project's name, or the member's username")
        settle.add_argument("--weight", type=float, help="share against the others'")
        settle.add_argument("--cap", type=_whole_or_none, metavar="GPUS|none",
                            help="GPUs its jobs may hold at once")
        settle.add_argument("--budget", type=_whole_or_none, metavar="CREDITS|none",
                            help="credits a month")
        settle.set_defaults(run=_settle, settle=name.replace("-", "_"))
    org = commands.add_parser("set-organization", help="set the organization's budget, "
                                                       "low-credits notice and retention")
    org.add_argument("--budget", type=_whole_or_none, metavar="CREDITS|none",
                     help="credits its jobs may commit a month")
    org.add_argument("--low-credits", type=int, metavar="CREDITS",
                     help="tell the webhooks credits.low below this (0: never)")
    org.add_argument("--erase-after-hours", type=_whole_or_none, metavar="HOURS|none",
                     help="erase each ended job's prompt, output and logs this long after")
    org.set_defaults(run=_set_organization)
    remove = commands.add_parser("remove-member", help="take out a member who left")
    remove.add_argument("name", help="their username")
    remove.set_defaults(run=_remove_member)

    output = commands.add_parser("output", help="save a job's output file")
    output.add_argument("job", type=int)
    output.add_argument("path")
    output.set_defaults(run=_output)

    log = commands.add_parser("log", help="what a job's binary printed")
    log.add_argument("job", type=int)
    log.add_argument("--stderr", action="store_true")
    log.add_argument("--tail", type=int, metavar="BYTES")
    log.add_argument("--attempt", type=int)
    log.set_defaults(run=_log)
    return parser


def _history(client: Client, args: argparse.Namespace) -> int:
    _print(list(client.history(args.job)))
    return 0


def _usage(client: Client, args: argparse.Namespace) -> int:
    _print(client.usage(month=args.month, labels=args.label))
    return 0


def _summary(client: Client, args: argparse.Namespace) -> int:
    _print(client.summary(project=args.project, labels=args.label))
    return 0


def _list(client: Client, args: argparse.Namespace) -> int:
    jobs = client.jobs(state=args.state, project=args.project, labels=args.label,
                       limit=min(args.limit, 500))
    _print([job for job, _ in zip(jobs, range(args.limit), strict=False)])
    return 0
