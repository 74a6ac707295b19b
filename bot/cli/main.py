"""``spark``: the one command line. Subcommands build ``Settings`` here, at the edge, and pass it on."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence

from bot.metrics_dir import ensure_multiprocess_dir
from bot.ports import ListenError
from bot.redis_server import EmbeddedRedisError, RedisUnavailable
from bot.settings import Settings, SettingsError

# name -> (dotted "module:function", help). Implementations are imported only when their command runs,
# so `spark serve` never imports worker code.
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("bot.cli.serve:run", "run the webhook receiver (granian serving the Flask app)"),
    "worker": ("workers.runtime:run", "run a long-lived worker (interactive queue first, then reviews)"),
    "demo": ("sandbox.demo:run", "run a scenario end to end against the local GitHub and model sandbox"),
    "sandbox": (
        "sandbox.serve:run",
        "a playground: Spark on a local GitHub, to comment as any user in a browser (or `comment`)",
    ),
    "doctor": (
        "bot.cli.doctor:run",
        "check settings, keys, Redis, GitHub and the model, and say what to fix",
    ),
    "redeliver": ("bot.cli.redeliver:run", "redeliver the App's failed webhook deliveries"),
    "queues": ("bot.cli.queues:run", "show the queues' depth and the workers, on the Redis every role uses"),
    "review": ("workers.oneshot:run", "review or fix one pull request from the command line"),
}


# Commands served by the sandbox, an install extra: without it (or graphql-core) they say how to install it.
SANDBOX_COMMANDS = frozenset({"demo", "sandbox"})
SANDBOX_MODULES = frozenset({"sandbox", "graphql", "cmarkgfm", "nh3"})
SANDBOX_INSTALL = "pip install 'spark-bot[sandbox]'"


def default_web_workers() -> int:
    """Return the default number of web processes: one per core this process may use."""
    # The cores this process may run on (a container's cpuset), never more than the host's: granian warns when
    # the workers outnumber the host's cores, and a default must not start with a warning.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, os.cpu_count() or cores))


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser for every subcommand."""
    parser = argparse.ArgumentParser(
        prog="spark", description="Spark: pull-request reviews and fixes in a second."
    )
    parser.add_argument(
        "--env-file", default=".env", help="dotenv file to read settings from (default: .env)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parsers = {
        name: sub.add_parser(name, help=help_, description=help_) for name, (_, help_) in COMMANDS.items()
    }

    serve = parsers["serve"]
    serve.add_argument(
        "--bind", default="127.0.0.1:3000", help="address:port to listen on (default: %(default)s)"
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=default_web_workers(),
        help="web worker processes (default: one per CPU core, here %(default)s)",
    )
    serve.add_argument(
        "--threads",
        type=int,
        default=1,
        help="Python threads per web worker (default: %(default)s; more overlap slow clients, at a CPU cost)",
    )

    worker = parsers["worker"]
    worker.add_argument(
        "--processes", type=int, default=1, help="worker processes to run (default: %(default)s)"
    )
    worker.add_argument("--burst", action="store_true", help="exit when the queues are empty")
    worker.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics of all worker processes on 0.0.0.0:PORT (default: not served)",
    )

    demo = parsers["demo"]
    demo.add_argument(
        "--scenario",
        default=None,
        metavar="NAME_OR_FILE",
        help="a bundled scenario's name (see --list) or a scenario YAML file (default: python-bug-fix)",
    )
    demo.add_argument(
        "--json", dest="json_out", default=None, metavar="OUT", help="also write results as JSON"
    )
    demo.add_argument(
        "--live-model", action="store_true", help="serve model calls from the real Cerebras API"
    )
    demo.add_argument("--list", action="store_true", help="list the bundled scenarios and exit")

    sandbox = parsers["sandbox"]
    sandbox.add_argument(
        "--scenario",
        default=None,
        metavar="NAME_OR_FILE",
        help="a bundled scenario's name (see spark demo --list) or a scenario YAML file to load",
    )
    sandbox.add_argument("--port", type=int, default=0, help="GitHub sandbox port (default: any free port)")
    sandbox.add_argument(
        "--no-spark",
        action="store_true",
        help="serve the local GitHub and model only, for your own `spark serve` and `spark worker`",
    )
    verbs = sandbox.add_subparsers(dest="sandbox_verb", metavar="VERB")
    comment_help = "comment on a pull request of a running `spark sandbox` as any user (fires the webhook)"
    comment = verbs.add_parser("comment", help=comment_help, description=comment_help)
    comment.add_argument(
        "--as",
        dest="as_user",
        default=None,
        metavar="LOGIN",
        help="the user who comments (default: the pull request's author)",
    )
    comment.add_argument(
        "--reply-to",
        type=int,
        default=None,
        metavar="COMMENT_ID",
        help="reply in the review thread of this review comment instead",
    )
    comment.add_argument(
        "--wait",
        nargs="?",
        type=float,
        const=120.0,
        default=None,
        metavar="SECONDS",
        help="then wait for Spark's answer and print it (up to SECONDS, default 120)",
    )
    comment.add_argument(
        "--on",
        default=None,
        metavar="PATH:LINE",
        help="comment on this line of the pull request's diff (its new side) instead",
    )
    comment.add_argument(
        "pr",
        metavar="PR",
        help="the pull request URL `spark sandbox` printed, or its number on the running playground",
    )
    comment.add_argument("text", metavar="TEXT", help='the comment, e.g. "/spark ask what does this do?"')

    doctor = parsers["doctor"]
    doctor.add_argument("--json", action="store_true", help="print the checks as JSON")

    queues = parsers["queues"]
    queues.add_argument("--json", action="store_true", help="print the counts and workers as JSON")

    redeliver = parsers["redeliver"]
    redeliver.add_argument(
        "--since", default="3d", help="how far back to look, e.g. 6h or 3d (default: %(default)s)"
    )
    redeliver.add_argument(
        "--dry-run", action="store_true", help="list failed deliveries without redelivering"
    )
    redeliver.add_argument("--json", action="store_true", help="print results as JSON")

    review = parsers["review"]
    review.add_argument(
        "pr_url",
        metavar="PR_URL",
        help="the pull request: https://github.com/OWNER/REPO/pull/N or OWNER/REPO#N",
    )
    review.add_argument("--fix", default=None, metavar="INSTRUCTIONS", help="run a fix instead of a review")
    review.add_argument("--dry-run", action="store_true", help="print what would be posted; post nothing")
    review.add_argument("--json", action="store_true", help="print results as JSON")
    return parser


def resolve(dotted: str) -> Callable[[Settings, argparse.Namespace], int]:
    """Import ``module:function`` and return the function."""
    module_name, _, func_name = dotted.partition(":")
    func: Callable[[Settings, argparse.Namespace], int] = getattr(
        importlib.import_module(module_name), func_name
    )
    return func


def several_processes_record_metrics(args: argparse.Namespace) -> bool:
    """Return whether `spark serve` or `spark worker` runs several processes one metrics scrape sums."""
    if args.command == "serve":
        return bool(args.workers > 1)
    return args.command == "worker" and args.processes > 1 and args.metrics_port is not None


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``spark``; exit codes: 0 ok, 1 the work failed, 2 usage or configuration error."""
    args = build_parser().parse_args(argv)
    try:
        settings = Settings.load(env_file=args.env_file)
    except SettingsError as exc:
        if args.command != "doctor":
            print(f"spark: {exc}", file=sys.stderr)
            return 2
        # The doctor shows the invalid variables as failed rows, and runs every other check on the defaults.
        try:
            settings, args.settings_problems = Settings.load_forgiving(env_file=args.env_file)
        except SettingsError:
            print(f"spark: {exc}", file=sys.stderr)
            return 2
    if several_processes_record_metrics(args):
        # Before the command's modules import prometheus-client, which picks its value store at import.
        ensure_multiprocess_dir(settings.spark_data_dir, args.command)
    try:
        command = resolve(COMMANDS[args.command][0])
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if args.command not in SANDBOX_COMMANDS or missing not in SANDBOX_MODULES:
            raise
        print(
            f"spark {args.command}: the local sandbox is not installed ({missing} is missing); "
            f"install it with: {SANDBOX_INSTALL}",
            file=sys.stderr,
        )
        return 2
    try:
        code = command(settings, args)
        sys.stdout.flush()  # here, not at exit: a reader gone (`spark doctor | head`) is handled below
        return code
    except BrokenPipeError:
        # The reader closed the pipe: nothing more can be said to it. Python flushes stdout again at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except SettingsError as exc:
        print(f"spark {args.command}: {exc}", file=sys.stderr)
        return 2
    except (EmbeddedRedisError, RedisUnavailable, ListenError) as exc:
        print(f"spark {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
