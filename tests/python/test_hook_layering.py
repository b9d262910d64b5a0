"""The hook package's layering (issue 54): its modules import each other without a cycle,
no module hides one behind an import inside a function (no `from . import api` below api),
the process state is hook/state.py's one object, the test oracle is not in the product, and
ranking.Ranker has what protocols.Ranker (the handler's interface) names.

Parsed with `ast`, so the checks see the source as written, whatever is imported already."""
import ast
import importlib
import inspect
import pathlib

import pytest

HOOK = pathlib.Path(__file__).resolve().parents[2] / "python" / "torch_diode" / "hook"
PKG = "torch_diode.hook"
MODULES = sorted(p.stem for p in HOOK.glob("*.py"))


def _hook_targets(node: ast.AST, module: str) -> list[str]:
    """The hook modules an Import / ImportFrom node of hook/<module>.py imports."""
    out = []
    if isinstance(node, ast.ImportFrom):
        if node.level == 1:                       # from . import x / from .x import y
            base = node.module
        elif node.level == 0 and node.module and (node.module == PKG or node.module.startswith(PKG + ".")):
            base = node.module[len(PKG) + 1:] or None
        else:
            return out
        if base:
            out.append(base.split(".")[0])
        else:
            out += [a.name for a in node.names]
    elif isinstance(node, ast.Import):
        out += [a.name[len(PKG) + 1:].split(".")[0] for a in node.names if a.name.startswith(PKG + ".")]
    return [t for t in out if t in MODULES and t != module]


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(module: str) -> tuple[set[str], list[tuple[str, int, str]]]:
    """(hook modules imported when hook/<module>.py is imported, [(target, line, function)]
    imported inside a function body). `if TYPE_CHECKING:` blocks are annotations only."""
    tree = ast.parse((HOOK / f"{module}.py").read_text(), f"{module}.py")
    top: set[str] = set()
    inner: list[tuple[str, int, str]] = []

    def visit(node: ast.AST, func: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                for c in child.orelse:
                    visit_one(c, func)
                continue
            visit_one(child, func)

    def visit_one(child: ast.AST, func: str | None) -> None:
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            for t in _hook_targets(child, module):
                if func is None:
                    top.add(t)
                else:
                    inner.append((t, child.lineno, func))
        name = func
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            name = getattr(child, "name", "<lambda>")
        visit(child, name)

    visit(tree, None)
    return top, inner


GRAPH = {m: _imports(m)[0] for m in MODULES}


def _reaches(src: str, dst: str) -> list[str] | None:
    """A path of module-level imports from src to dst, or None."""
    stack, seen = [[src]], {src}
    while stack:
        path = stack.pop()
        for nxt in sorted(GRAPH.get(path[-1], ())):
            if nxt == dst:
                return path + [nxt]
            if nxt not in seen:
                seen.add(nxt)
                stack.append(path + [nxt])
    return None


def test_the_module_level_imports_of_the_hook_have_no_cycle():
    cycles = [" -> ".join(p) for m in MODULES if (p := _reaches(m, m))]
    assert not cycles, cycles


@pytest.mark.parametrize("module", MODULES)
def test_no_import_inside_a_function_hides_a_cycle(module):
    """An import inside a function that would be a cycle at module level is the circle
    issue 54 removed (api -> choices -> gemv -> api); `api` is imported by nothing below it."""
    _, inner = _imports(module)
    bad = []
    for target, line, func in inner:
        if target == "api" and module not in ("api", "__init__"):
            bad.append(f"{module}.py:{line} {func}(): imports api")
        elif (path := _reaches(target, module)) is not None:
            bad.append(f"{module}.py:{line} {func}(): imports {target}, which imports {' -> '.join(path)}")
    assert not bad, bad


def test_the_layers_import_only_downwards():
    """api > choices > gemv > state (hook/state.py's docstring); the state is below them all."""
    layers = ["api", "choices", "gemv", "state"]
    for i, upper in enumerate(layers):
        for lower in layers[i + 1:]:
            assert _reaches(lower, upper) is None, (lower, upper, _reaches(lower, upper))
    for leaf in ("ranking", "stats", "detect", "zero_config", "protocols"):
        assert not ({"api", "choices", "gemv", "state"} & (GRAPH[leaf] | {
            m for m in MODULES if _reaches(leaf, m)})), leaf


def test_the_process_state_is_one_object():
    """The mutable globals issue 54 moved into state.PROCESS are gone from their old modules."""
    from torch_diode.hook import api, choices, gemv, state, zero_config  # noqa: F401
    gone = {api: ("_stats", "_options", "_registered", "_state", "_install", "_hw_cache", "_rebuilt",
                  "_warned", "_lock"),
            gemv: ("_planned", "_tables", "_tables_lock"),
            choices: ("_CLASS_CACHE",)}
    left = [f"{m.__name__}.{n}" for m, names in gone.items() for n in names if hasattr(m, n)]
    assert not left, left
    p = state.process()
    assert p is state.PROCESS and state.active_state() is p.active
    assert state.options() is p.options and state.stats() is p.stats
    assert api.get_detected_hardware() == state.detected_hardware()
    assert api.active_state is state.active_state and api.current_state is choices.current_state


def test_the_test_oracle_is_not_in_the_product():
    from torch_diode.hook import ranking
    assert not hasattr(ranking, "ReferenceRanker")
    assert "ReferenceRanker" not in (HOOK / "ranking.py").read_text().split('"""', 2)[2]


def test_ranking_ranker_implements_the_handler_protocol(tmp_path):
    from test_hook_model import write_model_dir
    from torch_diode.hook import protocols, ranking
    from torch_diode.model import load_model_dir

    members = [n for n in vars(protocols.Ranker) if not n.startswith("_")]
    members += list(getattr(protocols.Ranker, "__annotations__", {}))
    assert {"model", "spec", "rank_keys", "rank_ktcs", "member_gaps"} <= set(members)
    ranker = ranking.Ranker(load_model_dir(write_model_dir(str(tmp_path / "m"))))
    for name in members:
        assert hasattr(ranker, name), name
        proto = getattr(protocols.Ranker, name, None)
        if callable(proto):
            assert inspect.getdoc(proto), name   # each method says what it returns
            want = list(inspect.signature(proto).parameters)
            assert list(inspect.signature(getattr(ranking.Ranker, name)).parameters) == want, name
    assert importlib.import_module("torch_diode.hook.choices").HookState.__init__.__annotations__["ranker"] \
        == "Ranker | None"
