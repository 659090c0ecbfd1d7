"""The Arm SME machine (``hwsim.machine("sme", svl=512)``): see ``machine``."""
