"""ImageFolder trees on disk (data/imagefolder.py): classes matched by name, files reached twice kept once."""

from __future__ import annotations

import os

import pytest
from helpers import make_image_folder

from mvssl_plugin.data.imagefolder import first_of_each_file, match_classes, nested_class_folders
from mvssl_plugin.errors import ConfigError

pytestmark = pytest.mark.usefixtures("one_thread")


def test_match_classes_by_name():
    train = ["bird", "cat", "dog"]
    assert match_classes(train, train) == ({"bird": 0, "cat": 1, "dog": 2}, None)
    index, notice = match_classes(train, ["cat", "dog"])
    assert index == {"cat": 1, "dog": 2}  # the training indices, not 0 and 1
    assert notice.startswith("data.val_path has 2 of the 3 classes of data.train_path (none of ['bird'])")
    with pytest.raises(ConfigError) as err:
        match_classes(train, ["bird", "kitten", "puppy"], "--train_data_path", "--val_data_path")
    text = str(err.value)
    assert "--val_data_path: class folder(s) ['kitten', 'puppy'] are not classes of --train_data_path" in text
    assert "(its classes: ['bird', 'cat', 'dog'])" in text and "rename those folders" in text
    many = [f"c{i:03d}" for i in range(100)]
    with pytest.raises(ConfigError) as err:
        match_classes(many, ["zebra"])
    assert "its classes" not in str(err.value)  # a long training list is not printed


def test_files_reached_twice_are_kept_once(tmp_path):
    from mvssl_plugin.data.scan import screen_files

    root = make_image_folder(tmp_path / "train", classes=2, per_class=3)
    (root / "class_0" / "loop").symlink_to(".", target_is_directory=True)
    os.symlink(root / "class_0" / "0000.jpg", root / "class_1" / "linked.jpg")
    assert nested_class_folders(root) == []  # a loop is no sub-folder of images
    files = [
        str(root / "class_0" / "0000.jpg"), str(root / "class_0" / "loop" / "0000.jpg"),
        str(root / "class_0" / "loop" / "loop" / "0000.jpg"), str(root / "class_1" / "0000.jpg"),
        str(root / "class_1" / "linked.jpg"),
    ]  # fmt: skip
    kept, dropped = first_of_each_file(files)
    assert kept == [files[0], files[3]] and dropped == [files[1], files[2], files[4]]
    notices = []
    assert screen_files(files, "data.train_path", skip_bad=False, notify=notices.append) == kept
    (notice,) = notices
    assert notice.startswith("data.train_path: 3 of 5 image paths reach a file already listed")
    assert f"left out under {root / 'class_1'}, {root / 'class_0' / 'loop'} (a symlink loop)" in notice
