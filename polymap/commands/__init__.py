"""One module per subcommand, each ``main(args) -> int`` over the Python API."""
