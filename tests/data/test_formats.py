"""The data formats' table (data/formats.py): every row's functions resolve, a name without a row
stops with the choices, and what solo-learn is told follows the row."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from mvssl_plugin.data.formats import FORMATS, _resolve, data_format
from mvssl_plugin.data.solo_names import solo_data_format
from mvssl_plugin.errors import ConfigError


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_function_a_row_names_is_there(name):
    row = FORMATS[name]
    for path in filter(None, (row.pretrain_loader, row.val_loader, row.options)):
        assert callable(_resolve(path)), path


def test_a_format_without_a_row_stops_naming_the_rows():
    with pytest.raises(
        ConfigError, match=r"data\.format='tfrecord': choose one of \('image_folder', 'h5', 'dali', 'memory'\)"
    ):
        data_format(OmegaConf.create({"data": {"format": "tfrecord"}}))


def test_unset_is_image_folder_and_solo_learn_lists_folders_for_dali_and_memory():
    assert data_format(OmegaConf.create({"data": {}})).name == "image_folder"
    assert [solo_data_format(name) for name in ("image_folder", "h5", "dali", "memory")] == [
        "image_folder",
        "h5",
        "image_folder",
        "image_folder",
    ]
    assert [name for name, row in FORMATS.items() if row.decoded_once] == ["memory"]
