"""Pretrain with solo-learn plus mvssl-plugin: python main_pretrain.py --config-name mabt_cifar.yaml"""

from mvssl_plugin.cli.pretrain import main

if __name__ == "__main__":
    main()
