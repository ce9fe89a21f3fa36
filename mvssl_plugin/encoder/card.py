"""The model card (``README.md``) of an exported encoder, in the Hugging Face layout: a YAML
metadata block, then how to load it, how it was trained and what it scored. Pure: config in,
text out."""

from __future__ import annotations

import json
from typing import Any, Dict, List

from mvssl_plugin.lr_ramps import ramp_phrases

CITATION = """@inproceedings{agrawal2024harnessing,
  title     = {Harnessing small projectors and multiple views for efficient vision pretraining},
  author    = {Agrawal, Kumar Krishna and Ghosh, Arna and Sodhani, Shagun and Oberman, Adam and Richards, Blake},
  booktitle = {Advances in Neural Information Processing Systems},
  volume    = {37},
  year      = {2024}
}"""


def _standard_load(arch: Dict[str, Any]) -> List[str]:
    """How torchvision's own model takes the weights, where the architecture is a standard one."""
    if arch["name"] == "narrow_resnet18":
        width, first = arch["width"], arch.get("first_stage_width")
        widths = f"{width} x (1, 2, 4, 8)" if first is None else f"{first}, then {width} x (2, 4, 8)"
        wider = "" if first is None else f", first_stage_width={first}"
        return [
            f"A ResNet-18 of base width {width} is not one of torchvision's or timm's models (their",
            "BasicBlock ResNets are 64 wide); the network is torchvision's `BasicBlock` stacked at widths",
            f"{widths}: `mvssl_plugin.backbones.NarrowResNet18(width={width}, "
            f"small_input={arch['cifar_stem']}{wider})`",
            "loads `model.safetensors` with `strict=True`; its module needs torch and torchvision only.",
        ]
    lines = [
        "The weights are torchvision's layout, without `fc`:",
        "",
        "```python",
        "import torch, torchvision",
        "from safetensors.torch import load_file",
        "",
        f"model = torchvision.models.{arch['name']}()",
        "model.fc = torch.nn.Identity()",
    ]
    if arch["cifar_stem"]:
        lines += [
            "# the CIFAR stem solo-learn trains with: 3x3 stride-1 convolution (padding 2), no max-pool",
            "model.conv1 = torch.nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=2, bias=False)",
            "model.maxpool = torch.nn.Identity()",
        ]
    lines += ['model.load_state_dict(load_file("model.safetensors"), strict=True)', "```"]
    return lines


def model_card(config: Dict[str, Any]) -> str:
    arch, pre, train = config["architecture"], config["preprocessing"], config["training"]
    scores = config["accuracy"]
    meta = [
        "---",
        "library_name: pytorch",
        "license: mit",
        "pipeline_tag: image-feature-extraction",
        "tags:",
        "- self-supervised-learning",
        f"- {train['method']}",
        "- solo-learn",
        "- mvssl-plugin",
        "datasets:",
        f"- {train['dataset']}",
        "---",
    ]
    title = f"# {train['method']} {arch['name']} (width {arch['width']}) on {train['dataset']}"
    body = [
        "",
        title,
        "",
        f"A self-supervised image encoder: the backbone of a `{train['method']}` pretraining run of",
        "mvssl-plugin for solo-learn, exported without its projector, classifier or",
        f"optimizer state. It maps a `[B, 3, {pre['crop']}, {pre['crop']}]` image batch to "
        f"`[B, {arch['num_features']}]` features.",
        "",
        "## Load",
        "",
        "```python",
        "from mvssl_plugin import load_encoder  # torch, safetensors and the plugin's backbones only",
        "",
        'encoder = load_encoder(".")  # eval mode; config.json is on it as encoder.mvssl_config',
        "```",
        "",
        *_standard_load(arch),
        "",
        f"Input: resize the shorter side to {pre['resize']}, centre-crop {pre['crop']}, scale to [0, 1], normalise",
        f"with mean {pre['mean']} and std {pre['std']}. Features of a folder of images:",
        "`mvssl-embed . IMAGES --out features.npz`.",
        "",
        "## Training",
        "",
        f"- method `{train['method']}`, {train['views']} views per image"
        + (
            f" (each image trained on its {train['views_trained']} hardest)"
            if train.get("views_trained", train["views"]) != train["views"]
            else ""
        )
        + ", projector output d = "
        f"{train['proj_output_dim']}, orthogonality weight beta = {train['beta']}"
        + (f" ({train['beta_rule']})" if train.get("beta_rule") else ""),
        f"- {train['dataset']}, data fraction {train['data_fraction']}; {train['epochs_trained']} of "
        f"{train['max_epochs']} epochs, {train['steps']} steps, {train['views_seen']} views seen",
        f"- optimizer {json.dumps(train['optimizer'])}, scheduler {train['scheduler']}"
        + "".join(
            f" (lr {phrase})"
            for phrase in ramp_phrases(
                train.get("lr_warmup_minutes") or 0,
                train.get("lr_tail_epochs") or 0,
                train.get("lr_tail_minutes") or 0,
                train.get("lr_cycle_minutes") or 0,
            )
        )
        + f", precision {train['precision']}",
        f"- trained with mvssl-plugin {train['plugin_version'] or '(version not recorded)'}"
        + (f" at {train['plugin_commit']}" if train["plugin_commit"] else ""),
    ]
    body += [f"- command: `{command}`" for command in train["commands"]]
    body += ["", "## Evaluation", ""]
    if scores:
        body += ["| measure | top-1 (%) | protocol |", "|---|---|---|"]
        body += [f"| {s['metric']} | {s['top1']} | {s['protocol']} |" for s in scores]
    else:
        body.append("No accuracy was measured on this run before export (`mvssl-knn`, `mvssl-linear`).")
    body += [
        "",
        "## Citation",
        "",
        "The method is from Agrawal, Ghosh, Sodhani, Oberman and Richards (NeurIPS 2024; the first two",
        "authors contributed equally):",
        "",
        "```bibtex",
        CITATION,
        "```",
        "",
    ]
    return "\n".join(meta + body)
