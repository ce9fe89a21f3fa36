"""setup.py shim: pyproject.toml holds all the metadata. This file adds two things:

- ``mvssl_plugin_autoregister.pth`` in site-packages, in the wheel and in editable installs:
  at interpreter start it puts a standard-library-only finder on ``sys.meta_path`` that
  registers the plugin when solo-learn's ``solo.methods`` is first imported (the top-level
  module mvssl_plugin_autoregister.py; ``MVSSL_PLUGIN_AUTOREGISTER=0`` turns it off);
- the recipes, kept once in the tree where solo-learn keeps its own (scripts/pretrain/,
  scripts/linear/, and scripts/solo/ in solo-learn's layout), as the wheel's package data
  ``mvssl_plugin/recipes/``. An editable install reads them from scripts/ directly."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
PTH = HERE / "mvssl_plugin_autoregister.pth"
#: every recipe under it (scripts/<kind>/...) goes to mvssl_plugin/recipes/<kind>/... in the wheel
SCRIPTS = HERE / "scripts"


class BuildPyWithPth(build_py):
    """build_py, plus the .pth at the root of the build (the wheel's site-packages root) and
    the recipes of scripts/ under mvssl_plugin/recipes/."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        build = Path(self.build_lib)
        target = build / PTH.name
        target.write_text(PTH.read_text())
        self._extra_outputs = [str(target)]
        for source in sorted(SCRIPTS.rglob("*.yaml")):
            dest = build / "mvssl_plugin" / "recipes" / source.relative_to(SCRIPTS)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(source.read_bytes())
            self._extra_outputs.append(str(dest))

    def get_outputs(self, *args, **kwargs):
        return super().get_outputs(*args, **kwargs) + getattr(self, "_extra_outputs", [])


cmdclass = {"build_py": BuildPyWithPth}

try:  # editable installs (PEP 660, setuptools >= 64): the .pth beside setuptools' own
    from setuptools.command.editable_wheel import editable_wheel

    class EditableWheelWithPth(editable_wheel):
        """editable_wheel, plus the .pth next to the one setuptools writes for the project."""

        def _select_strategy(self, *args, **kwargs):
            strategy = super()._select_strategy(*args, **kwargs)
            base = type(strategy)

            def call(self, wheel, files, mapping):
                base.__call__(self, wheel, files, mapping)
                wheel.writestr(PTH.name, PTH.read_text())

            strategy.__class__ = type(f"{base.__name__}WithPth", (base,), {"__call__": call})
            return strategy

    cmdclass["editable_wheel"] = EditableWheelWithPth
except ImportError:
    pass

setup(cmdclass=cmdclass)
