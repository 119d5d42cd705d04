"""The commit protocol's rules: names, resume, low watermark, markers, flush policy; standard library only, no clock, no I/O."""
