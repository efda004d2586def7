"""export/torch_bin.py: read a PyTorch checkpoint (pytorch_model.bin) without torch and without trusting it.

torch.save writes a zip: <prefix>/data.pkl is a pickle of the state dict whose tensors refer to storages
by "persistent id"; each storage's raw bytes are the entry <prefix>/data/<key>.

Plain pickle.load on such a file would import and call whatever the file names (a pickle can say
"call os.system('...')"). So we unpickle with find_class overridden: the few globals a state dict needs map
to small stand-ins defined here, and any other global is refused by name before anything is imported.
Storages are never read during unpickling; a tensor is only a description (storage entry, dtype, offset,
shape) and its bytes are streamed from the zip later, one tensor at a time.

Public: open_torch_bin(path) -> TorchBin with .tensors {name: TensorRef}; TorchBin.read(name) -> bytes;
TorchBinError for every problem.
"""
import collections
import pickle
import zipfile

# Storage classes torch.save names, and the safetensors dtype of their elements.
STORAGE_DTYPES = {
    "FloatStorage": ("F32", 4),
    "HalfStorage": ("F16", 2),
    "BFloat16Storage": ("BF16", 2),
}


class TorchBinError(Exception):
    pass


class StorageType:
    """Stand-in for torch.FloatStorage & co.: only records the element type."""

    def __init__(self, name):
        self.dtype, self.itemsize = STORAGE_DTYPES[name]


class StorageRef:
    """A storage as the pickle's persistent id describes it: which zip entry, how many elements."""

    def __init__(self, stype, key, numel):
        self.dtype, self.itemsize = stype.dtype, stype.itemsize
        self.key = key
        self.numel = numel


class TensorRef:
    """A tensor view of a storage: [offset, offset + numel) elements, row-major."""

    def __init__(self, storage, offset, shape):
        self.storage = storage
        self.offset = offset
        self.shape = shape
        self.dtype = storage.dtype
        numel = 1
        for d in shape:
            numel *= d
        self.numel = numel
        self.nbytes = numel * storage.itemsize


def _contiguous_strides(shape):
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def _int_tuple(value, what):
    if not isinstance(value, tuple) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                               for v in value):
        raise TorchBinError("%s is not a tuple of non-negative ints" % what)
    return value


def _rebuild_tensor(storage, storage_offset, size, stride, *_ignored):
    """Stand-in for torch._utils._rebuild_tensor(_v2): accepts only a dense row-major view of a storage."""
    if not isinstance(storage, StorageRef):
        raise TorchBinError("tensor built from something that is not a storage")
    if not isinstance(storage_offset, int) or storage_offset < 0:
        raise TorchBinError("bad storage offset %r" % (storage_offset,))
    shape = _int_tuple(size, "tensor size")
    stride = _int_tuple(stride, "tensor stride")
    # Dimensions of size 1 may carry any stride; compare the others only.
    want = _contiguous_strides(shape)
    if any(s != w for s, w, d in zip(stride, want, shape) if d != 1) or len(stride) != len(shape):
        raise TorchBinError("tensor with strides %r for shape %r is not contiguous (unsupported)"
                            % (stride, shape))
    tensor = TensorRef(storage, storage_offset, shape)
    if storage_offset + tensor.numel > storage.numel:
        raise TorchBinError("tensor runs past the end of storage %s" % storage.key)
    return tensor


def _rebuild_parameter(data, requires_grad, backward_hooks, *_ignored):
    """Stand-in for torch._utils._rebuild_parameter: a Parameter is just its tensor here."""
    return data


# The allow-list, with torch.{Float,Half,BFloat16}Storage (STORAGE_DTYPES):
# (module, name) -> what the pickle gets instead of the real object.
ALLOWED_GLOBALS = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("collections", "OrderedDict"): collections.OrderedDict,
}


class SafeUnpickler(pickle.Unpickler):
    """Unpickler that resolves globals only through ALLOWED_GLOBALS and never imports anything."""

    def __init__(self, file, storage_entries):
        super().__init__(file)
        self.storage_entries = storage_entries
        self.storages = {}

    def find_class(self, module, name):
        if module == "torch" and name in STORAGE_DTYPES:
            return StorageType(name)   # a fresh one: nothing the pickle does to it outlives this file
        try:
            return ALLOWED_GLOBALS[(module, name)]
        except (KeyError, TypeError):
            raise TorchBinError("refusing pickle global %s.%s (not on the allow-list of a state dict)"
                                % (module, name)) from None

    def persistent_load(self, pid):
        # torch.save writes ('storage', storage_type, key, location, numel).
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise TorchBinError("unsupported persistent id %r" % (pid,))
        _, stype, key, _location, numel = pid
        if not isinstance(stype, StorageType) or not isinstance(key, str) or not isinstance(numel, int):
            raise TorchBinError("malformed storage reference %r" % (pid,))
        if key not in self.storage_entries:
            raise TorchBinError("storage %s has no data entry in the archive" % key)
        if key not in self.storages:
            entry_size = self.storage_entries[key].file_size
            if numel < 0 or numel * stype.itemsize > entry_size:
                raise TorchBinError("storage %s: %d elements but %d bytes of data" % (key, numel, entry_size))
            self.storages[key] = StorageRef(stype, key, numel)
        return self.storages[key]


class TorchBin:
    """An opened pytorch_model.bin: tensor descriptions, and their bytes on demand."""

    def __init__(self, path):
        self.path = path
        try:
            self.zip = zipfile.ZipFile(path)
        except zipfile.BadZipFile:
            raise TorchBinError("not a zip archive (the legacy pre-1.6 torch format is not supported)") from None
        pkl = [i for i in self.zip.infolist() if i.filename.endswith("data.pkl")]
        if len(pkl) != 1:
            raise TorchBinError("expected one data.pkl in the archive, found %d" % len(pkl))
        self.prefix = pkl[0].filename[: -len("data.pkl")]
        self._check_byteorder()
        entries = {i.filename[len(self.prefix) + 5:]: i for i in self.zip.infolist()
                   if i.filename.startswith(self.prefix + "data/")}
        with self.zip.open(pkl[0]) as f:
            try:
                state = SafeUnpickler(f, entries).load()
            except TorchBinError:
                raise
            except Exception as e:  # a malformed pickle: name the problem, never the traceback
                raise TorchBinError("cannot read data.pkl: %s" % e) from None
        self.entries = entries
        self.tensors = self._tensors_of(state)

    def _check_byteorder(self):
        name = self.prefix + "byteorder"
        if name in self.zip.namelist() and self.zip.read(name).strip() != b"little":
            raise TorchBinError("big-endian checkpoint (unsupported)")

    @staticmethod
    def _tensors_of(state):
        if not isinstance(state, dict):
            raise TorchBinError("data.pkl holds a %s, not a state dict" % type(state).__name__)
        tensors = {}
        for name, value in state.items():
            if not isinstance(name, str) or not isinstance(value, TensorRef):
                raise TorchBinError("state dict entry %r is not a tensor" % (name,))
            tensors[name] = value
        return tensors

    def read(self, name):
        """Raw little-endian bytes of one tensor."""
        t = self.tensors[name]
        start = t.offset * t.storage.itemsize
        with self.zip.open(self.entries[t.storage.key]) as f:
            f.seek(start)
            data = f.read(t.nbytes)
        if len(data) != t.nbytes:
            raise TorchBinError("%s: storage data is short" % name)
        return data

    def close(self):
        self.zip.close()


def open_torch_bin(path):
    try:
        return TorchBin(path)
    except TorchBinError as e:
        raise TorchBinError("%s: %s" % (path, e)) from None
