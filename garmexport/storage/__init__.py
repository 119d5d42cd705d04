"""Storage backends behind one small interface (see :mod:`garmexport.storage.base`)."""
