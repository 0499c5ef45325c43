"""Command line: vaetransfer <command> ... (one entry point for every job)."""
from __future__ import annotations

import argparse
import errno
import json
import signal
import sys

from ._C import ArgumentError, ArgumentTypeError


def _execution(args):
    from .studies import Execution

    return Execution(executor=args.executor, workers=args.workers, threads=args.threads, address=args.address,
                     cpus_per_run=args.cpus_per_run, device=args.device,
                     tracking=tuple(t for t in (args.track or "").split(",") if t))


def _add_execution(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("execution (not part of the study's identity: a re-run with other values resumes)")
    g.add_argument("--executor", default="local", help="local (worker processes, default) or ray")
    g.add_argument("--workers", type=int, default=1, help="local: runs in parallel (default 1)")
    g.add_argument("--threads", type=int, default=None, help="torch threads per run (default: torch's)")
    g.add_argument("--address", default=None, help="ray: a running cluster ('auto', 'ray://host:10001')")
    g.add_argument("--cpus-per-run", type=float, default=1.0, help="ray: CPUs reserved per run (default 1)")
    g.add_argument("--device", default="cpu", help="where runs train and analyses compute: cpu (default), cuda, "
                                                   "cuda:1 (checked before any work)")
    g.add_argument("--track", default="", metavar="TRACKERS",
                   help="comma-separated trackers every run's training reports to: tensorboard (event files in "
                        "each run's folder: tensorboard --logdir OUT), wandb (offline), mlflow")


def _run(args) -> int:
    from . import studies

    if args.list:
        for name in studies.available():
            s = studies.get_study(name)
            print(f"{name}  (presets: {', '.join(s.presets)})\n    {studies.describe(name)}")
        return 0
    if not args.study or not args.out:
        args.parser.error("expected a study and --out DIR (or --list)")
    studies.run_study(args.study, args.out, preset=args.preset, config_file=args.config, sets=args.set,
                      execution=_execution(args), progress=not args.quiet)
    return 0


def _quickstart(args) -> int:
    from . import studies

    sets = [f"{key}={value}" for key, value in (("seed", args.seed), ("steps", args.steps), ("n", args.n),
                                                ("similarity_n", args.similarity_n)) if value is not None]
    studies.run_study("quickstart", args.out, preset="small", sets=sets, execution=_execution(args),
                      progress=not args.quiet)
    return 0


def _findings(args) -> int:
    import os

    from . import studies
    from ._checks import value_error
    from .io import write_text

    if not args.markdown and (args.out is not None or args.link_base is not None or args.title is not None
                              or args.all_studies):
        args.parser.error("--out, --link-base, --title and --all-studies go with --markdown")
    if args.publish is not None:  # the page and the table read the committed copies
        args.dirs = [studies.published.publish(d, args.publish, argument="dirs") for d in args.dirs]
        for d in args.dirs:
            print(f"published {d}", file=sys.stderr)
    if args.markdown:
        link_base = args.link_base
        if link_base is None and args.out is not None:  # the page's links work where it is written
            link_base = os.path.dirname(os.path.abspath(args.out))
        page = studies.reproduction_page(args.dirs, link_base=link_base,
                                         expected=studies.available() if args.all_studies else (),
                                         **({"title": args.title} if args.title is not None else {}))
        if args.out is None:
            sys.stdout.write(page)
        else:
            try:
                write_text(args.out, page)
            except OSError as exc:
                raise value_error("out", f"cannot write {args.out!r}: {exc.strerror or exc}") from exc
    elif args.json:
        for row in studies.findings_rows(args.dirs):
            print(json.dumps(row))
    else:
        print(studies.findings_table(args.dirs))
    return 0


def _train(args) -> int:
    from .train import train_main

    return train_main(args.rest)


def _plan(args) -> int:
    from .plan.cli import plan_main

    return plan_main(args.rest)


def _sweep(args) -> int:
    from .sweep import main as sweep_main

    return sweep_main(args.rest)


def registries() -> dict[str, list[str]]:
    """The names every registry knows, read from where each is declared (the core's registries for
    models, objectives, regularisers and schedules)."""
    from . import _C, data, similarity, studies

    def names(entries):
        return sorted(e["name"] for e in entries)

    return {"models": names(_C.nn.registered()), "objectives": names(_C.objectives.registered()),
            "regularizers": names(_C.regularizers.registered()), "schedules": names(_C.train.registered_schedules()),
            "similarity_measures": names(similarity.registered()), "datasets": sorted(data.DOMAINS),
            "studies": studies.available()}


def _tensorboard(args) -> int:
    from .tensorboard_export import export_tensorboard

    written = export_tensorboard(args.dirs, overwrite=args.overwrite)
    for d in written:
        print(d / "tensorboard")
    print(f"{len(written)} run(s) written; view with: tensorboard --logdir {args.dirs[0]}", file=sys.stderr)
    return 0


def _info(args) -> int:
    from . import build_info

    print(json.dumps(registries() if args.registry else build_info(), indent=2))
    return 0


#: OSErrors that say the machine cannot take a write (one line and exit 2, as bad input): full disk,
#: quota, read-only file system, a file too large, no permission.
_ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EACCES, errno.EPERM}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vaetransfer", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run a study (vaetransfer run --list); a re-run resumes",
                       description="Runs a study into --out: results.json, figures and index.md. The config is the "
                                   "preset, then --config's values, then each --set; a re-run with the same config "
                                   "resumes, another config needs another --out.")
    p.add_argument("study", nargs="?", help="the study (vaetransfer run --list)")
    p.add_argument("--list", action="store_true", help="list the studies and their presets")
    p.add_argument("--preset", default="small", help="smoke (a check that it runs: under two minutes on 2 cores), small (default; this machine, under an hour), medium (this machine, about two hours) or paper")
    p.add_argument("--config", metavar="FILE.json", help="a JSON object of config values over the preset")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one config value (dotted keys for nested configs; JSON values, e.g. betas=[1,4])")
    p.add_argument("--out", metavar="DIR", help="output directory")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    _add_execution(p)
    p.set_defaults(func=_run, parser=p)

    p = sub.add_parser("quickstart", help="the quickstart study, preset small (= run quickstart --preset small)")
    p.add_argument("--out", default="runs/quickstart", help="output directory (default: runs/quickstart)")
    p.add_argument("--seed", type=int, default=None, help="= --set seed=...")
    p.add_argument("--steps", type=int, default=None, help="= --set steps=... (training steps of each model)")
    p.add_argument("--n", type=int, default=None, help="= --set n=... (dSprites images to train on; 0: all)")
    p.add_argument("--similarity-n", type=int, default=None, help="= --set similarity_n=... (images of the heatmaps)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    _add_execution(p)
    p.set_defaults(func=_quickstart)

    p = sub.add_parser("findings", help="one table of the findings of study outputs: what reproduced where "
                                        "(--markdown: the reproduction page)",
                       description="Reads each DIR's results.json and prints every finding with its verdict "
                                   "(reproduced, not reproduced, undecided and why); --markdown writes the "
                                   "reproduction page instead (one output per study and preset).")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="study output directories (or results.json files)")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="one JSON object per finding and line")
    form.add_argument("--markdown", action="store_true", help="the reproduction page: per study and finding the "
                                                              "verdict at each preset, key numbers, figures and "
                                                              "diagnosis")
    p.add_argument("--out", metavar="FILE", help="--markdown: write the page to FILE (atomically) instead of stdout")
    p.add_argument("--link-base", metavar="DIR", help="--markdown: figure links relative to DIR (default: FILE's "
                                                      "directory with --out, else the paths as given)")
    p.add_argument("--title", help="--markdown: the page's title")
    p.add_argument("--all-studies", action="store_true", help="--markdown: also list the findings of every registered "
                                                              "study without an output among DIR (not run yet)")
    p.add_argument("--publish", metavar="ROOT", help="first copy each DIR's results.json, index.md and figures (no "
                                                     "runs or snapshots) to ROOT/<study>-<preset>/ and read those "
                                                     "(the repository's: docs/reproduction)")
    p.set_defaults(func=_findings, parser=p)

    # Options are parsed by vaetransfer.train.train_main (`vaetransfer train --help`).
    p = sub.add_parser("train", help="train a VAE; a half-finished run resumes", add_help=False)
    p.set_defaults(func=_train, forwards=True)

    # Options are parsed by vaetransfer.plan.cli.plan_main (`vaetransfer plan --help`).
    p = sub.add_parser("plan", help="which layers of a model to retrain for new data (a transfer plan)",
                       add_help=False)
    p.set_defaults(func=_plan, forwards=True)

    # Options are parsed by vaetransfer.sweep.main (`vaetransfer sweep --help`).
    p = sub.add_parser("sweep", help="run a sweep of many runs (local processes or Ray); status; results",
                       add_help=False)
    p.set_defaults(func=_sweep, forwards=True)

    p = sub.add_parser("tensorboard", help="write TensorBoard event files for runs made without tracking",
                       description="Writes RUN/tensorboard/ event files from each run's history.csv, metrics.jsonl "
                                   "and config.json (every DIR a run directory or a folder searched for them, e.g. "
                                   "a study's output); runs that have event files are skipped unless --overwrite. "
                                   "New runs write them as they train with --track tensorboard.")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="run directories or folders holding them")
    p.add_argument("--overwrite", action="store_true", help="rewrite runs that have event files already")
    p.set_defaults(func=_tensorboard)

    p = sub.add_parser("info", help="print how the compiled core was built (--registry: what is registered)")
    p.add_argument("--registry", action="store_true", help="print the registered models, objectives, regularisers, "
                                                          "schedules, similarity measures, data sets and studies")
    p.set_defaults(func=_info)

    args, rest = parser.parse_known_args(argv)
    if rest and not getattr(args, "forwards", False):
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    args.rest = rest
    try:
        return args.func(args)
    except (ArgumentError, ArgumentTypeError) as exc:  # bad input: the message, no traceback
        print(f"vaetransfer {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the machine, not the input: a full disk, a quota, a read-only folder
        if exc.errno not in _ENVIRONMENT_ERRNOS:
            raise
        where = f" {exc.filename}" if exc.filename else ""
        print(f"vaetransfer {args.command}: error: cannot access{where}: {exc.strerror}; every file written before "
              "is intact (writes are atomic): free space or fix the folder, then run the same command again",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: what was done is kept (snapshots, finished runs)
        print(f"vaetransfer {args.command}: interrupted; the same command resumes", file=sys.stderr)
        return 128 + getattr(exc, "signum", signal.SIGINT)


if __name__ == "__main__":
    sys.exit(main())
