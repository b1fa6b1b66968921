"""Recording the fleet to a file and reading it back: the codec, frames, the SQLite store,
the recorder thread, restoring history and replaying (docs/recording.md)."""
