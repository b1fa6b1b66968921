"""The ``gpucon`` command line: one module per subcommand, dispatched by ``gpucon.commands.cli``."""
