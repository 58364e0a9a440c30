"""``dpllm demo-data``: write synthetic course feedback (zh/en, with synthetic PII)."""

from __future__ import annotations

from typing import Annotated

import typer

from dpllm.cli._common import JsonOption, exit_code_for, fail, print_json

__all__ = ["register"]


def demo_data(
    out: Annotated[str, typer.Option("--out", help="The SQLite file to create.")] = "demo.db",
    users: Annotated[int, typer.Option(min=1, max=1_000_000, help="Number of users.")] = 2000,
    weeks: Annotated[int, typer.Option(min=1, help="Number of ISO weeks.")] = 8,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 1,
    end_week: Annotated[str, typer.Option("--end-week", help="The last week.")] = "2026-W47",
    as_json: JsonOption = False,
) -> None:
    """Generate demo feedback into OUT, and the list of embedded PII into OUT.pii.json."""
    from dpllm.data.demo import generate_demo, write_demo
    from dpllm.errors import DPLLMError

    try:
        data = generate_demo(users=users, weeks=weeks, seed=seed, end_week=end_week)
        path, pii_path = write_demo(data, out)
    except DPLLMError as exc:
        raise fail(str(exc), exit_code_for(exc)) from None
    if as_json:
        print_json(
            {
                "path": str(path),
                "pii_path": str(pii_path),
                "records": len(data.records),
                "users": users,
                "weeks": list(data.weeks),
                "pii_items": len(data.pii),
            }
        )
        return
    typer.echo(
        f"wrote {len(data.records)} records from {users} users over {data.weeks[0]}…"
        f"{data.weeks[-1]} to {path}; {len(data.pii)} embedded PII items listed in {pii_path}"
    )


def register(app: typer.Typer) -> None:
    """Add ``demo-data`` to the ``dpllm`` app."""
    app.command("demo-data")(demo_data)
