"""The bridge to solo-learn's own scripts, in one file: the plugin registered and its view
count kept, with no import in those scripts.

The installed ``mvssl_plugin_autoregister.pth`` (site-packages, from the wheel or an
editable install; see setup.py) imports this top-level module at interpreter start and
calls :func:`install`. It sits outside the ``mvssl_plugin`` package so that starting Python
imports neither torch, solo-learn nor the package itself (a checkout on ``sys.path`` then
still provides its own ``mvssl_plugin``); at start it is standard-library only and does
nothing but put a finder on ``sys.meta_path`` that watches three module names, whose loaders
it wraps so that a hook runs once the module is loaded:

* ``solo.methods`` (solo-learn's ``main_pretrain.py``, ``main_linear.py``, ``main_knn.py``,
  ``main_umap.py``, its tests): :func:`mvssl_plugin.registry.register` puts the plugin's
  methods (``mabt``, ``mavicreg``, ``mmcr``) and backbones in solo-learn's tables.
* ``solo.args.linear``: its ``parse_cfg`` is wrapped (:func:`wrap_linear_parse_cfg`): the
  plugin's backbones take their width and stem from the pretraining run they load.
* ``solo.args.pretrain``: its ``parse_cfg`` is wrapped (:func:`wrap_parse_cfg`), for the
  plugin's methods only: ``data.num_views`` becomes the pipelines' crops and the crop
  counts are hidden past ``main_pretrain.py``'s two-crop assert
  (:mod:`mvssl_plugin.config.views`; the method's config check restores them). The
  plugin's own entry points check views themselves and call the parser unwrapped
  (``inspect.unwrap``).

The one deferral: the plugin's methods package imports solo-learn while its own modules are
half imported, and registering then would import them again. It runs its imports inside
:func:`hooks_held`, and the hooks fired meanwhile run when it is done.

Programs that never import solo-learn see one extra finder that answers None.
``MVSSL_PLUGIN_AUTOREGISTER=0`` turns it all off. A hook that fails prints one line and
never breaks the program that imported solo-learn.
"""

import contextlib
import functools
import os
import sys

ENV = "MVSSL_PLUGIN_AUTOREGISTER"
WATCHED = ("solo.methods", "solo.args.pretrain", "solo.args.linear")
_held = [0]  # depth of hooks_held() blocks
_pending = []  # (name, module) of hooks fired inside them


def enabled():
    """Off when the environment variable says 0/false/no/off."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


class _Loader:
    """Runs the module's own loader, then the plugin's hook; the module keeps its own loader."""

    def __init__(self, loader, name):
        self.loader, self.name = loader, name

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        spec = getattr(module, "__spec__", None)
        if spec is not None:
            spec.loader = self.loader
        module.__loader__ = self.loader
        self.loader.exec_module(module)
        run_hook(self.name, module)


class SoloFinder:
    """A meta-path finder that only wraps the loader of :data:`WATCHED` modules."""

    def find_spec(self, name, path=None, target=None):
        if name not in WATCHED or not enabled():
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is None or not hasattr(spec.loader, "exec_module"):
                    return None
                spec.loader = _Loader(spec.loader, name)
                return spec
        return None


@contextlib.contextmanager
def hooks_held():
    """Holds the hooks fired inside the block and runs them at its end (see the module doc)."""
    _held[0] += 1
    try:
        yield
    finally:
        _held[0] -= 1
        while not _held[0] and _pending:
            _react(*_pending.pop(0))


def run_hook(name, module):
    """The plugin's reaction to ``name`` having been imported; held inside :func:`hooks_held`."""
    if _held[0]:
        _pending.append((name, module))
    else:
        _react(name, module)


def _react(name, module):
    try:
        if name == "solo.methods":
            from mvssl_plugin.registry import register  # local: this module is standard library at import

            register()
        elif name == "solo.args.pretrain" and not hasattr(module.parse_cfg, "__wrapped__"):
            module.parse_cfg = wrap_parse_cfg(module.parse_cfg)
        elif name == "solo.args.linear" and not hasattr(module.parse_cfg, "__wrapped__"):
            module.parse_cfg = wrap_linear_parse_cfg(module.parse_cfg)
    except Exception as err:  # never break the program that imported solo-learn
        print(
            f"mvssl-plugin: not registered into solo-learn ({type(err).__name__}: {err}); {ENV}=0 turns this hook off",
            file=sys.stderr,
        )


def wrap_parse_cfg(parse_cfg):
    """solo-learn's ``parse_cfg``, plus the view count of the plugin's methods (see the module
    doc); other methods' configs go through untouched."""

    @functools.wraps(parse_cfg)
    def wrapped(cfg):
        # local: this module is standard library at import (Python's start-up reads it through the .pth)
        from mvssl_plugin.config.views import check_views_given_once, hide_crop_counts, hydra_overrides, views_to_crops
        from mvssl_plugin.registry import PLUGIN_METHODS

        ours = cfg.get("method") in PLUGIN_METHODS
        if ours:
            check_views_given_once(cfg, hydra_overrides())
            views_to_crops(cfg)
        cfg = parse_cfg(cfg)
        if ours:
            hide_crop_counts(cfg)
        return cfg

    return wrapped


def wrap_linear_parse_cfg(parse_cfg):
    """solo-learn's linear ``parse_cfg``, plus the plugin's backbones taking their width and stem
    from the pretraining run they load (:mod:`mvssl_plugin.config.pretrained`); a backbone that
    cannot be matched stops the launch in one line, exit status 2, naming the key to set."""

    @functools.wraps(parse_cfg)
    def wrapped(cfg):
        # local: this module is standard library at import (Python's start-up reads it through the .pth)
        from mvssl_plugin.config.pretrained import backbone_from_run
        from mvssl_plugin.errors import ConfigError
        from mvssl_plugin.registry import PLUGIN_BACKBONES

        try:
            notices = backbone_from_run(cfg, tuple(PLUGIN_BACKBONES))
        except ConfigError as err:
            print(f"mvssl config error: {err}", file=sys.stderr, flush=True)
            raise SystemExit(2) from None
        for notice in notices:
            print(f"mvssl: {notice}", flush=True)
        return parse_cfg(cfg)

    return wrapped


def install():
    """Puts the finder first on ``sys.meta_path`` (once)."""
    if enabled() and not any(isinstance(f, SoloFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, SoloFinder())
