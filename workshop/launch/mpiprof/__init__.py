"""C sources of the workshop's MPI profiler (see workshop.launch.profiler); shipped as data."""
