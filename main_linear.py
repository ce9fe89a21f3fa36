"""Linear evaluation of a checkpoint: python main_linear.py --config-name mabt_cifar_linear.yaml pretrained_feature_extractor=..."""

from mvssl_plugin.cli.linear import main

if __name__ == "__main__":
    main()
