"""CLI: ``affiliate-network-sandbox --host 127.0.0.1 --port PORT --seed N [...]``."""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import os
import socket
import sys
from collections.abc import Sequence

from affiliate_network_sandbox.clock import ClockError, parse_instant
from affiliate_network_sandbox.config import ConfigError, DataConfig
from affiliate_network_sandbox.late_writes import LateWritesConfig, LateWritesConfigError


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _instant(text: str) -> float:
    try:
        return parse_instant(text, "--clock")
    except ClockError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="affiliate-network-sandbox",
        description="Run the affiliate network API sandbox (a local, stateful fake of the API).",
    )
    p.add_argument("--host", default="127.0.0.1", help="bind address (loopback by default)")
    p.add_argument("--port", type=int, default=8400, help="port (0 picks a free one)")
    p.add_argument(
        "--allow-non-loopback",
        action="store_true",
        help="allow binding an address other than loopback (the sandbox has no real security)",
    )
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--end-date", type=dt.date.fromisoformat, default=None, help="YYYY-MM-DD")
    p.add_argument("--days", type=int, default=None)
    p.add_argument("--offers", type=int, default=None)
    p.add_argument("--affiliates", type=int, default=None)
    p.add_argument("--advertisers", type=int, default=None)
    p.add_argument("--conversions-per-day", type=int, default=None)
    p.add_argument("--on-hold-share", type=float, default=None)
    p.add_argument("--event-share", type=float, default=None)
    p.add_argument(
        "--reporting-timezone-id",
        type=int,
        default=None,
        help="the network's default reporting timezone (API timezone id; default 67 = UTC)",
    )
    p.add_argument(
        "--world",
        choices=("small", "large"),
        default=None,
        help="world profile: 'small' (default: one currency, 8 affiliates x 12 offers) or "
        "'large' (six currencies incl. JPY and KWD, 300 affiliates x 60 offers, 30,000 "
        "conversions a day, late-recorded, deleted and reversed conversions); the other data "
        "flags refine it",
    )
    p.add_argument(
        "--offer-currencies",
        default=None,
        metavar="CODES",
        help="comma-separated currencies the offers pay in (offer k: the k-th modulo the list)",
    )
    p.add_argument("--late-share", type=float, default=None, help="share of late conversions")
    p.add_argument("--late-max-s", type=int, default=None, help="latest recording delay, s")
    p.add_argument("--deletion-share", type=float, default=None, help="share deleted later")
    p.add_argument("--deletion-max-s", type=int, default=None, help="latest deletion, s")
    p.add_argument(
        "--reversal-share",
        type=float,
        default=None,
        help="share of conversions planted as reversals and adjustments (negative payouts)",
    )
    p.add_argument(
        "--rate-limit",
        choices=("sandbox", "documented"),
        default="sandbox",
        help="'sandbox' (a generous bucket per key, the default) or 'documented' (the public "
        "guide: one 30-s window per network and user type shared by all its keys, 600 requests "
        "for network keys, 150 for affiliate/advertiser/partner keys; 10 in flight on "
        "/networks/reporting/*; 1,000 granular queries per rolling hour); shrink the numbers "
        "with PUT /_sandbox/rate_limit",
    )
    p.add_argument(
        "--write-delay-s",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="late writes: an accepted on-hold status update shows in reads this many real "
        "seconds later (default 0: at once; the real service documents 'up to a few seconds')",
    )
    p.add_argument(
        "--lost-write-share",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="late writes: share (0..1) of accepted on-hold status updates that never land "
        "(default 0; the real service documents that this happens 'rarely')",
    )
    p.add_argument(
        "--clock",
        type=_instant,
        default=None,
        metavar="ISO8601",
        help="freeze the sandbox's clock at this instant (with its offset, e.g. "
        "2026-03-10T08:37:00+00:00; no record later than the clock is served); without "
        "--end-date the clock's UTC date is the data's last day. Default: the wall clock",
    )
    p.add_argument("--ready-file", default=None, help="write the base URL here once listening")
    p.add_argument("--log-level", default="warning")
    return p


def config_from_args(args: argparse.Namespace) -> DataConfig:
    overrides = {
        name: getattr(args, name)
        for name in (
            "end_date",
            "days",
            "offers",
            "affiliates",
            "advertisers",
            "conversions_per_day",
            "on_hold_share",
            "event_share",
            "reporting_timezone_id",
            "world",
            "offer_currencies",
            "late_share",
            "late_max_s",
            "deletion_share",
            "deletion_max_s",
            "reversal_share",
        )
        if getattr(args, name) is not None
    }
    overrides["seed"] = args.seed
    if args.clock is not None and "end_date" not in overrides:
        # A frozen clock's day is the data's "today" (the wall clock's date would leave a
        # past clock with no traffic on its own day, or a future one with empty days).
        overrides["end_date"] = dt.datetime.fromtimestamp(args.clock, dt.UTC).date()
    return DataConfig().with_overrides(overrides)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not _is_loopback(args.host) and not args.allow_non_loopback:
        print(
            f"refusing to bind {args.host}: the sandbox is for loopback only; "
            "pass --allow-non-loopback to override",
            file=sys.stderr,
        )
        return 2
    try:
        cfg = config_from_args(args)
    except ConfigError as err:
        print(f"bad data config: {err}", file=sys.stderr)
        return 2
    try:
        late = LateWritesConfig(delay_s=args.write_delay_s, lost_share=args.lost_write_share)
    except LateWritesConfigError as err:
        flag = "--write-delay-s" if "delay_s" in str(err) else "--lost-write-share"
        print(f"bad {flag}: {err}", file=sys.stderr)
        return 2

    import uvicorn

    from affiliate_network_sandbox.app import create_app

    app = create_app(cfg, rate_limit=args.rate_limit, late_writes=late, clock=args.clock)
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(128)
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if family == socket.AF_INET6 else args.host
    url = f"http://{host}:{port}"
    config = uvicorn.Config(
        app,
        log_level=args.log_level,
        access_log=False,
        lifespan="on",
        loop="auto",
        http="auto",
        timeout_keep_alive=30,
    )
    server = uvicorn.Server(config)
    if args.ready_file:
        tmp = f"{args.ready_file}.tmp"
        with open(tmp, "w") as fh:
            fh.write(url)
        os.replace(tmp, args.ready_file)
    print(
        f"affiliate-network-sandbox listening on {url} (API: {url}/v1, EU: {url}/eu/v1)", flush=True
    )
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
