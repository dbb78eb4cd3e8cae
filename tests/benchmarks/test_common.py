"""benchmarks/common.py: a result file names a path without the folders of the machine it ran on."""

from __future__ import annotations

import tempfile
from pathlib import Path

from tests.helpers import REPO, benchmark_module

common = benchmark_module("common")


def test_paths_in_the_project_and_beside_it_are_relative_to_it() -> None:
    assert common.portable_path(REPO / "data" / "sample" / "corpus") == "data/sample/corpus"
    assert common.portable_path(REPO) == "."
    shared = REPO.parent / "shared" / "data" / "codebase" / "codebase_chunks.json"
    assert common.portable_path(shared) == "../shared/data/codebase/codebase_chunks.json"


def test_an_installed_package_is_named_from_its_site_packages() -> None:
    tree = REPO / ".venv" / "lib" / "python3.11" / "site-packages" / "torch" / "_inductor"
    assert common.portable_path(tree) == "site-packages/torch/_inductor"
    assert common.portable_path("/usr/lib/python3/dist-packages/rich") == "site-packages/rich"
    assert common.portable_path(common.site_packages() / "torch") == "site-packages/torch"


def test_generated_and_temporary_files_are_named_by_what_they_are() -> None:
    temporary = Path(tempfile.gettempdir())
    corpus = temporary / "ctxrag-scale-synthetic-x1y2" / "synthetic-100000.json"
    assert common.portable_path(corpus, generated=True) == "generated: synthetic-100000.json"
    assert common.portable_path(temporary / "ctxrag-head") == "$TMPDIR/ctxrag-head"


def test_a_path_elsewhere_keeps_only_its_name() -> None:
    assert common.portable_path("/srv/corpora/big.json") in {".../big.json", "../../srv/corpora/big.json"}


def test_text_has_every_absolute_path_named_so() -> None:
    temporary = Path(tempfile.gettempdir())
    command = f"--code {temporary / 'head'} --out={temporary / 'out'} --sizes tree"
    assert common.portable_text(command) == "--code $TMPDIR/head --out=$TMPDIR/out --sizes tree"
    trace = f'File "{REPO / "tasks" / "embedding" / "embed.py"}", line 3; ../shared/data and site-packages/torch stay; 5 MB/s'
    assert (
        common.portable_text(trace)
        == 'File "tasks/embedding/embed.py", line 3; ../shared/data and site-packages/torch stay; 5 MB/s'
    )
