"""The weekly summary job: settings → DP releases → prompt → model → redacted, guarded report.

:func:`run_weekly` is the whole pipeline as a library call; ``dpllm weekly`` is a thin
command around it that adds the clock, the terminal and the files. One run, for one
ISO week:

1. validate everything that needs no data and spends nothing: the plan against the
   catalogue and the template's declared releases, the data source and its columns;
2. make sure the configured pools exist in the ledger;
3. **check the budget for the whole plan first**: the releases of this week that are
   not paid yet must fit every pool on the plan pool's path, else
   :class:`~dpllm.errors.BudgetExceeded` is raised before anything is charged (so a
   refused run spends nothing, never half a plan). A query this week already *paid
   for* — charged by an interrupted run of this job (paid, not released) or funded by
   an approval — costs nothing more: the run takes that charge over (see
   :mod:`dpllm.ledger.base`), so it is not counted against what is left;
4. release the plan through :meth:`~dpllm.data.stats.StatsRunner.release_all` —
   count, active users, mean and histogram from one per-user read of the week,
   each still charged under its own query id; a query already released for this
   week comes back from the ledger's release cache, free, with the same figures;
5. derive the shares of positive and negative ratings from the histogram (free);
6. render the prompt and its fallback text, call the model (or the offline writer),
   redact and guard its answer, regenerate on violations, fall back if needed.

Privacy: each query of the plan costs its ε (or ρ) per user in the week's window,
charged once per (query, dataset, week); a rerun of the same week spends nothing.
Everything after step 4 is post-processing of releases and free.

**Resuming.** A run interrupted anywhere (Ctrl-C, SIGTERM, ``kill -9``, a crash of
the model call) is resumed by running it again: stored releases come back from the
cache, charges the interrupted run paid are taken over (never charged twice), and
the budget check counts neither. :meth:`WeeklyJob.states` says where each query is.
Two runs of the same week do not overlap: :meth:`WeeklyJob.run` holds the ledger's
run lock for the week (:mod:`dpllm.ledger.locks`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime as dt
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dpllm.chat.generate import GenerationResult, Redactor, generate
from dpllm.chat.models import ModelClient, OfflineWriter
from dpllm.config import Settings
from dpllm.data.engines import Engine
from dpllm.data.queries import (
    Query,
)
from dpllm.data.stats import StatsRunner, rating_shares
from dpllm.errors import ConfigError
from dpllm.ledger.base import Ledger
from dpllm.privacy.noise import NoiseSource
from dpllm.release import Cost, Release
from dpllm.weekly.runstate import (
    FAILED,
    NEW,
    PAID,
    RELEASED,
    PoolBudget,
    check_budget,
    query_states,
    run_ticket_id,
)
from dpllm.weekly.wiring import (
    build_model,
    build_plan,
    build_redactor,
    columns_for,
    open_engine,
    open_ledger,
    parents_first,
    plan_pool,
    pool_path,
)
from dpllm.windows import Window, utc_today

__all__ = [
    "DERIVED",
    "FAILED",
    "NEW",
    "PAID",
    "RELEASED",
    "PoolBudget",
    "WeeklyJob",
    "WeeklyReport",
    "context_releases",
    "run_weekly",
]

DERIVED: Mapping[str, str] = {
    "share_positive": "share_positive",
    "share_negative": "share_negative",
}
"""Template name → :func:`~dpllm.data.stats.rating_shares` key (post-processing, free)."""

DEFAULT_PROMPT = "weekly"
TREND_WEEKS = 8
"""How many weeks (this one included) the trend chart looks back over."""

Progress = Callable[[str], None]


def _no_progress(step: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class WeeklyReport:
    """The outcome of one weekly run (all of it safe to publish).

    Attributes:
        week: the ISO week key.
        lang: the report's language.
        prompt: the prompt folder used (``weekly``).
        course_names: the public course list the prompt named.
        releases: the charged releases of the plan, by query name.
        derived: releases computed from them for free (``share_positive`` …).
        fresh: names of the releases charged by *this* run (the rest were cached).
        spent: what this run charged to the plan pool (zero on a rerun).
        budget: each pool on the plan pool's path, after the run.
        generation: every attempt, the final text and where it came from.
        model: ``"offline"`` or the model id that was asked.
        timings: seconds per step — for the operator only: they depend on the
            raw data, unnoised, so :mod:`dpllm.weekly.report` never publishes them.
        history: this job's cached releases of earlier weeks (for the trend chart),
            ``{query name: {week: release}}``; reading them spent nothing.
        resumed: names released on charges paid before this run (an interrupted
            run's, or an approval's), taken over without charging again.
    """

    week: str
    lang: str
    prompt: str
    course_names: tuple[str, ...]
    releases: Mapping[str, Release]
    derived: Mapping[str, Release]
    fresh: tuple[str, ...]
    spent: Cost
    budget: tuple[PoolBudget, ...]
    generation: GenerationResult
    model: str
    timings: Mapping[str, float]
    history: Mapping[str, Mapping[str, Release]] = field(default_factory=dict)
    resumed: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The summary: redacted, and clean under the precision guard."""
        return self.generation.text

    @property
    def cached(self) -> tuple[str, ...]:
        """Names of the releases served from the ledger's cache (no charge)."""
        return tuple(n for n in self.releases if n not in self.fresh and n not in self.resumed)

    @property
    def model_error(self) -> str | None:
        """The model error that forced the fallback text, if any."""
        return self.generation.error


class WeeklyJob:
    """The weekly job for one configuration: plan, data, ledger, templates, model.

    Args:
        settings: validated settings (``Settings.load``; the CLI applies ``from_env``).
        engine: the data source (default: :func:`open_engine`).
        ledger: the budget ledger (default: :func:`open_ledger`).
        model: the model client (default: from the settings; ``None`` there means the
            offline writer, which returns the template's deterministic fallback text).
        redactor: a redactor (default: built from the settings, in the background
            while the statistics run).
        courses: the public course list named in the report (and the
            ``course_feedback`` categories).
        noise: the noise source (``None``: the secure default; a seeded one is for
            tests, and its releases are refused by the templates).
        clock: seconds for the timings (default ``time.perf_counter``).
        today: the current UTC date, read from the clock by the caller (the CLI,
            the server; ``None``: read once when the job is built): a week that
            has not ended by then is refused, a future one always.
        allow_incomplete: release the current, unfinished week too (its
            releases say so: ``complete=False``).

    Raises:
        ConfigError: a plan, pool or column setting is unusable. DataError: the
            source cannot be opened. Nothing is charged in either case.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        engine: Engine | None = None,
        ledger: Ledger | None = None,
        model: ModelClient | None = None,
        redactor: Redactor | None = None,
        courses: Sequence[str] = (),
        noise: NoiseSource | None = None,
        clock: Callable[[], float] = time.perf_counter,
        today: dt.date | None = None,
        allow_incomplete: bool = False,
    ) -> None:
        self.settings = settings
        self.courses = tuple(courses) or settings.data.courses
        self.plan = build_plan(settings, courses=self.courses)
        self.prompt = settings.template
        self._check_template()
        self._owns_engine = engine is None
        self._owns_ledger = ledger is None
        self.engine = engine if engine is not None else open_engine(settings)
        self.ledger = ledger if ledger is not None else open_ledger(settings)
        self._model = model if model is not None else build_model(settings)
        self._redactor = redactor
        self._clock = clock
        salt = settings.bounds.salt.encode() if settings.bounds.salt else None
        self.runner = StatsRunner(
            self.engine,
            self.ledger,
            dataset_id=settings.data.dataset_id,
            pool=settings.plan_pool,
            columns=columns_for(settings, self.plan),
            salt=salt,
            analyst=settings.analyst,
            confidence=settings.confidence,
            noise=noise,
            today=today if today is not None else utc_today(),
            allow_incomplete=allow_incomplete,
        )

    def close(self) -> None:
        """Close the engine and ledger this job opened (not ones it was given)."""
        for resource, owned in ((self.engine, self._owns_engine), (self.ledger, self._owns_ledger)):
            close = getattr(resource, "close", None)
            if owned and callable(close):
                close()

    def __enter__(self) -> WeeklyJob:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- set-up ----------------------------------------------------------------------
    def environment(self, week: Window | str) -> Any:
        from dpllm.templates import PromptEnvironment

        dirs = [self.settings.resolve(d) for d in self.settings.template_dirs]
        return PromptEnvironment(
            dirs,
            lang=self.settings.lang,
            metadata={"week": str(week), "course_names": list(self.course_names)},
        )

    @property
    def course_names(self) -> tuple[str, ...]:
        if self.courses:
            return self.courses
        return ("全部课程",) if self.settings.lang == "zh" else ("all courses",)

    def _check_template(self) -> None:
        env = self.environment("2026-W01")
        declared = env.declaration(f"{self.prompt}/user.{self.settings.lang}.j2")
        missing = sorted(declared.releases - set(self.plan) - set(DERIVED))
        if missing:
            raise ConfigError(
                f"the template {self.prompt!r} needs the releases {', '.join(missing)}; "
                "add them to [plan.queries]",
                field="plan.queries",
            )
        if set(DERIVED) & declared.release_names and "rating_histogram" not in self.plan:
            raise ConfigError(
                "the rating shares are derived from rating_histogram; add it to [plan.queries]",
                field="plan.queries",
            )

    def ensure_pools(self) -> None:
        """Create or update the configured pools (parents first)."""
        ensure = self.ledger.ensure_pool
        for spec in parents_first(self.settings.default_pools):
            ensure(spec)

    # -- budget ------------------------------------------------------------------------
    def uncached(self, week: Window) -> dict[str, Query]:
        """The plan's queries with no stored release for ``week`` (reads the ledger only)."""
        return {
            name: q
            for name, q in self.plan.items()
            if self.ledger.get_release(self.runner.query_id(q, week)) is None
        }

    def states(
        self, week: Window | str, queries: Mapping[str, Query] | None = None
    ) -> dict[str, str]:
        """Where each plan query (or each of ``queries``) stands in ``week``.

        Returns:
            ``{name: state}``: ``"released"`` (stored: free, the same figure again),
            ``"paid"`` (charged, not released — by an interrupted run, or funded by an
            approval: the next run takes the charge over and pays nothing more),
            ``"failed"`` (failed after reading the data: closed, see
            :class:`~dpllm.errors.QueryFailed`) or ``"new"`` (to be charged).

        Reads the ledger only.
        """
        week = Window.parse(week)
        queries = self.plan if queries is None else queries
        return query_states(
            self.ledger, {n: self.runner.query_id(q, week) for n, q in queries.items()}
        )

    def to_pay(self, week: Window, queries: Mapping[str, Query] | None = None) -> dict[str, Query]:
        """The queries a run of ``week`` would charge: neither released nor already paid."""
        queries = self.plan if queries is None else queries
        states = self.states(week, queries)
        return {n: q for n, q in queries.items() if states[n] == NEW}

    def check_budget(self, week: Window, queries: Mapping[str, Query]) -> None:
        """Refuse the run, before any charge, when ``queries`` do not all fit.

        ``queries`` are what the run would charge: neither released nor already paid
        (:meth:`to_pay`), so the run's own interrupted charges never block it.

        Raises:
            BudgetExceeded: the first pool on the path (innermost first) that cannot take
                the plan's cost; the message says what was asked and what is left — the
                same ``remaining`` figure ``dpllm budget show`` prints.
            BudgetPending: that pool queues (``on_exceed = "queue"``): **one** ticket
                for the whole run, listing each query and its cost, was filed (or is
                still pending); approving it lets exactly this plan run once.

        A concurrent spender can still take budget between this check and the charges;
        the ledger's own per-charge check stays the guarantee.
        """
        check_budget(
            self.ledger,
            self.settings,
            week,
            queries,
            query_id=self.runner.query_id,
            run_id=self.run_id(week, queries),
        )

    def run_id(self, week: Window, queries: Mapping[str, Query]) -> str:
        """The id of a run's approval ticket: a fingerprint of the query ids it charges."""
        ids = [self.runner.query_id(q, week) for q in queries.values()]
        return run_ticket_id(self.settings.plan_pool, week, ids)

    def budget(self, week: Window) -> tuple[PoolBudget, ...]:
        """Each pool on the plan pool's path in ``week`` (reads the ledger only)."""
        return tuple(
            PoolBudget.from_balance(self.ledger.balance(p.name, week))
            for p in pool_path(self.settings)
        )

    # -- releases ------------------------------------------------------------------------
    def release(
        self, week: Window | str, queries: Mapping[str, Query] | None = None
    ) -> dict[str, Release]:
        """Release the plan (or ``queries``) for ``week``: validate, check the budget, charge.

        Raises:
            InvalidWindow, WindowNotReady: a malformed, future or unfinished week
                (nothing charged).
            DataError: a bad source or column (nothing charged).
            BudgetExceeded: the plan does not fit (nothing charged).
        """
        week = self.runner.window(week)
        queries = dict(self.plan if queries is None else queries)
        for q in queries.values():
            self.runner.check(q)
        self.ensure_pools()
        # Only what is neither released nor already paid: the run's own interrupted
        # charges are taken over, not charged again, so they must not block it.
        self.check_budget(week, self.to_pay(week, queries))
        # One read for the shareable queries; each is still charged (or served
        # from the cache) under its own query id.
        return self.runner.release_all(queries, week)

    def release_weeks(
        self, weeks: Sequence[Window | str], queries: Mapping[str, Query] | None = None
    ) -> dict[str, dict[str, Release]]:
        """Release the plan (or ``queries``) for each of ``weeks``, reading the data once.

        Each (query, week) is its own release, charged to its own week; every week
        is checked against the budget before anything is charged, and weeks already
        released come from the cache without a read
        (:meth:`~dpllm.data.stats.StatsRunner.release_many`).

        Raises:
            DataError: a bad week, source or column (nothing charged).
            BudgetExceeded: a week's releases do not fit (nothing charged, in any week).

        Privacy: the queries' cost per user in each week; ISO weeks are disjoint,
        so the weeks compose in parallel (the lifetime cap bounds the total).
        """
        keys = [self.runner.window(w).key for w in weeks]  # strict; complete weeks only
        queries = dict(self.plan if queries is None else queries)
        for q in queries.values():
            self.runner.check(q)
        self.ensure_pools()
        for key in keys:
            week = Window.parse(key)
            # Neither released nor already paid (an interrupted run's charges are taken
            # over by release_many, free): the same rule as release().
            self.check_budget(week, self.to_pay(week, queries))
        return self.runner.release_many(queries, keys)

    def history(
        self, week: Window | str, *, names: Sequence[str] = ("mean_rating", "feedback_count")
    ) -> dict[str, dict[str, Release]]:
        """This job's **cached** releases of ``names`` over the trend weeks (spends nothing).

        Weeks without a stored release are skipped.
        """
        week = Window.parse(week)
        out: dict[str, dict[str, Release]] = {}
        for name in names:
            if name not in self.plan:
                continue
            found: dict[str, Release] = {}
            for w in week.previous(TREND_WEEKS):
                stored = self.ledger.get_release(self.runner.query_id(self.plan[name], w))
                if stored is not None:
                    found[w.key] = stored
            out[name] = found
        return out

    # -- the run --------------------------------------------------------------------------
    def run(self, week: Window | str, *, progress: Progress = _no_progress) -> WeeklyReport:
        """Run the weekly job for ``week`` (see the module docstring for the steps).

        Returns:
            The :class:`WeeklyReport` (writing it to files is :mod:`dpllm.weekly.report`).

        Raises:
            DataError: bad week, source or column (nothing charged), or an engine
                failure after the read (charged; no query fails because of a value).
            BudgetExceeded, BudgetPending: the plan does not fit (nothing charged).
            RunLocked: another process runs this week (nothing done).
            TemplateError: the prompt cannot be rendered.
            RedactionError: the redactor cannot be built.
            GuardError: the fallback text itself breaks the guard.

        Privacy: the plan's cost per user in ``week``, charged once; a rerun is free.
        """
        week = self.runner.window(week)
        with self.run_lock(week):
            return self._run(week, progress)

    def run_key(self, week: Window) -> str:
        """The run lock's key: one per (dataset, plan pool, week)."""
        return f"weekly:{self.settings.data.dataset_id}:{self.settings.plan_pool}:{week.key}"

    @contextlib.contextmanager
    def run_lock(self, week: Window) -> Iterator[None]:
        """Hold the ledger's run lock for ``week`` (a no-op on a ledger without one).

        Raises:
            RunLocked: another process runs this week now (nothing was done).
        """
        lock = getattr(self.ledger, "run_lock", None)
        if not callable(lock):
            yield
            return
        with lock(self.run_key(week)):
            yield

    def _run(self, week: Window, progress: Progress) -> WeeklyReport:
        timings: dict[str, float] = {}
        clock = self._clock
        pending: concurrent.futures.Future[Redactor] | None = None
        pool: concurrent.futures.ThreadPoolExecutor | None = None
        if self._redactor is None:
            # Loading spaCy and jieba takes seconds: overlap it with the statistics.
            pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="dpllm-redactor")
            pending = pool.submit(build_redactor, self.settings)
        try:
            progress("statistics")
            t = clock()
            before = self.states(week)
            releases = self.release(week)
            fresh = tuple(n for n in releases if before[n] == NEW)
            resumed = tuple(n for n in releases if before[n] == PAID)
            timings["statistics_s"] = clock() - t

            derived: dict[str, Release] = {}
            if "rating_histogram" in releases:
                shares = rating_shares(releases["rating_histogram"])
                derived = {name: shares[key] for name, key in DERIVED.items()}

            progress("render")
            t = clock()
            env = self.environment(week)
            context: dict[str, object] = {**releases, **derived}
            messages = env.render_messages(self.prompt, context)
            fallback = env.render_fallback(self.prompt, context)
            timings["render_s"] = clock() - t

            progress("redactor")
            t = clock()
            redactor = pending.result() if pending is not None else self._redactor
            assert redactor is not None
            timings["redactor_wait_s"] = clock() - t

            progress("generate")
            t = clock()
            model = self._model if self._model is not None else OfflineWriter(fallback)
            allow = set(messages.figures) | set(fallback.figures) | {week.key, *self.course_names}
            m = self.settings.model
            # The user template declares how readers speak of each figure (terms):
            # the guard matches figures to releases by them.
            declared = env.declaration(f"{self.prompt}/user.{self.settings.lang}.j2")
            guarded = declared.with_terms(context_releases(context))
            # The small-count threshold ("fewer than 5") is public wording, not a figure.
            thresholds = {r.small_threshold for r in guarded.values() if r.small_threshold}
            result = generate(
                messages,
                fallback_text=fallback,
                releases=guarded,
                allowed_constants=thresholds,
                model=model,
                redactor=redactor,
                unsupported=self.settings.guard_unsupported,
                language=self.settings.lang,
                max_attempts=m.max_attempts,
                allow=allow,
                on_model_error="fallback",
            )
            timings["generate_s"] = clock() - t
        finally:
            if pool is not None:
                pool.shutdown(wait=True)

        spent = sum((releases[n].cost for n in fresh), Cost.zero(plan_pool(self.settings).measure))
        return WeeklyReport(
            week=week.key,
            lang=self.settings.lang,
            prompt=self.prompt,
            course_names=self.course_names,
            releases=releases,
            derived=derived,
            fresh=fresh,
            spent=spent,
            budget=self.budget(week),
            generation=result,
            model=getattr(model, "model", "offline"),
            timings=timings,
            history=self.history(week),
            resumed=resumed,
        )


def context_releases(context: Mapping[str, object]) -> dict[str, Release]:
    """The Releases of a render context, by the names the template saw."""
    return {k: v for k, v in context.items() if isinstance(v, Release)}


def run_weekly(
    settings: Settings,
    week: Window | str,
    *,
    today: dt.date | None = None,
    allow_incomplete: bool = False,
    progress: Progress = _no_progress,
    **options: Any,
) -> WeeklyReport:
    """Run the weekly job for ``week`` with ``settings`` (see :class:`WeeklyJob`).

    Args:
        settings: validated settings.
        week: the ISO week, a :class:`~dpllm.windows.Window` or its exact key
            (``"2026-W47"``); any other spelling is refused.
        today: the current UTC date (``None``: read once, here, from the clock);
            an unfinished week is refused unless ``allow_incomplete``, a future
            one always.
        allow_incomplete: release the current, unfinished week (the releases say so).
        progress: called with each step's name (``statistics``, ``render``, …).
        **options: passed to :class:`WeeklyJob` (``engine``, ``ledger``, ``model``,
            ``redactor``, ``courses``, ``noise``, ``clock``).

    Returns:
        The :class:`WeeklyReport`.

    Raises:
        See :meth:`WeeklyJob.run`.

    Privacy: the plan's cost per user in ``week``, charged once per week; a rerun
    reuses the stored releases and spends nothing.
    """
    window = Window.parse(week)
    if today is None:
        today = utc_today()  # the Python API is an edge: one clock read, here
    window.require_ready(today, allow_incomplete=allow_incomplete)
    with WeeklyJob(settings, today=today, allow_incomplete=allow_incomplete, **options) as job:
        return job.run(window, progress=progress)
