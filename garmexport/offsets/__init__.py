"""``garmexport offsets``: the committed positions, and markers that make a deployment start at given offsets."""
