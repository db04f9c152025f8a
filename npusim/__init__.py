"""npusim: a cycle-approximate, bit-accurate simulator of Huawei Ascend AI Cores."""
__version__ = "0.1.0"
