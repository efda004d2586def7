"""export/atomic.py: write a file so that it appears whole or not at all.

Every output of export/ (model.safetensors, config.json, tokenizer.bin, a GGUF) goes through
atomic_output: the bytes go to a temp file in the same folder, which is renamed over the target
only when writing succeeded, so an interrupted or failed run never leaves a partial file behind.
Python 3 standard library only."""
import contextlib
import os
import tempfile


@contextlib.contextmanager
def atomic_output(path):
    """Yields a binary file; on success it becomes `path` (mode 0644), on any exception it is
    removed and `path` is left as it was."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o644)      # mkstemp makes it 0600
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
