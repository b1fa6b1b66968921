"""Read-only data sources, one module per system. Each returns Readings and never raises."""
