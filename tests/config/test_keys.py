"""Unknown keys (config/keys.py): the shipped recipes hold none, every key the plugin reads is
known, typos warn with the nearest key and strict_keys stops."""

from __future__ import annotations

import pytest
from helpers import REPO, assert_one_line, pretrain_args, run_entry

from mvssl_plugin.cli.config_name import compose_recipe, list_recipes
from mvssl_plugin.config.keys import PLUGIN_KEYS, check_keys, is_known, keys_in_source, known_keys

pytestmark = pytest.mark.usefixtures("one_thread")


def test_shipped_recipes_hold_no_unknown_key():
    from mvssl_plugin.registry import register

    methods = register()
    for kind in ("pretrain", "linear"):
        for recipe in list_recipes(kind):
            cfg = compose_recipe(recipe, kind)
            method = methods.get(cfg.get("method")) if kind == "pretrain" else None
            assert check_keys(cfg, kind, method) == [], recipe


def test_every_key_the_plugin_reads_is_known():
    """Keys the plugin reads by name (``select(cfg, "a.b")``, ``cfg.a.b``) are known, so no
    optional key of ours is ever reported: add a new one to PLUGIN_KEYS."""
    from mvssl_plugin.registry import register

    methods = register()
    known = known_keys("pretrain", methods["mabt"]) | known_keys("pretrain", methods["mavicreg"]) | known_keys("linear")
    read = set()
    for path in (REPO / "mvssl_plugin").rglob("*.py"):
        read |= keys_in_source(path.read_text())
    assert sorted(key for key in read if not is_known(key, known)) == []
    assert set(PLUGIN_KEYS) <= known


@pytest.mark.slow
def test_typos_warn_with_the_nearest_key_and_strict_keys_stops(tiny_cifar, tmp_path):
    from mvssl_plugin.registry import register

    cfg = compose_recipe(
        "mabt_cifar.yaml", "pretrain", ["++method_kwargs.lamda=0.1", "++optimizer.lr_=1", "+foo.bar=2"]
    )
    warnings = check_keys(cfg, "pretrain", register()["mabt"])
    assert [w.split(" is read")[0] for w in warnings] == [
        "warning: foo",
        "warning: method_kwargs.lamda (did you mean method_kwargs.lamb?)",
        "warning: optimizer.lr_ (did you mean optimizer.lr?)",
    ]
    # solo-learn's own methods read their kwargs their own way: those are not checked
    cfg = compose_recipe("mabt_cifar.yaml", "pretrain", ["method=barlow_twins", "+method_kwargs.anything=1"])
    assert check_keys(cfg, "pretrain", register()["barlow_twins"], plugin_method=False) == []
    args = pretrain_args(tiny_cifar, tmp_path / "runs", **{"++optimizer.lr_": 1, "+strict_keys": True})
    assert_one_line(
        run_entry("main_pretrain.py", args, tmp_path),
        2,
        "mvssl config error: optimizer.lr_ (did you mean optimizer.lr?)",
    )


def test_the_pin_is_what_the_scan_finds_in_the_pinned_solo_learn():
    """The suite runs solo-learn at the commit the README pins: the committed list must be its scan."""
    from mvssl_plugin.config.keys import pinned_solo_keys, scan_solo_keys
    from mvssl_plugin.registry import SOLO_COMMIT

    pin = pinned_solo_keys()
    assert pin["commit"] == SOLO_COMMIT
    for kind in ("pretrain", "linear"):
        assert sorted(scan_solo_keys(kind)) == pin[kind], f"solo-learn's keys moved: rewrite solo_keys.json ({kind})"


@pytest.fixture
def solo_source_moved(tmp_path, monkeypatch):
    """solo-learn's read files copied with one key renamed, as a release that moves a key would be."""
    import importlib.util
    from pathlib import Path

    from mvssl_plugin.config import keys

    base = Path(importlib.util.find_spec("solo").origin).parent
    for name in keys.SOLO_FILES["pretrain"]:
        target = tmp_path / "solo" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((base / name).read_text().replace("auto_resume.max_hours", "auto_resume.hours_max"))
    scan = keys.scan_solo_keys
    monkeypatch.setattr(keys, "scan_solo_keys", lambda kind, base=None: scan(kind, base or tmp_path / "solo"))
    keys.solo_keys.cache_clear()
    yield keys
    keys.solo_keys.cache_clear()


def test_a_key_a_solo_learn_release_moved_is_named_with_its_new_name(solo_source_moved):
    keys = solo_source_moved
    assert "auto_resume.hours_max" in keys.solo_keys("pretrain")
    assert keys.dropped_by_solo("pretrain") == {"auto_resume.max_hours"}
    old = compose_recipe("mabt_cifar.yaml", "pretrain", ["+auto_resume.max_hours=2"])
    (warning,) = keys.check_keys(old, "pretrain")
    assert warning.startswith(
        "warning: auto_resume.max_hours (did you mean auto_resume.hours_max?) (solo-learn read it at 9187ea3, "
        "the commit the plugin pins; the installed one does not) is read by neither"
    )
    new = compose_recipe("mabt_cifar.yaml", "pretrain", ["+auto_resume.hours_max=2"])
    assert keys.check_keys(new, "pretrain") == []


def test_without_solo_learns_source_the_pinned_keys_answer(monkeypatch):
    from mvssl_plugin.config import keys

    monkeypatch.setattr(keys, "scan_solo_keys", lambda kind, base=None: frozenset())
    keys.solo_keys.cache_clear()
    try:
        assert (
            keys.solo_keys("linear") == set(keys.pinned_solo_keys()["linear"])
            and keys.dropped_by_solo("linear") == set()
        )
    finally:
        keys.solo_keys.cache_clear()
