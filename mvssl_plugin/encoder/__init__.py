"""The encoder taken out of a run: export (``export``), load without solo-learn (``model``),
embed a folder of images (``embed``) and draw a UMAP (``umap_plot``). ``model`` and ``embed``
need torch, torchvision, safetensors and numpy only."""

from mvssl_plugin.encoder.model import load_encoder

__all__ = ["load_encoder"]
