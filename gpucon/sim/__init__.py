"""The simulated fleet behind ``gpucon demo`` and the UI tests."""
