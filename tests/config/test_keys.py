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
