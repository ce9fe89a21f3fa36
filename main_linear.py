"""Linear evaluation with solo-learn plus mvssl-plugin:

python main_linear.py --config-name linear_cifar.yaml pretrained_feature_extractor=trained_models/mabt/<run id>
"""

from mvssl_plugin.cli.linear import main

if __name__ == "__main__":
    main()
