"""The demo's and the tests' stand-ins, not the product: the embedded broker, local Hive services, the record generator, the demo's working directory."""
