"""The training recipe and the engine settings are declared once (issue 38).

Every field of the recipe (:data:`vistabench.learners.recipe.RECIPE`, made into the value
:class:`~vistabench.learners.recipe.Recipe`) and of the engine (:data:`vistabench.engine.ENGINE`,
the value :class:`~vistabench.engine.Engine`) has one declaration. The protocol configs get them
flat from :func:`~vistabench.learners.recipe.training_recipe` / :func:`~vistabench.engine.engine_fields`
(made classes: no field written in a class body), and everything else takes the value
(``recipe: Recipe``, ``engine: Engine``). This test reads every module of ``src/vistabench`` (ast:
no imports, so optional dependencies do not matter) and fails on a restatement:

- a class body (dataclass, options class, NamedTuple, ...) declaring a field named like a recipe or
  engine field, of that field's kind of value (``lr: float``, ``model: str``, ``engine: str``);
- a public function (or ``__init__``) whose signature takes two or more recipe/engine fields of their
  kind: the recipe taken apart, field by field.

Names that coincide with a field but hold another kind of value are not restatements, and the rule
tells them apart by the annotation: ``model: nn.Module`` (a network, not the backbone's name),
``device: torch.device`` (a resolved device), ``precision: np.ndarray`` (a precision curve),
``engine: Engine`` (the value itself). A function taking one such value to act on it
(``resolve_device(device)``, ``check_model_name(model)``) is an operation on one value, not the recipe.

:data:`PENDING` lists, each with its reason, the restatements not yet replaced by the value; the
second test fails when one of them is gone (so the list only shrinks) and the first when a new one
appears.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path

from vistabench.engine import ENGINE
from vistabench.learners.recipe import RECIPE

SRC = Path(__file__).resolve().parents[2] / "src" / "vistabench"

#: each not-yet-migrated restatement -> why it is still there (issue 38 migrates them one by one)
PENDING: dict[str, str] = {
    # stages and settings that carry their own values of recipe fields, and why each is not a Recipe yet
    # (none left: FR's own training options carry the authors' _fr names, the small-data preset's reader
    # is folder_reader)
}

#: results, not settings: what a run reports having used (allowed for good)
RESULTS: dict[str, str] = {
    "tuning/settings.py:TuneResult": "a search result records which engine ran it",
    "tuning/settings.py:TrialRecord": "a trial's record: the epochs it ran before it stopped",
    "learners/train_config.py:TrainResult": "a fit's result: the device it ran on, resolved",
}


def _base(tp: typing.Any) -> set[str]:
    """The annotation spellings of a declared type (its kind of value), Optional and Literal unwrapped."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union:
        return set().union(*(_base(a) for a in args if a is not type(None)))
    if origin is typing.Literal:
        return {type(args[0]).__name__}
    if origin is tuple:
        return {"tuple"}
    return {getattr(tp, "__name__", str(tp))}


def _declared_kinds() -> dict[str, set[str]]:
    kinds = {name: _base(decl.type) for name, decl in RECIPE.items()}
    kinds.update({name: _base(tp) for name, (tp, _kw) in ENGINE.items()})
    return kinds


def _kinds_of(annotation: ast.expr | None) -> set[str]:
    """The plain type names an annotation spells (``str | None`` -> {str}; ``Literal['a']`` -> {str})."""
    if annotation is None:
        return set()
    text = ast.unparse(annotation)
    if text.startswith(("Literal[", "typing.Literal[")):
        return {"str"} if "'" in text or '"' in text else {"int"}
    out = set()
    for part in text.replace("Optional[", "").replace("]", " ").replace("[", " ").replace("|", " ").replace(
            ",", " ").split():
        out.add(part.split(".")[-1])
    return out - {"None", "..."}


def _restates(name: str, annotation: ast.expr | None, kinds: dict[str, set[str]]) -> bool:
    if name not in kinds:
        return False
    spelt = _kinds_of(annotation)
    if "tuple" in kinds[name]:
        return "tuple" in spelt
    return bool(spelt & kinds[name]) and not spelt - kinds[name] - {"int", "float", "bool", "str"}


def restatements(root: Path = SRC) -> dict[str, list[str]]:
    """``module:Class`` / ``module:function()`` -> the recipe/engine fields it declares again."""
    kinds = _declared_kinds()
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                names = [st.target.id for st in node.body if isinstance(st, ast.AnnAssign)
                         and isinstance(st.target, ast.Name) and _restates(st.target.id, st.annotation, kinds)]
                if names:
                    found[f"{where}:{node.name}"] = names
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    not node.name.startswith("_") or node.name == "__init__"):
                a = node.args
                names = [arg.arg for arg in a.posonlyargs + a.args + a.kwonlyargs
                         if _restates(arg.arg, arg.annotation, kinds)]
                if len(names) >= 2:
                    found.setdefault(f"{where}:{node.name}()", []).extend(names)
    return found


def test_no_recipe_or_engine_field_is_declared_outside_its_declaration():
    new = {k: v for k, v in restatements().items() if k not in PENDING and k not in RESULTS}
    assert not new, ("recipe / engine fields declared again (take a Recipe / an Engine instead): "
                     + "; ".join(f"{k}: {', '.join(v)}" for k, v in new.items()))


def test_the_pending_list_only_shrinks():
    gone = sorted((set(PENDING) | set(RESULTS)) - set(restatements()))
    assert not gone, f"no longer restating the recipe: remove from PENDING: {gone}"


def test_the_check_catches_a_restatement_and_lets_other_kinds_of_value_pass(tmp_path):
    (tmp_path / "mod.py").write_text(
        "from dataclasses import dataclass\n"
        "@dataclass\nclass Plan:\n    lr: float = 0.1\n    model: str | None = None\n    seed: int = 0\n"
        "@dataclass\nclass Holder:\n    model: nn.Module\n    engine: Engine\n    precision: np.ndarray\n"
        "def fit(x, *, epochs: int = 1, batch_size: int = 2): ...\n"
        "def resolve(device: str): ...\n"
        "def run(jobs, *, engine: str = 'local', max_parallel: int | None = None): ...\n"
        "def _private(lr: float, epochs: int): ...\n")
    found = restatements(tmp_path)
    assert found == {"mod.py:Plan": ["lr", "model"], "mod.py:fit()": ["epochs", "batch_size"],
                     "mod.py:run()": ["engine", "max_parallel"]}


def test_the_values_are_made_from_the_declarations():
    from vistabench.engine import Engine
    from vistabench.learners.recipe import Recipe

    assert [f for f in Recipe.__dataclass_fields__] == list(RECIPE)
    assert [f for f in Engine.__dataclass_fields__] == list(ENGINE)
    assert Recipe.field_info("batch_size").low == RECIPE["batch_size"].kwargs["low"]
