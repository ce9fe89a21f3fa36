"""Config checks and defaults, applied before solo-learn sees a Hydra config.

solo-learn validates with bare ``assert`` statements deep inside model construction;
everything here runs first and raises :class:`~mvssl_plugin.errors.ConfigError` naming
the key and the fix. One module per concern: ``values`` (typed reads, predicates),
``augmentations`` (the pipelines), ``views`` (the view count m and solo-learn's crop
counts), ``training`` (optimizer, scheduler, precision, signals, probe), ``hardware``
(accelerator, devices) and ``beta`` (``auto`` orthogonality weights); the data keys
(datasets, formats, paths) are checked by ``data.checks``, next to the ImageFolder-tree
code they need. Method-specific keys are checked by each method's
``add_and_assert_specific_cfg``; this package imports neither methods nor data loaders.
"""

from mvssl_plugin.config.augmentations import check_augmentations
from mvssl_plugin.config.beta import BARLOW_SLOT, SOLO_BETA_SLOTS, VICREG_SLOT, BetaSlot, beta_of, resolve_beta
from mvssl_plugin.config.hardware import adapt_to_hardware, trainer_devices, world_size
from mvssl_plugin.config.training import check_probe_cfg, check_signals, check_training_keys
from mvssl_plugin.config.values import AUTO, open_cfg, select
from mvssl_plugin.config.views import set_crop_counts, views_of, views_to_crops

__all__ = [
    "AUTO",
    "BARLOW_SLOT",
    "SOLO_BETA_SLOTS",
    "VICREG_SLOT",
    "BetaSlot",
    "adapt_to_hardware",
    "beta_of",
    "check_augmentations",
    "check_probe_cfg",
    "check_signals",
    "check_training_keys",
    "open_cfg",
    "resolve_beta",
    "select",
    "set_crop_counts",
    "views_of",
    "views_to_crops",
    "trainer_devices",
    "world_size",
]
