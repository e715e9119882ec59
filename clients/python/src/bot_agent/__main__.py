"""``bot-agent <command>`` (or ``python -m bot_agent``): what a bot's shell calls, as the bot named by
BOT_ID, printing the agent's answer. Exits 0 on success (and on Ctrl-C while following), 1 with one line
``bot-agent: <status>: <msg>`` when the agent refuses or cannot be reached, 2 on a wrong command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, cast

from ._common import BotAgentError, BotEvent
from .client import BotAgentClient, PlatformClient

USAGE = """bot-agent [--bot <bot_id>] <command>
  As the bot named by BOT_ID; with --bot, as the platform (BOT_AGENT_ADMIN_TOKEN, or from the agent's host) on any
  bot, at BOT_AGENT_URL (else PLATFORM_AGENT_URL, else http://127.0.0.1:8000).
  restart | stop | start       a lifecycle operation (stop and start name the owner from USER_ID)
  logs [lines] [--follow]      the last lines (100); with --follow, then each new line until Ctrl-C
  stats                        CPU, memory and uptime
  status                       state, crashes in the last hour and the last exit
  exits [limit]                exit records, newest first (20)
  events [--after <id>]        events as they happen, one JSON per line; --after replays the kept ones first
  revisions                    the bot's revisions, newest first
 the platform's (from the host, or with BOT_AGENT_ADMIN_TOKEN):
  deploy [--image <ref>] [--env NAME=value]... [--min-ready <s>] [--deadline <s>] [--no-rollback] [--wait]
                               a new revision; with --wait, until it is judged (exit 1 if it failed)
  rollback                     back to the previous revision
  backup [--live] [--store <name>]...
                               a backup of the bot's data now (stopped for it unless --live), copied to each store
  backups [--store <name>]     the bot's backups, newest first: the agent's folder's, or the store's
  restore <backup_id> [--store <name>]
                               the backup put back into the bot (its data as it was kept as a backup first)
  verify <backup_id> [--store <name>]
                               the backup unpacked beside the bot and read back (exit 1 if it fails)
 the platform's, of no one bot:
  list [--user <user_id>] [--limit <n>] [--after <bot_id>]
                               the bots, in the order of their ids, with their total (a page with --limit)
  nodes                        the fleet's nodes, alive or away, their bots counted
  move <node> --bot <bot_id>   the bot moved to that node (docs/api.md §17)
  events                       every bot's events, as they happen (without --bot and BOT_ID)"""

PLATFORM_COMMANDS = ("list", "nodes", "move")
COMMANDS = PLATFORM_COMMANDS + ("restart", "stop", "start", "logs", "stats", "status", "exits", "events", "revisions", "deploy", "rollback", "backup", "backups", "restore", "verify")
BACKUP_COMMANDS = ("backup", "backups", "restore", "verify")
DEPLOY_OPTIONS = ("image", "env", "min_ready", "deadline", "no_rollback", "wait")


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse exits by itself; the usage line is this tool's own
        raise UsageError(message)


def _parse(argv: List[str]) -> argparse.Namespace:
    parser = _Parser(prog="bot-agent", add_help=False)
    parser.add_argument("command", nargs="?")
    parser.add_argument("argument", nargs="?")
    parser.add_argument("-f", "--follow", action="store_true")
    parser.add_argument("--after")
    parser.add_argument("--image")
    parser.add_argument("--env", action="append")
    parser.add_argument("--min-ready", dest="min_ready")
    parser.add_argument("--deadline")
    parser.add_argument("--no-rollback", dest="no_rollback", action="store_true")
    parser.add_argument("--wait", action="store_true")
    parser.add_argument("--live", action="store_true")
    parser.add_argument("--store", action="append")
    parser.add_argument("--bot")
    parser.add_argument("--user")
    parser.add_argument("--limit")
    parser.add_argument("-h", "--help", action="store_true")
    # Options may stand between the command and its argument (`logs --bot <id> 50`).
    args = parser.parse_intermixed_args(argv)
    if args.help:
        return args
    if args.command is None:
        raise UsageError("no command")
    if args.command not in COMMANDS:
        raise UsageError(f'unknown command "{args.command}"')
    deploying = any(getattr(args, name) not in (None, False) for name in DEPLOY_OPTIONS)
    if (args.follow and args.command != "logs") or (args.after is not None and args.command not in ("events", "list")) or (deploying and args.command != "deploy"):
        raise UsageError(f"unexpected arguments for {args.command}")
    if (args.user is not None or args.limit is not None) and args.command != "list":
        raise UsageError(f"unexpected arguments for {args.command}")
    if args.command in PLATFORM_COMMANDS:
        if args.command == "move" and (args.argument is None or args.bot is None):
            raise UsageError("move takes the node, and the bot as --bot, e.g. move node-b --bot bot_1_2_a")
        if args.command != "move" and (args.argument is not None or args.bot is not None):
            raise UsageError(f"{args.command} takes no bot")
        if args.limit is not None and not args.limit.isdigit():
            raise UsageError(f'--limit must be a whole number, got "{args.limit}"')
        return args
    if (args.live and args.command != "backup") or (args.store and args.command not in BACKUP_COMMANDS) or (args.store and len(args.store) > 1 and args.command != "backup"):
        raise UsageError(f"unexpected arguments for {args.command}")
    if args.command in ("restore", "verify"):
        if args.argument is None:
            raise UsageError(f"{args.command} takes the backup's id, e.g. bak_20261203T120000Z_0123abcd")
        return args
    for name, value in (("--min-ready", args.min_ready), ("--deadline", args.deadline)):
        if value is not None and not value.isdigit():
            raise UsageError(f'{name} must be a whole number, got "{value}"')
    for given in args.env or []:
        if "=" not in given or given.startswith("="):
            raise UsageError(f'--env takes NAME=value, got "{given}"')
    if args.argument is not None:
        if args.command not in ("logs", "exits"):
            raise UsageError(f"{args.command} takes no argument")
        if not args.argument.isdigit():
            raise UsageError(f'{"limit" if args.command == "exits" else "lines"} must be a whole number, got "{args.argument}"')
    return args


def _end_of_run(event: BotEvent) -> str:
    exit = event.get("exit") or {}
    code = exit.get("exit_code")
    how = [
        "no exit code" if code is None else f"exit code {code}",
        exit.get("signal"),
        "killed for memory" if exit.get("oom_killed") else None,
        "requested" if exit.get("requested") else None,
    ]
    return f"bot-agent: the run ended at {event.get('at')} ({', '.join(part for part in how if part)})"


def _deploy(client: BotAgentClient, args: argparse.Namespace) -> int:
    change: Dict[str, Any] = {}
    if args.image is not None:
        change["image"] = args.image
    if args.env:
        change["env"] = dict(given.split("=", 1) for given in args.env)
    if args.min_ready is not None:
        change["min_ready_s"] = int(args.min_ready)
    if args.deadline is not None:
        change["deadline_s"] = int(args.deadline)
    if args.no_rollback:
        change["rollback"] = False
    revision = client.deploy(**change)
    print(f"bot-agent: revision {revision} started", flush=True)
    if not args.wait:
        return 0
    judged = client.wait_for_revision(revision)
    print(json.dumps(judged, indent=2))
    return 0 if judged["outcome"] == "succeeded" else 1


def _platform(platform: PlatformClient, args: argparse.Namespace) -> int:
    if args.command == "list":
        print(json.dumps(platform.bots(args.user, None if args.limit is None else int(args.limit), args.after), indent=2))
    elif args.command == "nodes":
        print(json.dumps(platform.nodes(), indent=2))
    elif args.command == "move":
        print(f"bot-agent: {platform.move(args.bot, args.argument)}")
    else:
        for event in platform.events(after=args.after):
            print(json.dumps(event), flush=True)
    return 0


def _run(args: argparse.Namespace) -> int:
    if args.help:
        print(USAGE)
        return 0
    platform = PlatformClient.from_env()
    if args.command in PLATFORM_COMMANDS or (args.command == "events" and args.bot is None and not os.environ.get("BOT_ID")):
        return _platform(platform, args)
    client = BotAgentClient.from_env() if args.bot is None else platform.bot(args.bot)
    count = None if args.argument is None or args.command not in ("logs", "exits") else int(args.argument)
    command = args.command
    if command == "restart" and args.bot is None:
        print(client.self_restart())
    elif command in ("restart", "stop", "start"):
        print(client.restart() if command == "restart" else client.stop() if command == "stop" else client.start())
    elif command == "logs" and not args.follow:
        sys.stdout.write(client.logs(count))
    elif command == "logs":
        for item in client.follow_logs(count):
            if item.get("type") == "log":
                print(item["line"], file=sys.stderr if item.get("stream") == "stderr" else sys.stdout, flush=True)
            elif item.get("type") == "exited":
                print(_end_of_run(cast(BotEvent, item)), file=sys.stderr, flush=True)
        print("bot-agent: the agent closed the log stream", file=sys.stderr)
        return 1
    elif command == "revisions":
        print(json.dumps(client.revisions(), indent=2))
    elif command == "rollback":
        print(f"bot-agent: revision {client.rollback()} runs again")
    elif command == "deploy":
        return _deploy(client, args)
    elif command == "backup":
        print(json.dumps(client.backup("live" if args.live else "stop", args.store), indent=2))
    elif command == "backups":
        print(json.dumps(client.backups(args.store[0] if args.store else None), indent=2))
    elif command == "restore":
        print(f"bot-agent: {client.restore(args.argument, args.store[0] if args.store else None)}")
    elif command == "verify":
        print(json.dumps(client.verify(args.argument, args.store[0] if args.store else None), indent=2))
    elif command in ("stats", "status", "exits"):
        answer = client.stats() if command == "stats" else client.status() if command == "status" else client.exits(count)
        print(json.dumps(answer, indent=2))
    else:
        for event in client.events(after=args.after):
            print(json.dumps(event), flush=True)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    try:
        return _run(_parse(sys.argv[1:] if argv is None else argv))
    except UsageError as err:
        print(f"bot-agent: {err}\n{USAGE}", file=sys.stderr)
        return 2
    except BotAgentError as err:
        print(f"bot-agent: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
