"""Registers the plugin into solo-learn's own scripts, with no import in them.

The installed ``mvssl_plugin_autoregister.pth`` (site-packages, from the wheel or an
editable install; see setup.py) imports this top-level module at interpreter start and
calls :func:`install`. It sits outside the ``mvssl_plugin`` package so that starting Python
imports neither torch, solo-learn nor the package itself (a checkout on ``sys.path`` then
still provides its own ``mvssl_plugin``); it is standard-library only and does nothing but
put a finder on ``sys.meta_path`` that watches two module names. When a program first imports
``solo.methods`` (solo-learn's ``main_pretrain.py``, ``main_linear.py``, ``main_knn.py``,
``main_umap.py``, its tests), the module is loaded by its own loader and then
:func:`mvssl_plugin.solo_native.on_import` registers ``mabt``, ``mavicreg`` and the
plugin's backbones; when it first imports ``solo.args.pretrain``, its ``parse_cfg`` learns
the plugin's view count. Programs that never import solo-learn see one extra finder that
answers None. ``MVSSL_PLUGIN_AUTOREGISTER=0`` turns it all off.
"""

import os
import sys

ENV = "MVSSL_PLUGIN_AUTOREGISTER"
WATCHED = ("solo.methods", "solo.args.pretrain")
_pending = []  # modules whose hook waits for the plugin's own methods to finish importing


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


def _plugin_importing():
    """True while one of the plugin's method modules is half imported (it imports solo-learn)."""
    for key, module in list(sys.modules.items()):
        if key.startswith("mvssl_plugin.methods") and getattr(
            getattr(module, "__spec__", None), "_initializing", False
        ):
            return True
    return False


def run_hook(name, module):
    """The plugin's reaction to ``name``; deferred while the plugin's methods are half imported."""
    if _plugin_importing():
        _pending.append((name, module))
        return
    _react(name, module)


def _react(name, module):
    try:
        from mvssl_plugin.solo_native import on_import

        on_import(name, module)
    except Exception as err:  # never break the program that imported solo-learn
        print(
            f"mvssl-plugin: not registered into solo-learn ({type(err).__name__}: {err}); {ENV}=0 turns this hook off",
            file=sys.stderr,
        )


def run_pending():
    """Runs the hooks deferred by :func:`run_hook`. The plugin's methods package calls this as
    its last line: every method module is imported by then, though the package itself is still
    initializing, so the hooks run now rather than being deferred again."""
    while _pending:
        _react(*_pending.pop(0))


def install():
    """Puts the finder first on ``sys.meta_path`` (once)."""
    if enabled() and not any(isinstance(f, SoloFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, SoloFinder())
