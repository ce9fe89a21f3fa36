"""m-view data for solo-learn: its transforms and datasets, ImageFolder trees for every dataset."""
