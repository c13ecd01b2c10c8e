"""What this torch and this machine can do: `fingerprint()` (fingerprint.py) describes the
environment, `capabilities()` (capabilities.py) says per backend and per PyTorch 2.14 feature
whether it is available and, if not, precisely why. Importable without a GPU and without
torch (torch is loaded through accelkit.torch_import)."""
